"""A transaction opened and ended on the proxy's event loop (docs/proxy.md#transactions-on-the-loop).

A read that is a transaction's first statement on a data source opens the transaction there from the loop
(its ``BEGIN`` on an idle pooled connection, which becomes the pin); a ``COMMIT`` or ``ROLLBACK`` of a local
transaction that only read sends one per pin, all at once, from the loop. Checked with real clients (PyMySQL
text, mysql-connector prepared): the rows, that the openings and ends did take the loop (the proxy's
counts), a REPEATABLE READ snapshot taken at the first read, a rollback, a COMMIT failing on a killed data
source (the worker path's error, nothing leaked), a client gone mid-transaction; after each, every pooled
connection back and no server session left inside a transaction.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any, Iterator

import pytest

from raw_mysql import frame, text_row
from services import fresh_mariadb_databases, innodb_trx_fresh, mariadb_connect, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from ddm_core import load_config  # noqa: E402
from ddm_core.execute import Executor  # noqa: E402
from test_proxy_many_loop import Served, _served, _table, _until  # noqa: E402
from test_proxy_support import PASSWORD, USER, proxy_config  # noqa: E402

ROWS = 40
DDL = "CREATE TABLE t_tx (id INTEGER NOT NULL, k BIGINT NOT NULL, PRIMARY KEY (id))"
POINT = "SELECT id, k FROM t_tx WHERE id = %s"
RANGE = "SELECT id, k FROM t_tx WHERE id BETWEEN %s AND %s"


def _filled(config: dict[str, Any]) -> None:
    config["tables"] = [_table("t_tx")]
    config["runtime"] = {"allowFullRoute": True, "allowDmlFullRoute": False, "fullRouteThreshold": 64}  # ranges
    with Executor(load_config(config), load_schema=False) as ex:
        ex.execute(DDL).close()
        for i in range(1, ROWS + 1):
            ex.execute("INSERT INTO t_tx (id, k) VALUES (%s, %s)", (i, i * 10)).close()


def ids_by_source(router: Any) -> dict[str, int]:
    """Per data source, the first id of ``t_tx`` stored there."""
    ids: dict[str, int] = {}
    for i in range(1, ROWS + 1):
        ids.setdefault(router.route(POINT, (i,)).units[0].data_source, i)
    return ids


def _in_transaction(databases: list[str]) -> int:
    """Server sessions on these databases inside a transaction (InnoDB's list of them)."""
    innodb_trx_fresh()
    conn = mariadb_connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p "
                        "ON p.ID = t.trx_mysql_thread_id WHERE p.DB IN %s", (tuple(databases),))  # fmt: skip
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def _settled(served: Served, databases: list[str]) -> None:
    served.at_rest()
    _until(lambda: _in_transaction(databases) == 0, lambda: f"{_in_transaction(databases)} sessions in a transaction")


def _on_loop(served: Served) -> tuple[int, int]:
    runtime = served.server.runtime
    return runtime.opened_on_loop, runtime.ended_on_loop


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[Served, Served, list[str], dict[str, int]]]:
    """A relaying proxy, a worker-path one (``inlineStatements: false``), the databases, and per data source
    an id stored there.

    A connection idle past the pools' ping pause is not lent from the loop (``EndpointPool.lend_idle`` never
    pings): the worker path opens that data source instead, by design. The tests here count what took the
    loop, and their waits on InnoDB's view can outlast the pause on a busy host: proxy_config makes the pause
    (``aliveBypassWindowMs``) long."""
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases)
        _filled(config)
        loop, workers = _served(config, "relay"), _served(config, "workers")
        try:
            router = loop.server.executor.router
            ids = ids_by_source(router)
            yield loop, workers, databases, ids
        finally:
            loop.close()
            workers.close()


def _sysbench_like(cur: Any, ids: dict[str, int], point: str, ranged: str) -> list[Any]:
    """BEGIN, point selects (the first one opens its data source), range reads over both data sources, COMMIT."""
    got: list[Any] = []
    cur.execute("BEGIN")
    for i in (ids["ds_0"], ids["ds_1"], ids["ds_0"]):
        cur.execute(point, (i,))
        got.append([tuple(r) for r in cur.fetchall()])
    for low in (1, 11):
        cur.execute(ranged, (low, low + 9))
        got.append(sorted(tuple(r) for r in cur.fetchall()))
    cur.execute("COMMIT")
    return got


