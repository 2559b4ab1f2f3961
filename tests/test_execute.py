"""Executor behaviour on real servers: MariaDB (4 databases × 4 tables) and SQLite files.

Tests taking the ``executor`` fixture run on both backends; every executor
fixture asserts at teardown that no pooled connection is still borrowed.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import pytest

from ddm_core import load_config
from ddm_core.errors import (
    CrossShardTransactionError,
    DuplicateKeyError,
    ExecutionError,
    QueryTimeoutError,
    TransactionError,
)
from ddm_core.execute import Executor, Result
from ddm_core.execute.drivers import format_to_qmark
from ddm_core.route.plan import RouteKind, RoutePlan
from ddm_core.route.text.placeholders import translate
from test_execute_support import (  # noqa: F401 - fixtures
    any_runner_executor,
    assert_no_leaks,
    mysql_async_executor,
    mysql_config,
    mysql_databases,
    mysql_executor,
    mysql_raw,
    sharding_config,
    sqlite_async_executor,
    sqlite_config,
    sqlite_executor,
)


@pytest.fixture(name="executor")
def _executor(any_runner_executor: Executor) -> Executor:
    """Every test below that takes ``executor`` runs on both backends and both runners."""
    return any_runner_executor

INSERT = "INSERT INTO t_order (order_id, user_id, amount, note) VALUES (%s, %s, %s, %s)"


def insert_users(ex: Executor, users: range | list[int], amount: Any = None) -> None:
    rows: list[Any] = []
    for u in users:
        rows += [u * 10, u, amount if amount is not None else u * 3 % 17, f"n{u}"]
    values = ", ".join(["(%s, %s, %s, %s)"] * len(users))
    with ex.execute(f"INSERT INTO t_order (order_id, user_id, amount, note) VALUES {values}", rows) as r:
        assert r.rowcount == len(users)


def data_source_of(ex: Executor, user_id: int) -> str:
    return ex.router.route("SELECT 1 FROM t_order WHERE user_id = %s", (user_id,)).units[0].data_source


def users_on_different_sources(ex: Executor) -> tuple[int, int]:
    first = data_source_of(ex, 1)
    other = next(u for u in range(2, 1000) if data_source_of(ex, u) != first)
    return 1, other


# -- reads ------------------------------------------------------------------------------------


def test_single_unit_is_buffered_and_returned_as_is(executor: Executor) -> None:
    insert_users(executor, range(1, 9))
    with executor.execute("SELECT user_id, amount, note FROM t_order WHERE user_id = %s", (5,)) as r:
        assert [d[0] for d in r.description] == ["user_id", "amount", "note"]
        assert r.units == 1 and r.complete
        assert r.fetchall() == [(5, 15, "n5")]
        assert r.rowcount == 1


@pytest.mark.parametrize("backend", ["mysql", "sqlite"])
def test_single_units_never_start_the_thread_pool(backend: str, request: pytest.FixtureRequest) -> None:
    executor = request.getfixturevalue(f"{backend}_executor")
    insert_users(executor, range(1, 9))
    ex2 = Executor(executor.config)
    try:
        for user in range(1, 9):
            ex2.execute("SELECT user_id FROM t_order WHERE user_id = %s", (user,)).close()
        assert ex2.runner._threads is None
    finally:
        ex2.close()


def test_multi_unit_select_is_merged(executor: Executor) -> None:
    insert_users(executor, range(1, 41))
    users = [3, 7, 11, 19, 23, 31]
    placeholders = ", ".join(["%s"] * len(users))
    with executor.execute(
        f"SELECT user_id, amount FROM t_order WHERE user_id IN ({placeholders}) ORDER BY amount DESC, user_id",
        users,
    ) as r:
        rows = r.fetchall()
    expected = sorted(((u, u * 3 % 17) for u in users), key=lambda t: (-t[1], t[0]))
    assert rows == expected

    with executor.execute("SELECT user_id FROM t_order ORDER BY user_id DESC LIMIT 3 OFFSET 2") as r:
        # MariaDB: each data source's 4 tables in one UNION ALL (route/query/per_source.py); SQLite: per table
        assert r.units == (16 if executor.config.data_sources["ds_0"].primary.dialect == "sqlite" else 4)
        assert r.fetchall() == [(38,), (37,), (36,)]
    with executor.execute("SELECT COUNT(*), SUM(amount), MAX(user_id) FROM t_order") as r:
        count, total, top = r.fetchone()  # type: ignore[misc]
        assert (count, int(total), top) == (40, sum(u * 3 % 17 for u in range(1, 41)), 40)
        assert r.fetchone() is None


def test_fetch_methods_and_iteration(executor: Executor) -> None:
    insert_users(executor, range(1, 21))
    r = executor.execute("SELECT user_id FROM t_order ORDER BY user_id")
    assert r.fetchone() == (1,)
    r.arraysize = 3
    assert r.fetchmany() == [(2,), (3,), (4,)]
    assert r.fetchmany(2) == [(5,), (6,)]
    assert [row[0] for row in r] == list(range(7, 21))
    assert r.closed and r.rowcount == 20 - 6 + 6  # counted once read to the end
    assert r.fetchall() == [] and r.fetchone() is None


def test_broadcast_write_reaches_every_data_source(executor: Executor) -> None:
    with executor.execute("INSERT INTO t_dict (id, name) VALUES (%s, %s)", (1, "east")) as r:
        assert r.units == 4 and r.rowcount == 4  # one row on each of the 4 data sources
    # A read of a broadcast table goes to one data source: check every copy with explicit plans.
    unit = executor.router.route("SELECT name FROM t_dict WHERE id = 1").units[0]
    for name in executor.config.data_sources:
        plan = RoutePlan((unit._replace(data_source=name),), RouteKind.SINGLE)
        with executor.execute_plan(plan) as rr:
            assert rr.fetchall() == [("east",)], name


def test_dml_rowcounts_are_summed(executor: Executor) -> None:
    insert_users(executor, range(1, 31), amount=1)
    with executor.execute("UPDATE t_order SET amount = amount + 1 WHERE user_id < %s", (11,)) as r:
        assert r.rowcount == 10 and r.units == 16
    with executor.execute("UPDATE t_order SET amount = 5 WHERE user_id = %s", (3,)) as r:
        assert r.rowcount == 1 and r.units == 1
    with executor.execute("DELETE FROM t_order WHERE amount = %s", (1,)) as r:
        assert r.rowcount == 20
    with executor.execute("SELECT COUNT(*) FROM t_order") as r:
        assert r.fetchone() == (10,)


def test_generated_keys_come_from_the_plan(executor: Executor) -> None:
    with executor.execute(
        "INSERT INTO t_order (user_id, amount) VALUES (%s, %s), (%s, %s), (%s, %s)", (101, 1, 202, 2, 303, 3)
    ) as r:
        keys = r.generated_keys
        assert r.rowcount == 3 and len(keys) == 3 and len(set(keys)) == 3
        assert r.lastrowid is None  # sharded tables: the keys are in generated_keys
    with executor.execute("SELECT order_id, user_id FROM t_order ORDER BY user_id") as r:
        assert r.fetchall() == [(keys[0], 101), (keys[1], 202), (keys[2], 303)]


def test_lastrowid_of_a_single_table_insert(executor: Executor) -> None:
    with executor.execute("INSERT INTO t_config (name) VALUES (%s)", ("a",)) as r:
        first = r.lastrowid
    with executor.execute("INSERT INTO t_config (name) VALUES (%s)", ("b",)) as r:
        assert r.lastrowid == first + 1


def test_percent_signs_follow_pymysql_semantics(executor: Executor) -> None:
    # Without parameters the text is sent as written; with parameters %% is a literal %.
    executor.execute("INSERT INTO t_config (name) VALUES ('a%%b')").close()
    executor.execute("INSERT INTO t_config (name) VALUES (CONCAT(%s, '%%'))" if _is_mysql(executor)
                     else "INSERT INTO t_config (name) VALUES (%s || '%%')", ("c",)).close()
    executor.execute("INSERT INTO t_config (name) VALUES (?)", ("d%",)).close()
    with executor.execute("SELECT name FROM t_config ORDER BY name") as r:
        assert r.fetchall() == [("a%%b",), ("c%",), ("d%",)]
    with executor.execute("SELECT name FROM t_config WHERE name = 'a%%b'") as r:
        assert r.fetchall() == [("a%%b",)]  # literal-only: compared as written
    with executor.execute("SELECT name FROM t_config WHERE name = 'c%%'") as r:
        assert r.fetchall() == []
    with executor.execute("SELECT name FROM t_config WHERE name LIKE %s", ("c%",)) as r:
        assert r.fetchall() == [("c%",)]


def test_format_to_qmark_is_the_percent_operator() -> None:
    for sql in ["SELECT '%%%%x' FROM t WHERE a = %s", "SELECT a %% 2, '%s' FROM t", "SELECT 1"]:
        n = sql.count("%s")
        assert format_to_qmark(sql) == sql % (("?",) * n)
    # translate() reads a statement as PyMySQL does: %-formatted with params, as written without.
    assert translate("SELECT '%%%%x'").sql == "SELECT '%%%%x'" % () == "SELECT '%%x'"
    assert translate("SELECT '%%%%x'", formatted=False).sql == "SELECT '%%%%x'"


def _is_mysql(ex: Executor) -> bool:
    return next(iter(ex.config.data_sources.values())).primary.dialect in ("mysql", "mariadb")


# -- errors -------------------------------------------------------------------------------------


def test_duplicate_key_is_mapped_with_the_driver_error_chained(executor: Executor) -> None:
    executor.execute(INSERT, (1, 7, 1, "x")).close()
    with pytest.raises(DuplicateKeyError) as info:
        executor.execute(INSERT, (1, 7, 2, "y"))
    err = info.value
    assert err.data_source == data_source_of(executor, 7)
    assert err.data_source in str(err)
    cause = err.__cause__
    if _is_mysql(executor):
        # PyMySQL's error on the thread runner, asyncmy's on the asyncio runner: the server's code either way
        assert type(cause).__name__ == "IntegrityError" and cause.args[0] == 1062
    else:
        assert isinstance(cause, sqlite3.IntegrityError) and "UNIQUE" in str(cause)


def test_other_driver_errors_name_data_source_and_statement(executor: Executor) -> None:
    with pytest.raises(ExecutionError) as info:
        executor.execute("SELECT no_such_column FROM t_order WHERE user_id = %s", (4,))
    err = info.value
    assert type(err) is ExecutionError
    assert err.data_source == data_source_of(executor, 4)
    assert "no_such_column" in str(err) and err.data_source in str(err)
    assert err.sql.startswith("SELECT no_such_column")
    assert err.__cause__ is not None


def test_multi_unit_error_closes_the_other_units(executor: Executor) -> None:
    insert_users(executor, range(1, 50))
    with pytest.raises(ExecutionError):
        executor.execute("SELECT user_id, 1 / no_such FROM t_order ORDER BY user_id", stream=True)
    assert_no_leaks(executor)


# -- transactions --------------------------------------------------------------------------------


def test_transaction_commit_and_rollback(executor: Executor) -> None:
    with executor.transaction() as tx:
        executor.execute(INSERT, (1, 5, 10, "a")).close()
        executor.execute(INSERT, (2, 5, 20, "b")).close()
        assert tx.written == data_source_of(executor, 5)
    with executor.execute("SELECT COUNT(*) FROM t_order WHERE user_id = %s", (5,)) as r:
        assert r.fetchone() == (2,)

    with pytest.raises(RuntimeError):
        with executor.transaction():
            executor.execute(INSERT, (3, 5, 30, "c")).close()
            raise RuntimeError("boom")
    tx2 = executor.transaction()
    tx2.execute("DELETE FROM t_order WHERE user_id = %s", (5,)).close()
    tx2.rollback()
    assert tx2.state == "rolled back"
    with executor.execute("SELECT COUNT(*) FROM t_order WHERE user_id = %s", (5,)) as r:
        assert r.fetchone() == (2,)
    with pytest.raises(TransactionError):
        tx2.execute("SELECT 1 FROM t_order WHERE user_id = %s", (5,))


def test_cross_shard_write_is_refused_before_anything_is_sent(executor: Executor) -> None:
    a, b = users_on_different_sources(executor)
    ds_b = data_source_of(executor, b)
    executor.execute("SELECT 1 FROM t_order WHERE user_id = %s", (b,)).close()  # pools exist
    borrows_b = executor.pool_stats()[ds_b].borrows
    with executor.transaction() as tx:
        executor.execute(INSERT, (1, a, 1, "a")).close()
        with pytest.raises(CrossShardTransactionError) as info:
            executor.execute(INSERT, (2, b, 1, "b"))
        assert ds_b in str(info.value)
        # Not even a connection of the second data source was borrowed.
        assert executor.pool_stats()[ds_b].borrows == borrows_b
        assert tx.data_sources == (data_source_of(executor, a),)
    with executor.execute("SELECT user_id FROM t_order ORDER BY user_id") as r:
        assert r.fetchall() == [(a,)]

    # A single statement spanning two data sources is refused whole.
    with executor.transaction():
        with pytest.raises(CrossShardTransactionError):
            executor.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s), (%s, %s)", (5, a, 6, b))
    with executor.execute("SELECT COUNT(*) FROM t_order") as r:
        assert r.fetchone() == (1,)


def test_reads_across_shards_inside_a_transaction(executor: Executor) -> None:
    a, b = users_on_different_sources(executor)
    executor.execute(INSERT, (1, b, 1, "committed")).close()
    other = Executor(executor.config)
    try:
        with executor.transaction() as tx:
            executor.execute(INSERT, (2, a, 1, "mine")).close()
            # The pinned shard shows the transaction's own write, the other committed data.
            with executor.execute("SELECT note FROM t_order ORDER BY note") as r:
                assert r.fetchall() == [("committed",), ("mine",)]
            with other.execute("SELECT note FROM t_order ORDER BY note") as r:
                assert r.fetchall() == [("committed",)]
            assert set(tx.data_sources) == set(executor.config.data_sources)  # the full route read all four
            assert tx.written == data_source_of(executor, a)
        with other.execute("SELECT COUNT(*) FROM t_order") as r:
            assert r.fetchone() == (2,)
    finally:
        other.close()


def test_transactions_do_not_nest(executor: Executor) -> None:
    with executor.transaction():
        with pytest.raises(TransactionError):
            with executor.transaction():
                pass


def test_transaction_reads_go_to_the_primary_and_plain_reads_to_replicas(mysql_databases: list[str]) -> None:
    urls = {
        f"ds_{i}": {
            "url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": "",
            "replicas": [{"url": f"mysql://127.0.0.1:3306/{db}", "weight": 1}],
        }
        for i, db in enumerate(mysql_databases)
    }
    config = load_config(sharding_config(urls))
    with Executor(config) as ex:
        ex.execute("SELECT COUNT(*) FROM t_order WHERE user_id = %s", (1,)).close()
        ds = data_source_of(ex, 1)
        by_endpoint = {s.endpoint: s for s in ex.endpoint_stats() if s.data_source == ds}
        assert by_endpoint[f"{ds}.replica[0]"].borrows >= 1 and f"{ds}" not in by_endpoint
        ex.execute("UPDATE t_order SET amount = 1 WHERE user_id = %s", (1,)).close()
        with ex.transaction():
            ex.execute("SELECT COUNT(*) FROM t_order WHERE user_id = %s", (1,)).close()
        by_endpoint = {s.endpoint: s for s in ex.endpoint_stats() if s.data_source == ds}
        assert by_endpoint[ds].borrows == 2  # the UPDATE, then the transaction's pin
        assert by_endpoint[f"{ds}.replica[0]"].borrows == 1
        assert_no_leaks(ex)


# -- timeouts and concurrency (MariaDB) --------------------------------------------------------------


def _running_queries(text: str, databases: list[str]) -> list[Any]:
    """Statements like ``text`` running on ``databases`` (other tests' statements elsewhere are not ours)."""
    conn = mysql_raw()
    marks = ", ".join(["%s"] * len(databases))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, info FROM information_schema.processlist "
                        f"WHERE info LIKE %s AND db IN ({marks}) AND id <> CONNECTION_ID()",
                        (f"%{text}%", *databases))  # fmt: skip
            return list(cur.fetchall())
    finally:
        conn.close()


