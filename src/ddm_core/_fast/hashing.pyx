# cython: language_level=3
"""Compiled twin of ``hashing_py``: canonical encoding + xxh3_64 → slot."""

from libc.stdint cimport int32_t, uint64_t

import numpy as np

from ddm_core._fast._hash cimport ddm_hash_u64, hash_object, u64_keys
from ddm_core._fast.hashing_py import MAX_SLOT_BITS, canonical_bytes, check_slot_bits, key_sequence

__all__ = ["MAX_SLOT_BITS", "canonical_bytes", "hash64", "slot_of", "slots_of", "check_slot_bits"]


def hash64(value):
    """xxh3_64 of the canonical bytes of ``value``, as an unsigned int."""
    return hash_object(value)


def slot_of(value, slot_bits=10):
    """The slot of ``value``: the high ``slot_bits`` bits of :func:`hash64`."""
    cdef int bits
    if type(slot_bits) is int and 1 <= slot_bits <= 16:
        bits = slot_bits  # the common case without a Python-level check (~35 ns)
    else:
        bits = check_slot_bits(slot_bits)
    return <int>(hash_object(value) >> (64 - bits))


def slots_of(values, slot_bits=10):
    """Slots of many values at once, as an ``int32`` array."""
    cdef int shift = 64 - check_slot_bits(slot_bits)
    cdef Py_ssize_t i, n
    cdef const uint64_t[::1] keys
    cdef int32_t[::1] out
    # The common batches skip the shared key_sequence call (~250 ns); it decides
    # the same for them, and handles (or refuses) everything else. A list is
    # snapshotted: hashing a key may run code that mutates it, and items[i]
    # below is not bounds-checked.
    if type(values) is tuple or (
        type(values) is np.ndarray and values.ndim == 1 and values.dtype.kind in "iu"
    ):
        items = values
    elif type(values) is list:
        items = tuple(values)
    else:
        items = key_sequence(values)
    if isinstance(items, np.ndarray):  # 1-D integer array: hash the raw bits
        keys = u64_keys(items)
        n = keys.shape[0]
        result = np.empty(n, dtype=np.int32)
        out = result
        with nogil:
            for i in range(n):
                out[i] = <int32_t>(ddm_hash_u64(keys[i]) >> shift)
        return result
    n = len(items)
    result = np.empty(n, dtype=np.int32)
    out = result
    for i in range(n):
        out[i] = <int32_t>(hash_object(items[i]) >> shift)
    return result

