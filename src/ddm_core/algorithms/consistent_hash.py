"""CONSISTENT_HASH: a ring of xxh3 points with virtual nodes and weights.

Each target puts ``virtual-nodes × weight`` points on a 64-bit ring at
``hash64("<target>#<i>")``; a key belongs to the first point at or after
``hash64(key)`` (wrapping), found by binary search (``bisect`` for one key,
``numpy.searchsorted`` for a batch). The ring depends on target *names*, not
their order, so adding a target moves only the keys its new points capture
(about ``1/n`` of them).

Why ddm-core prefers SLOTS
(docs/architecture.md#slots-rather-than-modulo-or-a-hash-ring): the ring needs
100–200 virtual nodes per target before the spread is even (default 160), so
its "metadata" is thousands of implicit points nobody can review; which keys
move on a change is only known by recomputing every key; and it cannot serve
range queries at all. Pre-sharded slots move a known, explicit set of slots
in batches and keep the layout as a reviewable table. Consistent hashing
suits cache nodes; it is here for those uses and for layouts migrated from
systems that used it.
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ddm_core.errors import ConfigError
from ddm_core.hashing import hash64
from ddm_core.algorithms._props import Props
from ddm_core.algorithms._targets import TargetSet, missing_targets_error, target_set
from ddm_core.algorithms._values import KEY_TYPES, key_hash, key_hashes
from ddm_core.algorithms.base import ShardingAlgorithm
from ddm_core.algorithms.registry import register

__all__ = ["ConsistentHashAlgorithm"]

_MAX_POINTS = 1 << 22


class _Ring:
    __slots__ = ("points", "owners", "points_array", "owners_array")

    def __init__(self, points: list[int], owners: list[int]) -> None:
        self.points = points
        self.owners = owners
        self.points_array = np.array(points, dtype=np.uint64)
        self.owners_array = np.array(owners, dtype=np.intp)


@register
class ConsistentHashAlgorithm(ShardingAlgorithm):
    """``CONSISTENT_HASH``: xxh3 ring, virtual nodes, weights, bisect lookup."""

    type_name = "CONSISTENT_HASH"
    PROPS = {
        "virtual-nodes": "ring points per unit of weight, 1..10000 (default 160)",
        "weights": "{target: integer weight >= 0} (default 1 each; 0 drains a target)",
        "key-type": "auto (default) | int | str: what the column holds",
    }

    def _configure(self, props: Props) -> None:
        self.virtual_nodes = props.integer("virtual-nodes", 160, min=1, max=10_000)
        self.key_type = props.text("key-type", "auto", choices=KEY_TYPES)
        raw = props.raw("weights", None)
        weights: dict[str, int] = {}
        if raw is not None:
            if not isinstance(raw, Mapping):
                props.fail("weights", raw, "must map target names to integer weights")
            for target, w in raw.items():
                if isinstance(w, str) and w.strip().isdigit():
                    w = int(w)
                if not isinstance(target, str) or not target or type(w) is not int or w < 0:
                    props.fail("weights", raw, f"{target!r}: {w!r} is not a target name with an integer weight >= 0")
                weights[target] = w
        self.weights = weights
        self._rings: dict[TargetSet, _Ring] = {}

    def _ring(self, ts: TargetSet) -> _Ring:
        ring = self._rings.get(ts)
        if ring is not None:
            return ring
        unknown = sorted(set(self.weights) - set(ts.names))
        if unknown:
            raise missing_targets_error(self.label, self.name, "weights name", unknown, ts)
        total = sum(self.weights.get(n, 1) for n in ts.names) * self.virtual_nodes
        if total == 0:
            raise ConfigError(
                f"sharding algorithm {self.label}: every target has weight 0", algorithm=self.name
            )
        if total > _MAX_POINTS:
            raise ConfigError(
                f"sharding algorithm {self.label}: {total} ring points exceed {_MAX_POINTS}",
                algorithm=self.name,
            )
        pairs = []
        for i, name in enumerate(ts.names):
            for v in range(self.weights.get(name, 1) * self.virtual_nodes):
                pairs.append((hash64(f"{name}#{v}"), name, i))
        pairs.sort()  # ties (astronomically rare) break by name: order-independent
        ring = _Ring([p for p, _, _ in pairs], [i for _, _, i in pairs])
        if len(self._rings) > 64:
            self._rings.clear()
        self._rings[ts] = ring
        return ring

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        column, value = self._single(values)
        h = key_hash(value, self.key_type, self.label, self.name, column)
        ts = target_set(targets)
        ring = self._ring(ts)
        k = bisect.bisect_left(ring.points, h)
        return [ts.names[ring.owners[k if k < len(ring.points) else 0]]]

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        ring = self._ring(target_set(targets))
        points, owners, key_type, label, name = ring.points, ring.owners, self.key_type, self.label, self.name
        last = len(points)

        def index(value: Any) -> int:
            k = bisect.bisect_left(points, key_hash(value, key_type, label, name, column))
            return owners[k if k < last else 0]

        return index

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        column, arr = self._single_array(columns)
        hashes = key_hashes(arr, self.key_type, self.label, self.name, column)
        ring = self._ring(target_set(targets))
        k = np.searchsorted(ring.points_array, hashes, side="left")
        k[k == len(ring.points)] = 0
        return ring.owners_array[k]

    def check_targets(self, targets: Sequence[str]) -> None:
        self._ring(target_set(targets))

    def describe(self) -> str:
        w = f", weights={dict(self.weights)}" if self.weights else ""
        return f"CONSISTENT_HASH(virtual-nodes={self.virtual_nodes}{w})"
