"""The asyncio DB-API facade (ddm_core.aio.dbapi) in its own asyncio terms.

What it shares with the thread facade (errors, cursors, executemany, implicit transactions) is also
checked by tests/test_dbapi.py, which runs on both facades. Here: the aiomysql-shaped calls
(``await conn.cursor()``, ``async with``, ``async for``, ``rownumber``), who closes the executor,
``close()`` with and without a running loop, and what commits as an independent client (PyMySQL,
sqlite3) sees it. Each test runs its coroutine with ``asyncio.run`` on a real MariaDB
(127.0.0.1:3306) and on SQLite files.
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import threading
from typing import Any, Awaitable, Callable

import asyncmy.errors
import pymysql
import pytest

import ddm_core.aio
import ddm_core.dbapi as dbapi
from ddm_core import errors
from ddm_core.aio import AsyncConnection, AsyncCursor, AsyncExecutor, AsyncResult
from ddm_core.aio import dbapi as aio_dbapi
from ddm_core.execute import Executor
from ddm_core.execute.pools import FALLBACK_PACKET
from ddm_core.route.router import Router
from test_execute_support import (  # noqa: F401 - fixtures
    mysql_config,
    mysql_databases,
    mysql_raw,
    sqlite_config,
)

INSERT = "INSERT INTO t_order (order_id, user_id, amount, note) VALUES (%s, %s, %s, %s)"


@pytest.fixture(params=["mariadb", "sqlite"])
def config(request: pytest.FixtureRequest) -> Any:
    """The four-data-source configuration (t_order sharded, t_dict broadcast, t_config single), tables empty."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_config")
    config = request.getfixturevalue("mysql_config")
    with Executor(config, load_schema=False) as ex:
        for table in ("t_order", "t_dict", "t_config"):
            ex.execute(f"DELETE FROM {table}").close()
    return config


def run(config: Any, body: Callable[[AsyncExecutor], Awaitable[None]], **options: Any) -> None:
    """``body(executor)`` on a fresh loop; afterwards nothing may still be borrowed."""

    async def main() -> None:
        async with AsyncExecutor(config, timeout=3.0, **options) as ex:
            await body(ex)
            await ex.settle()
            assert ex.borrowed() == 0

    asyncio.run(main())


def committed(config: Any, column: str = "note") -> list[Any]:
    """``column`` of every t_order row committed, sorted, as an independent client reads it."""
    out: list[Any] = []
    for unit in Router(config).route(f"SELECT {column} FROM t_order").units:
        endpoint = config.data_sources[unit.data_source].primary
        sql = f"SELECT {column} FROM {unit.tables[0][1]}"
        if endpoint.dialect == "sqlite":
            raw = sqlite3.connect(endpoint.database)
            try:
                out += [row[0] for row in raw.execute(sql)]
            finally:
                raw.close()
        else:
            conn = mysql_raw(endpoint.database)
            try:
                with conn.cursor() as cur:
                    cur.execute(sql)
                    out += [row[0] for row in cur.fetchall()]
            finally:
                conn.close()
    return sorted(out)


def source_of(ex: AsyncExecutor, user: int) -> str:
    return ex.router.route("SELECT 1 FROM t_order WHERE user_id = %s", (user,)).units[0].data_source


def user_on_another_source(ex: AsyncExecutor, user: int) -> int:
    return next(u for u in range(user + 1, 1000) if source_of(ex, u) != source_of(ex, user))


class Plans:
    """A statement observer that keeps the plans it hears of."""

    def __init__(self) -> None:
        self.plans: list[Any] = []

    def finished(self, plan: Any, started: float, result: Any) -> None:
        self.plans.append(plan)

    def failed(self, plan: Any, started: float, error: BaseException) -> None:
        pass


# -- the module ----------------------------------------------------------------------------------


def test_exports_and_the_thread_facades_error_classes() -> None:
    assert ddm_core.aio.connect is aio_dbapi.connect
    assert (ddm_core.aio.AsyncConnection, ddm_core.aio.AsyncCursor) == (aio_dbapi.AsyncConnection, aio_dbapi.AsyncCursor)
    assert ddm_core.aio.AsyncExecutor is AsyncExecutor and ddm_core.aio.AsyncResult is AsyncResult
    for name in ("connect", "AsyncConnection", "AsyncCursor", "AsyncExecutor", "AsyncResult"):
        assert name in ddm_core.aio.__all__
    for name in ("Warning", "Error", "InterfaceError", "DatabaseError", "DataError", "OperationalError",
                 "IntegrityError", "InternalError", "ProgrammingError", "NotSupportedError"):
        assert getattr(AsyncConnection, name) is getattr(dbapi, name)


