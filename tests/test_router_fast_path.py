"""The router's fast path is taken, for every built-in algorithm, and agrees with the general path.

A fast path that fails silently costs ten times its price on every call, so a
miss is counted (``Router.cache_info().fast_path_misses``) and named in the
plan's reason. For each algorithm type a table is sharded by it (database and
table level where its target names allow), and single-shard statements — a
point SELECT, a SELECT with extra conditions / ORDER BY / LIMIT, UPDATE and
DELETE by key, a one-row INSERT — are routed for many keys: each must report a
fast path, route with zero misses, and give exactly the plan of the general
path (a hint that changes nothing forces that one).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pytest

from ddm_core.algorithms import ShardingAlgorithm, registry
from ddm_core.algorithms._props import Props
from ddm_core.errors import ShardValueError
from ddm_core.ids import GeneIdGenerator
from ddm_core.metadata import load_config
from ddm_core.route import RouteKind, RoutePlan, Router, hint

from router_cases import CONFIGS, router as suite_router

ROUTES_PER_STATEMENT = 40


class ListedTargetAlgorithm(ShardingAlgorithm):
    """A user-registered algorithm that implements only ``precise`` (the CLASS_BASED use)."""

    type_name = "TEST_FAST_PATH_LISTED"
    PROPS = {"shift": "added to the value before taking it modulo the target count"}

    def _configure(self, props: Props) -> None:
        self.shift = props.integer("shift", 0)

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        _, value = self._single(values)
        return [targets[(int(value) + self.shift) % len(targets)]]


class FailingScalarAlgorithm(ListedTargetAlgorithm):
    """Routes like its parent but its scalar always fails: every route is a fast-path miss."""

    type_name = "TEST_FAST_PATH_FAILING"

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        def broken(value: Any) -> int:
            raise ShardValueError("this scalar never answers", value=value)

        return broken


@pytest.fixture(autouse=True)
def user_algorithms(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the two test types for each test only (the registry is process-wide)."""
    for cls in (ListedTargetAlgorithm, FailingScalarAlgorithm):
        monkeypatch.setitem(registry._TYPES, cls.type_name, cls)


