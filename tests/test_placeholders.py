"""DB-API placeholders ↔ the ``?`` text sqlglot parses (ddm_core.route.text.placeholders).

Oracles: sqlglot's own MySQL tokenizer (the number of ``?`` it sees in the
translated text is the number of names), sqlglot parse/regenerate round trips,
and Python's ``%`` operator, which is exactly what PyMySQL applies to a
``format`` / ``pyformat`` statement before sending it.
"""

from __future__ import annotations

import pickle
import sqlite3
import time
import types
from typing import Any

import pytest
import sqlglot
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError

from ddm_core.errors import ConfigError, DdmError, RoutingError, UnsupportedSQLError
from ddm_core.route.text.placeholders import ParameterError, Translated, to_paramstyle, translate

_HYP = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def sqlglot_placeholders(sql: str) -> int:
    """How many placeholder tokens sqlglot's MySQL tokenizer finds (``??`` would count as 0)."""
    return sum(1 for tok in MySQL().tokenize(sql) if tok.token_type.name == "PLACEHOLDER")


def parsed_placeholders(sql: str) -> list[exp.Placeholder]:
    return list(sqlglot.parse_one(sql, read="mysql").find_all(exp.Placeholder))


# -- the three styles and "none" ---------------------------------------------------------


def test_format() -> None:
    t = translate("SELECT * FROM t_order WHERE user_id = %s AND order_id = %s")
    assert t == Translated("SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", "format", (0, 1))


def test_pyformat_records_every_occurrence_of_a_repeated_name() -> None:
    t = translate("SELECT * FROM t WHERE user_id = %(uid)s OR buyer_id = %(uid)s AND x = %(x)s")
    assert t.sql == "SELECT * FROM t WHERE user_id = ? OR buyer_id = ? AND x = ?"
    assert t.style == "pyformat"
    assert t.names == ("uid", "uid", "x")


def test_qmark() -> None:
    t = translate("UPDATE t SET a = ? WHERE id = ?")
    assert t == Translated("UPDATE t SET a = ? WHERE id = ?", "qmark", (0, 1))


@pytest.mark.parametrize("sql", ["SELECT 1", "", "SELECT 'a%s?', `b?` -- %s ?\n", "SELECT a %% 2"])
def test_no_placeholder_is_style_none(sql: str) -> None:
    t = translate(sql)
    assert t.style == "none" and t.names == ()


def test_results_are_cached_per_text() -> None:
    sql = "SELECT * FROM t_cache_probe WHERE id = %s"
    assert translate(sql) is translate(sql)
    assert translate.cache_info().maxsize == 4096


# -- quotes and comments hide placeholders ---------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT '%s', %s", "SELECT '%s', ?"),
        ("SELECT '?', %s", "SELECT '?', ?"),
        ('SELECT "%s?", %s', 'SELECT "%s?", ?'),
        ("SELECT `%s?` FROM t WHERE a = %s", "SELECT `%s?` FROM t WHERE a = ?"),
        ("SELECT 'it''s %s', %s", "SELECT 'it''s %s', ?"),
        ("SELECT 'a\\'%s', %s", "SELECT 'a\\'%s', ?"),
        ("SELECT 'a\\\\', %s", "SELECT 'a\\\\', ?"),  # the string ends with an escaped backslash
        ('SELECT "a""%s", %s', 'SELECT "a""%s", ?'),
        ('SELECT "a\\"?", ?', 'SELECT "a\\"?", ?'),
        ("SELECT `a``?`, ?", "SELECT `a``?`, ?"),
        ("SELECT x'41', N'%s', _utf8'?', %s", "SELECT x'41', N'%s', _utf8'?', ?"),
        ("SELECT %s -- %s ?\n, %s", "SELECT ? -- %s ?\n, ?"),
        ("SELECT %s # ? %s\n, %s", "SELECT ? # ? %s\n, ?"),
        ("SELECT /* %s ? */ %s", "SELECT /* %s ? */ ?"),
        ("SELECT /* multi\nline ? */ ?", "SELECT /* multi\nline ? */ ?"),
        ("SELECT a#b %s\n, %s", "SELECT a#b %s\n, ?"),
        ("SELECT %s -- trailing %s", "SELECT ? -- trailing %s"),
        ("SELECT %s --\t%s", "SELECT ? --\t%s"),  # any whitespace after -- starts a comment
        ("SELECT %s --\n, %s", "SELECT ? --\n, ?"),  # an empty -- comment
        ("SELECT 1 --%s", "SELECT 1 --?"),  # no space after --: MySQL reads 1 - -?
        ("SELECT 1--%s", "SELECT 1--?"),
        ("SELECT /* /* */ ?", "SELECT /* /* */ ?"),  # block comments do not nest
        ("SELECT '' , ?", "SELECT '' , ?"),
        ("SELECT '''' , ?", "SELECT '''' , ?"),
    ],
)
def test_quotes_and_comments_hide_placeholders(sql: str, expected: str) -> None:
    t = translate(sql)
    assert t.sql == expected
    assert len(t.names) == sqlglot_placeholders(t.sql)  # sqlglot agrees on every case


