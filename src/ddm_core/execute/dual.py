"""A migration's dual writes, counted: what ran at the new location and what failed there.

A dual-write unit never fails the caller's statement (the old location has the write and the
migration's catch-up repairs the new one: docs/migration.md#dual-write). What it leaves behind is a
count per ``(data source, logic table)``, a throttled warning, and the observer's optional hooks.
Every runner (threads, asyncio) and every transaction reports through one :class:`DualWrites`.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from ddm_core.execute.shared import DualWriteKey, Throttle, dual_table
from ddm_core.route.plan import RoutePlan, RouteUnit

__all__ = ["DualWrites", "call_hook"]

log = logging.getLogger("ddm_core.execute")


class DualWrites:
    """Counters, warnings and observer hooks of dual-write units (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[DualWriteKey, int] = {}
        self._failed: dict[DualWriteKey, int] = {}
        self._hooks: tuple[Any, Any] = (None, None)
        self._warn = Throttle(10.0)

    def observe_with(self, observer: Any) -> None:
        """Tell ``observer``'s ``dual_write_done`` / ``dual_write_failed`` (if it has them) of every unit."""
        self._hooks = (getattr(observer, "dual_write_done", None), getattr(observer, "dual_write_failed", None))

    def done(self, plan: RoutePlan, unit: RouteUnit) -> None:
        """A dual-write unit ran."""
        key = DualWriteKey(unit.data_source, dual_table(plan, unit))
        with self._lock:
            self._done[key] = self._done.get(key, 0) + 1
        call_hook(self._hooks[0], plan, unit)

    def failed(self, plan: RoutePlan, unit: RouteUnit, error: BaseException, what: str = "") -> None:
        """A dual-write unit failed or was skipped: count it, warn (throttled per data source); never raises.

        Args:
            what: What it means for the transaction, appended to the warning.
        """
        key = DualWriteKey(unit.data_source, dual_table(plan, unit))
        with self._lock:
            self._failed[key] = self._failed.get(key, 0) + 1
        held = self._warn.allow(unit.data_source)
        if held is not None:
            physical = ", ".join(p for _, p in unit.tables) or key.table
            log.warning(
                "dual write to %s on data source %r failed, the old location has the write and the migration's "
                "catch-up repairs the new one%s%s: %s: %s",
                physical, unit.data_source, f"; {what}" if what else "",
                f" ({held} more dual-write failures on {unit.data_source!r} since the last warning)" if held else "",
                type(error).__name__, error,
            )  # fmt: skip
        call_hook(self._hooks[1], plan, unit, error)

    def counts(self) -> dict[DualWriteKey, int]:
        with self._lock:
            return dict(self._done)

    def failures(self) -> dict[DualWriteKey, int]:
        with self._lock:
            return dict(self._failed)


def call_hook(hook: Callable[..., None] | None, *args: Any) -> None:
    """Call an observer's optional hook; its failure is logged, never the statement's."""
    if hook is None:
        return
    try:
        hook(*args)
    except Exception as exc:  # an observer must not break the statement
        log.debug("observer hook %r failed: %s", hook, exc)
