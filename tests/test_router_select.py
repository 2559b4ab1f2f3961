"""Router, table-driven: SELECT shard conditions, joins, single / broadcast tables, subqueries, UNION.

Every case names its statement, its params and the units it must produce (data source,
SQL with whitespace collapsed, params); expected nodes come from the formulas in
:mod:`router_cases`, never from the router.
"""

from __future__ import annotations

import pytest

from ddm_core.errors import FullRouteError, RoutingError, UnsupportedSQLError
from ddm_core.route import RouteKind

from router_cases import Case, all_nodes, check, comment, ids, n_node, nodes, r_account_node, r_log_node, s_node

SINGLE, MULTI, FULL = RouteKind.SINGLE, RouteKind.MULTI, RouteKind.FULL


def N(id: str, sql: str, params=None, users=(), **kw) -> Case:
    kw.setdefault("nodes", nodes(n_node, *users))
    return Case(id, "N", sql, params, **kw)


def S(id: str, sql: str, params=None, users=(), **kw) -> Case:
    kw.setdefault("nodes", nodes(s_node, *users))
    return Case(id, "S", sql, params, **kw)


def R(id: str, sql: str, params=None, users=(), **kw) -> Case:
    kw.setdefault("nodes", nodes(r_log_node, *users))
    return Case(id, "R", sql, params, **kw)


def A(id: str, sql: str, params=None, accounts=(), **kw) -> Case:
    kw.setdefault("nodes", nodes(r_account_node, *accounts))
    return Case(id, "R", sql, params, **kw)


S_ALL = all_nodes("S")

# -- =, IN, OR, AND, NOT / unknown ---------------------------------------------------------

