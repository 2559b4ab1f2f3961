"""A transaction's opening sent with the first statement behind it (docs/proxy.md#transactions-on-the-loop).

A one-unit read that is a transaction's first statement on a data source goes on the connection that becomes
its pin right behind the opening (``BEGIN``), before the opening's OK is read; the OK is then read to its last
byte and the statement's answer after it. Checked with real clients through in-process proxies (PyMySQL text
relayed and decoded, mysql-connector prepared): the openings counted as pipelined and the rows right; and the
ways it can fail — a data source refusing the opening (a pooled connection left inside an XA transaction:
MariaDB's 1399), a connection the server ended while idle, the first statement failing (a missing table), a
frozen data source past the statement's deadline, a KILL and a client gone while the opening is awaited —
each giving the worker path's error, leaving the transaction usable where the worker path leaves it so, and
the pools at rest (nothing borrowed at the proxy's stop, no server session left inside a transaction).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from test_execute_support import PrivateMariaDB  # noqa: E402
from test_frozen_data_source import Frozen  # noqa: E402
from test_proxy_loop_tx_ends import POINT, _filled, _in_transaction, _settled, ids_by_source  # noqa: E402
from test_proxy_many_loop import Served, _served, _until  # noqa: E402
from test_proxy_support import PASSWORD, USER, proxy_config  # noqa: E402


class World:
    """ds_0 on a private ``mariadbd`` (frozen by some tests), ds_1 on the shared MariaDB; three proxies."""

    def __init__(self, served: dict[str, Served], databases: list[str], ids: dict[str, int], frozen: Frozen) -> None:
        self.served, self.databases, self.ids, self.frozen = served, databases, ids, frozen


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    server = PrivateMariaDB(tmp_path_factory.mktemp("pipelined-opening-mariadbd"))
    server.start()
    frozen = Frozen(server, "", "")
    try:
        private = server.create_database("ddm_opening_")
        with fresh_mariadb_databases(1) as (shared,):
            config = proxy_config([private, shared], statementTimeoutMs=3000)  # the frozen reads end by it
            config["dataSources"]["ds_0"]["url"] = f"mysql://127.0.0.1:{server.port}/{private}"
            _filled(config)
            served = {name: _served(config, name) for name in ("relay", "decoded", "workers")}
            try:
                router = served["relay"].server.executor.router
                ids = ids_by_source(router)
                yield World(served, [private, shared], ids, frozen)
            finally:
                frozen.resume()
                for one in served.values():
                    one.close()
                    assert one.server.borrowed_at_close == 0
    finally:
        frozen.resume()
        server.kill()  # by the PID of the process started above


def _followed(served: Served) -> int:
    return served.server.runtime.opened_with_first


def _met(cur: Any, ids: dict[str, int], point: str = POINT) -> None:
    """The point select's shape met in autocommit, a connection to each data source left idle."""
    for i in (ids["ds_0"], ids["ds_1"]):
        cur.execute(point, (i,))
        cur.fetchall()


@pytest.mark.parametrize("name", ["relay", "decoded", "prepared"])
def test_the_first_read_on_each_data_source_goes_behind_its_opening(world: World, name: str) -> None:
    ids = world.ids
    served = world.served["relay" if name == "prepared" else name]
    if name == "prepared":
        require_module("mysql.connector", "prepared statements against the proxy")
        from mysql import connector

        conn = connector.connect(host="127.0.0.1", port=served.port, user=USER, password=PASSWORD,
                                 database="logic_db", ssl_disabled=True, autocommit=True, use_pure=False)  # fmt: skip
        cur = conn.cursor(prepared=True)
        point = POINT.replace("%s", "?")
    else:
        conn = served.connect()
        cur = conn.cursor()
        point = POINT
    _met(cur, ids, point)
    for _ in range(2):  # the statement prepared on each pooled connection it meets: those are opened first
        cur.execute("BEGIN")
        _met(cur, ids, point)
        cur.execute("COMMIT")
    before, hot = _followed(served), served.server.runtime.hot_on_pins
    for _ in range(3):
        cur.execute("BEGIN")
        for i in (ids["ds_0"], ids["ds_1"], ids["ds_0"]):
            cur.execute(point, (i,))
            assert [tuple(r) for r in cur.fetchall()] == [(i, i * 10)]
        cur.execute("COMMIT")
    assert _followed(served) - before == 2 * 3  # both data sources, each opening with its first read behind it
    # a relaying proxy's gate takes them all, the two behind their openings too (docs/proxy.md#the-hot-path)
    assert served.server.runtime.hot_on_pins - hot == (0 if name == "decoded" else 3 * 3)
    cur.close()
    conn.close()
    _settled(served, world.databases)