def test_timeout_cancels_the_statement(mysql_executor: Executor, mysql_databases: list[str]) -> None:
    start = time.monotonic()
    with pytest.raises(QueryTimeoutError) as info:
        mysql_executor.execute("SELECT SLEEP(5)", timeout=0.5)
    elapsed = time.monotonic() - start
    assert 0.45 < elapsed < 1.5
    assert info.value.data_source == "ds_0"
    assert isinstance(info.value, TimeoutError)
    time.sleep(0.1)
    assert _running_queries("SLEEP(5)", mysql_databases) == []  # KILL QUERY landed
    assert_no_leaks(mysql_executor)
    with mysql_executor.execute("SELECT 1 + %s", (1,)) as r:  # the pool still works
        assert r.fetchone() == (2,)


def _slow_shard(ex: Executor, seconds: int) -> tuple[int, str]:
    insert_users(ex, range(1, 41))
    slow_user = 17
    ex.execute("UPDATE t_order SET slow = %s WHERE user_id = %s", (seconds, slow_user)).close()
    return slow_user, data_source_of(ex, slow_user)


#: The fan-out deadline of the partial-results test (seconds).
DEADLINE_S = 1.5


def test_timeout_on_a_fan_out_and_partial_results(mysql_executor: Executor) -> None:
    # The deadline leaves the fast units time to answer on a loaded machine (at a load of 10+ on two
    # cores, half a second was too short for them), and stays far below the slow unit's 5 s.
    slow_user, slow_ds = _slow_shard(mysql_executor, 5)
    sql = "SELECT user_id, SLEEP(slow) FROM t_order"
    with pytest.raises(QueryTimeoutError) as info:
        mysql_executor.execute(sql, timeout=DEADLINE_S)
    assert slow_ds in str(info.value) and "allow_partial" in str(info.value)
    assert_no_leaks(mysql_executor)

    start = time.monotonic()
    with mysql_executor.execute(sql, timeout=DEADLINE_S, allow_partial=True) as r:
        rows = r.fetchall()
        assert r.complete is False
    assert time.monotonic() - start < DEADLINE_S + 2.0  # the deadline ended it, not the 5 s sleep
    users = {u for u, _ in rows}
    physical = mysql_executor.router.route("SELECT 1 FROM t_order WHERE user_id = %s", (slow_user,)).units[0].tables
    # Every row except those sharing the slow user's physical table arrived.
    lost = {u for u in range(1, 41)
            if mysql_executor.router.route("SELECT 1 FROM t_order WHERE user_id = %s", (u,)).units[0].tables == physical}
    assert users == set(range(1, 41)) - lost and slow_user in lost
    assert_no_leaks(mysql_executor)

    partial = Executor(mysql_executor.config, timeout=DEADLINE_S, allow_partial=True)
    try:
        with partial.execute(sql) as r:
            assert not r.complete and len(r.fetchall()) == len(rows)
    finally:
        partial.close()