CONDITIONS = [
    N("eq-literal", "SELECT * FROM t_order WHERE user_id = 10086", users=[10086], kind=SINGLE, statement="select", is_write=False),
    N("eq-format", "SELECT * FROM t_order WHERE user_id = %s", [10086], users=[10086], kind=SINGLE),
    N("eq-qmark", "SELECT * FROM t_order WHERE user_id = ?", [882341], users=[882341], kind=SINGLE),
    N("eq-pyformat", "SELECT * FROM t_order WHERE user_id = %(uid)s AND status = %(st)s", {"uid": 7, "st": 2},
      users=[7], unit_params=(7, 2)),
    N("eq-pyformat-repeated", "SELECT * FROM t_order WHERE user_id = %(u)s OR buyer_id = %(u)s AND user_id = %(u)s",
      {"u": 3}, users=[3], unit_params=(3, 3, 3)),
    N("eq-reversed", "SELECT * FROM t_order WHERE 10086 = user_id", users=[10086]),
    N("eq-null-safe", "SELECT * FROM t_order WHERE user_id <=> 5", users=[5]),
    N("eq-negative", "SELECT * FROM t_order WHERE user_id = -1", users=[-1]),
    N("eq-string-key", "SELECT * FROM t_order WHERE user_id = %s", ["alice"], users=["alice"]),
    N("eq-with-other-columns", "SELECT id, amount FROM t_order WHERE status = 1 AND user_id = %s AND amount > 10",
      [4], users=[4]),
    N("eq-in-parens", "SELECT * FROM t_order WHERE (user_id = 6)", users=[6]),
    N("eq-params-order", "SELECT * FROM t_order WHERE amount > %s AND user_id = %s AND status IN (%s, %s)",
      [10, 8, 1, 2], users=[8]),
    N("in-literals", "SELECT * FROM t_order WHERE user_id IN (1, 3, 5)", users=[1, 3, 5], kind=MULTI),
    N("in-one", "SELECT * FROM t_order WHERE user_id IN (4)", users=[4], kind=SINGLE),
    N("in-params-same-node", "SELECT * FROM t_order WHERE user_id IN (%s, %s)", [2, 9], users=[2, 9], kind=SINGLE),
    N("in-params-duplicates", "SELECT * FROM t_order WHERE user_id IN (%s, %s, %s)", [5, 5, 5], users=[5], kind=SINGLE),
    N("in-qmark", "SELECT * FROM t_order WHERE user_id IN (?, ?, ?, ?)", [1, 2, 3, 4], users=[1, 2, 3, 4]),
    N("in-and-in", "SELECT * FROM t_order WHERE user_id IN (1, 2) AND user_id IN (2, 3)", users=[2], kind=SINGLE),
    N("in-and-eq", "SELECT * FROM t_order WHERE user_id IN (1, 2, 3) AND user_id = 3", users=[3]),
    N("or-eq", "SELECT * FROM t_order WHERE user_id = 1 OR user_id = 5", users=[1, 5], kind=MULTI),
    N("or-eq-in-param", "SELECT * FROM t_order WHERE user_id = 1 OR user_id IN (2, 3) OR user_id = %s", [4],
      users=[1, 2, 3, 4]),
    N("or-inside-and", "SELECT * FROM t_order WHERE x = 1 AND (user_id = 6 OR user_id = 7)", users=[6, 7]),
    N("or-of-ands", "SELECT * FROM t_order WHERE (user_id = 1 AND status = 2) OR (user_id = 10 AND status = 3)",
      users=[1, 10]),
    N("and-distributes-over-or", "SELECT * FROM t_order WHERE (user_id = 1 OR user_id = 2) AND (user_id = 2 OR user_id = 3)",
      users=[2]),
    N("contradiction-first-node", "SELECT * FROM t_order WHERE user_id = 1 AND user_id = 2",
      unit_sql="SELECT * FROM {t_order} WHERE user_id = 1 AND user_id = 2", nodes=all_nodes("N")[:1]),
    N("false-first-node", "SELECT * FROM t_order WHERE user_id = 1 AND FALSE", nodes=all_nodes("N")[:1]),
    N("alias", "SELECT o.id FROM t_order o WHERE o.user_id = 5", users=[5]),
    N("alias-as", "SELECT o.id FROM t_order AS o WHERE o.user_id = %s", [6], users=[6]),
    N("qualified-column", "SELECT t_order.id FROM t_order WHERE t_order.user_id = 7", users=[7]),
    N("backticks", "SELECT * FROM `t_order` WHERE `user_id` = 8", users=[8],
      unit_sql="SELECT * FROM {t_order} WHERE `user_id` = 8"),
    N("upper-case", "SELECT * FROM T_ORDER WHERE USER_ID = 9", users=[9],
      unit_sql="SELECT * FROM {t_order} WHERE USER_ID = 9"),
    N("schema-qualified", "SELECT * FROM order_db.t_order WHERE order_db.t_order.user_id = 1", users=[1],
      unit_sql="SELECT * FROM {t_order} WHERE {t_order}.user_id = 1"),
    S("s-schema-qualified-multi", "SELECT order_db.t_order.a FROM order_db.t_order WHERE order_db.t_order.user_id "
      "IN (1, 2) ORDER BY order_db.t_order.b", users=[1, 2],
      unit_sql="SELECT {t_order}.a, {t_order}.b AS __ddm_o0 FROM {t_order} WHERE {t_order}.user_id IN (1, 2) "
               "ORDER BY {t_order}.b"),
    N("string-mentions-table", "SELECT 't_order' AS t, user_id FROM t_order WHERE user_id = 1 AND note = 'FROM t_order'",
      users=[1]),
    N("comment-kept", "SELECT * FROM t_order /* t_order */ WHERE user_id = 2 -- user_id = 3\n", users=[2],
      unit_sql="SELECT * FROM {t_order} /* t_order */ WHERE user_id = 2 -- user_id = 3\n"),
    N("trailing-semicolon", "SELECT * FROM t_order WHERE user_id = 3;", users=[3]),
    N("like-on-other-column", "SELECT * FROM t_order WHERE user_id = 4 AND note LIKE %s", ["a%"], users=[4]),
    N("select-for-update", "SELECT * FROM t_order WHERE user_id = 5 FOR UPDATE", users=[5]),
    # No usable shard condition on 16 nodes (allow_full_route: false, threshold 8): refused by name.
    Case("full-refused-no-where", "N", "SELECT * FROM t_order", error=(FullRouteError, ("'t_order'", "user_id", "16"))),
    Case("full-refused-not", "N", "SELECT * FROM t_order WHERE NOT user_id = 5", error=(FullRouteError, ("'t_order'", "user_id"))),
    Case("full-refused-or-other", "N", "SELECT * FROM t_order WHERE user_id = 5 OR status = 1",
         error=(FullRouteError, ("'t_order'", "user_id"))),
    Case("full-refused-function", "N", "SELECT * FROM t_order WHERE user_id + 0 = 1", error=(FullRouteError, ("user_id",))),
    Case("full-refused-is-null", "N", "SELECT * FROM t_order WHERE user_id IS NULL", error=(FullRouteError, ("user_id",))),
    Case("full-refused-in-subquery", "N", "SELECT * FROM t_order WHERE user_id IN (SELECT id FROM t_dict_region)",
         error=(FullRouteError, ("user_id",))),
    Case("full-refused-hash-range", "N", "SELECT * FROM t_order WHERE user_id BETWEEN 1 AND 3",
         error=(FullRouteError, ("'t_order'", "user_id"))),
    Case("full-refused-other-column", "N", "SELECT * FROM t_order WHERE buyer_id = %s", [915227417570705598],
         error=(FullRouteError, ("'t_order'", "user_id"))),
    Case("full-refused-or-true", "N", "SELECT * FROM t_order WHERE user_id = 1 OR TRUE", error=(FullRouteError, ("user_id",))),
    # ss_order_db_2x16.yaml (ShardingSphere YAML): full routes allowed → every one of the 32 nodes.
    S("s-eq-882341", "SELECT * FROM t_order WHERE user_id = %s", [882341], users=[882341], kind=SINGLE),
    S("s-eq-16", "SELECT * FROM t_order WHERE user_id = 16", users=[16]),
    S("s-eq-31", "SELECT * FROM t_order WHERE user_id = 31", users=[31]),
    S("s-eq-32", "SELECT * FROM t_order WHERE user_id = ?", [32], users=[32]),
    S("s-in-same-table-two-dbs", "SELECT * FROM t_order WHERE user_id IN (1, 17, 33)", users=[1, 17, 33], kind=MULTI),
    S("s-or", "SELECT * FROM t_order WHERE user_id = 5 OR user_id = 21", users=[5, 21]),
    S("s-not-full", "SELECT * FROM t_order WHERE NOT user_id = 5", nodes=S_ALL, kind=FULL),
    S("s-unknown-function-full", "SELECT * FROM t_order WHERE ABS(user_id) = 5", nodes=S_ALL, kind=FULL),
    S("s-or-other-column-full", "SELECT * FROM t_order WHERE user_id = 5 OR status = 1", nodes=S_ALL, kind=FULL),
    S("s-no-where-full", "SELECT * FROM t_order", nodes=S_ALL, kind=FULL),
    S("s-column-compare-full", "SELECT * FROM t_order WHERE user_id = buyer_id", nodes=S_ALL, kind=FULL),
    S("s-is-not-null-full", "SELECT * FROM t_order WHERE user_id IS NOT NULL", nodes=S_ALL,
      unit_sql="SELECT * FROM {t_order} WHERE NOT user_id IS NULL"),  # regenerated by sqlglot, same meaning
    # NULL in an IN list never matches (x IN (1, NULL) is TRUE only for x = 1): user 1's node.
    S("s-in-with-null-ignored", "SELECT * FROM t_order WHERE user_id IN (1, NULL)", users=[1]),
    Case("s-range-inline-refused", "S", "SELECT * FROM t_order WHERE user_id BETWEEN 1 AND 3",
         error=(UnsupportedSQLError, ("allow-range-query-with-inline-sharding", "user_id"))),
    Case("s-less-than-inline-refused", "S", "SELECT * FROM t_order WHERE user_id < 10",
         error=(UnsupportedSQLError, ("allow-range-query-with-inline-sharding",))),
    # Ranges reach range-capable algorithms (MOD narrows spans shorter than its count, BOUNDARY_RANGE / VOLUME_RANGE partitions).
    R("r-between", "SELECT * FROM t_log WHERE user_id BETWEEN 1001 AND 1002", users=[1001, 1002], kind=MULTI),
    R("r-gte-lt", "SELECT * FROM t_log WHERE user_id >= 1000 AND user_id < 1002", users=[1000, 1001]),
    R("r-gt-lte", "SELECT * FROM t_log WHERE user_id > 997 AND user_id <= 999", users=[998, 999]),
    R("r-flipped", "SELECT * FROM t_log WHERE 5 < user_id AND 8 > user_id", users=[6, 7]),
    R("r-params", "SELECT * FROM t_log WHERE user_id BETWEEN %s AND %s", [2001, 2003], users=[2001, 2002, 2003]),
    R("r-open-below", "SELECT * FROM t_log WHERE user_id < 3", users=[0, 1, 2, -1]),
    R("r-open-above", "SELECT * FROM t_log WHERE user_id > 5000", users=[5001, 5002, 5003, 5004]),
    R("r-range-and-eq", "SELECT * FROM t_log WHERE user_id = 5 AND user_id < 1000", users=[5], kind=SINGLE),
    R("r-eq-outside-range", "SELECT * FROM t_log WHERE user_id = 5 AND user_id > 1000", nodes=all_nodes("R")[:1]),
    R("r-empty-range", "SELECT * FROM t_log WHERE user_id BETWEEN 10 AND 9", nodes=all_nodes("R")[:1]),
    R("r-or-ranges", "SELECT * FROM t_log WHERE user_id BETWEEN 1 AND 2 OR user_id BETWEEN 1500 AND 1500",
      users=[1, 2, 1500]),
    R("r-wide-range-every-db", "SELECT * FROM t_log WHERE user_id BETWEEN 100 AND 200", users=[100, 101, 102, 103]),
    A("a-between", "SELECT * FROM t_account WHERE account_id BETWEEN 150 AND 250", accounts=[150, 250]),
    A("a-lt", "SELECT * FROM t_account WHERE account_id < 100", accounts=[0], kind=SINGLE),
    A("a-gte", "SELECT * FROM t_account WHERE account_id >= 300", accounts=[300]),
    A("a-eq-or-range", "SELECT * FROM t_account WHERE account_id = 150 OR account_id BETWEEN 310 AND 320",
      accounts=[150, 310]),
    A("a-in-filtered-by-range", "SELECT * FROM t_account WHERE account_id IN (50, 250) AND account_id > 100",
      accounts=[250]),
    A("a-not-full", "SELECT * FROM t_account WHERE NOT account_id = 1", nodes=all_nodes("R", "t_account"), kind=FULL),
]

