"""The logical ``SHOW TABLES`` on each backend: the dialect's table listing, literals and byte order.

The router writes each unit's listing from what its data source's dialect answers
(``Dialect.listed_tables``, ``string_literal``, ``binary_order``), never by testing backend
names; these answers are checked on the real servers, and the whole statement on SQLite files.
(The MariaDB statement end to end: tests/test_shardingsphere_mariadb.py.)
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from ddm_core import Executor, load_config
from ddm_core.dialects import Dialect, dialect_for
from services import require_module, require_service

MARIADB_SERVER = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
SQLITE, MARIADB = dialect_for("sqlite"), dialect_for("mariadb")
#: Names a SHOW TABLES literal may have to spell: a backslash, a quote, LIKE's wildcards.
AWKWARD = ["t_a\\b", "o'clock", "100%_done", "plain"]


@pytest.fixture()
def mariadb() -> Iterator[Any]:
    """An autocommit connection to a fresh database, dropped afterwards."""
    pymysql: Any = require_module("pymysql", "the MariaDB listing tests")
    try:
        admin = pymysql.connect(**MARIADB_SERVER, autocommit=True, connect_timeout=2)
    except pymysql.MySQLError as exc:
        require_service("MariaDB on 127.0.0.1:3306", str(exc))
    name = f"ddm_test_{uuid.uuid4().hex[:10]}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    conn = pymysql.connect(**MARIADB_SERVER, database=name, autocommit=True)
    try:
        yield conn
    finally:
        conn.close()
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


def _rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    cur.execute(sql)
    return [tuple(r) for r in cur.fetchall()]


def _check_answers(conn: Any, dialect: Dialect) -> None:
    for text in AWKWARD:
        assert _rows(conn, f"SELECT {dialect.string_literal(text)}") == [(text,)]
    for ddl in ("CREATE TABLE t_b (id INTEGER PRIMARY KEY AUTOINCREMENT)", "CREATE TABLE `B_a` (id INT)",
                "CREATE VIEW v_a AS SELECT id FROM t_b"):
        _rows(conn, ddl.replace(" AUTOINCREMENT", "") if dialect is MARIADB else ddl)
    name, kind, tables = dialect.listed_tables()
    listed = _rows(conn, f"SELECT {name}, {kind} {tables} ORDER BY {dialect.binary_order(name)}")
    # SQLite's own sqlite_sequence is not listed; bytes order: upper case first.
    assert listed == [("B_a", "BASE TABLE"), ("t_b", "BASE TABLE"), ("v_a", "VIEW")]


def test_sqlite_lists_its_tables_and_spells_literals(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "one.db", isolation_level=None)
    try:
        _check_answers(conn, SQLITE)
    finally:
        conn.close()


def test_mariadb_lists_its_tables_and_spells_literals(mariadb: Any) -> None:
    _check_answers(mariadb, MARIADB)


def test_show_tables_on_sqlite_files_answers_logic_names(tmp_path: Path) -> None:
    """Physical tables map to their logic names on every file; the default data source adds its own tables."""
    urls = {f"ds_{i}": f"sqlite:///{tmp_path / f'ds_{i}.db'}" for i in range(2)}
    config = load_config({
        "name": "shop",
        "dataSources": urls,
        "defaultDataSource": "ds_0",
        "tables": [{"logicTable": "t_order", "shardKey": "user_id", "algorithm": "mod", "shardCount": 2,
                    "tablePerShard": 2, "databases": ["ds_0", "ds_1"]}],
    })
    with Executor(config, load_schema=False) as ex:
        ex.execute("CREATE TABLE t_order (order_id INTEGER PRIMARY KEY, user_id INTEGER)").close()
        own = sqlite3.connect(tmp_path / "ds_0.db", isolation_level=None)
        own.execute("CREATE TABLE `t_a\\b` (id INT)")  # unconfigured: it lives on the default data source
        own.execute("CREATE VIEW v_note AS SELECT 1 AS one")
        own.close()
        assert ex.execute("SHOW TABLES").fetchall() == [("t_a\\b",), ("t_order",), ("v_note",)]
        full = ex.execute("SHOW FULL TABLES WHERE Table_type = 'VIEW'")
        assert [d[0] for d in full.description] == ["Tables_in_shop", "Table_type"]
        assert full.fetchall() == [("v_note", "VIEW")]
        # LIKE filters logic names with SQLite's pattern rules (no escape character).
        assert ex.execute("SHOW TABLES LIKE 't_o%'").fetchall() == [("t_order",)]
