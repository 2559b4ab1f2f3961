"""The merge engine: the units' rows → the rows one unsharded table would give.

Driven by the router's :class:`~ddm_core.merge.spec.MergeSpec` alone (no SQL is
parsed here). What it does, cheapest first:

* nothing to merge → the units' rows one after another (derived columns dropped);
* ``ORDER BY`` → a streaming k-way :func:`heap_merge` of the units (each sorted
  server-side), ``OFFSET`` skipped and ``LIMIT`` cut inside the merge: memory
  O(units × (offset + limit)) rows whatever the units return;
* ``GROUP BY`` / aggregates → re-aggregation (:mod:`.aggregate`). When the
  units arrive sorted by the group keys (``order_by`` starts with them) groups
  are merged as a stream, one group in memory; otherwise every group is hashed,
  then sorted by ``order_by``;
* then ``HAVING`` (on the merged row, derived columns included), ``DISTINCT``,
  ``OFFSET`` / ``LIMIT``, and the derived columns are dropped.

Order follows MySQL: NULL first ascending, last descending; ties keep unit order.

Strings compare as their columns' collations say when the caller passes them
(``collations``; the executor reads them from the data source, see
:mod:`.collation`): ``'a' = 'A'`` and ``'b ' = 'b'`` under ``utf8mb4_general_ci``,
in ``ORDER BY``, ``GROUP BY``, ``DISTINCT``, ``MIN`` / ``MAX`` and
``COUNT(DISTINCT)``. A group, a DISTINCT row and a ``MIN`` / ``MAX`` show the
first spelling met in unit order (one table shows the first in its scan).
Without collations strings compare as Python compares them. Should the units
still deliver group keys out of the merge's order, the streamed group merge
raises :class:`~ddm_core.errors.MergeError` rather than split a group in two.
"""

from __future__ import annotations

import sys
from itertools import chain, groupby, islice
from operator import index, itemgetter
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Protocol, Sequence

from ddm_core._fast import SELECTED as _impl
from ddm_core.errors import MergeError
from ddm_core.merge.aggregate import DIALECTS, Reaggregator
from ddm_core.merge.collation import Collation
from ddm_core.merge.keys import ColumnKeys, column_keys, decorated, plain, row_key, value_key
from ddm_core.merge.memory import MergeMemory
from ddm_core.merge.spec import Aggregate, MergeSpec, memoized

__all__ = ["UnitResult", "UnitRows", "Merged", "merge_results", "close_each"]

Row = Sequence[Any]
Keys = tuple[tuple[int, bool], ...]

#: A k-way ordered merge with :func:`ddm_core.merge.heap_merge`'s signature (either twin).
HeapMergeFn = Callable[..., Iterator[Row]]


class UnitResult(Protocol):
    """What the executor hands over per unit."""

    @property
    def description(self) -> Sequence[Sequence[Any]] | None:
        """DB-API 7-tuples (name first), as the unit's cursor reported them."""

    @property
    def rows(self) -> Iterable[Row]:
        """The unit's rows in its server-side order: a list, iterator, generator or cursor."""


class UnitRows(NamedTuple):
    """A plain :class:`UnitResult`."""

    description: Sequence[Sequence[Any]] | None
    rows: Iterable[Row]


def close_each(objects: Iterable[Any]) -> list[Exception]:
    """Call ``close()`` on every object that has one, all of them even when some fail.

    Returns:
        The errors raised, in order (shared by the merged result and the executor's).
    """
    errors: list[Exception] = []
    for obj in objects:
        close = getattr(obj, "close", None)
        if close is None:
            continue
        try:
            close()
        except Exception as err:  # keep closing the others
            errors.append(err)
    return errors


