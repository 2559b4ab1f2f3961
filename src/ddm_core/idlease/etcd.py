"""``lease_worker_id_etcd``: a worker id held under an etcd lease, renewed by keep-alive (docs/worker-leases.md#on-etcd).

Keys under ``<prefix>/<namespace>/`` (prefix ``/ddm/worker-leases`` by default):
``held/<id>`` holds the holder's token and is attached to an etcd lease of ``ttl``
seconds, so etcd deletes it when the holder stops renewing; ``last_ms/<id>`` (no
lease) keeps the newest timestamp the id's holders issued, for the next holder's
clock check. Taking an id is one transaction per candidate — put ``held/<id>``
if it does not exist, and read ``last_ms/<id>`` — so concurrent starters each win
a different id. etcd's clock decides expiry, as the database's does for the table.
"""

from __future__ import annotations

import math
import time

from ddm_core.errors import EtcdError, NoFreeWorkerIdError
from ddm_core.idlease.lease import MsClock, WorkerLease, system_ms, check_arguments, holder_token, started
from ddm_core.metadata.sources.etcd_client import Compare, EtcdClient, put_op, range_op

__all__ = ["lease_worker_id_etcd", "DEFAULT_PREFIX"]

DEFAULT_PREFIX = "/ddm/worker-leases"
_ROUNDS = 8


class _EtcdStore:
    """``held/<id>`` under one etcd lease, and ``last_ms/<id>``."""

    def __init__(self, client: EtcdClient, keys: tuple[str, str], lease: int, holder: str, own_client: bool) -> None:
        self.where = f"etcd at {client.endpoint}"
        self._client = client
        self._held, self._last_ms = keys
        self._lease = lease
        self._holder = holder
        self._own_client = own_client

    def renew(self, last_ms: int) -> bool:
        if self._client.lease_keep_alive(self._lease) <= 0:
            return False  # etcd let the lease go: held/<id> is deleted, another process may take the id
        result = self._client.txn([Compare.value(self._held, self._holder)], [put_op(self._last_ms, str(last_ms))])
        return result.succeeded

    def release(self, last_ms: int) -> None:
        self._client.txn([Compare.value(self._held, self._holder)], [put_op(self._last_ms, str(last_ms))])
        self._client.lease_revoke(self._lease)  # deletes held/<id>

    def close(self) -> None:
        if self._own_client:
            self._client.close()


def lease_worker_id_etcd(
    target: EtcdClient | str,
    *,
    namespace: str = "default",
    max_workers: int = 1024,
    ttl: float = 30.0,
    prefix: str = DEFAULT_PREFIX,
    heartbeat: bool = True,
    max_backward_ms: int = 5,
    clock: MsClock | None = None,
) -> WorkerLease:
    """Lease the lowest free worker id of ``namespace`` on etcd.

    Args:
        target: An :class:`~ddm_core.metadata.sources.etcd_client.EtcdClient` (left open) or etcd's
            URL ``http://host:2379`` (a client of its own, closed on release).
        ttl: Seconds of the etcd lease (rounded up to whole seconds; etcd may grant more).
        Others: as :func:`~ddm_core.idlease.lease.lease_worker_id`.

    Raises:
        NoFreeWorkerIdError: every id of the namespace is held.
        ClockMovedBackwardsError: this clock is more than ``max_backward_ms`` behind the newest id
            the previous holder of the id issued.
        EtcdUnavailableError: etcd cannot be reached.
    """
    check_arguments(namespace, max_workers, ttl, max_backward_ms)
    own = isinstance(target, str)
    client = EtcdClient(target) if isinstance(target, str) else target
    base = f"{prefix.rstrip('/')}/{namespace}"
    holder = holder_token()
    try:
        sent = time.monotonic()
        lease, granted = client.lease_grant(math.ceil(ttl))
    except BaseException:
        if own:
            client.close()
        raise
    try:
        taken = _take(client, base, namespace, max_workers, lease, holder)
    except BaseException:
        try:
            client.lease_revoke(lease)
        except EtcdError:
            pass  # it expires by itself
        if own:
            client.close()
        raise
    worker_id, previous = taken
    store = _EtcdStore(client, (f"{base}/held/{worker_id:07d}", f"{base}/last_ms/{worker_id:07d}"), lease, holder, own)
    # Valid locally until 0.9 of the TTL after the grant was sent: etcd counts from when it granted.
    held = WorkerLease(store, namespace, worker_id, holder, float(granted), sent + granted * 0.9, previous,
                       max_backward_ms, clock or system_ms)  # fmt: skip
    return started(held, heartbeat)


def _take(client: EtcdClient, base: str, namespace: str, max_workers: int, lease: int, holder: str) -> tuple[int, int]:
    """``(worker id, previous holder's last_ms)`` of the lowest id this starter wins."""
    for _ in range(_ROUNDS):  # each round re-reads; losing every candidate of a round is rare
        kvs, _rev = client.get_prefix(f"{base}/held/")
        held = {int(kv.key.rsplit("/", 1)[1]) for kv in kvs}
        free = [w for w in range(max_workers) if w not in held]
        if not free:
            raise NoFreeWorkerIdError(
                f"every worker id of lease namespace {namespace!r} (0 to {max_workers - 1}) is held on etcd at "
                f"{client.endpoint}: stop a holder, wait for a dead one's lease to expire (ttl), or widen the namespace",
                namespace=namespace, max_workers=max_workers,
            )  # fmt: skip
        for wid in free:
            key, last = f"{base}/held/{wid:07d}", f"{base}/last_ms/{wid:07d}"
            result = client.txn([Compare.absent(key)], [put_op(key, holder, lease=lease), range_op(last)])
            if result.succeeded:
                found = result.kvs(1)
                return wid, int(found[0].text) if found else 0
    raise NoFreeWorkerIdError(
        f"could not win any free worker id of lease namespace {namespace!r} in {_ROUNDS} rounds: too many starters "
        "at once", namespace=namespace, max_workers=max_workers,
    )  # fmt: skip
