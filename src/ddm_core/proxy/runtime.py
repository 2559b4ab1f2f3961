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
from ddm_core.proxy.masking import Masker
from ddm_core.proxy.ratelimit import RateLimiter
from ddm_core.route.show_tables import LOGIC_DB

__all__ = ["ProxyRuntime"]


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
    """

    def __init__(
        self, executor: Executor, variables: GlobalVariables, *, workers: int, batch_rows: int,
        limiter: RateLimiter | None = None, masker: Masker | None = None, audit: AuditLog | None = None,
        unmasked: frozenset[str] = frozenset(), clock: Callable[[], float] = time.monotonic,
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
        self._running = 0
        self._idle = threading.Condition()

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
