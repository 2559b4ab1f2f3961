"""executor: routed statements on MariaDB against direct PyMySQL on the same server, same run, interleaved.

MariaDB on 127.0.0.1:3306 (root, no password). The module creates, and drops
at the end:

* ``ddm_bench_<tag>_0..3`` — a SLOTS layout: ``t_order`` sharded by
  ``user_id`` over 4 databases × 4 tables (16 shards), 100 000 orders, one per
  user; ``t_gene`` (same columns) with a gene key generator on ``order_id``;
* ``ddm_bench_<tag>_ss0..1`` — a ShardingSphere INLINE layout loaded from
  ShardingSphere YAML: ``t_order`` over 2 databases × 8 tables, 20 000 orders;
* ``ddm_bench_<tag>_one`` — the 100 000 orders in one unsharded table.

Every case is a pair: each timed round of the ddm-core side follows one round
of its direct PyMySQL counterpart (run in pytest-benchmark's untimed ``setup``
and timed there with ``perf_counter``), so both sides see the same machine
load. The ddm-core side is the benchmark's figure; the direct side's median
goes into ``extra_info`` (``direct_median``, ``direct_rounds``) and
``report.py`` prints the ratio against the issue's target. Nothing here
asserts a speed.

==========================  ===========================================  =========================================
case                        ddm-core                                     direct PyMySQL
==========================  ===========================================  =========================================
point select (SLOTS, INLINE) ``connect(...)`` cursor, ``WHERE user_id=%s``  the routed unit's SQL on an open
                                                                         connection to its database
UPDATE by key               the same, ``UPDATE ... WHERE user_id = %s``  the routed unit's SQL
INSERT, generated gene id   one-row INSERT, ``order_id`` generated        the routed unit's SQL (id generated
                                                                         untimed, before the round)
16-shard ORDER BY LIMIT 20  the executor, units in parallel              the same query on the one table
8 threads × point selects   8 threads, one facade connection each        8 threads, own PyMySQL connections
executemany 20 000 rows     facade, autocommit, default batching         ``executemany`` into the one table
==========================  ===========================================  =========================================
"""

from __future__ import annotations

import itertools
import random
import statistics
import threading
import time
import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Callable, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest

import ddm_core.dbapi as dbapi
from ddm_core.execute import Executor
from ddm_core.execute.schema_load import load_schemas
from ddm_core.metadata import load_config

ROWS = 100_000
INLINE_ROWS = 20_000
BULK_ROWS = 20_000
SHARDS = 4
TABLES = 4
SEED = 20240601
CALLS = 200  # statements per round of the per-statement cases
THREADS = 8
THREAD_CALLS = 300  # point selects per thread per throughput round
POINT = "SELECT order_id, amount, status FROM t_order WHERE user_id = %s"
UPDATE = "UPDATE t_order SET amount = amount + 1 WHERE user_id = %s"
GENE_INSERT = "INSERT INTO t_gene (user_id, amount, status, create_time, note) VALUES (%s, %s, %s, %s, %s)"
PAGE = "SELECT order_id, user_id, amount, create_time FROM t_order ORDER BY create_time DESC LIMIT 20"
INSERT = "INSERT INTO t_order (order_id, user_id, amount, status, create_time, note) VALUES (%s, %s, %s, %s, %s, %s)"
DDL = (
    "CREATE TABLE {table} (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, "
    "amount DECIMAL(12,2) NOT NULL, status TINYINT NOT NULL, create_time DATETIME(3) NOT NULL, "
    "note VARCHAR(32) NULL, KEY idx_user (user_id), KEY idx_time (create_time)) ENGINE=InnoDB"
)
GROUP = "executor vs direct PyMySQL"


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


