"""What every session of one proxy shares: the executor, the worker threads, the statement count.

The governance part — rate limits, who is unmasked, the masks, the audit log —
comes from the ``proxy:`` section and is replaced by :meth:`ProxyRuntime.configure`
at start and on every reload: each is one attribute, assigned whole, so a
statement reads one limiter, one masker; a session takes the new ones at its
next statement.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from typing import Any, Callable

from mysql_mimic import context
from mysql_mimic.variables import GlobalVariables

from ddm_core.execute import Executor
from ddm_core.metadata.model import MaskRule, ProxySettings
from ddm_core.proxy.audit import AuditLog
from ddm_core.proxy.backends import LoopBackends
from ddm_core.proxy.described import ResultShapes
from ddm_core.proxy.hotpath import Deadlines
from ddm_core.proxy.kill import Killable
from ddm_core.proxy.masking import Masker, MaskPlan
from ddm_core.proxy.privileges import AccessControl, Needs
from ddm_core.proxy.relay import Commands
from ddm_core.proxy.ratelimit import RateLimiter
from ddm_core.route.ddl.show_tables import LOGIC_DB
from ddm_core.route.router import CACHED_TEXT_LIMIT

__all__ = ["ProxyRuntime", "Workers", "Shape", "Shapes"]

log = logging.getLogger("ddm_core.proxy")


class Shape:
    """What the proxy learnt about one statement text (after literals became parameters)."""

    __slots__ = ("inline", "slow", "masks", "needs", "style", "read", "many")

    def __init__(self, inline: bool) -> None:
        #: Routed to one unit and quick so far: sent from the event loop (session.py, _start_sent).
        self.inline = inline
        self.slow = 0  # slow runs on the event loop in a row
        self.masks: MaskPlan | None = None  # its projection's masks, parsed on first need
        self.needs: Needs | None = None  # the privileges it needs (proxy/privileges.py), read before its first run
        self.style: str | None = None  # its paramstyle (execute/shared.py style_of), read on the hot path's first run
        #: A plain SELECT when last routed: in a transaction it may go from the loop (proxy/loop_transactions.py).
        self.read = False
        #: A read of several units when last routed: sent from the event loop too (proxy/relay_many.py).
        self.many = False


class Shapes:
    """Statement texts seen, bounded (the oldest go first): the router has their plans cached."""

    def __init__(self, limit: int = 4096) -> None:
        #: The shapes by text (the gate's front reads it directly)
        self.seen: dict[str, Shape] = {}
        self._limit = limit
        #: The shape of ``text``, if seen: the dict's own ``get`` (read for every statement, a frame less)
        self.get: Callable[[str], Shape | None] = self.seen.get

    def add(self, text: str, *, inline: bool) -> Shape:
        shape = self.seen.get(text)
        if shape is None and len(text) > CACHED_TEXT_LIMIT:
            return Shape(inline)  # not remembered, as the router does not cache its plan either
        if shape is None:
            if len(self.seen) >= self._limit:
                with contextlib.suppress(KeyError, StopIteration, RuntimeError):  # another thread took it first
                    del self.seen[next(iter(self.seen))]
            shape = self.seen[text] = Shape(inline)
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
        relay: Their results go to the client packet by packet, rows not decoded (``proxy.relay``).
    """

    def __init__(
        self, executor: Executor, variables: GlobalVariables, *, workers: int, batch_rows: int,
        limiter: RateLimiter | None = None, masker: Masker | None = None, audit: AuditLog | None = None,
        unmasked: frozenset[str] = frozenset(), clock: Callable[[], float] = time.monotonic,
        inline: bool = True, relay: bool = True,
    ) -> None:  # fmt: skip
        self.executor = executor
        self.variables = variables
        self.batch_rows = batch_rows
        self.limiter = limiter if limiter is not None and limiter.active else None
        self.masker = masker if masker is not None and masker.active else None
        self.audit = audit
        self.unmasked = unmasked
        self.clock = clock
        self.workers = Workers(workers, "ddm-proxy")
        self.backends = LoopBackends(executor, self.workers)  # the hot path's own connections, on the loop
        self.deadlines = Deadlines()  # of the statements running on those connections, on one loop timer
        self.tracker = executor.endpoints.split.tracker  # read-your-writes; sessions carry their own marks
        self.schema = executor.config.name or LOGIC_DB  # ProxyServer always names it
        self.access = AccessControl(self.schema)  # the users' privileges (proxy.users[].allow)
        #: Logged-in sessions by connection id, for KILL (on the event loop only).
        self.sessions: dict[int, Killable] = {}
        self.shapes = Shapes()
        self.described = ResultShapes()  # prepared statements' result columns by text (proxy/described.py)
        self.inline = inline
        self.relay = relay
        self.front = self._front()
        self.hot_on_pins = 0  # of those, reads the hot path sent on a transaction's pin (ProxySession.hot)
        self.hot_controls = 0  # BEGIN, COMMIT and ROLLBACK the hot path answered (ProxySession._hot_control)
        self.hot_resets = 0  # COM_STMT_RESET the gate answered (ProxySession._hot_reset)
        self.fronted = 0  # of the inlined, those the gate's front took whole (_fast/hotfront), counted as connections end
        self.hot_many = 0  # multi-unit reads the gate took from mimic's path (ProxySession._hot_many)
        self.many_inlined = 0  # multi-unit reads run on the event loop (proxy/relay_many.py), not counted above
        self.many_relayed = 0  # of these, the ones whose answers were relayed undecoded
        self.many_ordered = 0  # and the ones whose answers were merged in order undecoded (proxy/ordered_many.py)
        self.many_folded = 0  # and the ones whose aggregates were folded undecoded (proxy/folded_many.py)
        self.many_taken = 0  # multi-unit reads answered from reader callbacks, with no task (the hotmany unit)
        self.opened_on_loop = 0  # data sources a transaction was opened on from the event loop (loop_transactions)
        self.opened_with_first = 0  # of them, opened with the first statement sent right behind the opening
        self.ended_on_loop = 0  # transactions with pins committed or rolled back from the event loop
        self._idle = threading.Condition(threading.Lock())
        #: Client commands running, in all and per connection (on the event loop only), compiled: every statement
        #: enters and exits (_fast/hotfront); _enter and _exit are its methods, for the statements' paths.
        self.commands = Commands(self._idle)
        self._enter, self._exit = self.commands.enter, self.commands.exit
        self.running_on, self.quiet = self.commands.running_on, self.commands.quiet
        #: Per connection id, the idle sweeper's tick at which its last command ended or mimic's reader began to
        #: wait for the next one (proxy/idle.py; the sweeper's clock is ``commands.ticks``).
        self.quiet_since = self.commands.quiet_since
        self._limiter = limiter  # also when inactive: a reload keeps the tokens of unchanged buckets
        self._mask_rules: tuple[MaskRule, ...] | None = None  # as configure() last took them
        self._drivers: tuple[Any, dict[str, Any]] = (None, {})  # (configuration, data source -> driver)

    def configure(self, settings: ProxySettings) -> None:
        """Take ``settings``' user and table rate limits, unmask list, masks, audit log and ``inlineStatements``.

        Called at start and by each reload. Rate buckets whose rate did not change keep their
        tokens; the statement texts' mask plans are dropped when the masks changed. The audit
        file is opened first, so an unwritable one (``OSError``) leaves everything as it was.
        """
        audit = self.audit
        if settings.audit_log is None:
            audit = None
        elif audit is None:
            audit = AuditLog(settings.audit_log, settings.audit_threshold_ms)
        else:
            audit.configure(settings.audit_log, settings.audit_threshold_ms)
        limiter = RateLimiter({u.name: u.rate_limit for u in settings.users}, settings.table_rate_limits,
                              clock=self.clock, previous=self._limiter)  # fmt: skip
        self._limiter = limiter
        self.limiter = limiter if limiter.active else None
        self.unmasked = frozenset(u.name for u in settings.users if u.unmask)
        self.access.take(settings.users)
        self.inline = settings.inline_statements
        self.relay = settings.relay
        self.backends.idle_seconds = settings.link_idle_ms / 1000
        if settings.masks != self._mask_rules:
            masker = Masker(settings.masks)
            self.masker = masker if masker.active else None
            # After the masker: a session that meets the new texts reads the new masker too.
            self.shapes = Shapes()
            self._mask_rules = settings.masks
        self.front = self._front()
        old_audit, self.audit = self.audit, audit
        if old_audit is not None and old_audit is not audit:
            old_audit.close()

    def _front(self) -> bool:
        """Whether the hot path may take a statement without asking the session (``inline``, ``relay``, no rate
        limits, no masks): read once a statement by the gate's front in place of the four, kept by
        :meth:`configure`, the one writer of those."""
        return self.inline and self.relay and self.limiter is None and self.masker is None

    def revoke(self, connection_id: int, end: Callable[[], None]) -> None:
        """Call ``end`` (the connection's kill) now if it runs no command, else when its command is done.

        For the sessions of a user a reload removed: ended between commands, so no statement
        is cut off half-way and an open transaction rolls back as on a disconnect. Event loop only.
        """
        self.commands.revoke(connection_id, end)

    def driver_of(self, data_source: str) -> Any:
        """The executor's driver for ``data_source`` (kept per configuration: a reload may change it)."""
        config = self.executor.engine.router.routed_config  # the hot path routed just before
        known = self._drivers
        if known[0] is not config:
            known = self._drivers = (config, {})
        driver = known[1].get(data_source)
        if driver is None:
            driver = known[1][data_source] = self.executor.primary_pool(data_source).driver
        return driver

    def statement(self) -> _Command:
        """Count one client command as running (shutdown waits for the count to reach zero).

        Entered on the event loop, in the connection's task (mimic's ``connection_id`` context
        variable names it); a connection :meth:`revoke`-d meanwhile is ended once its last
        command is done. A plain context-manager object: a generator-based one costs a few
        hundred interpreted instructions a statement.
        """
        return _Command(self)

    @property
    def inlined(self) -> int:
        """Statements run on the event loop, without the thread hop (counted by :attr:`commands`)."""
        return self.commands.inlined

    @inlined.setter
    def inlined(self, count: int) -> None:
        self.commands.inlined = count

    @property
    def relayed(self) -> int:
        """Of those, the statements whose result was relayed."""
        return self.commands.relayed

    @relayed.setter
    def relayed(self, count: int) -> None:
        self.commands.relayed = count

    @property
    def running(self) -> int:
        """Client commands running now."""
        return self.commands.running

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for no command to be running; ``True`` when none is."""
        deadline = time.monotonic() + timeout
        commands = self.commands
        with self._idle:  # Commands.exit reads waiting after it counted down: it sees this waiter or the waiter the zero
            commands.waiting += 1
            try:
                while commands.running:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._idle.wait(left)
                return True
            finally:
                commands.waiting -= 1

    @staticmethod
    def client_host(connection: Any) -> str:
        """The client's address as ``USER()`` shows it (``%`` when unknown)."""
        try:
            peer = connection.stream.writer.get_extra_info("peername")
        except AttributeError:
            return "%"
        return str(peer[0]) if peer else "%"