# -- joins: binding tables, broadcast tables, single tables -------------------------------------

JOINS = [
    N("binding-where-left", "SELECT o.id, i.sku FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id AND o.order_id = i.order_id "
      "WHERE o.user_id = 10086", users=[10086]),
    N("binding-where-right", "SELECT * FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id AND o.order_id = i.order_id "
      "WHERE i.user_id = %s",
      [5], users=[5]),
    N("binding-condition-in-on", "SELECT * FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id AND o.order_id = i.order_id "
      "AND o.user_id = 5",
      users=[5]),
    N("binding-left-join-on", "SELECT * FROM t_order o LEFT JOIN t_order_item i ON o.order_id = i.order_id "
      "AND i.user_id = 1 WHERE o.user_id = 1", users=[1]),
    N("binding-comma-join", "SELECT * FROM t_order o, t_order_item i WHERE o.user_id = i.user_id AND "
      "o.order_id = i.order_id AND i.user_id = 3",
      users=[3]),
    N("binding-unaliased-qualifiers", "SELECT * FROM t_order, t_order_item WHERE t_order.user_id = 4 AND "
      "t_order.user_id = t_order_item.user_id AND t_order.order_id = t_order_item.order_id", users=[4]),
    N("binding-in-multi", "SELECT * FROM t_order AS o JOIN t_order_item AS i ON o.user_id = i.user_id AND o.order_id = i.order_id "
      "WHERE o.user_id IN (1, 3)", users=[1, 3], kind=MULTI),
    N("binding-item-first", "SELECT * FROM t_order_item i JOIN t_order o ON i.user_id = o.user_id AND "
      "o.order_id = i.order_id WHERE i.user_id = 7",
      users=[7]),
    N("binding-item-alone", "SELECT * FROM t_order_item WHERE user_id = %s", [8], users=[8]),
    N("broadcast-join", "SELECT * FROM t_order o JOIN t_dict_region r ON o.region_id = r.id WHERE o.user_id = 5",
      users=[5]),
    N("broadcast-join-multi", "SELECT o.id, r.name FROM t_order AS o JOIN t_dict_region AS r ON o.region_id = r.id "
      "WHERE o.user_id IN (1, 4)", users=[1, 4]),
    N("single-join-same-source", "SELECT * FROM t_order o JOIN t_config c ON o.k = c.k WHERE o.user_id = 1", users=[1]),
    Case("single-join-other-source", "N", "SELECT * FROM t_order o JOIN t_config c ON o.k = c.k WHERE o.user_id = 10086",
         error=(UnsupportedSQLError, ("'t_config'", "ds_0", "ds_2.t_order_2_2"))),
    N("unknown-join-default-source", "SELECT * FROM t_order o JOIN t_misc m ON o.k = m.k WHERE o.user_id = 2", users=[2]),
    Case("unknown-join-other-source", "N", "SELECT * FROM t_order o JOIN t_misc m ON o.k = m.k WHERE o.user_id = 5",
         error=(UnsupportedSQLError, ("'t_misc'", "ds_0"))),
    Case("s-unknown-join-no-default", "S", "SELECT * FROM t_order o JOIN t_zzz z ON o.a = z.a WHERE o.user_id = 1",
         error=(RoutingError, ("'t_zzz'",))),
    S("s-binding-point", "SELECT * FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id AND o.order_id = i.order_id "
      "WHERE o.user_id = 882341",
      users=[882341]),
    S("s-binding-pairs-32-not-1024", "SELECT o.order_id, i.item_id FROM t_order AS o JOIN t_order_item AS i "
      "ON o.user_id = i.user_id AND o.order_id = i.order_id", nodes=S_ALL, kind=FULL),
    S("s-binding-in", "SELECT * FROM t_order AS o JOIN t_order_item AS i ON o.user_id = i.user_id AND o.order_id = i.order_id "
      "WHERE i.user_id IN (5, 21)", users=[5, 21]),
    S("s-broadcast-two", "SELECT * FROM t_order o JOIN t_dict_region r ON o.r = r.id JOIN t_dict_status s ON o.s = s.id "
      "WHERE o.user_id = 40", users=[40]),
    Case("r-unbound-sharded-join", "R", "SELECT * FROM t_log l JOIN t_account a ON l.account_id = a.account_id "
         "WHERE l.user_id = 1", error=(UnsupportedSQLError, ("'t_log'", "'t_account'", "not bound"))),
    R("r-binding", "SELECT * FROM t_log l JOIN t_log_detail d ON l.user_id = d.user_id AND l.id = d.log_id "
      "WHERE d.user_id = 1234", users=[1234]),
    # No sharded table at all.
    Case("single-table", "N", "SELECT * FROM t_config WHERE k = %s", ["a"], sources=["ds_0"], kind=SINGLE),
    Case("r-single-table", "R", "SELECT * FROM t_setting", sources=["ds_3"]),
    Case("broadcast-read-first-source", "N", "SELECT * FROM t_dict_region WHERE id = 1", sources=["ds_0"], kind=SINGLE),
    Case("s-broadcast-read", "S", "SELECT * FROM t_dict_status", sources=["ds0"]),
    Case("r-broadcast-and-single", "R", "SELECT * FROM t_setting s JOIN t_country c ON s.c = c.id", sources=["ds_3"]),
    Case("unknown-default-source", "N", "SELECT * FROM t_misc WHERE a = 1", sources=["ds_0"]),
    Case("unknown-and-single", "N", "SELECT * FROM t_misc m JOIN t_config c ON m.k = c.k", sources=["ds_0"]),
    Case("r-unknown-no-default", "R", "SELECT * FROM t_nowhere", error=(RoutingError, ("'t_nowhere'", "default data source"))),
    Case("no-table", "N", "SELECT 1 + 1", sources=["ds_0"]),
    Case("r-no-table-first-source", "R", "SELECT NOW()", sources=["ds_0"]),
]