def slots_config(names: list[str], pool: dict[str, Any] | None = None) -> Any:
    """The SLOTS layout over ``names``; ``pool``: the data sources' pool settings (default maxSize 20, minIdle 4)."""
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(names)}
    spec = {"shardKey": "user_id", "algorithm": "slots", "slotCount": 1024, "shardCount": SHARDS,
            "tablePerShard": TABLES, "databases": list(urls), "tableKey": "user_id"}
    return load_config({
        "dataSources": urls,
        "pool": pool or {"maxSize": 20, "minIdle": 4, "acquireTimeoutMs": 3000},
        "tables": [
            {"logicTable": "t_order", **spec},
            {"logicTable": "t_gene", **spec,
             "keyGenerator": {"column": "order_id", "type": "gene", "shardColumn": "user_id"}},
        ],
        "defaultDataSource": "ds_0",
        "runtime": {"allowFullRoute": True, "fullRouteThreshold": 64, "sqlComment": False},
    })


def inline_config(names: list[str]) -> Any:
    """A ShardingSphere-JDBC YAML configuration: INLINE algorithms over 2 databases × 8 tables."""
    sources = "".join(
        f"  ds{i}:\n    dataSourceClassName: com.zaxxer.hikari.HikariDataSource\n"
        f"    props: {{jdbcUrl: 'jdbc:mysql://127.0.0.1:3306/{db}?useSSL=false', username: root, "
        f"password: '', maximumPoolSize: 20}}\n"
        for i, db in enumerate(names)
    )
    return load_config(
        "schemaName: bench\ndataSources:\n" + sources
        + "rules:\n  - !SHARDING\n    tables:\n      t_order:\n"
        "        actualDataNodes: ds$->{0..1}.t_order_$->{0..7}\n"
        "        databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db-inline}}\n"
        "        tableStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: tbl-inline}}\n"
        "    shardingAlgorithms:\n"
        "      db-inline: {type: INLINE, props: {algorithm-expression: 'ds${user_id % 2}'}}\n"
        "      tbl-inline: {type: INLINE, props: {algorithm-expression: 't_order_${user_id.intdiv(2) % 8}'}}\n"
    )


class Layout:
    """One sharded layout: its configuration, a warmed executor, direct connections per database."""

    def __init__(self, config: Any, **options: Any) -> None:
        self.config = config
        self.executor = Executor(config, **options)
        self.executor.warm_up()
        self._direct: dict[str, Any] = {}

    def direct(self, data_source: str) -> Any:
        """An open PyMySQL connection to the data source's database (one per layout)."""
        conn = self._direct.get(data_source)
        if conn is None:
            conn = self._direct[data_source] = _connect(self.config.data_sources[data_source].primary.database)
        return conn

    def routed(self, sql: str, params: Any) -> tuple[str, str, tuple[Any, ...]]:
        unit = self.executor.router.route(sql, params).units[0]
        return unit.data_source, unit.sql, unit.params

    def close(self) -> None:
        self.executor.close()
        for conn in self._direct.values():
            conn.close()


class Bench:
    def __init__(self, tag: str) -> None:
        self.slot_dbs = [f"ddm_bench_{tag}_{i}" for i in range(SHARDS)]
        self.inline_dbs = [f"ddm_bench_{tag}_ss{i}" for i in range(2)]
        self.one = f"ddm_bench_{tag}_one"
        self.slots = Layout(slots_config(self.slot_dbs), max_concurrency=16)
        self.inline = Layout(inline_config(self.inline_dbs))
        # Bulk rounds take key blocks above the loaded ones, alike on both sides.
        self.next_key = itertools.count(10 * ROWS, BULK_ROWS)

    def databases(self) -> list[str]:
        return [*self.slot_dbs, *self.inline_dbs, self.one]

    def close(self) -> None:
        self.slots.close()
        self.inline.close()


