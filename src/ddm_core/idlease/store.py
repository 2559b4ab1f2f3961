"""Where a worker-id lease lives: the one interface :class:`~ddm_core.idlease.lease.WorkerLease` renews and releases through.

Two stores: the lease table on a MySQL / MariaDB data source (``idlease/lease.py``) and etcd
(``idlease/etcd.py``). Taking an id differs between them; keeping it does not: the lease's local
validity, its phases and the generators' clock are :class:`WorkerLease`'s (docs/worker-leases.md).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["LeaseStore"]


class LeaseStore(Protocol):
    """One taken worker id in its store."""

    #: Names the store in messages ("the lease table on data source 'ops'", "etcd at http://...").
    where: str

    def renew(self, last_ms: int) -> bool:
        """Extend the lease and store ``last_ms``; ``False`` when the store no longer has it for us.

        Raises:
            DdmError: the store could not be asked (the caller retries until the local validity ends).
        """
        ...

    def release(self, last_ms: int) -> None:
        """Store ``last_ms`` and free the id."""
        ...

    def close(self) -> None:
        """Close what the store opened for this lease (called once, after release or loss)."""
        ...
