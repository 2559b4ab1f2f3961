"""The lag monitor: one thread per executor checks every replica each ``lag_check_interval_ms``.

Each round, per data source with replicas whose backend reports its replication
(:attr:`~ddm_core.dialects.Dialect.reports_replication`: MySQL, MariaDB):

1. a heartbeat on the primary: ``REPLACE INTO ddm_heartbeat (id, ts) VALUES (1,
   UTC_TIMESTAMP(6))`` in the data source's database (the table is created the
   first time), once an earlier round found a replica that really replicates
   from it (an endpoint that is the primary itself — same ``@@server_id`` — is
   caught up by definition, and gets no table written for it);
2. on each replica, in parallel and bounded by the interval: ``SHOW SLAVE
   STATUS`` (both threads must say ``Yes`` and ``Seconds_Behind_Master`` must
   not be NULL, else the replica is *stopped*), its lag from the heartbeat row
   (the replica's clock minus the heartbeat's time: right where
   ``Seconds_Behind_Master`` is not, e.g. it reads 0 while the IO thread is
   cut off), or ``Seconds_Behind_Master`` when no heartbeat could be written
   this round, and ``@@gtid_slave_pos`` for the ``gtid`` read-your-writes mode.
   The check waits a little for this round's beat (up to ``max_lag_ms``, at
   most half the interval): read before it arrives, the row is the previous
   round's and the lag would include the whole interval between two beats.

A check that fails or times out marks the replica *unreachable*: it never
brings one back (docs/readwrite.md#lag-and-health). Checks use connections of
their own (one small pool per endpoint, sharing the endpoint's breaker), so they
neither wait behind the application's reads nor show in its pool statistics.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import logging
import threading
import time
from typing import Any, Callable

from ddm_core.dialects import dialect_for
from ddm_core.metadata.model import DataSource, Endpoint
from ddm_core.readwrite.breaker import EndpointBreaker
from ddm_core.readwrite.gtid import parse_position
from ddm_core.readwrite.health import Check, Observation
from ddm_core.readwrite.ports import PoolSource, run_query

__all__ = ["LagMonitor", "HEARTBEAT_TABLE"]

log = logging.getLogger("ddm_core.readwrite")

HEARTBEAT_TABLE = "ddm_heartbeat"
_CREATE = f"CREATE TABLE IF NOT EXISTS {HEARTBEAT_TABLE} (id INT NOT NULL PRIMARY KEY, ts DATETIME(6) NOT NULL)"
_BEAT = f"REPLACE INTO {HEARTBEAT_TABLE} (id, ts) VALUES (1, UTC_TIMESTAMP(6))"
_BEAT_TIME = f"SELECT ts FROM {HEARTBEAT_TABLE} WHERE id = 1"
_LAG = f"SELECT ts, TIMESTAMPDIFF(MICROSECOND, ts, UTC_TIMESTAMP(6)) FROM {HEARTBEAT_TABLE} WHERE id = 1"
_BEAT_POLL_S = 0.002

#: The breaker of an endpoint of a data source (shared with the application's pool of that endpoint).
BreakerOf = Callable[[DataSource, Endpoint], EndpointBreaker]
#: Takes what a check of a replica of a data source found.
Observer = Callable[[DataSource, Endpoint, Check], None]


def _monitored(endpoint: Endpoint) -> bool:
    return dialect_for(endpoint.dialect).reports_replication


class LagMonitor:
    """Checks replicas and reports each finding; :meth:`check_now` runs one round on the caller's thread.

    Args:
        data_sources: The data sources with replicas, in the configuration in use.
        probes: The registry of the monitor's own connections.
        breaker_of: Each endpoint's breaker, so a check neither hammers a broken endpoint nor hides one.
        observed: Where each check's :class:`Check` goes (the read/write splitter's health).
    """

    def __init__(
        self,
        data_sources: Callable[[], list[DataSource]],
        probes: PoolSource,
        *,
        breaker_of: BreakerOf,
        observed: Observer,
    ) -> None:
        self._data_sources = data_sources
        self._breaker_of = breaker_of
        self._observed = observed
        self._probes = probes
        self._small: dict[str, tuple[DataSource, DataSource]] = {}
        self._primary_ids: dict[tuple[str, str], Any] = {}
        self._replicating: set[str] = set()  # data sources with a replica that really replicates
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._checks: cf.ThreadPoolExecutor | None = None
        self._heartbeat_ready: set[tuple[str, str]] = set()
        self._round = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._loop, name="ddm-replica-monitor", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._checks is not None:
            self._checks.shutdown(wait=True, cancel_futures=True)
        dispose = getattr(self._probes, "dispose", None)
        if dispose is not None:
            dispose()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.check_now()
            except Exception:  # never let the monitor die: the next round tries again
                log.exception("replica monitor round failed")
            if self._stop.wait(self._interval()):
                return

    def _interval(self) -> float:
        sources = self._data_sources()
        return min((ds.read_write.lag_check_interval_ms for ds in sources), default=1000) / 1000.0

    # -- one round -------------------------------------------------------------------

    def check_now(self) -> None:
        """Check every replica of every data source with replicas once, now."""
        with self._round:
            for ds in self._data_sources():
                if _monitored(ds.primary):
                    self._check_data_source(ds)

    def _probe_pool(self, ds: DataSource, endpoint: Endpoint) -> Any:
        """The monitor's own pool for ``endpoint``: one connection, the endpoint's breaker."""
        pair = self._small.get(ds.name)
        if pair is None or pair[0] is not ds:
            settings = dataclasses.replace(ds.pool, max_size=1, min_idle=0, acquire_timeout_ms=min(
                ds.pool.acquire_timeout_ms, ds.read_write.lag_check_interval_ms))  # fmt: skip
            pair = self._small[ds.name] = (ds, dataclasses.replace(ds, pool=settings))
        pool = self._probes.pool(pair[1], endpoint)
        pool.breaker = self._breaker_of(ds, endpoint)
        return pool

    def _check_data_source(self, ds: DataSource) -> None:
        beat = self._heartbeat(ds) if ds.name in self._replicating else None
        primary_id = self._primary_id(ds)
        timeout = max(0.2, ds.read_write.lag_check_interval_ms / 1000.0)
        checks = self._pool_threads()
        futures = [(r, checks.submit(self._check_replica, ds, r, beat, primary_id))
                   for r in ds.replicas if _monitored(r)]  # fmt: skip
        for replica, future in futures:
            try:
                check = future.result(timeout=timeout)
            except cf.TimeoutError:
                check = Check(Observation.FAILED, error=f"check timed out after {timeout:g} s")
            except Exception as exc:
                check = Check(Observation.FAILED, error=f"{type(exc).__name__}: {exc}")
            if check.replicating:
                self._replicating.add(ds.name)
            self._observed(ds, replica, check)

    def _primary_id(self, ds: DataSource) -> Any:
        """The primary's ``@@server_id`` (read once per endpoint; ``None`` while unreachable)."""
        key = (ds.name, ds.primary.url)
        if key not in self._primary_ids:
            try:
                borrowed = self._probe_pool(ds, ds.primary).borrow()
            except Exception:
                return None
            discard = True
            try:
                self._primary_ids[key] = run_query(borrowed, "SELECT @@server_id")[0][0]
                discard = False
            except Exception:
                return None
            finally:
                borrowed.release(discard=discard)
        return self._primary_ids[key]

    def _pool_threads(self) -> cf.ThreadPoolExecutor:
        if self._checks is None:
            self._checks = cf.ThreadPoolExecutor(4, thread_name_prefix="ddm-replica-check")
        return self._checks

    def _heartbeat(self, ds: DataSource) -> Any:
        """Write the heartbeat on the primary: its time, ``None`` when it could not be written this round."""
        pool = self._probe_pool(ds, ds.primary)
        try:
            borrowed = pool.borrow()
        except Exception as exc:
            log.debug("heartbeat on %s: no connection: %s", ds.primary.name, exc)
            return None
        key = (ds.name, ds.primary.url)
        discard = False
        try:
            if key not in self._heartbeat_ready:
                run_query(borrowed, _CREATE)
                self._heartbeat_ready.add(key)
            run_query(borrowed, _BEAT)
            return run_query(borrowed, _BEAT_TIME)[0][0]
        except Exception as exc:  # no privilege, read-only primary...: Seconds_Behind_Master it is
            discard = True
            log.debug("heartbeat on %s failed: %s", ds.primary.name, exc)
            return None
        finally:
            borrowed.release(discard=discard)

    def _check_replica(self, ds: DataSource, replica: Endpoint, beat: Any, primary_id: Any) -> Check:
        borrowed = self._probe_pool(ds, replica).borrow()
        discard = True
        try:
            if primary_id is not None and run_query(borrowed, "SELECT @@server_id")[0][0] == primary_id:
                discard = False
                return Check(Observation.CAUGHT_UP, lag_ms=0.0)  # the primary itself, under another name
            wait_s = min(ds.read_write.max_lag_ms, ds.read_write.lag_check_interval_ms / 2) / 1000.0
            check = _look(borrowed, ds.read_write.max_lag_ms, beat, wait_s)
            discard = False
            return check
        finally:
            borrowed.release(discard=discard)


