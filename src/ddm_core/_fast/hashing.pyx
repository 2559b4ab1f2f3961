# cython: language_level=3
"""Compiled twin of ``hashing_py``: canonical encoding + xxh3_64 → slot."""


import numpy as np

from ddm_core._fast._hash cimport batch_slots, hash_object
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
    return batch_slots(values, shift, NULL)

