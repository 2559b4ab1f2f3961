"""The hot path's own connections to the data sources (``proxy/backends.py``), against a real proxy and MariaDB.

After a statement shape was run once, its point selects (text and prepared) go over connections
the event loop owns: they are opened in the background, serve the statements with the right rows,
close once ``linkIdleMs`` has passed idle; a statement past its deadline is cancelled on MariaDB and
its connection is never used again; a data source's error is mapped as on every other path, and the
connection goes on serving.
"""

from __future__ import annotations

import re
import time
from typing import Any, Iterator

import pymysql
import pytest

from raw_mysql import COM_STMT_EXECUTE, RawClient, ServerError, decoded, execute_payload, longlong
from services import fresh_mariadb_databases, mariadb_rows, require_module

require_module("mysql_mimic", "the proxy tests")

from test_proxy_support import PASSWORD, USER, ProxyProcess, connect, create_tables, proxy_config, write_config  # noqa: E402

POINT = "SELECT note FROM t_order WHERE user_id = %s AND order_id = %s"
ROWS = 40


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases, linkIdleMs=300, statementTimeoutMs=3000)
        create_tables(config)
        proxy = ProxyProcess(write_config(config, tmp_path_factory.mktemp("links") / "proxy.yaml")).start()
        try:
            conn = connect(proxy.port, autocommit=True)
            with conn.cursor() as cur:
                for i in range(1, ROWS + 1):
                    cur.execute("INSERT INTO t_order (order_id, user_id, amount, note) VALUES (%s, %s, %s, %s)",
                                (i, i, i, f"note {i}"))  # fmt: skip
            conn.close()
            yield {"proxy": proxy, "databases": databases}
        finally:
            proxy.stop()


def _sessions(databases: list[str]) -> list[tuple[Any, ...]]:
    marks = ", ".join(f"'{db}'" for db in databases)
    return mariadb_rows(databases[0], "SELECT id, command, info FROM information_schema.processlist "
                                      f"WHERE db IN ({marks}) AND id <> CONNECTION_ID()")  # fmt: skip


def _wait_for(check: Any, what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_point_selects_go_over_the_loops_own_connections_which_close_when_idle(setup: dict[str, Any]) -> None:
    databases = setup["databases"]
    conn = connect(setup["proxy"].port, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(POINT, (1, 1))  # the shape's first run: a worker; pools warm
            _wait_for(lambda: len(_sessions(databases)) > 0, "no pooled connection")
            before = {row[0] for row in _sessions(databases)}
            seen: set[Any] = set()
            for round_ in range(3):
                for i in range(1, ROWS + 1):
                    cur.execute(POINT, (i, i))
                    assert cur.fetchall() == ((f"note {i}",),)
                seen |= {row[0] for row in _sessions(databases)} - before
            assert seen, "no connection beyond the pools' was opened for the hot path"
    finally:
        conn.close()
    # linkIdleMs (300 ms) after the last statement they close; the pools' own stay
    _wait_for(lambda: not seen & {row[0] for row in _sessions(databases)}, "the loop's connections stayed open idle")


def test_prepared_point_selects_are_answered_over_the_links(setup: dict[str, Any]) -> None:
    """Executes as libmariadb sends them (types with the first only): prepared on a link the first time it
    runs one, then executed there, MariaDB's binary rows relayed."""
    with RawClient(setup["proxy"].port) as client:
        client.login(USER, PASSWORD, database="logic_db")
        stmt = client.prepare(POINT.replace("%s", "?"))
        for i in list(range(1, ROWS + 1)) * 2:
            client.command(COM_STMT_EXECUTE, execute_payload(stmt, [longlong(i), longlong(i)], types=i == 1))
            assert decoded([p for _, p in client.response()], binary=True) == [(f"note {i}",)]


def test_a_statement_past_its_deadline_is_cancelled_and_its_link_is_not_used_again(setup: dict[str, Any]) -> None:
    """The proxy executor's deadline (3 s): MariaDB's sleep is killed, the client gets 3024, the next
    statements are answered (on another connection), and nothing keeps running on MariaDB."""
    sleepy = "SELECT SLEEP(%s) AS s, note FROM t_order WHERE user_id = %s AND order_id = %s"
    conn = connect(setup["proxy"].port, autocommit=True)
    try:
        with conn.cursor() as cur:
            for _ in range(5):  # a worker first, then the hot path (over a link once one is open)
                cur.execute(sleepy, (0, 2, 2))
                assert cur.fetchall() == ((0, "note 2"),)
            began = time.monotonic()
            with pytest.raises(pymysql.MySQLError) as info:
                cur.execute(sleepy, (30, 2, 2))
            assert info.value.args[0] == 3024, info.value.args
            assert time.monotonic() - began < 20, "the deadline did not end the statement"
            for _ in range(3):
                cur.execute(sleepy, (0, 3, 3))
                assert cur.fetchall() == ((0, "note 3"),)
    finally:
        conn.close()
    _wait_for(lambda: not any("SLEEP(30)" in str(row[2]) for row in _sessions(setup["databases"])),
              "the statement past its deadline was still running on MariaDB")  # fmt: skip


def test_a_data_source_error_is_mapped_and_the_connection_goes_on(setup: dict[str, Any]) -> None:
    """EXP(1000) overflows a DOUBLE on MariaDB (1690, SQLSTATE 22003) only for that value."""
    with RawClient(setup["proxy"].port) as client:
        client.login(USER, PASSWORD, database="logic_db")
        text = "SELECT EXP({}) > 0 AS e, note FROM t_order WHERE user_id = 4 AND order_id = 4"
        for _ in range(5):
            assert client.query(text.format(0)) == [("1", "note 4")]
        with pytest.raises(ServerError) as info:
            client.query(text.format(1000))
        assert info.value.code == 1690 and "DOUBLE value is out of range" in str(info.value)
        client.command(0x03, text.format(1000).encode())
        error = client.response()[-1][1]  # after the column definitions, as MariaDB sends it
        assert error[:1] == b"\xff" and error[3:9] == b"#22003", error[:20]
        for _ in range(3):
            assert client.query(text.format(0)) == [("1", "note 4")]


def test_the_proxy_stops_with_nothing_borrowed_and_the_hot_path_taken(setup: dict[str, Any]) -> None:
    proxy: ProxyProcess = setup["proxy"]
    assert proxy.terminate() == 0
    borrowed = re.search(r"(\d+) backend connection\(s\) were still borrowed at close", proxy.stderr)
    relayed = re.search(r"(\d+) of them relayed", proxy.stderr)
    assert borrowed is not None and borrowed.group(1) == "0", proxy.stderr[-2000:]
    assert relayed is not None and int(relayed.group(1)) > 3 * ROWS, proxy.stderr[-2000:]
