"""Shared fixtures of the execute / dbapi / leak tests (no tests here).

Real servers only: MariaDB on 127.0.0.1:3306 (root, empty password) with four
databases ``ddm_exec_<random>_<n>`` created and dropped by the session, SQLite
files under ``tmp_path``, and — for the "server went away" tests — a private
``mariadbd`` started in a temp dir on a free port and killed mid-run.

Every executor fixture checks at teardown that no connection is still
borrowed from any pool: the leak invariant is asserted after *every* test.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.execute import Executor
from ports import free_port

MYSQL = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
SHARDS = 4  # data sources
TABLES = 4  # tables per data source -> 16 targets

ORDER_DDL = (
    "CREATE TABLE t_order (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, "
    "amount INT NOT NULL DEFAULT 0, note VARCHAR(40), slow INT NOT NULL DEFAULT 0)"
)
DICT_DDL = "CREATE TABLE t_dict (id INT NOT NULL PRIMARY KEY, name VARCHAR(40))"
CONFIG_DDL_MYSQL = "CREATE TABLE t_config (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40) UNIQUE)"
CONFIG_DDL_SQLITE = "CREATE TABLE t_config (id INTEGER PRIMARY KEY AUTOINCREMENT, name VARCHAR(40) UNIQUE)"


def mysql_raw(database: str | None = None, port: int = 3306) -> Any:
    """A direct PyMySQL connection (autocommit), for setting up and checking behind ddm-core's back."""
    import pymysql

    return pymysql.connect(
        host="127.0.0.1", port=port, user="root", password="", database=database, autocommit=True,
        ssl_disabled=True, connect_timeout=2,
    )


def sharding_config(urls: dict[str, str], *, tables: int = TABLES, pool: dict[str, int] | None = None,
                    extra_tables: tuple[str, ...] = ()) -> dict[str, Any]:
    """A native configuration dict: ``t_order`` (+ ``extra_tables`` alike) sharded by ``user_id``.

    ``t_order`` keys come from a snowflake generator when ``order_id`` is not given;
    ``t_dict`` is broadcast; ``t_config`` lives on ``ds_0``.
    """
    names = list(urls)

    def sharded(name: str) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "logicTable": name, "shardKey": "user_id", "algorithm": "slots", "slotCount": 1024,
            "shardCount": len(names), "tablePerShard": tables, "databases": names, "tableKey": "user_id",
        }
        if name == "t_order":
            spec["keyGenerator"] = {"column": "order_id", "type": "snowflake"}
        return spec

    return {
        "dataSources": dict(urls),
        "pool": pool or {"maxSize": 8, "minIdle": 2, "acquireTimeoutMs": 1000},
        "tables": [sharded("t_order"), *(sharded(t) for t in extra_tables)],
        "broadcastTables": ["t_dict"],
        "singleTables": {"t_config": names[0]},
        "defaultDataSource": names[0],
        "runtime": {"allowFullRoute": True, "allowDmlFullRoute": True, "fullRouteThreshold": 64},
    }


# -- MariaDB on 3306 ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def mysql_databases() -> Iterator[list[str]]:
    """Four fresh databases on the local MariaDB; dropped at the end of the session."""
    try:
        conn = mysql_raw()
    except Exception as exc:  # not a silent skip: these tests need the server
        pytest.fail(f"MariaDB on 127.0.0.1:3306 (root, no password) is needed by the execute tests: {exc}")
    tag = uuid.uuid4().hex[:8]
    names = [f"ddm_exec_{tag}_{i}" for i in range(SHARDS)]
    with conn.cursor() as cur:
        for name in names:
            cur.execute(f"CREATE DATABASE {name}")
    try:
        yield names
    finally:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.close()


@pytest.fixture(scope="session")
def mysql_config(mysql_databases: list[str]) -> Any:
    """The loaded configuration over the four databases, with the tables created through ddm-core."""
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(mysql_databases)}
    config = load_config(sharding_config(urls, extra_tables=("t_leak",)))
    with Executor(config) as ex:
        ex.execute(ORDER_DDL).close()
        ex.execute(ORDER_DDL.replace("t_order", "t_leak")).close()
        ex.execute(DICT_DDL).close()
        ex.execute(CONFIG_DDL_MYSQL).close()
    return config


def _clean(ex: Executor) -> None:
    for sql in ("DELETE FROM t_order", "DELETE FROM t_dict", "DELETE FROM t_config"):
        ex.execute(sql).close()


