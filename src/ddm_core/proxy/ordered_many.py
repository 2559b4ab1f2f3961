"""Ordered multi-unit reads merged from their answers' bytes, never decoded
(docs/proxy.md#ordered-reads-merged-undecoded).

A read of several units whose merge only orders its rows — ``ORDER BY`` (its keys selected or added by the
router after the selected columns), with a ``DISTINCT`` over exactly the sorted columns and an ``OFFSET`` /
``LIMIT`` or without — is taken whole off the sockets
(:func:`~ddm_core.proxy.relay_many.take_many`), then the compiled ``ordered`` unit puts the rows in order by
raw keys made from their bytes (``merge_ordered``) and the relay frames the one answer for the client, its
rows converted to binary ones for a prepared statement's client as a concatenation's are.

:func:`key_plan` says how each sorted column's bytes are compared, from the data source's column definition
and the column's collation (the one the decoded merge compares it under, asked of the data source once:
execute/collations.py), or that the read is decoded: a type whose text does not sort as its value does
(DECIMAL, FLOAT, TIME, BIT, JSON, ENUM, SET) or a collation without a raw key. A value outside what its key
can compare (text that is not ASCII, say) sends the read to the decoded merge too, before anything reached
the client: the same rows, in the same order, either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from ddm_core._fast import SELECTED
from ddm_core.errors import DdmError
from ddm_core.merge.spec import MergeSpec, memoized, remember
from ddm_core.proxy.relay import RELAY_STATES, ResultRelay

if TYPE_CHECKING:
    from ddm_core._fast import ordered
    from ddm_core.execute.sent_many import SentMany, SentPart
    from ddm_core.merge.collation import Collation
    from ddm_core.proxy.relay_many import Taken
else:
    ordered = SELECTED.ordered

__all__ = ["merges_raw", "key_plan", "relay_ordered"]

_UNSIGNED, _ENUM, _SET = 0x20, 0x100, 0x800
_BINARY = 63
#: Integer types: TINY, SHORT, LONG, LONGLONG, INT24, YEAR
_INTEGERS = frozenset({1, 2, 3, 8, 9, 13})
#: Types whose text sorts as bytes: TIMESTAMP, DATE, DATETIME, NEWDATE (one column's values have one width)
_DATES = frozenset({7, 10, 12, 14})
#: String types (VARCHAR, the BLOBs, VAR_STRING, STRING): keyed by their collation
_STRINGS = frozenset({15, 249, 250, 251, 252, 253, 254})
#: Collation id -> the key of its order over ASCII (merge/collation.py has their weights)
_COLLATION_KEYS = {
    45: ordered.KEY_PAD_FOLD, 33: ordered.KEY_PAD_FOLD, 8: ordered.KEY_PAD_FOLD,  # general_ci, latin1_swedish_ci
    46: ordered.KEY_PAD, 83: ordered.KEY_PAD, 47: ordered.KEY_PAD,  # utf8mb4_bin, utf8mb3_bin, latin1_bin
    1069: ordered.KEY_ASCII_FOLD, 1057: ordered.KEY_ASCII_FOLD, 1032: ordered.KEY_ASCII_FOLD,  # their NO PAD forms
    1070: ordered.KEY_ASCII, 1107: ordered.KEY_ASCII, 1071: ordered.KEY_ASCII,
}  # fmt: skip

_KEYS = "ordered keys"  # the spec memo's entries of merge_ordered's keys (_keys)
_UNKNOWN = object()


def merges_raw(spec: MergeSpec) -> bool:
    """The merge of ``spec`` only orders rows (module docstring): worked out once per spec (its memo)."""
    return memoized(spec.memo, "merges raw", lambda: _orders_only(spec))


def _orders_only(spec: MergeSpec) -> bool:
    if not spec.order_by or spec.group_by or spec.aggregates or spec.having:
        return False
    columns = [column for column, _ in spec.order_by]
    # DISTINCT: equal rows must come out next to each other, so the sort covers every column
    if not spec.distinct:
        return True
    return not spec.derived and spec.visible is not None and set(columns) == set(range(spec.visible))


def key_plan(spec: MergeSpec, definitions: Sequence[bytes], collations: Sequence[Collation | None] | None
             ) -> list[tuple[int, int, bool]] | None:  # fmt: skip
    """``merge_ordered``'s keys for rows answered with ``definitions`` under ``collations`` (the decoded
    merge's, per column); ``None``: a sorted column has no raw key (module docstring)."""
    keys = []
    width = len(definitions)
    for column, descending in spec.order_by:
        column += width if column < 0 else 0  # SELECT *: the router's sort keys counted from the end
        if not 0 <= column < width:
            return None
        kind = _kind(definitions[column], None if collations is None else collations[column])
        if kind is None:
            return None
        keys.append((column, kind, descending))
    return keys


