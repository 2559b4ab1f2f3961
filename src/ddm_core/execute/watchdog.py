"""Statement deadlines that cost next to nothing when they do not fire.

A statement on the caller's thread (the single-unit path) cannot wait on a
future with a timeout without a thread hop, so deadlines are enforced from the
side by one daemon thread per :class:`Watchdog`.

Every pooled connection gets one :class:`Guard` when it is opened, reused for
every statement it runs. :meth:`Guard.arm` stores the deadline and puts the
guard in the watchdog's set of armed guards; :meth:`Guard.disarm` clears it —
a few attribute stores, one set insert and removal, one uncontended lock, no
allocation and no thread wake-up. The watchdog thread sleeps until the
earliest armed deadline it saw; :meth:`Guard.arm` wakes it only when the new
deadline is earlier than that planned wake. With nothing armed it lingers
(sleeps :attr:`Watchdog.linger` seconds at a time) while statements keep
coming, and sleeps until woken once they stop: a steady stream of statements
costs no wake-up per statement.

When a deadline passes first, the watchdog marks the guard *fired* and runs
``cancel`` (``KILL QUERY``, ``sqlite3.Connection.interrupt``...) on a thread
of its own, so a data source that does not answer never delays the deadlines
of statements elsewhere. The statement's own thread then raises
:class:`~ddm_core.errors.QueryTimeoutError` whatever the driver returned (a
killed ``SLEEP()`` returns 1 rather than failing). The guard's lock is held
from the decision to fire until ``cancel`` returns, and :meth:`Guard.disarm`
takes it, so a connection never goes back to its pool while a cancel aimed
at it is in flight (it could hit the next borrower's statement); a connection
whose guard fired is discarded, not reused.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

__all__ = ["Watchdog", "Guard", "LINGER"]

log = logging.getLogger("ddm_core.execute")

#: Seconds the watchdog sleeps at a time while statements come and go (see the module docstring).
LINGER = 1.0

#: Shortest sleep between two scans, so a deadline just ahead is not polled in a busy loop.
_MIN_SLEEP = 0.001

#: Shortest linger: deadlines nearer than this wake the thread once per statement.
_LINGER_FLOOR = 0.05


class Guard:
    """The deadline of one connection's current statement; armed and disarmed per statement.

    Not thread-safe on the statement side: one statement at a time per
    connection, which is how pooled connections are used.
    """

    __slots__ = ("_watchdog", "_cancel", "_lock", "deadline", "fired")

    def __init__(self, watchdog: Watchdog, cancel: Callable[[], None]) -> None:
        self._watchdog = watchdog
        self._cancel = cancel
        self._lock = threading.Lock()
        #: ``time.monotonic()`` past which the statement is cancelled; ``None`` when disarmed.
        self.deadline: float | None = None
        #: The last armed statement was cancelled.
        self.fired = False

    def arm(self, deadline: float) -> None:
        """Cancel the connection's statement once ``time.monotonic()`` passes ``deadline``."""
        self.fired = False
        self.deadline = deadline
        wd = self._watchdog
        wd._armed.add(self)
        wd._used = True
        wake = wd._wake_at  # read after the add: see Watchdog._run
        if wake is None or deadline < wake:
            wd._nudge(deadline)

    def disarm(self) -> bool:
        """Retire the deadline; ``True`` when it fired (waits for a cancel in flight to finish)."""
        with self._lock:
            self.deadline = None
            fired = self.fired
        self._watchdog._armed.discard(self)
        return fired

    def fire(self) -> bool:
        """Cancel the armed statement now, as if its deadline had passed (a ``KILL QUERY`` from another proxy
        session): its connection is then discarded and its read fails as a timed-out one does. ``False``:
        nothing armed (the statement is over, or has no deadline)."""
        return self._fire_if_due(float("inf"))

    def _fire_if_due(self, now: float) -> bool:
        """Watchdog thread: fire when still armed and due; the lock stays held until the cancel is done."""
        self._lock.acquire()
        deadline = self.deadline
        if deadline is None or deadline > now:
            self._lock.release()
            return False
        self.deadline = None
        self.fired = True
        self._watchdog._armed.discard(self)
        thread = threading.Thread(target=self._cancel_and_unlock, name="ddm-cancel", daemon=True)
        try:
            thread.start()
        except BaseException:  # no thread to be had: cancel here rather than not at all
            self._cancel_and_unlock()
        return True

    def _cancel_and_unlock(self) -> None:
        try:
            self._cancel()
        except Exception as exc:  # a failed cancel must not kill anything else
            log.warning("cancelling a statement past its deadline failed: %s", exc)
        finally:
            self._lock.release()  # a threading.Lock may be released by another thread


class Watchdog:
    """A daemon thread firing the :class:`Guard` s whose deadline passed (``time.monotonic``).

    Args:
        name: The thread's name.
        linger: Seconds to sleep at a time while nothing is armed but statements
            keep coming. An armed deadline nearer than that wakes the thread once
            and shortens the linger to it, so a steady stream of short deadlines
            does not wake it per statement either.
    """

    def __init__(self, name: str = "ddm-watchdog", linger: float = LINGER) -> None:
        self._armed: set[Guard] = set()
        self._cond = threading.Condition(threading.Lock())
        self._name = name
        self._thread: threading.Thread | None = None
        self._wake_at: float | None = None  # None: sleeping until notified
        self._used = False  # a guard was armed since the last scan
        self._linger = linger
        self._stopped = False
        #: Times the thread woke and scanned the armed guards (a steady stream of statements adds few).
        self.wakes = 0

    def guard(self, cancel: Callable[[], None]) -> Guard:
        """A reusable guard for one connection; ``cancel`` stops the statement it runs."""
        if self._thread is None:
            with self._cond:
                if self._thread is None and not self._stopped:
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()
        return Guard(self, cancel)

    def armed(self) -> int:
        """Guards armed right now (statements running under a deadline)."""
        return len(self._armed)

    def earliest_deadline(self) -> float | None:
        """The earliest deadline armed right now (``None``: nothing armed); read off the statement path
        (the instance registry asks whether statements begun before a version switch are over)."""
        deadlines = [d for d in (g.deadline for g in list(self._armed)) if d is not None]  # list(): one C-level copy
        return min(deadlines) if deadlines else None

    def _nudge(self, deadline: float) -> None:
        """A deadline earlier than the planned wake was armed: wake the thread to rescan."""
        with self._cond:
            ahead = deadline - time.monotonic()
            if ahead < self._linger:
                self._linger = max(ahead, _LINGER_FLOOR)
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _run(self) -> None:
        # Guard.arm adds to _armed and *then* reads _wake_at; this loop clears _wake_at
        # and *then* copies _armed. So an arm missed by the copy sees None (or the wake
        # planned after the copy) and notifies when it has to: no deadline is overslept.
        cond = self._cond
        with cond:
            while not self._stopped:
                self.wakes += 1
                self._wake_at = None
                now = time.monotonic()
                earliest: float | None = None
                for guard in list(self._armed):  # a copy: statement threads add and remove meanwhile
                    deadline = guard.deadline
                    if deadline is None:
                        continue
                    if deadline <= now:
                        if guard._fire_if_due(now):
                            continue
                        deadline = guard.deadline  # re-armed meanwhile
                        if deadline is None:
                            continue
                    if earliest is None or deadline < earliest:
                        earliest = deadline
                if earliest is not None:
                    self._wake_at = max(earliest, now + _MIN_SLEEP)
                elif self._used:
                    self._used = False
                    self._wake_at = now + self._linger
                else:
                    cond.wait()
                    continue
                cond.wait(self._wake_at - now)
