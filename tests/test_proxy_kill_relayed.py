"""``KILL QUERY`` of a statement the proxy's event loop sent: stopped on its data source, answered 1317.

A statement relayed on the hot path or sent from the loop (one unit, or several) used to be only
flagged by another session's ``KILL QUERY``: it ran on its data source to its end (a
``SLEEP(30)``, 30 s) and only then answered 1317. Now the session's ``KILL QUERY`` stops it there
(proxy/kill.py ``stop_sent``: the statement's socket shut down, ``KILL QUERY <thread id>`` from a
connection of its own), the client gets MariaDB's 1317, its session goes on, and no connection
stays borrowed.

An in-process proxy (its counters tell which path a statement took) over two MariaDB databases; the
victim is PyMySQL (text) or mysql-connector's pure-Python prepared cursor (binary), the killer
PyMySQL. The statement sleeps 30 s on MariaDB; the test waits until the server's processlist shows
it, kills it through the proxy, and then waits (bounded well under 30 s) until the processlist shows
it no more.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest

from services import fresh_mariadb_databases, mariadb_connect, require_module
from test_proxy_support import PASSWORD, USER, InProcessProxy, proxy_config, until

require_module("mysql_mimic", "ddm proxy")
require_module("mysql.connector", "prepared statements against the proxy")

from ddm_core import load_config  # noqa: E402
from ddm_core.execute import Executor  # noqa: E402

DDL = "CREATE TABLE t_k (id INTEGER NOT NULL PRIMARY KEY, s INTEGER NOT NULL)"
ROWS = 16
SLOW = 3  # the row whose s is 30: a statement reading it sleeps 30 s on MariaDB; the others 0
INTERRUPTED = 1317
#: The statements killed (the shape: a literal is a parameter of it, as the proxy reads a text), with the
#: values of a run that sleeps 0 (it makes the shape known) and of one that sleeps 30 s.
ONE_UNIT = ("SELECT id, SLEEP(s) FROM t_k WHERE id = {0}", (1,), (SLOW,))
MANY_UNITS = ("SELECT id FROM t_k WHERE id BETWEEN {0} AND {1} AND SLEEP(s) = 0", (4, ROWS), (1, ROWS))


@pytest.fixture(scope="module")
def killable() -> Iterator[tuple[InProcessProxy, list[str]]]:
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases)
        config["tables"].append({"logicTable": "t_k", "shardKey": "id", "algorithm": "slots", "slotCount": 64,
                                 "shardCount": 2, "tablePerShard": 2, "databases": ["ds_0", "ds_1"],
                                 "tableKey": "id"})  # fmt: skip
        config["runtime"] = {"allowFullRoute": True, "fullRouteThreshold": 64}
        config["pool"] = {**config["pool"], "maxSize": 6, "minIdle": 2, "acquireTimeoutMs": 3000}
        config["proxy"]["batchRows"] = 100  # every result here is one batch: a decoded read stays on the loop
        with Executor(load_config(config), load_schema=False) as ex:
            ex.execute(DDL).close()
            for i in range(1, ROWS + 1):
                ex.execute("INSERT INTO t_k (id, s) VALUES (%s, %s)", (i, 30 if i == SLOW else 0)).close()
        proxy = InProcessProxy(load_config(config), load_schema=False, timeout=120)  # no deadline stops it
        try:
            yield proxy, databases
        finally:
            proxy.close()


def _sleeping(databases: list[str]) -> int:
    """Statements of the test's databases sleeping on MariaDB now."""
    conn = mariadb_connect()
    try:
        with conn.cursor() as cur:
            marks = ", ".join(["%s"] * len(databases))
            cur.execute(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB IN ({marks}) "
                        "AND INFO LIKE '%%SLEEP%%' AND ID <> CONNECTION_ID()", databases)  # fmt: skip
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def _text_client(proxy: InProcessProxy) -> tuple[Any, int, Callable[[str, tuple[Any, ...]], Any]]:
    conn = pymysql.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD, database="logic_db",
                           autocommit=True, read_timeout=60)  # fmt: skip
    with conn.cursor() as cur:
        cur.execute("SELECT CONNECTION_ID()")
        session = int(cur.fetchone()[0])

    def run(sql: str, params: tuple[Any, ...]) -> Any:
        with conn.cursor() as cur:
            cur.execute(sql.format(*params))
            return cur.fetchall()

    return conn, session, run


def _prepared_client(proxy: InProcessProxy) -> tuple[Any, int, Callable[[str, tuple[Any, ...]], Any]]:
    from mysql import connector

    conn = connector.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD, database="logic_db",
                             use_pure=True, ssl_disabled=True, autocommit=True)  # fmt: skip

    def run(sql: str, params: tuple[Any, ...]) -> Any:
        cur = conn.cursor(prepared=True)
        try:
            cur.execute(sql.format(*["?"] * len(params)), params)
            return cur.fetchall()
        finally:
            cur.close()

    return conn, int(conn.connection_id), run


def _counts(proxy: InProcessProxy) -> tuple[int, int, int]:
    runtime = proxy.server.runtime
    return runtime.inlined, runtime.many_inlined, runtime.hot_many


@pytest.mark.parametrize("client", [_text_client, _prepared_client], ids=["text", "prepared"])
@pytest.mark.parametrize("shape", [ONE_UNIT, MANY_UNITS], ids=["one-unit", "multi-unit"])
def test_kill_query_stops_a_statement_sent_from_the_loop_on_its_data_source(
    killable: tuple[InProcessProxy, list[str]], client: Any, shape: tuple[str, tuple[int, ...], tuple[int, ...]]
) -> None:
    proxy, databases = killable
    sql, quick, slow = shape
    conn, session, run = client(proxy)
    killer = pymysql.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD, database="logic_db",
                             autocommit=True)  # fmt: skip
    try:
        for _ in range(2):  # the shape's first run is routed on a worker; the next ones go from the loop
            run(sql, quick)
        before = _counts(proxy)
        outcome: list[Any] = []

        def victim() -> None:
            try:
                outcome.append(run(sql, slow))
            except Exception as exc:  # noqa: BLE001  # handed to the test's thread
                outcome.append(exc)

        running = threading.Thread(target=victim)
        running.start()
        until(lambda: _sleeping(databases) > 0, "the statement never ran on MariaDB", 15)
        with killer.cursor() as cur:
            cur.execute(f"KILL QUERY {session}")
        until(lambda: _sleeping(databases) == 0, "the killed statement still runs on MariaDB", 15)  # < its 30 s
        running.join(20)
        assert not running.is_alive(), "the client got no answer"
        assert len(outcome) == 1 and isinstance(outcome[0], Exception), outcome
        assert outcome[0].args[0] == INTERRUPTED or getattr(outcome[0], "errno", None) == INTERRUPTED, outcome
        after = _counts(proxy)
        went = (after[0] - before[0], after[1] - before[1], after[2] - before[2])
        # a multi-unit read is taken by the gate (ProxySession._hot_many), not mimic's command loop
        assert (went[0] > 0, went[1], went[2]) == ((True, 0, 0) if shape is ONE_UNIT else (False, 1, 1)), (
            f"not from the loop: {went}")  # fmt: skip
        assert [tuple(r) for r in run(ONE_UNIT[0], (SLOW + 1,))] == [(SLOW + 1, 0)]  # the session goes on
        executor = proxy.server.executor
        until(lambda: executor.borrowed() == 0, f"still borrowed: {executor.pool_stats()}")
    finally:
        conn.close()
        killer.close()
