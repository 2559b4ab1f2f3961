"""Local transactions on the asyncio runner: ``async with executor.transaction() as tx: ...``.

The rules are the thread executor's (docs/operations.md, :mod:`ddm_core.execute.transaction`):
one pinned connection per data source opened with ``BEGIN`` on first use, writes to one data
source only (:func:`~ddm_core.execute.transaction.refuse_second_writer`), reads on the others,
session-changing statements kept on their pin and reset before it goes back, read-only pins
committed first and the written one last. Inside the block, ``await executor.execute(...)`` in the
same task (or a task it starts: contextvars are copied) runs in the transaction.

A transaction cancelled part-way (``task.cancel()``, ``asyncio.timeout()``) rolls back: the
connection whose answer was half read is closed and its statement killed on the server, the
others get ``ROLLBACK``. The XA mode is :class:`~ddm_core.aio.xa.AsyncXaTransaction`. Not yet on
this runner: a migration's dual writes inside a transaction (refused before anything is sent:
docs/asyncio.md#what-is-not-there-yet).
"""

from __future__ import annotations

import asyncio
import logging
from contextvars import ContextVar
from typing import Any, Protocol

from ddm_core.errors import DataSourceUnavailableError, DdmError, QueryTimeoutError, TransactionError
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.session_state import check_pinned
from ddm_core.execute.shared import DEFAULT, style_of
from ddm_core.execute.transaction import TransactionState, check_usable, commit_order, refuse_second_writer
from ddm_core.aio.pools import AsyncBorrowed
from ddm_core.aio.result import AsyncResult
from ddm_core.aio.runner import AsyncLane, AsyncRunner
from ddm_core.execute.engine import Engine
from ddm_core.route.plan import RoutePlan
from ddm_core.route.router import Router

__all__ = ["AsyncTransaction", "AsyncTransactionHost", "CURRENT_ASYNC_TX"]

log = logging.getLogger("ddm_core.aio")

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

    def __init__(self, executor: AsyncTransactionHost) -> None:
        super().__init__()
        self.executor = executor

    # -- statements ---------------------------------------------------------------------------

    async def execute(self, sql: str, params: Any = None, *, timeout: float | None = None) -> AsyncResult:
        """Route and run one statement in this transaction."""
        plan = await self.executor.route(sql, params)
        return await self.execute_plan(plan, caller_style=style_of(sql), timeout=DEFAULT if timeout is None else timeout)

    async def execute_plan(self, plan: RoutePlan, *, caller_style: str = "format", timeout: Any = DEFAULT) -> AsyncResult:
        """Run a routed plan in this transaction (nothing is sent if a rule refuses it)."""
        check_usable(self._state, self._failure)
        if plan.dual:
            raise TransactionError(
                "a statement that a migration dual-writes cannot run in an asyncio transaction yet (nothing was "
                f"sent; tables {', '.join(t.logic_table for t in plan.tables)}): run it with autocommit, or in the "
                "thread executor's transaction (docs/asyncio.md#what-is-not-there-yet)",
                statement=plan.statement,
            )
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
            result = await self.executor.runner.run(stmt, list(lanes.values()))
        except BaseException as exc:
            engine.failed(plan, stmt.started, exc)
            if isinstance(exc, (QueryTimeoutError, DataSourceUnavailableError, asyncio.CancelledError)):
                self._state = "failed"  # a pinned connection was cancelled or lost: no commit can keep its writes
                self._failure = exc
            raise
        if plan.is_write and sources:
            self._written = sources[0]
        return AsyncResult(engine.observed(plan, stmt.started, result))

    def _check_write(self, plan: RoutePlan, sources: tuple[str, ...]) -> None:
        """Refuse a write that would reach a second data source (the XA mode overrides this)."""
        refuse_second_writer(plan, sources, self._written)

    async def _pin(self, data_source: str) -> AsyncBorrowed:
        pinned = self._pins.get(data_source)
        if pinned is not None:
            return pinned
        pool = self.executor.runner.primary(data_source)
        borrowed = await pool.borrow(None)
        try:
            await self._begin(data_source, borrowed)
        except BaseException as exc:
            borrowed.release(discard=True)
            if isinstance(exc, Exception) and not isinstance(exc, DdmError):
                raise map_driver_error(exc, data_source=data_source, endpoint=pool.endpoint.name, sql="BEGIN") from exc
            raise
        self._pins[data_source] = borrowed
        return borrowed

    async def _begin(self, data_source: str, pinned: AsyncBorrowed) -> None:
        """Open the transaction on a newly pinned connection (the XA mode starts a branch instead)."""
        await self.executor.runner.ask(pinned.pool, pinned, pinned.pool.driver.begin(pinned.raw), "BEGIN")

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
        try:
            for ds in commit_order(self._pins, self._written):
                pinned = self._pins[ds]
                try:
                    await self.executor.runner.ask(pinned.pool, pinned, pinned.pool.driver.commit(pinned.raw), "COMMIT")
                except Exception as exc:
                    raise map_driver_error(exc, data_source=ds, endpoint=pinned.pool.endpoint.name, sql="COMMIT") from exc
        except BaseException:
            await self._end("rolled back", rollback=True)
            raise
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
        for ds, pinned in pins.items():
            discard = failed
            driver, ask = pinned.pool.driver, self.executor.runner.ask
            try:
                if rollback and not discard:
                    await ask(pinned.pool, pinned, driver.rollback(pinned.raw), "ROLLBACK")
                if ds in dirty and not discard:
                    discard = not await ask(pinned.pool, pinned, driver.reset_session(pinned.raw, pinned.pool.endpoint),
                                            "COM_RESET_CONNECTION")  # fmt: skip
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
        for pinned in pins.values():
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
