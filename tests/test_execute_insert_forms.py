"""End to end through ``ddm_core.Executor``: table metadata loaded at start, INSERT without a column
list (multi-row, REPLACE, ON DUPLICATE KEY UPDATE, NULL keys), INSERT ... SET, INSERT ... SELECT per
node and string values of integer shard columns — each result compared with the same statements on
one unsharded table (rows and their Python types), on MariaDB and on SQLite.
"""

from __future__ import annotations

import logging
import sqlite3
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest

from ddm_core import load_config
from ddm_core.errors import UnsupportedSQLError
from ddm_core.execute import Executor
from ddm_core.route.table_schema import TableSchema

from services import require_module
from ports import free_port
from test_execute_support import assert_no_leaks, mysql_raw, sharding_config

ORDER_DDL = ("CREATE TABLE t_order (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, "
             "amount DECIMAL(10,2) NOT NULL DEFAULT 0, note VARCHAR(40))")
ITEM_DDL = ("CREATE TABLE t_order_item (item_id BIGINT NOT NULL PRIMARY KEY, order_id BIGINT NOT NULL, "
            "user_id BIGINT NOT NULL, qty INT NOT NULL DEFAULT 1)")
USERS = list(range(1, 13))


def config_dict(urls: dict[str, Any]) -> dict[str, Any]:
    """``t_order`` over the data sources × 2 tables (SLOTS, then HASH_MOD), ``t_order_item`` bound to it."""
    spec = sharding_config(urls, tables=2)
    spec["tables"].append({"logicTable": "t_order_item", "bindTo": "t_order",
                           "keyGenerator": {"column": "item_id", "type": "snowflake"}})
    return spec


class Reference:
    """The same statements on one unsharded copy of the tables."""

    def __init__(self, run: Callable[[str, Sequence[Any]], tuple[int, list[tuple[Any, ...]]]], style: str) -> None:
        self.run = run
        self.style = style


def statements(style: str, mysql: bool) -> list[tuple[str, list[Any]]]:
    """The workload: written once, with ``%s`` (MariaDB) or ``?`` (SQLite) placeholders."""
    p = "%s" if style == "format" else "?"
    rows = [(100 + u, u, Decimal(u) + Decimal("0.25"), f"u{u}") for u in USERS]
    work: list[tuple[str, list[Any]]] = [
        (f"INSERT INTO t_order VALUES {', '.join([f'({p}, {p}, {p}, {p})'] * len(rows))}", [v for r in rows for v in r]),
        (f"REPLACE INTO t_order VALUES ({p}, {p}, 7.5, 'replaced')", [103, 3]),
        (f"INSERT INTO t_order SET order_id = {p}, user_id = {p}, amount = {p}, note = 'set, (1)'", [201, "5", 2]),
        (f"REPLACE INTO t_order SET order_id = {p}, user_id = {p}, note = 'replace-set'", [202, 6]),
        (f"INSERT INTO t_order_item VALUES ({p}, {p}, {p}, {p}), ({p}, {p}, {p}, {p}), ({p}, {p}, {p}, {p})",
         [1, 101, 1, 3, 2, 102, 2, 4, 3, 110, 10, 5]),
        ("INSERT INTO t_order (order_id, user_id, amount, note) SELECT item_id + 1000, user_id, qty, 'copied' "
         "FROM t_order_item WHERE user_id IN (1, 2, 10)", []),
        ("INSERT INTO t_order (order_id, user_id, amount, note) SELECT order_id + 5000, user_id, amount, 'again' "
         "FROM t_order WHERE note LIKE 'u1%'", []),
        (f"UPDATE t_order SET amount = amount + 1 WHERE user_id = {p}", ["8"]),
        ("DELETE FROM t_order WHERE user_id = '9'", []),
    ]
    if mysql:
        work += [
            (f"INSERT INTO t_order VALUES ({p}, {p}, 1, 'dup') ON DUPLICATE KEY UPDATE amount = amount + VALUES(amount)",
             [104, 4]),
            (f"INSERT INTO t_order SET order_id = {p}, user_id = {p}, amount = 3 ON DUPLICATE KEY UPDATE note = 'dup-set'",
             [201, 5]),
        ]
    return work


