"""Pure-Python twin of ``merge.pyx``: k-way streaming merge of sorted row sources.

Order: for each ``(column, descending)`` key in turn, NULL (``None``) sorts
before every value, as MySQL sorts it (first ascending, last descending);
rows equal on every key come out in source order. Only one row per source is
held; ``offset`` rows are skipped without being kept. When the merge ends —
exhausted, ``limit`` reached, ``close()`` called or an error — every source
iterator that has a ``close()`` is closed (generators run their ``finally``).
"""

from __future__ import annotations

import heapq
import operator
import sys
from typing import Any, Iterable, Iterator, Sequence

from ddm_core.errors import MergeError

__all__ = ["heap_merge", "HeapMerge", "check_merge_args"]

Row = Sequence[Any]
_DONE: Any = object()


def _key_pair(key: Any) -> tuple[int, bool]:
    # Strict on purpose: int(0.9) or bool("no") would silently sort by the wrong
    # column or in the wrong direction.
    col, desc = key
    if isinstance(col, bool) or desc not in (True, False):
        raise ValueError(key)
    return operator.index(col), bool(desc)


def check_merge_args(
    keys: Sequence[tuple[int, bool]], offset: int, limit: int | None
) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    """Validate the arguments shared by both twins; return columns and directions.

    ``keys`` are ``(column, descending)`` pairs: the column an int (anything
    with ``__index__``, not a bool) ``>= 0``, the direction a bool (or 0/1).
    """
    try:
        pairs = [_key_pair(key) for key in keys]
    except (TypeError, ValueError):
        raise MergeError(f"keys must be (column_index, descending) pairs, not {keys!r}", value=keys) from None
    if any(not 0 <= col <= sys.maxsize for col, _ in pairs):
        raise MergeError(f"sort key columns must be from 0 to {sys.maxsize}, not {keys!r}", value=keys)
    if type(offset) is not int or offset < 0:
        raise MergeError(f"offset must be an int >= 0, not {offset!r}", value=offset)
    if limit is not None and (type(limit) is not int or limit < 0):
        raise MergeError(f"limit must be None or an int >= 0, not {limit!r}", value=limit)
    return tuple(c for c, _ in pairs), tuple(d for _, d in pairs)


def _compare(a: Any, b: Any, col: int) -> int:
    if a is None:
        return 0 if b is None else -1
    if b is None:
        return 1
    try:
        if a < b:
            return -1
        if b < a:
            return 1
    except (TypeError, ArithmeticError):  # ArithmeticError: NaN against a Decimal
        raise MergeError(
            f"sort key column {col} holds values that cannot be compared: "
            f"{type(a).__name__} and {type(b).__name__}",
            column=col,
        ) from None
    return 0


def _key_value(row: Row, col: int) -> Any:
    """``row[col]``, or a MergeError naming the column (shared by both twins)."""
    try:
        return row[col]
    except (LookupError, TypeError):
        try:
            problem = f"is outside a row of {len(row)} columns"
        except TypeError:
            problem = f"cannot be read from a row of type {type(row).__name__}"
        raise MergeError(f"sort key column {col} {problem}", column=col) from None


class _Head:
    """The current row of one source, ordered by the keys then the source index."""

    __slots__ = ("row", "vals", "src", "keys")

    def __init__(self, row: Row, src: int, keys: tuple[tuple[int, bool], ...]) -> None:
        self.row = row
        self.vals = [_key_value(row, col) for col, _ in keys]
        self.src = src
        self.keys = keys

    def __lt__(self, other: _Head) -> bool:
        for (col, desc), a, b in zip(self.keys, self.vals, other.vals):
            c = _compare(a, b, col)
            if c:
                return c > 0 if desc else c < 0
        return self.src < other.src


class HeapMerge:
    """Iterator returned by :func:`heap_merge`; rows are pulled on first ``next()``."""

    __slots__ = ("_iters", "_keys", "_offset", "_limit", "_heap", "_started")

    def __init__(
        self, iters: list[Iterator[Row]], keys: tuple[tuple[int, bool], ...], offset: int, limit: int | None
    ) -> None:
        self._iters = iters
        self._keys = keys
        self._offset = offset
        self._limit = limit
        self._heap: list[_Head] = []
        self._started = False

    def _prime(self) -> None:
        self._started = True
        if self._limit == 0:
            self._finish()
            return
        for src, it in enumerate(self._iters):
            row = next(it, _DONE)
            if row is not _DONE:
                self._heap.append(_Head(row, src, self._keys))
        heapq.heapify(self._heap)

    def _finish(self) -> None:
        iters, self._iters, self._heap = self._iters, [], []
        self._started = True
        for it in iters:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> HeapMerge:
        return self

    def __next__(self) -> Row:
        try:
            if not self._started:
                self._prime()
            heap = self._heap
            while heap:
                head = heap[0]
                nxt = next(self._iters[head.src], _DONE)
                if nxt is _DONE:
                    heapq.heappop(heap)
                else:
                    heapq.heapreplace(heap, _Head(nxt, head.src, self._keys))
                if self._offset:
                    self._offset -= 1
                    continue
                if self._limit is not None:
                    self._limit -= 1
                    if self._limit == 0:
                        self._finish()
                return head.row
        except BaseException:
            self._finish()
            raise
        self._finish()
        raise StopIteration

    def close(self) -> None:
        """Stop early: drop the held rows and close the sources that can be closed."""
        self._finish()


def heap_merge(
    sources: Iterable[Iterable[Row]],
    keys: Sequence[tuple[int, bool]],
    *,
    offset: int = 0,
    limit: int | None = None,
) -> HeapMerge:
    """Merge already-sorted row sources into one sorted stream.

    Args:
        sources: Iterables of rows (DB-API cursors, generators, lists), each
            sorted by ``keys``.
        keys: ``(column_index, descending)`` pairs, most significant first.
        offset: Rows to skip (not kept) before the first row returned.
        limit: Largest number of rows returned; None for all.

    Raises:
        MergeError: bad arguments, a key column outside a row, or values in a
            key column that cannot be compared.
    """
    cols, descs = check_merge_args(keys, offset, limit)
    return HeapMerge([iter(s) for s in sources], tuple(zip(cols, descs)), offset, limit)