# -- subqueries and derived tables ------------------------------------------------------------------

SUBQUERIES = [
    N("derived-same-shard", "SELECT * FROM (SELECT * FROM t_order WHERE user_id = 1) t", users=[1]),
    N("derived-joined-binding", "SELECT * FROM (SELECT * FROM t_order WHERE user_id = 1) t JOIN t_order_item i "
      "ON t.order_id = i.order_id WHERE i.user_id = 1", users=[1]),
    N("in-subquery-same-shard", "SELECT * FROM t_order WHERE user_id = %s AND order_id IN "
      "(SELECT order_id FROM t_order_item WHERE user_id = %s)", [6, 6], users=[6]),
    N("exists-same-shard", "SELECT * FROM t_order o WHERE o.user_id = 1 AND EXISTS "
      "(SELECT 1 FROM t_order_item i WHERE i.user_id = 1)", users=[1]),
    N("scalar-subquery", "SELECT (SELECT COUNT(*) FROM t_order_item i WHERE i.user_id = 2) AS n FROM t_order "
      "WHERE user_id = 2", users=[2]),
    N("subquery-broadcast", "SELECT * FROM t_order WHERE user_id = 3 AND region IN (SELECT id FROM t_dict_region)",
      users=[3]),
    N("cte-same-shard", "WITH x AS (SELECT * FROM t_order WHERE user_id = 4) SELECT * FROM x", users=[4]),
    Case("derived-broadcast", "N", "SELECT * FROM (SELECT * FROM t_dict_region) r", sources=["ds_0"]),
    Case("s-cte-broadcast", "S", "WITH x AS (SELECT * FROM t_dict_region) SELECT * FROM x", sources=["ds0"]),
    S("s-subquery-broadcast-multi", "SELECT * FROM t_order WHERE user_id IN (1, 2) AND region IN "
      "(SELECT id FROM t_dict_region)", users=[1, 2]),
    # users 1 and 3 live in different data sources (ds_0, ds_1); two shards of one data source
    # can serve both (tests/test_router_joins.py)
    Case("subquery-other-shard", "N", "SELECT * FROM t_order WHERE user_id = 1 AND order_id IN "
         "(SELECT order_id FROM t_order_item WHERE user_id = 3)", error=(UnsupportedSQLError, ("subquery", "t_order_item"))),
    Case("subquery-unconstrained", "N", "SELECT * FROM t_order WHERE user_id = 1 AND EXISTS "
         "(SELECT 1 FROM t_order_item i WHERE i.order_id = t_order.order_id)", error=(UnsupportedSQLError, ("subquery", "t_order_item"))),
    Case("subquery-multi-shard", "N", "SELECT * FROM t_order WHERE user_id IN (1, 2) AND order_id IN "
         "(SELECT order_id FROM t_order_item WHERE user_id IN (1, 2))", error=(UnsupportedSQLError, ("subquery",))),
    Case("derived-multi-shard", "S", "SELECT * FROM (SELECT * FROM t_order WHERE user_id IN (1, 2)) t",
         error=(UnsupportedSQLError, ("subquery", "t_order"))),
    # The outer WHERE on a group key of the derived table pins it (tests/test_router_conditions.py has more).
    S("derived-group-by-pinned", "SELECT * FROM (SELECT user_id, COUNT(*) c FROM t_order GROUP BY user_id) t "
      "WHERE t.user_id = 1", users=[1]),
    Case("derived-limit-full", "S", "SELECT * FROM (SELECT user_id FROM t_order LIMIT 5) t WHERE t.user_id = 1",
         error=(UnsupportedSQLError, ("subquery", "t_order"))),
]

