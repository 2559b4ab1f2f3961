"""``ddm health baseline|check`` on MariaDB: real tables changed behind ddm-core's back.

Two fresh databases, ``t_order`` over 2 × 2 physical tables plus a broadcast
``t_dict``. The baseline is compared with counts read directly from each
physical table; then rows are deleted / inserted, a table dropped and another
altered with plain PyMySQL, and the check must flag exactly those.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from ddm_core import load_config
from ddm_core.errors import ObserveError
from ddm_core.execute import Executor
from ddm_core.migrate.connections import Connections
from ddm_core.observe.health import Baseline, check, take_baseline
from services import fresh_mariadb_databases, mariadb_connect, mariadb_rows
from test_execute_support import CONFIG_DDL_MYSQL, DICT_DDL, ORDER_DDL, sharding_config
from cli_support import run

ROWS = 1000




@pytest.fixture()
def layout(tmp_path: Path) -> Iterator[tuple[Path, Any, list[str]]]:
    with fresh_mariadb_databases(2) as dbs:
        urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
                for i, db in enumerate(dbs)}  # fmt: skip
        raw = sharding_config(urls, tables=2, pool={"maxSize": 2, "minIdle": 0, "acquireTimeoutMs": 1000})
        path = tmp_path / "ddm.yaml"
        path.write_text(yaml.safe_dump(raw))
        config = load_config(raw)
        with Executor(config, load_schema=False) as ex:
            ex.execute(ORDER_DDL).close()
            ex.execute(DICT_DDL).close()
            ex.execute(CONFIG_DDL_MYSQL).close()
            for u in range(1, ROWS + 1):
                ex.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", (u, u)).close()
            ex.execute("INSERT INTO t_dict (id, name) VALUES (1, 'a')").close()
        yield path, config, dbs


def direct_count(dbs: list[str], physical: str) -> int:
    source, table = physical.split(".")
    return int(mariadb_rows(dbs[int(source[-1])], f"SELECT COUNT(*) FROM {table}")[0][0])


def direct(dbs: list[str], physical: str, sql: str) -> None:
    source, table = physical.split(".")
    conn = mariadb_connect(database=dbs[int(source[-1])])
    try:
        with conn.cursor() as cur:
            cur.execute(sql.format(table=table))
    finally:
        conn.close()


def test_baseline_counts_every_physical_table(layout: tuple[Path, Any, list[str]], tmp_path: Path) -> None:
    path, _, dbs = layout
    out = tmp_path / "baseline.json"
    result = run("health", "baseline", "--config", str(path), "--output", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    orders = data["tables"]["t_order"]
    assert sorted(orders) == ["ds_0.t_order_0_0", "ds_0.t_order_0_1", "ds_1.t_order_1_0", "ds_1.t_order_1_1"]
    for physical, entry in orders.items():
        assert entry == {"rows": direct_count(dbs, physical), "method": "count"}
    assert sum(e["rows"] for e in orders.values()) == ROWS
    assert data["tables"]["t_dict"] == {"ds_0.t_dict": {"rows": 1, "method": "count"},
                                        "ds_1.t_dict": {"rows": 1, "method": "count"}}  # fmt: skip
    # Right after the baseline nothing has changed: healthy, exit 0.
    result = run("health", "check", "--config", str(path), "--baseline", str(out))
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith("healthy")


def test_check_flags_exactly_what_changed(layout: tuple[Path, Any, list[str]], tmp_path: Path) -> None:
    path, config, dbs = layout
    out = tmp_path / "baseline.json"
    assert run("health", "baseline", "-c", str(path), "-o", str(out)).exit_code == 0
    before = Baseline.load(out).tables["t_order"]
    direct(dbs, "ds_0.t_order_0_0", "DELETE FROM {table}")  # ~250 rows gone: dropped
    direct(dbs, "ds_1.t_order_1_0", "INSERT INTO {table} (order_id, user_id) "
                                    "SELECT seq + 100000, 7 FROM seq_1_to_300")  # +300: jumped  # fmt: skip
    direct(dbs, "ds_1.t_order_1_1", "DROP TABLE {table}")  # missing
    direct(dbs, "ds_0.t_order_0_1", "ALTER TABLE {table} ADD COLUMN extra INT NULL")  # schema differs
    direct(dbs, "ds_0.t_order_0_1", "DELETE FROM {table} LIMIT 3")  # 3 rows: below min-change, not flagged
    result = run("health", "check", "-c", str(path), "--baseline", str(out), "--format", "json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    found = {(f["kind"], f["physical"]) for f in report["findings"]}
    assert found == {
        ("dropped", "ds_0.t_order_0_0"),
        ("jumped", "ds_1.t_order_1_0"),
        ("missing", "ds_1.t_order_1_1"),
        ("schema", "ds_0.t_order_0_1"),
    }
    dropped = next(f for f in report["findings"] if f["kind"] == "dropped")
    assert dropped["detail"].startswith(f"{before['ds_0.t_order_0_0'].rows} -> 0 rows")
    jumped = next(f for f in report["findings"] if f["kind"] == "jumped")
    assert jumped["detail"].startswith(f"{before['ds_1.t_order_1_0'].rows} -> {before['ds_1.t_order_1_0'].rows + 300}")
    schema = next(f for f in report["findings"] if f["kind"] == "schema")
    assert "column 'extra'" in schema["detail"]
    assert report["healthy"] is False and report["checked"] == 7  # 4 t_order + 2 t_dict + t_config
    # A looser threshold still flags the missing table and the schema; the counts pass.
    with Connections(config) as conns:
        loose = check(Baseline.load(out), config, conns, threshold=5.0)
    assert {(f.kind, f.physical) for f in loose.findings} == {("missing", "ds_1.t_order_1_1"),
                                                              ("schema", "ds_0.t_order_0_1")}  # fmt: skip


def test_big_tables_are_estimated(layout: tuple[Path, Any, list[str]]) -> None:
    _, config, dbs = layout
    with Connections(config) as conns:
        baseline = take_baseline(config, conns, tables=["t_order"], estimate_above=0)
    for physical, count in baseline.tables["t_order"].items():
        source, table = physical.split(".")
        estimate = mariadb_rows(dbs[int(source[-1])], "SELECT table_rows FROM information_schema.tables "
                                "WHERE table_schema = DATABASE() AND table_name = %s", (table,))[0][0]  # fmt: skip
        assert (count.method, count.rows) == ("estimate", int(estimate))
    assert list(baseline.tables) == ["t_order"]


def test_unreadable_baselines_and_unknown_tables_are_refused(layout: tuple[Path, Any, list[str]], tmp_path: Path) -> None:
    path, config, _ = layout
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 1, "tables": {"t_order": {"ds_0.t_order_0_0": {"rows": "many"}}}}')
    with pytest.raises(ObserveError, match="table 't_order' has an unreadable entry"):
        Baseline.load(bad)
    bad.write_text("[1, 2]")
    result = run("health", "check", "-c", str(path), "--baseline", str(bad))
    assert result.exit_code == 2 and "is not a ddm health baseline" in result.stderr
    with Connections(config) as conns, pytest.raises(ObserveError, match="t_nope are not logic tables"):
        take_baseline(config, conns, tables=["t_nope"])
