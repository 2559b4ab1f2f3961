"""``ddm proxy`` with real clients: PyMySQL, the ``mariadb`` command line, SQLAlchemy.

One proxy subprocess for the module, over fresh databases on the machine's
MariaDB. What the clients see is checked against the physical tables, read
behind the proxy's back.
"""

from __future__ import annotations

import subprocess
from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, mariadb_rows, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from ddm_core import load_config  # noqa: E402
from test_proxy_support import (  # noqa: E402
    BATCH_ROWS,
    PASSWORD,
    SMALL,
    USER,
    ProxyProcess,
    connect,
    create_tables,
    mariadb_cli,
    proxy_config,
    write_config,
)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyProcess, dict[str, Any]]]:
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases)
        create_tables(config)
        path = write_config(config, tmp_path_factory.mktemp("proxy") / "proxy.yaml")
        proxy = ProxyProcess(path).start()
        try:
            yield proxy, config
        finally:
            proxy.stop()


@pytest.fixture()
def proxy(setup: tuple[ProxyProcess, dict[str, Any]]) -> Iterator[ProxyProcess]:
    """The module's proxy, with every table emptied (directly on the backends)."""
    proxy, config = setup
    for name, rows in _physical(config).items():
        for ds_db, table in rows:
            conn = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", database=ds_db,
                                   autocommit=True)  # fmt: skip
            with conn.cursor() as cur:
                cur.execute(f"DELETE FROM `{table}`")
            conn.close()
    yield proxy


def _physical(config: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """Logic table → (database, physical table) of every node."""
    loaded = load_config(config)
    out = {name: [(_database(config, ds), physical) for ds, tables in table.tables_by_source.items() for physical in tables]
           for name, table in loaded.tables.items()}  # fmt: skip
    out["t_dict"] = [(_database(config, ds), "t_dict") for ds in loaded.data_sources]
    out["t_config"] = [(_database(config, "ds_0"), "t_config")]
    return out


def _database(config: dict[str, Any], data_source: str) -> str:
    return str(config["dataSources"][data_source]["url"].rsplit("/", 1)[-1])


def _backend_rows(config: dict[str, Any], table: str, columns: str = "*") -> list[tuple[Any, ...]]:
    """Every row of logic ``table``, read from its physical tables directly."""
    rows: list[tuple[Any, ...]] = []
    for database, physical in _physical(config)[table]:
        rows.extend(mariadb_rows(database, f"SELECT {columns} FROM `{physical}`"))
    return sorted(rows)


# -- PyMySQL ------------------------------------------------------------------------------------------


def test_wrong_password_and_unknown_user_get_access_denied(proxy: ProxyProcess) -> None:
    for user, password in ((USER, "wrong"), ("nobody", PASSWORD), (USER, "")):
        with pytest.raises(pymysql.err.OperationalError) as info:
            connect(proxy.port, user=user, password=password)
        assert info.value.args[0] == 1045
        assert info.value.sqlstate == "28000"
    assert PASSWORD not in proxy.stderr


def test_connect_probes_and_logic_schema(proxy: ProxyProcess) -> None:
    conn = connect(proxy.port)
    with conn.cursor() as cur:
        cur.execute("SELECT @@version, DATABASE(), @@session.autocommit AS ac, CONNECTION_ID()")
        version, database, autocommit, connection_id = cur.fetchone()
        assert version == conn.get_server_info() and "ddm-core" in version
        assert database == "logic_db"
        assert autocommit == 0  # PyMySQL turned it off on connect, as it does on MySQL
        assert connection_id == conn.thread_id()
        cur.execute("select @@version_comment limit 1")
        assert cur.fetchall() == (("ddm-core proxy",),)
        cur.execute("SHOW DATABASES")
        assert cur.fetchall() == (("logic_db",),)
        cur.execute("SHOW TABLES")
        assert [r[0] for r in cur.fetchall()] == ["t_config", "t_dict", "t_order", SMALL]
        assert cur.description[0][0] == "Tables_in_logic_db"
        cur.execute("SHOW VARIABLES LIKE 'sql_mode'")
        assert "ANSI_QUOTES" not in cur.fetchone()[1]
    conn.close()


def test_rowcount_lastrowid_and_last_insert_id(proxy: ProxyProcess, setup: tuple[ProxyProcess, dict[str, Any]]) -> None:
    conn = connect(proxy.port, autocommit=True)
    with conn.cursor() as cur:
        assert cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 10, 5), (2, 11, 6)") == 2
        assert cur.execute("INSERT INTO t_order (user_id, amount) VALUES (12, 7)") == 1
        generated = cur.lastrowid
        assert generated > 2  # a snowflake id from the router's key generator
        cur.execute("SELECT LAST_INSERT_ID()")
        assert cur.fetchone() == (generated,)
        assert cur.execute("INSERT INTO t_config (name) VALUES ('a')") == 1
        assert cur.lastrowid == 1  # the data source's AUTO_INCREMENT
        assert cur.execute("UPDATE t_order SET amount = amount + 1 WHERE user_id IN (10, 11)") == 2
        cur.execute("SELECT order_id, amount FROM t_order WHERE user_id = 10")
        assert cur.fetchall() == ((1, 6),)
    conn.close()
    assert _backend_rows(setup[1], "t_order", "order_id, user_id, amount") == [
        (1, 10, 6), (2, 11, 7), (generated, 12, 7),
    ]  # fmt: skip


