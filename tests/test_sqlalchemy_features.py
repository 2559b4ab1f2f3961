"""SQLAlchemy features on ddm+pymysql, one test each, checked behind ddm-core's back with direct PyMySQL.

Relationship loading on bound tables, the refusal of an unbound join, keys of bulk / Core / ORM inserts,
version counters, row locks of ``with_for_update()``, hints, DDL on every physical table, isolation
levels seen in behaviour, reflection of the logic table, and an Alembic migration. The models and the
databases (4 data sources x 4 tables) are those of tests/sqlalchemy_support.py.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Iterator

import pymysql
import pytest
import sqlalchemy.exc
from sqlalchemy import (
    BigInteger, Column, Engine, Integer, MetaData, Numeric, String, Table, func, insert, inspect, select, update,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, joinedload, mapped_column, selectinload
from sqlalchemy.orm.exc import StaleDataError

from ddm_core.errors import DdmError, UnsupportedSQLError
from ddm_core.execute import Executor
from sqlalchemy_support import Base, Databases, Item, Order, databases, ddm_engine, executor  # noqa: F401
from test_execute_support import mysql_raw


class FeatureBase(DeclarativeBase):
    metadata = MetaData()


class Payment(FeatureBase):
    """Sharded by ``user_id`` like t_order, but not bound to it."""

    __tablename__ = "t_payment"
    payment_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    user_id: Mapped[int] = mapped_column(BigInteger)
    amount: Mapped[Decimal] = mapped_column(Numeric(12, 2))


class Account(FeatureBase):
    """A version counter: an UPDATE names the version it read (and the gene key routes it to one shard)."""

    __tablename__ = "t_account"
    account_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(BigInteger)
    balance: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    __mapper_args__ = {"version_id_col": version}


@pytest.fixture(scope="module")
def engine(databases: Databases, executor: Executor) -> Iterator[Engine]:
    """A ddm+pymysql engine (local transactions) with the models' tables created."""
    engine = ddm_engine(executor)
    Base.metadata.create_all(engine)
    FeatureBase.metadata.create_all(engine)
    yield engine
    engine.dispose()


@pytest.fixture()
def clean(engine: Engine) -> Engine:
    """``engine``, with the orders, items, payments and accounts deleted first."""
    with Session(engine.execution_options(isolation_level="AUTOCOMMIT")) as session:
        for model in (Item, Order, Payment, Account):
            session.query(model).delete()
    return engine


def xa_engine(executor: Executor) -> Engine:
    return ddm_engine(executor, "transaction_mode=xa")


def data_source_of(executor: Executor, user_id: int) -> str:
    """Where ``user_id``'s orders live, as the router says."""
    plan = executor.router.route("SELECT * FROM t_order WHERE user_id = %s", (user_id,))
    (unit,) = plan.units
    return unit.data_source


def new_order(user_id: int, note: str, items: tuple[str, ...] = ()) -> Order:
    return Order(user_id=user_id, amount=Decimal("10.00"), quantity=1, note=note,
                 items=[Item(user_id=user_id, sku=sku, price=Decimal("1.500"), qty=1) for sku in items])  # fmt: skip


# -- relationships ---------------------------------------------------------------------------------


def test_selectinload_and_joinedload_on_bound_tables(clean: Engine, databases: Databases) -> None:
    users = (1, 2, 3, 5, 8, 13)
    with Session(clean) as session:
        for user in users:  # one commit per user: a local transaction writes to one data source
            session.add_all([new_order(user, f"u{user}a", ("x", "y")), new_order(user, f"u{user}b", ())])
            session.commit()
    assert len({ds for ds, _, _ in databases.physical_rows("t_order")}) > 1  # really spread over the shards
    expected = {f"u{u}a": ["x", "y"] for u in users} | {f"u{u}b": [] for u in users}

    def loaded(stmt: Any) -> dict[str, list[str]]:
        with Session(clean) as session:
            orders = session.scalars(stmt).unique().all()
            session.expunge_all()  # detached: a lazy load would raise, so the items came with the query
        return {o.note: [i.sku for i in o.items] for o in orders}

    assert loaded(select(Order).options(selectinload(Order.items))) == expected
    assert loaded(select(Order).options(joinedload(Order.items))) == expected
    one_user = select(Order).where(Order.user_id == 5)
    assert loaded(one_user.options(joinedload(Order.items))) == {"u5a": ["x", "y"], "u5b": []}
    with Session(clean) as session:  # many-to-one the other way round
        items = session.scalars(select(Item).options(joinedload(Item.order)).order_by(Item.item_id)).all()
        session.expunge_all()
    assert sorted((i.order.note, i.sku) for i in items) == sorted((n, s) for n, skus in expected.items() for s in skus)


