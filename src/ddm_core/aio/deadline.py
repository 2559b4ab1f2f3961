"""A statement's deadline on the event loop: ``async with within(seconds) as d: ...``; ``d.expired`` after.

``asyncio.timeout`` (Python 3.11+) where it exists: no extra task per statement, unlike
``asyncio.wait_for`` before 3.12. On 3.10 a small equivalent: a timer cancels the task, and the
cancellation it caused comes out as :class:`TimeoutError`. Either way ``expired`` tells the
runner that *its* deadline ended the wait, not the caller's own cancellation or a driver's
socket timeout.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["within", "finished_then_cancelled"]


class _Within:
    """The 3.10 stand-in for ``asyncio.timeout`` (see the module docstring)."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._task: asyncio.Task[Any] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._fired = False

    def expired(self) -> bool:
        return self._fired

    def _fire(self) -> None:
        self._fired = True
        if self._task is not None:
            self._task.cancel()

    async def __aenter__(self) -> _Within:
        self._task = asyncio.current_task()
        self._handle = asyncio.get_running_loop().call_later(self._seconds, self._fire)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        if self._handle is not None:
            self._handle.cancel()
        if self._fired and kind is asyncio.CancelledError:
            raise TimeoutError from exc
        return None


def within(seconds: float) -> Any:
    """An async context manager that ends its block with :class:`TimeoutError` after ``seconds``."""
    timeout = getattr(asyncio, "timeout", None)
    if timeout is not None:
        return timeout(max(0.0, seconds))
    return _Within(max(0.0, seconds))


async def finished_then_cancelled(task: asyncio.Task[T]) -> T:
    """Await ``task`` to its end even if the caller is cancelled meanwhile; then re-raise that cancel.

    For work that must not stop half-way (an XA commit: docs/xa.md#server-behaviour). The wait is as
    long as the work's own bounds (each statement's socket timeout), not the caller's.
    """
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.done():  # the work itself was cancelled (its loop is closing): nothing to wait for
                raise
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return result