class _Command:
    """:meth:`ProxyRuntime.statement`'s context manager: one client command running."""

    __slots__ = ("runtime", "cid")

    def __init__(self, runtime: ProxyRuntime) -> None:
        self.runtime = runtime
        self.cid: int | None = None

    def __enter__(self) -> None:
        self.cid = context.connection_id.get(None)
        self.runtime._enter(self.cid)

    def __exit__(self, *_: object) -> None:
        self.runtime._exit(self.cid)


class Workers:
    """The threads running statements: calls in, nothing out (the caller hands its outcome back itself).

    ``concurrent.futures.ThreadPoolExecutor`` makes a ``Future`` (with its ``Condition``) and a work
    item per call and settles them on the worker: ~340 interpreted instructions a statement the
    proxy never reads (session.py's hop passes the outcome to the loop itself). Here a call is one
    C-level queue put and get. Threads start as calls need them, up to ``size``.
    """

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = threading.Semaphore(0)  # released by a worker waiting for a call
        self._closed = False
        self._lock = threading.Lock()

    def submit(self, call: Callable[[], None]) -> None:
        """Run ``call`` on a worker; exceptions are logged (callers catch their own).

        Raises:
            RuntimeError: after :meth:`shutdown`, as ``ThreadPoolExecutor`` does.
        """
        if self._closed:
            raise RuntimeError("cannot run statements after the proxy's workers were shut down")
        self._queue.put(call)
        if not self._idle.acquire(blocking=False) and len(self._threads) < self._size:
            with self._lock:
                if len(self._threads) < self._size:
                    thread = threading.Thread(target=self._work, name=f"{self._name}_{len(self._threads)}",
                                              daemon=True)  # fmt: skip
                    self._threads.append(thread)
                    thread.start()

    def _work(self) -> None:
        get, idle = self._queue.get, self._idle
        while True:
            call = get()
            if call is None:
                return
            try:
                call()
            except BaseException:  # noqa: B036  # a call's own failure, not the worker's
                log.exception("a proxy worker's call failed")
            idle.release()

    def shutdown(self, wait: bool = True) -> None:
        """Stop taking calls; the queued ones still run, then the threads end (joined with ``wait``)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()
