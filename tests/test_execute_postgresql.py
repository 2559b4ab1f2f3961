"""PostgreSQL data sources through psycopg 3 (optional driver), against the local server.

Without psycopg installed, ``test_execute_unavailable`` checks the clear
ExecutionError instead, and this module says so in its skip reason.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.errors import DuplicateKeyError, QueryTimeoutError
from ddm_core.execute import Executor
from services import require_module
from test_execute_support import assert_no_leaks

psycopg: Any = require_module("psycopg", "psycopg 3, the optional PostgreSQL driver")


@pytest.fixture(params=["threads", "asyncio"])
def pg_executor(request: pytest.FixtureRequest) -> Iterator[tuple[Executor, str]]:
    table = f"t_pg_{uuid.uuid4().hex[:8]}"
    config = load_config({
        "dataSources": {"ds_0": {"url": "postgresql://127.0.0.1:5432/test", "username": "postgres"}},
        "singleTables": {table: "ds_0"},
    })
    try:
        psycopg.connect("host=127.0.0.1 dbname=test user=postgres", connect_timeout=2).close()
    except Exception as exc:  # not silent: the server this machine should have is missing
        pytest.fail(f"PostgreSQL on 127.0.0.1:5432 is needed once psycopg is installed: {exc}")
    if request.param == "asyncio":
        from runners import BlockingAsyncExecutor

        ex: Any = BlockingAsyncExecutor(config, timeout=3.0)
    else:
        ex = Executor(config, timeout=3.0)
    ex.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))").close()
    try:
        yield ex, table
        if request.param == "asyncio":
            ex.settle()
        assert_no_leaks(ex)
    finally:
        ex.execute(f"DROP TABLE {table}").close()
        ex.close()


def test_postgresql_end_to_end(pg_executor: tuple[Executor, str]) -> None:
    ex, table = pg_executor
    with ex.execute(f"INSERT INTO {table} (id, name) VALUES (%s, %s), (%s, %s)", (1, "a", 2, "b%")) as r:
        assert r.rowcount == 2
    with ex.execute(f"SELECT id, name FROM {table} WHERE name LIKE %s ORDER BY id", ("%%",)) as r:
        assert r.fetchall() == [(1, "a"), (2, "b%")]
    with pytest.raises(DuplicateKeyError) as info:
        ex.execute(f"INSERT INTO {table} (id, name) VALUES (%s, %s)", (1, "again"))
    assert info.value.data_source == "ds_0" and info.value.code == "23505"
    with ex.transaction():
        ex.execute(f"UPDATE {table} SET name = %s WHERE id = %s", ("z", 1)).close()
    tx = ex.transaction()
    tx.execute(f"DELETE FROM {table}").close()
    tx.rollback()
    with ex.execute(f"SELECT name FROM {table} ORDER BY id") as r:
        assert r.fetchall() == [("z",), ("b%",)]
    start = time.monotonic()
    with pytest.raises(QueryTimeoutError):
        ex.execute(f"SELECT pg_sleep(5) FROM {table}", timeout=0.4)
    assert time.monotonic() - start < 1.5
