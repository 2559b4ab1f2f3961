"""Shared pieces of the ``ddm proxy`` tests (no tests here).

A proxy is a real ``ddm proxy`` subprocess (``python -m ddm_core.cli proxy
--port 0``) over a sharded configuration on the machine's MariaDB, in fresh
uniquely named databases; clients are real ones (PyMySQL, the ``mariadb``
command line, SQLAlchemy).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import copy
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from ddm_core import load_config
from ddm_core.execute import Executor
from ddm_core.proxy import native_password_hash
from test_execute_support import CONFIG_DDL_MYSQL, DICT_DDL, ORDER_DDL, sharding_config

USER = "app"
PASSWORD = "s3cret-Pw"
TEST_STATEMENT_TIMEOUT_MS = 30_000
TEST_ALIVE_BYPASS_MS = 60_000
BATCH_ROWS = 7  # small, so multi-batch streaming is exercised by a few dozen rows
SMALL = "t_small"  # two shards: a full route on it is allowed (threshold 2); t_order's 8 are refused

_LISTENING = re.compile(r"ddm proxy listening on (\S+):(\d+)")


def proxy_config(databases: list[str], **proxy: Any) -> dict[str, Any]:
    """``t_order`` on 2 × 4 tables, ``t_small`` on 2 × 1, ``t_dict`` broadcast, ``t_config`` single."""
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(databases)}  # fmt: skip
    # aliveBypassWindowMs: a pooled connection idle past 0.5 s (the product's default) is pinged before it is lent,
    # which the event loop never waits for: on a stalled CI host such a read went to a worker where tests count
    # reads the loop took (tests/test_pool_alive_bypass.py tests the window itself).
    config = sharding_config(urls, pool={"maxSize": 4, "minIdle": 1, "acquireTimeoutMs": 2000,
                                         "aliveBypassWindowMs": TEST_ALIVE_BYPASS_MS})
    small = copy.deepcopy(config["tables"][0])
    small.update(logicTable=SMALL, tablePerShard=1)
    small.pop("keyGenerator", None)
    config["tables"].append(small)
    config["runtime"] = {"allowFullRoute": False, "fullRouteThreshold": 2}
    # The product's 3 s statement deadline is raised: on a loaded CI host a first read over several units can
    # take that long. The tests of the deadline set it back (statementTimeoutMs=3000).
    config["proxy"] = {"users": [{"name": USER, "passwordHash": native_password_hash(PASSWORD)}],
                       "batchRows": BATCH_ROWS, "workers": 4, "statementTimeoutMs": TEST_STATEMENT_TIMEOUT_MS,
                       **proxy}  # fmt: skip
    return config


def create_tables(config: dict[str, Any]) -> None:
    with Executor(load_config(config)) as ex:
        for ddl in (ORDER_DDL, ORDER_DDL.replace("t_order", SMALL), DICT_DDL, CONFIG_DDL_MYSQL):
            ex.execute(ddl).close()


def write_config(config: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


#: Every proxy a test started: one a failed test left running (its assertion came before its ``terminate``) is
#: stopped when the test process exits, so no run leaves a proxy behind
_STARTED: list[ProxyProcess] = []


@atexit.register
def _stop_left_running() -> None:
    for proxy in _STARTED:
        proxy.stop()


class ProxyProcess:
    """``ddm proxy`` in a subprocess on a free port; stderr collected by a thread."""

    def __init__(self, config_path: Path | None, *extra_args: str) -> None:
        """``config_path`` ``None``: the configuration is named by ``extra_args`` (``--follow URL``)."""
        self.config_path = config_path
        self.extra_args = extra_args
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self._ready = threading.Event()

    def start(self) -> ProxyProcess:
        # PYTHONFAULTHANDLER: a proxy that dies of a fatal error leaves its threads' stacks in the log the tests read
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ddm_core.cli", "proxy", *(["-c", str(self.config_path)] if self.config_path else []),
             "--port", "0", *self.extra_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        _STARTED.append(self)
        threading.Thread(target=self._read, daemon=True).start()
        # A bound on start-up, not a measurement: a proxy that never listens fails here.
        if not self._ready.wait(60) or not self.port:
            self.stop()
            raise AssertionError("ddm proxy did not start:\n" + self.stderr)
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            m = _LISTENING.search(line)
            if m and not self.port:
                self.port = int(m.group(2))
                self._ready.set()
        self._ready.set()  # exited before listening

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def terminate(self) -> int:
        """SIGTERM, then the exit status (the proxy shuts down by itself)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def proxy_and_reference(directory: Path, table: str, ddl: str, insert: str, rows: list[tuple[Any, ...]],
                        **proxy: Any) -> Iterator[tuple[int, str]]:  # fmt: skip
    """A proxy subprocess over ``table`` (``ddl``) sharded as ``t_small`` on two data sources, and a third
    database holding the same ``rows`` (``insert``) in one table, the reference its answers are compared with:
    the proxy's port and that database. ``proxy``: more of the proxy section."""
    from services import fresh_mariadb_databases, mariadb_connect

    with fresh_mariadb_databases(3) as databases:
        config = proxy_config(databases[:2], **proxy)
        sharded = copy.deepcopy(next(t for t in config["tables"] if t["logicTable"] == SMALL))
        sharded["logicTable"] = table
        config["tables"].append(sharded)
        create_tables(config)
        with Executor(load_config(config)) as ex:
            ex.execute(ddl).close()
            for row in rows:
                ex.execute(insert, row).close()
        direct = mariadb_connect(database=databases[2])
        with direct.cursor() as cur:
            cur.execute(ddl)
            cur.executemany(insert, rows)
        direct.commit()
        direct.close()
        proxy_process = ProxyProcess(write_config(config, directory / "proxy.yaml")).start()
        try:
            yield proxy_process.port, databases[2]
        finally:
            proxy_process.stop()