def test_a_write_that_times_out_always_raises(mysql_executor: Executor) -> None:
    _slow_shard(mysql_executor, 5)
    with pytest.raises(QueryTimeoutError):
        mysql_executor.execute("UPDATE t_order SET amount = amount + SLEEP(slow)", timeout=0.5, allow_partial=True)
    assert_no_leaks(mysql_executor)


def test_full_route_statements_pass_a_semaphore(mysql_executor: Executor) -> None:
    with Executor(mysql_executor.config, full_route_concurrency=1, timeout=3.0) as ex:
        insert_users(ex, range(1, 41))
        ex.execute("UPDATE t_order SET slow = 1 WHERE user_id = %s", (17,)).close()
        done = threading.Event()
        errors: list[BaseException] = []

        def slow_full_route() -> None:
            try:
                ex.execute("SELECT user_id, SLEEP(slow) FROM t_order").close()
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                done.set()

        t = threading.Thread(target=slow_full_route)
        t.start()
        time.sleep(0.2)
        with pytest.raises(QueryTimeoutError) as info:
            ex.execute("SELECT COUNT(*) FROM t_order", timeout=0.3)
        assert "full-route" in str(info.value)
        with ex.execute("SELECT COUNT(*) FROM t_order WHERE user_id = %s", (3,)) as r:  # not full: not blocked
            assert r.fetchone() == (1,)
        t.join()
        assert not errors
        with ex.execute("SELECT COUNT(*) FROM t_order", timeout=1.0) as r:  # the slot came back
            assert r.fetchone() == (40,)
        assert_no_leaks(ex)