def test_begin_and_commit_are_answered_by_the_gate_where_nothing_else_runs(
        world: tuple[Served, Served, list[str], dict[str, int]]) -> None:  # fmt: skip
    """A plain BEGIN, and the COMMIT of a transaction that pinned nothing or only read, are answered by the hot
    path (docs/proxy.md#the-hot-path), the in-transaction flag as on mimic's path; a BEGIN with characteristics
    and the COMMIT of a transaction that wrote are left to mimic's path, and the write is committed."""
    loop, _, databases, ids = world
    runtime = loop.server.runtime
    with loop.connect() as conn, conn.cursor() as cur:
        before = runtime.hot_controls
        cur.execute("BEGIN")
        assert conn.server_status & 1  # SERVER_STATUS_IN_TRANS
        cur.execute("COMMIT")  # nothing pinned: nothing sent
        assert not conn.server_status & 1
        assert runtime.hot_controls - before == 2
        cur.execute("START TRANSACTION READ ONLY")  # characteristics: mimic's path
        assert conn.server_status & 1
        cur.execute(POINT, (ids["ds_0"],))
        assert cur.fetchall() == ((ids["ds_0"], ids["ds_0"] * 10),)
        cur.execute("COMMIT")  # a pin that only read: sent from the gate
        assert not conn.server_status & 1
        assert runtime.hot_controls - before == 3
        cur.execute("BEGIN")
        cur.execute("UPDATE t_tx SET k = k + 1 WHERE id = %s", (ids["ds_1"],))
        cur.execute("COMMIT")  # it wrote: the worker path commits it
        assert not conn.server_status & 1
        assert runtime.hot_controls - before == 4
        cur.execute(POINT, (ids["ds_1"],))
        assert cur.fetchall() == ((ids["ds_1"], ids["ds_1"] * 10 + 1),)
        cur.execute("UPDATE t_tx SET k = k - 1 WHERE id = %s", (ids["ds_1"],))  # as it was, for the other tests
    _settled(loop, databases)


def test_rollback_is_answered_by_the_gate_as_commit_is(world: tuple[Served, Served, list[str], dict[str, int]]) -> None:
    """A plain ROLLBACK of no transaction (what a pool's reset of a returned connection sends), of one that pinned
    nothing, or of one whose pins only read is answered by the gate (the last sent on its pins from there); one
    after a write is left to the worker path, and the write is undone."""
    loop, _, databases, ids = world
    runtime = loop.server.runtime
    with loop.connect() as conn, conn.cursor() as cur:
        before, ended = runtime.hot_controls, runtime.ended_on_loop
        cur.execute("ROLLBACK")
        assert runtime.hot_controls - before == 1
        cur.execute("BEGIN")
        cur.execute("ROLLBACK")  # pinned nothing: nothing sent
        assert runtime.hot_controls - before == 3 and not conn.server_status & 1
        cur.execute("BEGIN")
        for i in (ids["ds_0"], ids["ds_1"]):  # both data sources pinned, only read
            cur.execute(POINT, (i,))
            assert cur.fetchall() == ((i, i * 10),)
        cur.execute("ROLLBACK")
        assert runtime.hot_controls - before == 5 and runtime.ended_on_loop - ended == 1
        assert not conn.server_status & 1
        cur.execute("BEGIN")
        cur.execute("UPDATE t_tx SET k = k + 100 WHERE id = %s", (ids["ds_1"],))
        cur.execute("ROLLBACK")  # it wrote: the worker path rolls it back
        assert runtime.hot_controls - before == 6 and not conn.server_status & 1
        cur.execute(POINT, (ids["ds_1"],))
        assert cur.fetchall() == ((ids["ds_1"], ids["ds_1"] * 10),)
    _settled(loop, databases)


def test_a_pipelined_burst_of_begins_and_commits_is_answered_in_order(
        world: tuple[Served, Served, list[str], dict[str, int]]) -> None:  # fmt: skip
    """3000 BEGIN / COMMIT / ROLLBACK sent in one write, before any answer is read: the gate answers each at
    once, in order, and the connection serves the next statement (a burst once ended the connection after ~240
    answers: each answer nested a call in the previous one's)."""
    loop, _, databases, ids = world
    before = loop.server.runtime.hot_controls
    with loop.raw() as client:
        texts = [(b"BEGIN", b"COMMIT", b"BEGIN", b"ROLLBACK")[i % 4] for i in range(3000)]
        client.sock.sendall(b"".join(frame(b"\x03" + text, 0) for text in texts))
        answers = [client.response() for _ in texts]
        assert all(len(a) == 1 and a[0][0] == 1 and a[0][1][:1] == b"\x00" for a in answers)
        # the in-transaction flag of each OK: set after a BEGIN, cleared after a COMMIT
        flags = [struct.unpack_from("<H", a[0][1], 3)[0] & 1 for a in answers]
        assert flags == [1 - i % 2 for i in range(3000)]
        client.command(0x03, ("SELECT k FROM t_tx WHERE id = %d" % ids["ds_0"]).encode())
        rows = client.response()
        assert text_row(rows[-2][1], 1) == (str(ids["ds_0"] * 10),)
    assert loop.server.runtime.hot_controls - before == 3000
    _settled(loop, databases)


