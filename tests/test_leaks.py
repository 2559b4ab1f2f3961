"""Every borrowed connection goes back, on every path (docs/operations.md#connection-pools).

Failures are injected for real: a physical table that is missing on one shard
(the unit raises), a server SIGKILLed mid-stream, deadlines that fire, results
abandoned half-read, generators closed early, merged results closed early, a
pool drained to exhaustion. After each, every pool must show 0 borrowed.
"""

from __future__ import annotations

import gc
import random
import threading
import time
from collections import Counter
from dataclasses import replace
from typing import Any, Callable, Iterator

import pytest

from ddm_core.errors import (
    DataSourceUnavailableError,
    DdmError,
    ExecutionError,
    PoolTimeoutError,
    QueryTimeoutError,
    TransactionError,
)
from ddm_core.execute import Executor
from test_execute_support import (  # noqa: F401 - fixtures
    ORDER_DDL,
    PrivateMariaDB,
    assert_no_leaks,
    mysql_config,
    mysql_databases,
    mysql_executor,
    mysql_raw,
    private_config,
    private_mariadb,
)


def fill(ex: Executor, n: int, table: str = "t_order") -> None:
    for start in range(1, n + 1, 1000):
        users = range(start, min(n, start + 999) + 1)
        values = ", ".join(["(%s, %s, %s)"] * len(users))
        params = [v for u in users for v in (u, u, u % 7)]
        ex.execute(f"INSERT INTO {table} (order_id, user_id, amount) VALUES {values}", params).close()


@pytest.fixture()
def broken_shard(mysql_executor: Executor, mysql_databases: list[str]) -> Iterator[tuple[str, str]]:
    """``t_leak`` filled, then one of its 16 physical tables dropped behind ddm-core's back."""
    mysql_executor.execute("DELETE FROM t_leak").close()
    fill(mysql_executor, 400, "t_leak")
    conn = mysql_raw(mysql_databases[2])
    with conn.cursor() as cur:
        cur.execute("DROP TABLE t_leak_2_1")
    try:
        yield "ds_2", "t_leak_2_1"
    finally:
        with conn.cursor() as cur:
            cur.execute(ORDER_DDL.replace("t_order", "t_leak_2_1"))
        conn.close()


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "streamed"])
def test_a_unit_that_raises(mysql_executor: Executor, broken_shard: tuple[str, str], stream: bool) -> None:
    ds, table = broken_shard
    for sql in ("SELECT user_id FROM t_leak", "SELECT user_id FROM t_leak ORDER BY user_id",
                "SELECT COUNT(*) FROM t_leak", "UPDATE t_leak SET amount = amount + 1"):
        with pytest.raises(ExecutionError) as info:
            mysql_executor.execute(sql, stream=stream)
        assert info.value.data_source == ds and table in str(info.value)
        assert_no_leaks(mysql_executor, wait=0)
    with pytest.raises(ExecutionError):
        with mysql_executor.transaction():
            mysql_executor.execute("SELECT user_id FROM t_leak")
    assert_no_leaks(mysql_executor, wait=0)


def test_a_server_stopped_mid_stream(private_mariadb: PrivateMariaDB, private_config: Any) -> None:
    ex = Executor(private_config, fetch_batch=5, timeout=5)
    try:
        fill(ex, 400)
        # ~100 rows/s per unit, 2 kB each: the server flushes its 16 kB net buffer as it goes,
        # so most rows are still to come when it dies.
        r = ex.execute("SELECT user_id, REPEAT('x', 2000), SLEEP(0.01) FROM t_order", stream=True)
        assert [r.fetchone() for _ in range(3)]
        assert ex.borrowed() == 4  # 2 data sources x 2 tables, all streaming
        private_mariadb.kill()
        with pytest.raises(DataSourceUnavailableError) as info:
            r.fetchall()
        assert info.value.data_source in ("ds_0", "ds_1")
        assert r.closed
        assert_no_leaks(ex, wait=0)
    finally:
        ex.close()
        private_mariadb.start()


