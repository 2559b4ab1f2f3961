"""Keeping this process's record alive: a heartbeat thread, never the statement path.

:class:`Registrar` writes the record from a daemon thread of its own: at start,
every ``ttl / 3`` seconds, and at once when the holder takes a version (the
holder's listener only wakes the thread: no I/O on the reload thread); each
write reads the version the holder serves then. A store that cannot be reached is logged once per outage and
makes the registrar unhealthy (:attr:`Registrar.status`); statements never
see it. Closing removes the record; a process that dies without closing
leaves a record that expires after ``ttl`` seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from ddm_core.errors import ConfigError, DdmError
from ddm_core.metadata.instances.record import InstanceRecord, InstanceStore, new_record
from ddm_core.metadata.reload import ConfigHolder, ConfigVersion

__all__ = ["Registrar", "RegistrarStatus", "DEFAULT_TTL", "register_instance"]

log = logging.getLogger("ddm_core.metadata.instances")

#: Seconds a record outlives its last heartbeat.
DEFAULT_TTL = 10.0


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
    """

    def __init__(self, holder: ConfigHolder, store: InstanceStore, *, role: str, ttl: float = DEFAULT_TTL) -> None:
        if not ttl > 0:
            raise ConfigError(f"instance registry ttl must be > 0 seconds, not {ttl!r}", ttl=ttl)
        self.holder, self.store, self.ttl = holder, store, float(ttl)
        self.record = new_record(role, holder.current)
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
        while not self._stop.is_set():
            self._wake.clear()
            self._write()
            self._wake.wait(self.ttl / 3)

    def _write(self) -> None:
        # Each beat also reads the holder: a version it took before subscribing, or the source
        # confirming the snapshot's content (no listener call), shows on the next beat.
        record = self.record = self.record.serving(self.holder.current)
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


def register_instance(served: object, *, role: str, ttl: float = DEFAULT_TTL) -> Registrar | None:
    """A started :class:`Registrar` when ``served`` is a holder following a shared configuration
    center (``None`` for a fixed configuration, or a file / in-memory source)."""
    from ddm_core.metadata.instances.stores import store_for

    if not isinstance(served, ConfigHolder):
        return None
    store = store_for(served.source)
    return None if store is None else Registrar(served, store, role=role, ttl=ttl)
