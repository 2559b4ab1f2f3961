"""One statement's run as every runner sees it: its deadline, its outcomes, what a failed unit means.

Nothing here does I/O. A runner (threads: :mod:`ddm_core.execute.threads`; asyncio:
:mod:`ddm_core.aio`) borrows, sends and reads; it asks these functions what the deadline is,
which error a unit's failure becomes, and hands the :class:`LaneOutcome` list to
:meth:`ddm_core.execute.engine.Engine.assemble` (docs/architecture.md#the-statement-engine).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ddm_core._text import shorten_sql
from ddm_core.errors import QueryTimeoutError
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.result import UnitResult
from ddm_core.route.plan import RoutePlan, RouteUnit

__all__ = ["Statement", "LaneOutcome", "timeout_error", "combined_timeout", "unit_error", "close_quietly"]


@dataclass(slots=True)
class Statement:
    """A routed plan being run: when it started, its deadline, whether partial reads are accepted.

    Attributes:
        plan: The routed plan.
        style: The caller's paramstyle family (``"qmark"`` or ``"format"``).
        started: ``time.monotonic()`` when the statement began.
        seconds: Its time budget (``None``: none).
        deadline: ``started + seconds`` (``None``: none).
        partial_ok: A read whose units time out returns what arrived (``result.complete`` False).
    """

    plan: RoutePlan
    style: str
    started: float
    seconds: float | None
    deadline: float | None
    partial_ok: bool

    def expired(self) -> bool:
        """Is the deadline behind us?"""
        return self.deadline is not None and self.deadline <= time.monotonic()

    def left(self) -> float | None:
        """Seconds to the deadline (``None``: no deadline; never negative)."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


@dataclass(slots=True)
class LaneOutcome:
    """What one lane (units on one connection) produced: ``(unit index, result)`` pairs, or the error that stopped it."""

    results: list[tuple[int, UnitResult]] = field(default_factory=list)
    error: BaseException | None = None


def timeout_error(unit: RouteUnit, endpoint: str) -> QueryTimeoutError:
    """The error of a unit cancelled at its statement's deadline."""
    return QueryTimeoutError(
        f"statement on data source {unit.data_source!r} exceeded its deadline and was cancelled: "
        f"{shorten_sql(unit.sql)!r}",
        data_source=unit.data_source,
        endpoint=endpoint,
        sql=unit.sql,
    )


def unit_error(exc: BaseException, unit: RouteUnit, endpoint: str, fired: bool, sql: str) -> BaseException:
    """What a unit that raised ``exc`` raises to the caller (``fired``: its deadline's cancel went off)."""
    if fired:
        return timeout_error(unit, endpoint)
    if isinstance(exc, Exception):
        return map_driver_error(exc, data_source=unit.data_source, endpoint=endpoint, sql=sql)
    return exc  # KeyboardInterrupt, a cancelled task: not the driver's


def combined_timeout(timeouts: list[QueryTimeoutError], total: int, seconds: float | None) -> QueryTimeoutError:
    """One error for the units of a statement that timed out (the first one chained)."""
    if len(timeouts) == 1 and total == 1:
        return timeouts[0]
    sources = sorted({getattr(t, "data_source", "?") for t in timeouts})
    first = timeouts[0]
    budget = f"{seconds:g} s" if seconds is not None else "statement's"
    err = QueryTimeoutError(
        f"{len(timeouts)} of {total} units exceeded the {budget} deadline and were cancelled "
        f"(data sources {', '.join(sources)}); pass allow_partial=True to accept the rest",
        data_sources=tuple(sources),
        data_source=sources[0],
        sql=getattr(first, "sql", None),
        timeout=seconds,
        units_timed_out=len(timeouts),
        units=total,
    )
    err.__cause__ = first
    return err


def close_quietly(obj: Any) -> None:
    """Close a cursor or result on an error or cleanup path, where a second error would hide the first."""
    if obj is None:
        return
    try:
        obj.close()
    except Exception:  # noqa: S110 - already on an error or cleanup path
        pass
