"""Router, table-driven: INSERT / REPLACE (row splitting, key generation), UPDATE, DELETE."""

from __future__ import annotations

from typing import Any, Sequence

import pytest

from ddm_core.errors import DdmError, FullRouteError, RoutingError, ShardKeyUpdateError, UnsupportedSQLError
from ddm_core.errors import ShardValueError
from ddm_core.hashing import slot_of
from ddm_core.ids import gene_of
from ddm_core.route import RouteKind

from router_cases import (
    Case,
    Node,
    all_nodes,
    check,
    comment,
    config,
    ids,
    n_node,
    nodes,
    norm,
    r_log_node,
    router,
    s_node,
)

SINGLE, MULTI, FULL, BROADCAST = RouteKind.SINGLE, RouteKind.MULTI, RouteKind.FULL, RouteKind.BROADCAST
N_SOURCES = ["ds_0", "ds_1", "ds_2", "ds_3"]


def insert_case(
    id: str,
    name: str,
    head: str,
    rows: Sequence[Sequence[Any]],
    key_at: int,
    node_of: Any,
    row_text: str,
    tail: str = "",
    tail_params: Sequence[Any] = (),
    literal: bool = False,
    table: str = "t_order",
    **kw: Any,
) -> Case:
    """A multi-row INSERT whose units are computed row by row (rows keep their order per unit).

    ``head`` names the logic table ``{t}``; ``row_text`` is one row's ``(...)``
    (``{0}``... fields when ``literal``: rows written as literals, not params).
    """
    by_node: dict[Node, list[Sequence[Any]]] = {}
    for row in rows:
        by_node.setdefault(node_of(row[key_at]), []).append(row)

    def text_of(row: Sequence[Any]) -> str:
        return row_text.format(*row) if literal else row_text

    def statement(selected: Sequence[Sequence[Any]], table_text: str) -> str:
        return head.replace("{t}", table_text) + ", ".join(text_of(r) for r in selected) + tail

    def unit_params(node: Node) -> tuple[Any, ...]:
        values = () if literal else tuple(v for r in by_node[node] for v in r)
        return values + tuple(tail_params)

    params = None if literal else [v for r in rows for v in r] + list(tail_params)
    return Case(id, name, statement(rows, table), params, nodes=sorted(by_node),
                unit_sql=lambda node: statement(by_node[node], "{" + table + "}"),
                unit_params=unit_params, statement="insert", is_write=True, **kw)


def gid(seq: int, user_id: int) -> int:
    """An order id that carries its user's slot, as native_orders' GENE generator makes them."""
    return (seq << 10) | slot_of(user_id, 10)


