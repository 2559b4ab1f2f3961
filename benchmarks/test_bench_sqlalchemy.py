"""SQLAlchemy: the ``ddm+pymysql`` dialect (4 × 4 shards) against ``mysql+pymysql`` on one table, and against
``sqlalchemy.ext.horizontal_shard`` over the same 16 tables; same run, interleaved rounds.

MariaDB on 127.0.0.1:3306 (root, no password). The module creates, and drops at
the end, ``ddm_bench_sa_<tag>_0..3`` — the SLOTS layout of test_bench_executor.py
(``t_order`` sharded by ``user_id`` over 4 databases × 4 tables, 100 000
orders, one per user; its configuration, rows and loader are imported from
there) — and ``ddm_bench_sa_<tag>_one``: the same orders in one table.

Engines: ``create_engine("ddm+pymysql://", connect_args={"executor": ...})``
over one warmed :class:`~ddm_core.execute.Executor` (``max_concurrency`` 16);
``mysql+pymysql://`` on the one table; default pools (QueuePool of 5) and
isolation unless a case says otherwise. The ORM class and statements are in
sa_orders.py; the horizontal_shard harness and how it covers 16 tables with
one mapped class are in sa_horizontal.py.

**Lookups by key.** ``Order``'s mapper key is ``(user_id, order_id)``, so
``session.get`` and the Core select send ``WHERE user_id = %s AND order_id = %s``:
the shard key with the id, as a sharded application finds an order. By
``order_id`` alone a snowflake id would reach all 16 tables (sa_orders.py).

Every case is a pair (test_bench_executor.py's :func:`measure_pair`): each timed
ddm round follows one round of its baseline, so both see the same load;
``report.py`` prints the ratio of the medians against the issue's target.
Nothing here asserts a speed.

=============================  =========================================  ==================================
case                           ddm+pymysql                                baseline
=============================  =========================================  ==================================
ORM get, identity map cleared  one ``Session``, ``expunge_all()`` +       the same on ``mysql+pymysql``, one
                               ``session.get(Order, (uid, oid))`` ×200    table
ORM get, a Session per get     ``with Session(engine) as s:``             the same on ``mysql+pymysql``
                               ``s.get(...)``
Core select by key             ``conn.execute(select(t).where(user_id     the same on ``mysql+pymysql``
                               == u, order_id == o)).all()`` ×200
ORM bulk insert 20 000 rows    ``session.execute(insert(Order), dicts)``  the same into the one table, also
                               on an ``AUTOCOMMIT`` engine (the rows      ``AUTOCOMMIT``
                               span all 4 data sources: a local
                               transaction writes to one only)
the same, XA                   ``?transaction_mode=xa`` engine, one       one local transaction on the one
                               XA transaction over 4 data sources         table
vs horizontal_shard: get,      the ORM statement on ``ddm+pymysql``       the same on a ``ShardedSession``;
ORDER BY LIMIT 20, GROUP BY                                               rows checked against the oracle
asyncio ``AsyncSession.get``   ``ddm+asyncmy`` over an                    ``mysql+asyncmy``, one table; both
                               ``AsyncExecutor`` (``expunge_all``         on one event loop
                               before each get)
=============================  =========================================  ==================================

The three by-key cases run twice: on the engines as created (each Session or
connection opens a transaction, rolled back when it ends: ddm-core pins a
connection per data source and opens the transaction on it) and on
``isolation_level="AUTOCOMMIT"`` engines on both sides (no transaction).

Reading the figures: both sides make the same number of round trips per get in
a transaction (ddm-core sends ``BEGIN`` on the pinned connection; PyMySQL sends
none but SQLAlchemy's rollback at the Session's end and the pool's reset on
return each send ``ROLLBACK``, where the facade answers the second itself).
With ``AUTOCOMMIT`` PyMySQL still sends both ``ROLLBACK`` s and the facade none,
which is why "a new Session per get, AUTOCOMMIT" favours ddm-core. MariaDB
runs on the same two cores as the client here, between every statement.

**Correctness.** Each horizontal_shard case first runs its statement on both
sides and on the oracle — the same statement on ``mysql+pymysql`` over the one
unsharded table — and stores in ``extra_info["correctness"]`` whether each side
returned the oracle's rows; ``report.py`` prints that table. The ratios of those
cases are ddm+pymysql / horizontal_shard, whatever horizontal_shard returned.
"""

from __future__ import annotations

import itertools
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pytest

pytest.importorskip("sqlalchemy", reason="the SQLAlchemy benchmarks need the sqlalchemy extra")

