"""``lease_worker_id``: a worker id taken from a lease table instead of configured, kept by heartbeat.

Taking: the lowest id of ``range(max_workers)`` that no live lease holds
(missing, released, or expired by the database's clock) — one conditional
statement per candidate, so concurrent starters each win a different id, and
start-up fails with :class:`NoFreeWorkerIdError` when every id is held.

Keeping: a heartbeat thread renews every ``ttl / 3`` seconds. The lease is
valid locally until ``ttl - ttl / 10`` seconds after the last renewal that
succeeded was *sent* (monotonic clock), so the holder stops before the
database lets anyone else take the id. Past that point — a renewal that failed
or could not run (a paused process) — the lease is lost for good: the
generators built on it raise :class:`WorkerLeaseLostError` from their clock.

Clock back across a restart: each renewal stores the newest timestamp the
generators issued (``last_ms``); the next holder of that id refuses to start
with :class:`ClockMovedBackwardsError` when its clock is more than
``max_backward_ms`` behind it, and waits out a smaller gap. Details and
figures: docs/worker-leases.md.
"""

from __future__ import annotations

import contextvars
import enum
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any, Callable

from ddm_core.dialects import dialect_for, titles
from ddm_core.errors import (
    ClockMovedBackwardsError,
    ConfigError,
    DuplicateKeyError,
    NoFreeWorkerIdError,
    WorkerLeaseError,
    WorkerLeaseLostError,
)
from ddm_core.execute.executor import Executor
from ddm_core.execute.result import Result
from ddm_core.idlease import table
from ddm_core.idlease.store import LeaseStore
from ddm_core.ids import GeneIdGenerator, Snowflake
from ddm_core.route.text.sql_hint import on_data_source

__all__ = ["lease_worker_id", "WorkerLease", "Phase", "check_arguments", "started", "holder_token", "system_ms"]

log = logging.getLogger("ddm_core.idlease")

#: Milliseconds since the epoch (the id generators' clock), injectable for tests.
MsClock = Callable[[], int]


class Phase(enum.Enum):
    """Where a lease is: ``HELD`` → ``LOST`` (renewal failed) or ``RELEASED`` (closed); both are final."""

    HELD = "held"
    LOST = "lost"
    RELEASED = "released"


def _autocommit(executor: Executor, sql: str, params: Any = None) -> Result:
    """Run one lease statement on its own, never inside a transaction the caller has open.

    A lease written in the caller's transaction would vanish with its rollback while
    this process went on using the id: an empty context has no open transaction (and no hint).
    """
    return contextvars.Context().run(executor.execute, sql, params)


def system_ms() -> int:
    return time.time_ns() // 1_000_000


def _check(name: str, value: Any, low: float, high: float, *, whole: bool) -> None:
    kind_ok = isinstance(value, int) if whole else isinstance(value, (int, float))
    if isinstance(value, bool) or not kind_ok or not low <= value <= high:
        raise ConfigError(f"lease_worker_id {name} must be from {low:g} to {high:g}, not {value!r}", field=name)


