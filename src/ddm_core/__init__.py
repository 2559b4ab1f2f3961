"""ddm-core: shard MySQL (and embedded SQLite) behind ordinary SQL.

The hot path (slot hashing, slot→node lookup, id generation, heap merge) is
compiled with Cython; each compiled unit has a pure-Python twin selected with
``DDM_NO_EXTENSIONS=1``. :func:`implementation` says which one is running.
"""

import logging as _logging

from ddm_core._fast import IMPLEMENTATION as _IMPLEMENTATION
from ddm_core.errors import *  # noqa: F403 - the errors are part of the top-level API
from ddm_core.errors import __all__ as _error_names
from ddm_core.hashing import slot_of, slots_of
from ddm_core.ids import GeneIdGenerator, Snowflake
from ddm_core.merge import heap_merge
from ddm_core.metadata import ConfigHolder, ShardingConfig, load_config
from ddm_core.route import RoutePlan, Router, hint
from ddm_core.execute import Executor, PoolStats, Result, Transaction
from ddm_core.idlease import WorkerLease, lease_worker_id
from ddm_core import xa as _xa  # noqa: F401 - registers transaction_mode="xa" (docs/xa.md)
from ddm_core import crossnode as _crossnode  # noqa: F401 - runs cross-node SELECTs (docs/cross-node-queries.md)
from ddm_core.dbapi import connect
from ddm_core.hinting import shard_database
from ddm_core.slots import SlotMap

# A library logs, the application decides where it goes (load warnings, slow SQL).
_logging.getLogger("ddm_core").addHandler(_logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "implementation",
    "slot_of",
    "slots_of",
    "SlotMap",
    "Snowflake",
    "GeneIdGenerator",
    "lease_worker_id",
    "WorkerLease",
    "heap_merge",
    "load_config",
    "ShardingConfig",
    "ConfigHolder",
    "Router",
    "RoutePlan",
    "Executor",
    "Result",
    "Transaction",
    "PoolStats",
    "connect",
    "hint",
    "shard_database",
    *_error_names,
]


def implementation() -> str:
    """``"cython"`` when the compiled hot path is in use, else ``"python"``."""
    return _IMPLEMENTATION
