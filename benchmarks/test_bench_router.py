"""router: cached ``route()`` vs ``sqlglot.parse_one``; first-sight routes; a 10 000-row INSERT.

Baselines are measured in the same run: ``sqlglot.parse_one`` of the same SQL
(with sqlglotc when it is installed — the module says which), since a router
that parses on every call costs at least that.

Targets (issue 4, read from the report, never asserted): cached point select
≤ 3 µs median and ≥ 50× faster than ``parse_one``; first-sight ``route()`` ≤
1.5× ``parse_one`` alone; a 10 000-row INSERT routed in ≤ 2× the time sqlglot
takes to parse it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlglot
import sqlglot.parser

from ddm_core.metadata import load_config
from ddm_core.route import Router
from ddm_core.route.placeholders import translate

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "orders.yaml"
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
