"""Physical DDL from a logic-table template (docs/architecture.md#keys-come-from-the-id-generator), printed and executed.

Executed against SQLite files in tmp_path and against the real MariaDB on
127.0.0.1:3306 (databases ddm_test_<random>_N, dropped afterwards).
"""

from __future__ import annotations

import re
import sqlite3
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from ddm_core.errors import DataSourceUnavailableError, DdmError, ExecutionError, UnsupportedSQLError
from ddm_core.metadata import load_config
from ddm_core.ddl import (
    DdlStatement,
    execute_ddl,
    physical_ddl,
    split_statements,
    sqlite_index_name,
    to_sqlite,
)
from ddm_core.metadata.model import ShardingConfig
from services import fresh_mariadb_databases, mariadb_connect

ROOT = Path(__file__).resolve().parents[1]

# An order-table template with non-ASCII column comments (16 shards x 4 tables = 64 physical tables).
ORDER_TEMPLATE = """CREATE TABLE t_order (
  id BIGINT NOT NULL COMMENT '全局ID',
  order_no VARCHAR(32) NOT NULL COMMENT '业务单号',
  user_id BIGINT NOT NULL COMMENT '分片键',
  amount DECIMAL(18,2) NOT NULL,
  status TINYINT NOT NULL DEFAULT 0,
  create_time DATETIME(3) NOT NULL,
  update_time DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_order_no (order_no),
  KEY idx_user_time (user_id, create_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""


def order_config(urls: dict[str, str] | None = None, *, key_generator: bool = True) -> ShardingConfig:
    """16 database shards x 4 tables; plus a broadcast and a single table."""
    sources = urls or {f"ds_{i}": f"mysql://10.0.1.{10 + i}:3306/order_{i}" for i in range(16)}
    table: dict[str, Any] = {
        "logicTable": "t_order",
        "shardKey": "user_id",
        "shardCount": len(sources),
        "tablePerShard": 4,
        "databases": list(sources),
    }
    if key_generator:
        table["keyGenerator"] = {"column": "id", "type": "snowflake"}
    doc = {
        "dataSources": sources,
        "tables": [table, {"logicTable": "t_order_item", "bindTo": "t_order"}],
        "broadcastTables": ["t_dict_region"],
        "singleTables": {"t_config": next(iter(sources))},
    }
    return load_config(doc)


# -- splitting -----------------------------------------------------------------------


def test_split_keeps_semicolons_in_strings_comments_and_identifiers() -> None:
    text = (
        "-- header; not a statement\n"
        "CREATE TABLE a (x INT COMMENT 'a;b', `we;ird` INT);\n"
        "/* c; */ ;;\n"
        "CREATE INDEX i ON a (x)  # trailing; comment\n"
    )
    got = split_statements(text)
    assert [s.sql for s in got] == [
        "CREATE TABLE a (x INT COMMENT 'a;b', `we;ird` INT)",
        "CREATE INDEX i ON a (x)",
    ]
    assert [s.line for s in got] == [2, 4]


def test_split_of_only_comments_is_empty() -> None:
    assert split_statements("-- nothing\n/* here */\n;\n") == []


# -- generation (MySQL) -------------------------------------------------------------------


def test_order_template_gives_64_tables_identical_but_for_the_name() -> None:
    config = order_config()
    out = physical_ddl(config, ORDER_TEMPLATE + ";")
    assert len(out) == 64
    expected = [(f"ds_{db}", f"t_order_{db}_{t}") for db in range(16) for t in range(4)]
    for (ds, sql), (want_ds, physical) in zip(out, expected):
        assert ds == want_ds
        assert sql.startswith(f"CREATE TABLE {physical} (")
        # byte for byte the template apart from the table name (comments, non-ASCII text, options)
        assert sql.replace(physical, "t_order", 1) == ORDER_TEMPLATE
    assert all(isinstance(s, DdlStatement) for s in out)
    assert out[0] == ("ds_0", out[0].sql)  # unpacks as (data_source, sql)


def test_every_statement_of_a_template_is_routed_in_order() -> None:
    config = order_config()
    template = (
        "DROP TABLE IF EXISTS t_order;\n"
        + ORDER_TEMPLATE
        + ";\nCREATE INDEX idx_status ON t_order (status);\n"
        "CREATE TABLE t_dict_region (code VARCHAR(12) PRIMARY KEY, name VARCHAR(64));\n"
        "CREATE TABLE t_config (k VARCHAR(64) PRIMARY KEY, v TEXT);\n"
        "ALTER TABLE t_order ADD COLUMN remark VARCHAR(255) NULL;\n"
        "DROP INDEX idx_status ON t_order;\n"
        "TRUNCATE TABLE t_order\n"
    )
    out = physical_ddl(config, template)
    kinds = [re.match(r"(\w+ \w+)", sql).group(1) for _, sql in out]  # type: ignore[union-attr]
    assert kinds == (
        ["DROP TABLE"] * 64 + ["CREATE TABLE"] * 64 + ["CREATE INDEX"] * 64 + ["CREATE TABLE"] * 16
        + ["CREATE TABLE"] + ["ALTER TABLE"] * 64 + ["DROP INDEX"] * 64 + ["TRUNCATE TABLE"] * 64
    )
    broadcast = out[192:208]
    assert [ds for ds, _ in broadcast] == [f"ds_{i}" for i in range(16)]
    assert all("t_dict_region" in sql for _, sql in broadcast)
    assert out[208] == ("ds_0", "CREATE TABLE t_config (k VARCHAR(64) PRIMARY KEY, v TEXT)")
    assert out[273] == ("ds_0", "DROP INDEX idx_status ON t_order_0_0")
    assert out[-1] == ("ds_15", "TRUNCATE TABLE t_order_15_3")


def test_foreign_key_to_a_bound_table_follows_the_same_node() -> None:
    config = order_config()
    template = (
        "CREATE TABLE t_order_item (item_id BIGINT PRIMARY KEY, order_id BIGINT, "
        "FOREIGN KEY (order_id) REFERENCES t_order (id))"
    )
    out = physical_ddl(config, template)
    assert len(out) == 64
    for ds, sql in out:
        m = re.search(r"t_order_item_(\d+)_(\d+) .* REFERENCES t_order_(\d+)_(\d+)", sql)
        assert m is not None and m.group(1, 2) == m.group(3, 4)
        assert ds == f"ds_{m.group(1)}"


def test_sql_comment_prefix_is_not_put_on_ddl() -> None:
    doc = {
        "dataSources": {"ds_0": "mysql://h:3306/a", "ds_1": "mysql://h:3306/b"},
        "tables": [{"logicTable": "t", "shardKey": "k", "shardCount": 2, "tablePerShard": 2,
                    "databases": ["ds_0", "ds_1"]}],
        "runtime": {"sqlComment": True, "appName": "svc"},
    }
    out = physical_ddl(load_config(doc), "CREATE TABLE t (k BIGINT)")
    assert [sql for _, sql in out] == [f"CREATE TABLE t_{d}_{t} (k BIGINT)" for d in (0, 1) for t in (0, 1)]


# -- refusals ---------------------------------------------------------------------------


def test_auto_increment_on_a_sharded_table_names_the_key_generator() -> None:
    template = "CREATE TABLE t_order (id BIGINT NOT NULL AUTO_INCREMENT, user_id BIGINT, PRIMARY KEY (id))"
    with pytest.raises(UnsupportedSQLError) as info:
        physical_ddl(order_config(), template)
    msg = info.value.message
    assert "statement 1 (line 1)" in msg
    assert "column 'id'" in msg and "AUTO_INCREMENT" in msg and "64 physical tables" in msg
    assert "key generator 't_order.id' (SNOWFLAKE)" in msg
    assert info.value.table == "t_order" and info.value.construct == "AUTO_INCREMENT"


def test_auto_increment_without_key_generator_says_how_to_configure_one() -> None:
    template = "\n\nCREATE TABLE t_order (order_id BIGINT AUTO_INCREMENT PRIMARY KEY, user_id BIGINT)"
    with pytest.raises(UnsupportedSQLError, match=r"line 3") as info:
        physical_ddl(order_config(key_generator=False), template)
    assert "no key generator is configured for 't_order'" in info.value.message
    assert "keyGenerator: {column: order_id, type: snowflake}" in info.value.message


@pytest.mark.parametrize(
    "template",
    [
        "CREATE TABLE t_order (id SERIAL, user_id BIGINT)",
        "CREATE TABLE t_order (id BIGINT, user_id BIGINT) AUTO_INCREMENT=1000",
        "ALTER TABLE t_order MODIFY COLUMN id BIGINT NOT NULL AUTO_INCREMENT",
        "ALTER TABLE t_order ADD COLUMN seq BIGINT AUTO_INCREMENT",
    ],
)
def test_other_auto_increment_forms_are_refused(template: str) -> None:
    with pytest.raises(UnsupportedSQLError, match="AUTO_INCREMENT"):
        physical_ddl(order_config(), template)


def test_auto_increment_on_a_broadcast_table_is_allowed() -> None:
    out = physical_ddl(order_config(), "CREATE TABLE t_dict_region (id INT AUTO_INCREMENT PRIMARY KEY)")
    assert len(out) == 16


@pytest.mark.parametrize(
    ("template", "fragment"),
    [
        ("CREATE TABLE t_unknown (a INT)", "table 't_unknown' is not in the configuration"),
        ("CREATE TABLE t_order_item (a INT, FOREIGN KEY (a) REFERENCES t_other (id))", "'t_other'"),
        ("INSERT INTO t_dict_region VALUES (1, 'x')", "is not DDL"),
        ("CREATE VIEW v AS SELECT * FROM t_order", "CREATE VIEW is not supported"),
        ("CREATE TABLE t_order (a INT", "cannot parse"),
        ("   \n-- only a comment\n", "holds no statement"),
    ],
)
def test_refusals_name_the_problem(template: str, fragment: str) -> None:
    with pytest.raises(UnsupportedSQLError) as info:
        physical_ddl(order_config(), template)
    assert fragment in info.value.message


def test_unknown_table_message_lists_the_known_ones_and_the_statement() -> None:
    with pytest.raises(UnsupportedSQLError) as info:
        physical_ddl(order_config(), "CREATE TABLE t_dict_region (a INT);\nDROP TABLE t_orders;")
    msg = info.value.message
    assert msg.startswith("statement 2 (line 2): table 't_orders'")
    assert "sharded: t_order, t_order_item" in msg and "broadcast: t_dict_region" in msg
    assert "single: t_config" in msg


def test_unknown_dialect_is_refused() -> None:
    with pytest.raises(UnsupportedSQLError, match="unknown DDL dialect 'oracle'"):
        physical_ddl(order_config(), ORDER_TEMPLATE, dialect="oracle")


def test_postgresql_data_sources_are_refused_by_name() -> None:
    config = load_config({"dataSources": {"pg": "postgresql://h:5432/db"}, "broadcastTables": ["t_b"]})
    with pytest.raises(UnsupportedSQLError, match="data source 'pg' is postgresql"):
        physical_ddl(config, "CREATE TABLE t_b (a INT)")


# -- SQLite translation -----------------------------------------------------------------------


def test_order_template_for_sqlite_splits_out_the_indexes() -> None:
    out = to_sqlite(ORDER_TEMPLATE.replace("t_order", "t_order_2_1", 1))
    assert len(out) == 3
    create, unique, index = out
    assert "COMMENT" not in create and "ENGINE" not in create and "KEY" not in create.replace("PRIMARY KEY", "")
    assert "DECIMAL(18, 2)" in create and "DATETIME(3)" in create
    assert unique == "CREATE UNIQUE INDEX t_order_2_1_uk_order_no ON t_order_2_1 (order_no)"
    assert index == "CREATE INDEX t_order_2_1_idx_user_time ON t_order_2_1 (user_id, create_time)"
    db = sqlite3.connect(":memory:")
    for sql in out:
        db.execute(sql)
    db.close()


def test_sqlite_translation_of_mysql_column_details() -> None:
    sql = (
        "CREATE TABLE IF NOT EXISTS `t_0` (id BIGINT UNSIGNED NOT NULL, "
        "name VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '', "
        "kind ENUM('a','b') DEFAULT 'a', "
        "ct DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3), "
        "PRIMARY KEY (id), UNIQUE KEY uk (name(10)), UNIQUE (kind)) COMMENT='x'"
    )
    out = to_sqlite(sql)
    assert out[1] == 'CREATE UNIQUE INDEX IF NOT EXISTS t_0_uk ON "t_0" (name)'
    flat = " ".join(out[0].split())
    assert "kind TEXT DEFAULT 'a'" in flat and "UNIQUE ( kind )" in flat
    assert "ON UPDATE" not in out[0] and "COLLATE" not in out[0] and "CHARACTER SET" not in out[0]
    db = sqlite3.connect(":memory:")
    for stmt in out:
        db.execute(stmt)
    db.execute("INSERT INTO t_0 (id, name) VALUES (1, 'x')")
    assert db.execute("SELECT kind, ct IS NOT NULL FROM t_0").fetchone() == ("a", 1)
    db.close()


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("CREATE INDEX idx ON t_1 (a, b DESC)", ["CREATE INDEX t_1_idx ON t_1 (a, b DESC)"]),
        ("CREATE UNIQUE INDEX uk ON t_1 (a(8))", ["CREATE UNIQUE INDEX t_1_uk ON t_1 (a)"]),
        ("DROP TABLE IF EXISTS t_1", ["DROP TABLE IF EXISTS t_1"]),
        ("TRUNCATE TABLE t_1", ["DELETE FROM t_1"]),
        ("ALTER TABLE t_1 DROP INDEX idx", ["DROP INDEX t_1_idx"]),
        ("DROP INDEX IF EXISTS idx ON t_1", ["DROP INDEX IF EXISTS t_1_idx"]),
        (
            "ALTER TABLE t_1 ADD COLUMN c INT NOT NULL DEFAULT 0 COMMENT 'x' AFTER b, ADD INDEX idx_c (c), DROP COLUMN d",
            [
                "ALTER TABLE t_1 ADD COLUMN c INT NOT NULL DEFAULT 0",
                "CREATE INDEX t_1_idx_c ON t_1 (c)",
                "ALTER TABLE t_1 DROP COLUMN d",
            ],
        ),
    ],
)
def test_sqlite_translation_of_other_ddl(sql: str, expected: list[str]) -> None:
    assert to_sqlite(sql) == expected


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("ALTER TABLE t_1 MODIFY COLUMN c BIGINT", "no SQLite translation"),
        ("CREATE TABLE t_1 (a TEXT, FULLTEXT KEY ft (a))", "FULLTEXT index 'ft'"),
        ("CREATE TABLE t_1 (a INT AUTO_INCREMENT PRIMARY KEY)", "AUTO_INCREMENT on column 'a'"),
    ],
)
def test_sqlite_translation_refuses_what_sqlite_lacks(sql: str, fragment: str) -> None:
    with pytest.raises(UnsupportedSQLError, match=re.escape(fragment)):
        to_sqlite(sql)


def test_sqlite_refusal_names_statement_and_data_source(tmp_path: Path) -> None:
    config = load_config({"dataSources": {"ds_0": f"sqlite:///{tmp_path}/a.db"}, "broadcastTables": ["t_b"]})
    with pytest.raises(UnsupportedSQLError) as info:
        physical_ddl(config, "CREATE TABLE t_b (a INT);\nALTER TABLE t_b MODIFY a BIGINT")
    assert info.value.message.startswith("statement 2 (line 2): for SQLite data source 'ds_0':")


def test_sqlite_index_name() -> None:
    assert sqlite_index_name("t_order_0_1", "idx_user_time") == "t_order_0_1_idx_user_time"


# -- execution: SQLite -------------------------------------------------------------------------


def _sqlite_config(tmp_path: Path, n: int = 2) -> ShardingConfig:
    urls = {f"ds_{i}": f"sqlite:///{tmp_path}/nested/dir/ds_{i}.db" for i in range(n)}
    return order_config(urls)


def _schema(path: Path) -> dict[str, set[str]]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
    finally:
        db.close()
    out: dict[str, set[str]] = {"table": set(), "index": set()}
    for kind, name in rows:
        out[kind].add(name)
    return out


def test_execute_on_sqlite_files_creates_files_tables_and_indexes(tmp_path: Path) -> None:
    config = _sqlite_config(tmp_path)
    template = ORDER_TEMPLATE + ";\nCREATE TABLE t_dict_region (code VARCHAR(12) PRIMARY KEY);\n"
    statements = physical_ddl(config, template)
    seen: list[tuple[str, str]] = []
    done = execute_ddl(config, statements, echo=lambda ds, sql: seen.append((ds, sql)))
    assert done == len(statements) == 2 * 4 * 3 + 2
    assert seen == [tuple(s) for s in statements]
    for i in range(2):
        schema = _schema(tmp_path / "nested" / "dir" / f"ds_{i}.db")
        assert schema["table"] == {f"t_order_{i}_{t}" for t in range(4)} | {"t_dict_region"}
        assert schema["index"] == {
            f"t_order_{i}_{t}_{name}" for t in range(4) for name in ("uk_order_no", "idx_user_time")
        }
    # the tables work: the unique key is enforced per physical table
    db = sqlite3.connect(tmp_path / "nested" / "dir" / "ds_1.db")
    row = (1, "A1", 7, "12.50", 0, "2024-05-01 00:00:00.000", "2024-05-01 00:00:00.000")
    db.execute("INSERT INTO t_order_1_2 VALUES (?, ?, ?, ?, ?, ?, ?)", row)
    with pytest.raises(sqlite3.IntegrityError):
        db.execute("INSERT INTO t_order_1_2 VALUES (?, ?, ?, ?, ?, ?, ?)", (2, *row[1:]))
    db.close()


def test_execute_failure_names_data_source_and_statement(tmp_path: Path) -> None:
    config = _sqlite_config(tmp_path)
    statements = physical_ddl(config, ORDER_TEMPLATE)
    execute_ddl(config, statements[:1])
    with pytest.raises(ExecutionError) as info:
        execute_ddl(config, statements)
    err = info.value
    assert err.data_source == "ds_0"
    assert err.statement == statements[0].sql
    assert "table t_order_0_0 already exists" in err.message
    assert "statement: CREATE TABLE t_order_0_0 (" in err.message
    assert "0 earlier statements succeeded" in err.message
    assert isinstance(err.__cause__, sqlite3.OperationalError)


def test_execute_on_an_unopenable_sqlite_file_is_data_source_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    config = load_config({"dataSources": {"ds_x": f"sqlite:///{blocker}/a.db"}, "broadcastTables": ["t_b"]})
    with pytest.raises(DataSourceUnavailableError, match="data source 'ds_x'"):
        execute_ddl(config, physical_ddl(config, "CREATE TABLE t_b (a INT)"))


def test_example_schema_executes_on_the_example_config(tmp_path: Path) -> None:
    # examples/orders.yaml names its SQLite files relative to itself: a copy works anywhere
    (tmp_path / "orders.yaml").write_text((ROOT / "examples" / "orders.yaml").read_text(encoding="utf-8"))
    config = load_config(tmp_path / "orders.yaml")
    template = (ROOT / "examples" / "schema.sql").read_text(encoding="utf-8")
    statements = physical_ddl(config, template)
    assert execute_ddl(config, statements) == len(statements)
    assert execute_ddl(config, statements) == len(statements)  # IF NOT EXISTS: rerunnable
    ds0 = _schema(tmp_path / "data" / "ds_0.db")["table"]
    assert {"t_order_0_0", "t_order_item_0_3", "t_dict_region", "t_config"} <= ds0
    assert "t_config" not in _schema(tmp_path / "data" / "ds_1.db")["table"]


# -- execution: MariaDB -----------------------------------------------------------------------

_mariadb = mariadb_connect


@pytest.fixture()
def mariadb_databases() -> Iterator[list[str]]:
    """Two fresh databases ddm_test_<random>_0/1, dropped afterwards."""
    with fresh_mariadb_databases(2) as names:
        yield names


def _maria_config(names: list[str]) -> ShardingConfig:
    urls = {f"ds_{i}": f"mariadb://127.0.0.1:3306/{name}" for i, name in enumerate(names)}
    doc = {
        "dataSources": {ds: {"url": url, "username": "root"} for ds, url in urls.items()},
        "tables": [{"logicTable": "t_order", "shardKey": "user_id", "shardCount": 2, "tablePerShard": 4,
                    "databases": list(urls), "keyGenerator": {"column": "id", "type": "snowflake"}}],
        "broadcastTables": ["t_dict_region"],
    }
    return load_config(doc)


def test_execute_on_mariadb(mariadb_databases: list[str]) -> None:
    config = _maria_config(mariadb_databases)
    template = (
        ORDER_TEMPLATE + ";\nCREATE INDEX idx_status ON t_order (status);\n"
        "CREATE TABLE t_dict_region (code VARCHAR(12) PRIMARY KEY, name VARCHAR(64) COMMENT '名称');\n"
    )
    statements = physical_ddl(config, template)
    assert len(statements) == 8 + 8 + 2
    assert execute_ddl(config, statements) == 18
    conn = _mariadb()
    try:
        with conn.cursor() as cur:
            for i, name in enumerate(mariadb_databases):
                cur.execute(
                    "SELECT table_name, table_comment FROM information_schema.tables WHERE table_schema = %s "
                    "ORDER BY table_name",
                    (name,),
                )
                assert [r[0] for r in cur.fetchall()] == ["t_dict_region", *(f"t_order_{i}_{t}" for t in range(4))]
                cur.execute(
                    "SELECT DISTINCT index_name FROM information_schema.statistics "
                    "WHERE table_schema = %s AND table_name = %s",
                    (name, f"t_order_{i}_3"),
                )
                assert {r[0] for r in cur.fetchall()} == {"PRIMARY", "uk_order_no", "idx_user_time", "idx_status"}
                cur.execute(
                    "SELECT column_comment FROM information_schema.columns WHERE table_schema = %s "
                    "AND table_name = 't_order_{}_0' AND column_name = 'id'".format(i),
                    (name,),
                )
                assert cur.fetchone() == ("全局ID",)  # the template's text arrives unchanged
    finally:
        conn.close()
    # a second run fails on the first statement and says where
    with pytest.raises(ExecutionError) as info:
        execute_ddl(config, statements)
    assert info.value.data_source == "ds_0"
    assert "t_order_0_0" in info.value.message and "already exists" in info.value.message


def test_mariadb_connection_failure_names_the_data_source() -> None:
    _mariadb().close()
    missing = f"ddm_test_{uuid.uuid4().hex[:10]}_missing"
    config = load_config({
        "dataSources": {"ds_m": {"url": f"mysql://127.0.0.1:3306/{missing}", "username": "root"}},
        "broadcastTables": ["t_b"],
    })
    with pytest.raises(DataSourceUnavailableError) as info:
        execute_ddl(config, physical_ddl(config, "CREATE TABLE t_b (a INT)"))
    assert "data source 'ds_m'" in info.value.message and missing in info.value.message


def test_mariadb_password_variable_must_be_set_to_execute(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DDM_TEST_UNSET_PASSWORD", raising=False)
    config = load_config(
        {"dataSources": {"ds_m": {"url": "mysql://127.0.0.1:3306/x", "username": "root",
                                  "passwordEnv": "DDM_TEST_UNSET_PASSWORD"}},
         "broadcastTables": ["t_b"]},
        check_env=False,
    )
    with pytest.raises(DdmError, match="DDM_TEST_UNSET_PASSWORD"):
        execute_ddl(config, physical_ddl(config, "CREATE TABLE t_b (a INT)"))


def test_index_lifecycle_on_sqlite(tmp_path: Path) -> None:
    config = _sqlite_config(tmp_path, n=1)
    template = (
        "CREATE TABLE t_order (id BIGINT PRIMARY KEY, user_id BIGINT, status TINYINT);\n"
        "CREATE INDEX idx_status ON t_order (status);\n"
        "ALTER TABLE t_order ADD COLUMN remark VARCHAR(64) NULL COMMENT 'x', ADD KEY idx_remark (remark(8));\n"
        "DROP INDEX idx_status ON t_order;\n"
    )
    execute_ddl(config, physical_ddl(config, template))
    schema = _schema(tmp_path / "nested" / "dir" / "ds_0.db")
    assert schema["index"] == {f"t_order_0_{t}_idx_remark" for t in range(4)}
    execute_ddl(config, physical_ddl(config, "DROP TABLE t_order"))
    assert _schema(tmp_path / "nested" / "dir" / "ds_0.db") == {"table": set(), "index": set()}