def test_counts_match_sqlglot_for_edge_cases_of_the_dash_comment() -> None:
    for sql in ["SELECT 1--\x01 %s\n", "SELECT 1--\x7f %s\n", "SELECT 1--\u00a0 %s\n, %s", "SELECT a---%s"]:
        t = translate(sql)
        assert len(t.names) == sqlglot_placeholders(t.sql), sql


# -- %% and stray % ---------------------------------------------------------------------------


def test_double_percent_outside_quotes_is_modulo() -> None:
    t = translate("SELECT a %% 2 FROM t WHERE id = %s")
    assert t.sql == "SELECT a % 2 FROM t WHERE id = ?"
    assert sqlglot.parse_one(t.sql, read="mysql").find(exp.Mod) is not None


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # %s / %(name)s statements are %-format strings end to end, as PyMySQL formats them
        ("INSERT INTO t VALUES (%s, '100%%') -- 50%% done\n", "INSERT INTO t VALUES (?, '100%') -- 50% done\n"),
        ("SELECT %(a)s, '100%%', \"5%%\"", "SELECT ?, '100%', \"5%\""),
        ("SELECT %s, '%Y-%m'", "SELECT ?, '%Y-%m'"),  # a lone % inside quotes stays literal
        # with params and no %-placeholder PyMySQL still %-formats the text: %% is % everywhere
        ("SELECT '100%%', a %% 2", "SELECT '100%', a % 2"),
        ("SELECT '5%'", "SELECT '5%'"),
        # a ? statement is not %-formatted: the text inside quotes is kept as is
        ("SELECT ?, '100%%', a %% 2", "SELECT ?, '100%%', a % 2"),
        ("SELECT %%s", "SELECT %s"),  # %% then s: not a placeholder
        ("SELECT 7 %%%s", "SELECT 7 %?"),  # %% then %s
    ],
)
def test_percent_escapes(sql: str, expected: str) -> None:
    assert translate(sql).sql == expected


@pytest.mark.parametrize(
    ("sql", "position", "fragment"),
    [
        ("SELECT * FROM t WHERE id = %d", 27, "%d"),
        ("SELECT * FROM t WHERE id = %(id)d", 27, "%(id)d"),
        ("SELECT a % 2 FROM t WHERE id = %s", 9, "% 2"),
        ("SELECT 10 % 3", 10, "% 3"),
        ("SELECT %", 7, "%"),
        ("SELECT '%s', %(a", 13, "%(a"),
        ("SELECT %(a)s, %(b", 14, "%(b"),
    ],
)
def test_stray_percent_is_refused_with_fragment_and_position(sql: str, position: int, fragment: str) -> None:
    with pytest.raises(ParameterError) as info:
        translate(sql)
    err = info.value
    assert err.position == position
    assert err.fragment.startswith(fragment)
    assert f"position {position}" in str(err) and repr(err.fragment) in str(err)


def test_stray_percent_in_a_qmark_statement_is_modulo() -> None:
    t = translate("SELECT a % 2 FROM t WHERE id = ?")
    assert t.sql == "SELECT a % 2 FROM t WHERE id = ?" and t.names == (0,)
    assert sqlglot.parse_one(t.sql, read="mysql").find(exp.Mod) is not None