def test_fan_out_is_bounded_by_max_concurrency(mysql_config: Any) -> None:
    sql = "SELECT SLEEP(0.25) FROM t_dict"
    with Executor(mysql_config, max_concurrency=2) as ex:
        ex.execute("INSERT INTO t_dict (id, name) VALUES (1, 'x')").close()
        # Reading a broadcast table hits one data source; force all four with explicit units.
        plan = ex.router.route(sql)
        units = tuple(plan.units[0]._replace(data_source=ds) for ds in ex.config.data_sources)
        wide = RoutePlan(units, RouteKind.BROADCAST, statement="select")
        start = time.monotonic()
        ex.execute_plan(wide).close()
        two = time.monotonic() - start
        ex.runner.max_concurrency = 4
        ex.runner.close()  # the next fan-out starts a pool of 4 threads
        ex.runner.closed = False
        start = time.monotonic()
        ex.execute_plan(wide).close()
        four = time.monotonic() - start
        ex.execute("DELETE FROM t_dict").close()
    # 4 units of 0.25 s: two waves with 2 threads, one wave with 4.
    assert two >= 0.5 and four < two - 0.15, (two, four)


def test_sqlite_timeout_interrupts(sqlite_executor: Executor) -> None:
    values = ", ".join(f"('n{i}')" for i in range(400))
    sqlite_executor.execute(f"INSERT INTO t_config (name) VALUES {values}").close()
    start = time.monotonic()
    with pytest.raises(QueryTimeoutError):
        sqlite_executor.execute("SELECT COUNT(*) FROM t_config a, t_config b, t_config c", timeout=0.3)
    assert time.monotonic() - start < 1.5
    assert_no_leaks(sqlite_executor)
    with sqlite_executor.execute("SELECT COUNT(*) FROM t_config") as r:
        assert r.fetchone() == (400,)