INSERTS = [
    insert_case("insert-one", "N", "INSERT INTO {t} (order_id, user_id, amount) VALUES ", [(gid(100, 5), 5, 9.5)], 1, n_node,
                "(%s, %s, %s)", kind=SINGLE),
    insert_case("insert-split", "N", "INSERT INTO {t} (order_id, user_id, amount) VALUES ",
                [(gid(11, 1), 1, 10), (gid(12, 2), 2, 20), (gid(13, 1), 1, 30), (gid(14, 3), 3, 40), (gid(15, 9), 9, 50)], 1, n_node, "(%s, %s, %s)", kind=MULTI),
    insert_case("insert-split-literals", "N", "INSERT INTO {t} (order_id, user_id, note) VALUES ",
                [(gid(21, 6), 6, "'a'"), (gid(22, 7), 7, "'b, (c)'"), (gid(23, 6), 6, "'d'")], 1, n_node, "({0}, {1}, {2})", literal=True),
    insert_case("insert-qmark", "N", "INSERT INTO {t} (order_id, user_id) VALUES ", [(gid(1, 4), 4), (gid(2, 10), 10), (gid(3, 4), 4)], 1,
                n_node, "(?, ?)"),
    insert_case("insert-expression-column", "N", "INSERT INTO {t} (order_id, user_id, created) VALUES ",
                [(gid(31, 8), 8), (gid(32, 5), 5)], 1, n_node, "(%s, %s, NOW())"),
    insert_case("insert-on-duplicate", "N", "INSERT INTO {t} (order_id, user_id, amount) VALUES ",
                [(gid(41, 1), 1, 5), (gid(42, 3), 3, 6)], 1, n_node, "(%s, %s, %s)",
                tail=" ON DUPLICATE KEY UPDATE amount = amount + %s", tail_params=[7]),
    insert_case("insert-on-duplicate-values-shard-key", "N", "INSERT INTO {t} (order_id, user_id) VALUES ",
                [(gid(43, 2), 2)], 1, n_node, "(%s, %s)", tail=" ON DUPLICATE KEY UPDATE user_id = VALUES(user_id)"),
    insert_case("insert-on-duplicate-same-column", "N", "INSERT INTO {t} (order_id, user_id) VALUES ",
                [(gid(44, 2), 2)], 1, n_node, "(%s, %s)", tail=" ON DUPLICATE KEY UPDATE user_id = user_id, amount = 0"),
    insert_case("replace-one", "N", "REPLACE INTO {t} (order_id, user_id) VALUES ", [(gid(51, 10086), 10086)], 1, n_node, "(%s, %s)"),
    insert_case("replace-split", "N", "REPLACE INTO {t} (order_id, user_id) VALUES ", [(gid(52, 1), 1), (gid(53, 10086), 10086), (gid(54, 1), 1)], 1,
                n_node, "(%s, %s)"),
    insert_case("insert-ignore", "N", "INSERT IGNORE INTO {t} (order_id, user_id) VALUES ", [(gid(55, 5), 5)], 1, n_node, "(%s, %s)"),
    insert_case("s-insert-split", "S", "INSERT INTO {t} (order_id, user_id) VALUES ",
                [(1, 882341), (2, 5), (3, 21), (4, 37), (5, 16)], 1, s_node, "(%s, %s)"),
    insert_case("s-insert-literal-one", "S", "INSERT INTO {t} (order_id, user_id) VALUES ", [(6, 31)], 1, s_node,
                "({0}, {1})", literal=True),
    insert_case("r-insert-with-id", "R", "INSERT INTO {t} (id, user_id) VALUES ", [(1, 999), (2, 1000), (3, 1003)], 1,
                r_log_node, "(%s, %s)", table="t_log"),
    # not split: broadcast / single / unknown targets
    Case("insert-broadcast-every-source", "N", "INSERT INTO t_dict_region (id, name) VALUES (%s, %s)", [1, "x"],
         sources=N_SOURCES, kind=BROADCAST, statement="insert", is_write=True),
    Case("s-insert-broadcast", "S", "INSERT INTO t_dict_status (id) VALUES (1), (2)", sources=["ds0", "ds1"], is_write=True),
    Case("insert-single", "N", "INSERT INTO t_config (k, v) VALUES (%s, %s)", ["a", "b"], sources=["ds_0"], is_write=True),
    Case("r-insert-single", "R", "INSERT INTO t_setting (k) VALUES ('x')", sources=["ds_3"], is_write=True),
    Case("insert-unknown-default", "N", "INSERT INTO t_misc (k) VALUES (1)", sources=["ds_0"], is_write=True),
    Case("r-insert-unknown-refused", "R", "INSERT INTO t_misc (k) VALUES (1)", error=(RoutingError, ("'t_misc'",))),
    # INSERT ... SELECT stays on one shard
    Case("insert-select-one-shard", "N", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id FROM t_order_item "
         "WHERE user_id = %s", [5], nodes=nodes(n_node, 5), statement="insert", is_write=True),
    Case("insert-select-star", "N", "INSERT INTO t_order SELECT * FROM t_order_item WHERE user_id = 1",
         nodes=nodes(n_node, 1), is_write=True),
    Case("insert-select-on-duplicate", "N", "INSERT INTO t_order (order_id, user_id) SELECT i.order_id, i.user_id "
         "FROM t_order_item i WHERE i.user_id = 2 ON DUPLICATE KEY UPDATE amount = 0", nodes=nodes(n_node, 2)),
    Case("insert-select-into-single", "N", "INSERT INTO t_config (a) SELECT a FROM t_order WHERE user_id = 1",
         nodes=nodes(n_node, 1), is_write=True),
    # ... or runs once per node when each node copies its own rows into itself (tests/test_router_insert_forms.py)
    Case("s-insert-select-per-node", "S", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id "
         "FROM t_order_item WHERE user_id IN (1, 2)", nodes=nodes(s_node, 1, 2), kind=MULTI, is_write=True),
    Case("insert-select-multi-refused", "S", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id "
         "FROM t_order_item WHERE user_id IN (1, 2) LIMIT 10", error=(UnsupportedSQLError, ("INSERT ... SELECT", "'t_order'"))),
    Case("insert-select-full-refused", "N", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id FROM t_order_item",
         error=(FullRouteError, ("'t_order'", "user_id"))),
    Case("insert-select-other-key-refused", "N", "INSERT INTO t_order (order_id, user_id) SELECT order_id, 999 "
         "FROM t_order_item WHERE user_id = 5", error=(UnsupportedSQLError, ("'user_id'", "'999'"))),
    Case("insert-select-no-sharded-source", "N", "INSERT INTO t_order (a, user_id) SELECT a, id FROM t_dict_region",
         error=(UnsupportedSQLError, ("INSERT ... SELECT", "'t_order'"))),
    Case("insert-select-into-broadcast", "N", "INSERT INTO t_dict_region (a) SELECT a FROM t_order WHERE user_id = 1",
         error=(UnsupportedSQLError, ("'t_dict_region'", "'t_order'"))),
    Case("insert-select-on-duplicate-shard-key", "N", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id "
         "FROM t_order_item WHERE user_id = 5 ON DUPLICATE KEY UPDATE user_id = 1", error=(ShardKeyUpdateError, ("'user_id'",))),
    # refused INSERTs name what is wrong
    Case("insert-on-duplicate-shard-key", "N", "INSERT INTO t_order (order_id, user_id) VALUES (1, 2) "
         "ON DUPLICATE KEY UPDATE user_id = 3", error=(ShardKeyUpdateError, ("'user_id'", "'t_order'"))),
    Case("insert-on-duplicate-other-values", "N", "INSERT INTO t_order (order_id, user_id) VALUES (1, 2) "
         "ON DUPLICATE KEY UPDATE user_id = VALUES(order_id)", error=(ShardKeyUpdateError, ("'user_id'",))),
    Case("insert-shard-key-expression", "N", "INSERT INTO t_order (order_id, user_id) VALUES (1, 2 + 3)",
         error=(UnsupportedSQLError, ("'user_id'", "expression"))),
    Case("insert-without-shard-key", "N", "INSERT INTO t_order (order_id, amount) VALUES (1, 2)",
         error=(UnsupportedSQLError, ("'user_id'", "'t_order'"))),
    Case("insert-without-columns", "N", "INSERT INTO t_order VALUES (1, 2)", error=(UnsupportedSQLError, ("'t_order'", "columns"))),
    Case("insert-row-width", "N", "INSERT INTO t_order (order_id, user_id) VALUES (1, 2), (3)",
         error=(UnsupportedSQLError, ("'t_order'",))),
    Case("insert-null-key", "N", "INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", [1, None],
         error=(DdmError, ("user_id", "NULL"))),
    Case("insert-float-key", "N", "INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", [1, 2.5],
         error=(DdmError, ("user_id", "2.5"))),
    # t_order_item reuses t_order's table algorithm (it names t_order_${user_id % 16}): its rows go where its reads
    # look, through its binding group's first table, t_order (route/insert/insert.py routing_table)
    Case("s-insert-item-alone-reused-table-algorithm", "S", "INSERT INTO t_order_item (order_id, user_id) VALUES (1, 1)",
         nodes=nodes(s_node, 1), kind=SINGLE, statement="insert", is_write=True),
]

