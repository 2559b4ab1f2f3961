"""Local transactions on the asyncio runner: ``async with executor.transaction() as tx: ...``.

The rules are the thread executor's (docs/operations.md, :mod:`ddm_core.execute.transaction`):
one pinned connection per data source opened with ``BEGIN`` on first use, writes to one data
source only (:func:`~ddm_core.execute.transaction.refuse_second_writer`), reads on the others,
session-changing statements kept on their pin and reset before it goes back, read-only pins
committed first and the written one last. Inside the block, ``await executor.execute(...)`` in the
same task (or a task it starts: contextvars are copied) runs in the transaction.

A transaction cancelled part-way (``task.cancel()``, ``asyncio.timeout()``) rolls back: the
connection whose answer was half read is closed and its statement killed on the server, the
others get ``ROLLBACK``. The XA mode is :class:`~ddm_core.aio.xa.AsyncXaTransaction`.

A migration's dual writes (``plan.dual``) run as in the thread transaction, by the same protocol
(:class:`~ddm_core.execute.shadows.Shadows`: shared pins, shadow participants, what a failure
means), its steps awaited here. A cancel while a dual unit runs fails the transaction (its
statement's writes were made; whether the dual write was is unknown) and discards a shadow whose
unit it cut.

A commit is never cut: it runs in a task of its own and a cancel that arrives meanwhile is
re-raised once it has committed or rolled back (``state`` says which). A ``COMMIT`` whose
connection was closed mid-answer may or may not have been applied, and a transaction carrying dual
writes would otherwise let the old location commit while a cancel stops the new one's.
"""

from __future__ import annotations

import asyncio
import logging
from contextvars import ContextVar
from typing import Any, Callable, Coroutine, Protocol, TypeVar

from ddm_core.errors import DataSourceUnavailableError, DdmError, QueryTimeoutError, TransactionError
from ddm_core.execute.cross_node import run_cross_node
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.savepoints import RELEASE, ROLLBACK_TO, SAVEPOINT, statement
from ddm_core.execute.session_state import check_pinned
from ddm_core.execute.shadows import Shadows
from ddm_core.execute.shared import DEFAULT, one_pinned_unit, style_of
from ddm_core.execute.steps import Borrow, Reset, RunUnit, TxStep, drive_async
from ddm_core.execute.transaction import TransactionState, check_usable, commit_order, refuse_second_writer
from ddm_core.aio.deadline import finished_then_cancelled
from ddm_core.aio.pools import AsyncBorrowed
from ddm_core.aio.result import AsyncResult
from ddm_core.aio.runner import AsyncLane, AsyncRunner
from ddm_core.execute.engine import Engine
from ddm_core.route.plan import RoutePlan
from ddm_core.route.router import Router

__all__ = ["AsyncTransaction", "AsyncTransactionHost", "CURRENT_ASYNC_TX"]

log = logging.getLogger("ddm_core.aio")

T = TypeVar("T")

#: The transaction bound by ``async with executor.transaction():`` in this context.
CURRENT_ASYNC_TX: ContextVar[AsyncTransaction | None] = ContextVar("ddm_async_transaction", default=None)


class AsyncTransactionHost(Protocol):
    """What an asyncio transaction runs on (``AsyncExecutor`` is one)."""

    @property
    def router(self) -> Router: ...

    async def route(self, sql: str, params: Any = None) -> RoutePlan: ...

    engine: Engine
    runner: AsyncRunner


