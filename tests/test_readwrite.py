"""Read/write splitting on real MariaDB replication (tests/replication.py): routing rules,
read-your-writes in both modes (over both runners), the primary cap, retries and the kill -9 of a
replica; on asyncio, a GTID wait that ends at the statement's deadline or with a cancel.

Where a read ran is read from the server itself (``@@server_id``: the primary is 1, the
replicas 2 and 3), never from ddm-core's own bookkeeping.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.aio import AsyncExecutor
from ddm_core.errors import QueryTimeoutError
from ddm_core.execute import Executor
from ddm_core.readwrite import read_your_writes
from ddm_core.route.hints import hint
from replication import Replication, replication  # noqa: F401 - fixture
from test_execute_support import ORDER_DDL, assert_no_leaks, sharding_config

PRIMARY_ID = 1
WHERE_AM_I = "SELECT @@server_id, amount FROM t_order WHERE user_id = %s AND order_id = %s"


class FakeClock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def rw_config(replication: Replication) -> Iterator[Any]:  # noqa: F811
    """Two data sources, each a database on the primary with both replicas; t_order created."""
    tag = uuid.uuid4().hex[:6]
    dbs = [f"ddm_rw_{tag}_{i}" for i in range(2)]
    replication.sql(replication.primary, *(f"CREATE DATABASE {db}" for db in dbs))
    spec = sharding_config({f"ds_{i}": replication.endpoints(db) for i, db in enumerate(dbs)}, tables=2,
                           pool={"maxSize": 10, "minIdle": 0, "acquireTimeoutMs": 2000})  # fmt: skip
    config = load_config(spec)
    with Executor(config, replica_monitor=False) as ex:
        ex.execute(ORDER_DDL).close()
    replication.wait_replicated()
    yield spec
    replication.sql(replication.primary, *(f"DROP DATABASE IF EXISTS {db}" for db in dbs))


RUNNER = ["threads"]  # the runner executor() builds for; tests marked on_both_runners set it


@pytest.fixture(params=["threads", "asyncio"])
def runner(request: pytest.FixtureRequest) -> Iterator[str]:
    """The runner :func:`executor` builds for while the test runs."""
    RUNNER[0] = request.param
    yield request.param
    RUNNER[0] = "threads"


def executor(spec: dict[str, Any], **kw: Any) -> Executor:
    kw.setdefault("replica_monitor", False)
    if RUNNER[0] == "asyncio":
        from runners import BlockingAsyncExecutor

        return BlockingAsyncExecutor(load_config(spec), load_schema=False, **kw)  # type: ignore[return-value]
    return Executor(load_config(spec), load_schema=False, **kw)


on_both_runners = pytest.mark.usefixtures("runner")


def _server_of(ex: Executor, user: int, order: int) -> tuple[int, Any]:
    with ex.execute(WHERE_AM_I, (user, order)) as result:
        row = result.fetchone()
    return (int(row[0]), row[1]) if row is not None else (-1, None)


def _insert(ex: Executor, user: int, order: int, amount: int = 0) -> None:
    # REPLACE: a test that runs on both runners writes the same row twice
    ex.execute("REPLACE INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)", (order, user, amount)).close()


# -- routing rules ---------------------------------------------------------------------------------


@on_both_runners
def test_reads_go_to_replicas_and_writes_to_the_primary(rw_config: Any, replication: Replication) -> None:  # noqa: F811
    with executor(rw_config, read_your_writes="off") as ex:
        _insert(ex, 1, 101)
        replication.wait_replicated()
        servers = {_server_of(ex, 1, 101)[0] for _ in range(40)}
        assert servers == {2, 3}  # both replicas, weight 1 each; never the primary
        ds = ex.router.route(WHERE_AM_I, (1, 101)).units[0].data_source
        primary = next(s for s in ex.endpoint_stats() if s.endpoint == ds)
        assert primary.borrows == 1  # the INSERT only
        assert_no_leaks(ex)


@on_both_runners
def test_a_streamed_read_over_several_units_counts_one_replica_read_per_unit(rw_config: Any,
                                                                              replication: Replication) -> None:  # noqa: F811
    with executor(rw_config, read_your_writes="off") as ex:
        sql = "SELECT order_id FROM t_order"
        units = ex.router.route(sql).units
        replicated = {u.data_source for u in units} & set(ex.replica_status())
        assert len(units) >= 2 and replicated, "the layout must give a multi-unit read over replicas"
        before = {ds: ex.replica_status()[ds].counters.replica_reads for ds in replicated}
        with ex.execute(sql, stream=True) as result:
            assert getattr(result, "streamed", True)  # the asyncio result says so; the thread one streams when asked
            result.fetchall()
        for ds in replicated:  # the choice to stream asks the drivers only: no replica is chosen twice
            per_unit = sum(1 for u in units if u.data_source == ds)
            assert ex.replica_status()[ds].counters.replica_reads - before[ds] == per_unit
        assert_no_leaks(ex)


@on_both_runners
def test_locking_reads_hints_and_transactions_go_to_the_primary(rw_config: Any, replication: Replication) -> None:  # noqa: F811
    with executor(rw_config, read_your_writes="off") as ex:
        _insert(ex, 2, 201)
        replication.wait_replicated()
        assert _server_of(ex, 2, 201)[0] != PRIMARY_ID
        assert ex.router.route(WHERE_AM_I + " FOR SHARE", (2, 201)).force_primary  # MySQL 8 spelling
        assert not ex.router.route(WHERE_AM_I, (2, 201)).force_primary
        for suffix in (" FOR UPDATE", " LOCK IN SHARE MODE"):  # what MariaDB 10.11 runs
            assert ex.router.route(WHERE_AM_I + suffix, (2, 201)).force_primary
            with ex.execute(WHERE_AM_I + suffix, (2, 201)) as result:
                assert result.fetchone()[0] == PRIMARY_ID, suffix
        with hint(force_primary=True):
            assert _server_of(ex, 2, 201)[0] == PRIMARY_ID
        with ex.transaction():
            assert _server_of(ex, 2, 201)[0] == PRIMARY_ID
        assert_no_leaks(ex)


@on_both_runners
def test_all_replicas_weighted_zero_read_the_primary(rw_config: Any) -> None:
    spec = {**rw_config, "dataSources": {
        name: {**ds, "replicas": [{**r, "weight": 0} for r in ds["replicas"]]} for name, ds in rw_config["dataSources"].items()
    }}  # fmt: skip
    with executor(spec, read_your_writes="off") as ex:
        _insert(ex, 3, 301)
        assert _server_of(ex, 3, 301)[0] == PRIMARY_ID
        status = ex.replica_status()[ex.router.route(WHERE_AM_I, (3, 301)).units[0].data_source]
        assert status.all_out and status.counters.forced_primary == 1


# -- read-your-writes ---------------------------------------------------------------------------------


@pytest.fixture()
def lagging(replication: Replication) -> Iterator[None]:  # noqa: F811
    """Both replicas apply every event 2 s late (MASTER_DELAY); back to 0 afterwards."""
    for i in range(len(replication.replicas)):
        replication.delay(i, 2)
    try:
        yield
    finally:
        for i in range(len(replication.replicas)):
            replication.delay(i, 0)
        replication.wait_replicated()


def _own_reads_after_writes(ex: Executor, user: int, order: int, iterations: int) -> list[tuple[int, int, Any]]:
    """Write then read at once, ``iterations`` times; the reads that did not see their write."""
    _insert(ex, user, order, -1)
    wrong = []
    for i in range(iterations):
        ex.execute("UPDATE t_order SET amount = %s WHERE user_id = %s AND order_id = %s", (i, user, order)).close()
        server, amount = _server_of(ex, user, order)
        if amount != i:
            wrong.append((i, server, amount))
    return wrong


def _stale_read_elsewhere(ex: Executor, user: int, order: int) -> tuple[int, Any]:
    """A read of the same row from a fresh context (another thread): where it ran and what it saw."""
    out: list[tuple[int, Any]] = []
    worker = threading.Thread(target=lambda: out.append(_server_of(ex, user, order)))
    worker.start()
    worker.join()
    return out[0]


@pytest.mark.parametrize("mode", ["window", "gtid"])
def test_a_read_right_after_a_write_sees_it_while_replicas_lag(rw_config: Any, lagging: None, mode: str,
                                                               runner: str) -> None:  # fmt: skip
    user, order = 10 if mode == "window" else 11, 1000 + len(mode) + (100 if runner == "asyncio" else 0)  # own row
    with executor(rw_config, read_your_writes=mode) as ex:
        wrong = _own_reads_after_writes(ex, user, order, 1000)
        assert wrong == []
        server, amount = _stale_read_elsewhere(ex, user, order)
        assert server != PRIMARY_ID and amount != 999  # another context reads a replica, 2 s behind
        counters = next(iter(s.counters for s in ex.replica_status().values() if s.counters.forced_primary))
        assert counters.forced_primary >= 1000
        if mode == "gtid":
            assert counters.gtid_waits >= 1000  # each checked a replica first (MASTER_GTID_WAIT, no wait)
        assert_no_leaks(ex)


def test_without_read_your_writes_a_lagging_replica_returns_stale_rows(rw_config: Any, lagging: None, runner: str) -> None:
    """The control: the same loop with the guarantee off does read old values (so the test above can fail)."""
    with executor(rw_config, read_your_writes="off") as ex:
        wrong = _own_reads_after_writes(ex, 12, 1200 + (100 if runner == "asyncio" else 0), 20)
        assert len(wrong) == 20 and all(server != PRIMARY_ID for _, server, _ in wrong)


@on_both_runners
def test_window_ends_after_write_window_ms(rw_config: Any, replication: Replication) -> None:  # noqa: F811
    clock = FakeClock()
    with executor(rw_config, read_your_writes="window", clock=clock) as ex:
        _insert(ex, 13, 1300)
        replication.wait_replicated()
        clock.now += 0.999
        assert _server_of(ex, 13, 1300)[0] == PRIMARY_ID
        clock.now += 0.002  # 1001 ms after the write
        assert _server_of(ex, 13, 1300)[0] != PRIMARY_ID


@on_both_runners
def test_gtid_mode_reads_a_replica_once_it_applied_the_write(rw_config: Any, replication: Replication) -> None:  # noqa: F811
    clock = FakeClock()  # frozen: a window would still be open, so a replica read proves the GTID check
    with executor(rw_config, read_your_writes="gtid", clock=clock) as ex:
        _insert(ex, 14, 1400, 7)
        replication.wait_replicated()
        assert _server_of(ex, 14, 1400) in ((2, 7), (3, 7))
        with read_your_writes("window"):  # the per-block override
            assert _server_of(ex, 14, 1400)[0] == PRIMARY_ID


@on_both_runners
def test_gtid_mode_after_a_transaction_reads_the_primary_position(rw_config: Any, lagging: None) -> None:
    with executor(rw_config, read_your_writes="gtid") as ex:
        _insert(ex, 15, 1500, 0)
        with ex.transaction():
            ex.execute("UPDATE t_order SET amount = 5 WHERE user_id = 15 AND order_id = 1500").close()
        assert _server_of(ex, 15, 1500) == (PRIMARY_ID, 5)


@contextmanager
def _replicas_stopped(replication: Replication) -> Iterator[None]:  # noqa: F811
    """Neither replica applies anything (SQL threads stopped; they still receive the events); restarted after."""
    for i in range(len(replication.replicas)):
        replication.stop_sql(i)
    try:
        yield
    finally:
        for i in range(len(replication.replicas)):
            replication.start_sql(i)
        replication.wait_replicated()


def _fresh_amount() -> int:
    """A value no earlier run left in a row (a stale replica cannot show it by chance)."""
    return int(time.time() * 1000) % 1_000_000_000


def _data_source(ex: Any, user: int, order: int) -> str:
    return str(ex.router.route(WHERE_AM_I, (user, order)).units[0].data_source)


@on_both_runners
def test_gtid_wait_times_out_on_stopped_replicas_and_reads_the_primary(rw_config: Any,
                                                                       replication: Replication) -> None:  # noqa: F811
    spec = {**rw_config, "readWrite": {"gtidWaitMs": 300}}
    amount = _fresh_amount()
    with executor(spec, read_your_writes="gtid") as ex:
        _insert(ex, 17, 1700, 0)
        replication.wait_replicated()
        with _replicas_stopped(replication):
            _insert(ex, 17, 1700, amount)
            started = time.monotonic()
            assert _server_of(ex, 17, 1700) == (PRIMARY_ID, amount)
            assert time.monotonic() - started >= 0.3  # it waited gtid_wait_ms for a replica first
            server, stale = _stale_read_elsewhere(ex, 17, 1700)
            assert server != PRIMARY_ID and stale == 0  # the replicas really are behind
        counters = ex.replica_status()[_data_source(ex, 17, 1700)].counters
        assert (counters.gtid_waits, counters.forced_primary, counters.replica_reads) == (1, 1, 1)
        assert_no_leaks(ex)


@on_both_runners
def test_gtid_read_waits_for_a_replica_that_catches_up(rw_config: Any, replication: Replication) -> None:  # noqa: F811
    spec = {**rw_config, "readWrite": {"gtidWaitMs": 5000}}
    amount = _fresh_amount()
    with executor(spec, read_your_writes="gtid") as ex:
        with _replicas_stopped(replication):
            _insert(ex, 18, 1800, amount)
            restart = threading.Timer(0.3, lambda: [replication.start_sql(i) for i in range(len(replication.replicas))])
            started = time.monotonic()
            restart.start()
            server, seen = _server_of(ex, 18, 1800)
            elapsed = time.monotonic() - started
            restart.join()
        assert server != PRIMARY_ID and seen == amount  # the replica waited on applied the write, then answered
        assert 0.3 <= elapsed < 5.0
        counters = ex.replica_status()[_data_source(ex, 18, 1800)].counters
        assert (counters.gtid_waits, counters.forced_primary, counters.replica_reads) == (1, 0, 1)
        assert_no_leaks(ex)


# -- gtid on the asyncio runner, driven from its own loop --------------------------------------------------


def _async_executor(spec: dict[str, Any], **kw: Any) -> AsyncExecutor:
    return AsyncExecutor(load_config(spec), load_schema=False, replica_monitor=False, **kw)


async def _where(ex: AsyncExecutor, user: int, order: int) -> tuple[int, Any]:
    row = await (await ex.execute(WHERE_AM_I, (user, order))).fetchone()
    return (int(row[0]), row[1]) if row is not None else (-1, None)


async def _replace(ex: AsyncExecutor, user: int, order: int, amount: int) -> None:
    await ex.execute("REPLACE INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)", (order, user, amount))


def _waits_running(replication: Replication, wait: float = 3.0) -> list[Any]:  # noqa: F811
    """MASTER_GTID_WAITs still running on a replica once ``wait`` seconds passed (or none are left)."""
    end = time.monotonic() + wait
    while True:
        running = [
            replication.scalar(r, "SELECT GROUP_CONCAT(info) FROM information_schema.processlist "
                                  "WHERE info LIKE 'SELECT MASTER_GTID_WAIT%' AND id <> CONNECTION_ID()")
            for r in replication.replicas
        ]  # fmt: skip
        running = [r for r in running if r]
        if not running or time.monotonic() > end:
            return running
        time.sleep(0.05)


def _waits_started(replication: Replication) -> bool:  # noqa: F811
    """A MASTER_GTID_WAIT runs on a replica (polled for up to 5 s)."""
    end = time.monotonic() + 5.0
    while not _waits_running(replication, wait=0.0):
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_asyncio_tasks_do_not_see_each_others_gtid_writes(rw_config: Any, replication: Replication) -> None:  # noqa: F811
    amount = _fresh_amount()

    async def main() -> tuple[Any, ...]:
        async with _async_executor(rw_config, read_your_writes="gtid") as ex:
            written = asyncio.Event()

            async def writer() -> tuple[tuple[int, Any], tuple[int, Any]]:
                await _replace(ex, 19, 1900, amount)
                own = await _where(ex, 19, 1900)
                child = await asyncio.ensure_future(_where(ex, 19, 1900))  # started after the write: sees it
                written.set()
                return own, child

            async def sibling() -> tuple[int, Any]:  # started before the write: its context never had it
                await written.wait()
                return await _where(ex, 19, 1900)

            (own, child), other = await asyncio.gather(writer(), sibling())
            counters = ex.replica_status()[_data_source(ex, 19, 1900)].counters
            return own, child, other, counters, ex.borrowed()

    async def seed() -> None:
        async with _async_executor(rw_config, read_your_writes="gtid") as ex:
            await _replace(ex, 19, 1900, 0)

    asyncio.run(seed())
    replication.wait_replicated()
    with _replicas_stopped(replication):
        own, child, other, counters, borrowed = asyncio.run(main())
    assert own == (PRIMARY_ID, amount) and child == (PRIMARY_ID, amount)
    assert other[0] != PRIMARY_ID and other[1] == 0  # a replica, which has not applied the write
    assert (counters.gtid_waits, counters.forced_primary, counters.replica_reads) == (2, 2, 1)
    assert borrowed == 0


def test_asyncio_gtid_wait_ends_at_the_deadline_without_blocking_the_loop(rw_config: Any,
                                                                          replication: Replication) -> None:  # noqa: F811
    spec = {**rw_config, "readWrite": {"gtidWaitMs": 5000}}

    async def main() -> tuple[float, int, int, int]:
        async with _async_executor(spec, read_your_writes="gtid", timeout=0.5) as ex:
            waiting, done = asyncio.Event(), asyncio.Event()
            other_reads = 0

            async def other() -> None:  # started before the write: its reads go to replicas, no wait
                nonlocal other_reads
                await waiting.wait()
                while not done.is_set():
                    assert (await _where(ex, 20, 2000))[0] != PRIMARY_ID
                    other_reads += 1
                    await asyncio.sleep(0.01)

            reader = asyncio.ensure_future(other())
            await _replace(ex, 20, 2000, _fresh_amount())
            waiting.set()
            started = time.monotonic()
            try:
                with pytest.raises(QueryTimeoutError):
                    await _where(ex, 20, 2000)  # waits for a replica until the statement's deadline, not 5 s
            finally:
                elapsed = time.monotonic() - started
                done.set()
                await reader
            await ex.settle()  # the KILL QUERY of the cut wait has run
            discards = sum(s.discards for s in ex.endpoint_stats())
            return elapsed, other_reads, ex.borrowed(), discards

    with _replicas_stopped(replication):
        elapsed, other_reads, borrowed, discards = asyncio.run(main())
        assert _waits_running(replication) == []
    assert 0.45 <= elapsed < 2.0
    assert other_reads >= 5  # the loop kept serving other tasks during the wait
    assert borrowed == 0 and discards == 1  # the waiting connection, half-read, was closed


def test_asyncio_gtid_wait_cancelled_gives_its_connection_back(rw_config: Any, replication: Replication) -> None:  # noqa: F811
    spec = {**rw_config, "readWrite": {"gtidWaitMs": 5000}}

    async def main() -> tuple[int, int]:
        async with _async_executor(spec, read_your_writes="gtid", timeout=10.0) as ex:
            await _replace(ex, 21, 2100, _fresh_amount())
            read = asyncio.ensure_future(_where(ex, 21, 2100))
            assert await asyncio.to_thread(_waits_started, replication)  # the read waits on a replica now
            read.cancel()
            with pytest.raises(asyncio.CancelledError):
                await read
            await ex.settle()
            return ex.borrowed(), sum(s.discards for s in ex.endpoint_stats())

    with _replicas_stopped(replication):
        borrowed, discards = asyncio.run(main())
        assert _waits_running(replication) == []
    assert borrowed == 0 and discards == 1


def test_forced_reads_over_the_primary_cap_degrade_to_a_replica(rw_config: Any, replication: Replication) -> None:  # noqa: F811
    with executor(rw_config, read_your_writes="window", clock=FakeClock()) as ex:
        _insert(ex, 16, 1600, 1)
        replication.wait_replicated()
        ds = ex.router.route(WHERE_AM_I, (16, 1600)).units[0].data_source
        pool = ex.primary_pool(ds)
        held = [pool.borrow() for _ in range(3)]  # 30 % of maxSize 10 are busy
        try:
            assert _server_of(ex, 16, 1600)[0] != PRIMARY_ID
        finally:
            for b in held:
                b.release()
        assert _server_of(ex, 16, 1600)[0] == PRIMARY_ID  # below the cap again
        counters = ex.replica_status()[ds].counters
        assert counters.degraded == 1 and counters.forced_primary == 1
        assert_no_leaks(ex)


# -- a replica killed under load ------------------------------------------------------------------------


def test_kill_9_of_a_replica_under_mixed_traffic(rw_config: Any, replication: Replication) -> None:  # noqa: F811
    spec = {**rw_config, "readWrite": {"lagCheckIntervalMs": 200, "breakerFailures": 3}}
    failures: list[BaseException] = []
    inserted: list[int] = []
    stop = threading.Event()
    next_id = iter(range(50_000, 10_000_000))
    lock = threading.Lock()

    with executor(spec, replica_monitor=True) as ex:
        for u in range(20):
            _insert(ex, u + 100, 40_000 + u)
        replication.wait_replicated()

        def reader() -> None:
            while not stop.is_set():
                try:
                    u = 100 + int(time.monotonic() * 1000) % 20
                    _server_of(ex, u, 40_000 + u - 100)
                    ex.execute("SELECT COUNT(*) FROM t_order").close()  # every shard: two units
                except BaseException as exc:  # noqa: BLE001 - counted, the test fails on any
                    failures.append(exc)

        def writer() -> None:
            while not stop.is_set():
                with lock:
                    order = next(next_id)
                try:
                    _insert(ex, order % 97, order)
                    inserted.append(order)
                    _server_of(ex, order % 97, order)  # read-your-writes: the primary
                except BaseException as exc:  # noqa: BLE001
                    failures.append(exc)

        threads = [threading.Thread(target=f) for f in (reader, reader, writer, writer)]
        for t in threads:
            t.start()
        try:
            time.sleep(0.5)
            replication.kill(1)
            time.sleep(1.5)
        finally:
            stop.set()
            for t in threads:
                t.join()
        status = ex.replica_status(refresh=True)
        assert failures == []
        assert all(ex.endpoint_stats()) and ex.borrowed() == 0
        assert_no_leaks(ex)
        dead = [r for s in status.values() for r in s.replicas if r.endpoint.endswith("replica[1]")]
        assert dead and all(r.state == "unreachable" and r.weight_now == 0 for r in dead)
        assert sum(s.counters.retried for s in status.values()) >= 1
        # the independent reference: the primary's own count of the rows the writers were told were written
        assert _primary_count(replication, rw_config, "order_id >= 50000") == len(inserted)
        assert len(set(inserted)) == len(inserted)
    replication.restart(1)


def _primary_count(replication: Replication, spec: dict[str, Any], where: str) -> int:  # noqa: F811
    """Rows of every physical t_order table on the primary, read directly (not through ddm-core)."""
    total = 0
    for ds in spec["dataSources"].values():
        db = ds["url"].rsplit("/", 1)[1]
        conn = replication.primary.raw(db)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW TABLES LIKE 't_order%'")
                for (table,) in cur.fetchall():
                    cur.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}")
                    total += cur.fetchone()[0]
        finally:
            conn.close()
    return total
