"""XA two-phase commit over several data sources: ``transaction_mode="xa"`` (docs/xa.md).

Importing this package registers the ``xa`` transaction mode with the execute
layer (``ddm_core`` imports it, so ``Executor(..., transaction_mode="xa")``,
``executor.transaction(mode="xa")`` and ``connect(..., transaction_mode="xa")``
always find it):

* :mod:`ddm_core.xa.xid` — ddm-core's xids and reading ``XA RECOVER``;
* :mod:`ddm_core.xa.branches` — the XA statements on one connection;
* :mod:`ddm_core.xa.log` — the durable transaction log ``ddm_xa_log``;
* :mod:`ddm_core.xa.coordinator` — :class:`XaTransaction`, the two-phase commit;
* :mod:`ddm_core.xa.recovery` — :func:`recover`, settling what crashed coordinators left.
"""

from __future__ import annotations

from ddm_core.execute.transaction import register_mode
from ddm_core.xa.coordinator import XaTransaction
from ddm_core.xa.runtime import XaRuntime, flush_marks_of, runtime_of
from ddm_core.xa.twophase import BranchPhase, TwoPhase
from ddm_core.xa.log import TABLE, GlobalState, LogRow, TransactionLog
from ddm_core.xa.recovery import RecoveryReport, recover
from ddm_core.xa.xid import FORMAT_ID, PREFIX, Xid

__all__ = [
    "XaTransaction",
    "XaRuntime",
    "BranchPhase",
    "runtime_of",
    "TransactionLog",
    "GlobalState",
    "LogRow",
    "TABLE",
    "RecoveryReport",
    "recover",
    "Xid",
    "FORMAT_ID",
    "PREFIX",
]

register_mode("xa", XaTransaction, recover, closing=flush_marks_of)
