"""Instance records as etcd keys held by a lease: ``<prefix>instances/<id>``.

The record is put under a lease of ``ttl`` seconds (rounded up: etcd's leases
count whole seconds) and a heartbeat is a lease keep-alive; it is put again
only when it changed (a new version) or the lease was lost (expired while
etcd or this process stalled: a new lease is granted). When the process dies
the lease expires and etcd deletes the key; a clean stop revokes it. The
heartbeat's age is read from the lease (granted TTL minus the TTL left).
"""

from __future__ import annotations

import math
import threading
from typing import Any, Callable, TypeVar

from ddm_core.metadata.instances.record import InstanceRecord, client_call
from ddm_core.metadata.sources.etcd_client import EtcdClient

__all__ = ["EtcdInstances"]

_T = TypeVar("_T")


class EtcdInstances:
    """The registry under ``<prefix>instances/`` on etcd.

    Args:
        client: The etcd client (shared with the configuration source).
        prefix: The configuration center's key prefix (``/ddm/config/``).
        newest_version: Reads the newest configuration version (``None``: unknown).
    """

    def __init__(self, client: EtcdClient, prefix: str, *,
                 newest_version: Callable[[], int | None] | None = None) -> None:  # fmt: skip
        self.client = client
        self.key_prefix = prefix.rstrip("/") + "/instances/"
        self._newest = newest_version
        self._lease = 0
        self._written: InstanceRecord | None = None
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return f"etcd instance keys {self.key_prefix}* at {self.client.endpoint}"

    def _call(self, what: str, work: Callable[[], _T]) -> _T:
        return client_call(self.where, self.client.endpoint, what, work)

    def keep(self, record: InstanceRecord, ttl: float) -> None:
        def renew() -> None:
            with self._lock:
                try:
                    if self._lease and self.client.lease_keep_alive(self._lease) <= 0:
                        self._lease = 0  # expired: its key is gone with it
                    if not self._lease:
                        self._lease, _ = self.client.lease_grant(max(1, math.ceil(ttl)))
                        self._written = None
                    if self._written != record:
                        self.client.put(self.key_prefix + record.instance_id, record.encode(), lease=self._lease)
                        self._written = record
                except Exception:
                    self._lease, self._written = 0, None  # start again with a new lease
                    raise

        self._call("register this instance", renew)

    def remove(self, record: InstanceRecord) -> None:
        with self._lock:
            lease, self._lease, self._written = self._lease, 0, None
        if lease:
            self._call("remove this instance", lambda: self.client.lease_revoke(lease))

    def live(self) -> list[InstanceRecord]:
        def read() -> list[InstanceRecord]:
            kvs, _ = self.client.get_prefix(self.key_prefix)
            found = []
            for kv in kvs:
                lease = self.client.call("/kv/lease/timetolive", {"ID": str(kv.lease)}) if kv.lease else {}
                left, granted = int(lease.get("TTL", -1)), int(lease.get("grantedTTL", 0))
                if kv.lease and left < 0:  # expired between the two reads
                    continue
                found.append(InstanceRecord.decode(kv.value, float(granted - left) if kv.lease else 0.0))
            return sorted(found, key=lambda r: r.started_at)

        records: list[InstanceRecord] = self._call("read the instances", read)
        return records

    def newest_version(self) -> int | None:
        return self._newest() if self._newest is not None else None

    def close(self) -> None:
        """Nothing to release: the client belongs to the configuration source."""
