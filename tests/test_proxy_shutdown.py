"""SIGTERM on a real ``ddm proxy``: running statements finish, open transactions roll back,
new connections are refused, and no backend connection is left open."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

from services import fresh_mariadb_databases, mariadb_connect, mariadb_rows, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from test_proxy_support import ProxyProcess, connect, create_tables, proxy_config, write_config  # noqa: E402


def _backend_sessions(databases: list[str], *, sql_like: str | None = None) -> int:
    """Connections to MariaDB whose current database is one of ``databases`` (the proxy's pools)."""
    conn = mariadb_connect()
    try:
        with conn.cursor() as cur:
            marks = ", ".join(["%s"] * len(databases))
            query = f"SELECT COUNT(*) FROM information_schema.processlist WHERE db IN ({marks}) AND id <> CONNECTION_ID()"
            args: list[Any] = list(databases)
            if sql_like is not None:
                query += " AND info LIKE %s"
                args.append(sql_like)
            cur.execute(query, args)
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def _wait_for(check: Any, what: str, tries: int = 400) -> None:
    # Waits for a state, bounded in tries; nothing is measured.
    for _ in range(tries):
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"never saw: {what}")


def test_sigterm_finishes_running_statements_and_returns_every_backend_connection(tmp_path: Any) -> None:
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases, shutdownGraceMs=20_000)
        create_tables(config)
        proxy = ProxyProcess(write_config(config, tmp_path / "proxy.yaml")).start()
        try:
            # A session idle inside a transaction: it pins a backend connection.
            open_tx = connect(proxy.port)
            with open_tx.cursor() as cur:
                cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (1, 10)")
            # A statement still running when SIGTERM comes.
            busy = connect(proxy.port, autocommit=True)
            outcome: dict[str, Any] = {}

            def run_long() -> None:
                try:
                    with busy.cursor() as cur:
                        cur.execute("SELECT SLEEP(1.5) AS slept")
                        outcome["rows"] = cur.fetchall()
                except Exception as exc:  # reported below
                    outcome["error"] = exc

            runner = threading.Thread(target=run_long)
            runner.start()
            _wait_for(lambda: _backend_sessions(databases, sql_like="SELECT SLEEP%") == 1, "the SLEEP on a backend")
            assert _backend_sessions(databases) >= 2  # the pinned transaction and the running statement

            assert proxy.terminate() == 0
            runner.join(60)
            assert outcome.get("rows") == ((0,),), outcome  # it finished within the grace period
            assert "0 backend connection(s) were still borrowed at close" in proxy.stderr, proxy.stderr
            assert _backend_sessions(databases) == 0
            # The idle transaction was rolled back, not committed.
            assert all(mariadb_rows(db, f"SELECT * FROM t_order_{i}_{t}") == []
                       for i, db in enumerate(databases) for t in range(4))  # fmt: skip
            with pytest.raises(pymysql.err.OperationalError) as refused:
                connect(proxy.port)
            assert refused.value.args[0] == 2003  # nothing listens any more
            for conn in (open_tx, busy):
                try:
                    conn.close()
                except pymysql.MySQLError:
                    pass  # the proxy already ended the session
        finally:
            proxy.stop()


def test_processes_share_one_port_and_all_stop_on_sigterm(tmp_path: Any) -> None:
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases)
        create_tables(config)
        proxy = ProxyProcess(write_config(config, tmp_path / "proxy.yaml"), "--processes", "2").start()
        try:
            # As long as one process may take to start (ProxyProcess.start waits 60 s); say why if not.
            try:
                # Each process prints the line once (its INFO log may repeat it, depending on the logging setup).
                _wait_for(lambda: len(re.findall(r"^ddm proxy listening on", proxy.stderr, re.M)) == 2,
                          "both processes listening", tries=1200)
            except AssertionError as exc:
                raise AssertionError(f"{exc}; stderr:\n{proxy.stderr}") from None
            clients = [connect(proxy.port, autocommit=True) for _ in range(16)]
            owners = set()
            for i, conn in enumerate(clients):
                with conn.cursor() as cur:
                    cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", (i + 1, i))
                    cur.execute("SELECT CONNECTION_ID()")
                    owners.add(cur.fetchone()[0] >> 16)  # the serving process's id is in the high bits
            assert len(owners) == 2, "the kernel spreads 16 connections over both processes"
            rows = sum(len(mariadb_rows(db, f"SELECT * FROM t_order_{i}_{t}"))
                       for i, db in enumerate(databases) for t in range(4))  # fmt: skip
            assert rows == 16
            assert proxy.terminate() == 0
            assert proxy.stderr.count("0 backend connection(s) were still borrowed at close") == 2, proxy.stderr
            assert _backend_sessions(databases) == 0
            for conn in clients:
                try:
                    conn.close()
                except pymysql.MySQLError:
                    pass
        finally:
            proxy.stop()


def test_a_client_gone_mid_result_gives_its_streamed_connections_back(tmp_path: Any) -> None:
    import socket

    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases)
        create_tables(config)
        proxy = ProxyProcess(write_config(config, tmp_path / "proxy.yaml")).start()
        try:
            loader = connect(proxy.port, autocommit=True)
            with loader.cursor() as cur:
                for start in range(0, 20_000, 2_000):  # far more than the socket buffers hold
                    cur.execute("INSERT INTO t_small (order_id, user_id, note) VALUES "
                                + ", ".join(f"({i}, {i}, 'row {i} of many')" for i in range(start + 1, start + 2_001)))  # fmt: skip
            loader.close()
            reader = connect(proxy.port, autocommit=True)
            cur = reader.cursor(pymysql.cursors.SSCursor)
            cur.execute("SELECT order_id, note FROM t_small")
            assert cur.fetchone() is not None
            reader._sock.shutdown(socket.SHUT_RDWR)  # the client vanishes mid-result
            reader._sock.close()
            # PyMySQL's unbuffered result would try to read the rest when collected: drop it here.
            cur._result.unbuffered_active = False
            cur._result = None
            reader._result = None
            reader._sock = None
            # The proxy still answers others, and at shutdown nothing is borrowed.
            other = connect(proxy.port, autocommit=True)
            with other.cursor() as c2:
                c2.execute("SELECT COUNT(*) FROM t_small")
                assert c2.fetchone() == (20_000,)
            other.close()
            assert proxy.terminate() == 0
            assert "0 backend connection(s) were still borrowed at close" in proxy.stderr, proxy.stderr
            assert _backend_sessions(databases) == 0
        finally:
            proxy.stop()
