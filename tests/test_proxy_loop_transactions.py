"""Transactions on the proxy's event loop (docs/proxy.md#transactions-on-the-loop), with real clients.

A read in an open transaction on a data source the transaction pinned already is sent from the loop on
that pinned connection; BEGIN, and the COMMIT / ROLLBACK of a transaction that pinned nothing, are answered
on the loop. Checked here: the answers (rows and the types the clients decode) against one unsharded table
holding the same rows, read directly on MariaDB; the transaction's own writes seen by its reads, savepoints,
the single-writer refusal; that these reads did run on the loop (the count the proxy logs at shutdown);
and that no pinned connection leaks when clients go away or a deadline cuts a read off mid-transaction.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, innodb_trx_fresh, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from test_execute_support import ORDER_DDL  # noqa: E402
from test_proxy_support import PASSWORD, USER, ProxyProcess, connect, create_tables, proxy_config, write_config  # noqa: E402

ROWS = [(order_id, user_id, order_id * 7 - 300, None if order_id % 3 else f"note é {order_id}")
        for user_id in (1, 2, 3, 4) for order_id in range(user_id * 10, user_id * 10 + 5)]  # fmt: skip
POINT = "SELECT order_id, user_id, amount, note FROM t_order WHERE user_id = %s AND order_id = %s"
POOL_SIZE = 4  # proxy_config's pool.maxSize: a pin that leaked would leave a later transaction waiting


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], str, Any]]:
    """The proxy's configuration, its path, and a direct connection to one database with the rows unsharded."""
    with fresh_mariadb_databases(3) as databases:
        config = proxy_config(databases[:2], statementTimeoutMs=3000)  # a read past it is cut off below
        create_tables(config)
        path = write_config(config, tmp_path_factory.mktemp("loop_tx") / "proxy.yaml")
        plain = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", database=databases[2],
                                autocommit=True)  # fmt: skip
        with plain.cursor() as cur:
            cur.execute(ORDER_DDL)
            cur.executemany("INSERT INTO t_order (order_id, user_id, amount, note) VALUES (%s, %s, %s, %s)", ROWS)
        proxy = ProxyProcess(path).start()
        try:
            with connect(proxy.port, autocommit=True) as conn, conn.cursor() as cur:
                cur.executemany("INSERT INTO t_order (order_id, user_id, amount, note) VALUES (%s, %s, %s, %s)", ROWS)
        finally:
            proxy.stop()
        try:
            yield config, str(path), plain
        finally:
            plain.close()


def _own_proxy(world: tuple[dict[str, Any], str, Any], **proxy: Any) -> ProxyProcess:
    """A proxy of the test's own (its count of statements on the loop is the test's); ``proxy``: settings changed."""
    from pathlib import Path

    path = Path(world[1])
    if proxy:
        config = {**world[0], "proxy": {**world[0]["proxy"], **proxy}}
        path = write_config(config, path.with_name(f"proxy_{len(proxy)}_{sorted(proxy)[0]}.yaml"))
    return ProxyProcess(path).start()


def _on_the_loop(proxy: ProxyProcess) -> int:
    """Statements the proxy ran on its event loop (logged at shutdown)."""
    assert proxy.terminate() == 0
    counted = re.search(r"(\d+) statement\(s\) ran on the event loop", proxy.stderr)
    assert counted is not None, proxy.stderr
    return int(counted.group(1))


def _hot_on_pins(proxy: ProxyProcess) -> int:
    """Reads the hot path sent on a transaction's pin (logged at shutdown: after :func:`_on_the_loop`)."""
    counted = re.search(r"\((\d+) on the hot path on a transaction's pin,", proxy.stderr)
    assert counted is not None, proxy.stderr
    return int(counted.group(1))


def _typed(rows: Any) -> list[tuple[tuple[Any, type], ...]]:
    return [tuple((v, type(v)) for v in row) for row in rows]


@pytest.mark.parametrize("relay", [True, False], ids=["relayed", "decoded"])
def test_reads_in_a_transaction_run_on_the_loop_and_match_one_unsharded_table(
        world: tuple[dict[str, Any], str, Any], relay: bool) -> None:  # fmt: skip
    """``decoded``: with ``relay: false`` the answer read on the pin is decoded and framed again, as a masked one."""
    plain = world[2]
    proxy = _own_proxy(world, relay=relay)
    conn = connect(proxy.port, autocommit=True)
    reads = 0
    with conn.cursor() as cur, plain.cursor() as direct:
        for _ in range(2):  # the first round meets each shape (a worker routes it), the second reuses it
            cur.execute("BEGIN")
            for user_id in (1, 2, 3, 4):
                for order_id in range(user_id * 10, user_id * 10 + 5):
                    cur.execute(POINT, (user_id, order_id))
                    direct.execute(POINT, (user_id, order_id))
                    assert _typed(cur.fetchall()) == _typed(direct.fetchall())
                    assert [d[:2] for d in cur.description] == [d[:2] for d in direct.description]
                    reads += 1
            cur.execute("COMMIT")
            assert not conn.server_status & 1  # SERVER_STATUS_IN_TRANS: over
    conn.close()
    # Each data source's first read of a transaction pins it on a worker (2 a transaction); the first round's
    # reads meet their shapes on a worker. The rest ran on the loop, relayed on the pin.
    assert _on_the_loop(proxy) >= reads // 2 - 2
    if relay:  # the gate hands each whole COM_QUERY on a pin to the hot path (docs/proxy.md#the-hot-path)
        assert _hot_on_pins(proxy) >= reads // 2 - 2


