"""ids: ``Snowflake.next_id()`` in a Python loop and ``next_ids(n)``; compiled vs twin.

The 41/10/12 layout caps one worker at 4096 ids per ms (4.096 M ids/s): a
generator that reaches the cap waits for the next millisecond, so a figure
near 4.1 M ids/s means "capped", not "as fast as the code could go".
"""

from __future__ import annotations

from ddm_core._fast import Implementation

N_IDS = 200_000  # ~50 ms per round at the cap: 50 ms boundaries, so the partial first ms weighs <= 2 %


def test_next_id(impl: Implementation, measure) -> None:
    next_id = impl.ids.Snowflake(1).next_id
    rng = range(N_IDS)

    def calls() -> None:
        for _ in rng:
            next_id()

    rounds = 10 if impl.name == "cython" else 5
    measure(calls, group="Snowflake.next_id()", items=N_IDS, unit="id", rounds=rounds)


def test_next_ids(impl: Implementation, measure) -> None:
    gen = impl.ids.Snowflake(2)
    rounds = 10 if impl.name == "cython" else 5
    measure(lambda: gen.next_ids(N_IDS), group=f"Snowflake.next_ids({N_IDS})", items=N_IDS, unit="id", rounds=rounds)
