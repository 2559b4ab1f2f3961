"""SQL text as users write it: PyMySQL's ``%`` rules, parse errors in SQL words, hostile text,
and MySQL executable comments read as the code they are.

Oracles: PyMySQL's own ``Cursor.mogrify`` (what the driver sends for a statement and its
params), the documented layouts of the suite's configs (``router_cases``), and MariaDB
itself running the same DELETE / SELECT on one unsharded copy of the data.
"""

from __future__ import annotations

import importlib
import re
import uuid
from dataclasses import replace
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddm_core.dbapi as dbapi
from ddm_core import load_config
from ddm_core.errors import (
    DdmError,
    FullRouteError,
    ParameterError,
    ShardKeyUpdateError,
    UnsupportedSQLError,
)
from ddm_core.execute import Executor
from ddm_core.route import Router
from ddm_core.route.text.parse_errors import sql_word
from ddm_core.route.text.placeholders import translate, unwrap_executable_comments
from router_cases import Case, all_nodes, comment, config, n_node, nodes, physical_sql, router, s_node
from test_execute_support import (  # noqa: F401 - fixtures
    ORDER_DDL,
    executor,
    mysql_config,
    mysql_databases,
    mysql_executor,
    mysql_raw,
    sharding_config,
    sqlite_config,
    sqlite_executor,
)

MODULO = "SELECT create_time % 7 AS g, COUNT(*) FROM t_order GROUP BY create_time % 7"
SQLGLOT_WORDS = re.compile(r"<class|sqlglot\.|TokenType|<Token|SENTINEL")  # the parser's own names


@pytest.fixture(scope="module")
def mogrify() -> Iterator[Any]:
    """PyMySQL's ``Cursor.mogrify``: the exact text the driver sends for (sql, args)."""
    conn = mysql_raw()
    cur = conn.cursor()
    yield cur.mogrify
    conn.close()


def node_set(plan: Any) -> set[tuple[str, str]]:
    return {(u.data_source, physical) for u in plan.units for _, physical in u.tables}


def s_nodes(*users: int) -> set[tuple[str, str]]:
    return {(n.ds, n.table("t_order")) for n in nodes(s_node, *users)}


ALL_S = {(n.ds, n.table("t_order")) for n in all_nodes("S")}


# -- 1. PyMySQL's % rules ----------------------------------------------------------------------


def test_modulo_without_params_routes() -> None:
    plan = router("S").route(MODULO)
    assert node_set(plan) == ALL_S
    for unit in plan.units:
        assert unit.params == ()
        # the unit is a format-family template: %-formatting it with no args gives the modulo back
        assert "create_time % 7" in unit.sql % ()


def test_with_params_a_lone_percent_is_refused_and_double_percent_is_modulo() -> None:
    r = router("S")
    with pytest.raises(ParameterError, match="unsupported '%'"):
        r.route(MODULO, [])
    plan = r.route(MODULO.replace("%", "%%"), [])
    assert node_set(plan) == ALL_S and all("create_time % 7" in u.sql % () for u in plan.units)


@pytest.mark.parametrize("first", ["none", "params"])
def test_plan_cache_keeps_the_two_readings_apart(first: str) -> None:
    r = router("S")
    doubled = MODULO.replace("%", "%%")
    calls: list[tuple[str, Any]] = [(MODULO, None), (MODULO, []), (doubled, []), (doubled, None)]
    if first == "params":
        calls.reverse()
    for _ in range(2):  # the second round is served from the cache
        for sql, params in calls:
            ok = (sql is MODULO) == (params is None)
            if ok:
                assert node_set(r.route(sql, params)) == ALL_S
            else:
                with pytest.raises(DdmError) as info:
                    r.route(sql, params)
                if params is None:  # '%%' sent as written is no SQL: the message says why
                    assert "no parameters were given" in str(info.value)
    assert r.cache_info().size == 2  # one plan per reading; the refused readings cache nothing
    # A text without '%' reads the same both ways: one plan serves both.
    r.route("SELECT * FROM t_order WHERE user_id = 3", None)
    r.route("SELECT * FROM t_order WHERE user_id = 3", [])
    assert r.cache_info().size == 3


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("SELECT user_id % 7 FROM t_order WHERE user_id = 3", None),
        ("SELECT user_id %% 7 FROM t_order WHERE user_id = 3", []),
        ("SELECT user_id %% 7, '100%%' FROM t_order WHERE user_id = %s", [3]),
        ("SELECT '100%%', note FROM t_order WHERE user_id = 3", None),
        ("SELECT '100%%', note FROM t_order WHERE user_id = 3", []),
        ("SELECT %(u)s, '5%%', \"x%%\" FROM t_order WHERE user_id = %(u)s", {"u": 3}),
        ("SELECT '%s' FROM t_order WHERE user_id = 3 -- 50%", None),
        ("SELECT 'a%%b' FROM t_order WHERE user_id = 3 /*! AND amount % 2 = 0 */", None),
    ],
)
def test_units_send_what_pymysql_sends(mogrify: Any, sql: str, params: Any) -> None:
    (unit,) = router("S").route(sql, params).units
    assert mogrify(unit.sql, unit.params) == physical_sql(mogrify(unwrap_executable_comments(sql), params), "S",
                                                           s_node(3))