# -- one table per algorithm -----------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A table ``t_fp`` sharded by ``algorithm`` and keys it routes.

    ``db`` / ``tb``: the strategies (``None``: not sharded at that level);
    ``columns``: the shard columns the statements bind, in SQL order.
    """

    id: str
    nodes: str
    db: dict[str, Any] | None
    tb: dict[str, Any] | None
    keys: tuple[tuple[Any, ...], ...]
    columns: tuple[str, ...] = ("k",)
    sources: int = 2


def standard(type_name: str, column: str = "k", **props: Any) -> dict[str, Any]:
    return {"kind": "standard", "columns": column, "algorithm": type_name, "props": props}


def complex_(type_name: str, columns: str, **props: Any) -> dict[str, Any]:
    return {"kind": "complex", "columns": columns, "algorithm": type_name, "props": props}


def ints(*values: int) -> tuple[tuple[Any, ...], ...]:
    return tuple((v,) for v in values)


INTS = ints(0, 1, 2, 3, 7, 15, 16, 21, 128, 5000, 10086, 2**40 + 3, 2**62 + 11, 987654321)
SIGNED = INTS + ints(-1, -7, -16, -2**40)
JAN = dt.datetime(2024, 1, 1)
TIMES = tuple((JAN + dt.timedelta(hours=h),) for h in (0, 5, 23, 24, 30, 47, 48, 60, 71))
MONTHS = tuple((dt.datetime(2024, m, d, 12),) for m in (1, 2, 3, 4) for d in (1, 15, 28))
GENE_IDS = tuple((int(i),) for i in GeneIdGenerator(5, 10).next_ids([3, 77, 1000, 12345, 2**40]))

CASES = [
    Case("MOD", "ds_${0..1}.t_fp_${0..3}", standard("MOD", **{"sharding-count": 2}),
         standard("MOD", **{"sharding-count": 4}), SIGNED + (("42",),)),
    Case("HASH_MOD", "ds_${0..1}.t_fp_${0..3}", standard("HASH_MOD", **{"sharding-count": 2}),
         standard("HASH_MOD", **{"sharding-count": 4}), SIGNED + (("user-17",), ("",))),
    Case("HASH_MOD key-type int", "ds_${0..1}.t_fp_${0..3}",
         standard("HASH_MOD", **{"sharding-count": 2, "key-type": "int"}),
         standard("HASH_MOD", **{"sharding-count": 4, "key-type": "int"}), INTS + (("42",),)),
    Case("SALTED_MOD", "ds_${0..1}.t_fp_${0..3}", standard("SALTED_MOD", **{"sharding-count": 2}),
         standard("SALTED_MOD", **{"sharding-count": 4}), SIGNED),
    Case("VOLUME_RANGE", "ds_${0..3}.t_fp_${0..3}",
         standard("VOLUME_RANGE", **{"range-lower": 0, "range-upper": 200, "sharding-volume": 100}),
         standard("MOD", **{"sharding-count": 4}), SIGNED, sources=4),
    Case("BOUNDARY_RANGE", "ds_${0..1}.t_fp_${0..3}", standard("BOUNDARY_RANGE", **{"sharding-ranges": "100"}),
         standard("BOUNDARY_RANGE", **{"sharding-ranges": "10,20,30"}), SIGNED),
    Case("AUTO_INTERVAL", "ds_${0..3}.t_fp",
         standard("AUTO_INTERVAL", **{"datetime-lower": "2024-01-01 00:00:00",
                                      "datetime-upper": "2024-01-03 00:00:00", "sharding-seconds": 86400}),
         None, TIMES + (("2024-01-02 10:00:00",),), sources=4),
    Case("INTERVAL", "ds_0.t_fp_${[202401, 202402, 202403, 202404]}", None,
         standard("INTERVAL", **{"datetime-pattern": "yyyy-MM-dd HH:mm:ss", "datetime-lower": "2024-01-01 00:00:00",
                                 "datetime-upper": "2024-04-01 00:00:00", "sharding-suffix-pattern": "yyyyMM",
                                 "datetime-interval-unit": "MONTHS"}),
         MONTHS + (("2024-03-03 03:03:03",),), sources=1),
    Case("TIME_RANGE", "ds_${0..1}.t_fp",
         standard("TIME_RANGE", ranges=[{"start": "2024-01-01", "end": "2024-03-01", "target": "ds_0"},
                                        {"start": "2024-03-01", "end": "2024-05-01", "target": "ds_1"}]),
         None, MONTHS),
    Case("SLOTS", "ds_${0..1}.t_fp_${0..3}", standard("SLOTS"), standard("SLOTS", **{"slot-bits": 4}),
         SIGNED + (("user-17",),)),
    Case("SLOTS explicit layout", "ds_${0..1}.t_fp_${0..3}",
         standard("SLOTS", **{"slot-bits": 4, "slots": {"ds_1": "0-3,8-11", "ds_0": "4-7,12-15"}}),
         standard("SLOTS", **{"slot-bits": 2, "key-type": "str"}), INTS + (("77",),)),
    Case("GENE", "ds_${0..1}.t_fp_${0..3}", standard("GENE"), standard("MOD", **{"sharding-count": 4}), GENE_IDS),
    # A GENE strategy on a key column hashes it like SLOTS (a precise call with the wrong column
    # name would read it as an id instead: the scalar must pass the column).
    Case("GENE key column", "ds_${0..1}.t_fp_${0..3}", standard("GENE", **{"key-columns": "k"}),
         standard("GENE", **{"key-columns": "k", "gene-bits": 4}), INTS + (("user-17",),)),
    Case("CONSISTENT_HASH", "ds_${0..1}.t_fp_${0..3}", standard("CONSISTENT_HASH"),
         standard("CONSISTENT_HASH", **{"virtual-nodes": 40}), SIGNED + (("user-17",),)),
    Case("COMPLEX_HASH_MOD", "ds_${0..1}.t_fp_${0..3}",
         complex_("COMPLEX_HASH_MOD", "tenant,k", **{"sharding-columns": "tenant,k", "sharding-count": 2}),
         complex_("COMPLEX_HASH_MOD", "k,tenant", **{"sharding-columns": "tenant,k", "sharding-count": 4}),
         tuple((t, k) for t in (1, 2, "acme") for k in (0, 7, 2**40)), columns=("tenant", "k")),
    Case("INLINE", "ds_${0..1}.t_fp_${0..3}", standard("INLINE", **{"algorithm-expression": "ds_${k % 2}"}),
         standard("INLINE", **{"algorithm-expression": "t_fp_${k % 8 / 2}"}), INTS + ((np.int64(77),),)),
    Case("INLINE intdiv", "ds_${0..1}.t_fp_${0..3}",
         standard("INLINE", **{"algorithm-expression": "ds_${(k % 32).intdiv(16)}"}),
         standard("INLINE", **{"algorithm-expression": "t_fp_${(k % 16 + 1).intdiv(4) % 4}"}), INTS),
    Case("INLINE floorMod", "ds_${0..1}.t_fp_${0..3}",
         standard("INLINE", **{"algorithm-expression": "ds_${Math.floorMod(k, 32).intdiv(16)}"}),
         standard("INLINE", **{"algorithm-expression": "t_fp_${Math.floorMod(k, 4)}"}), SIGNED),
    Case("INLINE not periodic", "ds_${0..1}.t_fp_${['a', 'b', 'c', 'd']}",
         standard("INLINE", **{"algorithm-expression": "ds_${k.abs() % 2}"}),
         standard("INLINE", **{"algorithm-expression": "t_fp_${k > 100 ? (k < 1000 ? 'b' : 'c') : (k < 0 ? 'd' : 'a')}"}),
         SIGNED),
    Case("INLINE over text", "ds_${0..1}.t_fp_${['eu', 'us', 'ap', 'sa']}",
         standard("INLINE", **{"algorithm-expression": "ds_${k == 'eu' || k == 'us' ? 0 : 1}"}),
         standard("INLINE", **{"algorithm-expression": "t_fp_${k}"}), (("eu",), ("us",), ("ap",), ("sa",))),
    Case("COMPLEX_INLINE", "ds_${0..1}.t_fp_${0..3}",
         complex_("COMPLEX_INLINE", "tenant,k", **{"algorithm-expression": "ds_${(tenant + k) % 2}"}),
         complex_("COMPLEX_INLINE", "tenant,k", **{"algorithm-expression": "t_fp_${(tenant * 3 + k) % 4}"}),
         tuple((t, k) for t in (0, 1, 5) for k in (0, 3, 2**40)), columns=("tenant", "k")),
    Case("user-registered algorithm", "ds_${0..1}.t_fp_${0..3}", standard("TEST_FAST_PATH_LISTED", shift=1),
         standard("TEST_FAST_PATH_LISTED"), INTS),
]


def build(case: Case) -> Router:
    table: dict[str, Any] = {"logicTable": "t_fp", "dataNodes": case.nodes}
    for field, strategy in (("databaseStrategy", case.db), ("tableStrategy", case.tb)):
        table[field] = strategy if strategy is not None else {"kind": "none"}
    doc = {
        "name": "fast-path",
        "dataSources": {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/fp_{i}", "username": "u"}
                        for i in range(case.sources)},
        "tables": [table],
    }
    return Router(load_config(doc))


def statements(columns: Sequence[str]) -> list[tuple[str, Callable[[tuple[Any, ...]], list[Any]]]]:
    cond = " AND ".join(f"{c} = %s" for c in columns)
    marks = ", ".join(["%s"] * len(columns))
    return [
        (f"SELECT id, status FROM t_fp WHERE {cond}", lambda k: [*k]),
        (f"SELECT id FROM t_fp WHERE {cond} AND status = %s ORDER BY id DESC LIMIT 20", lambda k: [*k, "paid"]),
        (f"UPDATE t_fp SET status = %s WHERE {cond}", lambda k: ["paid", *k]),
        (f"DELETE FROM t_fp WHERE {cond}", lambda k: [*k]),
        (f"INSERT INTO t_fp (id, {', '.join(columns)}, status) VALUES (%s, {marks}, %s)", lambda k: [9, *k, "new"]),
    ]


def general(router: Router, sql: str, params: list[Any]) -> RoutePlan:
    """The general path's plan: any hint, even one that changes nothing, bypasses the fast path."""
    with hint(force_primary=True):
        return router.route(sql, params)


