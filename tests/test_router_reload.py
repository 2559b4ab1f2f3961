"""A reload never mixes with a compile: no plan built on an old version stays cached.

Threads route many distinct SQL texts (each one a compile) while the main
thread switches between two configurations whose slot maps differ — every
user id lives on another data source in the other one — as migration steps,
the way placement changes are allowed to arrive. After each switch the
routing threads are paused and every statement routed since the last check
is routed again: a plan compiled on the old version and cached after the
switch would send it to the old data source.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import pytest

from ddm_core import Router, load_config
from ddm_core.metadata import ConfigHolder, ShardingConfig, StaticSource

WORKERS = 4
SWITCHES = 40

_CONFIG = """
name: race
dataSources:
  ds_0: "sqlite://:memory:"
  ds_1: "sqlite://:memory:"
  ds_2: "sqlite://:memory:"
  ds_3: "sqlite://:memory:"
tables:
  - logicTable: t_order
    shardKey: user_id
    algorithm: slots
    slotCount: 1024
    shardCount: 4
    databases: [ds_0, ds_1, ds_2, ds_3]
    slots: {slots}
"""


def layout_text(rotation: int) -> str:
    """Slot quarter ``q`` owned by ``ds_{(q + rotation) % 4}``."""
    quarters = [f"{q * 256}-{q * 256 + 255}" for q in range(4)]
    slots = "{" + ", ".join(f"ds_{(q + rotation) % 4}: '{quarters[q]}'" for q in range(4)) + "}"
    return _CONFIG.format(slots=slots)


def point(key: int) -> str:
    return f"SELECT * FROM t_order WHERE user_id = {key}"


@pytest.mark.parametrize("via", ["holder", "use_config"])
def test_no_plan_of_an_old_version_stays_cached(via: str) -> None:
    configs = [load_config(layout_text(0)), load_config(layout_text(1))]
    references = [Router(c) for c in configs]  # each routes by its own version only

    def expected(version: int, key: int) -> tuple[str, ...]:
        return references[version].route("SELECT * FROM t_order WHERE user_id = %s", [key]).tables[0].nodes

    assert all(expected(0, key) != expected(1, key) for key in range(100))

    switch: Callable[[ShardingConfig], object]
    if via == "holder":
        holder = ConfigHolder(StaticSource(layout_text(0)))
        assert holder.config == configs[0]
        router = Router(holder, cache_size=1 << 16)

        def switch(config: ShardingConfig) -> object:
            holder.publish(config, allow_placement_change=True)
            return router.config  # the router takes the new version now, while the threads compile
    else:
        router = Router(configs[0], cache_size=1 << 16)
        switch = router.use_config

    done = threading.Event()
    pause = threading.Event()
    barrier = threading.Barrier(WORKERS + 1, timeout=120)
    routed: list[int] = []
    errors: list[BaseException] = []

    def work(first: int) -> None:
        key = first
        try:
            while not done.is_set():
                if pause.is_set():
                    barrier.wait()  # no route in flight from here on...
                    barrier.wait()  # ...until the main thread has checked
                    continue
                router.route(point(key))
                routed.append(key)
                key += WORKERS
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(WORKERS)]
    for t in threads:
        t.start()
    stale: list[tuple[int, int, tuple[str, ...], tuple[str, ...]]] = []
    checked = 0
    try:
        for step in range(SWITCHES):
            while len(routed) < checked + 2 * WORKERS and not errors:
                time.sleep(0.001)  # let every thread get well into its next compiles
            current = (step + 1) % 2
            switch(configs[current])
            pause.set()
            barrier.wait()
            for key in routed[checked:]:
                got = router.route(point(key)).tables[0].nodes
                want = expected(current, key)
                if got != want:
                    stale.append((step, key, got, want))
            checked = len(routed)
            pause.clear()
            barrier.wait()
    except BaseException:
        barrier.abort()  # free threads waiting at the barrier
        raise
    finally:
        done.set()
        pause.clear()
        for t in threads:
            t.join()
    assert not errors, errors
    assert checked > SWITCHES * WORKERS
    assert not stale, (
        f"{len(stale)} cached plans of an old version after {len({s[0] for s in stale})} of "
        f"{SWITCHES} switches, first: user_id {stale[0][1]} -> {stale[0][2]}, current version says {stale[0][3]}"
    )
