"""Comparison literals → parameters (ddm_core.proxy.literals): what is taken, what is left, same routes."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from services import require_module

require_module("mysql_mimic", "ddm proxy")

from ddm_core import Router, load_config  # noqa: E402
from ddm_core.proxy.literals import parameterize  # noqa: E402
from test_proxy_support import proxy_config  # noqa: E402


@pytest.mark.parametrize("sql, text, params", [
    ("SELECT a FROM t_order WHERE user_id = 10086 AND order_id = 7",
     "SELECT a FROM t_order WHERE user_id = %s AND order_id = %s", [10086, 7]),
    ("SELECT * FROM t WHERE a IN (1, 2, 'x''y') AND b >= 'it\\'s' LIMIT 10",
     "SELECT * FROM t WHERE a IN (%s, %s, %s) AND b >= %s LIMIT 10", [1, 2, "x'y", "it's"]),
    ("UPDATE t SET a = 5 WHERE id <> 3", "UPDATE t SET a = %s WHERE id <> %s", [5, 3]),
    ("SELECT * FROM t WHERE h = 1.50 AND s != 'a\\nb'", "SELECT * FROM t WHERE h = %s AND s != %s",
     [Decimal("1.50"), "a\nb"]),
    ("SELECT a FROM t WHERE /* x = 5 */ b = 7 -- c = 9\n AND c = 't1'",
     "SELECT a FROM t WHERE /* x = 5 */ b = %s -- c = 9\n AND c = %s", [7, "t1"]),
    ("SELECT CAST(a AS DECIMAL(10,2)) FROM t WHERE a=2 ORDER BY 1",
     "SELECT CAST(a AS DECIMAL(10,2)) FROM t WHERE a=%s ORDER BY 1", [2]),
    ("SELECT c FROM t WHERE id BETWEEN 5 AND 104 AND k = 1 ORDER BY c",  # both bounds of a range
     "SELECT c FROM t WHERE id BETWEEN %s AND %s AND k = %s ORDER BY c", [5, 104, 1]),
    ("SELECT c FROM t WHERE id NOT BETWEEN 'a' AND 'b'", "SELECT c FROM t WHERE id NOT BETWEEN %s AND %s", ["a", "b"]),
    ("SELECT c FROM t WHERE id BETWEEN 1 + 1 AND 5 AND a = 1 AND 2 = b",  # the upper bound only after the lower
     "SELECT c FROM t WHERE id BETWEEN %s + 1 AND 5 AND a = %s AND 2 = b", [1, 1]),
    ("SELECT c FROM t WHERE id BETWEEN -5 AND -1 AND k > -2.50 AND a IN (-1, 3, -7)",  # a '-' touching its number
     "SELECT c FROM t WHERE id BETWEEN %s AND %s AND k > %s AND a IN (%s, %s, %s)", [-5, -1, Decimal("-2.50"), -1, 3, -7]),
    ("UPDATE t SET a = -9223372036854775808 WHERE id=-0", "UPDATE t SET a = %s WHERE id=%s", [-9223372036854775808, 0]),
    ("SELECT c FROM t WHERE a = 3 - 5 AND b = - 5 AND c = -(5) AND d = --5 AND e = -'5' AND f < 1-2",  # not signs
     "SELECT c FROM t WHERE a = %s - 5 AND b = - 5 AND c = -(5) AND d = --5 AND e = -'5' AND f < %s-2", [3, 1]),
])  # fmt: skip
def test_comparison_literals_become_parameters(sql: str, text: str, params: list[Any]) -> None:
    assert parameterize(sql) == (text, params)


@pytest.mark.parametrize("sql", [
    "SELECT * FROM t ORDER BY 1 LIMIT 5",  # no comparison
    "SELECT * FROM t WHERE n LIKE 'a%' AND id = 1",  # a % anywhere: left alone
    "SELECT * FROM t WHERE id = ?",
    "SELECT * FROM t WHERE d = DATE '2024-01-01' AND e = _utf8mb4'x' AND f = 0x1A AND g = 1e3 AND h = -1e3",
    "SELECT * FROM t WHERE j->'$.a' = j->>'$.b'",  # JSON paths stay literals
    "SELECT * FROM t WHERE a = \"text\"",  # double quotes: a string or an identifier, by sql_mode
    "SELECT * FROM t WHERE id = a - 5 AND k = -x",  # a minus, not a sign
    "SET autocommit = 1",
    "SHOW TABLES LIKE 't'",
    "INSERT INTO t (a) VALUES (1)",
])  # fmt: skip
def test_everything_else_stays_as_written(sql: str) -> None:
    assert parameterize(sql) is None


@pytest.mark.parametrize("sql", [
    "SELECT order_id FROM t_order WHERE user_id = 10086",
    "SELECT order_id FROM t_order WHERE user_id IN (1, 2, 3, 10086)",
    "SELECT order_id FROM t_order WHERE user_id = 5 AND amount > 10 ORDER BY order_id LIMIT 3",
    "UPDATE t_order SET amount = 3 WHERE user_id = 77",
    "DELETE FROM t_order WHERE user_id = '12'",
    "SELECT name FROM t_dict WHERE id = 4",
    "SELECT order_id FROM t_order WHERE user_id = -10086",
    "SELECT order_id FROM t_order WHERE user_id IN (-1, 2, -3, 10086)",
    "SELECT order_id FROM t_order WHERE user_id = -3 AND order_id > -100",
])  # fmt: skip
def test_the_parameterized_text_routes_where_the_literal_text_does(sql: str) -> None:
    router = Router(load_config(proxy_config(["db_a", "db_b"])))
    taken = parameterize(sql)
    assert taken is not None
    literal, parameterized = router.route(sql, None), router.route(*taken)
    assert parameterized.kind == literal.kind
    assert [(u.data_source, dict(u.tables)) for u in parameterized.units] == [
        (u.data_source, dict(u.tables)) for u in literal.units
    ]


# -- the per-skeleton choice: the same answers as the token walk --------------------------------------

_FRAGMENTS = ["SELECT", "UPDATE", "SHOW", " ", "  ", "\n", "a", "t_1", "`x = 1`", "`a``b`", "/* = 5 */", "-- = 3\n",
              "# x\n", '"q = 1"', "=", "<>", "!=", "<", "<=", ">=", "->", "->>", "<=>", "IN", "in", "(", ")", ",",
              ".", "$", "-", "+", "1", "42", "1.5", ".5", "7.", "'s'", "''", "'it''s'", "'a\\'b'", "'1'", "x1",
              "1e3", "0x1A", "DATE", "N", "_utf8mb4", "LIMIT", "AND", "WHERE", "FROM", "BETWEEN", "between", "And"]  # fmt: skip


def _random_statements(count: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(count):
        body = "".join(rng.choice(_FRAGMENTS) + rng.choice(["", " "]) for _ in range(rng.randint(1, 14)))
        out.append(rng.choice(["SELECT ", "DELETE ", "WITH ", "SET ", ""]) + body)
    return out


def test_the_remembered_choice_answers_as_the_token_walk_does() -> None:
    from ddm_core.proxy.literals import walk

    statements = _random_statements(4000, seed=7)
    statements += ["SELECT a FROM t_order WHERE user_id = 10086 AND order_id = 7",
                   "SELECT * FROM t WHERE a IN (1, 2, 'x''y') AND b >= 'it\\'s' LIMIT 10",
                   "SELECT * FROM t WHERE j->'$.a' = j->>'$.b' AND c = '%'"]  # fmt: skip
    for sql in statements:
        expected = walk(sql)
        assert parameterize(sql) == expected, sql  # the first of its skeleton: walked, remembered
        assert parameterize(sql) == expected, sql  # the remembered choice


def test_other_literal_values_of_one_skeleton_are_taken_alike() -> None:
    from ddm_core.proxy.literals import walk

    shape = "SELECT a FROM t WHERE id = {0} AND s = {1} AND c IN ({0}, {1}) LIMIT {0}"
    values = [("1", "'a'"), ("2.50", "''"), ("10086", "'it''s'"), ("7.", "'x\\'y'"), (".5", "'1'"), ("-3", "'-3'"),
              ("-.5", "'b'")]
    for number, string in values:
        sql = shape.format(number, string)
        assert parameterize(sql) == walk(sql)
    text, params = parameterize(shape.format("3", "'z'")) or ("", [])
    assert text == "SELECT a FROM t WHERE id = %s AND s = %s AND c IN (%s, %s) LIMIT 3"
    assert params == [3, "z", 3, "z"]