def same_plan(fast: RoutePlan, slow: RoutePlan) -> bool:
    return (fast.units, fast.kind, fast.tables, fast.statement, fast.is_write) == (
        slow.units, slow.kind, slow.tables, slow.statement, slow.is_write)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_algorithm_takes_the_fast_path(case: Case) -> None:
    router = build(case)
    for sql, params_of in statements(case.columns):
        assert router.compile(sql).fast_path is not None, (case.id, sql)  # type: ignore[attr-defined]
        seen = set()
        for _ in range(ROUTES_PER_STATEMENT // len(case.keys) + 1):
            for key in case.keys:
                params = params_of(key)
                fast = router.route(sql, params)
                assert fast.kind is RouteKind.SINGLE, (case.id, sql, key)
                assert same_plan(fast, general(router, sql, params)), (case.id, sql, key, fast)
                seen.add((fast.units[0].data_source, fast.units[0].sql))
        assert router.cache_info().fast_path_misses == 0, (case.id, sql)
        if len(case.keys) > 4:
            assert len(seen) > 1, (case.id, sql)  # the keys do reach several nodes


def test_fast_path_description_names_the_deciding_conditions() -> None:
    router = build(CASES[0])
    assert router.compile("SELECT * FROM t_fp WHERE k = %s").fast_path == (  # type: ignore[attr-defined]
        "database by k (MOD 't_fp.database'); table by k (MOD 't_fp.table')"
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t_fp WHERE k IN (%s, %s)",
        "SELECT * FROM t_fp WHERE k = %s OR k = %s",
        "SELECT * FROM t_fp WHERE k = %s AND k > %s",
        "SELECT * FROM t_fp WHERE k BETWEEN %s AND %s",
    ],
)
def test_conditions_the_fast_path_does_not_model_take_the_general_path(sql: str) -> None:
    router = build(CASES[0])
    assert router.compile(sql).fast_path is None  # type: ignore[attr-defined]
    router.route(sql, [3, 7])
    assert router.cache_info().fast_path_misses == 0


