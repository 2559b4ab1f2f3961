"""Router, table-driven: routing hints (``with hint(...)``) and ``@shard_database``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ddm_core.errors import DdmError, RoutingError, ShardKeyNotFoundError
from ddm_core.hashing import hash64
from ddm_core.hinting import shard_database
from ddm_core.route import RouteKind, hint

from router_cases import Case, Node, all_nodes, check, gene_id, ids, n_node, nodes, router, s_node

N_ALL, S_ALL = all_nodes("N"), all_nodes("S")


def in_source(all_nodes_: list[Node], ds: str) -> list[Node]:
    return [n for n in all_nodes_ if n.ds == ds]


CASES = [
    Case("force-database", "N", "SELECT * FROM t_order WHERE status = 1", hint={"database": "ds_2"},
         nodes=in_source(N_ALL, "ds_2"), kind=RouteKind.MULTI),
    Case("force-database-and-table", "N", "SELECT * FROM t_order WHERE status = %s", [1],
         hint={"database": "ds_2", "table": "t_order_2_1"}, nodes=[Node((2, 1), "ds_2", "_2_1")], kind=RouteKind.SINGLE),
    Case("force-binding-join", "N", "SELECT * FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id",
         hint={"database": "ds_1", "table": "t_order_1_3"}, nodes=[Node((1, 3), "ds_1", "_1_3")]),
    Case("force-update-without-key", "N", "UPDATE t_order SET a = 1 WHERE status = 2", hint={"database": "ds_3"},
         nodes=in_source(N_ALL, "ds_3"), is_write=True),
    Case("force-insert-node", "N", "INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", [gene_id(1, 5), 5],
         hint={"database": "ds_2", "table": "t_order_2_1"}, nodes=[Node((2, 1), "ds_2", "_2_1")]),
    Case("force-insert-needs-one-node", "N", f"INSERT INTO t_order (order_id, user_id) VALUES ({gene_id(1, 5)}, 5)",
         hint={"database": "ds_2"}, error=(RoutingError, ("4 nodes", "'t_order'"))),
    Case("force-unknown-source", "N", "SELECT * FROM t_order WHERE status = 1", hint={"database": "ds_9"},
         error=(RoutingError, ("'ds_9'", "'t_order'"))),
    Case("force-unknown-table", "S", "SELECT * FROM t_order", hint={"database": "ds0", "table": "t_order_99"},
         error=(RoutingError, ("'t_order_99'",))),
    Case("force-broadcast-read", "N", "SELECT * FROM t_dict_region", hint={"database": "ds_3"}, sources=["ds_3"]),
    Case("force-ignored-for-broadcast-write", "N", "UPDATE t_dict_region SET a = 1", hint={"database": "ds_3"},
         sources=["ds_0", "ds_1", "ds_2", "ds_3"], is_write=True),
    Case("s-force-database", "S", "SELECT * FROM t_order", hint={"database": "ds1"}, nodes=in_source(S_ALL, "ds1")),
    # strategy hints (what @shard_database sets): a configured algorithm picks the data source
    Case("strategy-slots", "N", "SELECT * FROM t_order WHERE status = 1",
         hint={"strategy": "t_order.database", "strategy_value": 10086}, nodes=in_source(N_ALL, n_node(10086).ds)),
    Case("strategy-with-key", "N", "SELECT * FROM t_order WHERE user_id = 10086",
         hint={"strategy": "t_order.database", "strategy_value": 10086}, nodes=nodes(n_node, 10086)),
    Case("strategy-insert", "N", f"INSERT INTO t_order (order_id, user_id) VALUES ({gene_id(1, 10086)}, 10086)",
         hint={"strategy": "t_order.database", "strategy_value": 10086}, nodes=nodes(n_node, 10086)),
    Case("s-strategy-inline", "S", "SELECT * FROM t_order WHERE status = 1",
         hint={"strategy": "db-inline", "strategy_value": 20}, nodes=in_source(S_ALL, "ds1")),
    Case("s-strategy-inline-key", "S", "SELECT * FROM t_order WHERE user_id = 53",
         hint={"strategy": "db-inline", "strategy_value": 53}, nodes=nodes(s_node, 53)),
    Case("r-strategy-named-mod", "R", "SELECT * FROM t_log WHERE user_id = 1500",
         hint={"strategy": "user_mod", "strategy_value": 1500}, nodes=[Node((0, 1), "ds_0", "_0_1")]),
    Case("strategy-unknown", "N", "SELECT * FROM t_order WHERE user_id = 1", hint={"strategy": "nope", "strategy_value": 1},
         error=(RoutingError, ("'nope'", "t_order.database"))),
    # HINT-kind strategy (t_audit): the value comes from the hint, never from the SQL
    Case("hint-strategy-value", "R", "SELECT * FROM t_audit WHERE user_id = 3", hint={"database_value": 6},
         nodes=[Node((2,), "ds_2", "")]),
    Case("hint-strategy-insert", "R", "INSERT INTO t_audit (id, msg) VALUES (%s, %s)", [1, "x"], hint={"database_value": 7},
         nodes=[Node((3,), "ds_3", "")]),
    Case("hint-strategy-missing-full", "R", "SELECT * FROM t_audit", nodes=all_nodes("R", "t_audit"), kind=RouteKind.FULL),
    Case("hint-strategy-insert-missing", "R", "INSERT INTO t_audit (id) VALUES (1)", error=(RoutingError, ("'t_audit'", "hint"))),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hints(case: Case) -> None:
    check(case)


def test_force_database_keeps_the_key_nodes() -> None:
    """A forced data source with a key: only that source, and the key's table is among the units."""
    r = router("N")
    user = next(u for u in range(100) if n_node(u).ds == "ds_2")
    with hint(database="ds_2"):
        plan = r.route("SELECT * FROM t_order WHERE user_id = %s", [user])
    assert {u.data_source for u in plan.units} == {"ds_2"}
    assert n_node(user).table("t_order") in {t for u in plan.units for _, t in u.tables}
    assert "hint" in plan.tables[0].reason


