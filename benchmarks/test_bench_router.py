"""router: cached ``route()`` vs ``sqlglot.parse_one``; first-sight routes; a 10 000-row INSERT.

Baselines are measured in the same run: ``sqlglot.parse_one`` of the same SQL
(with sqlglotc when it is installed — the module says which), since a router
that parses on every call costs at least that.

Targets (issue 4, read from the report, never asserted): cached point select
≤ 3 µs median and ≥ 50× faster than ``parse_one``; first-sight ``route()`` ≤
1.5× ``parse_one`` alone; a 10 000-row INSERT routed in ≤ 2× the time sqlglot
takes to parse it.

Per algorithm (issue 9): a cached single-shard route ≤ 3 µs median for every
built-in algorithm type (``route cached: <TYPE>``), and for SELECT with extra
conditions / ORDER BY / LIMIT, UPDATE and DELETE by key and a one-row INSERT on
the INLINE ShardingSphere configuration (``route cached: INLINE config, ...``);
each of those statements also routed at first sight beside ``parse_one`` of
the same text, in one group per statement (pytest-benchmark shows the ratio).
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

import pytest
import sqlglot
import sqlglot.parser

from ddm_core.algorithms.inline_expr import expand
from ddm_core.metadata import load_config
from ddm_core.route import Router
from ddm_core.route.text.placeholders import translate

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE = EXAMPLES / "orders.yaml"
POINT = "SELECT order_id, amount, status FROM t_order WHERE user_id = %s"
POINT_PARSED = POINT.replace("%s", "?")
ROWS = 10_000
# t_order_item with explicit ids: routing is measured, not id generation (gene ids of
# t_order cap at 64 per ms per worker by their layout, which would dominate).
INSERT = "INSERT INTO t_order_item (item_id, order_id, user_id) VALUES " + ", ".join(["(%s, %s, %s)"] * ROWS)
INSERT_PARAMS = [v for i in range(ROWS) for v in (i + 1, i + 1, i * 7919)]
# sqlglotc replaces sqlglot's modules with mypyc-compiled ones (parser.py becomes an .so).
SQLGLOTC = "sqlglotc" if not sqlglot.parser.__file__.endswith(".py") else "pure sqlglot"


@pytest.fixture(scope="module")
def router() -> Router:
    return Router(load_config(EXAMPLE))


def test_route_cached(router: Router, measure: Any, int_keys: list[int]) -> None:
    route = router.route
    route(POINT, [1])

    def calls() -> None:
        for k in int_keys:
            route(POINT, [k])

    measure(calls, case="route cached", group="router: point select, 1000 calls", items=len(int_keys),
            unit="call", rounds=200, warmup_rounds=5)


def test_parse_point(measure: Any) -> None:
    def calls() -> None:
        for _ in range(100):
            sqlglot.parse_one(POINT_PARSED, read="mysql")

    measure(calls, case=f"parse_one ({SQLGLOTC})", group="router: point select, 100 calls", items=100,
            unit="call", rounds=20, warmup_rounds=2)


def test_route_first_sight(router: Router, measure: Any) -> None:
    def calls() -> None:
        for _ in range(100):
            router.clear_cache()
            translate.cache_clear()
            router.route(POINT, [1])

    measure(calls, case="route first sight", group="router: point select, 100 calls", items=100,
            unit="call", rounds=20, warmup_rounds=2)


def test_insert_10k_route(router: Router, measure: Any) -> None:
    def once() -> None:
        router.clear_cache()
        translate.cache_clear()
        router.route(INSERT, INSERT_PARAMS)

    measure(once, case="route 10k-row INSERT", group="router: 10 000-row INSERT", items=1, unit="statement",
            rounds=3, warmup_rounds=1)


def test_insert_10k_parse(measure: Any) -> None:
    text = translate(INSERT).sql

    measure(lambda: sqlglot.parse_one(text, read="mysql"), case=f"parse_one 10k-row INSERT ({SQLGLOTC})",
            group="router: 10 000-row INSERT", items=1, unit="statement", rounds=3, warmup_rounds=1)


# -- per algorithm: a cached single-shard route -------------------------------------------------------

JAN = datetime.datetime(2024, 1, 1)


def _standard(type_name: str, **props: Any) -> dict[str, Any]:
    return {"kind": "standard", "columns": "k", "algorithm": type_name, "props": props}


def _complex(type_name: str, **props: Any) -> dict[str, Any]:
    return {"kind": "complex", "columns": "tenant,k", "algorithm": type_name, "props": props}


_NONE = {"kind": "none"}
_TIME_PROPS = {"datetime-pattern": "yyyy-MM-dd HH:mm:ss", "datetime-lower": "2024-01-01 00:00:00",
               "datetime-upper": "2024-12-01 00:00:00", "sharding-suffix-pattern": "yyyyMM",
               "datetime-interval-unit": "MONTHS"}
# type -> (data nodes, database strategy, table strategy, key kind)
ALGORITHMS: dict[str, tuple[str, dict[str, Any], dict[str, Any], str]] = {
    "MOD": ("ds_${0..3}.t_b_${0..3}", _standard("MOD", **{"sharding-count": 4}),
            _standard("MOD", **{"sharding-count": 4}), "int"),
    "HASH_MOD": ("ds_${0..3}.t_b_${0..3}", _standard("HASH_MOD", **{"sharding-count": 4}),
                 _standard("HASH_MOD", **{"sharding-count": 4}), "int"),
    "SALTED_MOD": ("ds_${0..3}.t_b_${0..3}", _standard("SALTED_MOD", **{"sharding-count": 4}),
                   _standard("SALTED_MOD", **{"sharding-count": 4}), "int"),
    "VOLUME_RANGE": ("ds_${0..3}.t_b_${0..3}",
                     _standard("VOLUME_RANGE", **{"range-lower": 1 << 40, "range-upper": 1 << 62,
                                                  "sharding-volume": 1 << 61}),
                     _standard("MOD", **{"sharding-count": 4}), "int"),
    "BOUNDARY_RANGE": ("ds_${0..3}.t_b_${0..3}",
                       _standard("BOUNDARY_RANGE", **{"sharding-ranges": f"{1 << 60},{1 << 61},{3 << 60}"}),
                       _standard("BOUNDARY_RANGE", **{"sharding-ranges": f"{1 << 59},{1 << 61},{1 << 62}"}), "int"),
    "AUTO_INTERVAL": ("ds_${0..4}.t_b", _standard("AUTO_INTERVAL", **{
        "datetime-lower": "2024-01-01 00:00:00", "datetime-upper": "2024-12-01 00:00:00",
        "sharding-seconds": 100 * 86400}), _NONE, "time"),
    "INTERVAL": ("ds_0.t_b_${202401..202412}", _NONE, _standard("INTERVAL", **_TIME_PROPS), "time"),
    "TIME_RANGE": ("ds_${0..1}.t_b", _standard("TIME_RANGE", ranges=[
        ["2024-01-01", "2024-06-01", "ds_0"], ["2024-06-01", "2025-01-01", "ds_1"]]), _NONE, "time"),
    "SLOTS": ("ds_${0..3}.t_b_${0..3}", _standard("SLOTS"), _standard("SLOTS", **{"slot-bits": 4}), "int"),
    "GENE": ("ds_${0..3}.t_b_${0..3}", _standard("GENE"), _standard("GENE", **{"gene-bits": 4}), "int"),
    "CONSISTENT_HASH": ("ds_${0..3}.t_b_${0..3}", _standard("CONSISTENT_HASH"),
                        _standard("CONSISTENT_HASH"), "int"),
    "COMPLEX_HASH_MOD": ("ds_${0..3}.t_b_${0..3}",
                         _complex("COMPLEX_HASH_MOD", **{"sharding-columns": "tenant,k", "sharding-count": 4}),
                         _complex("COMPLEX_HASH_MOD", **{"sharding-columns": "k,tenant", "sharding-count": 4}),
                         "pair"),
    "INLINE": ("ds_${0..3}.t_b_${0..3}", _standard("INLINE", **{"algorithm-expression": "ds_${k % 4}"}),
               _standard("INLINE", **{"algorithm-expression": "t_b_${k % 16 / 4}"}), "int"),
    "COMPLEX_INLINE": ("ds_${0..3}.t_b_${0..3}",
                       _complex("COMPLEX_INLINE", **{"algorithm-expression": "ds_${(tenant + k) % 4}"}),
                       _complex("COMPLEX_INLINE", **{"algorithm-expression": "t_b_${(tenant * 3 + k) % 4}"}),
                       "pair"),
}


def _algorithm_router(type_name: str) -> Router:
    nodes, db, tb, _ = ALGORITHMS[type_name]
    sources = sorted({n.split(".")[0] for n in expand(nodes)})
    doc = {
        "name": f"bench-{type_name.lower()}",
        "dataSources": {ds: {"url": f"mysql://127.0.0.1:3306/{ds}", "username": "u"} for ds in sources},
        "tables": [{"logicTable": "t_b", "dataNodes": nodes, "databaseStrategy": db, "tableStrategy": tb}],
    }
    return Router(load_config(doc))


def _keys(kind: str, int_keys: list[int]) -> list[list[Any]]:
    if kind == "time":  # 1000 instants spread over January to November 2024
        return [[JAN + datetime.timedelta(seconds=k % (330 * 86400))] for k in int_keys]
    if kind == "pair":
        return [[k % 1000, k] for k in int_keys]
    return [[k] for k in int_keys]


@pytest.mark.parametrize("type_name", list(ALGORITHMS))
def test_route_cached_per_algorithm(type_name: str, measure: Any, int_keys: list[int]) -> None:
    router = _algorithm_router(type_name)
    kind = ALGORITHMS[type_name][3]
    sql = "SELECT id, amount FROM t_b WHERE " + ("tenant = %s AND k = %s" if kind == "pair" else "k = %s")
    params = _keys(kind, int_keys)
    route = router.route
    for p in params:  # warm: every remainder / interval seen once
        route(sql, p)
    assert router.cache_info().fast_path_misses == 0, type_name  # what is measured is the fast path

    def calls() -> None:
        for p in params:
            route(sql, p)

    measure(calls, case=f"route cached: {type_name}", group="router: cached single-shard route per algorithm",
            items=len(params), unit="call", rounds=50, warmup_rounds=2)


# -- the INLINE ShardingSphere configuration: common single-shard statements ----------------------------

INLINE_STATEMENTS = {
    "point select": ("SELECT order_id, amount, status FROM t_order WHERE user_id = %s", lambda k: [k]),
    "extra conditions, ORDER BY, LIMIT": (
        "SELECT order_id, amount FROM t_order WHERE user_id = %s AND status = %s ORDER BY order_id DESC LIMIT 20",
        lambda k: [k, "PAID"]),
    "UPDATE by key": ("UPDATE t_order SET status = %s WHERE user_id = %s AND order_id = %s",
                      lambda k: ["PAID", k, k + 1]),
    "DELETE by key": ("DELETE FROM t_order WHERE user_id = %s", lambda k: [k]),
    "one-row INSERT": ("INSERT INTO t_order (order_id, user_id, amount, status) VALUES (%s, %s, %s, %s)",
                       lambda k: [k + 1, k, 10, "NEW"]),
}


@pytest.fixture(scope="module")
def inline_router() -> Router:
    os.environ.setdefault("DDM_ORDER_PASSWORD", "benchmark")  # the example reads it from the environment
    return Router(load_config(EXAMPLES / "shardingsphere.yaml"))


@pytest.mark.parametrize("statement", list(INLINE_STATEMENTS))
def test_route_cached_inline_config(statement: str, inline_router: Router, measure: Any,
                                    int_keys: list[int]) -> None:
    sql, params_of = INLINE_STATEMENTS[statement]
    params = [params_of(k) for k in int_keys]
    route = inline_router.route
    for p in params:
        route(sql, p)
    assert inline_router.cache_info().fast_path_misses == 0, statement

    def calls() -> None:
        for p in params:
            route(sql, p)

    measure(calls, case=f"route cached: INLINE config, {statement}", group="router: INLINE ShardingSphere config, cached",
            items=len(params), unit="call", rounds=100, warmup_rounds=3)


@pytest.mark.parametrize("statement", list(INLINE_STATEMENTS))
def test_route_first_sight_inline_config(statement: str, inline_router: Router, measure: Any) -> None:
    sql, params_of = INLINE_STATEMENTS[statement]
    params = params_of(21)

    def calls() -> None:
        for _ in range(100):
            inline_router.clear_cache()
            translate.cache_clear()
            inline_router.route(sql, params)

    measure(calls, case=f"route first sight: INLINE config, {statement}", group=f"router first sight: {statement}",
            items=100, unit="call", rounds=20, warmup_rounds=2)


@pytest.mark.parametrize("statement", list(INLINE_STATEMENTS))
def test_parse_inline_statement(statement: str, measure: Any) -> None:
    text = translate(INLINE_STATEMENTS[statement][0]).sql

    def calls() -> None:
        for _ in range(100):
            sqlglot.parse_one(text, read="mysql")

    measure(calls, case=f"parse_one ({SQLGLOTC}): {statement}", group=f"router first sight: {statement}",
            items=100, unit="call", rounds=20, warmup_rounds=2)