# -- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "styles"),
    [
        ("SELECT %s, ?", ("format", "qmark")),
        ("SELECT ?, %s", ("qmark", "format")),
        ("SELECT %s, '?', %(a)s", ("format", "pyformat")),
        ("SELECT %(a)s -- ?\n, ?", ("pyformat", "qmark")),
        ("SELECT ?, %(a)s, %s", ("qmark", "pyformat", "format")),
    ],
)
def test_mixed_styles_are_refused_naming_both(sql: str, styles: tuple[str, ...]) -> None:
    with pytest.raises(ParameterError, match="mixes placeholder styles") as info:
        translate(sql)
    assert info.value.styles == styles
    for style in styles:
        assert repr(style) in str(info.value)


@pytest.mark.parametrize(
    ("sql", "position"),
    [("INSERT INTO t VALUES (%s%s)", 22), ("SELECT %(a)s%(b)s", 7), ("SELECT ??", 7), ("SELECT 'x', %s::int", 12)],
)
def test_touching_placeholders_are_refused(sql: str, position: int) -> None:
    # sqlglot would read ``??`` / ``?::`` as one operator token and lose a placeholder
    with pytest.raises(ParameterError, match="touches") as info:
        translate(sql)
    assert info.value.position == position


def test_question_marks_inside_quotes_may_touch() -> None:
    assert translate("SELECT '??', ?, ?").names == (0, 1)


@pytest.mark.parametrize(
    ("sql", "position"),
    [
        ("SELECT 'abc", 7),
        ('SELECT "abc', 7),
        ("SELECT `abc", 7),
        ("SELECT /* abc", 7),
        ("SELECT /*/", 7),
        ("SELECT 'a\\'", 7),
        ("SELECT 'a', 'b''", 12),
    ],
)
def test_unterminated_quotes_and_comments_are_refused(sql: str, position: int) -> None:
    with pytest.raises(UnsupportedSQLError, match="unterminated") as info:
        translate(sql)
    assert info.value.position == position
    with pytest.raises(TokenError):  # sqlglot agrees it is broken
        MySQL().tokenize(sql)


def test_sql_must_be_text() -> None:
    with pytest.raises(ParameterError):
        translate(b"SELECT 1")


# -- bind ---------------------------------------------------------------------------------------


def test_bind_format_sequences() -> None:
    t = translate("SELECT * FROM t WHERE a = %s AND b = %s")
    params = [1, "x"]
    bound = t.bind(params)
    assert bound == [1, "x"] and bound is not params
    assert t.bind((1, "x")) == [1, "x"]
    assert t.bind(range(7, 9)) == [7, 8]  # any Sequence


def test_bind_qmark() -> None:
    assert translate("SELECT ?, ?, ?").bind((None, 2.5, b"z")) == [None, 2.5, b"z"]


@pytest.mark.parametrize("params", [[1], (1, 2, 3), [], None])
def test_bind_wrong_count(params: Any) -> None:
    t = translate("SELECT %s, %s")
    with pytest.raises(ParameterError, match="2 placeholder") as info:
        t.bind(params)
    assert info.value.expected == 2


@pytest.mark.parametrize("params", [{"a": 1, "b": 2}, "ab", b"ab", 12, {1, 2}])
def test_bind_sequence_styles_refuse_other_containers(params: Any) -> None:
    for sql in ("SELECT %s, %s", "SELECT ?, ?"):
        with pytest.raises(ParameterError, match="sequence"):
            translate(sql).bind(params)


def test_bind_pyformat() -> None:
    t = translate("SELECT %(b)s, %(a)s, %(b)s")
    assert t.bind({"a": 1, "b": 2}) == [2, 1, 2]
    assert t.bind({"a": 1, "b": 2, "unused": 3}) == [2, 1, 2]  # extra keys are fine (as in PyMySQL)
    assert t.bind(types.MappingProxyType({"a": 1, "b": 2})) == [2, 1, 2]


def test_bind_pyformat_missing_keys_are_named() -> None:
    t = translate("SELECT %(b)s, %(a)s, %(c)s")
    with pytest.raises(ParameterError, match="'a', 'c'") as info:
        t.bind({"b": 2})
    assert info.value.missing == ("a", "c")