UPDATES = [
    Case("update-point", "N", "UPDATE t_order SET amount = %s WHERE user_id = %s", [9, 10086], nodes=nodes(n_node, 10086),
         kind=SINGLE, statement="update", is_write=True),
    Case("update-in", "N", "UPDATE t_order SET amount = 1 WHERE user_id IN (1, 2, 3)", nodes=nodes(n_node, 1, 2, 3),
         kind=MULTI, is_write=True),
    Case("update-or-params", "N", "UPDATE t_order SET status = %s WHERE user_id = %s OR user_id = %s", [2, 4, 5],
         nodes=nodes(n_node, 4, 5)),
    Case("update-alias", "N", "UPDATE t_order o SET o.status = 1 WHERE o.user_id = 6", nodes=nodes(n_node, 6)),
    Case("update-binding-join", "N", "UPDATE t_order o JOIN t_order_item i ON o.user_id = i.user_id AND o.order_id = i.order_id SET o.a = 1 "
         "WHERE o.user_id = 10086", nodes=nodes(n_node, 10086)),
    Case("update-join-broadcast-read", "N", "UPDATE t_order o JOIN t_dict_region d ON d.id = o.r SET o.a = d.b "
         "WHERE o.user_id = 1", nodes=nodes(n_node, 1)),
    Case("update-set-key-to-itself", "N", "UPDATE t_order SET user_id = user_id, amount = 0 WHERE user_id = 7",
         nodes=nodes(n_node, 7)),
    Case("update-set-key-same-value", "N", "UPDATE t_order SET user_id = 7 WHERE user_id = 7", nodes=nodes(n_node, 7)),
    Case("update-set-key-same-node", "N", "UPDATE t_order SET user_id = %s WHERE user_id = %s", [9, 2],
         nodes=nodes(n_node, 2)),
    Case("update-set-key-to-itself-multi", "N", "UPDATE t_order SET user_id = user_id WHERE user_id IN (1, 3)",
         nodes=nodes(n_node, 1, 3)),
    Case("update-order-limit-one-shard", "N", "UPDATE t_order SET a = 1 WHERE user_id = 1 ORDER BY id LIMIT 1",
         nodes=nodes(n_node, 1)),
    Case("s-update-point", "S", "UPDATE t_order SET amount = amount + 1 WHERE user_id = ?", [882341],
         nodes=nodes(s_node, 882341)),
    Case("r-update-range", "R", "UPDATE t_log SET a = 1 WHERE user_id BETWEEN 1001 AND 1002", nodes=nodes(r_log_node, 1001, 1002)),
    Case("r-update-full-allowed", "R", "UPDATE t_log SET a = 1 WHERE status = 2", nodes=all_nodes("R"), kind=FULL,
         is_write=True),
    Case("update-broadcast", "N", "UPDATE t_dict_region SET name = %s WHERE id = %s", ["x", 1], sources=N_SOURCES,
         kind=BROADCAST, is_write=True),
    Case("update-single", "R", "UPDATE t_setting SET v = 1", sources=["ds_3"], is_write=True),
    Case("update-set-key-other-value", "N", "UPDATE t_order SET user_id = 8 WHERE user_id = 7",
         error=(ShardKeyUpdateError, ("'user_id'", "'t_order'"))),
    Case("update-set-key-param-other-node", "N", "UPDATE t_order SET user_id = %s WHERE user_id = %s", [1, 5],
         error=(ShardKeyUpdateError, ("'user_id'",))),
    Case("update-set-key-expression", "N", "UPDATE t_order SET user_id = user_id + 1 WHERE user_id = 7",
         error=(ShardKeyUpdateError, ("'user_id'",))),
    Case("update-set-key-multi", "N", "UPDATE t_order SET user_id = 7 WHERE user_id IN (7, 8)",
         error=(ShardKeyUpdateError, ("'user_id'",))),
    Case("s-update-set-key", "S", "UPDATE t_order SET user_id = 6 WHERE user_id = 5", error=(ShardKeyUpdateError, ("'user_id'",))),
    Case("s-update-set-key-same-table", "S", "UPDATE t_order SET user_id = 37 WHERE user_id = 5",
         nodes=nodes(s_node, 5)),  # 37 % 32 = 5: the same node, so allowed
    # native_orders' order_id is a gene id that routes the database too: it is guarded like the shard key
    Case("update-set-gene-id", "N", "UPDATE t_order SET order_id = 5 WHERE user_id = 1",
         error=(ShardKeyUpdateError, ("'order_id'", "'t_order'"))),
    Case("update-set-gene-id-to-itself", "N", "UPDATE t_order SET order_id = order_id, amount = 1 WHERE user_id = 1",
         nodes=nodes(n_node, 1)),
    Case("s-update-order-id-not-routing", "S", "UPDATE t_order SET order_id = 5 WHERE user_id = 1", nodes=nodes(s_node, 1)),
    Case("on-duplicate-gene-id", "N", "INSERT INTO t_order (user_id) VALUES (2) ON DUPLICATE KEY UPDATE order_id = 7",
         error=(ShardKeyUpdateError, ("'order_id'",))),
    Case("insert-select-gene-id-literal", "N", "INSERT INTO t_order (order_id, user_id) SELECT 5, user_id FROM t_order_item "
         "WHERE user_id = 1", error=(UnsupportedSQLError, ("'order_id'", "'5'"))),
    Case("update-order-limit-multi", "N", "UPDATE t_order SET a = 1 WHERE user_id IN (1, 3) ORDER BY id LIMIT 1",
         error=(UnsupportedSQLError, ("ORDER BY", "'t_order'"))),
    Case("update-no-key-refused", "N", "UPDATE t_order SET a = 1 WHERE status = 1",
         error=(FullRouteError, ("'t_order'", "user_id", "allowDmlFullRoute"))),
    # A ShardingSphere YAML without auditors: every shard, as ShardingSphere routes it (tests/test_router_shardingsphere.py)
    Case("s-update-no-key-every-shard", "S", "UPDATE t_order SET a = 1", nodes=all_nodes("S"), kind=FULL, is_write=True),
    Case("update-broadcast-with-sharded", "N", "UPDATE t_dict_region d JOIN t_order o ON d.id = o.r SET d.a = 1 "
         "WHERE o.user_id = 1", error=(UnsupportedSQLError, ("'t_dict_region'", "'t_order'"))),
    Case("update-broadcast-subquery-sharded", "N", "UPDATE t_dict_region SET a = 1 WHERE id IN "
         "(SELECT r FROM t_order WHERE user_id = 1)", error=(UnsupportedSQLError, ("'t_dict_region'",))),
]

