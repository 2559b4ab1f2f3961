"""Router: malformed, unsupported and hostile SQL — only DdmError, naming the fragment, never a wrong route.

* table-driven malformed / unsupported / hostile statements: the exact error class and
  the fragment its message must quote;
* values only ever travel as params (never spliced into unit SQL), whatever they hold;
* fuzzing (hypothesis): token soups and mutated statements raise nothing but DdmError
  subclasses with a message quoting part of the statement, and whatever routes keeps
  structural invariants (no logic table or internal marker leaks into unit SQL,
  placeholders and params agree, tables belong to their unit's data source);
* a shard condition AND-ed with arbitrary noise still reaches the key's node, and OR-ed
  with noise reaches every node.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from ddm_core.errors import DdmError, FullRouteError, RoutingError, ShardValueError, UnsupportedSQLError
from ddm_core.route import Router

from router_cases import Case, all_nodes, check, config, ids, n_node, nodes, router, s_node

CASES = [
    # malformed
    Case("garbage", "N", "SELEC * FORM t_order", error=(UnsupportedSQLError, ("SELEC * FORM t_order",))),
    Case("unbalanced-paren", "N", "SELECT * FROM t_order WHERE (user_id = 1", error=(UnsupportedSQLError, ("(user_id = 1",))),
    Case("dangling-and", "N", "SELECT * FROM t_order WHERE user_id = 1 AND", error=(UnsupportedSQLError, ("user_id = 1 AND",))),
    Case("unterminated-string", "N", "SELECT * FROM t_order WHERE user_id = 'abc", error=(DdmError, ("'abc",))),
    Case("unterminated-comment", "N", "SELECT * FROM t_order /* WHERE user_id = 1", error=(DdmError, ("/*",))),
    Case("empty", "N", "", error=(UnsupportedSQLError, ("0",))),
    Case("only-comment", "N", "-- nothing here", error=(UnsupportedSQLError, ("nothing here",))),
    Case("two-statements", "N", "SELECT * FROM t_order WHERE user_id = 1; DROP TABLE t_order",
         error=(UnsupportedSQLError, ("DROP TABLE t_order", "2"))),
    Case("two-statements-params", "N", "DELETE FROM t_order WHERE user_id = %s; DELETE FROM t_order", [1],
         error=(UnsupportedSQLError, ("DELETE FROM t_order",))),
    # placeholders and params
    Case("mixed-styles", "N", "SELECT * FROM t_order WHERE user_id = %s AND status = ?", [1, 2], error=(RoutingError, ("?",))),
    Case("percent-d", "N", "SELECT * FROM t_order WHERE user_id = %d", [1], error=(RoutingError, ("%d",))),
    Case("too-few-params", "N", "SELECT * FROM t_order WHERE user_id = %s AND status = %s", [1],
         error=(RoutingError, ("2 placeholder", "1 parameter"))),
    Case("too-many-params", "N", "SELECT * FROM t_order WHERE user_id = %s", [1, 2], error=(RoutingError, ("1 placeholder",))),
    Case("missing-named", "N", "SELECT * FROM t_order WHERE user_id = %(uid)s", {"id": 1}, error=(RoutingError, ("'uid'",))),
    Case("mapping-for-format", "N", "SELECT * FROM t_order WHERE user_id = %s", {"user_id": 1}, error=(RoutingError, ("mapping",))),
    Case("string-params", "N", "SELECT * FROM t_order WHERE user_id = %s", "1", error=(RoutingError, ("str",))),
    Case("colon-placeholder", "N", "SELECT * FROM t_order WHERE user_id = :uid", error=(UnsupportedSQLError, (":uid",))),
    Case("internal-placeholder-name", "N", "SELECT * FROM t_order WHERE user_id = %s AND x = :p0", [1],
         error=(UnsupportedSQLError, (":p0",))),
    # bad shard values name the column and the value
    Case("null-key", "N", "SELECT * FROM t_order WHERE user_id = %s", [None], error=(ShardValueError, ("user_id", "NULL"))),
    Case("float-key", "N", "SELECT * FROM t_order WHERE user_id = 1.5", error=(ShardValueError, ("user_id", "1.5"))),
    Case("list-key", "N", "SELECT * FROM t_order WHERE user_id = %s", [[1, 2]], error=(DdmError, ("user_id",))),
    Case("s-string-key-inline", "S", "SELECT * FROM t_order WHERE user_id = 'abc'", error=(DdmError, ("abc",))),
    Case("s-negative-key-inline", "S", "SELECT * FROM t_order WHERE user_id = -7", error=(RoutingError, ("t_order_-7",))),
    Case("huge-int-key", "N", "SELECT * FROM t_order WHERE user_id = %s", [2**70], error=(ShardValueError, ("user_id",))),
    # unsupported constructs
    Case("unbound-join", "R", "SELECT * FROM t_log JOIN t_account ON t_log.a = t_account.a",
         error=(UnsupportedSQLError, ("'t_log'", "'t_account'"))),
    Case("not-sql-str", "N", b"SELECT 1", error=(UnsupportedSQLError, ("bytes",))),  # type: ignore[arg-type]
    Case("unparsable-form", "N", "SHOW INDEXES IN t_order", error=(UnsupportedSQLError, ("'t_order'",))),
    Case("bare-expression", "S", "SELEC * FORM t_order", error=(UnsupportedSQLError, ("not a SQL statement", "SELEC * FORM t_order"))),
    Case("placeholder-as-table", "N", "SELECT * FROM %s WHERE user_id = 1", ["t_order"],
         error=(UnsupportedSQLError, ("table name", "SELECT * FROM %s"))),
    Case("message-quotes-caller-text", "N", "%s", [1], error=(UnsupportedSQLError, ("'%s'",))),
    Case("sharded-table-outside-from", "N", "INSERT DESCRIBE t_order (order_id, user_id) VALUES (%s, %s)", [1, 2],
         error=(UnsupportedSQLError, ("'t_order'",))),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_refused(case: Case) -> None:
    check(case)


# -- hostile statements that do route, correctly ------------------------------------------------

HOSTILE = [
    Case("comment-hides-or", "N", "SELECT * FROM t_order WHERE user_id = 1 -- OR 1 = 1", nodes=nodes(n_node, 1)),
    Case("hash-comment", "N", "SELECT * FROM t_order WHERE user_id = 1 # OR 1 = 1", nodes=nodes(n_node, 1)),
    Case("string-with-or", "N", "SELECT * FROM t_order WHERE user_id = 2 AND note = ' OR 1=1 -- '", nodes=nodes(n_node, 2)),
    Case("string-with-semicolon", "N", "SELECT * FROM t_order WHERE user_id = 3 AND note = 'x; DROP TABLE t_order'",
         nodes=nodes(n_node, 3)),
    Case("string-with-placeholder", "N", "SELECT * FROM t_order WHERE user_id = %s AND note = 'who? %%s'", [4],
         nodes=nodes(n_node, 4)),
    Case("string-with-marker", "N", "SELECT * FROM t_order WHERE user_id = 5 AND note = '__ddm_t0__ {0}'",
         nodes=nodes(n_node, 5), unit_sql="SELECT * FROM {t_order} WHERE user_id = 5 AND note = '__ddm_t0__ {{0}}'"),
    Case("braces-in-string", "N", "SELECT * FROM t_order WHERE user_id = 6 AND note = '{user_id}'", nodes=nodes(n_node, 6),
         unit_sql="SELECT * FROM {t_order} WHERE user_id = 6 AND note = '{{user_id}}'"),
    Case("escaped-quote", "N", r"SELECT * FROM t_order WHERE user_id = 7 AND note = 'it\'s; t_order'", nodes=nodes(n_node, 7)),
    Case("doubled-quote", "N", "SELECT * FROM t_order WHERE user_id = 8 AND note = 'it''s t_order'", nodes=nodes(n_node, 8)),
    Case("or-true-is-full", "S", "SELECT * FROM t_order WHERE user_id = 1 OR 1 = 1", nodes=all_nodes("S")),
    Case("or-tautology-is-full", "S", "SELECT * FROM t_order WHERE user_id = 1 OR user_id <> 1", nodes=all_nodes("S")),
    Case("not-in-is-full", "S", "SELECT * FROM t_order WHERE user_id NOT IN (1, 2)", nodes=all_nodes("S"),
         unit_sql="SELECT * FROM {t_order} WHERE NOT user_id IN (1, 2)"),
    Case("unicode", "N", "SELECT * FROM t_order WHERE user_id = %s AND note = 'ünïcødé 🚀'", ["ünïcødé"],
         nodes=nodes(n_node, "ünïcødé")),
    Case("multi-line", "S", "SELECT *\n  FROM t_order\n WHERE user_id\n     = 9\n", nodes=nodes(s_node, 9)),
]


@pytest.mark.parametrize("case", HOSTILE, ids=ids(HOSTILE))
def test_hostile_routes_correctly(case: Case) -> None:
    check(case)


def test_not_in_is_not_mistaken_for_in() -> None:
    with pytest.raises(FullRouteError):
        router("N").route("SELECT * FROM t_order WHERE user_id NOT IN (1)")


INJECTIONS = [
    "1; DROP TABLE t_order",
    "' OR '1'='1",
    "1 OR 1=1 -- ",
    "%s%s%s",
    "{0}{1}",
    "__ddm_t0__",
    ":p0",
    "\\'; --",
    "\x00\n\r",
    "ds_1.t_order_1_1",
]


@pytest.mark.parametrize("value", INJECTIONS)
@pytest.mark.parametrize("sql", [
    "SELECT * FROM t_order WHERE user_id = %s AND note = %s",
    "UPDATE t_order SET note = %s WHERE user_id = %s",
    "INSERT INTO t_order (user_id, note) VALUES (%s, %s)",
    "SELECT id FROM t_order WHERE user_id IN (%s, %s) ORDER BY id LIMIT 10",
])
def test_values_only_travel_as_params(value: str, sql: str) -> None:
    """Whatever a value holds, it is never spliced into the SQL text of a unit."""
    r = router("N")
    key = 10086
    params = [value, key] if sql.startswith("UPDATE") else [key, value]
    plan = r.route(sql, params)
    for unit in plan.units:
        assert value not in unit.sql or value in ("%s%s%s",) and "%s" in unit.sql
        assert value in unit.params
        assert unit.sql.count("%s") == len(unit.params)


# -- fuzzing -----------------------------------------------------------------------------------------

VOCAB = [
    "SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "IN", "BETWEEN", "LIMIT", "OFFSET", "ORDER BY", "GROUP BY",
    "HAVING", "UNION", "ALL", "JOIN", "LEFT JOIN", "ON", "AS", "INSERT INTO", "VALUES", "UPDATE", "SET", "DELETE",
    "REPLACE INTO", "CREATE TABLE", "DROP TABLE", "ALTER TABLE", "TRUNCATE", "DESCRIBE", "SHOW", "EXPLAIN", "WITH",
    "DISTINCT", "COUNT(*)", "SUM(amount)", "AVG(amount)", "MAX(id)", "COUNT(DISTINCT user_id)", "EXISTS",
    "t_order", "t_order_item", "t_dict_region", "t_config", "t_misc", "o", "i", "o.user_id", "i.user_id", "user_id",
    "order_id", "status", "amount", "id", "*", ",", "(", ")", "=", "<", ">=", "<>", "<=>", "+", "-", "1", "2", "17", "-3",
    "NULL", "TRUE", "FALSE", "'x'", "'t_order'", "\"s\"", "`t_order`", "%s", "%(k)s", "?", "%%", "%", ";", "-- c\n",
    "/* c */", "#c\n", ":p0", ":name", "__ddm_t0__", "{0}", "{", "}", "\\", "'", "`", "order_db.t_order", "IS", "LIKE",
    "ON DUPLICATE KEY UPDATE", "FOR UPDATE", "@v", ":=", "0x1F", "1e3", "1.5", "ünï",
]

BASES = [
    "SELECT * FROM t_order WHERE user_id = %s",
    "SELECT o.id, i.sku FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.user_id IN (%s, %s)",
    "SELECT status, COUNT(*), AVG(amount) FROM t_order WHERE user_id IN (1, 17) GROUP BY status HAVING COUNT(*) > 1 "
    "ORDER BY status LIMIT 5 OFFSET 2",
    "INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s), (%s, %s, %s)",
    "UPDATE t_order SET amount = %s WHERE user_id = %s",
    "DELETE FROM t_order WHERE user_id IN (1, 2)",
    "SELECT * FROM (SELECT * FROM t_order WHERE user_id = 1) t",
    "REPLACE INTO t_order (order_id, user_id) VALUES (1, 2)",
    "CREATE TABLE t_order (id INT)",
    "SELECT a FROM t_order WHERE user_id = 1 UNION ALL SELECT a FROM t_order_item WHERE user_id = 1",
    "SELECT * FROM t_dict_region WHERE id = ?",
]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}|\d+")


@st.composite
def fuzzed(draw: Any) -> str:
    if draw(st.booleans()):
        return " ".join(draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=25)))
    tokens = draw(st.sampled_from(BASES)).split(" ")
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.integers(0, 2))
        at = draw(st.integers(0, len(tokens)))
        if op == 0:
            tokens.insert(at, draw(st.sampled_from(VOCAB)))
        elif op == 1 and len(tokens) > 1:
            del tokens[min(at, len(tokens) - 1)]
        else:
            tokens[min(at, len(tokens) - 1)] = draw(st.sampled_from(VOCAB))
    return " ".join(tokens)


def _placeholders(sql: str) -> int:
    """Placeholders of a unit outside quotes and comments."""
    stripped = re.sub(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"|`[^`]*`|/\*.*?\*/|--[^\n]*|#[^\n]*", "", sql, flags=re.S)
    return stripped.replace("%%", "").count("%s") + stripped.count("?")


_LOGIC = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"|/\*.*?\*/|--[^\n]*|#[^\n]*|\b(t_order_item|t_order)\b(?!_)",
                    re.S | re.I)


def _invariants(cfg_name: str, plan: Any) -> None:
    cfg = config(cfg_name)
    for unit in plan.units:
        assert unit.data_source in cfg.data_sources
        assert "__ddm_t" not in _LOGIC.sub("", unit.sql).replace("__ddm_t0__", "") or "__ddm_t" in unit.sql
        assert _placeholders(unit.sql) == len(unit.params), (unit.sql, unit.params)
        for logic, physical in unit.tables:
            table = cfg.table(logic)
            assert table is not None and any(
                n.data_source == unit.data_source and n.table == physical for n in table.data_nodes
            ), (logic, physical, unit.data_source)
        assert not _logic_tables(unit.sql), unit.sql


def _logic_tables(unit_sql: str) -> list[str]:
    """Sharded logic tables still referenced as tables in a unit's SQL (they must all be rewritten)."""
    text = unit_sql.replace("%s", "?").replace("%%", "%")
    try:
        trees = sqlglot.parse(text, read="mysql")
    except Exception:  # noqa: BLE001 - the unit may be a passthrough sqlglot cannot structure
        return []
    ctes = {c.alias.lower() for t in trees if t for c in t.find_all(exp.CTE)}
    return [
        t.name for tree in trees if tree for t in tree.find_all(exp.Table)
        if t.name.lower() in ("t_order", "t_order_item") and t.name.lower() not in ctes
    ]


