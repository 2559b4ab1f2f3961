"""Slow statements: logged to ``ddm_core.slow_sql`` and counted, above ``runtime.slowSqlMs``.

The executor takes ``time.monotonic()`` when a statement starts (its deadline
needs it anyway) and calls :meth:`SlowSqlLog.observe` once it has the
result, so the check costs one more clock read and a comparison. A statement
at or above the threshold is counted (:attr:`SlowSqlLog.count`, read as
``executor.slow_statements``) and logged at WARNING with its data sources, its
physical SQL (shortened by :func:`~ddm_core._text.shorten_sql`), how many
parameters and units it had, the rows it returned or changed where known, and
the milliseconds. Parameter values are never logged: they are often personal
data. ``slowSqlMs: 0`` turns the log off.

The threshold follows configuration reloads within :data:`REFRESH` seconds
(re-read at most that often, so the hot path does not ask the configuration
for it on every statement).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from ddm_core._text import shorten_sql
from ddm_core.metadata.model import ShardingConfig
from ddm_core.route.plan import RoutePlan

__all__ = ["SlowSqlLog", "REFRESH", "LOGGER"]

#: The logger slow statements go to.
LOGGER = "ddm_core.slow_sql"

#: Seconds between two reads of ``runtime.slowSqlMs`` from the configuration.
REFRESH = 1.0

log = logging.getLogger(LOGGER)

_OFF = float("inf")


class SlowSqlLog:
    """Counts and logs statements slower than the configuration's ``runtime.slowSqlMs``.

    Args:
        config: Returns the configuration version in use (followed on reload).
    """

    def __init__(self, config: Callable[[], ShardingConfig]) -> None:
        self._config = config
        #: The threshold in seconds as last read, and when it is read again (``monotonic()``): read directly by the
        #: proxy's compiled hot path (``_fast/hotlink``), which observes a statement under it without a call.
        self.threshold_s = _OFF
        self.refresh_at = 0.0
        self._lock = threading.Lock()
        self.count = 0

    def threshold(self, now: float) -> float:
        """The threshold in seconds (``inf`` when off), re-read from the configuration every :data:`REFRESH` s."""
        if now >= self.refresh_at:
            ms = self._config().runtime.slow_sql_ms
            self.threshold_s = ms / 1000.0 if ms > 0 else _OFF
            self.refresh_at = now + REFRESH
        return self.threshold_s

    def surely_quick(self, started: float) -> bool:
        """The statement ``started`` then is under the threshold as last read (``False``: :meth:`observe` decides)."""
        now = time.monotonic()
        return now - started < self.threshold_s and now < self.refresh_at

    def observe(self, started: float, plan: RoutePlan, result: Any) -> None:
        """Count and log the statement if it took at least the threshold (``started``: its ``monotonic()``)."""
        now = time.monotonic()
        elapsed = now - started
        if elapsed < self.threshold_s and now < self.refresh_at:
            return  # the hot path: one clock read, two comparisons
        if elapsed < self.threshold(now):
            return
        with self._lock:
            self.count += 1
        if log.isEnabledFor(logging.WARNING):
            self._log(plan, result, elapsed)

    @staticmethod
    def _log(plan: RoutePlan, result: Any, elapsed: float) -> None:
        units = plan.units
        sources = plan.data_sources
        sql = shorten_sql(units[0].sql) if units else ""
        params = sum(len(u.params) for u in units)
        rows = getattr(result, "rowcount", -1)
        ms = round(elapsed * 1000.0, 1)
        more = f" (and {len(units) - 1} more units)" if len(units) > 1 else ""
        log.warning(
            "slow statement: %.1f ms on data source %s, %d param%s, %s rows: %s%s",
            ms,
            ", ".join(sources) or "-",
            params,
            "" if params == 1 else "s",
            rows if rows >= 0 else "unknown",
            sql,
            more,
            extra={
                "data_sources": sources,
                "sql": sql,
                "params": params,
                "units": len(units),
                "rows": rows,
                "ms": ms,
            },
        )
