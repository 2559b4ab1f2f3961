"""Cross-node queries through ``ddm proxy``: PyMySQL, the ``mariadb`` command line, PREVIEW, prepared statements.

One proxy subprocess over two fresh MariaDB databases holding the cross-node
tables of tests/crossnode_support.py, and a third database holding the same
rows unsharded: what a client gets through the proxy is what the same client
gets from that one database (docs/cross-node-queries.md, docs/proxy.md).
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, mariadb_connect, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from ddm_core import load_config  # noqa: E402
from ddm_core.execute import Executor  # noqa: E402
from crossnode_support import (  # noqa: E402
    JOIN_PARAMS, JOINS, STRATEGIES, create, crossnode_config, key_on, on_reference, reset,
)
from test_oracle import MariaDBBackend  # noqa: E402
from test_proxy_prepared import _connect, _run, _typed  # noqa: E402
from test_proxy_support import ProxyProcess, connect, mariadb_cli, proxy_config, write_config  # noqa: E402

Setup = tuple[ProxyProcess, MariaDBBackend, dict[str, Any]]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """The proxy, the executor and reference its rows were loaded through, and its configuration."""
    with fresh_mariadb_databases(3) as databases:
        config = proxy_config(databases[:2])  # the proxy's users and batch size, over two shards
        tables = crossnode_config(config["dataSources"])
        config.update(tables=tables["tables"], runtime=tables["runtime"])
        reference = mariadb_connect(database=databases[2])
        executor = Executor(load_config(config), timeout=20.0)
        try:
            backend = MariaDBBackend(executor, reference)
            create(backend)
            proxy = ProxyProcess(write_config(config, tmp_path_factory.mktemp("crossnode") / "proxy.yaml")).start()
            try:
                yield proxy, backend, config
            finally:
                proxy.stop()
        finally:
            executor.close()
            reference.close()


@pytest.fixture()
def proxy(setup: Setup) -> ProxyProcess:
    """The module's proxy, with the tables back to their rows (sharded and in the reference)."""
    reset(setup[1])
    return setup[0]


def rows_of(cursor: Any) -> list[str]:
    """A result as a multiset of rows, values with their Python types."""
    return sorted(repr(tuple(row)) for row in cursor.fetchall())


@pytest.mark.parametrize("sql", JOINS)
def test_pymysql_gets_the_unsharded_rows(proxy: ProxyProcess, setup: Setup, sql: str) -> None:
    backend = setup[1]
    params = JOIN_PARAMS.get(sql)
    conn = connect(proxy.port, autocommit=True)
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql, params)
            got_names = [d[0] for d in cursor.description]
            got = rows_of(cursor)
    finally:
        conn.close()
    want_names, want = backend.ref(sql, params or [])
    assert got_names == want_names
    assert got == sorted(repr(tuple(row)) for row in want)


def test_pymysql_transaction_sees_its_own_writes(proxy: ProxyProcess, setup: Setup) -> None:
    backend = setup[1]
    ex = backend.executor
    user, order = key_on(ex, "t_user", "user_id", "ds_1", 50), key_on(ex, "t_order", "order_id", "ds_1", 500)
    writes = [("INSERT INTO t_user (user_id, name, vip) VALUES (%s, 'proxied', 1)", [user]),
              ("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, 9.99)", [order, user]),
              ("UPDATE t_user SET name = 'renamed' WHERE user_id = %s", [user])]  # fmt: skip
    # Written on ds_1: the parts read them on its pinned connection, the copies fill on ds_0's.
    conn = connect(proxy.port)  # PyMySQL turns autocommit off: the session's statements form a transaction
    try:
        with conn.cursor() as cursor:
            on_reference(backend, "BEGIN")
            for sql, params in writes:
                cursor.execute(sql, params)
                on_reference(backend, sql, params)
            seen = {}
            for sql in JOINS[:2]:
                cursor.execute(sql)
                seen[sql] = rows_of(cursor)
                assert seen[sql] == sorted(repr(tuple(row)) for row in backend.ref(sql, [])[1]), sql
            assert any("'renamed'" in row for row in seen[JOINS[0]]), seen  # the new user, renamed, with its order
        conn.commit()
        on_reference(backend, "COMMIT")
    finally:
        conn.close()
    conn = connect(proxy.port, autocommit=True)  # another session sees the committed rows
    try:
        with conn.cursor() as cursor:
            cursor.execute(JOINS[1])
            assert rows_of(cursor) == sorted(repr(tuple(row)) for row in backend.ref(JOINS[1], [])[1])
    finally:
        conn.close()