from sa_horizontal import HorizontalShards, mysql_engine  # noqa: E402
from sa_orders import Order, as_dicts, groups, order_row, page  # noqa: E402
from sqlalchemy import Engine, create_engine, insert, select  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402
from test_bench_executor import (  # noqa: E402  (the layout, rows and pairing of the executor's benchmarks)
    CALLS,
    DDL,
    INSERT,
    ROWS,
    SEED,
    SHARDS,
    Layout,
    Paired,
    _connect,
    _load,
    _point_keys,
    _timed,
    make_rows,
    measure_pair,
    slots_config,
)

BULK_ROWS = 20_000
#: Bulk rounds insert key blocks from here on; they are deleted again after the case.
BULK_BASE = 10 * ROWS
GROUP = "SQLAlchemy ddm+pymysql"
VS_ONE = "SQLAlchemy ddm+pymysql (4×4 shards) vs mysql+pymysql on one table (interleaved rounds)"
VS_HS = "SQLAlchemy ddm+pymysql vs sqlalchemy.ext.horizontal_shard, 16 shard engines (interleaved rounds)"


@dataclass
class SaData:
    """The loaded databases, the executor over them, and the engines of both sides."""

    names: list[str]
    one: str
    layout: Layout
    ddm: Engine
    single: Engine
    #: The same with ``isolation_level="AUTOCOMMIT"`` (set once per pooled connection, not per checkout).
    ddm_ac: Engine
    single_ac: Engine

    def ddm_engine(self, url: str = "ddm+pymysql://", **kw: Any) -> Engine:
        return create_engine(url, connect_args={"executor": self.layout.executor}, **kw)


@pytest.fixture(scope="module")
def sa_data() -> Iterator[SaData]:
    try:
        admin = _connect()
    except Exception as exc:
        pytest.skip(f"MariaDB on 127.0.0.1:3306 is needed for the SQLAlchemy benchmarks: {exc}")
    tag = uuid.uuid4().hex[:8]
    names = [f"ddm_bench_sa_{tag}_{i}" for i in range(SHARDS)]
    one = f"ddm_bench_sa_{tag}_one"
    layout: Layout | None = None
    engines: list[Engine] = []
    try:
        with admin.cursor() as cur:
            for db in [*names, one]:
                cur.execute(f"CREATE DATABASE {db}")
        layout = Layout(slots_config(names), max_concurrency=16)
        rows = make_rows(1, ROWS, SEED)
        _load(layout, rows, ("t_order",))
        direct = _connect(one)
        with direct.cursor() as cur:
            cur.execute(DDL.format(table="t_order"))
            cur.executemany(INSERT, rows)
            cur.execute("ANALYZE TABLE t_order")
        direct.close()
        engines += [create_engine("ddm+pymysql://", connect_args={"executor": layout.executor}, **options)
                    for options in ({}, {"isolation_level": "AUTOCOMMIT"})]
        engines += [mysql_engine(one), mysql_engine(one, isolation_level="AUTOCOMMIT")]
        data = SaData(names, one, layout, engines[0], engines[2], engines[1], engines[3])
        yield data
    finally:
        for engine in engines:
            engine.dispose()
        if layout is not None:
            layout.close()
        with admin.cursor() as cur:
            for db in [*names, one]:
                cur.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.close()


def _keys() -> list[tuple[int, int]]:
    """``CALLS`` orders as ``(user_id, order_id)`` (one order per user: the two are equal)."""
    return [(k, k) for k in _point_keys(CALLS, ROWS, SEED)]


# -- against mysql+pymysql on one table ------------------------------------------------------------


def _get_round(engine: Engine, keys: list[tuple[int, int]]) -> Callable[[], list[Any]]:
    """``session.get`` per key in one Session, the identity map cleared before each."""

    def run() -> list[Any]:
        out = []
        with Session(engine) as session:
            for key in keys:
                session.expunge_all()
                out.append(order_row(session.get(Order, key)))
        return out

    return run


def _session_per_get_round(engine: Engine, keys: list[tuple[int, int]]) -> Callable[[], list[Any]]:
    """A new Session per ``session.get`` (checked out of the pool and returned each time)."""

    def run() -> list[Any]:
        out = []
        for key in keys:
            with Session(engine) as session:
                out.append(order_row(session.get(Order, key)))
        return out

    return run


def _core_round(engine: Engine, keys: list[tuple[int, int]]) -> Callable[[], list[Any]]:
    """``conn.execute(select(t).where(user_id == u, order_id == o)).all()`` per key on one connection."""
    t = Order.__table__

    def run() -> list[Any]:
        out = []
        with engine.connect() as conn:
            for user_id, order_id in keys:
                out.append(conn.execute(select(t).where(t.c.user_id == user_id, t.c.order_id == order_id)).all())
        return out

    return run