def test_a_miss_is_counted_and_named_in_the_plan() -> None:
    case = Case("failing", "ds_${0..1}.t_fp_${0..3}", standard("TEST_FAST_PATH_FAILING"),
                standard("MOD", **{"sharding-count": 4}), INTS)
    router = build(case)
    for n, (sql, params_of) in enumerate(statements(case.columns), start=1):
        plan = router.route(sql, params_of((21,)))
        assert router.cache_info().fast_path_misses == n, sql
        (route,) = plan.tables
        assert "fast path missed (ShardValueError: this scalar never answers)" in route.reason, route.reason
        assert "fast path missed" in plan.explain()[0][3]
        assert plan.units[0].data_source == "ds_1"  # 21 % 2: the general path's answer


def test_values_the_fast_path_refuses_raise_the_general_error() -> None:
    router = build(CASES[0])
    with pytest.raises(ShardValueError, match="NULL"):
        router.route("SELECT * FROM t_fp WHERE k = %s", [None])
    with pytest.raises(ShardValueError, match="not an integer"):
        router.route("INSERT INTO t_fp (id, k) VALUES (%s, %s)", [1, "seven"])
    assert router.cache_info().fast_path_misses == 0  # errors are loud already: not counted


# -- decided by one level only: several nodes, still no DNF work ------------------------------------


def test_gene_id_decides_the_database_and_every_table_of_it() -> None:
    router = suite_router("N")  # SLOTS database by user_id, HASH_MOD tables; order ids carry the slot
    sql = "SELECT * FROM t_order WHERE order_id = %s"
    assert router.compile(sql).fast_path == "database by the gene of order_id; every table"  # type: ignore[attr-defined]
    for order_id in GeneIdGenerator(1, 10).next_ids([5, 900, 123456, 2**33]).tolist():
        fast = router.route(sql, [order_id])
        assert fast.kind is RouteKind.MULTI and len(fast.units) == 4
        assert same_plan(fast, general(router, sql, [order_id]))
    assert router.cache_info().fast_path_misses == 0


def test_table_key_alone_reads_that_table_in_every_database() -> None:
    case = Case("tb only", "ds_${0..3}.t_fp_${0..3}", standard("MOD", "tenant", **{"sharding-count": 4}),
                standard("MOD", **{"sharding-count": 4}), INTS, sources=4)
    router = build(case)
    sql = "SELECT * FROM t_fp WHERE k = %s"
    assert router.compile(sql).fast_path == "every database; table by k (MOD 't_fp.table')"  # type: ignore[attr-defined]
    for (k,) in INTS:
        fast = router.route(sql, [k])
        assert len(fast.units) == 4 and {u.tables[0][1] for u in fast.units} == {f"t_fp_{k % 4}"}
        assert same_plan(fast, general(router, sql, [k]))
    assert router.cache_info().fast_path_misses == 0


# -- one-row INSERT with a generated key -------------------------------------------------------------