def _client(loop: Served, client: str) -> tuple[Any, Any, str, str]:
    """A connection in autocommit (``pymysql``: text; ``prepared``: mysql-connector's C client, prepared), its
    cursor, and the point and range reads in its paramstyle."""
    if client == "prepared":
        require_module("mysql.connector", "prepared statements against the proxy")
        from mysql import connector

        conn = connector.connect(host="127.0.0.1", port=loop.port, user=USER, password=PASSWORD, database="logic_db",
                                 ssl_disabled=True, autocommit=True, use_pure=False)  # fmt: skip
        return conn, conn.cursor(prepared=True), POINT.replace("%s", "?"), RANGE.replace("%s", "?")
    conn = loop.connect()
    return conn, conn.cursor(), POINT, RANGE


@pytest.mark.parametrize("client", ["pymysql", "prepared"])
def test_a_read_only_transaction_is_opened_and_committed_on_the_loop(
        world: tuple[Served, Served, list[str], dict[str, int]], client: str) -> None:  # fmt: skip
    loop, _, databases, ids = world
    conn, cur, point, ranged = _client(loop, client)
    expected = [[(ids["ds_0"], ids["ds_0"] * 10)], [(ids["ds_1"], ids["ds_1"] * 10)], [(ids["ds_0"], ids["ds_0"] * 10)],
                [(i, i * 10) for i in range(1, 11)], [(i, i * 10) for i in range(11, 21)]]  # fmt: skip
    assert _sysbench_like(cur, ids, point, ranged) == expected  # the shapes met (on workers)
    before, controls = _on_loop(loop), loop.server.runtime.hot_controls
    for _ in range(3):
        assert _sysbench_like(cur, ids, point, ranged) == expected
    opened, ended = (now - then for now, then in zip(_on_loop(loop), before))
    assert (opened, ended) == (2 * 3, 3)  # both data sources opened, the COMMIT sent, from the loop each time
    assert loop.server.runtime.hot_controls - controls == 2 * 3  # BEGIN and COMMIT answered by the gate
    cur.close()
    conn.close()
    _settled(loop, databases)


def test_the_snapshot_is_taken_at_the_first_read_and_a_rollback_ends_it(
        world: tuple[Served, Served, list[str], dict[str, int]]) -> None:  # fmt: skip
    """REPEATABLE READ: a write committed elsewhere after the transaction's first read there is not seen by
    its second read; after the ROLLBACK (sent from the loop) a new transaction sees it."""
    loop, _, databases, ids = world
    i = ids["ds_1"]
    direct = loop.server.executor
    with loop.connect() as conn, conn.cursor() as cur:
        cur.execute(POINT, (i,))  # the shape, met in autocommit
        cur.fetchall()
        before = _on_loop(loop)
        cur.execute("BEGIN")
        cur.execute(POINT, (i,))
        (row,) = cur.fetchall()
        assert _on_loop(loop)[0] == before[0] + 1  # opened from the loop: its snapshot is taken by this read
        direct.execute("UPDATE t_tx SET k = k + 1 WHERE id = %s", (i,)).close()  # committed, autocommit
        cur.execute(POINT, (i,))
        assert cur.fetchall() == (row,)
        cur.execute("ROLLBACK")
        assert _on_loop(loop)[1] == before[1] + 1
        assert not conn.server_status & 1  # SERVER_STATUS_IN_TRANS: over
        cur.execute(POINT, (i,))
        assert cur.fetchall() == ((i, row[1] + 1),)
    direct.execute("UPDATE t_tx SET k = k - 1 WHERE id = %s", (i,)).close()
    _settled(loop, databases)