def test_hint_ends_with_its_block() -> None:
    r = router("N")
    with hint(database="ds_3", table="t_order_3_0"):
        inside = r.route("SELECT * FROM t_order WHERE user_id = 1")
    outside = r.route("SELECT * FROM t_order WHERE user_id = 1")
    assert [u.data_source for u in inside.units] == ["ds_3"]
    assert [u.data_source for u in outside.units] == [n_node(1).ds]


def test_force_primary_is_reported() -> None:
    r = router("N")
    with hint(force_primary=True):
        plan = r.route("SELECT * FROM t_order WHERE user_id = 1")
        broadcast = r.route("SELECT * FROM t_dict_region")
    assert plan.force_primary and broadcast.force_primary
    assert not r.route("SELECT * FROM t_order WHERE user_id = 1").force_primary
    assert [u.data_source for u in plan.units] == [n_node(1).ds]


def test_shard_database_decorator_routes_by_argument() -> None:
    r = router("N")

    @shard_database(key="order.user.id", strategy="t_order.database")
    def place(order):
        return r.route("SELECT * FROM t_order WHERE status = %s", [1])

    for user in [1, 10086, 882341]:
        plan = place(SimpleNamespace(user=SimpleNamespace(id=user)))
        assert {u.data_source for u in plan.units} == {n_node(user).ds}
        assert len(plan.units) == 4


def test_shard_database_on_an_inline_strategy() -> None:
    r = router("S")

    @shard_database(key="user_id", strategy="db-inline", force_primary=True)
    def orders(user_id):
        return r.route("SELECT * FROM t_order WHERE status = 1")

    plan = orders(20)
    assert {u.data_source for u in plan.units} == {"ds1"} and len(plan.units) == 16 and plan.force_primary


def test_shard_database_missing_key_raises_before_routing() -> None:
    @shard_database(key="order.user_id", strategy="t_order.database")
    def place(order):
        raise AssertionError("body must not run")

    with pytest.raises(ShardKeyNotFoundError) as info:
        place({"user_id": None})
    assert isinstance(info.value, DdmError) and "order.user_id" in str(info.value)


def test_strategy_hint_value_table_strategy_still_applies() -> None:
    """A strategy hint picks the data source; the table strategy still narrows by the key."""
    r = router("N")
    user = 10086
    with hint(strategy="t_order.database", strategy_value=user):
        plan = r.route("SELECT * FROM t_order WHERE user_id = %s", [user])
    (unit,) = plan.units
    assert unit.tables == (("t_order", f"t_order_{n_node(user).order[0]}_{hash64(user) % 4}"),)