def test_translate_reads_percent_per_pymysql_mode() -> None:
    assert translate(MODULO, formatted=False).sql == MODULO
    assert translate("SELECT a %% 2, '%s'", formatted=False).sql == "SELECT a %% 2, '%s'"
    assert translate("SELECT a %% 2, '1%%'").sql == "SELECT a % 2, '1%'"
    t = translate("SELECT ? + a % 2", formatted=False)
    assert (t.style, t.names) == ("qmark", (0,))  # ? stays a placeholder (sqlite3), which then lacks a value
    with pytest.raises(ParameterError, match="no parameters were given"):
        t.bind(None)


def test_executor_runs_modulo_without_params(executor: Executor) -> None:
    rows = [(u * 10, u, u % 5, f"n{u}") for u in range(1, 31)]
    with executor.execute(
        "INSERT INTO t_order (order_id, user_id, amount, note) VALUES " + ", ".join(["(%s, %s, %s, %s)"] * len(rows)),
        [v for row in rows for v in row],
    ):
        pass
    expected = sorted((g, sum(1 for r in rows if r[1] % 7 == g)) for g in {r[1] % 7 for r in rows})
    with executor.execute("SELECT user_id % 7 AS g, COUNT(*) FROM t_order GROUP BY user_id % 7 ORDER BY g") as r:
        assert [(int(g), int(n)) for g, n in r.fetchall()] == expected
    with executor.execute(
        "SELECT user_id %% 7 AS g, COUNT(*) FROM t_order WHERE amount >= %s GROUP BY user_id %% 7 ORDER BY g", (0,)
    ) as r:
        assert [(int(g), int(n)) for g, n in r.fetchall()] == expected
    with executor.execute("SELECT note FROM t_order WHERE user_id = 7 AND note LIKE 'n%'") as r:
        assert r.fetchall() == [("n7",)]


def test_dbapi_cursor_without_params(executor: Executor) -> None:
    conn = dbapi.connect(executor=executor, autocommit=True)
    try:
        cur = conn.cursor()
        cur.execute("INSERT INTO t_order (order_id, user_id, amount, note) VALUES (%s, %s, %s, %s)", (70, 7, 3, "100%"))
        cur.execute("SELECT user_id % 4, note FROM t_order WHERE user_id = 7")
        assert [(int(a), b) for a, b in cur.fetchall()] == [(3, "100%")]
        cur.execute("SELECT note FROM t_order WHERE user_id = %s AND note = '100%%'", (7,))
        assert cur.fetchall() == [("100%",)]
        with pytest.raises(dbapi.ProgrammingError):
            cur.execute("SELECT user_id % 4 FROM t_order WHERE user_id = %s", (7,))
    finally:
        conn.close()


def test_cli_route_without_params() -> None:
    from click.testing import CliRunner

    from ddm_core.cli import cli
    from router_cases import CONFIGS

    path = str(CONFIGS / "ss_order_db_2x16.yaml")
    result = CliRunner().invoke(cli, ["route", "-c", path, "SELECT user_id % 7 FROM t_order WHERE user_id = 19"])
    assert result.exit_code == 0, result.output
    assert f"t_order → {s_node(19).ds}.t_order_{19 % 16}" in result.output
    refused = CliRunner().invoke(cli, ["route", "-c", path, "SELECT user_id % 7 FROM t_order WHERE user_id = 19",
                                       "-p", "[]"])
    assert refused.exit_code == 2 and "unsupported '%'" in refused.output


# -- 2. parse errors in SQL words -----------------------------------------------------------------


