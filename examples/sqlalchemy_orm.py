"""SQLAlchemy's ORM on the example's 16 shards, through ``ddm+pymysql`` (docs/sqlalchemy.md).

Run it after creating the example's tables::

    ddm ddl --config examples/orders.yaml examples/schema.sql --execute
    python examples/sqlalchemy_orm.py
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import sqlalchemy as sa
from order_models import Order, OrderItem
from sqlalchemy.orm import Session, selectinload

CONFIG = Path(__file__).with_name("orders.yaml")
USERS = (50001, 50002, 50003)


def main() -> None:
    engine = sa.create_engine(f"ddm+pymysql:///?config={CONFIG}")
    with Session(engine) as session:
        for user in USERS:  # one user per transaction: a local transaction writes to one shard
            order = Order(order_no=f"O{user}", user_id=user, amount=Decimal("19.80") * (user % 10))
            session.add(order)
            session.flush()  # order.order_id now holds the key ddm-core generated
            session.add(OrderItem(order_id=order.order_id, user_id=user, sku_id=7, quantity=2, price=Decimal("9.90")))
            session.commit()

        first = session.scalars(sa.select(Order).where(Order.user_id == USERS[0])).one()
        session.expunge_all()
        again = session.get(Order, first.order_id)  # by primary key
        assert again is not None
        print(again.order_no, again.amount, [item.sku_id for item in again.items])

        # merged across shards: ORDER BY ... LIMIT and aggregates are exact
        top = session.execute(
            sa.select(Order.user_id, Order.amount).where(Order.user_id.in_(USERS)).order_by(Order.amount.desc()).limit(2)
        ).all()
        print([tuple(row) for row in top])
        print(tuple(session.execute(sa.select(sa.func.count(), sa.func.sum(Order.amount)).where(Order.user_id.in_(USERS))).one()))

        loaded = session.scalars(sa.select(Order).where(Order.user_id.in_(USERS)).options(selectinload(Order.items))).all()
        print(sum(len(order.items) for order in loaded))
    engine.dispose()


if __name__ == "__main__":
    main()
