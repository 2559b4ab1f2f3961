"""The ORM oracle scenario (no tests here): one list of operations run on a sharded and an unsharded side.

Each operation is a function of a synchronous :class:`~sqlalchemy.orm.Session`
that returns what the application would see (:func:`typed` values: type and
``repr``, so ``Decimal('1.50')`` differs from ``Decimal('1.5')`` and from
``1.5``). The sharded side generates the keys; the oracle is given the same
keys explicitly, so every row, key included, must come out the same. A side
is anything with ``run(step, *args)``: the thread test runs steps in a
``Session``, the asyncio test in ``AsyncSession.run_sync``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Protocol, Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, Select, delete, func, select, update
from sqlalchemy.orm import Session, selectinload

from sqlalchemy_support import Item, Order, Region

USERS = (1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233)  # spread over the 4 x 4 tables
REGIONS = ((1, "north"), (2, "south"), (3, "Été"))
#: Case, accents, a sharp s and a trailing space: the merge must order them as the server's collation does.
NOTE_ALPHABET = "aAbBsSzZéÉß0 "


class Side(Protocol):
    def run(self, step: Callable[..., Any], *args: Any) -> Any:
        """``step(session, *args)`` in a new session (its transactions as the application's)."""

    def run_autocommit(self, step: Callable[[Session], Any]) -> Any:
        """``step(session)`` with every statement on its own (writes to every data source)."""


class SyncSide:
    """Steps in a ``Session`` of ``engine``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    def run(self, step: Callable[..., Any], *args: Any) -> Any:
        with Session(self.engine) as session:
            return step(session, *args)

    def run_autocommit(self, step: Callable[[Session], Any]) -> Any:
        with Session(self.autocommit) as session:
            return step(session)


def typed(value: Any) -> tuple[str, str]:
    """A value as compared: its type and ``repr`` (a Decimal's exponent, a datetime's precision count)."""
    return type(value).__name__, repr(value)


def typed_row(row: Sequence[Any]) -> tuple[tuple[str, str], ...]:
    return tuple(typed(v) for v in row)


ORDER_COLUMNS = ("order_id", "user_id", "amount", "quantity", "note", "created_at", "region_id")
ITEM_COLUMNS = ("item_id", "order_id", "user_id", "sku", "price", "qty")


def order_snapshot(order: Order) -> tuple[Any, ...]:
    """An order as loaded, with its items (the relationship as the ORM loaded it)."""
    items = tuple(typed_row([getattr(i, c) for c in ITEM_COLUMNS]) for i in order.items)
    return typed_row([getattr(order, c) for c in ORDER_COLUMNS]), items


# -- operations --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewItem:
    sku: str
    price: Decimal
    qty: int


@dataclass(frozen=True)
class NewOrder:
    user_id: int
    amount: Decimal
    quantity: int
    note: str | None
    created_at: dt.datetime | None
    region_id: int | None
    items: tuple[NewItem, ...]


@dataclass(frozen=True)
class Keys:
    """The keys the sharded side generated for a :class:`NewOrder`: the oracle writes the same."""

    order_id: int
    item_ids: tuple[int, ...]


def insert_orders(session: Session, new: Sequence[NewOrder], keys: Sequence[Keys] | None) -> list[Any]:
    """``add_all`` + commit; the orders as the ORM holds them after the flush, and their keys."""
    orders = []
    for n, spec in enumerate(new):
        given = keys[n] if keys is not None else None
        order = Order(user_id=spec.user_id, amount=spec.amount, quantity=spec.quantity, note=spec.note,
                      created_at=spec.created_at, region_id=spec.region_id)
        if given is not None:
            order.order_id = given.order_id
        for m, it in enumerate(spec.items):
            item = Item(user_id=spec.user_id, sku=it.sku, price=it.price, qty=it.qty)
            if given is not None:
                item.item_id = given.item_ids[m]
            order.items.append(item)
        orders.append(order)
    session.add_all(orders)
    session.flush()
    made = [Keys(o.order_id, tuple(i.item_id for i in o.items)) for o in orders]
    session.commit()
    # expired by the commit: read back from the database
    return [made, [order_snapshot(o) for o in orders]]


def get_order(session: Session, order_id: int) -> Any:
    order = session.get(Order, order_id)
    return None if order is None else order_snapshot(order)


def change_order(session: Session, order_id: int, amount: Decimal, note: str | None, commit: bool) -> Any:
    """Change an order and its first item, commit or roll back; the order as read afterwards."""
    order = session.get(Order, order_id)
    if order is None:
        return None
    order.amount = amount
    order.note = note
    order.quantity += 1
    if order.items:
        order.items[0].qty += 1
    session.flush()
    if commit:
        session.commit()
    else:
        session.rollback()
    return order_snapshot(order)


def delete_order(session: Session, order_id: int) -> Any:
    """Delete an order (its items go with it: delete-orphan); what is left of its user."""
    order = session.get(Order, order_id)
    if order is None:
        return None
    user = order.user_id
    session.delete(order)
    session.commit()
    left = session.scalars(select(Order).where(Order.user_id == user).order_by(Order.order_id)).all()
    return [order_snapshot(o) for o in left]


def bulk_update(session: Session, user_id: int, add: int) -> Any:
    """An ORM-enabled UPDATE of one user's orders; its row count and the user's orders after."""
    result = session.execute(update(Order).where(Order.user_id == user_id).values(quantity=Order.quantity + add))
    count = result.rowcount  # type: ignore[attr-defined]
    session.commit()
    rows = session.execute(select(Order.order_id, Order.quantity).where(Order.user_id == user_id)
                           .order_by(Order.order_id)).all()  # fmt: skip
    return count, [typed_row(r) for r in rows]


def bulk_delete_items(session: Session, user_id: int, max_qty: int) -> Any:
    result = session.execute(delete(Item).where(Item.user_id == user_id, Item.qty <= max_qty))
    count = result.rowcount  # type: ignore[attr-defined]
    session.commit()
    return count


@dataclass(frozen=True)
class Query:
    """A filtered, ordered, paginated ORM select of orders (items loaded by selectinload)."""

    users: tuple[int, ...] | None
    min_amount: Decimal | None
    note_is_null: bool | None
    order_by: tuple[str, ...]
    descending: bool
    limit: int | None
    offset: int | None

    def statement(self) -> Select[Any]:
        stmt = select(Order).options(selectinload(Order.items))
        if self.users is not None:
            stmt = stmt.where(Order.user_id.in_(self.users))
        if self.min_amount is not None:
            stmt = stmt.where(Order.amount >= self.min_amount)
        if self.note_is_null is not None:
            stmt = stmt.where(Order.note.is_(None) if self.note_is_null else Order.note.is_not(None))
        keys = [getattr(Order, name) for name in self.order_by]
        keys = [k.desc() if self.descending else k for k in keys]
        stmt = stmt.order_by(*keys, Order.order_id)  # order_id: the same on both sides, so a total order
        if self.limit is not None:
            stmt = stmt.limit(self.limit)
            if self.offset is not None:
                stmt = stmt.offset(self.offset)
        return stmt


def query_orders(session: Session, query: Query) -> Any:
    return [order_snapshot(o) for o in session.scalars(query.statement()).all()]


def aggregate(session: Session, group: str, users: tuple[int, ...] | None) -> Any:
    """GROUP BY a column: count, sums, min / max, average; ordered by the group key."""
    key = getattr(Order, group)
    stmt = select(
        key, func.count(), func.count(Order.note), func.sum(Order.amount), func.sum(Order.quantity),
        func.min(Order.created_at), func.max(Order.amount), func.avg(Order.quantity),
    ).group_by(key).order_by(key)
    if users is not None:
        stmt = stmt.where(Order.user_id.in_(users))
    return [typed_row(r) for r in session.execute(stmt).all()]


def count_orders(session: Session, users: tuple[int, ...] | None) -> Any:
    stmt = select(func.count()).select_from(Order)
    if users is not None:
        stmt = stmt.where(Order.user_id.in_(users))
    return typed(session.scalar(stmt))


def items_per_order(session: Session, user_id: int) -> Any:
    """A join of the bound tables on the shard key, grouped per order."""
    stmt = (
        select(Order.order_id, func.count(Item.item_id), func.sum(Item.price * Item.qty))
        .join(Item, (Item.order_id == Order.order_id) & (Item.user_id == Order.user_id))
        .where(Order.user_id == user_id).group_by(Order.order_id).order_by(Order.order_id)
    )
    return [typed_row(r) for r in session.execute(stmt).all()]


def orders_by_region(session: Session) -> Any:
    """A join with the broadcast table: it stays on each shard."""
    stmt = (
        select(Region.name, func.count(Order.order_id), func.sum(Order.amount))
        .join(Order, Order.region_id == Region.region_id)
        .group_by(Region.name).order_by(Region.name)
    )
    return [typed_row(r) for r in session.execute(stmt).all()]


# -- hypothesis: the operations -----------------------------------------------------------------------

users = st.sampled_from(USERS)
user_sets = st.none() | st.lists(users, min_size=1, max_size=4, unique=True).map(tuple)
amounts = st.decimals(min_value=-1000, max_value=100000, places=2, allow_nan=False, allow_infinity=False)
notes = st.none() | st.text(NOTE_ALPHABET, max_size=6)
times = st.none() | st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2037, 12, 31)).map(
    lambda t: t.replace(microsecond=0)
)
new_items = st.builds(
    NewItem, sku=st.text("abc", min_size=1, max_size=3),
    price=st.decimals(min_value=0, max_value=1000, places=3, allow_nan=False, allow_infinity=False),
    qty=st.integers(1, 5),
)


@st.composite
def new_orders(draw: st.DrawFn) -> list[NewOrder]:
    """One to three orders of one user (one data source: a local transaction writes to one)."""
    user = draw(users)
    return draw(st.lists(st.builds(
        NewOrder, user_id=st.just(user), amount=amounts, quantity=st.integers(0, 100), note=notes,
        created_at=times, region_id=st.none() | st.sampled_from([r for r, _ in REGIONS]),
        items=st.lists(new_items, max_size=3).map(tuple),
    ), min_size=1, max_size=3))


queries = st.builds(
    Query, users=user_sets, min_amount=st.none() | amounts, note_is_null=st.none() | st.booleans(),
    order_by=st.sampled_from([(), ("amount",), ("note",), ("created_at", "amount"), ("user_id", "quantity")]),
    descending=st.booleans(), limit=st.none() | st.integers(1, 6), offset=st.none() | st.integers(0, 5),
)
#: (name, arguments); an order is picked by index into the keys made so far (the same on both sides).
operations = st.one_of(
    st.tuples(st.just("insert"), new_orders()),
    st.tuples(st.just("get"), st.integers(0, 50)),
    st.tuples(st.just("change"), st.tuples(st.integers(0, 50), amounts, notes, st.booleans())),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("bulk_update"), st.tuples(users, st.integers(0, 3))),  # 0: rows matched, none changed
    st.tuples(st.just("bulk_delete_items"), st.tuples(users, st.integers(1, 3))),
    st.tuples(st.just("query"), queries),
    # not GROUP BY note: 'a' and 'A' are one group, and which of them it shows is the server's choice
    st.tuples(st.just("aggregate"), st.tuples(st.sampled_from(["user_id", "region_id", "quantity"]), user_sets)),
    st.tuples(st.just("count"), user_sets),
    st.tuples(st.just("items_per_order"), users),
    st.tuples(st.just("orders_by_region"), st.just(())),
)


@dataclass
class Scenario:
    """Runs operations on both sides and compares what each returns."""

    sharded: Side
    oracle: Side
    order_ids: list[int] = field(default_factory=list)

    def pick(self, index: int) -> int | None:
        return self.order_ids[index % len(self.order_ids)] if self.order_ids else None

    def both(self, step: Callable[..., Any], *args: Any) -> Any:
        got, expected = self.sharded.run(step, *args), self.oracle.run(step, *args)
        assert got == expected, f"{step.__name__}{args!r}:\n ddm    {got!r}\n oracle {expected!r}"
        return got

    def apply(self, name: str, args: Any) -> None:
        if name == "insert":
            keys, got = self.sharded.run(insert_orders, args, None)
            oracle_keys, expected = self.oracle.run(insert_orders, args, keys)
            assert oracle_keys == keys
            assert got == expected, f"insert {args!r}:\n ddm    {got!r}\n oracle {expected!r}"
            self.order_ids.extend(k.order_id for k in keys)
        elif name in ("get", "delete"):
            order_id = self.pick(args)
            if order_id is not None:
                self.both(get_order if name == "get" else delete_order, order_id)
        elif name == "change":
            order_id = self.pick(args[0])
            if order_id is not None:
                self.both(change_order, order_id, *args[1:])
        elif name == "query":
            self.both(query_orders, args)
        elif name == "aggregate":
            self.both(aggregate, *args)
        elif name == "count":
            self.both(count_orders, args)
        else:
            step = {"bulk_update": bulk_update, "bulk_delete_items": bulk_delete_items,
                    "items_per_order": items_per_order, "orders_by_region": orders_by_region}[name]
            self.both(step, *(args if isinstance(args, tuple) else (args,)))


def empty_tables(session: Session) -> None:
    """Delete every order and item (before each example)."""
    session.execute(delete(Item))
    session.execute(delete(Order))
    session.commit()


def fill_regions(session: Session) -> None:
    session.add_all([Region(region_id=r, name=name) for r, name in REGIONS])
    session.commit()


def prepare(side: Side) -> None:
    """Once per side: the regions (the tables are created by the caller)."""
    side.run_autocommit(fill_regions)


#: The oracle tests' examples: a few orders to start with, then a mix of operations.
ORACLE_EXAMPLES = given(
    seed=st.lists(new_orders(), min_size=1, max_size=6), ops=st.lists(operations, min_size=4, max_size=24)
)
ORACLE_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def run_example(sharded: Side, oracle: Side, seed: list[list[NewOrder]], ops: list[tuple[str, Any]]) -> None:
    """One example: both sides emptied, the seed orders inserted, the operations compared one by one."""
    for side in (sharded, oracle):
        side.run_autocommit(empty_tables)
    scenario = Scenario(sharded, oracle)
    for name, args in [("insert", orders) for orders in seed] + ops:
        scenario.apply(name, args)