class Merged:
    """The merged rows: an iterator of tuples plus the caller's ``description``.

    Rows are produced lazily: nothing is read from the units before the first
    ``next()``. When the rows run out, an error escapes, or :meth:`close` is
    called, every unit's rows are closed (generators run their ``finally``,
    cursors are closed). Also a context manager.

    Attributes:
        description: DB-API 7-tuples of the visible columns only; names as the
            caller wrote them (``AVG(amount)``) where the router knew them.
    """

    __slots__ = ("description", "memory", "_rows", "_closers", "_remaining", "_closed")

    def __init__(
        self,
        description: tuple[tuple[Any, ...], ...],
        rows: Iterator[Row],
        closers: Sequence[Any] = (),
        limit: int | None = None,
        memory: MergeMemory | None = None,
    ) -> None:
        self.description = description
        self.memory = memory  # what the merge held at once; reported when it closes
        self._rows = rows
        self._closers = list(closers)
        self._remaining = limit  # close the units as soon as the last row is out
        self._closed = False

    def __iter__(self) -> Merged:
        return self

    def __next__(self) -> Row:
        try:
            row = next(self._rows)
        except StopIteration:
            self.close()
            raise
        except BaseException:
            self._close(quiet=True)
            raise
        if self._remaining is not None:
            self._remaining -= 1
            if self._remaining <= 0:
                self.close()
        return row

    def fetchone(self) -> Row | None:
        """The next row, or None at the end (DB-API style)."""
        return next(self, None)

    def fetchmany(self, size: int) -> list[Row]:
        """Up to ``size`` more rows."""
        if self._remaining is not None:
            return list(islice(self, size))
        # Without a LIMIT to count down, straight from the pipeline: not one __next__ frame per row (the
        # proxy reads every multi-unit result in batches)
        try:
            rows = list(islice(self._rows, size))
        except BaseException:
            self._close(quiet=True)
            raise
        if len(rows) < size:
            self.close()
        return rows

    def fetchall(self) -> list[Row]:
        """Every remaining row, then the units are closed (faster than ``list(merged)``)."""
        if self._closed:
            return []
        try:
            rows = list(self._rows)
        except BaseException:
            self._close(quiet=True)
            raise
        self.close()
        return rows

    @property
    def closed(self) -> bool:
        """The units' rows were closed (exhausted, failed or closed early)."""
        return self._closed

    def close(self) -> None:
        """Stop early: close every unit's rows; later ``next()`` calls raise StopIteration.

        Raises:
            Exception: the first error a unit's ``close()`` raised (all are tried).
        """
        self._close(quiet=False)

    def _close(self, quiet: bool) -> None:
        if self._closed:
            return
        self._closed = True
        rows, self._rows = self._rows, iter(())
        closers, self._closers = [rows, *self._closers], []
        errors = close_each(closers)
        if self.memory is not None:
            self.memory.closed()
        if errors and not quiet:
            raise errors[0]

    def __enter__(self) -> Merged:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close(quiet=exc[0] is not None)

    def __repr__(self) -> str:
        names = [d[0] for d in self.description]
        return f"<Merged {names!r}{' closed' if self._closed else ''}>"


# -- the entry point -----------------------------------------------------------------


def merge_results(
    spec: MergeSpec,
    units: Sequence[UnitResult],
    *,
    dialect: str = "mysql",
    heap_merge: HeapMergeFn | None = None,
    memory: MergeMemory | None = None,
    collations: Sequence[Collation | None] | None = None,
) -> Merged:
    """Merge the units' results as ``spec`` says.

    Args:
        spec: The plan's :class:`~ddm_core.merge.spec.MergeSpec` (offset, limit
            and HAVING already bound to the statement's parameters).
        units: One result per route unit, in plan order (ties in ``ORDER BY``
            keep this order).
        dialect: The backend's name (``"mysql"``, ``"sqlite"``...; see
            :data:`ddm_core.dialects.KINDS`): only changes the types of ``AVG``
            and ``SUM(DISTINCT)`` (see :mod:`ddm_core.merge.aggregate`).
        heap_merge: The ordered merge to run (``None``: the selected
            implementation's); tests pass each twin in turn.
        memory: Counts the rows the merge holds at once (:mod:`.memory`) and
            is told when the result closes.
        collations: The collation of each unit-row column (``None``: compare
            its values as they are); see :func:`ddm_core.merge.collation.collation_for`.

    Returns:
        A lazy :class:`Merged` iterator; close it (or exhaust it) to release the units.

    Raises:
        MergeError: the spec does not fit the units' rows (a column outside
            them, units with different column counts, a bad offset / limit).
            The units' rows are closed before it is raised.
    """
    units = list(units)
    sources = [u.rows for u in units]
    try:
        return _build(spec, units, sources, dialect, heap_merge or _impl.merge.heap_merge, memory, collations)
    except BaseException:
        close_each(sources)  # best effort while another error propagates
        raise


