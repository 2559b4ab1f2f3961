"""COMPLEX_HASH_MOD: one shard number from several columns (``user_id`` + ``tenant_id``).

Sharding orders by ``user_id`` alone can leave a few big merchants (tenants)
making some shards far hotter than the rest; sharding by ``user_id`` *and*
``tenant_id`` together spreads them (docs/architecture.md#several-columns-and-time).

``COMPLEX_HASH_MOD`` hashes the listed ``sharding-columns`` in their
configured order into one 64-bit value and takes it modulo
``sharding-count``::

    h = hash64(v0);  h = hash64(h XOR rotl(hash64(v_i), 1)) for each next column
    shard = h mod sharding-count                     (trailing-number match)

With one column it equals HASH_MOD exactly. Every column is required: a
statement that gives only some of them raises ShardKeyNotFoundError naming
the missing column (for a SELECT the router may then choose a governed full
route; an INSERT must carry them all). Integer columns route in a batch
without a Python call per row.

The other sensible layout needs no multi-column algorithm, because database
and table strategies are independent: database strategy ``HASH_MOD`` (or
SLOTS) on ``tenant_id`` — a merchant's back-office queries stay in one
database — and table strategy ``HASH_MOD`` on ``user_id`` — a big merchant's
rows spread over that database's tables.
Choose COMPLEX_HASH_MOD when one merchant can outgrow a whole database and
its queries always carry the user; choose the split strategies when
merchant-wide queries matter more.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ddm_core.errors import RoutingError
from ddm_core.hashing import hash64
from ddm_core.algorithms._numbered import NumberedAlgorithm
from ddm_core.algorithms._props import Props
from ddm_core.algorithms._targets import NONE, target_set
from ddm_core.algorithms._values import KEY_TYPES, key_hash, key_hashes
from ddm_core.algorithms._vhash import combine, combine_array
from ddm_core.algorithms.registry import register

__all__ = ["ComplexHashModAlgorithm"]


@register
class ComplexHashModAlgorithm(NumberedAlgorithm):
    """``COMPLEX_HASH_MOD``: combined xxh3 of several columns modulo ``sharding-count``."""

    type_name = "COMPLEX_HASH_MOD"
    PROPS = {
        "sharding-columns": "the columns, in hashing order, e.g. 'tenant_id,user_id' (required)",
        "sharding-count": "number of shards, 1..2**31-1 (required)",
        "key-type": "auto (default) | int | str: what the columns hold",
    }

    def _configure(self, props: Props) -> None:
        self.columns = props.columns("sharding-columns")
        self.count = props.integer("sharding-count", min=1, max=(1 << 31) - 1)
        self.key_type = props.text("key-type", "auto", choices=KEY_TYPES)
        self.result_count = self.count

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        acc = -1
        for column in self.columns:
            h = key_hash(self._column(values, column), self.key_type, self.label, self.name, column)
            acc = h if acc < 0 else combine(acc, h)
        number = acc % self.count
        return [self._target(target_set(targets), number, {c: self._column(values, c) for c in self.columns})]

    def multi_scalar(self, targets: Sequence[str], columns: Sequence[str]) -> Callable[[Sequence[Any]], int]:
        slow = super().multi_scalar(targets, columns)
        where = {c.lower(): i for i, c in enumerate(columns)}
        if any(c.lower() not in where for c in self.columns):
            return slow  # a hashed column has no value: precise names it
        # (position of each hashed column's value, its name), in hashing order
        plan = tuple((where[c.lower()], c) for c in self.columns)
        numbers, count, key_type, label, name = target_set(targets).numbers, self.count, self.key_type, self.label, self.name

        def index(values: Sequence[Any]) -> int:
            acc = -1
            for at, column in plan:
                value = values[at]
                if key_type == "auto" and value is not None:
                    h = int(hash64(value))  # what key_hash computes for it, without the checks around it
                else:
                    h = key_hash(value, key_type, label, name, column)
                acc = h if acc < 0 else combine(acc, h)
            i = numbers.get(acc % count, NONE)
            return i if i >= 0 else slow(values)

        return index

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        acc: np.ndarray | None = None
        first: np.ndarray | None = None
        for column in self.columns:
            arr = np.asarray(self._column(columns, column))
            h = key_hashes(arr, self.key_type, self.label, self.name, column)
            if acc is None:
                acc, first = h, arr
            else:
                if h.shape != acc.shape:
                    raise RoutingError(
                        f"{self.label}: batch columns have different lengths", algorithm=self.name
                    )
                acc = combine_array(acc, h)
        assert acc is not None and first is not None
        numbers = (acc % np.uint64(self.count)).astype(np.int64)
        return self._indices(target_set(targets), numbers, first)

    def describe(self) -> str:
        kt = f", key-type={self.key_type}" if self.key_type != "auto" else ""
        return f"COMPLEX_HASH_MOD(columns={','.join(self.columns)}, count={self.count}{kt})"
