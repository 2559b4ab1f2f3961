"""``START TRANSACTION``'s characteristics through the proxy (docs/proxy.md#session-statements).

``START TRANSACTION READ ONLY`` / ``READ WRITE`` / ``WITH CONSISTENT SNAPSHOT`` and their combinations open every
pin of the transaction with them — whether the pin is opened from the event loop (a read first, its opening
pipelined with it) or on a worker (a write first, or ``inlineStatements: false``) — so MariaDB itself refuses a
write in a read-only transaction with its 1792, and a consistent snapshot is taken on every data source at
``START TRANSACTION``. What the proxy cannot honour is refused with 1235 and nothing started: conflicting
characteristics, READ ONLY or a snapshot in an XA transaction, and ``SET [SESSION] TRANSACTION READ ONLY`` (it
would bind autocommit statements too). Real clients (PyMySQL, the ``mariadb`` command line, the DB-API facade)
against in-process proxies over two MariaDB databases.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from ddm_core import load_config  # noqa: E402
from test_proxy_loop_tx_ends import POINT, _filled, _settled, ids_by_source  # noqa: E402
from test_proxy_many_loop import Served, _served  # noqa: E402
from test_proxy_support import mariadb_cli, proxy_config  # noqa: E402

READ_ONLY_ERROR = 1792  # ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
UPDATE = "UPDATE t_tx SET k = k + 1 WHERE id = %s"


class World:
    def __init__(self, served: dict[str, Served], databases: list[str], ids: dict[str, int], config: Any) -> None:
        self.served, self.databases, self.ids, self.config = served, databases, ids, config


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases)
        _filled(config)
        served = {name: _served(config, name) for name in ("relay", "workers")}
        try:
            router = served["relay"].server.executor.router
            ids = ids_by_source(router)
            yield World(served, databases, ids, config)
        finally:
            for one in served.values():
                one.close()
                assert one.server.borrowed_at_close == 0


def _k(served: Served, i: int) -> int:
    """Row ``i``'s ``k`` as committed (read through the proxy's executor, autocommit)."""
    result = served.server.executor.execute("SELECT k FROM t_tx WHERE id = %s", (i,))
    try:
        return int(result.fetchall()[0][0])
    finally:
        result.close()


def _code(cur: Any, sql: str, params: Any = None) -> int:
    with pytest.raises(pymysql.err.MySQLError) as caught:
        cur.execute(sql, params)
    return int(caught.value.args[0])


@pytest.mark.parametrize("name", ["relay", "workers"])
@pytest.mark.parametrize("first", ["read", "write"])
def test_a_write_in_a_read_only_transaction_gets_mariadbs_1792(world: World, name: str, first: str) -> None:
    """The pin opened by a read (from the loop on ``relay``, pipelined with it) or by the write itself (on a
    worker): MariaDB refuses the write, the row is unchanged, and the transaction goes on to its COMMIT."""
    served, ids = world.served[name], world.ids
    i = ids["ds_1"]
    before = _k(served, i)
    with served.connect() as conn, conn.cursor() as cur:
        cur.execute(POINT, (i,))  # the shape met in autocommit
        cur.fetchall()
        opened = served.server.runtime.opened_with_first
        cur.execute("START TRANSACTION READ ONLY")
        if first == "read":
            cur.execute(POINT, (i,))
            assert cur.fetchall() == ((i, before),)
            if name == "relay":
                assert served.server.runtime.opened_with_first == opened + 1  # opened on the loop, read behind it
        assert _code(cur, UPDATE, (i,)) == READ_ONLY_ERROR
        assert conn.server_status & 1  # SERVER_STATUS_IN_TRANS: the transaction goes on
        cur.execute(POINT, (ids["ds_0"],))
        cur.fetchall()
        cur.execute("COMMIT")
        cur.execute(UPDATE, (i,))  # autocommit again: read-write
        cur.execute("UPDATE t_tx SET k = k - 1 WHERE id = %s", (i,))
    assert _k(served, i) == before
    _settled(served, world.databases)


@pytest.mark.parametrize("name", ["relay", "workers"])
def test_read_write_and_plain_begin_still_write(world: World, name: str) -> None:
    served, i = world.served[name], world.ids["ds_0"]
    before = _k(served, i)
    with served.connect() as conn, conn.cursor() as cur:
        for opening in ("START TRANSACTION READ WRITE", "BEGIN", "start  transaction"):
            cur.execute(opening)
            cur.execute(POINT, (i,))
            cur.fetchall()
            cur.execute(UPDATE, (i,))
            cur.execute("COMMIT")
    assert _k(served, i) == before + 3
    with served.connect() as conn, conn.cursor() as cur:
        cur.execute("UPDATE t_tx SET k = k - 3 WHERE id = %s", (i,))
    _settled(served, world.databases)


@pytest.mark.parametrize("name", ["relay", "workers"])
@pytest.mark.parametrize("opening", ["START TRANSACTION WITH CONSISTENT SNAPSHOT",
                                     "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
                                     "START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT"])
def test_a_consistent_snapshot_is_taken_on_every_data_source_at_start(world: World, name: str, opening: str) -> None:
    """Rows committed on both data sources by another session after START TRANSACTION WITH CONSISTENT SNAPSHOT
    (before the transaction's first statement) are not seen by it; after its COMMIT they are."""
    served, ids = world.served[name], world.ids
    a, b = ids["ds_0"], ids["ds_1"]
    before = {i: _k(served, i) for i in (a, b)}
    with served.connect() as conn, conn.cursor() as cur, served.connect() as other, other.cursor() as ocur:
        cur.execute(opening)
        assert served.server.executor.borrowed() == 2  # a pin on each data source, its snapshot taken now
        for i in (a, b):
            ocur.execute(UPDATE, (i,))  # committed (autocommit) after the snapshot
        for i in (a, b):
            cur.execute(POINT, (i,))
            assert cur.fetchall() == ((i, before[i]),)
        if "READ ONLY" in opening:
            assert _code(cur, UPDATE, (a,)) == READ_ONLY_ERROR
        cur.execute("COMMIT")
        for i in (a, b):
            cur.execute(POINT, (i,))
            assert cur.fetchall() == ((i, before[i] + 1),)
            ocur.execute("UPDATE t_tx SET k = k - 1 WHERE id = %s", (i,))
    _settled(served, world.databases)


def test_what_the_proxy_cannot_honour_is_refused_and_nothing_starts(world: World) -> None:
    served = world.served["relay"]
    with served.connect() as conn, conn.cursor() as cur:
        assert _code(cur, "START TRANSACTION READ ONLY, READ WRITE") == 1235
        assert not conn.server_status & 1
        for sql in ("SET TRANSACTION READ ONLY", "SET SESSION TRANSACTION READ ONLY",
                    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED, READ ONLY", "SET transaction_read_only = 1",
                    "SET @@tx_read_only = ON"):  # fmt: skip
            with pytest.raises(pymysql.err.MySQLError) as caught:
                cur.execute(sql)
            assert caught.value.args[0] == 1235 and "START TRANSACTION READ ONLY" in caught.value.args[1], sql
        cur.execute("SET TRANSACTION READ WRITE")  # the default: honoured as it is
        cur.execute("SET transaction_read_only = 0")
        cur.execute("SET transaction_type = XA")
        for sql in ("START TRANSACTION READ ONLY", "START TRANSACTION WITH CONSISTENT SNAPSHOT"):
            with pytest.raises(pymysql.err.MySQLError) as caught:
                cur.execute(sql)
            assert caught.value.args[0] == 1235 and sql.split(" ", 2)[2] in caught.value.args[1]
            assert not conn.server_status & 1
        cur.execute("START TRANSACTION READ WRITE")  # an XA transaction's own default
        cur.execute(POINT, (world.ids["ds_0"],))
        cur.fetchall()
        cur.execute("COMMIT")
    _settled(served, world.databases)


def test_the_mariadb_command_line_gets_1792(world: World) -> None:
    served, i = world.served["relay"], world.ids["ds_1"]
    before = _k(served, i)
    done = mariadb_cli(served.port, f"START TRANSACTION READ ONLY; SELECT k FROM t_tx WHERE id = {i}; "
                                    f"UPDATE t_tx SET k = 0 WHERE id = {i};")  # fmt: skip
    assert done.returncode != 0
    assert "ERROR 1792" in done.stderr, done.stderr
    assert str(before) in done.stdout
    assert _k(served, i) == before
    _settled(served, world.databases)


def test_the_db_api_facade_honours_them_too(world: World) -> None:
    from ddm_core import dbapi

    i = world.ids["ds_0"]
    conn = dbapi.connect(load_config(world.config), load_schema=False)
    try:
        cur = conn.cursor()
        cur.execute("START TRANSACTION READ ONLY")
        cur.execute(POINT, (i,))
        assert cur.fetchall()[0][0] == i
        with pytest.raises(dbapi.Error) as caught:
            cur.execute(UPDATE, (i,))
        assert "1792" in str(caught.value) or "READ ONLY" in str(caught.value), caught.value
        conn.rollback()
        with pytest.raises(dbapi.Error) as caught:
            cur.execute("START TRANSACTION READ ONLY, READ WRITE")
        assert "not both" in str(caught.value)
    finally:
        conn.close()


def test_the_asyncio_facade_refuses_what_it_cannot_keep(world: World) -> None:
    """Its transactions open with BEGIN: READ ONLY and a snapshot are refused, READ WRITE and BEGIN go on."""
    import asyncio

    require_module("asyncmy", "the asyncio facade")
    from ddm_core import dbapi
    from ddm_core.aio.dbapi import connect as aio_connect

    async def run() -> list[str]:
        conn = await aio_connect(load_config(world.config), load_schema=False)
        refused = []
        try:
            cur = await conn.cursor()
            for sql in ("START TRANSACTION READ ONLY", "START TRANSACTION WITH CONSISTENT SNAPSHOT"):
                try:
                    await cur.execute(sql)
                except dbapi.Error as exc:
                    refused.append(str(exc))
            await cur.execute("START TRANSACTION READ WRITE")
            await cur.execute(POINT, (world.ids["ds_0"],))
            assert len(await cur.fetchall()) == 1
            await conn.commit()
        finally:
            await conn.ensure_closed()
        return refused

    refused = asyncio.run(run())
    assert len(refused) == 2 and all("not supported by the asyncio facade" in r for r in refused), refused
