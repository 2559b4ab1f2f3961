"""Regression tests for what SQLAlchemy's compliance suite (tests/test_sqlalchemy_suite.py) found in ``ddm+pymysql``.

Real servers only: four fresh databases on the local MariaDB, with
``t_order`` sharded by ``user_id`` (4 x 4 tables, ``order_id`` from a snowflake generator) and
tables the configuration does not name on ``ds_0``.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from sqlalchemy import (
    BigInteger, Column, Engine, Integer, LargeBinary, MetaData, String, Table, create_engine, insert, inspect, select,
)

from ddm_core import dbapi, load_config
from ddm_core.execute import Executor
from services import fresh_mariadb_databases
from test_execute_support import mysql_raw, sharding_config

metadata = MetaData()
orders = Table(
    "t_order", metadata,
    Column("order_id", BigInteger, primary_key=True, autoincrement=True),  # the key generator's column
    Column("user_id", BigInteger, nullable=False),
    Column("note", String(40)),
)
blobs = Table(  # not in the configuration: a single table on ds_0, its key from AUTO_INCREMENT
    "t_blob", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("data", LargeBinary),
)


class Setup:
    """The module's databases and the executor over them."""

    def __init__(self, names: list[str], executor: Executor) -> None:
        self.names = names
        self.executor = executor


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    with fresh_mariadb_databases(4) as names:
        urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
                for i, db in enumerate(names)}  # fmt: skip
        executor = Executor(load_config(sharding_config(urls)))
        try:
            engine = create_engine("ddm+pymysql://", connect_args={"executor": executor})
            metadata.create_all(engine)
            engine.dispose()
            yield Setup(names, executor)
        finally:
            executor.close()


@pytest.fixture()
def engine(setup: Setup) -> Iterator[Engine]:
    engine = create_engine("ddm+pymysql://", connect_args={"executor": setup.executor})
    yield engine
    engine.dispose()


def test_large_binary_round_trips_through_the_facades_binary_constructor(engine: Engine) -> None:
    """SQLAlchemy binds LargeBinary values with ``dbapi.Binary``; the facade had none (AttributeError)."""
    value = b"\x00\xe7\x9f\xff" * 50
    with engine.begin() as conn:
        key = conn.execute(insert(blobs), {"data": value}).inserted_primary_key[0]
        assert conn.scalar(select(blobs.c.data).where(blobs.c.id == key)) == value


def test_large_binary_round_trips_through_the_asyncio_dialect(setup: Setup) -> None:
    """ddm+asyncmy's module adapter offers the same PEP 249 constructors (``Binary``)."""
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine

    from ddm_core.aio import AsyncExecutor

    value = b"\x01\xfe" * 64

    async def round_trip() -> Any:
        async with AsyncExecutor(setup.executor.config) as executor:
            engine = create_async_engine("ddm+asyncmy://", connect_args={"executor": executor})
            try:
                async with engine.begin() as conn:
                    key = (await conn.execute(insert(blobs), {"data": value})).inserted_primary_key[0]
                    return await conn.scalar(select(blobs.c.data).where(blobs.c.id == key))
            finally:
                await engine.dispose()

    assert asyncio.run(round_trip()) == value


def test_the_facade_offers_pep_249_type_objects_and_constructors() -> None:
    assert dbapi.Binary(bytearray(b"ab")) == b"ab" and type(dbapi.Binary(memoryview(b"x"))) is bytes
    assert dbapi.STRING == 253 and dbapi.NUMBER == 8 and dbapi.DATETIME == 12 and dbapi.BINARY == 252
    assert dbapi.STRING != 8 and dbapi.NUMBER != None  # noqa: E711 - a type object compared with a type code
    assert dbapi.Timestamp(2024, 5, 1, 12).year == 2024 and dbapi.DateFromTicks(0).year in (1969, 1970)


@pytest.mark.parametrize("table", ["single", "sharded"])
def test_result_lastrowid_is_the_new_rows_key(engine: Engine, table: str) -> None:
    """SQLAlchemy reads ``cursor.lastrowid`` after it closed the cursor; closing used to reset it to None."""
    with engine.begin() as conn:
        if table == "single":
            result = conn.execute(insert(blobs), {"data": b"x"})
            stored = conn.scalar(select(blobs.c.id).where(blobs.c.id == result.lastrowid))
        else:
            result = conn.execute(insert(orders), {"user_id": 7, "note": "lastrowid"})
            stored = conn.scalar(select(orders.c.order_id).where(orders.c.user_id == 7, orders.c.note == "lastrowid"))
        assert result.lastrowid is not None and result.lastrowid == stored == result.inserted_primary_key[0]


def test_a_closed_cursor_keeps_its_last_rowcount_and_lastrowid(engine: Engine) -> None:
    raw: Any = engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("INSERT INTO t_blob (data) VALUES (%s), (%s)", (b"a", b"b"))
        key, count = cur.lastrowid, cur.rowcount
        cur.close()
        assert (cur.lastrowid, cur.rowcount) == (key, count) and count == 2 and key is not None
        raw.rollback()
    finally:
        raw.close()


def test_an_offset_without_a_limit_pages_a_sharded_table(engine: Engine) -> None:
    """SQLAlchemy writes ``.offset(n)`` alone as ``LIMIT %s, 18446744073709551615``; across shards the router
    refused a literal LIMIT with a parameter OFFSET."""
    for user_id in range(100, 112):  # twelve users: every data source holds some; a transaction each
        with engine.begin() as conn:
            conn.execute(insert(orders), {"user_id": user_id, "note": "offset"})
    with engine.connect() as conn:
        query = select(orders.c.user_id).where(orders.c.note == "offset").order_by(orders.c.user_id.desc())
        assert conn.scalars(query.offset(5)).all() == list(range(106, 99, -1))
        assert conn.scalars(query.offset(0)).all() == list(range(111, 99, -1))


def test_reflection_does_not_list_the_xa_log(setup: Setup) -> None:
    """The XA log lives on the default data source, whose SHOW TABLES lists every table: reflection (and
    Alembic's autogenerate) saw ddm_xa_log as one of the application's tables."""
    engine = create_engine("ddm+pymysql://", connect_args={"executor": setup.executor, "transaction_mode": "xa"})
    try:
        with engine.begin() as conn:  # one XA transaction writing to several data sources
            conn.execute(insert(orders), [{"user_id": u, "note": "xa"} for u in range(200, 208)])
        raw = mysql_raw(setup.names[0])
        try:
            with raw.cursor() as cur:
                cur.execute("SHOW TABLES LIKE 'ddm_xa_log'")
                assert cur.fetchall(), "the XA transaction wrote no log on ds_0: nothing to hide"
        finally:
            raw.close()
        assert sorted(inspect(engine).get_table_names()) == ["t_blob", "t_order"]
    finally:
        engine.dispose()