@pytest.mark.parametrize("params", [[1, 2], (1,), None, "ab"])
def test_bind_pyformat_needs_a_mapping(params: Any) -> None:
    with pytest.raises(ParameterError, match="mapping"):
        translate("SELECT %(a)s").bind(params)


@pytest.mark.parametrize("params", [None, (), [], {}])
def test_bind_none_style(params: Any) -> None:
    assert translate("SELECT 1").bind(params) == []


@pytest.mark.parametrize("params", [(1,), [1], {"a": 1}])
def test_bind_none_style_refuses_parameters(params: Any) -> None:
    with pytest.raises(ParameterError):
        translate("SELECT 1").bind(params)


def test_parameter_error_is_a_routing_and_type_error_and_pickles() -> None:
    with pytest.raises(ParameterError) as info:
        translate("SELECT %s").bind([])
    err = info.value
    assert isinstance(err, RoutingError) and isinstance(err, TypeError) and isinstance(err, DdmError)
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is ParameterError and again.expected == 1 and str(again) == str(err)


# -- to_paramstyle --------------------------------------------------------------------------------


def test_to_format_converts_qmarks_outside_quotes_and_doubles_every_percent() -> None:
    sql = "SELECT a % 2, '100%?' FROM t -- 5% ?\nWHERE a = ? AND `b%?` = ?"
    out = to_paramstyle(sql, "format")
    assert out == "SELECT a %% 2, '100%%?' FROM t -- 5%% ?\nWHERE a = %s AND `b%%?` = %s"
    # what PyMySQL sends: the driver %-formats the whole text
    assert out % ("'x'", "'y'") == "SELECT a % 2, '100%?' FROM t -- 5% ?\nWHERE a = 'x' AND `b%?` = 'y'"


def test_to_format_without_placeholders_still_escapes() -> None:
    assert to_paramstyle("SELECT '5%'", "format") == "SELECT '5%%'"


def test_to_qmark_is_identity() -> None:
    sql = "SELECT a % 2, '?' FROM t WHERE a = ?"
    assert to_paramstyle(sql, "qmark") is sql


def test_to_paramstyle_refuses_unknown_styles_and_broken_text() -> None:
    with pytest.raises(ConfigError, match="pyformat"):
        to_paramstyle("SELECT ?", "pyformat")
    with pytest.raises(UnsupportedSQLError):
        to_paramstyle("SELECT ?, 'abc", "format")


def test_qmark_output_runs_on_sqlite() -> None:
    t = translate("SELECT ?, '?', 7 % 3, '100%%' -- ?\n")
    sql = to_paramstyle(t.sql, "qmark")
    with sqlite3.connect(":memory:") as conn:
        assert conn.execute(sql, t.bind(("v",))).fetchone() == ("v", "?", 1, "100%%")


# -- numbered: placeholders that survive sqlglot rewrites ------------------------------------------


def test_numbered_names_follow_bind_order() -> None:
    t = translate("SELECT 'x?' , %(b)s, %(a)s -- ?\n, `c?` FROM t WHERE id=%(b)s")
    assert t.numbered() == "SELECT 'x?' , :p0, :p1 -- ?\n, `c?` FROM t WHERE id=:p2"
    assert sorted(p.this for p in parsed_placeholders(t.numbered())) == ["p0", "p1", "p2"]
    assert t.numbered("@{") == "SELECT 'x?' , @{0, @{1 -- ?\n, `c?` FROM t WHERE id=@{2"


def test_numbered_keeps_limit_parameters_apart() -> None:
    # sqlglot regenerates ``LIMIT ?, ?`` (offset, count) as ``LIMIT ? OFFSET ?`` (count first):
    # bare ``?`` would swap the two values, :pN keeps them.
    t = translate("SELECT * FROM t WHERE id = %s LIMIT %s, %s")
    regenerated = sqlglot.parse_one(t.numbered(), read="mysql").sql(dialect="mysql")
    assert regenerated == "SELECT * FROM t WHERE id = :p0 LIMIT :p2 OFFSET :p1"


