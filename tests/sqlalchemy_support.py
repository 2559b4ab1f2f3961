"""Shared pieces of the SQLAlchemy tests (no tests here): databases, the configuration, the models.

Real servers only: MariaDB on 127.0.0.1:3306 (root, empty password). The
sharded side is four databases ``ddm_saorm_<tag>_<n>`` behind ``ddm+pymysql``
(``t_order`` and its bound ``t_order_item`` over 4 data sources x 4 tables, the
broadcast ``t_region``); the oracle is one more database, ``ddm_saorm_<tag>_oracle``,
behind plain ``mysql+pymysql``. Both run the same model classes.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from decimal import Decimal
from typing import Any, Iterator

import pymysql
import pytest
from sqlalchemy import (
    BigInteger, DateTime, Engine, Integer, MetaData, Numeric, String, and_, create_engine,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, foreign, mapped_column, relationship

from ddm_core import load_config
from ddm_core.execute import Executor
from ddm_core.metadata.model import ShardingConfig
from test_execute_support import mysql_raw

SHARDS = 4
TABLES = 4


class Base(DeclarativeBase):
    metadata = MetaData()


class Region(Base):
    """A broadcast table: a copy on every data source."""

    __tablename__ = "t_region"
    region_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(30))


class Order(Base):
    """Sharded by ``user_id``; ``order_id`` comes from a gene key generator (it carries the user's slot)."""

    __tablename__ = "t_order"
    order_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(BigInteger)
    amount: Mapped[Decimal] = mapped_column(Numeric(12, 2))
    quantity: Mapped[int] = mapped_column(Integer)
    note: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    region_id: Mapped[int | None] = mapped_column(Integer)

    # The join names the shard key too: a binding table joins node by node on it.
    items: Mapped[list[Item]] = relationship(
        primaryjoin=lambda: and_(Order.order_id == foreign(Item.order_id), Order.user_id == foreign(Item.user_id)),
        order_by=lambda: Item.item_id, cascade="all, delete-orphan", back_populates="order",
    )


class Item(Base):
    """Bound to ``t_order`` (same nodes by ``user_id``). The primary key holds ``order_id``: its gene
    routes an UPDATE or DELETE by primary key to the order's data source."""

    __tablename__ = "t_order_item"
    item_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    order_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    user_id: Mapped[int] = mapped_column(BigInteger)
    sku: Mapped[str] = mapped_column(String(20))
    price: Mapped[Decimal] = mapped_column(Numeric(10, 3))
    qty: Mapped[int] = mapped_column(Integer)

    order: Mapped[Order] = relationship(
        primaryjoin=lambda: and_(Order.order_id == foreign(Item.order_id), Order.user_id == foreign(Item.user_id)),
        back_populates="items",
    )


def sharded(name: str, urls: dict[str, Any], tables: int = TABLES, **extra: Any) -> dict[str, Any]:
    """A table sharded by ``user_id`` over every data source x ``tables`` tables."""
    return {"logicTable": name, "shardKey": "user_id", "algorithm": "slots", "slotCount": 1024,
            "shardCount": len(urls), "tablePerShard": tables, "databases": list(urls), "tableKey": "user_id",
            **extra}  # fmt: skip


def sharding_dict(urls: dict[str, Any]) -> dict[str, Any]:
    """The configuration: orders by ``user_id`` over every data source x 4 tables, items bound to them."""
    return {
        "name": "shop",
        "dataSources": urls,
        "pool": {"maxSize": 8, "minIdle": 1, "acquireTimeoutMs": 3000},
        "tables": [
            sharded("t_order", urls, keyGenerator={"column": "order_id", "type": "gene", "shardColumn": "user_id"}),
            {"logicTable": "t_order_item", "bindTo": "t_order",
             "keyGenerator": {"column": "item_id", "type": "snowflake"}},
            # sharded like t_order but bound to nothing: a join with t_order is refused
            sharded("t_payment", urls, tables=2),
            sharded("t_account", urls, keyGenerator={"column": "account_id", "type": "gene", "shardColumn": "user_id"}),
            sharded("t_ticket", urls),  # no key generator: an AUTO_INCREMENT column is refused
            sharded("t_shipment", urls, keyGenerator={"column": "shipment_id", "type": "snowflake"}),
        ],
        "broadcastTables": ["t_region"],
        "defaultDataSource": next(iter(urls)),
        "runtime": {"allowFullRoute": True, "allowDmlFullRoute": True, "fullRouteThreshold": 64},
    }


class Databases:
    """The sharded databases and the oracle database of one test module."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:8]
        self.sharded = [f"ddm_saorm_{tag}_{i}" for i in range(SHARDS)]
        self.oracle = f"ddm_saorm_{tag}_oracle"
        self.config: ShardingConfig = load_config(sharding_dict({
            f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(self.sharded)
        }))

    def database_of(self, data_source: str) -> str:
        return self.sharded[int(data_source.removeprefix("ds_"))]

    def oracle_engine(self, **kw: Any) -> Engine:
        return create_engine(f"mysql+pymysql://root@127.0.0.1:3306/{self.oracle}?charset=utf8mb4", **kw)

    def physical_rows(self, logic: str, where: str = "1", params: tuple[Any, ...] = ()) -> list[tuple[str, str, Any]]:
        """``(database, physical table, row)`` of every row of ``logic``'s physical tables matching ``where``,
        read directly (rows as dicts)."""
        found = []
        pattern = re.compile(rf"{re.escape(logic)}_\d+_\d+")
        for name, tables in self.physical_tables().items():
            conn = mysql_raw(name)
            try:
                with conn.cursor(pymysql.cursors.DictCursor) as cur:
                    for table in sorted(t for t in tables if pattern.fullmatch(t)):
                        cur.execute(f"SELECT * FROM {table} WHERE {where}", params)
                        found.extend((name, table, row) for row in cur.fetchall())
            finally:
                conn.close()
        return found

    def physical_tables(self) -> dict[str, set[str]]:
        """``SHOW TABLES`` of every sharded database, read directly."""
        found: dict[str, set[str]] = {}
        for name in self.sharded:
            conn = mysql_raw(name)
            try:
                with conn.cursor() as cur:
                    cur.execute("SHOW TABLES")
                    found[name] = {row[0] for row in cur.fetchall()}
            finally:
                conn.close()
        return found


@pytest.fixture(scope="module")
def databases() -> Iterator[Databases]:
    """Fresh sharded and oracle databases on the local MariaDB; dropped at the end of the module."""
    dbs = Databases()
    conn = mysql_raw()
    try:
        with conn.cursor() as cur:
            for name in (*dbs.sharded, dbs.oracle):
                cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
        yield dbs
    finally:
        with conn.cursor() as cur:
            for name in (*dbs.sharded, dbs.oracle):
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.close()


@pytest.fixture(scope="module")
def executor(databases: Databases) -> Iterator[Executor]:
    """One executor over the sharded databases, shared by the module's engines."""
    with Executor(databases.config, timeout=10.0, matched_rows=True) as ex:  # as the dialects build theirs
        yield ex


def ddm_engine(executor: Executor, query: str = "", **kw: Any) -> Engine:
    """A ``ddm+pymysql`` engine on ``executor`` (``query``: the URL's, e.g. ``transaction_mode=xa``)."""
    return create_engine(f"ddm+pymysql:///?{query}" if query else "ddm+pymysql://",
                         connect_args={"executor": executor}, **kw)  # fmt: skip
