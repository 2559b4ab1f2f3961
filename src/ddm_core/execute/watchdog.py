"""Statement deadlines: one daemon thread cancels statements that run past theirs.

A statement on the caller's thread (the single-unit fast path) cannot wait on
a future with a timeout without a thread hop, so deadlines are enforced from
the side: :meth:`Watchdog.arm` registers ``(deadline, cancel)`` (a heap push
under a lock, ~1 µs) and :meth:`Guard.disarm` retires it. When a deadline
passes first, the watchdog thread calls ``cancel`` (``KILL QUERY``,
``sqlite3.Connection.interrupt``...) and marks the guard *fired*; the
statement's own thread then raises :class:`~ddm_core.errors.QueryTimeoutError`
whatever the driver returned (a killed ``SLEEP()`` returns 1 rather than
failing).

:meth:`Guard.disarm` and the cancel run under the guard's lock, so a
connection is never handed back to its pool while a cancel aimed at it is
still in flight (it could otherwise hit the next borrower's statement), and a
connection whose guard fired is discarded, not reused.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable

__all__ = ["Watchdog", "Guard", "TICK"]

log = logging.getLogger("ddm_core.execute")

#: Shortest sleep of the watchdog thread, in seconds: deadlines fire at most this late.
TICK = 0.02


def _nothing() -> None:
    return None


class Guard:
    """One armed deadline."""

    __slots__ = ("deadline", "_cancel", "_lock", "_active", "fired")

    def __init__(self, deadline: float, cancel: Callable[[], None]) -> None:
        self.deadline = deadline
        self._cancel = cancel
        self._lock = threading.Lock()
        self._active = True
        self.fired = False

    def fire(self) -> None:
        with self._lock:
            if not self._active:
                return
            self._active = False
            self.fired = True
            try:
                self._cancel()
            except Exception as exc:  # a failed cancel must not kill the watchdog
                log.warning("cancelling a statement past its deadline failed: %s", exc)

    def disarm(self) -> bool:
        """Retire the deadline; ``True`` when it had already fired (the statement was cancelled)."""
        with self._lock:
            self._active = False
            self._cancel = _nothing  # drop the connection it referenced; the heap keeps the guard a while
            return self.fired


class Watchdog:
    """A daemon thread firing :class:`Guard` s whose deadline passed (``time.monotonic``).

    The thread sleeps until the earliest deadline in its heap, retired or not,
    and at least :data:`TICK` between wakes, so a busy executor costs no
    thread wake-up per statement: :meth:`arm` only notifies when the new
    deadline is earlier than the planned wake (with one timeout for every
    statement, deadlines arrive in order and it never does after the first).
    Deadlines are therefore enforced within ``TICK`` seconds.
    """

    def __init__(self, name: str = "ddm-watchdog") -> None:
        self._heap: list[tuple[float, int, Guard]] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._name = name
        self._thread: threading.Thread | None = None
        self._wake_at: float | None = None  # None: sleeping until notified
        self._stopped = False

    def arm(self, deadline: float, cancel: Callable[[], None]) -> Guard:
        """Call ``cancel`` once ``time.monotonic()`` passes ``deadline`` unless disarmed first."""
        guard = Guard(deadline, cancel)
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (deadline, next(self._seq), guard))
            if self._wake_at is None or deadline < self._wake_at - TICK:
                self._cond.notify()
        return guard

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        heap = self._heap
        due: list[Guard] = []
        while True:
            with self._cond:
                if self._stopped:
                    return
                now = time.monotonic()
                while heap and heap[0][0] <= now:
                    guard = heapq.heappop(heap)[2]
                    if guard._active:
                        due.append(guard)
                if not due:
                    if heap:
                        self._wake_at = max(heap[0][0], now + TICK)
                        self._cond.wait(self._wake_at - now)
                    else:
                        self._wake_at = None
                        self._cond.wait()
                    continue
            for guard in due:  # outside the heap lock: a KILL QUERY takes a round trip
                guard.fire()
            due.clear()