class WorkerLease:
    """A worker id held in a lease namespace (made by :func:`lease_worker_id`).

    Attributes:
        worker_id: The id this process may use while the lease is held.
        namespace: Ids are unique within it (one per generator family / layout).
        holder: This holder's token (host, pid and a random part), as stored.
        ttl: Seconds a renewal keeps the lease in the database.
        previous_last_ms: The newest timestamp the previous holder of this id issued (0: none).
    """

    def __init__(
        self,
        store: LeaseStore,
        namespace: str,
        worker_id: int,
        holder: str,
        ttl: float,
        valid_until: float,
        previous_last_ms: int,
        max_backward_ms: int,
        clock: MsClock,
    ) -> None:
        self.worker_id = worker_id
        self.namespace = namespace
        self.holder = holder
        self.ttl = ttl
        self.previous_last_ms = previous_last_ms
        self.max_backward_ms = max_backward_ms
        self.store = store
        self._ms = clock
        self._phase = Phase.HELD
        self._valid_until = valid_until
        self._floor = previous_last_ms + 1  # no id at or below the previous holder's newest
        self._why = ""
        self._last_ms = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- state -----------------------------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def last_ms(self) -> int:
        """The newest clock reading handed to a generator (what the next renewal stores)."""
        return self._last_ms

    def check(self) -> None:
        """Raise unless the lease is still held and within its local validity.

        Raises:
            WorkerLeaseLostError: renewal failed or did not happen in time; final.
            WorkerLeaseError: the lease was released.
        """
        if self._phase is Phase.HELD and time.monotonic() < self._valid_until:
            return
        with self._lock:
            if self._phase is Phase.HELD and time.monotonic() >= self._valid_until:
                self._lose("it was not renewed before its local expiry")
        if self._phase is Phase.RELEASED:
            raise WorkerLeaseError(
                f"worker id {self.worker_id} of lease namespace {self.namespace!r} was released; lease a new one",
                namespace=self.namespace,
                worker_id=self.worker_id,
            )
        raise WorkerLeaseLostError(
            f"the lease on worker id {self.worker_id} of namespace {self.namespace!r} was lost "
            f"({self._why}): another process may hold that id now, so no more ids are issued with it; "
            "lease a new worker id",
            namespace=self.namespace,
            worker_id=self.worker_id,
        )

    def clock(self) -> int:
        """The generators' clock: milliseconds now, after :meth:`check`; remembers the newest reading."""
        self.check()
        now = self._ms()
        if now < self._floor:  # only before this holder's first id: then the generator's own rule applies
            now = self.wait_for_floor()
        if now > self._last_ms:
            self._last_ms = now
        return now

    def wait_for_floor(self) -> int:
        """A clock reading past the previous holder's newest id: a small gap is waited out, a large one raises.

        Raises:
            ClockMovedBackwardsError: the clock is more than ``max_backward_ms``
                behind that id (it went back across a restart, or another host's is ahead).
        """
        now = self._ms()
        while now < self._floor:
            behind = self._floor - 1 - now
            if behind > self.max_backward_ms:
                raise ClockMovedBackwardsError(behind, self.max_backward_ms)
            time.sleep(0.001)
            now = self._ms()
        return now

    # -- generators ------------------------------------------------------------------------------

    def snowflake(self, **kwargs: Any) -> Snowflake:
        """A :class:`Snowflake` with this worker id whose ids stop when the lease is lost."""
        kwargs.setdefault("max_backward_ms", self.max_backward_ms)
        return Snowflake(self.worker_id, clock=self.clock, **kwargs)

    def gene_generator(self, gene_bits: int = 10, **kwargs: Any) -> GeneIdGenerator:
        """A :class:`GeneIdGenerator` with this worker id (lease with ``max_workers=2**worker_bits``)."""
        kwargs.setdefault("max_backward_ms", self.max_backward_ms)
        return GeneIdGenerator(self.worker_id, gene_bits, clock=self.clock, **kwargs)

    # -- renewal -----------------------------------------------------------------------------------

    def renew(self) -> bool:
        """Renew once now; ``False`` (and the lease lost) when the database no longer has it for us.

        Raises:
            ExecutionError / DataSourceUnavailableError / EtcdUnavailableError: the store could not
                be asked (the lease stays held until its local expiry; try again).
        """
        with self._lock:
            if self._phase is not Phase.HELD:
                return False
            sent = time.monotonic()
            if sent >= self._valid_until:
                self._lose("it was not renewed before its local expiry")
                return False
        renewed = self.store.renew(self._last_ms)
        with self._lock:
            if self._phase is not Phase.HELD:
                return False
            if not renewed:
                self._lose(f"{self.store.where} says it expired or is held by another process")
                return False
            if time.monotonic() >= self._valid_until:
                # The answer came after the old validity ended: ids may have stopped in between, the
                # lease itself is fine again from the database's view, but we keep one rule: lost is final.
                self._lose("the renewal came back after the lease's local expiry")
                return False
            self._valid_until = sent + self.ttl * 0.9
        return True

    def start_heartbeat(self) -> None:
        """Renew every ``ttl / 3`` seconds in a daemon thread until :meth:`release`."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._beat, name=f"ddm-lease-{self.namespace}-{self.worker_id}", daemon=True
        )
        self._thread.start()

    def _beat(self) -> None:
        interval = self.ttl / 3
        while not self._stop.wait(interval):
            while self._phase is Phase.HELD:
                try:
                    self.renew()
                    break
                except Exception as exc:  # a database hiccup: retry soon, until the local expiry
                    log.warning("renewing worker id %d of %r failed: %s", self.worker_id, self.namespace, exc)
                    if self._stop.wait(min(1.0, interval / 3)):
                        return
            if self._phase is not Phase.HELD:
                return

    def _lose(self, why: str) -> None:
        self._phase = Phase.LOST
        self._why = why
        log.error("lost the lease on worker id %d of namespace %r: %s", self.worker_id, self.namespace, why)

    # -- ending ------------------------------------------------------------------------------------

    def release(self) -> None:
        """Stop the heartbeat, store the newest issued timestamp and free the id (no-op when lost)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)
        try:
            with self._lock:
                held = self._phase is Phase.HELD
                self._phase = Phase.RELEASED if held else self._phase
            if held:
                self.store.release(self._last_ms)
        finally:
            self.store.close()

    close = release

    def __enter__(self) -> WorkerLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<WorkerLease {self.namespace!r} worker_id={self.worker_id} {self._phase.value}>"


