"""Keeping this process's record alive: a heartbeat thread, never the statement path.

:class:`Registrar` writes the record from a daemon thread of its own: at start,
every ``ttl / 3`` seconds, and at once when the holder takes a version (the
holder's listener only wakes the thread: no I/O on the reload thread); each
write reads the version the holder serves then. A store that cannot be reached
is logged once per outage and makes the registrar unhealthy
(:attr:`Registrar.status`); statements never see it. Closing removes the
record; a process that dies without closing leaves a record that expires after
``ttl`` seconds.

**Drained before reported.** A new version is reported only once the work begun
under the old one is over: when ``idle(since)`` says so (the executor has no
connection borrowed, or every statement running was armed after the switch),
looked at every 20 ms after the switch, or at the latest ``drain_s`` (the
statement deadline) after it — by then every statement routed under the old
version has finished or been cancelled. A step
waiting for the version (:mod:`~ddm_core.metadata.instances.fence`) so never
goes on while such a statement can still write. A transaction that stays open
longer keeps its statements' writes uncommitted past that point; its later
statements route under the new version.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ddm_core.errors import ConfigError, DdmError
from ddm_core.metadata.instances.record import InstanceRecord, InstanceStore, new_record
from ddm_core.metadata.reload import ConfigHolder, ConfigVersion

__all__ = ["Registrar", "RegistrarStatus", "DEFAULT_TTL", "DRAIN_S", "drain_for", "register_instance"]

log = logging.getLogger("ddm_core.metadata.instances")

#: Seconds a record outlives its last heartbeat.
DEFAULT_TTL = 10.0
#: The longest wait for the old version's work after a switch when statements have no deadline.
DRAIN_S = 3.0


def drain_for(timeout: float | None) -> float:
    """The registry's longest wait for the old version's work under a statement deadline of ``timeout`` seconds."""
    return DRAIN_S if timeout is None else timeout


@dataclass(frozen=True, slots=True)
class RegistrarStatus:
    """Whether the record is known to be in the store.

    Attributes:
        healthy: The last write reached the store within the TTL.
        record: The record as last written (or to be written).
        error: Why the last write failed (``None``: it did not).
        last_written: ``time.monotonic()`` of the last successful write (``None``: none yet).
    """

    healthy: bool
    record: InstanceRecord
    error: str | None
    last_written: float | None


class Registrar:
    """Registers this process in ``store`` and keeps its record current while ``holder`` takes versions.

    Args:
        holder: The holder the instance serves from.
        store: Where records live.
        role: ``executor`` or ``proxy``.
        ttl: Seconds the record outlives its last heartbeat (> 0).
        idle: ``idle(since)``: whether everything this instance began before ``since`` (the
            ``time.monotonic()`` it saw the switch) is over (``None``: report versions at once).
        drain_s: Longest wait for ``idle`` after a switch before the new version is reported.
    """

    def __init__(self, holder: ConfigHolder, store: InstanceStore, *, role: str, ttl: float = DEFAULT_TTL,
                 idle: Callable[[float], bool] | None = None, drain_s: float = 0.0) -> None:  # fmt: skip
        if not ttl > 0:
            raise ConfigError(f"instance registry ttl must be > 0 seconds, not {ttl!r}", ttl=ttl)
        self.holder, self.store, self.ttl = holder, store, float(ttl)
        self.idle, self.drain_s = idle, float(drain_s)
        self.record = new_record(role, holder.current)
        self._switched_at: float | None = None  # when the holder took a version not yet reported
        self._error: str | None = None
        self._last_written: float | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._unsubscribe = holder.subscribe(self._took)
        self._thread = threading.Thread(target=self._beat, name="ddm-instance-heartbeat", daemon=True)
        self._thread.start()

    def _took(self, new: ConfigVersion, old: ConfigVersion) -> None:
        self._wake.set()  # the thread writes the new version at once (no I/O on the reload thread)

    def _beat(self) -> None:
        due = 0.0  # time.monotonic() the next heartbeat is due
        while not self._stop.is_set():
            self._wake.clear()
            changed = self._advance()
            if changed or time.monotonic() >= due:
                self._write()
                due = time.monotonic() + self.ttl / 3
            self._wake.wait(0.02 if self._switched_at is not None else max(0.0, due - time.monotonic()))

    def _advance(self) -> bool:
        """Take the version the holder serves into the record once the old one's work is drained;
        whether the record changed. Reading the holder on every beat also catches a version taken
        before the registrar subscribed, or a snapshot's content confirmed without a listener call."""
        serving = self.record.serving(self.holder.current)
        if serving == self.record:
            self._switched_at = None
            return False
        now = time.monotonic()
        if self._switched_at is None:
            self._switched_at = now
        if now - self._switched_at < self.drain_s and not self._idle_since(self._switched_at):
            return False
        self.record, self._switched_at = serving, None
        return True

    def _idle_since(self, since: float) -> bool:
        if self.idle is None:
            return True
        try:
            return self.idle(since)
        except Exception:  # counting borrowed connections raced a pool being added: look again
            return False

    def _write(self) -> None:
        record = self.record
        try:
            self.store.keep(record, self.ttl)
        except Exception as exc:  # whatever the store raised, the instance keeps serving
            if self._error is None:
                log.warning("instance %s cannot reach %s; it reports itself unhealthy and retries: %s",
                            record.instance_id, self.store.where, exc)  # fmt: skip
            self._error = str(exc)
            return
        if self._error is not None:
            log.info("instance %s reached %s again", record.instance_id, self.store.where)
        self._error, self._last_written = None, time.monotonic()

    @property
    def status(self) -> RegistrarStatus:
        written = self._last_written
        fresh = written is not None and time.monotonic() - written < self.ttl
        return RegistrarStatus(fresh and self._error is None, self.record, self._error, written)

    def close(self) -> None:
        """Stop the heartbeat and remove the record (best effort: else it expires)."""
        if self._stop.is_set():
            return
        self._unsubscribe()
        self._stop.set()
        self._wake.set()
        self._thread.join()
        try:
            self.store.remove(self.record)
        except DdmError as exc:
            log.info("instance %s left its record in %s to expire: %s", self.record.instance_id, self.store.where, exc)
        self.store.close()


def register_instance(served: object, *, role: str, ttl: float = DEFAULT_TTL, idle: Callable[[float], bool] | None = None,
                      drain_s: float = 0.0) -> Registrar | None:  # fmt: skip
    """A started :class:`Registrar` when ``served`` is a holder following a shared configuration
    center (``None`` for a fixed configuration, or a file / in-memory source)."""
    from ddm_core.metadata.instances.stores import store_for

    if not isinstance(served, ConfigHolder):
        return None
    store = store_for(served.source)
    return None if store is None else Registrar(served, store, role=role, ttl=ttl, idle=idle, drain_s=drain_s)
