"""The asyncio runner: a routed plan run on one event loop, every unit in flight at once, no threads.

It does the I/O the :class:`~ddm_core.execute.engine.Engine` leaves to runners — borrow from the
asyncio pools (:mod:`ddm_core.aio.pools`), send, await the answer — and asks the engine the rest
(deadline, the SQL a unit sends, the error a failure becomes, the assembled result), so a
statement's answer is the thread executor's answer (docs/asyncio.md).

* One unit is awaited in the calling task: no task, no thread.
* Several units each get a task of their own and their own connection, taken all at once from
  each pool in a fixed order (as the thread runner does: two statements never each hold half a
  pool); the answers are read as they arrive. FULL-kind plans also pass the full-route semaphore.
* A deadline cancels the units still running: the connection, whose answer is half read, is
  closed at once and ``KILL QUERY`` stops the statement on the server, in a background task the
  executor waits for when it closes. A caller's own cancellation (``task.cancel()``,
  ``asyncio.timeout()``) does the same and is re-raised.
* Read-your-writes by GTID: a read's GTID check is answered on the loop before its unit runs, and a
  write's ``@@last_gtid`` read on its connection after it (:mod:`ddm_core.aio.gtid`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, NoReturn, Sequence, TypeVar

from ddm_core._text import shorten_sql
from ddm_core.errors import DataSourceUnavailableError, PoolTimeoutError, QueryTimeoutError
from ddm_core.execute.engine import Engine, each_pool_can_lend, lend_failed, lend_order
from ddm_core.execute.endpoints import Endpoints
from ddm_core.execute.pools import discard_on
from ddm_core.execute.result import Result, UnitResult
from ddm_core.execute.statement import LaneOutcome, Statement, timeout_error, unit_error
from ddm_core.aio.deadline import Armed, Deadlines
from ddm_core.aio.gtid import answered, value_on
from ddm_core.aio.merging import MergedStream, fed_unit
from ddm_core.aio.pools import AsyncBorrowed, AsyncEndpointPool
from ddm_core.aio.result import AsyncResult, Row
from ddm_core.readwrite.gtid_check import LAST_GTID_SQL, GtidCheck
from ddm_core.route.plan import RouteKind, RoutePlan, RouteUnit

__all__ = ["AsyncRunner", "AsyncLane"]

log = logging.getLogger("ddm_core.aio")

T = TypeVar("T")


@dataclass(slots=True)
class AsyncLane:
    """Units that run one after another on one connection (one unit outside transactions)."""

    pool: AsyncEndpointPool
    items: list[tuple[int, RouteUnit]]
    pinned: AsyncBorrowed | None = None


class AsyncRunner:
    """Runs plans for an :class:`~ddm_core.aio.AsyncExecutor` on the running loop (see the module docstring).

    Args:
        engine: The statement engine (settings, results, observer).
        endpoints: Pool choice over the asyncio pools (primaries, replicas by the read/write splitter).
        full_route_concurrency: FULL-kind statements that may run at once.
        describe: A thread-side pool of a data source, for the merge's column collations (asked off
            the loop, once per statement shape: :meth:`Engine.collations_pending`).
    """

    def __init__(
        self,
        engine: Engine,
        endpoints: Endpoints[AsyncEndpointPool],
        *,
        full_route_concurrency: int,
        describe: Callable[[str], Any],
    ) -> None:
        self.engine = engine
        self.endpoints = endpoints
        self.full_route_concurrency = full_route_concurrency
        self._full: asyncio.Semaphore | None = None  # made on the loop that first needs it
        self._describe = describe
        self._background: set[asyncio.Task[Any]] = set()
        #: Every statement deadline of this runner's loop on one timer (aio/deadline.py).
        self.deadlines = Deadlines()

    # -- pools ----------------------------------------------------------------------------------

    def primary(self, data_source: str) -> AsyncEndpointPool:
        """The pool of ``data_source``'s primary (writes, transactions, dual writes)."""
        return self.endpoints.pool_of(data_source, read=False)

    def driver_lanes(self, plan: RoutePlan) -> list[AsyncLane]:
        """One lane per unit on its data source's primary: for a decision that reads only the drivers (whether to
        stream); a data source's replicas share its driver, and no replica is chosen or counted here."""
        return [AsyncLane(self.primary(unit.data_source), [(i, unit)]) for i, unit in enumerate(plan.units)]

    async def _lanes(self, plan: RoutePlan, deadline: float | None) -> list[AsyncLane]:
        """The lanes ``plan`` runs on: a ``gtid`` read's check answered, unit after unit (the first one's answer
        often settles the next: the write's position and the replica's are then known)."""
        read = not (plan.is_write or plan.force_primary)
        lanes = []
        for i, unit in enumerate(plan.units):
            chosen = self.endpoints.choice_of(unit.data_source, read=read)
            if isinstance(chosen, GtidCheck):
                chosen = await answered(chosen, deadline, self.kill_later)
            lanes.append(AsyncLane(chosen, [(i, unit)]))
        return lanes

    # -- a whole statement ----------------------------------------------------------------------

    async def run_single(self, stmt: Statement) -> Result:
        """One unit outside a transaction, buffered, awaited in the calling task."""
        plan = stmt.plan
        unit = plan.units[0]
        try:
            chosen = self.endpoints.choice_of(unit.data_source, read=not (plan.is_write or plan.force_primary))
            pool = chosen if not isinstance(chosen, GtidCheck) else await answered(chosen, stmt.deadline, self.kill_later)
            if pool.split is None:  # no replicas: what _on() does then, one coroutine fewer
                result = await self.run_unit(unit, pool, None, stmt.style, stmt.deadline)
            else:
                result = await self._on(unit, pool, stmt.style, stmt.deadline, write=plan.is_write)
        except QueryTimeoutError as exc:  # allow_partial decides, as for any plan
            return self.unit_timed_out(stmt, exc)
        if plan.merge.is_trivial:  # rows as they came: no collations to ask off the loop
            return self.engine.single_result(plan, result, self._describe)
        return await self._assembled(stmt, lambda: self.engine.single_result(plan, result, self._describe), [result])

    def unit_timed_out(self, stmt: Statement, exc: QueryTimeoutError) -> Result:
        """A one-unit statement's timeout: raised worded for the statement, or a read's partial (empty) result."""
        return self.engine.assemble(stmt, [LaneOutcome(error=exc)], self._describe)

    async def run(self, stmt: Statement, lanes: list[AsyncLane] | None = None) -> Result:
        """Any plan, buffered; ``lanes`` given: a transaction's pinned lanes."""
        plan, deadline = stmt.plan, stmt.deadline
        pinned = lanes is not None
        if lanes is None:
            lanes = await self._lanes(plan, deadline)
        full = plan.kind is RouteKind.FULL
        if full:
            await self._enter_full_route(stmt)
        try:
            if len(lanes) == 1:
                outcomes = [await self._run_lane(lanes[0], stmt.style, deadline, None)]
            else:
                lent = None if pinned or not each_pool_can_lend(lanes) else await self._lend_all(lanes, deadline)
                outcomes = await self._gather(lanes, stmt.style, deadline, lent)
        finally:
            if full:
                self._full_slots().release()
        results = [r for outcome in outcomes for _, r in outcome.results]
        return self._tracked(
            plan, await self._assembled(stmt, lambda: self.engine.assemble(stmt, outcomes, self._describe), results)
        )

    def _tracked(self, plan: RoutePlan, result: Result) -> Result:
        split = self.endpoints.split
        if plan.is_write and split.tracks(plan):  # read-your-writes after a multi-unit or transactional write
            split.wrote(plan.data_sources)
        return result

    async def run_pinned_single(self, stmt: Statement, lane: AsyncLane) -> Result:
        """One unit on a transaction's pinned connection, buffered: what :meth:`run` gives, without its lanes."""
        plan = stmt.plan
        ((_, unit),) = lane.items
        assert lane.pinned is not None
        try:
            result = await self.run_unit(unit, lane.pool, lane.pinned, stmt.style, stmt.deadline)
        except QueryTimeoutError as exc:  # worded for the statement, as run() words it
            return self.unit_timed_out(stmt, exc)
        if plan.merge.is_trivial:  # rows as they came: no collations to ask off the loop
            return self._tracked(plan, self.engine.single_result(plan, result, self._describe))
        assembled = await self._assembled(stmt, lambda: self.engine.single_result(plan, result, self._describe), [result])
        return self._tracked(plan, assembled)

    async def stream(self, stmt: Statement) -> AsyncResult:
        """A read over unbuffered units, read batch by batch as the caller iterates: concatenated, or merged as
        the thread runner merges them (:mod:`ddm_core.aio.merging`).

        Every unit is opened at once (each waits for its first rows within the deadline); a unit that
        timed out is left out of a read that accepts partial results, as in :meth:`run`.
        """
        lanes = await self._lanes(stmt.plan, stmt.deadline)
        lent: list[AsyncBorrowed] | None = await self._lend_all(lanes, stmt.deadline) if each_pool_can_lend(lanes) else None
        started = [False] * len(lanes)

        async def open_unit(i: int) -> _UnitStream:
            started[i] = True
            unit, pool = lanes[i].items[0][1], lanes[i].pool
            borrowed = lent[i] if lent is not None else await self._borrow(pool, unit, stmt.deadline)
            return await self._open_stream(unit, pool, borrowed, stmt)

        tasks = [asyncio.ensure_future(open_unit(i)) for i in range(len(lanes))]
        try:
            await asyncio.wait(tasks)
        except BaseException:  # cancelled: stop the units, close what opened, give back what never started
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for task in tasks:
                if not task.cancelled() and task.exception() is None:
                    await task.result().aclose()
            raise
        finally:
            if lent is not None:
                for i, b in enumerate(lent):
                    if not started[i]:
                        b.release()
        opened = [t.result() for t in tasks if t.exception() is None]
        error, complete = self.engine.failure(stmt, [t.exception() for t in tasks])
        if error is not None or not opened:
            for unit_stream in opened:
                await unit_stream.aclose()
            if error is not None:
                raise error
        if not stmt.plan.merge.is_trivial:
            units = [fed_unit(s) for s in opened]
            plan, batch = stmt.plan, self.engine.fetch_batch
            try:
                merged = await self._assembled(stmt, lambda: self.engine.rows_result(plan, units, complete, self._describe),
                                               units)  # fmt: skip
            except BaseException:
                for unit_stream in opened:
                    await unit_stream.aclose()
                raise
            return AsyncResult(merged, MergedStream(merged, opened, batch, batch))
        description = opened[0].description if opened else None
        result = Result(description=description, rows=iter(()), statement=stmt.plan.statement, complete=complete,
                        unit_count=len(lanes))  # fmt: skip
        return AsyncResult(result, _Concatenated(opened, self.engine.fetch_batch))

    async def run_dual(self, plan: RoutePlan, style: str, deadline: float | None) -> None:
        """Outside transactions: each dual unit autocommitted on its primary; counted, never raised."""
        dual = self.engine.dual
        for unit in plan.dual:
            try:
                await self._on(unit, self.primary(unit.data_source), style, deadline, write=True)
            except Exception as exc:  # never the caller's problem: the old location has the write
                dual.failed(plan, unit, exc)
            else:
                dual.done(plan, unit)

    async def _assembled(self, stmt: Statement, build: Callable[[], Result], results: Sequence[UnitResult]) -> Result:
        """``build()``, first asking column collations off the loop when the merge needs them and none are known."""
        if self.engine.collations_pending(stmt.plan, list(results)):
            ordered = list(results)
            await asyncio.to_thread(self.engine.column_collations, stmt.plan, ordered, self._describe)
        return build()

    def _full_slots(self) -> asyncio.Semaphore:
        if self._full is None:
            self._full = asyncio.Semaphore(self.full_route_concurrency)
        return self._full

    async def _enter_full_route(self, stmt: Statement) -> None:
        wait = stmt.left()
        try:
            if wait is None:
                await self._full_slots().acquire()
            else:
                async with asyncio.timeout(wait):
                    await self._full_slots().acquire()
        except TimeoutError:
            tables = ", ".join(t.logic_table for t in stmt.plan.tables) or "?"
            raise QueryTimeoutError(
                f"a full-route statement on {tables} waited {wait:g} s for one of the "
                f"{self.full_route_concurrency} full-route slots and timed out",
                timeout=wait, full_route_concurrency=self.full_route_concurrency,
            ) from None  # fmt: skip

    async def _lend_all(self, lanes: Sequence[AsyncLane], deadline: float | None) -> list[AsyncBorrowed]:
        """One connection per lane, each pool lending its share at once, pools in a fixed order."""
        lent: list[AsyncBorrowed | None] = [None] * len(lanes)
        try:
            for pool, indexes in lend_order(lanes):
                wait = None if deadline is None else deadline - time.monotonic()
                try:
                    for i, borrowed in zip(indexes, await pool.borrow_many(len(indexes), wait)):
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

    async def _gather(
        self, lanes: Sequence[AsyncLane], style: str, deadline: float | None, lent: list[AsyncBorrowed] | None
    ) -> list[LaneOutcome]:
        """Every lane in a task of its own; a connection lent to a lane that never started goes back."""
        started = [False] * len(lanes)

        async def lane_task(i: int) -> LaneOutcome:
            started[i] = True
            return await self._run_lane(lanes[i], style, deadline, lent[i] if lent is not None else None)

        try:
            return list(await asyncio.gather(*(lane_task(i) for i in range(len(lanes)))))
        finally:
            if lent is not None:
                for i, b in enumerate(lent):
                    if not started[i]:
                        b.release()

    # -- one lane / one unit --------------------------------------------------------------------

    async def _run_lane(
        self, lane: AsyncLane, style: str, deadline: float | None, lent: AsyncBorrowed | None
    ) -> LaneOutcome:
        outcome = LaneOutcome()
        for index, unit in lane.items:
            try:
                if lane.pinned is not None:
                    result = await self.run_unit(unit, lane.pool, lane.pinned, style, deadline)
                else:
                    result = await self._on(unit, lane.pool, style, deadline, write=None, lent=lent)
                outcome.results.append((index, result))
            except asyncio.CancelledError:
                raise  # the caller's cancel: not an outcome
            except Exception as exc:
                outcome.error = exc
                break
            lent = None
        return outcome

    async def _on(
        self, unit: RouteUnit, pool: AsyncEndpointPool, style: str, deadline: float | None, *, write: bool | None,
        lent: AsyncBorrowed | None = None,
    ) -> UnitResult:
        """Run a unit outside a transaction; on a data source with replicas, a read that a lost replica failed runs
        once more elsewhere and a write is remembered for read-your-writes (as ``ReadWriteSplitter.run``)."""
        split = pool.split
        if split is None:
            return await self.run_unit(unit, pool, None, style, deadline, lent)
        if pool.replica:
            try:
                return await self.run_unit(unit, pool, None, style, deadline, lent)
            except DataSourceUnavailableError as exc:
                other = split.retry_pool(unit.data_source, pool, exc)
                return await self.run_unit(unit, other, None, style, deadline)
        if write and split.gtid_writes(unit.data_source):
            return await self._write_reading_gtid(unit, pool, style, deadline, lent)
        result = await self.run_unit(unit, pool, None, style, deadline, lent)
        if write:
            split.tracker.wrote(unit.data_source)
        return result

    async def _write_reading_gtid(
        self, unit: RouteUnit, pool: AsyncEndpointPool, style: str, deadline: float | None, lent: AsyncBorrowed | None
    ) -> UnitResult:
        """A write in ``gtid`` mode: its own GTID read on its connection right after it (MariaDB ``@@last_gtid``)."""
        borrowed = lent or pool.lend_idle() or await self._borrow(pool, unit, deadline)
        try:
            result = await self.run_unit(unit, pool, borrowed, style, deadline)
        except BaseException:
            borrowed.release(discard=True)  # a failed or cancelled write: its session state is unknown
            raise
        text = None
        try:  # outside the deadline (the write is done), within the socket timeout; None: not MariaDB
            text = await value_on(pool, borrowed, LAST_GTID_SQL, None, None, self.kill_later)
        finally:  # cancelled meanwhile: the write is still remembered, its position read by the next read
            pool.split.wrote_gtid(unit.data_source, text)
        return result

    async def _borrow(self, pool: AsyncEndpointPool, unit: RouteUnit, deadline: float | None) -> AsyncBorrowed:
        try:
            return await pool.borrow(deadline)
        except PoolTimeoutError as exc:  # the deadline, not the acquire timeout, ended the wait
            if deadline is not None and time.monotonic() >= deadline:
                raise timeout_error(unit, pool.endpoint.name) from exc
            raise

    async def run_unit(
        self,
        unit: RouteUnit,
        pool: AsyncEndpointPool,
        pinned: AsyncBorrowed | None,
        style: str,
        deadline: float | None,
        lent: AsyncBorrowed | None = None,
    ) -> UnitResult:
        """Run one unit buffered; ``pinned``: a transaction's connection, ``lent``: one taken for it (released here)."""
        if deadline is not None and deadline <= time.monotonic():
            if lent is not None:
                lent.release()
            raise timeout_error(unit, pool.endpoint.name)
        held = pinned if pinned is not None else lent
        # An idle connection that needs no check is taken without awaiting (the common case).
        borrowed = held if held is not None else (pool.lend_idle() or await self._borrow(pool, unit, deadline))
        own = pinned is None
        driver = pool.driver
        sql = self.engine.unit_sql(driver, unit, style)
        if deadline is None:
            answer = await self._bounded(driver.execute(borrowed.raw, sql, unit.params), unit, pool, borrowed, own, sql,
                                         deadline)  # fmt: skip
        else:  # what _bounded() does with a deadline, one coroutine fewer on the common path
            armed = self.deadlines.arm(deadline)
            try:
                answer = await driver.execute(borrowed.raw, sql, unit.params)
            except BaseException as exc:
                self._cut_short(exc, armed, unit, pool, borrowed, own, sql, deadline, None)
            armed.disarm()
        if own:
            borrowed.release()
        answer.data_source = unit.data_source  # the answer is the unit's result (UnitAnswer)
        if answer.description is not None:
            answer.sql = sql
        return answer

    async def _bounded(
        self, call: Coroutine[Any, Any, T], unit: RouteUnit, pool: AsyncEndpointPool, borrowed: AsyncBorrowed,
        own: bool, sql: str, deadline: float | None,
    ) -> T:
        """Await a driver call within the statement's deadline (none: the connection's socket timeout)."""
        bound = None if deadline is not None else pool.driver.read_bound(borrowed.raw)
        if deadline is None and bound is None:
            try:
                return await call
            except BaseException as exc:
                self._fail(exc, unit, pool, borrowed, own, sql)
        armed = self.deadlines.arm(deadline if deadline is not None else time.monotonic() + (bound or 0.0))
        try:
            result = await call
        except BaseException as exc:
            self._cut_short(exc, armed, unit, pool, borrowed, own, sql, deadline, bound)
        armed.disarm()
        return result

    def _cut_short(
        self, exc: BaseException, armed: Armed, unit: RouteUnit, pool: AsyncEndpointPool, borrowed: AsyncBorrowed,
        own: bool, sql: str, deadline: float | None, bound: float | None,
    ) -> NoReturn:
        """A bounded driver call raised or was cancelled: by its deadline (a timeout), by the socket timeout that
        stood for a missing one (the server is lost), or otherwise; :meth:`_fail` says what it becomes."""
        fired = armed.timed_out(exc)
        if fired:  # the deadline; without one the socket timeout, as a blocking read's: the server is lost
            exc = TimeoutError() if deadline is not None else _silent(unit, pool, bound or 0.0)
        self._fail(exc, unit, pool, borrowed, own, sql, fired=fired and deadline is not None, cut=fired)

    async def ask(self, pool: AsyncEndpointPool, borrowed: AsyncBorrowed, call: Coroutine[Any, Any, T], sql: str) -> T:
        """Await a driver call outside any statement's deadline (BEGIN, COMMIT, a drain) within the socket timeout.

        Raises:
            DataSourceUnavailableError: no answer within the endpoint's ``socketTimeout`` (the connection is
                then in doubt: the caller discards it).
        """
        bound = pool.driver.read_bound(borrowed.raw)
        if bound is None:
            return await call
        try:
            async with asyncio.timeout(bound):
                return await call
        except TimeoutError:
            raise DataSourceUnavailableError(
                f"data source {pool.data_source!r} (endpoint {pool.endpoint.name!r}) did not answer {sql!r} "
                f"within its socketTimeout of {bound:g} s",
                data_source=pool.data_source, endpoint=pool.endpoint.name, sql=sql,
            ) from None  # fmt: skip

    def _fail(
        self, exc: BaseException, unit: RouteUnit, pool: AsyncEndpointPool, borrowed: AsyncBorrowed, own: bool,
        sql: str, *, fired: bool = False, cut: bool = False,
    ) -> NoReturn:
        """A unit raised or was cancelled (``fired``: by its deadline; ``cut``: the wait for it was given up):
        stop it on the server if it may still run, give the connection back, raise what the engine says."""
        cut = cut or isinstance(exc, asyncio.CancelledError)
        in_doubt = cut or discard_on(exc)
        if cut:
            self.kill_later(pool, borrowed.raw)  # the server may still be running it
        if own:
            borrowed.release(discard=in_doubt)
        elif in_doubt:
            pool.driver.close_now(borrowed.raw)  # a pinned connection half-read: its transaction is lost
        error = unit_error(exc, unit, pool.endpoint.name, fired, sql)
        if error is exc:
            raise exc
        raise error from exc

    def kill_later(self, pool: AsyncEndpointPool, raw: Any) -> None:
        """``KILL QUERY`` the connection's statement in a background task (awaited by :meth:`settle`)."""
        self.spawn(pool.driver.cancel(pool.endpoint, raw))

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("cancelling a statement on its data source failed: %s", task.exception())

    async def settle(self) -> None:
        """Wait for the background cancels still running."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    # -- streams --------------------------------------------------------------------------------

    async def _open_stream(self, unit: RouteUnit, pool: AsyncEndpointPool, borrowed: AsyncBorrowed, stmt: Statement
                           ) -> _UnitStream:  # fmt: skip
        sql = self.engine.unit_sql(pool.driver, unit, stmt.style)
        opening = pool.driver.open_stream(borrowed.raw, sql, unit.params)
        cursor = await self._bounded(opening, unit, pool, borrowed, True, sql, stmt.deadline)
        return _UnitStream(self, unit, pool, borrowed, cursor, sql)


def _silent(unit: RouteUnit, pool: AsyncEndpointPool, bound: float | None) -> DataSourceUnavailableError:
    return DataSourceUnavailableError(
        f"data source {unit.data_source!r} (endpoint {pool.endpoint.name!r}) did not answer within its "
        f"socketTimeout of {bound:g} s; the statement was cancelled: {shorten_sql(unit.sql)!r}",
        data_source=unit.data_source, endpoint=pool.endpoint.name, sql=unit.sql,
    )  # fmt: skip


class _UnitStream:
    """One unit's unbuffered rows; holds its connection until read out or closed."""

    def __init__(self, runner: AsyncRunner, unit: RouteUnit, pool: AsyncEndpointPool, borrowed: AsyncBorrowed,
                 cursor: Any, sql: str) -> None:  # fmt: skip
        self.runner, self.unit, self.pool, self.sql = runner, unit, pool, sql
        self.borrowed: AsyncBorrowed | None = borrowed
        self.cursor = cursor
        self.description = cursor.description

    async def next_batch(self, size: int) -> Sequence[Row]:
        borrowed = self.borrowed
        if borrowed is None:
            return ()
        self.borrowed = None  # _bounded gives it back if the read fails
        rows = await self.runner._bounded(self.cursor.fetchmany(size), self.unit, self.pool, borrowed, True, self.sql, None)
        self.borrowed = borrowed
        if not rows:
            self.borrowed = None
            borrowed.release()
        return [r if type(r) is tuple else tuple(r) for r in rows]

    def __del__(self) -> None:
        # Abandoned half-read (never closed, never read out): the connection has rows on the wire, so it
        # is closed rather than lent again. release() is synchronous and never raises.
        borrowed = getattr(self, "borrowed", None)
        if borrowed is not None:
            self.borrowed = None
            borrowed.release(discard=True)

    async def aclose(self) -> None:
        borrowed, self.borrowed = self.borrowed, None
        if borrowed is None:
            return
        try:
            reusable = await self.runner.ask(self.pool, borrowed, self.cursor.close(self.runner.engine.drain_limit), self.sql)
        except BaseException:
            borrowed.release(discard=True)
            raise
        borrowed.release(discard=not reusable)


class _Concatenated:
    """The units' streams one after another (a merge that only concatenates)."""

    def __init__(self, streams: list[_UnitStream], batch: int) -> None:
        self._streams = streams
        self._batch = batch

    async def next_batch(self) -> Sequence[Row]:
        while self._streams:
            rows = await self._streams[0].next_batch(self._batch)
            if rows:
                return rows
            self._streams.pop(0)
        return ()

    async def aclose(self) -> None:
        streams, self._streams = self._streams, []
        for s in streams:
            await s.aclose()