def test_the_mariadb_command_line_prints_the_unsharded_rows(proxy: ProxyProcess, setup: Setup) -> None:
    sql = JOINS[0] + " ORDER BY u.name; " + JOINS[1] + " ORDER BY u.user_id, o.order_id;"
    through = mariadb_cli(proxy.port, sql)
    assert through.returncode == 0, through.stderr
    binary = shutil.which("mariadb") or shutil.which("mysql")
    assert binary is not None  # mariadb_cli required it
    reference = setup[1].conn.db.decode()
    command = [binary, "--protocol=TCP", "-h", "127.0.0.1", "-P", "3306", "-u", "root", "--skip-ssl", "--batch",
               reference, "-e", sql]  # fmt: skip
    direct = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert direct.returncode == 0, direct.stderr
    assert through.stdout == direct.stdout
    assert through.stdout.count("\n") > 10  # both results printed, with their rows


@pytest.mark.parametrize("sql", [JOINS[0], JOINS[2], JOINS[4].replace("%s", "7")])
def test_preview_shows_each_part_and_the_strategy(proxy: ProxyProcess, setup: Setup, sql: str) -> None:
    conn = connect(proxy.port, autocommit=True)
    try:
        with conn.cursor() as cursor:
            cursor.execute("PREVIEW " + sql)
            assert [d[0] for d in cursor.description] == ["data_source_name", "actual_sql", "params", "reason"]
            shown = [tuple(row) for row in cursor.fetchall()]
    finally:
        conn.close()
    with Executor(load_config(setup[2])) as ex:  # the tables' columns loaded, as the proxy loads them at start
        assert shown == ex.router.route(sql).explain()  # the plan the proxy runs, as it says it
    parts = [row for row in shown if row[0].startswith("part ")]
    assert parts and [row[0] for row in parts] == [f"part {n}" for n in range(1, len(parts) + 1)]
    (strategy,) = {s for s in STRATEGIES if all(row[3].startswith(s) for row in parts)}
    for row in parts:  # what is read, and which copy it fills
        assert row[1].startswith("SELECT ") and " ddm_x" in row[3], row
    finals = [row for row in shown if not row[0].startswith("part ")]
    assert finals and all(row[0] in ("ds_0", "ds_1") and "ddm_x" in row[1] and strategy in row[3] for row in finals)
    assert "does not prove their rows share a node" in finals[0][3]


@pytest.mark.parametrize("use_pure", [False, True], ids=["libmysqlclient", "pure-python"])
def test_a_prepared_cross_node_select_gets_the_unsharded_rows(proxy: ProxyProcess, setup: Setup,
                                                               use_pure: bool) -> None:
    require_module("mysql.connector", "prepared statements against the proxy")
    sql = ("SELECT u.name, o.order_id, o.amount FROM t_order o JOIN t_user u ON o.user_id = u.user_id "
           "WHERE o.amount > ? ORDER BY o.order_id")  # fmt: skip
    proxied = _connect(proxy.port, "logic_db", use_pure)
    direct = _connect(3306, setup[1].conn.db.decode(), use_pure)
    try:
        for bound in ((1,), (5,), (1,)):  # executed again: the parameter types are not resent
            got, got_columns = _run(proxied, sql, bound)
            want, want_columns = _run(direct, sql, bound)
            assert got and _typed(got) == _typed(want), bound
            assert got_columns == want_columns
    finally:
        proxied.close()
        direct.close()
