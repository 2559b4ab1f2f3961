"""ddm_core.metrics on MariaDB: real traffic, then a real scrape of ``/metrics`` over HTTP.

The expected figures are worked out independently of the collector: from the
router's own plans for the statements sent (which node each point select
went to), from ``Executor.pool_stats()`` / ``Router.cache_info()`` read
directly, and from what the server itself reports (the trace comment is read
back from ``information_schema.PROCESSLIST``).
"""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
import urllib.request
from collections import Counter
from typing import Any, Iterator

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from ddm_core import metrics
from ddm_core.errors import DuplicateKeyError
from ddm_core.execute import Executor
from ddm_core.observe import Thresholds, current_trace_id, trace
from ddm_core.observe.routes import table_figures
from ddm_core.observe.statements import Shape
from ports import free_port
from test_execute_support import (  # noqa: F401 - fixtures
    assert_no_leaks,
    mysql_config,
    mysql_databases,
    mysql_executor,
)

POINT = "SELECT order_id, amount FROM t_order WHERE user_id = %s"


@pytest.fixture()
def installed(mysql_executor: Executor) -> Iterator[tuple[Executor, metrics.Metrics, str]]:
    """The executor watched by a collector in a private registry, served on a free port."""
    m = metrics.install(CollectorRegistry(), executor=mysql_executor, thresholds=Thresholds(min_statements=20))
    port = free_port()
    server = metrics.serve(m, port=port)
    try:
        yield mysql_executor, m, f"http://127.0.0.1:{port}/metrics"
    finally:
        server.shutdown()
        m.uninstall()


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``: (name, sorted labels) → value."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode("utf-8")
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def insert_users(ex: Executor, users: range) -> None:
    for u in users:
        ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)", (u * 10, u, u)).close()


def node_of(ex: Executor, user: int) -> str:
    return ex.router.route(POINT, (user,)).tables[0].nodes[0]


def test_importing_registers_nothing_and_needs_no_prometheus_client() -> None:
    code = (
        "import sys, ddm_core, ddm_core.metrics, ddm_core.observe\n"
        "from ddm_core.execute import Executor\n"
        "assert 'prometheus_client' not in sys.modules, 'imported at import time'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_scrape_after_real_traffic(installed: tuple[Executor, metrics.Metrics, str]) -> None:
    ex, _, url = installed
    users = range(1, 31)
    insert_users(ex, users)
    reads = [u for u in users for _ in range(u % 3 + 1)]  # uneven: 1..3 reads per user
    for u in reads:
        with ex.execute(POINT, (u,)) as r:
            assert r.fetchall() == [(u * 10, u)]
    with ex.execute("SELECT COUNT(*) FROM t_order") as r:
        assert r.fetchall() == [(30,)]
    with pytest.raises(DuplicateKeyError):
        ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)", (10, 1, 1))
    ex.execute("SELECT SLEEP(0.25)").close()  # past runtime.slowSqlMs (200 ms): one slow statement

    s = scrape(url)
    info, pools, slow = ex.router.cache_info(), ex.pool_stats(), ex.slow_statements  # before node_of routes more
    # Statements by kind: 30 inserts + the reads are single, one full count (the failed insert is an error).
    assert value(s, "ddm_statements_total", table="t_order", kind="single") == len(users) + len(reads)
    assert value(s, "ddm_statements_total", table="t_order", kind="full") == 1
    assert value(s, "ddm_statement_seconds_count", table="t_order", kind="single") == len(users) + len(reads)
    assert value(s, "ddm_statement_seconds_bucket", table="t_order", kind="full", le="+Inf") == 1
    # One row per read; the merged COUNT(*) is not counted: its rows are not known when execute returns.
    assert value(s, "ddm_rows_returned_total", table="t_order") == len(reads)
    source_of_1 = node_of(ex, 1).split(".")[0]
    assert value(s, "ddm_errors_total", table="t_order", data_source=source_of_1, error="DuplicateKeyError") == 1
    # Per data source: the full count reached all four; singles where the router sent them.
    expected_sources = Counter(node_of(ex, u).split(".")[0] for u in [*users, *reads])
    for source in ex.config.data_sources:
        assert value(s, "ddm_data_source_statements_total", table="t_order", data_source=source, kind="full") == 1
        got = s.get(("ddm_data_source_statements_total",
                     tuple(sorted({"table": "t_order", "data_source": source, "kind": "single"}.items()))), 0.0)  # fmt: skip
        assert got == expected_sources[source]
    # Route distribution: per node, what the router's own plans say.
    expected_nodes = Counter(node_of(ex, u) for u in [*users, *reads])
    for node, n in expected_nodes.items():
        assert value(s, "ddm_route_node_statements_total", table="t_order", node=node) == n
    total = sum(expected_nodes.values())
    busiest = max(expected_nodes.items(), key=lambda kv: (kv[1], kv[0]))
    assert value(s, "ddm_route_top_share", table="t_order", node=busiest[0]) == pytest.approx(busiest[1] / total)
    assert value(s, "ddm_full_route_ratio", table="t_order") == pytest.approx(1 / (len(users) + len(reads) + 1))
    # Read straight from the executor and router: the collector reports what they keep.
    assert value(s, "ddm_plan_cache_hits_total") == info.hits
    assert value(s, "ddm_plan_cache_misses_total") == info.misses
    assert value(s, "ddm_plan_cache_size") == info.size
    for source, st in pools.items():
        assert value(s, "ddm_pool_borrows_total", data_source=source) == st.borrows
        assert value(s, "ddm_pool_idle", data_source=source) == st.idle
        assert value(s, "ddm_pool_borrowed", data_source=source) == 0
        assert value(s, "ddm_pool_timeouts_total", data_source=source) == 0
    assert slow >= 1 and value(s, "ddm_slow_statements_total") == slow