# -- streaming -----------------------------------------------------------------------------------------


def test_streamed_results_hold_connections_until_read(mysql_executor: Executor) -> None:
    insert_users(mysql_executor, range(1, 1201))
    ex = Executor(mysql_executor.config, fetch_batch=50)
    try:
        r = ex.execute("SELECT user_id FROM t_order ORDER BY user_id")
        assert isinstance(r, Result) and r.units == 4  # one UNION ALL per data source
        held = ex.borrowed()
        assert held > 0  # units with more than one batch stream on their connections
        got = [row[0] for row in r]
        assert got == list(range(1, 1201))
        assert ex.borrowed() == 0
        with ex.execute("SELECT user_id FROM t_order ORDER BY user_id LIMIT 5") as small:
            assert ex.borrowed() == 0  # a small LIMIT window is fetched per unit
            assert small.fetchall() == [(1,), (2,), (3,), (4,), (5,)]
    finally:
        ex.close()


def test_warm_up_opens_min_idle(mysql_config: Any) -> None:
    with Executor(mysql_config) as ex:
        idle = ex.warm_up()
        assert set(idle) == set(mysql_config.data_sources) and all(v == 2 for v in idle.values())
        stats = ex.pool_stats()
        assert all(s.idle == 2 and s.borrowed == 0 and s.max_size == 8 for s in stats.values())


