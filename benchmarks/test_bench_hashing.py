"""hashing: ``slot_of`` per call, ``slots_of`` over a 1 M int64 array; compiled vs twin."""

from __future__ import annotations

import numpy as np

from ddm_core._fast import Implementation


def test_slot_of(impl: Implementation, measure, int_keys: list[int]) -> None:
    slot_of = impl.hashing.slot_of

    def calls() -> None:
        for k in int_keys:
            slot_of(k)

    measure(
        calls,
        case="slot_of",
        impl=impl.name,
        group="slot_of(int), 1000 calls",
        items=len(int_keys),
        unit="call",
        rounds=500,
        warmup_rounds=20,
    )


def test_slots_of(impl: Implementation, measure, int64_array: np.ndarray) -> None:
    slots_of = impl.hashing.slots_of
    measure(
        lambda: slots_of(int64_array),
        case="slots_of",
        impl=impl.name,
        group="slots_of(1M int64)",
        items=int64_array.size,
        unit="key",
        rounds=30 if impl.name == "cython" else 3,
    )
