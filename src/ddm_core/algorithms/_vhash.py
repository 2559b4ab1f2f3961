"""``hash64`` of whole integer columns in numpy, bit-identical to :mod:`ddm_core.hashing`.

The compiled core exports :func:`~ddm_core.hashing.slots_of` (the *high bits*
of xxh3_64) for arrays, but HASH_MOD and CONSISTENT_HASH need the full 64-bit
hash. For the canonical encoding of an integer (8 bytes, little endian) xxh3_64
takes its 4-to-8-byte path, a handful of shifts, xors and multiplies that
vectorise directly (about 10 numpy passes; ~4 ns per key). The test suite
checks the result against ``hash64`` key by key. Non-integer keys (str,
bytes, huge ints) are hashed one by one with the compiled ``hash64``.
"""

from __future__ import annotations

import numpy as np

from ddm_core.hashing import hash64

__all__ = ["hash64_array", "combine", "combine_array", "hash_keys"]

_M64 = (1 << 64) - 1
# XXH3_len_4to8_64b with seed 0: bitflip = readLE64(kSecret+8) ^ readLE64(kSecret+16).
_BITFLIP = np.uint64(0xC73AB174C5ECD5A2)
_PRIME_MX2 = np.uint64(0x9FB21C651E98DF25)
_U = {k: np.uint64(k) for k in (1, 15, 24, 28, 32, 35, 40, 49, 63)}
_LEN8 = np.uint64(8)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U[r]) | (x >> _U[64 - r])


def hash64_array(values: np.ndarray) -> np.ndarray:
    """``hash64(v)`` for every element of an integer array, as ``uint64``."""
    if values.dtype.kind == "i":
        bits = values.astype(np.int64, copy=False).view(np.uint64)
    elif values.dtype.kind == "u":
        bits = values.astype(np.uint64, copy=False)
    else:
        raise TypeError(f"hash64_array needs an integer array, got {values.dtype}")
    # input64 = readLE32(input + 4) + (readLE32(input) << 32): the 8 bytes rotated by 32.
    h = ((bits << _U[32]) | (bits >> _U[32])) ^ _BITFLIP
    h ^= _rotl(h, 49) ^ _rotl(h, 24)
    h *= _PRIME_MX2
    h ^= (h >> _U[35]) + _LEN8
    h *= _PRIME_MX2
    h ^= h >> _U[28]
    return h


def hash_keys(keys: np.ndarray) -> np.ndarray:
    """``hash64`` of a 1-D array of keys: vectorised for integer dtypes, else per key."""
    if keys.dtype.kind in "iu":
        return hash64_array(keys)
    return np.fromiter((hash64(k) for k in keys.tolist()), dtype=np.uint64, count=keys.shape[0])


def combine(acc: int, h: int) -> int:
    """Fold the hash ``h`` of the next column into ``acc`` (multi-column keys).

    ``hash64(acc XOR rotl(h, 1))`` — order-sensitive, so ``(1, 2)`` and
    ``(2, 1)`` differ.
    """
    return int(hash64(acc ^ (((h << 1) | (h >> 63)) & _M64)))


def combine_array(acc: np.ndarray, h: np.ndarray) -> np.ndarray:
    """:func:`combine` element-wise over two ``uint64`` arrays."""
    return hash64_array(acc ^ ((h << _U[1]) | (h >> _U[63])))
