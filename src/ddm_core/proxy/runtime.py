"""What every session of one proxy shares: the executor, the worker threads, the statement count."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import threading
import time
from typing import Any, Callable, Iterator

from mysql_mimic.variables import GlobalVariables

from ddm_core.execute import Executor
from ddm_core.proxy.audit import AuditLog
from ddm_core.proxy.masking import Masker, MaskPlan
from ddm_core.proxy.ratelimit import RateLimiter
from ddm_core.route.show_tables import LOGIC_DB

__all__ = ["ProxyRuntime", "Shape", "Shapes", "INLINE_QUIET_SECONDS"]

#: A one-unit statement runs on the event loop only when no other session started one this recently.
INLINE_QUIET_SECONDS = 0.005


class Shape:
    """What the proxy learnt about one statement text (after literals became parameters)."""

    __slots__ = ("inline", "slow", "masks")

    def __init__(self, inline: bool) -> None:
        #: Routed to one unit and quick so far: run on the event loop (session.py, _start_inline).
        self.inline = inline
        self.slow = 0  # slow runs on the event loop in a row
        self.masks: MaskPlan | None = None  # its projection's masks, parsed on first need


class Shapes:
    """Statement texts seen, bounded (the oldest go first): the router has their plans cached."""

    def __init__(self, limit: int = 4096) -> None:
        self._seen: dict[str, Shape] = {}
        self._limit = limit

    def get(self, text: str) -> Shape | None:
        return self._seen.get(text)

    def add(self, text: str, *, inline: bool) -> Shape:
        shape = self._seen.get(text)
        if shape is None:
            if len(self._seen) >= self._limit:
                with contextlib.suppress(KeyError, StopIteration, RuntimeError):  # another thread took it first
                    del self._seen[next(iter(self._seen))]
            shape = self._seen[text] = Shape(inline)
        return shape


class ProxyRuntime:
    """Shared state of one proxy.

    Args:
        executor: Runs every session's statements (one pool set for all sessions).
        variables: The global variables sessions start from.
        workers: Threads running statements at once (``proxy.workers``).
        batch_rows: Rows per batch sent to a client (``proxy.batchRows``).
        limiter: Rate limits per user and logic table (``None`` or empty: none).
        masker: Masking rules (``None`` or empty: none).
        audit: The slow-SQL audit log (``None``: none).
        unmasked: Users who see masked columns unmasked.
        clock: Monotonic seconds (statement times for the audit log).
        inline: One-unit statements may run on the event loop (``proxy.inlineStatements``).
    """

    def __init__(
        self, executor: Executor, variables: GlobalVariables, *, workers: int, batch_rows: int,
        limiter: RateLimiter | None = None, masker: Masker | None = None, audit: AuditLog | None = None,
        unmasked: frozenset[str] = frozenset(), clock: Callable[[], float] = time.monotonic,
        inline: bool = True,
    ) -> None:  # fmt: skip
        self.executor = executor
        self.variables = variables
        self.batch_rows = batch_rows
        self.limiter = limiter if limiter is not None and limiter.active else None
        self.masker = masker if masker is not None and masker.active else None
        self.audit = audit
        self.unmasked = unmasked
        self.clock = clock
        self.workers = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ddm-proxy")
        self.schema = executor.config.name or LOGIC_DB  # ProxyServer always names it
        self.shapes = Shapes()
        self.inline = inline
        self.inlined = 0  # statements run on the event loop, without the thread hop
        self._last_session: object | None = None  # who started the last routed statement, and when
        self._last_at = 0.0
        self._running = 0
        self._idle = threading.Condition()
        self._offloaded = 0  # statements on the worker threads now (changed on the event loop only)
        # open client transactions and unfinished streamed results: backend connections held between commands
        self._holding = 0
        self._holding_lock = threading.Lock()

    @contextlib.contextmanager
    def offloaded(self) -> Iterator[None]:
        """Count a call on the worker threads (the event loop awaits it)."""
        self._offloaded += 1
        try:
            yield
        finally:
            self._offloaded -= 1

    def holding(self, delta: int) -> None:
        """One more (+1) or one fewer (-1) transaction or streamed result holding backend connections."""
        with self._holding_lock:
            self._holding += delta

    def others_busy(self, session: object, now: float) -> bool:
        """Another session started a statement within the last ``INLINE_QUIET_SECONDS`` (this one is noted).

        Then clients are concurrent, and a statement blocking the loop would make theirs wait: the
        worker threads overlap their backend round trips instead.
        """
        busy = self._last_session is not session and now - self._last_at < INLINE_QUIET_SECONDS
        self._last_session, self._last_at = session, now
        return busy

    def may_inline(self) -> bool:
        """A one-unit statement may run on the event loop: nothing on the workers, nothing holding connections.

        Then the proxy holds no backend connection (no open transaction, no streamed result half
        sent), so the statement's pool has one free and the loop never waits for a connection,
        only for the data source's answer.
        """
        return self._offloaded == 0 and self._holding == 0 and self.inline

    @contextlib.contextmanager
    def statement(self) -> Iterator[None]:
        """Count one client command as running (shutdown waits for the count to reach zero)."""
        with self._idle:
            self._running += 1
        try:
            yield
        finally:
            with self._idle:
                self._running -= 1
                if self._running == 0:
                    self._idle.notify_all()

    @property
    def running(self) -> int:
        """Client commands running now."""
        return self._running

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for no command to be running; ``True`` when none is."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
            return True

    @staticmethod
    def client_host(connection: Any) -> str:
        """The client's address as ``USER()`` shows it (``%`` when unknown)."""
        try:
            peer = connection.stream.writer.get_extra_info("peername")
        except AttributeError:
            return "%"
        return str(peer[0]) if peer else "%"