# -- UNION ---------------------------------------------------------------------------------------------

UNIONS = [
    N("union-same-shard", "SELECT a FROM t_order WHERE user_id = 1 UNION SELECT a FROM t_order_item WHERE user_id = 1",
      users=[1]),
    N("union-all-order-by-one-shard", "SELECT a FROM t_order WHERE user_id = 1 UNION ALL SELECT a FROM t_order "
      "WHERE user_id = 1 ORDER BY a", users=[1]),
    N("union-broadcast-branch", "SELECT a FROM t_order WHERE user_id = 2 UNION SELECT name FROM t_dict_region", users=[2]),
    S("s-union-two-shards", "SELECT a FROM t_order WHERE user_id = 1 UNION SELECT a FROM t_order WHERE user_id = 2",
      users=[1, 2], merge={"distinct": True}),
    S("s-union-all-two-shards", "SELECT a FROM t_order WHERE user_id = 1 UNION ALL SELECT a FROM t_order_item "
      "WHERE user_id = 17", users=[1, 17], merge={"distinct": False}),
    Case("s-union-order-multi-refused", "S", "SELECT a FROM t_order WHERE user_id = 1 UNION ALL SELECT a FROM t_order "
         "WHERE user_id = 2 ORDER BY a", error=(UnsupportedSQLError, ("UNION", "ORDER BY"))),
    Case("union-full-refused", "N", "SELECT a FROM t_order WHERE user_id = 1 UNION ALL SELECT a FROM t_order",
         error=(FullRouteError, ("'t_order'",))),
    Case("union-broadcast-and-single", "N", "SELECT a FROM t_dict_region UNION SELECT b FROM t_config", sources=["ds_0"]),
]