def test_timeouts(mysql_executor: Executor) -> None:
    fill(mysql_executor, 100)
    mysql_executor.execute("UPDATE t_order SET slow = 3 WHERE user_id = %s", (42,)).close()
    for _ in range(3):
        with pytest.raises(QueryTimeoutError):
            mysql_executor.execute("SELECT SLEEP(3)", timeout=0.2)
        with pytest.raises(QueryTimeoutError):
            mysql_executor.execute("SELECT user_id, SLEEP(slow) FROM t_order", timeout=0.2, stream=True)
        mysql_executor.execute("SELECT user_id, SLEEP(slow) FROM t_order", timeout=0.2, allow_partial=True).close()
        assert_no_leaks(mysql_executor)
    with pytest.raises(TransactionError):
        with mysql_executor.transaction() as tx:
            with pytest.raises(QueryTimeoutError):
                mysql_executor.execute("SELECT user_id, SLEEP(slow) FROM t_order", timeout=0.2)
            assert tx.state == "failed"
            with pytest.raises(TransactionError):
                mysql_executor.execute("SELECT 1 FROM t_order WHERE user_id = %s", (1,))
    assert_no_leaks(mysql_executor)


def streamed(ex: Executor, sql: str = "SELECT user_id FROM t_order ORDER BY user_id") -> Any:
    r = ex.execute(sql, stream=True)
    assert ex.borrowed() > 0, "the statement should stream"
    return r


def test_an_abandoned_iterator(mysql_executor: Executor) -> None:
    fill(mysql_executor, 3000)
    ex = Executor(mysql_executor.config, fetch_batch=20)
    try:
        r = streamed(ex)
        assert r.fetchmany(10) == [(u,) for u in range(1, 11)]
        del r  # dropped half-read: the units close when the result is collected
        gc.collect()
        assert_no_leaks(ex, wait=0)
        it = iter(streamed(ex, "SELECT user_id FROM t_order"))
        next(it)
        del it
        gc.collect()
        assert_no_leaks(ex, wait=0)
    finally:
        ex.close()


def test_a_generator_closed_early(mysql_executor: Executor) -> None:
    fill(mysql_executor, 3000)
    ex = Executor(mysql_executor.config, fetch_batch=20)

    def users() -> Iterator[int]:
        with ex.execute("SELECT user_id FROM t_order ORDER BY user_id", stream=True) as r:
            for (user,) in r:
                yield user

    try:
        gen = users()
        assert [next(gen) for _ in range(5)] == [1, 2, 3, 4, 5]
        assert ex.borrowed() > 0
        gen.close()
        assert_no_leaks(ex, wait=0)

        gen = users()
        next(gen)
        with pytest.raises(ZeroDivisionError):
            gen.throw(ZeroDivisionError)
        assert_no_leaks(ex, wait=0)

        def consumer_fails() -> None:
            with ex.execute("SELECT user_id FROM t_order", stream=True) as r:
                for row in r:
                    raise KeyError(row)

        with pytest.raises(KeyError):
            consumer_fails()
        assert_no_leaks(ex, wait=0)
    finally:
        ex.close()


def test_a_merged_result_closed_early(mysql_executor: Executor) -> None:
    fill(mysql_executor, 3000)
    # Small leftovers are drained and the connections reused...
    ex = Executor(mysql_executor.config, fetch_batch=20, drain_limit=10_000)
    try:
        r = streamed(ex)
        assert r.fetchmany(3) == [(1,), (2,), (3,)]
        r.close()
        assert_no_leaks(ex, wait=0)
        assert sum(s.discards for s in ex.endpoint_stats()) == 0
    finally:
        ex.close()
    # ...large ones are cheaper to drop: the connections are discarded, the pool refills.
    ex = Executor(mysql_executor.config, fetch_batch=20, drain_limit=10)
    try:
        r = streamed(ex)
        r.fetchmany(3)
        r.close()
        assert_no_leaks(ex, wait=0)
        assert sum(s.discards for s in ex.endpoint_stats()) > 0
        with ex.execute("SELECT COUNT(*) FROM t_order") as c:
            assert c.fetchone() == (3000,)
        # A LIMIT cut inside the merger closes the units as soon as the last row is out.
        with ex.execute("SELECT user_id FROM t_order ORDER BY user_id LIMIT 2000", stream=True) as r2:
            assert len(r2.fetchall()) == 2000
            assert_no_leaks(ex, wait=0)
    finally:
        ex.close()


