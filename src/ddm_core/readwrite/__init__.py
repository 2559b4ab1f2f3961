"""Read/write splitting on replicas: read-your-writes, lag-aware weights, failover, circuit breakers.

Used by :class:`ddm_core.execute.Executor` for every data source that has
replicas (docs/readwrite.md). Public here: the ``with read_your_writes(mode)``
block and the status types of ``executor.replica_status()``.
"""

from ddm_core.readwrite.health import ReplicaState
from ddm_core.readwrite.splitter import ReadWriteSplitter
from ddm_core.readwrite.status import ReadCounters, ReadStatus, ReplicaStatus
from ddm_core.readwrite.tracker import Mode, read_your_writes

__all__ = ["ReadWriteSplitter", "ReplicaState", "ReplicaStatus", "ReadStatus", "ReadCounters", "Mode", "read_your_writes"]