CASES = CONDITIONS + JOINS + SUBQUERIES + UNIONS


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_select(case: Case) -> None:
    check(case)


def test_binding_join_is_32_pairs_not_1024() -> None:
    """A full binding join over the 2 × 16 layout runs t_order_k with t_order_item_k only."""
    plan = check(next(c for c in JOINS if c.id == "s-binding-pairs-32-not-1024"))
    assert len(plan.units) == 32
    pairs = {tuple(p for _, p in u.tables) for u in plan.units}
    assert pairs == {(f"t_order_{t}", f"t_order_item_{t}") for t in range(16)}
    assert {u.data_source for u in plan.units} == {"ds0", "ds1"}


def test_user_882341_goes_to_ds0_t_order_5() -> None:
    """882341 % 32 = 5 (computed, not copied: docs/notes.md#compute-expected-routes), so ds0.t_order_5."""
    assert 882341 % 32 == 5 and s_node(882341).ds == "ds0" and s_node(882341).table("t_order") == "t_order_5"
    plan = check(S("slip", "SELECT * FROM t_order WHERE user_id = %s", [882341], users=[882341]))
    assert plan.tables[0].nodes == ("ds0.t_order_5",)


def test_or_routes_to_union_of_targets() -> None:
    """OR → union of each branch's targets, each of them computed on its own."""
    for a, b in [(1, 5), (2, 9), (3, 10086)]:
        case = N("or", f"SELECT * FROM t_order WHERE user_id = {a} OR user_id = {b}", users=[a, b])
        plan = check(case)
        assert {u.data_source for u in plan.units} == {n_node(a).ds, n_node(b).ds}