def _look(borrowed: Any, max_lag_ms: int, beat: Any, wait_s: float) -> Check:
    rows = run_query(borrowed, "SHOW SLAVE STATUS", dicts=True)
    if not rows:
        return Check(Observation.STOPPED, error="not a replica: SHOW SLAVE STATUS is empty")
    status = rows[0]
    io, sql = status.get("Slave_IO_Running"), status.get("Slave_SQL_Running")
    behind = status.get("Seconds_Behind_Master")
    position = _position(borrowed)
    if io != "Yes" or sql != "Yes" or behind is None:
        error = status.get("Last_IO_Error") or status.get("Last_SQL_Error") or None
        why = f"replication not running (IO {io}, SQL {sql}, Seconds_Behind_Master {behind})"
        return Check(Observation.STOPPED, error=f"{why}: {error}" if error else why, position=position,
                     replicating=True)  # fmt: skip
    lag_ms = float(behind) * 1000.0
    if beat is not None:
        try:
            heartbeat_lag = _heartbeat_lag(borrowed, beat, wait_s)
            if heartbeat_lag is not None:
                lag_ms = heartbeat_lag
        except Exception as exc:  # the table has not replicated yet: keep the fallback
            log.debug("heartbeat lag unreadable: %s", exc)
    observation = Observation.LAGGING if lag_ms > max_lag_ms else Observation.CAUGHT_UP
    return Check(observation, lag_ms=lag_ms, position=position, replicating=True)


def _heartbeat_lag(borrowed: Any, beat: Any, wait_s: float) -> float | None:
    """The replica's clock minus the newest heartbeat it shows, in ms, once it shows ``beat`` or ``wait_s`` passed.

    A replica that has not applied this round's beat within the wait reads the
    age of an older one: at least the wait, so an upper bound that errs towards
    taking it out of reads.
    """
    deadline = time.monotonic() + wait_s
    while True:
        found = run_query(borrowed, _LAG)
        if not found or found[0][1] is None:
            return None
        ts, micros = found[0]
        if ts >= beat or time.monotonic() >= deadline:
            return max(0.0, float(micros) / 1000.0)
        time.sleep(_BEAT_POLL_S)


def _position(borrowed: Any) -> Any:
    try:
        rows = run_query(borrowed, "SELECT @@gtid_slave_pos")  # MariaDB; MySQL has no such variable
    except Exception:
        return None
    return parse_position(rows[0][0]) if rows else None
