# cython: language_level=3
"""Compiled twin of ``slots_py``: the slot→node map, hash and lookup in one call."""

cimport cython
from libc.stdint cimport int32_t, uint64_t

import numpy as np

from ddm_core.errors import ShardValueError
from ddm_core._fast._hash cimport batch_slots, hash_object
from ddm_core._fast.slot_layout import SlotMapOps, check_slots, validate

__all__ = ["SlotMap"]


# No Cython auto-pickle (it refuses the memoryview and would shadow
# SlotMapOps.__reduce__ in the MRO); SlotMap pickles as (nodes, n_nodes).
@cython.auto_pickle(False)
cdef class SlotTable:
    """The hot half of :class:`SlotMap`: lookups and hash-then-lookup."""

    # The map is a typed attribute: passing it per call would cost ~130 ns.
    cdef const int32_t[::1] _table
    cdef object _nodes
    cdef int _shift
    cdef int _slot_bits
    cdef int _n_nodes

    # __cinit__, not __init__: no instance can exist with an unset table
    # (route_many reads it without the GIL and without bounds checks).
    def __cinit__(self, nodes, n_nodes=None):
        table, slot_bits, n = validate(nodes, n_nodes)
        self._nodes = table
        self._table = table
        self._slot_bits = slot_bits
        self._shift = 64 - slot_bits
        self._n_nodes = n

    @property
    def nodes(self):
        return self._nodes

    @property
    def slot_bits(self):
        return self._slot_bits

    @property
    def n_nodes(self):
        return self._n_nodes

    def node_of(self, slot):
        # Range check on the Python object first: a huge int is a ShardValueError
        # (as in the twin), not an OverflowError from the C conversion.
        if not 0 <= slot < self._table.shape[0]:
            raise ShardValueError(
                f"slot {slot} is outside 0..{self._table.shape[0] - 1}", value=slot
            )
        cdef Py_ssize_t s = slot
        return self._table[s]

    def nodes_of(self, slots):
        cdef Py_ssize_t i, n
        idx = check_slots(slots, self._table.shape[0])  # dtype and range, shared with the twin
        cdef const Py_ssize_t[::1] src = np.ascontiguousarray(idx).reshape(-1)
        n = src.shape[0]
        result = np.empty(n, dtype=np.int32)
        cdef int32_t[::1] out = result
        with nogil:
            for i in range(n):
                out[i] = self._table[src[i]]
        return result.reshape(idx.shape)

    def route(self, value):
        return self._table[hash_object(value) >> self._shift]

    def route_many(self, values):
        return batch_slots(values, self._shift, &self._table[0])


class SlotMap(SlotTable, SlotMapOps):
    """Immutable slot→node map (see ``slots.pyi``)."""

    __slots__ = ()