def test_transactions_commit_rollback_and_autocommit(proxy: ProxyProcess, setup: tuple[ProxyProcess, dict[str, Any]]) -> None:
    config = setup[1]
    conn = connect(proxy.port)  # PyMySQL: autocommit off
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (10, 20)")
        assert conn.server_status & 1  # SERVER_STATUS_IN_TRANS
        assert _backend_rows(config, "t_order", "order_id") == []  # not visible before commit
        conn.rollback()
        assert _backend_rows(config, "t_order", "order_id") == []
        cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (11, 20)")
        conn.commit()
        assert _backend_rows(config, "t_order", "order_id") == [(11,)]
        conn.autocommit(True)
        cur.execute("BEGIN")
        cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (12, 20)")
        cur.execute("ROLLBACK")
        cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (13, 20)")  # autocommit again
        assert _backend_rows(config, "t_order", "order_id") == [(11,), (13,)]
        cur.execute("SET autocommit = 0")
        cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (14, 20)")
        cur.execute("SET autocommit = 1")  # commits the open transaction, as MySQL does
        assert _backend_rows(config, "t_order", "order_id") == [(11,), (13,), (14,)]
    conn.close()


def test_savepoints_mark_the_sessions_transaction(proxy: ProxyProcess, setup: tuple[ProxyProcess, dict[str, Any]]) -> None:
    config = setup[1]
    conn = connect(proxy.port)  # autocommit off: the first statement opens the transaction
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (15, 21)")
        cur.execute("SAVEPOINT s1")
        cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (16, 21)")
        cur.execute("ROLLBACK TO SAVEPOINT s1")
        cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (17, 21)")
        cur.execute("RELEASE SAVEPOINT s1")
        with pytest.raises(pymysql.err.MySQLError) as gone:
            cur.execute("ROLLBACK TO SAVEPOINT s1")
        assert gone.value.args[0] == 1305 and "SAVEPOINT s1 does not exist" in gone.value.args[1]
        conn.commit()
    conn.close()
    assert [r for r in _backend_rows(config, "t_order", "order_id, user_id") if r[1] == 21] == [(15, 21), (17, 21)]


def test_errors_carry_mysql_codes_and_the_session_survives(proxy: ProxyProcess, setup: tuple[ProxyProcess, dict[str, Any]]) -> None:
    conn = connect(proxy.port)
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (30, 40)")
        with pytest.raises(pymysql.err.ProgrammingError) as unknown:
            cur.execute("SELECT * FROM no_such_table")
        assert (unknown.value.args[0], unknown.value.sqlstate) == (1146, "42S02")
        with pytest.raises(pymysql.err.IntegrityError) as duplicate:
            cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (30, 40)")
        assert (duplicate.value.args[0], duplicate.value.sqlstate) == (1062, "23000")
        with pytest.raises(pymysql.err.MySQLError) as full:
            cur.execute("SELECT * FROM t_order")  # no shard key, 8 shards, full routes refused
        assert full.value.args[0] == 1235 and full.value.args[1].startswith("ddm: ")
        assert "t_order" in full.value.args[1] and "user_id" in full.value.args[1]
        with pytest.raises(pymysql.err.MySQLError) as unknown_var:
            cur.execute("SELECT @@no_such_variable")
        assert unknown_var.value.args[0] == 1193
        with pytest.raises(pymysql.err.MySQLError) as unknown_db:
            cur.execute("USE elsewhere")
        assert unknown_db.value.args[0] == 1049
        # The session and its transaction are still there: the first insert commits.
        cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (31, 40)")
        cur.execute("COMMIT")
        cur.execute("SELECT order_id FROM t_order WHERE user_id = 40 ORDER BY order_id")
        assert cur.fetchall() == ((30,), (31,))
    conn.close()
    assert _backend_rows(setup[1], "t_order", "order_id") == [(30,), (31,)]