def run_and_compare(ex: Executor, ref: Reference, mysql: bool) -> None:
    for sql, params in statements(ref.style, mysql):
        with ex.execute(sql, params or None) as result:  # no params: '%' is modulo, as in PyMySQL
            got = result.rowcount
        want, _ = ref.run(sql, params)
        assert got == want, (sql, got, want)
    # NULL keys get generated keys; the reference gets the same statement with those keys.
    p = "%s" if ref.style == "format" else "?"
    with ex.execute(f"INSERT INTO t_order VALUES (NULL, {p}, 4, 'generated'), ({p}, {p}, 5, 'generated')",
                    [11, None, 12]) as result:
        keys = result.generated_keys
    assert len(keys) == 2 and len(set(keys)) == 2
    ref.run(f"INSERT INTO t_order VALUES ({p}, {p}, 4, 'generated'), ({p}, {p}, 5, 'generated')",
            [keys[0], 11, keys[1], 12])
    _, everything = ref.run("SELECT note, COUNT(*) FROM t_order GROUP BY note ORDER BY note", [])
    # What the workload leaves (so the comparisons below compare something): user 3's row replaced,
    # user 9's deleted, 3 rows copied from the items, the 4 'u1%' rows copied again, the SET row
    # renamed by its ON DUPLICATE KEY UPDATE on MariaDB.
    expected = {"again": 4, "copied": 3, "generated": 2, "replace-set": 1, "replaced": 1,
                ("dup-set" if mysql else "set, (1)"): 1, **{f"u{u}": 1 for u in USERS if u not in (3, 9)}}
    assert dict(everything) == expected
    for query, params in [
        ("SELECT order_id, user_id, amount, note FROM t_order ORDER BY order_id", []),
        ("SELECT item_id, order_id, user_id, qty FROM t_order_item ORDER BY item_id", []),
        (f"SELECT order_id, user_id, amount, note FROM t_order WHERE user_id = {p} ORDER BY order_id", ["10"]),
        (f"SELECT COUNT(*), SUM(amount) FROM t_order WHERE user_id IN ({p}, '11', 12)", ["1"]),
    ]:
        with ex.execute(query, params or None) as result:
            got_rows = [tuple(r) for r in result.fetchall()]
        _, want_rows = ref.run(query, params)
        assert got_rows == want_rows, query
        assert [tuple(type(v) for v in r) for r in got_rows] == [tuple(type(v) for v in r) for r in want_rows], query
    assert got_rows and got_rows[0][0] > 0


def check_placement(ex: Executor, read_node: Callable[[str, str, int], int]) -> None:
    """Every user's rows are on the node a point query for that user routes to — and only there."""
    total = 0
    for user in USERS:
        (unit,) = ex.router.route("SELECT * FROM t_order WHERE user_id = %s", [user]).units
        physical = dict(unit.tables)["t_order"]
        with ex.execute("SELECT COUNT(*) FROM t_order WHERE user_id = %s", [user]) as result:
            (count,) = result.fetchone()  # type: ignore[misc]
        assert read_node(unit.data_source, physical, user) == count
        total += count
    with ex.execute("SELECT COUNT(*) FROM t_order") as result:
        assert result.fetchone() == (total,)


# -- MariaDB ------------------------------------------------------------------------------------------


@pytest.fixture()
def mariadb() -> Iterator[tuple[list[str], str]]:
    """Two sharded databases and one unsharded reference, uniquely named; dropped afterwards."""
    tag = uuid.uuid4().hex[:8]
    names = [f"ddm_insf_{tag}_{i}" for i in range(2)]
    reference = f"ddm_insf_{tag}_ref"
    conn = mysql_raw()
    with conn.cursor() as cur:
        for name in (*names, reference):
            cur.execute(f"CREATE DATABASE {name}")
    try:
        yield names, reference
    finally:
        with conn.cursor() as cur:
            for name in (*names, reference):
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.close()


def mysql_urls(names: list[str]) -> dict[str, Any]:
    return {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(names)}


