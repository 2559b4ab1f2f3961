"""Worker ids for the snowflake and gene id generators, leased from a database table instead of configured.

``lease_worker_id(executor_or_url, namespace=...)`` (also ``ddm_core.lease_worker_id``)
takes the lowest free id, renews it by heartbeat and makes its generators stop
when it cannot be renewed in time (docs/worker-leases.md); ``lease_worker_id_etcd``
does the same under an etcd lease.
"""

from ddm_core.idlease.config import ConfigWorkerLeases, lease_config_worker_ids
from ddm_core.idlease.etcd import lease_worker_id_etcd
from ddm_core.idlease.lease import Phase, WorkerLease, lease_worker_id
from ddm_core.idlease.table import LEASE_TABLE, LeaseState

__all__ = ["lease_worker_id", "lease_worker_id_etcd", "lease_config_worker_ids", "ConfigWorkerLeases", "WorkerLease",
           "Phase", "LEASE_TABLE", "LeaseState"]
