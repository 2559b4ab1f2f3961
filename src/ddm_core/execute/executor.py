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

import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ddm_core.errors import ConfigError, DdmError
from ddm_core.execute.cross_node import run_cross_node
from ddm_core.execute.endpoints import Endpoints
from ddm_core.execute.engine import Engine
from ddm_core.execute.mysql_connect import MATCHED_ROWS
from ddm_core.execute.pools import Borrowed, EndpointPool, PoolRegistry, PoolStats
from ddm_core.execute.result import Result
from ddm_core.execute.sent import SentUnit
from ddm_core.execute.sent_many import SentMany
from ddm_core.execute.session_state import refuse_unpinned
from ddm_core.execute.shared import DEFAULT, DualWriteKey, Lane, one_pinned_unit, style_of
from ddm_core.execute.threads import ThreadRunner
from ddm_core.execute.transaction import (
    CURRENT_TX, Transaction, begin_transaction, check_mode, close_modes, recover_mode,
)
from ddm_core.execute.watchdog import Watchdog
from ddm_core.metadata.instances.registrar import DEFAULT_TTL, Registrar, drain_for, register_instance
from ddm_core.metadata.model import ShardingConfig
from ddm_core.readwrite import ReadStatus, ReadWriteSplitter
from ddm_core.route.plan import RouteKind, RoutePlan, RouteUnit
from ddm_core.route.router import Router

if TYPE_CHECKING:
    from ddm_core.execute.observer import StatementObserver

__all__ = ["Executor", "DEFAULT", "DualWriteKey", "as_router"]