def test_pipelined_and_fanned_out_units_give_the_same_results(mysql_executor: Executor) -> None:
    """Buffered multi-unit statements on MariaDB are pipelined by default: same rows, types, counts and errors."""
    rows = [(i, i % 37, i * 3, None if i % 5 else f"n{i}") for i in range(1, 301)]
    mysql_executor.execute(f"INSERT INTO t_order (order_id, user_id, amount, note) VALUES {', '.join(['(%s, %s, %s, %s)'] * len(rows))}",
                           [v for r in rows for v in r]).close()
    fanned = Executor(mysql_executor.config, pipeline=False)
    try:
        for sql, params in [
            ("SELECT order_id, user_id, amount, note FROM t_order ORDER BY order_id", None),
            ("SELECT user_id, COUNT(*), SUM(amount), AVG(amount), MAX(note) FROM t_order GROUP BY user_id ORDER BY user_id", None),
            ("SELECT note FROM t_order WHERE user_id IN (%s, %s, %s) ORDER BY order_id DESC LIMIT 7", (3, 4, 5)),
            ("SELECT COUNT(*) FROM t_order WHERE note LIKE %s", ("n1%",)),
        ]:
            with mysql_executor.execute(sql, params) as a, fanned.execute(sql, params) as b:
                assert a.units > 1
                rows_a, rows_b = a.fetchall(), b.fetchall()
                assert rows_a == rows_b and rows_a, sql
                assert [[type(v) for v in r] for r in rows_a] == [[type(v) for v in r] for r in rows_b], sql
                assert a.description == b.description
        with mysql_executor.execute("UPDATE t_order SET amount = amount + 1 WHERE user_id IN (%s, %s)", (1, 2)) as u:
            assert u.units > 1 and u.rowcount == sum(1 for r in rows if r[1] in (1, 2))
        for ex in (mysql_executor, fanned):
            with pytest.raises(ExecutionError) as info:
                ex.execute("SELECT no_such_column FROM t_order")
            assert "no_such_column" in str(info.value)
        assert_no_leaks(mysql_executor, wait=0)
        assert_no_leaks(fanned, wait=0)
    finally:
        fanned.close()
