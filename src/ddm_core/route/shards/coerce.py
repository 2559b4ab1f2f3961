"""Typed comparison: a string compared with an integer shard column routes as the integer.

MySQL compares ``user_id = '10086'`` (or a string param) with an integer
column as numbers, so the row of user 10086 matches; an algorithm given the
string would hash or evaluate ``'10086'``, not ``10086``, and pick another
shard. When a table's schema (:mod:`ddm_core.route.table_schema`) says a
sharding column is an integer, the statement's values for it are read as
integers: literals once when the statement is compiled, parameters on every
route through a normalizer built then (``None`` — no work at all — when no
value of the statement needs one). A parameter read this way is sent to the
database as the integer too, so the database compares exactly what was routed.

Only strings that are an integer exactly are read: optional spaces, an
optional sign and decimal digits (``'10086'``, ``' 10086 '``, ``'+5'``,
``'007'``). Anything MySQL would read only approximately or with a warning —
``'10086abc'`` (10086), ``'1e3'`` (1000.0), ``'10086.0'``, ``''`` (0) — is
refused with :class:`~ddm_core.errors.ShardValueError`: a guess could route
the statement to a shard that does not hold the rows MySQL would match. A
literal in a comparison must also be below 2**53 in magnitude (MySQL may
compare a string constant with an integer as DOUBLE, where larger integers
collapse); as a parameter it has no such limit, being sent as an integer.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from ddm_core.errors import ShardValueError
from ddm_core.metadata.model import ShardedTable
from ddm_core.route.context import RouteContext
from ddm_core.route.shards.conditions import Atom, Eq, In, Literal, Param, Range, Source

__all__ = [
    "Normalizer", "integer_columns", "integer_value", "normalizer", "normalized_indexes", "coerce_source",
    "coerce_conditions", "coerce_dnf",
]

#: ``bound params → bound params`` with the strings of integer shard columns read as integers.
Normalizer = Callable[[Sequence[Any]], Sequence[Any]]

# MySQL skips the same leading whitespace when it reads a string as a number.
_INTEGER_TEXT = re.compile(r"[ \t\n\r\f\v]*([+-]?[0-9]+)[ \t\n\r\f\v]*")
_EXACT_DOUBLE = 2**53


def integer_columns(ctx: RouteContext, primary: ShardedTable, others: Iterable[str] = ()) -> frozenset[str]:
    """The routing columns (lower case) of ``primary`` whose schema says they are integers.

    ``others``: further logic tables of the statement, asked when ``primary``
    has no schema (a binding table's statement routes through its group's first table).
    """
    router = ctx.router_of(primary)
    schemas = [s for s in (ctx.schema_of(primary.name), *(ctx.schema_of(t) for t in others)) if s is not None]
    out = set()
    for column in router.columns:
        for schema in schemas:
            found = schema.column(column)
            if found is not None:
                if found.is_integer:
                    out.add(column)
                break
    return frozenset(out)


def integer_value(value: Any, table: str, column: str, *, comparison: bool = False) -> Any:
    """``value`` read as an integer if it is a string (or bytes) of one, else unchanged.

    Args:
        comparison: The string is a literal compared in SQL text (not a param, not an
            INSERT value): it must also be exact as a DOUBLE.

    Raises:
        ShardValueError: a string that is not exactly an integer (see the module docstring).
    """
    kind = type(value)
    if kind is not str and kind is not bytes:
        return value
    try:
        text = value.decode("ascii") if kind is bytes else value
    except UnicodeDecodeError:
        text = None
    found = _INTEGER_TEXT.fullmatch(text) if text is not None else None
    if found is None:
        raise ShardValueError(
            f"{value!r} is compared with or stored in integer shard column {column!r} of {table!r}, and it is "
            "not an integer in decimal digits; MySQL would read it as a number only approximately (or with a "
            "warning), so its shard is not certain. Pass an integer, or a string of digits",
            table=table,
            column=column,
            value=value,
        )
    number = int(found.group(1))
    if comparison and abs(number) >= _EXACT_DOUBLE:
        raise ShardValueError(
            f"the string {value!r} compared with integer shard column {column!r} of {table!r} is too large for "
            "an exact comparison (MySQL may compare a string with an integer as DOUBLE); write it as a number, "
            "or pass it as a parameter",
            table=table,
            column=column,
            value=value,
        )
    return number


def coerce_source(source: Source | None, table: str, column: str, params: dict[int, tuple[str, str]],
                  *, comparison: bool = False) -> Source | None:
    """A literal read as an integer now; a param recorded in ``params`` for the route-time normalizer."""
    if type(source) is Literal:
        number = integer_value(source.value, table, column, comparison=comparison)
        return source if number is source.value else Literal(number)
    if type(source) is Param:
        params[source.index] = (table, column)
    return source


_TEXT = frozenset({str, bytes})  # the values a normalizer reads as integers


def normalizer(params: Mapping[int, tuple[str, str]]) -> Normalizer | None:
    """The route-time normalizer for ``params`` (index → table, column), or ``None`` when there are none."""
    if not params:
        return None
    items = tuple(sorted(params.items()))

    def normalize(bound: Sequence[Any]) -> Sequence[Any]:
        if _TEXT.isdisjoint(map(type, bound)):  # no string anywhere (prepared ints): nothing to read, at C speed
            return bound
        out: list[Any] | None = None
        for index, (table, column) in items:
            value = bound[index]
            kind = type(value)
            if kind is str or kind is bytes:
                if out is None:
                    out = list(bound)
                out[index] = integer_value(value, table, column)
        return bound if out is None else out

    # What the compiled point path checks instead of calling it (route/query/point_path.py).
    setattr(normalize, "indexes", frozenset(params))
    return normalize


def normalized_indexes(normalize: Normalizer | None) -> frozenset[int] | None:
    """The param indexes ``normalize`` may change (``frozenset()`` for ``None``), or ``None`` when unknown."""
    if normalize is None:
        return frozenset()
    found = getattr(normalize, "indexes", None)
    return found if isinstance(found, frozenset) else None


def coerce_conditions(ctx: RouteContext, analysis: Any, key_sets: Sequence[Any] = ()) -> Normalizer | None:
    """Read the shard conditions (and ``SET shard_col = v`` values) of integer columns as integers.

    Rewrites the literal atoms of ``analysis``'s scopes in place and returns the
    normalizer for the params (``None``: nothing to do per route).

    Args:
        analysis: The statement's :class:`~ddm_core.route.shards.analyze.Analysis`.
        key_sets: The UPDATE's :class:`~ddm_core.route.query.query.ShardKeySet` items (``source`` rewritten).
    """
    primary = analysis.primary
    if primary is None:
        return None
    columns = integer_columns(ctx, primary, analysis.sharded)
    if not columns:
        return None
    params: dict[int, tuple[str, str]] = {}
    table = primary.name
    for scope in analysis.scopes:
        if scope.dnf:
            scope.dnf = coerce_dnf(scope.dnf, columns, table, params)
    for item in key_sets:
        if item.column in columns:
            item.source = coerce_source(item.source, item.table, item.column, params)
    return normalizer(params)


def coerce_dnf(dnf: list[Any], columns: frozenset[str], table: str, params: dict[int, tuple[str, str]]) -> list[Any]:
    """``dnf`` with the literals compared with ``columns`` read as integers; their params go to ``params``."""
    return [
        {c: tuple(_atom(a, table, params) for a in atoms) if c in columns else atoms for c, atoms in conj.items()}
        for conj in dnf
    ]


def _atom(atom: Atom, table: str, params: dict[int, tuple[str, str]]) -> Atom:
    column = atom.column

    def one(source: Source | None) -> Any:
        return coerce_source(source, table, column, params, comparison=True)

    if type(atom) is Eq:
        return replace(atom, source=one(atom.source))
    if type(atom) is In:
        return replace(atom, sources=tuple(one(s) for s in atom.sources))
    assert type(atom) is Range
    return replace(atom, lower=one(atom.lower), upper=one(atom.upper))