def test_prepared_reads_in_a_transaction_match_one_unsharded_table(world: tuple[dict[str, Any], str, Any]) -> None:
    require_module("mysql.connector", "prepared statements against the proxy")
    from mysql import connector

    plain = world[2]
    proxy = _own_proxy(world)
    conn = connector.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD, database="logic_db",
                             ssl_disabled=True, autocommit=True)  # fmt: skip
    point = POINT.replace("%s", "?")
    cur = conn.cursor(prepared=True)
    reads = 0
    with plain.cursor() as direct:
        for _ in range(3):
            conn.start_transaction()
            for user_id in (1, 2, 3, 4):
                for order_id in range(user_id * 10, user_id * 10 + 5):
                    cur.execute(point, (user_id, order_id))
                    got = [tuple(r) for r in cur.fetchall()]
                    direct.execute(POINT, (user_id, order_id))
                    assert _typed(got) == _typed(direct.fetchall())
                    reads += 1
            conn.commit()
    cur.close()
    conn.close()
    assert _on_the_loop(proxy) >= reads // 2
    assert _hot_on_pins(proxy) >= reads // 2  # no query attributes offered: plain executes, the hot path's


def test_a_transaction_reads_its_own_writes_and_keeps_its_rules(world: tuple[dict[str, Any], str, Any]) -> None:
    proxy = _own_proxy(world)
    conn = connect(proxy.port, autocommit=True)
    other = connect(proxy.port, autocommit=True)
    try:
        with conn.cursor() as cur, other.cursor() as cur2:
            for _ in range(2):  # the read's shape is known from the first pass on
                cur.execute("BEGIN")
                cur.execute(POINT, (1, 10))
                assert cur.fetchall() == ((10, 1, -230, None),)
                cur.execute("UPDATE t_order SET amount = amount + 1 WHERE user_id = 1 AND order_id = 10")
                cur.execute(POINT, (1, 10))  # on the loop, on the pin that wrote: the transaction's own write
                assert cur.fetchall()[0][2] == -229
                cur2.execute(POINT, (1, 10))  # another session does not see it
                assert cur2.fetchall()[0][2] == -230
                cur.execute("SAVEPOINT s1")
                cur.execute("UPDATE t_order SET amount = 99 WHERE user_id = 1 AND order_id = 10")
                cur.execute(POINT, (1, 10))
                assert cur.fetchall()[0][2] == 99
                cur.execute("ROLLBACK TO SAVEPOINT s1")
                cur.execute(POINT, (1, 10))
                assert cur.fetchall()[0][2] == -229
                with pytest.raises(pymysql.err.MySQLError) as second:  # a local transaction writes one data source
                    cur.execute("UPDATE t_order SET amount = 1 WHERE user_id = 4 AND order_id = 40")  # ds_1
                assert second.value.args[0] == 1235, second.value.args
                cur.execute(POINT, (1, 10))  # the refusal sent nothing: the transaction goes on
                assert cur.fetchall()[0][2] == -229
                cur.execute("ROLLBACK")
                cur2.execute(POINT, (1, 10))
                assert cur2.fetchall()[0][2] == -230
            cur.execute("BEGIN")  # BEGIN and COMMIT of a transaction that sent nothing: answered on the loop
            cur.execute("COMMIT")
            cur.execute("BEGIN")
            cur.execute("ROLLBACK")
    finally:
        conn.close()
        other.close()
    assert _on_the_loop(proxy) >= 8


def test_an_error_of_a_read_on_the_pin_leaves_the_transaction_usable(world: tuple[dict[str, Any], str, Any]) -> None:
    """A read whose data source answers with an error packet (here EXP's overflow, 1690, for one row's value):
    the client gets the error, and the transaction goes on, as on the worker path."""
    proxy = _own_proxy(world)
    conn = connect(proxy.port, autocommit=True)
    exp = "SELECT order_id, EXP(amount) FROM t_order WHERE user_id = %s AND order_id = %s"
    try:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (18, 1, 1000)")
            for _ in range(2):  # the shape is known from the first pass on: its reads then go on the pin
                cur.execute("BEGIN")
                cur.execute(exp, (1, 10))
                assert cur.fetchall()[0][0] == 10
                with pytest.raises(pymysql.err.MySQLError) as overflow:
                    cur.execute(exp, (1, 18))
                assert overflow.value.args[0] == 1690, overflow.value.args
                cur.execute("UPDATE t_order SET amount = 7 WHERE user_id = 1 AND order_id = 18")
                cur.execute(exp, (1, 18))
                assert cur.fetchall()[0][0] == 18
                cur.execute("ROLLBACK")
            cur.execute("DELETE FROM t_order WHERE user_id = 1 AND order_id = 18")
    finally:
        conn.close()
    assert _on_the_loop(proxy) >= 3