def test_a_multi_shard_result_streams_in_batches_and_equals_the_backends(
    proxy: ProxyProcess, setup: tuple[ProxyProcess, dict[str, Any]]
) -> None:
    conn = connect(proxy.port, autocommit=True)
    count = BATCH_ROWS * 9 + 3
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {SMALL} (order_id, user_id, amount, note) VALUES (%s, %s, %s, %s)",
            [(i, i % 13, i * 3, f"n{i}" if i % 4 else None) for i in range(1, count + 1)],
        )
        cur.execute(f"SELECT order_id, user_id, amount, note FROM {SMALL} ORDER BY amount DESC")
        rows = cur.fetchall()
        assert len(rows) == count
        assert [r[2] for r in rows] == sorted((r[2] for r in rows), reverse=True)
        cur.execute(f"SELECT user_id, COUNT(*), SUM(amount) FROM {SMALL} GROUP BY user_id ORDER BY user_id")
        grouped = cur.fetchall()
    conn.close()
    reference = _backend_rows(setup[1], SMALL, "order_id, user_id, amount, note")
    assert sorted(rows) == reference
    expected: dict[int, list[int]] = {}
    for _, user_id, amount, _ in reference:
        expected.setdefault(user_id, []).append(amount)
    assert [(u, c, int(s)) for u, c, s in grouped] == [(u, len(a), sum(a)) for u, a in sorted(expected.items())]


def test_an_unbuffered_client_can_stop_reading_midway(proxy: ProxyProcess) -> None:
    conn = connect(proxy.port, autocommit=True)
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {SMALL} (order_id, user_id) VALUES (%s, %s)", [(i, i) for i in range(1, 60)])
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(f"SELECT order_id FROM {SMALL}")
        assert cur.fetchone() is not None
    with conn.cursor() as cur:  # the session goes on after the abandoned stream
        cur.execute(f"SELECT COUNT(*) FROM {SMALL}")
        assert cur.fetchone() == (59,)
    conn.close()


def test_preview_returns_the_route_plan_and_runs_nothing(proxy: ProxyProcess, setup: tuple[ProxyProcess, dict[str, Any]]) -> None:
    conn = connect(proxy.port, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("PREVIEW INSERT INTO t_order (order_id, user_id) VALUES (50, 10086)")
        assert [d[0] for d in cur.description] == ["data_source_name", "actual_sql", "params", "reason"]
        plan = cur.fetchall()
    conn.close()
    assert len(plan) == 1
    data_source, sql, _, reason = plan[0]
    assert data_source in ("ds_0", "ds_1") and "t_order_" in sql and "user_id" in reason
    assert _backend_rows(setup[1], "t_order", "order_id") == []


def test_session_statements(proxy: ProxyProcess) -> None:
    conn = connect(proxy.port, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SET NAMES utf8mb4 COLLATE utf8mb4_bin")
        cur.execute("SELECT @@collation_connection, @@character_set_client")
        assert cur.fetchone() == ("utf8mb4_bin", "utf8mb4")
        cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES', time_zone = '+00:00'")
        cur.execute("SELECT @@sql_mode, @@time_zone")
        assert cur.fetchone() == ("STRICT_ALL_TABLES", "+00:00")
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        cur.execute("SELECT @@transaction_isolation")
        assert cur.fetchone() == ("READ-COMMITTED",)
        cur.execute("USE `logic_db`")
        conn.select_db("logic_db")  # COM_INIT_DB
        for refused, code in (("SET @x = 1", 1235), ("SET GLOBAL wait_timeout = 5", 1235), ("SET nonsense = 1", 1193)):
            with pytest.raises(pymysql.err.MySQLError) as info:
                cur.execute(refused)
            assert info.value.args[0] == code, refused
        cur.execute("SELECT 1 + 1")  # a FROM-less SELECT that is not a probe goes to a data source
        assert cur.fetchone() == (2,)
        cur.execute("SHOW INDEX FROM t_order")  # answered by a physical table, as the logic one
        assert [(r[0], r[2], r[4]) for r in cur.fetchall()] == [("t_order", "PRIMARY", "order_id")]
        conn.ping()
    conn.close()


def test_unicode_and_binary_values_round_trip(proxy: ProxyProcess) -> None:
    conn = connect(proxy.port, autocommit=True, charset="utf8mb4")
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, note) VALUES (%s, %s, %s)", (70, 5, "Grüße 東京 🚀"))
        cur.execute("SELECT note, CAST(note AS BINARY) FROM t_order WHERE user_id = 5")
        note, raw = cur.fetchone()
    conn.close()
    assert note == "Grüße 東京 🚀"
    assert raw == "Grüße 東京 🚀".encode()


def test_prepared_statements_bind_values_never_sql(proxy: ProxyProcess, setup: tuple[ProxyProcess, dict[str, Any]]) -> None:
    connector: Any = require_module("mysql.connector", "prepared statements against the proxy")
    conn = connector.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD, database="logic_db",
                             use_pure=True, ssl_disabled=True, autocommit=True)  # fmt: skip
    try:
        cur = conn.cursor(prepared=True)
        insert = "INSERT INTO t_order (order_id, user_id, amount, note) VALUES (?, ?, ?, ?)"
        for key in (1, 2, 3):  # one statement, executed again with new values (types not resent)
            cur.execute(insert, (key, key * 10, key + 100, None if key == 2 else f"it's {key}"))
        assert cur.rowcount == 1
        cur.execute("SELECT order_id, amount, note FROM t_order WHERE user_id = ?", (30,))
        assert cur.fetchall() == [(3, 103, "it's 3")]
        cur.execute("SELECT order_id FROM t_order WHERE user_id = ? AND note = ?", (10, "x' OR '1'='1"))
        assert cur.fetchall() == []  # the quote is a value, not SQL
        cur.execute("UPDATE t_order SET amount = ? WHERE user_id = ?", (7, 20))
        assert cur.rowcount == 1
        with pytest.raises(connector.Error) as info:
            cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (?, ?)", (1, 10))
        assert info.value.errno == 1062 and info.value.sqlstate == "23000"
        cur.execute("SELECT note FROM t_order WHERE user_id = ?", (20,))
        assert cur.fetchall() == [(None,)]
    finally:
        conn.close()
    assert _backend_rows(setup[1], "t_order", "order_id, amount") == [(1, 101), (2, 7), (3, 103)]