def test_statements_inside_transactions_are_counted(installed: tuple[Executor, metrics.Metrics, str]) -> None:
    ex, _, url = installed
    with ex.transaction() as tx:
        tx.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)", (70, 7, 7)).close()
        with tx.execute(POINT, (7,)) as r:
            assert r.fetchall() == [(70, 7)]
        with pytest.raises(DuplicateKeyError):
            tx.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)", (70, 7, 7))
    s = scrape(url)
    assert value(s, "ddm_statements_total", table="t_order", kind="single") == 2
    assert value(s, "ddm_rows_returned_total", table="t_order") == 1
    source = node_of(ex, 7).split(".")[0]
    assert value(s, "ddm_errors_total", table="t_order", data_source=source, error="DuplicateKeyError") == 1


def test_hot_shard_and_full_route_alarms(installed: tuple[Executor, metrics.Metrics, str]) -> None:
    ex, _, url = installed
    insert_users(ex, range(1, 41))  # 40 single statements spread by the router
    s = scrape(url)
    assert value(s, "ddm_route_hot_shard", table="t_order") == 0
    assert value(s, "ddm_full_route_alarm", table="t_order") == 0
    for _ in range(60):  # the same user over and over: one node gets most of the traffic
        ex.execute(POINT, (7,)).close()
    ex.execute("SELECT * FROM t_order").close()  # 1 full of 101 statements: ~1 % > 0.5 %
    s = scrape(url)
    assert value(s, "ddm_route_hot_shard", table="t_order") == 1
    assert value(s, "ddm_route_top_share", table="t_order", node=node_of(ex, 7)) > 0.5
    assert value(s, "ddm_full_route_alarm", table="t_order") == 1