class _Layout(NamedTuple):
    """The spec's indexes resolved against the units' column count."""

    width: int | None  # columns per unit row (None: no unit reported a description)
    visible: int | None  # None: unknown width, keep all but the last ``derived`` columns
    derived: int
    order_by: Keys
    group_by: tuple[int, ...]
    aggregates: tuple[Aggregate, ...]


def _build(
    spec: MergeSpec,
    units: list[UnitResult],
    sources: list[Iterable[Row]],
    dialect: str,
    heap_merge: HeapMergeFn,
    memory: MergeMemory | None,
    collations: Sequence[Collation | None] | None = None,
) -> Merged:
    if dialect not in DIALECTS:
        raise MergeError(f"dialect must be one of {DIALECTS}, not {dialect!r}", value=dialect)
    offset, limit = _check_window(spec.offset, spec.limit)
    described = [u.description for u in units if u.description]
    if len(described) > 1 and len(set(map(len, described))) > 1:
        counts = sorted(set(map(len, described)))
        raise MergeError(
            f"units returned different column counts {counts}: do the shards' tables differ? "
            "(SELECT * across shards needs the same columns on every shard)",
            value=counts,
        )
    first = tuple(map(tuple, described[0])) if described else ()
    if not units and not (spec.aggregates and not spec.group_by):
        # Nothing to merge (only aggregates without GROUP BY still owe their one row).
        visible = spec.visible if spec.visible is not None else 0
        return Merged(_description(first, visible, spec.column_names), iter(()), memory=memory)
    layout, description = _shaped(spec, first)

    held: list[Any] = []  # the units' rows read already (lists), and the others (iterators, cursors)
    streamed: list[Any] = []
    for src in sources:
        (held if isinstance(src, (list, tuple)) else streamed).append(src)
    if memory is not None:
        memory.hold_buffered(held)
    closers: list[Any] = []
    keys = column_keys(collations)
    rows = _pipeline(spec, layout, sources, closers, offset, limit, dialect, heap_merge, memory, keys)
    # Close every unit's rows too: heap_merge closes only what it iterated, and a
    # cursor's iterator is not the cursor.
    closers.extend(streamed)
    return Merged(description, rows, closers, limit, memory)


def _shaped(spec: MergeSpec, first: tuple[tuple[Any, ...], ...]) -> tuple[_Layout, tuple[tuple[Any, ...], ...]]:
    """The spec's indexes resolved for units described as ``first`` and the description the merge answers
    with: worked out once per spec and description (the spec's memo), as the next statement of the shape
    has the same."""

    def shaped() -> tuple[_Layout, tuple[tuple[Any, ...], ...]]:
        layout = _resolve(spec, len(first) if first else None)
        return layout, _description(first, layout.visible or 0, spec.column_names)

    return memoized(spec.memo, ("shaped", first), shaped)


def _reaggregator(spec: MergeSpec, layout: _Layout, dialect: str, keys: ColumnKeys) -> Reaggregator:
    """The spec's :class:`Reaggregator` (it keeps no state of its own: a group's is the caller's): made once per
    spec, layout and dialect when no column is compared by collation keys, else for this statement."""
    if keys:
        return Reaggregator(layout.aggregates, dialect, keys)
    return memoized(spec.memo, ("reaggregator", layout.aggregates, dialect),
                    lambda: Reaggregator(layout.aggregates, dialect, keys))


def _check_window(offset: Any, limit: Any) -> tuple[int, int | None]:
    if type(offset) is not int or offset < 0:
        raise MergeError(f"offset must be an int >= 0, not {offset!r}", value=offset)
    if limit is not None and (type(limit) is not int or limit < 0):
        raise MergeError(f"limit must be None or an int >= 0, not {limit!r}", value=limit)
    return offset, limit