def test_numbered_separates_a_following_word() -> None:
    t = translate("SELECT 1 FROM t WHERE id=?AND x='?'")
    assert t.numbered() == "SELECT 1 FROM t WHERE id=:p0 AND x='?'"
    assert translate("SELECT 1").numbered() == "SELECT 1"


# -- sqlglot round trips ---------------------------------------------------------------------------

STATEMENTS = [
    "SELECT order_id, amount FROM t_order WHERE user_id = %s AND status IN (%s, %s) "
    "ORDER BY created_at DESC LIMIT %s, %s",
    "INSERT INTO t_order (order_id, user_id, note) VALUES (%s, %s, 'rush 100%%'), (%s, %s, '?')",
    "UPDATE t_order SET status = %(status)s, note = CONCAT(note, %(suffix)s) "
    "WHERE order_id = %(id)s AND user_id = %(uid)s",
    "DELETE FROM t_order WHERE user_id = ? AND order_id % 4 = ?",
    "SELECT o.order_id, i.sku FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
    "WHERE o.user_id = %s -- owner %s\n AND i.sku IN (%s, %s) /* ? */",
    "SELECT COUNT(*), user_id %% 16 AS bucket FROM t_user WHERE name LIKE %s GROUP BY bucket",
    "SELECT * FROM t_order WHERE user_id = %(uid)s OR buyer_id = %(uid)s",
    'SELECT `weird?col`, "str %s" FROM t WHERE a = %s AND b = DATE_FORMAT(%s, \'%Y\')',
    "SELECT 1",
]


@pytest.mark.parametrize("sql", STATEMENTS)
def test_sqlglot_round_trip(sql: str) -> None:
    t = translate(sql)
    n = len(t.names)
    assert len(parsed_placeholders(t.sql)) == n
    regenerated = sqlglot.parse_one(t.sql, read="mysql").sql(dialect="mysql")
    assert len(translate(regenerated).names) == n
    back = to_paramstyle(regenerated, "format")
    again = translate(back)
    assert len(again.names) == n and again.style == ("format" if n else "none")
    # Filling the format text the way PyMySQL does gives the regenerated text, markers in place
    if n:
        assert back % tuple(f"@p{i}" for i in range(n)) == translate(regenerated).numbered("@p")
    assert sorted(p.this for p in parsed_placeholders(t.numbered())) == sorted(f"p{i}" for i in range(n))


# -- hypothesis ------------------------------------------------------------------------------------

PLAIN = ["SELECT", "a", "t_order", "1", "=", "(", ")", "AND", "+", "x1", "-", "*", "--x", "@v"]
QUOTED_PIECES = ["%s", "?", "%(k)s", "''", "\\'", '""', '\\"', "x", " ", "%%", "\\\\", "--", "#", "/*", "*/"]
COMMENT_PIECES = ["%s", "?", "%(k)s", "x", " ", "%%", "'", '"', "`", "/*", "--"]
SEPARATORS = st.sampled_from([" ", "\n", "\t", " , "])


def _quoted(quote: str) -> st.SearchStrategy[str]:
    pieces = [p for p in QUOTED_PIECES if quote == "`" or "\\" in p or quote not in p or p == quote * 2]
    if quote == "`":  # identifiers: no backslash escapes, only a doubled backtick
        pieces = [p for p in QUOTED_PIECES if "\\" not in p and "'" not in p and '"' not in p] + ["``"]
    return st.lists(st.sampled_from(pieces), max_size=6).map(lambda xs: quote + "".join(xs) + quote)


def _comment() -> st.SearchStrategy[str]:
    body = st.lists(st.sampled_from(COMMENT_PIECES), max_size=5).map("".join)
    return st.one_of(
        body.map(lambda b: "-- " + b + "\n"),
        body.map(lambda b: "#" + b + "\n"),
        body.filter(lambda b: "*/" not in b and not b.endswith("*")).map(lambda b: "/*" + b + "*/"),
    )


def _placeholder(style: str) -> st.SearchStrategy[str]:
    if style == "format":
        return st.just("%s")
    if style == "qmark":
        return st.just("?")
    return st.sampled_from(["%(a)s", "%(b)s", "%(user id)s"])


