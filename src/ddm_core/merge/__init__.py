"""The merge layer: combine the rows of several shards into what one table gives."""

from ddm_core._fast import SELECTED as _impl

__all__ = ["heap_merge"]

heap_merge = _impl.merge.heap_merge
