"""Pure-Python twin of ``hashing.pyx``: canonical encoding + xxh3_64 → slot.

Canonical byte encoding (the contract both twins and every process share):

* ``int`` (and ``bool``, ``numpy.bool_``, and anything with ``__index__``
  such as numpy integers) in ``[-2**63, 2**63)``: 8 bytes, signed, little endian;
  in ``[2**63, 2**64)``: 8 bytes, unsigned, little endian (so a uint64
  column and an int64 column holding the same bits route alike);
  anything wider: :class:`ShardValueError`.
* ``str``: its UTF-8 bytes (lone surrogates: :class:`ShardValueError`).
* ``bytes``, ``bytearray``, ``memoryview``: the bytes as they are.
* ``None``, ``float``, ``Decimal``, dates and every other type:
  :class:`ShardValueError` — a float or a date has several plausible
  encodings, and two services that picked differently would disagree on
  where a row lives.

The hash is xxh3_64 (seed 0) of those bytes; the slot is its **high**
``slot_bits`` bits, so splitting slot ``s`` gives children ``2s`` and ``2s+1``.

Batches (:func:`slots_of`) take a 1-D numpy array or any iterable of keys; an
array is hashed as its ``tolist()`` values, so ``slots_of(a)[i] ==
slot_of(a[i])`` for every dtype. A lone ``str``/``bytes`` is refused as a batch:
iterating it would silently route its characters.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import xxhash
from numpy.typing import NDArray

from ddm_core.errors import ShardValueError

__all__ = ["MAX_SLOT_BITS", "canonical_bytes", "hash64", "slot_of", "slots_of", "check_slot_bits"]

MAX_SLOT_BITS = 16

_xxh3 = xxhash.xxh3_64_intdigest
_INT64_MIN = -(1 << 63)
_UINT64_END = 1 << 64
_SIGNED_END = 1 << 63


def check_slot_bits(slot_bits: int) -> int:
    """Return ``slot_bits`` if it is an int in ``1..16``, else raise ShardValueError."""
    if type(slot_bits) is not int or not 1 <= slot_bits <= MAX_SLOT_BITS:
        raise ShardValueError(
            f"slot_bits must be an int from 1 to {MAX_SLOT_BITS}, not {slot_bits!r}",
            value=slot_bits,
        )
    return slot_bits


def _int_bytes(value: int) -> bytes:
    if _INT64_MIN <= value < _SIGNED_END:
        return value.to_bytes(8, "little", signed=True)
    if _SIGNED_END <= value < _UINT64_END:
        return value.to_bytes(8, "little")
    raise ShardValueError(
        f"shard value {value} does not fit in 64 bits; only int64 and uint64 keys are hashed",
        value=value,
    )


def canonical_bytes(value: Any) -> bytes:
    """The bytes that are hashed for ``value`` (see the module docstring)."""
    if type(value) is int:
        return _int_bytes(value)
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ShardValueError(
                f"shard value {value!r} is not encodable as UTF-8: {exc.reason}", value=value
            ) from exc
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, memoryview):
        return value.tobytes()
    if value is None:
        raise ShardValueError("shard value None (SQL NULL) has no shard", value=None)
    if isinstance(value, float):
        raise ShardValueError(
            f"shard value {value!r} is a float; convert it to int or str explicitly",
            value=value,
        )
    if isinstance(value, np.bool_):  # has no __index__, but is a bool like Python's
        return _int_bytes(int(value))
    try:
        index = operator.index(value)
    except TypeError:
        raise ShardValueError(
            f"shard value {value!r} of type {type(value).__name__} has no canonical "
            "encoding; use int, str or bytes",
            value=value,
        ) from None
    return _int_bytes(index)


def hash64(value: Any) -> int:
    """xxh3_64 of the canonical bytes of ``value``, as an unsigned int."""
    return _xxh3(canonical_bytes(value))


def slot_of(value: Any, slot_bits: int = 10) -> int:
    """The slot of ``value``: the high ``slot_bits`` bits of :func:`hash64`."""
    shift = 64 - check_slot_bits(slot_bits)  # checked first, as the compiled twin does
    return _xxh3(canonical_bytes(value)) >> shift


def key_sequence(values: Any) -> Any:
    """The keys of a batch, shared by both twins' ``slots_of`` and ``route_many``.

    Returns a 1-D numpy integer array unchanged (the compiled fast path), and
    otherwise a tuple: the ``tolist()`` of any other 1-D array, or a snapshot of
    the iterable. The snapshot matters: encoding a key can run user code
    (``__index__``) that mutates a list being hashed, and the compiled loop
    reads its items without bounds checks.

    Raises:
        ShardValueError: an array that is not 1-D, or a single str/bytes key.
    """
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ShardValueError(
                f"a batch of shard values must be a 1-D array, got shape {values.shape}",
                value=values.shape,
            )
        return values if values.dtype.kind in "iu" else tuple(values.tolist())
    if isinstance(values, (str, bytes, bytearray, memoryview)):
        raise ShardValueError(
            f"a batch of shard values must be a sequence of keys, not one "
            f"{type(values).__name__} ({values!r:.40}); use slot_of for a single key",
            value=values,
        )
    return values if type(values) is tuple else tuple(values)


def slots_of(values: Any, slot_bits: int = 10) -> NDArray[np.int32]:
    """Slots of many values at once, as an ``int32`` array.

    Args:
        values: a numpy integer array, or any sequence of values accepted by
            :func:`slot_of` (ints, str, bytes).
        slot_bits: 1 to 16.
    """
    shift = 64 - check_slot_bits(slot_bits)
    items = key_sequence(values)
    if isinstance(items, np.ndarray):
        items = items.tolist()  # numpy ints -> Python ints, same canonical bytes
    return np.fromiter((_xxh3(canonical_bytes(v)) >> shift for v in items), dtype=np.int32, count=len(items))