def _resolve(spec: MergeSpec, width: int | None) -> _Layout:
    """Negative indexes count from the end of a unit row (``SELECT *``: width known at run time)."""
    derived = _int(spec.derived, "derived")
    visible: int | None = None
    if spec.visible is not None:
        visible = _int(spec.visible, "visible")
        if width is None:
            width = visible + derived  # no unit described its columns (no units at all)
        elif visible > width:
            raise MergeError(f"visible = {visible} is more than the {width} columns of a unit row", value=visible)
    elif width is not None:
        visible = width - derived
        if visible < 0:
            raise MergeError(f"derived = {derived} is more than the {width} columns of a unit row", value=derived)
    # else: SELECT * and no description: the derived columns are dropped per row

    def fix(i: Any, what: str) -> int:
        try:
            col = index(i)
        except TypeError:
            raise MergeError(f"{what} column must be an int, not {i!r}", value=i) from None
        if col < 0:
            if width is None:
                raise MergeError(
                    f"{what} column {col} counts from the end, but no unit reported a description", column=col
                )
            col += width
        if col < 0 or (width is not None and col >= width):
            raise MergeError(f"{what} column {i} is outside a unit row of {width} columns", column=i)
        return col

    order_by = tuple((fix(col, "ORDER BY"), bool(desc)) for col, desc in spec.order_by)
    group_by = tuple(fix(col, "GROUP BY") for col in spec.group_by)
    aggregates = tuple(
        type(a)(a.func, fix(a.column, a.func), tuple(fix(c, a.func) for c in a.args), a.distinct)
        for a in spec.aggregates
    )
    return _Layout(width, visible, derived, order_by, group_by, aggregates)


def _int(value: Any, what: str) -> int:
    try:
        n = index(value)
    except TypeError:
        n = -1
    if isinstance(value, bool) or n < 0:
        raise MergeError(f"{what} must be an int >= 0, not {value!r}", value=value)
    return n


def _description(first: tuple[tuple[Any, ...], ...], visible: int, names: Sequence[str | None]) -> tuple[tuple[Any, ...], ...]:
    out = []
    for i in range(visible):
        d = first[i] if i < len(first) else (None,) * 7
        name = names[i] if i < len(names) and names[i] is not None else d[0]
        out.append((name, *d[1:]))
    return tuple(out)


# -- the pipeline --------------------------------------------------------------------


def _pipeline(
    spec: MergeSpec,
    layout: _Layout,
    sources: list[Iterable[Row]],
    closers: list[Any],
    offset: int,
    limit: int | None,
    dialect: str,
    heap_merge: HeapMergeFn,
    memory: MergeMemory | None,
    keys: ColumnKeys,
) -> Iterator[Row]:
    width, visible, derived = layout.width, layout.visible, layout.derived
    having = spec.having
    grouped = bool(layout.group_by or layout.aggregates)
    windowed = False  # offset / limit already applied
    distinct = spec.distinct
    rows: Iterator[Row]
    if grouped:
        agg = _reaggregator(spec, layout, dialect, keys)
        if not layout.group_by:
            rows = _fold_all(chain.from_iterable(sources), agg, _min_width(layout))
        else:
            stream_keys = _stream_keys(layout.order_by, layout.group_by)
            if stream_keys is not None:
                merged = _ordered(heap_merge, sources, stream_keys, keys, closers)
                rows = _stream_groups(merged, layout.group_by, stream_keys, agg, keys)
            else:
                rows = _hash_groups(
                    chain.from_iterable(sources), layout.group_by, agg, layout.order_by, having, memory, keys
                )
                having = None  # applied before sorting: fewer rows to sort
    elif layout.order_by:
        if having is None and not spec.distinct:
            rows = _ordered(heap_merge, sources, layout.order_by, keys, closers, offset, limit)
            windowed = True
        elif having is None and _sorted_distinct(layout.order_by, visible):
            rows = _ordered(heap_merge, sources, layout.order_by, keys, closers, distinct=True)
            distinct = False  # done by the merge
        else:
            rows = _ordered(heap_merge, sources, layout.order_by, keys, closers)
    else:
        rows = chain.from_iterable(sources)
    if having is not None:
        rows = filter(having, rows)
    if distinct:
        rows = _distinct(rows, visible, derived, memory, keys)
    if not windowed and (offset or limit is not None):
        rows = _window(rows, offset, limit)
    if visible is None:
        if derived:
            rows = map(itemgetter(slice(0, -derived)), rows)
    elif width is None or visible < width:
        rows = map(itemgetter(slice(0, visible)), rows)
    if spec.rewrite is not None:
        rows = map(spec.rewrite, rows)
    return rows