log = logging.getLogger("ddm_core.execute")


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
        transaction_mode: What :meth:`transaction` opens by default: ``"local"``
            or ``"xa"`` (docs/xa.md).
        xa_recover_on_start: Finish XA branches left prepared by a crashed
            coordinator now (``None``: the configuration's ``xa.recoverOnStart``).
        read_your_writes: ``"window"``, ``"gtid"`` or ``"off"`` for every data
            source with replicas (``None``: each data source's ``readWrite``
            setting; a ``with read_your_writes(...)`` block overrides both;
            docs/readwrite.md).
        replica_monitor: Run the replica lag monitor thread (``False``: replicas
            are checked only by ``replica_status(refresh=True)``).
        matched_rows: On MySQL and MariaDB, an UPDATE's row count is the rows it
            matched (``CLIENT_FOUND_ROWS``: Connector/J's default, SQLAlchemy's
            expectation, what SQLite and PostgreSQL count), not the rows it
            changed (PyMySQL's default); a data source URL's own
            ``useAffectedRows`` wins (docs/sqlalchemy.md#row-counts).
        clock: Monotonic seconds for read-your-writes windows, lag recovery
            steps and circuit-breaker waits (tests inject one; default ``time.monotonic``).
        instance_role: Over a :class:`~ddm_core.metadata.ConfigHolder` following a shared
            configuration center (table, Redis, etcd), register this executor in the center's
            instance registry as ``"executor"`` or ``"proxy"`` (``None``: do not;
            docs/operations.md#instance-registry). A heartbeat thread keeps the record; the
            statement path never waits on it. A version taken is reported once the statements
            begun before the switch are over (at the latest ``timeout`` seconds after it).
        instance_ttl: Seconds the registry keeps the record after the last heartbeat.

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
        matched_rows: bool = False,
        clock: Callable[[], float] | None = None,
        instance_role: str | None = "executor",
        instance_ttl: float = DEFAULT_TTL,
    ) -> None:
        self.transaction_mode = check_mode(transaction_mode)
        self.matched_rows = matched_rows
        if max_concurrency < 1 or full_route_concurrency < 1:
            raise ConfigError(
                f"Executor max_concurrency and full_route_concurrency must be >= 1, not {max_concurrency} and {full_route_concurrency}"
            )
        router = as_router(config_or_router)
        if load_schema:
            from ddm_core.execute.schema_load import load_schemas

            router.set_schemas(load_schemas(router.config))
        self.engine = Engine(
            router, timeout=timeout, allow_partial=allow_partial, stream=stream, fetch_batch=fetch_batch,
            drain_limit=drain_limit, cancel_grace=cancel_grace,
        )  # fmt: skip
        self._watchdog = Watchdog()
        self._pools = PoolRegistry(self._watchdog, MATCHED_ROWS if matched_rows else None)
        # Replicas: balancer, read-your-writes, lag monitor, breakers (docs/readwrite.md).
        self._split = ReadWriteSplitter(
            self._pools, lambda: router.config, mode=read_your_writes, clock=clock, monitor=replica_monitor,
            probes=PoolRegistry(self._watchdog),  # the lag monitor's own connections
        )  # fmt: skip
        self.endpoints: Endpoints[EndpointPool] = Endpoints(self._pools, self._split, lambda: router.config)
        self.runner = ThreadRunner(
            self.engine, self.endpoints, max_concurrency=max_concurrency,
            full_route_concurrency=full_route_concurrency, pipeline=pipeline,
        )  # fmt: skip
        self._closed = False
        if xa_recover_on_start if xa_recover_on_start is not None else self.config.xa.recover_on_start:
            self._recover_xa_at_start()
        #: This process in the configuration center's instance registry (``None``: not registered).
        self.instance: Registrar | None = (
            register_instance(config_or_router, role=instance_role, ttl=instance_ttl, idle=self._idle_for(instance_role),
                              drain_s=drain_for(timeout))
            if instance_role else None
        )  # fmt: skip

    def _idle_for(self, role: str) -> Callable[[float], bool]:
        """When the registry may report a version this executor took at ``since`` (``time.monotonic``):
        once no connection is borrowed, or every statement running now was armed after ``since`` (its
        deadline minus the executor's ``timeout``). A proxy's event loop also runs statements on
        connections of its own, which neither counts: it waits the whole statement deadline."""
        if role == "proxy":
            return lambda since: False

        def drained(since: float) -> bool:
            if self.borrowed() == 0:
                return True
            earliest, timeout = self._watchdog.earliest_deadline(), self.timeout
            return timeout is not None and earliest is not None and earliest - timeout >= since

        return drained

    # -- configuration ------------------------------------------------------------------

    @property
    def router(self) -> Router:
        return self.engine.router

    @property
    def config(self) -> ShardingConfig:
        """The configuration version in use (follows a ``ConfigHolder``)."""
        return self.engine.router.config

    # Settings, as passed (the engine and the runner hold them).

    @property
    def timeout(self) -> float | None:
        return self.engine.timeout

    @timeout.setter
    def timeout(self, seconds: float | None) -> None:
        """The per-statement deadline of statements begun from now on (``None``: none). The instance registry
        keeps waiting at least as long as before for statements begun under an earlier, longer deadline."""
        self.engine.timeout = seconds or None
        if self.instance is not None:
            self.instance.drain_s = max(self.instance.drain_s, drain_for(seconds))

    @property
    def allow_partial(self) -> bool:
        return self.engine.allow_partial

    @property
    def stream(self) -> bool | None:
        return self.engine.stream

    @property
    def fetch_batch(self) -> int:
        return self.engine.fetch_batch

    @property
    def max_concurrency(self) -> int:
        return self.runner.max_concurrency

    @property
    def full_route_concurrency(self) -> int:
        return self.runner.full_route_concurrency

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
            plan = self.engine.router.route(sql, params)
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
        pool: EndpointPool | None = None,
    ) -> Result:
        """Run an already routed plan outside any transaction (for tools that route themselves).

        Args:
            plan: From :meth:`Router.route`.
            caller_style: ``"qmark"`` when the statement was written with ``?``
                (its units then use ``?``), else ``"format"``.
            pool: For a one-unit plan, the pool :meth:`loop_pool` chose for it when :meth:`send_single`
                could not send it (no idle connection): it runs there, so a read's endpoint is chosen once.
        """
        refuse_unpinned(plan)  # a session change must not stay on a shared pooled connection
        engine = self.engine
        stmt = engine.begin(plan, caller_style, timeout, allow_partial)
        try:
            if len(plan.units) == 1 and plan.kind is not RouteKind.FULL and engine.streams_choice(stream) is not True:
                result = self.runner.run_single(stmt, pool)
            elif plan.kind is RouteKind.CROSS_NODE:
                result = run_cross_node("threads", self, plan, None, timeout)
            else:
                result = self.runner.run(stmt, stream)
        except BaseException as exc:
            engine.failed(plan, stmt.started, exc)
            raise
        if plan.dual:  # a migration's dual write, once the old location took the write
            self.runner.run_dual(plan, caller_style, stmt.deadline)
        return engine.observed(plan, stmt.started, result)

    def send_single(
        self, plan: RoutePlan, *, caller_style: str = "format", timeout: Any = DEFAULT,
        send: Callable[[Any, RouteUnit], None] | None = None, pool: EndpointPool | None = None,
        on: Borrowed | None = None,
    ) -> SentUnit | None:  # fmt: skip
        """Send a one-unit plan outside any transaction and return at once; ``None``: it cannot go so now.

        The caller waits for ``fileno`` to be readable (an event loop: without a thread) and calls
        :meth:`SentUnit.finish`, which returns what :meth:`execute_plan` would. ``None`` (nothing
        sent) when the plan is not one unit, is a dual write, writes to a data source with replicas,
        is a ``gtid`` read that must ask servers first, its driver cannot split a statement, the
        executor streams every statement, its pool has no idle connection that needs no check, or
        the replica chosen for it turns out unreachable (marked out of reads): then
        :meth:`execute_plan` runs it (docs/proxy.md). A read on a data source with replicas goes to
        the splitter's choice in this context (:meth:`loop_pool`; docs/readwrite.md).
        ``send(raw, unit)``: sends the unit itself instead of the driver's ``send`` (a relayed binary
        execute, docs/proxy.md#relayed-results); its answer is then relayed, never read by ``finish``.
        ``pool``: the one :meth:`loop_pool` gave for this plan (the choice is made once). ``on``: a transaction's
        pinned connection to send it on instead (docs/proxy.md#transactions-on-the-loop): its releases are the
        caller's to keep from the pool.
        """
        return self.runner.send_single(self.engine.begin(plan, caller_style, timeout, None), send, pool, on)

    def send_many(self, plan: RoutePlan, *, caller_style: str = "format", timeout: Any = DEFAULT,
                  on: Mapping[str, Borrowed] | None = None) -> SentMany | None:  # fmt: skip
        """Send every unit of a multi-unit read and return at once; ``None``: nothing sent, :meth:`execute_plan`
        (or the transaction) runs it.

        The caller waits for each :class:`~ddm_core.execute.sent_many.SentPart`'s socket to be readable (an
        event loop: without a thread), reads its answer and settles the :class:`SentMany`, which gives back
        the connections and raises what :meth:`execute_plan` would (docs/proxy.md#multi-unit-reads-on-the-loop).
        ``None`` when the plan is not a multi-unit read (a write, a dual write, a FULL route, a cross-node
        read), accepts partial results, the executor streams every statement, a data source has replicas or
        a driver that cannot split a statement or have its answer read off its socket, or a primary has no
        idle connection that needs no check.
        ``on``: a transaction's pinned connection per data source (each a loan whose releases are the
        caller's to keep from the pool): a data source's units go on it one after another.
        """
        if on is None:
            refuse_unpinned(plan)
        return self.runner.send_many(self.engine.begin(plan, caller_style, timeout, None), on)

    def loop_pool(self, plan: RoutePlan) -> EndpointPool | None:
        """Where a one-unit ``plan`` sent without a thread goes: the primary's pool, or for a read on a data
        source with replicas the splitter's choice now — read-your-writes, replica health and breakers of
        this context — or ``None`` when only :meth:`execute_plan` may run it (see :meth:`send_single`)."""
        return self.runner.loop_pool(plan)

    def set_observer(self, observer: StatementObserver | None) -> None:
        """Tell ``observer`` about every statement :meth:`execute_plan` runs (``None``: nobody; docs/observability.md).

        If it has ``dual_write_done`` / ``dual_write_failed``
        (:class:`~ddm_core.execute.observer.DualWriteObserver`), it hears of every dual-write unit too.
        """
        self.engine.set_observer(observer)

    def dual_writes(self) -> dict[DualWriteKey, int]:
        """Dual-write units (a migration's writes at the new location) that ran, per ``(data source, logic table)``."""
        return self.engine.dual.counts()

    def dual_write_failures(self) -> dict[DualWriteKey, int]:
        """Dual-write units that failed or were skipped, per ``(data source, logic table)``.

        Each was logged (at most once per data source per 10 s) and never raised:
        the migration's catch-up repairs the new location (docs/migration.md#dual-write).
        """
        return self.engine.dual.failures()

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
        if mode is None and self.transaction_mode == "local":
            return Transaction(self)  # the default path: no lookup
        return begin_transaction(self, mode or self.transaction_mode)

    def recover_xa(self) -> Any:
        """Finish or roll back XA branches left prepared by crashed coordinators (docs/xa.md#recovery).

        Returns:
            A :class:`ddm_core.xa.RecoveryReport`.
        """
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
        return self.engine.slow_sql.count

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
        if self.instance is not None:
            self.instance.close()
        close_modes(self)  # on the pools, before they go (XA's deferred COMMITTED marks)
        self._split.close()  # the lag monitor borrows from the pools: stop it first
        self.runner.close()
        self._watchdog.stop()
        self._pools.dispose()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Executor data_sources={list(self.config.data_sources)} timeout={self.timeout}>"

    # -- what transactions run on (transaction.TransactionHost) --------------------------------

    def primary_pool(self, data_source: str) -> EndpointPool:
        """The pool of ``data_source``'s primary (transactions, XA, tools that borrow directly)."""
        return self.endpoints.primary(data_source)

    def deadline_of(self, timeout: Any, started: float) -> float | None:
        """The ``time.monotonic()`` deadline of a statement started at ``started`` (``None``: none)."""
        return self.engine.deadline_of(timeout, started)

    def run_dual_unit(self, unit: RouteUnit, pinned: Borrowed | None, style: str, deadline: float | None) -> None:
        """Run one dual-write unit on its data source's primary (``pinned``: a transaction's connection)."""
        self.runner.run_dual_unit(unit, pinned, style, deadline)

    def dual_write_done(self, plan: RoutePlan, unit: RouteUnit) -> None:
        """Count a dual-write unit that ran (and tell the observer)."""
        self.engine.dual.done(plan, unit)

    def dual_write_failed(self, plan: RoutePlan, unit: RouteUnit, error: BaseException, what: str = "") -> None:
        """Count, log (throttled per data source) and report a dual-write unit that failed; never raises."""
        self.engine.dual.failed(plan, unit, error, what)

    def run_pinned(self, plan: RoutePlan, lanes: list[Lane], *, style: str, timeout: Any) -> Result:
        """Run ``plan`` on a transaction's lanes (pinned connections): no streaming, no partial results."""
        engine = self.engine
        stmt = engine.begin(plan, style, timeout, False)
        try:
            if one_pinned_unit(plan, lanes):
                result = self.runner.run_pinned_single(stmt, lanes[0])
            else:
                result = self.runner.run(stmt, False, lanes)
        except BaseException as exc:
            engine.failed(plan, stmt.started, exc)
            raise
        return engine.observed(plan, stmt.started, result)


def as_router(source: Any) -> Router:
    """A :class:`Router` over ``source`` (a router, a configuration, a holder, a path, YAML text, a dict)."""
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
