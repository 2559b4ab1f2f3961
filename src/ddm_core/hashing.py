"""Slot hashing: the canonical encoding of a shard key and its xxh3_64 slot.

``slot_of(value, slot_bits=10)`` is the high ``slot_bits`` bits of xxh3_64
over the value's canonical bytes (ints: signed 64-bit little endian, unsigned
beyond 2**63; str: UTF-8; bytes as they are; other types raise
:class:`~ddm_core.errors.ShardValueError`). See :mod:`ddm_core._fast.hashing_py`.
"""

from typing import TYPE_CHECKING

from ddm_core._fast import SELECTED as _impl

__all__ = ["MAX_SLOT_BITS", "canonical_bytes", "hash64", "slot_of", "slots_of"]

if TYPE_CHECKING:
    # Type checkers read the compiled unit's stub (hashing.pyi), which both twins
    # implement; at run time the selected twin is exported.
    from ddm_core._fast.hashing import MAX_SLOT_BITS, canonical_bytes, hash64, slot_of, slots_of
else:
    MAX_SLOT_BITS = _impl.hashing.MAX_SLOT_BITS
    canonical_bytes = _impl.hashing.canonical_bytes
    hash64 = _impl.hashing.hash64
    slot_of = _impl.hashing.slot_of
    slots_of = _impl.hashing.slots_of
