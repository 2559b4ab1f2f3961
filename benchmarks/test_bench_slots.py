"""slots: ``SlotMap.route`` per call and ``route_many`` over a 1 M int64 array; compiled vs twin.

The ``call floor`` group measures what every per-call figure includes: the
1000-iteration Python ``for`` loop alone, and the same loop calling a builtin
that does no work (``id(k)``, a one-argument C function like ``route``).
"""

from __future__ import annotations

import numpy as np
import pytest

from ddm_core._fast import Implementation
from ddm_core._fast.slot_layout import even_layout


@pytest.fixture(scope="module")
def slot_map(impl: Implementation):
    return impl.slots.SlotMap(even_layout(16, 10))  # 1024 slots over 16 nodes


def test_route(impl: Implementation, slot_map, measure, int_keys: list[int]) -> None:
    route = slot_map.route

    def calls() -> None:
        for k in int_keys:
            route(k)

    measure(
        calls,
        case="route",
        impl=impl.name,
        group="SlotMap.route(int), 1000 calls",
        items=len(int_keys),
        unit="call",
        rounds=500,
        warmup_rounds=20,
    )


def test_route_many(impl: Implementation, slot_map, measure, int64_array: np.ndarray) -> None:
    measure(
        lambda: slot_map.route_many(int64_array),
        case="route_many",
        impl=impl.name,
        group="SlotMap.route_many(1M int64)",
        items=int64_array.size,
        unit="key",
        rounds=30 if impl.name == "cython" else 3,
    )


@pytest.mark.parametrize("what", ["loop", "id"])
def test_call_floor(what: str, measure, int_keys: list[int]) -> None:
    if what == "loop":

        def calls() -> None:
            for k in int_keys:
                pass

    else:

        def calls() -> None:
            for k in int_keys:
                id(k)

    measure(
        calls,
        case=f"floor_{what}",
        group="call floor, 1000 iterations",
        items=len(int_keys),
        unit="call",
        rounds=500,
        warmup_rounds=20,
    )