#: A query's ``(description, rows)`` as one client reads them.
Read = Callable[[str], tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]


def prepared_reader(conn: Any) -> Read:
    """Queries read through mysql-connector's prepared cursor (the binary protocol): names and type codes, rows."""

    def read(sql: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        cur = conn.cursor(prepared=True)
        cur.execute(sql)
        rows = [tuple(r) for r in cur.fetchall()]
        description = [(d[0], d[1]) for d in cur.description or ()]
        cur.close()
        return description, rows

    return read


def typed_rows(rows: list[tuple[Any, ...]]) -> list[tuple[tuple[str, str], ...]]:
    """Rows as their values' types and reprs: equal only where a client got the same values of the same types."""
    return [tuple((type(v).__name__, repr(v)) for v in row) for row in rows]


def until(done: Callable[[], bool], why: str, seconds: float = 20.0) -> None:
    """Poll ``done`` until it holds; fail with ``why`` past ``seconds`` (a bound on a wait, not a measurement)."""
    end = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < end, why
        time.sleep(0.02)


def connect(port: int, **extra: Any) -> Any:
    """A PyMySQL connection to the proxy as the configured user."""
    import pymysql

    options: dict[str, Any] = {"user": USER, "password": PASSWORD, "database": "logic_db"}
    options.update(extra)
    return pymysql.connect(host="127.0.0.1", port=port, connect_timeout=10, **options)


def mariadb_cli(port: int, sql: str, *, password: str = PASSWORD, tls: tuple[str, ...] = ("--skip-ssl",)
                ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """The ``mariadb`` command line against the proxy on ``port`` (``tls``: its TLS options)."""
    import shutil

    from services import require_service

    binary = shutil.which("mariadb") or shutil.which("mysql")
    if binary is None:
        require_service("the mariadb command-line client", "not on PATH")
    return subprocess.run(
        [binary, "--protocol=TCP", "-h", "127.0.0.1", "-P", str(port), "-u", USER, f"-p{password}", *tls,
         "--batch", "logic_db", "-e", sql],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


class InProcessProxy:
    """A ``ProxyServer`` in this process, on an event loop thread of its own (its runtime and executor can be
    read directly); ``options`` go to the server's executor."""

    def __init__(self, config: Any, **options: Any) -> None:
        from ddm_core.proxy.server import ProxyServer

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = ProxyServer(config, port=0, **options)
        self.call(self.server.start())
        self.port: int = self.server.port

    def call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(60)

    def close(self) -> None:
        try:
            self.call(self.server.shutdown())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


#: The one ``t_small`` row :func:`one_row_proxy` holds: (order_id 1, user_id 7, amount 10).
ROW_USER_ID = 7


@contextlib.contextmanager
def one_row_proxy(executor_options: dict[str, Any] | None = None,
                  **proxy: Any) -> Iterator[tuple[InProcessProxy, list[str]]]:  # fmt: skip
    """An in-process proxy (``proxy`` settings, ``executor_options``) over 2 fresh databases whose ``t_small``
    holds one row (:data:`ROW_USER_ID`); yields it and the databases."""
    from services import fresh_mariadb_databases

    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases, **proxy)
        create_tables(config)
        served = InProcessProxy(load_config(config), load_schema=False, **(executor_options or {}))
        try:
            with connect(served.port, autocommit=True) as client, client.cursor() as cur:
                cur.execute(f"INSERT INTO {SMALL} (order_id, user_id, amount) VALUES (1, {ROW_USER_ID}, 10)")
            yield served, databases
        finally:
            served.close()


def row_amount(databases: list[str]) -> int:
    """The amount of :func:`one_row_proxy`'s row on MariaDB, read behind the proxy's back (committed data only)."""
    from services import mariadb_rows

    marks = ", ".join(["%s"] * len(databases))
    tables = mariadb_rows(databases[0], "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE "
                          f"TABLE_SCHEMA IN ({marks}) AND TABLE_NAME LIKE %s", (*databases, f"{SMALL}%"))  # fmt: skip
    read = "SELECT amount FROM `{}` WHERE user_id = %s"
    amounts = [int(row[0]) for schema, table in tables for row in mariadb_rows(schema, read.format(table), (ROW_USER_ID,))]
    assert len(amounts) == 1, amounts
    return amounts[0]
