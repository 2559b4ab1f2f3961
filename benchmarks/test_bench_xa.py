"""XA against local transactions: the same two-row transfer, and the one-phase shortcut.

MariaDB on 127.0.0.1:3306 (root, no password). Two fresh databases ``ds_0`` /
``ds_1`` hold the bank of tests/test_xa_support.py (``t_account`` sharded by
``account_id`` MOD 2; even accounts on ``ds_0``); dropped at the end.

==========================  ==========================================================  ===================
case                        what one round does                                         baseline (paired)
==========================  ==========================================================  ===================
xa two-phase transfer       ``CALLS`` transfers: debit an even account (ds_0), credit  local, one data
                            an odd one (ds_1), ``executor.transaction(mode="xa")``:    source: the same two
                            2 branches; ds_0 holds the log: the last resource          UPDATEs, both on ds_0
xa one-phase transfer       the same two UPDATEs on ds_0 only, ``mode="xa"``: one      local, the same
                            branch, ``XA COMMIT ... ONE PHASE``, no log                 two UPDATEs
xa commit, N data sources   ``CALLS`` XA transactions each updating one row on every   plain commits: the same
(N = 2, 4; threads and      data source (N branches): END + PREPARE (+ the decision    UPDATE on each data
asyncio runners; one        row in ds_0's branch), ds_0's one-phase commit, COMMITs    source in a local
server, or a private                                                                    transaction of its own,
``mariadbd`` per data                                                                   committed one after the
source)                                                                                 other (not atomic)
==========================  ==========================================================  ===================

A local transaction cannot write two data sources at all (that is the point of
XA), so the baseline of the two-phase case is the nearest local equivalent: the
same two-row transfer with both rows on one data source. Rounds are interleaved
as in benchmarks/test_bench_executor.py: each timed XA round follows an untimed
(``perf_counter``-timed) local round, the local median goes into ``extra_info``
(``direct_median``) and ``report.py`` prints the ratio. Figures are
transactions per second (``higher_is_better``); nothing here asserts a speed.

The ``xa commit`` cases time whole transactions (the writes and the commit) and also
the commit alone (``tx.commit()`` against the plain transactions' ``COMMIT`` s, summed
per transaction): ``extra_info`` has both medians (``commit_us`` / ``plain_commit_us``,
µs per transaction) and their ratio (``commit_ratio``), printed at the end of the run.
docs/xa.md#latency has the figures.

Run: ``PYTHONPATH=src python -m pytest benchmarks/test_bench_xa.py -s``; ``python
benchmarks/report.py -- benchmarks/test_bench_xa.py`` adds it to the report.
"""

from __future__ import annotations

import asyncio
import statistics
from contextlib import ExitStack
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from ddm_core import load_config
from ddm_core.aio.executor import AsyncExecutor
from ddm_core.execute import Executor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from services import fresh_mariadb_databases  # noqa: E402
from test_execute_support import running_mariadb  # noqa: E402
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


# -- XA commit against plain commits of the same writes, 2 and 4 data sources, both runners ---------------

COMMIT_GROUP = "xa commit vs plain commits of the same writes"
BUMP = "UPDATE t_account SET balance = balance + 1 WHERE account_id = %s"
COMMIT_CALLS = 10  # short rounds, interleaved: both sides see the same (noisy, shared) disk
COMMIT_ROUNDS = 31


def _wide_bank(urls: list[str]) -> Any:
    """The bank over ``len(urls)`` data sources (``account_id`` MOD n: account i on ``ds_i``)."""
    raw = bank_config({f"ds_{i}": url for i, url in enumerate(urls)}, maxConcurrent=8)
    for table in raw["tables"]:
        table["shardCount"] = len(urls)
    create_bank(raw)
    return load_config(raw)


@pytest.fixture(scope="module", params=[(2, "one server"), (4, "one server"), (2, "own servers"), (4, "own servers")],
                ids=lambda p: f"{p[0]}ds-{p[1].replace(' ', '-')}")
