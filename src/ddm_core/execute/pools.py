"""Connection pools: one lean LIFO pool per data-source endpoint.

A borrow and a return are one lock round and a list push or pop (well under
1 µs) — a general-purpose pool's events, records and proxies cost several µs
per statement, which on a 2-core machine every other thread pays for too.
Sizing follows :class:`~ddm_core.metadata.model.PoolSettings` (usual sizing:
max 20–50, min idle 5–8, acquire timeout 1–3 s; docs/operations.md#connection-pools):

* **max size** — at most ``max_size`` connections exist, idle or borrowed.
  Returned connections are kept (no connect/close churn under bursts) and
  reused last-in first-out: the warmest one serves the next borrow, the rest
  stay idle.
* **min idle** — ``min_idle`` connections are opened the first time the pool
  is used (or by :meth:`EndpointPool.warm_up`, which
  :meth:`ddm_core.execute.Executor.warm_up` calls for every endpoint), not at
  construction: an executor over a data source that is down still starts.
* **idle timeout / max lifetime** — a connection idle for more than
  ``idle_timeout_ms`` is closed when the pool holds more than ``min_idle``
  idle ones (checked on return, oldest first); one older than
  ``max_lifetime_ms`` is closed instead of being lent again.
* **acquire timeout** — ``acquire_timeout_ms`` → :class:`PoolTimeoutError`
  naming the data source and endpoint.
* **validation** — a connection idle for more than ``alive_bypass_window_ms``
  (HikariCP's bypass window, :data:`PING_AFTER` by default) is pinged when
  borrowed: a connection used a moment ago is not pinged, so the hot path pays
  no extra round trip; a dead one is replaced by a new connection transparently.
* **deadlines** — every connection gets its reusable
  :class:`~ddm_core.execute.watchdog.Guard` when it is opened
  (:attr:`Borrowed.guard`), so arming a statement's deadline allocates nothing.
* **stats** — :meth:`EndpointPool.stats`: idle, borrowed, open, max size,
  borrows, timeouts and discards so far.

Every borrow is a :class:`Borrowed`; :meth:`Borrowed.release` is idempotent
and never raises, rolls back a connection left inside a transaction, and can
*discard* a connection whose state is unknown (a timeout fired, the server
went away, a stream abandoned mid-result). The executor releases on every path
(a leaked connection shrinks the pool until every request waits for the acquire
timeout). What holds a connection beyond one call — a streamed result's
:class:`~ddm_core.execute.result.StreamRows`, a transaction — returns it when
it is garbage-collected; a :class:`Borrowed` itself has no finalizer (one
would cost more than the whole borrow).
"""

from __future__ import annotations

import logging
import gc
import threading
import time
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Iterable, Mapping

from ddm_core.dialects import Dialect
from ddm_core.errors import ExecutionError, PoolTimeoutError
from ddm_core.execute.driver_errors import ends_connection, is_disconnect, map_driver_error
from ddm_core.execute.drivers import Driver, driver_for
from ddm_core.execute.watchdog import Guard, Watchdog
from ddm_core.metadata.model import DataSource, Endpoint, PoolSettings

__all__ = ["EndpointPool", "Borrowed", "PoolStats", "PoolRegistry", "PING_AFTER", "FALLBACK_PACKET", "discard_on",
           "PoolSizing", "pool_sizing", "pool_timeout_error", "lend_count_error", "stats_by_data_source"]

log = logging.getLogger("ddm_core.execute")

#: Seconds a connection may sit idle before a borrow pings it, by default (``pool.aliveBypassWindowMs``).
PING_AFTER = PoolSettings().alive_bypass_window_ms / 1000.0

#: Statement size assumed when the server's packet limit cannot be read (PyMySQL's own executemany cap).
FALLBACK_PACKET = 1_024_000

_monotonic = time.monotonic


@dataclass(frozen=True, slots=True)
class PoolStats:
    """A snapshot of one pool (or of all pools of one data source, summed).

    Attributes:
        data_source: Logical data source name.
        endpoint: Endpoint name (``"*"`` for a data-source total).
        idle: Connections waiting in the pool.
        borrowed: Connections checked out right now.
        open: Connections the pool holds (idle + borrowed).
        max_size: Most connections the pool may hold.
        borrows: Checkouts since the pool was created.
        timeouts: Acquire timeouts since the pool was created.
        discards: Connections closed instead of reused (unknown state after a
            timeout, a lost server, a stream abandoned with much left to read).
    """

    data_source: str
    endpoint: str
    idle: int
    borrowed: int
    open: int
    max_size: int
    borrows: int
    timeouts: int
    discards: int


