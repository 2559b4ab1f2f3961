"""Router, table-driven: pagination across shards (LIMIT m+n from 0 per unit, merger skips m).

Two units throughout unless said otherwise: in ss_order_db_2x16.yaml users 1 and 17
live in ``ds0.t_order_1`` and ``ds1.t_order_1``.
"""

from __future__ import annotations

import pytest

from ddm_core.errors import DdmError, RoutingError, UnsupportedSQLError
from ddm_core.route import RouteKind

from router_cases import Case, all_nodes, check, ids, n_node, nodes, r_log_node, router, s_node

TWO = nodes(s_node, 1, 17)
W = "WHERE user_id IN (1, 17)"
WP = "WHERE user_id IN (%s, %s)"


def S(id: str, sql: str, params=None, unit_sql=None, merge=None, **kw) -> Case:
    kw.setdefault("nodes", TWO)
    return Case(id, "S", sql, params, unit_sql=unit_sql, merge=merge, **kw)


CASES = [
    # literal forms
    S("limit-only", f"SELECT * FROM t_order {W} LIMIT 5", merge={"offset": 0, "limit": 5, "order_by": ()}),
    S("limit-offset", f"SELECT * FROM t_order {W} LIMIT 5 OFFSET 3",
      unit_sql=f"SELECT * FROM {{t_order}} {W} LIMIT 8", merge={"offset": 3, "limit": 5}),
    S("limit-comma", f"SELECT * FROM t_order {W} LIMIT 3, 5",
      unit_sql=f"SELECT * FROM {{t_order}} {W} LIMIT 8", merge={"offset": 3, "limit": 5}),
    S("limit-offset-zero", f"SELECT * FROM t_order {W} LIMIT 5 OFFSET 0",
      unit_sql=f"SELECT * FROM {{t_order}} {W} LIMIT 5", merge={"offset": 0, "limit": 5}),
    S("limit-zero", f"SELECT id FROM t_order {W} ORDER BY id LIMIT 0", merge={"limit": 0, "order_by": ((0, False),)}),
    S("order-limit-offset", f"SELECT id, amount FROM t_order {W} ORDER BY amount DESC, id LIMIT 10 OFFSET 20",
      unit_sql=f"SELECT id, amount FROM {{t_order}} {W} ORDER BY amount DESC, id LIMIT 30",
      merge={"order_by": ((1, True), (0, False)), "offset": 20, "limit": 10, "visible": 2, "derived": 0}),
    S("order-by-star-derived", f"SELECT * FROM t_order {W} ORDER BY create_time DESC LIMIT 2, 3",
      unit_sql=f"SELECT *, create_time AS __ddm_o0 FROM {{t_order}} {W} ORDER BY create_time DESC LIMIT 5",
      merge={"order_by": ((-1, True),), "visible": None, "derived": 1, "offset": 2, "limit": 3}),
    S("order-by-hidden-column", f"SELECT id FROM t_order {W} ORDER BY amount LIMIT 4 OFFSET 4",
      unit_sql=f"SELECT id, amount AS __ddm_o0 FROM {{t_order}} {W} ORDER BY amount LIMIT 8",
      merge={"order_by": ((1, False),), "visible": 1, "derived": 1, "offset": 4, "limit": 4}),
    S("order-by-alias", f"SELECT id AS i, amount AS a FROM t_order {W} ORDER BY a, i DESC LIMIT 1 OFFSET 1",
      unit_sql=f"SELECT id AS i, amount AS a FROM {{t_order}} {W} ORDER BY a, i DESC LIMIT 2",
      merge={"order_by": ((1, False), (0, True)), "offset": 1, "limit": 1}),
    S("order-by-position", f"SELECT id, amount FROM t_order {W} ORDER BY 2 DESC LIMIT 3",
      merge={"order_by": ((1, True),), "limit": 3}),
    S("distinct-limit", f"SELECT DISTINCT status FROM t_order {W} ORDER BY status LIMIT 2 OFFSET 1",
      unit_sql=f"SELECT DISTINCT status FROM {{t_order}} {W} ORDER BY status LIMIT 3",
      merge={"distinct": True, "offset": 1, "limit": 2, "order_by": ((0, False),)}),
    S("max-offset-edge", f"SELECT id FROM t_order {W} LIMIT 5 OFFSET 10000",
      unit_sql=f"SELECT id FROM {{t_order}} {W} LIMIT 10005", merge={"offset": 10000, "limit": 5}),
    S("full-route-limit", "SELECT id FROM t_order ORDER BY id LIMIT 10 OFFSET 5",
      unit_sql="SELECT id FROM {t_order} ORDER BY id LIMIT 15", nodes=all_nodes("S"), kind=RouteKind.FULL,
      merge={"offset": 5, "limit": 10}),
    # parameter forms: one LIMIT parameter per unit, valued offset + limit
    S("param-limit", f"SELECT * FROM t_order {W} LIMIT %s", [5], merge={"offset": 0, "limit": 5}),
    S("param-limit-offset", f"SELECT * FROM t_order {W} LIMIT %s OFFSET %s", [5, 3],
      unit_sql=f"SELECT * FROM {{t_order}} {W} LIMIT %s", unit_params=(8,), merge={"offset": 3, "limit": 5}),
    S("param-limit-comma", f"SELECT * FROM t_order {W} LIMIT %s, %s", [3, 5],
      unit_sql=f"SELECT * FROM {{t_order}} {W} LIMIT %s", unit_params=(8,), merge={"offset": 3, "limit": 5}),
    S("param-qmark", f"SELECT * FROM t_order {W} LIMIT ? OFFSET ?", [5, 3],
      unit_sql=f"SELECT * FROM {{t_order}} {W} LIMIT ?", unit_params=(8,), merge={"offset": 3, "limit": 5}),
    S("param-qmark-comma", f"SELECT * FROM t_order {W} LIMIT ?, ?", [30, 10],
      unit_sql=f"SELECT * FROM {{t_order}} {W} LIMIT ?", unit_params=(40,), merge={"offset": 30, "limit": 10}),
    S("param-pyformat", f"SELECT * FROM t_order {W} LIMIT %(l)s OFFSET %(o)s", {"l": 5, "o": 3},
      unit_sql=f"SELECT * FROM {{t_order}} {W} LIMIT %s", unit_params=(8,), merge={"offset": 3, "limit": 5}),
    S("param-limit-literal-offset", f"SELECT * FROM t_order {W} LIMIT %s OFFSET 3", [5],
      unit_sql=f"SELECT * FROM {{t_order}} {W} LIMIT %s", unit_params=(8,), merge={"offset": 3, "limit": 5}),
    S("params-before-limit", f"SELECT id FROM t_order {WP} AND status = %s ORDER BY id LIMIT %s OFFSET %s",
      [1, 17, 2, 10, 20], unit_sql=f"SELECT id FROM {{t_order}} {WP} AND status = %s ORDER BY id LIMIT %s",
      unit_params=(1, 17, 2, 30), merge={"offset": 20, "limit": 10}),
    S("params-subquery-and-limit", f"SELECT id FROM t_order {WP} AND region IN (SELECT id FROM t_dict_region "
      "WHERE code = %s) ORDER BY id LIMIT %s OFFSET %s", [1, 17, "x", 5, 3],
      unit_sql=f"SELECT id FROM {{t_order}} {WP} AND region IN (SELECT id FROM t_dict_region WHERE code = %s) "
               "ORDER BY id LIMIT %s", unit_params=(1, 17, "x", 8), merge={"offset": 3, "limit": 5}),
    S("param-in-select-list", f"SELECT id, %s AS tag FROM t_order {W} ORDER BY id DESC LIMIT %s, %s", ["t", 2, 3],
      unit_sql=f"SELECT id, %s AS tag FROM {{t_order}} {W} ORDER BY id DESC LIMIT %s", unit_params=("t", 5),
      merge={"order_by": ((0, True),), "offset": 2, "limit": 3}),
    S("pyformat-repeated", "SELECT id FROM t_order WHERE user_id IN (%(a)s, %(b)s) AND amount > %(a)s ORDER BY id "
      "LIMIT %(a)s OFFSET %(a)s", {"a": 1, "b": 17},
      unit_sql="SELECT id FROM {t_order} WHERE user_id IN (%s, %s) AND amount > %s ORDER BY id LIMIT %s",
      unit_params=(1, 17, 1, 2), merge={"offset": 1, "limit": 1}),
    S("params-string-limit", f"SELECT id FROM t_order {W} LIMIT %s OFFSET %s", ["5", "3"],
      unit_sql=f"SELECT id FROM {{t_order}} {W} LIMIT %s", unit_params=(8,), merge={"offset": 3, "limit": 5}),
    # one target: untouched, whatever the depth
    Case("single-untouched", "S", "SELECT * FROM t_order WHERE user_id = 1 ORDER BY id LIMIT 10, 20",
         nodes=nodes(s_node, 1), merge={"offset": 0, "limit": None}),
    Case("single-untouched-params", "S", "SELECT * FROM t_order WHERE user_id = %s LIMIT %s OFFSET %s", [1, 10, 20],
         nodes=nodes(s_node, 1)),
    Case("single-deep-offset-allowed", "N", "SELECT * FROM t_order WHERE user_id = 5 LIMIT 5 OFFSET 100000",
         nodes=nodes(n_node, 5)),
    Case("single-in-same-node", "N", "SELECT * FROM t_order WHERE user_id IN (2, 9) LIMIT 5 OFFSET 5",
         nodes=nodes(n_node, 2, 9)),
    Case("r-multi-limit", "R", "SELECT * FROM t_log WHERE user_id IN (1, 2) LIMIT 50, 50",
         unit_sql="SELECT * FROM {t_log} WHERE user_id IN (1, 2) LIMIT 100", nodes=nodes(r_log_node, 1, 2),
         merge={"offset": 50, "limit": 50}),
    # max_offset guard (ss_order_db_2x16.yaml: the default 10 000; router_ranges.yaml: 100)
    Case("deep-offset-literal", "S", f"SELECT * FROM t_order {W} LIMIT 5 OFFSET 10001",
         error=(RoutingError, ("10001", "max_offset 10000", "cursor"))),
    Case("deep-offset-comma", "S", f"SELECT * FROM t_order {W} LIMIT 10001, 5", error=(RoutingError, ("10001",))),
    Case("deep-offset-param", "S", f"SELECT * FROM t_order {W} LIMIT %s OFFSET %s", [5, 20000],
         error=(RoutingError, ("20000", "max_offset"))),
    Case("r-deep-offset", "R", "SELECT * FROM t_log WHERE user_id IN (1, 2) LIMIT 5 OFFSET 101",
         error=(RoutingError, ("101", "max_offset 100"))),
    Case("r-full-deep-offset", "R", "SELECT * FROM t_log LIMIT 101, 1", error=(RoutingError, ("101", "max_offset 100"))),
    # refused forms
    Case("literal-limit-param-offset", "S", f"SELECT * FROM t_order {W} LIMIT 5 OFFSET %s", [3],
         error=(UnsupportedSQLError, ("LIMIT", "OFFSET"))),
    Case("limit-not-integer", "S", f"SELECT * FROM t_order {W} LIMIT %s OFFSET %s", ["5", "x"],
         error=(RoutingError, ("'x'",))),
    Case("limit-expression", "S", f"SELECT * FROM t_order {W} LIMIT 1 + 1", error=(DdmError, ("LIMIT",))),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_pagination(case: Case) -> None:
    check(case)


def test_deep_pagination_error_is_a_routing_error_with_facts() -> None:
    err = check(CASES[[c.id for c in CASES].index("deep-offset-param")])
    assert isinstance(err, RoutingError)
    assert err.offset == 20000 and err.max_offset == 10000  # type: ignore[attr-defined]


def test_same_sql_new_params_new_limit() -> None:
    """The plan is cached per SQL text; each call's LIMIT value is its own offset + limit."""
    r = router("S")
    sql = f"SELECT id FROM t_order {W} ORDER BY id LIMIT %s OFFSET %s"
    for limit, offset in [(5, 0), (5, 5), (1, 99), (100, 9900)]:
        plan = r.route(sql, [limit, offset])
        assert [u.params for u in plan.units] == [(limit + offset,)] * 2
        assert (plan.merge.offset, plan.merge.limit) == (offset, limit)
    assert r.cache_info().misses == 1
