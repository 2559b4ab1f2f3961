"""Turning shard-key values into what an algorithm computes on.

Numeric algorithms (MOD, SALTED_MOD, VOLUME_RANGE, BOUNDARY_RANGE, the gene
ids of GENE) take, like ShardingSphere's ``Long.parseLong(value.toString())``:

* ``int`` of any size (and numpy integers, ``bool``);
* a *numeric string*: optional sign and decimal digits, surrounding blanks
  ignored (``" 42"``, ``"-7"``) — no ``_`` separators, no ``0x``, no decimals;
* ``float`` / ``Decimal`` only when integral (``5.0``): MySQL would round
  ``5.5`` into an integer column, so routing it by either neighbour could be
  wrong — it is refused instead.

``None`` is never routed (:class:`~ddm_core.errors.ShardValueError`).

Hash algorithms (HASH_MOD, SLOTS, GENE key columns, CONSISTENT_HASH,
COMPLEX_HASH_MOD) hash the value's canonical bytes (:mod:`ddm_core.hashing`),
under which ``123`` and ``"123"`` differ. Their ``key-type`` prop says what the
column holds: ``auto`` (default: hash what arrives), ``int`` (numeric strings
become ints first — set it for BIGINT columns whose values may come as SQL
string literals) or ``str`` (ints become their decimal text — for VARCHAR
columns whose values may come as numbers). :func:`key_hash` and
:func:`key_hashes` give the ``hash64`` of such keys, and :func:`relabel` names
the sharding column in an error the hashing core raised.
"""

from __future__ import annotations

import operator
from decimal import Decimal
from typing import Any

import numpy as np

from ddm_core.errors import ShardValueError
from ddm_core.hashing import hash64
from ddm_core.algorithms._props import parse_int_text
from ddm_core.algorithms._vhash import hash_keys

__all__ = [
    "KEY_TYPES",
    "as_int",
    "as_key",
    "int_array",
    "key_array",
    "key_hash",
    "key_hashes",
    "null_error",
    "range_int_bounds",
    "relabel",
]

KEY_TYPES = ("auto", "int", "str")

_INT64_MIN = -(1 << 63)
_UINT64_END = 1 << 64


def null_error(label: str, name: str, column: str) -> ShardValueError:
    return ShardValueError(
        f"{label}: the value of sharding column {column!r} is NULL; a NULL shard key "
        "has no shard (it is never sent to a default target)",
        algorithm=name,
        column=column,
        value=None,
    )


def relabel(exc: ShardValueError, label: str, name: str, column: str, **context: Any) -> ShardValueError:
    """``exc`` (raised by the hashing core) again, naming the algorithm and the sharding column.

    Args:
        context: Further facts for the new error (``value=...``); nothing of
            ``exc.context`` is carried over unless given here.
    """
    return ShardValueError(
        f"{label}: sharding column {column!r}: {exc.message}", algorithm=name, column=column, **context
    )


def as_int(value: Any, label: str, name: str, column: str) -> int:
    """``value`` as an int (see the module docstring), else ShardValueError."""
    if type(value) is int:
        return value
    if value is None:
        raise null_error(label, name, column)
    if isinstance(value, str):
        parsed = parse_int_text(value)
        if parsed is not None:
            return parsed
    elif isinstance(value, (float, Decimal, np.floating)):
        try:
            integral = value == int(value)
        except (OverflowError, ValueError):  # inf, nan
            integral = False
        if integral:
            return int(value)
    elif not isinstance(value, (bytes, bytearray)):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise ShardValueError(
        f"{label}: value {value!r} ({type(value).__name__}) of sharding column {column!r} "
        "is not an integer or a decimal integer string",
        algorithm=name,
        column=column,
        value=value,
    )


def as_key(value: Any, key_type: str, label: str, name: str, column: str) -> Any:
    """The value a hash algorithm hashes, per its ``key-type``."""
    if value is None:
        raise null_error(label, name, column)
    if key_type == "auto":
        return value
    if key_type == "int":
        return as_int(value, label, name, column)
    # "str"
    if isinstance(value, str):
        return value
    if type(value) is int or isinstance(value, np.integer):
        return str(int(value))
    raise ShardValueError(
        f"{label}: value {value!r} ({type(value).__name__}) of sharding column {column!r} "
        "is not a string (key-type is str)",
        algorithm=name,
        column=column,
        value=value,
    )


