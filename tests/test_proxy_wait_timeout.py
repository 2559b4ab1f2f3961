"""``proxy.waitTimeoutMs`` / ``wait_timeout``: a client that sends no command for that long is dropped.

MariaDB ends a connection idle between commands for ``wait_timeout`` seconds, which rolls its
transaction back and frees its row locks. The proxy did not: a client gone without a FIN held its
session, its pinned backend connections and its locks for ever. Here, with ``waitTimeoutMs: 2000``:
an idle PyMySQL client in a transaction (a row updated, its lock held on MariaDB) is dropped, hears
error 4031 on its next statement, its update is rolled back and another client updates the row at
once; nothing stays borrowed. Clients that keep sending — text statements on the hot path, prepared
executes (mysql-connector), pings, statements on mimic's path — are never dropped, nor is one whose
statement runs longer than the bound. A session's own ``SET wait_timeout`` bounds it alone, and
``@@wait_timeout`` reads the setting back.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import pymysql
import pytest

from services import require_module

require_module("mysql_mimic", "ddm proxy")

from raw_mysql import RawClient, error_code  # noqa: E402
from test_proxy_support import (  # noqa: E402
    PASSWORD, ROW_USER_ID, SMALL, USER, InProcessProxy, connect, one_row_proxy, row_amount, until,
)  # fmt: skip

WAIT_MS = 2000
#: Longer than the bound plus the sweeper's tick (a second) and this machine's scheduling slack.
IDLE_PAST = WAIT_MS / 1000 + 2.5
SELECT = f"SELECT amount FROM {SMALL} WHERE user_id = %s"
UPDATE = f"UPDATE {SMALL} SET amount = amount + 1 WHERE user_id = %s"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[InProcessProxy, list[str]]]:
    # a statement may run past the idle bound (proxy_config's statementTimeoutMs is 30 s)
    with one_row_proxy(waitTimeoutMs=WAIT_MS) as served:
        yield served


def _sessions(proxy: InProcessProxy) -> int:
    return len(proxy.server.runtime.sessions)


def test_an_idle_client_in_a_transaction_is_dropped_and_its_update_rolled_back(
    served: tuple[InProcessProxy, list[str]],
) -> None:
    proxy, databases = served
    before = row_amount(databases)
    client = connect(proxy.port, autocommit=True)
    try:
        with client.cursor() as cur:
            for _ in range(2):  # the shape known: its reads take the hot path
                cur.execute(SELECT, (ROW_USER_ID,))
            cur.execute("BEGIN")
            assert cur.execute(UPDATE, (ROW_USER_ID,)) == 1  # the row's lock is held on MariaDB until the end
        time.sleep(IDLE_PAST)
        # 4031 when the client reads the proxy's last packet first; 2013 when its statement met the closed socket
        with pytest.raises(pymysql.err.OperationalError) as raised, client.cursor() as cur:
            cur.execute(SELECT, (ROW_USER_ID,))
        assert raised.value.args[0] in (4031, 2013), raised.value.args
    finally:
        client.close()
    executor: Any = proxy.server.executor
    until(lambda: executor.borrowed() == 0, f"still borrowed: {executor.pool_stats()}")
    assert row_amount(databases) == before, "the dropped client's update was committed"
    with connect(proxy.port, autocommit=True) as other, other.cursor() as cur:  # its lock is gone
        assert cur.execute(UPDATE, (ROW_USER_ID,)) == 1
    assert row_amount(databases) == before + 1


def test_the_dropped_client_hears_why(served: tuple[InProcessProxy, list[str]]) -> None:
    """Before it closes the connection the proxy sends MySQL 8's error 4031, naming ``wait_timeout``."""
    with RawClient(served[0].port, timeout=30) as client:
        assert client.login(USER, PASSWORD, database="logic_db")[:1] == b"\x00"
        client.sock.settimeout(IDLE_PAST + 5)
        packet = client.packet()  # nothing sent: the next packet is the proxy's own
        assert error_code(packet) == 4031 and b"wait_timeout" in packet, packet
        assert client.is_closed(wait=5)