def _ordered(
    heap_merge: HeapMergeFn,
    sources: list[Iterable[Row]],
    order_by: Keys,
    keys: ColumnKeys,
    closers: list[Any],
    offset: int = 0,
    limit: int | None = None,
    distinct: bool = False,
) -> Iterator[Row]:
    """The heap merge of ``sources`` on ``order_by``, strings under their collations.

    ``distinct``: the first row of each run of rows equal on the ``order_by`` columns (their collation
    keys), for a DISTINCT whose columns are exactly the sort's (:func:`_sorted_distinct`): sorted on them,
    equal rows come out next to each other, so neither a set of the rows seen nor a second key per row is
    needed, and each run's first row is the one :func:`_distinct` would keep.
    """
    columns = [col for col, _ in order_by]
    if not any(col in keys for col in columns) or plain(sources, columns, keys):
        merged = heap_merge(sources, order_by, offset=offset, limit=limit)
        closers.append(merged)
        return _firsts(merged, itemgetter(*columns)) if distinct else merged
    # The merge compares each row's keys, computed once, and hands the row back.
    marked, marked_keys = decorated(sources, order_by, keys)
    merged = heap_merge(marked, marked_keys, offset=offset, limit=limit)
    closers.append(merged)
    if distinct:
        return map(itemgetter(-1), _firsts(merged, itemgetter(*range(len(order_by)))))
    return map(itemgetter(-1), merged)


def _firsts(items: Iterator[Any], key: Callable[[Any], Any]) -> Iterator[Any]:
    """The first item of each run of items with equal ``key`` (C iterators only: no frame per row)."""
    return map(next, map(itemgetter(1), groupby(items, key)))


def _sorted_distinct(order_by: Keys, visible: int | None) -> bool:
    """The rows are sorted on exactly the DISTINCT's columns (the visible ones, in any order and direction)."""
    return visible is not None and visible > 0 and {col for col, _ in order_by} == set(range(visible))


def _window(rows: Iterator[Row], offset: int, limit: int | None) -> Iterator[Row]:
    """``OFFSET`` / ``LIMIT`` after merging; MySQL's "LIMIT 5, 18446744073709551615" idiom included."""
    if offset > sys.maxsize:
        return iter(())
    stop = None if limit is None or offset + limit > sys.maxsize else offset + limit
    return islice(rows, offset, stop)


def _min_width(layout: _Layout) -> int:
    """Columns of the one row an aggregate without GROUP BY gives over no rows."""
    if layout.width is not None:
        return layout.width
    used = [a.column for a in layout.aggregates] + [c for a in layout.aggregates for c in a.args]
    return max([(layout.visible or 0) + layout.derived, *(c + 1 for c in used)])


def _stream_keys(order_by: Keys, group_by: tuple[int, ...]) -> Keys | None:
    """The prefix of ``order_by`` made of exactly the group columns, if there is one.

    Units sorted by it hold each group's rows together, so a heap merge on it
    brings every partial row of a group next to the others (in any direction,
    any column order). The groups come out in ``order_by`` order: the rest of
    the keys cannot reorder rows that differ on the group keys.
    """
    wanted = set(group_by)
    covered: set[int] = set()
    for n, (col, _) in enumerate(order_by, 1):
        if col not in wanted:
            return None
        covered.add(col)
        if covered == wanted:
            return order_by[:n]
    return None


def _fold_all(rows: Iterator[Row], agg: Reaggregator, width: int) -> Iterator[Row]:
    """Aggregates without GROUP BY: exactly one row, even over no rows."""
    state = None
    for row in rows:
        if state is None:
            state = agg.start(row)
        else:
            agg.add(state, row)
    yield agg.empty(width) if state is None else agg.result(state)


def _stream_groups(
    rows: Iterator[Row], group_by: tuple[int, ...], keys: Keys, agg: Reaggregator, column_keys: ColumnKeys
) -> Iterator[Row]:
    """Groups from rows sorted by ``keys``: one group in memory at a time."""
    group_key = row_key(group_by, column_keys)
    sort_key = row_key([c for c, _ in keys], column_keys)
    descs = [d for _, d in keys]
    state: list[Any] | None = None
    current: Any = None
    for row in rows:
        k = group_key(row)
        if state is not None:
            if k == current:
                agg.add(state, row)
                continue
            _check_forward(sort_key(state[0]), sort_key(row), descs, keys)
            yield agg.result(state)
        state = agg.start(row)
        current = k
    if state is not None:
        yield agg.result(state)


