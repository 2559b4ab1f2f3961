"""read/write splitting: reads per second over 2 replicas vs the primary alone, and what each
read-your-writes mode costs per write and per read — every pair measured in the same run, interleaved.

A private primary and two replicas (tests/replication.py: GTID replication of
real ``mariadbd`` processes on this machine) hold ``t_order`` over 2 data
sources × 2 tables, 2000 rows. Each timed round of the case follows one round
of its baseline (pytest-benchmark ``setup``), so both see the same load; the
baseline's median goes to ``extra_info`` (``direct_median``) and ``report.py``
prints the ratio. Nothing here asserts a speed. All three servers share the
machine's two cores with the benchmark, so "2 replicas" cannot add CPU here:
the read figure shows what the balancing costs, not what extra hosts would give
(docs/readwrite.md#measured-costs).

========================  ==============================================  ==================================
case                      measured                                        baseline
========================  ==============================================  ==================================
reads/s, 4 threads        point selects, reads balanced over 2 replicas    the same on a primary-only config
write, window mode        one-row UPDATE by key                           the same with read_your_writes off
write, gtid mode          UPDATE + ``SELECT @@last_gtid`` on its conn     the same with read_your_writes off
read after write, window  a write, then point selects in the same context the same with read_your_writes off
read after write, gtid    a write, then point selects (GTID checked)      the same with read_your_writes off
========================  ==============================================  ==================================
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from replication import Replication  # noqa: E402
from test_execute_support import ORDER_DDL, sharding_config  # noqa: E402

from ddm_core.execute import Executor  # noqa: E402
from ddm_core.metadata import load_config  # noqa: E402

GROUP = "readwrite"
ROWS = 2000
CALLS = 200
THREADS = 4
POINT = "SELECT amount FROM t_order WHERE user_id = %s AND order_id = %s"
UPDATE = "UPDATE t_order SET amount = amount + 1 WHERE user_id = %s AND order_id = %s"


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(config with both replicas, the same config with none), the rows loaded and replicated."""
    setup = Replication(Path(tempfile.mkdtemp(prefix="ddm_bench_rw_")))
    try:
        setup.start()
        tag = uuid.uuid4().hex[:6]
        dbs = [f"ddm_bench_rw_{tag}_{i}" for i in range(2)]
        setup.sql(setup.primary, *(f"CREATE DATABASE {db}" for db in dbs))
        pool = {"maxSize": 10, "minIdle": 2, "acquireTimeoutMs": 3000}
        replicated = sharding_config({f"ds_{i}": setup.endpoints(db) for i, db in enumerate(dbs)}, tables=2, pool=pool)
        alone = sharding_config({f"ds_{i}": {k: v for k, v in setup.endpoints(db).items() if k != "replicas"}
                                 for i, db in enumerate(dbs)}, tables=2, pool=pool)  # fmt: skip
        with Executor(load_config(alone), load_schema=False) as ex:
            ex.execute(ORDER_DDL).close()
            ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES " +
                       ", ".join(f"({i}, {i}, 0)" for i in range(1, ROWS + 1))).close()  # fmt: skip
        setup.wait_replicated()
        yield replicated, alone
    finally:
        setup.stop()


def _executor(spec: dict[str, Any], mode: str = "off") -> Executor:
    return Executor(load_config(spec), load_schema=False, read_your_writes=mode, replica_monitor=False)


def _paired(benchmark: Any, case_round: Callable[[], Any], base_round: Callable[[], Any], *, case: str,
            items: int, unit: str, higher_is_better: bool = False, rounds: int = 12) -> None:  # fmt: skip
    """Time ``case_round``; before each of its rounds time one ``base_round`` (same load for both)."""
    seconds: list[float] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        start = time.perf_counter()
        base_round()
        seconds.append(time.perf_counter() - start)
        return (), {}

    benchmark.group = GROUP
    benchmark.extra_info.update(case=case, items=items, unit=unit, higher_is_better=higher_is_better)
    benchmark.pedantic(case_round, setup=setup, rounds=rounds, warmup_rounds=2, iterations=1)
    base = seconds[2:]
    benchmark.extra_info.update(direct_median=statistics.median(base), direct_min=min(base), direct_rounds=base)


def _threaded_reads(ex: Executor) -> Callable[[], None]:
    def one_thread(offset: int) -> None:
        for i in range(CALLS):
            key = (offset * CALLS + i) % ROWS + 1
            ex.execute(POINT, (key, key)).close()

    def run() -> None:
        threads = [threading.Thread(target=one_thread, args=(t,)) for t in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    return run


def test_reads_per_second_with_two_replicas_vs_primary_only(benchmark: Any, cluster: Any) -> None:
    replicated, alone = cluster
    with _executor(replicated) as split, _executor(alone) as single:
        _paired(benchmark, _threaded_reads(split), _threaded_reads(single),
                case="reads/s, 4 threads: 2 replicas vs primary only", items=THREADS * CALLS, unit="read",
                higher_is_better=True)  # fmt: skip


def _writes(ex: Executor) -> Callable[[], None]:
    def run() -> None:
        for i in range(CALLS):
            key = i % ROWS + 1
            ex.execute(UPDATE, (key, key)).close()

    return run


@pytest.mark.parametrize("mode", ["window", "gtid"])
def test_cost_per_write(benchmark: Any, cluster: Any, mode: str) -> None:
    replicated, _ = cluster
    with _executor(replicated, mode) as tracked, _executor(replicated, "off") as untracked:
        _paired(benchmark, _writes(tracked), _writes(untracked), case=f"write, {mode} mode vs off",
                items=CALLS, unit="write")  # fmt: skip


def _reads_after_a_write(ex: Executor) -> Callable[[], None]:
    def run() -> None:
        for i in range(CALLS // 10):
            key = i % ROWS + 1
            ex.execute(UPDATE, (key, key)).close()
            for j in range(10):
                other = (key + j) % ROWS + 1
                ex.execute(POINT, (other, other)).close()

    return run


@pytest.mark.parametrize("mode", ["window", "gtid"])
def test_cost_per_read_after_a_write(benchmark: Any, cluster: Any, mode: str) -> None:
    replicated, _ = cluster
    with _executor(replicated, mode) as tracked, _executor(replicated, "off") as untracked:
        _paired(benchmark, _reads_after_a_write(tracked), _reads_after_a_write(untracked),
                case=f"1 write + 10 reads, {mode} mode vs off", items=CALLS, unit="read")  # fmt: skip
