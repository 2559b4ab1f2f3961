"""ShardingSphere parity on real MariaDB (127.0.0.1:3306): suffixed constraint names, logical SHOW statements.

Two fresh databases ``ddm_test_<random>_0/1`` (dropped afterwards) hold a logic
schema ``shop_db``: ``t_order`` and its bound ``t_order_item`` over 2 databases
× 2 tables, a broadcast ``t_region``. The suite checks on the servers that

* the physical tables of one data source can each carry "the same" foreign key:
  the constraint names are suffixed per physical table (MariaDB itself refuses a
  second ``fk_item_order`` in one database, errno 121), and they can be dropped
  and added again by their logical name;
* ``SHOW TABLES`` / ``SHOW COLUMNS`` / ``SHOW INDEX`` with the logical schema
  answer as one unsharded ``shop_db`` would;
* a ``SHARDINGSPHERE_HINT`` pass-through runs the statement as written.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from ddm_core.ddl import execute_ddl, physical_ddl
from ddm_core.execute import Executor
from ddm_core.metadata import load_config
from ddm_core.metadata.model import ShardingConfig
from services import fresh_mariadb_databases, mariadb_connect, require_module


SCHEMA = """
CREATE TABLE t_order (order_id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, UNIQUE KEY uk_user (user_id, order_id));
CREATE TABLE t_order_item (
  item_id BIGINT PRIMARY KEY, order_id BIGINT NOT NULL, user_id BIGINT NOT NULL, qty INT NOT NULL,
  CONSTRAINT fk_item_order FOREIGN KEY (order_id) REFERENCES t_order (order_id),
  CONSTRAINT chk_qty CHECK (qty > 0)
);
CREATE TABLE t_region (code VARCHAR(8) PRIMARY KEY, name VARCHAR(32));
"""


_connect = mariadb_connect


@pytest.fixture()
def databases() -> Iterator[list[str]]:
    with fresh_mariadb_databases(2) as names:
        yield names


def shop_config(names: list[str]) -> ShardingConfig:
    sources = {f"ds_{i}": {"url": f"mariadb://127.0.0.1:3306/{n}", "username": "root"} for i, n in enumerate(names)}
    return load_config({
        "name": "shop_db",
        "dataSources": sources,
        "tables": [
            {"logicTable": "t_order", "shardKey": "user_id", "shardCount": 2, "tablePerShard": 2,
             "databases": list(sources)},
            {"logicTable": "t_order_item", "bindTo": "t_order"},
        ],
        "broadcastTables": ["t_region"],
        "defaultDataSource": "ds_0",
    })


def _constraints(db: str) -> set[tuple[str, str, str]]:
    conn = _connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT table_name, constraint_name, constraint_type FROM information_schema.table_constraints "
                "WHERE constraint_schema = %s AND constraint_type IN ('FOREIGN KEY', 'CHECK')",
                (db,),
            )
            return {tuple(r) for r in cur.fetchall()}
    finally:
        conn.close()


def _expected(d: int, kinds: tuple[str, ...] = ("FOREIGN KEY", "CHECK")) -> set[tuple[str, str, str]]:
    """``fk_item_order`` / ``chk_qty`` of every physical t_order_item of database ``d``: name + '_' + table."""
    out = set()
    for t in range(2):
        table = f"t_order_item_{d}_{t}"
        if "FOREIGN KEY" in kinds:
            out.add((table, f"fk_item_order_{table}", "FOREIGN KEY"))
        if "CHECK" in kinds:
            out.add((table, f"chk_qty_{table}", "CHECK"))
    return out


def test_same_constraint_name_on_tables_of_one_node(databases: list[str]) -> None:
    config = shop_config(databases)
    assert execute_ddl(config, physical_ddl(config, SCHEMA)) == 4 + 4 + 2
    for d, db in enumerate(databases):
        assert _constraints(db) == _expected(d)
        conn = _connect()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT table_name, referenced_table_name FROM information_schema.referential_constraints "
                    "WHERE constraint_schema = %s ORDER BY table_name",
                    (db,),
                )
                # each physical item table references the order table of its own node
                assert cur.fetchall() == tuple((f"t_order_item_{d}_{t}", f"t_order_{d}_{t}") for t in range(2))
        finally:
            conn.close()

    # dropped and added again by the logical name
    execute_ddl(config, physical_ddl(config, "ALTER TABLE t_order_item DROP FOREIGN KEY fk_item_order"))
    assert all(_constraints(db) == _expected(d, ("CHECK",)) for d, db in enumerate(databases))
    execute_ddl(config, physical_ddl(
        config, "ALTER TABLE t_order_item ADD CONSTRAINT fk_item_order FOREIGN KEY (order_id) REFERENCES t_order (order_id)"
    ))
    assert all(_constraints(db) == _expected(d) for d, db in enumerate(databases))


def test_the_server_refuses_one_foreign_key_name_twice_per_database(databases: list[str]) -> None:
    """Why the suffix: without it the second physical table of a node cannot be created."""
    pymysql: Any = require_module("pymysql", "the MariaDB ShardingSphere-parity tests")
    conn = _connect(database=databases[0])
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE t_order_0_0 (order_id BIGINT PRIMARY KEY)")
            cur.execute("CREATE TABLE t_order_item_0_0 (order_id BIGINT, CONSTRAINT fk_item_order FOREIGN KEY "
                        "(order_id) REFERENCES t_order_0_0 (order_id))")
            with pytest.raises(pymysql.MySQLError) as info:
                cur.execute("CREATE TABLE t_order_item_0_1 (order_id BIGINT, CONSTRAINT fk_item_order FOREIGN KEY "
                            "(order_id) REFERENCES t_order_0_0 (order_id))")
            assert "121" in str(info.value)
    finally:
        conn.close()


def test_show_statements_answer_for_the_logical_schema(databases: list[str]) -> None:
    config = shop_config(databases)
    execute_ddl(config, physical_ddl(config, SCHEMA))
    conn = _connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE `{databases[0]}`.t_extra (a INT)")  # unknown: lives in the default source
            cur.execute(f"CREATE TABLE `{databases[1]}`.t_stray (a INT)")  # unknown, elsewhere: not routable
            cur.execute(f"CREATE VIEW `{databases[0]}`.v_orders AS SELECT order_id FROM `{databases[0]}`.t_order_0_0")
    finally:
        conn.close()
    with Executor(config) as ex:
        result = ex.execute("SHOW TABLES")
        assert result.description[0][0] == "Tables_in_shop_db"
        assert [r[0] for r in result.fetchall()] == ["t_extra", "t_order", "t_order_item", "t_region", "v_orders"]
        assert [r[0] for r in ex.execute("SHOW TABLES LIKE %s", ["t\\_order%"]).fetchall()] == [
            "t_order", "t_order_item"]
        like = ex.execute("SHOW TABLES FROM shop_db LIKE 't_r%'")
        assert like.description[0][0] == "Tables_in_shop_db (t_r%)" and like.fetchall() == [("t_region",)]
        assert ex.execute("SHOW FULL TABLES WHERE Table_type = 'VIEW'").fetchall() == [("v_orders", "VIEW")]
        where = ex.execute("SHOW TABLES WHERE Tables_in_shop_db LIKE 't%' -- the sort must survive this comment")
        assert [r[0] for r in where.fetchall()] == ["t_extra", "t_order", "t_order_item", "t_region"]
        full = ex.execute("SHOW FULL TABLES IN shop_db").fetchall()
        assert dict(full) == {"t_extra": "BASE TABLE", "t_order": "BASE TABLE", "t_order_item": "BASE TABLE",
                              "t_region": "BASE TABLE", "v_orders": "VIEW"}
        columns = ex.execute("SHOW COLUMNS FROM t_order FROM shop_db").fetchall()
        assert [c[0] for c in columns] == ["order_id", "user_id"]
        # SHOW INDEX answers as the logic table: its name, and the index InnoDB named after the foreign key (the
        # constraint's suffixed name, fk_item_order_t_order_item_0_0) under the constraint's own name
        index = ex.execute("SHOW INDEX FROM shop_db.t_order_item").fetchall()
        assert {r[0] for r in index} == {"t_order_item"} and {"PRIMARY", "fk_item_order"} <= {r[2] for r in index}
        assert [r[4] for r in index if r[2] == "fk_item_order"] == ["order_id"], index
        assert {r[0] for r in ex.execute("SHOW INDEX FROM t_region").fetchall()} == {"t_region"}  # broadcast
        # SHOW CREATE TABLE answers as the logic table (route/ddl/logic_ddl.py): its name, constraint names
        # without the physical table's suffix
        (name, text), = ex.execute("SHOW CREATE TABLE shop_db.t_order").fetchall()
        assert name == "t_order" and text.startswith("CREATE TABLE `t_order` (") and "t_order_0" not in text
        (name, text), = ex.execute("SHOW CREATE TABLE shop_db.t_order_item").fetchall()
        assert name == "t_order_item" and "CONSTRAINT `fk_item_order` FOREIGN KEY" in text, text
        assert "REFERENCES `t_order` (`order_id`)" in text and "t_order_0" not in text, text  # the bound logic table
        ex.execute("INSERT INTO shop_db.t_region (code, name) VALUES ('eu', 'Europe')").close()
        assert ex.execute("SELECT name FROM shop_db.t_region WHERE code = 'eu'").fetchall() == [("Europe",)]
        stray = ex.execute("/* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds_1, SKIP_SQL_REWRITE=true */ "
                           "SELECT COUNT(*) FROM t_stray")
        assert stray.fetchall() == [(0,)]
