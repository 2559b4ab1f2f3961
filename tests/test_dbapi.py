"""The PEP 249 facade: module globals, exceptions, connections, cursors, executemany.

The tests that connect run on both facades: the thread one over an :class:`Executor`, and the
asyncio one (:mod:`ddm_core.aio.dbapi`) over an ``AsyncExecutor``, driven from this thread
(tests/aio_dbapi_support.py); its own tests (``async with``, ``close()`` on a loop) are in
tests/test_aio_dbapi.py.
"""

from __future__ import annotations

import collections
import sqlite3
from typing import Any, Callable, Iterator

import asyncmy.errors
import pymysql
import pytest

import ddm_core.dbapi as dbapi
from ddm_core import errors
from ddm_core.execute import Executor
from aio_dbapi_support import blocking_connect
from runners import RUNNERS, BlockingAsyncExecutor
from test_execute_support import (  # noqa: F401 - fixtures
    any_runner_executor,
    assert_no_leaks,
    mysql_async_executor,
    mysql_config,
    mysql_databases,
    mysql_executor,
    mysql_raw,
    sqlite_async_executor,
    sqlite_config,
    sqlite_executor,
)

INSERT = "INSERT INTO t_order (order_id, user_id, amount, note) VALUES (%s, %s, %s, %s)"


@pytest.fixture()
def executor(any_runner_executor: Any) -> Any:
    """Both backends, each under the thread facade (an Executor) and the asyncio one (an AsyncExecutor)."""
    return any_runner_executor


def connect_for(ex: Any) -> Callable[..., Any]:
    """The ``connect`` of the facade that runs on ``ex``, as a blocking call."""
    return blocking_connect(ex) if isinstance(ex, BlockingAsyncExecutor) else dbapi.connect


@pytest.fixture()
def connect(executor: Any) -> Callable[..., Any]:
    return connect_for(executor)


@pytest.fixture()
def conn(executor: Executor, connect: Callable[..., Any]) -> Iterator[dbapi.Connection]:
    c = connect(executor=executor)
    yield c
    c.close()


def source_of(ex: Executor, user: int) -> str:
    return ex.router.route("SELECT 1 FROM t_order WHERE user_id = %s", (user,)).units[0].data_source


def two_sources(ex: Executor) -> tuple[int, int]:
    other = next(u for u in range(2, 1000) if source_of(ex, u) != source_of(ex, 1))
    return 1, other


# -- module ----------------------------------------------------------------------------------


def test_module_globals() -> None:
    assert dbapi.apilevel == "2.0"
    assert dbapi.threadsafety == 1
    assert dbapi.paramstyle == "format"
    for name in ("Warning", "Error", "InterfaceError", "DatabaseError", "DataError", "OperationalError",
                 "IntegrityError", "InternalError", "ProgrammingError", "NotSupportedError"):
        assert name in dbapi.__all__ and getattr(dbapi.Connection, name) is getattr(dbapi, name)
    assert issubclass(dbapi.Error, Exception) and issubclass(dbapi.Warning, Exception)
    for sub in (dbapi.DataError, dbapi.OperationalError, dbapi.IntegrityError, dbapi.InternalError,
                dbapi.ProgrammingError, dbapi.NotSupportedError):
        assert issubclass(sub, dbapi.DatabaseError)
    assert issubclass(dbapi.InterfaceError, dbapi.Error) and issubclass(dbapi.DatabaseError, dbapi.Error)


