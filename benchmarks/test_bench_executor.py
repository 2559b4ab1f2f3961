"""executor: routed statements on MariaDB against direct PyMySQL on the same server, same run.

MariaDB on 127.0.0.1:3306 (root, no password); the module creates
``ddm_bench_<tag>_0..3`` (``t_order`` sharded by ``user_id`` over 4 databases ×
4 tables = 16 shards) and ``ddm_bench_<tag>_one`` (the same rows in one
unsharded table), and drops them at the end. 100 000 orders, one per user,
``KEY (user_id)`` and ``KEY (create_time)``.

Groups (targets from issue 5, read from the figures, never asserted):

* ``executor: point select`` — ``SELECT ... WHERE user_id = %s`` routed to one
  shard through :class:`~ddm_core.execute.Executor` vs the *same physical
  statement* (the routed unit's SQL on the same table) with a direct PyMySQL
  cursor on an open connection: the executor's whole overhead (route, pool
  borrow/return, deadline watchdog, Result) — target ≤ 1.05×. A third case runs
  the executor with ``timeout=None`` (no watchdog) to show what the deadline costs.
* ``executor: 16-shard ORDER BY LIMIT 20`` — ``ORDER BY create_time DESC LIMIT
  20`` over all 16 shards, units in parallel (``max_concurrency=16`` and the
  default 10) vs one after another (``max_concurrency=1``); the same query on
  the unsharded table for scale.
* ``executor: bulk insert 100k rows`` — ``executemany`` through the PEP 249
  facade (autocommit; multi-row batches of 1000 rows, each split per shard and
  run in parallel) vs PyMySQL's ``executemany`` into the one table (which packs
  rows into multi-row INSERTs of up to 1 MB). Explicit ``order_id`` values:
  the insert path is measured, not id generation. Each round inserts new keys,
  so the tables grow alike on both sides.
"""

from __future__ import annotations

import itertools
import random
import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Iterator

import pymysql
import pytest

import ddm_core.dbapi as dbapi
from ddm_core.execute import Executor
from ddm_core.metadata import load_config

ROWS = 100_000
SHARDS = 4
TABLES = 4
SEED = 20240601
POINT = "SELECT order_id, amount, status FROM t_order WHERE user_id = %s"
PAGE = "SELECT order_id, user_id, amount, create_time FROM t_order ORDER BY create_time DESC LIMIT 20"
INSERT = "INSERT INTO t_order (order_id, user_id, amount, status, create_time, note) VALUES (%s, %s, %s, %s, %s, %s)"
DDL = (
    "CREATE TABLE t_order (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, "
    "amount DECIMAL(12,2) NOT NULL, status TINYINT NOT NULL, create_time DATETIME(3) NOT NULL, "
    "note VARCHAR(32) NULL, KEY idx_user (user_id), KEY idx_time (create_time)) ENGINE=InnoDB"
)
POINT_CALLS = 200


def _connect(database: str | None = None) -> Any:
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", database=database,
                           autocommit=True, ssl_disabled=True, charset="utf8mb4")


def make_rows(start: int, n: int, seed: int) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    base = datetime(2025, 1, 1)
    return [
        (
            start + i,  # order_id
            start + i,  # user_id: one order per user
            Decimal(rng.randrange(100, 1_000_000)) / 100,
            rng.randrange(5),
            base + timedelta(milliseconds=(start + i) * 997 + rng.randrange(997)),
            f"note {start + i}",
        )
        for i in range(n)
    ]


class Bench:
    def __init__(self, names: list[str], one: str) -> None:
        self.names = names
        self.one = one
        urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
                for i, db in enumerate(names)}
        self.config = load_config({
            "dataSources": urls,
            "pool": {"maxSize": 20, "minIdle": 4, "acquireTimeoutMs": 3000},
            "tables": [{
                "logicTable": "t_order", "shardKey": "user_id", "algorithm": "slots", "slotCount": 1024,
                "shardCount": SHARDS, "tablePerShard": TABLES, "databases": list(urls), "tableKey": "user_id",
            }],
            "defaultDataSource": "ds_0",
            "runtime": {"allowFullRoute": True, "fullRouteThreshold": 64, "sqlComment": False},
        })
        self.executors: list[Executor] = []
        # Insert keys above the loaded ones; each bulk round takes the next block.
        self.next_key = itertools.count(10 * ROWS, ROWS)

    def executor(self, **options: Any) -> Executor:
        ex = Executor(self.config, **options)
        ex.warm_up()
        self.executors.append(ex)
        return ex

    def close(self) -> None:
        for ex in self.executors:
            ex.close()