ROUNDS_BY_KEY: list[tuple[str, Callable[..., Callable[[], list[Any]]]]] = [
    ("ORM `session.get(Order, (user_id, order_id))`, identity map cleared (`expunge_all`)", _get_round),
    ("ORM `session.get`, a new `Session` per get", _session_per_get_round),
    ("Core `select(t).where(user_id == u, order_id == o)`", _core_round),
]


@pytest.mark.parametrize("isolation", ["default", "AUTOCOMMIT"])
@pytest.mark.parametrize("label,make", ROUNDS_BY_KEY, ids=["orm_get", "orm_get_session", "core_select"])
def test_sa_by_key(sa_data: SaData, benchmark: Any, label: str, make: Callable[..., Callable[[], list[Any]]],
                   isolation: str) -> None:
    """``default``: the engines as created (a transaction per Session / connection, rolled back at its end);
    ``AUTOCOMMIT``: ``isolation_level="AUTOCOMMIT"`` on both sides (no transaction: what the first costs)."""
    ddm, single = (sa_data.ddm, sa_data.single) if isolation == "default" else (sa_data.ddm_ac, sa_data.single_ac)
    keys = _keys()
    ddm_round, one_round = make(ddm, keys), make(single, keys)
    got, want = ddm_round(), one_round()
    assert got == want and all(r for r in got)
    measure_pair(benchmark, ddm_round, Paired(_timed(one_round)),
                 case=label + ("" if isolation == "default" else f", {isolation} engines"), target="<= 1.10",
                 items=CALLS, unit="call", rounds=30, group=GROUP, table=VS_ONE)


def _delete_bulk(data: SaData) -> None:
    """Remove the bulk cases' rows from every physical table and from the one table (behind SQLAlchemy)."""
    table = data.layout.config.table("t_order")
    assert table is not None
    for ds, physical in table.tables_by_source.items():
        with data.layout.direct(ds).cursor() as cur:
            for name in physical:
                cur.execute(f"DELETE FROM {name} WHERE order_id >= %s", (BULK_BASE,))
    one = _connect(data.one)
    with one.cursor() as cur:
        cur.execute("DELETE FROM t_order WHERE order_id >= %s", (BULK_BASE,))
    one.close()


BULK_MODES = [
    # (label, ddm engine URL and options, baseline engine options, target)
    ("autocommit", "ddm+pymysql://", {"isolation_level": "AUTOCOMMIT"}, {"isolation_level": "AUTOCOMMIT"},
     "<= 1.2"),
    ("one XA transaction (vs one local transaction)", "ddm+pymysql:///?transaction_mode=xa", {}, {}, ""),
]


@pytest.mark.parametrize("mode,url,ddm_options,one_options,target", BULK_MODES, ids=["autocommit", "xa"])
def test_sa_bulk_insert(sa_data: SaData, benchmark: Any, mode: str, url: str, ddm_options: dict[str, Any],
                        one_options: dict[str, Any], target: str) -> None:
    ddm, single = sa_data.ddm_engine(url, **ddm_options), mysql_engine(sa_data.one, **one_options)
    blocks = itertools.count(BULK_BASE, BULK_ROWS)

    def fresh() -> list[dict[str, Any]]:
        return as_dicts(make_rows(next(blocks), BULK_ROWS, SEED + 1))

    def insert_all(engine: Engine, rows: list[dict[str, Any]]) -> None:
        with Session(engine) as session:
            session.execute(insert(Order), rows)
            session.commit()

    def one_round() -> float:
        rows = fresh()
        start = time.perf_counter()
        insert_all(single, rows)
        return time.perf_counter() - start

    try:
        measure_pair(benchmark, lambda rows: insert_all(ddm, rows), Paired(one_round, lambda: (fresh(),)),
                     case=f"ORM bulk insert {BULK_ROWS:,} rows, `session.execute(insert(Order), dicts)`, {mode}",
                     target=target, items=BULK_ROWS, unit="row", rounds=10, warmup_rounds=1, group=GROUP,
                     table=VS_ONE)
        with ddm.connect() as conn:  # every round's rows arrived: sharded rows = one table's rows
            sharded = conn.execute(select(Order.__table__.c.order_id).where(Order.order_id >= BULK_BASE)).all()
        with single.connect() as conn:
            alone = conn.execute(select(Order.__table__.c.order_id).where(Order.order_id >= BULK_BASE)).all()
        assert len(sharded) == len(alone) == 11 * BULK_ROWS  # warm-up + 10 rounds on each side
    finally:
        ddm.dispose()
        single.dispose()
        _delete_bulk(sa_data)


# -- against sqlalchemy.ext.horizontal_shard -------------------------------------------------------


@pytest.fixture(scope="module")
def horizontal(sa_data: SaData) -> Iterator[HorizontalShards]:
    shards = HorizontalShards(sa_data.layout.config)
    try:
        yield shards
    finally:
        shards.close()