@pytest.mark.parametrize(
    ("error", "pep"),
    [
        (errors.DuplicateKeyError("dup"), dbapi.IntegrityError),
        (errors.DataSourceUnavailableError("down"), dbapi.OperationalError),
        (errors.PoolTimeoutError("busy"), dbapi.OperationalError),
        (errors.QueryTimeoutError("slow"), dbapi.OperationalError),
        (errors.CrossShardTransactionError("two"), dbapi.NotSupportedError),
        (errors.UnsupportedSQLError("no"), dbapi.NotSupportedError),
        (errors.ParameterError("params"), dbapi.ProgrammingError),
        (errors.ShardValueError("value"), dbapi.DataError),
        (errors.ConfigError("config"), dbapi.InterfaceError),
        (errors.ExecutionError("other"), dbapi.DatabaseError),
    ],
)
def test_every_ddm_error_maps_to_a_pep249_class(error: errors.DdmError, pep: type) -> None:
    mapped = dbapi.to_pep249(error)
    assert isinstance(mapped, pep) and isinstance(mapped, type(error))
    assert str(mapped) == str(error)


# -- errors through the facade ---------------------------------------------------------------------


def test_duplicate_key_is_an_integrity_error(conn: dbapi.Connection, executor: Executor) -> None:
    conn.autocommit(True)
    cur = conn.cursor()
    cur.execute(INSERT, (1, 7, 1, "x"))
    with pytest.raises(dbapi.IntegrityError) as info:
        cur.execute(INSERT, (1, 7, 1, "x"))
    err = info.value
    assert isinstance(err, errors.DuplicateKeyError) and isinstance(err, conn.IntegrityError)
    assert err.data_source == source_of(executor, 7)
    # the driver's own error (aiosqlite raises sqlite3's)
    assert isinstance(err.__cause__, (pymysql.err.IntegrityError, asyncmy.errors.IntegrityError, sqlite3.IntegrityError))
    # pymysql-style code catching the base class keeps working
    with pytest.raises(dbapi.DatabaseError):
        cur.execute(INSERT, (1, 7, 1, "x"))


def test_driver_errors_keep_their_pep249_class(conn: dbapi.Connection) -> None:
    cur = conn.cursor()
    with pytest.raises(dbapi.DatabaseError) as info:
        cur.execute("SELECT no_such_column FROM t_order WHERE user_id = %s", (1,))
    # MariaDB says ProgrammingError (1054), sqlite3 OperationalError ("no such column")
    assert isinstance(info.value, (dbapi.ProgrammingError, dbapi.OperationalError))
    assert isinstance(info.value, errors.ExecutionError)
    with pytest.raises(dbapi.ProgrammingError):  # wrong parameter count: the router says no
        cur.execute("SELECT 1 FROM t_order WHERE user_id = %s", (1, 2))


def test_misuse_raises_programming_or_interface_errors(conn: dbapi.Connection, connect: Callable[..., Any]) -> None:
    cur = conn.cursor()
    with pytest.raises(dbapi.ProgrammingError):
        cur.fetchone()
    cur.close()
    with pytest.raises(dbapi.ProgrammingError):
        cur.execute("SELECT 1 FROM t_config")
    with pytest.raises(dbapi.NotSupportedError):
        conn.cursor().callproc("p")
    conn.close()
    with pytest.raises(dbapi.InterfaceError):
        conn.cursor()
    with pytest.raises(dbapi.InterfaceError):
        connect()


# -- cursors ------------------------------------------------------------------------------------


def test_cursor_reads_like_pymysql(conn: dbapi.Connection) -> None:
    conn.autocommit(True)
    with conn.cursor() as cur:
        for u in range(1, 21):
            assert cur.execute(INSERT, (u, u, u * 2, f"n{u}")) == 1
        assert cur.rowcount == 1
        assert cur.execute("SELECT user_id, amount FROM t_order WHERE user_id > %s ORDER BY user_id", (10,)) == -1
        assert [d[0] for d in cur.description] == ["user_id", "amount"]
        assert cur.fetchone() == (11, 22)
        cur.arraysize = 2
        assert cur.fetchmany() == [(12, 24), (13, 26)]
        assert cur.fetchmany(3) == [(14, 28), (15, 30), (16, 32)]
        assert list(cur) == [(17, 34), (18, 36), (19, 38), (20, 40)]
        assert cur.fetchall() == [] and cur.fetchone() is None
        assert cur.complete
        cur.execute("UPDATE t_order SET amount = 0 WHERE user_id <= %s", (5,))
        assert cur.rowcount == 5 and cur.description is None
        cur.execute("SELECT COUNT(*) FROM t_order WHERE amount = %(a)s", {"a": 0})
        assert cur.fetchall() == [(5,)]
        cur.execute("INSERT INTO t_config (name) VALUES (%s)", ("x",))
        assert isinstance(cur.lastrowid, int)
        cur.setinputsizes([None])
        cur.setoutputsize(10)
        assert cur.nextset() is None
    assert cur.closed


