"""A migration's dual writes (``RoutePlan.dual``) on real MariaDB: autocommit, local and XA transactions, metrics.

The router's migration support is built elsewhere, so each plan here is routed
by an ordinary :class:`Router` and given its dual units by hand: the same
statement rewritten to another physical table (``t_order_new``) on another data
source (``ds_2``), or on the data source the statement writes (``t_order_mv``).
What landed where is read behind ddm-core's back (``mariadb_rows``). Every test
ends with no connection borrowed from any pool.

Each case runs on the thread executor and on the asyncio one (``tests/runners.py``); the last two
are asyncio's own: a cancel during a dual unit, and transactions cancelled at random points.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from ddm_core import load_config, metrics
from ddm_core.aio.executor import AsyncExecutor
from ddm_core.aio.transaction import AsyncTransaction
from ddm_core.errors import (
    CrossShardTransactionError,
    DuplicateKeyError,
    ExecutionError,
    QueryTimeoutError,
    TransactionError,
)
from ddm_core.execute import Executor
from ddm_core.execute.shared import DualWriteKey, Throttle
from ddm_core.route.plan import RouteKind, RoutePlan, RouteUnit
from runners import RUNNERS, BlockingAsyncExecutor, cancel_after
from services import fresh_mariadb_databases, mariadb_connect, mariadb_rows
from ports import free_port
from test_execute_support import ORDER_DDL, assert_no_leaks, running_mariadb, sharding_config

INSERT = "INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)"
UPDATE = "UPDATE t_order SET amount = %s WHERE user_id = %s"
NEW = DualWriteKey("ds_2", "t_order")


class Env:
    """Three databases: ``t_order`` sharded over ds_0 / ds_1 (one table each), ds_2 the new location."""

    def __init__(self, dbs: list[str], extra: dict[str, Any]) -> None:
        self.dbs = dbs
        urls: dict[str, Any] = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
                                for i, db in enumerate(dbs[:2])}  # fmt: skip
        raw = sharding_config(urls, tables=1, pool={"maxSize": 4, "minIdle": 0, "acquireTimeoutMs": 1000})
        raw["dataSources"]["ds_2"] = {"url": f"mysql://127.0.0.1:3306/{dbs[2]}", "username": "root", "password": ""}
        raw["dataSources"].update(extra)
        raw["xa"] = {"logDataSource": "ds_0", "timeoutMs": 20_000, "abandonAfterMs": 60_000, "maxConcurrent": 4}
        self.config = load_config(raw)
        conn = mariadb_connect()
        with conn.cursor() as cur:
            for i in range(2):
                cur.execute(ORDER_DDL.replace("t_order", f"`{dbs[i]}`.t_order"))
                cur.execute(ORDER_DDL.replace("t_order", f"`{dbs[i]}`.t_order_mv"))  # a new table on the same source
            cur.execute(ORDER_DDL.replace("t_order", f"`{dbs[2]}`.t_order_new"))
        conn.close()

    def rows(self, ds: str, table: str) -> list[tuple[Any, ...]]:
        return mariadb_rows(self.dbs[int(ds[-1])], f"SELECT order_id, user_id, amount FROM {table} ORDER BY order_id")


@pytest.fixture()
def env() -> Iterator[Env]:
    closed = f"mysql://127.0.0.1:{free_port()}/nothing"  # nothing listens there: every connect is refused
    with fresh_mariadb_databases(3) as dbs:
        yield Env(dbs, {"ds_down": {"url": closed, "username": "root", "password": ""}})


def executor_on(runner: str, config: Any) -> Any:
    """A thread ``Executor``, or an ``AsyncExecutor`` with its calls (tests/runners.py)."""
    if runner == "asyncio":
        return BlockingAsyncExecutor(config, timeout=3.0)
    return Executor(config, timeout=3.0, replica_monitor=False)


@pytest.fixture()
def ex(env: Env, request: pytest.FixtureRequest) -> Iterator[Executor]:
    """The thread executor; tests marked ``on_both_runners`` also run on the asyncio executor."""
    executor = executor_on(getattr(request, "param", "threads"), env.config)
    yield executor
    try:
        if hasattr(executor, "settle"):
            executor.settle()
        assert_no_leaks(executor)
        assert executor.borrowed() == 0
    finally:
        executor.close()


#: Dual writes run the same on both runners, outside transactions and inside local and XA ones.
on_both_runners = pytest.mark.parametrize("ex", RUNNERS, indirect=True)


def with_dual(ex: Executor, sql: str, params: Any, *targets: tuple[str, str]) -> RoutePlan:
    """``sql`` routed as usual, plus one dual unit per ``(data source, physical table)``: the same SQL there."""
    plan = ex.router.route(sql, params)
    (unit,) = plan.units
    logic, physical = unit.tables[0]
    dual = tuple(RouteUnit(ds, unit.sql.replace(physical, table), unit.params, ((logic, table),)) for ds, table in targets)
    return plan._replace(dual=dual)


def home(ex: Executor, user_id: int) -> tuple[str, str]:
    """The data source and physical table user ``user_id``'s rows live in (the old location)."""
    unit = ex.router.route("SELECT * FROM t_order WHERE user_id = %s", (user_id,)).units[0]
    return unit.data_source, unit.tables[0][1]


