"""``pool.aliveBypassWindowMs``: how long a pooled connection may sit idle before a checkout pings it.

A connection its server killed while it sat idle is found dead by the ping and replaced, with
the thread pools and the asyncio pools alike, when it sat idle longer than the window; within
the window it is lent as it is, unchecked, and the statement on it fails.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Iterator

import pymysql
import pytest

from ddm_core import load_config
from ddm_core.errors import DdmError
from ddm_core.execute import Executor
from services import fresh_mariadb_databases
from test_execute_support import CONFIG_DDL_MYSQL, sharding_config

WHO = "SELECT CONNECTION_ID() FROM t_config UNION ALL SELECT CONNECTION_ID()"  # t_config lives on ds_0


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with fresh_mariadb_databases(1) as names:
        with pymysql.connect(host="127.0.0.1", user="root", password="", database=names[0]) as conn:
            conn.cursor().execute(CONFIG_DDL_MYSQL)
        yield names[0]


def _config(database: str, window_ms: int) -> Any:
    urls = {"ds_0": f"mysql://root:@127.0.0.1:3306/{database}"}
    return load_config(sharding_config(urls, pool={"maxSize": 1, "minIdle": 1, "aliveBypassWindowMs": window_ms}))


def _kill(connection_id: int) -> None:
    with pymysql.connect(host="127.0.0.1", user="root", password="") as admin:
        admin.cursor().execute(f"KILL CONNECTION {connection_id}")
    time.sleep(0.2)  # the server has closed its end; the pooled connection is idle past a 0 ms window


def test_a_connection_idle_past_the_window_is_pinged_and_replaced(database: str) -> None:
    with Executor(_config(database, 0), load_schema=False) as ex:
        first = ex.execute(WHO).fetchall()[0][0]
        _kill(first)
        again = ex.execute(WHO).fetchall()[0][0]  # the ping found it dead: a new connection, transparently
    assert again != first


def test_a_connection_within_the_window_is_lent_unchecked(database: str) -> None:
    with Executor(_config(database, 60_000), load_schema=False) as ex:
        first = ex.execute(WHO).fetchall()[0][0]
        _kill(first)
        with pytest.raises(DdmError):
            ex.execute(WHO).fetchall()  # not pinged: the dead connection was lent


def test_the_asyncio_pools_follow_the_window(database: str) -> None:
    pytest.importorskip("asyncmy", reason="the asyncio MySQL driver is the 'aio' extra")
    from ddm_core.aio import AsyncExecutor

    async def run(window_ms: int) -> tuple[int, Any]:
        async with AsyncExecutor(_config(database, window_ms), load_schema=False) as ex:
            first = (await (await ex.execute(WHO)).fetchall())[0][0]
            await asyncio.to_thread(_kill, first)
            try:
                return first, (await (await ex.execute(WHO)).fetchall())[0][0]
            except DdmError as exc:
                return first, exc

    first, again = asyncio.run(run(0))
    assert isinstance(again, int) and again != first
    _, failed = asyncio.run(run(60_000))
    assert isinstance(failed, DdmError)