def _rows(result: list[Any]) -> list[Any]:
    return [order_row(r) if isinstance(r, Order) else tuple(r) for r in result]


def _verdict(got: list[Any], oracle: list[Any]) -> str:
    if got == oracle:
        return f"the oracle's {len(oracle)} rows"
    same_set = sorted(map(repr, got)) == sorted(map(repr, oracle))
    return (f"**wrong**: {len(got)} rows for the oracle's {len(oracle)}"
            + ("; the same rows in another order" if same_set else "")
            + f"; {sum(r in oracle for r in got)} of them among the oracle's")


def test_sa_vs_horizontal_get(sa_data: SaData, horizontal: HorizontalShards, benchmark: Any) -> None:
    keys = _keys()

    def hs_round() -> list[Any]:
        out = []
        with horizontal.session() as session:
            for key in keys:
                session.expunge_all()
                out.append(order_row(session.get(Order, key)))
        return out

    ddm_round, oracle = _get_round(sa_data.ddm, keys), _get_round(sa_data.single, keys)()
    correctness = {"ddm+pymysql": _verdict(ddm_round(), oracle), "horizontal_shard": _verdict(hs_round(), oracle)}
    measure_pair(benchmark, ddm_round, Paired(_timed(hs_round)),
                 case="ORM `session.get`, identity map cleared (vs horizontal_shard)", target="", items=CALLS,
                 unit="call", rounds=30, group=GROUP, table=VS_HS, correctness=correctness)


QUERIES: list[tuple[str, Callable[[Session], list[Any]]]] = [
    ("16-shard `ORDER BY create_time DESC LIMIT 20`", lambda s: list(s.scalars(page()))),
    ("16-shard `GROUP BY status` with `count(*)`, `sum(amount)`, `ORDER BY status`",
     lambda s: list(s.execute(groups()))),
]
PER_ROUND = 20  # statements per round


@pytest.mark.parametrize("label,fetch", QUERIES, ids=["page", "group_by"])
def test_sa_vs_horizontal_query(sa_data: SaData, horizontal: HorizontalShards, benchmark: Any, label: str,
                                fetch: Callable[[Session], list[Any]]) -> None:
    def run(make_session: Callable[[], Session]) -> Callable[[], list[Any]]:
        def round_() -> list[Any]:
            rows: list[Any] = []
            with make_session() as session:
                for _ in range(PER_ROUND):
                    rows = _rows(fetch(session))
            return rows

        return round_

    ddm_round = run(lambda: Session(sa_data.ddm))
    hs_round = run(horizontal.session)
    oracle = run(lambda: Session(sa_data.single))()
    correctness = {"ddm+pymysql": _verdict(ddm_round(), oracle), "horizontal_shard": _verdict(hs_round(), oracle)}
    measure_pair(benchmark, ddm_round, Paired(_timed(hs_round)), case=f"{label} (vs horizontal_shard)", target="",
                 items=PER_ROUND, unit="call", rounds=15, group=GROUP, table=VS_HS, correctness=correctness)


# -- asyncio: ddm+asyncmy against mysql+asyncmy on one table ------------------------------------------


def test_sa_async_get(sa_data: SaData, benchmark: Any) -> None:
    """``AsyncSession.get`` per key, identity map cleared, on one event loop for both sides' rounds."""
    pytest.importorskip("greenlet", reason="SQLAlchemy's asyncio extension needs greenlet (sqlalchemy[asyncio])")
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
    from test_bench_aio import OnLoop  # (it skips without asyncmy)

    on = OnLoop("asyncio")
    try:
        executor = on.run(on.executor(sa_data.layout.config))
        ddm = create_async_engine("ddm+asyncmy://", connect_args={"executor": executor})
        single = create_async_engine(f"mysql+asyncmy://root@127.0.0.1:3306/{sa_data.one}?charset=utf8mb4")
        keys = _keys()

        async def gets(engine: AsyncEngine) -> list[Any]:
            out = []
            async with AsyncSession(engine) as session:
                for key in keys:
                    session.expunge_all()
                    out.append(order_row(await session.get(Order, key)))
            return out

        try:
            got, want = on.run(gets(ddm)), on.run(gets(single))
            assert got == want and all(got)
            measure_pair(benchmark, lambda: on.run(gets(ddm)), Paired(on.timed(lambda: gets(single))),
                         case="asyncio: `AsyncSession.get`, identity map cleared (ddm+asyncmy vs mysql+asyncmy)",
                         target="<= 1.10", items=CALLS, unit="call", rounds=30, group=GROUP, table=VS_ONE)
        finally:
            on.run(ddm.dispose())
            on.run(single.dispose())
    finally:
        on.close()
