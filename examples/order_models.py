"""The example's tables as SQLAlchemy models, written as for one MySQL database.

Used by sqlalchemy_orm.py and sqlalchemy_async.py. Nothing here knows about shards: ``order_id`` and
``item_id`` are filled by ddm-core's key generators (orders.yaml), which the ddm dialects present to
SQLAlchemy as the tables' autoincrement columns; ``t_order_item`` is bound to ``t_order`` (same
shard key, same nodes), so loading an order's items with its ``user_id`` stays on one shard.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "t_order"

    order_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)  # a gene id: carries the user's slot
    order_no: Mapped[str] = mapped_column(sa.String(32), unique=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger)  # the shard key
    amount: Mapped[Decimal] = mapped_column(sa.Numeric(18, 2))
    status: Mapped[int] = mapped_column(sa.SmallInteger, default=0)
    create_time: Mapped[datetime] = mapped_column(sa.DateTime, default=datetime.now)
    update_time: Mapped[datetime] = mapped_column(sa.DateTime, default=datetime.now, onupdate=datetime.now)
    # joined on the shard key too: the items of an order live on the order's shard
    items: Mapped[list[OrderItem]] = relationship(
        primaryjoin="and_(Order.order_id == foreign(OrderItem.order_id), Order.user_id == OrderItem.user_id)",
        order_by="OrderItem.item_id",
    )


class OrderItem(Base):
    __tablename__ = "t_order_item"

    item_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)  # a snowflake id
    order_id: Mapped[int] = mapped_column(sa.BigInteger)
    user_id: Mapped[int] = mapped_column(sa.BigInteger)
    sku_id: Mapped[int] = mapped_column(sa.BigInteger)
    quantity: Mapped[int]
    price: Mapped[Decimal] = mapped_column(sa.Numeric(18, 2))
    create_time: Mapped[datetime] = mapped_column(sa.DateTime, default=datetime.now)