def _keeps(proxy: InProcessProxy, act: Callable[[Any], None]) -> None:
    """A client doing ``act`` every 0.4 s for longer than the bound stays connected, and is then served."""
    client = connect(proxy.port, autocommit=True)
    try:
        until_ = time.monotonic() + IDLE_PAST
        while time.monotonic() < until_:
            act(client)
            time.sleep(0.4)
        with client.cursor() as cur:
            cur.execute(SELECT, (ROW_USER_ID,))
            assert cur.fetchall()
    finally:
        client.close()


def _hot_select(client: Any) -> None:
    with client.cursor() as cur:
        cur.execute(SELECT, (ROW_USER_ID,))


def _mimic_statement(client: Any) -> None:
    with client.cursor() as cur:  # answered by the session itself, on mimic's path
        cur.execute("SELECT @@wait_timeout")


@pytest.mark.parametrize("act", [_hot_select, _mimic_statement, lambda c: c.ping(reconnect=False)],
                         ids=["hot-path-reads", "mimic-path-statements", "pings"])  # fmt: skip
def test_a_client_that_keeps_sending_is_not_dropped(served: tuple[InProcessProxy, list[str]],
                                                     act: Callable[[Any], None]) -> None:  # fmt: skip
    _keeps(served[0], act)


def test_prepared_executes_keep_a_client(served: tuple[InProcessProxy, list[str]]) -> None:
    require_module("mysql.connector", "prepared statements through the proxy")
    import mysql.connector

    proxy = served[0]
    client = mysql.connector.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD,
                                     database="logic_db", autocommit=True)  # fmt: skip
    try:
        cur = client.cursor(prepared=True)
        until_ = time.monotonic() + IDLE_PAST
        while time.monotonic() < until_:
            cur.execute(SELECT.replace("%s", "?"), (ROW_USER_ID,))
            assert cur.fetchall()
            time.sleep(0.4)
        cur.execute(SELECT.replace("%s", "?"), (ROW_USER_ID,))
        assert cur.fetchall()
    finally:
        client.close()


def test_a_statement_longer_than_the_bound_is_not_cut_off(served: tuple[InProcessProxy, list[str]]) -> None:
    proxy = served[0]
    with connect(proxy.port, autocommit=True) as client, client.cursor() as cur:
        cur.execute(f"SELECT amount, SLEEP({IDLE_PAST}) FROM {SMALL} WHERE user_id = %s", (ROW_USER_ID,))
        assert len(cur.fetchall()) == 1
        cur.execute(SELECT, (ROW_USER_ID,))  # the bound counts from the statement's end
        assert cur.fetchall()


def test_a_session_sets_its_own_wait_timeout(served: tuple[InProcessProxy, list[str]]) -> None:
    proxy = served[0]
    with connect(proxy.port, autocommit=True) as client, client.cursor() as cur:
        cur.execute("SELECT @@wait_timeout, @@session.interactive_timeout")
        assert cur.fetchall() == ((WAIT_MS // 1000, WAIT_MS // 1000),)
        cur.execute("SET SESSION wait_timeout = 60")  # longer than the setting: this session stays
        sessions = _sessions(proxy)
        time.sleep(IDLE_PAST)
        cur.execute("SELECT @@wait_timeout")
        assert cur.fetchall() == ((60,),)
        assert _sessions(proxy) == sessions
    with connect(proxy.port, autocommit=True) as client, client.cursor() as cur:
        cur.execute("SELECT @@wait_timeout")  # a new session starts from the setting again
        assert cur.fetchall() == ((WAIT_MS // 1000,),)


def test_the_sweeper_forgets_closed_sessions(served: tuple[InProcessProxy, list[str]]) -> None:
    proxy = served[0]
    runtime = proxy.server.runtime
    for _ in range(5):
        with connect(proxy.port, autocommit=True) as client, client.cursor() as cur:
            cur.execute(SELECT, (ROW_USER_ID,))
    until(lambda: set(runtime.quiet_since) <= set(runtime.sessions), f"marks of gone sessions kept: "
          f"{sorted(set(runtime.quiet_since) - set(runtime.sessions))}", seconds=5)  # fmt: skip
