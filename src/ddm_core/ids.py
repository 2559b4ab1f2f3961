"""Global ids: snowflake (41/10/12) and gene ids that carry their shard key's slot.

Bit layouts and clock rules: :mod:`ddm_core._fast.id_layout` and
:mod:`ddm_core._fast.ids_py`.
"""

from typing import TYPE_CHECKING, Any

from ddm_core._fast import SELECTED as _impl
from ddm_core._fast.id_layout import DEFAULT_EPOCH_MS, IdLayout, IdParts, gene_of

__all__ = [
    "Snowflake",
    "GeneIdGenerator",
    "IdParts",
    "IdLayout",
    "gene_of",
    "DEFAULT_EPOCH_MS",
    "lease_worker_id",
    "WorkerLease",
]

if TYPE_CHECKING:
    # Type checkers read the compiled unit's stub (ids.pyi); at run time the
    # selected twin is exported.
    from ddm_core._fast.ids import GeneIdGenerator, Snowflake
    from ddm_core.idlease import WorkerLease, lease_worker_id
else:
    Snowflake = _impl.ids.Snowflake
    GeneIdGenerator = _impl.ids.GeneIdGenerator


def __getattr__(name: str) -> Any:
    # Worker-id leases (docs/worker-leases.md) need the executor, which needs the
    # router, which imports this module: loaded on first use, never at import.
    if name in ("lease_worker_id", "WorkerLease"):
        from ddm_core import idlease

        return getattr(idlease, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