def lease_worker_id(
    target: Executor | str,
    *,
    namespace: str = "default",
    max_workers: int = 1024,
    ttl: float = 30.0,
    data_source: str | None = None,
    heartbeat: bool = True,
    max_backward_ms: int = 5,
    clock: MsClock | None = None,
) -> WorkerLease:
    """Lease the lowest free worker id of ``namespace``.

    Args:
        target: An :class:`Executor` (the lease table lives on ``data_source``,
            default the configuration's default data source, else its first), or
            a MySQL / MariaDB URL (``mysql://user:pass@host:3306/db``).
        namespace: Ids are unique within a namespace (at most 64 characters).
        max_workers: Ids ``0 .. max_workers - 1``: 1024 for :class:`Snowflake`,
            ``2**worker_bits`` (64 by default) for :class:`GeneIdGenerator`.
        ttl: Seconds a renewal keeps the lease (1 to 3600).
        heartbeat: Start the renewal thread (``False``: call :meth:`WorkerLease.renew` yourself).
        max_backward_ms: How far behind the previous holder's newest id this
            clock may start (waited out), and the generators' setting.
        clock: Milliseconds since the epoch for the generators (default: the system clock).

    Raises:
        NoFreeWorkerIdError: every id of the namespace is held by a live lease.
        ClockMovedBackwardsError: this clock is more than ``max_backward_ms`` behind
            the newest id the previous holder of the id issued.
        WorkerLeaseError: the lease table cannot be used (its statements are MySQL's own SQL:
            :attr:`~ddm_core.dialects.Dialect.runs_mysql_sql`).
    """
    check_arguments(namespace, max_workers, ttl, max_backward_ms)
    own = isinstance(target, str)
    executor = _executor_for(target) if isinstance(target, str) else target
    try:
        ds = data_source or executor.config.default_data_source or next(iter(executor.config.data_sources))
        source = executor.config.data_sources.get(ds)
        dialect = source.primary.dialect if source is not None else None
        if dialect is None or not dialect_for(dialect).runs_mysql_sql:
            raise WorkerLeaseError(
                f"worker-id leases need a {titles(lambda d: d.runs_mysql_sql)} data source; "
                f"{ds!r} is {dialect or 'not configured'}",
                namespace=namespace,
                data_source=ds,
            )
        ms = clock or system_ms
        lease = _take(executor, ds, namespace, max_workers, ttl, max_backward_ms, ms, own)
    except BaseException:
        if own:
            executor.close()
        raise
    return started(lease, heartbeat)


def check_arguments(namespace: str, max_workers: int, ttl: float, max_backward_ms: int) -> None:
    """Refuse lease arguments out of range (every store takes the same ones)."""
    if not isinstance(namespace, str) or not 1 <= len(namespace) <= 64:
        raise ConfigError(f"lease namespace must be a str of 1 to 64 characters, not {namespace!r}", field="namespace")
    _check("max_workers", max_workers, 1, 1 << 20, whole=True)
    _check("ttl", ttl, 1.0, 3600.0, whole=False)
    _check("max_backward_ms", max_backward_ms, 0, 60_000, whole=True)


