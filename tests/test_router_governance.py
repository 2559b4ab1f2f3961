"""Router: full-route governance (allow_full_route / full_route_threshold / allowDmlFullRoute)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ddm_core.errors import FullRouteError
from ddm_core.route import RouteKind, Router

from router_cases import all_nodes, config, n_node


def native(**runtime) -> Router:
    cfg = config("N")
    return Router(replace(cfg, runtime=replace(cfg.runtime, **runtime)))


FULL_SELECTS = [
    "SELECT * FROM t_order",
    "SELECT * FROM t_order WHERE status = 1",
    "SELECT * FROM t_order WHERE NOT user_id = 1",
    "SELECT COUNT(*) FROM t_order",
    "SELECT * FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id AND o.order_id = i.order_id",
]


@pytest.mark.parametrize("sql", FULL_SELECTS)
def test_refused_names_table_and_shard_column(sql: str) -> None:
    """allow_full_route: false and 16 shards > threshold 8 → FullRouteError naming table and column."""
    with pytest.raises(FullRouteError) as info:
        native().route(sql)
    err = info.value
    assert "'t_order'" in str(err) and "user_id" in str(err) and "16" in str(err)
    assert err.table == "t_order" and tuple(err.columns) == ("user_id",)  # type: ignore[attr-defined]


@pytest.mark.parametrize("sql", FULL_SELECTS)
def test_allowed_when_switched_on(sql: str) -> None:
    plan = native(allow_full_route=True).route(sql)
    assert len(plan.units) == 16 and plan.kind is RouteKind.FULL


def test_threshold_at_shard_count_allows_full_route() -> None:
    """Refused only with *more* shards than the threshold."""
    assert len(native(full_route_threshold=16).route("SELECT * FROM t_order").units) == 16
    with pytest.raises(FullRouteError):
        native(full_route_threshold=15).route("SELECT * FROM t_order")


def test_narrowed_routes_are_not_governed() -> None:
    plan = native().route("SELECT * FROM t_order WHERE user_id IN (1, 2, 3, 4, 5, 6, 7)")
    assert len(plan.units) == len({n_node(u) for u in range(1, 8)}) and plan.kind is RouteKind.MULTI


@pytest.mark.parametrize("sql", ["UPDATE t_order SET a = 1", "DELETE FROM t_order WHERE status = 2",
                                 "UPDATE t_order SET a = 1 WHERE user_id = 1 OR status = 1"])
def test_dml_full_route_needs_its_own_switch(sql: str) -> None:
    for router in (native(), native(allow_full_route=True)):
        with pytest.raises(FullRouteError) as info:
            router.route(sql)
        assert "'t_order'" in str(info.value) and "user_id" in str(info.value)
    plan = native(allow_full_route=True, allow_dml_full_route=True).route(sql)
    assert len(plan.units) == 16 and plan.is_write and plan.kind is RouteKind.FULL
    # both switches are needed: the DML one does not lift allow_full_route
    with pytest.raises(FullRouteError):
        native(allow_dml_full_route=True).route(sql)


def test_order_db_config_without_auditors_allows_full_reads_and_writes() -> None:
    """A ShardingSphere YAML keeps ShardingSphere's semantics: no auditor, every shard (test_router_shardingsphere.py)."""
    r = Router(config("S"))
    assert len(r.route("SELECT * FROM t_order").units) == 32
    assert len(r.route("DELETE FROM t_order").units) == 32


def test_ranges_config_allows_full_dml() -> None:
    r = Router(config("R"))
    plan = r.route("DELETE FROM t_log WHERE created < '2020-01-01'")
    assert [(u.data_source, t) for u in plan.units for _, t in u.tables] == [
        (n.ds, n.table("t_log")) for n in all_nodes("R")
    ]


def test_hint_forced_route_is_not_a_full_route() -> None:
    from ddm_core.route import hint

    with hint(database="ds_1"):
        plan = native().route("SELECT * FROM t_order")
    assert {u.data_source for u in plan.units} == {"ds_1"} and len(plan.units) == 4


def _users_on_every_node() -> list[int]:
    first: dict = {}
    for user in range(1, 1000):
        first.setdefault(n_node(user), user)
    assert len(first) == 16
    return sorted(first.values())


def test_values_that_cover_every_node_are_not_a_full_route() -> None:
    """FULL means no usable shard condition; an IN list reaching all 16 nodes is a MULTI route."""
    users = _users_on_every_node()
    in_list = ", ".join(map(str, users))
    plan = native().route(f"SELECT * FROM t_order WHERE user_id IN ({in_list})")
    assert len(plan.units) == 16 and plan.kind is RouteKind.MULTI
    deleted = native().route(f"DELETE FROM t_order WHERE user_id IN ({in_list})")
    assert len(deleted.units) == 16 and deleted.kind is RouteKind.MULTI
    # ... but an OR branch without the key still makes it a full route
    with pytest.raises(FullRouteError):
        native().route(f"SELECT * FROM t_order WHERE user_id IN ({in_list}) OR status = 1")
