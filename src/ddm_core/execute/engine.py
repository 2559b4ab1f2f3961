"""The statement engine: everything about running a routed plan that does not depend on how I/O is done.

A runner — threads and blocking sockets (:mod:`ddm_core.execute.threads`), or one asyncio loop
(:mod:`ddm_core.aio`) — borrows connections, sends units and reads answers. It asks the
:class:`Engine` everything else, so both runners decide the same way:

* the statement's deadline and whether partial reads are accepted (:meth:`Engine.begin`);
* the SQL a unit sends (paramstyle, the trace comment: :meth:`Engine.unit_sql`);
* whether a multi-unit read streams (:meth:`Engine.should_stream`);
* the :class:`~ddm_core.execute.result.Result` of the lanes' outcomes: errors ranked, timeouts
  combined or accepted as partial, row counts summed, rows merged with the columns' collations
  (:meth:`Engine.assemble`, :meth:`Engine.single_result`);
* the slow-SQL log, the observer and the dual-write counters (:meth:`Engine.observed`,
  :meth:`Engine.failed`, :attr:`Engine.dual`).

The engine never blocks and holds no connection (docs/architecture.md#the-statement-engine).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ddm_core.dialects import INPUT
from ddm_core.errors import PoolTimeoutError, QueryTimeoutError
from ddm_core.execute.collations import ResultCollations
from ddm_core.execute.dual import DualWrites, call_hook
from ddm_core.execute.result import Result, UnitResult
from ddm_core.execute.shared import DEFAULT, Throttle
from ddm_core.execute.slow_sql import SlowSqlLog
from ddm_core.execute.statement import LaneOutcome, Statement, close_quietly, combined_timeout, timeout_error
from ddm_core.execute.trace_comment import TRACE_COMMENT
from ddm_core.merge.engine import merge_results
from ddm_core.merge.memory import MergeMemory
from ddm_core.metadata.model import ShardingConfig
from ddm_core.route.plan import RoutePlan, RouteUnit
from ddm_core.route.router import Router

if TYPE_CHECKING:
    from ddm_core.execute.observer import StatementObserver
    from ddm_core.merge.collation import Collation

__all__ = ["Engine", "SMALL_WINDOW", "each_pool_can_lend", "lend_order", "lend_failed"]

log = logging.getLogger("ddm_core.execute")

#: Rows a merged LIMIT window may span per unit and still be fetched per unit.
SMALL_WINDOW = 1000


class Engine:
    """The runner-independent half of an executor (see the module docstring).

    Args:
        router: Routes statements; its ``config`` is the version in use.
        timeout: Default per-statement deadline in seconds (``None``: none).
        allow_partial: Default of ``allow_partial``.
        stream: ``None`` (choose per statement), ``True`` or ``False``.
        fetch_batch: Rows per round trip when streaming.
        drain_limit: Leftover rows read to keep a connection when a stream is closed early.
        cancel_grace: Seconds waited past the deadline for cancelled units to stop.
    """

    def __init__(
        self,
        router: Router,
        *,
        timeout: float | None,
        allow_partial: bool,
        stream: bool | None,
        fetch_batch: int,
        drain_limit: int,
        cancel_grace: float,
    ) -> None:
        self.router = router
        self.timeout = timeout if timeout else None
        self.allow_partial = allow_partial
        self.stream = stream
        self.fetch_batch = max(1, fetch_batch)
        self.drain_limit = drain_limit
        self.cancel_grace = cancel_grace
        self.dual = DualWrites()
        self.slow_sql = SlowSqlLog(lambda: self.router.config)  # runtime.slowSqlMs: docs/operations.md#slow-sql
        self.observer: StatementObserver | None = None  # ddm_core.observe (docs/observability.md)
        self.collations = ResultCollations()  # string columns' collations per statement, for the merge
        self._merge_hook: Any = None  # MergeMemoryObserver.merge_memory of the observer, if it has one
        self._merge_warn = Throttle(10.0)  # per logic table: a report query repeating must not flood the log

    @property
    def config(self) -> ShardingConfig:
        return self.router.config

    # -- a statement's settings ------------------------------------------------------------

    def seconds_of(self, timeout: Any) -> float | None:
        """A call's ``timeout`` argument as seconds (``DEFAULT``: the executor's; ``None`` or 0: none)."""
        return self.timeout if timeout is DEFAULT else (timeout or None)

    def deadline_of(self, timeout: Any, started: float) -> float | None:
        """The ``time.monotonic()`` deadline of a statement started at ``started`` (``None``: none)."""
        seconds = self.seconds_of(timeout)
        return started + seconds if seconds else None

    def begin(self, plan: RoutePlan, style: str, timeout: Any, allow_partial: bool | None, started: float | None = None) -> Statement:
        """A :class:`Statement` for ``plan``, started now (or at ``started``)."""
        if started is None:
            started = time.monotonic()
        seconds = self.timeout if timeout is DEFAULT else (timeout or None)  # seconds_of, without its frame
        return Statement(
            plan, style, started, seconds, started + seconds if seconds else None,
            self.allow_partial if allow_partial is None else allow_partial,
        )  # fmt: skip

    def streams_choice(self, stream: Any) -> bool | None:
        """A call's ``stream`` argument (``DEFAULT``: the executor's)."""
        return self.stream if stream is DEFAULT else stream

    @staticmethod
    def unit_sql(driver: Any, unit: RouteUnit, style: str) -> str:
        """The SQL a unit sends: in the driver's paramstyle, behind the request's trace comment if any."""
        sql: str = unit.sql if style == driver.native_style else driver.sql_for(unit.sql, style)
        trace = TRACE_COMMENT.get()
        if trace is not None:  # ddm_core.observe.trace(): the request's id in the server's logs
            sql = trace + sql
        return sql

    def should_stream(self, plan: RoutePlan, lanes: Sequence[Any], stream: Any) -> bool:
        """Read a multi-unit SELECT through unbuffered cursors? (the module docstring of executor.py).

        ``lanes``: the thread runner's :class:`Lane` or the asyncio runner's, each with a ``pool``.
        """
        choice = self.streams_choice(stream)
        if choice is False or plan.is_write or plan.statement not in ("select", "show"):
            return False
        if not all(lane.pool.driver.can_stream for lane in lanes):
            return False
        if choice is None:  # decide: stream only where it saves memory
            spec = plan.merge
            if len(lanes) < 2 or (spec.aggregates and not spec.group_by):
                return False  # one unit (no merge to feed), or one row per unit
            if spec.limit is not None and spec.offset + spec.limit <= SMALL_WINDOW:
                return False  # each unit returns at most one page
        # Every streamed unit holds a connection until the merger is done with it:
        # never stream more units into one pool than it can lend at once.
        return each_pool_can_lend(lanes)

    # -- observing ---------------------------------------------------------------------------

    def set_observer(self, observer: StatementObserver | None) -> None:
        """Tell ``observer`` about every statement (``None``: nobody); its optional hooks too."""
        self.dual.observe_with(observer)
        self._merge_hook = getattr(observer, "merge_memory", None)
        self.observer = observer

    def observed(self, plan: RoutePlan, started: float, result: Result) -> Result:
        """A statement finished: the slow-SQL log and the observer hear of it."""
        if plan.statement == "ddl":
            self.collations.clear()  # a column's collation may have changed
        self.slow_sql.observe(started, plan, result)
        if self.observer is not None:
            self.observer.finished(plan, started, result)
        return result

    def observed_rows(self, plan: RoutePlan, started: float, rows: int) -> None:
        """:meth:`observed` of a one-unit read whose ``rows`` were relayed, its :class:`Result` built only when
        someone hears of it (an observer, a slow statement)."""
        if self.observer is None and plan.statement != "ddl" and self.slow_sql.surely_quick(started):
            return
        self.observed(plan, started, Result.counted(rows, None, (), plan.statement))

    def failed(self, plan: RoutePlan, started: float, exc: BaseException) -> None:
        """A statement raised: the observer hears of it."""
        if self.observer is not None:
            self.observer.failed(plan, started, exc)

    # -- results -----------------------------------------------------------------------------

    def single_result(self, plan: RoutePlan, result: UnitResult, describe: Callable[[str], Any]) -> Result:
        """The result of a one-unit plan that ran buffered."""
        if result.description is None:
            statement = plan.statement
            return Result.counted(
                max(result.rowcount, 0), result.lastrowid if statement == "insert" else None,
                plan.generated_keys, statement,
            )  # fmt: skip
        if plan.merge.is_trivial:
            return Result.buffered(result.description, result.rows, statement=plan.statement)
        return self.rows_result(plan, [result], True, describe)

    def assemble(self, stmt: Statement, outcomes: list[LaneOutcome], describe: Callable[[str], Any]) -> Result:
        """The statement's :class:`Result` from its lanes' outcomes.

        The first error that is not a timeout wins; timeouts are combined into one
        :class:`QueryTimeoutError` unless the statement is a read that accepts partial results.
        ``describe``: a data source's pool to ask column collations of (the merge's string order).
        """
        plan = stmt.plan
        results = [pair for outcome in outcomes for pair in outcome.results]
        error, complete = self.failure(stmt, [outcome.error for outcome in outcomes])
        if error is not None:
            for _, r in results:
                close_quietly(r)
            raise error
        results.sort(key=lambda item: item[0])
        ordered = [r for _, r in results]
        if any(r.description is not None for r in ordered) or (not ordered and plan.statement == "select"):
            return self.rows_result(plan, ordered, complete, describe)
        rowcount = sum(r.rowcount for r in ordered if r.rowcount > 0)
        lastrowid = ordered[0].lastrowid if len(plan.units) == 1 and ordered and plan.statement == "insert" else None
        return Result(
            description=None, rows=None, units=ordered, rowcount=rowcount, lastrowid=lastrowid,
            generated_keys=plan.generated_keys, complete=complete, statement=plan.statement,
        )  # fmt: skip

    def failure(self, stmt: Statement, errors: Sequence[BaseException | None]) -> tuple[BaseException | None, bool]:
        """What the units' errors mean for the statement: ``(error to raise or None, complete)``.

        The first error that is not a timeout wins; timeouts are combined into one
        :class:`QueryTimeoutError` unless the statement is a read that accepts partial results
        (then it is ``complete=False``).
        """
        timeouts: list[QueryTimeoutError] = []
        error: BaseException | None = None
        for exc in errors:
            if exc is None:
                continue
            if isinstance(exc, QueryTimeoutError):
                timeouts.append(exc)
            elif error is None:
                error = exc
        if error is None and timeouts and not (stmt.partial_ok and not stmt.plan.is_write):
            error = combined_timeout(timeouts, len(stmt.plan.units), stmt.seconds)
        return error, not timeouts

    def rows_result(
        self, plan: RoutePlan, ordered: list[UnitResult], complete: bool, describe: Callable[[str], Any]
    ) -> Result:
        """Rows: one trivial unit as it came, anything else through the merge engine."""
        if len(ordered) == 1 and plan.merge.is_trivial:
            unit = ordered[0]
            return Result(
                description=unit.description, rows=iter(unit.rows), units=ordered, rowcount=unit.rowcount,
                complete=complete, statement=plan.statement,
            )  # fmt: skip
        memory = MergeMemory(functools.partial(self._merge_memory_done, plan))
        collations = self.column_collations(plan, ordered, describe)
        merged = merge_results(plan.merge, ordered, dialect=self.merge_dialect(plan), memory=memory, collations=collations)
        return Result(
            description=merged.description, rows=merged, units=ordered, rowcount=-1, complete=complete,
            statement=plan.statement,
        )  # fmt: skip

    def column_collations(
        self, plan: RoutePlan, ordered: list[UnitResult], describe: Callable[[str], Any]
    ) -> list[Collation | None] | None:
        """How the merge compares each string column (execute/collations.py); None: no strings compared."""
        first = next((u for u in ordered if u.description and u.sql), None)
        if first is None:
            return None
        try:
            return self.collations.for_merge(plan.merge, first.description, first.data_source, first.sql, describe, None)
        except BaseException:
            for unit in ordered:
                close_quietly(unit)
            raise

    def collations_pending(self, plan: RoutePlan, ordered: list[UnitResult]) -> bool:
        """Would :meth:`assemble` ask a data source for column collations (I/O an event loop runs elsewhere)?"""
        if len(ordered) == 1 and plan.merge.is_trivial:
            return False
        first = next((u for u in ordered if u.description and u.sql), None)
        return first is not None and self.collations.pending(plan.merge, first.description, first.data_source, first.sql)

    def merge_dialect(self, plan: RoutePlan) -> str:
        """The backend whose result types the merge reproduces (the statement's dialect if unknown)."""
        config = self.router.routed_config  # the version the plan was routed under (no reload check again)
        ds = config.data_sources.get(plan.units[0].data_source) if plan.units else None
        return ds.primary.dialect if ds is not None else INPUT

    def _merge_memory_done(self, plan: RoutePlan, memory: MergeMemory) -> None:
        """A merged result closed: warn when it held more than ``runtime.mergeMemoryWarnMb``, tell the observer."""
        over = memory.bytes > self.config.runtime.merge_memory_warn_mb << 20
        if over:
            tables = ", ".join(t.logic_table for t in plan.tables) or plan.statement
            held = self._merge_warn.allow(tables)
            if held is not None:
                log.warning(
                    "a merge over %s held about %d MB (%d rows) at once, above runtime.mergeMemoryWarnMb=%d%s; "
                    "stream it (ORDER BY the group keys, a LIMIT, or a cursor over the shard key)",
                    tables, memory.bytes >> 20, memory.rows, self.config.runtime.merge_memory_warn_mb,
                    f" ({held} more since the last warning)" if held else "",
                )  # fmt: skip
        call_hook(self._merge_hook, plan, memory, over)


def each_pool_can_lend(lanes: Sequence[Any]) -> bool:
    """Can every pool lend a connection to each of its lanes at the same time? (lanes of either runner)"""
    per_pool: dict[int, int] = {}
    for lane in lanes:
        n = per_pool[id(lane.pool)] = per_pool.get(id(lane.pool), 0) + 1
        if n > lane.pool.max_size:
            return False
    return True


def lend_order(lanes: Sequence[Any]) -> list[tuple[Any, list[int]]]:
    """Each pool with the indexes of the lanes it lends to, pools in one fixed order (data source, endpoint).

    A statement takes all its connections of one pool at once, pool after pool in this order, so two
    statements never each hold part of a pool and wait for the rest (docs/operations.md#connection-pools).
    """
    by_pool: dict[int, tuple[Any, list[int]]] = {}
    for i, lane in enumerate(lanes):
        by_pool.setdefault(id(lane.pool), (lane.pool, []))[1].append(i)
    return sorted(by_pool.values(), key=lambda entry: (entry[0].data_source, entry[0].endpoint.name))


def lend_failed(exc: PoolTimeoutError, lane: Any, pool: Any, deadline: float | None) -> BaseException:
    """What a pool's refusal to lend means: the statement's deadline ended the wait, or the acquire timeout did."""
    if deadline is not None and time.monotonic() >= deadline:
        return timeout_error(lane.items[0][1], pool.endpoint.name)
    return exc