def _quotes_fragment(message: str, sql: str, params: Any) -> bool:
    words = {w.lower() for w in _WORD.findall(sql)}
    found = {w.lower() for w in _WORD.findall(message)}
    for a, b in re.findall(r"'([^']+)'|\"([^\"]+)\"", message):
        quoted = (a or b).lower()
        if quoted in sql.lower() or quoted.replace("\\n", "\n").replace("\\\\", "\\") in sql.lower():
            return True  # a quoted name or fragment of the statement
    flat = " ".join(sql.split())[:40]
    if flat in " ".join(message.split()) or repr(flat)[1:-1] in message:
        return True
    return bool(words & found) or any(repr(p) in message or str(p) in message for p in (params or []))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sql=fuzzed(), extra=st.integers(0, 2), name=st.sampled_from(["N", "S"]))
def test_fuzzed_sql_raises_only_ddm_errors(sql: str, extra: int, name: str) -> None:
    n = sql.count("%s") + sql.count("?")
    params: Any = [3 + i for i in range(n + extra - 1)] if extra else [3 + i for i in range(n)]
    if "%(k)s" in sql:
        params = {"k": 5}
    r = Router(config(name))
    try:
        plan = r.route(sql, params)
    except DdmError as err:
        message = str(err)
        assert message and _quotes_fragment(message, sql, params), (type(err).__name__, message, sql)
        return
    _invariants(name, plan)