@pytest.mark.parametrize("client", ["pymysql", "prepared"])
def test_with_autocommit_off_the_first_read_opens_the_transaction_on_the_loop(
        world: tuple[Served, Served, list[str], dict[str, int]], client: str) -> None:  # fmt: skip
    """PyMySQL's default (autocommit off; SQLAlchemy's sessions too): the first read opens the transaction on
    the loop (its opening sent right behind it), the answer reports it open, its snapshot holds until COMMIT,
    and the next read opens the next one. Multi-unit reads go on its pins."""
    loop, _, databases, ids = world
    i = ids["ds_1"]
    direct, runtime = loop.server.executor, loop.server.runtime
    conn, cur, point, ranged = _client(loop, client)

    def in_transaction() -> bool:  # PyMySQL reads the status of OK packets only: there, the server's own view
        return bool(conn.in_transaction) if client == "prepared" else _in_transaction(databases) >= 1

    def settled(open_: bool) -> None:
        """The transaction open (or not) as the client or the server sees it: the server's view is read again a
        while, since InnoDB refreshes its list of transactions only when no session read it for 0.1 s, which
        the tests beside this one, reading it too, can delay."""
        _until(lambda: in_transaction() == open_, lambda: f"the transaction is {'not ' if open_ else ''}open", 10.0)

    def autocommit(on: bool) -> None:
        if client == "prepared":
            conn.autocommit = on  # mysql-connector's is a property, PyMySQL's a method
        else:
            conn.autocommit(on)
    try:
        cur.execute(point, (i,))  # the shapes, met in autocommit
        cur.fetchall()
        cur.execute(ranged, (1, 20))
        cur.fetchall()
        autocommit(False)
        for _ in range(2):
            before, inlined = _on_loop(loop), runtime.many_inlined
            cur.execute(point, (i,))
            (row,) = [tuple(r) for r in cur.fetchall()]
            settled(True)
            assert _on_loop(loop)[0] == before[0] + 1  # opened from the loop with this read
            direct.execute("UPDATE t_tx SET k = k + 1 WHERE id = %s", (i,)).close()  # committed elsewhere
            cur.execute(point, (i,))
            assert [tuple(r) for r in cur.fetchall()] == [row]  # the snapshot taken by the first read
            cur.execute(ranged, (1, 20))  # both data sources: the other one opened on the loop too
            assert (i, row[1]) in [tuple(r) for r in cur.fetchall()]
            assert runtime.many_inlined == inlined + 1 and _on_loop(loop)[0] == before[0] + 2
            conn.commit()
            settled(False)
            assert _on_loop(loop)[1] == before[1] + 1  # the COMMIT sent from the loop
            autocommit(True)
            cur.execute(point, (i,))
            assert [tuple(r) for r in cur.fetchall()] == [(i, row[1] + 1)]
            autocommit(False)
        before, inlined = _on_loop(loop), runtime.many_inlined
        cur.execute(ranged, (1, 20))  # a multi-unit read first: it opens the transaction on both data sources
        assert len(cur.fetchall()) == 20
        settled(True)
        assert runtime.many_inlined == inlined + 1 and _on_loop(loop)[0] == before[0] + 2
        conn.rollback()
        settled(False)
        assert _on_loop(loop)[1] == before[1] + 1
    finally:
        cur.close()
        conn.close()
        direct.execute("UPDATE t_tx SET k = %s WHERE id = %s", (i * 10, i)).close()
    _settled(loop, databases)


def test_a_client_gone_mid_transaction_gives_its_pins_back(
        world: tuple[Served, Served, list[str], dict[str, int]]) -> None:  # fmt: skip
    loop, _, databases, ids = world
    conn = loop.connect()
    with conn.cursor() as cur:
        cur.execute(RANGE, (1, 20))  # the shape, met in autocommit
        cur.fetchall()
        before = _on_loop(loop)[0]
        cur.execute("BEGIN")
        cur.execute(RANGE, (1, 20))
        assert len(cur.fetchall()) == 20
        assert _on_loop(loop)[0] == before + 2
    _until(lambda: _in_transaction(databases) == 2, lambda: f"{_in_transaction(databases)} sessions in a transaction, not 2")
    sock: socket.socket = conn._sock
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset, as a crashed client
    conn._rfile.close()  # PyMySQL's reader holds the socket open too
    sock.close()
    _settled(loop, databases)


