"""metrics: what ``ddm_core.metrics`` adds to a cached point select (issue 16 goal: < 1 µs).

Two pairs, each with interleaved rounds (the plain round runs in pytest-benchmark's
untimed ``setup`` and is timed there with ``perf_counter``), so both sides see
the same machine load:

==========================  ===========================================  ================================
case                        with metrics                                 without
==========================  ===========================================  ================================
executor point select       ``execute(POINT, (k,))`` on SQLite files,    the same executor, observer off
                            observer installed
route + hook                ``route()`` then the recorder's ``finished``  ``route()`` alone
==========================  ===========================================  ================================

The first is what an application sees; the second isolates the hook (the
executor's only hot-path addition) from SQLite's own noise. ``extra_info``
has ``added_ns``: (median with − median without) per statement. Nothing here
asserts a speed; the figures are in docs/observability.md#cost.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry

from ddm_core import metrics
from ddm_core.execute import Executor
from ddm_core.metadata import load_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_execute_support import ORDER_DDL, sharding_config  # noqa: E402

POINT = "SELECT order_id, amount FROM t_order WHERE user_id = %s"
CALLS = 500
USERS = 200
GROUP = "metrics: with vs without"


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    base = tmp_path_factory.mktemp("metrics_bench")
    urls = {f"ds_{i}": f"sqlite:///{base / f'ds_{i}.db'}" for i in range(4)}
    ex = Executor(load_config(sharding_config(urls)))
    ex.execute(ORDER_DDL).close()
    for u in range(1, USERS + 1):
        ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)", (u * 10, u, u)).close()
    try:
        yield ex
    finally:
        ex.close()


def _paired(benchmark: Any, with_round: Callable[[], None], without_round: Callable[[], None], *,
            case: str, rounds: int) -> None:
    plain: list[float] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        t0 = time.perf_counter()
        without_round()
        plain.append(time.perf_counter() - t0)
        return (), {}

    benchmark.group = GROUP
    benchmark.extra_info.update(case=case, items=CALLS, unit="statement")
    benchmark.pedantic(with_round, setup=setup, rounds=rounds, warmup_rounds=2, iterations=1)
    direct = plain[2:]
    benchmark.extra_info.update(direct_median=statistics.median(direct), direct_min=min(direct), direct_rounds=direct)
    benchmark.extra_info["added_ns"] = (benchmark.stats.stats.median - statistics.median(direct)) * 1e9 / CALLS


def test_executor_point_select_with_and_without_metrics(benchmark: Any, executor: Executor) -> None:
    installed = metrics.install(CollectorRegistry(), executor=executor)
    recorder = installed.recorder
    keys = [(k % USERS + 1,) for k in range(CALLS)]
    execute = executor.execute

    def calls() -> None:
        for k in keys:
            execute(POINT, k).close()

    def with_metrics() -> None:
        executor.set_observer(recorder)
        calls()

    def without_metrics() -> None:
        executor.set_observer(None)
        calls()

    try:
        _paired(benchmark, with_metrics, without_metrics, case="executor point select + metrics", rounds=40)
    finally:
        installed.uninstall()
    assert sum(s.count for s in recorder.snapshot().shapes) >= CALLS  # the timed side really counted


def test_route_and_hook_against_route_alone(benchmark: Any, executor: Executor) -> None:
    installed = metrics.install(CollectorRegistry())
    recorder = installed.recorder
    route = executor.router.route
    result = executor.execute(POINT, (1,))
    result.fetchall()
    keys = [(k % USERS + 1,) for k in range(CALLS)]
    clock = time.monotonic
    finished = recorder.finished

    def with_hook() -> None:
        for k in keys:
            started = clock()
            finished(route(POINT, k), started, result)

    def route_alone() -> None:
        for k in keys:
            started = clock()
            route(POINT, k)
            del started

    try:
        _paired(benchmark, with_hook, route_alone, case="cached route + metrics hook", rounds=200)
    finally:
        installed.uninstall()
