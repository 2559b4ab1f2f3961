"""Global ids: snowflake (41/10/12) and gene ids that carry their shard key's slot.

Bit layouts and clock rules: :mod:`ddm_core._fast.id_layout` and
:mod:`ddm_core._fast.ids_py`. Worker ids leased from a table instead of
configured: :mod:`ddm_core.idlease` (``ddm_core.lease_worker_id``).
"""

from typing import TYPE_CHECKING

from ddm_core._fast import SELECTED as _impl
from ddm_core._fast.id_layout import DEFAULT_EPOCH_MS, IdLayout, IdParts, gene_of

__all__ = [
    "Snowflake",
    "GeneIdGenerator",
    "IdParts",
    "IdLayout",
    "gene_of",
    "DEFAULT_EPOCH_MS",
]

if TYPE_CHECKING:
    # Type checkers read the compiled unit's stub (ids.pyi); at run time the
    # selected twin is exported.
    from ddm_core._fast.ids import GeneIdGenerator, Snowflake
else:
    Snowflake = _impl.ids.Snowflake
    GeneIdGenerator = _impl.ids.GeneIdGenerator
