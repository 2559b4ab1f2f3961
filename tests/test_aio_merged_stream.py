"""Merged reads streamed on the loop (aio/merging.py): the thread runner's rows, read as they are pulled.

Four MariaDB databases × 4 tables, 300 orders. Every merge the engine has (ORDER BY, GROUP BY with
aggregates, DISTINCT, LIMIT/OFFSET) is streamed with a batch of 3 rows, so each unit is refilled many
times in the middle of the merge, and compared with the thread executor's buffered answer, values and
their types. Then what a stream holds: every unit's connection while it is read, none once a LIMIT is
reached or the result is closed, and none after a unit's connection is killed mid-merge.
"""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.aio.executor import AsyncExecutor
from ddm_core.aio.merging import MergedStream
from ddm_core.errors import DdmError
from ddm_core.execute import Executor
from test_execute_support import ORDER_DDL, mysql_raw, sharding_config

ORDERS = 300

MERGES = [
    "SELECT user_id, amount, note FROM t_order ORDER BY amount DESC, user_id",
    # (user_id breaks the ties of note: a data source's UNION ALL sorts its tables' tied rows as it likes)
    "SELECT user_id, note FROM t_order ORDER BY note, user_id LIMIT 17 OFFSET 40",
    "SELECT amount % 7 AS bucket, COUNT(*), SUM(amount), AVG(amount), MIN(note), MAX(user_id) "
    "FROM t_order GROUP BY amount % 7 ORDER BY bucket",
    "SELECT amount % 5, COUNT(*) FROM t_order GROUP BY amount % 5 ORDER BY COUNT(*) DESC, amount % 5",
    "SELECT DISTINCT amount % 11 FROM t_order ORDER BY amount % 11",
    "SELECT COUNT(*), SUM(amount), AVG(amount) FROM t_order",
    "SELECT user_id FROM t_order WHERE amount > %s ORDER BY user_id DESC LIMIT 5",
]


@pytest.fixture(scope="module")
def config() -> Iterator[Any]:
    admin = mysql_raw()
    names = [f"ddm_mstream_{uuid.uuid4().hex[:8]}_{i}" for i in range(4)]
    with admin.cursor() as cur:
        for name in names:
            cur.execute(f"CREATE DATABASE {name}")
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(names)}  # fmt: skip
    config = load_config(sharding_config(urls, pool={"maxSize": 5, "minIdle": 0, "acquireTimeoutMs": 2000}))
    try:
        with Executor(config) as ex:
            ex.execute(ORDER_DDL).close()
            for user in range(1, ORDERS + 1):
                ex.execute("INSERT INTO t_order (order_id, user_id, amount, note) VALUES (%s, %s, %s, %s)",
                           (user, user, (user * 37) % 101, f"n{(user * 13) % 97:03d}")).close()  # fmt: skip
        yield config
    finally:
        with admin.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


def _typed(rows: Any) -> list[list[tuple[str, str]]]:
    return [[(type(v).__name__, repr(v)) for v in row] for row in rows]


@pytest.mark.parametrize("sql", MERGES, ids=range(len(MERGES)))
def test_a_streamed_merge_gives_the_thread_runners_rows(config: Any, sql: str) -> None:
    params = (50,) if "%s" in sql else None
    with Executor(config) as ex:
        want = ex.execute(sql, params).fetchall()
    assert want

    async def main() -> None:
        async with AsyncExecutor(config, fetch_batch=3) as ex:
            result = await ex.execute(sql, params, stream=True)
            assert isinstance(result._source, MergedStream)
            got = [row async for row in result]
            assert _typed(got) == _typed(want)
            assert ex.borrowed() == 0
            again = await ex.execute(sql, params, stream=True)
            assert _typed(await again.fetchmany(4) + await again.fetchall()) == _typed(want)

    asyncio.run(main())


def test_a_merge_holds_every_units_connection_while_read_and_none_past_its_limit(config: Any) -> None:
    async def main() -> None:
        async with AsyncExecutor(config, fetch_batch=3) as ex:
            result = await ex.execute("SELECT note FROM t_order ORDER BY note", stream=True)
            units = len(ex.router.route("SELECT note FROM t_order ORDER BY note").units)  # the columns known by now
            first = await result.fetchmany(5)
            assert ex.borrowed() == units == 4  # every unit (a data source's UNION ALL) still has rows on the wire
            rest = await result.fetchall()
            assert len(first) + len(rest) == ORDERS and ex.borrowed() == 0
            assert result.rowcount == ORDERS

            limited = await ex.execute("SELECT note FROM t_order ORDER BY note LIMIT 4", stream=True)
            assert len(await limited.fetchmany(10)) == 4
            assert ex.borrowed() == 0  # the limit was reached: every unit given back, unread rows drained
            stats = ex.pool_stats().values()
            assert all(s.open == s.idle for s in stats)

    asyncio.run(main())


def test_a_unit_killed_mid_merge_fails_the_read_and_every_connection_comes_back(config: Any) -> None:
    admin = mysql_raw()

    async def main() -> None:
        async with AsyncExecutor(config, fetch_batch=2) as ex:
            # Rows of 1 MB, each sent 0.1 s after the one before (SLEEP runs as the row is sent): the unit is
            # still sending for ~2 s when the kill lands. Size alone was not enough: a slow client's receive
            # buffer grows to tcp_rmem's maximum (32 MB here), and under load the whole ~19 MB answer got there.
            result = await ex.execute("SELECT user_id, REPEAT('x', 1048576), SLEEP(0.1) FROM t_order ORDER BY user_id",
                                      stream=True)
            assert await result.fetchone() is not None
            victim = result._source._streams[3].borrowed.raw.thread_id()  # type: ignore[union-attr]
            with admin.cursor() as cur:
                cur.execute(f"KILL CONNECTION {int(victim)}")
            with pytest.raises(DdmError) as failed:
                await result.fetchall()
            assert "ds_" in str(failed.value)  # names the data source whose unit failed
            assert ex.borrowed() == 0
            rows = await (await ex.execute("SELECT COUNT(*) FROM t_order")).fetchall()
            assert rows == [(ORDERS,)]  # the pools still serve

    try:
        asyncio.run(main())
    finally:
        admin.close()


def test_decimal_sums_stay_exact_through_a_streamed_merge(config: Any) -> None:
    async def main() -> None:
        async with AsyncExecutor(config, fetch_batch=1) as ex:
            result = await ex.execute("SELECT SUM(amount), AVG(amount) FROM t_order", stream=True)
            (total, mean), = await result.fetchall()
            want = sum((u * 37) % 101 for u in range(1, ORDERS + 1))
            assert total == Decimal(want) and isinstance(total, Decimal)
            assert isinstance(mean, Decimal) and abs(mean - Decimal(want) / ORDERS) < Decimal("0.0001")

    asyncio.run(main())
