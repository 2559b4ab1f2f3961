"""The ORM model and the statements the SQLAlchemy benchmarks share (test_bench_sqlalchemy.py).

``Order`` maps ``t_order`` as test_bench_executor.py creates it (``DDL``): the
logic table behind ``ddm+pymysql``, the one unsharded table behind
``mysql+pymysql``, and — through a table-name rewrite — each of the 16 physical
tables behind ``sqlalchemy.ext.horizontal_shard`` (sa_horizontal.py).

The mapper's primary key is ``(user_id, order_id)`` (the table's is
``order_id``): ``session.get(Order, (user_id, order_id))`` then sends
``WHERE user_id = %s AND order_id = %s``, which a sharded application sends to
find one order — the shard key with the id. By ``order_id`` alone a snowflake
id reaches every one of the 16 tables, and the short form's gene id finds the
data source but not the table (its table level hashes ``user_id``).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import BigInteger, Numeric, Select, SmallInteger, String, func, select
from sqlalchemy.dialects.mysql import DATETIME
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = ["Order", "page", "groups", "order_row", "as_dicts"]


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "t_order"

    user_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    order_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    amount: Mapped[Decimal] = mapped_column(Numeric(12, 2))
    status: Mapped[int] = mapped_column(SmallInteger)
    create_time: Mapped[datetime] = mapped_column(DATETIME(fsp=3))
    note: Mapped[str | None] = mapped_column(String(32))


def page() -> Select[tuple[Order]]:
    """The newest 20 orders: a cross-shard ORDER BY ... LIMIT 20."""
    return select(Order).order_by(Order.create_time.desc()).limit(20)


def groups() -> Select[tuple[int, int, Decimal]]:
    """Orders and their total per status: a cross-shard GROUP BY with aggregates."""
    return (
        select(Order.status, func.count().label("orders"), func.sum(Order.amount).label("total"))
        .group_by(Order.status)
        .order_by(Order.status)
    )


def order_row(order: Order | None) -> tuple[Any, ...] | None:
    """An order's column values, to compare what two engines loaded."""
    if order is None:
        return None
    return (order.user_id, order.order_id, order.amount, order.status, order.create_time, order.note)


_COLUMNS = ("order_id", "user_id", "amount", "status", "create_time", "note")


def as_dicts(rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """test_bench_executor.py's row tuples as the dicts ``session.execute(insert(Order), ...)`` takes."""
    return [dict(zip(_COLUMNS, row)) for row in rows]
