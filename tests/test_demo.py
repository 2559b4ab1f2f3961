"""``ddm demo``: the whole walk-through on SQLite files (small) and once on MariaDB.

The demo's own output is checked against the data read back behind ddm-core's
back (sqlite3 / PyMySQL on each shard): every order lives on the shard its
user's slot names, order ids carry that slot, and the cross-shard page the demo
prints is the page of the union of the shards.
"""

from __future__ import annotations

import re
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from ddm_core import load_config
from ddm_core.cli.demo import REGIONS, demo_config, demo_queries, generate_orders, parse_mysql_url, sqlite_sources
from ddm_core.route import Router
from test_execute_support import mysql_raw
from cli_support import run

ORDERS = 2000




def sections(stdout: str) -> dict[str, str]:
    """Query title → the text printed under it."""
    parts = re.split(r"^== (.+) ==$", stdout, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def shard_rows(directory: Path, sql: str) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for i in range(4):
        with sqlite3.connect(directory / f"ds_{i}.db") as conn:
            out[f"ds_{i}"] = conn.execute(sql).fetchall()
    return out


def check_walkthrough(stdout: str) -> None:
    """What every run prints, whatever the backend."""
    assert f"loaded {ORDERS:,} orders" in stdout
    assert f"{ORDERS:,} distinct gene ids generated" in stdout
    assert "connections still borrowed from the pools: 0" in stdout
    parts = sections(stdout)
    titles = [q.title for q in demo_queries(1, 1)]
    assert list(parts) == titles
    point_user, point_order, page, report, join, binding, check = (parts[t] for t in titles)
    for single in (point_user, point_order, binding):
        assert "route: single — 1 unit on 1 data source" in single
    for full in (page, report, join):
        assert "route: full (every node: no usable shard condition) — 4 units on 4 data sources" in full
    assert "ORDER BY create_time DESC LIMIT 60" in page  # offset + limit pushed to every unit
    assert "skip 40, return 20" in page
    assert "rows: 20 (first 10 shown)" in page
    assert "aggregate avg_amount: SUM of unit column" in report
    assert "rows: 5" in report  # five statuses
    assert re.search(r"time: [\d.,]+ ms first run .*, [\d.,]+ ms warm \(median of 5", point_user)
    assert "rows: 1" in point_order
    # The check query: COUNT(*) over every shard is what was loaded.
    shown = check.split("\nrows: 1\n", 1)[1]
    last_row = [ln for ln in shown.splitlines() if re.match(r"^\s+\d+\s+\|", ln)][0]
    assert int(last_row.split("|")[0]) == ORDERS


def test_demo_on_sqlite_files(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    result = run("demo", "--orders", str(ORDERS), "--dir", str(data))
    assert result.exit_code == 0, result.output
    check_walkthrough(result.stdout)
    assert f"4 SQLite files in {data.resolve()}" in result.stdout
    assert "loading t_order" in result.stderr  # the progress bar goes to stderr

    # --dir keeps the files and writes the configuration next to them.
    config = load_config(data / "demo.yaml")
    assert load_config(demo_config(sqlite_sources(data, 4))).data_sources.keys() == config.data_sources.keys()
    router = Router(config)
    orders = shard_rows(data, "SELECT order_id, user_id, create_time FROM t_order")
    assert sum(len(rows) for rows in orders.values()) == ORDERS
    for ds, rows in orders.items():
        for order_id, user_id, _ in rows:
            assert router.route("SELECT 1 FROM t_order WHERE user_id = ?", [user_id]).units[0].data_source == ds
            assert router.route("SELECT 1 FROM t_order WHERE order_id = ?", [order_id]).units[0].data_source == ds
    items = shard_rows(data, "SELECT i.user_id, o.user_id FROM t_order_item i LEFT JOIN t_order o ON o.order_id = i.order_id")
    assert all(o is not None and i == o for rows in items.values() for i, o in rows)  # items beside their order
    regions = shard_rows(data, "SELECT region_code, name FROM t_dict_region ORDER BY region_code")
    assert all(rows == sorted(REGIONS) for rows in regions.values())  # broadcast: a full copy everywhere

    # The page the demo printed is rows 41..60 of the union, newest first.
    union = sorted((r for rows in orders.values() for r in rows), key=lambda r: r[2], reverse=True)
    page_text = sections(result.stdout)["cross-shard page: latest orders, page 3"]
    shown = page_text.split("\nrows: 20 (first 10 shown)\n", 1)[1]
    printed = [int(ln.split("|")[0]) for ln in shown.splitlines() if re.match(r"^\s+\d+\s+\|", ln)]
    assert printed == [r[0] for r in union[40:50]]

    # The same data generated again (same seed) is what was loaded.
    generated = generate_orders(ORDERS, ORDERS // 10, 2024)
    assert sorted(u for _, u, _ in union) == sorted(row[1] for row in generated)


def test_demo_temp_dir_is_removed_and_options_checked(tmp_path: Path) -> None:
    result = run("demo", "--orders", "300", "--no-progress", "--repeat", "0", "--shards", "2")
    assert result.exit_code == 0, result.output
    where = re.search(r"2 SQLite files in (\S+)", result.stdout)
    assert where is not None and not Path(where.group(1)).exists()
    assert "loading" not in result.stderr
    assert "time:" in result.stdout and "warm" not in result.stdout

    bad = run("demo", "--drop")
    assert bad.exit_code == 2 and "--drop and --prefix go with --mysql" in bad.stderr
    bad = run("demo", "--mysql", "postgres://x", "--orders", "10")
    assert bad.exit_code == 2 and "expected mysql://" in bad.stderr
    bad = run("demo", "--mysql", "mysql://root@127.0.0.1", "--dir", str(tmp_path))
    assert bad.exit_code == 2
    bad = run("demo", "--mysql", "mysql://root@127.0.0.1", "--prefix", "x; DROP")
    assert bad.exit_code == 2 and "not a plain identifier" in bad.stderr


def test_parse_mysql_url() -> None:
    s = parse_mysql_url("mysql://app:p%40ss@db.local:3307/ignored")
    assert (s.host, s.port, s.user, s.password) == ("db.local", 3307, "app", "p@ss")
    s = parse_mysql_url("mariadb://127.0.0.1")
    assert (s.host, s.port, s.user, s.password) == ("127.0.0.1", 3306, "root", "")


def _databases(prefix: str) -> list[str]:
    conn = mysql_raw()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE %s",
                        (prefix + "\\_%",))
            return sorted(r[0] for r in cur.fetchall())
    finally:
        conn.close()


def test_demo_on_mariadb() -> None:
    prefix = f"ddm_demo_t{uuid.uuid4().hex[:8]}"
    url = "mysql://root@127.0.0.1:3306"
    try:
        mysql_raw().close()
    except Exception as exc:  # not a silent skip: this test needs the server
        pytest.fail(f"MariaDB on 127.0.0.1:3306 (root, no password) is needed: {exc}")
    try:
        result = run("demo", "--mysql", url, "--prefix", prefix, "--orders", str(ORDERS), "--keep")
        assert result.exit_code == 0, result.output
        check_walkthrough(result.stdout)
        assert f"drop them with: ddm demo --mysql mysql://root@127.0.0.1:3306 --drop --prefix {prefix}" in result.stdout
        names = [f"{prefix}_{i}" for i in range(4)]
        assert _databases(prefix) == names
        conn = mysql_raw()
        try:
            with conn.cursor() as cur:
                counts = []
                for name in names:
                    cur.execute(f"SELECT COUNT(*) FROM {name}.t_order")
                    counts.append(cur.fetchone()[0])
                cur.execute(f"SELECT COUNT(*) FROM {names[2]}.t_dict_region")
                assert cur.fetchone()[0] == len(REGIONS)
        finally:
            conn.close()
        assert sum(counts) == ORDERS and all(c > 0 for c in counts)

        dropped = run("demo", "--mysql", url, "--prefix", prefix, "--drop")
        assert dropped.exit_code == 0 and "dropped 4 demo databases" in dropped.stdout
        assert _databases(prefix) == []

        # Without --keep the databases are dropped at the end.
        result = run("demo", "--mysql", url, "--prefix", prefix, "--orders", "200", "--repeat", "0", "--no-progress")
        assert result.exit_code == 0, result.output
        assert _databases(prefix) == []
    finally:
        conn = mysql_raw()
        with conn.cursor() as cur:
            for i in range(4):
                cur.execute(f"DROP DATABASE IF EXISTS {prefix}_{i}")
        conn.close()
