"""What one executor's XA transactions share: the transaction log, the cap on open ones, the clock.

Both runners' XA transactions (:mod:`ddm_core.xa.coordinator`, :mod:`ddm_core.aio.xa`) and
recovery take it from :func:`runtime_of`; :class:`~ddm_core.xa.twophase.TwoPhase` reads the log,
the clock and the step hook from it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
import weakref
from typing import Callable

from ddm_core.errors import XaCapacityError
from ddm_core.xa.log import TransactionLog, XaHost, log_data_source

__all__ = ["XaRuntime", "runtime_of", "flush_marks_of", "StepHook", "MARK_BATCH"]

#: Committed transactions whose ``COMMITTED`` mark waits for a later commit's COMMIT round to write them all
#: at once (docs/xa.md#commit): one log write per this many commits, off every caller's wait.
MARK_BATCH = 16

log = logging.getLogger("ddm_core.xa")

#: ``hook(step, data_source)`` at each step of a commit: ``logged``, ``prepared``, ``decided``,
#: ``committed``, ``finished`` (tests stop a coordinator process there).
StepHook = Callable[[str, "str | None"], None]


class XaRuntime:
    """What one executor's XA transactions share: the log, the concurrency cap, the clock.

    Attributes:
        log: The transaction log.
        max_concurrent: ``xa.maxConcurrent`` when it was made.
        timeout: ``xa.timeoutMs`` in seconds.
        clock: Monotonic seconds (injectable for tests).
        step_hook: Called at each commit step (``None``: nothing).
        coordinator: ``host:pid``, written to the log.
    """

    def __init__(self, host: XaHost) -> None:
        settings = host.config.xa
        self.log = TransactionLog(host, log_data_source(host.config))
        self.max_concurrent = settings.max_concurrent
        self.timeout = settings.timeout_ms / 1000.0
        self._slots = threading.BoundedSemaphore(settings.max_concurrent)
        self._async_slots: asyncio.Semaphore | None = None  # an asyncio executor's (one loop)
        self.clock: Callable[[], float] = time.monotonic
        self.step_hook: StepHook | None = None
        self.coordinator = f"{socket.gethostname()}:{os.getpid()}"
        self._unmarked: list[str] = []
        self._unmarked_lock = threading.Lock()

    def committed(self, gtrid: str) -> None:
        """Every branch of ``gtrid`` committed: its ``COMMITTED`` mark waits for :meth:`marks_due`."""
        with self._unmarked_lock:
            self._unmarked.append(gtrid)

    def marks_due(self) -> list[str]:
        """The gtrids to mark ``COMMITTED`` now (taken), once :data:`MARK_BATCH` of them wait; else none.

        Marks lost with the process (or a failed mark write) leave ``COMMITTING`` rows whose branches are all
        committed: recovery finishes those.
        """
        with self._unmarked_lock:
            if len(self._unmarked) < MARK_BATCH:
                return []
            due, self._unmarked = self._unmarked, []
        return due

    def flush_marks(self) -> None:
        """Write every waiting ``COMMITTED`` mark now (blocking; recovery starts with it). Marks that fail stay
        ``COMMITTING`` rows for recovery to finish."""
        with self._unmarked_lock:
            due, self._unmarked = self._unmarked, []
        if due:
            self.log.mark_committed(due)

    def acquire(self, wait: float) -> None:
        if not self._slots.acquire(timeout=wait):
            raise self.capacity_error(wait)

    def release(self) -> None:
        self._slots.release()

    @property
    def async_slots(self) -> asyncio.Semaphore:
        """The cap for an asyncio executor's transactions (the thread one's is a blocking semaphore)."""
        if self._async_slots is None:
            self._async_slots = asyncio.BoundedSemaphore(self.max_concurrent)
        return self._async_slots

    def capacity_error(self, wait: float) -> XaCapacityError:
        return XaCapacityError(
            f"all {self.max_concurrent} XA transaction slots of this executor stayed taken for {wait:g} s "
            "(xa.maxConcurrent); commit or roll back open XA transactions, or raise the cap",
            max_concurrent=self.max_concurrent,
            timeout=wait,
        )


_RUNTIMES: weakref.WeakKeyDictionary[XaHost, XaRuntime] = weakref.WeakKeyDictionary()
_RUNTIMES_LOCK = threading.Lock()


def runtime_of(host: XaHost) -> XaRuntime:
    """The executor's :class:`XaRuntime` (made on first use; ``xa`` settings are read then).

    ``host``: a thread :class:`~ddm_core.execute.Executor`, or an asyncio executor's ``xa_host``.
    """
    rt = _RUNTIMES.get(host)
    if rt is None:
        with _RUNTIMES_LOCK:
            rt = _RUNTIMES.get(host)
            if rt is None:
                rt = _RUNTIMES[host] = XaRuntime(host)
    return rt


def flush_marks_of(host: XaHost) -> None:
    """``host`` is closing: write the ``COMMITTED`` marks its XA runtime still holds (none made: nothing to do).

    A failed write is logged, not raised: a closing executor does not fail on bookkeeping, and the rows it
    leaves ``COMMITTING`` have every branch committed, which recovery finishes (docs/xa.md#commit).
    """
    rt = _RUNTIMES.get(host)
    if rt is None:
        return
    try:
        rt.flush_marks()
    except Exception as exc:  # any driver or pool failure: the rows stay recovery's
        log.warning("XA: the COMMITTED marks of this executor's last commits were not written at close (%s); "
                    "`ddm xa recover` finishes those log rows", exc)