def test_mariadb_schema_loaded_at_start_and_results_match_one_table(mariadb: tuple[list[str], str]) -> None:
    names, reference = mariadb
    config = load_config(config_dict(mysql_urls(names)))
    with Executor(config, load_schema=False) as setup:
        assert dict(setup.router.schemas) == {}
        setup.execute(ORDER_DDL).close()
        setup.execute(ITEM_DDL).close()
        with pytest.raises(UnsupportedSQLError, match="load_schema"):
            setup.execute("INSERT INTO t_order VALUES (1, 1, 1, 'x')")
    ref_conn = mysql_raw(reference)
    with ref_conn.cursor() as cur:
        cur.execute(ORDER_DDL)
        cur.execute(ITEM_DDL)

    def run(sql: str, params: Sequence[Any]) -> tuple[int, list[tuple[Any, ...]]]:
        with ref_conn.cursor() as cur:
            count = cur.execute(sql, params or None)
            return count, [tuple(r) for r in cur.fetchall()] if cur.description else []

    ex = Executor(config, timeout=10.0)
    try:
        schema = ex.router.schemas["t_order"]
        assert schema.names == ("order_id", "user_id", "amount", "note")
        assert [c.type for c in schema.columns] == ["bigint(20)", "bigint(20)", "decimal(10,2)", "varchar(40)"]
        assert schema.primary_key == ("order_id",) and schema.origin == f"ds_0.{config.table('t_order').data_nodes[0].table}"  # type: ignore[union-attr]
        assert ex.router.schemas["t_order_item"].names == ("item_id", "order_id", "user_id", "qty")
        plan = ex.router.route("INSERT INTO t_order (order_id, user_id, amount, note) SELECT item_id, user_id, qty, 'x' "
                               "FROM t_order_item WHERE user_id IN (1, 2, 10)")
        assert len(plan.units) > 1  # the INSERT ... SELECT below really runs per node
        run_and_compare(ex, Reference(run, "format"), mysql=True)

        def read_node(ds: str, table: str, user: int) -> int:
            conn = mysql_raw(names[int(ds.split("_")[1])])
            try:
                with conn.cursor() as cur:
                    cur.execute(f"SELECT COUNT(*) FROM {table} WHERE user_id = %s", (user,))
                    return int(cur.fetchone()[0])
            finally:
                conn.close()

        check_placement(ex, read_node)
        assert_no_leaks(ex)
        assert ex.borrowed() == 0
    finally:
        ex.close()
        ref_conn.close()


def test_a_data_source_down_at_start_does_not_stop_the_executor(mariadb: tuple[list[str], str],
                                                               caplog: pytest.LogCaptureFixture) -> None:
    names, _ = mariadb
    urls = {"ds_0": mysql_urls(names)["ds_0"],
            "ds_1": {"url": f"mysql://127.0.0.1:{free_port()}/nowhere", "username": "root", "password": ""}}
    spec = sharding_config(urls, tables=1)
    spec["tables"].append({"logicTable": "t_far", "shardKey": "user_id", "algorithm": "MOD",
                           "databases": ["ds_1", "ds_0"]})  # its first data node is on the data source that is down
    config = load_config(spec)
    conn = mysql_raw(names[0])
    with conn.cursor() as cur:
        cur.execute(ORDER_DDL.replace("t_order", config.table("t_order").data_nodes[0].table))  # type: ignore[union-attr]
    conn.close()
    with caplog.at_level(logging.WARNING, logger="ddm_core.execute"):
        ex = Executor(config)
    try:
        assert set(ex.router.schemas) == {"t_order"}
        assert any("'ds_1'" in r.getMessage() and "'t_far'" in r.getMessage() for r in caplog.records)
        with pytest.raises(UnsupportedSQLError, match="'t_far'.*without a column list"):
            ex.router.route("INSERT INTO t_far VALUES (1, 2)")
        plan = ex.router.route("INSERT INTO t_order VALUES (NULL, %s, 1, 'x')", [5])
        assert "(order_id, user_id, amount, note)" in plan.units[0].sql and len(plan.generated_keys) == 1
        assert ex.borrowed() == 0
    finally:
        ex.close()


# -- SQLite -----------------------------------------------------------------------------------------------