def _caret_points_at(message: str, char: str) -> bool:
    """The message's last two lines are the statement's line and a caret under ``char``."""
    shown, caret = message.splitlines()[-2:]
    return shown[caret.index("^")] == char


@pytest.mark.parametrize(
    ("sql", "params", "problem", "target"),
    [
        ("SELECT * FRM t_order", None, "syntax error", "t_order"),
        ("SELECT *\n  FROM t_order\n WHERE user_id = = 3", None, "incomplete '='", "= 3"),
        ("SELECT * FROM t_order WHERE user_id = %s AND amount = = %s", [1, 2], "incomplete '='", "= %s"),
        ("SELECT %(a)s, '%%', amount * FROM t_order", {"a": 1}, "incomplete '*'", "FROM t_order"),
        ("SELECT user_id %% 7, '100%%' FROM t_order WHERE user_id = %s AND AND 1", [1], "", "AND 1"),
        ("SELECT * FROM t_order WHERE (user_id = %s", [1], "expected ')'", "%s"),
        ("REPLACE INTO t_order (order_id, user_id) VALUES (%s, %s) WHERE x", [1, 2], "syntax error", "WHERE"),
        ("REPLACE INTO t_order (order_id, user_id) VALUES (%s, %s), (1, ", [1, 2], "expected ')'", ","),
        ("SELECT a FROM t_order /*! WHERE WHERE */", None, "", "WHERE */"),
        ("SELECT * FROM", None, "expected table name but got the end of the statement", "FROM"),
    ],
)
def test_parse_error_names_the_place(sql: str, params: Any, problem: str, target: str) -> None:
    with pytest.raises(UnsupportedSQLError) as info:
        router("S").route(sql, params)
    message = str(info.value)
    offset = sql.rindex(target)
    line = sql.count("\n", 0, offset) + 1
    column = offset - (sql.rfind("\n", 0, offset) + 1) + 1
    assert f"at line {line}, column {column}" in message, message
    assert info.value.context["position"] == offset
    assert problem in message and not SQLGLOT_WORDS.search(message), message
    assert _caret_points_at(message, sql[offset]), message
    assert " ".join(sql.split())[:20] in message  # the statement itself is quoted


def test_caret_on_a_long_line_and_unreadable_text() -> None:
    sql = "SELECT " + ", ".join(f"c{i}" for i in range(60)) + " FROM t_order WHERE user_id = 1 AND AND x = 2"
    with pytest.raises(UnsupportedSQLError) as info:
        router("S").route(sql)
    message = str(info.value)
    offset = sql.rindex("AND x")
    assert f"column {offset + 1}" in message and "    ..." in message and _caret_points_at(message, "A")
    # the tokenizer's own errors (the translation catches these first in routing) get the same treatment
    from ddm_core.route.compile import parse

    with pytest.raises(UnsupportedSQLError, match="missing closing ' near \"'abc\" at line 1, column 8") as info:
        parse("SELECT 'abc", "SELECT 'abc")
    assert _caret_points_at(str(info.value), "'")


def test_parameter_errors_quote_the_callers_text() -> None:
    sql = "/*! SELECT */ * FROM t_order WHERE user_id = %s AND note = '100%%'"
    with pytest.raises(ParameterError) as info:
        router("S").route(sql, [1, 2])
    assert " ".join(sql.split()) in str(info.value) and info.value.context["sql"] == sql


@pytest.mark.parametrize(
    ("name", "word"),
    [("Mul", "*"), ("EQ", "="), ("NullSafeEQ", "<=>"), ("And", "AND"), ("Count", "COUNT"), ("Union", "UNION"),
     ("Paren", "( )"), ("IntDiv", "DIV"), ("Like", "LIKE")],
)
def test_sqlglot_classes_become_sql_words(name: str, word: str) -> None:
    assert sql_word(name) == word


# -- 3. hostile text ends in a DdmError that quotes the statement -----------------------------------

HOSTILE = [
    "SELECT",
    "SELECT * FROM (SELECT) t",
    "SHOW TABLE",
    "SHOW",
    "SELECT " + "(" * 5000 + "1" + ")" * 5000,
    "SELECT * FROM t_order WHERE user_id = 1 AND " + "(" * 3000 + "1" + ")" * 3000,
    "SELECT " + "NOT " * 5000 + "1",
    "SELECT " + "-" * 5000 + "1",
    "SELECT " + " + ".join(["1"] * 5000) + " FROM t_order",
    "SELECT * FROM t_order WHERE user_id = 1" + " OR user_id = 1" * 3000,
    "SELECT * FROM " + "(SELECT * FROM " * 400 + "t_order" + ") x" * 400,
    "\x00\x01\x02",
    "SELECT '\\",
    "/*! SELECT",
    "WITH x() AS (SELECT 1) SELECT * FROM x",  # compiled sqlglot names a class 'WITH query'
]