def _check_forward(before: Any, after: Any, descs: list[bool], keys: Keys) -> None:
    """A new group must sort after the last one, or a group could be split in two."""
    if len(descs) == 1:
        before, after = (before,), (after,)
    for a, b, desc, (col, _) in zip(before, after, descs, keys):
        if a is None or b is None:
            c = 0 if a is b else (-1 if a is None else 1)
        else:
            try:
                c = -1 if a < b else (1 if b < a else 0)
            except TypeError:
                raise MergeError(f"group key column {col} holds values that cannot be compared", column=col) from None
        if c:
            if (c > 0) != desc:
                raise MergeError(
                    f"group key column {col} arrived out of order ({a!r} before {b!r}): the units sort "
                    "these values differently from Python (a case-insensitive collation?). Group "
                    "across shards on a binary collation, or ORDER BY an aggregate to merge by hashing",
                    column=col,
                )
            return


def _hash_groups(
    rows: Iterator[Row],
    group_by: tuple[int, ...],
    agg: Reaggregator,
    order_by: Keys,
    having: Callable[[Sequence[Any]], bool] | None,
    memory: MergeMemory | None = None,
    column_keys: ColumnKeys | None = None,
) -> Iterator[Row]:
    """Every group in a dict (first-seen order), then HAVING, then sorted by ``order_by``."""
    column_keys = column_keys or {}
    group_key = row_key(group_by, column_keys)
    groups: dict[Any, list[Any]] = {}
    for row in rows:
        k = group_key(row)
        try:
            state = groups.get(k)
        except TypeError:
            raise MergeError(f"GROUP BY columns {group_by} hold an unhashable value: {k!r}", column=group_by) from None
        if state is None:
            groups[k] = agg.start(row)
        else:
            agg.add(state, row)
    out: list[Row] = [agg.result(state) for state in groups.values()]
    del groups
    if memory is not None:
        memory.hold_extra(len(out), out)
    if having is not None:
        out = [row for row in out if having(row)]
    _sort_rows(out, order_by, column_keys)
    yield from out


def _sort_rows(rows: list[Row], keys: Keys, column_keys: ColumnKeys) -> None:
    """Sort in place like MySQL: NULL first ascending, last descending; stable."""
    for col, desc in reversed(keys):
        value = row_key((col,), column_keys)
        try:
            rows.sort(key=lambda r: (False,) if r[col] is None else (True, value(r)), reverse=desc)
        except TypeError:
            raise MergeError(f"sort key column {col} holds values that cannot be compared", column=col) from None


def _distinct(
    rows: Iterator[Row],
    visible: int | None,
    derived: int,
    memory: MergeMemory | None = None,
    column_keys: ColumnKeys | None = None,
) -> Iterator[Row]:
    """First occurrence of each distinct visible tuple; remembers only the distinct ones seen."""
    seen: set[tuple[Any, ...]] = set()
    if memory is not None:
        memory.watch(seen)  # it only grows: its size when the result closes is the most it held
    cut = slice(0, visible) if visible is not None else slice(0, -derived if derived else None)
    keyed = [(col, value_key(c)) for col, c in sorted(column_keys.items())] if column_keys else []
    if visible is not None:
        keyed = [(col, key) for col, key in keyed if col < visible]
    for row in rows:
        key = tuple(row[cut])
        if keyed:
            key = _collated(key, keyed)
        try:
            if key in seen:
                continue
            seen.add(key)
        except TypeError:
            raise MergeError(f"DISTINCT over an unhashable value in {key!r}", value=key) from None
        yield row


def _collated(values: tuple[Any, ...], keyed: list[tuple[int, Callable[[Any], Any]]]) -> tuple[Any, ...]:
    """``values`` with each keyed column's value replaced by its collation key."""
    out = list(values)
    for col, key in keyed:
        if col < len(out):
            out[col] = key(out[col])
    return tuple(out)