def test_an_unbound_cross_shard_update_join_is_refused_with_the_ddm_error(clean: Engine) -> None:
    """A multi-table UPDATE whose rows need not share a node is refused (a SELECT of it is answered)."""
    with Session(clean) as session:
        with pytest.raises(sqlalchemy.exc.DBAPIError) as caught:
            session.execute(update(Order).where(Payment.user_id == Order.user_id).values(note="paid"))
    orig = caught.value.orig
    assert isinstance(caught.value, sqlalchemy.exc.NotSupportedError)
    assert isinstance(orig, UnsupportedSQLError) and isinstance(orig, DdmError)
    assert "t_payment" in orig.message and "t_order" in orig.message
    assert str(orig) == orig.message and orig.message in str(caught.value)


# -- keys ------------------------------------------------------------------------------------------


def test_orm_bulk_insert_writes_every_row_with_a_generated_key(clean: Engine, databases: Databases) -> None:
    rows = [{"user_id": u, "amount": Decimal(u), "quantity": u, "note": f"bulk{u}"} for u in range(1, 41)]
    with Session(clean.execution_options(isolation_level="AUTOCOMMIT")) as session:  # 40 users: every shard
        session.execute(insert(Order), rows)
    stored = {row["note"]: row for _, _, row in databases.physical_rows("t_order")}
    assert sorted(stored) == sorted(r["note"] for r in rows)
    assert len({row["order_id"] for row in stored.values()}) == len(rows)
    with Session(clean) as session:  # each key routes (by its gene) to its row
        for row in stored.values():
            assert session.get(Order, row["order_id"]).note == row["note"]  # type: ignore[union-attr]


def test_core_executemany_and_a_single_insert_report_generated_keys(clean: Engine, databases: Databases) -> None:
    table = Order.__table__
    with clean.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        many = conn.execute(insert(table), [{"user_id": u, "amount": 1, "quantity": 1, "note": f"m{u}"}
                                            for u in range(100, 120)])  # fmt: skip
        assert many.rowcount == 20
        one = conn.execute(insert(table).values(user_id=7, amount=2, quantity=1, note="single"))
        (key,) = one.inserted_primary_key  # type: ignore[misc]
    assert isinstance(key, int)
    [(_, _, row)] = databases.physical_rows("t_order", "note = %s", ("single",))
    assert row["order_id"] == key and row["user_id"] == 7
    assert len(databases.physical_rows("t_order", "note LIKE %s", ("m%",))) == 20


def test_add_all_and_flush_give_objects_the_keys_the_database_holds(
    clean: Engine, executor: Executor, databases: Databases
) -> None:
    engine = xa_engine(executor)  # users on several data sources in one transaction
    try:
        with Session(engine) as session:
            orders = [new_order(u, f"flush{u}", ("a",)) for u in (1, 2, 3, 5, 8, 13, 21)]
            session.add_all(orders)
            session.flush()
            keys = {o.note: (o.order_id, o.items[0].item_id) for o in orders}
            assert all(session.get(Order, o.order_id) is o for o in orders)  # the identity map
            session.commit()
    finally:
        engine.dispose()
    stored = {row["note"]: row["order_id"] for _, _, row in databases.physical_rows("t_order")}
    items = {row["order_id"]: row["item_id"] for _, _, row in databases.physical_rows("t_order_item")}
    assert {note: (oid, items[oid]) for note, oid in stored.items()} == keys


# -- concurrency -----------------------------------------------------------------------------------


def test_a_version_counter_catches_a_concurrent_update(clean: Engine) -> None:
    with Session(clean) as session:
        account = Account(user_id=42, balance=100)
        session.add(account)
        session.commit()
        account_id = account.account_id
    with Session(clean) as first, Session(clean) as second:
        mine = first.get(Account, account_id)
        theirs = second.get(Account, account_id)
        assert mine is not None and theirs is not None and mine.version == theirs.version == 1
        theirs.balance += 5
        second.commit()
        mine.balance -= 5
        with pytest.raises(StaleDataError):
            first.commit()
    with Session(clean) as session:
        assert (session.get(Account, account_id).balance, session.get(Account, account_id).version) == (105, 2)  # type: ignore[union-attr]


