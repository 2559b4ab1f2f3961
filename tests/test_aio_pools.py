"""The asyncio endpoint pool: the thread pool's sizing and behaviour on one event loop, and cancellation.

SQLite files in ``tmp_path`` where any backend will do; the local MariaDB (a database of this
module's own, dropped afterwards) where the server must act: a connection killed server-side,
a transaction left open, connections closed by dispose; PostgreSQL for its ping; a TCP server
that never answers for a borrow cancelled mid-connect.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from aio_support import SilentServer, closed_port, mysql_endpoint, pg_endpoint, run, sqlite_endpoint
from ddm_core import load_config
from ddm_core.aio import AsyncBorrowed, AsyncEndpointPool, AsyncPoolRegistry
from ddm_core.errors import DataSourceUnavailableError, ExecutionError, PoolTimeoutError
from ddm_core.execute.pools import PING_AFTER, EndpointPool, PoolStats
from ddm_core.metadata.model import Endpoint, PoolSettings
from ddm_core.readwrite.breaker import EndpointBreaker
from services import fresh_mariadb_databases, mariadb_connect, mariadb_rows, require_module, require_service

require_module("asyncmy", "the asyncio MySQL driver (the aio extra)")
require_module("aiosqlite", "the asyncio SQLite driver (the aio extra)")


def _pool(endpoint: Endpoint, **settings: int) -> AsyncEndpointPool:
    values = {"max_size": 3, "min_idle": 0, "acquire_timeout_ms": 200, **settings}
    return AsyncEndpointPool("ds_0", endpoint, PoolSettings(**values))


def _file(tmp_path: Path) -> Endpoint:
    return sqlite_endpoint(str(tmp_path / "p.db"))


def _counts(pool: AsyncEndpointPool) -> tuple[int, int, int]:
    s = pool.stats()
    return s.idle, s.borrowed, s.open


async def _until(condition: Any, what: str) -> None:
    """Let the loop run until ``condition()`` holds (each try yields; no clock is asserted)."""
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never happened: {what}")


@pytest.fixture(scope="module")
def mariadb() -> Iterator[str]:
    with fresh_mariadb_databases(1) as (name,):
        conn = mariadb_connect(database=name)
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE t_kv (k INT PRIMARY KEY, v VARCHAR(20))")
        conn.close()
        yield name


async def _on_server(database: str, thread_id: int) -> bool:
    rows = await asyncio.to_thread(
        mariadb_rows, database, "SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = %s", (thread_id,)
    )
    return bool(rows)


# -- lending and returning ----------------------------------------------------------------------


def test_the_last_returned_connection_is_lent_first(tmp_path: Path) -> None:
    async def go() -> None:
        pool = _pool(_file(tmp_path))
        a, b = await pool.borrow(), await pool.borrow()
        assert a.raw is not b.raw
        a.release()
        b.release()
        again = await pool.borrow()
        assert again.raw is b.raw  # warmest first
        s = pool.stats()
        assert (s.idle, s.borrowed, s.open, s.borrows, s.max_size) == (1, 1, 2, 3, 3)
        again.release()
        again.release()  # idempotent
        assert again.released and pool.stats().borrowed == 0
        await pool.dispose()

    run(go())


def test_a_waiting_borrow_gets_the_next_returned_connection(tmp_path: Path) -> None:
    async def go() -> None:
        pool = _pool(_file(tmp_path), max_size=1, acquire_timeout_ms=5000)
        held = await pool.borrow()
        waiter = asyncio.create_task(pool.borrow())
        await _until(lambda: pool._waiters, "the borrow waits")
        raw = held.raw
        held.release()
        got = await waiter
        assert got.raw is raw and pool.stats().timeouts == 0 and pool.stats().open == 1
        got.release()
        await pool.dispose()

    run(go())


def test_a_full_pool_times_out_as_the_thread_pool_does(tmp_path: Path) -> None:
    endpoint = _file(tmp_path)
    settings = PoolSettings(max_size=1, min_idle=0, acquire_timeout_ms=200)
    thread_pool = EndpointPool("ds_0", endpoint, settings)
    held = thread_pool.borrow()
    with pytest.raises(PoolTimeoutError) as thread_error:
        thread_pool.borrow()
    held.release()
    thread_pool.dispose()

    async def go() -> PoolTimeoutError:
        pool = AsyncEndpointPool("ds_0", endpoint, settings)
        held = await pool.borrow()
        try:
            with pytest.raises(PoolTimeoutError) as info:
                await pool.borrow()
            s = pool.stats()
            assert (s.timeouts, s.borrows, s.open) == (1, 1, 1)
            with pytest.raises(PoolTimeoutError) as early:  # a statement deadline shortens the wait
                await pool.borrow(deadline=time.monotonic() + 0.01)
            assert early.value.context["timeout"] < 0.2
            return info.value
        finally:
            held.release()
            await pool.dispose()

    error = run(go())
    assert str(error) == str(thread_error.value)
    assert str(error) == "data source 'ds_0' (endpoint 'ds_0'): no connection became free within 0.2 s (all 1 borrowed)"
    assert error.context == thread_error.value.context


def test_a_discarded_connection_frees_its_slot(tmp_path: Path) -> None:
    async def go() -> None:
        pool = _pool(_file(tmp_path), max_size=1)
        first = await pool.borrow()
        raw = first.raw
        first.release(discard=True)
        second = await pool.borrow()  # not a timeout: the slot came back
        assert second.raw is not raw and pool.stats().discards == 1
        second.release()
        await pool.dispose()

    run(go())


def test_borrow_many_takes_all_or_none(tmp_path: Path) -> None:
    async def go() -> None:
        pool = _pool(_file(tmp_path), acquire_timeout_ms=5000)
        with pytest.raises(ExecutionError, match="cannot lend 4 connections at once \\(max size 3\\)"):
            await pool.borrow_many(4)
        held = [await pool.borrow(), await pool.borrow()]
        with pytest.raises(PoolTimeoutError, match="2 connections did not become free within 0.05 s"):
            await pool.borrow_many(2, timeout=0.05)
        assert _counts(pool) == (0, 2, 2)  # nothing taken by the failed call
        waiting = asyncio.create_task(pool.borrow_many(3))
        await _until(lambda: pool._waiters, "borrow_many waits")
        held[0].release()  # two free now, three wanted: still waiting, nothing taken
        await asyncio.sleep(0.01)
        assert not waiting.done() and _counts(pool) == (1, 1, 2)
        held[1].release()
        three = await waiting
        assert len({id(b.raw) for b in three}) == 3 and _counts(pool) == (0, 3, 3)
        for b in three:
            b.release()
        s = pool.stats()
        assert (s.idle, s.borrowed, s.timeouts, s.borrows) == (3, 0, 1, 5)
        await pool.dispose()

    run(go())


def test_lend_idle_never_waits_opens_or_pings(tmp_path: Path) -> None:
    async def go() -> None:
        pool = _pool(_file(tmp_path))
        assert pool.lend_idle() is None  # cold: warming up is borrow()'s job
        first = await pool.borrow()
        assert pool.lend_idle() is None  # nothing idle
        raw = first.raw
        first.release()
        lent = pool.lend_idle()
        assert lent is not None and lent.raw is raw and pool.stats().borrows == 2
        lent.release()
        await asyncio.sleep(PING_AFTER + 0.1)
        assert pool.lend_idle() is None  # idle long enough to need a ping: left to borrow()
        again = await pool.borrow()
        assert again.raw is raw  # pinged, alive, lent
        again.release()
        await pool.dispose()

    run(go())


def test_min_idle_is_opened_on_first_use_or_by_warm_up(tmp_path: Path) -> None:
    async def go() -> None:
        pool = _pool(_file(tmp_path), min_idle=2)
        assert _counts(pool) == (0, 0, 0)  # nothing at construction
        assert await pool.warm_up() == 2 and _counts(pool) == (2, 0, 2)
        await pool.dispose()
        lazy = _pool(_file(tmp_path), min_idle=2)
        b = await lazy.borrow()
        assert _counts(lazy) == (1, 1, 2)
        b.release()
        await lazy.dispose()

    run(go())


def test_connections_past_their_lifetime_or_idle_time_are_closed(tmp_path: Path) -> None:
    async def go() -> None:
        pool = _pool(_file(tmp_path), max_lifetime_ms=100)
        first = await pool.borrow()
        raw = first.raw
        first.release()
        await asyncio.sleep(0.15)
        second = await pool.borrow()
        assert second.raw is not raw and _counts(pool) == (0, 1, 1)
        await _until(lambda: not raw._thread.is_alive(), "the old connection's thread ends")  # closed
        second.release()
        await pool.dispose()

        idle = _pool(_file(tmp_path), idle_timeout_ms=100)
        a, b = await idle.borrow(), await idle.borrow()
        old = a.raw
        a.release()
        await asyncio.sleep(0.15)
        b.release()  # the return finds `a` idle too long, beyond min_idle (0): closed
        assert _counts(idle) == (1, 0, 1)
        await _until(lambda: not old._thread.is_alive(), "the expired connection's thread ends")
        await idle.dispose()

    run(go())


def test_sqlite_memory_is_one_connection_that_never_expires() -> None:
    async def go() -> None:
        pool = _pool(sqlite_endpoint(":memory:"), max_size=5, min_idle=3, max_lifetime_ms=50, idle_timeout_ms=50)
        assert (pool.max_size, pool.min_idle, pool.shared) == (1, 1, False)
        first = await pool.borrow()
        await pool.driver.execute(first.raw, "CREATE TABLE t (a INT)", ())
        first.release()
        await asyncio.sleep(0.1)
        again = await pool.borrow()
        assert again.raw is first.raw  # still the one database
        assert (await pool.driver.execute(again.raw, "SELECT count(*) FROM t", ())).rows == [(0,)]
        again.release()
        await pool.dispose()

    run(go())


# -- the server's side --------------------------------------------------------------------------


def test_a_connection_killed_on_the_server_is_replaced_by_the_ping(mariadb: str) -> None:
    async def go() -> None:
        pool = _pool(mysql_endpoint(mariadb), acquire_timeout_ms=2000)
        first = await pool.borrow()
        killed = pool.driver.thread_id(first.raw)
        first.release()
        await asyncio.to_thread(mariadb_rows, mariadb, f"KILL CONNECTION {killed}")
        await asyncio.sleep(PING_AFTER + 0.1)
        second = await pool.borrow()  # the ping fails, a new connection takes the slot
        assert pool.driver.thread_id(second.raw) != killed
        assert (await pool.driver.execute(second.raw, "SELECT 1", None)).rows == [(1,)]
        s = pool.stats()
        assert (s.open, s.borrowed, s.discards, s.borrows) == (1, 1, 0, 2)
        second.release()
        await pool.dispose()

    run(go())


def test_a_connection_returned_inside_a_transaction_is_closed_and_rolled_back(mariadb: str) -> None:
    async def go() -> None:
        pool = _pool(mysql_endpoint(mariadb), acquire_timeout_ms=2000)
        borrowed = await pool.borrow()
        thread_id = pool.driver.thread_id(borrowed.raw)
        assert thread_id is not None
        await pool.driver.begin(borrowed.raw)
        await pool.driver.execute(borrowed.raw, "INSERT INTO t_kv VALUES (%s, %s)", (1, "left open"))
        borrowed.release()  # synchronous: the connection is closed, not rolled back in the background
        s = pool.stats()
        assert (s.open, s.idle, s.discards) == (0, 0, 1)
        for _ in range(400):
            if not await _on_server(mariadb, thread_id):
                break
            await asyncio.sleep(0.005)
        else:
            raise AssertionError("the session is still on the server")
        await pool.dispose()

    run(go())
    conn = mariadb_connect(database=mariadb)
    try:
        with conn.cursor() as cur:  # its row lock went with its session: no wait, no duplicate
            cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
            cur.execute("INSERT INTO t_kv VALUES (1, 'after')")
            cur.execute("SELECT v FROM t_kv")
            assert cur.fetchall() == (("after",),)
            cur.execute("DELETE FROM t_kv")
    finally:
        conn.close()


def test_sqlite_memory_rolls_back_in_a_task_to_keep_its_database() -> None:
    async def go() -> None:
        pool = _pool(sqlite_endpoint(":memory:"))
        driver = pool.driver
        borrowed = await pool.borrow()
        raw = borrowed.raw
        await driver.execute(raw, "CREATE TABLE t (a INT)", ())
        await driver.begin(raw)
        await driver.execute(raw, "INSERT INTO t VALUES (1)", ())
        borrowed.release()
        assert _counts(pool) == (0, 1, 1)  # still out: its rollback runs
        await _until(lambda: pool.stats().idle == 1, "the rollback gives the connection back")
        again = await pool.borrow()
        assert again.raw is raw and not driver.in_transaction(raw)
        assert (await driver.execute(raw, "SELECT count(*) FROM t", ())).rows == [(0,)]  # table kept, row gone
        again.release()
        assert pool.stats().discards == 0
        await pool.dispose()

    run(go())


def test_dispose_closes_idle_connections_now_and_borrowed_ones_on_return(mariadb: str) -> None:
    async def go() -> None:
        pool = _pool(mysql_endpoint(mariadb), acquire_timeout_ms=2000)
        a, b = await pool.borrow(), await pool.borrow()
        ids = pool.driver.thread_id(a.raw), pool.driver.thread_id(b.raw)
        assert ids[0] is not None and ids[1] is not None
        a.release()
        await pool.dispose()
        assert _counts(pool) == (0, 1, 1)
        await _until_gone(mariadb, ids[0])
        assert await _on_server(mariadb, ids[1])
        b.release()  # of the disposed generation: closed on its return, not kept
        assert _counts(pool) == (0, 0, 0) and pool.stats().discards == 0
        await _until_gone(mariadb, ids[1])
        c = await pool.borrow()  # the pool goes on with new connections
        assert pool.driver.thread_id(c.raw) not in ids
        c.release()
        await pool.dispose()

    run(go())


async def _until_gone(database: str, thread_id: int) -> None:
    for _ in range(400):
        if not await _on_server(database, thread_id):
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"connection {thread_id} is still on the server")


def test_dispose_closes_sqlite_connections_before_it_returns(tmp_path: Path) -> None:
    async def go() -> None:
        pool = _pool(_file(tmp_path), min_idle=2)
        await pool.warm_up()
        raws = [c.raw for c in pool._idle]
        await pool.dispose()
        assert all(raw._connection is None for raw in raws)  # closed in their threads already
        await _until(lambda: not any(raw._thread.is_alive() for raw in raws), "their threads end")

    run(go())


# -- cancellation -------------------------------------------------------------------------------


def test_a_cancelled_waiting_borrow_leaves_the_pool_exact(tmp_path: Path) -> None:
    async def go() -> None:
        pool = _pool(_file(tmp_path), max_size=1, acquire_timeout_ms=5000)
        held = await pool.borrow()
        waiter = asyncio.create_task(pool.borrow())
        await _until(lambda: pool._waiters, "the borrow waits")
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert not pool._waiters
        s = pool.stats()
        assert (s.open, s.borrowed, s.borrows, s.timeouts) == (1, 1, 1, 0)
        raw = held.raw
        held.release()
        again = await pool.borrow()
        assert again.raw is raw and _counts(pool) == (0, 1, 1)
        again.release()
        await pool.dispose()

    run(go())


def test_a_wake_up_a_cancelled_waiter_had_received_goes_to_the_next(tmp_path: Path) -> None:
    async def go() -> None:
        pool = _pool(_file(tmp_path), max_size=1, acquire_timeout_ms=5000)
        held = await pool.borrow()
        first = asyncio.create_task(pool.borrow())
        await _until(lambda: len(pool._waiters) == 1, "the first waits")
        second = asyncio.create_task(pool.borrow())
        await _until(lambda: len(pool._waiters) == 2, "the second waits")
        held.release()  # wakes the first ...
        first.cancel()  # ... which is cancelled before it runs again
        with pytest.raises(asyncio.CancelledError):
            await first
        got = await second  # had the wake-up been lost, this would end in PoolTimeoutError after 5 s
        assert got.raw is held.raw and pool.stats().timeouts == 0
        got.release()
        await pool.dispose()

    run(go())


def test_a_borrow_cancelled_mid_connect_closes_the_half_open_connection() -> None:
    silent = SilentServer()
    try:
        async def go() -> None:
            pool = _pool(mysql_endpoint("db", port=silent.port), acquire_timeout_ms=30_000)
            borrowing = asyncio.create_task(pool.borrow())
            await _until(lambda: silent.accepted == 1, "the TCP connect is accepted")
            assert _counts(pool) == (0, 1, 1)  # a slot counted for the connection being opened
            borrowing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await borrowing
            s = pool.stats()
            assert (s.open, s.borrowed, s.borrows, s.discards) == (0, 0, 0, 0)
            await _until(lambda: silent.closed == 1, "the half-open connection is closed")
            await pool.dispose()

        run(go())
    finally:
        silent.close()


def test_a_borrow_cancelled_during_its_ping_frees_the_slot(mariadb: str) -> None:
    async def go() -> None:
        pool = _pool(mysql_endpoint(mariadb), acquire_timeout_ms=2000)
        first = await pool.borrow()
        raw = first.raw
        first.release()
        await asyncio.sleep(PING_AFTER + 0.1)
        borrowing = asyncio.create_task(pool.borrow())
        await asyncio.sleep(0)  # the borrow has sent its ping and waits for the answer
        borrowing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await borrowing
        assert _counts(pool) == (0, 0, 0) and not raw.connected  # state unknown: closed
        again = await pool.borrow()
        assert again.raw is not raw
        again.release()
        await pool.dispose()

    run(go())


def test_many_tasks_some_cancelled_at_random_leave_the_pool_exact(tmp_path: Path) -> None:
    async def go() -> None:
        pool = _pool(_file(tmp_path), acquire_timeout_ms=10_000)
        rng = random.Random(7)
        in_use: set[int] = set()

        def take(borrowed: list[AsyncBorrowed]) -> None:
            for b in borrowed:
                assert id(b.raw) not in in_use  # never lent twice at once
                in_use.add(id(b.raw))

        async def worker(n: int) -> int:
            done = 0
            for i in range(15):
                lent = await pool.borrow_many(2) if (n + i) % 4 == 0 else [await pool.borrow()]
                take(lent)
                try:
                    for b in lent:
                        await pool.driver.execute(b.raw, "SELECT ?", (n,))
                except BaseException:
                    for b in lent:
                        in_use.discard(id(b.raw))
                        b.release(discard=True)  # cancelled mid-statement: state unknown
                    raise
                for b in lent:
                    in_use.discard(id(b.raw))
                    b.release()
                done += 1
            return done

        async def cancel_later(task: asyncio.Task[int], turns: int) -> None:
            for _ in range(turns):  # counted in loop turns, not seconds: waiting, connecting or mid-statement
                await asyncio.sleep(0)
            task.cancel()

        tasks = [asyncio.create_task(worker(n)) for n in range(24)]
        doomed = [asyncio.create_task(cancel_later(t, rng.randint(0, 300))) for t in tasks[::3]]
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*doomed)
        cancelled = sum(isinstance(o, asyncio.CancelledError) for o in outcomes)
        assert all(o == 15 for o in outcomes if not isinstance(o, BaseException)) and 1 <= cancelled <= 8
        assert not [o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, asyncio.CancelledError)]
        s = pool.stats()
        assert (s.borrowed, s.timeouts) == (0, 0) and s.open == s.idle <= 3 and not pool._waiters
        await pool.dispose()

    run(go())


def test_a_pool_belongs_to_the_loop_of_its_connections(tmp_path: Path) -> None:
    pool = _pool(_file(tmp_path))

    async def use() -> None:
        b = await pool.borrow()
        b.release()

    run(use())
    assert pool.stats().open == 1

    async def elsewhere() -> None:
        assert pool.lend_idle() is None  # not a connection of this loop
        with pytest.raises(ExecutionError, match="'ds_0'.*1 connection\\(s\\) of another event loop"):
            await pool.borrow()
        with pytest.raises(ExecutionError, match="another event loop"):
            await pool.borrow_many(2)
        await pool.dispose()  # nothing left of the old loop: this one takes the pool over
        await use()

    run(elsewhere())
    run(pool.dispose())
    assert pool.stats().open == 0


# -- failures -----------------------------------------------------------------------------------


def test_an_unreachable_endpoint_is_unavailable_and_its_breaker_opens() -> None:
    async def go() -> None:
        pool = _pool(mysql_endpoint("db", port=closed_port()), acquire_timeout_ms=1000)
        with pytest.raises(DataSourceUnavailableError, match="data source 'ds_0' is unavailable") as info:
            await pool.borrow()
        assert info.value.context["code"] == 2003 and info.value.context["endpoint"] == "ds_0"
        assert _counts(pool) == (0, 0, 0) and pool.stats().borrows == 0
        pool.breaker = EndpointBreaker("ds_0", "ds_0", failures=2, first_wait=60.0, longest_wait=60.0)
        for _ in range(2):
            with pytest.raises(DataSourceUnavailableError, match="Can't connect"):
                await pool.borrow()
        assert pool.breaker.is_open
        with pytest.raises(DataSourceUnavailableError, match="circuit breaker is open after 2") as fast:
            await pool.borrow()
        assert fast.value.__cause__ is not None  # the connect error that opened it
        assert _counts(pool) == (0, 0, 0)
        await pool.dispose()

    run(go())


# -- the registry and PostgreSQL ----------------------------------------------------------------


def test_the_registry_keeps_one_pool_per_endpoint_and_sums_per_data_source(tmp_path: Path) -> None:
    config = load_config({
        "dataSources": {"ds_0": f"sqlite:///{tmp_path / 'a.db'}", "ds_1": f"sqlite:///{tmp_path / 'b.db'}"},
        "singleTables": {"t": "ds_0"},
    })

    async def go() -> None:
        registry = AsyncPoolRegistry()
        ds_0, ds_1 = config.data_sources["ds_0"], config.data_sources["ds_1"]
        pool_0 = registry.pool(ds_0, ds_0.primary)
        assert registry.pool(ds_0, ds_0.primary) is pool_0
        held: list[AsyncBorrowed] = [await pool_0.borrow(), await pool_0.borrow()]
        other = await registry.pool(ds_1, ds_1.primary).borrow()
        other.release()
        stats = registry.stats()  # the default sizing: max 20, min idle 5 opened on first use
        assert stats["ds_0"] == PoolStats("ds_0", "*", 3, 2, 5, 20, 2, 0, 0)
        assert stats["ds_1"] == PoolStats("ds_1", "*", 5, 0, 5, 20, 1, 0, 0)
        assert sorted(s.endpoint for s in registry.endpoint_stats()) == ["ds_0", "ds_1"]
        for b in held:
            b.release()
        await registry.dispose()
        assert all(s.open == 0 for s in registry.endpoint_stats())

    run(go())


def test_postgresql_pool_replaces_a_terminated_backend() -> None:
    psycopg: Any = require_module("psycopg", "psycopg 3, the PostgreSQL driver")
    try:
        psycopg.connect("host=127.0.0.1 dbname=test user=postgres", connect_timeout=2).close()
    except Exception as exc:
        require_service("PostgreSQL on 127.0.0.1:5432", str(exc))

    async def go() -> None:
        pool = _pool(pg_endpoint(), acquire_timeout_ms=2000)
        first, killer = await pool.borrow(), await pool.borrow()
        pid = pool.driver.thread_id(first.raw)
        first.release()
        await pool.driver.execute(killer.raw, "SELECT pg_terminate_backend(%s)", (pid,))
        killer.release()
        await asyncio.sleep(PING_AFTER + 0.1)
        fresh = await pool.borrow()  # the LIFO top was the killer's; the one below is the dead one
        second = await pool.borrow()
        pids = {pool.driver.thread_id(fresh.raw), pool.driver.thread_id(second.raw)}
        assert pid not in pids and len(pids) == 2
        assert (await pool.driver.execute(second.raw, "SELECT 1", None)).rows == [(1,)]
        fresh.release()
        second.release()
        assert pool.stats().open == 2
        await pool.dispose()

    run(go())