def test_pool_exhaustion_names_the_data_source(mysql_executor: Executor) -> None:
    fill(mysql_executor, 2000)
    config = mysql_executor.config  # one unit per table (not one UNION ALL per data source): 4 connections each
    config = replace(config, runtime=replace(config.runtime, one_unit_per_data_source=False))
    ex = Executor(config, fetch_batch=10, max_concurrency=16)
    try:
        held = [streamed(ex) for _ in range(2)]  # 4 units per data source each: 8 = maxSize
        assert all(s.borrowed == 8 for s in ex.pool_stats().values())
        start = time.monotonic()
        with pytest.raises(PoolTimeoutError) as info:
            ex.execute("SELECT 1 FROM t_order WHERE user_id = %s", (1,))
        assert time.monotonic() - start > 0.9  # it waited out acquireTimeoutMs 1000
        assert info.value.data_source in str(info.value)
        assert ex.pool_stats()[info.value.data_source].timeouts == 1
        # A statement's deadline ends its wait for a connection when it comes first: it timed out.
        with pytest.raises(QueryTimeoutError) as short:
            ex.execute("SELECT 1 FROM t_order WHERE user_id = %s", (1,), timeout=0.25)
        assert isinstance(short.value.__cause__, PoolTimeoutError)
        assert short.value.__cause__.timeout <= 0.25 < ex.primary_pool(info.value.data_source).acquire_timeout
        # The same for a statement that takes all its connections at once (streamed, several units).
        with pytest.raises(QueryTimeoutError) as several:
            ex.execute("SELECT user_id FROM t_order WHERE user_id IN (%s, %s, %s)", (1, 2, 3), timeout=0.25,
                       stream=True)  # fmt: skip
        assert isinstance(several.value.__cause__, PoolTimeoutError)
        for r in held:
            r.close()
        assert_no_leaks(ex, wait=0)
    finally:
        ex.close()


def test_transactions_return_their_pins(mysql_executor: Executor) -> None:
    with pytest.raises(RuntimeError):
        with mysql_executor.transaction():
            mysql_executor.execute("INSERT INTO t_order (order_id, user_id) VALUES (1, 1)").close()
            mysql_executor.execute("SELECT COUNT(*) FROM t_order").close()
            assert mysql_executor.borrowed() == 4
            raise RuntimeError
    assert_no_leaks(mysql_executor, wait=0)

    def abandon() -> None:
        tx = mysql_executor.transaction()
        tx.execute("INSERT INTO t_order (order_id, user_id) VALUES (2, 2)").close()
        assert mysql_executor.borrowed() == 1

    abandon()  # never committed nor rolled back: collected, rolled back
    gc.collect()
    assert_no_leaks(mysql_executor, wait=0)
    with mysql_executor.execute("SELECT COUNT(*) FROM t_order") as r:
        assert r.fetchone() == (0,)


