"""aio: ``AsyncExecutor`` on MariaDB against direct asyncmy and the thread ``Executor``, same run, interleaved.

MariaDB on 127.0.0.1:3306 (root, no password). The module creates, and drops at
the end, ``ddm_bench_aio_<tag>_0..3``: the SLOTS layout of
test_bench_executor.py (``t_order`` sharded by ``user_id`` over 4 databases × 4
tables, 100 000 orders, one per user; its configuration, rows and loader are
imported from there), with pools of ``maxSize`` 16 per data source so that 64
tasks fit.

Every case is a pair as in test_bench_executor.py (:func:`measure_pair`): each
timed round of the ``AsyncExecutor`` follows one round of its baseline, on the
same event loop, so both sides see the same machine load; ``report.py`` prints
the ratio of the medians against the issue's target. A round is one
``loop.run_until_complete`` of many statements on a loop that lives for the
whole test (its cost, a few µs, is the same on both sides and spread over
hundreds of statements). Nothing here asserts a speed.

The one-task ratio moves with the loopback round trip more than with ddm-core:
on a 2-core VM an idle machine answers a point select in ~130-150 µs (a halted
vCPU wakes slowly) and a busy one in ~65 µs, while the time the AsyncExecutor
adds per statement stays put; read the two medians, not only their ratio.

==========================  =================================================  ===========================================
case                        AsyncExecutor                                      baseline
==========================  =================================================  ===========================================
point select, 1 task        ``await ex.execute(POINT, (k,))`` +                the routed unit's SQL on an open asyncmy
                            ``await r.fetchall()``, 200 in one task            connection to its database (cursor
                                                                               ``execute`` + ``fetchall``)
64 tasks × point selects    64 tasks on one loop, one executor (pools of 16    64 tasks, one asyncmy connection each;
                            per data source); task *t* reads keys of data      the same keys
                            source *t* mod 4, so 16 tasks per pool
16-shard ORDER BY LIMIT 20  20 pages awaited in one task                       the thread ``Executor`` (``max_concurrency``
                                                                               16) over the same data, same thread
==========================  =================================================  ===========================================

The first two run on asyncio's default loop and, where uvloop is installed (the
``proxy`` extra), again on uvloop: ``report.py`` gives each loop its own table.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
import warnings
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine, Iterator, TypeVar

import pytest
from test_bench_executor import (  # the layout, rows and pairing of the thread executor's benchmarks
    CALLS,
    PAGE,
    POINT,
    ROWS,
    SEED,
    SHARDS,
    TABLES,
    Layout,
    Paired,
    _connect,
    _load,
    _point_keys,
    _timed,
    make_rows,
    measure_pair,
    slots_config,
)

from ddm_core.execute import Executor

asyncmy = pytest.importorskip("asyncmy", reason="the asyncio benchmarks need the aio extra (asyncmy)")
from ddm_core.aio.executor import AsyncExecutor  # noqa: E402  (after the skip: it needs asyncmy)

T = TypeVar("T")

TASKS = 64
TASK_CALLS = 50  # point selects per task per round: 3 200 statements a round
PAGES = 20  # 16-shard pages per round
#: Pools that let 64 tasks over 4 data sources each hold a connection at once.
POOL = {"maxSize": 16, "minIdle": 4, "acquireTimeoutMs": 3000}
GROUP = "AsyncExecutor vs direct asyncmy / thread Executor"
LOOPS = ["asyncio", "uvloop"]


@dataclass
class AioData:
    """The loaded databases and their configuration (pools of 16)."""

    names: list[str]
    config: Any


@pytest.fixture(scope="module")
def aio_data() -> Iterator[AioData]:
    try:
        admin = _connect()
    except Exception as exc:
        pytest.skip(f"MariaDB on 127.0.0.1:3306 is needed for the asyncio benchmarks: {exc}")
    names = [f"ddm_bench_aio_{uuid.uuid4().hex[:8]}_{i}" for i in range(SHARDS)]
    try:
        with admin.cursor() as cur:
            for db in names:
                cur.execute(f"CREATE DATABASE {db}")
        config = slots_config(names, pool=POOL)
        # Loaded through the thread executor, whose connections are closed again before the cases
        # run: the 64-task case holds 128 connections and MariaDB allows 151 by default.
        loader = Layout(config)
        try:
            _load(loader, make_rows(1, ROWS, SEED), ("t_order",))
        finally:
            loader.close()
        yield AioData(names, config)
    finally:
        with admin.cursor() as cur:
            for db in names:
                cur.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.close()


# -- event loops -------------------------------------------------------------------------------


def new_loop(kind: str) -> asyncio.AbstractEventLoop:
    """A new loop of ``kind``: ``asyncio`` (the default loop, what ``asyncio.run`` makes) or ``uvloop``."""
    if kind == "uvloop":
        uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed (the proxy extra brings it)")
        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        return loop
    return asyncio.new_event_loop()


class OnLoop:
    """One loop for a whole test: setup, the timed rounds of both sides, and the teardown all run on it."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.loop = new_loop(kind)
        self._closers: list[Callable[[], Awaitable[Any]]] = []

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def timed(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> Callable[[], float]:
        """A baseline round: ``make()`` run to its end, timed around ``run_until_complete`` with
        ``perf_counter``, as pytest-benchmark times the AsyncExecutor's round."""
        return _timed(lambda: self.run(make()))

    async def executor(self, config: Any) -> AsyncExecutor:
        ex = AsyncExecutor(config)
        await ex.warm_up()
        self._closers.append(ex.close)
        return ex

    async def direct(self, database: str) -> Any:
        """An asyncmy connection as a user opens it (autocommit, utf8mb4, no read timeout)."""
        conn = await asyncmy.connect(host="127.0.0.1", port=3306, user="root", password="", database=database,
                                     autocommit=True, charset="utf8mb4")
        self._closers.append(conn.ensure_closed)
        return conn

    def close(self) -> None:
        try:
            for close in reversed(self._closers):
                self.run(close())
        finally:
            self.loop.close()


@pytest.fixture(params=LOOPS)
def on_loop(request: pytest.FixtureRequest) -> Iterator[OnLoop]:
    on = OnLoop(request.param)
    try:
        yield on
    finally:
        on.close()


@pytest.fixture
def default_loop() -> Iterator[OnLoop]:
    on = OnLoop("asyncio")
    try:
        yield on
    finally:
        on.close()


def _table(loop: str) -> str:
    return f"AsyncExecutor on {'the default asyncio loop' if loop == 'asyncio' else loop} (interleaved rounds)"


# -- one task --------------------------------------------------------------------------------------


def test_aio_point_select(aio_data: AioData, benchmark: Any, on_loop: OnLoop) -> None:
    keys = _point_keys(CALLS, ROWS, SEED)

    async def setup() -> tuple[AsyncExecutor, list[tuple[Any, str, Any]]]:
        ex = await on_loop.executor(aio_data.config)
        cursors: dict[str, Any] = {}
        statements = []
        for k in keys:
            unit = ex.router.route(POINT, (k,)).units[0]
            if unit.data_source not in cursors:
                database = aio_data.config.data_sources[unit.data_source].primary.database
                cursors[unit.data_source] = (await on_loop.direct(database)).cursor()
            statements.append((cursors[unit.data_source], unit.sql, unit.params))
        return ex, statements

    ex, statements = on_loop.run(setup())

    async def direct_calls() -> list[Any]:
        rows = []
        for cur, sql, params in statements:
            await cur.execute(sql, params)
            rows.append(await cur.fetchall())
        return rows

    async def ddm_calls() -> list[Any]:
        rows = []
        for k in keys:
            r = await ex.execute(POINT, (k,))
            rows.append(await r.fetchall())
        return rows

    ddm_rows, direct_rows = on_loop.run(ddm_calls()), on_loop.run(direct_calls())
    assert [list(r) for r in ddm_rows] == [list(r) for r in direct_rows] and all(len(r) == 1 for r in ddm_rows)
    measure_pair(benchmark, lambda: on_loop.run(ddm_calls()), Paired(on_loop.timed(direct_calls)),
                 case="point select by key, 1 task (vs direct asyncmy)", target="<= 1.10", items=CALLS,
                 unit="call", rounds=30, group=GROUP, table=_table(on_loop.kind), loop=on_loop.kind)


# -- 64 tasks --------------------------------------------------------------------------------------


#: How long the 64-task case waits for the shared server to have enough free connections before it skips.
CONNECTIONS_WAIT = 60.0


def _free_connections() -> tuple[int, int]:
    """``(free, max_connections)`` of the shared server now."""
    admin = _connect()
    try:
        with admin.cursor() as cur:
            cur.execute("SELECT @@max_connections, (SELECT COUNT(*) FROM information_schema.processlist)")
            limit, used = cur.fetchone()
    finally:
        admin.close()
    return limit - used, limit


def _need_connections(count: int) -> None:
    """Wait (up to :data:`CONNECTIONS_WAIT`) until the server can take ``count`` more connections (others' tests
    share it); else skip, saying so where it is seen: a warning in pytest's summary, the reason in ``-rs`` and in
    ``report.py``'s list of skipped cases."""
    end = time.monotonic() + CONNECTIONS_WAIT
    while True:
        free, limit = _free_connections()
        if free >= count + 4:
            return
        if time.monotonic() >= end:
            break
        time.sleep(2.0)
    reason = (f"MariaDB on 127.0.0.1:3306 had {free} of its max_connections={limit} free for {CONNECTIONS_WAIT:g} s; "
              f"this case holds {count} at once (the AsyncExecutor's pools and the baseline's connections): "
              "NOT MEASURED (raise max_connections or rerun when the server is less busy)")  # fmt: skip
    warnings.warn(reason, stacklevel=2)
    pytest.skip(reason)


def _keys_by_data_source(ex: AsyncExecutor, per_source: int) -> dict[str, list[int]]:
    """``per_source`` distinct keys routed to each data source (drawn at random, in routing order)."""
    want = {name: per_source for name in ex.config.data_sources}
    out: dict[str, list[int]] = {name: [] for name in want}
    for k in random.Random(SEED + 64).sample(range(1, ROWS + 1), ROWS):
        ds = ex.router.route(POINT, (k,)).units[0].data_source
        if len(out[ds]) < want[ds]:
            out[ds].append(k)
            if all(len(v) == want[n] for n, v in out.items()):
                return out
    raise AssertionError(f"not enough keys per data source: { {n: len(v) for n, v in out.items()} }")


def test_aio_point_select_64_tasks(aio_data: AioData, benchmark: Any, on_loop: OnLoop) -> None:
    _need_connections(2 * TASKS)
    sources = list(aio_data.config.data_sources)
    per_source = TASKS // len(sources)
    assert per_source <= POOL["maxSize"]  # every task can hold a connection at once: nobody waits on a pool

    async def setup() -> tuple[AsyncExecutor, list[list[int]], list[list[tuple[Any, str, Any]]]]:
        ex = await on_loop.executor(aio_data.config)
        keys = _keys_by_data_source(ex, per_source * TASK_CALLS)
        task_keys = []
        task_statements = []
        for t in range(TASKS):
            ds = sources[t % len(sources)]
            mine = keys[ds][(t // len(sources)) * TASK_CALLS:][:TASK_CALLS]
            cur = (await on_loop.direct(aio_data.config.data_sources[ds].primary.database)).cursor()
            statements = []
            for k in mine:
                unit = ex.router.route(POINT, (k,)).units[0]
                statements.append((cur, unit.sql, unit.params))
            task_keys.append(mine)
            task_statements.append(statements)
        return ex, task_keys, task_statements

    ex, task_keys, task_statements = on_loop.run(setup())

    async def direct_task(statements: list[tuple[Any, str, Any]]) -> int:
        n = 0
        for cur, sql, params in statements:
            await cur.execute(sql, params)
            n += len(await cur.fetchall())
        return n

    async def ddm_task(keys: list[int]) -> int:
        n = 0
        for k in keys:
            r = await ex.execute(POINT, (k,))
            n += len(await r.fetchall())
        return n

    async def direct_round() -> list[int]:
        return await asyncio.gather(*(direct_task(s) for s in task_statements))

    async def ddm_round() -> list[int]:
        return await asyncio.gather(*(ddm_task(k) for k in task_keys))

    assert on_loop.run(ddm_round()) == on_loop.run(direct_round()) == [TASK_CALLS] * TASKS
    measure_pair(benchmark, lambda: on_loop.run(ddm_round()), Paired(on_loop.timed(direct_round)),
                 case=f"point selects, {TASKS} tasks over 4 data sources (throughput; vs asyncmy, "
                      "a connection per task)",
                 target=">= 0.90", items=TASKS * TASK_CALLS, unit="statement", rounds=15, higher_is_better=True,
                 group=GROUP, table=_table(on_loop.kind), loop=on_loop.kind)
    stats = ex.pool_stats()
    benchmark.extra_info["pool_timeouts"] = sum(s.timeouts for s in stats.values())
    benchmark.extra_info["pool_open"] = {name: s.open for name, s in stats.items()}


# -- a 16-shard page -------------------------------------------------------------------------------


def test_aio_page_16_shards(aio_data: AioData, benchmark: Any, default_loop: OnLoop) -> None:
    ex = default_loop.run(default_loop.executor(aio_data.config))
    thread = Executor(aio_data.config, max_concurrency=SHARDS * TABLES)
    thread.warm_up()

    async def ddm_pages() -> list[Any]:
        pages = []
        for _ in range(PAGES):
            r = await ex.execute(PAGE)
            pages.append(await r.fetchall())
        return pages

    def thread_pages() -> list[Any]:
        pages = []
        for _ in range(PAGES):
            with thread.execute(PAGE) as r:
                pages.append(r.fetchall())
        return pages

    try:
        first = default_loop.run(ex.execute(PAGE))
        assert first.units == SHARDS * TABLES
        assert default_loop.run(ddm_pages()) == thread_pages() and len(thread_pages()[0]) == 20
        measure_pair(benchmark, lambda: default_loop.run(ddm_pages()), Paired(_timed(thread_pages)),
                     case="16-shard ORDER BY ... LIMIT 20 (vs the thread Executor)", target="<= 1.00",
                     items=PAGES, unit="call", rounds=15, warmup_rounds=1, group=GROUP,
                     table=_table("asyncio"), loop="asyncio")
    finally:
        thread.close()
