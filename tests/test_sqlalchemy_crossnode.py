"""A SQLAlchemy Core ``select()`` joining tables that share no node, through ``ddm+pymysql``.

``t_order`` (4 data sources x 4 tables) and ``t_payment`` (4 x 2 tables) are both
sharded by ``user_id`` but not bound (tests/sqlalchemy_support.py), so a join of
them pairs rows of different nodes: ddm-core answers it across nodes
(docs/cross-node-queries.md). The same statement on the oracle database (one
unsharded copy of the tables, plain ``mysql+pymysql``) gives the expected rows.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Iterator, cast

import pytest
from sqlalchemy import BigInteger, Column, Engine, MetaData, Numeric, Table, func, insert, select

from ddm_core.execute import Executor
from ddm_core.route.plan import RouteKind
from sqlalchemy_support import Base, Databases, Order, databases, ddm_engine, executor  # noqa: F401 - fixtures

orders = cast(Table, Order.__table__)
payments = MetaData()
Payment = Table("t_payment", payments, Column("payment_id", BigInteger, primary_key=True, autoincrement=False),
                Column("user_id", BigInteger), Column("amount", Numeric(12, 2)))  # fmt: skip

ORDERS = [{"user_id": user, "amount": Decimal(f"{n}.50"), "quantity": n, "note": f"o{n}"}
          for n, user in enumerate((1, 2, 3, 1, 5, 8, 13, 21, 2))]  # fmt: skip
PAYMENTS = [{"payment_id": 100 + n, "user_id": user, "amount": Decimal(f"{n + 1}.25")}
            for n, user in enumerate((1, 1, 2, 3, 5, 34, 13, 13))]  # fmt: skip


@pytest.fixture(scope="module")
def engines(databases: Databases, executor: Executor) -> Iterator[tuple[Engine, Engine]]:
    """The ``ddm+pymysql`` engine and the oracle's, each with the tables created and the same rows
    (order ids come from ddm-core's gene key generator, then go to the oracle as they are)."""
    sharded, oracle = ddm_engine(executor), databases.oracle_engine()
    for engine in (sharded, oracle):
        Base.metadata.create_all(engine, tables=[orders])
        payments.create_all(engine)
    with sharded.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(insert(orders), ORDERS)
        conn.execute(insert(Payment), PAYMENTS)
        written = [dict(row) for row in conn.execute(select(orders)).mappings()]
    assert len(written) == len(ORDERS)
    with oracle.begin() as conn:
        conn.execute(insert(orders), written)
        conn.execute(insert(Payment), PAYMENTS)
    yield sharded, oracle
    sharded.dispose()
    oracle.dispose()

STATEMENTS = {
    "grouped": select(orders.c.user_id, func.count().label("n"), func.sum(Payment.c.amount).label("paid"))
    .select_from(orders.join(Payment, Payment.c.user_id == orders.c.user_id))
    .group_by(orders.c.user_id).order_by(orders.c.user_id),
    "outer": select(orders.c.order_id, orders.c.note, Payment.c.payment_id, Payment.c.amount)
    .select_from(orders.outerjoin(Payment, Payment.c.user_id == orders.c.user_id))
    .where(orders.c.amount > Decimal("1")),
}


@pytest.mark.parametrize("isolation", ["REPEATABLE READ", "AUTOCOMMIT"])  # inside a transaction, and without
@pytest.mark.parametrize("name", list(STATEMENTS))
def test_a_core_join_of_tables_on_other_nodes_gets_the_unsharded_rows(
    engines: tuple[Engine, Engine], executor: Executor, name: str, isolation: str
) -> None:
    sharded, oracle = engines
    stmt: Any = STATEMENTS[name]
    sql = str(stmt.compile(dialect=sharded.dialect, compile_kwargs={"literal_binds": True}))
    assert executor.router.route(sql).kind is RouteKind.CROSS_NODE  # not a join ddm-core can run per node
    with sharded.connect().execution_options(isolation_level=isolation) as conn:
        got = conn.execute(stmt)
        got_names, got_rows = list(got.keys()), sorted(repr(tuple(r)) for r in got)
    with oracle.connect() as conn:
        want = conn.execute(stmt)
        want_names, want_rows = list(want.keys()), sorted(repr(tuple(r)) for r in want)
    assert got_names == want_names
    assert got_rows == want_rows and len(want_rows) > 3
    assert executor.borrowed() == 0