@pytest.fixture()
def mysql_executor(mysql_config: Any) -> Iterator[Executor]:
    """An executor over the four MariaDB databases, tables emptied; asserts nothing leaked."""
    ex = Executor(mysql_config, timeout=3.0)
    _clean(ex)
    yield ex
    try:
        assert_no_leaks(ex)
    finally:
        ex.close()


# -- SQLite files ----------------------------------------------------------------------------------


@pytest.fixture()
def sqlite_config(tmp_path: Path) -> Any:
    """Four SQLite files × 4 tables, created through ddm-core."""
    urls = {f"ds_{i}": f"sqlite:///{tmp_path / f'ds_{i}.db'}" for i in range(SHARDS)}
    config = load_config(sharding_config(urls))
    with Executor(config) as ex:
        ex.execute(ORDER_DDL).close()
        ex.execute(DICT_DDL).close()
        ex.execute(CONFIG_DDL_SQLITE).close()
    return config


@pytest.fixture()
def sqlite_executor(sqlite_config: Any) -> Iterator[Executor]:
    ex = Executor(sqlite_config, timeout=3.0)
    yield ex
    try:
        assert_no_leaks(ex)
    finally:
        ex.close()


@pytest.fixture()
def mysql_async_executor(mysql_config: Any) -> Iterator[Any]:
    """The asyncio executor over the four MariaDB databases (tests/runners.py), tables emptied."""
    from runners import BlockingAsyncExecutor

    ex = BlockingAsyncExecutor(mysql_config, timeout=3.0)
    _clean(ex)  # type: ignore[arg-type]
    yield ex
    try:
        ex.settle()
        assert_no_leaks(ex)  # type: ignore[arg-type]
    finally:
        ex.close()


@pytest.fixture()
def sqlite_async_executor(sqlite_config: Any) -> Iterator[Any]:
    from runners import BlockingAsyncExecutor

    ex = BlockingAsyncExecutor(sqlite_config, timeout=3.0)
    yield ex
    try:
        ex.settle()
        assert_no_leaks(ex)  # type: ignore[arg-type]
    finally:
        ex.close()


@pytest.fixture(params=["mariadb", "sqlite"])
def executor(request: pytest.FixtureRequest) -> Executor:
    """The same behaviour checked on both backends."""
    name = "mysql_executor" if request.param == "mariadb" else "sqlite_executor"
    return request.getfixturevalue(name)  # type: ignore[no-any-return]


@pytest.fixture(params=["mariadb", "sqlite", "mariadb-asyncio", "sqlite-asyncio"])
def any_runner_executor(request: pytest.FixtureRequest) -> Any:
    """Both backends, on the thread runner and on the asyncio runner (tests/runners.py)."""
    backend, _, runner = request.param.partition("-")
    name = ("mysql" if backend == "mariadb" else "sqlite") + ("_async_executor" if runner else "_executor")
    return request.getfixturevalue(name)


def assert_no_leaks(ex: Executor, wait: float = 3.0) -> None:
    """Every pool of ``ex`` has nothing borrowed (waits briefly for cancelled workers to finish)."""
    end = time.monotonic() + wait
    while True:
        stats = ex.endpoint_stats()
        if all(s.borrowed == 0 for s in stats):
            return
        if time.monotonic() > end:
            raise AssertionError(f"connections still borrowed: {[s for s in stats if s.borrowed]}")
        time.sleep(0.02)


# -- a private mariadbd, to stop mid-run --------------------------------------------------------------