def test_a_commit_failing_on_one_pin_fails_as_on_the_worker_path(tmp_path_factory: pytest.TempPathFactory) -> None:
    """ds_1 on a private mariadbd SIGKILLed between a transaction's last read and its COMMIT, on the loop's
    proxy and on the worker path's: the same error for both clients, no connection left borrowed, ds_0's
    pin not left inside a transaction, and the proxy serves ds_0 on."""
    from test_execute_support import running_mariadb

    with running_mariadb(tmp_path_factory.mktemp("tx-ends-mariadbd")) as backend, \
            fresh_mariadb_databases(1) as (shared,):  # fmt: skip
        private = backend.create_database("ddm_tx_ends_")
        config = proxy_config([shared, private])
        config["dataSources"]["ds_1"]["url"] = f"mysql://127.0.0.1:{backend.port}/{private}"
        _filled(config)
        served = {name: _served(config, name) for name in ("relay", "workers")}
        try:
            router = served["relay"].server.executor.router
            ids = ids_by_source(router)
            conns = {name: one.connect() for name, one in served.items()}
            before = _on_loop(served["relay"])
            for conn in conns.values():
                with conn.cursor() as cur:
                    for i in (ids["ds_0"], ids["ds_1"]):  # the shape met, a connection to each left idle
                        cur.execute(POINT, (i,))
                        cur.fetchall()
                    cur.execute("BEGIN")
                    for i in (ids["ds_0"], ids["ds_1"]):
                        cur.execute(POINT, (i,))
                        assert cur.fetchall() == ((i, i * 10),)
            assert _on_loop(served["relay"])[0] == before[0] + 2
            controls = served["relay"].server.runtime.hot_controls
            backend.kill()
            outcomes: dict[str, Any] = {}
            for name, conn in conns.items():
                try:
                    with conn.cursor() as cur:
                        cur.execute("COMMIT")
                    outcomes[name] = "committed"
                except pymysql.err.MySQLError as exc:
                    outcomes[name] = (type(exc).__name__, exc.args[0])
            assert outcomes["relay"] != "committed" and outcomes["relay"] == outcomes["workers"], outcomes
            assert _on_loop(served["relay"])[1] == before[1] + 1
            assert served["relay"].server.runtime.hot_controls == controls + 1  # the gate's COMMIT (HotEnd)
            for name, one in served.items():
                with conns[name].cursor() as cur:  # the session goes on, out of the transaction
                    cur.execute(POINT, (ids["ds_0"],))
                    assert cur.fetchall() == ((ids["ds_0"], ids["ds_0"] * 10),)
                conns[name].close()
                one.at_rest()
            _until(lambda: _in_transaction([shared]) == 0, lambda: "ds_0's pin left inside a transaction")
        finally:
            for one in served.values():
                one.close()


def test_concurrent_transactions_on_the_loop_leave_nothing_behind(
        world: tuple[Served, Served, list[str], dict[str, int]]) -> None:  # fmt: skip
    """Four clients, each a series of read-only transactions (more clients than idle connections at times:
    the ones that find none take the worker path): the right rows for each, and the pools at rest after."""
    loop, _, databases, ids = world
    errors: list[BaseException] = []

    def client() -> None:
        try:
            with loop.connect() as conn, conn.cursor() as cur:
                for _ in range(10):
                    got = _sysbench_like(cur, ids, POINT, RANGE)
                    assert got[3] == [(i, i * 10) for i in range(1, 11)]
        except BaseException as exc:  # noqa: BLE001  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    _settled(loop, databases)


def test_a_transactions_pins_stay_watched_between_its_reads(world: tuple[Served, Served, list[str], dict[str, int]]
                                                             ) -> None:  # fmt: skip
    """The pins a transaction's reads wait on stay watched by the loop from one read to the next
    (docs/proxy.md#the-pins-watched), and are given up before anything else may read or close them: a write
    (a worker), the COMMIT; the reads' answers are the same whatever took them."""
    loop, _, databases, ids = world
    runtime = loop.server.runtime
    with loop.connect() as conn, conn.cursor() as cur:
        session = runtime.sessions[conn.thread_id()]
        watched = session._pin_watches
        assert len(watched) == 0
        for _ in range(2):
            got = _sysbench_like(cur, ids, POINT, RANGE)  # ends with its COMMIT: nothing watched after it
            assert got[0] == [(ids["ds_0"], ids["ds_0"] * 10)] and got[1] == [(ids["ds_1"], ids["ds_1"] * 10)]
            assert len(watched) == 0
            cur.execute("BEGIN")
            for i in (ids["ds_0"], ids["ds_1"], ids["ds_0"]):
                cur.execute(POINT, (i,))
                assert cur.fetchall() == ((i, i * 10),)
            cur.execute(RANGE, (1, 20))
            assert len(cur.fetchall()) == 20
            assert len(watched) == 2  # both pins, watched once
            cur.execute("UPDATE t_tx SET k = k + 1 WHERE id = %s", (ids["ds_1"],))  # a worker writes on the pin
            assert len(watched) == 0
            cur.execute(POINT, (ids["ds_1"],))
            assert cur.fetchall() == ((ids["ds_1"], ids["ds_1"] * 10 + 1),)  # read on the loop again, its write seen
            assert len(watched) == 1
            cur.execute("ROLLBACK")
            assert len(watched) == 0
    _settled(loop, databases)
