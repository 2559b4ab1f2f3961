"""The ``ddm`` command (click): every command, its output and its error paths.

Expected nodes, hashes and slots are computed with the library (Router,
hash64, the SLOTS algorithm), never copied from a document.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path


import pytest
from click.testing import Result

from ddm_core.hashing import hash64
from ddm_core.ids import gene_of
from ddm_core.metadata import load_config
from ddm_core.route import Router
from cli_support import run

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
ORDERS = str(EXAMPLES / "orders.yaml")
SS = str(EXAMPLES / "shardingsphere.yaml")
SCHEMA = str(EXAMPLES / "schema.sql")




def assert_error(result: Result, fragment: str) -> None:
    """A refusal: exit status 2, ``error: ...`` on stderr, nothing on stdout, no traceback."""
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: "), result.stderr
    assert fragment in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def orders_router() -> Router:
    return Router(load_config(ORDERS))


# -- ddm route -----------------------------------------------------------------------------


def test_route_point_select_prints_the_preview_table() -> None:
    result = run("route", "--config", ORDERS, "SELECT * FROM t_order WHERE user_id = %s", "--params", "[10086]")
    assert result.exit_code == 0, result.output
    plan = orders_router().route("SELECT * FROM t_order WHERE user_id = %s", [10086])
    (unit,) = plan.units
    lines = result.stdout.splitlines()
    assert lines[0] == "route: single — 1 unit on 1 data source (select, read)"
    assert lines[1] == f"  t_order → {plan.tables[0].nodes[0]}"
    assert lines[2] == f"    why: {plan.tables[0].reason}"
    assert lines[4].split(" | ") == ["#", "data source", "SQL".ljust(len(unit.sql)), "params"]
    assert lines[6].split(" | ") == ["1", unit.data_source.ljust(len("data source")), unit.sql, "[10086]"]
    assert "merge" not in result.stdout  # one unit: nothing to merge


def test_route_named_params_from_a_json_object() -> None:
    result = run("route", "-c", ORDERS, "SELECT * FROM t_order WHERE user_id = %(uid)s", "-p", '{"uid": 7}')
    assert result.exit_code == 0, result.output
    node = orders_router().route("SELECT * FROM t_order WHERE user_id = %s", [7]).tables[0].nodes[0]
    assert f"t_order → {node}" in result.stdout and "| [7]" in result.stdout


def test_route_multi_shard_select_describes_the_merge() -> None:
    sql = (
        "SELECT order_id, amount FROM t_order WHERE user_id IN (%s, %s, %s) "
        "ORDER BY create_time DESC LIMIT 20 OFFSET 100"
    )
    result = run("route", "-c", ORDERS, sql, "-p", "[1, 2, 10086]")
    assert result.exit_code == 0, result.output
    plan = orders_router().route(sql, [1, 2, 10086])
    assert len(plan.units) > 1
    out = result.stdout
    assert f"{len(plan.units)} units" in out
    for unit in plan.units:
        assert unit.sql in out
    assert "merge:" in out
    assert "order by create_time (unit column 3) DESC" in out
    assert "skip 100, return 20; each unit returns at most 120 rows" in out
    assert "drop 1 column the router added" in out


def test_route_aggregates_are_described() -> None:
    sql = "SELECT status, COUNT(*), AVG(amount) FROM t_order WHERE user_id IN (1, 2, 3, 4, 5, 6, 7, 8) GROUP BY status"
    result = run("route", "-c", ORDERS, sql)
    assert result.exit_code == 0, result.output
    assert "group by status (unit column 1)" in result.stdout
    assert "aggregate COUNT(*): unit counts in column 2 added up" in result.stdout
    assert "aggregate AVG(amount): SUM of unit column 3 / SUM of COUNT in unit column 4" in result.stdout


def test_route_insert_shows_generated_keys_and_write() -> None:
    result = run("route", "-c", ORDERS, "INSERT INTO t_order (user_id, amount) VALUES (%s, %s), (%s, %s)",
                 "-p", "[1, 2.5, 10086, 3]")
    assert result.exit_code == 0, result.output
    assert "(insert, write)" in result.stdout
    keys = result.stdout.split("generated keys: ")[1].splitlines()[0].split(", ")
    slot_bits = 10
    # gene ids carry the user's slot: the first row belongs to user 1, the second to user 10086
    from ddm_core.hashing import slot_of

    assert [gene_of(int(k), slot_bits) for k in keys] == [slot_of(1, 10), slot_of(10086, 10)]
    assert "merge: affected-row counts are added up" in result.stdout


def test_route_broadcast_and_json_output() -> None:
    result = run("route", "-c", ORDERS, "INSERT INTO t_dict_region VALUES ('310000', 'Shanghai', NULL, 1)", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "broadcast" and doc["statement"] == "insert" and doc["is_write"] is True
    assert [u["data_source"] for u in doc["units"]] == ["ds_0", "ds_1", "ds_2", "ds_3"]


def test_route_json_of_a_merge() -> None:
    sql = "SELECT user_id, amount FROM t_order WHERE user_id IN (1, 2, 3) ORDER BY amount DESC LIMIT 5"
    doc = json.loads(run("route", "-c", ORDERS, sql, "--json").stdout)
    plan = orders_router().route(sql)
    assert doc["merge"]["order_by"] == [[i, d] for i, d in plan.merge.order_by]
    assert doc["merge"]["limit"] == 5
    assert len(doc["units"]) == len(plan.units)


def test_route_full_route_refusal_is_an_error_not_a_traceback() -> None:
    result = run("route", "-c", ORDERS, "SELECT * FROM t_order ORDER BY create_time DESC LIMIT 10")
    assert_error(result, "would hit all 16 shards")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("SELECT * FROM t_order WHERE user_id = %s", "-p", "[1, 2]"), "1 placeholder(s) but 2 parameter(s)"),
        (("UPDATE t_order SET user_id = 5 WHERE user_id = 1",), "user_id"),
        (("SELEC * FROM t_order",), "cannot parse"),
    ],
)
def test_route_refusals_exit_2(args: tuple[str, ...], fragment: str) -> None:
    assert_error(run("route", "-c", ORDERS, *args), fragment)


@pytest.mark.parametrize(
    ("params", "fragment"),
    [("[10086", "not valid JSON"), ("10086", "must be a JSON list"), ('"x"', "not str")],
)
def test_route_bad_params_are_usage_errors(params: str, fragment: str) -> None:
    result = run("route", "-c", ORDERS, "SELECT * FROM t_order WHERE user_id = %s", "--params", params)
    assert result.exit_code == 2
    assert "--params" in result.stderr and fragment in result.stderr
    assert "Traceback" not in result.stderr


def test_route_usage_errors() -> None:
    assert run("route", "-c", ORDERS).exit_code == 2  # no SQL
    missing = run("route", "-c", "/nonexistent/orders.yaml", "SELECT 1")
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
    both = run("route", "-c", ORDERS, "SELECT 1", "--explain-key", "t_order", "1")
    assert both.exit_code == 2 and "--explain-key takes no SQL" in both.stderr
    as_json = run("route", "-c", ORDERS, "--explain-key", "t_order", "1", "--json")
    assert as_json.exit_code == 2 and "--explain-key takes no SQL, --params or --json" in as_json.stderr
    stray = run("route", "-c", ORDERS, "SELECT 1", "--str")
    assert stray.exit_code == 2 and "--column and --str go with --explain-key" in stray.stderr


def test_route_config_from_environment_variable() -> None:
    result = run("route", "SELECT * FROM t_order WHERE user_id = 1", env={"DDM_CONFIG": ORDERS})
    assert result.exit_code == 0, result.output


def test_route_invalid_config_lists_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "dataSources: {ds_0: 'sqlite:///a.db', ds_1: 'sqlite:///b.db'}\n"
        "tables:\n"
        "  - {logicTable: t_order, shardKey: user_id, shardCount: 3, databases: [ds_0, ds_1]}\n"
        "runtime: {maxOffsett: 5}\n"
    )
    result = run("route", "-c", str(bad), "SELECT 1")
    assert_error(result, f"invalid configuration {bad}: 2 problems")
    assert "shardCount" in result.stderr and "maxOffsett" in result.stderr


def test_route_prints_config_warnings_on_stderr() -> None:
    result = run("route", "-c", str(ROOT / "tests" / "configs" / "ss_order_db_2x16.yaml"),
                 "SELECT * FROM t_order WHERE user_id = 882341")
    assert result.exit_code == 0, result.output
    assert "warning: " in result.stderr and "looks redacted" in result.stderr
    # computed: 882341 % 32 = 5 < 16 → ds0; 882341 % 16 = 5
    assert "ds0.t_order_5" in result.stdout


# -- ddm route --explain-key -------------------------------------------------------------------


def test_explain_key_agrees_with_the_router() -> None:
    result = run("route", "-c", ORDERS, "--explain-key", "t_order", "10086")
    assert result.exit_code == 0, result.output
    config = load_config(ORDERS)
    node = Router(config).route("SELECT * FROM t_order WHERE user_id = %s", [10086]).tables[0].nodes[0]
    slots = config.tables["t_order"].database_strategy.sharder
    slot = slots.slot(10086)
    h = hash64(10086)
    out = result.stdout
    assert out.splitlines()[0] == "t_order: user_id = 10086"
    assert f"hash64    {h} (0x{h:016x}; xxh3_64 of the canonical signed 64-bit little-endian int)" in out
    assert f"slot {slot} of 1024 (slot bits 10: {slot:010b}, the high bits of the hash)" in out
    assert slot == h >> 54
    assert "SLOTS 't_order.database'" in out and "HASH_MOD 't_order.table'" in out
    assert f"  node      {node}" in out
    assert f"end in gene {slot}" in out


def test_explain_key_str_forces_a_string() -> None:
    as_int = run("route", "-c", ORDERS, "--explain-key", "t_order", "10086").stdout
    as_str = run("route", "-c", ORDERS, "--explain-key", "t_order", "10086", "--str").stdout
    assert "user_id = '10086'" in as_str and f"hash64    {hash64('10086')}" in as_str
    assert "UTF-8 bytes" in as_str
    node = orders_router().route("SELECT * FROM t_order WHERE user_id = %s", ["10086"]).tables[0].nodes[0]
    assert f"  node      {node}" in as_str
    assert as_int != as_str


def test_explain_key_of_a_gene_id_decides_the_database_only() -> None:
    plan = orders_router().route("INSERT INTO t_order (user_id, amount) VALUES (%s, %s)", [10086, 1])
    order_id = plan.generated_keys[0]
    result = run("route", "-c", ORDERS, "--explain-key", "t_order", str(order_id), "--column", "order_id")
    assert result.exit_code == 0, result.output
    ds = plan.units[0].data_source
    routed = orders_router().route("SELECT * FROM t_order WHERE order_id = %s", [order_id])
    assert result.stdout.count(f"{ds}.t_order_") == len(routed.units) == 4
    assert f"slot {gene_of(order_id, 10)} of 1024" in result.stdout and "the id's low gene bits" in result.stdout
    assert "the value alone does not pick one node" in result.stdout


def test_explain_key_on_shardingsphere_inline_config() -> None:
    result = run("route", "-c", SS, "--explain-key", "t_order_item", "882341")
    assert result.exit_code == 0, result.output
    # bound to t_order: routed by t_order's algorithms, as the router does
    assert "INLINE 'db-inline'" in result.stdout and "INLINE 'tbl-inline'" in result.stdout
    assert "  node      ds0.t_order_item_5" in result.stdout  # 882341 % 32 = 5 → ds0; % 16 = 5
    assert "slot" not in result.stdout  # no slots in INLINE sharding


@pytest.mark.parametrize("config", [ORDERS, str(ROOT / "tests" / "configs" / "ss_order_db_2x16.yaml")])
def test_explain_key_of_a_bound_table_follows_the_router(config: str) -> None:
    # ss_order_db_2x16.yaml's t_order_item reuses t_order's table algorithm: it still routes, through t_order
    result = run("route", "-c", config, "--explain-key", "t_order_item", "882341")
    assert result.exit_code == 0, result.output
    (unit,) = Router(load_config(config, check_env=False)).route(
        "SELECT * FROM t_order_item WHERE user_id = 882341").units
    node = f"{unit.data_source}.{dict(unit.tables)['t_order_item']}"
    assert "  bound to  t_order: routed by t_order's strategies" in result.stdout
    assert f"  node      {node}" in result.stdout


def test_explain_key_on_an_auto_table() -> None:
    result = run("route", "-c", str(ROOT / "tests" / "configs" / "ss_auto_tables.yaml"),
                 "--explain-key", "t_order_auto", "7")
    assert result.exit_code == 0, result.output
    node = Router(load_config(ROOT / "tests" / "configs" / "ss_auto_tables.yaml")).route(
        "SELECT * FROM t_order_auto WHERE order_id = 7").tables[0].nodes[0]
    assert f"  node      {node}" in result.stdout
    assert "auto table" in result.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("t_nope", "1"), "table 't_nope' is not in the configuration"),
        (("t_dict_region", "1"), "'t_dict_region' is a broadcast table"),
        (("t_config", "1"), "'t_config' is a single table in data source 'ds_0'"),
        (("t_order", "1", "--column", "status"), "'status' is not a sharding column of 't_order'"),
        (("t_order", "abc", "--column", "order_id"), "order_id is a gene id and must be an integer"),
    ],
)
def test_explain_key_refusals(args: tuple[str, ...], fragment: str) -> None:
    assert_error(run("route", "-c", ORDERS, "--explain-key", *args[:2], *args[2:]), fragment)


# -- ddm config check ---------------------------------------------------------------------------


def test_config_check_summarises_the_example() -> None:
    result = run("config", "check", ORDERS)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith(f"ok: {ORDERS} (native format, sha256 ")
    for fragment in (
        "data sources (4):",
        "sqlite:///" + str(EXAMPLES / "data" / "ds_0.db"),
        "t_order: 16 nodes (4 data sources × 4 tables; ds_0.t_order_0_0 .. ds_3.t_order_3_3)",
        "database  standard on user_id: SLOTS 't_order.database' = SLOTS(slots=1024, explicit over 4 targets)",
        "table     standard on user_id: HASH_MOD 't_order.table' = HASH_MOD(count=4)",
        "key       order_id ← GENE 't_order.order_id' (gene bits 10, shard column user_id, worker id 0: none configured, set workerId per process)",
        "bound to  t_order_item",
        "slots     1024 database slots per data source:",
        "binding groups: [t_order, t_order_item]",
        "broadcast tables: t_dict_region",
        "single tables: t_config → ds_0",
        "default data source: ds_0",
        "allow_full_route=false",
        "full_route_threshold=8",
        "sql_comment=true",
    ):
        assert fragment in out, fragment
    for i, lo in enumerate(range(0, 1024, 256)):
        assert f"ds_{i}            256  {lo}-{lo + 255}" in out


def test_config_check_even_slot_layout_and_table_level_slots(tmp_path: Path) -> None:
    cfg = tmp_path / "even.yaml"
    cfg.write_text(
        "dataSources: {ds_0: 'sqlite:///a.db', ds_1: 'sqlite:///b.db', ds_2: 'sqlite:///c.db'}\n"
        "tables:\n"
        "  - logicTable: t_user\n"
        "    shardKey: user_id\n"
        "    shardCount: 3\n"
        "    tablePerShard: 2\n"
        "    databases: [ds_0, ds_1, ds_2]\n"
        "    tableAlgorithm: slots\n"
        "    tableAlgorithmProps: {slot-bits: 4}\n"
    )
    result = run("config", "check", str(cfg))
    assert result.exit_code == 0, result.output
    counts = [int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("      ds_")]
    assert sorted(counts) == [341, 341, 342] and sum(counts) == 1024
    assert "16 table slots per table in ds_1:" in result.stdout
    assert "t_user_1_0            8  0-7" in result.stdout


def test_config_check_shardingsphere_lists_unset_password_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DDM_ORDER_PASSWORD", raising=False)
    result = run("config", "check", SS)
    assert result.exit_code == 0, result.output
    assert "(shardingsphere format" in result.stdout
    assert "t_order: 32 nodes (2 data sources × 16 tables; ds0.t_order_0 .. ds1.t_order_15)" in result.stdout
    assert "INLINE 'db-inline' = INLINE(ds${user_id % 32 / 16})" in result.stdout
    assert "broadcast tables: t_dict_region, t_dict_status" in result.stdout
    assert "DDM_ORDER_PASSWORD: NOT SET (password of ds0, ds1)" in result.stdout
    assert "warnings" not in result.stdout


def test_config_check_env_makes_unset_variables_problems(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DDM_ORDER_PASSWORD", raising=False)
    result = run("config", "check", "--check-env", SS)
    assert_error(result, "2 problems")
    assert "dataSources.ds0.props.password: environment variable DDM_ORDER_PASSWORD is not set" in result.stderr
    assert "dataSources.ds1.props.password" in result.stderr
    ok = run("config", "check", "--check-env", SS, env={"DDM_ORDER_PASSWORD": "secret"})
    assert ok.exit_code == 0 and "DDM_ORDER_PASSWORD: set" in ok.stdout and "secret" not in ok.stdout


def test_config_check_shows_load_warnings_in_the_summary() -> None:
    result = run("config", "check", str(ROOT / "tests" / "configs" / "ss_order_db_2x16.yaml"))
    assert result.exit_code == 0, result.output
    assert "warnings (3):" in result.stdout and "looks redacted" in result.stdout
    assert result.stderr == ""


def test_config_check_lists_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "dataSources: {ds_0: 'sqlite:///a.db'}\n"
        "tables:\n"
        "  - {logicTable: t_order, shardKey: user_id, shardCount: 2, databases: [ds_0, ds_9]}\n"
        "broadcastTables: [t_order]\n"
        "runtime: {fullRouteThreshold: -1}\n"
    )
    result = run("config", "check", str(bad))
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    header, *problems = result.stderr.splitlines()
    assert header.startswith(f"error: invalid configuration {bad}: ")
    assert len(problems) >= 3 and all(p.startswith(f"  - {bad}: ") for p in problems)
    assert any("ds_9" in p for p in problems)
    assert any("fullRouteThreshold" in p for p in problems)


def test_config_check_unreadable_and_missing_files(tmp_path: Path) -> None:
    assert run("config", "check", str(tmp_path / "nope.yaml")).exit_code == 2
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert_error(run("config", "check", str(empty)), "the configuration is empty")


def test_config_check_shardingsphere_test_configs_all_load() -> None:
    for path in sorted((ROOT / "tests" / "configs").glob("*.yaml")):
        result = run("config", "check", str(path))
        assert result.exit_code in (0, 2), path
        assert "Traceback" not in result.stderr


# -- ddm ddl ---------------------------------------------------------------------------------------


def test_ddl_prints_every_physical_table_grouped_by_data_source() -> None:
    result = run("ddl", "--config", ORDERS, SCHEMA)
    assert result.exit_code == 0, result.output
    out = result.stdout
    # SQLite data sources: each t_order / t_order_item CREATE TABLE plus its indexes as CREATE INDEX
    assert out.startswith(f"-- {SCHEMA}: 101 statements on 4 data sources")
    for db in range(4):
        assert f"\n-- ds_{db} (sqlite:///" in out
        for t in range(4):
            assert f"CREATE TABLE IF NOT EXISTS t_order_{db}_{t} (" in out
            assert f"CREATE UNIQUE INDEX IF NOT EXISTS t_order_{db}_{t}_uk_order_no ON t_order_{db}_{t} (order_no);" in out
    assert out.count("CREATE TABLE IF NOT EXISTS t_dict_region (") == 4
    assert out.count("CREATE TABLE IF NOT EXISTS t_config (") == 1
    assert "AUTO_INCREMENT" not in out and "ENGINE" not in out


def test_ddl_mysql_dialect_keeps_the_template_text() -> None:
    result = run("ddl", "-c", ORDERS, SCHEMA, "--dialect", "mysql")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"-- {SCHEMA}: 37 statements on 4 data sources")
    assert "CREATE TABLE IF NOT EXISTS t_order_2_1 (\n  order_id    BIGINT        NOT NULL COMMENT" in result.stdout
    assert "KEY idx_user_time (user_id, create_time)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;" in result.stdout


def test_ddl_refuses_auto_increment_with_the_key_generator(tmp_path: Path) -> None:
    template = tmp_path / "bad.sql"
    template.write_text(
        "CREATE TABLE t_dict_region (code VARCHAR(12) PRIMARY KEY);\n"
        "CREATE TABLE t_order (\n  order_id BIGINT NOT NULL AUTO_INCREMENT,\n  user_id BIGINT,\n"
        "  PRIMARY KEY (order_id)\n);\n"
    )
    result = run("ddl", "-c", ORDERS, str(template))
    assert_error(result, "statement 2 (line 2): column 'order_id' on sharded table 't_order' uses AUTO_INCREMENT")
    assert "key generator 't_order.order_id' (GENE)" in result.stderr


def test_ddl_refuses_unknown_tables(tmp_path: Path) -> None:
    template = tmp_path / "bad.sql"
    template.write_text("CREATE TABLE t_orders (a INT);")
    assert_error(run("ddl", "-c", ORDERS, str(template)), "table 't_orders' is not in the configuration")


def test_ddl_usage_errors(tmp_path: Path) -> None:
    assert run("ddl", "-c", ORDERS, str(tmp_path / "missing.sql")).exit_code == 2
    both = run("ddl", "-c", ORDERS, SCHEMA, "--execute", "--dialect", "mysql")
    assert both.exit_code == 2 and "--dialect is for printing" in both.stderr
    assert run("ddl", "-c", ORDERS, SCHEMA, "--dialect", "oracle").exit_code == 2


def test_ddl_execute_on_a_copy_of_the_example(tmp_path: Path) -> None:
    shutil.copy(ORDERS, tmp_path / "orders.yaml")
    cfg = str(tmp_path / "orders.yaml")
    result = run("ddl", "-c", cfg, SCHEMA, "--execute")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-1] == "executed 101 of 101 statements on 4 data sources"
    assert lines[0].startswith("ds_0: ok  CREATE TABLE IF NOT EXISTS t_order_0_0 ( order_id BIGINT NOT NULL")
    assert lines[0].endswith("...") and len(lines[0]) == len("ds_0: ok  ") + 100
    assert lines[1] == "ds_0: ok  CREATE UNIQUE INDEX IF NOT EXISTS t_order_0_0_uk_order_no ON t_order_0_0 (order_no)"
    for db in range(4):
        conn = sqlite3.connect(tmp_path / "data" / f"ds_{db}.db")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        conn.close()
        expected = {f"t_order_{db}_{t}" for t in range(4)} | {f"t_order_item_{db}_{t}" for t in range(4)}
        expected |= {"t_dict_region"} | ({"t_config"} if db == 0 else set())
        assert tables == expected
    # the created tables take the router's statements
    config = load_config(cfg)
    plan = Router(config).route(
        "INSERT INTO t_order (order_no, user_id, amount, status, create_time, update_time) "
        "VALUES (?, ?, ?, ?, ?, ?)", ["A1", 10086, "12.50", 0, "2024-05-01", "2024-05-01"])
    (unit,) = plan.units
    conn = sqlite3.connect(tmp_path / "data" / f"{unit.data_source}.db")
    conn.execute(unit.sql, unit.params)
    conn.commit()
    conn.close()


def test_ddl_execute_failure_is_an_error_naming_the_data_source(tmp_path: Path) -> None:
    shutil.copy(ORDERS, tmp_path / "orders.yaml")
    template = tmp_path / "plain.sql"
    template.write_text("CREATE TABLE t_dict_region (code VARCHAR(12) PRIMARY KEY);\n")
    cfg = str(tmp_path / "orders.yaml")
    assert run("ddl", "-c", cfg, str(template), "--execute").exit_code == 0
    again = run("ddl", "-c", cfg, str(template), "--execute")
    assert again.exit_code == 2
    assert again.stderr.startswith("error: data source 'ds_0' (sqlite:///")
    assert "table t_dict_region already exists" in again.stderr
    assert "statement: CREATE TABLE t_dict_region" in again.stderr


# -- the console script ------------------------------------------------------------------------------


def test_console_script_is_declared() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["scripts"]["ddm"] == "ddm_core.cli:main"
    assert any(dep.startswith("click") for dep in project["dependencies"])


def test_python_m_entry_point_exits_2_without_traceback() -> None:
    import ddm_core

    env = dict(os.environ)
    src = str(Path(ddm_core.__file__).resolve().parents[1])
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-m", "ddm_core.cli", "route", "-c", ORDERS, "SELECT * FROM t_order"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: statement on 't_order' has no condition on its shard column")
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_help_lists_the_commands() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for command in ("route", "config", "ddl"):
        assert command in result.stdout


