"""Numeric range sharding: VOLUME_RANGE and BOUNDARY_RANGE (ShardingSphere semantics).

Both split the integer line at ascending boundaries ``b0 < b1 < ... < bn-1``
into ``n + 1`` partitions numbered from 0, and pick the target whose trailing
number is the partition::

    0: v < b0    1: b0 <= v < b1    ...    n: v >= bn-1

A value's partition is found by binary search (``bisect``); a batch uses
``numpy.searchsorted``. Range conditions route exactly to the partitions
they overlap (range sharding is what makes ranges cheap; its risk is skew
when active users cluster in one range).

BOUNDARY_RANGE
    ``sharding-ranges: "1,5,10"`` → partitions ``<1``, ``[1,5)``, ``[5,10)``,
    ``>=10`` (0..3). Boundaries may be given in any order (sorted, as
    ShardingSphere does); a duplicate or a non-integer is a ConfigError
    (ShardingSphere silently drops non-integers).

VOLUME_RANGE
    ``range-lower``, ``range-upper``, ``sharding-volume`` → partition 0 is
    ``< lower``, then one partition per ``volume`` up to ``upper`` (the last
    one shorter if the span is not a multiple), then ``>= upper``. "1 to 10 M
    on shard 0, 10 M to 20 M on shard 1" is
    ``range-lower: 1, range-upper: 20000001, sharding-volume: 10000000``
    (shards 1 and 2; 0 and 3 take the outliers).
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ddm_core.algorithms._numbered import NumberedAlgorithm
from ddm_core.algorithms._props import Props, parse_int_text
from ddm_core.algorithms._targets import NONE, target_set
from ddm_core.algorithms._values import as_int, int_array, range_int_bounds
from ddm_core.algorithms.base import ValueRange
from ddm_core.algorithms.registry import register

__all__ = ["BoundaryRangeAlgorithm", "VolumeRangeAlgorithm"]

_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
_MAX_PARTITIONS = 1 << 20


class _PartitionedRange(NumberedAlgorithm):
    """Partitions between sorted integer boundaries."""

    supports_range = True
    boundaries: list[int]

    def _set_boundaries(self, boundaries: list[int]) -> None:
        self.boundaries = boundaries
        self._bounds_array = np.array(boundaries, dtype=np.int64)
        self.result_count = len(boundaries) + 1

    def partition(self, value: int) -> int:
        """The partition number of an integer value."""
        return bisect.bisect_right(self.boundaries, value)

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        column, value = self._single(values)
        n = value if type(value) is int else as_int(value, self.label, self.name, column)
        return [self._target(target_set(targets), bisect.bisect_right(self.boundaries, n), value)]

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        numbers, bounds, slow = target_set(targets).numbers, self.boundaries, super().scalar(targets, column)

        def index(value: Any) -> int:
            if type(value) is int:
                i = numbers.get(bisect.bisect_right(bounds, value), NONE)
                if i >= 0:
                    return i
            return slow(value)

        return index

    def range(self, targets: Sequence[str], ranges: Mapping[str, ValueRange]) -> list[str]:
        column, r = self._single(ranges)
        lo, hi = range_int_bounds(
            r.lower, r.upper, r.lower_closed, r.upper_closed, self.label, self.name, column
        )
        return self._targets_of_partitions(targets, lo, hi, self.partition)

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        column, arr = self._single_array(columns)
        a = int_array(arr, self.label, self.name, column)
        if a.dtype == np.uint64:
            if a.size and int(a.max()) > _LONG_MAX:
                a = a.astype(object)
            else:
                a = a.astype(np.int64)
        if a.dtype == object:
            numbers = np.array([self.partition(v) for v in a.tolist()], dtype=np.int64)
        else:
            numbers = np.searchsorted(self._bounds_array, a, side="right").astype(np.int64)
        return self._indices(target_set(targets), numbers, arr)


@register
class BoundaryRangeAlgorithm(_PartitionedRange):
    """``BOUNDARY_RANGE``: partitions between explicit boundaries."""

    type_name = "BOUNDARY_RANGE"
    PROPS = {"sharding-ranges": 'ascending integer boundaries, "1,5,10" or a list (required)'}

    def _configure(self, props: Props) -> None:
        raw = props.raw("sharding-ranges")
        if isinstance(raw, str):
            parts: list[Any] = [p for p in raw.split(",")]
        elif isinstance(raw, (list, tuple)):
            parts = list(raw)
        else:
            props.fail("sharding-ranges", raw, "must be a comma-separated string or a list of integers")
        bounds: list[int] = []
        for part in parts:
            n = part if type(part) is int else parse_int_text(part) if isinstance(part, str) else None
            if n is None or not _LONG_MIN <= n <= _LONG_MAX:
                props.fail("sharding-ranges", raw, f"{part!r} is not a 64-bit integer")
            bounds.append(n)
        if not bounds:
            props.fail("sharding-ranges", raw, "needs at least one boundary")
        bounds.sort()
        dupes = sorted({b for a, b in zip(bounds, bounds[1:]) if a == b})
        if dupes:
            props.fail("sharding-ranges", raw, f"boundary {dupes[0]} appears twice")
        self._set_boundaries(bounds)

    def describe(self) -> str:
        shown = ",".join(map(str, self.boundaries[:6])) + (",..." if len(self.boundaries) > 6 else "")
        return f"BOUNDARY_RANGE(ranges={shown}; {self.result_count} partitions)"


@register
class VolumeRangeAlgorithm(_PartitionedRange):
    """``VOLUME_RANGE``: equal-volume partitions between a lower and an upper bound."""

    type_name = "VOLUME_RANGE"
    PROPS = {
        "range-lower": "first boundary, an integer (required)",
        "range-upper": "last boundary, an integer (required)",
        "sharding-volume": "values per partition, > 0 and <= upper - lower (required)",
    }

    def _configure(self, props: Props) -> None:
        self.lower = props.integer("range-lower", min=_LONG_MIN, max=_LONG_MAX)
        self.upper = props.integer("range-upper", min=_LONG_MIN, max=_LONG_MAX)
        self.volume = props.integer("sharding-volume", min=1)
        if self.upper - self.lower < self.volume:
            props.fail(
                "sharding-volume",
                self.volume,
                f"range-upper - range-lower ({self.upper} - {self.lower}) must be at least the volume",
            )
        count = -(-(self.upper - self.lower) // self.volume)
        if count > _MAX_PARTITIONS:
            props.fail("sharding-volume", self.volume, f"makes {count} partitions (limit {_MAX_PARTITIONS})")
        self._set_boundaries([self.lower + i * self.volume for i in range(count)] + [self.upper])

    def describe(self) -> str:
        return (
            f"VOLUME_RANGE(lower={self.lower}, upper={self.upper}, volume={self.volume}; "
            f"{self.result_count} partitions)"
        )