DELETES = [
    Case("delete-point", "N", "DELETE FROM t_order WHERE user_id = %s", [3], nodes=nodes(n_node, 3), kind=SINGLE,
         statement="delete", is_write=True),
    Case("delete-in", "N", "DELETE FROM t_order WHERE user_id IN (%s, %s)", [1, 3], nodes=nodes(n_node, 1, 3), kind=MULTI),
    Case("delete-item", "N", "DELETE FROM t_order_item WHERE user_id = 4 AND item_id = 9", nodes=nodes(n_node, 4)),
    Case("delete-alias-join", "N", "DELETE o FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id AND o.order_id = i.order_id "
         "WHERE o.user_id = 10086", nodes=nodes(n_node, 10086)),
    Case("delete-table-named", "N", "DELETE t_order FROM t_order WHERE user_id = 10086", nodes=nodes(n_node, 10086)),
    Case("delete-limit-one-shard", "N", "DELETE FROM t_order WHERE user_id = 5 LIMIT 10", nodes=nodes(n_node, 5)),
    Case("s-delete-or", "S", "DELETE FROM t_order WHERE user_id = 1 OR user_id = 33", nodes=nodes(s_node, 1, 33)),
    Case("r-delete-range", "R", "DELETE FROM t_account WHERE account_id < 150",
         nodes=[n for n in all_nodes("R", "t_account")][:2]),
    Case("r-delete-full-allowed", "R", "DELETE FROM t_log", nodes=all_nodes("R"), kind=FULL, is_write=True),
    Case("delete-broadcast", "N", "DELETE FROM t_dict_region WHERE id = 1", sources=N_SOURCES, kind=BROADCAST, is_write=True),
    Case("s-delete-broadcast", "S", "DELETE FROM t_dict_status", sources=["ds0", "ds1"], is_write=True),
    Case("delete-no-key-refused", "N", "DELETE FROM t_order", error=(FullRouteError, ("'t_order'", "user_id"))),
    Case("delete-other-column-refused", "N", "DELETE FROM t_order WHERE status = 1", error=(FullRouteError, ("user_id",))),
    Case("s-delete-not-every-shard", "S", "DELETE FROM t_order WHERE NOT user_id = 1", nodes=all_nodes("S"), kind=FULL),
    Case("delete-limit-multi", "S", "DELETE FROM t_order WHERE user_id IN (1, 2) LIMIT 1",
         error=(UnsupportedSQLError, ("LIMIT", "'t_order'"))),
    Case("delete-broadcast-with-sharded", "N", "DELETE d FROM t_dict_region d JOIN t_order o ON d.id = o.r "
         "WHERE o.user_id = 1", error=(UnsupportedSQLError, ("'t_dict_region'",))),
]

