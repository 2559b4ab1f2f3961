# Stub for the compiled ``ids`` unit; ``ids_py`` is its pure-Python twin.
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray
from typing_extensions import disjoint_base

from ddm_core._fast.id_layout import DEFAULT_EPOCH_MS as DEFAULT_EPOCH_MS
from ddm_core._fast.id_layout import IdLayout as IdLayout
from ddm_core._fast.id_layout import IdParts as IdParts
from ddm_core._fast.id_layout import gene_of as gene_of

__all__ = ["Snowflake", "GeneIdGenerator", "IdParts", "IdLayout", "gene_of", "DEFAULT_EPOCH_MS"]

@disjoint_base  # cdef classes: their C layouts cannot be combined
class _Sequencer:
    @property
    def layout(self) -> IdLayout: ...
    @property
    def worker_id(self) -> int: ...
    def decode(self, id: int) -> IdParts: ...

class Snowflake(_Sequencer):
    def __init__(
        self,
        worker_id: int,
        *,
        epoch_ms: int = ...,
        max_backward_ms: int = 5,
        clock: Callable[[], int] | None = None,
    ) -> None: ...
    def next_id(self) -> int: ...
    def next_ids(self, n: int) -> NDArray[np.int64]: ...

@disjoint_base
class GeneIdGenerator(_Sequencer):
    def __init__(
        self,
        worker_id: int,
        gene_bits: int = 10,
        *,
        worker_bits: int = 6,
        epoch_ms: int = ...,
        max_backward_ms: int = 5,
        clock: Callable[[], int] | None = None,
    ) -> None: ...
    @property
    def gene_bits(self) -> int: ...
    def next_id(self, shard_key: Any) -> int: ...
    def next_ids(self, shard_keys: Any) -> NDArray[np.int64]: ...
    def gene_of(self, id: int) -> int: ...
