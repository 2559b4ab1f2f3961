"""Cross-node queries on real servers: answers, bounds, memory, transactions, refusals, the facade, ``ddm route``.

A SELECT whose joined or compared rows need not share a node is cut into parts,
each part copied into a temporary table on one data source, and the statement
run there (docs/cross-node-queries.md). Here on MariaDB (two fresh databases
for the shards and one for the unsharded reference, dropped afterwards) and on
SQLite files, with the tables of tests/crossnode_support.py:

* every statement of ``JOINS`` gives the reference's rows and Python types;
* past ``runtime.maxJoinRows`` / ``maxJoinMemoryMb`` the statement fails with
  ``JoinLimitError`` naming the part, what was read and the setting, while a
  200 000-row part streams through a few batches of memory; afterwards nothing
  is borrowed and no pooled connection holds a copy;
* inside a local or XA transaction the parts see the transaction's own writes;
* ``crossNodeQueries: false`` and locking reads are refused, naming why;
* the DB-API facade answers them; ``ddm route`` explains them.

The proxy's and SQLAlchemy's clients are in test_proxy_crossnode.py and
test_sqlalchemy_crossnode.py (the operational suites, run in the compiled pass).
"""

from __future__ import annotations

import contextlib
import tracemalloc
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

import ddm_core
from ddm_core import load_config
from ddm_core.crossnode.copy import BATCH_ROWS
from ddm_core.errors import JoinLimitError, UnsupportedSQLError
from ddm_core.execute import Executor
from ddm_core.route.plan import RouteKind
from ddm_core.route.router import Router
from cli_support import run
from crossnode_support import (
    EVENT_ROWS, JOIN_PARAMS, JOINS, ORDERS, STRATEGIES, USERS, check_cross_node, copies_left, create,
    crossnode_config, data_source_of, key_on, load_events, on_reference, reset, temporary_tables,
)
from test_execute_support import assert_no_leaks
from test_oracle import Backend, Query, SQLiteBackend, check, mariadb_oracle

SOURCES = ("ds_0", "ds_1")
#: A join whose ``t_event`` part (200 000 rows on 2 nodes, narrower than ``t_user``'s 4) is read through the
#: client whatever the strategy: the part read first of a gathered plan, a copied part of a broadcast one.
EVENT_JOIN = ("SELECT u.name, COUNT(*), MAX(e.payload) FROM t_event e JOIN t_user u ON e.user_id = u.user_id "
              "GROUP BY u.name")  # fmt: skip
#: The same tables in a shape a client join answers (columns out, an integer key).
EVENT_PAIRS = "SELECT e.event_id, e.payload, u.name FROM t_event e JOIN t_user u ON e.user_id = u.user_id"


# -- backends ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mariadb() -> Iterator[Backend]:
    with mariadb_oracle("ddm_xnode", SOURCES, crossnode_config) as backend:
        create(backend)
        load_events(backend.executor)
        yield backend


@pytest.fixture(scope="module")
def sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    base = tmp_path_factory.mktemp("crossnode")
    urls = {ds: f"sqlite:///{base / f'{ds}.db'}" for ds in SOURCES}
    executor = Executor(load_config(crossnode_config(urls)), timeout=20.0)
    backend = SQLiteBackend(executor, base / "reference.db")
    try:
        create(backend)
        load_events(executor)
        yield backend
        assert_no_leaks(executor)
    finally:
        executor.close()
        backend.conn.close()


