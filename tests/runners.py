"""The executor's tests over both runners: an :class:`AsyncExecutor` driven from synchronous test code.

``BlockingAsyncExecutor`` answers the calls the executor tests make (``execute``, ``execute_plan``,
``transaction``, ``router``, ``config``, pool statistics, ``close``) by running the asyncio
executor's coroutine to completion on a private event loop, and hands back results and
transactions that do the same. A test written against :class:`~ddm_core.execute.Executor` then
checks the asyncio runner unchanged: the same statements, the same assertions (no copy).
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any, Awaitable, Iterator, TypeVar

from ddm_core.aio.executor import AsyncExecutor
from ddm_core.aio.result import AsyncResult
from ddm_core.aio.transaction import CURRENT_ASYNC_TX, AsyncTransaction
from ddm_core.execute.pools import PoolStats
from ddm_core.execute.shared import DEFAULT

__all__ = ["BlockingAsyncExecutor", "RUNNERS", "cancel_after"]

#: The runners a parametrised executor test runs over.
RUNNERS = ("threads", "asyncio")

T = TypeVar("T")
_UNSET = object()


class BlockingAsyncExecutor:
    """An :class:`AsyncExecutor` with the thread executor's blocking calls (see the module docstring)."""

    def __init__(self, config: Any, **options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.inner = AsyncExecutor(config, **options)
        self._tx: BlockingTransaction | None = None

    def run(self, work: Awaitable[T]) -> T:
        """Run ``coro`` to completion as if the calling thread were one task awaiting each call in turn:
        context variables it sets (read-your-writes marks, hints) stay set for the next call."""
        context = contextvars.copy_context()
        task = self.loop.create_task(_awaited(work), context=context)
        try:
            return self.loop.run_until_complete(task)
        finally:
            for var, value in context.items():
                if var.get(_UNSET) is not value:
                    var.set(value)

    @property
    def router(self) -> Any:
        return self.inner.router

    @property
    def config(self) -> Any:
        return self.inner.config

    @property
    def timeout(self) -> float | None:
        return self.inner.timeout

    def execute(self, sql: str, params: Any = None, *, timeout: Any = DEFAULT, allow_partial: bool | None = None,
                stream: Any = DEFAULT) -> BlockingResult:  # fmt: skip
        if self._tx is not None and self._tx.inner.active:
            return self._tx.execute(sql, params)
        return BlockingResult(self, self.run(self.inner.execute(sql, params, timeout=timeout, allow_partial=allow_partial,
                                                                stream=stream)))  # fmt: skip

    def execute_plan(self, plan: Any, **kw: Any) -> BlockingResult:
        return BlockingResult(self, self.run(self.inner.execute_plan(plan, **kw)))

    def transaction(self, mode: str | None = None) -> BlockingTransaction:
        return BlockingTransaction(self, self.inner.transaction(mode))

    def endpoint_stats(self) -> list[PoolStats]:
        return self.inner.endpoint_stats()

    def pool_stats(self) -> dict[str, PoolStats]:
        return self.inner.pool_stats()

    def borrowed(self) -> int:
        return self.inner.borrowed()

    @property
    def slow_statements(self) -> int:
        return self.inner.slow_statements

    @property
    def instance(self) -> Any:  # the instance registry's record of this executor (None: not registered)
        return self.inner.instance

    def dual_writes(self) -> Any:
        return self.inner.dual_writes()

    def dual_write_failures(self) -> Any:
        return self.inner.dual_write_failures()

    def replica_status(self, *, refresh: bool = False) -> Any:
        return self.inner.replica_status(refresh=refresh)

    def set_observer(self, observer: Any) -> None:
        self.inner.set_observer(observer)

    def settle(self) -> None:
        self.run(self.inner.settle())

    def recover_xa(self) -> Any:
        return self.run(self.inner.recover_xa())

    def close(self) -> None:
        if not self.loop.is_closed():
            self.run(self.inner.close())
            self.loop.close()

    def __enter__(self) -> BlockingAsyncExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BlockingResult:
    """An :class:`AsyncResult` read with the thread executor's :class:`Result` calls."""

    def __init__(self, owner: BlockingAsyncExecutor, result: AsyncResult) -> None:
        self._owner = owner
        self.inner = result

    def __getattr__(self, name: str) -> Any:  # description, rowcount, lastrowid, units, complete, ...
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "arraysize":
            self.inner.arraysize = value
        else:
            super().__setattr__(name, value)

    @property
    def closed(self) -> bool:
        return self.inner.closed

    def fetchone(self) -> Any:
        return self._owner.run(self.inner.fetchone())

    def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._owner.run(self.inner.fetchmany(size))

    def fetchall(self) -> list[Any]:
        return self._owner.run(self.inner.fetchall())

    def __iter__(self) -> Iterator[Any]:
        while True:
            row = self.fetchone()
            if row is None:
                return
            yield row

    def close(self) -> None:
        self._owner.run(self.inner.aclose())

    def __enter__(self) -> BlockingResult:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BlockingTransaction:
    """An :class:`AsyncTransaction` with the thread :class:`Transaction`'s calls; ``with`` binds it to the executor."""

    def __init__(self, owner: BlockingAsyncExecutor, tx: AsyncTransaction) -> None:
        self._owner = owner
        self.inner = tx

    def __getattr__(self, name: str) -> Any:  # state, written, data_sources, active
        return getattr(self.inner, name)

    def execute(self, sql: str, params: Any = None, **kw: Any) -> BlockingResult:
        return BlockingResult(self._owner, self._owner.run(self.inner.execute(sql, params, **kw)))

    def execute_plan(self, plan: Any, **kw: Any) -> BlockingResult:
        return BlockingResult(self._owner, self._owner.run(self.inner.execute_plan(plan, **kw)))

    def commit(self) -> None:
        self._owner.run(self.inner.commit())

    def rollback(self) -> None:
        self._owner.run(self.inner.rollback())

    def savepoint(self, name: str) -> None:
        self._owner.run(self.inner.savepoint(name))

    def rollback_to_savepoint(self, name: str) -> None:
        self._owner.run(self.inner.rollback_to_savepoint(name))

    def __enter__(self) -> BlockingTransaction:
        current = self._owner._tx
        if current is not None and current.inner.active:
            self._owner.run(self._enter_inside(current.inner))  # raises as AsyncTransaction.__aenter__ does
        self._owner._tx = self
        return self

    async def _enter_inside(self, outer: AsyncTransaction) -> None:
        """Enter this transaction where ``outer`` is the context's open one (each call runs in a fresh task)."""
        token = CURRENT_ASYNC_TX.set(outer)
        try:
            await self.inner.__aenter__()
        finally:
            CURRENT_ASYNC_TX.reset(token)

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        self._owner._tx = None
        self._owner.run(self.inner.__aexit__(kind, exc, tb))


async def _awaited(work: Awaitable[T]) -> T:
    return await work


async def cancel_after(work: Awaitable[Any], delay: float) -> asyncio.Future[Any]:
    """Start ``work``, cancel it after ``delay`` seconds and wait until it ended; its task (``cancelled()``
    says whether the cancel got in, or it finished first)."""
    task = asyncio.ensure_future(work)
    await asyncio.sleep(delay)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    return task