OPAQUE = st.one_of(_quoted("'"), _quoted('"'), _quoted("`"), _comment())


@st.composite
def fragment_sql(draw: st.DrawFn) -> tuple[str, str, int]:
    """(sql, style, number of real placeholders) from non-interacting fragments."""
    style = draw(st.sampled_from(["format", "pyformat", "qmark"]))
    kinds = st.sampled_from(["placeholder", "plain", "opaque", "percent"])
    out: list[str] = []
    count = 0
    for kind in draw(st.lists(kinds, max_size=14)):
        if kind == "placeholder":
            out.append(draw(_placeholder(style)))
            count += 1
        elif kind == "plain":
            out.append(draw(st.sampled_from(PLAIN)))
        elif kind == "opaque":
            out.append(draw(OPAQUE))
        else:
            out.append("%%")
        out.append(draw(SEPARATORS))
    return "".join(out), style, count


@_HYP
@given(fragment_sql())
def test_hypothesis_placeholder_count_matches_fragments_and_sqlglot(case: tuple[str, str, int]) -> None:
    sql, style, count = case
    t = translate(sql)
    assert len(t.names) == count
    assert t.style == (style if count else "none")
    assert sqlglot_placeholders(t.sql) == count  # sqlglot's tokenizer sees the same ``?``s
    back = to_paramstyle(t.sql, "format")
    again = translate(back)
    assert len(again.names) == count and again.style == ("format" if count else "none")
    if count:  # format text → translate inverts to_paramstyle (without placeholders the
        # quoted text is taken as is, the way PyMySQL sends it when params is None)
        assert again.sql == t.sql


NASTY = ["-", "--", "1--", "/", "*", "%%", "#", "'", '"', "`", "\\", "x", "?", "%s", ":"]


@_HYP
@given(
    st.lists(st.one_of(st.sampled_from(NASTY + PLAIN), OPAQUE), max_size=14),
    st.lists(st.sampled_from(["", " ", "\n"]), min_size=14, max_size=14),
)
def test_hypothesis_adversarial_text_agrees_with_sqlglot(pieces: list[str], seps: list[str]) -> None:
    sql = "".join(p + s for p, s in zip(pieces, seps))
    try:
        t = translate(sql)
    except UnsupportedSQLError:
        with pytest.raises(TokenError):
            MySQL().tokenize(sql.replace("%s", "?"))
        return
    except ParameterError as err:
        assert "touches" in str(err) or "mixes" in str(err)
        return
    try:
        seen = sqlglot_placeholders(t.sql)
    except TokenError:  # e.g. a lone backslash; nothing to compare
        return
    assert seen == len(t.names)


@st.composite
def pymysql_case(draw: st.DrawFn) -> tuple[str, Any]:
    """A format / pyformat statement whose quotes and comments hold only literal text and %%."""
    style = draw(st.sampled_from(["format", "pyformat"]))
    literal_pieces = st.sampled_from(["x", " ", "%%", "?", "''", "50%% off"])
    text = st.lists(literal_pieces, max_size=4).map("".join)
    opaque = st.one_of(
        text.map(lambda b: f"'{b}'"),
        text.map(lambda b: "-- " + b + "\n"),
        text.filter(lambda b: not b.endswith("*")).map(lambda b: "/*" + b + "*/"),
    )
    out: list[str] = []
    values: list[str] = []
    keys: dict[str, str] = {}
    for kind in draw(st.lists(st.sampled_from(["placeholder", "plain", "opaque", "percent"]), max_size=12)):
        if kind == "placeholder":
            if style == "format":
                out.append("%s")
                values.append(f"'v{len(values)}'")
            else:
                key = draw(st.sampled_from(["a", "b", "c"]))
                keys[key] = f"'{key}-value'"
                out.append(f"%({key})s")
        elif kind == "plain":
            out.append(draw(st.sampled_from(PLAIN)))
        elif kind == "opaque":
            out.append(draw(opaque))
        else:
            out.append("%%")
        out.append(" ")
    return "".join(out), (tuple(values) if style == "format" else keys)


