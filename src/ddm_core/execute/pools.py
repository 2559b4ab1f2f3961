"""Connection pools: one SQLAlchemy ``QueuePool`` per data-source endpoint.

Sizing follows :class:`~ddm_core.metadata.model.PoolSettings` (usual sizing: max
20–50, min idle 5–8, acquire timeout 1–3 s; docs/operations.md#connection-pools):

* **max size** — ``QueuePool(pool_size=max_size, max_overflow=0)``: at most
  ``max_size`` connections exist; every connection opened is kept (no
  connect/close churn under bursts) until ``max_lifetime_ms`` (``recycle``).
* **min idle** — ``min_idle`` connections are opened the first time the pool is
  used (or by :meth:`EndpointPool.warm_up`, which
  :meth:`ddm_core.execute.Executor.warm_up` calls for every endpoint), not at
  construction: an executor over a data source that is down still starts.
  ``QueuePool`` has no idle timeout: ``idle_timeout_ms`` is not enforced.
* **acquire timeout** — ``acquire_timeout_ms`` → :class:`PoolTimeoutError`
  naming the data source and endpoint.
* **validation** — a connection idle for more than :data:`PING_AFTER` seconds
  is pinged on checkout (HikariCP's 500 ms bypass window: a connection used a
  moment ago is not pinged, so the hot path pays no extra round trip); a dead
  one is replaced transparently (SQLAlchemy's ``DisconnectionError`` retry).
* **stats** — :meth:`EndpointPool.stats`: idle, borrowed, open, max size,
  borrows and timeouts so far.

Every borrow is a :class:`Borrowed`; :meth:`Borrowed.release` is idempotent
and never raises, rolls back a connection left inside a transaction, and can
*discard* a connection whose state is unknown (a timeout fired, the server
went away, a stream abandoned mid-result). The executor releases on every path
(a leaked connection shrinks the pool until every request waits for the acquire
timeout); the SQLAlchemy pool's own garbage-collection return is only the last
safety net.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from ddm_core.errors import DataSourceUnavailableError, PoolTimeoutError
from ddm_core.execute.driver_errors import is_disconnect, map_driver_error
from ddm_core.execute.drivers import Driver, driver_for
from ddm_core.metadata.model import DataSource, Endpoint, PoolSettings

__all__ = ["EndpointPool", "Borrowed", "PoolStats", "PoolRegistry", "PING_AFTER"]

log = logging.getLogger("ddm_core.execute")

#: Seconds a connection may sit idle before a checkout pings it.
PING_AFTER = 0.5


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


class Borrowed:
    """One checked-out connection. ``raw`` is the DB-API connection.

    Release it exactly once with :meth:`release` (further calls do nothing).
    """

    __slots__ = ("pool", "raw", "_fairy")

    def __init__(self, pool: EndpointPool, fairy: Any) -> None:
        self.pool = pool
        self._fairy = fairy
        self.raw = fairy.dbapi_connection

    @property
    def released(self) -> bool:
        return self._fairy is None

    def release(self, *, discard: bool = False) -> None:
        """Return the connection to its pool (``discard``: close it instead of reusing it).

        A connection still inside a transaction is rolled back first; if that
        fails it is discarded. Never raises.
        """
        fairy = self._fairy
        if fairy is None:
            return
        self._fairy = None
        driver = self.pool.driver
        try:
            if not discard and driver.in_transaction(self.raw):
                driver.rollback(self.raw)
        except Exception as exc:
            log.warning("rollback on release failed on %s: %s", self.pool.endpoint.name, exc)
            discard = True
        try:
            if discard:
                self.pool._discards += 1
                fairy.invalidate()  # closes the DB-API connection and checks the record in
            else:
                fairy.close()
        except Exception as exc:  # pragma: no cover - SQLAlchemy checks in even when close fails
            log.warning("returning a connection to %s failed: %s", self.pool.endpoint.name, exc)

    def __repr__(self) -> str:
        state = "released" if self._fairy is None else "borrowed"
        return f"<Borrowed {self.pool.endpoint.name} {state}>"


class EndpointPool:
    """The pool of one endpoint (a data source's primary or one of its replicas)."""

    def __init__(self, data_source: str, endpoint: Endpoint, settings: PoolSettings) -> None:
        from sqlalchemy import event
        from sqlalchemy.pool import QueuePool

        self.data_source = data_source
        self.endpoint = endpoint
        self.settings = settings
        self.driver: Driver = driver_for(endpoint.dialect)
        max_size = max(1, settings.max_size)
        if not self.driver.dialect.connections_share_data(endpoint.database):
            max_size = 1  # SQLite ":memory:": every connection is a different, empty database
        self.max_size = max_size
        self.min_idle = min(settings.min_idle, max_size)
        self.acquire_timeout = settings.acquire_timeout_ms / 1000.0
        self._borrows = 0
        self._timeouts = 0
        self._discards = 0
        self._warm = False
        self._warm_lock = threading.Lock()
        recycle = settings.max_lifetime_ms // 1000 if settings.max_lifetime_ms and max_size > 1 else -1
        self._pool = QueuePool(
            self._create,
            pool_size=max_size,
            max_overflow=0,
            timeout=self.acquire_timeout,
            recycle=recycle,
            use_lifo=True,  # reuse the warmest connection; the rest stay idle (and get pinged)
            reset_on_return=None,  # Borrowed.release rolls back only when needed: no round trip per statement
        )
        event.listen(self._pool, "checkin", _on_checkin)
        event.listen(self._pool, "checkout", self._on_checkout)

    # -- connections ----------------------------------------------------------------

    def _create(self) -> Any:
        try:
            return self.driver.connect(self.endpoint, self.acquire_timeout)
        except Exception as exc:
            raise map_driver_error(exc, data_source=self.data_source, endpoint=self.endpoint.name, sql=None) from exc

    def _on_checkout(self, dbapi_connection: Any, record: Any, proxy: Any) -> None:
        last = record.info.get("ddm_returned")
        if last is None or time.monotonic() - last <= PING_AFTER:
            return
        try:
            self.driver.ping(dbapi_connection)
        except Exception as exc:
            from sqlalchemy.exc import DisconnectionError

            log.info("dropping a dead connection to %s: %s", self.endpoint.name, exc)
            raise DisconnectionError(str(exc)) from exc  # SQLAlchemy retries with a fresh connection

    def borrow(self) -> Borrowed:
        """Check a connection out.

        Raises:
            PoolTimeoutError: none became free within the acquire timeout.
            DataSourceUnavailableError: a new connection could not be opened.
        """
        if not self._warm:
            self._warm_up_lazily()
        from sqlalchemy.exc import DisconnectionError, InvalidRequestError, TimeoutError as SATimeout

        try:
            fairy = self._pool.connect()
        except SATimeout as exc:
            self._timeouts += 1
            raise PoolTimeoutError(
                f"data source {self.data_source!r} (endpoint {self.endpoint.name!r}): no connection became "
                f"free within {self.acquire_timeout:g} s (all {self.max_size} borrowed)",
                data_source=self.data_source,
                endpoint=self.endpoint.name,
                timeout=self.acquire_timeout,
                max_size=self.max_size,
            ) from exc
        except (DisconnectionError, InvalidRequestError) as exc:  # reconnect attempts exhausted
            raise DataSourceUnavailableError(
                f"data source {self.data_source!r} (endpoint {self.endpoint.name!r}) is unavailable: {exc}",
                data_source=self.data_source,
                endpoint=self.endpoint.name,
            ) from exc
        self._borrows += 1
        return Borrowed(self, fairy)

    def _warm_up_lazily(self) -> None:
        with self._warm_lock:
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
        """
        self._warm = True
        need = self.min_idle - self._pool.checkedin()
        held = []
        try:
            for _ in range(max(0, need)):
                if self._pool.checkedout() + self._pool.checkedin() >= self.max_size:
                    break
                held.append(self._pool.connect())
        finally:
            for fairy in held:
                fairy.close()
        return int(self._pool.checkedin())

    # -- observation -----------------------------------------------------------------

    def stats(self) -> PoolStats:
        pool = self._pool
        borrowed = pool.checkedout()
        idle = pool.checkedin()
        return PoolStats(
            data_source=self.data_source,
            endpoint=self.endpoint.name,
            idle=idle,
            borrowed=borrowed,
            open=pool.size() + pool.overflow(),
            max_size=self.max_size,
            borrows=self._borrows,
            timeouts=self._timeouts,
            discards=self._discards,
        )

    def dispose(self) -> None:
        """Close every idle connection (borrowed ones close when they come back)."""
        self._pool.dispose()


def _on_checkin(dbapi_connection: Any, record: Any) -> None:
    record.info["ddm_returned"] = time.monotonic()


class PoolRegistry:
    """Creates and holds the :class:`EndpointPool` of every endpoint, lazily.

    Pools are keyed by data source, endpoint name, URL and user, so a reloaded
    configuration that moves an endpoint gets a new pool (the old one keeps
    serving connections still borrowed from it until :meth:`dispose`).
    """

    def __init__(self) -> None:
        self._pools: dict[tuple[str, str, str, str | None], EndpointPool] = {}
        self._lock = threading.Lock()

    def pool(self, ds: DataSource, endpoint: Endpoint) -> EndpointPool:
        key = (ds.name, endpoint.name, endpoint.url, endpoint.username)
        pool = self._pools.get(key)
        if pool is None:
            with self._lock:
                pool = self._pools.get(key)
                if pool is None:
                    pool = self._pools[key] = EndpointPool(ds.name, endpoint, ds.pool)
        return pool

    def pools(self) -> list[EndpointPool]:
        with self._lock:
            return list(self._pools.values())

    def stats(self) -> dict[str, PoolStats]:
        """Per data source: every pool of its endpoints summed (``endpoint="*"``)."""
        out: dict[str, PoolStats] = {}
        for p in self.pools():
            s = p.stats()
            t = out.get(s.data_source)
            if t is None:
                out[s.data_source] = PoolStats(s.data_source, "*", *_counts(s))
            else:
                out[s.data_source] = PoolStats(s.data_source, "*", *(a + b for a, b in zip(_counts(t), _counts(s))))
        return out

    def endpoint_stats(self) -> list[PoolStats]:
        return [p.stats() for p in self.pools()]

    def dispose(self) -> None:
        for p in self.pools():
            p.dispose()


def _counts(s: PoolStats) -> tuple[int, ...]:
    return (s.idle, s.borrowed, s.open, s.max_size, s.borrows, s.timeouts, s.discards)


def discard_on(exc: BaseException) -> bool:
    """Should a connection that raised ``exc`` be discarded rather than reused?"""
    return is_disconnect(exc) or not isinstance(exc, Exception)