def _load(layout: Layout, rows: list[tuple[Any, ...]], tables: tuple[str, ...]) -> None:
    for table in tables:
        layout.executor.execute(DDL.format(table=table)).close()
    # The columns, as an executor started on existing tables has them (a data source's reads in one UNION ALL).
    layout.executor.router.set_schemas(load_schemas(layout.config))
    conn = dbapi.connect(executor=layout.executor, autocommit=True)
    with conn.cursor() as cur:
        cur.executemany(INSERT, rows)
    conn.close()
    for ds in layout.config.data_sources.values():
        tables_there = [n.table for t in layout.config.tables.values() for n in t.data_nodes
                        if n.data_source == ds.name]
        with layout.direct(ds.name).cursor() as cur:
            cur.execute("ANALYZE TABLE " + ", ".join(tables_there))


@pytest.fixture(scope="module")
def bench() -> Iterator[Bench]:
    try:
        admin = _connect()
    except Exception as exc:
        pytest.skip(f"MariaDB on 127.0.0.1:3306 is needed for the executor benchmarks: {exc}")
    tag = uuid.uuid4().hex[:8]
    names = [f"ddm_bench_{tag}_{i}" for i in range(SHARDS)] + [f"ddm_bench_{tag}_ss{i}" for i in range(2)]
    with admin.cursor() as cur:
        for db in [*names, f"ddm_bench_{tag}_one"]:
            cur.execute(f"CREATE DATABASE {db}")
    b: Bench | None = None
    try:
        b = Bench(tag)
        rows = make_rows(1, ROWS, SEED)
        _load(b.slots, rows, ("t_order", "t_gene"))
        _load(b.inline, rows[:INLINE_ROWS], ("t_order",))
        one = _connect(b.one)
        with one.cursor() as cur:
            cur.execute(DDL.format(table="t_order"))
            cur.executemany(INSERT, rows)
            cur.execute("ANALYZE TABLE t_order")
        one.close()
        yield b
    finally:
        if b is not None:
            b.close()
        with admin.cursor() as cur:
            for db in [*names, f"ddm_bench_{tag}_one"]:
                cur.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.close()