def _nowait(database: str, table: str, order_id: int) -> bool:
    """Can another connection lock the row right now (``FOR UPDATE NOWAIT`` on the physical table)?"""
    conn = mysql_raw(database)
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            try:
                cur.execute(f"SELECT order_id FROM {table} WHERE order_id = %s FOR UPDATE NOWAIT", (order_id,))
            except pymysql.err.OperationalError as exc:
                assert exc.args[0] == 1205, exc  # lock wait timeout: NOWAIT found the row locked
                return False
            finally:
                cur.execute("ROLLBACK")
        return True
    finally:
        conn.close()


def test_with_for_update_holds_the_row_lock_until_the_transaction_ends(clean: Engine, databases: Databases) -> None:
    with Session(clean) as session:
        order = new_order(9, "locked")
        session.add(order)
        session.commit()
        order_id = order.order_id
    [(database, table, _)] = databases.physical_rows("t_order", "order_id = %s", (order_id,))
    with Session(clean) as session:
        session.execute(select(Order).where(Order.order_id == order_id)).scalar_one()
        assert _nowait(database, table, order_id)  # a plain read in a transaction locks nothing
        session.execute(select(Order).where(Order.order_id == order_id).with_for_update()).scalar_one()
        assert not _nowait(database, table, order_id)
        session.execute(select(func.count()).select_from(Order))  # other statements keep the lock
        assert not _nowait(database, table, order_id)
        session.rollback()
        assert _nowait(database, table, order_id)


def _read_twice(engine: Engine, databases: Databases, order_id: int, note: str, **options: Any) -> tuple[str, str]:
    """An order's note read twice in one transaction, with a commit by another connection in between."""
    [(database, table, _)] = databases.physical_rows("t_order", "order_id = %s", (order_id,))
    with engine.connect().execution_options(**options) as conn:
        with conn.begin():
            stmt = select(Order.note).where(Order.order_id == order_id)
            first = conn.execute(stmt).scalar_one()
            other = mysql_raw(database)
            try:
                with other.cursor() as cur:
                    cur.execute(f"UPDATE {table} SET note = %s WHERE order_id = %s", (note, order_id))
            finally:
                other.close()
            return first, conn.execute(stmt).scalar_one()


def test_isolation_levels_are_applied_on_the_server(clean: Engine, executor: Executor, databases: Databases) -> None:
    with Session(clean) as session:
        order = new_order(11, "v0")
        session.add(order)
        session.commit()
        order_id = order.order_id
    # MariaDB's default, REPEATABLE READ: the transaction keeps its snapshot
    assert _read_twice(clean, databases, order_id, "v1") == ("v0", "v0")
    # READ COMMITTED: the second read sees the other connection's commit
    assert _read_twice(clean, databases, order_id, "v2", isolation_level="READ COMMITTED") == ("v1", "v2")
    # the level was the transaction's only: the pooled connections went back at the default
    assert _read_twice(clean, databases, order_id, "v3") == ("v2", "v2")
    engine = ddm_engine(executor, isolation_level="READ COMMITTED")
    try:
        assert _read_twice(engine, databases, order_id, "v4") == ("v3", "v4")  # an engine-wide level
    finally:
        engine.dispose()


# -- routing ---------------------------------------------------------------------------------------


def test_a_ddm_hint_execution_option_routes_to_the_named_data_source(
    clean: Engine, executor: Executor, databases: Databases
) -> None:
    user = 77
    home = data_source_of(executor, user)
    elsewhere = next(ds for ds in executor.config.data_sources if ds != home)
    hinted = {"ddm_hint": {"database": elsewhere}}
    table = f"t_order_{elsewhere.removeprefix('ds_')}_1"  # an inserted row needs one node: the table too
    with Session(clean) as session:
        session.execute(insert(Order).values(user_id=user, amount=1, quantity=1, note="hinted"),
                        execution_options={"ddm_hint": {"database": elsewhere, "table": table}})  # fmt: skip
        session.commit()
        session.add(new_order(user, "at home"))
        session.commit()
    where = {row["note"]: (database, physical) for database, physical, row in databases.physical_rows("t_order")}
    assert where["hinted"] == (databases.database_of(elsewhere), table)
    assert where["at home"][0] == databases.database_of(home) and len(where) == 2
    with Session(clean) as session:
        plain = select(Order.note).where(Order.user_id == user)
        assert session.scalars(plain).all() == ["at home"]
        assert session.scalars(plain, execution_options=hinted).all() == ["hinted"]


