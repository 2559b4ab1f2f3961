"""kill -9 under load on the asyncio runner: 0 acknowledged writes lost, 0 rows duplicated, 0 connections leaked.

Twelve tasks on one loop write through one :class:`AsyncExecutor` to two data sources on a
private ``mariadbd``, each task to its own hot rows: UPDATE to a new value, DELETE, INSERT again,
transactions that update one row and append another on the same data source, appends of rows
with generated keys, reads. Meanwhile the server is SIGKILLed (by the PID this suite started) at
random moments and restarted, three times.

Each task keeps an independent model of its rows. An acknowledged write fixes a row's value; a
write that failed leaves the row *in doubt* between its value before and after (the server may
have committed before it died); the next successful read of the row must find one of those
values, and fixes it. At the end every row is read once more against the model; every
acknowledged append must be there exactly once, every in-doubt append at most once, and no pool
may have a connection still borrowed.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from ddm_core.aio.executor import AsyncExecutor
from ddm_core.errors import DdmError
from test_execute_support import (  # noqa: F401 - fixtures
    PrivateMariaDB,
    private_config,
    private_mariadb,
)

WORKERS = 12
ROWS_PER_WORKER = 3
KILLS = 3
SEED = 20261205
ABSENT = None


class Model:
    """What one task knows of its rows: each row's possible values, and its appends."""

    def __init__(self, worker: int) -> None:
        self.worker = worker
        self.keys = [worker * 1000 + j for j in range(ROWS_PER_WORKER)]
        self.possible: dict[int, set[int | None]] = {k: {ABSENT} for k in self.keys}
        self.appends_acked: set[str] = set()
        self.appends_in_doubt: set[str] = set()
        self.violations: list[str] = []

    @staticmethod
    def user(key: int) -> int:
        return key % 7 + 1  # a few users: the rows of one task share data sources

    def done(self, key: int, value: int | None) -> None:
        self.possible[key] = {value}

    def doubt(self, key: int, value: int | None) -> None:
        self.possible[key] = self.possible[key] | {value}

    def seen(self, key: int, value: int | None, when: str) -> None:
        if value not in self.possible[key]:
            self.violations.append(f"{when}: row {key} holds {value!r}, expected one of {sorted(self.possible[key], key=str)}")
        self.possible[key] = {value}


async def _read(ex: AsyncExecutor, key: int) -> int | None:
    result = await ex.execute("SELECT amount FROM t_order WHERE user_id = %s AND order_id = %s", (Model.user(key), key))
    rows = await result.fetchall()
    return None if not rows else int(rows[0][0])


async def _worker(ex: AsyncExecutor, model: Model, rnd: random.Random, stop: asyncio.Event, counter: list[int]) -> None:
    op_id = model.worker * 1_000_000
    while not stop.is_set():
        op_id += 1
        key = rnd.choice(model.keys)
        user = Model.user(key)
        before = model.possible[key]
        kind = rnd.choice(["update", "update", "delete", "insert", "read", "tx", "append"])
        if len(before) > 1:
            kind = "read"  # a row in doubt is read first: that fixes it
        try:
            if kind == "read":
                model.seen(key, await _read(ex, key), f"read by worker {model.worker}")
            elif kind == "update":
                await ex.execute("UPDATE t_order SET amount = %s WHERE user_id = %s AND order_id = %s", (op_id, user, key))
                model.done(key, ABSENT if before == {ABSENT} else op_id)
            elif kind == "delete":
                await ex.execute("DELETE FROM t_order WHERE user_id = %s AND order_id = %s", (user, key))
                model.done(key, ABSENT)
            elif kind == "insert":
                if before == {ABSENT}:
                    await ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)", (key, user, op_id))
                    model.done(key, op_id)
            elif kind == "tx":
                note = f"w{model.worker}-{op_id}"
                async with ex.transaction():
                    await ex.execute("UPDATE t_order SET amount = %s WHERE user_id = %s AND order_id = %s", (op_id, user, key))
                    await ex.execute("INSERT INTO t_order (user_id, amount, note) VALUES (%s, %s, %s)", (user, 0, note))
                model.done(key, ABSENT if before == {ABSENT} else op_id)
                model.appends_acked.add(note)
            else:
                note = f"w{model.worker}-{op_id}"
                await ex.execute("INSERT INTO t_order (user_id, amount, note) VALUES (%s, %s, %s)", (user, 0, note))
                model.appends_acked.add(note)
            counter[0] += 1
        except DdmError:
            counter[1] += 1
            if kind == "update" and before != {ABSENT}:
                model.doubt(key, op_id)
            elif kind == "delete":
                model.doubt(key, ABSENT)
            elif kind == "insert" and before == {ABSENT}:
                model.doubt(key, op_id)
            elif kind in ("tx", "append"):
                if kind == "tx" and before != {ABSENT}:
                    model.doubt(key, op_id)
                model.appends_in_doubt.add(f"w{model.worker}-{op_id}")
            await asyncio.sleep(0.01)  # the server is down: do not spin


def test_kill_9_under_load_loses_nothing(private_mariadb: PrivateMariaDB, private_config: Any) -> None:
    rnd = random.Random(SEED)
    models = [Model(w) for w in range(WORKERS)]

    async def main() -> None:
        async with AsyncExecutor(private_config, timeout=2.0) as ex:
            stop = asyncio.Event()
            counter = [0, 0]  # acknowledged, failed
            workers = [asyncio.ensure_future(_worker(ex, m, random.Random(rnd.random()), stop, counter)) for m in models]
            for _ in range(KILLS):
                await asyncio.sleep(rnd.uniform(0.4, 1.2))
                private_mariadb.kill()  # SIGKILL, by the PID this suite started
                await asyncio.sleep(rnd.uniform(0.1, 0.5))
                await asyncio.to_thread(private_mariadb.start)
            await asyncio.sleep(1.0)
            stop.set()
            await asyncio.gather(*workers)
            assert counter[0] > 200 and counter[1] > 0, counter  # the load was real, and the kills cut into it
            await ex.settle()
            assert ex.borrowed() == 0, ex.pool_stats()
            # Every row against its model, once the server is back for good.
            for m in models:
                for key in m.keys:
                    for _ in range(50):
                        try:
                            m.seen(key, await _read(ex, key), "final read")
                            break
                        except DdmError:
                            await asyncio.sleep(0.1)
            result = await ex.execute("SELECT note, COUNT(*) FROM t_order WHERE note IS NOT NULL GROUP BY note")
            found = dict(await result.fetchall())
            lost = [n for m in models for n in m.appends_acked if found.get(n) != 1]
            duplicated = [n for n, count in found.items() if count != 1]
            unknown = [n for n in found if not any(n in m.appends_acked or n in m.appends_in_doubt for m in models)]
            assert (lost, duplicated, unknown) == ([], [], [])
            assert ex.borrowed() == 0

    try:
        asyncio.run(main())
    finally:
        if private_mariadb.proc is None:
            private_mariadb.start()
    violations = [v for m in models for v in m.violations]
    assert violations == []