# -- the mariadb command line -----------------------------------------------------------------------------


def test_mariadb_cli_queries_errors_and_access_denied(proxy: ProxyProcess) -> None:
    done = mariadb_cli(proxy.port, "INSERT INTO t_order (order_id, user_id, amount) VALUES (80, 7, 9); "
                                    "SELECT order_id, amount FROM t_order WHERE user_id = 7; SHOW TABLES;")  # fmt: skip
    assert done.returncode == 0, done.stderr + proxy.stderr[-3000:]
    assert done.stdout.splitlines() == ["order_id\tamount", "80\t9", "Tables_in_logic_db", "t_config", "t_dict",
                                        "t_order", SMALL]  # fmt: skip
    failed = mariadb_cli(proxy.port, "SELECT * FROM no_such_table")
    assert failed.returncode == 1 and "ERROR 1146 (42S02)" in failed.stderr
    denied = mariadb_cli(proxy.port, "SELECT 1", password="wrong")
    assert denied.returncode == 1 and "ERROR 1045 (28000)" in denied.stderr


# -- SQLAlchemy -------------------------------------------------------------------------------------------


def test_sqlalchemy_engine_transactions_and_reflection(proxy: ProxyProcess, setup: tuple[ProxyProcess, dict[str, Any]]) -> None:
    sqlalchemy: Any = require_module("sqlalchemy", "the proxy's SQLAlchemy test")
    from sqlalchemy import text

    engine = sqlalchemy.create_engine(f"mysql+pymysql://{USER}:{PASSWORD}@127.0.0.1:{proxy.port}/logic_db",
                                      pool_size=2)  # fmt: skip
    try:
        with engine.begin() as conn:
            result = conn.execute(text("INSERT INTO t_order (order_id, user_id, amount) VALUES (:o, :u, :a)"),
                                  [{"o": 90, "u": 3, "a": 1}, {"o": 91, "u": 3, "a": 2}])  # fmt: skip
            assert result.rowcount == 2
        with pytest.raises(sqlalchemy.exc.IntegrityError) as info:
            with engine.begin() as conn:
                conn.execute(text("INSERT INTO t_order (order_id, user_id) VALUES (92, 3)"))
                conn.execute(text("INSERT INTO t_order (order_id, user_id) VALUES (90, 3)"))
        assert info.value.orig.args[0] == 1062
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT order_id, amount FROM t_order WHERE user_id = :u ORDER BY order_id"),
                                {"u": 3}).all()  # fmt: skip
            assert [tuple(r) for r in rows] == [(90, 1), (91, 2)]  # 92 was rolled back with its transaction
        assert sorted(sqlalchemy.inspect(engine).get_table_names()) == ["t_config", "t_dict", "t_order", SMALL]
    finally:
        engine.dispose()
    assert _backend_rows(setup[1], "t_order", "order_id") == [(90,), (91,)]


