"""Modulo family: MOD, HASH_MOD, SALTED_MOD.

All three compute a shard number ``0 <= k < sharding-count`` and pick the
target whose trailing number is ``k`` (``t_order_5``, ``ds_5``, ``ds05``).
Their weakness: any change of the count recomputes every row's shard (4 → 5
moves about 80 % of the rows) and the rows to move are found only by scanning
all of them. Prefer SLOTS for anything that will grow
(docs/architecture.md#slots-rather-than-modulo-or-a-hash-ring).

MOD
    ``value mod sharding-count`` on the integer value (numeric strings accepted,
    see :mod:`ddm_core.algorithms._values`). Negative values use the
    non-negative (floored) modulo, as ShardingSphere 5's ``BigInteger.mod``
    does: ``-7 mod 4 = 1``. With 16 shards, users 5, 128 and 3 go to shards 5,
    0 and 3. Range conditions narrower than the
    shard count route to the shards they cover (``BETWEEN 14 AND 17`` with 16
    shards: 14, 15, 0, 1); wider or open ranges go to every shard.

HASH_MOD
    ``hash64(value) mod sharding-count`` where ``hash64`` is xxh3_64 over the
    value's canonical bytes, computed by the compiled core. **Not
    ShardingSphere-compatible**: ShardingSphere hashes with Java's
    ``Math.abs(value.hashCode())``, which for a ``Long`` is ``(int)(v ^ v >>>
    32)`` — nearly the identity on small ids, so it spreads sequential ids no
    better than MOD — and for other types depends on the class (an
    ``Object.hashCode`` differs between JVM runs; Python's own ``hash()`` of a
    ``str`` differs between *processes*). xxh3 of a fixed encoding gives the
    same shard in every process, language and run; data laid out by
    ShardingSphere's HASH_MOD must be migrated, not re-read, when switching.
    Range conditions go to every shard.

SALTED_MOD
    The salted modulo Java services commonly use (a ``UserIdModStrategy``),
    reproducing Java's arithmetic exactly (so a Java service and ddm-core
    agree on every id)::

        long saltedId = (userId ^ SALT) * SALT;          // wraps at 64 bits
        return "ds_" + Math.abs((int)(saltedId % SHARD_COUNT));

    ``userId ^ SALT`` and the product are two's-complement 64-bit (overflow
    wraps); ``%`` truncates toward zero, so its sign follows ``saltedId``; the
    ``(int)`` cast keeps the low 32 bits; ``Math.abs`` of ``Integer.MIN_VALUE``
    stays negative (unreachable while the count fits an ``int``). Ids outside
    Java's ``long`` are refused (``Long.parseLong`` would throw). The salt
    spreads consecutive ids over the shards, where plain MOD puts a burst of
    new sequential users on neighbouring shards.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ddm_core.errors import ShardValueError
from ddm_core.hashing import hash64
from ddm_core.algorithms._numbered import NumberedAlgorithm
from ddm_core.algorithms._props import Props, parse_int_text
from ddm_core.algorithms._targets import NONE, target_set
from ddm_core.algorithms._values import (
    KEY_TYPES,
    as_int,
    as_key,
    int_array,
    key_array,
    null_error,
    range_int_bounds,
)
from ddm_core.algorithms._vhash import hash_keys
from ddm_core.algorithms.base import ValueRange
from ddm_core.algorithms.registry import register

__all__ = ["ModAlgorithm", "HashModAlgorithm", "SaltedModAlgorithm", "java_salted_mod"]

_JAVA_INT_MAX = (1 << 31) - 1
_LONG_MIN = -(1 << 63)
_LONG_END = 1 << 63
_M64 = (1 << 64) - 1


@register
class ModAlgorithm(NumberedAlgorithm):
    """``MOD``: the integer value modulo ``sharding-count``."""

    type_name = "MOD"
    supports_range = True
    PROPS = {
        "sharding-count": "number of shards, 1..2**31-1 (required)",
        "start-offset": "characters cut from the start of the value's text before parsing (default 0)",
        "stop-offset": "characters cut from the end of the value's text before parsing (default 0)",
        "zero-padding": "accepted for ShardingSphere compatibility; suffixes match as numbers anyway",
    }

    def _configure(self, props: Props) -> None:
        self.count = props.integer("sharding-count", min=1, max=_JAVA_INT_MAX)
        self.start_offset = props.integer("start-offset", 0, min=0)
        self.stop_offset = props.integer("stop-offset", 0, min=0)
        props.boolean("zero-padding", False)
        self.result_count = self.count
        self._cut = bool(self.start_offset or self.stop_offset)

    def _number(self, value: Any, column: str) -> int:
        if self._cut:
            return self._cut_value(value, column) % self.count
        n = value if type(value) is int else as_int(value, self.label, self.name, column)
        return n % self.count

    def _cut_value(self, value: Any, column: str) -> int:
        if value is None:
            raise null_error(self.label, self.name, column)
        text = str(as_int(value, self.label, self.name, column)) if not isinstance(value, str) else value
        end = len(text) - self.stop_offset
        part = text[self.start_offset : end] if end > self.start_offset else ""
        parsed = parse_int_text(part) if part else None
        if parsed is None:
            raise ShardValueError(
                f"{self.label}: value {value!r} of {column!r} has no integer between "
                f"start-offset {self.start_offset} and stop-offset {self.stop_offset} (got {part!r})",
                algorithm=self.name,
                column=column,
                value=value,
            )
        return parsed

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        column, value = self._single(values)
        number = self._number(value, column)
        return [self._target(target_set(targets), number, value)]

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        slow = super().scalar(targets, column)
        if self._cut:
            return slow
        numbers, count = target_set(targets).numbers, self.count

        def index(value: Any) -> int:
            i = numbers.get(value % count, NONE) if type(value) is int else NONE
            return i if i >= 0 else slow(value)

        return index

    def range(self, targets: Sequence[str], ranges: Mapping[str, ValueRange]) -> list[str]:
        column, r = self._single(ranges)
        if self._cut:
            return list(targets)
        lo, hi = range_int_bounds(
            r.lower, r.upper, r.lower_closed, r.upper_closed, self.label, self.name, column
        )
        if lo is None or hi is None:
            return list(targets)
        ts = target_set(targets)
        if lo > hi:
            return []
        span = hi - lo + 1
        if span >= self.count:
            return self._targets_of_numbers(ts, range(self.count))
        first = lo % self.count
        return self._targets_of_numbers(ts, ((first + k) % self.count for k in range(span)))

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        column, arr = self._single_array(columns)
        ts = target_set(targets)
        if self._cut:
            numbers = np.array([self._number(v, column) for v in arr.tolist()], dtype=np.int64)
            return self._indices(ts, numbers, arr)
        a = int_array(arr, self.label, self.name, column)
        if a.dtype == object:
            numbers = np.array([v % self.count for v in a.tolist()], dtype=np.int64)
        elif a.dtype == np.uint64:
            numbers = (a % np.uint64(self.count)).astype(np.int64)
        else:
            numbers = np.remainder(a, self.count)  # floored, like Python's %
        return self._indices(ts, numbers, arr)

    def describe(self) -> str:
        cut = f", start-offset={self.start_offset}, stop-offset={self.stop_offset}" if self._cut else ""
        return f"MOD(count={self.count}{cut})"


@register
class HashModAlgorithm(NumberedAlgorithm):
    """``HASH_MOD``: xxh3_64 of the canonical key bytes modulo ``sharding-count``."""

    type_name = "HASH_MOD"
    PROPS = {
        "sharding-count": "number of shards, 1..2**31-1 (required)",
        "key-type": "auto (default) | int | str: what the column holds (see _values)",
    }

    def _configure(self, props: Props) -> None:
        self.count = props.integer("sharding-count", min=1, max=_JAVA_INT_MAX)
        self.key_type = props.text("key-type", "auto", choices=KEY_TYPES)
        self.result_count = self.count

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        column, value = self._single(values)
        key = as_key(value, self.key_type, self.label, self.name, column)
        number = hash64(key) % self.count
        return [self._target(target_set(targets), number, value)]

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        numbers, count, slow = target_set(targets).numbers, self.count, super().scalar(targets, column)
        key_type, label, name = self.key_type, self.label, self.name

        def index(value: Any) -> int:
            key = value if key_type == "auto" else as_key(value, key_type, label, name, column)
            i = numbers.get(hash64(key) % count, NONE)
            return i if i >= 0 else slow(value)

        return index

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        column, arr = self._single_array(columns)
        keys = key_array(arr, self.key_type, self.label, self.name, column)
        numbers = (hash_keys(keys) % np.uint64(self.count)).astype(np.int64)
        return self._indices(target_set(targets), numbers, arr)

    def describe(self) -> str:
        kt = f", key-type={self.key_type}" if self.key_type != "auto" else ""
        return f"HASH_MOD(count={self.count}{kt})"


def _wrap64(v: int) -> int:
    v &= _M64
    return v - (1 << 64) if v >> 63 else v


def java_salted_mod(user_id: int, salt: int, count: int) -> int:
    """``Math.abs((int)(((userId ^ salt) * salt) % count))`` in Java ``long``/``int`` arithmetic."""
    salted = _wrap64(_wrap64(user_id ^ salt) * salt)
    rem = abs(salted) % count  # Java %: truncated division, sign of the dividend
    if salted < 0:
        rem = -rem
    r32 = rem & 0xFFFFFFFF
    if r32 >> 31:
        r32 -= 1 << 32
    return r32 if r32 == -(1 << 31) else abs(r32)  # Math.abs(Integer.MIN_VALUE) overflows


@register
class SaltedModAlgorithm(NumberedAlgorithm):
    """``SALTED_MOD``: ``(id ^ salt) * salt`` modulo the count, bit-exact with Java."""

    type_name = "SALTED_MOD"
    PROPS = {
        "sharding-count": "number of shards, 1..2**31-1 (required; a Java int)",
        "salt": "a Java long (default 1000000007)",
    }

    def _configure(self, props: Props) -> None:
        self.count = props.integer("sharding-count", min=1, max=_JAVA_INT_MAX)
        self.salt = props.integer("salt", 1_000_000_007, min=_LONG_MIN, max=_LONG_END - 1)
        self.result_count = self.count

    def _user_id(self, value: Any, column: str) -> int:
        n = value if type(value) is int else as_int(value, self.label, self.name, column)
        if not _LONG_MIN <= n < _LONG_END:
            raise ShardValueError(
                f"{self.label}: value {value!r} of {column!r} is outside Java's long range; "
                "the Java strategy (Long.parseLong) cannot route it either",
                algorithm=self.name,
                column=column,
                value=value,
            )
        return n

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        column, value = self._single(values)
        number = java_salted_mod(self._user_id(value, column), self.salt, self.count)
        return [self._target(target_set(targets), number, value)]

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        numbers, salt, count = target_set(targets).numbers, self.salt, self.count
        slow = super().scalar(targets, column)

        def index(value: Any) -> int:
            if type(value) is int and _LONG_MIN <= value < _LONG_END:
                i = numbers.get(java_salted_mod(value, salt, count), NONE)
                if i >= 0:
                    return i
            return slow(value)

        return index

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        column, arr = self._single_array(columns)
        a = int_array(arr, self.label, self.name, column)
        if a.dtype != np.int64:
            if a.dtype == np.uint64 and (a.size == 0 or int(a.max()) < _LONG_END):
                a = a.astype(np.int64)
            else:
                a = np.array([self._user_id(v, column) for v in a.tolist()], dtype=np.int64)
        salt = np.int64(self.salt)
        with np.errstate(over="ignore"):
            salted = (a ^ salt) * salt  # int64 arithmetic wraps, like Java's long
        rem = np.fmod(salted, np.int64(self.count))  # truncated: sign of the dividend, like Java
        numbers = np.abs(rem.astype(np.int32)).astype(np.int64)  # (int) cast, Math.abs
        return self._indices(target_set(targets), numbers, arr)

    def describe(self) -> str:
        return f"SALTED_MOD(count={self.count}, salt={self.salt})"