def quotes_statement(message: str, sql: str) -> bool:
    """The message shows the statement's start (as ``shorten_sql`` flattens it, raw or escaped by repr)."""
    head = " ".join(sql[:200].split())[:16]
    inner = repr(head)[1:-1].replace("\\'", "'")
    return any(form in message for form in (head, inner, inner.replace("'", "\\'")))


@pytest.mark.parametrize("sql", HOSTILE, ids=[s[:30] for s in HOSTILE])
def test_hostile_text_ends_in_a_ddm_error(sql: str) -> None:
    try:
        plan = router("S").route(sql)
    except DdmError as err:
        assert quotes_statement(str(err), sql) and not SQLGLOT_WORDS.search(str(err)), str(err)[:300]
    else:
        assert plan.units  # what routes, routes somewhere


def _corpus() -> list[Case]:
    """Every statement of the table-driven router suite."""
    cases: list[Case] = []
    for name in ("test_router_select", "test_router_dml", "test_router_aggregation", "test_router_ddl",
                 "test_router_errors", "test_router_hints", "test_router_pagination", "test_router_governance"):
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, list):
                cases += [c for c in value if isinstance(c, Case) and isinstance(c.sql, str)]
    return cases


CORPUS = _corpus()
TOKEN = re.compile(r"\s+|\w+|'[^']*'|.", re.S)
PIECES = ["(", ")", ",", "SELECT", "FROM", "WHERE", "%s", "?", "%", "%%", "%(k)s", "/*!", "/*!50000 ", "/*!99999 ",
          "/*M!", "*/", "/*", "/*+ x */", "'", '"', "`", "-- ", "#", "\n", ";", "NOT", "AND", "OR", "=", "IN", "NULL",
          "1", "-", "*", "JOIN", "ON", "GROUP BY", "ORDER BY", "LIMIT", "UNION", "\\", "\x00", ":p0", "::", "{0}",
          "__ddm_t0__", "INSERT", "VALUES", "UPDATE", "SET", "DELETE", "CASE WHEN", "END", "EXISTS", "AS", "INTO"]


@st.composite
def mutated(draw: Any) -> tuple[str, str, Any]:
    case = draw(st.sampled_from(CORPUS))
    tokens = TOKEN.findall(case.sql)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(tokens)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "bytes", "nest"]))
        if op == "delete" and tokens:
            del tokens[min(at, len(tokens) - 1)]
        elif op == "insert":
            tokens.insert(at, draw(st.sampled_from(PIECES)))
        elif op == "duplicate" and tokens:
            tokens.insert(at, tokens[min(at, len(tokens) - 1)])
        elif op == "bytes":
            tokens.insert(at, draw(st.text(min_size=1, max_size=6)))
        else:
            depth = draw(st.sampled_from([1, 3, 50, 400, 2000]))
            tokens[at:at] = ["(" * depth, draw(st.sampled_from(["1", "user_id", "SELECT 1", ""])), ")" * depth]
    sql = "".join(tokens)
    kind = draw(st.sampled_from(["case", "none", "counted", "empty"]))
    params: Any = {"case": case.params, "none": None, "empty": []}.get(kind)
    if kind == "counted":
        params = {"k": 5} if "%(k)s" in sql else list(range(3, 3 + sql.count("%s") + sql.count("?")))
    return case.config, sql, params


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(example=mutated())
def test_mutated_statements_route_or_raise_ddm_errors(example: tuple[str, str, Any]) -> None:
    name, sql, params = example
    try:
        plan = Router(config(name)).route(sql, params)
    except DdmError as err:
        message = str(err)
        assert quotes_statement(message, sql), (type(err).__name__, message[:300], sql[:200])
        assert not SQLGLOT_WORDS.search(message), message[:300]
        return
    assert plan.units


# -- 4. MySQL executable comments are code --------------------------------------------------------