def _poison(served: Served, data_source: str) -> list[Any]:
    """Every idle pooled connection to ``data_source`` left inside an XA transaction (MariaDB then refuses
    ``BEGIN`` on it with 1399): the connections, for :func:`_cure`."""
    pool = served.server.executor.primary_pool(data_source)
    lent = []
    while (borrowed := pool.lend_idle()) is not None:
        lent.append(borrowed)
    for n, borrowed in enumerate(lent):
        with borrowed.raw.cursor() as cur:
            cur.execute(f"XA START 'ddm_poison_{n}'")
        borrowed.raw.ddm_poison = n
        borrowed.raw.server_status &= ~1  # SERVER_STATUS_IN_TRANS hidden: the pool takes it back as idle
        borrowed.release()
    return [b.raw for b in lent]


def _cure(served: Served, data_source: str, poisoned: list[Any]) -> int:
    """The poisoned connections still idle ended their XA transaction; how many were."""
    pool = served.server.executor.primary_pool(data_source)
    lent = []
    while (borrowed := pool.lend_idle()) is not None:
        lent.append(borrowed)
    cured = 0
    for borrowed in lent:
        if any(borrowed.raw is raw for raw in poisoned):
            with borrowed.raw.cursor() as cur:
                cur.execute(f"XA END 'ddm_poison_{borrowed.raw.ddm_poison}'")
                cur.execute(f"XA ROLLBACK 'ddm_poison_{borrowed.raw.ddm_poison}'")
            cured += 1
        borrowed.release()
    return cured


def test_an_opening_the_data_source_refuses_fails_as_begin_and_the_transaction_goes_on(world: World) -> None:
    """BEGIN refused (1399) with the point select already sent behind it: the client gets the worker path's
    error, the connection (with the select's answer unread) is discarded, and the transaction goes on: the next
    read opens it on a healthy connection and COMMIT ends it."""
    ids = world.ids
    outcomes: dict[str, Any] = {}
    for name in ("relay", "workers"):
        served = world.served[name]
        with served.connect() as conn, conn.cursor() as cur:
            _met(cur, ids)
            _met(cur, ids)
            poisoned = _poison(served, "ds_1")
            assert poisoned
            before = _followed(served)
            cur.execute("BEGIN")
            with pytest.raises(pymysql.err.MySQLError) as caught:
                cur.execute(POINT, (ids["ds_1"],))
            outcomes[name] = caught.value.args[0]
            if name == "relay":
                assert _followed(served) == before  # it failed: not counted as opened
            assert _cure(served, "ds_1", poisoned) == len(poisoned) - 1  # the one it went on was discarded
            for i in (ids["ds_1"], ids["ds_0"]):  # the same transaction: opened on a healthy connection now
                cur.execute(POINT, (i,))
                assert cur.fetchall() == ((i, i * 10),)
            assert conn.server_status & 1  # SERVER_STATUS_IN_TRANS
            cur.execute("COMMIT")
        _settled(served, world.databases)
    assert outcomes == {"relay": 1399, "workers": 1399}


def test_a_connection_the_server_ended_fails_the_opening_and_nothing_is_left(world: World) -> None:
    """The idle connections to ds_1 killed by the server: the opening with its read behind fails as a lost
    connection (no half-read answer kept), and the next BEGIN and read work on a new connection."""
    ids = world.ids
    served = world.served["relay"]
    with served.connect() as conn, conn.cursor() as cur:
        _met(cur, ids)
        pool = served.server.executor.primary_pool("ds_1")
        lent = []
        while (borrowed := pool.lend_idle()) is not None:
            lent.append(borrowed)
        ids_killed = [b.raw.thread_id() for b in lent]
        for borrowed in lent:
            borrowed.release()
        killer = pymysql.connect(host="127.0.0.1", user="root", password="")
        with killer.cursor() as kc:
            for thread in ids_killed:
                kc.execute(f"KILL CONNECTION {thread}")
        killer.close()
        time.sleep(0.2)  # the server's close reaches the idle sockets (not a timed assertion)
        cur.execute("BEGIN")
        failed = 0
        for _ in range(len(lent) + 1):  # each killed connection fails one opening; then a fresh one opens
            try:
                cur.execute(POINT, (ids["ds_1"],))
            except pymysql.err.MySQLError:
                failed += 1
                continue
            assert cur.fetchall() == ((ids["ds_1"], ids["ds_1"] * 10),)
            break
        assert 1 <= failed <= len(lent)
        cur.execute("COMMIT")
    _settled(served, world.databases)