def started(lease: WorkerLease, heartbeat: bool) -> WorkerLease:
    """A just-taken lease past its floor (the previous holder's newest id), renewing when ``heartbeat``."""
    try:
        lease.wait_for_floor()
    except BaseException:
        lease.release()
        raise
    if heartbeat:
        lease.start_heartbeat()
    return lease


class _TableStore:
    """The lease row of one worker id in ``ddm_worker_lease`` (docs/worker-leases.md#the-table)."""

    def __init__(self, executor: Executor, data_source: str, namespace: str, worker_id: int, holder: str, ttl: float,
                 own_executor: bool) -> None:  # fmt: skip
        self.where = f"the lease table on data source {data_source!r}"
        self._executor = executor
        self._data_source = data_source
        self._key = (namespace, worker_id, holder)
        self._ttl_us = int(ttl * 1_000_000)
        self._own_executor = own_executor

    def renew(self, last_ms: int) -> bool:
        sql = on_data_source(self._data_source, table.RENEW)
        with _autocommit(self._executor, sql, (self._ttl_us, last_ms, *self._key)) as result:
            return bool(result.rowcount == 1)

    def release(self, last_ms: int) -> None:
        _autocommit(self._executor, on_data_source(self._data_source, table.RELEASE), (last_ms, *self._key)).close()

    def close(self) -> None:
        if self._own_executor:
            self._executor.close()


def _executor_for(url: str) -> Executor:
    config = {"dataSources": {"lease": {"url": url}}, "pool": {"maxSize": 2, "minIdle": 0}}
    return Executor(config, load_schema=False)


def holder_token() -> str:
    """``host:pid:random``: who holds a lease, as stored."""
    return f"{socket.gethostname()[:120]}:{os.getpid()}:{uuid.uuid4().hex[:16]}"


def _take(
    executor: Executor, ds: str, namespace: str, max_workers: int, ttl: float, max_backward_ms: int,
    ms: MsClock, own: bool,
) -> WorkerLease:
    _autocommit(executor, on_data_source(ds, table.CREATE)).close()
    holder = holder_token()
    ttl_us = int(ttl * 1_000_000)
    for _ in range(8):  # each round re-reads; losing every candidate of a round is rare
        with _autocommit(executor, on_data_source(ds, table.SELECT_ALL), (namespace,)) as result:
            known = {int(wid): bool(live) for wid, live in result.fetchall()}
        free = [w for w in range(max_workers) if not known.get(w, False)]
        if not free:
            raise NoFreeWorkerIdError(
                f"every worker id of lease namespace {namespace!r} (0 to {max_workers - 1}) is held by a live "
                f"lease on data source {ds!r}: stop a holder, wait for a dead one's lease to expire (ttl), "
                "or widen the namespace",
                namespace=namespace,
                max_workers=max_workers,
            )
        for wid in free:
            sent = time.monotonic()
            if wid in known:
                sql, params = table.TAKE_OVER, (holder, ttl_us, namespace, wid)
                with _autocommit(executor, on_data_source(ds, sql), params) as result:
                    won = result.rowcount == 1
            else:
                try:
                    _autocommit(executor, on_data_source(ds, table.INSERT), (namespace, wid, holder, ttl_us)).close()
                    won = True
                except DuplicateKeyError:  # another starter inserted it first
                    won = False
            if not won:
                continue
            with _autocommit(executor, on_data_source(ds, table.READ_TAKEN), (namespace, wid, holder)) as result:
                row = result.fetchone()
            previous = int(row[0]) if row is not None else 0
            store = _TableStore(executor, ds, namespace, wid, holder, ttl, own)
            return WorkerLease(store, namespace, wid, holder, ttl, sent + ttl * 0.9, previous, max_backward_ms, ms)
    raise NoFreeWorkerIdError(
        f"could not win any free worker id of lease namespace {namespace!r} in 8 rounds: too many starters at once",
        namespace=namespace,
        max_workers=max_workers,
    )