class Paired:
    """Runs the direct side's round before each timed ddm-core round (pytest-benchmark ``setup``).

    Args:
        direct_round: Runs one direct round and returns its seconds (its own
            preparation left out of the figure).
        prepare: Builds the ddm-core round's arguments, untimed.
    """

    def __init__(self, direct_round: Callable[[], float], prepare: Callable[[], tuple[Any, ...]] = tuple) -> None:
        self.direct_round = direct_round
        self.prepare = prepare
        self.seconds: list[float] = []

    def setup(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        self.seconds.append(self.direct_round())
        return self.prepare(), {}


def measure_pair(benchmark: Any, ddm_round: Callable[..., Any], pair: Paired, *, case: str, target: str,
                 items: int, unit: str, rounds: int, warmup_rounds: int = 2, higher_is_better: bool = False,
                 group: str = GROUP, **info: Any) -> None:
    """Time ``ddm_round`` interleaved with ``pair``'s direct rounds; record both in ``extra_info``.

    ``target`` is the issue's goal, read by ``report.py``: ``"<= 1.05"`` (time
    ratio ddm/direct) or ``">= 0.95"`` (throughput ratio ddm/direct). ``info``
    goes into ``extra_info`` as well (``table``, ``loop``: see report.py).
    """
    benchmark.group = group
    benchmark.extra_info.update(case=case, items=items, unit=unit, target=target,
                                higher_is_better=higher_is_better, **info)
    benchmark.pedantic(ddm_round, setup=pair.setup, rounds=rounds, warmup_rounds=warmup_rounds, iterations=1)
    direct = pair.seconds[warmup_rounds:]
    benchmark.extra_info.update(direct_median=statistics.median(direct), direct_min=min(direct),
                                direct_rounds=direct)


def _point_keys(n: int, top: int, seed: int) -> list[int]:
    return random.Random(seed).sample(range(1, top + 1), n)


def _direct_statements(layout: Layout, sql: str, keys: list[int]) -> list[tuple[Any, str, tuple[Any, ...]]]:
    """(cursor, physical SQL, params) per key: what the router sends, on direct connections."""
    out = []
    for k in keys:
        ds, physical, params = layout.routed(sql, (k,))
        out.append((layout.direct(ds).cursor(), physical, params))
    return out


def _timed(fn: Callable[[], Any]) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    return run


# -- single statements -----------------------------------------------------------------------------


@pytest.mark.parametrize("layout_name", ["slots", "inline"])
def test_point_select(bench: Bench, benchmark: Any, layout_name: str) -> None:
    layout: Layout = getattr(bench, layout_name)
    keys = _point_keys(CALLS, ROWS if layout_name == "slots" else INLINE_ROWS, SEED)
    direct = _direct_statements(layout, POINT, keys)
    cur = dbapi.connect(executor=layout.executor, autocommit=True).cursor()

    def direct_round() -> None:
        for c, physical, params in direct:
            c.execute(physical, params)
            c.fetchall()

    def ddm_round() -> None:
        for k in keys:
            cur.execute(POINT, (k,))
            cur.fetchall()

    ddm_round()
    measure_pair(benchmark, ddm_round, Paired(_timed(direct_round)),
                 case=f"point select by key ({'SLOTS 4×4' if layout_name == 'slots' else 'INLINE 2×8'})",
                 target="<= 1.05", items=CALLS, unit="call", rounds=30)


def test_update_by_key(bench: Bench, benchmark: Any) -> None:
    layout = bench.slots
    keys = _point_keys(CALLS, ROWS, SEED + 1)
    direct = _direct_statements(layout, UPDATE, keys)
    cur = dbapi.connect(executor=layout.executor, autocommit=True).cursor()

    def direct_round() -> None:
        for c, physical, params in direct:
            c.execute(physical, params)

    def ddm_round() -> None:
        for k in keys:
            cur.execute(UPDATE, (k,))

    ddm_round()
    measure_pair(benchmark, ddm_round, Paired(_timed(direct_round)), case="UPDATE by key (SLOTS 4×4)",
                 target="<= 1.05", items=CALLS, unit="call", rounds=20)


def test_insert_generated_gene_id(bench: Bench, benchmark: Any) -> None:
    layout = bench.slots
    rng = random.Random(SEED + 2)
    moment = datetime(2025, 6, 1)

    def rows() -> list[tuple[Any, ...]]:
        return [(rng.randrange(1, ROWS), Decimal("9.99"), 1, moment, "bench") for _ in range(CALLS)]

    cur = dbapi.connect(executor=layout.executor, autocommit=True).cursor()

    def direct_round() -> float:
        # The router generates the ids (untimed); PyMySQL sends the routed statements.
        statements = [layout.routed(GENE_INSERT, row) for row in rows()]
        prepared = [(layout.direct(ds).cursor(), physical, params) for ds, physical, params in statements]
        start = time.perf_counter()
        for c, physical, params in prepared:
            c.execute(physical, params)
        return time.perf_counter() - start

    def ddm_round(batch: list[tuple[Any, ...]]) -> None:
        for row in batch:
            cur.execute(GENE_INSERT, row)

    ddm_round(rows())
    measure_pair(benchmark, ddm_round, Paired(direct_round, lambda: (rows(),)),
                 case="one-row INSERT, generated gene id (SLOTS 4×4)", target="<= 1.05", items=CALLS,
                 unit="call", rounds=20)


# -- a 16-shard page -------------------------------------------------------------------------------


def test_page_16_shards(bench: Bench, benchmark: Any) -> None:
    ex = bench.slots.executor
    with ex.execute(PAGE) as r:
        assert r.units == SHARDS and len(r.fetchall()) == 20  # one UNION ALL of its tables per data source
    one = _connect(bench.one)
    one_cur = one.cursor()

    def direct_round() -> None:
        for _ in range(20):
            one_cur.execute(PAGE)
            one_cur.fetchall()

    def ddm_round() -> None:
        for _ in range(20):
            with ex.execute(PAGE) as r:
                r.fetchall()

    try:
        measure_pair(benchmark, ddm_round, Paired(_timed(direct_round)),
                     case="16-shard ORDER BY ... LIMIT 20 (vs one unsharded table)", target="",
                     items=20, unit="call", rounds=15, warmup_rounds=1)
    finally:
        one.close()


# -- 8 threads ---------------------------------------------------------------------------------------


def _threads_round(work: list[Callable[[], None]]) -> float:
    """Seconds from a common start until every thread's work is done (thread start-up left out)."""
    gate = threading.Barrier(len(work) + 1)
    errors: list[BaseException] = []

    def run(fn: Callable[[], None]) -> None:
        gate.wait()
        try:
            fn()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in work]
    for t in threads:
        t.start()
    gate.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return elapsed