@dataclass(frozen=True, slots=True)
class PoolSizing:
    """What a pool's :class:`~ddm_core.metadata.model.PoolSettings` come to for one endpoint.

    Attributes:
        max_size: Most connections (1 when connections do not share data).
        min_idle: Connections kept idle (at most ``max_size``).
        acquire_timeout: Seconds a borrow waits at most (also the connect timeout).
        lifetime: Seconds after which a connection is recycled (``None``: never).
        idle_timeout: Seconds after which an idle connection beyond ``min_idle`` is closed (``None``: never).
        ping_after: Seconds idle after which a connection is pinged before it is lent.
        shared: Whether connections to the endpoint see the same data (``False``: SQLite ``:memory:``).
    """

    max_size: int
    min_idle: int
    acquire_timeout: float
    lifetime: float | None
    idle_timeout: float | None
    ping_after: float
    shared: bool


def pool_sizing(settings: PoolSettings, dialect: Dialect, database: str | None) -> PoolSizing:
    """The sizing of a pool of ``database`` on ``dialect``'s backend (the thread and asyncio pools share it)."""
    max_size = max(1, settings.max_size)
    shared = dialect.connections_share_data(database)
    if not shared:
        max_size = 1  # SQLite ":memory:": every connection is a different, empty database
    # One ":memory:" connection is the whole database: never recycle or expire it.
    return PoolSizing(
        max_size=max_size,
        min_idle=min(settings.min_idle, max_size),
        acquire_timeout=settings.acquire_timeout_ms / 1000.0,
        lifetime=settings.max_lifetime_ms / 1000.0 if settings.max_lifetime_ms and shared else None,
        idle_timeout=settings.idle_timeout_ms / 1000.0 if settings.idle_timeout_ms and shared else None,
        ping_after=settings.alive_bypass_window_ms / 1000.0,
        shared=shared,
    )


def pool_timeout_error(
    data_source: str, endpoint: str, waited: float, max_size: int, count: int = 1
) -> PoolTimeoutError:
    """The error of a borrow (of ``count`` connections) that waited ``waited`` seconds in vain."""
    what = "no connection" if count == 1 else f"{count} connections did not"
    verb = "became" if count == 1 else "become"
    return PoolTimeoutError(
        f"data source {data_source!r} (endpoint {endpoint!r}): {what} {verb} "
        f"free within {waited:g} s (all {max_size} borrowed)",
        data_source=data_source,
        endpoint=endpoint,
        timeout=waited,
        max_size=max_size,
    )


def lend_count_error(data_source: str, endpoint: str, count: int, max_size: int) -> ExecutionError:
    """The error of a ``borrow_many(count)`` no pool of ``max_size`` connections can ever lend."""
    return ExecutionError(
        f"data source {data_source!r} (endpoint {endpoint!r}) cannot lend {count} "
        f"connections at once (max size {max_size})",
        data_source=data_source,
    )


class _Connection:
    """One pooled DB-API connection and what the pool knows about it."""

    __slots__ = ("raw", "guard", "created", "returned", "generation")

    def __init__(self, raw: Any, guard: Guard | None, generation: int) -> None:
        self.raw = raw
        self.guard = guard
        self.created = self.returned = _monotonic()
        self.generation = generation


class Borrowed:
    """One checked-out connection. ``raw`` is the DB-API connection.

    Attributes:
        pool: The pool it came from.
        raw: The driver's connection.
        guard: The connection's deadline guard (``None`` when the pool has no watchdog).

    Release it exactly once with :meth:`release` (further calls do nothing).
    """

    __slots__ = ("pool", "raw", "guard", "_conn")

    def __init__(self, pool: EndpointPool, conn: _Connection) -> None:
        self.pool = pool
        self.raw = conn.raw
        self.guard = conn.guard
        self._conn: _Connection | None = conn

    @property
    def released(self) -> bool:
        return self._conn is None

    def release(self, *, discard: bool = False) -> None:
        """Return the connection to its pool (``discard``: close it instead of reusing it).

        A connection still inside a transaction is rolled back first; if that
        fails it is discarded. Never raises.
        """
        conn = self._conn
        if conn is None:
            return
        self._conn = None
        pool = self.pool
        if not discard:
            driver = pool.driver
            try:
                if driver.in_transaction(conn.raw):
                    driver.rollback(conn.raw)
            except Exception as exc:
                log.warning("rollback on release failed on %s: %s", pool.endpoint.name, exc)
                discard = True
        pool._give_back(conn, discard)

    def __repr__(self) -> str:
        state = "released" if self._conn is None else "borrowed"
        return f"<Borrowed {self.pool.endpoint.name} {state}>"