def test_trace_id_reaches_the_server(mysql_executor: Executor) -> None:
    sql = "SELECT INFO FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()"
    with trace("req-42 */ DROP"):  # cannot end the comment early
        assert current_trace_id() == "req-42____DROP"
        with mysql_executor.execute(sql) as r:
            (info,) = r.fetchone()  # type: ignore[misc]
    assert info.startswith("/* trace=req-42____DROP */ SELECT INFO")
    assert current_trace_id() is None
    with mysql_executor.execute(sql) as r:
        assert not r.fetchone()[0].startswith("/* trace")  # type: ignore[index]


def test_uninstalled_executor_pays_nothing_and_counts_nothing(mysql_executor: Executor) -> None:
    m = metrics.install(CollectorRegistry(), executor=mysql_executor)
    mysql_executor.execute(POINT, (1,)).close()
    m.uninstall()
    assert mysql_executor.engine.observer is None
    mysql_executor.execute(POINT, (2,)).close()
    shapes = m.recorder.snapshot().shapes
    assert sum(shape.count for shape in shapes) == 1


def test_hot_shard_needs_more_than_twice_the_fair_share() -> None:
    """With 4 nodes a uniform load is 25 % each: 40 % on one node is not hot, 60 % is."""

    def shape(node: str, count: int) -> Shape:
        s = Shape("single", (("t", (node,)),), ("ds",))
        s.count = count
        return s

    even = (shape("a", 40), shape("b", 20), shape("c", 20), shape("d", 20))
    assert table_figures(even, {"t": 4})["t"].hot_node is None
    skewed = (shape("a", 60), shape("b", 14), shape("c", 13), shape("d", 13))
    assert table_figures(skewed, {"t": 4})["t"].hot_node == "a"
    sixteen = (shape("a", 31), *(shape(f"n{i}", 5) for i in range(14)), shape("z", 0))
    assert table_figures(sixteen, {"t": 16})["t"].hot_node == "a"  # 31 % > 30 % and > 2/16
    assert table_figures(sixteen[:1], {"t": 16}, Thresholds(min_statements=100))["t"].hot_node is None  # too few


def test_ddm_metrics_serve_exposes_pools_of_a_configuration(mysql_databases: list[str], tmp_path: Any) -> None:
    import signal
    import time

    import yaml

    from test_execute_support import sharding_config

    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(mysql_databases)}  # fmt: skip
    path = tmp_path / "ddm.yaml"
    path.write_text(yaml.safe_dump(sharding_config(urls, pool={"maxSize": 2, "minIdle": 1, "acquireTimeoutMs": 1000})))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ddm_core.cli", "metrics", "serve", "--config", str(path),
                             "--port", str(port)], stderr=subprocess.PIPE)  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        for _ in range(200):  # until it listens (no timing asserted: it just has to answer)
            try:
                s = scrape(url)
                break
            except OSError:
                if proc.poll() is not None:
                    raise AssertionError(proc.stderr.read().decode() if proc.stderr else "exited") from None
                time.sleep(0.05)
        else:
            raise AssertionError("ddm metrics serve never answered")
        for source in urls:  # warmed up: minIdle connections per data source
            assert value(s, "ddm_pool_idle", data_source=source) == 1
            assert value(s, "ddm_pool_max_size", data_source=source) == 2
        assert value(s, "ddm_plan_cache_maxsize") == 4096
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0



