"""Pure-Python twin of ``slots.pyx``: the slot→node map."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ddm_core.errors import ShardValueError
from ddm_core._fast.hashing_py import hash64, slots_of
from ddm_core._fast.slot_layout import SlotMapOps, check_slots, validate

__all__ = ["SlotMap"]


class SlotTable:
    """The hot half of :class:`SlotMap`: lookups and hash-then-lookup."""

    __slots__ = ("_nodes", "_list", "_shift", "_slot_bits", "_n_nodes")

    def __init__(self, nodes: Any, n_nodes: int | None = None) -> None:
        table, slot_bits, n = validate(nodes, n_nodes)
        self._nodes = table
        self._list: list[int] = table.tolist()
        self._slot_bits = slot_bits
        self._shift = 64 - slot_bits
        self._n_nodes = n

    @property
    def nodes(self) -> NDArray[np.int32]:
        return self._nodes

    @property
    def slot_bits(self) -> int:
        return self._slot_bits

    @property
    def n_nodes(self) -> int:
        return self._n_nodes

    def node_of(self, slot: int) -> int:
        if not 0 <= slot < len(self._list):
            raise ShardValueError(
                f"slot {slot} is outside 0..{len(self._list) - 1}", value=slot
            )
        return self._list[slot]

    def nodes_of(self, slots: Any) -> NDArray[np.int32]:
        return self._nodes[check_slots(slots, len(self._list))]

    def route(self, value: Any) -> int:
        return self._list[hash64(value) >> self._shift]

    def route_many(self, values: Any) -> NDArray[np.int32]:
        return self._nodes[slots_of(values, self._slot_bits)]


class SlotMap(SlotTable, SlotMapOps):
    """Immutable slot→node map (see ``slots.pyi``)."""

    __slots__ = ()