#: One shape for a quick and a slow read (literal comparisons become parameters): ``slow`` is 0 but in the rows
#: the test adds, so the slow read is sent from the loop, its shape known from the quick one.
SLOW = "SELECT amount, SLEEP(slow) FROM t_order WHERE user_id = {} AND order_id = {}"


def _drop(port: int) -> None:
    """A client that opens a transaction, reads on its pin, sends a slow read and closes its socket unanswered."""
    conn = connect(port, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute(SLOW.format(3, 30))  # pins user 3's data source (a worker)
        cur.fetchall()
        sql = SLOW.format(3, 39).encode()  # slow = 1: on the pin, from the loop
        conn._sock.sendall(struct.pack("<I", len(sql) + 1)[:3] + b"\x00" + b"\x03" + sql)  # COM_QUERY, not awaited
    conn._sock.shutdown(socket.SHUT_RDWR)
    conn._sock.close()


def _open_transactions(databases: list[str]) -> int:
    innodb_trx_fresh()
    with pymysql.connect(host="127.0.0.1", port=3306, user="root", password="") as root, root.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p "
                    "ON p.ID = t.trx_mysql_thread_id WHERE p.DB IN %s", (databases,))  # fmt: skip
        return int(cur.fetchone()[0])


def test_no_pinned_connection_leaks_when_clients_go_away_or_a_deadline_cuts_a_read(
        world: tuple[dict[str, Any], str, Any]) -> None:  # fmt: skip
    config = world[0]
    databases = [re.sub(r".*/", "", ds["url"]) for ds in config["dataSources"].values()]
    proxy = _own_proxy(world)
    try:
        with connect(proxy.port, autocommit=True) as setup, setup.cursor() as cur:
            cur.execute("INSERT INTO t_order (order_id, user_id, slow) VALUES (39, 3, 1), (49, 4, 6)")
        for _ in range(POOL_SIZE * 2):  # more than the pool holds: a leaked pin per client would exhaust it
            _drop(proxy.port)
        # A deadline (the proxy's 3 s statement timeout) cuts a read on the pin off: the transaction fails,
        # the client hears why, ROLLBACK ends it and the pin is discarded, not given back in doubt.
        conn = connect(proxy.port, autocommit=True)
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(SLOW.format(4, 40))
            cur.fetchall()
            with pytest.raises(pymysql.err.MySQLError) as cut:
                cur.execute(SLOW.format(4, 49))  # SLEEP(6)
                cur.fetchall()
            assert cut.value.args[0] in (3024, 1317), cut.value.args  # the deadline, or the cancel's interruption
            with pytest.raises(pymysql.err.MySQLError) as refused:
                cur.execute(POINT, (4, 40))  # the transaction failed: nothing more runs in it
            assert "failed" in refused.value.args[1], refused.value.args
            cur.execute("ROLLBACK")
            cur.execute(POINT, (4, 40))  # autocommit again
            assert cur.fetchall()[0][0] == 40
        conn.close()
        # Every pin of those sessions went back or was discarded: transactions on both data sources, each
        # needing a pool connection there, still run (a leak would leave them waiting past acquireTimeoutMs).
        clients = [connect(proxy.port, autocommit=True) for _ in range(POOL_SIZE)]
        for client in clients:
            with client.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute(POINT, (1, 11))
                cur.execute(POINT, (4, 41))  # users 1-3 live on ds_0, user 4 on ds_1
                assert cur.fetchall()[0][0] == 41
                cur.execute("COMMIT")
        for client in clients:
            client.close()
        deadline = time.monotonic() + 10  # the dropped sessions' rollbacks run as the proxy notices them gone
        while _open_transactions(databases) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _open_transactions(databases) == 0
        with connect(proxy.port, autocommit=True) as setup, setup.cursor() as cur:
            cur.execute("DELETE FROM t_order WHERE user_id IN (3, 4) AND order_id IN (39, 49)")
        # the dropped clients' slow reads and the one the deadline cut off were sent from the loop, on their
        # pins (counted when sent: a read abandoned because its client went away never ends, so the count of
        # statements that ended on the loop depends on whether the client's close came before its answer)
        _on_the_loop(proxy)
        assert _hot_on_pins(proxy) >= POOL_SIZE * 2 + 1
    finally:
        proxy.stop()