def dml_router() -> Router:
    """Config S with every-shard DML allowed, so a widened DELETE routes instead of being refused."""
    cfg = config("S")
    return Router(replace(cfg, runtime=replace(cfg.runtime, allow_dml_full_route=True)))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t_order WHERE user_id = %s /*! OR 1=1 */",
        "SELECT * FROM t_order WHERE user_id = %s /*!50000 OR 1=1 */",
        "SELECT * FROM t_order WHERE user_id = %s /*!50700OR 1=1*/",
        "SELECT * FROM t_order WHERE user_id = %s /*!40101 OR*/ 1=1",
    ],
)
def test_or_inside_an_executable_comment_reaches_every_shard(sql: str) -> None:
    plan = router("S").route(sql, [1])
    assert node_set(plan) == ALL_S
    assert all("OR" in u.sql and "/*!" not in u.sql for u in plan.units)  # sent as the code it is


def test_condition_inside_an_executable_comment_is_analysed() -> None:
    plan = router("S").route("SELECT * FROM t_order WHERE /*! user_id = 999 OR */ user_id = %s", [1])
    assert node_set(plan) == s_nodes(1, 999)


def test_delete_with_executable_or_is_full_or_refused() -> None:
    sql = "DELETE FROM t_order WHERE user_id = %s /*! OR 1=1 */"
    with pytest.raises(FullRouteError):  # the own format forbids every-shard DML: refused, not a point delete
        router("N").route(sql, [1])
    assert node_set(dml_router().route(sql, [1])) == ALL_S
    # a ShardingSphere file without auditors sends it to every shard, as ShardingSphere does
    assert node_set(router("S").route(sql, [1])) == ALL_S


def test_update_in_executable_comment_cannot_move_a_row() -> None:
    with pytest.raises(ShardKeyUpdateError):
        dml_router().route("UPDATE t_order SET amount = 2 /*!, user_id = 6 */ WHERE user_id = %s", [1])
    with pytest.raises(ShardKeyUpdateError):
        dml_router().route("UPDATE t_order SET amount = 2 /*!50100 , user_id = 6 */ WHERE user_id = %s", [1])


def test_placeholders_inside_an_executable_comment_are_parameters() -> None:
    plan = router("S").route("SELECT * FROM t_order WHERE user_id = %s /*! OR user_id = %s */", [1, 17])
    assert node_set(plan) == s_nodes(1, 17)
    assert all(u.params == (1, 17) for u in plan.units)


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("SELECT * FROM t_order WHERE user_id = 1 /*!80000 OR 1=1 */", "8.0.0"),
        ("SELECT * FROM t_order WHERE user_id = 1 /*!100500 OR 1=1 */", "6-digit"),
        ("SELECT * FROM t_order WHERE user_id = 1 /*!123 OR 1=1 */", "3-digit"),
        ("SELECT * FROM t_order WHERE user_id = 1 /*M! OR 1=1 */", "MariaDB only"),
        ("SELECT * FROM t_order WHERE user_id = 1 /*M!100100 OR 1=1 */", "MariaDB only"),
        ("SELECT * FROM t_order WHERE user_id = 1 /*! OR /* x */ 1=1 */", "contains a comment"),
        ("SELECT * FROM t_order WHERE user_id = 1 /*! OR 1=1 -- x */\n", "contains a comment"),
        ("SELECT * FROM t_order WHERE user_id = 1 /*! OR 1=1", "never closed"),
        ("SELECT * FROM t_order WHERE user_id = 1 /*! OR note = '*/' ", "never closed"),
    ],
)
def test_executable_comments_that_depend_on_the_server_are_refused(sql: str, fragment: str) -> None:
    for params in (None, ()):
        with pytest.raises(UnsupportedSQLError, match="executable comment") as info:
            router("S").route(sql, params)
        assert fragment in str(info.value) and quotes_statement(str(info.value), sql)


def test_comments_strings_and_hints_keep_their_meaning() -> None:
    r = router("S")
    for sql in [
        "SELECT * FROM t_order WHERE user_id = %s /* OR 1=1 */",
        "SELECT * FROM t_order WHERE user_id = %s AND note = '/*! OR 1=1 */'",
        "SELECT * FROM t_order WHERE user_id = %s -- /*! OR 1=1 */",
        "SELECT /*+ MAX_EXECUTION_TIME(100) */ * FROM t_order WHERE user_id = %s",
    ]:
        (unit,) = r.route(sql, [1]).units
        assert unit.sql == physical_sql(sql, "S", s_node(1)), sql  # sent byte for byte
    # a string inside an executable comment does not end it early
    plan = r.route("SELECT * FROM t_order WHERE user_id = %s /*! AND note <> '*/ OR 1=1' */", [1])
    assert node_set(plan) == s_nodes(1)


