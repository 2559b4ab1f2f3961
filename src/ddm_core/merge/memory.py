"""How much a merge held in memory at once (docs/observability.md#merge-memory).

A merge holds rows in three places: units the executor read in full before
merging (buffered results), the groups of a hash ``GROUP BY`` and the distinct
rows of a ``DISTINCT``. Streamed units and ordered merges hold a row or a
window per unit, which is left out. The buffered rows stay until the result is
closed, so the high-water mark is the buffered rows plus the largest of the
others.

Bytes are an estimate: the rows counted times the size of a sampled row (the
tuple and its values, ``sys.getsizeof``), measured once per statement. Python
objects of the same type differ little in size, so the estimate is good to a
small factor, which is what a warning at hundreds of megabytes needs.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

__all__ = ["MergeMemory", "row_bytes"]

_SAMPLE = 8  # rows whose sizes are averaged


def row_bytes(rows: Sequence[Sequence[Any]]) -> int:
    """The average size in bytes of the first few ``rows`` (0 for none)."""
    sample = rows[:_SAMPLE]
    if not sample:
        return 0
    total = sum(sys.getsizeof(row) + sum(map(sys.getsizeof, row)) for row in sample)
    return total // len(sample)


class MergeMemory:
    """The most rows one merge held at once, and their estimated bytes.

    Args:
        on_close: Called with this meter once, when the merged result closes.
    """

    __slots__ = ("buffered", "peak_extra", "row_bytes", "_on_close", "_watched")

    def __init__(self, on_close: Callable[[MergeMemory], None] | None = None) -> None:
        self.buffered = 0  # rows of units read in full, held until the result closes
        self.peak_extra = 0  # the most groups or distinct rows held at once
        self.row_bytes = 0  # estimated bytes per row
        self._on_close = on_close
        self._watched: list[set[Any]] = []  # growing sets measured at close

    @property
    def rows(self) -> int:
        """The high-water mark in rows."""
        return self.buffered + self.peak_extra

    @property
    def bytes(self) -> int:
        """The high-water mark in estimated bytes."""
        return self.rows * self.row_bytes

    def hold_buffered(self, units: Sequence[Sequence[Sequence[Any]]]) -> None:
        """The units' rows read in full before merging."""
        self.buffered = sum(map(len, units))
        if not self.row_bytes:
            self.row_bytes = next((row_bytes(rows) for rows in units if rows), 0)

    def hold_extra(self, count: int, sample: Sequence[Sequence[Any]] = ()) -> None:
        """``count`` groups or distinct rows are held at once."""
        if count > self.peak_extra:
            self.peak_extra = count
        if not self.row_bytes and sample:
            self.row_bytes = row_bytes(sample)

    def watch(self, rows: set[Any]) -> None:
        """A set of rows that only grows while the merge runs (``DISTINCT``): measured when it closes."""
        self._watched.append(rows)

    def closed(self) -> None:
        """The merged result closed: measure what is watched, report once."""
        for rows in self._watched:
            if rows:
                self.hold_extra(len(rows), [next(iter(rows))])
        self._watched = []
        report, self._on_close = self._on_close, None
        if report is not None:
            report(self)

    def __repr__(self) -> str:
        return f"MergeMemory(rows={self.rows}, bytes~{self.bytes})"
