"""Aggregates without GROUP BY folded from their answers' bytes, never read into a result
(docs/proxy.md#aggregates-folded-undecoded).

A multi-unit read whose merge only folds aggregates — ``SUM``, ``COUNT``, ``MIN``, ``MAX`` of numbers, no
``GROUP BY``, ``HAVING``, ``DISTINCT``, ``AVG`` or window — gets one row from each table it reads (a unit that
reads one data source's tables gets one row per table). Its answers are taken whole off the sockets; each
row is read (integers as ``int``, DECIMAL as ``Decimal``, exactly as the driver reads them), the rows are
folded in plan order by the merge engine's own :class:`Reaggregator`, and the folded row, written back as
text in the first answer's place, goes through the relay as a one-unit answer: the column header the decoded
path announces, a prepared statement's row converted to a binary one.

So the client reads what the decoded merge would have written — the same values (the same fold), the same
bytes — without the units' results, the merge pipeline or the row writer. Anything else (a column that is
not an integer or a DECIMAL, an answer without rows, a value that is not its column's text) is decoded
instead, before anything reached the client.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from ddm_core._fast import SELECTED
from ddm_core.merge.aggregate import Reaggregator
from ddm_core.merge.spec import MergeSpec, memoized
from ddm_core.proxy.relay import RELAY_STATES, frame, lenenc_string

if TYPE_CHECKING:
    from ddm_core._fast import ordered
    from ddm_core.proxy.relay import ResultRelay
    from ddm_core.proxy.relay_many import Taken
else:
    ordered = SELECTED.ordered

__all__ = ["folds_raw", "relay_folded"]

#: The aggregates folded here (each of one column, into that column)
_FOLDED = frozenset({"SUM", "COUNT", "MIN", "MAX"})
#: Integer types (TINY, SHORT, LONG, LONGLONG, INT24, YEAR): read as int
_INTEGERS = frozenset({1, 2, 3, 8, 9, 13})
#: The types folded: the integers, and NEWDECIMAL (read as Decimal)
_NUMBERS = _INTEGERS | {246}
_FOLDER = "folder"  # the spec memo's entries of a fold's Reaggregator, per width and dialect


def folds_raw(spec: MergeSpec) -> bool:
    """The merge of ``spec`` only folds aggregates of single columns, one row a unit (module docstring)."""
    return memoized(spec.memo, "folds raw", lambda: _folds_only(spec))


def _folds_only(spec: MergeSpec) -> bool:
    if (not spec.aggregates or spec.group_by or spec.having is not None or spec.distinct or spec.offset
            or spec.limit is not None or spec.derived or spec.rewrite is not None):
        return False  # fmt: skip
    return all(a.func.upper() in _FOLDED and not a.distinct and a.args == (a.column,) and a.column >= 0
               for a in spec.aggregates)  # fmt: skip


def _values(row: Sequence[bytes | None], kinds: Sequence[int]) -> list[Any] | None:
    """A text row's values as the driver reads them (``None``: a value that is not its column's text)."""
    values: list[Any] = []
    try:
        for text, kind in zip(row, kinds):
            values.append(None if text is None else int(text) if kind in _INTEGERS else Decimal(text.decode("ascii")))
    except (ValueError, InvalidOperation, UnicodeDecodeError):
        return None
    return values


def _text_row(values: Sequence[Any]) -> bytes:
    """``values`` (ints, Decimals, NULLs) as a text row, each as the decoded path writes it (a ``Decimal`` in plain
    notation, as MariaDB writes one)."""
    return b"".join(b"\xfb" if value is None else lenenc_string(_plain(value).encode("ascii")) for value in values)


def _plain(value: Any) -> str:
    return format(value, "f") if type(value) is Decimal else str(value)


def relay_folded(taken: Taken, relay: ResultRelay, backend_eof: bool, dialect: str,
                 header_for: Callable[[list[bytes]], tuple[list[bytes], int]],
                 conversions_for: Callable[[list[bytes]], bytes | None] | None) -> bytes | None:  # fmt: skip
    """The client's bytes for ``taken``'s answers' rows folded into one row by ``relay`` (one row counted in
    ``relay.rows``); ``None``: the read is decoded instead (nothing was sent), ``relay`` is not used again.
    ``dialect``: the data sources' (the decoded merge's); ``conversions_for`` as
    :func:`~ddm_core.proxy.relay_many.relay_many`'s."""
    if None in taken.answers:
        return None  # a failed unit: the decoded path raises what the worker path raises
    parts = taken.reading.sent.parts
    spec = taken.reading.sent.plan.merge
    order = sorted(range(len(parts)), key=lambda i: parts[i].index)  # plan order: the fold's ("first" values)
    answers = cast("list[bytes]", [taken.answers[i] for i in order])
    first = answers[0]
    read = ordered.text_rows(answers, backend_eof)
    if read is None:
        return None
    definitions, header_end, rows, closing = read
    kinds = []
    for definition in definitions:
        # a column definition ends in its fixed fields: 0x0C, character set (2), length (4), type, ...
        if len(definition) < 13 or definition[-13] != 0x0C or definition[-6] not in _NUMBERS:
            return None
        kinds.append(definition[-6])
    if not rows or any(a.column >= len(kinds) for a in spec.aggregates):
        return None
    folder = memoized(spec.memo, (_FOLDER, len(kinds), dialect), lambda: Reaggregator(spec.aggregates, dialect))
    state: list[Any] | None = None
    for row in rows:
        values = _values(row, kinds)
        if values is None:
            return None
        if state is None:
            state = folder.start(values)
        else:
            folder.add(state, values)
    assert state is not None
    seq = 2 + len(definitions) + (1 if backend_eof else 0)  # the header's packets were 1, 2, ...
    folded = first[:header_end] + frame(_text_row(folder.result(state)), seq & 0xFF) + frame(closing, (seq + 1) & 0xFF)
    if relay.feed(folded) != RELAY_STATES.HEADER:
        return None
    if conversions_for is not None:
        conversions = conversions_for(relay.columns)
        if conversions is None:
            return None
        relay.convert(conversions)
    payloads_out, status = header_for(relay.columns)
    if relay.header(payloads_out, status) != RELAY_STATES.DONE:
        return None  # a value that is not its column's text: nothing went out
    return relay.take()