def test_proxy_logs_no_password_material(proxy: ProxyProcess, setup: tuple[ProxyProcess, dict[str, Any]]) -> None:
    stored = setup[1]["proxy"]["users"][0]["passwordHash"]
    assert PASSWORD not in proxy.stderr and stored not in proxy.stderr and stored[1:] not in proxy.stderr.upper()



# -- one-unit statements on the event loop ----------------------------------------------------------------


def test_only_repeated_one_unit_autocommit_statements_skip_the_thread_hop(proxy: ProxyProcess) -> None:
    import re

    own = ProxyProcess(proxy.config_path).start()  # its own count of statements run on the event loop
    conn = connect(own.port, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 4, 5), (2, 4, 6)")
        cur.execute(f"INSERT INTO {SMALL} (order_id, user_id) VALUES (1, 1), (2, 2)")
        for order_id in (1, 2, 1, 2, 1):  # one shape: the first is routed on a worker, the next 4 may skip it
            cur.execute("SELECT amount FROM t_order WHERE user_id = 4 AND order_id = %s", (order_id,))
            assert cur.fetchall() == ((5 if order_id == 1 else 6,),)
        for _ in range(3):  # two units: the first on a worker, the next 2 sent from the loop as a multi-unit read
            cur.execute(f"SELECT COUNT(*) FROM {SMALL}")
            assert cur.fetchall() == ((2,),)
    conn.autocommit(False)
    with conn.cursor() as cur:
        for _ in range(3):  # autocommit off: the first opens the transaction from the loop (its opening sent
            cur.execute("SELECT amount FROM t_order WHERE user_id = 4 AND order_id = 1")  # with it), 2 on its pin
            assert cur.fetchall() == ((5,),)
    conn.rollback()
    conn.close()
    assert own.terminate() == 0
    counted = re.search(r"(\d+) statement\(s\) ran on the event loop, (\d+) of them relayed", own.stderr)
    assert counted is not None, own.stderr
    # 4 of the 5 point selects: the first of the shape ran on a worker (3 when an idle connection had to be
    # pinged first, past 0.5 s idle: a worker then does it); and the 3 in the transaction (the first behind
    # its opening, then on its pin, docs/proxy.md#transactions-on-the-loop); each was relayed, a one-unit SELECT
    inlined, relayed = int(counted.group(1)), int(counted.group(2))
    assert inlined in (6, 7) and relayed == inlined, own.stderr
    opened = re.search(r"(\d+) transaction opening\(s\) \((\d+) with the first statement right behind\)", own.stderr)
    assert opened is not None and opened.groups() == ("1", "1"), own.stderr
    # the two-unit COUNT(*), counted apart (docs/proxy.md#multi-unit-reads-on-the-loop): merged, so not relayed
    many = re.search(r"(\d+) multi-unit read\(s\) on the event loop, (\d+) of them relayed", own.stderr)
    assert many is not None and many.groups() in (("1", "0"), ("2", "0")), own.stderr


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_concurrent_clients_overlap_on_the_event_loop(proxy: ProxyProcess, loop: str) -> None:
    """Eight clients at once: one-unit statements are sent from the loop and awaited without a thread.

    Each statement sleeps 50 ms on its data source: overlapped, 8 clients × 10 statements take far
    less than the 4 s one after another would, every answer is the client's own, most statements ran
    on the event loop although the clients were concurrent, and no backend connection is left.
    """
    import re
    import threading
    import time

    own = ProxyProcess(proxy.config_path, "--loop", loop).start()
    for _ in range(200):  # the start line naming the loop follows the server's own "listening" log line
        if "(event loop:" in own.stderr:
            break
        time.sleep(0.05)
    assert f"(event loop: {loop})" in own.stderr, own.stderr
    loader = connect(own.port, autocommit=True)
    with loader.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES "
                    + ", ".join(f"({k}, {k}, {k * 7})" for k in range(1, 9)))  # fmt: skip
    loader.close()
    answers: dict[int, list[Any]] = {k: [] for k in range(1, 9)}
    errors: list[BaseException] = []

    def client(key: int) -> None:
        try:
            conn = connect(own.port, autocommit=True)
            with conn.cursor() as cur:
                for _ in range(10):
                    cur.execute("SELECT amount, SLEEP(0.05) FROM t_order WHERE user_id = %s AND order_id = %s",
                                (key, key))  # fmt: skip
                    answers[key].append(cur.fetchall())
            conn.close()
        except BaseException as exc:  # noqa: B036 - the test fails on it below
            errors.append(exc)

    began = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    took = time.monotonic() - began
    assert errors == []
    assert all(answers[k] == [((k * 7, 0),)] * 10 for k in answers), answers
    assert took < 8 * 10 * 0.05 * 0.75, took  # overlapped, not one statement after another
    assert own.terminate() == 0
    counted = re.search(r"(\d+) backend connection\(s\) were still borrowed.*?(\d+) statement\(s\) ran on the event loop",
                        own.stderr)  # fmt: skip
    assert counted is not None, own.stderr
    assert int(counted.group(1)) == 0
    assert int(counted.group(2)) >= 40, own.stderr  # the first of each client's texts is routed on a worker