def test_the_first_statement_failing_behind_a_good_opening_keeps_the_pin(world: World) -> None:
    """The read behind the opening fails (its table is missing on ds_1): the client gets the data source's
    1146, the opening stands (the pin is kept, as the worker path keeps it after BEGIN), COMMIT ends it."""
    ids = world.ids
    served = world.served["relay"]
    executor = served.server.executor
    physical = executor.router.route(POINT, (ids["ds_1"],)).units[0].sql.split("FROM ")[1].split()[0].strip("`")
    with served.connect() as conn, conn.cursor() as cur:
        _met(cur, ids)
        pool = executor.primary_pool("ds_1")
        direct = pool.lend_idle()
        assert direct is not None
        with direct.raw.cursor() as dc:
            dc.execute(f"RENAME TABLE {physical} TO {physical}_away")
        direct.release()
        try:
            before = _followed(served)
            cur.execute("BEGIN")
            with pytest.raises(pymysql.err.MySQLError) as caught:
                cur.execute(POINT, (ids["ds_1"],))
            assert caught.value.args[0] == 1146
            assert _followed(served) == before + 1
            assert served.server.executor.borrowed() == 1  # the pin, kept
            cur.execute(POINT, (ids["ds_0"],))
            assert cur.fetchall() == ((ids["ds_0"], ids["ds_0"] * 10),)
            cur.execute("COMMIT")
        finally:
            direct = pool.borrow(None)
            with direct.raw.cursor() as dc:
                dc.execute(f"RENAME TABLE {physical}_away TO {physical}")
            direct.release()
    _settled(served, world.databases)


def test_a_frozen_data_source_fails_the_opening_by_the_deadline(world: World) -> None:
    """ds_0 stopped with SIGSTOP after the opening's connection was chosen: the opening and the read behind it
    are not answered; the client gets an error by the statement's deadline plus the cancel grace (the
    opening's wait is bounded by the statement's), and once resumed the pools are at rest."""
    ids = world.ids
    served = world.served["relay"]
    with served.connect() as conn, conn.cursor() as cur:
        _met(cur, ids)
        cur.execute("BEGIN")
        with world.frozen.frozen():
            with pytest.raises(pymysql.err.MySQLError):
                cur.execute(POINT, (ids["ds_0"],))
        cur.execute("ROLLBACK")
    _settled(served, world.databases)


@pytest.mark.parametrize("how", ["kill", "reset"])
def test_a_kill_or_a_client_gone_while_the_opening_is_awaited_leaves_nothing(world: World, how: str) -> None:
    """The opening and its read sent to a frozen ds_0; then the session is KILLed through the proxy, or its
    client resets the connection. Once ds_0 resumes, nothing is borrowed and no server session is left inside
    a transaction."""
    ids = world.ids
    served = world.served["relay"]
    victim = served.connect()
    with victim.cursor() as cur:
        _met(cur, ids)
        cur.execute("SELECT CONNECTION_ID()")
        (session_id,) = cur.fetchone()
        cur.execute("BEGIN")
    outcome: list[Any] = []

    def read() -> None:
        try:
            with victim.cursor() as cur:
                cur.execute(POINT, (ids["ds_0"],))
                outcome.append(cur.fetchall())
        except BaseException as exc:  # noqa: BLE001  # reported by the test
            outcome.append(exc)

    with world.frozen.frozen():
        thread = threading.Thread(target=read)
        thread.start()
        _until(lambda: served.server.executor.borrowed() >= 1, lambda: "the opening was not sent")
        if how == "kill":
            with served.connect() as killer, killer.cursor() as kc:
                kc.execute(f"KILL {session_id}")
        else:
            _reset(victim)
        thread.join(30)
    _failed_and_settled(thread, outcome, served, world)


def test_a_client_gone_while_its_commit_is_awaited_leaves_nothing(world: World) -> None:
    """A COMMIT the gate sent on both pins (``HotEnd``) while ds_0 is frozen; the client resets its connection
    before ds_0 answers. Once ds_0 resumes, nothing is borrowed and no server session is left inside a
    transaction (the pin not answered is discarded, as ``end_on_loop`` discards it)."""
    ids = world.ids
    served = world.served["relay"]
    runtime = served.server.runtime
    victim = served.connect()
    with victim.cursor() as cur:
        _met(cur, ids)
        cur.execute("BEGIN")
        _met(cur, ids)  # both data sources pinned
    ended, controls = runtime.ended_on_loop, runtime.hot_controls
    outcome: list[Any] = []

    def commit() -> None:
        try:
            with victim.cursor() as cur:
                cur.execute("COMMIT")
                outcome.append("committed")
        except BaseException as exc:  # noqa: BLE001  # reported by the test
            outcome.append(exc)

    with world.frozen.frozen():
        thread = threading.Thread(target=commit)
        thread.start()
        _until(lambda: runtime.ended_on_loop > ended, lambda: "the COMMIT was not sent from the loop")
        assert runtime.hot_controls == controls + 1  # answered by the gate, not mimic's path
        _reset(victim)
        thread.join(30)
    _failed_and_settled(thread, outcome, served, world)


def _reset(conn: Any) -> None:
    """The client resets its connection (RST, nothing more read or written)."""
    sock: socket.socket = conn._sock
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn._rfile.close()
    sock.close()


def _failed_and_settled(thread: threading.Thread, outcome: list[Any], served: Any, world: World) -> None:
    """The client's statement failed (its connection gone); nothing borrowed, no server session left in a
    transaction."""
    assert not thread.is_alive()
    assert outcome and isinstance(outcome[0], BaseException), outcome
    _settled(served, world.databases)
    assert _in_transaction(world.databases) == 0