def test_table_route_explains_decision() -> None:
    plan = check(N("why", "SELECT * FROM t_order WHERE user_id = 10086", users=[10086]))
    (route,) = plan.tables
    assert route.logic_table == "t_order" and route.nodes == ("ds_2.t_order_2_2",)
    assert "user_id" in route.reason and "SLOTS" in route.reason and "HASH_MOD" in route.reason
    assert plan.explain()[0][0] == "ds_2"


def test_hash_range_is_flagged_in_plan() -> None:
    """A range on a hash algorithm goes everywhere, and the plan says why."""
    from dataclasses import replace

    from ddm_core.route import Router

    from router_cases import config

    r = Router(replace(config("N"), runtime=replace(config("N").runtime, allow_full_route=True)))
    plan = r.route("SELECT * FROM t_order WHERE user_id BETWEEN 1 AND 3")
    assert len(plan.units) == 16 and plan.kind is FULL
    assert "cannot narrow a range" in plan.tables[0].reason


def test_literal_percent_is_doubled_for_format_units() -> None:
    """Units are %-format strings in the ``format`` family: ``unit.sql % unit.params`` is what runs.

    A statement without placeholders keeps its text byte for byte (PyMySQL would not
    interpolate it), so a literal ``%`` comes back doubled and the executor's
    ``sql % ()`` restores it.
    """
    sql = "SELECT * FROM t_order WHERE user_id = 4 AND note LIKE 'a%' AND pct = '100%%'"
    plan = check(N("literal-percent", sql, users=[4],
                   unit_sql="SELECT * FROM {t_order} WHERE user_id = 4 AND note LIKE 'a%%' AND pct = '100%%%%'"))
    (unit,) = plan.units
    assert unit.sql % unit.params == comment("N", "ds_3") + sql.replace("t_order", n_node(4).table("t_order"))
    with_param = check(N("param-percent", "SELECT * FROM t_order WHERE user_id = %s AND note LIKE 'a%%'", [4], users=[4]))
    (unit,) = with_param.units
    assert unit.sql == comment("N", "ds_3") + "SELECT * FROM " + n_node(4).table("t_order") + " WHERE user_id = %s AND note LIKE 'a%%'"