def test_sqlite_schema_loaded_at_start_and_results_match_one_table(tmp_path: Path) -> None:
    urls = {f"ds_{i}": f"sqlite:///{tmp_path / f'ds_{i}.db'}" for i in range(2)}
    config = load_config(config_dict(urls))
    with Executor(config, load_schema=False) as setup:
        setup.execute(ORDER_DDL).close()
        setup.execute(ITEM_DDL).close()
    ref_conn = sqlite3.connect(tmp_path / "reference.db", isolation_level=None)
    ref_conn.execute(ORDER_DDL)
    ref_conn.execute(ITEM_DDL)

    def run(sql: str, params: Sequence[Any]) -> tuple[int, list[tuple[Any, ...]]]:
        # The reference runs what SQLite itself accepts: the column-list form of INSERT ... SET.
        plain = sql.replace("INSERT INTO t_order SET order_id = ?, user_id = ?, amount = ?, note = 'set, (1)'",
                            "INSERT INTO t_order (order_id, user_id, amount, note) VALUES (?, ?, ?, 'set, (1)')")
        plain = plain.replace("REPLACE INTO t_order SET order_id = ?, user_id = ?, note = 'replace-set'",
                              "REPLACE INTO t_order (order_id, user_id, note) VALUES (?, ?, 'replace-set')")
        # Decimal as text, converted per call: never a process-wide sqlite3 adapter.
        cur = ref_conn.execute(plain, [str(v) if isinstance(v, Decimal) else v for v in params])
        rows = [tuple(r) for r in cur.fetchall()] if cur.description else []
        return cur.rowcount, rows

    ex = Executor(config, timeout=10.0)
    try:
        schema = ex.router.schemas["t_order"]
        assert schema.names == ("order_id", "user_id", "amount", "note") and schema.primary_key == ("order_id",)
        assert schema.column("user_id").is_integer and not schema.column("note").is_integer  # type: ignore[union-attr]
        run_and_compare(ex, Reference(run, "qmark"), mysql=False)

        def read_node(ds: str, table: str, user: int) -> int:
            conn = sqlite3.connect(tmp_path / f"{ds}.db")
            try:
                return int(conn.execute(f"SELECT COUNT(*) FROM {table} WHERE user_id = ?", (user,)).fetchone()[0])
            finally:
                conn.close()

        check_placement(ex, read_node)
        assert_no_leaks(ex)
    finally:
        ex.close()
        ref_conn.close()


def test_schemas_given_by_hand_and_reloaded(tmp_path: Path) -> None:
    """``load_schemas`` again after DDL: the router drops the plans built on the old columns."""
    from ddm_core.execute.schema_load import load_schemas

    urls = {f"ds_{i}": f"sqlite:///{tmp_path / f'ds_{i}.db'}" for i in range(2)}
    config = load_config(config_dict(urls))
    with Executor(config) as ex:
        assert dict(ex.router.schemas) == {}  # no tables yet: nothing to load, and the start went on
        ex.execute(ORDER_DDL).close()
        ex.router.set_schemas(load_schemas(ex.config))
        ex.execute("INSERT INTO t_order VALUES (?, ?, ?, ?)", [1, 5, 2, "a"]).close()
        ex.execute("ALTER TABLE t_order ADD COLUMN extra INT").close()
        with pytest.raises(UnsupportedSQLError, match="has 4"):
            ex.execute("INSERT INTO t_order VALUES (?, ?, ?, ?, ?)", [2, 5, 2, "b", 9])
        ex.router.set_schemas(load_schemas(ex.config))
        assert isinstance(ex.router.schemas["t_order"], TableSchema)
        ex.execute("INSERT INTO t_order VALUES (?, ?, ?, ?, ?)", [2, 5, 2, "b", 9]).close()
        with ex.execute("SELECT order_id, extra FROM t_order WHERE user_id = '5' ORDER BY order_id") as result:
            assert result.fetchall() == [(1, None), (2, 9)]


# -- PostgreSQL (optional driver) -------------------------------------------------------------------------


def test_postgresql_schema_loaded_at_start() -> None:
    psycopg = require_module("psycopg", "psycopg 3, the optional PostgreSQL driver")
    logic = f"t_pgs_{uuid.uuid4().hex[:8]}"
    config = load_config({
        "dataSources": {"ds_0": {"url": "postgresql://127.0.0.1:5432/test", "username": "postgres"}},
        "tables": [{"logicTable": logic, "shardKey": "user_id", "databases": ["ds_0"]}],
    })
    physical = config.table(logic).data_nodes[0].table  # type: ignore[union-attr]
    conn = psycopg.connect("host=127.0.0.1 dbname=test user=postgres", connect_timeout=2, autocommit=True)
    conn.execute(f"CREATE TABLE {physical} (note TEXT, id BIGINT, user_id INTEGER NOT NULL, PRIMARY KEY (user_id, id))")
    try:
        with Executor(config, timeout=5.0) as ex:
            schema = ex.router.schemas[logic]
            assert schema.names == ("note", "id", "user_id") and schema.primary_key == ("user_id", "id")
            assert [c.type for c in schema.columns] == ["text", "bigint", "integer"]
            assert schema.column("user_id").is_integer  # type: ignore[union-attr]
            ex.execute(f"INSERT INTO {logic} VALUES (%s, %s, %s), ('b', 2, 5)", ["a", 1, "5"]).close()
            with ex.execute(f"SELECT note, id FROM {logic} WHERE user_id = %s ORDER BY id", ["5"]) as result:
                assert result.fetchall() == [("a", 1), ("b", 2)]
            assert_no_leaks(ex)
    finally:
        conn.execute(f"DROP TABLE {physical}")
        conn.close()
