"""Deadlines on the event loop: many statements' deadlines on one timer (:class:`Deadlines`), and a task
finished after its caller was cancelled (:func:`finished_then_cancelled`). A single wait is bounded by
``asyncio.timeout`` itself.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import sys
import time
from collections import deque
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["finished_then_cancelled", "Deadlines", "Armed"]


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


class Armed:
    """One armed deadline (see :class:`Deadlines`): ``fired`` once it cancelled its task."""

    __slots__ = ("when", "task", "cancelling", "fired", "done")

    def __init__(self, when: float, task: asyncio.Task[Any], cancelling: int) -> None:
        self.when = when
        self.task: asyncio.Task[Any] | None = task  # dropped once disarmed: a done task holds its result
        self.cancelling = cancelling
        self.fired = False
        self.done = False

    def disarm(self) -> None:
        """The wait ended in time: nothing will be cancelled."""
        self.done = True
        self.task = None

    def timed_out(self, exc: BaseException) -> bool:
        """Disarm; did this deadline end the wait that raised ``exc``? (its cancel is then taken back, as
        ``asyncio.timeout`` does: a cancel of the caller's own that came too stays pending)."""
        self.done = True
        task, self.task = self.task, None
        if not self.fired:
            return False
        uncancel = getattr(task, "uncancel", None)  # Python 3.11+: cancel requests are counted
        taken_back = uncancel is None or uncancel() <= self.cancelling
        return taken_back and isinstance(exc, asyncio.CancelledError)


_get_running_loop = asyncio.get_running_loop
# The running task of a loop. asyncio.current_task is a Python function on 3.11 (a frame a statement) over this
# dict; from 3.12 it is C, and the dict is no longer where the C tasks are kept.
_CURRENT_TASKS: dict[Any, Any] | None = getattr(asyncio.tasks, "_current_tasks", None) if sys.version_info < (3, 12) else None
_CANCELLING = hasattr(asyncio.Task, "cancelling")  # Python 3.11+: a task counts its cancel requests


class Deadlines:
    """Every statement deadline of one event loop on a single timer, as the thread runner's watchdog.

    ``asyncio.timeout`` per statement costs a timer handle, a heap entry the loop must later purge
    and two coroutine frames (about 39 000 instructions of a point select's 263 000, counted with
    callgrind, docs/asyncio.md#what-it-costs). Here arming is an append and disarming a flag; one
    timer wakes at most every :attr:`GRAIN` seconds while deadlines are armed, cancels the tasks
    whose deadline passed, and lets :meth:`Armed.timed_out` turn that cancel into a timeout. A
    deadline fires up to :attr:`GRAIN` late.

    Statements with the executor's one timeout arm their deadlines in the order they pass, so most
    go to the back of a queue (an append; the disarmed ones at its front are dropped as later ones
    arrive); one that would pass before the queue's last (a shorter ``timeout=``) goes to a heap.
    """

    #: The timer's resolution in seconds: it wakes at most this often while deadlines are armed.
    GRAIN = 0.005
    #: Heap entries past which disarmed ones are dropped (checked every 1024 arms).
    COMPACT_AT = 4096

    def __init__(self) -> None:
        self._queue: deque[Armed] = deque()  # deadlines in the order they pass
        self._heap: list[tuple[float, int, Armed]] = []  # the others
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self._loop: asyncio.AbstractEventLoop | None = None

    def arm(self, when: float) -> Armed:
        """Cancel the current task at ``when`` (``time.monotonic()`` seconds) unless disarmed before."""
        loop = _get_running_loop()
        task = _CURRENT_TASKS.get(loop) if _CURRENT_TASKS is not None else asyncio.current_task(loop)
        assert task is not None, "a deadline is armed inside a task"
        if loop is not self._loop:  # first use, or a new loop: a timer of a closed one never fires
            self._queue, self._heap, self._timer, self._timer_at, self._loop = deque(), [], None, float("inf"), loop
        armed = Armed(when, task, task.cancelling() if _CANCELLING else 0)
        queue = self._queue
        while queue and queue[0].done:  # ended in time: nothing to keep them for
            queue.popleft()
        if not queue or queue[-1].when <= when:
            queue.append(armed)
        else:
            heap = self._heap
            heapq.heappush(heap, (when, next(self._order), armed))
            if len(heap) > self.COMPACT_AT and not len(heap) % 1024:  # long deadlines: drop the disarmed ones
                heap[:] = [entry for entry in heap if not entry[2].done]
                heapq.heapify(heap)
        if when < self._timer_at:
            self._schedule(when)
        return armed

    def _schedule(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        now = time.monotonic()
        at = max(when, now + self.GRAIN)
        self._timer_at = at
        assert self._loop is not None
        self._timer = self._loop.call_later(at - now, self._fire)

    def _fire(self) -> None:
        self._timer, self._timer_at = None, float("inf")
        queue, heap, now = self._queue, self._heap, time.monotonic()
        while queue and (queue[0].done or queue[0].when <= now):
            _cancel(queue.popleft())
        while heap and (heap[0][2].done or heap[0][0] <= now):  # passed, or disarmed long ago: no need to wake
            _cancel(heapq.heappop(heap)[2])
        first = min(queue[0].when if queue else float("inf"), heap[0][0] if heap else float("inf"))
        if first != float("inf"):
            self._schedule(first)


def _cancel(armed: Armed) -> None:
    """Cancel the task of a deadline that passed (nothing for one disarmed)."""
    if not armed.done and armed.task is not None:
        armed.fired = True
        armed.task.cancel()
