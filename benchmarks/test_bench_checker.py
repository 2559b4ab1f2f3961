"""Consistency checker throughput (rows/s) against ``pt-table-checksum`` on the same table, same run, interleaved.

MariaDB on 127.0.0.1:3306 (root, no password); ``pt-table-checksum`` from the
Debian package ``percona-toolkit``. The module creates two databases
``ddm_bench_ck_<tag>_0..1`` holding the same ``ROWS`` rows (dropped at the end).

=============================  =================================================  ==================================
case                           ddm-core                                           baseline
=============================  =================================================  ==================================
checker, two tables            ``Checker.check()``: count + 64-bit hash per       ``pt-table-checksum`` of table A
                               10 000-row chunk on *both* tables, compared         (one side: it leaves the replicas'
                                                                                   side to replication), same chunks
checker, one side              the digests of table A only (what pt computes)     the same pt run
=============================  =================================================  ==================================

pt runs with ``--no-check-binlog-format --no-check-replication-filters
--recursion-method=none`` (this server has no replicas and binlog_format MIXED,
which pt refuses otherwise), ``--chunk-size=10000 --chunk-time=0`` (fixed
chunks, as ours) and ``--replicate`` into the bench database. Its round time
includes starting perl (about 0.1 s); the figure is rows per second.
Nothing here asserts a speed.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from typing import Any, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest
from test_bench_executor import Paired, measure_pair

from ddm_core.metadata import load_config
from ddm_core.migrate import Connections
from ddm_core.migrate.checker import CHUNK_ROWS, Checker, RowSource

ROWS = 200_000
ROUNDS = 5
TABLE = ("CREATE TABLE t_item (id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, note VARCHAR(40) NULL, "
         "amount DECIMAL(10,2) NOT NULL, ts DATETIME(6) NULL)")
FILL = ("INSERT INTO t_item SELECT seq, seq * 7 % 1001, IF(seq % 5 = 0, NULL, CONCAT('note ', seq)), "
        "seq % 1000 + 0.25, '2024-03-01' + INTERVAL seq SECOND FROM seq_1_to_{rows}")


def _connect(database: str | None = None) -> Any:
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", database=database,
                           autocommit=True, ssl_disabled=True)


@pytest.fixture(scope="module")
def databases() -> Iterator[list[str]]:
    if shutil.which("pt-table-checksum") is None:
        pytest.skip("pt-table-checksum is not installed (apt-get install -y percona-toolkit)")
    tag = uuid.uuid4().hex[:8]
    names = [f"ddm_bench_ck_{tag}_{i}" for i in range(2)]
    conn = _connect()
    try:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"CREATE DATABASE `{name}`")
                cur.execute(f"USE `{name}`")
                cur.execute(TABLE)
                cur.execute(FILL.format(rows=ROWS))
        yield names
    finally:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


def _pt_round(database: str) -> float:
    cmd = ["pt-table-checksum", "h=127.0.0.1,P=3306,u=root", f"--databases={database}", "--tables=t_item",
           f"--replicate={database}.checksums", "--no-check-binlog-format", "--no-check-replication-filters",
           "--recursion-method=none", f"--chunk-size={CHUNK_ROWS}", "--chunk-time=0", "--quiet"]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:  # exit status is a bit field; 0 means no error and no difference
        raise RuntimeError(f"pt-table-checksum failed ({done.returncode}): {done.stdout}{done.stderr}")
    return elapsed


def _conns(names: list[str]) -> Connections:
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(names)}
    return Connections(load_config({"dataSources": urls, "tables": [], "defaultDataSource": "ds_0"}))


def test_checker_two_tables_vs_pt_table_checksum(benchmark: Any, databases: list[str]) -> None:
    with _conns(databases) as conns:
        checker = Checker(RowSource(conns, [("ds_0", "t_item")]), RowSource(conns, [("ds_1", "t_item")]))

        def ddm_round() -> None:
            report = checker.check()
            assert report.consistent and report.rows_a == ROWS

        measure_pair(benchmark, ddm_round, Paired(lambda: _pt_round(databases[0])),
                     case="checker, two tables vs pt-table-checksum (one)", target="", items=ROWS, unit="row",
                     rounds=ROUNDS, warmup_rounds=1, higher_is_better=True)


def test_checker_one_side_vs_pt_table_checksum(benchmark: Any, databases: list[str]) -> None:
    with _conns(databases) as conns:
        side = RowSource(conns, [("ds_0", "t_item")])
        checker = Checker(side, RowSource(conns, [("ds_1", "t_item")]))

        def ddm_round() -> None:
            rows = sum(side.digest(rng, checker.shape_a).rows for rng in checker.chunks())
            assert rows == ROWS

        measure_pair(benchmark, ddm_round, Paired(lambda: _pt_round(databases[0])),
                     case="checker, one side vs pt-table-checksum", target="", items=ROWS, unit="row",
                     rounds=ROUNDS, warmup_rounds=1, higher_is_better=True)
