"""asyncio connection pools: one LIFO pool per data-source endpoint, on one event loop.

The same pool as :class:`~ddm_core.execute.pools.EndpointPool` — sizing
(:func:`~ddm_core.execute.pools.pool_sizing`), LIFO reuse, ``min_idle`` opened
on first use or by :meth:`AsyncEndpointPool.warm_up`, idle timeout and max
lifetime, the acquire timeout's :class:`~ddm_core.errors.PoolTimeoutError`,
a ping after ``pool.aliveBypassWindowMs`` idle, a dead
idle connection replaced transparently, :class:`~ddm_core.execute.pools.PoolStats`
— without threads: every pool belongs to the event loop that uses it, so a
borrow and a release are a list pop and push with no lock. A borrow that finds
every connection lent waits on a future of its own; a release wakes the oldest
waiter (every waiter when one waits for several connections).

Cancellation leaves nothing behind: a borrow cancelled while it waits leaves
the queue (a wake-up it had already received passes to the next waiter); one
cancelled while its connection is being opened or pinged closes that
connection and frees its slot, so :meth:`AsyncEndpointPool.stats` stays exact.

:meth:`AsyncBorrowed.release` is synchronous, idempotent and never raises. A
connection given back inside an open transaction is closed, not rolled back:
a rollback is a round trip, which a synchronous release could only leave to a
background task that may outlive the pool or the loop, while closing ends the
transaction on the server just as surely (the server rolls back what a closed
session left open). The one exception is a pool whose connections do not share
data (SQLite ``:memory:``): closing would drop the database, so the rollback
runs in a task and the connection is lent again once it is done.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any, Mapping

from ddm_core.aio.drivers import AsyncDriver, async_driver_for
from ddm_core.errors import ExecutionError, PoolTimeoutError
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.pools import (
    PoolStats,
    lend_count_error,
    pool_sizing,
    pool_timeout_error,
    stats_by_data_source,
    with_options,
)
from ddm_core.metadata.model import DataSource, Endpoint, PoolSettings

__all__ = ["AsyncEndpointPool", "AsyncBorrowed", "AsyncPoolRegistry"]

log = logging.getLogger("ddm_core.aio")

_monotonic = time.monotonic
_get_running_loop = asyncio.get_running_loop


class _Connection:
    """One pooled connection and what the pool knows about it."""

    __slots__ = ("raw", "created", "returned", "generation")

    def __init__(self, raw: Any, generation: int) -> None:
        self.raw = raw
        self.created = self.returned = _monotonic()
        self.generation = generation


class AsyncBorrowed:
    """One checked-out connection. ``raw`` is the driver's connection.

    Attributes:
        pool: The pool it came from.
        raw: The driver's connection (see :class:`~ddm_core.aio.drivers.AsyncDriver`).

    Release it exactly once with :meth:`release` (further calls do nothing).
    """

    __slots__ = ("pool", "raw", "_conn")

    def __init__(self, pool: AsyncEndpointPool, conn: _Connection) -> None:
        self.pool = pool
        self.raw = conn.raw
        self._conn: _Connection | None = conn

    @property
    def released(self) -> bool:
        return self._conn is None

    def release(self, *, discard: bool = False) -> None:
        """Give the connection back (``discard``: close it instead of reusing it). Never raises.

        A connection still inside a transaction is closed (see the module
        docstring; SQLite ``:memory:``: rolled back in a task first).
        """
        conn = self._conn
        if conn is None:
            return
        self._conn = None
        pool = self.pool
        if not discard:
            try:
                if pool.driver.in_transaction(conn.raw):
                    if not pool.shared:
                        pool._roll_back_later(conn)
                        return
                    log.info("a connection to %s came back inside a transaction: closed (the server rolls it back)",
                             pool.endpoint.name)  # fmt: skip
                    discard = True
            except Exception as exc:  # state unknown: close it
                log.warning("checking the transaction of a connection to %s failed: %s", pool.endpoint.name, exc)
                discard = True
        pool._give_back(conn, discard)

    def __repr__(self) -> str:
        state = "released" if self._conn is None else "borrowed"
        return f"<AsyncBorrowed {self.pool.endpoint.name} {state}>"


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


class AsyncEndpointPool:
    """The asyncio pool of one endpoint (a data source's primary or one of its replicas).

    Args:
        data_source: The logical data source name (for messages and stats).
        endpoint: Where connections go.
        settings: Sizing and timeouts (as :class:`~ddm_core.execute.pools.EndpointPool` reads them).

    Attributes:
        driver: The endpoint's :class:`~ddm_core.aio.drivers.AsyncDriver`.
        max_size, min_idle: Sizing.
        acquire_timeout: Seconds a borrow waits at most; also every connect's bound.
        shared: Whether the endpoint's connections see the same data (``False``: SQLite ``:memory:``).
        breaker: An :class:`~ddm_core.readwrite.breaker.EndpointBreaker` every
            connect goes through, or ``None`` (set by whoever splits reads, as on the thread pool).

    Its connections belong to the event loop that opened them: a borrow from
    another loop raises :class:`~ddm_core.errors.ExecutionError` until the pool
    holds no connection (after :meth:`dispose`).
    """

    def __init__(self, data_source: str, endpoint: Endpoint, settings: PoolSettings) -> None:
        self.data_source = data_source
        self.endpoint = endpoint
        self.settings = settings
        self.driver: AsyncDriver = async_driver_for(endpoint.dialect)
        sizing = pool_sizing(settings, self.driver.dialect, endpoint.database)
        self.max_size = sizing.max_size
        self.min_idle = sizing.min_idle
        self.acquire_timeout = sizing.acquire_timeout
        self.shared = sizing.shared
        self._lifetime = sizing.lifetime
        self._ping_after = sizing.ping_after
        self._idle_timeout = sizing.idle_timeout
        self._idle: list[_Connection] = []  # a stack: the last returned is lent first
        self._open = 0  # idle + borrowed + being opened or rolled back
        self._waiters: deque[asyncio.Future[bool]] = deque()
        self._waiting_many = 0  # borrow_many waiters: a return must wake them all, not one
        self._generation = 0  # dispose() bumps it: older connections close when they come back
        self._borrows = 0
        self._timeouts = 0
        self._discards = 0
        self._warm = False
        self._tasks: set[asyncio.Task[None]] = set()  # rollbacks under way (SQLite :memory:)
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop its connections belong to
        self.breaker: Any = None
        # Set by read/write splitting on pools of data sources with replicas (as on EndpointPool).
        self.split: Any = None
        self.replica = False

    # -- borrowing ---------------------------------------------------------------------

    async def borrow(self, deadline: float | None = None) -> AsyncBorrowed:
        """Check a connection out.

        Args:
            deadline: The statement's ``time.monotonic()`` deadline: waiting for a
                free connection stops there if that comes before the acquire timeout.

        Raises:
            PoolTimeoutError: none became free within the acquire timeout (or before the deadline).
            DataSourceUnavailableError: a new connection could not be opened.
        """
        if asyncio.get_running_loop() is not self._loop:
            self._adopt_loop()
        if not self._warm:
            await self._warm_up_lazily()
        idle = self._idle
        if idle:
            conn: _Connection | None = idle.pop()
        elif self._open < self.max_size:
            self._open += 1
            conn = None
        else:
            conn = await self._wait_for_one(deadline)
        self._borrows += 1
        try:
            if conn is None:
                conn = await self._open_new()
            elif self._needs_check(conn, _monotonic()):
                conn = await self._checked(conn, _monotonic())
        except BaseException:
            self._borrows -= 1  # nothing was lent
            raise
        return AsyncBorrowed(self, conn)

    def lend_idle(self) -> AsyncBorrowed | None:
        """An idle connection that needs no check now, or ``None``: never waits, opens, pings or recycles."""
        idle = self._idle
        if not idle or not self._warm or _get_running_loop() is not self._loop:
            return None  # (another loop's: borrow() says why)
        conn = idle[-1]
        now = _monotonic()  # what _needs_check() asks, without its frame (every statement passes here)
        if now - conn.returned > self._ping_after or (self._lifetime is not None and now - conn.created > self._lifetime):
            return None
        idle.pop()
        self._borrows += 1
        return AsyncBorrowed(self, conn)

    def _adopt_loop(self) -> None:
        """The running loop becomes the pool's, if no connection belongs to another one."""
        if self._loop is not None and self._open:
            raise ExecutionError(
                f"data source {self.data_source!r} (endpoint {self.endpoint.name!r}): its asyncio pool holds "
                f"{self._open} connection(s) of another event loop; use a pool (an AsyncExecutor) in the loop "
                "that created it, or dispose() it first",
                data_source=self.data_source,
                endpoint=self.endpoint.name,
            )
        self._loop = asyncio.get_running_loop()

    async def _wait_for_one(self, deadline: float | None) -> _Connection | None:
        """With every connection lent: wait for a return (``None``: a slot came free, open a new one)."""
        end = _monotonic() + self.acquire_timeout
        waited = self.acquire_timeout
        if deadline is not None and deadline < end:
            waited = max(0.0, waited - (end - deadline))
            end = deadline
        while True:
            if self._idle:
                return self._idle.pop()
            if self._open < self.max_size:  # one was discarded meanwhile
                self._open += 1
                return None
            left = end - _monotonic()
            if left <= 0:
                raise self._timed_out(waited)
            await self._wait(left)

    async def borrow_many(self, count: int, timeout: float | None = None) -> list[AsyncBorrowed]:
        """Check ``count`` connections out at once: all of them, or none (see ``EndpointPool.borrow_many``).

        Args:
            count: How many (at most ``max_size``).
            timeout: Seconds to wait at most (``None``: the acquire timeout; never longer).

        Raises:
            PoolTimeoutError: ``count`` did not become free in time.
            DataSourceUnavailableError: a new connection could not be opened.
        """
        if not 0 < count <= self.max_size:
            raise lend_count_error(self.data_source, self.endpoint.name, count, self.max_size)
        if asyncio.get_running_loop() is not self._loop:
            self._adopt_loop()
        if not self._warm:
            await self._warm_up_lazily()
        wait = self.acquire_timeout if timeout is None else max(0.0, min(timeout, self.acquire_timeout))
        end = _monotonic() + wait
        idle = self._idle
        if len(idle) + self.max_size - self._open < count:
            self._waiting_many += 1
            try:
                while len(idle) + self.max_size - self._open < count:
                    left = end - _monotonic()
                    if left <= 0:
                        raise self._timed_out(wait, count)
                    await self._wait(left)
            finally:
                self._waiting_many -= 1
        # From the check to here nothing awaited: the connections and slots counted are still there.
        taken = [idle.pop() for _ in range(min(count, len(idle)))]
        fresh = count - len(taken)
        self._open += fresh
        self._borrows += count
        lent: list[AsyncBorrowed] = []
        try:
            while taken:
                conn = taken.pop()  # out of `taken` before the await: _checked owns it now
                if self._needs_check(conn, _monotonic()):
                    conn = await self._checked(conn, _monotonic())
                lent.append(AsyncBorrowed(self, conn))
            while fresh:
                fresh -= 1  # the slot is _open_new's now: it frees it if the open fails
                lent.append(AsyncBorrowed(self, await self._open_new()))
        except BaseException:
            for conn in taken:
                self._give_back(conn, False)
            for _ in range(fresh):
                self._forget_slot()
            for b in lent:
                b.release()
            self._borrows -= count
            raise
        return lent

    async def _wait(self, seconds: float) -> bool:
        """Wait for a return or a freed slot, at most ``seconds``; ``True``: woken, ``False``: timed out."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        waiters = self._waiters
        waiters.append(waiter)
        timer = loop.call_later(seconds, _expire, waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.result():
                self._wake()  # woken, then cancelled before it could take anything: the next one's turn
            raise
        finally:
            timer.cancel()
            try:
                waiters.remove(waiter)
            except ValueError:  # _wake took it off the queue
                pass

    def _wake(self) -> None:
        """A connection or a slot came free: wake the oldest waiter (all, if one waits for several)."""
        waiters = self._waiters
        every = self._waiting_many > 0
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(True)
                if not every:
                    return

    def _timed_out(self, waited: float, count: int = 1) -> PoolTimeoutError:
        self._timeouts += 1
        return pool_timeout_error(self.data_source, self.endpoint.name, waited, self.max_size, count)

    def _needs_check(self, conn: _Connection, now: float) -> bool:
        """It sat idle long enough to be pinged, or is old enough to be recycled."""
        return now - conn.returned > self._ping_after or (self._lifetime is not None and now - conn.created > self._lifetime)

    async def _checked(self, conn: _Connection, now: float) -> _Connection:
        """An idle connection (its slot counted) made fit to lend: recycled when too old, pinged after a pause."""
        if self._lifetime is not None and now - conn.created > self._lifetime:
            self.driver.close_now(conn.raw)
            return await self._open_new()
        try:
            await self.driver.ping(conn.raw)
        except Exception as exc:
            log.info("dropping a dead connection to %s: %s", self.endpoint.name, exc)
            self.driver.close_now(conn.raw)
            return await self._open_new()
        except BaseException:  # cancelled mid-ping: the connection's state is unknown
            self.driver.close_now(conn.raw)
            self._forget_slot()
            raise
        return conn

    async def _open_new(self) -> _Connection:
        """Open a connection for a slot already counted in ``_open``; the slot is freed on failure or cancellation."""
        try:
            if self.breaker is None:
                raw = await self.driver.connect(self.endpoint, self.acquire_timeout)
            else:  # open after consecutive failures: fail fast, naming the endpoint
                raw = await self._connect_through(self.breaker)
        except BaseException as exc:
            self._forget_slot()
            if isinstance(exc, Exception):
                mapped = map_driver_error(exc, data_source=self.data_source, endpoint=self.endpoint.name, sql=None)
                raise mapped from (exc if mapped is not exc else exc.__cause__)  # an open breaker's keeps its cause
            raise
        return _Connection(raw, self._generation)

    async def _connect_through(self, breaker: Any) -> Any:
        """A connect counted by the endpoint's breaker (what its ``call`` does around a blocking connect)."""
        probe = breaker._admit()  # raises DataSourceUnavailableError while open
        try:
            raw = await self.driver.connect(self.endpoint, self.acquire_timeout)
        except asyncio.CancelledError as exc:
            if probe:  # a probe must end, or the breaker stays half-open; a cancelled one tells nothing
                breaker._failed(exc, probe)
            raise
        except BaseException as exc:
            breaker._failed(exc, probe)
            raise
        breaker._succeeded()
        return raw

    def _forget_slot(self, *, discarded: bool = False) -> None:
        """A connection was closed (or never opened): its slot may be taken again."""
        self._open -= 1
        if discarded:
            self._discards += 1
        if self._waiters:
            self._wake()

    # -- returning ---------------------------------------------------------------------

    def _give_back(self, conn: _Connection, discard: bool) -> None:
        if discard or conn.generation != self._generation:
            self.driver.close_now(conn.raw)
            self._forget_slot(discarded=discard)
            return
        now = conn.returned = _monotonic()
        idle = self._idle
        idle.append(conn)
        if self._waiters:
            self._wake()
        elif (
            self._idle_timeout is not None
            and len(idle) > self.min_idle
            and now - idle[0].returned > self._idle_timeout
        ):
            expired = idle.pop(0)  # the longest idle: LIFO leaves it at the bottom
            self._open -= 1
            self.driver.close_now(expired.raw)

    def _roll_back_later(self, conn: _Connection) -> None:
        """Roll back in a task, then give back (a pool whose one connection is its database)."""
        try:
            task = asyncio.get_running_loop().create_task(self._roll_back(conn))
        except RuntimeError:  # no loop runs: nothing can roll it back
            self._give_back(conn, True)
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _roll_back(self, conn: _Connection) -> None:
        try:
            await self.driver.rollback(conn.raw)
        except BaseException as exc:
            log.warning("rollback on release failed on %s: %s", self.endpoint.name, exc)
            self._give_back(conn, True)
            if not isinstance(exc, Exception):
                raise
            return
        self._give_back(conn, False)

    # -- warming up --------------------------------------------------------------------

    async def _warm_up_lazily(self) -> None:
        if self._warm:
            return
        self._warm = True
        try:
            await self.warm_up()
        except Exception as exc:  # the borrow that follows reports the real problem
            log.debug("warming %s failed: %s", self.endpoint.name, exc)

    async def warm_up(self) -> int:
        """Open connections until ``min_idle`` are idle (raises if the endpoint is down).

        Returns:
            How many connections are idle afterwards.

        Raises:
            DataSourceUnavailableError: a connection could not be opened.
        """
        self._warm = True
        while True:
            if len(self._idle) >= self.min_idle or self._open >= self.max_size:
                return len(self._idle)
            self._open += 1
            conn = await self._open_new()
            self._idle.insert(0, conn)  # below the warm ones: lent last
            if self._waiters:
                self._wake()

    # -- observation -----------------------------------------------------------------

    def stats(self) -> PoolStats:
        idle = len(self._idle)
        return PoolStats(
            data_source=self.data_source,
            endpoint=self.endpoint.name,
            idle=idle,
            borrowed=self._open - idle,
            open=self._open,
            max_size=self.max_size,
            borrows=self._borrows,
            timeouts=self._timeouts,
            discards=self._discards,
        )

    async def dispose(self) -> None:
        """Close every idle connection (waiting until each is closed); borrowed ones close when they come back."""
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        self._generation += 1
        self._warm = False
        for conn in idle:
            await self.driver.close(conn.raw)
        if self._tasks:  # rollbacks under way give their connection back to the old generation: closed
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


class AsyncPoolRegistry:
    """Creates and holds the :class:`AsyncEndpointPool` of every endpoint, lazily (as ``PoolRegistry``)."""

    def __init__(self, mysql_options: Mapping[str, str] | None = None) -> None:
        self._pools: dict[tuple[str, str, str, str | None], AsyncEndpointPool] = {}
        self._mysql_options = mysql_options

    def pool(self, ds: DataSource, endpoint: Endpoint) -> AsyncEndpointPool:
        key = (ds.name, endpoint.name, endpoint.url, endpoint.username)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = AsyncEndpointPool(ds.name, with_options(endpoint, self._mysql_options), ds.pool)
        return pool

    def pools(self) -> list[AsyncEndpointPool]:
        return list(self._pools.values())

    def stats(self) -> dict[str, PoolStats]:
        """Per data source: every pool of its endpoints summed (``endpoint="*"``)."""
        return stats_by_data_source(p.stats() for p in self.pools())

    def endpoint_stats(self) -> list[PoolStats]:
        return [p.stats() for p in self.pools()]

    async def dispose(self) -> None:
        for p in self.pools():
            await p.dispose()