@pytest.fixture(params=["mariadb", "sqlite"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


@pytest.fixture()
def loaded(backend: Backend) -> Backend:
    """``backend`` with the small tables back to their rows, sharded and in the reference."""
    reset(backend)
    return backend


def text(backend: Backend, sql: str) -> str:
    return sql if backend.placeholder == "%s" else sql.replace("%s", "?")


def executor_with(backend: Backend, **runtime: Any) -> Executor:
    """Another executor over the backend's data sources, with ``runtime`` settings changed."""
    config = backend.executor.config
    return Executor(replace(config, runtime=replace(config.runtime, **runtime)), timeout=20.0)


def assert_clean(executor: Executor) -> None:
    """Nothing borrowed, and no pooled connection holds a copy (crossnode_support.copies_left says how)."""
    assert executor.borrowed() == 0
    assert copies_left(executor) == []


# -- answers ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sql", JOINS)
def test_cross_node_selects_give_the_unsharded_rows(loaded: Backend, sql: str) -> None:
    check_cross_node(loaded, sql, JOIN_PARAMS.get(sql, []))
    assert_clean(loaded.executor)


def test_the_copy_probe_finds_a_temporary_table(backend: Backend) -> None:
    """The check behind ``copies_left`` answers both ways on this backend: it can fail."""
    dialect = backend.executor.config.data_sources["ds_0"].primary.dialect
    with backend.executor.transaction() as tx:
        raw = tx.connection("ds_0").raw
        cursor = raw.cursor()
        cursor.execute("CREATE TEMPORARY TABLE ddm_x3 (a INT)")
        try:
            assert temporary_tables(raw, dialect) == ["ddm_x3"]
        finally:
            cursor.execute("DROP TABLE ddm_x3")
            cursor.close()
        assert temporary_tables(raw, dialect) == []


# -- bounds -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("sql", "factor"), [(EVENT_JOIN, 10), (EVENT_PAIRS, 4)], ids=["copied", "client-join"])
def test_a_join_past_max_join_rows_fails_naming_it_and_streams_its_part(loaded: Backend, sql: str,
                                                                        factor: int) -> None:
    """200 000 rows in the ``t_event`` part against ``maxJoinRows`` 20 000, in autocommit: the read stops one
    batch past the bound, and Python's peak memory meanwhile is a fraction of what holding the part's
    rows takes (measured here on the same rows: the part's own read, buffered). Copied parts move one
    batch at a time (a tenth is generous); a client join holds up to 20 000 rows before it copies them
    to the gathering node (docs/cross-node-queries.md#strategies): a quarter."""
    backend = loaded
    with executor_with(backend, max_join_rows=20_000) as ex:
        plan = ex.router.route(sql).cross_node
        assert (plan.strategy == "client join") == (sql is EVENT_PAIRS), plan.strategy
        (part,) = [p for p in plan.statement.parts if p.table == "t_event"]
        tracemalloc.start()
        try:
            with pytest.raises(JoinLimitError) as info:
                ex.execute(sql).close()
            _, streamed = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        err: Any = info.value
        assert (err.setting, err.limit) == ("runtime.maxJoinRows", 20_000)
        assert 20_000 < err.rows <= 20_000 + BATCH_ROWS
        assert err.table == "t_event"
        for fragment in ("'t_event' (e)", f"{err.rows} rows", "runtime.maxJoinRows (20000 rows)"):
            assert fragment in str(err), (fragment, str(err))
        assert_clean(ex)

        tracemalloc.start()
        try:
            with ex.execute(part.read, stream=False) as result:
                rows = result.fetchall()
            _, held = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(rows) == EVENT_ROWS
        del rows
        print(f"\n{backend.name} {plan.strategy}: peak {streamed} bytes while the join ran, {held} holding the "
              "part's rows")  # fmt: skip
        assert streamed * factor < held, f"peak {streamed} bytes while the join ran, {held} holding the part's rows"

        # The same executor goes on: the next cross-node statement creates ddm_x0 again on a pooled
        # connection, which fails if a copy was left behind.
        _, want = backend.ref(JOINS[0], [])
        with ex.execute(JOINS[0]) as result:
            assert sorted(map(repr, result.fetchall())) == sorted(map(repr, want))
        assert_no_leaks(ex)


def test_a_join_past_max_join_memory_fails_naming_it(backend: Backend) -> None:
    with executor_with(backend, max_join_memory_mb=1) as ex:
        with pytest.raises(JoinLimitError) as info:
            ex.execute(EVENT_JOIN).close()
        err: Any = info.value
        assert (err.setting, err.limit) == ("runtime.maxJoinMemoryMb", 1)
        assert 1 <= err.megabytes < 2 and err.rows < 20_000  # about 132 bytes a row are counted
        for fragment in (f"'{err.table}'", f"{err.megabytes:.1f} MB", "runtime.maxJoinMemoryMb (1 MB)"):
            assert fragment in str(err), (fragment, str(err))
        assert_clean(ex)


def test_the_limit_error_names_the_table_of_an_aliased_part(sqlite: Backend) -> None:
    with executor_with(sqlite, max_join_rows=1000) as ex:
        with pytest.raises(JoinLimitError) as info:
            ex.execute(EVENT_JOIN).close()
    assert "t_event" in str(info.value)


# -- transactions ------------------------------------------------------------------------------------


def transaction_writes(ex: Executor, data_sources: tuple[str, ...]) -> list[tuple[str, list[Any]]]:
    """An INSERT, UPDATE and DELETE on each of ``t_user`` and ``t_order``, on each of ``data_sources``."""
    writes: list[tuple[str, list[Any]]] = []
    for n, ds in enumerate(data_sources):
        users = [u for u, *_ in USERS if data_source_of(ex, "t_user", "user_id", u) == ds]
        orders = [o for o, *_ in ORDERS if data_source_of(ex, "t_order", "order_id", o) == ds]
        assert len(users) >= 2 and len(orders) >= 2, (ds, users, orders)  # the data reaches every data source
        user = key_on(ex, "t_user", "user_id", ds, 50 + 10 * n)
        order = key_on(ex, "t_order", "order_id", ds, 500 + 10 * n)
        other = key_on(ex, "t_order", "order_id", ds, order + 1)
        writes += [
            ("INSERT INTO t_user (user_id, name, vip) VALUES (%s, %s, 1)", [user, f"new{n}"]),
            ("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, 4.50)", [order, user]),
            ("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, 0.75)", [other, users[0]]),
            ("UPDATE t_user SET name = %s WHERE user_id = %s", [f"renamed{n}", users[0]]),
            ("UPDATE t_order SET amount = amount + 100 WHERE order_id = %s", [orders[0]]),
            ("DELETE FROM t_user WHERE user_id = %s", [users[1]]),
            ("DELETE FROM t_order WHERE order_id = %s", [orders[1]]),
        ]
    return writes


def write_both(backend: Backend, writes: list[tuple[str, list[Any]]]) -> None:
    """Each write through ddm-core (in the caller's transaction) and on the reference (in its own)."""
    for sql, params in writes:
        backend.executor.execute(text(backend, sql), params).close()
        on_reference(backend, sql, params)


def check_tables(backend: Backend) -> None:
    """``t_user`` and ``t_order`` hold what the reference holds."""
    for table in ("t_user", "t_order"):
        check(backend, Query(f"SELECT * FROM {table}", [], "multiset"), None)


def writes_are_seen(backend: Backend, mode: str, data_sources: tuple[str, ...], end: str) -> None:
    """Inside a ``mode`` transaction writing to ``data_sources``, each cross-node SELECT answers with the
    transaction's own writes, as one database in one transaction does; then ``end`` it, on both sides."""
    ex = backend.executor
    writes = transaction_writes(ex, data_sources)
    with ex.transaction(mode) as tx:
        on_reference(backend, "BEGIN")
        write_both(backend, writes)
        for sql in JOINS[:4]:
            check_cross_node(backend, sql)
        getattr(tx, end)()
        on_reference(backend, end.upper())
    assert_clean(ex)


@pytest.mark.parametrize("end", ["commit", "rollback"])
def test_a_transaction_sees_its_own_writes_in_every_part(loaded: Backend, end: str) -> None:
    """Writes on the gathering node (a local transaction writes to one data source)."""
    writes_are_seen(loaded, "local", ("ds_0",), end)
    if end == "commit":  # after a rollback: test_a_rollback_after_a_cross_node_select...
        check_tables(loaded)
        check_cross_node(loaded, JOINS[0])


@pytest.mark.parametrize("backend", ["mariadb", "sqlite"], indirect=True)
def test_a_rollback_after_a_cross_node_select_undoes_the_writes_before_and_after_it(loaded: Backend) -> None:
    ex = loaded.executor
    insert, _, _, _, update, *_ = transaction_writes(ex, ("ds_0",))
    with ex.transaction() as tx:
        ex.execute(text(loaded, insert[0]), insert[1]).close()
        ex.execute(JOINS[0]).close()
        ex.execute(text(loaded, update[0]), update[1]).close()
        tx.rollback()
    check_tables(loaded)  # the reference never took the writes


@pytest.mark.parametrize("backend", ["mariadb"], indirect=True)  # SQLite takes no part in XA
@pytest.mark.parametrize("end", ["commit", "rollback"])
def test_an_xa_transaction_sees_its_own_writes_on_every_data_source(loaded: Backend, end: str) -> None:
    writes_are_seen(loaded, "xa", SOURCES, end)
    check_tables(loaded)
    check_cross_node(loaded, JOINS[0])


# -- refusals -----------------------------------------------------------------------------------------


def test_with_cross_node_queries_off_a_join_is_refused_naming_its_condition(loaded: Backend) -> None:
    bound, unbound = JOINS[5], JOINS[0]
    with executor_with(loaded, cross_node_queries=False) as ex:
        with pytest.raises(UnsupportedSQLError) as info:
            ex.execute(bound)
        assert "join of t_order o and t_item i does not prove their rows share a node" in str(info.value)
        assert "add o.order_id = i.order_id" in str(info.value)
        with pytest.raises(UnsupportedSQLError) as other:
            ex.execute(unbound)
        assert "'t_order' and 't_user' are not bound tables" in str(other.value)
        assert all(s.borrows == 0 for s in ex.endpoint_stats())  # refused before anything was sent
    for sql, refusal in ((bound, info.value), (unbound, other.value)):  # the reason the default plan gives
        assert loaded.executor.router.route(sql).cross_node.statement.reason in str(refusal)


LOCKING = [JOINS[0] + " FOR UPDATE", JOINS[1] + " LOCK IN SHARE MODE", JOINS[3] + " FOR UPDATE"]


@pytest.mark.parametrize("sql", LOCKING)
def test_a_locking_read_across_nodes_is_refused_naming_why(loaded: Backend, sql: str) -> None:
    ex = loaded.executor
    for in_transaction in (False, True):
        with ex.transaction() if in_transaction else contextlib.nullcontext():
            with pytest.raises(UnsupportedSQLError) as info:
                ex.execute(sql)
        assert info.value.construct == "locking read"  # type: ignore[attr-defined]
        assert "a locking read (FOR UPDATE / LOCK IN SHARE MODE) cannot be answered from copies" in str(info.value)
        assert "does not prove their rows share a node" in str(info.value) or "subquery" in str(info.value)
    assert_clean(ex)


@pytest.mark.parametrize("sql", [
    JOINS[0] + " UNION ALL SELECT name, 1, 1 FROM t_user FOR UPDATE",
    f"SELECT * FROM ({JOINS[0]} FOR UPDATE) d",
])
@pytest.mark.parametrize("backend", ["mariadb"], indirect=True)  # where the statement would run
def test_a_locking_read_inside_a_union_or_derived_table_is_refused_too(loaded: Backend, sql: str) -> None:
    with loaded.executor.transaction():
        with pytest.raises(UnsupportedSQLError, match="locking read"):
            loaded.executor.execute(sql).close()


# -- the DB-API facade ---------------------------------------------------------------------------------


def test_the_dbapi_facade_answers_cross_node_selects(loaded: Backend) -> None:
    ex = loaded.executor
    conn = ddm_core.connect(executor=ex, autocommit=True)
    try:
        cursor = conn.cursor()
        cursor.execute(JOINS[0])
        want_names, want = loaded.ref(JOINS[0], [])
        assert [d[0] for d in cursor.description] == want_names
        assert sorted(map(repr, cursor.fetchall())) == sorted(map(repr, want))
    finally:
        conn.close()

    writes = transaction_writes(ex, ("ds_1",))[:3]
    conn = ddm_core.connect(executor=ex)  # PEP 249: a transaction until commit()
    try:
        cursor = conn.cursor()
        on_reference(loaded, "BEGIN")
        for sql, params in writes:
            cursor.execute(text(loaded, sql), params)
            on_reference(loaded, sql, params)
        cursor.execute(JOINS[1])
        got = cursor.fetchall()
        _, want = loaded.ref(JOINS[1], [])
        assert sorted(map(repr, got)) == sorted(map(repr, want))
        assert any(row[0] == writes[0][1][0] for row in got)  # the new user is there, with its order
        conn.commit()
        on_reference(loaded, "COMMIT")
    finally:
        conn.close()
    check_tables(loaded)
    assert_clean(ex)


# -- ddm route -------------------------------------------------------------------------------------------


def test_ddm_route_prints_the_parts_and_the_strategy(tmp_path: Path) -> None:
    urls = {ds: f"sqlite:///{tmp_path / f'{ds}.db'}" for ds in SOURCES}  # routing connects to nothing
    path = tmp_path / "crossnode.yaml"
    path.write_text(yaml.safe_dump(crossnode_config(urls)), encoding="utf-8")
    result = run("route", "-c", str(path), JOINS[0])
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "part 1" in out and "part 2" in out, out
    assert "t_order o" in out and "t_user u" in out, out
    assert any(strategy in out for strategy in STRATEGIES), out
    for _, sql, _, _ in Router(load_config(str(path))).route(JOINS[0]).explain():
        assert sql in out, (sql, out)  # each part's read and the statement over the copies
