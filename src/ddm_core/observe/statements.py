"""Per-statement counters the executor feeds through its observer hook (docs/observability.md#statements).

The hook runs on every statement, so it only adds to plain counters of a
*shape* — a statement's kind plus the logic tables and data nodes it reached —
and everything else (per-table sums, route distribution, alarms) is worked out
when someone reads :meth:`StatementRecorder.snapshot`, i.e. at scrape time.

A cached point select hands the executor the same ``plan.tables`` tuple on
every call for the same node, so the shape is found by that tuple's identity
(one dict lookup); other plans are looked up by content.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ddm_core.execute.shared import dual_table

if TYPE_CHECKING:
    from ddm_core.execute.result import Result
    from ddm_core.merge.memory import MergeMemory
    from ddm_core.route.plan import RoutePlan, RouteUnit

__all__ = ["LATENCY_BUCKETS", "StatementRecorder", "Shape", "ErrorKey", "DualKey", "MergeHighWater", "NO_TABLE"]

#: Upper bounds (seconds) of the latency histogram's buckets; one more bucket holds the rest.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip

#: The table label of a statement that names no logic table (``SELECT 1``).
NO_TABLE = "(none)"

#: Most distinct shapes kept with their data nodes; beyond it, new shapes keep only their tables.
MAX_SHAPES = 10_000
#: Plan-tables identities remembered for the fast lookup before the memo is emptied.
_MAX_MEMO = 16_384


class Shape:
    """One kind of statement on a set of logic tables and data nodes, with its counters."""

    __slots__ = ("kind", "tables", "sources", "count", "rows", "seconds", "buckets")

    def __init__(self, kind: str, tables: tuple[tuple[str, tuple[str, ...]], ...], sources: tuple[str, ...]) -> None:
        self.kind = kind
        #: (logic table, its data nodes "ds.table") per table; nodes empty past MAX_SHAPES.
        self.tables = tables
        self.sources = sources
        self.count = 0
        self.rows = 0  # rows returned, where known when execute returned (see the module doc)
        self.seconds = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)


@dataclass(frozen=True, slots=True)
class ErrorKey:
    """What a failed statement is counted under."""

    table: str
    data_source: str
    error: str  # the exception's class name


@dataclass(frozen=True, slots=True)
class DualKey:
    """What a migration's dual-write unit is counted under (docs/migration.md#dual-write)."""

    table: str
    data_source: str  # the new location's data source


@dataclass(slots=True)
class MergeHighWater:
    """The most one merge over a logic table held at once, and how many merges went over the warning threshold."""

    bytes: int = 0
    rows: int = 0
    merges: int = 0
    warnings: int = 0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A copy of every counter, taken under the recorder's lock."""

    shapes: tuple[Shape, ...]
    errors: dict[ErrorKey, int]
    dual_writes: dict[DualKey, int] = field(default_factory=dict)
    dual_write_failures: dict[DualKey, int] = field(default_factory=dict)
    merge_memory: dict[str, MergeHighWater] = field(default_factory=dict)


class StatementRecorder:
    """The executor's observer (:class:`ddm_core.execute.observer.StatementObserver`): counts, never raises."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock  # the executor's ``started`` is time.monotonic()
        self._lock = threading.Lock()
        self._memo: dict[int, tuple[Any, Shape]] = {}
        self._shapes: dict[Any, Shape] = {}
        self._errors: dict[ErrorKey, int] = {}
        self._dual: dict[DualKey, int] = {}
        self._dual_failed: dict[DualKey, int] = {}
        self._merge: dict[str, MergeHighWater] = {}

    # -- the hook (every statement) ----------------------------------------------------

    def finished(self, plan: RoutePlan, started: float, result: Result) -> None:
        elapsed = self._clock() - started
        tables = plan.tables
        memo = self._memo.get(id(tables))
        # The memo holds the tuple itself, so its id cannot be reused while the entry lives.
        shape = memo[1] if memo is not None and memo[0] is tables else self._shape_of(plan)
        bucket = bisect_left(LATENCY_BUCKETS, elapsed)
        rows = result.rowcount if result.description is not None else 0
        with self._lock:
            shape.count += 1
            shape.seconds += elapsed
            shape.buckets[bucket] += 1
            if rows > 0:
                shape.rows += rows

    def failed(self, plan: RoutePlan, started: float, error: BaseException) -> None:
        names = [t.logic_table for t in plan.tables] or [NO_TABLE]
        source = getattr(error, "data_source", None)
        if not isinstance(source, str):
            source = plan.units[0].data_source if len(plan.data_sources) == 1 else "*"
        with self._lock:
            for name in names:
                key = ErrorKey(name, source, type(error).__name__)
                self._errors[key] = self._errors.get(key, 0) + 1

    def dual_write_done(self, plan: RoutePlan, unit: RouteUnit) -> None:
        key = _dual_key(plan, unit)
        with self._lock:
            self._dual[key] = self._dual.get(key, 0) + 1

    def dual_write_failed(self, plan: RoutePlan, unit: RouteUnit, error: BaseException) -> None:
        key = _dual_key(plan, unit)
        with self._lock:
            self._dual_failed[key] = self._dual_failed.get(key, 0) + 1

    def merge_memory(self, plan: RoutePlan, memory: MergeMemory, over_threshold: bool) -> None:
        names = [t.logic_table.lower() for t in plan.tables] or [NO_TABLE]
        with self._lock:
            for name in names:
                mark = self._merge.get(name)
                if mark is None:
                    mark = self._merge[name] = MergeHighWater()
                mark.merges += 1
                mark.warnings += over_threshold
                if memory.bytes > mark.bytes:
                    mark.bytes, mark.rows = memory.bytes, memory.rows

    def _shape_of(self, plan: RoutePlan) -> Shape:
        """The shape of a plan whose tables tuple is not memoised yet (the slower lookup)."""
        kind = plan.kind.value
        tables = tuple((t.logic_table, t.nodes) for t in plan.tables)
        key: Any = (kind, tables) if tables else (kind, plan.data_sources)
        with self._lock:
            shape = self._shapes.get(key)
            if shape is None:
                sources = plan.data_sources
                if len(self._shapes) >= MAX_SHAPES:  # too many node combinations: keep tables only
                    tables, sources = tuple((name, ()) for name, _ in tables), ("*",)
                    key = (kind, tables, "folded")
                    shape = self._shapes.get(key)
                if shape is None:
                    shape = self._shapes[key] = Shape(kind, tables, sources)
            if len(self._memo) >= _MAX_MEMO:
                self._memo.clear()
            self._memo[id(plan.tables)] = (plan.tables, shape)
        return shape

    # -- reading (scrape time) ---------------------------------------------------------

    def snapshot(self) -> Snapshot:
        with self._lock:
            copies = []
            for shape in self._shapes.values():
                copy = Shape(shape.kind, shape.tables, shape.sources)
                copy.count, copy.rows, copy.seconds = shape.count, shape.rows, shape.seconds
                copy.buckets = list(shape.buckets)
                copies.append(copy)
            merge = {name: MergeHighWater(m.bytes, m.rows, m.merges, m.warnings) for name, m in self._merge.items()}
            return Snapshot(tuple(copies), dict(self._errors), dict(self._dual), dict(self._dual_failed), merge)


def _dual_key(plan: RoutePlan, unit: RouteUnit) -> DualKey:
    """A dual unit's logic table (as the executor counts it) and data source."""
    return DualKey(dual_table(plan, unit).lower(), unit.data_source)