# -- DDL and reflection ----------------------------------------------------------------------------


def test_create_all_creates_every_physical_table(engine: Engine, databases: Databases) -> None:
    tables = databases.physical_tables()
    for number, database in enumerate(databases.sharded):
        assert {f"t_order_{number}_{t}" for t in range(4)} <= tables[database]
        assert {f"t_order_item_{number}_{t}" for t in range(4)} <= tables[database]
        assert {f"t_payment_{number}_{t}" for t in range(2)} <= tables[database]
        assert "t_region" in tables[database]  # broadcast: a copy on each
    Base.metadata.create_all(engine)  # again: every table is found, nothing is created twice
    assert databases.physical_tables() == tables


def test_auto_increment_on_a_column_no_key_generator_fills_is_refused(engine: Engine, databases: Databases) -> None:
    ticket = Table("t_ticket", MetaData(), Column("ticket_id", BigInteger, primary_key=True, autoincrement=True),
                   Column("user_id", BigInteger, nullable=False))  # fmt: skip
    with pytest.raises(UnsupportedSQLError) as caught:  # as the DDL is compiled: nothing is sent
        ticket.create(engine)
    assert caught.value.message == (
        "column 'ticket_id' of sharded table 't_ticket' would be AUTO_INCREMENT: each of its 16 physical tables "
        "would count on its own and hand out the same ids across shards; declare it with autoincrement=False and "
        "give its values, or configure a key generator for it (keyGenerator: {column: ticket_id, type: snowflake})"
    )
    assert not any(t.startswith("t_ticket") for tables in databases.physical_tables().values() for t in tables)


def test_reflection_answers_the_logic_table(engine: Engine, databases: Databases) -> None:
    oracle = databases.oracle_engine()
    try:
        Base.metadata.create_all(oracle)
        expected = inspect(oracle).get_columns("t_order")
        expected_pk = inspect(oracle).get_pk_constraint("t_order")["constrained_columns"]
    finally:
        oracle.dispose()
    found = inspect(engine)
    columns = found.get_columns("t_order")

    def comparable(columns: list[Any]) -> list[dict[str, Any]]:
        return [{**c, "type": repr(c["type"])} for c in columns]  # types compare by identity

    # order_id is the autoincrement column on both: AUTO_INCREMENT on the oracle, the key generator's here
    assert comparable(columns) == comparable(expected)
    assert [(c["name"], c["type"], c.get("autoincrement")) for c in comparable(columns)][:3] == [
        ("order_id", "BIGINT(display_width=20)", True), ("user_id", "BIGINT(display_width=20)", False),
        ("amount", "DECIMAL(precision=12, scale=2)", None),
    ]
    assert found.get_pk_constraint("t_order")["constrained_columns"] == expected_pk
    names = found.get_table_names()
    assert {"t_order", "t_order_item", "t_region", "t_payment"} <= set(names)
    assert not any(n.startswith("t_order_0") for n in names)  # logic names only


def test_an_alembic_migration_creates_and_alters_every_physical_table(engine: Engine, databases: Databases) -> None:
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        op.create_table(
            "t_shipment",
            Column("shipment_id", BigInteger, primary_key=True),
            Column("user_id", BigInteger, nullable=False),
            Column("address", String(80)),
        )
        op.add_column("t_shipment", Column("carrier", String(20), nullable=True))
        op.create_index("ix_shipment_user", "t_shipment", ["user_id"])
    for number, database in enumerate(databases.sharded):
        conn = mysql_raw(database)
        try:
            with conn.cursor() as cur:
                for t in range(4):
                    cur.execute(f"SHOW CREATE TABLE t_shipment_{number}_{t}")
                    ddl = cur.fetchone()[1]
                    assert "`carrier` varchar(20)" in ddl and "KEY `ix_shipment_user`" in ddl, ddl
                    assert "AUTO_INCREMENT" not in ddl  # the key generator fills shipment_id
        finally:
            conn.close()
    with Session(engine) as session:  # and it is usable at once
        shipment = Table("t_shipment", MetaData(), autoload_with=engine)
        key = session.execute(insert(shipment).values(user_id=3, address="x", carrier="y")).inserted_primary_key
        session.commit()
        assert session.execute(select(shipment.c.carrier).where(shipment.c.shipment_id == key[0])).scalar_one() == "y"
