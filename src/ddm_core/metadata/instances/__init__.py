"""The instance registry: which executors and proxies follow a configuration center, and which version each serves.

Every :class:`~ddm_core.execute.Executor` (thread or asyncio) and ``ddm proxy``
built over a :class:`~ddm_core.metadata.ConfigHolder` whose source is shared
(the ``ddm_config`` table, Redis, etcd) registers itself with a record kept
alive by a heartbeat under a TTL (docs/operations.md#instance-registry).
Migrations and cut-overs wait on it (:func:`await_version`) instead of a fixed
delay, and ``ddm instances`` lists it. One module per job:

* :mod:`~ddm_core.metadata.instances.record` — the record and the store contract;
* :mod:`~ddm_core.metadata.instances.table` / :mod:`~ddm_core.metadata.instances.redis` /
  :mod:`~ddm_core.metadata.instances.etcd` — the stores;
* :mod:`~ddm_core.metadata.instances.stores` — which store goes with a source;
* :mod:`~ddm_core.metadata.instances.registrar` — this process's heartbeat thread;
* :mod:`~ddm_core.metadata.instances.fence` — waiting until every instance serves a version.
"""

from __future__ import annotations

from ddm_core.metadata.instances.fence import FenceProgress, await_version, behind
from ddm_core.metadata.instances.record import ROLES, InstanceRecord, InstanceStore, source_version
from ddm_core.metadata.instances.registrar import DEFAULT_TTL, Registrar, RegistrarStatus, register_instance
from ddm_core.metadata.instances.stores import store_for

__all__ = [
    "ROLES",
    "InstanceRecord",
    "InstanceStore",
    "source_version",
    "Registrar",
    "RegistrarStatus",
    "DEFAULT_TTL",
    "register_instance",
    "FenceProgress",
    "await_version",
    "behind",
    "store_for",
]