# -- transactions -------------------------------------------------------------------------------------


def test_implicit_transaction_commit_and_rollback(
    conn: dbapi.Connection, executor: Executor, connect: Callable[..., Any]
) -> None:
    cur = conn.cursor()
    cur.execute(INSERT, (1, 5, 1, "a"))
    assert conn.in_transaction and executor.borrowed() == 1
    other = connect(executor=executor, autocommit=True).cursor()
    other.execute("SELECT COUNT(*) FROM t_order")
    assert other.fetchone() == (0,)  # not committed yet
    conn.commit()
    assert not conn.in_transaction and executor.borrowed() == 0
    other.execute("SELECT COUNT(*) FROM t_order")
    assert other.fetchone() == (1,)
    cur.execute("DELETE FROM t_order WHERE user_id = %s", (5,))
    conn.rollback()
    other.execute("SELECT COUNT(*) FROM t_order")
    assert other.fetchone() == (1,)
    assert executor.borrowed() == 0


def test_cross_shard_write_in_the_implicit_transaction(conn: dbapi.Connection, executor: Executor) -> None:
    a, b = two_sources(executor)
    cur = conn.cursor()
    cur.execute(INSERT, (1, a, 1, "a"))
    with pytest.raises(dbapi.NotSupportedError) as info:
        cur.execute(INSERT, (2, b, 1, "b"))
    assert isinstance(info.value, errors.CrossShardTransactionError)
    conn.commit()
    with pytest.raises(errors.CrossShardTransactionError):
        cur.executemany(INSERT, [(3, a, 1, "c"), (4, b, 1, "d")])
    conn.rollback()
    cur.execute("SELECT user_id FROM t_order")
    assert cur.fetchall() == [(a,)]
    conn.commit()


def test_context_managers_commit_or_roll_back(executor: Executor, connect: Callable[..., Any]) -> None:
    with connect(executor=executor) as c:
        c.cursor().execute(INSERT, (1, 1, 1, "kept"))
    assert c.closed
    with pytest.raises(KeyError):
        with connect(executor=executor) as c:
            c.cursor().execute(INSERT, (2, 1, 1, "dropped"))
            raise KeyError
    c = connect(executor=executor)
    c.cursor().execute(INSERT, (3, 1, 1, "closed without commit"))
    c.close()  # rolls back
    with connect(executor=executor, autocommit=True) as c:
        cur = c.cursor()
        cur.execute("SELECT note FROM t_order")
        assert cur.fetchall() == [("kept",)]
    assert executor.borrowed() == 0


def test_autocommit_switch(conn: dbapi.Connection, executor: Executor) -> None:
    assert conn.get_autocommit() is False
    conn.cursor().execute(INSERT, (1, 1, 1, "a"))
    conn.autocommit(True)  # commits the open transaction
    assert not conn.in_transaction and executor.borrowed() == 0
    conn.cursor().execute(INSERT, (2, 1, 1, "b"))
    assert not conn.in_transaction
    conn.begin()
    conn.cursor().execute("DELETE FROM t_order WHERE user_id = %s AND order_id = %s", (1, 2))
    conn.rollback()
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM t_order")
    assert cur.fetchone() == (2,)


