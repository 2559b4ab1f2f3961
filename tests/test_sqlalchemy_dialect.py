"""Regression tests for what SQLAlchemy's compliance suite (tests/test_sqlalchemy_suite.py) found in ``ddm+pymysql``.

Real servers only: four fresh databases ``ddm_sadialect_<tag>_<n>`` on the local MariaDB, with
``t_order`` sharded by ``user_id`` (4 x 4 tables, ``order_id`` from a snowflake generator) and
tables the configuration does not name on ``ds_0``.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest
from sqlalchemy import (
    BigInteger, Column, Engine, Integer, LargeBinary, MetaData, String, Table, create_engine, insert, select,
)

from ddm_core import dbapi, load_config
from ddm_core.execute import Executor
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


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    tag = uuid.uuid4().hex[:8]
    names = [f"ddm_sadialect_{tag}_{i}" for i in range(4)]
    raw = mysql_raw()
    with raw.cursor() as cur:
        for name in names:
            cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(names)}  # fmt: skip
    executor = Executor(load_config(sharding_config(urls)))
    engine = create_engine("ddm+pymysql://", connect_args={"executor": executor})
    try:
        metadata.create_all(engine)
        yield engine
    finally:
        engine.dispose()
        executor.close()
        with raw.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
        raw.close()


def test_large_binary_round_trips_through_the_facades_binary_constructor(engine: Engine) -> None:
    """SQLAlchemy binds LargeBinary values with ``dbapi.Binary``; the facade had none (AttributeError)."""
    value = b"\x00\xe7\x9f\xff" * 50
    with engine.begin() as conn:
        key = conn.execute(insert(blobs), {"data": value}).inserted_primary_key[0]
        assert conn.scalar(select(blobs.c.data).where(blobs.c.id == key)) == value


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
