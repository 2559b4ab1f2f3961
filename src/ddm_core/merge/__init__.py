"""The merge layer: combine the rows of several shards into what one table gives.

:func:`merge_results` is the engine the executor calls with a plan's
:class:`~ddm_core.merge.spec.MergeSpec` and one :class:`UnitResult` per unit;
:func:`heap_merge` is its compiled k-way ordered merge, usable on its own.
"""

from ddm_core._fast import SELECTED as _impl
from ddm_core.merge.aggregate import avg_value
from ddm_core.merge.engine import Merged, UnitResult, UnitRows, merge_results

__all__ = ["heap_merge", "merge_results", "Merged", "UnitResult", "UnitRows", "avg_value"]

heap_merge = _impl.merge.heap_merge
