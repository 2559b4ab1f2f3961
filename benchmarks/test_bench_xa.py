"""XA against local transactions: the same two-row transfer, and the one-phase shortcut.

MariaDB on 127.0.0.1:3306 (root, no password). Two fresh databases ``ds_0`` /
``ds_1`` hold the bank of tests/test_xa_support.py (``t_account`` sharded by
``account_id`` MOD 2; even accounts on ``ds_0``); dropped at the end.

==========================  ==========================================================  ===================
case                        what one round does                                         baseline (paired)
==========================  ==========================================================  ===================
xa two-phase transfer       ``CALLS`` transfers: debit an even account (ds_0), credit  local, one data
                            an odd one (ds_1), ``executor.transaction(mode="xa")``:    source: the same two
                            2 branches, log row, 2 PREPAREs, decision, 2 COMMITs       UPDATEs, both on ds_0
xa one-phase transfer       the same two UPDATEs on ds_0 only, ``mode="xa"``: one      local, the same
                            branch, ``XA COMMIT ... ONE PHASE``, no log                 two UPDATEs
==========================  ==========================================================  ===================

A local transaction cannot write two data sources at all (that is the point of
XA), so the baseline of the two-phase case is the nearest local equivalent: the
same two-row transfer with both rows on one data source. Rounds are interleaved
as in benchmarks/test_bench_executor.py: each timed XA round follows an untimed
(``perf_counter``-timed) local round, the local median goes into ``extra_info``
(``direct_median``) and ``report.py`` prints the ratio. Figures are
transactions per second (``higher_is_better``); nothing here asserts a speed.

Run: ``PYTHONPATH=src python -m pytest benchmarks/bench_xa.py`` (the file is
not named ``test_*``, so name it explicitly; ``python benchmarks/report.py --
benchmarks/bench_xa.py`` adds it to the report).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from ddm_core import load_config
from ddm_core.execute import Executor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from services import fresh_mariadb_databases  # noqa: E402
from test_xa_support import bank_config, create_bank  # noqa: E402

CALLS = 100  # transactions per round
ROUNDS = 15
GROUP = "xa vs local transactions"
DEBIT = "UPDATE t_account SET balance = balance - 1 WHERE account_id = %s"
CREDIT = "UPDATE t_account SET balance = balance + 1 WHERE account_id = %s"


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    with fresh_mariadb_databases(2) as names:
        config = bank_config({f"ds_{i}": f"mysql://127.0.0.1:3306/{db}" for i, db in enumerate(names)},
                             maxConcurrent=8)
        create_bank(config)
        with Executor(load_config(config), load_schema=False, timeout=10.0) as ex:
            ex.warm_up()
            yield ex


def _transfers(ex: Executor, mode: str, source: int, target: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(CALLS):
            with ex.transaction(mode=mode) as tx:
                tx.execute(DEBIT, (source,)).close()
                tx.execute(CREDIT, (target,)).close()

    return run


def _paired(benchmark: Any, case: str, timed: Callable[[], None], baseline: Callable[[], None], unit: str) -> None:
    local_rounds: list[float] = []

    def setup() -> None:
        started = time.perf_counter()
        baseline()
        local_rounds.append(time.perf_counter() - started)

    benchmark.group = GROUP
    benchmark.pedantic(timed, setup=setup, rounds=ROUNDS, warmup_rounds=1, iterations=1)
    benchmark.extra_info.update(
        case=case, items=CALLS, unit=unit, higher_is_better=True,
        direct_median=statistics.median(local_rounds), direct_min=min(local_rounds),
        direct_rounds=len(local_rounds),
    )


def test_xa_two_phase_transfer_vs_local(benchmark: Any, executor: Executor) -> None:
    _paired(benchmark, "XA two-phase transfer (2 data sources) vs local (1 data source)",
            _transfers(executor, "xa", 0, 1), _transfers(executor, "local", 2, 4), "transaction")


def test_xa_one_phase_transfer_vs_local(benchmark: Any, executor: Executor) -> None:
    _paired(benchmark, "XA one-phase transfer (1 data source) vs local",
            _transfers(executor, "xa", 6, 8), _transfers(executor, "local", 2, 4), "transaction")
