"""The merge layer: combine the rows of several shards into what one table gives.

:func:`merge_results` is the engine the executor calls with a plan's
:class:`~ddm_core.merge.spec.MergeSpec` and one :class:`UnitResult` per unit;
:func:`heap_merge` is its compiled k-way ordered merge, usable on its own.
"""

from typing import TYPE_CHECKING

from ddm_core._fast import SELECTED as _impl
from ddm_core.merge.aggregate import avg_value
from ddm_core.merge.engine import Merged, UnitResult, UnitRows, merge_results

__all__ = ["heap_merge", "merge_results", "Merged", "UnitResult", "UnitRows", "avg_value"]

if TYPE_CHECKING:
    # Type checkers read the compiled unit's stub (merge.pyi); at run time the
    # selected twin is exported.
    from ddm_core._fast.merge import heap_merge
else:
    heap_merge = _impl.merge.heap_merge