def test_sigterm_lets_a_statement_sent_from_the_loop_finish(proxy: ProxyProcess) -> None:
    import re
    import threading
    import time

    own = ProxyProcess(proxy.config_path).start()
    conn = connect(own.port, autocommit=True)
    sql = "SELECT SLEEP(amount) FROM t_order WHERE user_id = %s AND order_id = %s"  # one text, two sleeps
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 1, 0), (2, 1, 2)")
        for _ in range(2):  # routed on a worker, then sent from the loop
            cur.execute(sql, (1, 1))
            assert cur.fetchall() == ((0,),)
    answer: list[Any] = []
    running = threading.Thread(target=lambda: (conn.cursor().execute(sql, (1, 2)), answer.append(conn.cursor())))
    running.start()
    time.sleep(0.5)  # the 2 s statement is with its data source now
    assert own.terminate() == 0
    running.join(10)
    assert answer, own.stderr  # answered before the session ended
    counted = re.search(r"(\d+) backend connection\(s\) were still borrowed.*?(\d+) statement\(s\) ran on the event loop",
                        own.stderr)  # fmt: skip
    assert counted is not None, own.stderr
    assert int(counted.group(1)) == 0 and int(counted.group(2)) >= 2, own.stderr


def test_a_full_pool_never_blocks_the_loop_that_must_read_the_answers(
        setup: tuple[ProxyProcess, dict[str, Any]], proxy: ProxyProcess, tmp_path: Any) -> None:  # fmt: skip
    """One connection per data source: A's statement, sent from the loop, holds it for 1 s.

    B's statement (same text, same data source, started when the clients are not concurrent)
    finds no idle connection. Blocking the loop to wait for one would wait for A's answer, which
    only the loop reads (until the acquire timeout): B must wait on a worker instead.
    """
    import threading
    import time

    _, config = setup
    narrow = {**config, "pool": {**config["pool"], "maxSize": 1, "minIdle": 1, "acquireTimeoutMs": 4000}}
    own = ProxyProcess(write_config(narrow, tmp_path / "narrow.yaml")).start()
    sql = "SELECT SLEEP(amount) FROM t_order WHERE user_id = %s AND order_id = %s"
    first = connect(own.port, autocommit=True)
    with first.cursor() as cur:  # user 4's rows live on one data source
        cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 4, 1), (2, 4, 0)")
        for _ in range(2):
            cur.execute(sql, (4, 2))
    second = connect(own.port, autocommit=True)
    second.cursor().execute(sql, (4, 2))  # a worker warms the text for this session too
    outcome: dict[str, Any] = {}

    def a() -> None:
        with first.cursor() as cur:
            cur.execute(sql, (4, 1))
            outcome["a"] = cur.fetchall()

    t = threading.Thread(target=a)
    t.start()
    time.sleep(0.3)  # A is with the data source; past the 5 ms that make clients concurrent
    began = time.monotonic()
    with second.cursor() as cur:
        cur.execute(sql, (4, 2))
        outcome["b"] = cur.fetchall()
    waited = time.monotonic() - began
    t.join(10)
    first.close()
    second.close()
    assert own.terminate() == 0
    assert outcome == {"a": ((0,),), "b": ((0,),)}
    assert waited < 3.0, waited  # A's second ended it, not the 4 s acquire timeout
