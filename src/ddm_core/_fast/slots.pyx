# cython: language_level=3
"""Compiled twin of ``slots_py``: the slot→node map, hash and lookup in one call."""

from libc.stdint cimport int32_t, uint64_t

import numpy as np

from ddm_core.errors import ShardValueError
from ddm_core._fast._hash cimport ddm_hash_u64, hash_object, u64_keys
from ddm_core._fast.slot_layout import SlotMapOps, validate

__all__ = ["SlotMap"]


cdef class SlotTable:
    """The hot half of :class:`SlotMap`: lookups and hash-then-lookup."""

    # The map is a typed attribute: passing it per call would cost ~130 ns.
    cdef const int32_t[::1] _table
    cdef object _nodes
    cdef int _shift
    cdef int _slot_bits
    cdef int _n_nodes

    def __init__(self, nodes, n_nodes=None):
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

    def node_of(self, Py_ssize_t slot):
        if not 0 <= slot < self._table.shape[0]:
            raise ShardValueError(
                f"slot {slot} is outside 0..{self._table.shape[0] - 1}", value=slot
            )
        return self._table[slot]

    def nodes_of(self, slots):
        cdef Py_ssize_t i, n, s, size = self._table.shape[0]
        idx = np.ascontiguousarray(slots, dtype=np.intp)
        cdef const Py_ssize_t[::1] src = idx.reshape(-1)
        n = src.shape[0]
        result = np.empty(n, dtype=np.int32)
        cdef int32_t[::1] out = result
        for i in range(n):
            s = src[i]
            if s < 0 or s >= size:
                raise ShardValueError(f"slots must be in 0..{size - 1}", value=(s, s))
            out[i] = self._table[s]
        return result.reshape(idx.shape)

    def route(self, value):
        return self._table[hash_object(value) >> self._shift]

    def route_many(self, values):
        cdef Py_ssize_t i, n
        cdef int shift = self._shift
        cdef const uint64_t[::1] keys
        cdef int32_t[::1] out
        if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
            keys = u64_keys(values)
            n = keys.shape[0]
            result = np.empty(n, dtype=np.int32)
            out = result
            with nogil:
                for i in range(n):
                    out[i] = self._table[ddm_hash_u64(keys[i]) >> shift]
            return result
        items = values if isinstance(values, (list, tuple)) else list(values)
        n = len(items)
        result = np.empty(n, dtype=np.int32)
        out = result
        for i in range(n):
            out[i] = self._table[hash_object(items[i]) >> shift]
        return result


class SlotMap(SlotTable, SlotMapOps):
    """Immutable slot→node map (see ``slots.pyi``)."""

    __slots__ = ()
