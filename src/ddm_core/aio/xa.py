"""XA transactions on the asyncio runner: ``async with executor.transaction(mode="xa") as tx: ...``.

The protocol — a branch per data source, aborts, the two-phase commit and its log, what recovery
relies on — is :class:`~ddm_core.xa.twophase.TwoPhase`, the thread executor's own (docs/xa.md);
this module answers its steps with awaited statements: a branch's on its pinned connection, the
log's on a pooled connection of the log's data source.

A cancel (``task.cancel()``, ``asyncio.timeout()``) while a statement of the transaction runs rolls
it back, as a local one. The protocol's own statements (``XA START`` / ``END`` / ``PREPARE`` /
``COMMIT`` / ``ROLLBACK`` and the log's) are never cut: they run in a task of their own, and a cancel
that arrives meanwhile is re-raised once they are done — ``commit()`` then has committed or rolled
back, as its state says. A connection closed in the middle of ``XA COMMIT`` can leave MariaDB with
a branch prepared that ``XA RECOVER`` does not list until the server restarts
(docs/xa.md#server-behaviour).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from ddm_core.aio.deadline import finished_then_cancelled
from ddm_core.aio.pools import AsyncBorrowed
from ddm_core.aio.result import AsyncResult
from ddm_core.aio.transaction import AsyncTransaction, AsyncTransactionHost
from ddm_core.errors import DdmError
from ddm_core.execute.pools import EndpointPool
from ddm_core.execute.shared import DEFAULT
from ddm_core.execute.transaction import check_usable
from ddm_core.execute.steps import Finish, Outcome, Round, Sql, Step, Steps, drive_async
from ddm_core.metadata.model import ShardingConfig
from ddm_core.route.plan import RoutePlan
from ddm_core.xa import branches as xa
from ddm_core.xa.runtime import XaRuntime, runtime_of
from ddm_core.xa.twophase import TwoPhase, TwoPhaseView

__all__ = ["AsyncXaTransaction", "BlockingHost"]


class BlockingHost:
    """An asyncio executor's :class:`~ddm_core.xa.log.XaHost`: its configuration and blocking pools off the loop.

    Recovery (``recover_xa()``, in a thread) and tools read the log and ``XA RECOVER`` through it; the
    executor's XA runtime (the log, the cap, the step hook) is keyed by it.
    """

    def __init__(self, config: Callable[[], ShardingConfig], primary_pool: Callable[[str], EndpointPool]) -> None:
        self._config = config
        self.primary_pool = primary_pool

    @property
    def config(self) -> ShardingConfig:
        return self._config()


class AsyncXaTransaction(TwoPhaseView, AsyncTransaction):
    """An XA transaction of an :class:`~ddm_core.aio.AsyncExecutor` (see the module docstring)."""

    #: A dual write's shadow participant is a plain transaction, not a branch: never adopted
    #: (docs/migration.md#dual-write); it is rolled back when the transaction itself needs that data source.
    _adopts_shadows = False

    def __init__(self, executor: AsyncTransactionHost, host: BlockingHost) -> None:
        super().__init__(executor)
        self._rt: XaRuntime = runtime_of(host)
        self._xa = TwoPhase(self._rt)
        self._slot = False

    # -- the protocol's steps, awaited ----------------------------------------------------------------

    async def _drive(self, steps: Steps[Any]) -> Any:
        """Run the protocol's steps to their end; a cancel meanwhile is re-raised after (module docstring)."""
        task = asyncio.get_running_loop().create_task(drive_async(steps, self._answer))
        return await finished_then_cancelled(task)

    async def _answer(self, step: Step) -> Any:
        if isinstance(step, Finish):
            return await self._finish(step.state)
        if isinstance(step, Round):
            return await self._round(step)
        if step.on is self._rt.log:
            return await self._on_log(step)
        pinned: AsyncBorrowed = step.on
        return (await self._executed(pinned, step)).rowcount

    async def _round(self, step: Round) -> tuple[Outcome, ...]:
        """Every statement of ``step`` at once, on this loop: one connection's in turn, the connections' (and each
        log statement, on a pooled connection of its own) side by side (docs/xa.md#how-a-round-runs)."""
        queues: dict[int, list[int]] = {}
        for i, sql in enumerate(step.steps):
            queues.setdefault(-1 - i if sql.on is self._rt.log else id(sql.on), []).append(i)
        outcomes: list[Outcome] = [Outcome()] * len(step.steps)

        async def in_turn(queue: list[int]) -> None:
            for i in queue:
                try:
                    outcomes[i] = Outcome(await self._answer(step.steps[i]))
                except BaseException as exc:  # noqa: B036 - the protocol reads each statement's failure
                    outcomes[i] = Outcome(error=exc)

        await asyncio.gather(*(in_turn(queue) for queue in queues.values()))
        return tuple(outcomes)

    async def _on_log(self, step: Sql) -> Any:
        """One autocommitted statement on a pooled connection of the log's data source."""
        pool = self.executor.runner.primary(self._rt.log.data_source)
        borrowed = await pool.borrow(None)
        try:
            answer = await self._executed(borrowed, step)
        except BaseException:
            borrowed.release(discard=True)
            raise
        borrowed.release()
        return answer.rows if step.fetch else answer.rowcount

    async def _executed(self, borrowed: AsyncBorrowed, step: Sql) -> Any:
        """The driver's answer to ``step`` on ``borrowed`` (see :meth:`_asked`)."""
        return await self._asked(borrowed, borrowed.pool.driver.execute(borrowed.raw, step.sql, step.params or None), step.sql)

    # -- statements ---------------------------------------------------------------------------------

    async def execute_plan(self, plan: RoutePlan, *, caller_style: str = "format", timeout: Any = DEFAULT) -> AsyncResult:
        """Run a routed plan in this XA transaction (writes may reach several data sources).

        Raises:
            XaBranchAbortedError: a deadlock / lock-wait timeout in a branch; every branch was rolled back.
            XaTimeoutError: past ``xa.timeoutMs``; every branch was rolled back.
        """
        check_usable(self._state, self._failure)  # an ended transaction is refused, whatever its deadline says
        await self._drive(self._xa.check_deadline_steps("a statement"))
        try:
            timeout = self._xa.statement_timeout(timeout, self.executor.engine.timeout)
            return await super().execute_plan(plan, caller_style=caller_style, timeout=timeout)
        except DdmError as exc:
            instead = await self._drive(self._xa.failed_statement_steps(exc))
            if instead is None:
                raise
            raise instead from exc

    def _check_write(self, plan: RoutePlan, sources: tuple[str, ...]) -> None:
        self._xa.wrote_to(sources)

    async def _begin(self, data_source: str, pinned: AsyncBorrowed) -> None:
        xa.require_xa(pinned)
        if not self._slot:
            wait = pinned.pool.acquire_timeout
            try:
                async with asyncio.timeout(wait):
                    await self._rt.async_slots.acquire()
            except TimeoutError:
                raise self._rt.capacity_error(wait) from None
            self._slot = True
            self._xa.started()
        await self._drive(self._xa.start_steps(data_source, pinned, self.isolation))

    # -- ending -------------------------------------------------------------------------------------

    async def commit(self) -> None:
        """Commit every branch (see :meth:`~ddm_core.xa.twophase.TwoPhase.commit_steps` for what it raises).

        A cancel meanwhile is re-raised once the commit is over (committed or rolled back: see ``state``).
        """
        await self._drive(self._xa.commit_steps(self._state, self._failure))

    async def rollback(self) -> None:
        """Roll back every branch (an empty rollback of a branch that never prepared succeeds)."""
        await self._drive(self._xa.rollback_steps(self._state))

    async def _finish(self, state: str) -> None:
        """Return the pinned connections (lost branches' discarded) and the XA slot."""
        for ds in self._xa.lost:
            pinned = self._pins.pop(ds, None)
            if pinned is not None:
                pinned.release(discard=True)
        try:
            await self._end(state, rollback=False)
        finally:
            self._release_slot()

    def abandon(self) -> None:
        """End at once without a round trip (never raises; for a caller that cannot await, as a facade closed
        outside its loop): every unfinished branch's connection is closed. The server rolls back a branch
        that was not prepared; a prepared one waits for recovery, which follows the log's decision.
        """
        if self._state in ("committed", "rolled back", "in doubt"):
            return
        self._xa.abandon()
        pins, self._pins = self._pins, {}
        self._dirty = set()
        self._state = "rolled back"
        for ds, pinned in pins.items():
            pinned.release(discard=ds in self._xa.lost or pinned.pool.shared)
        for shadow in self._dual.abandon():  # plain transactions: the server rolls them back
            shadow.release(discard=shadow.pool.shared)
        self._release_slot()

    def _release_slot(self) -> None:
        if self._slot:
            self._slot = False
            self._rt.async_slots.release()