CASES = INSERTS + UPDATES + DELETES


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_dml(case: Case) -> None:
    check(case)


# -- key generation ------------------------------------------------------------------------------


def test_gene_key_generated_when_absent() -> None:
    """native_orders: order_id comes from a GENE generator carrying the user's slot."""
    users = [1, 2, 10086, 1, 882341]
    sql = "INSERT INTO t_order (user_id, amount) VALUES " + ", ".join(["(%s, %s)"] * len(users))
    params = [v for u in users for v in (u, 10)]
    plan = router("N").route(sql, params)
    keys = plan.generated_keys
    assert len(keys) == len(users) and len(set(keys)) == len(users)
    assert all(isinstance(k, int) and gene_of(k, 10) == slot_of(u, 10) for k, u in zip(keys, users))
    expected = nodes(n_node, *users)
    assert [u.data_source for u in plan.units] == [n.ds for n in expected]
    for unit, node in zip(plan.units, expected):
        rows = [i for i, u in enumerate(users) if n_node(u) == node]
        head = comment("N", node.ds) + f"INSERT INTO {node.table('t_order')} (user_id, amount, order_id) VALUES "
        assert norm(unit.sql) == norm(head + ", ".join(["(%s, %s, %s)"] * len(rows)))
        assert unit.params == tuple(v for i in rows for v in (users[i], 10, keys[i]))


