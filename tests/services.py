"""Skipping a test whose server, driver or tool is missing — and failing it where it must be there.

A developer without, say, PostgreSQL still gets a green run with the gap listed
as a skip. ``make test`` (and so CI) sets ``DDM_REQUIRE_SERVICES=1``: there the
same gap fails the test, so a server that did not start cannot hide behind a
skip.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
import time
import uuid
from types import ModuleType
from typing import Any, Callable, Iterator, NoReturn

import pytest

__all__ = [
    "REQUIRE_ENV",
    "MARIADB",
    "services_required",
    "require_service",
    "require_module",
    "mariadb_connect",
    "innodb_trx_fresh",
    "fresh_mariadb_databases",
    "POSTGRESQL",
    "postgresql_connect",
    "postgresql_rows",
    "fresh_postgresql_databases",
]

#: Set to ``1`` to turn every "service missing" skip into a failure.
REQUIRE_ENV = "DDM_REQUIRE_SERVICES"


def services_required() -> bool:
    """Is a missing service a failure in this run (``DDM_REQUIRE_SERVICES`` set, not ``0``)?"""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def require_service(name: str, reason: str) -> NoReturn:
    """Skip the current test (or module) because ``name`` is missing; fail it where services are required.

    Args:
        name: What is missing, as a reader would look for it ("MariaDB on 127.0.0.1:3306").
        reason: Why it counts as missing (the connection error, the import error).

    Raises:
        pytest.fail.Exception: with ``DDM_REQUIRE_SERVICES=1``.
        pytest.skip.Exception: otherwise.
    """
    __tracebackhide__ = True  # report the test that needed it, not this helper
    message = f"{name} is not available: {reason}"
    if services_required():
        pytest.fail(f"{message} ({REQUIRE_ENV}=1: this run needs it)", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def require_module(module: str, why: str) -> ModuleType:
    """Import ``module``, or :func:`require_service` it.

    Args:
        module: Dotted module name ("psycopg", "mypy.stubtest").
        why: What needs it, for the skip / failure message.

    Returns:
        The imported module.
    """
    __tracebackhide__ = True
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        require_service(f"the Python module {module} ({why})", str(exc))


#: The machine's MariaDB, as the tests reach it.
MARIADB = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}


def mariadb_connect(**extra: Any) -> Any:
    """A PyMySQL connection (autocommit) to :data:`MARIADB`, or :func:`require_service` it."""
    __tracebackhide__ = True
    pymysql: Any = require_module("pymysql", "the MariaDB tests")
    try:
        return pymysql.connect(**{**MARIADB, "ssl_disabled": True, "autocommit": True, "connect_timeout": 2, **extra})
    except pymysql.MySQLError as exc:
        require_service(f"MariaDB on {MARIADB['host']}:{MARIADB['port']}", str(exc))


#: InnoDB refreshes INFORMATION_SCHEMA.INNODB_TRX (and its lock tables) only once they went unread for
#: 0.1 s (``CACHE_MIN_IDLE_TIME`` in trx0i_s.cc): a poll faster than that reads its first snapshot again
#: and again, and never sees a lock wait that began after it. So reads are spaced by more than that.
_TRX_CACHE_IDLE_S = 0.15
_trx_reads: dict[int, float] = {}
_trx_lock = threading.Lock()


def innodb_trx_fresh(port: int | None = None) -> None:
    """Call right before reading ``INNODB_TRX`` on the server at ``port``: waits until this process last read
    it long enough ago that the server shows its transactions as they are now."""
    server: Any = MARIADB["port"] if port is None else port
    with _trx_lock:
        wait = _trx_reads.get(server, 0.0) + _TRX_CACHE_IDLE_S - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        _trx_reads[server] = time.monotonic()


def mariadb_rows(database: str, sql: str, params: Any = None, *, port: int | None = None) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` in ``database`` (on the server at ``port``, default :data:`MARIADB`), read behind ddm-core's back."""
    conn = mariadb_connect(database=database, **({} if port is None else {"port": port}))
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())
    finally:
        conn.close()


@contextlib.contextmanager
def fresh_mariadb_databases(count: int = 2, connect: Callable[[], Any] | None = None) -> Iterator[list[str]]:
    """``count`` new databases ``ddm_test_<random>_<i>``, dropped afterwards (``connect``: another server)."""
    conn = connect() if connect is not None else mariadb_connect()
    names = [f"ddm_test_{uuid.uuid4().hex[:10]}_{i}" for i in range(count)]
    try:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        yield names
    finally:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


@contextlib.contextmanager
def stock_and_ours_mariadb() -> Iterator[tuple[Any, Any]]:
    """A fresh database and two connections to it: stock PyMySQL's and ddm-core's own
    (execute/mysql_connect.py); both closed and the database dropped afterwards."""
    from ddm_core.execute.mysql_connect import open_mysql

    with fresh_mariadb_databases(1) as (database,):
        stock = mariadb_connect(database=database)
        ours = open_mysql(**MARIADB, database=database, connect_timeout=5)
        try:
            yield stock, ours
        finally:
            ours.close()
            stock.close()


#: The machine's PostgreSQL (trust authentication), as the tests reach it.
POSTGRESQL = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}


def postgresql_connect(database: str = "postgres") -> Any:
    """A psycopg 3 connection (autocommit) to ``database`` on :data:`POSTGRESQL`, or :func:`require_service` it."""
    __tracebackhide__ = True
    psycopg: Any = require_module("psycopg", "psycopg 3, the optional PostgreSQL driver")
    try:
        return psycopg.connect(**POSTGRESQL, dbname=database, autocommit=True, connect_timeout=2)
    except psycopg.Error as exc:
        require_service(f"PostgreSQL on {POSTGRESQL['host']}:{POSTGRESQL['port']}", str(exc))


def postgresql_rows(database: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` in the PostgreSQL ``database``, read behind ddm-core's back."""
    conn = postgresql_connect(database)
    try:
        cur = conn.execute(sql, params)
        return list(cur.fetchall()) if cur.description is not None else []
    finally:
        conn.close()


@contextlib.contextmanager
def fresh_postgresql_databases(count: int = 2) -> Iterator[list[str]]:
    """``count`` new PostgreSQL databases ``ddm_test_<random>_<i>``, dropped afterwards."""
    conn = postgresql_connect()
    names = [f"ddm_test_{uuid.uuid4().hex[:10]}_{i}" for i in range(count)]
    try:
        for name in names:
            conn.execute(f'CREATE DATABASE "{name}"')
        yield names
    finally:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.close()