@_HYP
@given(pymysql_case())
def test_hypothesis_same_text_reaches_the_server_as_with_pymysql(case: tuple[str, Any]) -> None:
    # PyMySQL sends ``sql % escaped_args``; going through translate → (sqlglot) → to_paramstyle
    # and binding must send exactly the same text.
    sql, params = case
    t = translate(sql)
    assume(t.names)  # without placeholders PyMySQL formats only when params is not None
    direct = sql % params
    via_ddm = to_paramstyle(t.sql, "format") % tuple(t.bind(params))
    assert via_ddm == direct


@st.composite
def select_case(draw: st.DrawFn) -> tuple[str, int]:
    """A valid SELECT with placeholders, literals holding placeholder look-alikes and comments."""
    style = draw(st.sampled_from(["format", "pyformat", "qmark"]))
    ph = _placeholder(style)
    count = 0
    items: list[str] = []
    for kind in draw(st.lists(st.sampled_from(["ph", "str", "col", "mod", "expr", "in"]), min_size=1, max_size=8)):
        if kind == "ph":
            items.append(draw(ph))
            count += 1
        elif kind == "str":
            items.append(draw(_quoted("'")))
        elif kind == "col":
            items.append(draw(_quoted("`").filter(lambda s: len(s) > 2)))
        elif kind == "mod":
            items.append("user_id % 3" if style == "qmark" else "user_id %% 3")
        elif kind == "expr":
            items.append(f"({draw(ph)} + 1)")
            count += 1
        else:
            items.append(f"a IN ({draw(ph)}, {draw(ph)})")
            count += 2
        if draw(st.booleans()):
            items[-1] += " " + draw(_comment())
    where = draw(ph)
    return f"SELECT {', '.join(items)} FROM t_order WHERE user_id = {where}", count + 1


@_HYP
@given(select_case())
def test_hypothesis_parse_round_trip(case: tuple[str, int]) -> None:
    sql, count = case
    t = translate(sql)
    assert len(t.names) == count
    tree = sqlglot.parse_one(t.sql, read="mysql")
    assert len(list(tree.find_all(exp.Placeholder))) == count
    regenerated = tree.sql(dialect="mysql")
    assert len(translate(regenerated).names) == count
    assert len(translate(to_paramstyle(regenerated, "format")).names) == count


# -- speed (printed, not asserted) ------------------------------------------------------------------


def _best_ms(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def test_timing_10000_row_insert(capsys: pytest.CaptureFixture[str]) -> None:
    rows = 10_000
    sql = "INSERT INTO t_order (order_id, user_id, status) VALUES " + ",".join(["(%s,%s,%s)"] * rows)
    quoted = "INSERT INTO t_order (order_id, user_id, status) VALUES " + ",".join(["(%s,%s,'PAID')"] * rows)
    uncached = translate.__wrapped__
    t = uncached(sql)
    assert t.names == tuple(range(3 * rows)) and t.sql.count("?") == 3 * rows
    params = list(range(3 * rows))

    translate_ms = _best_ms(lambda: uncached(sql), 5)
    quoted_ms = _best_ms(lambda: uncached(quoted), 5)
    numbered_ms = _best_ms(t.numbered, 3)
    bind_ms = _best_ms(lambda: t.bind(params), 5)
    start = time.perf_counter()
    tree = sqlglot.parse_one(t.sql, read="mysql")
    parse_ms = (time.perf_counter() - start) * 1e3
    regenerated = tree.sql(dialect="mysql")
    back_ms = _best_ms(lambda: to_paramstyle.__wrapped__(regenerated, "format"), 3)
    assert len(list(tree.find_all(exp.Placeholder))) == 3 * rows

    with capsys.disabled():
        print(
            f"\n10 000-row INSERT (30 000 %s): translate {translate_ms:.2f} ms "
            f"(with a quoted literal per row: {quoted_ms:.2f} ms), numbered() {numbered_ms:.2f} ms, "
            f"to_paramstyle(format) {back_ms:.2f} ms, bind {bind_ms:.3f} ms; "
            f"sqlglot.parse_one {parse_ms:.0f} ms → translate is {parse_ms / translate_ms:.0f}× faster"
        )
