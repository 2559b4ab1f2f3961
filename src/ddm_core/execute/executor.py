"""The executor: route a statement, run its units on pooled connections, merge, return a Result.

``Executor(config_or_router).execute(sql, params)``:

1. route (``Router.route``, plan cache keyed by SQL text);
2. pick a connection per unit: reads go to a replica (weighted random, or as the
   data source's ``load_balancer`` says) unless the plan ``is_write``, a hint
   forced the primary, or a transaction is open; inside a transaction every
   unit of a data source runs on that data source's pinned connection;
3. run: a single unit runs on the caller's thread with no extra hop; several
   buffered units on MySQL / MariaDB are pipelined on the caller's thread too
   (every unit sent on its own connection, then the answers read in turn:
   docs/operations.md#multi-unit-statements); the rest fan out over a bounded
   thread pool (``max_concurrency``); FULL-kind plans also pass a semaphore
   (``full_route_concurrency``, 4: docs/operations.md#full-routes);
4. enforce the per-statement deadline (``timeout``, 3 s): past it the statement
   is cancelled (``KILL QUERY`` / ``interrupt()``) and
   :class:`~ddm_core.errors.QueryTimeoutError` is raised — or, with
   ``allow_partial``, the rows of the units that finished in time come back
   with ``result.complete == False`` (reads only: a write that timed out always
   raises);
5. merge (:func:`ddm_core.merge.merge_results`) lazily and hand back a
   :class:`~ddm_core.execute.result.Result`.
6. a migration's dual writes (``plan.dual``): once the units succeeded, each dual unit
   runs on its data source's primary within the same deadline; a failure is counted
   (:meth:`Executor.dual_write_failures`) and logged, never raised (docs/migration.md#dual-write).

Connections go back to their pools on every path: success, driver error,
timeout, a server that went away, a result abandoned or closed early
(docs/operations.md#connection-pools). Driver errors are mapped (:mod:`ddm_core.execute.driver_errors`) and
chained.

Data sources with replicas go through :mod:`ddm_core.readwrite` (docs/readwrite.md):
read-your-writes (``window`` / ``gtid``), lag-aware weights from a monitor
thread, the primary cap, circuit breakers per endpoint, and one retry of a read
whose replica went away; their pools carry ``split``, a data source without
replicas pays one attribute test per unit.

Streaming: a multi-unit SELECT whose units are not bounded by a small LIMIT
is read through server-side / unbuffered cursors (PyMySQL ``SSCursor``;
sqlite3 cursors step lazily), so memory stays bounded by the merger, not by
the shards' row counts. Each such unit keeps its connection until its rows
are read or the result is closed; the deadline covers the statement up to its
first batch of rows. Everything else (single units, DML, LIMIT-bounded or
aggregate-only units, anything inside a transaction) is fetched per unit and
its connection returned before ``execute`` returns. ``stream=True`` /
``False`` overrides the choice per call or per executor.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import logging
import os
import threading
import time
from contextvars import copy_context
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ddm_core._text import shorten_sql
from ddm_core.dialects import INPUT
from ddm_core.errors import ConfigError, DdmError, ExecutionError, PoolTimeoutError, QueryTimeoutError
from ddm_core.execute.collations import ResultCollations
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.pools import Borrowed, EndpointPool, PoolRegistry, PoolStats, discard_on
from ddm_core.execute.result import Result, StreamRows, UnitResult
from ddm_core.execute.sent import SentUnit
from ddm_core.execute.session_state import refuse_unpinned
from ddm_core.execute.shared import CURRENT_TX, DEFAULT, DualWriteKey, Lane, Throttle, dual_table, style_of
from ddm_core.execute.slow_sql import SlowSqlLog
from ddm_core.execute.trace_comment import TRACE_COMMENT
from ddm_core.execute.watchdog import Guard, Watchdog
from ddm_core.merge.memory import MergeMemory
from ddm_core.metadata.migration import routing_data_sources
from ddm_core.metadata.model import DataSource, ShardingConfig
from ddm_core.readwrite import ReadStatus, ReadWriteSplitter
from ddm_core.route.plan import RouteKind, RoutePlan, RouteUnit
from ddm_core.route.router import Router

if TYPE_CHECKING:
    from ddm_core.merge.collation import Collation
    from ddm_core.execute.observer import StatementObserver
    from ddm_core.execute.transaction import Transaction

__all__ = ["Executor", "DEFAULT", "DualWriteKey"]

log = logging.getLogger("ddm_core.execute")


#: Rows a merged LIMIT window may span per unit and still be fetched per unit.
_SMALL_WINDOW = 1000


@dataclass(slots=True)
class _LaneOutcome:
    results: list[tuple[int, UnitResult]] = field(default_factory=list)
    error: BaseException | None = None


class Executor:
    """Runs SQL written against logic tables on the physical data sources.

    Args:
        config_or_router: A :class:`~ddm_core.Router`, a
            :class:`~ddm_core.metadata.model.ShardingConfig`, a
            :class:`~ddm_core.metadata.ConfigHolder` (hot reload), or anything
            :func:`~ddm_core.load_config` accepts (a path, YAML text, a dict).
        max_concurrency: Threads running units of multi-unit statements (a
            global cap of about 10; more units queue).
        full_route_concurrency: FULL-kind statements (no usable shard key) that
            may run at once (docs/operations.md#full-routes). Waiting for a slot counts
            toward the statement's timeout.
        timeout: Per-statement deadline in seconds (``None``: none).
        allow_partial: Default for :meth:`execute`'s ``allow_partial``.
        stream: ``None`` (choose per statement, see the module docstring),
            ``True`` or ``False``.
        fetch_batch: Rows per round trip when streaming.
        drain_limit: Leftover rows read to keep a connection when a streamed
            unit is closed early; with more left, the connection is discarded.
        cancel_grace: Seconds a fan-out waits past the deadline for cancelled
            units to stop before giving up on them (they still return their
            connections when they do stop).
        pipeline: Run a buffered multi-unit statement on MySQL / MariaDB data
            sources by sending every unit, then reading the answers, on the
            caller's thread (docs/operations.md#multi-unit-statements);
            ``False``: fan out over the worker threads.
        load_schema: Read each sharded table's columns from its first data node
            now, for INSERTs without a column list and string values of integer
            shard columns (:mod:`ddm_core.execute.schema_load`; a data source
            that is down is logged and skipped).
        read_your_writes: ``"window"``, ``"gtid"`` or ``"off"`` for every data
            source with replicas (``None``: each data source's ``readWrite``
            setting; a ``with read_your_writes(...)`` block overrides both;
            docs/readwrite.md).
        replica_monitor: Run the replica lag monitor thread (``False``: replicas
            are checked only by ``replica_status(refresh=True)``).
        clock: Monotonic seconds for read-your-writes windows, lag recovery
            steps and circuit-breaker waits (tests inject one; default ``time.monotonic``).

    The executor is thread-safe: share one per process. Close it (or use it
    as a context manager) to stop its threads and close idle connections.
    """

    def __init__(
        self,
        config_or_router: Any,
        *,
        max_concurrency: int = 10,
        full_route_concurrency: int = 4,
        timeout: float | None = 3.0,
        allow_partial: bool = False,
        stream: bool | None = None,
        fetch_batch: int = 500,
        drain_limit: int = 10_000,
        cancel_grace: float = 1.0,
        pipeline: bool = True,
        load_schema: bool = True,
        transaction_mode: str = "local",
        xa_recover_on_start: bool | None = None,
        read_your_writes: str | None = None,
        replica_monitor: bool = True,
        clock: Callable[[], float] | None = None,
    ) -> None:
        from ddm_core.execute.transaction import check_mode

        self.transaction_mode = check_mode(transaction_mode)  # what transaction() opens by default (docs/xa.md)
        if max_concurrency < 1 or full_route_concurrency < 1:
            raise ConfigError(
                f"Executor max_concurrency and full_route_concurrency must be >= 1, not {max_concurrency} and {full_route_concurrency}"
            )
        self._router = _as_router(config_or_router)
        if load_schema:
            from ddm_core.execute.schema_load import load_schemas

            self._router.set_schemas(load_schemas(self._router.config))
        self.max_concurrency = max_concurrency
        self.full_route_concurrency = full_route_concurrency
        self.timeout = timeout if timeout else None
        self.allow_partial = allow_partial
        self.stream = stream
        self.fetch_batch = max(1, fetch_batch)
        self.drain_limit = drain_limit
        self.cancel_grace = cancel_grace
        self.pipeline = pipeline
        self._watchdog = Watchdog()
        self._pools = PoolRegistry(self._watchdog)
        # Data source and primary pool by name, for the config version in use: the hot path skips the lookups.
        self._primaries: tuple[ShardingConfig | None, dict[str, tuple[DataSource, EndpointPool]]] = (None, {})
        self._full_slots = threading.BoundedSemaphore(full_route_concurrency)
        self._slow_sql = SlowSqlLog(lambda: self._router.config)  # runtime.slowSqlMs: docs/operations.md#slow-sql
        self._observer: StatementObserver | None = None  # ddm_core.observe (docs/observability.md)
        # A migration's dual writes (plan.dual): counters, the observer's optional hooks, throttled warnings.
        self._dual_lock = threading.Lock()
        self._dual_done: dict[DualWriteKey, int] = {}
        self._dual_failed: dict[DualWriteKey, int] = {}
        self._dual_hooks: tuple[Any, Any] = (None, None)
        self._dual_warn = Throttle(10.0)
        self._merge_hook: Any = None  # MergeMemoryObserver.merge_memory of the observer, if it has one
        self._merge_warn = Throttle(10.0)  # per logic table: a report query repeating must not flood the log
        self._collations = ResultCollations()  # string columns' collations per statement, for the merge
        self._threads: cf.ThreadPoolExecutor | None = None
        self._threads_lock = threading.Lock()
        # Replicas: balancer, read-your-writes, lag monitor, breakers (docs/readwrite.md).
        self._split = ReadWriteSplitter(
            self._pools, lambda: self._router.config, mode=read_your_writes, clock=clock, monitor=replica_monitor,
            probes=PoolRegistry(self._watchdog),  # the lag monitor's own connections
        )  # fmt: skip
        self._closed = False
        if xa_recover_on_start if xa_recover_on_start is not None else self.config.xa.recover_on_start:
            self._recover_xa_at_start()

    # -- configuration ------------------------------------------------------------------

    @property
    def router(self) -> Router:
        return self._router

    @property
    def config(self) -> ShardingConfig:
        """The configuration version in use (follows a ``ConfigHolder``)."""
        return self._router.config

    # -- public API ------------------------------------------------------------------------

    def execute(
        self,
        sql: str,
        params: Any = None,
        *,
        timeout: float | None = DEFAULT,
        allow_partial: bool | None = None,
        stream: bool | None = DEFAULT,
    ) -> Result:
        """Route and run one statement.

        Inside ``with executor.transaction():`` (same thread / context) the
        statement runs in that transaction.

        Args:
            sql: SQL against logic tables, ``%s`` / ``%(name)s`` / ``?`` placeholders.
            params: Its parameters (sequence, or mapping for ``%(name)s``).
            timeout: Seconds for this statement (``None``: no deadline);
                default: the executor's.
            allow_partial: Return what arrived when units time out
                (``result.complete`` is then ``False``) instead of raising.
            stream: Override the streaming choice for this statement.

        Returns:
            A :class:`Result` — close it, read it to the end, or use ``with``.

        Raises:
            RoutingError: the statement cannot be routed (see :mod:`ddm_core.errors`).
            QueryTimeoutError: past the deadline (and no partial result accepted).
            PoolTimeoutError: no connection free within the acquire timeout.
            DataSourceUnavailableError: a data source refused or lost the connection.
            DuplicateKeyError: a unique key was violated.
            CrossShardTransactionError: inside a transaction, a write to a second data source.
            SessionStateError: the statement would change a pooled connection's session, or is
                refused everywhere (docs/operations.md#session-state); nothing was sent.
            ExecutionError: any other driver error (names data source and statement).
        """
        try:
            plan = self._router.route(sql, params)
        except DdmError as exc:  # graded: a caller's bug at ERROR, a configuration problem at WARNING
            log.log(exc.log_level, "statement refused: %s", exc)
            raise
        tx = CURRENT_TX.get()
        if tx is not None and tx.executor is self:
            return tx.execute_plan(plan, caller_style=style_of(sql), timeout=timeout)
        return self.execute_plan(
            plan, caller_style=style_of(sql), timeout=timeout, allow_partial=allow_partial, stream=stream
        )

    def execute_plan(
        self,
        plan: RoutePlan,
        *,
        caller_style: str = "format",
        timeout: float | None = DEFAULT,
        allow_partial: bool | None = None,
        stream: bool | None = DEFAULT,
    ) -> Result:
        """Run an already routed plan outside any transaction (for tools that route themselves).

        Args:
            plan: From :meth:`Router.route`.
            caller_style: ``"qmark"`` when the statement was written with ``?``
                (its units then use ``?``), else ``"format"``.
        """
        refuse_unpinned(plan)  # a session change must not stay on a shared pooled connection
        started = time.monotonic()
        try:
            if len(plan.units) == 1 and plan.kind is not RouteKind.FULL and (self.stream if stream is DEFAULT else stream) is not True:
                result = self._run_single(
                    plan, style=caller_style, timeout=timeout, allow_partial=allow_partial, started=started
                )
            else:
                result = self._run(
                    plan, style=caller_style, timeout=timeout, allow_partial=allow_partial, stream=stream, started=started
                )
        except BaseException as exc:
            if self._observer is not None:
                self._observer.failed(plan, started, exc)
            raise
        if plan.dual:  # a migration's dual write, once the old location took the write
            self._run_dual(plan, caller_style, timeout, started)
        return self._observed(plan, started, result)

    def _observed(self, plan: RoutePlan, started: float, result: Result) -> Result:
        """A statement finished: the slow-SQL log and the observer hear of it."""
        if plan.statement == "ddl":
            self._collations.clear()  # a column's collation may have changed
        self._slow_sql.observe(started, plan, result)
        if self._observer is not None:
            self._observer.finished(plan, started, result)
        return result

    def set_observer(self, observer: StatementObserver | None) -> None:
        """Tell ``observer`` about every statement :meth:`execute_plan` runs (``None``: nobody; docs/observability.md).

        If it has ``dual_write_done`` / ``dual_write_failed``
        (:class:`~ddm_core.execute.observer.DualWriteObserver`), it hears of every dual-write unit too.
        """
        self._dual_hooks = (getattr(observer, "dual_write_done", None), getattr(observer, "dual_write_failed", None))
        self._merge_hook = getattr(observer, "merge_memory", None)
        self._observer = observer

    def dual_writes(self) -> dict[DualWriteKey, int]:
        """Dual-write units (a migration's writes at the new location) that ran, per ``(data source, logic table)``."""
        with self._dual_lock:
            return dict(self._dual_done)

    def dual_write_failures(self) -> dict[DualWriteKey, int]:
        """Dual-write units that failed or were skipped, per ``(data source, logic table)``.

        Each was logged (at most once per data source per 10 s) and never raised:
        the migration's catch-up repairs the new location (docs/migration.md#dual-write).
        """
        with self._dual_lock:
            return dict(self._dual_failed)

    def transaction(self, mode: str | None = None) -> Transaction:
        """A transaction: ``with executor.transaction() as tx: ...``.

        Inside the block, :meth:`execute` on this thread runs in it (``tx.execute``
        works from anywhere). Commits when the block ends normally, rolls back
        when it raises. See :class:`~ddm_core.execute.transaction.Transaction`.

        Args:
            mode: ``"local"`` (writes to one data source) or ``"xa"`` (two-phase
                commit over several, docs/xa.md); default: the executor's
                ``transaction_mode``.
        """
        from ddm_core.execute.transaction import Transaction, begin_transaction

        if mode is None and self.transaction_mode == "local":
            return Transaction(self)  # the default path: no lookup
        return begin_transaction(self, mode or self.transaction_mode)

    def recover_xa(self) -> Any:
        """Finish or roll back XA branches left prepared by crashed coordinators (docs/xa.md#recovery).

        Returns:
            A :class:`ddm_core.xa.RecoveryReport`.
        """
        from ddm_core.execute.transaction import recover_mode

        return recover_mode(self, "xa")

    def _recover_xa_at_start(self) -> None:
        # A shard that is down must not stop the service from starting: report and go on.
        try:
            report = self.recover_xa()
        except DdmError as exc:
            log.warning("XA recovery at start failed: %s", exc)
            return
        if report.unreachable or report.kept:
            log.warning("XA recovery at start: %s", report.summary())

    @property
    def slow_statements(self) -> int:
        """Statements so far that took at least ``runtime.slowSqlMs`` (each logged to ``ddm_core.slow_sql``)."""
        return self._slow_sql.count

    def pool_stats(self) -> dict[str, PoolStats]:
        """Per data source (every endpoint summed): idle, borrowed, open, borrows, timeouts."""
        return self._pools.stats()

    def endpoint_stats(self) -> list[PoolStats]:
        """One :class:`PoolStats` per endpoint pool created so far."""
        return self._pools.endpoint_stats()

    def borrowed(self) -> int:
        """Connections borrowed right now, over every pool (0 when nothing is running)."""
        return sum(s.borrowed for s in self._pools.endpoint_stats())

    def replica_status(self, *, refresh: bool = False) -> dict[str, ReadStatus]:
        """Per data source with replicas: each replica's state, weight now, lag, breaker and last
        error, whether every replica is out, and where reads went (docs/readwrite.md#status).

        Args:
            refresh: Check every replica now (one lag-monitor round) before reporting.
        """
        if refresh:
            self._split.check_now()
        return self._split.status()

    def warm_up(self) -> dict[str, int]:
        """Open ``min_idle`` connections on every endpoint now (instead of on first use).

        Returns:
            Endpoint name → idle connections afterwards.

        Raises:
            DataSourceUnavailableError: an endpoint cannot be reached.
        """
        out = {}
        for ds in self.config.data_sources.values():
            for endpoint in ds.endpoints:
                out[endpoint.name] = self._pools.pool(ds, endpoint).warm_up()
        return out

    def close(self) -> None:
        """Stop the worker threads and the watchdog; close every idle connection."""
        if self._closed:
            return
        self._closed = True
        self._split.close()  # the lag monitor borrows from the pools: stop it first
        if self._threads is not None:
            self._threads.shutdown(wait=True, cancel_futures=True)
        self._watchdog.stop()
        self._pools.dispose()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Executor data_sources={list(self.config.data_sources)} timeout={self.timeout}>"

    # -- internals used by Transaction -------------------------------------------------------

    def primary_pool(self, data_source: str) -> EndpointPool:
        return self._pool_of(data_source, read=False)

    def deadline_of(self, timeout: Any, started: float) -> float | None:
        """The ``time.monotonic()`` deadline of a statement started at ``started`` (``None``: none)."""
        seconds = self.timeout if timeout is DEFAULT else (timeout or None)
        return started + seconds if seconds else None

    def run_dual_unit(self, unit: RouteUnit, pinned: Borrowed | None, style: str, deadline: float | None) -> None:
        """Run one dual-write unit on its data source's primary (``pinned``: a transaction's connection).

        Raises whatever the unit raised (mapped); the caller counts it with :meth:`dual_write_failed`.
        """
        pool = self.primary_pool(unit.data_source)
        if pinned is None and pool.split is not None:  # replicas: read-your-writes hears of the write
            pool.split.run(self._run_unit, unit, pool, style, False, deadline, write=True)
        else:
            self._run_unit(unit, pool, pinned, style, False, deadline)

    def dual_write_done(self, plan: RoutePlan, unit: RouteUnit) -> None:
        """Count a dual-write unit that ran (and tell the observer)."""
        key = DualWriteKey(unit.data_source, dual_table(plan, unit))
        with self._dual_lock:
            self._dual_done[key] = self._dual_done.get(key, 0) + 1
        _call_hook(self._dual_hooks[0], plan, unit)

    def dual_write_failed(self, plan: RoutePlan, unit: RouteUnit, error: BaseException, what: str = "") -> None:
        """Count, log (throttled per data source) and report a dual-write unit that failed; never raises.

        Args:
            what: What it means for the transaction, appended to the warning.
        """
        key = DualWriteKey(unit.data_source, dual_table(plan, unit))
        with self._dual_lock:
            self._dual_failed[key] = self._dual_failed.get(key, 0) + 1
        held = self._dual_warn.allow(unit.data_source)
        if held is not None:
            physical = ", ".join(p for _, p in unit.tables) or key.table
            log.warning(
                "dual write to %s on data source %r failed, the old location has the write and the migration's "
                "catch-up repairs the new one%s%s: %s: %s",
                physical, unit.data_source, f"; {what}" if what else "",
                f" ({held} more dual-write failures on {unit.data_source!r} since the last warning)" if held else "",
                type(error).__name__, error,
            )  # fmt: skip
        _call_hook(self._dual_hooks[1], plan, unit, error)

    def _run_dual(self, plan: RoutePlan, style: str, timeout: Any, started: float) -> None:
        """Outside transactions: each dual unit autocommitted on its primary, within the statement's deadline."""
        deadline = self.deadline_of(timeout, started)
        for unit in plan.dual:
            try:
                self.run_dual_unit(unit, None, style, deadline)
            except Exception as exc:  # never the caller's problem: the old location has the write
                self.dual_write_failed(plan, unit, exc)
            else:
                self.dual_write_done(plan, unit)

    def run_pinned(self, plan: RoutePlan, lanes: list[Lane], *, style: str, timeout: Any) -> Result:
        """Run ``plan`` on a transaction's lanes (pinned connections): no streaming, no partial results."""
        started = time.monotonic()
        try:
            result = self._run(
                plan, style=style, timeout=timeout, allow_partial=False, stream=False, lanes=lanes, started=started
            )
        except BaseException as exc:
            if self._observer is not None:
                self._observer.failed(plan, started, exc)
            raise
        return self._observed(plan, started, result)

    # -- running a plan ------------------------------------------------------------------------

    def _run_single(
        self, plan: RoutePlan, *, style: str, timeout: Any, allow_partial: bool | None, started: float
    ) -> Result:
        """One unit outside a transaction, buffered: no lanes, no fan-out, no merge."""
        if self._closed:
            raise ExecutionError("the executor is closed")
        seconds = self.timeout if timeout is DEFAULT else (timeout or None)
        deadline = started + seconds if seconds else None
        unit = plan.units[0]
        try:
            pool = self._pool_of(unit.data_source, read=not (plan.is_write or plan.force_primary))
            if pool.split is None:
                result = self._run_unit(unit, pool, None, style, False, deadline)
            else:  # replicas: record the write for read-your-writes, retry a read a lost replica failed
                result = pool.split.run(self._run_unit, unit, pool, style, False, deadline, write=plan.is_write)
        except QueryTimeoutError as exc:  # allow_partial decides, as for any plan
            partial_ok = self.allow_partial if allow_partial is None else allow_partial
            return self._assemble(plan, plan.units, [_LaneOutcome(error=exc)], partial_ok, seconds)
        return self._single_result(plan, result)

    def _single_result(self, plan: RoutePlan, result: UnitResult) -> Result:
        if result.description is None:
            statement = plan.statement
            return Result.counted(
                max(result.rowcount, 0), result.lastrowid if statement == "insert" else None,
                plan.generated_keys, statement,
            )
        if plan.merge.is_trivial:
            return Result.buffered(result.description, result.rows, statement=plan.statement)
        return self._rows_result(plan, [result], True)

    # -- sent without waiting ---------------------------------------------------------------

    def send_single(self, plan: RoutePlan, *, caller_style: str = "format", timeout: Any = DEFAULT) -> SentUnit | None:
        """Send a one-unit plan outside any transaction and return at once; ``None``: it cannot go so now.

        The caller waits for ``fileno`` to be readable (an event loop: without a thread) and calls
        :meth:`SentUnit.finish`, which returns what :meth:`execute_plan` would. ``None`` (nothing
        sent) when the plan is not one unit, is a dual write, its data source has replicas, its
        driver cannot split a statement, the executor streams every statement, or its pool has
        no idle connection that needs no check: then :meth:`execute_plan` runs it (docs/proxy.md).
        """
        if self._closed or len(plan.units) != 1 or plan.kind is RouteKind.FULL or plan.dual or self.stream is True:
            return None
        refuse_unpinned(plan)
        unit = plan.units[0]
        pool = self._pool_of(unit.data_source, read=not (plan.is_write or plan.force_primary))
        if pool.split is not None or not pool.driver.can_pipeline:
            return None
        borrowed = pool.lend_idle()
        if borrowed is None:
            return None
        started = time.monotonic()
        seconds = self.timeout if timeout is DEFAULT else (timeout or None)
        deadline = started + seconds if seconds else None
        driver = pool.driver
        # By then the answer has begun (past the deadline, as a pipelined read, the cancel grace more),
        # even if the data source is frozen and never answers the cancel either.
        if deadline is not None:
            answer_by: float | None = deadline + self.cancel_grace
        else:
            bound = driver.socket_timeout(pool.endpoint)
            answer_by = None if bound is None else started + bound
        sql = self._unit_sql(driver, unit, caller_style)
        guard = borrowed.guard if deadline is not None else None
        cursor = None
        try:
            try:
                if guard is not None and deadline is not None:
                    guard.arm(deadline)
                cursor = driver.send(borrowed.raw, sql, unit.params)
                fileno = driver.fileno(borrowed.raw)
            except BaseException as exc:
                error = self._unit_failed(exc, unit, pool, borrowed, True, cursor, guard, sql)
                if error is exc:
                    raise
                raise error from exc
        except BaseException as exc:
            if self._observer is not None:
                self._observer.failed(plan, started, exc)
            raise
        return SentUnit(self, plan, unit, pool, borrowed, cursor, guard, sql, started, deadline, seconds, fileno, answer_by)

    def finish_sent(self, sent: SentUnit) -> Result:
        """:meth:`SentUnit.finish`: the answer read, the connection given back, the statement observed."""
        plan, unit, pool, borrowed, cursor, guard = sent.plan, sent.unit, sent.pool, sent.borrowed, sent.cursor, sent.guard
        try:
            try:
                wait = None if sent.answer_by is None else max(0.001, sent.answer_by - time.monotonic())
                try:
                    pool.driver.receive(borrowed.raw, cursor, wait)
                    read = self._read_unit(unit, borrowed, cursor, False, sent.sql)
                except BaseException as exc:
                    error = self._unit_failed(exc, unit, pool, borrowed, True, cursor, guard, sent.sql)
                    if error is exc:
                        raise
                    raise error from exc
                result = self._single_result(plan, self._unit_done(unit, pool, borrowed, True, cursor, guard, read))
            except QueryTimeoutError as exc:  # allow_partial decides, as in execute_plan
                result = self._assemble(plan, plan.units, [_LaneOutcome(error=exc)], self.allow_partial, sent.seconds)
        except BaseException as exc:
            if self._observer is not None:
                self._observer.failed(plan, sent.started, exc)
            raise
        return self._observed(plan, sent.started, result)

    def _run(
        self,
        plan: RoutePlan,
        *,
        style: str,
        timeout: Any,
        allow_partial: bool | None,
        stream: Any,
        started: float,
        lanes: list[Lane] | None = None,
    ) -> Result:
        """Any plan; ``lanes`` given: a transaction's pinned lanes (never streamed). ``started``: its monotonic()."""
        if self._closed:
            raise ExecutionError("the executor is closed")
        seconds = self.timeout if timeout is DEFAULT else (timeout or None)
        deadline = started + seconds if seconds else None
        partial_ok = self.allow_partial if allow_partial is None else allow_partial
        units = plan.units
        pinned = lanes is not None
        if lanes is None:
            lanes = self._lanes(plan)
        do_stream = False if pinned else self._should_stream(plan, lanes, stream)
        full = plan.kind is RouteKind.FULL
        if full:
            self._enter_full_route(deadline, plan)
        released = False
        try:
            if len(lanes) == 1:
                outcome = self._run_lane(lanes[0], style, do_stream, deadline)
                outcomes = [outcome]
            elif not do_stream and not pinned and self._can_pipeline(lanes):
                outcomes = self._pipeline(lanes, style, deadline, self._lend_all(lanes, deadline))
            else:
                lent = self._lend_all(lanes, deadline) if do_stream else None
                outcomes = self._fan_out(lanes, style, do_stream, deadline, release_full=full, lent=lent)
                released = full  # the fan-out releases the slot once every lane has stopped
        finally:
            if full and not released:
                self._full_slots.release()
        result = self._assemble(plan, units, outcomes, partial_ok, seconds)
        if plan.is_write and self._split.tracks(plan):  # read-your-writes after a multi-unit or transactional write
            self._split.wrote(plan.data_sources)
        return result

    def _lanes(self, plan: RoutePlan) -> list[Lane]:
        read = not (plan.is_write or plan.force_primary)
        return [Lane(self._pool_of(unit.data_source, read=read), [(i, unit)]) for i, unit in enumerate(plan.units)]

    def _pool_of(self, data_source: str, *, read: bool) -> EndpointPool:
        """The pool a unit on ``data_source`` borrows from: the splitter's choice for reads, else the primary's."""
        config = self.config
        version, known = self._primaries
        if version is not config:  # first use, or a reloaded configuration
            known = {}
            self._primaries = (config, known)
        entry = known.get(data_source)
        if entry is None:
            ds = self._data_source(config, data_source)
            if read and ds.replicas:  # the primary's pool is made only once something needs it
                return self._pick_replica(ds)  # type: ignore[no-any-return]
            primary = self._pools.pool(ds, ds.primary)
            if ds.replicas:
                self._split.mark_primary(ds, primary)  # its units run through the splitter
            else:
                primary.split = None  # a reload took the replicas away
                primary.breaker = self._split.breakers.of(ds, ds.primary)  # every endpoint has one
            entry = known[data_source] = (ds, primary)
        ds, primary = entry
        if read and ds.replicas:
            pool: EndpointPool = self._pick_replica(ds)
            return pool
        return primary

    @staticmethod
    def _data_source(config: ShardingConfig, name: str) -> DataSource:
        try:  # during a migration also the target's new data sources (dual writes, shifted reads)
            return routing_data_sources(config)[name]
        except KeyError:
            raise ExecutionError(f"data source {name!r} is not configured", data_source=name) from None

    def _pick_replica(self, ds: DataSource) -> Any:
        """The pool a read on ``ds`` (with replicas) goes to: read-your-writes, lag, breakers, primary cap."""
        return self._split.read_pool(ds)

    def _should_stream(self, plan: RoutePlan, lanes: list[Lane], stream: Any) -> bool:
        choice = self.stream if stream is DEFAULT else stream
        if choice is False or plan.is_write or plan.statement not in ("select", "show"):
            return False
        if not all(lane.pool.driver.can_stream for lane in lanes):
            return False
        if choice is None:  # decide: stream only where it saves memory
            spec = plan.merge
            if len(lanes) < 2 or (spec.aggregates and not spec.group_by):
                return False  # one unit (no merge to feed), or one row per unit
            if spec.limit is not None and spec.offset + spec.limit <= _SMALL_WINDOW:
                return False  # each unit returns at most one page
        # Every streamed unit holds a connection until the merger is done with it:
        # never stream more units into one pool than it can lend at once.
        return _each_pool_can_lend(lanes)

    @staticmethod
    def _lend_all(lanes: list[Lane], deadline: float | None) -> list[Borrowed]:
        """Every connection a streamed or pipelined statement will hold, taken before any unit runs (one per lane).

        Such units keep their connections at the same time (streamed: until the
        caller is done), so borrowing them one by one lets two statements each
        hold part of a pool and wait for the rest until the acquire timeout.
        Each pool lends its share all at once, pools in one fixed order: no
        statement holds connections while it waits (docs/operations.md#connection-pools).
        """
        by_pool: dict[int, tuple[EndpointPool, list[int]]] = {}
        for i, lane in enumerate(lanes):
            by_pool.setdefault(id(lane.pool), (lane.pool, []))[1].append(i)
        order = sorted(by_pool.values(), key=lambda entry: (entry[0].data_source, entry[0].endpoint.name))
        lent: list[Borrowed | None] = [None] * len(lanes)
        try:
            for pool, indexes in order:
                wait = None if deadline is None else deadline - time.monotonic()
                try:
                    for i, borrowed in zip(indexes, pool.borrow_many(len(indexes), wait)):
                        lent[i] = borrowed
                except PoolTimeoutError as exc:  # the deadline, not the acquire timeout, ended the wait
                    if deadline is not None and time.monotonic() >= deadline:
                        raise Executor._timeout_error(lanes[indexes[0]].items[0][1], pool) from exc
                    raise
        except BaseException:
            for b in lent:
                if b is not None:
                    b.release()
            raise
        return lent  # type: ignore[return-value]  # every slot was filled

    def _enter_full_route(self, deadline: float | None, plan: RoutePlan) -> None:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._full_slots.acquire(timeout=wait):
            tables = ", ".join(t.logic_table for t in plan.tables) or "?"
            raise QueryTimeoutError(
                f"a full-route statement on {tables} waited {wait:g} s for one of the "
                f"{self.full_route_concurrency} full-route slots and timed out",
                timeout=wait,
                full_route_concurrency=self.full_route_concurrency,
            )

    # -- one lane / one unit -----------------------------------------------------------------

    def _run_lane(
        self, lane: Lane, style: str, stream: bool, deadline: float | None, lent: Borrowed | None = None
    ) -> _LaneOutcome:
        """Run a lane's units in order; ``lent``: the connection already taken for its one unit."""
        outcome = _LaneOutcome()
        for index, unit in lane.items:
            try:
                if lane.pool.split is None or lane.pinned is not None:
                    result = self._run_unit(unit, lane.pool, lane.pinned, style, stream, deadline, lent)
                else:  # replicas: a read a lost replica failed runs once more elsewhere (docs/readwrite.md)
                    result = lane.pool.split.run(self._run_unit, unit, lane.pool, style, stream, deadline,
                                                 write=None, lent=lent)  # fmt: skip
                outcome.results.append((index, result))
            except BaseException as exc:
                outcome.error = exc
                break
        return outcome

    def _run_unit(
        self,
        unit: RouteUnit,
        pool: EndpointPool,
        pinned: Borrowed | None,
        style: str,
        stream: bool,
        deadline: float | None,
        lent: Borrowed | None = None,
    ) -> UnitResult:
        """Run one unit; ``pinned``: a transaction's connection, ``lent``: one taken for it (released here)."""
        driver = pool.driver
        if deadline is not None and deadline <= time.monotonic():
            if lent is not None:
                lent.release()
            raise self._timeout_error(unit, pool)
        held = pinned if pinned is not None else lent
        if held is not None:
            borrowed = held
        else:
            try:
                borrowed = pool.borrow(deadline)
            except PoolTimeoutError as exc:  # the deadline, not the acquire timeout, ended the wait
                if deadline is not None and time.monotonic() >= deadline:
                    raise self._timeout_error(unit, pool) from exc
                raise
        own = pinned is None
        sql = self._unit_sql(driver, unit, style)
        guard: Guard | None = None
        if deadline is not None:
            guard = borrowed.guard
            if guard is not None:
                guard.arm(deadline)
        cursor = None
        try:
            cursor = driver.cursor(borrowed.raw, stream)
            cursor.execute(sql, unit.params)
            result = self._read_unit(unit, borrowed, cursor, stream, sql)
        except BaseException as exc:
            error = self._unit_failed(exc, unit, pool, borrowed, own, cursor, guard, sql)
            if error is exc:
                raise
            raise error from exc
        return self._unit_done(unit, pool, borrowed, own, cursor, guard, result)

    @staticmethod
    def _unit_sql(driver: Any, unit: RouteUnit, style: str) -> str:
        sql: str = driver.sql_for(unit.sql, style)
        trace = TRACE_COMMENT.get()
        if trace is not None:  # ddm_core.observe.trace(): the request's id in the server's logs
            sql = trace + sql
        return sql

    def _read_unit(self, unit: RouteUnit, borrowed: Borrowed, cursor: Any, stream: bool, sql: str) -> UnitResult:
        """An executed cursor's outcome: row count, all rows, or (streaming) the first batch and the rest to come."""
        description = cursor.description
        if description is None:
            return UnitResult(unit.data_source, None, (), cursor.rowcount, getattr(cursor, "lastrowid", None) or None)
        if not stream:
            rows = cursor.fetchall()
            return UnitResult(unit.data_source, description, rows, len(rows), sql=sql)
        first = cursor.fetchmany(self.fetch_batch)
        if len(first) < self.fetch_batch:  # everything fitted in the first batch
            return UnitResult(unit.data_source, description, first, len(first), sql=sql)
        rows_iter = StreamRows(cursor, borrowed, first, self.fetch_batch, self.drain_limit, sql)
        return UnitResult(unit.data_source, description, rows_iter, -1, sql=sql)

    def _unit_failed(
        self,
        exc: BaseException,
        unit: RouteUnit,
        pool: EndpointPool,
        borrowed: Borrowed,
        own: bool,
        cursor: Any,
        guard: Guard | None,
        sql: str,
    ) -> BaseException:
        """A unit raised: disarm, close, give the connection back (discarded if in doubt); the error to raise."""
        fired = guard.disarm() if guard is not None else False
        _close_quietly(cursor)
        if own:
            borrowed.release(discard=fired or discard_on(exc))
        if fired:
            return self._timeout_error(unit, pool)
        if isinstance(exc, Exception):
            return map_driver_error(exc, data_source=unit.data_source, endpoint=pool.endpoint.name, sql=sql)
        return exc

    def _unit_done(
        self,
        unit: RouteUnit,
        pool: EndpointPool,
        borrowed: Borrowed,
        own: bool,
        cursor: Any,
        guard: Guard | None,
        result: UnitResult,
    ) -> UnitResult:
        """A unit answered: disarm; a buffered one closes its cursor and gives its connection back."""
        fired = guard.disarm() if guard is not None else False
        streaming = isinstance(result.rows, StreamRows)
        if fired:  # the cancel may have cut the rows short (a killed SLEEP even "succeeds")
            if streaming:
                result.rows.close()
            else:
                _close_quietly(cursor)
                if own:
                    borrowed.release(discard=True)
            raise self._timeout_error(unit, pool)
        if not streaming:
            if pool.driver.closes_buffered:
                _close_quietly(cursor)
            if own:
                borrowed.release()
        return result

    @staticmethod
    def _timeout_error(unit: RouteUnit, pool: EndpointPool) -> QueryTimeoutError:
        return QueryTimeoutError(
            f"statement on data source {unit.data_source!r} exceeded its deadline and was cancelled: "
            f"{shorten_sql(unit.sql)!r}",
            data_source=unit.data_source,
            endpoint=pool.endpoint.name,
            sql=unit.sql,
        )

    # -- pipelining ---------------------------------------------------------------------------

    def _can_pipeline(self, lanes: list[Lane]) -> bool:
        """Buffered units, one per lane, each pool able to lend its share at once, drivers that can split."""
        if not self.pipeline:
            return False
        for lane in lanes:
            pool = lane.pool
            if not pool.driver.can_pipeline or pool.split is not None or len(lane.items) != 1:
                return False
        return _each_pool_can_lend(lanes)

    def _pipeline(self, lanes: list[Lane], style: str, deadline: float | None, lent: list[Borrowed]) -> list[_LaneOutcome]:
        """Send every unit on its own connection, then read the answers in turn, all on the caller's thread.

        The servers work on every unit at once while this thread writes and
        reads; no worker thread, no hand-off (docs/operations.md#multi-unit-statements).
        Past the deadline each answer is waited for at most ``cancel_grace``
        more, as a fan-out would wait for its lanes.
        """
        outcomes = [_LaneOutcome() for _ in lanes]
        in_flight: list[tuple[int, Any, Guard | None, str]] = []
        try:
            for i, lane in enumerate(lanes):
                unit, pool, borrowed = lane.items[0][1], lane.pool, lent[i]
                sql = self._unit_sql(pool.driver, unit, style)
                guard = borrowed.guard if deadline is not None else None
                cursor = None
                try:
                    if deadline is not None and deadline <= time.monotonic():
                        raise self._timeout_error(unit, pool)
                    if guard is not None and deadline is not None:
                        guard.arm(deadline)
                    cursor = pool.driver.send(borrowed.raw, sql, unit.params)
                except BaseException as exc:
                    outcomes[i].error = self._unit_failed(exc, unit, pool, borrowed, True, cursor, guard, sql)
                    continue
                in_flight.append((i, cursor, guard, sql))
            for i, cursor, guard, sql in in_flight:
                (index, unit), pool, borrowed = lanes[i].items[0], lanes[i].pool, lent[i]
                wait = None if deadline is None else max(0.001, deadline - time.monotonic() + self.cancel_grace)
                try:
                    pool.driver.receive(borrowed.raw, cursor, wait)
                    result = self._read_unit(unit, borrowed, cursor, False, sql)
                except BaseException as exc:
                    outcomes[i].error = self._unit_failed(exc, unit, pool, borrowed, True, cursor, guard, sql)
                    continue
                try:
                    outcomes[i].results.append((index, self._unit_done(unit, pool, borrowed, True, cursor, guard, result)))
                except BaseException as exc:
                    outcomes[i].error = exc
        except BaseException:  # interrupted between units: what is still lent is in an unknown state
            for _, _, guard, _ in in_flight:
                if guard is not None:
                    guard.disarm()
            for b in lent:
                b.release(discard=True)
            raise
        return outcomes

    # -- fan-out -----------------------------------------------------------------------------

    def _pool_threads(self) -> cf.ThreadPoolExecutor:
        threads = self._threads
        if threads is None:
            with self._threads_lock:
                if self._threads is None:
                    self._threads = cf.ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="ddm-exec")
                threads = self._threads
        return threads

    def _fan_out(
        self,
        lanes: list[Lane],
        style: str,
        stream: bool,
        deadline: float | None,
        *,
        release_full: bool,
        lent: list[Borrowed] | None = None,
    ) -> list[_LaneOutcome]:
        threads = self._pool_threads()
        futures: list[cf.Future[_LaneOutcome]] = []
        try:
            for i, lane in enumerate(lanes):
                own = lent[i] if lent is not None else None
                # The caller's context (ddm_core.observe.trace's id) goes with each lane to its worker thread.
                futures.append(threads.submit(copy_context().run, self._run_lane, lane, style, stream, deadline, own))
        except BaseException:  # the threads are shut down: what never runs gives its connection back
            for i, lane in enumerate(lanes):
                never_runs = i >= len(futures) or futures[i].cancel()
                if never_runs and lent is not None:
                    lent[i].release()
            raise
        if release_full:
            _release_when_all_done(futures, self._full_slots.release)
        wait = None if deadline is None else max(0.0, deadline - time.monotonic()) + self.cancel_grace
        done, _ = cf.wait(futures, timeout=wait)
        outcomes = []
        for i, (lane, future) in enumerate(zip(lanes, futures)):
            if future in done and not future.cancelled():
                outcomes.append(future.result())
                continue
            if future.cancel() and lent is not None:  # not started yet: it never will
                lent[i].release()
            # Still running past deadline + grace (a cancel that did not land):
            # whatever it produces is closed when it finishes.
            future.add_done_callback(_close_outcome)
            unit = lane.items[0][1]
            outcomes.append(_LaneOutcome(error=self._timeout_error(unit, lane.pool)))
        return outcomes

    # -- assembling the result ------------------------------------------------------------------

    def _assemble(
        self,
        plan: RoutePlan,
        units: Sequence[RouteUnit],
        outcomes: list[_LaneOutcome],
        partial_ok: bool,
        seconds: float | None,
    ) -> Result:
        results: list[tuple[int, UnitResult]] = []
        timeouts: list[QueryTimeoutError] = []
        error: BaseException | None = None
        for outcome in outcomes:
            results.extend(outcome.results)
            exc = outcome.error
            if exc is None:
                continue
            if isinstance(exc, QueryTimeoutError):
                timeouts.append(exc)
            elif error is None:
                error = exc
        if error is None and timeouts and not (partial_ok and not plan.is_write):
            error = self._combined_timeout(timeouts, len(units), seconds)
        if error is not None:
            for _, r in results:
                _close_quietly(r)
            raise error
        results.sort(key=lambda item: item[0])
        ordered = [r for _, r in results]
        complete = not timeouts
        if any(r.description is not None for r in ordered) or (not ordered and plan.statement == "select"):
            return self._rows_result(plan, ordered, complete)
        rowcount = sum(r.rowcount for r in ordered if r.rowcount > 0)
        lastrowid = ordered[0].lastrowid if len(units) == 1 and ordered and plan.statement == "insert" else None
        return Result(
            description=None,
            rows=None,
            units=ordered,
            rowcount=rowcount,
            lastrowid=lastrowid,
            generated_keys=plan.generated_keys,
            complete=complete,
            statement=plan.statement,
        )

    def _rows_result(self, plan: RoutePlan, ordered: list[UnitResult], complete: bool) -> Result:
        if len(ordered) == 1 and plan.merge.is_trivial:
            unit = ordered[0]
            return Result(
                description=unit.description,
                rows=iter(unit.rows),
                units=ordered,
                rowcount=unit.rowcount,
                complete=complete,
                statement=plan.statement,
            )
        from ddm_core.merge import merge_results

        dialect = self._merge_dialect(plan)
        memory = MergeMemory(functools.partial(self._merge_memory_done, plan))
        collations = self._column_collations(plan, ordered)
        merged = merge_results(plan.merge, ordered, dialect=dialect, memory=memory, collations=collations)
        return Result(
            description=merged.description,
            rows=merged,
            units=ordered,
            rowcount=-1,
            complete=complete,
            statement=plan.statement,
        )

    def _column_collations(self, plan: RoutePlan, ordered: list[UnitResult]) -> list[Collation | None] | None:
        """How the merge compares each string column (execute/collations.py); None: no strings compared."""
        first = next((u for u in ordered if u.description and u.sql), None)
        if first is None:
            return None
        try:
            return self._collations.for_merge(
                plan.merge, first.description, first.data_source, first.sql,
                functools.partial(self._pool_of, read=True), None,
            )  # fmt: skip
        except BaseException:
            for unit in ordered:
                _close_quietly(unit)
            raise

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
        _call_hook(self._merge_hook, plan, memory, over)

    def _merge_dialect(self, plan: RoutePlan) -> str:
        """The backend whose result types the merge reproduces (the statement's dialect if unknown)."""
        ds = self.config.data_sources.get(plan.units[0].data_source) if plan.units else None
        return ds.primary.dialect if ds is not None else INPUT

    def _combined_timeout(self, timeouts: list[QueryTimeoutError], total: int, seconds: float | None) -> QueryTimeoutError:
        if len(timeouts) == 1 and total == 1:
            return timeouts[0]
        sources = sorted({getattr(t, "data_source", "?") for t in timeouts})
        first = timeouts[0]
        err = QueryTimeoutError(
            f"{len(timeouts)} of {total} units exceeded the {seconds:g} s deadline and were cancelled "
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


# -- helpers ------------------------------------------------------------------------------------


def _as_router(source: Any) -> Router:
    if isinstance(source, Router):
        return source
    from ddm_core.metadata import ConfigHolder, load_config

    if isinstance(source, (ShardingConfig, ConfigHolder)):
        return Router(source)
    if isinstance(source, (str, bytes, os.PathLike, Mapping)):
        return Router(load_config(source))
    raise TypeError(
        f"Executor needs a Router, ShardingConfig, ConfigHolder, path, YAML text or dict, got {type(source).__name__}"
    )


def _call_hook(hook: Callable[..., None] | None, *args: Any) -> None:
    if hook is None:
        return
    try:
        hook(*args)
    except Exception as exc:  # an observer must not break the statement
        log.debug("observer hook %r failed: %s", hook, exc)


def _each_pool_can_lend(lanes: list[Lane]) -> bool:
    """Can every pool lend a connection to each of its lanes at the same time?"""
    per_pool: dict[int, int] = {}
    for lane in lanes:
        n = per_pool[id(lane.pool)] = per_pool.get(id(lane.pool), 0) + 1
        if n > lane.pool.max_size:
            return False
    return True


def _close_quietly(obj: Any) -> None:
    if obj is None:
        return
    try:
        obj.close()
    except Exception:  # noqa: S110 - already on an error or cleanup path
        pass


def _close_outcome(future: cf.Future[_LaneOutcome]) -> None:
    if future.cancelled() or future.exception() is not None:
        return
    for _, r in future.result().results:
        _close_quietly(r)


def _release_when_all_done(futures: list[cf.Future[Any]], release: Any) -> None:
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(_: cf.Future[Any]) -> None:
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            release()

    for f in futures:
        f.add_done_callback(one_done)
