"""``AsyncExecutor``: the executor for asyncio code — same routing, rewriting, merge and errors, no threads.

::

    async with AsyncExecutor("examples/orders.yaml") as ex:
        result = await ex.execute("SELECT * FROM t_order WHERE user_id = %s", (42,))
        rows = await result.fetchall()
        async with ex.transaction():
            await ex.execute("UPDATE t_order SET status = 'paid' WHERE order_id = %s", (7,))

It is the thread :class:`~ddm_core.execute.Executor`'s twin over the same statement engine
(:class:`~ddm_core.execute.engine.Engine`): settings, deadlines, partial results, the merge, the
slow-SQL log, the observer and the dual-write counters are the engine's. The I/O is
:class:`~ddm_core.aio.runner.AsyncRunner`'s, on asyncio pools (:mod:`ddm_core.aio.pools`).
Everything runs on the loop that calls it; create and use one executor per loop
(docs/asyncio.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from ddm_core.errors import ConfigError, DdmError, ExecutionError, QueryTimeoutError
from ddm_core.execute.cross_node import run_cross_node
from ddm_core.execute.engine import Engine
from ddm_core.execute.executor import as_router
from ddm_core.execute.mysql_connect import MATCHED_ROWS
from ddm_core.execute.pools import PoolRegistry, PoolStats
from ddm_core.execute.result import UnitResult
from ddm_core.execute.session_state import refuse_unpinned
from ddm_core.execute.transaction import check_mode, close_modes
from ddm_core.execute.shared import DEFAULT, DualWriteKey, style_of
from ddm_core.execute.endpoints import Endpoints, data_source_of
from ddm_core.aio.merging import can_stream_merges, require_merge_streaming
from ddm_core.aio.pools import AsyncEndpointPool, AsyncPoolRegistry
from ddm_core.aio.result import AsyncResult, InMemoryResult
from ddm_core.aio.runner import AsyncRunner
from ddm_core.aio.transaction import CURRENT_ASYNC_TX, AsyncTransaction
from ddm_core.aio.xa import AsyncXaTransaction, BlockingHost
from ddm_core.metadata.instances.registrar import DEFAULT_TTL, Registrar, drain_for, register_instance
from ddm_core.metadata.model import ShardingConfig
from ddm_core.readwrite import ReadStatus, ReadWriteSplitter
from ddm_core.route.plan import RouteKind, RoutePlan
from ddm_core.route.router import Router
from ddm_core.xa.recovery import recover

if TYPE_CHECKING:
    from ddm_core.execute.observer import StatementObserver

__all__ = ["AsyncExecutor"]

log = logging.getLogger("ddm_core.aio")

_monotonic = time.monotonic


class AsyncExecutor:
    """Runs SQL written against logic tables on the physical data sources, from asyncio code.

    Args:
        config_or_router: What :class:`~ddm_core.execute.Executor` accepts.
        full_route_concurrency: FULL-kind statements that may run at once.
        timeout: Per-statement deadline in seconds (``None``: none).
        allow_partial: Default for :meth:`execute`'s ``allow_partial``.
        stream: ``None`` (choose per statement), ``True`` or ``False``; see :meth:`execute`.
        fetch_batch: Rows per round trip when streaming.
        drain_limit: Leftover rows read to keep a connection when a stream is closed early.
        cancel_grace: Kept for the engine's contract (a cancelled unit is closed at once here).
        load_schema: Read each sharded table's columns from its first data node before the first
            statement (off the loop, once).
        transaction_mode: ``"local"`` (writes to one data source) or ``"xa"`` (two-phase commit over
            several, docs/xa.md): what :meth:`transaction` opens by default.
        xa_recover_on_start: Finish XA branches left prepared by a crashed coordinator in
            :meth:`warm_up` (``None``: the configuration's ``xa.recoverOnStart``).
        read_your_writes: ``"window"``, ``"gtid"`` or ``"off"`` for every data source with replicas (``None``:
            each data source's own setting), as the thread executor's.
        replica_monitor: Run the replica lag monitor (a thread of its own with blocking connections,
            off the statements' path; ``False``: replicas are checked by ``replica_status(refresh=True)``).
        matched_rows: An UPDATE's row count is the rows it matched, not the rows it changed, on MySQL
            and MariaDB (as the thread executor's ``matched_rows``).
        clock: Monotonic seconds for read-your-writes windows and breaker waits (tests inject one).
        instance_role / instance_ttl: Register in the configuration center's instance registry,
            as :class:`~ddm_core.execute.Executor` does (docs/operations.md#instance-registry).

    Raises:
        ConfigError: a setting out of range, or an unknown ``transaction_mode``.
    """

    def __init__(
        self,
        config_or_router: Any,
        *,
        full_route_concurrency: int = 4,
        timeout: float | None = 3.0,
        allow_partial: bool = False,
        stream: bool | None = None,
        fetch_batch: int = 500,
        drain_limit: int = 10_000,
        cancel_grace: float = 1.0,
        load_schema: bool = True,
        transaction_mode: str = "local",
        xa_recover_on_start: bool | None = None,
        read_your_writes: str | None = None,
        replica_monitor: bool = True,
        matched_rows: bool = False,
        clock: Callable[[], float] | None = None,
        instance_role: str | None = "executor",
        instance_ttl: float = DEFAULT_TTL,
    ) -> None:
        _transaction_class(transaction_mode)  # an unknown mode is refused before any I/O
        self.transaction_mode = transaction_mode
        self.matched_rows = matched_rows
        if full_route_concurrency < 1:
            raise ConfigError(f"AsyncExecutor full_route_concurrency must be >= 1, not {full_route_concurrency}")
        router = as_router(config_or_router)
        self.engine = Engine(
            router, timeout=timeout, allow_partial=allow_partial, stream=stream, fetch_batch=fetch_batch,
            drain_limit=drain_limit, cancel_grace=cancel_grace,
        )  # fmt: skip
        self._pools = AsyncPoolRegistry(MATCHED_ROWS if matched_rows else None)
        # Blocking connections of their own, off the statements' path: the lag monitor's probes, and the
        # merge's column collations, asked once per statement shape (execute/collations.py).
        self._describe_pools = PoolRegistry()
        self._split = ReadWriteSplitter(
            self._pools, lambda: router.config, mode=read_your_writes, clock=clock, monitor=replica_monitor,
            probes=self._describe_pools,
        )  # fmt: skip
        endpoints: Endpoints[AsyncEndpointPool] = Endpoints(self._pools, self._split, lambda: router.config)
        self.runner = AsyncRunner(
            self.engine, endpoints, full_route_concurrency=full_route_concurrency, describe=self._describe_pool
        )
        self._schema_pending = load_schema
        self._schema_lock: asyncio.Lock | None = None
        self._closed = False
        #: The configuration and blocking pools (off the loop) that XA recovery and the log's tools use.
        self.xa_host = BlockingHost(lambda: router.config, self._describe_pool)
        self._recover_pending = self.config.xa.recover_on_start if xa_recover_on_start is None else xa_recover_on_start
        #: This process in the configuration center's instance registry (``None``: not registered);
        #: its heartbeat is a thread of its own, never the event loop.
        self.instance: Registrar | None = (
            register_instance(config_or_router, role=instance_role, ttl=instance_ttl,
                              idle=lambda since: self.borrowed() == 0,
                              drain_s=drain_for(timeout))
            if instance_role else None
        )  # fmt: skip

    # -- configuration --------------------------------------------------------------------------

    @property
    def router(self) -> Router:
        return self.engine.router

    @property
    def config(self) -> ShardingConfig:
        return self.engine.router.config

    @property
    def timeout(self) -> float | None:
        return self.engine.timeout

    # -- statements -------------------------------------------------------------------------------

    async def execute(
        self,
        sql: str,
        params: Any = None,
        *,
        timeout: float | None = DEFAULT,
        allow_partial: bool | None = None,
        stream: bool | None = DEFAULT,
    ) -> AsyncResult:
        """Route and run one statement (in the open ``async with executor.transaction()`` of this context, if any).

        Rows come back in memory (read with ``await result.fetchall()`` or ``async for``), except a read
        that streams (``stream=True``, or the executor's choice as on the thread runner): its rows are
        read from the units as they are iterated, concatenated or merged (ORDER BY, GROUP BY, DISTINCT,
        LIMIT across units), each unit holding its connection until the result is read or closed.

        Raises:
            What :meth:`ddm_core.execute.Executor.execute` raises; a cancelled call re-raises
            :class:`asyncio.CancelledError` after killing its statement on the server.
        """
        if self._schema_pending:
            await self.load_schema()
        plan = self._route(sql, params)  # not self.route(): one coroutine fewer a statement
        tx = CURRENT_ASYNC_TX.get()
        if tx is not None and tx.executor is self:
            return await tx.execute_plan(plan, caller_style=style_of(sql), timeout=timeout)
        pool = self._plain_pool(plan, stream)
        if pool is None:
            return await self.execute_plan(
                plan, caller_style=style_of(sql), timeout=timeout, allow_partial=allow_partial, stream=stream
            )
        # What execute_plan() does for the common statement, here: one coroutine fewer a statement.
        style = style_of(sql)
        refuse_unpinned(plan)
        started = _monotonic()
        try:
            deadline = self.engine.deadline_of(timeout, started)
            answer = await self.runner.run_unit(plan.units[0], pool, None, style, deadline)
        except BaseException as exc:
            return self._unit_failed(plan, style, timeout, allow_partial, started, exc)
        return self._in_memory(plan, started, answer)

    async def route(self, sql: str, params: Any = None) -> RoutePlan:
        """Route ``sql`` (the sharded tables' columns read first if they are not yet: :meth:`load_schema`).

        Raises:
            RoutingError: the statement cannot be routed (logged, graded as the thread executor does).
        """
        if self._schema_pending:
            await self.load_schema()
        return self._route(sql, params)

    def _route(self, sql: str, params: Any) -> RoutePlan:
        try:
            return self.engine.router.route(sql, params)
        except DdmError as exc:  # graded: a caller's bug at ERROR, a configuration problem at WARNING
            log.log(exc.log_level, "statement refused: %s", exc)
            raise

    async def execute_plan(
        self,
        plan: RoutePlan,
        *,
        caller_style: str = "format",
        timeout: float | None = DEFAULT,
        allow_partial: bool | None = None,
        stream: bool | None = DEFAULT,
    ) -> AsyncResult:
        """Run an already routed plan outside any transaction."""
        if self._closed:
            raise ExecutionError("the executor is closed")
        if self._schema_pending:
            await self.load_schema()
        refuse_unpinned(plan)
        if plan.cross_node is not None:
            return await run_cross_node("asyncio", self, plan, None, timeout)  # type: ignore[no-any-return]
        engine, runner = self.engine, self.runner
        pool = self._plain_pool(plan, stream)
        if pool is not None:  # the common statement: what run_single() does for it, without its choices
            started = _monotonic()
            try:
                deadline = engine.deadline_of(timeout, started)
                answer = await runner.run_unit(plan.units[0], pool, None, caller_style, deadline)
            except BaseException as exc:
                return self._unit_failed(plan, caller_style, timeout, allow_partial, started, exc)
            return self._in_memory(plan, started, answer)
        stmt = engine.begin(plan, caller_style, timeout, allow_partial)
        try:
            single = len(plan.units) == 1 and plan.kind is not RouteKind.FULL
            if single and engine.streams_choice(stream) is not True:  # first: a one-unit read never streams by default
                result = await runner.run_single(stmt)
            elif self._streams(plan, stream):
                streamed = await runner.stream(stmt)
                engine.observed(plan, stmt.started, streamed.result)
                return streamed
            elif single:
                result = await runner.run_single(stmt)
            else:
                result = await runner.run(stmt)
        except BaseException as exc:
            engine.failed(plan, stmt.started, exc)
            raise
        if plan.dual:  # a migration's dual write, once the old location took the write
            await runner.run_dual(plan, caller_style, stmt.deadline)
        return AsyncResult(engine.observed(plan, stmt.started, result))

    def _plain_pool(self, plan: RoutePlan, stream: Any) -> AsyncEndpointPool | None:
        """The pool of a plan that runs as one unit, not streamed, on a data source without replicas, its rows as
        they came and no dual write after it, on an open executor (``None``: the general way, execute_plan's)."""
        units = plan.units
        if len(units) != 1 or plan.kind is RouteKind.FULL or plan.dual or plan.cross_node is not None:
            return None
        engine = self.engine
        if (engine.stream if stream is DEFAULT else stream) is True or not plan.merge.is_trivial or self._closed:
            return None
        # routed_config: the version route() just synced to, without a second check (the general way reads config)
        return self.runner.endpoints.plain_primary(units[0].data_source, engine.router.routed_config)

    def _unit_failed(self, plan: RoutePlan, style: str, timeout: Any, allow_partial: bool | None, started: float,
                     exc: BaseException) -> AsyncResult:  # fmt: skip
        """A plain one-unit plan raised ``exc``: a timeout is raised worded for the statement, or is a read's partial
        (empty) result; anything else is raised as it is. The observer hears of it, as in execute_plan()."""
        engine = self.engine
        try:
            if not isinstance(exc, QueryTimeoutError):
                raise exc
            result = self.runner.unit_timed_out(engine.begin(plan, style, timeout, allow_partial, started), exc)
        except BaseException as error:
            engine.failed(plan, started, error)
            raise
        return AsyncResult(engine.observed(plan, started, result))

    def _in_memory(self, plan: RoutePlan, started: float, answer: UnitResult) -> AsyncResult:
        """The result of a plain one-unit plan (``Engine.single_result``'s, without the ``Result`` underneath unless
        an observer or the slow-SQL log hears of it)."""
        engine = self.engine
        if answer.description is None:
            statement = plan.statement
            result = InMemoryResult(None, None, max(answer.rowcount, 0), statement,
                                    answer.lastrowid if statement == "insert" else None, plan.generated_keys)  # fmt: skip
        else:  # the drivers' rows are tuples already (UnitAnswer)
            result = InMemoryResult(answer.description, answer.rows, answer.rowcount, plan.statement)
        if engine.observer is not None or plan.statement == "ddl" or not engine.slow_sql.surely_quick(started):
            engine.observed(plan, started, result.result)
        return result

    def _streams(self, plan: RoutePlan, stream: Any) -> bool:
        """Stream this read? As the thread runner decides (docs/asyncio.md#streaming)."""
        choice = self.engine.streams_choice(stream)
        if choice is False or (choice is None and len(plan.units) < 2):
            return False
        if not plan.merge.is_trivial and not can_stream_merges():  # greenlet missing: asked for, refused by name
            if choice is True:
                require_merge_streaming()
            return False
        return self.engine.should_stream(plan, self.runner.driver_lanes(plan), stream)

    def transaction(self, mode: str | None = None) -> AsyncTransaction:
        """A transaction: ``async with executor.transaction() as tx: ...`` (commit on success, else rollback).

        Args:
            mode: ``"local"`` (writes to one data source) or ``"xa"`` (two-phase commit over several,
                docs/xa.md); default: the executor's ``transaction_mode``.

        Raises:
            ConfigError: an unknown mode.
        """
        if mode is None and self.transaction_mode == "local":
            return AsyncTransaction(self)  # the default path: no lookup
        if _transaction_class(mode or self.transaction_mode) is AsyncXaTransaction:
            return AsyncXaTransaction(self, self.xa_host)
        return AsyncTransaction(self)

    async def recover_xa(self) -> Any:
        """Finish or roll back XA branches left prepared by crashed coordinators (docs/xa.md#recovery).

        Runs in a thread, on blocking connections of its own (:attr:`xa_host`).

        Returns:
            A :class:`ddm_core.xa.RecoveryReport`.
        """
        return await asyncio.to_thread(recover, self.xa_host)

    # -- observing ----------------------------------------------------------------------------------

    def set_observer(self, observer: StatementObserver | None) -> None:
        """Tell ``observer`` about every statement (``None``: nobody; docs/observability.md)."""
        self.engine.set_observer(observer)

    @property
    def slow_statements(self) -> int:
        return self.engine.slow_sql.count

    def dual_writes(self) -> dict[DualWriteKey, int]:
        return self.engine.dual.counts()

    def dual_write_failures(self) -> dict[DualWriteKey, int]:
        return self.engine.dual.failures()

    def pool_stats(self) -> dict[str, PoolStats]:
        """Per data source: idle, borrowed, open, borrows, timeouts (the asyncio pools)."""
        return self._pools.stats()

    def endpoint_stats(self) -> list[PoolStats]:
        """One :class:`PoolStats` per endpoint pool created so far."""
        return self._pools.endpoint_stats()

    def borrowed(self) -> int:
        """Connections borrowed right now (0 when nothing is running)."""
        return sum(s.borrowed for s in self._pools.stats().values())

    async def warm_up(self) -> dict[str, int]:
        """Open ``min_idle`` connections on every primary now; endpoint name → idle connections.

        With ``xa_recover_on_start`` (or ``xa.recoverOnStart``), XA recovery runs first, once: a data
        source that is down is reported in the log, not raised.
        """
        if self._recover_pending:
            self._recover_pending = False
            await self._recover_xa_at_start()
        out = {}
        for name in self.config.data_sources:
            pool = self.runner.primary(name)
            out[pool.endpoint.name] = await pool.warm_up()
        return out

    def replica_status(self, *, refresh: bool = False) -> dict[str, ReadStatus]:
        """Per data source with replicas: each replica's state, weight, lag and breaker, where reads went.

        Args:
            refresh: Check every replica now (one lag-monitor round, blocking: call it off the loop,
                e.g. ``await asyncio.to_thread(executor.replica_status, refresh=True)``).
        """
        if refresh:
            self._split.check_now()
        return self._split.status()

    async def settle(self) -> None:
        """Wait until the server-side cancels of cancelled statements have run."""
        await self.runner.settle()

    async def close(self) -> None:
        """Wait for pending cancels, close every idle connection; later statements are refused."""
        if self._closed:
            return
        self._closed = True
        if self.instance is not None:
            await asyncio.to_thread(self.instance.close)  # joins the heartbeat, removes the record
        await self.runner.settle()
        await asyncio.to_thread(close_modes, self.xa_host)  # XA's deferred COMMITTED marks, on the blocking pools
        await asyncio.to_thread(self._split.close)  # the lag monitor's thread joins
        await self._pools.dispose()
        if self._describe_pools.pools():
            await asyncio.to_thread(self._describe_pools.dispose)

    async def __aenter__(self) -> AsyncExecutor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncExecutor data_sources={list(self.config.data_sources)} timeout={self.timeout}>"

    # -- internals ----------------------------------------------------------------------------------

    async def load_schema(self) -> None:
        """Read each sharded table's columns from its first data node, once, off the loop.

        The thread executor does it when it starts (``load_schema=True``); this one before its first
        statement is routed (INSERTs without a column list and string values of integer shard
        columns route on them). Call it at start-up to take it off the first request.
        """
        if self._schema_lock is None:
            self._schema_lock = asyncio.Lock()
        async with self._schema_lock:
            if not self._schema_pending:
                return
            from ddm_core.execute.schema_load import load_schemas

            router = self.engine.router
            router.set_schemas(await asyncio.to_thread(load_schemas, router.config))
            self._schema_pending = False

    async def _recover_xa_at_start(self) -> None:
        try:
            report = await self.recover_xa()
        except DdmError as exc:
            log.warning("XA recovery at start failed: %s", exc)
            return
        if report.unreachable or report.kept:
            log.warning("XA recovery at start: %s", report.summary())

    def _describe_pool(self, data_source: str) -> Any:
        ds = data_source_of(self.config, data_source)
        return self._describe_pools.pool(ds, ds.primary)


def _transaction_class(mode: str) -> type[AsyncTransaction]:
    """The asyncio transaction of a registered mode (``ConfigError`` names the known ones)."""
    return AsyncXaTransaction if check_mode(mode) == "xa" else AsyncTransaction