def test_concurrent_streamed_scans_never_hold_and_wait(mysql_executor: Executor) -> None:
    """Streamed scans each keep 4 connections per data source; the pools hold 4 each.

    Borrowed one unit at a time, two such statements take part of a pool each and wait
    for the rest until the acquire timeout. Taken all at once, they only queue.
    """
    fill(mysql_executor, 800)
    config = mysql_executor.config
    tight = {
        name: replace(source, pool=replace(source.pool, max_size=4, min_idle=0, acquire_timeout_ms=20_000))
        for name, source in config.data_sources.items()
    }
    ex = Executor(replace(config, data_sources=tight), fetch_batch=5, timeout=GENEROUS, max_concurrency=16)
    failures: list[BaseException] = []
    counts: list[int] = []
    lock = threading.Lock()

    def scans() -> None:
        for _ in range(15):
            try:
                with ex.execute("SELECT user_id FROM t_order", stream=True) as r:
                    n = len(r.fetchall())
                with lock:
                    counts.append(n)
            except BaseException as exc:  # pragma: no cover - reported below
                with lock:
                    failures.append(exc)

    try:
        threads = [threading.Thread(target=scans) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        assert counts == [800] * 60
        assert sum(s.timeouts for s in ex.endpoint_stats()) == 0
        assert_no_leaks(ex, wait=0)
    finally:
        ex.close()


def test_lending_several_connections_is_all_or_nothing(mysql_executor: Executor) -> None:
    pool = mysql_executor.primary_pool("ds_0")
    held = pool.borrow_many(pool.max_size - 1)
    assert pool.stats().borrowed == pool.max_size - 1
    with pytest.raises(PoolTimeoutError) as info:
        pool.borrow_many(2, timeout=0.05)  # one is free, two are asked for: none is taken
    assert "2 connections did not become free" in str(info.value)
    assert pool.stats().borrowed == pool.max_size - 1
    one = pool.borrow()
    for b in (*held, one):
        b.release()
    with pytest.raises(ExecutionError, match="cannot lend"):
        pool.borrow_many(pool.max_size + 1)
    assert_no_leaks(mysql_executor, wait=0)


GENEROUS = 60.0  # seconds: the deadline of statements that must succeed, however loaded the machine


def test_soak_with_mixed_failures(mysql_executor: Executor, broken_shard: tuple[str, str]) -> None:
    fill(mysql_executor, 1000)
    mysql_executor.execute("UPDATE t_order SET slow = 1 WHERE user_id = %s", (77,)).close()
    # Two full scans (4 units per data source each) fill a pool of 8: a third statement waits for
    # a connection, with an acquire timeout no busy machine reaches. A pool timeout is not one of
    # the injected faults (test_pool_exhaustion_names_the_data_source covers it).
    config = mysql_executor.config
    patient = {
        name: replace(source, pool=replace(source.pool, acquire_timeout_ms=10_000))
        for name, source in config.data_sources.items()
    }
    ex = Executor(replace(config, data_sources=patient), fetch_batch=10, timeout=GENEROUS)
    # The injected faults are the only failures allowed: a unit whose table is gone (t_leak),
    # a 0.2 s deadline on a statement that sleeps 1 s, an order_id that is already taken.
    # Every other statement runs under a deadline no busy machine reaches and must succeed.
    statements: dict[str, tuple[str, Callable[[random.Random], Any]]] = {
        "point": ("SELECT user_id FROM t_order WHERE user_id = %s", lambda r: (r.randint(1, 1000),)),
        "scan": ("SELECT user_id FROM t_order ORDER BY user_id", lambda r: None),
        "broken": ("SELECT user_id FROM t_leak", lambda r: None),
        "sleep": ("SELECT user_id, SLEEP(slow) FROM t_order WHERE user_id IN (%s, 77)", lambda r: (r.randint(1, 1000),)),
        "insert": ("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", lambda r: (r.randint(1, 1500),) * 2),
        "update": ("UPDATE t_order SET amount = amount + 1 WHERE user_id = %s", lambda r: (r.randint(1, 1000),)),
    }
    outcomes: list[tuple[str, str]] = []  # (statement, "ok" or the error's class)
    expected: list[tuple[str, str]] = []  # what the faults imply; inserts of new ids counted below
    inserted: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def run(r: random.Random, name: str) -> str:
        sql, make = statements[name]
        params = make(r)
        timeout = GENEROUS
        if name == "sleep" and r.random() < 0.5:
            timeout = 0.2
        # A statement under the short deadline is read to the end, so the deadline must fire.
        how = r.choice([0, 2]) if timeout < 1 else r.randint(0, 3)
        with lock:
            if name == "insert":
                inserted.append(params[0])
            elif name == "broken":
                expected.append((name, "ExecutionError"))
            elif timeout < 1:
                expected.append((name, "QueryTimeoutError"))
            else:
                expected.append((name, "ok"))
        try:
            res = ex.execute(sql, params, timeout=timeout, stream=r.choice([None, True]))
            if how == 0:
                res.fetchall()
            elif how == 1:
                res.fetchone()
                res.close()
            elif how == 2:
                res.fetchmany(5)
                del res  # abandoned
            else:
                res.close()
        except DdmError as exc:
            if name == "broken" and getattr(exc, "data_source", None) != broken_shard[0]:
                errors.append(f"the broken unit was not named: {exc!r}")
            return type(exc).__name__
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))
            return type(exc).__name__
        return "ok"

    def worker(seed: int) -> None:
        local = random.Random(seed)
        for _ in range(25):
            name = local.choice(sorted(statements))
            outcome = run(local, name)
            with lock:
                outcomes.append((name, outcome))

    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        gc.collect()
        assert not errors
        # Each new order_id goes in once; every other insert finds its key taken.
        new_ids = {i for i in inserted if i > 1000}
        expected += [("insert", "ok")] * len(new_ids)
        expected += [("insert", "DuplicateKeyError")] * (len(inserted) - len(new_ids))
        assert len(outcomes) == 100
        assert Counter(outcomes) == Counter(expected)
        # The workers' fixed random.Random(i) streams give every fault and every kind of success at least once.
        kinds = set(expected)
        assert {("broken", "ExecutionError"), ("sleep", "QueryTimeoutError"), ("insert", "DuplicateKeyError"),
                ("insert", "ok"), ("sleep", "ok"), ("point", "ok"), ("scan", "ok"), ("update", "ok")} <= kinds
        assert_no_leaks(ex)
        for s in ex.endpoint_stats():
            assert s.open <= s.max_size
    finally:
        ex.close()
