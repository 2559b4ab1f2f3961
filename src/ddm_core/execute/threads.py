"""The thread runner: a routed plan run on blocking connections, on the caller's thread where it can be.

* One unit runs on the caller's thread with no extra hop (:meth:`ThreadRunner.run_single`).
* Several buffered units on MySQL / MariaDB are pipelined on the caller's thread too: every unit
  sent on its own connection, then the answers read in turn (docs/operations.md#multi-unit-statements).
* The rest fan out over a bounded thread pool (``max_concurrency``); FULL-kind plans also pass a
  semaphore (``full_route_concurrency``: docs/operations.md#full-routes).
* A one-unit plan can also be *sent* and finished later, once its socket is readable
  (:meth:`ThreadRunner.send_single`: an event loop waits without a thread, docs/proxy.md).

Deadlines are armed on each connection's :class:`~ddm_core.execute.watchdog.Guard`; past one the
statement is cancelled (``KILL QUERY`` / ``interrupt()``). Everything else — the deadline, the
error a failure becomes, the result — is the :class:`~ddm_core.execute.engine.Engine`'s.
Connections go back to their pools on every path (docs/operations.md#connection-pools).
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from contextvars import copy_context
from typing import Any, Callable, Mapping, NoReturn

from ddm_core.errors import DataSourceUnavailableError, ExecutionError, PoolTimeoutError, QueryTimeoutError
from ddm_core.execute.endpoints import Endpoints
from ddm_core.execute.engine import Engine, each_pool_can_lend, lend_failed, lend_order
from ddm_core.execute.pools import Borrowed, EndpointPool, discard_on
from ddm_core.execute.result import Result, StreamRows, UnitResult
from ddm_core.execute.sent import SentUnit
from ddm_core.execute.sent_many import SentMany, SentPart
from ddm_core.execute.session_state import refuse_unpinned
from ddm_core.execute.shared import Lane, Slots
from ddm_core.execute.statement import LaneOutcome, Statement, close_quietly, timeout_error, unit_error
from ddm_core.execute.watchdog import Guard
from ddm_core.metadata.model import ShardingConfig
from ddm_core.execute.trace_comment import TRACE_COMMENT
from ddm_core.readwrite.gtid_check import GtidCheck
from ddm_core.route.plan import RouteKind, RoutePlan, RouteUnit

__all__ = ["ThreadRunner"]

_monotonic = time.monotonic


class ThreadRunner:
    """Runs plans for an :class:`~ddm_core.execute.Executor` on threads (see the module docstring).

    Args:
        engine: The statement engine (settings, results, observer).
        endpoints: Pool choice.
        max_concurrency: Worker threads for fanned-out units.
        full_route_concurrency: FULL-kind statements that may run at once.
        pipeline: Pipeline buffered multi-unit statements on the caller's thread.
    """

    def __init__(
        self, engine: Engine, endpoints: Endpoints[EndpointPool], *, max_concurrency: int, full_route_concurrency: int, pipeline: bool
    ) -> None:
        self.engine = engine
        self.endpoints = endpoints
        self.max_concurrency = max_concurrency
        self.full_route_concurrency = full_route_concurrency
        self.pipeline = pipeline
        self._full_slots = Slots(full_route_concurrency)  # C calls: the loop's full-route reads take one too
        self._threads: cf.ThreadPoolExecutor | None = None
        self._threads_lock = threading.Lock()
        self.closed = False
        # _loop_lanes' primaries ready for the loop, under one routed configuration version
        self._loop_ready: tuple[object, dict[str, EndpointPool]] = (None, {})

    def close(self) -> None:
        """Stop the worker threads (units not started never run)."""
        self.closed = True
        if self._threads is not None:
            self._threads.shutdown(wait=True, cancel_futures=True)
            self._threads = None

    # -- a whole statement ---------------------------------------------------------------------

    def run(self, stmt: Statement, stream: Any, lanes: list[Lane] | None = None) -> Result:
        """Any plan; ``lanes`` given: a transaction's pinned lanes (never streamed, never split over replicas)."""
        self._check_open()
        engine, plan, deadline = self.engine, stmt.plan, stmt.deadline
        pinned = lanes is not None
        if lanes is None:
            read = not (plan.is_write or plan.force_primary)
            lanes = [Lane(self.endpoints.pool_of(u.data_source, read=read), [(i, u)]) for i, u in enumerate(plan.units)]
        do_stream = False if pinned else engine.should_stream(plan, lanes, stream)
        full = plan.kind is RouteKind.FULL
        if full:
            self._enter_full_route(stmt)
        released = False
        try:
            if len(lanes) == 1:
                outcomes = [self._run_lane(lanes[0], stmt.style, do_stream, deadline)]
            elif not do_stream and not pinned and self._can_pipeline(lanes):
                outcomes = self._pipeline(lanes, stmt.style, deadline, self._lend_all(lanes, deadline))
            else:
                lent = self._lend_all(lanes, deadline) if do_stream else None
                outcomes = self._fan_out(lanes, stmt.style, do_stream, deadline, release_full=full, lent=lent)
                released = full  # the fan-out releases the slot once every lane has stopped
        finally:
            if full and not released:
                self._full_slots.give()
        return self._tracked(plan, engine.assemble(stmt, outcomes, self.endpoints.reader))

    def _tracked(self, plan: RoutePlan, result: Result) -> Result:
        split = self.endpoints.split
        if plan.is_write and split.tracks(plan):  # read-your-writes after a multi-unit or transactional write
            split.wrote(plan.data_sources)
        return result

    def run_pinned_single(self, stmt: Statement, lane: Lane) -> Result:
        """One unit on a transaction's pinned connection, buffered: what :meth:`run` gives, without its lanes."""
        self._check_open()
        plan = stmt.plan
        ((_, unit),) = lane.items
        try:
            result = self.run_unit(unit, lane.pool, lane.pinned, stmt.style, False, stmt.deadline)
        except QueryTimeoutError as exc:  # worded for the statement, as run() words it
            return self.engine.assemble(stmt, [LaneOutcome(error=exc)], self.endpoints.reader)
        return self._tracked(plan, self.engine.single_result(plan, result, self.endpoints.reader))

    def run_single(self, stmt: Statement, pool: EndpointPool | None = None) -> Result:
        """One unit outside a transaction, buffered: no lanes, no fan-out, no merge (``pool``: chosen already)."""
        self._check_open()
        plan = stmt.plan
        unit = plan.units[0]
        try:
            if pool is None:
                pool = self.endpoints.pool_of(unit.data_source, read=not (plan.is_write or plan.force_primary))
            if pool.split is None:
                result = self.run_unit(unit, pool, None, stmt.style, False, stmt.deadline)
            else:  # replicas: record the write for read-your-writes, retry a read a lost replica failed
                result = pool.split.run(self.run_unit, unit, pool, stmt.style, False, stmt.deadline, write=plan.is_write)
        except QueryTimeoutError as exc:  # allow_partial decides, as for any plan
            return self.engine.assemble(stmt, [LaneOutcome(error=exc)], self.endpoints.reader)
        return self.engine.single_result(plan, result, self.endpoints.reader)

    def run_dual_unit(self, unit: RouteUnit, pinned: Borrowed | None, style: str, deadline: float | None) -> None:
        """Run one dual-write unit on its data source's primary (``pinned``: a transaction's connection).

        Raises whatever the unit raised (mapped); the caller counts it.
        """
        pool = self.endpoints.primary(unit.data_source)
        if pinned is None and pool.split is not None:  # replicas: read-your-writes hears of the write
            pool.split.run(self.run_unit, unit, pool, style, False, deadline, write=True)
        else:
            self.run_unit(unit, pool, pinned, style, False, deadline)

    def run_dual(self, plan: RoutePlan, style: str, deadline: float | None) -> None:
        """Outside transactions: each dual unit autocommitted on its primary, within the statement's deadline."""
        dual = self.engine.dual
        for unit in plan.dual:
            try:
                self.run_dual_unit(unit, None, style, deadline)
            except Exception as exc:  # never the caller's problem: the old location has the write
                dual.failed(plan, unit, exc)
            else:
                dual.done(plan, unit)

    def _check_open(self) -> None:
        if self.closed:
            raise ExecutionError("the executor is closed")

    def _enter_full_route(self, stmt: Statement) -> None:
        wait = stmt.left()
        if not self._full_slots.take(wait):
            tables = ", ".join(t.logic_table for t in stmt.plan.tables) or "?"
            raise QueryTimeoutError(
                f"a full-route statement on {tables} waited {wait:g} s for one of the "
                f"{self.full_route_concurrency} full-route slots and timed out",
                timeout=wait,
                full_route_concurrency=self.full_route_concurrency,
            )

    @staticmethod
    def _lend_all(lanes: list[Lane], deadline: float | None) -> list[Borrowed]:
        """Every connection a streamed or pipelined statement will hold, taken before any unit runs (one per lane).

        Such units keep their connections at the same time (streamed: until the
        caller is done), so borrowing them one by one lets two statements each
        hold part of a pool and wait for the rest until the acquire timeout.
        Each pool lends its share all at once, pools in one fixed order: no
        statement holds connections while it waits (docs/operations.md#connection-pools).
        """
        lent: list[Borrowed | None] = [None] * len(lanes)
        try:
            for pool, indexes in lend_order(lanes):
                wait = None if deadline is None else deadline - time.monotonic()
                try:
                    for i, borrowed in zip(indexes, pool.borrow_many(len(indexes), wait)):
                        lent[i] = borrowed
                except PoolTimeoutError as exc:
                    error = lend_failed(exc, lanes[indexes[0]], pool, deadline)
                    if error is exc:
                        raise
                    raise error from exc
        except BaseException:
            for b in lent:
                if b is not None:
                    b.release()
            raise
        return lent  # type: ignore[return-value]  # every slot was filled

    # -- one lane / one unit -----------------------------------------------------------------

    def _run_lane(
        self, lane: Lane, style: str, stream: bool, deadline: float | None, lent: Borrowed | None = None
    ) -> LaneOutcome:
        """Run a lane's units in order; ``lent``: the connection already taken for its one unit."""
        outcome = LaneOutcome()
        for index, unit in lane.items:
            try:
                if lane.pool.split is None or lane.pinned is not None:
                    result = self.run_unit(unit, lane.pool, lane.pinned, style, stream, deadline, lent)
                else:  # replicas: a read a lost replica failed runs once more elsewhere (docs/readwrite.md)
                    result = lane.pool.split.run(self.run_unit, unit, lane.pool, style, stream, deadline,
                                                 write=None, lent=lent)  # fmt: skip
                outcome.results.append((index, result))
            except BaseException as exc:
                outcome.error = exc
                break
        return outcome

    def run_unit(
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
            raise timeout_error(unit, pool.endpoint.name)
        held = pinned if pinned is not None else lent
        if held is not None:
            borrowed = held
        else:
            try:
                borrowed = pool.borrow(deadline)
            except PoolTimeoutError as exc:  # the deadline, not the acquire timeout, ended the wait
                if deadline is not None and time.monotonic() >= deadline:
                    raise timeout_error(unit, pool.endpoint.name) from exc
                raise
        own = pinned is None
        sql = self.engine.unit_sql(driver, unit, style)
        guard: Guard | None = None
        if deadline is not None:
            guard = borrowed.guard
            if guard is not None:
                guard.arm(deadline)
        cursor = None
        try:
            cursor = driver.cursor(borrowed.raw, stream)
            cursor.execute(sql, unit.params)
        except BaseException as exc:
            self._fail(exc, unit, pool, borrowed, own, cursor, guard, sql)
        return self._answer(unit, pool, borrowed, own, cursor, guard, sql, stream)

    def _answer(
        self,
        unit: RouteUnit,
        pool: EndpointPool,
        borrowed: Borrowed,
        own: bool,
        cursor: Any,
        guard: Guard | None,
        sql: str,
        stream: bool,
        receive: bool = False,
        wait: float | None = None,
    ) -> UnitResult:
        """A sent unit's answer read (``receive``: first read it off the socket, waiting at most ``wait``),
        the deadline disarmed, the connection given back unless the rows stream or it is pinned."""
        try:
            if receive:
                pool.driver.receive(borrowed.raw, cursor, wait)
            result = self._read_unit(unit, borrowed, cursor, stream, sql)
        except BaseException as exc:
            self._fail(exc, unit, pool, borrowed, own, cursor, guard, sql)
        fired = guard.disarm() if guard is not None else False
        streaming = isinstance(result.rows, StreamRows)
        if fired:  # the cancel may have cut the rows short (a killed SLEEP even "succeeds")
            if streaming:
                result.rows.close()
            else:
                close_quietly(cursor)
                if own:
                    borrowed.release(discard=True)
            raise timeout_error(unit, pool.endpoint.name)
        if not streaming:
            if pool.driver.closes_buffered:
                close_quietly(cursor)
            if own:
                borrowed.release()
        return result

    def _read_unit(self, unit: RouteUnit, borrowed: Borrowed, cursor: Any, stream: bool, sql: str) -> UnitResult:
        """An executed cursor's outcome: row count, all rows, or (streaming) the first batch and the rest to come."""
        description = cursor.description
        if description is None:
            return UnitResult(unit.data_source, None, (), cursor.rowcount, getattr(cursor, "lastrowid", None) or None)
        if not stream:
            rows = cursor.fetchall()
            return UnitResult(unit.data_source, description, rows, len(rows), sql=sql)
        batch = self.engine.fetch_batch
        first = cursor.fetchmany(batch)
        if len(first) < batch:  # everything fitted in the first batch
            return UnitResult(unit.data_source, description, first, len(first), sql=sql)
        rows_iter = StreamRows(cursor, borrowed, first, batch, self.engine.drain_limit, sql)
        return UnitResult(unit.data_source, description, rows_iter, -1, sql=sql)

    @staticmethod
    def _fail(
        exc: BaseException,
        unit: RouteUnit,
        pool: EndpointPool,
        borrowed: Borrowed,
        own: bool,
        cursor: Any,
        guard: Guard | None,
        sql: str,
    ) -> NoReturn:
        """A unit raised: disarm, close, give the connection back (discarded if in doubt), raise what the engine says."""
        fired = guard.disarm() if guard is not None else False
        close_quietly(cursor)
        if own:
            borrowed.release(discard=fired or discard_on(exc))
        error = unit_error(exc, unit, pool.endpoint.name, fired, sql)
        if error is exc:
            raise exc
        raise error from exc

    # -- pipelining ---------------------------------------------------------------------------

    def _can_pipeline(self, lanes: list[Lane]) -> bool:
        """Buffered units, one per lane, each pool able to lend its share at once, drivers that can split."""
        if not self.pipeline:
            return False
        for lane in lanes:
            pool = lane.pool
            if not pool.driver.can_pipeline or pool.split is not None or len(lane.items) != 1:
                return False
        return each_pool_can_lend(lanes)

    def _send(self, unit: RouteUnit, pool: EndpointPool, borrowed: Borrowed, sql: str, deadline: float | None,
              send: Callable[[Any, RouteUnit], None] | None = None) -> tuple[Any, Guard | None]:  # fmt: skip
        """Arm the deadline and send ``unit`` without waiting; (cursor, guard) for :meth:`_answer`."""
        guard = borrowed.guard if deadline is not None else None
        cursor = None
        try:
            if deadline is not None and deadline <= time.monotonic():
                raise timeout_error(unit, pool.endpoint.name)
            if guard is not None and deadline is not None:
                guard.arm(deadline)
            if send is None:
                cursor = pool.driver.send(borrowed.raw, sql, unit.params)
            else:
                send(borrowed.raw, unit)
        except BaseException as exc:
            self._fail(exc, unit, pool, borrowed, True, cursor, guard, sql)
        return cursor, guard

    def _pipeline(self, lanes: list[Lane], style: str, deadline: float | None, lent: list[Borrowed]) -> list[LaneOutcome]:
        """Send every unit on its own connection, then read the answers in turn, all on the caller's thread.

        The servers work on every unit at once while this thread writes and
        reads; no worker thread, no hand-off (docs/operations.md#multi-unit-statements).
        Past the deadline each answer is waited for at most ``cancel_grace``
        more, as a fan-out would wait for its lanes.
        """
        outcomes = [LaneOutcome() for _ in lanes]
        in_flight: list[tuple[int, Any, Guard | None, str]] = []
        grace = self.engine.cancel_grace
        try:
            for i, lane in enumerate(lanes):
                unit, pool = lane.items[0][1], lane.pool
                sql = self.engine.unit_sql(pool.driver, unit, style)
                try:
                    cursor, guard = self._send(unit, pool, lent[i], sql, deadline)
                except BaseException as exc:
                    outcomes[i].error = exc
                    continue
                in_flight.append((i, cursor, guard, sql))
            for i, cursor, guard, sql in in_flight:
                (index, unit), pool = lanes[i].items[0], lanes[i].pool
                wait = None if deadline is None else max(0.001, deadline - time.monotonic() + grace)
                try:
                    result = self._answer(unit, pool, lent[i], True, cursor, guard, sql, False, receive=True, wait=wait)
                except BaseException as exc:
                    outcomes[i].error = exc
                    continue
                outcomes[i].results.append((index, result))
        except BaseException:  # interrupted between units: what is still lent is in an unknown state
            for _, _, guard, _ in in_flight:
                if guard is not None:
                    guard.disarm()
            for b in lent:
                b.release(discard=True)
            raise
        return outcomes

    # -- sent without waiting ---------------------------------------------------------------

    def loop_pool(self, plan: RoutePlan) -> EndpointPool | None:
        """The pool a one-unit ``plan`` sent without a thread goes to: the primary's, or for a read on a data
        source with replicas the splitter's choice now, in this context; ``None``: the worker path runs it (a
        write there, whose read-your-writes mark the splitter records; a ``gtid`` read, whose check asks
        servers)."""
        read = not (plan.is_write or plan.force_primary)
        chosen = self.endpoints.choice_of(plan.units[0].data_source, read=read)
        if isinstance(chosen, GtidCheck) or (chosen.split is not None and not read):
            return None
        return chosen

    def send_single(self, stmt: Statement, send: Callable[[Any, RouteUnit], None] | None = None,
                    pool: EndpointPool | None = None, on: Borrowed | None = None) -> SentUnit | None:  # fmt: skip
        """Send a one-unit plan and return at once (see ``Executor.send_single``); ``on``: a transaction's pinned
        connection to send it on (the caller checked the plan may run there), else an idle one of ``pool``."""
        plan = stmt.plan
        if self.closed or len(plan.units) != 1 or plan.kind is RouteKind.FULL or plan.dual or self.engine.stream is True:
            return None
        if on is not None:
            borrowed = on
            pool = on.pool
            if not pool.driver.can_pipeline:
                return None
        else:
            refuse_unpinned(plan)
            if pool is None:
                pool = self.loop_pool(plan)
                if pool is None:
                    return None
            if not pool.driver.can_pipeline:
                return None
            idle = pool.lend_idle()
            if idle is None:
                return None
            borrowed = idle
        unit = plan.units[0]
        driver, deadline, style = pool.driver, stmt.deadline, stmt.style
        # By then the answer has begun (past the deadline, as a pipelined read, the cancel grace more),
        # even if the data source is frozen and never answers the cancel either.
        if deadline is not None:
            answer_by: float | None = deadline + self.engine.cancel_grace
        else:
            bound = driver.socket_timeout(pool.endpoint)
            answer_by = None if bound is None else stmt.started + bound
        sql = self.engine.unit_sql(driver, unit, style)
        try:
            try:
                cursor, guard = self._send(unit, pool, borrowed, sql, deadline, send)
            except DataSourceUnavailableError as exc:
                if not pool.replica:
                    raise
                pool.split.retry_pool(unit.data_source, pool, exc)  # marked out: the worker path reads elsewhere
                return None
            try:
                fileno = driver.fileno(borrowed.raw)
            except BaseException:  # sent, but nobody can wait for the answer: the connection is in doubt
                if guard is not None:
                    guard.disarm()
                borrowed.release(discard=True)
                raise
        except BaseException as exc:
            self.engine.failed(plan, stmt.started, exc)
            raise
        return SentUnit(self, stmt, unit, pool, borrowed, cursor, guard, sql, fileno, answer_by)

    def send_many(self, stmt: Statement, on: Mapping[str, Borrowed] | None = None) -> SentMany | None:
        """Send every unit of a multi-unit read and return at once (see ``Executor.send_many``); ``on``: a
        transaction's pinned connection per data source (the caller checked the plan may run there), else
        an idle connection of each data source's primary per unit."""
        plan = stmt.plan
        # one unit: a one-table read, or one data source's tables in one (route/query/per_source.py) to merge
        if (self.closed or (len(plan.units) < 2 and plan.kind is RouteKind.SINGLE) or plan.dual or plan.is_write
                or plan.cross_node is not None or stmt.partial_ok or self.engine.stream is True):  # fmt: skip
            return None
        slot = self._full_slots if plan.kind is RouteKind.FULL else None
        if slot is not None and not slot.try_take():
            return None  # every full-route slot taken: the worker path waits for one
        lanes = self._loop_lanes(plan, on)
        if lanes is None:
            if slot is not None:
                slot.give()
            return None
        parts: list[SentPart] = []
        guards: list[Guard | None] = []
        deadline, style = stmt.deadline, stmt.style
        trace = TRACE_COMMENT.get()  # Engine.unit_sql's, read once for every unit
        try:
            for lane, (borrowed, items) in enumerate(lanes):
                pool = borrowed.pool
                driver, raw = pool.driver, borrowed.raw
                guard = borrowed.guard if deadline is not None else None
                guards.append(guard)
                fileno = -1
                as_written = style == driver.native_style  # the units' SQL is in the driver's paramstyle
                for index, unit in items:
                    # Engine.unit_sql without its frame
                    sql = unit.sql if as_written else driver.sql_for(unit.sql, style)
                    if trace is not None:
                        sql = trace + sql
                    # As _send, without a cursor (the answer is taken off the socket) and with the lane's guard
                    # armed once: a unit behind a cancelled one is cancelled when its answer is read
                    # (SentMany.cancel_again).
                    try:
                        if deadline is not None:
                            if deadline <= _monotonic():
                                raise timeout_error(unit, pool.endpoint.name)
                            if guard is not None and fileno < 0:
                                guard.arm(deadline)
                        driver.send_read(raw, sql, unit.params)
                    except BaseException as exc:
                        self._fail(exc, unit, pool, borrowed, True, None, guard, sql)  # gives borrowed back
                    if fileno < 0:
                        fileno = driver.fileno(raw)
                    parts.append(SentPart(index, lane, unit, pool, borrowed, sql, fileno))
        except BaseException as exc:  # what was sent is in doubt: discarded; what was not goes back as it was
            for guard in guards:
                if guard is not None:
                    guard.disarm()
            for lane, (borrowed, _) in enumerate(lanes):
                borrowed.release(discard=lane < len(guards))
            if slot is not None:
                slot.give()
            self.engine.failed(plan, stmt.started, exc)
            raise
        if deadline is not None:  # as send_single's: the answers have begun by then, or never will
            answer_by: float | None = deadline + self.engine.cancel_grace
        else:
            bounds = [b.pool.driver.socket_timeout(b.pool.endpoint) for b, _ in lanes]
            answer_by = None if None in bounds else stmt.started + max(b for b in bounds if b is not None)
        return SentMany(self.engine, self.endpoints.reader, stmt, parts, guards, answer_by, slot)

    def _loop_lanes(self, plan: RoutePlan, on: Mapping[str, Borrowed] | None
                    ) -> list[tuple[Borrowed, list[tuple[int, RouteUnit]]]] | None:  # fmt: skip
        """The connections a multi-unit read goes on from the loop, each with its units in order: a pin per data
        source (``on``), or an idle connection of a primary without replicas per unit; ``None``: not now."""
        units = plan.units
        if on is not None:
            by_source: dict[str, tuple[Borrowed, list[tuple[int, RouteUnit]]]] = {}
            for index, unit in enumerate(units):
                source = unit.data_source
                lane = by_source.get(source)
                if lane is not None:
                    lane[1].append((index, unit))
                    continue
                pinned = on[source]
                driver = pinned.pool.driver
                if not (driver.can_pipeline and driver.can_relay):  # read off the socket by an event loop?
                    return None
                by_source[source] = (pinned, [(index, unit)])
            return list(by_source.values())
        config = self.engine.router.routed_config  # the plan's version
        version, ready = self._loop_ready
        if version is not config:  # another configuration version: what was ready is asked again
            ready = {}
            self._loop_ready = (config, ready)
        pools: list[EndpointPool] = []
        for unit in units:
            pool = ready.get(unit.data_source)
            if pool is None or pool.split is not None:
                pool = self._loop_primary(unit.data_source, config, ready)
                if pool is None:
                    return None
            pools.append(pool)
        lent: list[tuple[Borrowed, list[tuple[int, RouteUnit]]]] = []
        for index, pool in enumerate(pools):
            borrowed = pool.lend_idle()
            if borrowed is None:  # none idle: the worker path waits for one
                for b, _ in lent:
                    b.release()
                return None
            lent.append((borrowed, [(index, units[index])]))
        return lent

    def _loop_primary(self, data_source: str, config: ShardingConfig, ready: dict[str, EndpointPool]
                      ) -> EndpointPool | None:  # fmt: skip
        """The pool a loop sends a multi-unit read's unit on ``data_source`` to: its primary's, when it has no
        replicas and its answers can be read off the socket; ``None``: the worker path runs the read.

        A pool :meth:`Endpoints.plain_primary` gives under ``config`` is kept in ``ready``: the next read asks
        only ``ready`` and the pool's ``split`` (all plain_primary checks that can change within a version; a
        pool's driver never does)."""
        pool = plain = self.endpoints.plain_primary(data_source, config)
        if pool is None:  # not looked up under this version yet, or replicas
            chosen = self.endpoints.choice_of(data_source, read=True)
            if isinstance(chosen, GtidCheck) or chosen.split is not None:
                return None  # replicas: the splitter chooses on the worker path
            pool = chosen
        driver = pool.driver
        if not (driver.can_pipeline and driver.can_relay):  # read off the socket by an event loop?
            return None
        if plain is not None:
            ready[data_source] = pool
        return pool

    def finish_sent(self, sent: SentUnit) -> Result:
        """:meth:`SentUnit.finish`: the answer read, the connection given back, the statement observed."""
        stmt, engine = sent.statement, self.engine
        try:
            wait = None if sent.answer_by is None else max(0.001, sent.answer_by - time.monotonic())
            try:
                read = self._answer(sent.unit, sent.pool, sent.borrowed, True, sent.cursor, sent.guard, sent.sql, False,
                                    receive=True, wait=wait)  # fmt: skip
                result = engine.single_result(stmt.plan, read, self.endpoints.reader)
            except QueryTimeoutError as exc:  # allow_partial decides, as in execute_plan
                result = engine.assemble(stmt, [LaneOutcome(error=exc)], self.endpoints.reader)
        except BaseException as exc:
            engine.failed(stmt.plan, stmt.started, exc)
            raise
        return engine.observed(stmt.plan, stmt.started, result)

    def finish_relayed(self, sent: SentUnit, rows: int, status: int) -> None:
        """:meth:`SentUnit.relayed`: the connection back, the statement observed as a read of ``rows`` rows."""
        stmt, pool, borrowed = sent.statement, sent.pool, sent.borrowed
        if sent.guard is not None and sent.guard.disarm():  # the cancel may have cut the rows short
            borrowed.release(discard=True)
            error = timeout_error(sent.unit, pool.endpoint.name)
            self.engine.failed(stmt.plan, stmt.started, error)
            raise error
        pool.driver.relayed(borrowed.raw, status)
        borrowed.release()
        self.engine.observed_rows(stmt.plan, stmt.started, rows)  # its Result made only for someone to hear of it

    def fail_relayed(self, sent: SentUnit, error: BaseException) -> NoReturn:
        """:meth:`SentUnit.relay_failed`: ``error`` mapped as a read's, the connection given back or discarded."""
        stmt = sent.statement
        try:
            self._fail(error, sent.unit, sent.pool, sent.borrowed, True, sent.cursor, sent.guard, sent.sql)
        except BaseException as exc:
            self.engine.failed(stmt.plan, stmt.started, exc)
            raise

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
    ) -> list[LaneOutcome]:
        threads = self._pool_threads()
        futures: list[cf.Future[LaneOutcome]] = []
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
            _release_when_all_done(futures, self._full_slots.give)
        wait = None if deadline is None else max(0.0, deadline - time.monotonic()) + self.engine.cancel_grace
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
            outcomes.append(LaneOutcome(error=timeout_error(unit, lane.pool.endpoint.name)))
        return outcomes


def _close_outcome(future: cf.Future[LaneOutcome]) -> None:
    if future.cancelled() or future.exception() is not None:
        return
    for _, r in future.result().results:
        close_quietly(r)


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