def _kind(definition: bytes, collation: Collation | None) -> int | None:
    # a result's column definition ends in its fixed fields: 0x0C, character set (2), length (4), type,
    # flags (2), decimals, filler (2)
    if len(definition) < 13 or definition[-13] != 0x0C:
        return None
    charset = definition[-12] | definition[-11] << 8
    code = definition[-6]
    flags = definition[-5] | definition[-4] << 8
    if code in _INTEGERS:
        return ordered.KEY_UNSIGNED if flags & _UNSIGNED else ordered.KEY_SIGNED
    if code in _DATES:
        return ordered.KEY_BYTES
    if code not in _STRINGS or flags & (_ENUM | _SET):
        return None
    if charset == _BINARY:
        return ordered.KEY_BYTES
    return None if collation is None else _COLLATION_KEYS.get(collation.id)


def description_of(definitions: Sequence[bytes]) -> tuple[tuple[Any, ...], ...]:
    """A DB-API description of ``definitions`` (name and type code), as the collation lookup takes one."""
    out = []
    for definition in definitions:
        at = 0
        for _ in range(4):  # catalog, schema, table, original table
            _, at = _string_at(definition, at)
        name, _ = _string_at(definition, at)
        out.append((name.decode("utf8", "replace"), definition[-6], None, None, None, None, None))
    return tuple(out)


def _string_at(data: bytes, at: int) -> tuple[bytes, int]:
    """A column definition's length-encoded string at ``at`` (a name of 251 bytes or more: 0xFC and two
    bytes of length) and the offset after it."""
    size, at = (int.from_bytes(data[at + 1 : at + 3], "little"), at + 3) if data[at : at + 1] == b"\xfc" else (
        data[at] if at < len(data) else 0, at + 1)  # fmt: skip
    return data[at : at + size], at + size


def _keys(sent: SentMany, spec: MergeSpec, definitions: list[bytes], first: SentPart
          ) -> list[tuple[int, int, bool]] | None:  # fmt: skip
    """:func:`key_plan` for answers that begin with ``definitions`` (``first``'s), worked out once per spec, first
    data source and SQL (the spec's memo: a column's definition names its collation, so the same bytes key the
    same way); ``None``: decoded (a collation still to be asked of the data source is not remembered)."""
    at = (_KEYS, first.unit.data_source, first.sql, *definitions)
    memo = spec.memo
    keys = memo.get(at, _UNKNOWN)
    if keys is not _UNKNOWN:
        return cast("list[tuple[int, int, bool]] | None", keys)
    known = sent.engine.collations
    description = description_of(definitions)
    if known.pending(spec, description, first.unit.data_source, first.sql):
        return None  # asked of the data source by the decoded path, off the loop
    try:
        collations = known.for_merge(spec, description, first.unit.data_source, first.sql, sent.describe, None)
    except DdmError:
        return None  # a collation the merge refuses: the decoded path raises it
    keys = key_plan(spec, definitions, collations)
    remember(memo, at, keys)
    return keys


def relay_ordered(taken: Taken, relay: ResultRelay, backend_eof: bool,
                  header_for: Callable[[list[bytes]], tuple[list[bytes], int]],
                  conversions_for: Callable[[list[bytes]], bytes | None] | None) -> bytes | None:  # fmt: skip
    """The client's bytes for ``taken``'s answers merged in order by ``relay`` (its rows counted in
    ``relay.rows``); ``None``: the read is decoded instead (nothing was sent), ``relay`` is not used again.
    ``conversions_for``: the client reads binary rows (a prepared statement's), as :func:`relay_many`'s."""
    sent = taken.reading.sent
    if None in taken.answers:
        return None  # a failed unit: the decoded path raises what the worker path raises
    parts = sent.parts
    order = sorted(range(len(parts)), key=lambda i: parts[i].index)  # the units' order: the merge's ties
    answers = cast("list[bytes]", [taken.answers[i] for i in order])
    probe = ResultRelay(1, True, backend_eof, True)
    if probe.feed(answers[0]) != RELAY_STATES.HEADER:
        return None
    definitions = probe.columns
    spec = sent.plan.merge
    keys = _keys(sent, spec, definitions, parts[order[0]])
    if keys is None:
        return None
    limit = -1 if spec.limit is None else spec.limit
    # sort keys the router added after the selected columns are dropped (SELECT *: counted from the end)
    visible = -1 if not spec.derived else spec.visible if spec.visible is not None else len(definitions) - spec.derived
    merged = ordered.merge_ordered(answers, backend_eof, keys, spec.distinct, spec.offset, limit, visible)
    if merged is None:
        return None
    if visible >= 0:
        definitions = definitions[:visible]
    kinds = None if conversions_for is None else conversions_for(definitions)
    if conversions_for is not None and kinds is None:
        return None
    if relay.feed(merged) != RELAY_STATES.HEADER:
        return None
    if kinds is not None:
        relay.convert(kinds)
    payloads, status = header_for(relay.columns)
    if relay.header(payloads, status) != RELAY_STATES.DONE:
        return None  # a value that is not its column's text: nothing went out
    return relay.take()
