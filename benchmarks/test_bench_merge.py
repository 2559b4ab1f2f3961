"""merge: ``heap_merge`` (compiled and twin) against ``heapq.merge(key=itemgetter(0))``.

1 M rows ``(create_time: int, id: int, payload: str)`` split into k lists,
each sorted by ``create_time``; every merge orders by column 0 only and is
consumed by ``collections.deque(it, maxlen=0)``.

The ``merge ... iterator sources`` group repeats k=16 with each list behind
``iter()``: an iterator (a streaming cursor) cannot be read ahead by index,
so ``heap_merge`` takes its general path (no prefetch).

Each list's rows are built in its own sorted order, as a cursor would build
them while fetching: memory order matches read order within a source. (Rows
built first and sorted afterwards are scattered in memory; every merge is
then slowed by cache misses alike, and the ratios shrink.)
"""

from __future__ import annotations

import collections
import heapq
from operator import itemgetter

import numpy as np
import pytest

from ddm_core._fast import Implementation

N_ROWS = 1_000_000
SEED = 20240601
KEYS = [(0, False)]


def make_sources(k: int, n: int = N_ROWS) -> list[list[tuple[int, int, str]]]:
    rng = np.random.default_rng(SEED + k)
    # Millisecond timestamps over ~28 hours: mostly distinct, some ties.
    times = rng.integers(1_700_000_000_000, 1_700_000_000_000 + 100_000_000, size=n, dtype=np.int64)
    sources = []
    first_id = 0
    for j in range(k):
        part = np.sort(times[j::k]).tolist()
        sources.append([(t, first_id + i, f"payload-{first_id + i:08d}") for i, t in enumerate(part)])
        first_id += len(part)
    return sources


@pytest.fixture(scope="module", params=[4, 16, 64], ids=lambda k: f"k{k}")
def sources(request: pytest.FixtureRequest) -> list[list[tuple[int, int, str]]]:
    return make_sources(request.param)


def test_heap_merge(impl: Implementation, sources, measure) -> None:
    heap_merge = impl.merge.heap_merge
    k = len(sources)
    measure(
        lambda: collections.deque(heap_merge(sources, KEYS), maxlen=0),
        case="heap_merge",
        impl=impl.name,
        k=k,
        group=f"merge 1M rows, k={k}",
        items=N_ROWS,
        unit="row",
        rounds=9 if impl.name == "cython" else 3,  # the twin takes seconds per round
    )


def test_heapq_merge(sources, measure) -> None:
    key = itemgetter(0)
    k = len(sources)
    measure(
        lambda: collections.deque(heapq.merge(*sources, key=key), maxlen=0),
        case="heapq_merge",
        k=k,
        group=f"merge 1M rows, k={k}",
        items=N_ROWS,
        unit="row",
        rounds=9,
    )



@pytest.fixture(scope="module")
def sources16() -> list[list[tuple[int, int, str]]]:
    return make_sources(16)


@pytest.mark.parametrize("merge", ["heap_merge", "heapq_merge"])
def test_merge_iterators(merge: str, impl: Implementation, sources16, measure) -> None:
    if merge == "heapq_merge" and impl.name != "cython":
        pytest.skip("heapq.merge does not depend on the implementation: measured once")
    key = itemgetter(0)
    if merge == "heap_merge":
        heap_merge = impl.merge.heap_merge

        def run() -> None:
            collections.deque(heap_merge([iter(s) for s in sources16], KEYS), maxlen=0)

    else:

        def run() -> None:
            collections.deque(heapq.merge(*[iter(s) for s in sources16], key=key), maxlen=0)

    measure(
        run,
        case=f"{merge}_iter",
        impl=impl.name if merge == "heap_merge" else None,
        k=16,
        group="merge 1M rows, k=16, iterator sources",
        items=N_ROWS,
        unit="row",
        rounds=9 if impl.name == "cython" else 3,
    )
