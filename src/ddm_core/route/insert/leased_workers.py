"""The worker ids this process leased for ``workerId: lease`` key generators, and their generators.

A configuration may say ``workerId: lease`` instead of a number; the worker id then comes from a
lease the process holds in the configuration's store (docs/worker-leases.md#workerid-lease-in-a-configuration).
The route layer cannot take leases (they live above it, in ``idlease``): whoever takes one installs it
here with :func:`use_leased_worker`, per id family (``"SNOWFLAKE"``, ``"GENE"``), and the INSERT
router draws from a generator built on it. A generator on a lease issues ids only while the lease is
held (its clock is the lease's); with no lease installed, an INSERT needing one is refused.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from ddm_core.errors import WorkerIdError
from ddm_core.ids import GeneIdGenerator, Snowflake

__all__ = ["LeasedWorker", "use_leased_worker", "forget_leased_worker", "leased_generator"]


class LeasedWorker(Protocol):
    """What a lease gives a generator (``ddm_core.idlease.WorkerLease`` is one)."""

    worker_id: int

    def clock(self) -> int: ...


_LEASES: dict[str, LeasedWorker] = {}
_GENERATORS: dict[tuple[str, int], Any] = {}  # (family, gene bits) -> the generator on the family's lease
_LOCK = threading.Lock()


def use_leased_worker(family: str, lease: LeasedWorker) -> None:
    """Draw ``family``'s ``workerId: lease`` ids from ``lease`` from now on (replaces an earlier one)."""
    with _LOCK:
        _LEASES[family.upper()] = lease
        for key in [k for k in _GENERATORS if k[0] == family.upper()]:
            del _GENERATORS[key]


def forget_leased_worker(family: str, lease: LeasedWorker) -> None:
    """Stop drawing from ``lease`` (no-op when another lease was installed since)."""
    with _LOCK:
        if _LEASES.get(family.upper()) is lease:
            del _LEASES[family.upper()]
            for key in [k for k in _GENERATORS if k[0] == family.upper()]:
                del _GENERATORS[key]


def leased_generator(family: str, gene_bits: int) -> Any:
    """The process's generator of ``family`` on its leased worker id.

    Raises:
        WorkerIdError: no lease is installed for ``family``.
    """
    key = (family.upper(), gene_bits)
    gen = _GENERATORS.get(key)
    if gen is not None:
        return gen
    with _LOCK:
        gen = _GENERATORS.get(key)
        if gen is None:
            lease = _LEASES.get(key[0])
            if lease is None:
                raise WorkerIdError(
                    f"a {key[0]} key generator says workerId: lease, and this process holds no leased worker id: "
                    "take one with ddm_core.idlease.lease_config_worker_ids(source, config) (docs/worker-leases.md)",
                    family=key[0],
                )  # fmt: skip
            if key[0] == "GENE":
                gen = GeneIdGenerator(lease.worker_id, gene_bits, clock=lease.clock)
            else:
                gen = Snowflake(lease.worker_id, clock=lease.clock)
            _GENERATORS[key] = gen
    return gen