def int_array(arr: np.ndarray, label: str, name: str, column: str) -> np.ndarray:
    """A 1-D column as an int64 / uint64 array, or an object array of Python ints.

    Integer arrays come back as they are (no copy); anything else is coerced
    element by element with :func:`as_int` (a Python loop, but not a per-row
    algorithm call).
    """
    kind = arr.dtype.kind
    if kind == "i":
        return arr if arr.dtype == np.int64 else arr.astype(np.int64)
    if kind == "u":
        return arr if arr.dtype == np.uint64 else arr.astype(np.uint64)
    if kind == "b":
        return arr.astype(np.int64)
    ints = [as_int(v, label, name, column) for v in arr.tolist()]
    return pack_ints(ints)


def pack_ints(ints: list[int]) -> np.ndarray:
    """Python ints as int64 if they fit, else uint64 if they fit, else an object array."""
    if not ints:
        return np.empty(0, dtype=np.int64)
    lo, hi = min(ints), max(ints)
    if lo >= _INT64_MIN and hi < (1 << 63):
        return np.array(ints, dtype=np.int64)
    if lo >= 0 and hi < _UINT64_END:
        return np.array(ints, dtype=np.uint64)
    out = np.empty(len(ints), dtype=object)
    out[:] = ints
    return out


def key_array(arr: np.ndarray, key_type: str, label: str, name: str, column: str) -> np.ndarray:
    """A 1-D column ready for hashing: an integer array, or an object array of keys."""
    kind = arr.dtype.kind
    if kind in "iu" and key_type != "str":
        return arr
    if kind == "b" and key_type != "str":
        return arr.astype(np.int64)
    keys = [as_key(v, key_type, label, name, column) for v in arr.tolist()]
    if key_type == "int":
        return pack_ints(keys)
    out = np.empty(len(keys), dtype=object)
    out[:] = keys
    return out


def key_hash(value: Any, key_type: str, label: str, name: str, column: str) -> int:
    """``hash64`` of a value's :func:`as_key`; a value the hash refuses raises naming the column."""
    key = as_key(value, key_type, label, name, column)
    try:
        return int(hash64(key))
    except ShardValueError as exc:
        raise relabel(exc, label, name, column, value=value) from None


def key_hashes(arr: np.ndarray, key_type: str, label: str, name: str, column: str) -> np.ndarray:
    """``hash64`` of every key of a 1-D column (:func:`key_array`), as ``uint64``; errors name the column."""
    keys = key_array(arr, key_type, label, name, column)
    try:
        return hash_keys(keys)
    except ShardValueError as exc:
        raise relabel(exc, label, name, column) from None


def range_int_bounds(
    lower: Any, upper: Any, lower_closed: bool, upper_closed: bool, label: str, name: str, column: str
) -> tuple[int | None, int | None]:
    """An integer range's inclusive bounds (``None`` = unbounded).

    Non-integral numeric bounds round inwards (``> 2.5`` is ``>= 3``), open
    integral bounds step inwards (``< 10`` is ``<= 9``).
    """
    lo = _bound(lower, lower_closed, True, label, name, column)
    hi = _bound(upper, upper_closed, False, label, name, column)
    return lo, hi


def _bound(value: Any, closed: bool, is_lower: bool, label: str, name: str, column: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, (float, Decimal, np.floating)) and not isinstance(value, bool):
        d = Decimal(str(value)) if isinstance(value, (float, np.floating)) else value
        if not d.is_finite():
            if (d > 0) == is_lower:  # lower +inf / upper -inf: nothing matches
                return (1 << 200) if is_lower else -(1 << 200)
            return None
        if d != d.to_integral_value():
            return int(d.to_integral_value(rounding="ROUND_CEILING" if is_lower else "ROUND_FLOOR"))
        value = int(d)
    v = as_int(value, label, name, column)
    if not closed:
        v = v + 1 if is_lower else v - 1
    return v