class AsyncTransaction(TransactionState[AsyncBorrowed]):
    """A local transaction of an :class:`~ddm_core.aio.AsyncExecutor` (see the module docstring)."""

    _dual: Shadows[AsyncBorrowed]

    def __init__(self, executor: AsyncTransactionHost) -> None:
        dual = executor.engine.dual
        super().__init__(Shadows(dual.done, dual.failed))
        self.executor = executor

    # -- statements ---------------------------------------------------------------------------

    async def execute(self, sql: str, params: Any = None, *, timeout: float | None = None) -> AsyncResult:
        """Route and run one statement in this transaction."""
        plan = await self.executor.route(sql, params)
        return await self.execute_plan(plan, caller_style=style_of(sql), timeout=DEFAULT if timeout is None else timeout)

    async def execute_plan(self, plan: RoutePlan, *, caller_style: str = "format", timeout: Any = DEFAULT) -> AsyncResult:
        """Run a routed plan in this transaction (nothing is sent if a rule refuses it)."""
        check_usable(self._state, self._failure)
        if plan.cross_node is not None:
            return await run_cross_node("asyncio", self.executor, plan, self, timeout)  # type: ignore[no-any-return]
        changes_session = check_pinned(plan)
        sources = plan.data_sources
        if plan.is_write:
            self._check_write(plan, sources)
        lanes: dict[str, AsyncLane] = {}
        for i, unit in enumerate(plan.units):
            lane = lanes.get(unit.data_source)
            if lane is None:
                pinned = await self._pin(unit.data_source)
                lane = lanes[unit.data_source] = AsyncLane(pinned.pool, [], pinned)
            lane.items.append((i, unit))
        if changes_session:
            self._dirty.update(lanes)
        engine = self.executor.engine
        stmt = engine.begin(plan, caller_style, timeout, False)
        try:
            pinned_lanes = list(lanes.values())
            if one_pinned_unit(plan, pinned_lanes):
                result = await self.executor.runner.run_pinned_single(stmt, pinned_lanes[0])
            else:
                result = await self.executor.runner.run(stmt, pinned_lanes)
        except BaseException as exc:
            engine.failed(plan, stmt.started, exc)
            if isinstance(exc, (QueryTimeoutError, DataSourceUnavailableError, asyncio.CancelledError)):
                self._state = "failed"  # a pinned connection was cancelled or lost: no commit can keep its writes
                self._failure = exc
            raise
        if plan.is_write and sources:
            self._written = sources[0]
        observed = AsyncResult(engine.observed(plan, stmt.started, result))
        if plan.dual:
            await self._run_dual(plan, caller_style, stmt.deadline)
        return observed

    def _check_write(self, plan: RoutePlan, sources: tuple[str, ...]) -> None:
        """Refuse a write that would reach a second data source (the XA mode overrides this)."""
        refuse_second_writer(plan, sources, self._written)

    # -- savepoints (execute/savepoints.py) -------------------------------------------------------

    async def savepoint(self, name: str) -> None:
        """``SAVEPOINT name`` on every pinned connection (and on each one pinned later, after its BEGIN)."""
        await self.run_savepoint(SAVEPOINT, name)

    async def rollback_to_savepoint(self, name: str) -> None:
        """``ROLLBACK TO SAVEPOINT name`` on every pinned connection; later savepoints are dropped."""
        await self.run_savepoint(ROLLBACK_TO, name)

    async def release_savepoint(self, name: str) -> None:
        """``RELEASE SAVEPOINT name`` on every pinned connection; it and later savepoints are dropped."""
        await self.run_savepoint(RELEASE, name)

    async def run_savepoint(self, command: str, name: str) -> None:
        """``command`` (``SAVEPOINT``, ``ROLLBACK TO SAVEPOINT``, ``RELEASE SAVEPOINT``) on ``name``."""
        self._check_savepoint(command, name)
        try:
            for pinned in list(self._pins.values()):
                await self._mark(pinned, statement(command, name, pinned.pool.driver.dialect.name))
        except BaseException as exc:
            self._savepoint_failed(exc)
            raise
        self._savepoints.apply(command, name)

    async def _mark(self, pinned: AsyncBorrowed, sql: str) -> None:
        await self._asked(pinned, pinned.pool.driver.execute(pinned.raw, sql, None), sql)

    async def connection(self, data_source: str) -> AsyncBorrowed:
        """This transaction's connection to ``data_source``'s primary, begun on first use (for a
        cross-node statement's temporary copies: docs/cross-node-queries.md)."""
        check_usable(self._state, self._failure)
        return await self._pin(data_source)

    def mark_dirty(self, data_source: str) -> None:
        """The session of ``data_source``'s connection changed: reset (or discard) it when this ends."""
        self._dirty.add(data_source)

    async def _pin(self, data_source: str) -> AsyncBorrowed:
        pinned = self._pins.get(data_source)
        if pinned is not None:
            return pinned
        if data_source in self._dual.shadows:  # adopted, or rolled back first (the XA mode)
            shadow = await drive_async(self._dual.adopt_steps(data_source, self._adopts_shadows), self._dual_step)
            if shadow is not None:
                self._pins[data_source] = shadow
                return shadow
        borrowed = await self._borrow_begun(data_source, self._begin_marked, None)
        self._pins[data_source] = borrowed
        return borrowed

    async def _begin_marked(self, data_source: str, pinned: AsyncBorrowed) -> None:
        """Open the transaction on a newly pinned connection and set the savepoints set so far."""
        await self._begin(data_source, pinned)
        for sql in self._savepoints.replay(pinned.pool.driver.dialect.name):
            await self._mark(pinned, sql)

    async def _borrow_begun(
        self, data_source: str, begin: Callable[[str, AsyncBorrowed], Coroutine[Any, Any, None]], deadline: float | None
    ) -> AsyncBorrowed:
        """A connection to ``data_source``'s primary with ``begin`` awaited on it (discarded if that fails)."""
        pool = self.executor.runner.primary(data_source)
        borrowed = await pool.borrow(deadline)
        try:
            await begin(data_source, borrowed)
        except BaseException as exc:
            borrowed.release(discard=True)
            if isinstance(exc, Exception) and not isinstance(exc, DdmError):
                raise map_driver_error(exc, data_source=data_source, endpoint=pool.endpoint.name, sql="BEGIN") from exc
            raise
        return borrowed

    async def _begin(self, data_source: str, pinned: AsyncBorrowed) -> None:
        """Open the transaction on a newly pinned connection (the XA mode starts a branch instead)."""
        await self._plain_begin(data_source, pinned)

    async def _plain_begin(self, data_source: str, pinned: AsyncBorrowed) -> None:
        await self.executor.runner.ask(pinned.pool, pinned, pinned.pool.driver.begin(pinned.raw, self.isolation), "BEGIN")

    # -- dual writes: the protocol's steps, awaited ---------------------------------------------------

    async def _run_dual(self, plan: RoutePlan, style: str, deadline: float | None) -> None:
        """Run ``plan.dual`` after its units succeeded: on a shared pin or a shadow participant, never raising
        a unit's error. A cancel meanwhile fails the transaction (a shared pin may have been cut half-way)."""
        try:
            failure = await drive_async(self._dual.run_steps(plan, self._pins, style, deadline), self._dual_step)
        except BaseException as exc:
            self._state = "failed"
            self._failure = exc
            raise
        if failure is not None:  # it ended a shared pin's transaction: committing would lose the statement's writes
            self._state = "failed"
            self._failure = failure

    async def _dual_step(self, step: TxStep) -> Any:
        if isinstance(step, RunUnit):
            pinned: AsyncBorrowed = step.on
            await self.executor.runner.run_unit(step.unit, pinned.pool, pinned, step.style, step.deadline)
            return None
        if isinstance(step, Borrow):  # a shadow participant: a plain BEGIN, never an XA branch
            return await self._borrow_begun(step.data_source, self._plain_begin, step.deadline)
        if isinstance(step, Reset):
            return await self._reset(step.on)
        return await self._control(step.on, step.command)

    async def _control(self, pinned: AsyncBorrowed, command: str) -> None:
        """``COMMIT`` or ``ROLLBACK`` on a pinned connection, within its socket timeout; its failure mapped."""
        driver = pinned.pool.driver
        await self._asked(pinned, driver.commit(pinned.raw) if command == "COMMIT" else driver.rollback(pinned.raw), command)

    async def _asked(self, pinned: AsyncBorrowed, call: Coroutine[Any, Any, T], sql: str) -> T:
        """Await ``call`` on ``pinned`` within its socket timeout (``runner.ask``); a driver error mapped, naming ``sql``."""
        pool = pinned.pool
        try:
            return await self.executor.runner.ask(pool, pinned, call, sql)
        except DdmError:
            raise
        except Exception as exc:
            raise map_driver_error(exc, data_source=pool.data_source, endpoint=pool.endpoint.name, sql=sql) from exc

    async def _reset(self, pinned: AsyncBorrowed) -> bool:
        """Reset a pin's session before it goes back; ``False``: discard it instead (a failure is logged)."""
        pool = pinned.pool
        call = pool.driver.reset_session(pinned.raw, pool.endpoint)
        try:
            return bool(await self.executor.runner.ask(pool, pinned, call, "COM_RESET_CONNECTION"))
        except Exception as exc:
            log.warning("resetting a session on %s failed (%s); discarding the connection", pool.endpoint.name, exc)
            return False

    # -- ending -------------------------------------------------------------------------------

    async def commit(self) -> None:
        """Commit every pin (the written one last) and return them; a failed transaction is rolled back instead.

        Raises:
            TransactionError: it failed (and was rolled back), or is over.
            ExecutionError / DataSourceUnavailableError: a COMMIT failed; the rest were rolled back.
        """
        if self._state == "failed":
            await self.rollback()
            raise TransactionError(
                f"the transaction failed ({self._failure}) and was rolled back, not committed", state="failed"
            )
        check_usable(self._state, self._failure)
        # never cut (module docstring): a cancel is re-raised once it is over
        await finished_then_cancelled(asyncio.get_running_loop().create_task(self._commit()))

    async def _commit(self) -> None:
        late = self._dual.late(self._pins, self._written)  # read-only pins carrying dual writes: after, best effort
        try:
            for ds in commit_order(self._pins, self._written, late):
                await self._control(self._pins[ds], "COMMIT")
        except BaseException:
            await self._end("rolled back", rollback=True)
            raise
        if late:
            await drive_async(self._dual.commit_late_steps(late, self._pins, self._dirty), self._dual_step)
        await self._end("committed", rollback=False)

    async def rollback(self) -> None:
        """Roll back every pin and return them (a no-op once over)."""
        if self._state in ("committed", "rolled back"):
            return
        await self._end("rolled back", rollback=True)

    async def _end(self, state: str, rollback: bool) -> None:
        pins, self._pins = self._pins, {}
        dirty, self._dirty = self._dirty, set()
        failed = self._state == "failed"
        self._state = state
        if self._dual.carried:  # a migration's dual writes ran: after the real participants' commit
            try:
                await drive_async(self._dual.finish_steps(commit=state == "committed"), self._dual_step)
            except BaseException:  # cancelled: the shadows were discarded, the pins are too
                for pinned in pins.values():
                    pinned.release(discard=True)
                raise
        for ds, pinned in pins.items():
            discard = failed
            try:
                if rollback and not discard:
                    await self._control(pinned, "ROLLBACK")
                if ds in dirty and not discard:
                    discard = not await self._reset(pinned)
            except asyncio.CancelledError:
                pinned.release(discard=True)
                for rest in pins.values():
                    rest.release(discard=True)  # idempotent: the ones already released stay so
                raise
            except Exception as exc:
                log.warning("ending the transaction on %s failed: %s", ds, exc)
                discard = True
            pinned.release(discard=discard)

    def abandon(self) -> None:
        """End the transaction without a round trip (synchronous, never raises): every pin is given back.

        A pooled connection released inside a transaction is closed and the server rolls back what it
        left open (SQLite ``:memory:``: rolled back in a task, closing would drop the database). For a
        caller that cannot await: a facade closed outside its loop, a finalizer.
        """
        pins, self._pins = self._pins, {}
        self._dirty = set()
        if self._state in ("active", "failed"):
            self._state = "rolled back"
        for pinned in [*pins.values(), *self._dual.abandon()]:
            pinned.release(discard=pinned.pool.shared)

    # -- async with -----------------------------------------------------------------------------

    async def __aenter__(self) -> AsyncTransaction:
        current = CURRENT_ASYNC_TX.get()
        if current is not None and current.executor is self.executor and current.active:
            raise TransactionError("a transaction is already open on this executor in this context (no nesting)")
        self._token = CURRENT_ASYNC_TX.set(self)
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None and self._state in ("active", "failed"):
                await self.commit()
            else:
                await self.rollback()
        finally:
            if self._token is not None:
                CURRENT_ASYNC_TX.reset(self._token)
                self._token = None

    def __repr__(self) -> str:
        return f"<AsyncTransaction {self._state} pinned={list(self._pins)} written={self._written!r}>"