def test_one_row_insert_routes_by_its_generated_key() -> None:
    doc = {
        "name": "generated",
        "dataSources": {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/g_{i}", "username": "u"} for i in range(2)},
        "tables": [{"logicTable": "t_fp", "dataNodes": "ds_${0..1}.t_fp_${0..3}",
                    "databaseStrategy": standard("MOD", "id", **{"sharding-count": 2}),
                    "tableStrategy": standard("HASH_MOD", "id", **{"sharding-count": 4}),
                    "keyGenerator": {"column": "id", "type": "snowflake", "workerId": 3}}],
    }
    router = Router(load_config(doc))
    sql = "INSERT INTO t_fp (status) VALUES (%s)"
    assert router.compile(sql).fast_path is not None  # type: ignore[attr-defined]
    for _ in range(20):
        plan = router.route(sql, ["new"])
        (key,) = plan.generated_keys
        (unit,) = plan.units
        assert unit.params == ("new", key) and unit.sql.endswith("VALUES (%s, %s)")
        where = router.route("SELECT * FROM t_fp WHERE id = %s", [key]).units[0]
        assert (unit.data_source, unit.tables) == (where.data_source, where.tables)
    assert router.cache_info().fast_path_misses == 0


def test_one_row_insert_with_a_generated_key_beside_the_shard_key() -> None:
    router = suite_router("N")  # t_order: gene order ids generated from user_id, routed by user_id
    sql = "INSERT INTO t_order (user_id, amount) VALUES (%s, %s)"
    assert router.compile(sql).fast_path is not None  # type: ignore[attr-defined]
    for user_id in (1, 7, 10086, 2**40):
        plan = router.route(sql, [user_id, 5])
        (order_id,) = plan.generated_keys
        slow = general(router, sql, [user_id, 5])
        assert [(u.data_source, u.tables, u.sql) for u in plan.units] == [
            (u.data_source, u.tables, u.sql) for u in slow.units]
        assert plan.units[0].params == (user_id, 5, order_id) and plan.tables == slow.tables
        by_id = router.route("SELECT * FROM t_order WHERE order_id = %s", [order_id])
        assert plan.units[0].data_source in {u.data_source for u in by_id.units}
    assert router.cache_info().fast_path_misses == 0


def test_multi_row_and_hinted_inserts_take_batch_routing() -> None:
    router = build(CASES[0])
    assert router.compile("INSERT INTO t_fp (id, k) VALUES (%s, %s), (%s, %s)").fast_path is None  # type: ignore[attr-defined]
    plan = router.route("INSERT INTO t_fp (id, k) VALUES (%s, %s), (%s, %s)", [1, 2, 3, 3])
    assert len(plan.units) == 2 and router.cache_info().fast_path_misses == 0


# -- other table shapes --------------------------------------------------------------------------------


def test_auto_tables_take_the_fast_path() -> None:
    router = Router(load_config(CONFIGS / "ss_auto_tables.yaml"))  # MOD 4 / BOUNDARY_RANGE over generated tables
    for sql, column in (("SELECT * FROM t_order_auto WHERE order_id = %s", "order_id"),
                        ("DELETE FROM t_log_auto WHERE log_id = %s", "log_id")):
        description = router.compile(sql).fast_path  # type: ignore[attr-defined]
        assert description is not None and description.startswith(f"table by {column} ("), description
        seen = set()
        for (k,) in SIGNED:
            fast = router.route(sql, [k])
            assert fast.kind is RouteKind.SINGLE and same_plan(fast, general(router, sql, [k]))
            seen.add(fast.units[0].tables)
        assert len(seen) == 4
    assert router.cache_info().fast_path_misses == 0


def test_hint_strategies_keep_the_general_path() -> None:
    router = suite_router("R")  # t_audit: database chosen by a hint value only
    sql = "SELECT * FROM t_audit WHERE id = %s"
    assert router.compile(sql).fast_path is None  # type: ignore[attr-defined]
    with hint(database_value=6):
        assert router.route(sql, [1]).units[0].data_source == "ds_2"
    assert router.cache_info().fast_path_misses == 0


def test_the_miss_counter_survives_a_configuration_switch() -> None:
    case = Case("failing", "ds_${0..1}.t_fp_${0..3}", standard("TEST_FAST_PATH_FAILING"),
                standard("MOD", **{"sharding-count": 4}), INTS)
    router = build(case)
    router.route("SELECT * FROM t_fp WHERE k = %s", [1])
    router.use_config(router.config)  # a reload: new context, plans dropped, counters kept
    router.route("SELECT * FROM t_fp WHERE k = %s", [2])
    assert router.cache_info().fast_path_misses == 2