class EndpointPool:
    """The pool of one endpoint (a data source's primary or one of its replicas).

    Args:
        data_source: The logical data source name (for messages and stats).
        endpoint: Where connections go.
        settings: Sizing and timeouts.
        watchdog: Gives every new connection its deadline :class:`Guard`.
    """

    def __init__(
        self, data_source: str, endpoint: Endpoint, settings: PoolSettings, watchdog: Watchdog | None = None
    ) -> None:
        self.data_source = data_source
        self.endpoint = endpoint
        self.settings = settings
        self.driver: Driver = driver_for(endpoint.dialect)
        sizing = pool_sizing(settings, self.driver.dialect, endpoint.database)
        self.max_size = sizing.max_size
        self.min_idle = sizing.min_idle
        self.acquire_timeout = sizing.acquire_timeout
        self._lifetime = sizing.lifetime
        self._ping_after = sizing.ping_after
        self._idle_timeout = sizing.idle_timeout
        self._watchdog = watchdog
        # Reentrant: a finalizer (an abandoned result returning its connection) may run on a thread
        # that holds the lock, whenever an allocation under it triggers the cyclic collector.
        self._lock = threading.RLock()
        self._freed = threading.Condition(self._lock)
        self._idle: list[_Connection] = []  # a stack: the last returned is lent first
        self._open = 0  # idle + borrowed + being opened
        self._waiting = 0
        self._waiting_many = 0  # waiters of borrow_many: a return must wake them all, not one
        self._generation = 0  # dispose() bumps it: older connections close when they come back
        self._borrows = 0
        self._timeouts = 0
        self._discards = 0
        self._warm = False
        self._limits: tuple[int | None, int | None] | None = None
        # Set by read/write splitting (ddm_core.readwrite) on pools of data sources with replicas:
        # the splitter, whether this endpoint is a replica, and the endpoint's circuit breaker.
        self.split: Any = None
        self.replica = False
        self.breaker: Any = None

    # -- borrowing ---------------------------------------------------------------------

    def borrow(self, deadline: float | None = None) -> Borrowed:
        """Check a connection out.

        Args:
            deadline: The statement's ``time.monotonic()`` deadline: waiting for a
                free connection stops there if that comes before the acquire timeout.

        Raises:
            PoolTimeoutError: none became free within the acquire timeout (or before the deadline).
            DataSourceUnavailableError: a new connection could not be opened.
        """
        if not self._warm:
            self._warm_up_lazily()
        if not self._idle and self._open >= self.max_size:
            # Every connection is lent. A result abandoned half-read inside a reference cycle
            # keeps its connection until the cyclic collector runs, and threads that all wait
            # here allocate nothing that would trigger it: collect before waiting.
            gc.collect()
        with self._lock:
            if self._idle:
                conn: _Connection | None = self._idle.pop()
            elif self._open < self.max_size:
                self._open += 1
                conn = None
            else:
                conn = self._wait_for_one(deadline)
            self._borrows += 1
        try:
            if conn is None:
                conn = self._open_new()
            else:
                conn = self._fit(conn, _monotonic())
        except BaseException:
            with self._lock:
                self._borrows -= 1  # nothing was lent
            raise
        return Borrowed(self, conn)

    def lend_idle(self) -> Borrowed | None:
        """An idle connection that needs no check now, or ``None``: never waits, opens, pings or recycles.

        For callers that must not block (an event loop sending a statement, docs/proxy.md):
        anything :meth:`borrow` would do beyond taking the top of the stack is left to it.
        """
        if not self._idle or not self._warm:
            return None
        with self._lock:
            idle = self._idle  # under the lock: dispose() replaces the list
            if not idle:
                return None
            conn = idle[-1]
            if self._needs_check(conn, _monotonic()):
                return None
            idle.pop()
            self._borrows += 1
        return Borrowed(self, conn)

    def _wait_for_one(self, deadline: float | None) -> _Connection | None:
        """Under the lock, with every connection lent: wait for a return (``None``: open a new one)."""
        end = _monotonic() + self.acquire_timeout
        waited = self.acquire_timeout
        if deadline is not None and deadline < end:
            waited = max(0.0, waited - (end - deadline))
            end = deadline
        self._waiting += 1
        try:
            while True:
                if self._idle:
                    return self._idle.pop()
                if self._open < self.max_size:  # one was discarded meanwhile
                    self._open += 1
                    return None
                left = end - _monotonic()
                if left <= 0:
                    raise self._timed_out(waited)
                self._freed.wait(left)
        finally:
            self._waiting -= 1

    def borrow_many(self, count: int, timeout: float | None = None) -> list[Borrowed]:
        """Check ``count`` connections out at once: all of them, or none.

        A statement that keeps several connections of one pool until its caller
        is done (a streamed multi-unit read) takes them this way. Taking them
        one by one, two such statements can each hold some and wait for the
        rest forever (docs/operations.md#connection-pools).

        Args:
            count: How many (at most ``max_size``).
            timeout: Seconds to wait at most (``None``: the acquire timeout; never longer).

        Raises:
            PoolTimeoutError: ``count`` did not become free in time.
            DataSourceUnavailableError: a new connection could not be opened.
        """
        if not 0 < count <= self.max_size:
            raise lend_count_error(self.data_source, self.endpoint.name, count, self.max_size)
        if not self._warm:
            self._warm_up_lazily()
        wait = self.acquire_timeout if timeout is None else max(0.0, min(timeout, self.acquire_timeout))
        if len(self._idle) + self.max_size - self._open < count:
            gc.collect()  # as in borrow(): abandoned results in cycles give theirs back
        with self._lock:
            end = _monotonic() + wait
            self._waiting += 1
            self._waiting_many += 1
            try:
                while len(self._idle) + self.max_size - self._open < count:
                    left = end - _monotonic()
                    if left <= 0:
                        raise self._timed_out(wait, count)
                    self._freed.wait(left)
            finally:
                self._waiting -= 1
                self._waiting_many -= 1
            idle = self._idle
            taken = [idle.pop() for _ in range(min(count, len(idle)))]
            fresh = count - len(taken)
            self._open += fresh
            self._borrows += count
        lent: list[Borrowed] = []
        try:
            now = _monotonic()
            while taken:
                conn = taken.pop()
                lent.append(Borrowed(self, self._fit(conn, now)))
            while fresh:
                fresh -= 1
                lent.append(Borrowed(self, self._open_new()))
        except BaseException:
            for conn in taken:
                self._give_back(conn, False)
            for _ in range(fresh):
                self._forget_slot()
            for b in lent:
                b.release()
            with self._lock:
                self._borrows -= count
            raise
        return lent

    def _timed_out(self, waited: float, count: int = 1) -> PoolTimeoutError:
        self._timeouts += 1
        return pool_timeout_error(self.data_source, self.endpoint.name, waited, self.max_size, count)

    def _fit(self, conn: _Connection, now: float) -> _Connection:
        """An idle connection about to be lent: checked if it sat idle or grew old (see :meth:`_checked`)."""
        if self._needs_check(conn, now):
            return self._checked(conn, now)
        return conn

    def _needs_check(self, conn: _Connection, now: float) -> bool:
        """It sat idle long enough to be pinged, or is old enough to be recycled."""
        return now - conn.returned > self._ping_after or (self._lifetime is not None and now - conn.created > self._lifetime)

    def _checked(self, conn: _Connection, now: float) -> _Connection:
        """An idle connection made fit to lend: recycled when too old, pinged after a pause."""
        if self._lifetime is not None and now - conn.created > self._lifetime:
            self._close(conn.raw)
            return self._reopen()
        if now - conn.returned > self._ping_after:
            try:
                self.driver.ping(conn.raw)
            except Exception as exc:
                log.info("dropping a dead connection to %s: %s", self.endpoint.name, exc)
                self._close(conn.raw)
                return self._reopen()
        return conn

    def _reopen(self) -> _Connection:
        """A slot whose connection was just closed (too old, or dead) gets a new one, or is freed."""
        return self._open_new()

    def _open_new(self) -> _Connection:
        """Open a connection for a slot already counted in ``_open``; the slot is freed on failure."""
        try:
            if self.breaker is None:
                raw = self.driver.connect(self.endpoint, self.acquire_timeout)
            else:  # open after consecutive failures: fail fast, naming the endpoint
                raw = self.breaker.call(self.driver.connect, self.endpoint, self.acquire_timeout)
        except BaseException as exc:
            self._forget_slot()
            if isinstance(exc, Exception):
                mapped = map_driver_error(exc, data_source=self.data_source, endpoint=self.endpoint.name, sql=None)
                raise mapped from (exc if mapped is not exc else exc.__cause__)  # an open breaker's keeps its cause
            raise
        guard = None
        if self._watchdog is not None:
            guard = self._watchdog.guard(partial(self.driver.cancel, self.endpoint, raw))
        return _Connection(raw, guard, self._generation)

    def _forget_slot(self, *, discarded: bool = False) -> None:
        """A connection was closed (or never opened): its slot may be taken again."""
        with self._lock:
            self._open -= 1
            if discarded:
                self._discards += 1
            if self._waiting:
                self._wake()

    def _wake(self) -> None:
        """Under the lock, a connection or a slot came free: wake a waiter (all, if one waits for several)."""
        if self._waiting_many:
            self._freed.notify_all()
        else:
            self._freed.notify()

    # -- returning ---------------------------------------------------------------------

    def _give_back(self, conn: _Connection, discard: bool) -> None:
        if discard or conn.generation != self._generation:
            self._close(conn.raw)
            self._forget_slot(discarded=discard)
            return
        now = conn.returned = _monotonic()
        with self._lock:
            idle = self._idle
            idle.append(conn)
            if self._waiting:
                self._wake()
                return
            timeout = self._idle_timeout
            # the age first: the test that is usually false (every statement's connection comes back here)
            if timeout is None or now - idle[0].returned <= timeout or len(idle) <= self.min_idle:
                return
            expired = idle.pop(0)  # the longest idle: LIFO leaves it at the bottom
            self._open -= 1
        self._close(expired.raw)

    def _close(self, raw: Any) -> None:
        try:
            raw.close()
        except Exception as exc:  # already broken: nothing left to free
            log.debug("closing a connection to %s failed: %s", self.endpoint.name, exc)

    # -- warming up --------------------------------------------------------------------

    def _warm_up_lazily(self) -> None:
        with self._lock:
            if self._warm:
                return
            self._warm = True
        try:
            self.warm_up()
        except Exception as exc:  # the borrow that follows reports the real problem
            log.debug("warming %s failed: %s", self.endpoint.name, exc)

    def warm_up(self) -> int:
        """Open connections until ``min_idle`` are idle (raises if the endpoint is down).

        Returns:
            How many connections are idle afterwards.

        Raises:
            DataSourceUnavailableError: a connection could not be opened.
        """
        self._warm = True
        while True:
            with self._lock:
                if len(self._idle) >= self.min_idle or self._open >= self.max_size:
                    return len(self._idle)
                self._open += 1
            conn = self._open_new()
            with self._lock:
                self._idle.insert(0, conn)  # below the warm ones: lent last
                if self._waiting:
                    self._wake()

    # -- limits ------------------------------------------------------------------------

    def statement_limits(self) -> tuple[int | None, int | None]:
        """``(most bytes, most parameters)`` one statement to this endpoint may have (``None``: no limit).

        The byte limit is the server's own (MySQL ``max_allowed_packet``), read
        once on a pooled connection; if it cannot be read,
        :data:`FALLBACK_PACKET` is assumed.
        """
        limits = self._limits
        if limits is None:
            dialect = self.driver.dialect
            limits = self._limits = (self._packet_limit(dialect.packet_limit_query()), dialect.max_statement_params)
        return limits

    def _packet_limit(self, query: str | None) -> int | None:
        if query is None:
            return None
        borrowed = self.borrow()
        try:
            cursor = borrowed.raw.cursor()
            try:
                cursor.execute(query)
                row = cursor.fetchone()
            finally:
                cursor.close()
            return int(row[0])
        except Exception as exc:  # the statements themselves will report a real problem
            borrowed.release(discard=discard_on(exc))
            log.debug("reading the packet limit of %s failed (%s); assuming %d bytes",
                      self.endpoint.name, exc, FALLBACK_PACKET)
            return FALLBACK_PACKET
        finally:
            borrowed.release()

    # -- observation -----------------------------------------------------------------

    def stats(self) -> PoolStats:
        with self._lock:
            idle = len(self._idle)
            open_ = self._open
        return PoolStats(
            data_source=self.data_source,
            endpoint=self.endpoint.name,
            idle=idle,
            borrowed=open_ - idle,
            open=open_,
            max_size=self.max_size,
            borrows=self._borrows,
            timeouts=self._timeouts,
            discards=self._discards,
        )

    def dispose(self) -> None:
        """Close every idle connection; borrowed ones close when they come back."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._generation += 1
            self._warm = False
        for conn in idle:
            self._close(conn.raw)


def with_options(endpoint: Endpoint, mysql_options: Mapping[str, str] | None) -> Endpoint:
    """``endpoint`` with ``mysql_options`` added to its URL options when it is a MySQL or MariaDB server
    (the endpoint's own value of an option wins)."""
    if not mysql_options or endpoint.dialect not in ("mysql", "mariadb"):
        return endpoint
    own = {key.lower() for key in endpoint.options}
    added = {k: v for k, v in mysql_options.items() if k.lower() not in own}
    return replace(endpoint, options={**endpoint.options, **added}) if added else endpoint


class PoolRegistry:
    """Creates and holds the :class:`EndpointPool` of every endpoint, lazily.

    Pools are keyed by data source, endpoint name, URL and user, so a reloaded
    configuration that moves an endpoint gets a new pool (the old one keeps
    serving connections still borrowed from it until :meth:`dispose`).

    Args:
        watchdog: Handed to every pool (see :class:`EndpointPool`).
        mysql_options: URL options added to every MySQL and MariaDB endpoint's own
            (:func:`with_options`; the executor's ``matched_rows``).
    """

    def __init__(self, watchdog: Watchdog | None = None, mysql_options: Mapping[str, str] | None = None) -> None:
        self._pools: dict[tuple[str, str, str, str | None], EndpointPool] = {}
        self._lock = threading.Lock()
        self._watchdog = watchdog
        self._mysql_options = mysql_options

    def pool(self, ds: DataSource, endpoint: Endpoint) -> EndpointPool:
        key = (ds.name, endpoint.name, endpoint.url, endpoint.username)
        pool = self._pools.get(key)
        if pool is None:
            with self._lock:
                pool = self._pools.get(key)
                if pool is None:
                    endpoint = with_options(endpoint, self._mysql_options)
                    pool = self._pools[key] = EndpointPool(ds.name, endpoint, ds.pool, self._watchdog)
        return pool

    def pools(self) -> list[EndpointPool]:
        with self._lock:
            return list(self._pools.values())

    def stats(self) -> dict[str, PoolStats]:
        """Per data source: every pool of its endpoints summed (``endpoint="*"``)."""
        return stats_by_data_source(p.stats() for p in self.pools())

    def endpoint_stats(self) -> list[PoolStats]:
        return [p.stats() for p in self.pools()]

    def dispose(self) -> None:
        for p in self.pools():
            p.dispose()


def stats_by_data_source(stats: Iterable[PoolStats]) -> dict[str, PoolStats]:
    """Endpoint pools' stats summed per data source (``endpoint="*"``)."""
    out: dict[str, PoolStats] = {}
    for s in stats:
        t = out.get(s.data_source)
        if t is None:
            out[s.data_source] = PoolStats(s.data_source, "*", *_counts(s))
        else:
            out[s.data_source] = PoolStats(s.data_source, "*", *(a + b for a, b in zip(_counts(t), _counts(s))))
    return out


def _counts(s: PoolStats) -> tuple[int, ...]:
    return (s.idle, s.borrowed, s.open, s.max_size, s.borrows, s.timeouts, s.discards)


def discard_on(exc: BaseException) -> bool:
    """Should a connection that raised ``exc`` be discarded rather than reused?"""
    return is_disconnect(exc) or ends_connection(exc) or not isinstance(exc, Exception)
