"""The merge contract: what the router says about merging a statement's units.

The router builds a :class:`MergeSpec` once per statement shape (per call only
offset / limit / HAVING values change); the merge engine acts on it without
parsing SQL. Column indexes refer to the units' rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")

__all__ = ["Aggregate", "MergeSpec", "NO_MERGE", "remember", "memoized"]

#: What one spec remembers at most (a spec is one statement shape's: a few widths and column descriptions).
MEMO_LIMIT = 32


@dataclass(frozen=True, slots=True)
class Aggregate:
    """One aggregate the merger must finish.

    Attributes:
        func: ``COUNT``, ``SUM``, ``MIN``, ``MAX``, ``AVG``.
        column: Where the merged value goes (index into unit rows).
        args: Unit-row columns that feed it: ``(column,)``, or for AVG
            ``(sum_column, count_column)``; for DISTINCT aggregates the column
            holding the (grouped) argument values.
        distinct: ``COUNT(DISTINCT x)`` / ``SUM(DISTINCT x)``: the units were
            grouped by ``x`` as well, and the merger counts/sums distinct values.
    """

    func: str
    column: int
    args: tuple[int, ...]
    distinct: bool = False


@dataclass(frozen=True, slots=True)
class MergeSpec:
    """How to merge the units' rows. Column indexes refer to unit rows.

    Attributes:
        order_by: ``(column, descending)`` keys the units' rows are sorted by
            (each unit sorts server-side); empty when order does not matter.
        group_by: Group key columns (rows arrive sorted by them when
            ``order_by`` starts with them; otherwise the merger hashes).
        aggregates: Aggregates to re-aggregate across units.
        distinct: Remove duplicate rows (over the visible columns).
        having: Predicate over a merged row (``None``: no HAVING left to do).
        offset: Rows to skip after merging.
        limit: Rows to return after merging (``None``: all).
        visible: Number of leading columns the caller sees; derived columns the
            router added (sort keys, AVG counts, ...) follow them and are dropped.
            ``None`` when the column count is only known at run time
            (``SELECT *``): then ``derived`` columns are counted from the end.
        derived: Number of trailing derived columns.
        column_names: Names of the visible columns as the caller wrote them
            (``AVG(amount)`` even though the units ran ``SUM``), ``None`` for a
            column whose unit name is already right (only aggregates are
            named), ``()`` when unknown (``SELECT *``).
        rewrite: Each row as the caller sees it, made from the row the units
            answered (``SHOW CREATE TABLE`` of a logic table: its name and text
            instead of the physical table's); ``None``: as answered.
    """

    order_by: tuple[tuple[int, bool], ...] = ()
    group_by: tuple[int, ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    distinct: bool = False
    having: Callable[[Sequence[Any]], bool] | None = field(default=None, compare=False)
    offset: int = 0
    limit: int | None = None
    visible: int | None = None
    derived: int = 0
    column_names: tuple[str | None, ...] = ()
    rewrite: Callable[[Sequence[Any]], tuple[Any, ...]] | None = field(default=None, compare=False)
    #: Nothing to do beyond concatenating the units' rows (set once: every statement asks).
    is_trivial: bool = field(init=False, compare=False, repr=False)
    #: What the merge works out from this spec and the units' column descriptions alone (its indexes
    #: resolved, the description it answers with, the columns it compares...), kept for the next statement
    #: of the shape: a spec is built once per statement shape, and one whose values change (a LIMIT ?) is a
    #: new spec, with a memo of its own. Bounded by :data:`MEMO_LIMIT` (see :func:`remember`).
    memo: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        trivial = not (
            self.order_by
            or self.group_by
            or self.aggregates
            or self.distinct
            or self.having
            or self.offset
            or self.limit is not None
            or self.derived
            or self.rewrite
        )
        object.__setattr__(self, "is_trivial", trivial)


NO_MERGE = MergeSpec()


def remember(memo: dict[Any, Any], key: Any, value: Any, limit: int = MEMO_LIMIT) -> None:
    """``memo[key] = value``, the memo emptied first when it holds ``limit`` entries (threads share it: a get and
    a set are atomic, and two that miss together only work the same thing out twice)."""
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value


def memoized(memo: dict[Any, Any], key: Any, make: Callable[[], T]) -> T:
    """``memo[key]``, made by ``make()`` and :func:`remember`-ed on a miss; a key that cannot be hashed (a driver's
    description given as lists) is made every time."""
    try:
        found: T | None = memo.get(key)
    except TypeError:
        return make()
    if found is None:
        found = make()
        remember(memo, key, found)
    return found