@pytest.fixture(scope="module")
def bench() -> Iterator[Bench]:
    try:
        admin = _connect()
    except Exception as exc:
        pytest.skip(f"MariaDB on 127.0.0.1:3306 is needed for the executor benchmarks: {exc}")
    tag = uuid.uuid4().hex[:8]
    names = [f"ddm_bench_{tag}_{i}" for i in range(SHARDS)]
    one = f"ddm_bench_{tag}_one"
    with admin.cursor() as cur:
        for db in [*names, one]:
            cur.execute(f"CREATE DATABASE {db}")
    b = Bench(names, one)
    try:
        loader = b.executor()
        loader.execute(DDL).close()
        conn = _connect(one)
        with conn.cursor() as cur:
            cur.execute(DDL)
        rows = make_rows(1, ROWS, SEED)
        facade = dbapi.connect(executor=loader, autocommit=True)
        with facade.cursor() as c:
            c.executemany(INSERT, rows)
        facade.close()
        with conn.cursor() as cur:
            cur.executemany(INSERT, rows)
            cur.execute("ANALYZE TABLE t_order")
        conn.close()
        for ds, db in enumerate(names):
            c = _connect(db)
            with c.cursor() as cur:
                cur.execute("ANALYZE TABLE " + ", ".join(f"t_order_{ds}_{t}" for t in range(TABLES)))
            c.close()
        yield b
    finally:
        b.close()
        with admin.cursor() as cur:
            for db in [*names, one]:
                cur.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.close()


@pytest.fixture(scope="module")
def point_keys() -> list[int]:
    return random.Random(SEED).sample(range(1, ROWS + 1), POINT_CALLS)


# -- point select --------------------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [3.0, None], ids=["deadline 3s", "no deadline"])
def test_point_select_executor(bench: Bench, point_keys: list[int], measure: Any, timeout: float | None) -> None:
    ex = bench.executor(timeout=timeout)
    execute = ex.execute

    def calls() -> None:
        for k in point_keys:
            with execute(POINT, (k,)) as r:
                r.fetchall()

    calls()
    measure(calls, case=f"executor point select ({'timeout 3 s' if timeout else 'no timeout'})",
            group="executor: point select, 200 calls", items=len(point_keys), unit="call", rounds=30,
            warmup_rounds=2)


def test_point_select_pymysql(bench: Bench, point_keys: list[int], measure: Any) -> None:
    """The routed unit's own SQL on its own table, on an open PyMySQL connection per database."""
    conns = {f"ds_{i}": _connect(db) for i, db in enumerate(bench.names)}
    router_ex = bench.executor()
    plans = []
    for k in point_keys:
        unit = router_ex.router.route(POINT, (k,)).units[0]
        plans.append((conns[unit.data_source].cursor(), unit.sql, unit.params))

    def calls() -> None:
        for cur, sql, params in plans:
            cur.execute(sql, params)
            cur.fetchall()

    try:
        calls()
        measure(calls, case="direct pymysql point select", group="executor: point select, 200 calls",
                items=len(point_keys), unit="call", rounds=30, warmup_rounds=2)
    finally:
        for c in conns.values():
            c.close()


# -- 16-shard ORDER BY LIMIT ----------------------------------------------------------------------


@pytest.mark.parametrize("concurrency", [16, 10, 1])
def test_page_16_shards(bench: Bench, measure: Any, concurrency: int) -> None:
    ex = bench.executor(max_concurrency=concurrency)
    with ex.execute(PAGE) as r:
        assert r.units == SHARDS * TABLES and len(r.fetchall()) == 20

    def calls() -> None:
        for _ in range(20):
            with ex.execute(PAGE) as r:
                r.fetchall()

    measure(calls, case=f"16-shard ORDER BY LIMIT 20, max_concurrency={concurrency}",
            group="executor: 16-shard ORDER BY LIMIT 20, 20 calls", items=20, unit="call", rounds=15,
            warmup_rounds=1)


def test_page_one_table(bench: Bench, measure: Any) -> None:
    conn = _connect(bench.one)
    cur = conn.cursor()

    def calls() -> None:
        for _ in range(20):
            cur.execute(PAGE)
            cur.fetchall()

    try:
        measure(calls, case="ORDER BY LIMIT 20 on one unsharded table (pymysql)",
                group="executor: 16-shard ORDER BY LIMIT 20, 20 calls", items=20, unit="call", rounds=15,
                warmup_rounds=1)
    finally:
        conn.close()


# -- bulk insert ----------------------------------------------------------------------------------


def test_bulk_insert_dbapi(bench: Bench, measure: Any) -> None:
    conn = dbapi.connect(executor=bench.executor(timeout=30.0), autocommit=True)

    def once() -> None:
        rows = make_rows(next(bench.next_key), ROWS, SEED + 1)
        with conn.cursor() as cur:
            assert cur.executemany(INSERT, rows) == ROWS

    try:
        measure(once, case="dbapi executemany 100k rows (16 shards)", group="executor: bulk insert 100k rows",
                items=ROWS, unit="row", rounds=3, warmup_rounds=1)
    finally:
        conn.close()


def test_bulk_insert_pymysql(bench: Bench, measure: Any) -> None:
    conn = _connect(bench.one)

    def once() -> None:
        rows = make_rows(next(bench.next_key), ROWS, SEED + 1)
        with conn.cursor() as cur:
            assert cur.executemany(INSERT, rows) == ROWS

    try:
        measure(once, case="pymysql executemany 100k rows (one table)", group="executor: bulk insert 100k rows",
                items=ROWS, unit="row", rounds=3, warmup_rounds=1)
    finally:
        conn.close()
