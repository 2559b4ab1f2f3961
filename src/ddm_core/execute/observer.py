"""The executor's per-statement hook, for observers such as :mod:`ddm_core.observe` (docs/observability.md).

The executor holds at most one observer; with none set (the default) the hook
costs one attribute test per statement. An observer may also implement
:class:`DualWriteObserver`'s two methods (found with ``getattr`` when it is set,
so observers without them keep working) to hear of a migration's dual writes,
and :class:`MergeMemoryObserver`'s to hear what each merge held in memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ddm_core.execute.result import Result
    from ddm_core.merge.memory import MergeMemory
    from ddm_core.route.plan import RoutePlan, RouteUnit

__all__ = ["StatementObserver", "DualWriteObserver", "MergeMemoryObserver"]


class StatementObserver(Protocol):
    """Told about every plan :meth:`Executor.execute_plan` ran, on the caller's thread."""

    def finished(self, plan: RoutePlan, started: float, result: Result) -> None:
        """``plan`` ran; ``started`` is its ``time.monotonic()`` start. Must not raise."""

    def failed(self, plan: RoutePlan, started: float, error: BaseException) -> None:
        """``plan`` raised ``error`` (re-raised after this returns). Must not raise."""


class DualWriteObserver(StatementObserver, Protocol):
    """An observer that also hears of each dual-write unit (``plan.dual``, docs/migration.md#dual-write)."""

    def dual_write_done(self, plan: RoutePlan, unit: RouteUnit) -> None:
        """``unit`` of ``plan.dual`` ran at the new location. Must not raise."""

    def dual_write_failed(self, plan: RoutePlan, unit: RouteUnit, error: BaseException) -> None:
        """``unit`` failed (or was skipped: ``error`` says why); the caller never sees it. Must not raise."""


class MergeMemoryObserver(StatementObserver, Protocol):
    """An observer that also hears what each merged result held at once (docs/observability.md#merge-memory)."""

    def merge_memory(self, plan: RoutePlan, memory: MergeMemory, over_threshold: bool) -> None:
        """``plan``'s merged result closed having held ``memory`` (``over_threshold``: it was warned of). Must not raise."""