class PrivateMariaDB:
    """A throw-away ``mariadbd`` in a temp dir (``--skip-grant-tables``), startable and killable.

    ``server_args`` replace the default ``--skip-log-bin`` (tests/replication.py passes
    ``--log-bin``, ``--server-id`` and the binlog format for a primary or a replica).
    """

    def __init__(self, base: Path, server_args: tuple[str, ...] = ()) -> None:
        self.base = base
        self.server_args = server_args
        self.datadir = base / "data"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
        server = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        if install is None or not os.path.exists(server):
            pytest.fail("mariadb-install-db / mariadbd are needed for the unavailable-server tests")
        self.server = server
        self.tmpdir = base / "tmp"
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        # Every mariadbd started here, the installer's bootstrap one included, gets a tmpdir of its own: a
        # starting mariadbd deletes every ``#sql*`` file in its tmpdir, and in /tmp those are the shared
        # server's temporary tables in use (it crashed on such a delete while a test ran beside this one).
        subprocess.run(
            [install, "--no-defaults", f"--datadir={self.datadir}", "--auth-root-authentication-method=normal",
             "--skip-test-db", "--user=root"],
            check=True, capture_output=True, timeout=120, env={**os.environ, "TMPDIR": str(self.tmpdir)},
        )

    def start(self) -> None:
        """Start the server; its first start takes another port if one picked meanwhile took this one."""
        first = self.proc is None and not (self.base / "server.log").exists()
        for _ in range(5):
            if self._start_once():
                return
            if not first or not self._port_was_taken():
                raise RuntimeError(f"mariadbd exited: see {self.base / 'server.log'}")
            self.port = free_port()
        raise RuntimeError(f"mariadbd found no free port: see {self.base / 'server.log'}")

    def _start_once(self) -> bool:
        with open(self.base / "server.log", "ab") as log:  # the server writes to its own copy of the descriptor
            self.proc = subprocess.Popen(
                [self.server, "--no-defaults", f"--datadir={self.datadir}", f"--port={self.port}",
                 "--bind-address=127.0.0.1", f"--socket={self.base / 'sock'}", f"--tmpdir={self.tmpdir}",
                 "--skip-grant-tables", "--user=root", "--innodb-buffer-pool-size=16M",
                 # Tests kill the server's process, never the machine under it: a commit handed to the OS
                 # survives, and the crash tests' writers stop waiting on an fsync per commit (a slow disk).
                 "--innodb-flush-log-at-trx-commit=2",
                 *(self.server_args or ("--skip-log-bin",)), f"--pid-file={self.base / 'pid'}"],
                stdout=log, stderr=log,
            )
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                self.proc = None
                return False
            try:
                conn = mysql_raw(port=self.port)
            except Exception:
                time.sleep(0.05)
                continue
            try:  # the server on this port is this one, not another test process's that took the port
                with conn.cursor() as cur:
                    cur.execute("SELECT @@datadir")
                    datadir = cur.fetchone()[0]
            finally:
                conn.close()
            if os.path.realpath(datadir) == os.path.realpath(self.datadir):
                return True
            time.sleep(0.05)
        raise RuntimeError("mariadbd did not answer within 30 s")

    def _port_was_taken(self) -> bool:
        log = (self.base / "server.log").read_text(errors="replace")
        return "Address already in use" in log.rsplit("Starting MariaDB", 1)[-1]

    def kill(self) -> None:
        """SIGKILL: the server vanishes mid-statement, sockets reset."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def raw(self, database: str | None = None) -> Any:
        return mysql_raw(database, port=self.port)

    def create_database(self, prefix: str) -> str:
        """A new database named ``prefix`` plus a random suffix; its name."""
        name = f"{prefix}{uuid.uuid4().hex[:8]}"
        conn = self.raw()
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {name}")
        conn.close()
        return name


@contextmanager
def running_mariadb(base: Path, server_args: tuple[str, ...] = ()) -> Iterator[PrivateMariaDB]:
    """A private ``mariadbd`` in ``base``, started, and SIGKILLed (by its PID) afterwards."""
    server = PrivateMariaDB(base, server_args)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="session")
def private_mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateMariaDB]:
    with running_mariadb(tmp_path_factory.mktemp("mariadbd")) as server:
        yield server


@pytest.fixture()
def private_config(private_mariadb: PrivateMariaDB) -> Any:
    """Two data sources on the private server (running), t_order created on both."""
    if private_mariadb.proc is None:
        private_mariadb.start()
    tag = uuid.uuid4().hex[:6]
    dbs = [f"ddm_priv_{tag}_{i}" for i in range(2)]
    conn = private_mariadb.raw()
    with conn.cursor() as cur:
        for db in dbs:
            cur.execute(f"CREATE DATABASE {db}")
    conn.close()
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:{private_mariadb.port}/{db}", "username": "root", "password": ""}
            for i, db in enumerate(dbs)}
    config = load_config(sharding_config(urls, tables=2, pool={"maxSize": 4, "minIdle": 1, "acquireTimeoutMs": 1000}))
    with Executor(config) as ex:
        ex.execute(ORDER_DDL).close()
        ex.execute(CONFIG_DDL_MYSQL).close()
    return config