# -- never a wrong route: shard condition with noise -------------------------------------------------

NOISE_ATOMS = ["status = 1", "amount > 10", "note LIKE 'a%%'", "id IN (1, 2, 3)", "created IS NULL",
               "ABS(amount) = 2", "status <> user_id", "order_id BETWEEN 5 AND 9", "EXISTS (SELECT 1 FROM t_dict_region)",
               "region IN (SELECT id FROM t_dict_region)", "COALESCE(status, 0) = 0", "user_id + 1 = 5"]


@st.composite
def noise(draw: Any, depth: int = 2) -> str:
    if depth == 0 or draw(st.booleans()):
        atom = draw(st.sampled_from(NOISE_ATOMS))
        return f"NOT ({atom})" if draw(st.booleans()) else atom
    op = draw(st.sampled_from(["AND", "OR"]))
    return f"({draw(noise(depth - 1))} {op} {draw(noise(depth - 1))})"


@settings(max_examples=150, deadline=None)
@given(user=st.integers(0, 10**6), extra=noise(), style=st.sampled_from(["%s", "literal"]))
def test_shard_condition_and_noise(user: int, extra: str, style: str) -> None:
    r = router("S")
    value, params = ("%s", [user]) if style == "%s" else (str(user), [])
    narrowed = r.route(f"SELECT * FROM t_order WHERE user_id = {value} AND ({extra})", params)
    node = s_node(user)
    assert (node.ds, node.table("t_order")) in {(u.data_source, t) for u in narrowed.units for _, t in u.tables}
    widened = r.route(f"SELECT * FROM t_order WHERE user_id = {value} OR ({extra})", params)
    assert len(widened.units) == 32