# -- executemany ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("runner", RUNNERS)
def test_executemany_sends_one_insert_per_target(
    runner: str, request: pytest.FixtureRequest, mysql_databases: list[str]
) -> None:
    mysql_executor = request.getfixturevalue("mysql_executor" if runner == "threads" else "mysql_async_executor")
    conn = connect_for(mysql_executor)(executor=mysql_executor, autocommit=True)
    cur = conn.cursor()
    rows = [(u, u % 97, f"n{u}") for u in range(1, 10_001)]
    routed_before = mysql_executor.router.cache_info().misses
    assert cur.executemany("INSERT INTO t_order (user_id, amount, note) VALUES (%s, %s, %s)", rows) == 10_000
    keys = cur.generated_keys
    assert len(keys) == 10_000 and len(set(keys)) == 10_000
    # 10 batches of 1000 rows share one SQL text: parsed once.
    assert mysql_executor.router.cache_info().misses - routed_before == 1

    # Every row landed exactly once, on the table the router picks for it.
    expected: collections.Counter[tuple[str, str]] = collections.Counter()
    for u in range(1, 10_001):
        unit = mysql_executor.router.route("SELECT 1 FROM t_order WHERE user_id = %s", (u,)).units[0]
        expected[(unit.data_source, unit.tables[0][1])] += 1
    assert len(expected) == 16
    found: collections.Counter[tuple[str, str]] = collections.Counter()
    seen: set[int] = set()
    for i, db in enumerate(mysql_databases):
        raw = mysql_raw(db)
        with raw.cursor() as c:
            for t in range(4):
                c.execute(f"SELECT user_id, order_id FROM t_order_{i}_{t}")
                got = c.fetchall()
                found[(f"ds_{i}", f"t_order_{i}_{t}")] = len(got)
                for user, order_id in got:
                    assert user not in seen
                    seen.add(user)
                    assert keys[user - 1] == order_id  # generated keys come back in row order
        raw.close()
    assert found == expected and seen == set(range(1, 10_001))
    conn.close()


def test_executemany_variants(conn: dbapi.Connection) -> None:
    conn.autocommit(True)
    cur = conn.cursor()
    cur.batch_rows = 3
    n = cur.executemany(
        "INSERT INTO t_order (order_id, user_id, amount) VALUES (%(id)s, %(user)s, %(amount)s)",
        [{"id": i, "user": i, "amount": 1, "ignored": 0} for i in range(1, 11)],
    )
    assert n == 10
    assert cur.executemany("INSERT INTO t_order (order_id, user_id) VALUES (?, ?)", [(i, i) for i in range(11, 14)]) == 3
    cur.batch_rows = None  # the whole sequence as one INSERT (one per target)
    assert cur.executemany(INSERT, [(i, i, 0, None) for i in range(20, 30)]) == 10
    cur.execute("DELETE FROM t_order WHERE user_id >= %s", (20,))
    # Not an INSERT ... VALUES: once per parameter set, counts summed.
    assert cur.executemany("UPDATE t_order SET amount = amount + 1 WHERE user_id = %s", [(1,), (2,), (99,)]) == 2
    assert cur.executemany("UPDATE t_order SET amount = 0 WHERE user_id = %s", []) == 0
    cur.execute("SELECT SUM(amount), COUNT(*) FROM t_order")
    total, count = cur.fetchone()  # type: ignore[misc]
    assert (int(total), count) == (12, 13)


def test_insert_batch_recognition() -> None:
    batch = dbapi.insert_batch("INSERT INTO t (a, b) VALUES (%s, %s) ON DUPLICATE KEY UPDATE b = VALUES(b)")
    assert batch is not None
    sql, params = batch.build([(1, 2), (3, 4)])
    assert sql == "INSERT INTO t (a, b) VALUES (%s, %s), (%s, %s) ON DUPLICATE KEY UPDATE b = VALUES(b)"
    assert params == [1, 2, 3, 4]
    assert dbapi.insert_batch("INSERT INTO t (a, b) VALUES (%s, NOW())") is None  # not placeholders only
    assert dbapi.insert_batch("INSERT INTO t (a) VALUES (%s) ON DUPLICATE KEY UPDATE a = %s") is None
    assert dbapi.insert_batch("UPDATE t SET a = %s") is None
