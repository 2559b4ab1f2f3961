"""What the merge compares a row by: its columns' values, or their collation keys.

A string column whose collation is not Python's order (:mod:`.collation`) is
compared by its values' keys; every other column by its values, so numbers,
dates and binary strings take the same paths as before and cost nothing more.
:data:`ColumnKeys` maps a unit row's column index to its collation (only
columns that need keys); the helpers here build what the engine's ordered
merge, grouping and DISTINCT compare from it.
"""

from __future__ import annotations

from itertools import tee
from operator import itemgetter
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from ddm_core.merge.collation import Collation
from ddm_core.merge.spec import MergeSpec, memoized

__all__ = ["ColumnKeys", "column_keys", "compared_columns", "value_key", "row_key", "decorated", "plain"]

Row = Sequence[Any]
#: Unit-row column index → its collation, for the columns whose collation is not Python's order.
ColumnKeys = Mapping[int, Collation]


def value_key(collation: Collation) -> Callable[[Any], Any]:
    """The collation's key for strings; NULL and anything else compare as they are."""
    key = collation.key
    assert key is not None
    return lambda value: key(value) if type(value) is str else value


def column_keys(collations: Sequence[Collation | None] | None) -> dict[int, Collation]:
    """The columns whose collation is not Python's order."""
    if not collations:
        return {}
    return {i: c for i, c in enumerate(collations) if c is not None and c.key is not None}


def row_key(columns: Sequence[int], keys: ColumnKeys) -> Callable[[Row], Any]:
    """``row`` → what it is compared by on ``columns``: one value for one column, else a tuple."""
    if not columns:
        return lambda row: ()
    if not any(c in keys for c in columns):
        return itemgetter(*columns)
    parts = [_column(c, keys) for c in columns]
    if len(parts) == 1:
        return parts[0]
    return lambda row: tuple([part(row) for part in parts])


def _column(col: int, keys: ColumnKeys) -> Callable[[Row], Any]:
    collation = keys.get(col)
    if collation is None:
        return itemgetter(col)
    key = collation.key
    assert key is not None

    def value(row: Row) -> Any:  # one call per row on the ordered merge's path
        v = row[col]
        return key(v) if type(v) is str else v

    return value


def plain(sources: Sequence[Iterable[Row]], columns: Sequence[int], keys: ColumnKeys) -> bool:
    """Python's order is already the collations' for these rows: every source is a list,
    and every string in ``columns`` is one of its collation's plain strings (see
    :attr:`~ddm_core.merge.collation.Collation.plain`). Checked at C speed; a streamed
    source cannot be checked before it is read."""
    for col in columns:
        collation = keys.get(col)
        if collation is None:
            continue
        if collation.plain is None:
            return False
        for source in sources:
            if not isinstance(source, (list, tuple)) or not collation.plain(source, col):
                return False
    return True


def decorated(
    sources: Sequence[Iterable[Row]], order_by: Sequence[tuple[int, bool]], keys: ColumnKeys
) -> tuple[list[Iterator[tuple[Any, ...]]], tuple[tuple[int, bool], ...]]:
    """Each source's rows as ``(key_0, ..., key_n, row)`` and the sort keys over them.

    A heap merge of the decorated sources on the returned keys orders the rows
    as ``order_by`` under the collations; ``row[-1]`` is the original row. The
    keys are computed once per row (map / zip: no Python frame but the key
    functions'); a list is read once per key, anything else through ``tee``.
    """
    getters = [_column(col, keys) for col, _ in order_by]
    out: list[Iterator[tuple[Any, ...]]] = []
    for source in sources:
        if isinstance(source, (list, tuple)):
            listed = [_listed_keys(source, col, keys, g) for (col, _), g in zip(order_by, getters)]
            out.append(zip(*listed, source))
            continue
        streams = tee(source, len(getters) + 1)
        out.append(zip(*(map(g, s) for g, s in zip(getters, streams)), streams[-1]))
    return out, tuple((i, desc) for i, (_, desc) in enumerate(order_by))


_STR = {str}


def _listed_keys(rows: Sequence[Row], col: int, keys: ColumnKeys, getter: Callable[[Row], Any]) -> Iterator[Any]:
    """A read source's keys of column ``col``: when every value is a string (checked at C speed), the
    collation's key straight over the column, without ``getter``'s frame per row."""
    collation = keys.get(col)
    if collation is None:
        return map(getter, rows)
    values = list(map(itemgetter(col), rows))
    if set(map(type, values)) <= _STR:
        return map(collation.key, values)  # type: ignore[arg-type]
    return map(getter, rows)


def compared_columns(spec: MergeSpec, width: int) -> frozenset[int]:
    """The unit-row columns whose values the merge of ``spec`` compares (indexes resolved, >= 0).

    Sort and group keys, ``MIN`` / ``MAX`` and ``COUNT(DISTINCT)`` arguments, and
    every visible column of a ``DISTINCT``: the columns that need a collation.
    Worked out once per spec and width (the spec's memo).
    """
    return memoized(spec.memo, ("compared", width), lambda: _compared(spec, width))


def _compared(spec: MergeSpec, width: int) -> frozenset[int]:
    columns = [c for c, _ in spec.order_by] + list(spec.group_by)
    for agg in spec.aggregates:
        if str(agg.func).upper() in ("MIN", "MAX") or (agg.distinct and str(agg.func).upper() == "COUNT"):
            columns.extend(agg.args)
    if spec.distinct:
        visible = spec.visible if spec.visible is not None else width - spec.derived
        columns.extend(range(visible))
    return frozenset(c + width if c < 0 else c for c in columns if -width <= c < width)