@pytest.mark.parametrize("pipeline", [True, False])  # units sent from the caller's thread / run by worker threads
def test_trace_id_reaches_every_unit_of_a_fan_out(mysql_config: Any, mysql_databases: list[str], pipeline: bool) -> None:
    """Each unit of a 16-unit UPDATE waits on a row lock held by the test, so the server shows its text."""
    import threading
    import time

    from test_execute_support import mysql_raw

    with Executor(mysql_config, timeout=60, max_concurrency=16, pipeline=pipeline) as ex:
        ex.execute("DELETE FROM t_order").close()
        insert_users(ex, range(1, 201))  # rows in every physical table (an empty one would not wait)
        holders = [mysql_raw(db) for db in mysql_databases]
        watcher = mysql_raw()
        try:
            for i, conn in enumerate(holders):
                with conn.cursor() as cur:
                    cur.execute("BEGIN")
                    for t in range(4):
                        cur.execute(f"SELECT * FROM t_order_{i}_{t} FOR UPDATE")

            def update() -> None:
                with trace("fan-out-7"):
                    ex.execute("UPDATE t_order SET amount = amount + 1").close()

            worker = threading.Thread(target=update)
            worker.start()
            seen: dict[int, str] = {}
            with watcher.cursor() as cur:
                for _ in range(600):  # until all 16 units wait on their locks (the locks hold them there)
                    cur.execute("SHOW FULL PROCESSLIST")  # Id, User, Host, db, Command, Time, State, Info, ...
                    seen.update({int(row[0]): str(row[7]) for row in cur.fetchall()
                                 if row[3] in mysql_databases and "UPDATE t_order_" in str(row[7])})  # fmt: skip
                    if len(seen) >= 16:
                        break
                    time.sleep(0.05)
        finally:
            for conn in holders:
                conn.cursor().execute("COMMIT")
                conn.close()
            watcher.close()
        worker.join()
    assert len(seen) == 16
    assert all(info.startswith("/* trace=fan-out-7 */ UPDATE t_order_") for info in seen.values()), seen


def test_merge_memory_high_water_and_warning(installed: tuple[Executor, metrics.Metrics, str],
                                             caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    ex, _, url = installed
    rows = [(n, n % 97 + 1, n) for n in range(1, 12_001)]
    for start in range(0, len(rows), 1000):
        chunk = rows[start:start + 1000]
        ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES " + ", ".join(["(%s, %s, %s)"] * len(chunk)),
                   [v for row in chunk for v in row]).close()  # fmt: skip
    # Buffered: a LIMIT 5 page holds the 5 rows of each unit; every row, without the LIMIT.
    with ex.execute("SELECT order_id, amount FROM t_order ORDER BY amount LIMIT 5", stream=False) as r:
        assert [row[1] for row in r.fetchall()] == [1, 2, 3, 4, 5]
        units = r.units
    s = scrape(url)
    assert value(s, "ddm_merge_memory_high_water_rows", table="t_order") == 5 * units
    with ex.execute("SELECT order_id, amount FROM t_order ORDER BY amount", stream=False) as r:
        assert len(r.fetchall()) == 12_000
    s = scrape(url)
    assert value(s, "ddm_merge_memory_high_water_rows", table="t_order") == 12_000
    assert value(s, "ddm_merges_total", table="t_order") == 2
    held = value(s, "ddm_merge_memory_high_water_bytes", table="t_order")
    assert 12_000 * 50 < held < 12_000 * 1000  # two ints in a tuple: about a hundred bytes a row
    assert value(s, "ddm_merge_memory_warnings_total", table="t_order") == 0
    # Above runtime.mergeMemoryWarnMb: a warning naming the table and the setting, counted.
    low = dataclasses.replace(ex.config, runtime=dataclasses.replace(ex.config.runtime, merge_memory_warn_mb=1))
    ex.router.use_config(low)
    many = "SELECT order_id, amount, user_id FROM t_order ORDER BY amount"
    for _ in range(3):
        with caplog.at_level(logging.WARNING, logger="ddm_core.execute"), ex.execute(many, stream=False) as r:
            assert len(r.fetchall()) == 12_000
    s = scrape(url)
    assert value(s, "ddm_merge_memory_warnings_total", table="t_order") == 3
    assert value(s, "ddm_merges_total", table="t_order") == 5
    warnings = [rec.getMessage() for rec in caplog.records if "mergeMemoryWarnMb" in rec.getMessage()]
    assert len(warnings) == 1  # the same table again within 10 s: held back
    assert "a merge over t_order held about" in warnings[0] and "12000 rows" in warnings[0]
