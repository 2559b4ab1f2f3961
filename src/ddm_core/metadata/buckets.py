"""A cut-over's buckets: groups of a table's slots, each in one state (docs/cutover.md#routing).

Buckets are slot-aligned: ``bucket = slot * buckets // slot_count`` — the one
formula the router and the sync engine share (:func:`bucket_lookup`). The
states and the arithmetic live here, below the configuration model (a
:class:`~ddm_core.metadata.model.CutoverRouting` holds a state per bucket) and
the writer (:mod:`~ddm_core.metadata.dump` spells the states out as bucket runs);
the ``cutover:`` block itself is :mod:`ddm_core.metadata.cutover`.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Iterable

import numpy as np

from ddm_core.algorithms.slot_based import parse_slot_spec
from ddm_core.errors import CutoverConfigError

__all__ = [
    "BucketState",
    "L_AUTHORITATIVE",
    "DUAL_STATES",
    "STATE_FIELDS",
    "cutover_error",
    "bucket_lookup",
    "bucket_slots",
    "parse_buckets",
    "format_buckets",
]


class BucketState(str, Enum):
    """Where a bucket's reads and writes go (docs/cutover.md#routing)."""

    NORMAL = "normal"  # legacy only
    PRE_GRAY = "pre_gray"  # legacy serves, writes copied to the shards
    GRAY = "gray"  # the shards serve; writes there only
    ROLLBACK = "rollback"  # back on legacy, writes still copied to the shards


#: States in which the legacy table holds the authoritative rows (writes go there).
L_AUTHORITATIVE = frozenset({BucketState.NORMAL, BucketState.PRE_GRAY, BucketState.ROLLBACK})
#: States whose writes are also sent to the shards (the plan's ``dual`` units).
DUAL_STATES = frozenset({BucketState.PRE_GRAY, BucketState.ROLLBACK})

#: The ``cutover:`` block's field listing the buckets in each state but normal (the default).
STATE_FIELDS = (("preGray", BucketState.PRE_GRAY), ("gray", BucketState.GRAY), ("rollback", BucketState.ROLLBACK))


def cutover_error(field_name: str, why: str, value: Any = None) -> CutoverConfigError:
    """The error naming ``cutover.<field_name>``."""
    path = f"cutover.{field_name}"
    return CutoverConfigError(f"{path}: {why}", field=path, value=value)


def _check_counts(slot_count: int, buckets: int) -> None:
    if not 1 <= buckets <= slot_count:
        why = f"must be from 1 to the table's slot count {slot_count}, not {buckets!r}"
        raise cutover_error("buckets", why, buckets)


def bucket_lookup(slot_count: int, buckets: int) -> np.ndarray:
    """Slot → bucket (``slot * buckets // slot_count``), an int32 array of ``slot_count`` entries."""
    _check_counts(slot_count, buckets)
    return (np.arange(slot_count, dtype=np.int64) * buckets // slot_count).astype(np.int32)


def bucket_slots(slot_count: int, buckets: int, bucket: int) -> range:
    """The slots of ``bucket``: those with ``slot * buckets // slot_count == bucket`` (at least one)."""
    _check_counts(slot_count, buckets)
    if not 0 <= bucket < buckets:
        raise ValueError(f"bucket {bucket} is outside 0..{buckets - 1}")
    return range(-(-bucket * slot_count // buckets), -(-(bucket + 1) * slot_count // buckets))


def parse_buckets(value: Any, buckets: int, field: str) -> frozenset[int]:
    """``"0-9,12,20-29"``, an int, or a list of those → bucket numbers; ``None`` / ``""`` → none.

    Raises:
        CutoverConfigError: malformed or outside ``0..buckets-1``, naming ``field``.
    """
    if value is None or (isinstance(value, str) and not value.strip()) or value == []:
        return frozenset()
    try:
        pairs = parse_slot_spec(value, buckets)
    except ValueError as exc:  # the slot-range syntax, reused: its words say "slot"
        why = str(exc).replace("slot", "bucket")
        raise CutoverConfigError(f"{field}: {why}", field=field, value=value) from None
    return frozenset(b for lo, hi in pairs for b in range(lo, hi + 1))


def format_buckets(buckets: Iterable[int]) -> str:
    """Bucket numbers as compact runs: ``"0-9,12,20-29"`` (``""`` for none)."""
    runs: list[str] = []
    values = sorted({int(b) for b in buckets})
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        runs.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(runs)