def test_snowflake_key_for_binding_table() -> None:
    plan = router("N").route("INSERT INTO t_order_item (order_id, user_id) VALUES (%s, %s), (%s, %s)", [1, 5, 2, 5])
    (unit,) = plan.units
    a, b = plan.generated_keys
    assert a != b and all(isinstance(k, int) and k > 0 for k in (a, b))
    assert unit.params == (1, 5, a, 2, 5, b)
    assert "(order_id, user_id, item_id)" in unit.sql


def test_generated_key_is_a_param_even_in_literal_sql() -> None:
    """Values are passed as params, never spliced into SQL text — generated keys included."""
    plan = router("N").route("INSERT INTO t_order (user_id, note) VALUES (5, '50%')")
    (unit,) = plan.units
    (key,) = plan.generated_keys
    assert str(key) not in unit.sql and unit.params == (key,)
    node = n_node(5)
    assert unit.sql == comment("N", node.ds) + f"INSERT INTO {node.table('t_order')} (user_id, note, order_id) VALUES (5, '50%%', %s)"


def test_key_given_is_not_generated() -> None:
    plan = router("R").route("INSERT INTO t_log (id, user_id) VALUES (%s, %s)", [77, 5])
    assert plan.generated_keys == () and plan.units[0].params == (77, 5)


def test_snowflake_key_r_config() -> None:
    plan = router("R").route("INSERT INTO t_log (user_id) VALUES (%s), (%s)", [5, 1005])
    assert len(plan.units) == 2 and len(plan.generated_keys) == 2
    assert [u.params for u in plan.units] == [(5, plan.generated_keys[0]), (1005, plan.generated_keys[1])]
    assert [u.data_source for u in plan.units] == ["ds_1", "ds_1"]
    assert [t for u in plan.units for _, t in u.tables] == ["t_log_1_0", "t_log_1_1"]


def test_generated_gene_key_routes_back_to_its_row() -> None:
    """A row inserted with a generated order_id is found again by that order_id (a superset at least)."""
    from dataclasses import replace

    from ddm_core.route import Router

    cfg = config("N")
    r = Router(replace(cfg, runtime=replace(cfg.runtime, allow_full_route=True)))
    for user in [1, 5, 10086, 882341, "bob"]:
        plan = r.route("INSERT INTO t_order (user_id) VALUES (%s)", [user])
        (key,) = plan.generated_keys
        where = {(u.data_source, t) for u in plan.units for _, t in u.tables}
        found = r.route("SELECT * FROM t_order WHERE order_id = %s", [key])
        assert where <= {(u.data_source, t) for u in found.units for _, t in u.tables}


def test_explicit_order_id_not_carrying_gene_is_refused() -> None:
    """An explicit id without its user's gene would be invisible to WHERE order_id = ?: refused, named."""
    r = router("N")
    with pytest.raises(ShardValueError, match="order_id=13.*slot of its shard key 3"):
        r.route("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", [13, 3])
    good = gid(13, 3)
    plan = r.route("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", [good, 3])
    found = r.route("SELECT * FROM t_order WHERE order_id = %s", [good])
    assert {u.data_source for u in plan.units} <= {u.data_source for u in found.units}


def test_hint_forced_node_does_not_license_shard_key_update() -> None:
    """SET user_id = v under a forced node is allowed only if v itself lives on that node."""
    from ddm_core.route import hint

    r = router("N")
    with hint(database="ds_2", table="t_order_2_1"):
        with pytest.raises(ShardKeyUpdateError):
            r.route("UPDATE t_order SET user_id = 1 WHERE status = 3")
        home = next(u for u in range(10_000) if n_node(u).order == (2, 1))
        plan = r.route("UPDATE t_order SET user_id = %s WHERE status = 3", [home])
        assert [(u.data_source, u.tables) for u in plan.units] == [("ds_2", (("t_order", "t_order_2_1"),))]
