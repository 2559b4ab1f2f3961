"""SQLAlchemy's asyncio ORM on the example's 16 shards, through ``ddm+asyncmy`` (docs/sqlalchemy.md).

Run it after creating the example's tables (``pip install '.[aio,sqlalchemy]'``)::

    ddm ddl --config examples/orders.yaml examples/schema.sql --execute
    python examples/sqlalchemy_async.py
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import sqlalchemy as sa
from order_models import Order
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from ddm_core.aio import AsyncExecutor

CONFIG = Path(__file__).with_name("orders.yaml")
USERS = (60001, 60002)


async def main() -> None:
    async with AsyncExecutor(str(CONFIG)) as executor:  # built, shared and closed by the application
        engine = create_async_engine("ddm+asyncmy://", connect_args={"executor": executor})
        async with AsyncSession(engine, expire_on_commit=False) as session:
            for user in USERS:
                session.add(Order(order_no=f"A{user}", user_id=user, amount=Decimal("5.50")))
                await session.commit()  # one shard per transaction
            total = await session.execute(
                sa.select(sa.func.count(), sa.func.sum(Order.amount)).where(Order.user_id.in_(USERS))
            )
            print(tuple(total.one()))
            order = (await session.scalars(sa.select(Order).where(Order.user_id == USERS[0]))).one()
            session.expunge_all()
            again = await session.get(Order, order.order_id)
            assert again is not None
            print(again.order_no, again.amount)
        await engine.dispose()


if __name__ == "__main__":
    asyncio.run(main())
