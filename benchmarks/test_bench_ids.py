"""ids: ``Snowflake.next_id()`` in a Python loop and ``next_ids(n)``; compiled vs twin.

The 41/10/12 layout caps one worker at 4096 ids per ms (4.096 M ids/s): a
generator that reaches the cap waits for the next millisecond, so a figure
near 4.1 M ids/s means "at the cap", not "as fast as the code could go".
"""

from __future__ import annotations

import time

import pytest

from ddm_core._fast import Implementation

#: ~50 ms per round at the cap: the partly used first millisecond weighs <= 2 %.
N_IDS = 200_000


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


#: The compiled clock, and an injected one: the path of a leased worker id
#: (``clock=lease.clock``), where every id reads the clock through Python and
#: ``read_clock`` checks what it returned.
CLOCKS = {"next_id": (None, "Snowflake.next_id()"), "next_id_clock": (_wall_ms, "Snowflake(clock=...).next_id()")}


@pytest.mark.parametrize("case", list(CLOCKS))
def test_next_id(impl: Implementation, measure, case: str) -> None:
    clock, label = CLOCKS[case]
    next_id = impl.ids.Snowflake(1, clock=clock).next_id
    loop = range(N_IDS)

    def calls() -> None:
        for _ in loop:
            next_id()

    measure(
        calls,
        case=case,
        impl=impl.name,
        group=f"{label}, {N_IDS} calls",
        items=N_IDS,
        unit="id",
        rounds=10 if impl.name == "cython" else 5,
    )


def test_next_ids(impl: Implementation, measure) -> None:
    gen = impl.ids.Snowflake(2)
    measure(
        lambda: gen.next_ids(N_IDS),
        case="next_ids",
        impl=impl.name,
        group=f"Snowflake.next_ids({N_IDS})",
        items=N_IDS,
        unit="id",
        rounds=10 if impl.name == "cython" else 5,
    )
