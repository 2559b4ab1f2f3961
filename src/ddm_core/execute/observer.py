"""The executor's per-statement hook, for observers such as :mod:`ddm_core.observe` (docs/observability.md).

The executor holds at most one observer; with none set (the default) the hook
costs one attribute test per statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ddm_core.execute.result import Result
    from ddm_core.route.plan import RoutePlan

__all__ = ["StatementObserver"]


class StatementObserver(Protocol):
    """Told about every plan :meth:`Executor.execute_plan` ran, on the caller's thread."""

    def finished(self, plan: RoutePlan, started: float, result: Result) -> None:
        """``plan`` ran; ``started`` is its ``time.monotonic()`` start. Must not raise."""

    def failed(self, plan: RoutePlan, started: float, error: BaseException) -> None:
        """``plan`` raised ``error`` (re-raised after this returns). Must not raise."""