def wide_config(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    """``n`` data sources: databases of the machine's MariaDB (one redo log: every branch's flush is the same
    server's), or each on a private ``mariadbd`` of its own (as data sources on several servers are)."""
    n, layout = request.param
    label = f"{n} data sources on {layout}"
    if layout == "one server":
        with fresh_mariadb_databases(n) as names:
            yield label, _wide_bank([f"mysql://127.0.0.1:3306/{db}" for db in names])
        return
    with ExitStack() as stack:
        servers = [stack.enter_context(running_mariadb(tmp_path_factory.mktemp(f"xa_bench_{i}"))) for i in range(n)]
        yield label, _wide_bank([f"mysql://127.0.0.1:{s.port}/{s.create_database('xa_bench_')}" for s in servers])


class CommitClock:
    """Per transaction: the time of its commit alone (the XA ``commit()``, or the plain ``COMMIT`` s summed);
    the commit ratio is the median over rounds of each XA round's median against the plain round before it."""

    def __init__(self) -> None:
        self.xa: list[float] = []
        self.plain: list[float] = []
        self.ratios: list[float] = []

    def pair(self) -> None:
        """One XA round and the plain round before it are done: their ratio."""
        xa, plain = self.xa[-COMMIT_CALLS:], self.plain[-COMMIT_CALLS:]
        self.ratios.append(statistics.median(xa) / statistics.median(plain))

    def report(self, benchmark: Any, case: str, baseline_rounds: list[float]) -> None:
        xa_us, plain_us = statistics.median(self.xa) * 1e6, statistics.median(self.plain) * 1e6
        ratio = statistics.median(self.ratios)
        benchmark.group = COMMIT_GROUP
        benchmark.extra_info.update(
            case=case, items=COMMIT_CALLS, unit="transaction", higher_is_better=True, table=COMMIT_GROUP,
            direct_median=statistics.median(baseline_rounds), direct_min=min(baseline_rounds),
            direct_rounds=len(baseline_rounds), commit_us=round(xa_us), plain_commit_us=round(plain_us),
            commit_ratio=round(ratio, 2), target="xa commit <= 2.0x plain",
        )
        whole = benchmark.stats.stats.median / statistics.median(baseline_rounds)
        print(f"\n{case}: commit {xa_us:.0f} us vs plain {plain_us:.0f} us, {ratio:.2f}x (median of round "
              f"pairs); whole transaction {whole:.2f}x")


def _timed_round(run: Callable[[], None], into: list[float]) -> Callable[[], None]:
    def setup() -> None:
        started = time.perf_counter()
        run()
        into.append(time.perf_counter() - started)

    return setup


def test_xa_commit_vs_plain_threads(benchmark: Any, wide_config: tuple[str, Any]) -> None:
    label, config = wide_config
    n = len(config.data_sources)
    clock, baseline_rounds = CommitClock(), []
    with Executor(config, load_schema=False, timeout=10.0) as ex:
        ex.warm_up()

        def xa_round() -> None:
            for _ in range(COMMIT_CALLS):
                tx = ex.transaction(mode="xa")
                for account in range(n):
                    tx.execute(BUMP, (account,)).close()
                started = time.perf_counter()
                tx.commit()
                clock.xa.append(time.perf_counter() - started)
            clock.pair()

        def plain_round() -> None:
            for _ in range(COMMIT_CALLS):
                spent = 0.0
                for account in range(n):
                    tx = ex.transaction()
                    tx.execute(BUMP, (account,)).close()
                    started = time.perf_counter()
                    tx.commit()
                    spent += time.perf_counter() - started
                clock.plain.append(spent)

        benchmark.pedantic(xa_round, setup=_timed_round(plain_round, baseline_rounds), rounds=COMMIT_ROUNDS,
                           warmup_rounds=1, iterations=1)
    clock.report(benchmark, f"threads: XA commit, {label} vs plain commits", baseline_rounds)


def test_xa_commit_vs_plain_asyncio(benchmark: Any, wide_config: tuple[str, Any]) -> None:
    label, config = wide_config
    n = len(config.data_sources)
    clock, baseline_rounds = CommitClock(), []
    loop = asyncio.new_event_loop()
    ex = AsyncExecutor(config, load_schema=False, timeout=10.0)
    try:
        loop.run_until_complete(ex.warm_up())

        async def xa_transactions() -> None:
            for _ in range(COMMIT_CALLS):
                tx = ex.transaction(mode="xa")
                for account in range(n):
                    await tx.execute(BUMP, (account,))
                started = time.perf_counter()
                await tx.commit()
                clock.xa.append(time.perf_counter() - started)
            clock.pair()

        async def plain_transactions() -> None:
            for _ in range(COMMIT_CALLS):
                spent = 0.0
                for account in range(n):
                    tx = ex.transaction()
                    await tx.execute(BUMP, (account,))
                    started = time.perf_counter()
                    await tx.commit()
                    spent += time.perf_counter() - started
                clock.plain.append(spent)

        benchmark.pedantic(lambda: loop.run_until_complete(xa_transactions()),
                           setup=_timed_round(lambda: loop.run_until_complete(plain_transactions()), baseline_rounds),
                           rounds=COMMIT_ROUNDS, warmup_rounds=1, iterations=1)
    finally:
        loop.run_until_complete(ex.close())
        loop.close()
    clock.report(benchmark, f"asyncio: XA commit, {label} vs plain commits", baseline_rounds)
