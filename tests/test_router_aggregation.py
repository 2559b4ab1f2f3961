"""Router, table-driven: aggregation across shards and the merge spec that finishes it.

ss_order_db_2x16.yaml users 1 and 17 → two units (``ds0.t_order_1``, ``ds1.t_order_1``).
"""

from __future__ import annotations

import pytest

from ddm_core.errors import UnsupportedSQLError
from ddm_core.route import Aggregate

from router_cases import Case, check, ids, nodes, router, s_node

TWO = nodes(s_node, 1, 17)
W = "WHERE user_id IN (1, 17)"


def S(id: str, sql: str, unit_sql: str | None = None, merge=None, params=None, **kw) -> Case:
    kw.setdefault("nodes", TWO)
    return Case(id, "S", sql, params, unit_sql=unit_sql, merge=merge, **kw)


def agg(func: str, column: int, *args: int, distinct: bool = False) -> Aggregate:
    return Aggregate(func, column, args or (column,), distinct)


CASES = [
    S("count-star", f"SELECT COUNT(*) FROM t_order {W}",
      merge={"aggregates": (agg("COUNT", 0),), "group_by": (), "visible": 1, "derived": 0, "column_names": ("COUNT(*)",)}),
    S("sum-min-max", f"SELECT SUM(amount), MIN(amount), MAX(amount) FROM t_order {W}",
      merge={"aggregates": (agg("SUM", 0), agg("MIN", 1), agg("MAX", 2))}),
    S("avg-split", f"SELECT AVG(amount) FROM t_order {W}",
      unit_sql=f"SELECT SUM(amount), COUNT(amount) AS __ddm_avg0 FROM {{t_order}} {W}",
      merge={"aggregates": (agg("AVG", 0, 0, 1),), "visible": 1, "derived": 1, "column_names": ("AVG(amount)",)}),
    S("avg-alias", f"SELECT COUNT(*) AS n, AVG(amount) AS a FROM t_order {W}",
      unit_sql=f"SELECT COUNT(*) AS n, SUM(amount) AS a, COUNT(amount) AS __ddm_avg0 FROM {{t_order}} {W}",
      merge={"aggregates": (agg("COUNT", 0), agg("AVG", 1, 1, 2)), "column_names": ("n", "a"), "derived": 1}),
    S("all-five", f"SELECT COUNT(*), SUM(amount), MIN(amount), MAX(amount), AVG(amount) FROM t_order {W}",
      unit_sql=f"SELECT COUNT(*), SUM(amount), MIN(amount), MAX(amount), SUM(amount), COUNT(amount) AS __ddm_avg0 "
               f"FROM {{t_order}} {W}",
      merge={"aggregates": (agg("COUNT", 0), agg("SUM", 1), agg("MIN", 2), agg("MAX", 3), agg("AVG", 4, 4, 5)),
             "visible": 5, "derived": 1}),
    S("count-distinct", f"SELECT COUNT(DISTINCT buyer_id) FROM t_order {W}",
      unit_sql=f"SELECT buyer_id FROM {{t_order}} {W} GROUP BY buyer_id ORDER BY buyer_id",
      merge={"aggregates": (agg("COUNT", 0, distinct=True),), "group_by": (), "order_by": ()}),
    S("sum-distinct", f"SELECT SUM(DISTINCT amount) AS s FROM t_order {W}",
      unit_sql=f"SELECT amount AS s FROM {{t_order}} {W} GROUP BY amount ORDER BY amount",
      merge={"aggregates": (agg("SUM", 0, distinct=True),), "column_names": ("s",)}),
    S("count-and-sum-distinct", f"SELECT COUNT(DISTINCT buyer_id), SUM(DISTINCT amount) FROM t_order {W}",
      unit_sql=f"SELECT buyer_id, amount FROM {{t_order}} {W} GROUP BY buyer_id, amount ORDER BY buyer_id, amount",
      merge={"aggregates": (agg("COUNT", 0, distinct=True), agg("SUM", 1, distinct=True))}),
    S("group-distinct", f"SELECT status, COUNT(DISTINCT buyer_id) FROM t_order {W} GROUP BY status",
      unit_sql=f"SELECT status, buyer_id FROM {{t_order}} {W} GROUP BY status, buyer_id ORDER BY status, buyer_id",
      merge={"group_by": (0,), "order_by": ((0, False),), "aggregates": (agg("COUNT", 1, distinct=True),)}),
    S("group-by-gets-order-by", f"SELECT status, COUNT(*) FROM t_order {W} GROUP BY status",
      unit_sql=f"SELECT status, COUNT(*) FROM {{t_order}} {W} GROUP BY status ORDER BY status",
      merge={"group_by": (0,), "order_by": ((0, False),), "aggregates": (agg("COUNT", 1),), "column_names": (None, "COUNT(*)")}),
    S("group-by-two-keys", f"SELECT status, pay_type, SUM(amount) FROM t_order {W} GROUP BY status, pay_type",
      unit_sql=f"SELECT status, pay_type, SUM(amount) FROM {{t_order}} {W} GROUP BY status, pay_type ORDER BY status, pay_type",
      merge={"group_by": (0, 1), "order_by": ((0, False), (1, False))}),
    S("group-by-position", f"SELECT status, COUNT(*) FROM t_order {W} GROUP BY 1",
      unit_sql=f"SELECT status, COUNT(*) FROM {{t_order}} {W} GROUP BY 1 ORDER BY 1",
      merge={"group_by": (0,), "order_by": ((0, False),)}),
    S("group-by-derived-column", f"SELECT COUNT(*) FROM t_order {W} GROUP BY status",
      unit_sql=f"SELECT COUNT(*), status AS __ddm_g0 FROM {{t_order}} {W} GROUP BY status ORDER BY status",
      merge={"group_by": (1,), "order_by": ((1, False),), "visible": 1, "derived": 1}),
    S("group-by-with-order-by", f"SELECT status, COUNT(*) AS c FROM t_order {W} GROUP BY status ORDER BY c DESC",
      unit_sql=f"SELECT status, COUNT(*) AS c FROM {{t_order}} {W} GROUP BY status ORDER BY c DESC",
      merge={"group_by": (0,), "order_by": ((1, True),)}),
    S("order-by-aggregate", f"SELECT status, SUM(amount) FROM t_order {W} GROUP BY status ORDER BY SUM(amount)",
      merge={"group_by": (0,), "order_by": ((1, False),)}),
    S("order-by-hidden-aggregate", f"SELECT status FROM t_order {W} GROUP BY status ORDER BY MAX(amount) DESC",
      unit_sql=f"SELECT status, MAX(amount) AS __ddm_h0 FROM {{t_order}} {W} GROUP BY status ORDER BY MAX(amount) DESC",
      merge={"group_by": (0,), "order_by": ((1, True),), "visible": 1, "derived": 1, "aggregates": (agg("MAX", 1),)}),
    S("order-by-derived-plain", f"SELECT id FROM t_order {W} ORDER BY create_time",
      unit_sql=f"SELECT id, create_time AS __ddm_o0 FROM {{t_order}} {W} ORDER BY create_time",
      merge={"order_by": ((1, False),), "visible": 1, "derived": 1}),
    S("having-moved", f"SELECT status, COUNT(*) FROM t_order {W} GROUP BY status HAVING COUNT(*) > 1",
      unit_sql=f"SELECT status, COUNT(*) FROM {{t_order}} {W} GROUP BY status ORDER BY status"),
    S("having-alias", f"SELECT status, COUNT(*) AS c FROM t_order {W} GROUP BY status HAVING c >= 2",
      unit_sql=f"SELECT status, COUNT(*) AS c FROM {{t_order}} {W} GROUP BY status ORDER BY status"),
    S("having-hidden-aggregates", f"SELECT status FROM t_order {W} GROUP BY status HAVING AVG(amount) > 10 AND MAX(amount) < 99",
      unit_sql=f"SELECT status, SUM(amount) AS __ddm_h0, COUNT(amount) AS __ddm_h1, MAX(amount) AS __ddm_h2 "
               f"FROM {{t_order}} {W} GROUP BY status ORDER BY status",
      merge={"aggregates": (agg("AVG", 1, 1, 2), agg("MAX", 3)), "visible": 1, "derived": 3}),
    S("having-param", f"SELECT status, SUM(amount) FROM t_order WHERE user_id IN (%s, %s) GROUP BY status HAVING SUM(amount) > %s",
      params=[1, 17, 100],
      unit_sql=f"SELECT status, SUM(amount) FROM {{t_order}} WHERE user_id IN (%s, %s) GROUP BY status ORDER BY status",
      unit_params=(1, 17)),
    S("aggregate-limit-on-merger", f"SELECT status, COUNT(*) FROM t_order {W} GROUP BY status LIMIT 2 OFFSET 1",
      unit_sql=f"SELECT status, COUNT(*) FROM {{t_order}} {W} GROUP BY status ORDER BY status",
      merge={"offset": 1, "limit": 2}),
    S("aggregate-limit-param", f"SELECT status, COUNT(*) FROM t_order {W} GROUP BY status LIMIT %s OFFSET %s",
      params=[2, 1], unit_sql=f"SELECT status, COUNT(*) FROM {{t_order}} {W} GROUP BY status ORDER BY status",
      unit_params=(), merge={"offset": 1, "limit": 2}),
    S("count-limit", f"SELECT COUNT(*) FROM t_order {W} LIMIT 1",
      unit_sql=f"SELECT COUNT(*) FROM {{t_order}} {W}", merge={"limit": 1}),
    S("distinct", f"SELECT DISTINCT status FROM t_order {W}", merge={"distinct": True, "aggregates": ()}),
    S("distinct-two-columns", f"SELECT DISTINCT status, buyer_id FROM t_order {W}", merge={"distinct": True, "visible": 2}),
    S("star-plain", f"SELECT * FROM t_order {W}", merge={"visible": None, "column_names": (), "aggregates": ()}),
    # one target: untouched
    Case("single-aggregate-untouched", "S", "SELECT status, AVG(amount) FROM t_order WHERE user_id = 1 GROUP BY status "
         "HAVING COUNT(*) > 1", nodes=nodes(s_node, 1), merge={"aggregates": (), "having": None}),
    # what cannot be merged is refused, quoting the item
    Case("expression-over-aggregate", "S", f"SELECT COUNT(*) + 1 FROM t_order {W}",
         error=(UnsupportedSQLError, ("COUNT(*) + 1",))),
    Case("max-distinct", "S", f"SELECT MAX(DISTINCT amount) FROM t_order {W}",
         error=(UnsupportedSQLError, ("MAX(DISTINCT amount)",))),
    Case("count-distinct-two", "S", f"SELECT COUNT(DISTINCT buyer_id, status) FROM t_order {W}",
         error=(UnsupportedSQLError, ("COUNT(DISTINCT buyer_id, status)",))),
    Case("star-with-aggregate", "S", f"SELECT *, COUNT(*) FROM t_order {W}", error=(UnsupportedSQLError, ("SELECT *",))),
    Case("having-distinct", "S", f"SELECT status FROM t_order {W} GROUP BY status HAVING COUNT(DISTINCT buyer_id) > 1",
         error=(UnsupportedSQLError, ("COUNT(DISTINCT buyer_id)",))),
    Case("having-function", "S", f"SELECT status FROM t_order {W} GROUP BY status HAVING ABS(SUM(amount)) > 1",
         error=(UnsupportedSQLError, ("ABS(SUM(amount))",))),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_aggregation(case: Case) -> None:
    check(case)


def _case(name: str) -> Case:
    return CASES[[c.id for c in CASES].index(name)]


def test_having_is_evaluated_by_the_merger() -> None:
    """HAVING COUNT(*) > 1 runs on merged rows: a group with 1 row per shard (2 overall) passes."""
    having = check(_case("having-moved")).merge.having
    assert having is not None
    assert having(("paid", 2)) is True and having(("paid", 1)) is False


def test_having_alias_and_hidden_aggregates() -> None:
    having = check(_case("having-alias")).merge.having
    assert having(("a", 2)) and not having(("a", 1))
    hidden = check(_case("having-hidden-aggregates")).merge
    # merged row: status, AVG (sum column holds the merged average), count, MAX
    assert hidden.having(("s", 11.0, 3, 50)) and not hidden.having(("s", 11.0, 3, 99)) and not hidden.having(("s", 10, 3, 5))


def test_having_param_is_bound_per_call() -> None:
    r = router("S")
    case = _case("having-param")
    low = r.route(case.sql, [1, 17, 100]).merge.having
    high = r.route(case.sql, [1, 17, 1000]).merge.having
    assert low(("s", 500)) and not high(("s", 500))


def test_having_null_is_not_true() -> None:
    having = check(_case("having-moved")).merge.having
    assert having(("s", None)) is False


def test_a_group_key_derived_twice_is_one_column() -> None:
    """GROUP BY x ORDER BY x with x unselected: one derived column, so groups can stream."""
    plan = router("S").route("SELECT COUNT(*) FROM t_order GROUP BY status ORDER BY status")
    assert plan.merge.derived == 1
    assert plan.merge.group_by == (1,) and plan.merge.order_by == ((1, False),)
    assert all(u.sql.count("__ddm_") == 1 for u in plan.units)


def test_distinct_with_a_hidden_sort_column_is_limited_by_the_merger() -> None:
    """Units of SELECT DISTINCT g ... ORDER BY h LIMIT n could spend their n rows on repeats of g."""
    plan = router("S").route("SELECT DISTINCT status FROM t_order ORDER BY create_time LIMIT 5")
    assert plan.merge.distinct and plan.merge.limit == 5 and plan.merge.derived == 1
    assert all("LIMIT" not in u.sql.upper() for u in plan.units)