def test_connect_refuses_what_the_thread_facade_refuses(config: Any) -> None:
    shared = object()  # refused before it is used

    def messages(call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
        with pytest.raises(dbapi.InterfaceError) as info:
            result = call(*args, **kwargs)
            if asyncio.iscoroutine(result):
                asyncio.run(result)
        return str(info.value)

    for args, kwargs in [
        ((), {}),
        ((config,), {"executor": shared}),
        ((), {"executor": shared, "timeout": 1.0, "stream": True}),
        (({"dataSources": {}},), {}),  # an invalid configuration: a ConfigError, an InterfaceError
    ]:
        assert messages(aio_dbapi.connect, *args, **kwargs) == messages(dbapi.connect, *args, **kwargs)
    assert "a configuration, stream, timeout" in messages(aio_dbapi.connect, config, executor=shared, timeout=1.0, stream=True)
    # An unknown transaction mode: refused as a ConfigError naming it and the known ones.
    with pytest.raises(dbapi.InterfaceError, match="'bogus' is not one of local, xa") as info:
        aio_dbapi.connect(config, transaction_mode="bogus")
    assert isinstance(info.value, errors.ConfigError)


# -- who closes the executor ----------------------------------------------------------------------------


def test_an_executor_built_by_connect_is_closed_with_the_connection(config: Any) -> None:
    async def main() -> None:
        conn = await aio_dbapi.connect(config, autocommit=True, timeout=2.0)
        ex = conn.executor
        assert conn.owns_executor and ex.timeout == 2.0
        async with conn.cursor() as cur:
            assert await cur.execute(INSERT, (1, 1, 1, "a")) == 1
        await conn.ensure_closed()
        assert conn.closed and ex.borrowed() == 0
        with pytest.raises(errors.ExecutionError, match="executor is closed"):
            await ex.execute("SELECT COUNT(*) FROM t_order")
        with pytest.raises(dbapi.InterfaceError):
            conn.executor

        # close() on a running loop schedules the same; ensure_closed() waits for it.
        conn = await aio_dbapi.connect(config)
        ex = conn.executor
        await (await conn.cursor()).execute(INSERT, (2, 1, 1, "rolled back"))
        assert conn.in_transaction
        conn.close()
        assert conn.closed and not conn.in_transaction
        await conn.ensure_closed()
        await conn.ensure_closed()  # again: nothing left to do
        assert ex.borrowed() == 0
        with pytest.raises(errors.ExecutionError, match="executor is closed"):
            await ex.execute("SELECT COUNT(*) FROM t_order")

    asyncio.run(main())
    assert committed(config) == ["a"]


def test_a_shared_executor_is_never_closed_by_the_connection(config: Any) -> None:
    async def body(ex: AsyncExecutor) -> None:
        conn = await aio_dbapi.connect(executor=ex, autocommit=True)
        assert not conn.owns_executor and conn.executor is ex
        await (await conn.cursor()).execute(INSERT, (1, 1, 1, "a"))
        conn.close()
        await conn.ensure_closed()
        async with await aio_dbapi.connect(executor=ex) as conn:
            await (await conn.cursor()).execute(INSERT, (2, 1, 1, "b"))
        result = await ex.execute("SELECT COUNT(*) FROM t_order")
        assert await result.fetchall() == [(2,)]

    run(config, body)


# -- cursors ----------------------------------------------------------------------------------------


def test_cursor_forms_fetches_and_async_for(config: Any) -> None:
    async def body(ex: AsyncExecutor) -> None:
        conn = await aio_dbapi.connect(executor=ex, autocommit=True)
        cur = await conn.cursor()  # aiomysql's form
        assert isinstance(cur, AsyncCursor) and cur.connection is conn
        assert await cur.executemany(INSERT, [(u, u, u * 2, f"n{u}") for u in range(1, 21)]) == 20
        assert cur.rowcount == 20 and cur.description is None
        async with conn.cursor() as reader:  # the other form: closed at the end of the block
            assert await reader.execute("SELECT user_id, amount FROM t_order WHERE user_id > %s ORDER BY user_id", (10,)) == -1
            assert [d[0] for d in reader.description] == ["user_id", "amount"]
            assert reader.rownumber == 0
            assert await reader.fetchone() == (11, 22)
            reader.arraysize = 2
            assert await reader.fetchmany() == [(12, 24), (13, 26)]
            assert await reader.fetchmany(3) == [(14, 28), (15, 30), (16, 32)]
            assert reader.rownumber == 6
            assert [row async for row in reader] == [(17, 34), (18, 36), (19, 38), (20, 40)]
            assert await reader.fetchall() == [] and await reader.fetchone() is None
            assert reader.rownumber == 10 and reader.complete
            await reader.execute("SELECT COUNT(*) FROM t_order WHERE amount > %(a)s", {"a": 20})
            assert reader.rownumber == 0 and await reader.fetchall() == [(10,)]
        assert reader.closed
        with pytest.raises(dbapi.ProgrammingError, match="cursor is closed"):
            await reader.execute("SELECT 1 FROM t_config")
        assert await cur.execute("UPDATE t_order SET amount = 0 WHERE user_id <= %s", (5,)) == 5
        await cur.execute("INSERT INTO t_config (name) VALUES (%s)", ("x",))
        assert isinstance(cur.lastrowid, int) and cur.lastrowid > 0
        assert await cur.nextset() is None
        cur.setinputsizes([None])
        cur.setoutputsize(10)
        with pytest.raises(dbapi.NotSupportedError):
            await cur.callproc("p")
        fresh = await conn.cursor()
        with pytest.raises(dbapi.ProgrammingError, match="no result set"):
            await fresh.fetchone()
        await cur.close()
        await conn.ensure_closed()
        with pytest.raises(dbapi.InterfaceError, match="connection is closed"):
            conn.cursor()
        with pytest.raises(dbapi.ProgrammingError, match="connection is closed"):
            await fresh.execute("SELECT 1 FROM t_config")

    run(config, body)


def test_errors_are_the_pep249_classes(config: Any) -> None:
    async def body(ex: AsyncExecutor) -> None:
        a = 1
        b = user_on_another_source(ex, a)
        async with await aio_dbapi.connect(executor=ex) as conn:
            cur = await conn.cursor()
            await cur.execute(INSERT, (1, a, 1, "first"))
            # A duplicate key: IntegrityError and DuplicateKeyError at once, the driver's error as the cause.
            with pytest.raises(conn.IntegrityError) as dup:
                await cur.execute(INSERT, (1, a, 1, "again"))
            assert isinstance(dup.value, errors.DuplicateKeyError) and isinstance(dup.value, dbapi.DatabaseError)
            assert isinstance(dup.value.__cause__, (asyncmy.errors.IntegrityError, sqlite3.IntegrityError))
            assert conn.in_transaction  # the statement failed, the transaction goes on
            # A second data source written in the transaction: refused before anything is sent.
            with pytest.raises(dbapi.NotSupportedError) as cross:
                await cur.execute(INSERT, (2, b, 1, "other source"))
            assert isinstance(cross.value, errors.CrossShardTransactionError)
            with pytest.raises(errors.CrossShardTransactionError):
                await cur.executemany(INSERT, [(3, a, 1, "c"), (4, b, 1, "d")])
            assert ex.borrowed() == 1  # only the first data source is pinned
            with pytest.raises(dbapi.ProgrammingError):  # wrong parameter count: the router says no
                await cur.execute("SELECT 1 FROM t_order WHERE user_id = %s", (1, 2))
            with pytest.raises(dbapi.DatabaseError) as info:
                await cur.execute("SELECT no_such_column FROM t_order WHERE user_id = %s", (a,))
            assert isinstance(info.value, errors.ExecutionError)
        # leaving the block committed the one row that was written
        assert ex.borrowed() == 0

    run(config, body)
    assert committed(config) == ["first"]


# -- transactions, as an independent client sees them ---------------------------------------------------


def test_autocommit_off_commit_and_rollback(config: Any) -> None:
    async def body(ex: AsyncExecutor) -> None:
        conn = await aio_dbapi.connect(executor=ex)
        assert conn.get_autocommit() is False and not conn.in_transaction
        async with conn.cursor() as cur:
            # The executor's first statement, in a transaction, without a column list: the facade has
            # the sharded tables' columns loaded before it routes.
            await cur.execute("INSERT INTO t_order VALUES (%s, %s, %s, %s, %s)", (1, 5, 1, "a", 0))
            await cur.execute(INSERT, (2, 5, 1, "b"))
            assert conn.in_transaction and ex.borrowed() == 1
            assert committed(config) == []  # nobody else sees it yet
            await conn.commit()
            assert not conn.in_transaction and ex.borrowed() == 0
            assert committed(config) == ["a", "b"]
            await cur.execute("DELETE FROM t_order WHERE user_id = %s", (5,))
            assert cur.rowcount == 2
            await conn.rollback()
            assert committed(config) == ["a", "b"]
            await conn.commit()  # nothing open: nothing to do
            await cur.execute(INSERT, (3, 5, 1, "c"))
            await conn.autocommit(True)  # switching it on commits the open transaction
            assert not conn.in_transaction and committed(config) == ["a", "b", "c"]
        await conn.ensure_closed()

    run(config, body)


def test_autocommit_on_and_begin(config: Any) -> None:
    async def body(ex: AsyncExecutor) -> None:
        conn = await aio_dbapi.connect(executor=ex, autocommit=True)
        cur = await conn.cursor()
        await cur.execute(INSERT, (1, 5, 1, "a"))
        assert not conn.in_transaction and ex.borrowed() == 0
        assert committed(config) == ["a"]  # at once
        await conn.begin()
        assert conn.in_transaction
        await cur.execute(INSERT, (2, 5, 1, "b"))
        assert committed(config) == ["a"]
        await conn.rollback()
        await conn.begin()
        await cur.execute(INSERT, (3, 5, 1, "c"))
        await conn.commit()
        assert committed(config) == ["a", "c"]
        await conn.autocommit(False)
        await cur.execute(INSERT, (4, 5, 1, "d"))
        assert conn.in_transaction
        await conn.ensure_closed()  # rolls back

    run(config, body)
    assert committed(config) == ["a", "c"]


def test_async_with_connection_commits_or_rolls_back(config: Any) -> None:
    async def body(ex: AsyncExecutor) -> None:
        async with aio_dbapi.connect(executor=ex) as conn:  # aiomysql's form; `async with await` works too
            await (await conn.cursor()).execute(INSERT, (1, 1, 1, "kept"))
        assert conn.closed
        with pytest.raises(KeyError):
            async with await aio_dbapi.connect(executor=ex) as conn:
                await (await conn.cursor()).execute(INSERT, (2, 1, 1, "dropped"))
                raise KeyError
        assert conn.closed and ex.borrowed() == 0

    run(config, body)
    assert committed(config) == ["kept"]


# -- executemany ------------------------------------------------------------------------------------


def test_executemany_batches_inserts(config: Any) -> None:
    async def body(ex: AsyncExecutor) -> None:
        plans = Plans()
        ex.set_observer(plans)
        conn = await aio_dbapi.connect(executor=ex, autocommit=True)
        cur = await conn.cursor()
        rows = [(u, u % 97, f"n{u}") for u in range(1, 3001)]
        routed_before = ex.router.cache_info().misses
        assert await cur.executemany("INSERT INTO t_order (user_id, amount, note) VALUES (%s, %s, %s)", rows) == 3000
        assert cur.rowcount == 3000
        # Three chunks of 1000 rows share one SQL text (parsed once), regrouped into one plan: an INSERT per table.
        assert ex.router.cache_info().misses - routed_before == 1
        assert len(plans.plans) == 1 and len(plans.plans[0].units) == 16
        keys = cur.generated_keys
        assert len(set(keys)) == 3000
        await cur.execute("SELECT user_id, order_id FROM t_order")
        assert dict(await cur.fetchall()) == {u: keys[u - 1] for u in range(1, 3001)}  # keys in row order

        # In a transaction, rows for one data source; other statements run once per parameter set.
        plans.plans.clear()
        await conn.autocommit(False)
        cur.batch_rows = 2
        n = await cur.executemany(
            "INSERT INTO t_order (order_id, user_id, note) VALUES (%(id)s, %(user)s, %(note)s)",
            [{"id": 10_000 + i, "user": 7, "note": "tx"} for i in range(5)],
        )
        assert n == 5 and len(plans.plans) == 1 and conn.in_transaction
        nobody = next(u for u in range(5000, 6000) if source_of(ex, u) == source_of(ex, 7))  # no rows, same source
        assert await cur.executemany("UPDATE t_order SET amount = amount + 1 WHERE user_id = %s", [(7,), (7,), (nobody,)]) == 12
        assert len(plans.plans) == 4
        await conn.commit()
        assert committed(config).count("tx") == 5
        assert await cur.executemany(INSERT, []) == 0 and cur.rowcount == 0
        await conn.ensure_closed()

    run(config, body)


def test_the_fixed_statement_limits(config: Any) -> None:
    async def body(ex: AsyncExecutor) -> None:
        limits = aio_dbapi._fixed_limits(ex)
        dialect = ex.runner.primary("ds_0").driver.dialect
        packet = FALLBACK_PACKET if dialect.name in ("mysql", "mariadb") else None
        assert limits("ds_0") == (packet, dialect.max_statement_params)

    run(config, body)


# -- closing gives every connection back ------------------------------------------------------------------


def test_closing_returns_every_connection(config: Any) -> None:
    async def body(ex: AsyncExecutor) -> None:
        a = 1
        b = user_on_another_source(ex, a)
        reader = await aio_dbapi.connect(executor=ex, autocommit=True)
        streaming = await reader.cursor()
        await streaming.executemany(INSERT, [(i, i, 0, "committed") for i in range(100, 140)])
        writer = await aio_dbapi.connect(executor=ex)
        cur = await writer.cursor()
        await cur.execute(INSERT, (1, a, 1, "never committed"))
        await cur.execute("SELECT COUNT(*) FROM t_order WHERE user_id = %s", (b,))  # a read pins a second source
        assert ex.borrowed() == 2
        await streaming.execute("SELECT user_id FROM t_order")  # stream=True: every unit's connection held
        assert await streaming.fetchone() is not None
        # MariaDB: one unit per data source (its tables in one UNION ALL); SQLite: one per table
        assert ex.borrowed() == 2 + (16 if ex.config.data_sources["ds_0"].primary.dialect == "sqlite" else 4)
        await writer.ensure_closed()
        await reader.ensure_closed()  # closes the streamed result of the cursor it made
        assert ex.borrowed() == 0
        with pytest.raises(dbapi.ProgrammingError, match="connection is closed"):
            await streaming.fetchone()

    run(config, body, stream=True)
    assert committed(config) == ["committed"] * 40


def test_close_without_a_running_loop_closes_the_pinned_connections(config: Any) -> None:
    threads_before = set(threading.enumerate())
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # what aiosqlite's stop() asks for when no loop runs
    try:
        ex = AsyncExecutor(config, timeout=3.0)

        async def open_transaction() -> AsyncConnection:
            conn = await aio_dbapi.connect(executor=ex)
            await (await conn.cursor()).execute(INSERT, (1, 1, 1, "never committed"))
            return conn

        conn = loop.run_until_complete(open_transaction())
        assert ex.borrowed() == 1
        conn.close()  # no loop runs: nothing to await, the connection is closed instead
        assert conn.closed and ex.borrowed() == 0
        # Dropped with a transaction open: the same.
        conn = loop.run_until_complete(open_transaction())
        assert ex.borrowed() == 1
        del conn
        gc.collect()
        assert ex.borrowed() == 0

        # close() on the loop just before it shuts down: the loop cancels the closing task (as
        # asyncio.run does with the tasks left), and the pinned connection is closed all the same.
        async def close_and_leave() -> None:
            (await open_transaction()).close()

        loop.run_until_complete(close_and_leave())
        left = asyncio.all_tasks(loop)
        assert left and ex.borrowed() == 1
        for task in left:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        assert ex.borrowed() == 0
        loop.run_until_complete(ex.close())
        # aiosqlite threads told to stop report to the loop when they have: let them, before it closes
        # (the bound only keeps a stuck thread from hanging the suite).
        for thread in set(threading.enumerate()) - threads_before:
            if "_connection_worker_thread" in thread.name:
                thread.join(30)
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    assert committed(config) == []