def _direct_thread(statements: list[tuple[Any, str, tuple[Any, ...]]]) -> Callable[[], None]:
    def run() -> None:
        for c, physical, params in statements:
            c.execute(physical, params)
            c.fetchall()

    return run


def test_point_select_8_threads(bench: Bench, benchmark: Any) -> None:
    layout = bench.slots
    key_sets = [_point_keys(THREAD_CALLS, ROWS, SEED + 10 + t) for t in range(THREADS)]
    # Direct: every thread has its own PyMySQL connections (one per database it reads).
    direct_conns: list[dict[str, Any]] = [{} for _ in range(THREADS)]
    direct_work = []
    for t, keys in enumerate(key_sets):
        statements = []
        for k in keys:
            ds, physical, params = layout.routed(POINT, (k,))
            conn = direct_conns[t].get(ds)
            if conn is None:
                conn = direct_conns[t][ds] = _connect(layout.config.data_sources[ds].primary.database)
            statements.append((conn.cursor(), physical, params))
        direct_work.append(_direct_thread(statements))
    cursors = [dbapi.connect(executor=layout.executor, autocommit=True).cursor() for _ in range(THREADS)]

    def ddm_thread(cur: Any, keys: list[int]) -> Callable[[], None]:
        def run() -> None:
            for k in keys:
                cur.execute(POINT, (k,))
                cur.fetchall()

        return run

    ddm_work = [ddm_thread(cur, keys) for cur, keys in zip(cursors, key_sets)]
    try:
        _threads_round(ddm_work)
        measure_pair(benchmark, lambda: _threads_round(ddm_work), Paired(lambda: _threads_round(direct_work)),
                     case=f"point selects, {THREADS} threads (throughput)", target=">= 0.95",
                     items=THREADS * THREAD_CALLS, unit="statement", rounds=15, higher_is_better=True)
    finally:
        for conns in direct_conns:
            for conn in conns.values():
                conn.close()


# -- bulk load ---------------------------------------------------------------------------------------


def test_executemany_20k_rows(bench: Bench, benchmark: Any) -> None:
    conn = dbapi.connect(executor=bench.slots.executor, autocommit=True)
    one = _connect(bench.one)

    def fresh_rows() -> list[tuple[Any, ...]]:
        return make_rows(next(bench.next_key), BULK_ROWS, SEED + 1)

    def direct_round() -> float:
        rows = fresh_rows()
        with one.cursor() as cur:
            start = time.perf_counter()
            cur.executemany(INSERT, rows)
            return time.perf_counter() - start

    def ddm_round(rows: list[tuple[Any, ...]]) -> None:
        with conn.cursor() as cur:
            assert cur.executemany(INSERT, rows) == BULK_ROWS

    try:
        measure_pair(benchmark, ddm_round, Paired(direct_round, lambda: (fresh_rows(),)),
                     case=f"executemany {BULK_ROWS:,} rows, autocommit (vs one table)", target="<= 1.00",
                     items=BULK_ROWS, unit="row", rounds=15, warmup_rounds=1)
    finally:
        conn.close()
        one.close()