def users_on(ex: Executor) -> tuple[int, int]:
    """A user id whose rows live on ds_0 and one on ds_1."""
    found: dict[str, int] = {}
    for user in range(1, 1000):
        found.setdefault(home(ex, user)[0], user)
        if len(found) == 2:
            return found["ds_0"], found["ds_1"]
    raise AssertionError("no user on each data source")


# -- autocommit -----------------------------------------------------------------------------------


@on_both_runners
def test_dual_rows_land_at_the_new_location(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    targets = (("ds_2", "t_order_new"), ("ds_0", "t_order_mv"))  # another data source, and the same one
    plan = with_dual(ex, INSERT, (1, u0, 10), *targets)
    result = ex.execute_plan(plan)
    assert (result.rowcount, result.lastrowid, result.generated_keys) == (1, None, ())
    assert env.rows("ds_0", "t_order") == env.rows("ds_2", "t_order_new") == env.rows("ds_0", "t_order_mv") == [(1, u0, 10)]

    result = ex.execute_plan(with_dual(ex, UPDATE, (25, u0), *targets))
    assert result.rowcount == 1  # the old location's count, not the sum
    assert env.rows("ds_2", "t_order_new") == env.rows("ds_0", "t_order_mv") == [(1, u0, 25)]
    ex.execute_plan(with_dual(ex, "DELETE FROM t_order WHERE user_id = %s", (u0,), *targets))
    assert env.rows("ds_0", "t_order") == env.rows("ds_2", "t_order_new") == env.rows("ds_0", "t_order_mv") == []
    assert ex.dual_writes() == {NEW: 3, DualWriteKey("ds_0", "t_order"): 3}
    assert ex.dual_write_failures() == {}


@on_both_runners
def test_generated_keys_and_rowcount_are_the_primary_units(env: Env, ex: Executor) -> None:
    _, u1 = users_on(ex)
    plan = ex.router.route("INSERT INTO t_order (user_id, amount) VALUES (%s, %s)", (u1, 7))
    assert plan.generated_keys  # snowflake order_id
    (unit,) = plan.units
    dual = RouteUnit("ds_2", unit.sql.replace(unit.tables[0][1], "t_order_new"), unit.params, (("t_order", "t_order_new"),))
    result = ex.execute_plan(plan._replace(dual=(dual, dual)))  # the second one is a duplicate key there
    assert result.rowcount == 1 and result.generated_keys == plan.generated_keys
    assert [r[0] for r in env.rows("ds_2", "t_order_new")] == list(plan.generated_keys)
    assert ex.dual_writes() == {NEW: 1} and ex.dual_write_failures() == {NEW: 1}


@on_both_runners
def test_a_failed_primary_runs_no_dual_unit(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    ex.execute(INSERT, (1, u0, 10)).close()
    with pytest.raises(DuplicateKeyError):
        ex.execute_plan(with_dual(ex, INSERT, (1, u0, 99), ("ds_2", "t_order_new")))
    assert env.rows("ds_2", "t_order_new") == []
    assert ex.dual_writes() == {} and ex.dual_write_failures() == {}


@on_both_runners
def test_missing_table_at_the_new_location_is_counted_and_logged(
    env: Env, ex: Executor, caplog: pytest.LogCaptureFixture
) -> None:
    u0, _ = users_on(ex)
    caplog.set_level(logging.WARNING, "ddm_core.execute")
    for order_id in (1, 2, 3):
        result = ex.execute_plan(with_dual(ex, INSERT, (order_id, u0, 1), ("ds_2", "t_missing")))
        assert result.rowcount == 1
    assert [r[0] for r in env.rows("ds_0", "t_order")] == [1, 2, 3]
    assert ex.dual_write_failures() == {NEW: 3} and ex.dual_writes() == {}
    warnings = [r.getMessage() for r in caplog.records if "dual write" in r.getMessage()]
    assert len(warnings) == 1  # once per data source per 10 s
    assert "t_missing" in warnings[0] and "'ds_2'" in warnings[0] and "doesn't exist" in warnings[0]


@on_both_runners
def test_duplicate_key_at_the_new_location(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    conn = mariadb_connect(database=env.dbs[2])
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order_new (order_id, user_id, amount) VALUES (1, %s, 5)", (u0,))
    conn.close()
    seen: list[tuple[RouteUnit, BaseException]] = []

    class Observer:
        def finished(self, plan: Any, started: float, result: Any) -> None: ...
        def failed(self, plan: Any, started: float, error: BaseException) -> None: ...
        def dual_write_done(self, plan: Any, unit: RouteUnit) -> None: ...
        def dual_write_failed(self, plan: Any, unit: RouteUnit, error: BaseException) -> None:
            seen.append((unit, error))

    ex.set_observer(Observer())
    plan = with_dual(ex, INSERT, (1, u0, 10), ("ds_2", "t_order_new"))
    assert ex.execute_plan(plan).rowcount == 1
    assert env.rows("ds_0", "t_order") == [(1, u0, 10)] and env.rows("ds_2", "t_order_new") == [(1, u0, 5)]
    assert [(u, type(e)) for u, e in seen] == [(plan.dual[0], DuplicateKeyError)]
    assert ex.dual_write_failures() == {NEW: 1}


@on_both_runners
def test_an_observer_without_the_dual_hooks_keeps_working(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    finished: list[RoutePlan] = []

    class Plain:
        def finished(self, plan: RoutePlan, started: float, result: Any) -> None:
            finished.append(plan)

        def failed(self, plan: RoutePlan, started: float, error: BaseException) -> None: ...

    ex.set_observer(Plain())
    plan = with_dual(ex, INSERT, (1, u0, 10), ("ds_2", "t_order_new"), ("ds_2", "t_missing"))
    ex.execute_plan(plan).close()
    assert finished == [plan]
    assert ex.dual_writes() == {NEW: 1} and ex.dual_write_failures() == {NEW: 1}


@on_both_runners
def test_a_data_source_that_is_down(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    plan = with_dual(ex, INSERT, (1, u0, 10), ("ds_down", "t_order_new"), ("ds_2", "t_order_new"))
    assert ex.execute_plan(plan).rowcount == 1
    assert env.rows("ds_2", "t_order_new") == [(1, u0, 10)]  # the next dual unit still ran
    assert ex.dual_write_failures() == {DualWriteKey("ds_down", "t_order"): 1}
    assert ex.dual_writes() == {NEW: 1}


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_private_server_stopped_mid_run(env: Env, tmp_path: Path, runner: str) -> None:
    with running_mariadb(tmp_path) as server:
        conn = server.raw()
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE moved")
            cur.execute(ORDER_DDL.replace("t_order", "moved.t_order_new"))
        conn.close()
        urls: dict[str, Any] = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{env.dbs[i]}", "username": "root",
                                            "password": ""} for i in range(2)}  # fmt: skip
        raw = sharding_config(urls, tables=1, pool={"maxSize": 4, "minIdle": 0, "acquireTimeoutMs": 1000})
        raw["dataSources"]["ds_private"] = {"url": f"mysql://127.0.0.1:{server.port}/moved", "username": "root",
                                            "password": ""}  # fmt: skip
        config = load_config(raw)
        with executor_on(runner, config) as ex:
            u0, _ = users_on(ex)
            ex.execute_plan(with_dual(ex, INSERT, (1, u0, 1), ("ds_private", "t_order_new"))).close()
            server.kill()
            for order_id in (2, 3):
                assert ex.execute_plan(with_dual(ex, INSERT, (order_id, u0, 1), ("ds_private", "t_order_new"))).rowcount == 1
            assert [r[0] for r in env.rows("ds_0", "t_order")] == [1, 2, 3]
            key = DualWriteKey("ds_private", "t_order")
            assert ex.dual_writes() == {key: 1} and ex.dual_write_failures() == {key: 2}
            assert_no_leaks(ex)

            # A shadow whose server dies before the COMMIT: the transaction commits, the lost unit is counted.
            server.start()
            with ex.transaction() as tx:
                tx.execute_plan(with_dual(ex, INSERT, (4, u0, 1), ("ds_private", "t_order_new")))
                assert tx.shadow_data_sources == ("ds_private",)
                server.kill()
            assert [r[0] for r in env.rows("ds_0", "t_order")] == [1, 2, 3, 4]
            assert ex.dual_writes() == {key: 2} and ex.dual_write_failures() == {key: 3}
            server.start()
            assert [r[0] for r in mariadb_rows("moved", "SELECT order_id FROM t_order_new", port=server.port)] == [1]
            assert_no_leaks(ex)


@on_both_runners
def test_a_dual_unit_past_the_deadline_is_cancelled_not_raised(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    plan = ex.router.route(INSERT, (1, u0, 10))
    slow = RouteUnit("ds_2", "DO SLEEP(5)", (), (("t_order", "t_order_new"),))
    seen: list[BaseException] = []
    ex.set_observer(type("O", (), {"finished": lambda *a: None, "failed": lambda *a: None,
                                   "dual_write_failed": lambda self, p, u, e: seen.append(e)})())  # fmt: skip
    result = ex.execute_plan(plan._replace(dual=(slow,)), timeout=0.5)
    assert result.rowcount == 1
    assert [type(e) for e in seen] == [QueryTimeoutError]
    assert ex.dual_write_failures() == {NEW: 1}


def test_throttle_lets_one_message_per_key_through_per_interval() -> None:
    now = [100.0]
    throttle = Throttle(10.0, clock=lambda: now[0])
    assert throttle.allow("ds_2") == 0
    assert throttle.allow("ds_2") is None and throttle.allow("ds_2") is None
    assert throttle.allow("ds_3") == 0  # per key
    now[0] += 9.9
    assert throttle.allow("ds_2") is None
    now[0] += 0.2
    assert throttle.allow("ds_2") == 3  # the three held back since


# -- transactions -----------------------------------------------------------------------------------


@on_both_runners
def test_transaction_commit_makes_both_visible_and_rollback_neither(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    with ex.transaction() as tx:
        tx.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_2", "t_order_new")))
        tx.execute_plan(with_dual(ex, INSERT, (2, u0, 20), ("ds_2", "t_order_new")))  # no CrossShardTransactionError
        assert tx.data_sources == ("ds_0",) and tx.shadow_data_sources == ("ds_2",) and tx.written == "ds_0"
        assert env.rows("ds_2", "t_order_new") == [] and env.rows("ds_0", "t_order") == []  # inside the tx
    assert env.rows("ds_0", "t_order") == env.rows("ds_2", "t_order_new") == [(1, u0, 10), (2, u0, 20)]

    tx = ex.transaction()
    with tx:
        tx.execute_plan(with_dual(ex, INSERT, (3, u0, 30), ("ds_2", "t_order_new")))
        tx.rollback()
    assert [r[0] for r in env.rows("ds_0", "t_order")] == [r[0] for r in env.rows("ds_2", "t_order_new")] == [1, 2]
    assert ex.dual_writes() == {NEW: 3} and ex.dual_write_failures() == {}


@on_both_runners
def test_a_rollback_to_a_savepoint_after_a_dual_write_fails_the_transaction(env: Env, ex: Executor) -> None:
    """The copy would stay ahead of the rows it copies: the whole transaction is rolled back instead."""
    u0, _ = users_on(ex)
    with pytest.raises(TransactionError, match="dual writes ran in this transaction"):
        with ex.transaction() as tx:
            tx.savepoint("before")
            tx.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_2", "t_order_new")))
            tx.rollback_to_savepoint("before")
    assert env.rows("ds_0", "t_order") == env.rows("ds_2", "t_order_new") == []


@on_both_runners
def test_transaction_rolled_back_by_an_error_rolls_back_the_shadow(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    with pytest.raises(RuntimeError), ex.transaction() as tx:
        tx.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_2", "t_order_new")))
        raise RuntimeError("the application gives up")
    assert env.rows("ds_0", "t_order") == env.rows("ds_2", "t_order_new") == []


@on_both_runners
def test_a_failed_shadow_does_not_fail_the_commit_and_skips_its_later_units(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    with ex.transaction() as tx:
        tx.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_2", "t_order_new")))  # ran, then lost:
        tx.execute_plan(with_dual(ex, INSERT, (2, u0, 20), ("ds_2", "t_missing")))  # fails: shadow rolled back
        tx.execute_plan(with_dual(ex, INSERT, (3, u0, 30), ("ds_2", "t_order_new")))  # skipped
        assert tx.shadow_data_sources == () and tx.active
    assert [r[0] for r in env.rows("ds_0", "t_order")] == [1, 2, 3]
    assert env.rows("ds_2", "t_order_new") == []
    assert ex.dual_writes() == {NEW: 1}
    assert ex.dual_write_failures() == {NEW: 3}  # the failed one, the one rolled back with it, the skipped one


@on_both_runners
def test_a_shadow_on_a_server_that_is_down(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    with ex.transaction() as tx:
        for order_id in (1, 2):
            tx.execute_plan(with_dual(ex, INSERT, (order_id, u0, 1), ("ds_down", "t_order_new"), ("ds_2", "t_order_new")))
    assert [r[0] for r in env.rows("ds_0", "t_order")] == [r[0] for r in env.rows("ds_2", "t_order_new")] == [1, 2]
    assert ex.dual_write_failures() == {DualWriteKey("ds_down", "t_order"): 2}  # a refused connect, then skipped


@on_both_runners
def test_a_dual_unit_on_the_written_data_source_shares_its_transaction(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    with ex.transaction() as tx:
        tx.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_0", "t_order_mv")))
        assert tx.shadow_data_sources == () and tx.data_sources == ("ds_0",)
        assert env.rows("ds_0", "t_order_mv") == []
        # ... but visible on the transaction's own connection: the same pin.
        count = RoutePlan((RouteUnit("ds_0", "SELECT COUNT(*) FROM t_order_mv"),), RouteKind.SINGLE)
        assert list(tx.execute_plan(count)) == [(1,)]
    assert env.rows("ds_0", "t_order_mv") == env.rows("ds_0", "t_order") == [(1, u0, 10)]
    with ex.transaction() as tx:
        tx.execute_plan(with_dual(ex, INSERT, (2, u0, 20), ("ds_0", "t_order_mv")))
        tx.rollback()
    assert [r[0] for r in env.rows("ds_0", "t_order_mv")] == [1]
    assert ex.dual_writes() == {DualWriteKey("ds_0", "t_order"): 2}


@on_both_runners
def test_a_duplicate_key_on_the_shared_pin_keeps_the_transaction(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    conn = mariadb_connect(database=env.dbs[0])
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order_mv (order_id, user_id, amount) VALUES (1, %s, 5)", (u0,))
    conn.close()
    with ex.transaction() as tx:
        tx.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_0", "t_order_mv")))
        tx.execute_plan(with_dual(ex, INSERT, (2, u0, 20), ("ds_0", "t_order_mv")))
        assert tx.active
    assert [r[0] for r in env.rows("ds_0", "t_order")] == [1, 2]
    assert env.rows("ds_0", "t_order_mv") == [(1, u0, 5), (2, u0, 20)]
    assert ex.dual_write_failures() == {DualWriteKey("ds_0", "t_order"): 1}


@on_both_runners
def test_a_deadline_ending_the_shared_pins_dual_unit_fails_the_transaction(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    plan = ex.router.route(INSERT, (1, u0, 10))
    slow = RouteUnit("ds_0", "DO SLEEP(5)", (), (("t_order", "t_order_mv"),))
    tx = ex.transaction()
    with pytest.raises(TransactionError, match="rolled back"), tx:
        tx.execute_plan(plan._replace(dual=(slow,)), timeout=0.5)  # the statement itself succeeds
        assert tx.state == "failed"
    assert env.rows("ds_0", "t_order") == []  # its writes were on the cancelled connection
    assert ex.dual_write_failures() == {DualWriteKey("ds_0", "t_order"): 1}


@on_both_runners
def test_a_read_only_pin_carrying_dual_writes_commits_after_the_written_one(env: Env, ex: Executor) -> None:
    u0, u1 = users_on(ex)
    ex.execute(INSERT, (9, u1, 9)).close()
    with ex.transaction() as tx:
        assert [r[0] for r in tx.execute("SELECT order_id FROM t_order WHERE user_id = %s", (u1,))] == [9]  # pins ds_1
        tx.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_1", "t_order_mv")))
        assert tx.data_sources == ("ds_1", "ds_0") and tx.shadow_data_sources == ()
    assert env.rows("ds_1", "t_order_mv") == env.rows("ds_0", "t_order") == [(1, u0, 10)]


@on_both_runners
def test_a_shadow_the_transaction_later_reads_becomes_a_participant(env: Env, ex: Executor) -> None:
    u0, u1 = users_on(ex)
    with ex.transaction() as tx:
        tx.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_1", "t_order_mv")))
        assert tx.shadow_data_sources == ("ds_1",)
        assert list(tx.execute("SELECT order_id FROM t_order WHERE user_id = %s", (u1,))) == []
        assert tx.shadow_data_sources == () and set(tx.data_sources) == {"ds_0", "ds_1"}
        with pytest.raises(CrossShardTransactionError):  # still one written data source for its own writes
            tx.execute(INSERT, (2, u1, 20))
    assert env.rows("ds_1", "t_order_mv") == env.rows("ds_0", "t_order") == [(1, u0, 10)]


@on_both_runners
def test_dual_units_never_trigger_the_cross_shard_check(env: Env, ex: Executor) -> None:
    u0, u1 = users_on(ex)
    with ex.transaction() as tx:
        tx.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_1", "t_order_mv"), ("ds_2", "t_order_new")))
        tx.execute_plan(with_dual(ex, UPDATE, (11, u0), ("ds_1", "t_order_mv"), ("ds_2", "t_order_new")))
        assert tx.written == "ds_0"
    assert env.rows("ds_1", "t_order_mv") == env.rows("ds_2", "t_order_new") == [(1, u0, 11)]
    assert ex.dual_write_failures() == {}


@on_both_runners
def test_xa_transaction_commits_branches_then_the_shadow(env: Env, ex: Executor) -> None:
    u0, u1 = users_on(ex)
    with ex.transaction(mode="xa") as tx:
        tx.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_2", "t_order_new")))
        tx.execute_plan(with_dual(ex, INSERT, (2, u1, 20), ("ds_2", "t_order_new"), ("ds_0", "t_order_mv")))
        assert tx.shadow_data_sources == ("ds_2",)
    assert env.rows("ds_2", "t_order_new") == [(1, u0, 10), (2, u1, 20)]
    assert env.rows("ds_0", "t_order_mv") == [(2, u1, 20)]  # inside ds_0's branch
    assert [r[0] for r in env.rows("ds_1", "t_order")] == [2]
    with ex.transaction(mode="xa") as tx:
        tx.execute_plan(with_dual(ex, INSERT, (3, u0, 30), ("ds_2", "t_order_new")))
        tx.rollback()
    assert [r[0] for r in env.rows("ds_2", "t_order_new")] == [1, 2]


@on_both_runners
def test_xa_transaction_reaching_a_shadow_rolls_the_shadow_back(env: Env, ex: Executor) -> None:
    u0, u1 = users_on(ex)
    with ex.transaction(mode="xa") as tx:
        tx.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_1", "t_order_mv")))
        tx.execute(INSERT, (2, u1, 20))  # ds_1 as a branch: the plain shadow there cannot join it
        assert tx.shadow_data_sources == ()
    assert env.rows("ds_1", "t_order_mv") == []
    assert [r[0] for r in env.rows("ds_1", "t_order")] == [2]
    assert ex.dual_write_failures() == {DualWriteKey("ds_1", "t_order"): 1}


# -- metrics ---------------------------------------------------------------------------------------------


@on_both_runners
def test_prometheus_counters(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    m = metrics.install(CollectorRegistry(), executor=ex)
    try:
        ex.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_2", "t_order_new"), ("ds_down", "t_order_new"))).close()
        ex.execute_plan(with_dual(ex, INSERT, (2, u0, 10), ("ds_2", "t_missing"))).close()
        with ex.transaction() as tx:
            tx.execute_plan(with_dual(ex, INSERT, (3, u0, 30), ("ds_2", "t_order_new")))
        samples = {
            (s.name, s.labels.get("table"), s.labels.get("data_source")): s.value
            for family in text_string_to_metric_families(m.text())
            for s in family.samples
            if s.name.startswith("ddm_dual_")
        }
    finally:
        m.uninstall()
    assert samples == {
        ("ddm_dual_writes_total", "t_order", "ds_2"): 2.0,
        ("ddm_dual_write_failures_total", "t_order", "ds_2"): 1.0,
        ("ddm_dual_write_failures_total", "t_order", "ds_down"): 1.0,
    }


@on_both_runners
def test_a_data_source_that_is_not_configured_is_counted_too(env: Env, ex: Executor) -> None:
    u0, _ = users_on(ex)
    seen: list[BaseException] = []
    ex.set_observer(type("O", (), {"finished": lambda *a: None, "failed": lambda *a: None,
                                   "dual_write_failed": lambda self, p, u, e: seen.append(e)})())  # fmt: skip
    assert ex.execute_plan(with_dual(ex, INSERT, (1, u0, 10), ("ds_nowhere", "t_order_new"))).rowcount == 1
    assert ex.dual_write_failures() == {DualWriteKey("ds_nowhere", "t_order"): 1}
    assert [type(e) for e in seen] == [ExecutionError]


# -- asyncio: cancels ------------------------------------------------------------------------------------

CANCEL_ROUNDS = 300
BUMP = "UPDATE t_order SET amount = amount + 1 WHERE user_id = %s AND order_id = %s"
#: A shadow (ds_2), the written pin (ds_0), and ds_1: a read-only pin, a shadow, or a shadow adopted by a read.
TARGETS = (("ds_2", "t_order_new"), ("ds_0", "t_order_mv"), ("ds_1", "t_order_mv"))
LOCATIONS = (("ds_0", "t_order"), ("ds_2", "t_order_new"), ("ds_0", "t_order_mv"), ("ds_1", "t_order_mv"))


def test_asyncio_a_cancel_during_a_dual_unit_fails_the_transaction(env: Env) -> None:
    """Cancelled while a dual unit runs on the written pin, or on a shadow: the statement's writes were made, the
    dual write's fate is unknown, so the transaction is failed (its commit rolls back); a cut shadow is discarded
    at once. Nothing is counted: the old location's write is rolled back too."""

    async def main() -> None:
        async with AsyncExecutor(env.config, timeout=5.0, replica_monitor=False) as ex:
            u0, _ = users_on(ex)
            plan = ex.router.route(INSERT, (1, u0, 10))
            for where in ("ds_0", "ds_2"):  # the written pin, a shadow
                slow = RouteUnit(where, "DO SLEEP(5)", (), (("t_order", "t_order_mv"),))
                tx = ex.transaction()
                task = asyncio.ensure_future(tx.execute_plan(plan._replace(dual=(slow,))))
                await asyncio.sleep(0.3)  # the INSERT is done, the dual unit sleeps
                assert tx.data_sources == ("ds_0",) and ex.borrowed() == (1 if where == "ds_0" else 2)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert tx.state == "failed" and tx.shadow_data_sources == () and ex.borrowed() == 1, where
                with pytest.raises(TransactionError, match="rolled back"):
                    await tx.commit()
                await ex.settle()
                assert ex.borrowed() == 0, where
            assert ex.dual_writes() == {} and ex.dual_write_failures() == {}

    asyncio.run(main())
    assert env.rows("ds_0", "t_order") == env.rows("ds_0", "t_order_mv") == env.rows("ds_2", "t_order_new") == []


def test_asyncio_transactions_with_dual_writes_cancelled_at_random_points(env: Env) -> None:
    """A cancel anywhere in an asyncio transaction with dual writes (its statements, their dual units on the written
    pin, a read-only pin or a shadow, a shadow's borrow and BEGIN, the commit) ends it committed or rolled back.
    After each: every pool at rest; no dual write counted as failed, every dual unit of a committed transaction
    counted as done; the old location and the three new ones hold the same rows, the transaction's everywhere if
    it committed and nowhere if it rolled back."""
    rnd = random.Random(20261206)
    outcomes = {"returned": 0, "cancelled, committed": 0, "cancelled, rolled back": 0}

    def rows_everywhere() -> list[list[tuple[Any, ...]]]:
        return [env.rows(ds, table) for ds, table in LOCATIONS]

    async def main() -> None:
        async with AsyncExecutor(env.config, timeout=5.0, replica_monitor=False) as ex:
            u0, u1 = users_on(ex)
            holder: list[AsyncTransaction] = []

            async def read(tx: AsyncTransaction) -> None:  # pins ds_1
                await (await tx.execute("SELECT order_id FROM t_order WHERE user_id = %s", (u1,))).fetchall()

            async def one(order_id: int, variant: str) -> None:
                tx = ex.transaction()
                holder.append(tx)
                async with tx:
                    if variant == "read first":  # ds_1's dual units on a read-only pin, committed after ds_0
                        await read(tx)
                    await tx.execute_plan(with_dual(ex, INSERT, (order_id, u0, order_id), *TARGETS))
                    if variant == "read after":  # ds_1's shadow adopted as a participant
                        await read(tx)
                    await tx.execute_plan(with_dual(ex, BUMP, (u0, order_id), *TARGETS))

            took = []
            for order_id in range(1, 10):  # how long an uncancelled transaction takes, connections open
                started = time.monotonic()
                await one(order_id, ("read first", "read after", "no read")[order_id % 3])
                took.append(time.monotonic() - started)
            span = sorted(took)[len(took) // 2] * 1.2
            expected = [(order_id, u0, order_id + 1) for order_id in range(1, 10)]
            assert rows_everywhere() == [expected] * 4
            assert ex.dual_writes() == {DualWriteKey(ds, "t_order"): 18 for ds in ("ds_0", "ds_1", "ds_2")}

            for order_id in range(10, 10 + CANCEL_ROUNDS):
                holder.clear()
                variant = rnd.choice(["read first", "read after", "no read"])
                before = ex.dual_writes()
                if order_id % 15 == 0:  # uncancelled and timed: the span follows the machine's load (the tests
                    started = time.monotonic()  # beside this one) over the rounds
                    task = asyncio.ensure_future(one(order_id, variant))
                    await task
                    took.append(time.monotonic() - started)
                    span = sorted(took[-9:])[4] * 1.2
                else:
                    task = await cancel_after(one(order_id, variant), rnd.uniform(0, span))
                await ex.settle()
                where = f"transaction {order_id} ({variant})"
                state = holder[0].state if holder else "rolled back"
                assert state in ("committed", "rolled back"), (where, state)
                outcomes["returned" if not task.cancelled() else f"cancelled, {state}"] += 1
                assert ex.borrowed() == 0, (where, ex.pool_stats())
                for stats in ex.pool_stats().values():
                    assert stats.open == stats.idle, (where, stats)
                assert ex.dual_write_failures() == {}, where
                done = {key: n - before.get(key, 0) for key, n in ex.dual_writes().items()}
                if state == "committed":
                    assert set(done.values()) == {2}, (where, done)
                    expected.append((order_id, u0, order_id + 1))
                else:
                    assert all(0 <= n <= 2 for n in done.values()), (where, done)
                assert rows_everywhere() == [expected] * 4, where

    asyncio.run(main())
    assert outcomes["cancelled, committed"] > 0 and outcomes["cancelled, rolled back"] > 0, outcomes
