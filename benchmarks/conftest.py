"""Benchmark fixtures: the implementation parametrization of ``tests/conftest.py``, plus data.

Run ``PYTHONPATH=src python benchmarks/report.py`` for the table of figures, or
``PYTHONPATH=src pytest benchmarks`` for pytest-benchmark's own tables (one per
group; within a group every column shows its ratio to the fastest entry).

Every benchmark goes through :func:`measure`, which records in ``extra_info``
how many items (calls, keys, ids, rows) one round processes, so that
``report.py`` can turn round times into ns per item or items per second.
Figures are read from the medians; nothing here asserts a speed.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from ddm_core._fast.testing import impl  # the same c/py parametrization as tests/

#: One seed for every data set, so that runs compare like with like.
SEED = 20240601


Measure = Callable[..., Any]


@pytest.fixture
def measure(benchmark: Any) -> Measure:
    """``measure(fn, case=, group=, items=, unit=, rounds=, ...)`` times ``fn()`` per round.

    ``fn`` must do ``items`` units of work per call (for per-call figures: a
    Python loop of that many calls, so the loop's own cost is *included* in
    the figure; the ``call floor`` group measures that cost separately).
    ``case`` (and ``impl``, ``k`` where they apply) name the figure for
    ``report.py``; they are stored in the JSON's ``extra_info``.
    """

    def run(
        fn: Callable[[], Any],
        *,
        case: str,
        group: str,
        items: int,
        unit: str,
        rounds: int,
        warmup_rounds: int = 1,
        **info: Any,
    ) -> Any:
        benchmark.group = group
        benchmark.extra_info.update(case=case, items=items, unit=unit, **info)
        return benchmark.pedantic(fn, rounds=rounds, warmup_rounds=warmup_rounds, iterations=1)

    return run


@pytest.fixture(scope="session")
def int_keys() -> list[int]:
    """1000 Python ints spread over 62 bits (like snowflake ids; none is a cached small int)."""
    rng = np.random.default_rng(SEED)
    return [int(v) for v in rng.integers(1 << 40, 1 << 62, size=1000, dtype=np.int64)]


@pytest.fixture(scope="session")
def int64_array() -> np.ndarray:
    """1 M int64 keys over the whole int64 range (negative ones included)."""
    rng = np.random.default_rng(SEED)
    return rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, size=1_000_000, dtype=np.int64)