def test_executable_comments_with_the_sql_comment_prefix_and_replace() -> None:
    (unit,) = router("N").route("SELECT * FROM t_order WHERE user_id = %s /*! AND amount > 1 */", [5]).units
    node = n_node(5)
    assert unit.sql.startswith(comment("N", node.ds)) and unit.data_source == node.ds
    plan = router("S").route("/*! REPLACE */ INTO t_order (order_id, user_id) VALUES (%s, %s)", [1, 3])
    (unit,) = plan.units
    assert plan.statement == "insert" and "REPLACE" in unit.sql and node_set(plan) == s_nodes(3)


# -- end to end on MariaDB: what the server would do on one unsharded table ----------------------


@pytest.fixture(scope="module")
def mariadb() -> Iterator[tuple[Executor, Any]]:
    """An executor over 2 fresh databases × 2 tables, and a raw connection to one unsharded copy."""
    tag = uuid.uuid4().hex[:8]
    names = [f"ddm_sqltext_{tag}_{i}" for i in range(2)]
    reference = f"ddm_sqltext_{tag}_ref"
    admin = mysql_raw()
    with admin.cursor() as cur:
        for name in [*names, reference]:
            cur.execute(f"CREATE DATABASE {name}")
        cur.execute(f"CREATE TABLE {reference}.t_order " + ORDER_DDL.split("t_order", 1)[1])
    urls: Any = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
                 for i, db in enumerate(names)}
    ex = Executor(load_config(sharding_config(urls, tables=2)), timeout=5.0)
    ref = mysql_raw(reference)
    try:
        ex.execute(ORDER_DDL).close()
        yield ex, ref
    finally:
        ex.close()
        ref.close()
        with admin.cursor() as cur:
            for name in [*names, reference]:
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


def _reset(ex: Executor, ref: Any) -> None:
    rows = [(u * 100 + k, u, (u + k) % 6, f"u{u}") for u in range(1, 41) for k in range(3)]
    ex.execute("DELETE FROM t_order").close()
    ref.cursor().execute("DELETE FROM t_order")
    values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    flat = [v for row in rows for v in row]
    ex.execute(f"INSERT INTO t_order (order_id, user_id, amount, note) VALUES {values}", flat).close()
    ref.cursor().execute(f"INSERT INTO t_order (order_id, user_id, amount, note) VALUES {values}", flat)


def _rows(ex: Executor, ref: Any) -> tuple[list[Any], list[Any]]:
    sql = "SELECT order_id, user_id, amount, note FROM t_order ORDER BY order_id"
    with ex.execute(sql) as r:
        sharded = [tuple(row) for row in r.fetchall()]
    cur = ref.cursor()
    cur.execute(sql)
    return sharded, [tuple(row) for row in cur.fetchall()]


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM t_order WHERE user_id = %s /*! OR 1=1 */",
        "DELETE FROM t_order WHERE user_id = %s /*!50000 OR amount = 3 */",
        "DELETE FROM t_order WHERE user_id = %s /*! OR user_id > %s */",
    ],
)
def test_executable_delete_deletes_what_mariadb_deletes(mariadb: tuple[Executor, Any], sql: str) -> None:
    ex, ref = mariadb
    _reset(ex, ref)
    params = (7, 30) if sql.count("%s") == 2 else (7,)
    with ex.execute(sql, params) as r:
        deleted = r.rowcount
    assert deleted == ref.cursor().execute(sql, params)
    sharded, expected = _rows(ex, ref)
    assert sharded == expected and len(expected) < 120


def test_executable_select_and_update_match_mariadb(mariadb: tuple[Executor, Any]) -> None:
    ex, ref = mariadb
    _reset(ex, ref)
    sql = "SELECT order_id, user_id FROM t_order WHERE user_id = %s /*! OR amount = 5 */ ORDER BY order_id"
    with ex.execute(sql, (7,)) as r:
        got = [tuple(row) for row in r.fetchall()]
    cur = ref.cursor()
    cur.execute(sql, (7,))
    assert got == [tuple(row) for row in cur.fetchall()] and len(got) > 3
    with pytest.raises(ShardKeyUpdateError):
        ex.execute("UPDATE t_order SET amount = 2 /*!, user_id = 6 */ WHERE user_id = %s", (1,))
    sharded, expected = _rows(ex, ref)
    assert sharded == expected  # nothing moved
