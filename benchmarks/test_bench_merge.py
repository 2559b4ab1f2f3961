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


# -- merge_results by a string column, under its collation (docs/notes.md, "Collations") ---------

STRING_ROWS = 200_000
STRING_K = 16
#: None: Python's order (no collation passed, as before collations were read); else a protocol id.
STRING_CASES = {"python": None, "utf8mb4_nopad_bin": 1070, "utf8mb4_bin": 46, "utf8mb4_general_ci": 45,
                "latin1_swedish_ci": 8, "utf8mb4_unicode_ci": 224, "utf8mb4_unicode_520_ci": 246}  # fmt: skip


def string_sources(collation_id: int | None) -> list[list[tuple[str, int]]]:
    """(name, id) rows: mixed-case names with accents, each source sorted as its server would sort it."""
    rng = np.random.default_rng(SEED)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéÉåÄö"))
    picks = rng.integers(0, len(letters), size=(STRING_ROWS, 10))
    names = ["".join(row) for row in letters[picks].tolist()]
    if collation_id is not None:
        from ddm_core.merge.collation import collation_for

    key = collation_for(collation_id).key if collation_id is not None else None
    sources = []
    for j in range(STRING_K):
        part = [(names[i], i) for i in range(j, STRING_ROWS, STRING_K)]
        part.sort(key=(lambda r: (key(r[0]), r[1])) if key is not None else None)
        sources.append(part)
    return sources


@pytest.mark.parametrize("case", list(STRING_CASES))
def test_merge_results_by_string(impl: Implementation, case: str, measure) -> None:
    from ddm_core.merge import UnitRows, merge_results
    from ddm_core.merge.collation import collation_for
    from ddm_core.merge.spec import MergeSpec

    cid = STRING_CASES[case]
    sources = string_sources(cid)
    spec = MergeSpec(order_by=((0, False), (1, False)))
    extra = {} if cid is None else {"collations": [collation_for(cid), None]}
    description = (("name",), ("id",))

    def run() -> None:
        units = [UnitRows(description, s) for s in sources]
        collections.deque(merge_results(spec, units, heap_merge=impl.merge.heap_merge, **extra), maxlen=0)

    measure(
        run, case=f"merge_results_{case}", impl=impl.name, k=STRING_K,
        group=f"merge_results 200k rows ORDER BY name, id, k={STRING_K}", items=STRING_ROWS, unit="row",
        rounds=7 if impl.name == "cython" else 3,
    )  # fmt: skip


def test_merge_results_by_int(impl: Implementation, sources16, measure) -> None:
    """The int-keyed path through the engine (collations not needed): unchanged by them."""
    from ddm_core.merge import UnitRows, merge_results
    from ddm_core.merge.spec import MergeSpec

    spec = MergeSpec(order_by=((0, False),))
    description = (("t",), ("id",), ("payload",))

    def run() -> None:
        units = [UnitRows(description, s) for s in sources16]
        collections.deque(merge_results(spec, units, heap_merge=impl.merge.heap_merge), maxlen=0)

    measure(
        run, case="merge_results_int", impl=impl.name, k=16, group="merge_results 1M rows ORDER BY int, k=16",
        items=N_ROWS, unit="row", rounds=9 if impl.name == "cython" else 3,
    )  # fmt: skip
