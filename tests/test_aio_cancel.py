"""Cancelling asyncio statements at random points: nothing leaks, nothing keeps running, nothing half-commits.

One event loop, one :class:`AsyncExecutor` over four MariaDB databases. A thousand times a
statement is started and cancelled (``task.cancel()``) after a random delay of 0–4 ms, which
lands before the send, while the server runs it, while its answer is read, between the units
of a fan-out or a stream, or inside a transaction. After each one:

* every pool is at rest: nothing borrowed, every open connection idle;
* the server's process list shows no statement of ours still running (a cancelled statement is
  killed with ``KILL QUERY``; the check waits for the kill to land, up to a bound);
* a cancelled transaction left its row unchanged (it never reaches its COMMIT).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.aio.executor import AsyncExecutor
from ddm_core.execute import Executor
from runners import cancel_after
from test_execute_support import ORDER_DDL, mysql_raw, sharding_config

ROUNDS = 1000
USERS = 64
SEED = 20261205


@pytest.fixture(scope="module")
def databases() -> Iterator[list[str]]:
    admin = mysql_raw()
    tag = uuid.uuid4().hex[:8]
    names = [f"ddm_cancel_{tag}_{i}" for i in range(4)]
    with admin.cursor() as cur:
        for name in names:
            cur.execute(f"CREATE DATABASE {name}")
    try:
        yield names
    finally:
        with admin.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


@pytest.fixture(scope="module")
def config(databases: list[str]) -> Any:
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(databases)}  # fmt: skip
    config = load_config(sharding_config(urls, pool={"maxSize": 6, "minIdle": 1, "acquireTimeoutMs": 2000}))
    with Executor(config) as ex:
        ex.execute(ORDER_DDL).close()
        for user in range(1, USERS + 1):
            ex.execute("INSERT INTO t_order (user_id, amount, note) VALUES (%s, %s, %s)", (user, 100, f"n{user}")).close()
    return config


def _running(admin: Any, databases: list[str]) -> list[tuple[Any, ...]]:
    """Statements of ours the server is still running (not the checking connection's own)."""
    marks = ", ".join(["%s"] * len(databases))
    with admin.cursor() as cur:
        cur.execute(
            f"SELECT id, db, command, state, info FROM information_schema.processlist "
            f"WHERE db IN ({marks}) AND command = 'Query' AND id <> CONNECTION_ID()", databases,
        )  # fmt: skip
        return list(cur.fetchall())


async def _single(ex: AsyncExecutor, rnd: random.Random) -> None:
    user = rnd.randint(1, USERS)
    result = await ex.execute("SELECT amount, SLEEP(%s) FROM t_order WHERE user_id = %s", (rnd.choice([0, 0.001, 0.003]), user))
    await result.fetchall()


async def _fan_out(ex: AsyncExecutor, rnd: random.Random) -> None:
    users = rnd.sample(range(1, USERS + 1), 6)
    marks = ", ".join(["%s"] * len(users))
    result = await ex.execute(
        f"SELECT user_id, SLEEP(%s) FROM t_order WHERE user_id IN ({marks}) ORDER BY user_id LIMIT 4",
        (rnd.choice([0, 0.001, 0.002]), *users),
    )  # fmt: skip
    await result.fetchall()


async def _stream(ex: AsyncExecutor, rnd: random.Random) -> None:
    async with await ex.execute("SELECT user_id, note FROM t_order", stream=True) as result:
        async for _ in result:
            await asyncio.sleep(0)


async def _merged_stream(ex: AsyncExecutor, rnd: random.Random) -> None:
    """A merge streamed on the loop: cancels land while it awaits a unit's next rows (aio/merging.py)."""
    sql = rnd.choice(["SELECT user_id, note FROM t_order ORDER BY note DESC",
                      "SELECT amount, COUNT(*) FROM t_order GROUP BY amount ORDER BY amount"])  # fmt: skip
    async with await ex.execute(sql, stream=True) as result:
        async for _ in result:
            await asyncio.sleep(0)


async def _transaction(ex: AsyncExecutor, rnd: random.Random, user: int) -> None:
    async with ex.transaction():
        await ex.execute("UPDATE t_order SET amount = amount + 1 WHERE user_id = %s", (user,))
        await (await ex.execute("SELECT SLEEP(%s) FROM t_order WHERE user_id = %s", (rnd.choice([0, 0.002]), user))).fetchall()
        await asyncio.sleep(10)  # the cancel always lands before the COMMIT


def test_a_thousand_random_cancels_leave_nothing_behind(config: Any, databases: list[str]) -> None:
    rnd = random.Random(SEED)
    admin = mysql_raw()
    kinds: dict[str, int] = {}

    async def main() -> None:
        async with AsyncExecutor(config, timeout=5.0) as ex:
            for round_no in range(ROUNDS):
                kind = rnd.choice(["single", "fan_out", "stream", "merged_stream", "transaction"])
                kinds[kind] = kinds.get(kind, 0) + 1
                user = rnd.randint(1, USERS)
                work = {
                    "single": lambda: _single(ex, rnd),
                    "fan_out": lambda: _fan_out(ex, rnd),
                    "stream": lambda: _stream(ex, rnd),
                    "merged_stream": lambda: _merged_stream(ex, rnd),
                    "transaction": lambda: _transaction(ex, rnd, user),
                }[kind]()
                await cancel_after(work, rnd.uniform(0, 0.004))
                await ex.settle()
                where = f"round {round_no} ({kind})"
                assert ex.borrowed() == 0, (where, ex.pool_stats())
                for stats in ex.pool_stats().values():
                    assert stats.open == stats.idle, (where, stats)
                end = time.monotonic() + 5.0
                while (running := _running(admin, databases)) and time.monotonic() < end:
                    await asyncio.sleep(0.01)
                assert running == [], (where, running)
                if kind == "transaction":
                    got = await (await ex.execute("SELECT amount FROM t_order WHERE user_id = %s", (user,))).fetchall()
                    assert got == [(100,)], (where, got)

    try:
        asyncio.run(main())
    finally:
        admin.close()
    assert min(kinds.values()) > ROUNDS // 8, kinds  # every kind was exercised


@pytest.mark.parametrize("sql", ["SELECT user_id, note FROM t_order", "SELECT user_id, note FROM t_order ORDER BY note"],
                         ids=["concatenated", "merged"])
def test_an_abandoned_stream_gives_its_connections_back(config: Any, sql: str) -> None:
    """A streamed result dropped half-read, never closed: collected, its connections are closed, not lent again."""
    import gc

    async def main() -> None:
        async with AsyncExecutor(config, fetch_batch=2) as ex:
            result = await ex.execute(sql, stream=True)
            assert result.streamed and await result.fetchone() is not None
            units = len(ex.router.route(sql).units)
            assert ex.borrowed() == units == 4  # one per unit (a data source's tables in one UNION ALL), each holding its unread rows
            del result
            gc.collect()
            assert ex.borrowed() == 0
            assert sum(s.discards for s in ex.pool_stats().values()) >= 1
            rows = await (await ex.execute("SELECT COUNT(*) FROM t_order")).fetchall()
            assert rows == [(USERS,)]  # the pools still serve

    asyncio.run(main())
