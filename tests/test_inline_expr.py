"""Inline expressions (ShardingSphere's Groovy notation), evaluated without eval()."""

from __future__ import annotations

import itertools
import math
import pickle
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddm_core.algorithms.inline_expr import MAX_EXPANSION, InlineExpression, compile_expression, expand
from ddm_core.errors import ConfigError, InlineExpressionError

# -- independent oracles for Java integer arithmetic ------------------------------------------


def java_div(a: int, b: int) -> int:
    """JLS 15.17.2: the quotient rounds toward zero (exact, via a rational)."""
    return math.trunc(Fraction(a, b))


def java_rem(a: int, b: int) -> int:
    """JLS 15.17.3: (a / b) * b + (a % b) == a."""
    return a - b * java_div(a, b)


def ev(text: str, **variables: Any) -> str:
    return compile_expression(text).evaluate(variables)


def assert_error(excinfo: pytest.ExceptionInfo[InlineExpressionError], text: str, position: int) -> None:
    err = excinfo.value
    assert isinstance(err, ConfigError) and isinstance(err, ValueError)
    assert err.expression == text
    assert err.position == position, str(err)
    message = str(err)
    assert repr(text) in message
    assert f"position {position}" in message


# -- the 2 × 16 order layout (tests/configs/ss_order_db_2x16.yaml) ------------------------------


@pytest.mark.parametrize(
    ("user_id", "ds", "table"),
    [
        (882341, "ds0", "t_order_5"),  # 882341 % 32 = 5, 5 / 16 = 0
        (21, "ds1", "t_order_5"),  # 21 % 32 = 21, 21 / 16 = 1
        (16, "ds1", "t_order_0"),
        (31, "ds1", "t_order_15"),
        (0, "ds0", "t_order_0"),
        (15, "ds0", "t_order_15"),
        (32, "ds0", "t_order_0"),
        (48, "ds1", "t_order_0"),
    ],
)
def test_order_db_rules(user_id: int, ds: str, table: str) -> None:
    assert ev("ds${user_id % 32 / 16}", user_id=user_id) == ds
    assert ev("t_order_${user_id % 16}", user_id=user_id) == table
    # the Groovy-correct spelling routes the same
    assert ev("ds${(user_id % 32).intdiv(16)}", user_id=user_id) == ds
    assert ev("ds${user_id % 32 >= 16 ? 1 : 0}", user_id=user_id) == ds


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_order_db_database_rule_is_the_ternary_it_means(user_id: int) -> None:
    assert ev("ds${user_id % 32 / 16}", user_id=user_id) == ev("ds${user_id % 32 >= 16 ? 1 : 0}", user_id=user_id)


def test_order_db_actual_data_nodes() -> None:
    names = expand("ds$->{0..1}.t_order_$->{0..15}")
    assert len(names) == 32
    assert names == [f"ds{d}.t_order_{t}" for d in range(2) for t in range(16)]
    assert names[:3] == ["ds0.t_order_0", "ds0.t_order_1", "ds0.t_order_2"]
    assert names[15:17] == ["ds0.t_order_15", "ds1.t_order_0"]
    # every routed name is one of the data nodes
    node_set = set(names)
    for user_id in (882341, 21, 16, 31, 10086, 7):
        ds = ev("ds${user_id % 32 / 16}", user_id=user_id)
        table = ev("t_order_${user_id % 16}", user_id=user_id)
        assert f"{ds}.{table}" in node_set


# -- ShardingSphere documentation examples ---------------------------------------------------------


def test_shardingsphere_documentation_examples() -> None:
    assert ev("t_order_${order_id % 2}", order_id=7) == "t_order_1"
    assert ev("ds_${user_id % 2}", user_id=10) == "ds_0"
    assert expand("${['online', 'offline']}_table${1..3}") == [
        "online_table1",
        "online_table2",
        "online_table3",
        "offline_table1",
        "offline_table2",
        "offline_table3",
    ]
    assert expand("db0.t_order_${0..1},db1.t_order_${2..3}") == [
        "db0.t_order_0",
        "db0.t_order_1",
        "db1.t_order_2",
        "db1.t_order_3",
    ]
    assert expand("ds_${0..1}.t_order_${0..1}") == [
        "ds_0.t_order_0",
        "ds_0.t_order_1",
        "ds_1.t_order_0",
        "ds_1.t_order_1",
    ]
    assert expand("db$->{0..1}.t_user") == ["db0.t_user", "db1.t_user"]


def test_literal_text_and_lists() -> None:
    assert expand("ds0.t_order") == ["ds0.t_order"]
    assert compile_expression("ds0.t_order").evaluate({}) == "ds0.t_order"
    assert expand("") == [""]
    assert expand("ds0.t_a, ds1.t_b ,\n ds2.t_c") == ["ds0.t_a", "ds1.t_b", "ds2.t_c"]  # items are trimmed
    assert expand("ds0.t_${0..1}, ds1.t_${2..3}") == ["ds0.t_0", "ds0.t_1", "ds1.t_2", "ds1.t_3"]
    assert expand("t_${[1, 2]}") == ["t_1", "t_2"]  # the comma inside ${} does not split
    assert expand("t_${[1, 2,]}") == ["t_1", "t_2"]  # Groovy allows a trailing comma
    assert expand("t_{x},${'a,b'}") == ["t_{x}", "a,b"]  # braces outside placeholders are text
    assert expand("t_${'}'}") == ["t_}"]  # '}' in a string literal does not close the placeholder
    assert expand("${'$'}x") == ["$x"]


def test_cartesian_product_order_left_most_slowest() -> None:
    assert expand("ds${0..1}.t_${0..1}") == ["ds0.t_0", "ds0.t_1", "ds1.t_0", "ds1.t_1"]
    assert expand("${['a','b']}${0..1}${['x','y']}") == [
        "".join(p) for p in itertools.product("ab", "01", "xy")
    ]


@given(
    st.lists(
        st.tuples(st.from_regex(r"[a-z_.]{0,3}", fullmatch=True), st.integers(-5, 20), st.integers(-5, 20)),
        min_size=1,
        max_size=3,
    )
)
def test_expansion_is_the_cartesian_product_of_groovy_ranges(spec: list[tuple[str, int, int]]) -> None:
    text = "".join(f"{prefix}${{{lo}..{hi}}}" for prefix, lo, hi in spec)
    groovy_range = [range(lo, hi + 1) if lo <= hi else range(lo, hi - 1, -1) for _, lo, hi in spec]
    expected = [
        "".join(f"{prefix}{value}" for (prefix, _, _), value in zip(spec, combo))
        for combo in itertools.product(*groovy_range)
    ]
    assert expand(text) == expected


def test_ranges() -> None:
    assert expand("t_${0..3}") == ["t_0", "t_1", "t_2", "t_3"]
    assert expand("t_${3..0}") == ["t_3", "t_2", "t_1", "t_0"]  # Groovy: a reverse range
    assert expand("t_${0..<3}") == ["t_0", "t_1", "t_2"]
    assert expand("t_${3..<0}") == ["t_3", "t_2", "t_1"]
    assert expand("t_${-1..1}") == ["t_-1", "t_0", "t_1"]
    assert expand("t_${0..2*2-1}") == ["t_0", "t_1", "t_2", "t_3"]  # '..' binds looser than arithmetic
    assert expand("t_${(0..1)}") == ["t_0", "t_1"]
    assert expand("t_${[1, 1, 2, 1]}") == ["t_1", "t_2"]  # one placeholder: duplicates once (ShardingSphere)
    assert expand("t_${[1, '1']}") == ["t_1"]
    assert expand("t_${1 > 0 ? 0..1 : [5]}") == ["t_0", "t_1"]
    assert ev("t_${[x]}", x=4) == "t_4"  # a one-value list is one value
    assert ev("t_${x..x}", x=4) == "t_4"


# -- arithmetic ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "quotient", "remainder"),
    [(7, 3, 2, 1), (-7, 3, -2, -1), (7, -3, -2, 1), (-7, -3, 2, -1), (-7, 2, -3, -1), (7, -2, -3, 1), (0, -5, 0, 0)],
)
def test_java_signs_with_negatives(a: int, b: int, quotient: int, remainder: int) -> None:
    assert java_div(a, b) == quotient and java_rem(a, b) == remainder  # the oracle itself
    for text in ("${a / b}", f"${{a / {b}}}", f"${{{a} / {b}}}", "${a.intdiv(b)}", f"${{a.intdiv({b})}}"):
        assert ev(text, a=a, b=b) == str(quotient), text
    for text in ("${a % b}", f"${{a % {b}}}", f"${{{a} % {b}}}"):
        assert ev(text, a=a, b=b) == str(remainder), text
    assert int(math.fmod(a, b)) == remainder


def test_division_differs_from_groovy_on_purpose() -> None:
    # Groovy: 5 / 16 == 0.3125 (BigDecimal); ddm-core divides integers (documented).
    assert ev("ds${5 / 16}") == "ds0"
    assert ev("ds${x / 16}", x=5) == "ds0"
    assert ev("${-7 / 2}") == "-3"


_ints = st.integers(min_value=-(2**70), max_value=2**70)
_nonzero = _ints.filter(lambda b: b != 0)


@given(_ints, _nonzero)
def test_division_and_remainder_follow_java(a: int, b: int) -> None:
    q, r = str(java_div(a, b)), str(java_rem(a, b))
    assert ev("${a / b}", a=a, b=b) == q  # both variables
    assert ev(f"${{a / {b}}}", a=a) == q  # constant divisor (the routing fast path)
    assert ev(f"${{({a}) / ({b})}}") == q  # folded at compile time
    assert ev("${a.intdiv(b)}", a=a, b=b) == q
    assert ev(f"${{a.intdiv({b})}}", a=a) == q
    assert ev("${a % b}", a=a, b=b) == r
    assert ev(f"${{a % {b}}}", a=a) == r
    assert ev(f"${{({a}) % ({b})}}") == r


@given(st.integers(-(2**52), 2**52), st.integers(-(2**52), 2**52).filter(lambda b: b != 0))
def test_remainder_matches_fmod(a: int, b: int) -> None:
    assert ev("${a % b}", a=a, b=b) == str(int(math.fmod(a, b)))
    # |a| < 2**53: the float quotient is off by less than 1/|b|, so int() truncates it exactly
    assert ev("${a / b}", a=a, b=b) == str(int(a / b))


@given(_ints, _ints)
def test_add_sub_mul_and_comparisons(a: int, b: int) -> None:
    assert ev("${a + b}|${a - b}|${a * b}|${-a}|${+a}", a=a, b=b) == f"{a + b}|{a - b}|{a * b}|{-a}|{a}"
    got = ev("${a < b}${a <= b}${a > b}${a >= b}${a == b}${a != b}", a=a, b=b)
    want = "".join("true" if c else "false" for c in (a < b, a <= b, a > b, a >= b, a == b, a != b))
    assert got == want


def test_precedence() -> None:
    assert ev("${1 + 2 * 3}") == "7"
    assert ev("${(1 + 2) * 3}") == "9"
    assert ev("${10 - 4 - 3}") == "3"
    assert ev("${100 / 10 / 5}") == "2"
    assert ev("${x % 32 / 16}", x=21) == "1"  # (x % 32) / 16
    assert ev("${-x % 3}", x=7) == "-1"
    assert ev("${1 < 2 == true}") == "true"  # relational binds tighter than equality
    assert ev("${1 > 2 || 2 > 1 && 3 > 4}") == "false"  # && binds tighter than ||
    assert ev("${x > 0 ? x > 5 ? 'big' : 'small' : 'neg'}", x=3) == "small"


@given(st.integers(-(2**40), 2**40), st.integers(-(2**40), 2**40).filter(lambda b: b != 0))
def test_math_functions(a: int, b: int) -> None:
    assert ev("${Math.abs(a)}|${a.abs()}", a=a) == f"{abs(a)}|{abs(a)}"
    assert ev("${Math.floorMod(a, b)}|${Math.floorDiv(a, b)}", a=a, b=b) == f"{a % b}|{a // b}"
    assert ev("${Math.max(a, b)}|${Math.min(a, b)}", a=a, b=b) == f"{max(a, b)}|{min(a, b)}"


def test_big_integers_do_not_overflow() -> None:
    assert ev("t_${id % 16}", id=2**64 + 5) == "t_5"
    assert ev("${x * x}", x=2**40) == str(2**80)
    assert ev("${9223372036854775807L + 1}") == "9223372036854775808"


def test_integral_variables_are_accepted() -> None:
    import numpy as np  # a dependency of ddm-core: never skipped
    assert ev("t_${user_id % 16}", user_id=np.int64(882341)) == "t_5"
    assert ev("t_${user_id % 16}", user_id=np.uint32(21)) == "t_5"


# -- strings, booleans, ternary, methods --------------------------------------------------------


def test_strings_and_concatenation() -> None:
    assert ev("${'a' + 1}") == "a1"
    assert ev('${1 + "a"}') == "1a"
    assert ev("${'a' + true}") == "atrue"
    assert ev("${region + '_' + (id % 4)}", region="cn", id=6) == "cn_2"
    assert ev("${region + '_' + id % 4}", region="cn", id=6) == "cn_2"  # % before +
    assert ev("${1 + 2 + 'a'}") == "3a"  # left to right, as in Groovy
    assert ev("${'a' + 1 + 2}") == "a12"
    assert ev(r"${'it\'s' + '\u0041\t'}") == "it's" + "A\t"
    assert ev('${"say \\"hi\\""}') == 'say "hi"'
    assert ev("${x.toString() + String.valueOf(y)}", x=12, y=True) == "12true"
    assert ev("t_${name}", name="abc") == "t_abc"


def test_pad_left_and_right_follow_groovy() -> None:
    # the zero-padded table names ShardingSphere users build with padLeft
    text = "t_order_${(order_id % 16).toString().padLeft(2, '0')}"
    assert [ev(text, order_id=k) for k in (5, 15, 16)] == ["t_order_05", "t_order_15", "t_order_00"]
    assert ev("${'ab'.padLeft(5)}|${'ab'.padRight(5, 'xy')}|${'abc'.padLeft(2, '0')}") == "   ab|abxyx|abc"
    assert ev("${x.padLeft(4, '0')}", x="7") == "0007"


def test_shardingsphere_type_prefixes() -> None:
    assert expand("<GROOVY>t_order_${1..3}") == ["t_order_1", "t_order_2", "t_order_3"]
    assert expand("<ESPRESSO>t_order_${1..2}") == ["t_order_1", "t_order_2"]
    assert expand("<GROOVY>${['online', 'offline']}_table${1..3}")[:2] == ["online_table1", "online_table2"]
    assert ev("<GROOVY>t_order_${order_id % 2}", order_id=3) == "t_order_1"
    # LITERAL: a plain list, nothing interpreted
    assert expand("<LITERAL>t_order_1, t_order_2, t_order_3") == ["t_order_1", "t_order_2", "t_order_3"]
    assert expand("<LITERAL>t_order_${1..3}") == ["t_order_${1..3}"]
    assert compile_expression("<LITERAL>t_order_${1..3}").columns == frozenset()


def test_booleans_print_like_groovy() -> None:
    assert ev("${true}|${false}|${1 == 1}|${!true}|${flag}", flag=False) == "true|false|true|false|false"


def test_equality_follows_groovy() -> None:
    assert ev("${1 == '1'}") == "false"
    assert ev("${true == 1}") == "false"
    assert ev("${'a' == 'a'}") == "true"
    assert ev("${[0, 1, 2] == (0..2)}") == "true"
    assert ev("${x != 'vip'}", x="vip") == "false"


def test_string_ordering_uses_utf16_code_units() -> None:
    # Java compares char (UTF-16) values: U+FF5E sorts after U+1F600's surrogates (0xD83D...).
    assert ev("${a < b}", a="\U0001f600", b="\uff5e") == "true"
    assert ev("${'abc' < 'abd'}") == "true"


def test_ternary_and_groovy_truth() -> None:
    assert ev("ds${user_id % 32 >= 16 ? 1 : 0}", user_id=17) == "ds1"
    assert ev("${x ? 'y' : 'n'}", x=0) == "n"  # Groovy truth: 0 is false
    assert ev("${x ? 'y' : 'n'}", x=-3) == "y"
    assert ev("${x ? 'y' : 'n'}", x="") == "n"
    assert ev("${[] ? 'y' : 'n'}") == "n"
    assert ev("${x == 0 ? 0 : 10 / x}", x=0) == "0"  # only the chosen branch runs
    assert ev("${x != 0 && 10 / x > 1}", x=0) == "false"  # short circuit
    assert ev("${x == 0 || 10 / x > 1}", x=0) == "true"


def test_columns_and_caching() -> None:
    e = compile_expression("ds${user_id % 32 / 16}_${Math.abs(region.intdiv(2))}")
    assert isinstance(e, InlineExpression)
    assert e.columns == frozenset({"user_id", "region"})
    assert e.text == "ds${user_id % 32 / 16}_${Math.abs(region.intdiv(2))}"
    assert compile_expression(e.text) is e
    assert compile_expression("ds${0..1}").columns == frozenset()
    assert pickle.loads(pickle.dumps(e)) is e
    names = compile_expression("ds${0..1}").expand()
    names.append("mutated")
    assert compile_expression("ds${0..1}").expand() == ["ds0", "ds1"]  # a fresh list each call


def test_dollar_arrow_and_dollar_brace_mix() -> None:
    assert expand("ds$->{0..1}_${['a']}") == ["ds0_a", "ds1_a"]
    assert ev("t_$->{x % 2}${x % 3}", x=5) == "t_12"
    assert ev("${ x  %\n 2 }", x=5) == "1"


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("t_${", 2),  # unterminated
        ("t_${x % 16", 2),
        ("t_$->{x", 2),
        ("t_${}", 2),  # empty placeholder
        ("t_${ {it -> it % 2} }", 5),  # closure
        ("t_${x -> 1}", 6),
        ("t_${x.hashCode() % 4}", 6),
        ("t_${x = 1}", 6),  # assignment
        ("t_${x += 1}", 7),
        ("t_${x++}", 5),
        ("t_${foo(1)}", 4),  # unknown function
        ("t_${Math.foo(1)}", 9),
        ("t_${Math.PI}", 9),  # property access
        ("t_${x.size}", 6),
        ("t_${x.size()}", 6),  # unknown method
        ("t_${x.intdiv()}", 6),  # arity
        ("t_${Math.abs(1, 2)}", 9),
        ("t_${x[0]}", 5),  # indexing
        ("t_${x @ 1}", 6),  # stray character
        ("t_${x ＋ 1}", 6),  # full-width plus
        ("t_${x # 1}", 6),
        ("t_${1 2}", 6),
        ("t_${x % 16)}", 10),
        ("t_${(x % 16}", 11),
        ("t_${x +}", 7),
        ("t_${[1, 2}", 9),
        ("t_${[a: 1]}", 6),  # map literal
        ("t_$x", 2),  # bare $
        ("t_${'$'}$", 8),
        ("t_${1.5}", 4),  # decimals
        ("t_${1e3}", 4),
        ("t_${0x10}", 4),
        ("t_${010}", 4),  # Groovy octal
        ("t_${1 / 0}", 6),  # constant division by zero: at compile time
        ("t_${x % 0}", 6),
        ("t_${x.intdiv(0)}", 6),
        ("t_${Math.floorMod(1, 0)}", 9),
        ("t_${'abc}", 4),  # unterminated string
        ("t_${'a\\qb'}", 6),  # unknown escape
        ('t_${"a${x}"}', 6),  # nested interpolation
        ("t_${'a''b'}", 7),
        ("t_${x ?: 1}", 6),  # elvis
        ("t_${x?.y()}", 5),
        ("t_${2 ** 3}", 6),
        ("t_${x << 2}", 6),
        ("t_${x & 15}", 6),
        ("t_${x; y}", 5),
        ("t_${x // note}", 6),
        ("t_${new Date()}", 4),
        ("t_${5.padLeft(3)}", 6),  # padLeft needs a string
        ("t_${'a'.padLeft(3, '')}", 8),
        ("t_${'a'.padLeft(100000)}", 8),
        ("t_${'a'.padLeft()}", 8),
        ("<INTERVAL>DL=2023-01-01", 1),  # unsupported expression type
        ("<GROOVY t_${0..1}", 0),
        ("<LITERAL>a,,b", 11),
        ("t_${null}", 4),
        ("t_${System.exit(0)}", 11),
        ("t_${__import__('os')}", 4),
        ("t_${''.__class__}", 7),
        ("t_${0..1..2}", 8),
        ("t_${[0..1]}", 6),  # a list in a list
        ("t_${1 - 'a'}", 6),  # constant type error
        ("t_${-'a'}", 4),
        ("t_${'a' < 1}", 8),
        ("t_${true + 1}", 9),
        ("t_\\x", 2),  # backslash in text
        ('t_"x"', 2),
        ("t_a\tb", 3),  # control character inside a name
        ("a,,b", 2),  # empty list item
        ("a,", 2),
        (",a", 0),
        ("t_${" + "(" * 40 + "1" + ")" * 40 + "}", 36),  # nesting limit
        ("t_${x" + " + x" * 70 + "}", 258),  # tree-depth limit
    ],
)
def test_unsupported_syntax_is_refused_with_position(text: str, position: int) -> None:
    with pytest.raises(InlineExpressionError) as excinfo:
        compile_expression(text)
    assert_error(excinfo, text, position)


@pytest.mark.parametrize(
    ("text", "variables", "position", "needle"),
    [
        ("t_${user_id % 16}", {}, 4, "'user_id'"),
        ("t_${a + b}", {"a": 1}, 8, "'b'"),
        ("t_${x % 16}", {"x": None}, 4, "None"),
        ("t_${x % 16}", {"x": 1.5}, 4, "float"),
        ("t_${x % 16}", {"x": "7"}, 6, "'%' needs two integers"),
        ("t_${x % 16}", {"x": True}, 6, "'%' needs two integers"),  # a boolean is not a number
        ("t_${x / 16}", {"x": "7"}, 6, "'/' needs two integers"),
        ("t_${x / y}", {"x": 1, "y": 0}, 6, "division by zero"),
        ("t_${x % y}", {"x": 1, "y": 0}, 6, "modulo by zero"),
        ("t_${x.intdiv(y)}", {"x": 1, "y": 0}, 6, "division by zero"),
        ("t_${x < 'a'}", {"x": 1}, 6, "compares"),
        ("t_${x..2}", {"x": 0}, 2, "3 values"),  # several values where one is needed
        ("ds${0..1}.t", {}, 2, "2 values"),
        ("a,b", {}, 1, "2 comma-separated"),
        ("t_${x ? [] : 1}", {"x": 1}, 2, "no value"),
        ("t_${x ? [0..1] : 1}", {"x": 1}, 10, "list inside a list"),
        ("t_${x ? [y, 2] : 1}", {"x": 1, "y": [1]}, 9, "list"),
        ("t_${[x..1]}", {"x": 0}, 2, "list"),
    ],
)
def test_evaluation_errors_name_the_problem(
    text: str, variables: dict[str, Any], position: int, needle: str
) -> None:
    with pytest.raises(InlineExpressionError) as excinfo:
        compile_expression(text).evaluate(variables)
    assert_error(excinfo, text, position)
    assert needle in str(excinfo.value)


def test_expand_refuses_variables_and_names_them() -> None:
    text = "ds${0..1}.t_order_${user_id % 16}"
    with pytest.raises(InlineExpressionError) as excinfo:
        expand(text)
    assert_error(excinfo, text, 20)
    assert "'user_id'" in str(excinfo.value)


def test_expand_errors() -> None:
    for text, position in [("t_${[]}", 2), ("t_${0..<0}", 2), ("t_${0..100000}", 2), ("a${0..999}${0..999}", 10)]:
        with pytest.raises(InlineExpressionError) as excinfo:
            expand(text)
        assert_error(excinfo, text, position)
    huge = "t_${0..99999999999999999999999999999}"  # beyond sys.maxsize: no OverflowError
    with pytest.raises(InlineExpressionError) as excinfo:
        expand(huge)
    assert_error(excinfo, huge, 2)
    assert ev("${(0..99999999999999999999999999999) ? 1 : 0}") == "1"
    assert len(expand("t_${0..<%d}" % MAX_EXPANSION)) == MAX_EXPANSION


def test_non_string_expression_is_refused() -> None:
    with pytest.raises(InlineExpressionError):
        compile_expression(5)  # type: ignore[arg-type]


def test_variables_must_be_a_mapping() -> None:
    with pytest.raises(InlineExpressionError):
        compile_expression("t_${x}").evaluate(None)  # type: ignore[arg-type]


# -- fuzz: only InlineExpressionError ever escapes ------------------------------------------------

_SYNTAX = list("${}->.0123456789+-*/%<>=!?:()[],'\" \t\nabxyz_MathStringvlOf&|^~;@#\\")
_WORDS = [
    "${",
    "$->{",
    "}",
    "..",
    "..<",
    "x",
    "y",
    "user_id",
    "Math.abs(",
    "Math.floorMod(",
    ".intdiv(",
    ".toString()",
    "String.valueOf(",
    "?",
    ":",
    "'s'",
    '"t"',
    "[",
    "]",
    ",",
    "(",
    ")",
    "0",
    "16",
    "-1",
    "99999999999999999999",
    " % ",
    " / ",
    " + ",
    " == ",
    " && ",
    "true",
    "ds",
    "t_",
    "<GROOVY>",
    "<LITERAL>",
    ".padLeft(",
    "'0'",
]
_atom = st.one_of(
    st.integers(-20, 20).map(str),
    st.sampled_from(["x", "y", "user_id", "s", "'a'", '"b"', "true", "false", "[1, x]", "(0..2)", "[]"]),
)
_expr = st.recursive(
    _atom,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "%", "<", ">=", "==", "!=", "&&", "||", ".."]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
        inner.map(lambda e: f"-{e}"),
        inner.map(lambda e: f"!{e}"),
        st.tuples(inner, st.sampled_from([".intdiv(3)", ".intdiv(0)", ".abs()", ".toString()", ".padLeft(3, '0')"])).map(
            "".join
        ),
        st.tuples(st.sampled_from(["Math.abs(", "String.valueOf(", "Math.floorMod(x, "]), inner).map(
            lambda t: f"{t[0]}{t[1]})"
        ),
    ),
    max_leaves=12,
)
_fuzz_text = st.one_of(
    st.tuples(st.sampled_from(["t_", "ds", ""]), _expr, st.sampled_from(["", "_${0..1}", ",x"])).map(
        lambda t: f"{t[0]}${{{t[1]}}}{t[2]}"
    ),
    st.text(alphabet=st.sampled_from(_SYNTAX), max_size=40),
    st.lists(st.sampled_from(_WORDS), max_size=16).map("".join),
    st.text(max_size=30),
)
_fuzz_value = st.one_of(
    st.integers(-(2**70), 2**70), st.text(max_size=5), st.booleans(), st.none(), st.floats(), st.just([1, 2])
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fuzz_text, st.dictionaries(st.sampled_from(["x", "y", "user_id", "s"]), _fuzz_value))
def test_fuzz_only_inline_expression_errors(text: str, variables: dict[str, Any]) -> None:
    try:
        compiled = compile_expression(text)
    except InlineExpressionError as err:
        assert err.expression == text and 0 <= err.position <= len(text)
        return
    for call in (lambda: compiled.expand(), lambda: compiled.evaluate(variables)):
        try:
            result = call()
        except InlineExpressionError as err:
            assert err.expression == text and 0 <= err.position <= len(text)
        else:
            assert isinstance(result, (str, list))


def test_module_never_evaluates_text_as_python() -> None:
    import ast
    import importlib
    import inspect
    import pkgutil

    import ddm_core.algorithms.inline_expr as package

    modules = [package] + [
        importlib.import_module(f"{package.__name__}.{info.name}") for info in pkgutil.iter_modules(package.__path__)
    ]
    assert {m.__name__.rsplit(".", 1)[-1] for m in modules} >= {"_lexer", "_parser", "_compiler", "_template"}
    forbidden = {"eval", "exec", "compile", "__import__", "literal_eval"}
    for module in modules:
        tree = ast.parse(inspect.getsource(module))
        for node in ast.walk(tree):
            where = f"{module.__name__} line {getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                assert name not in forbidden, f"{where}: {name}()"
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = {alias.name for alias in node.names} | {getattr(node, "module", None) or ""}
                assert not names & {"ast", "builtins"}, where


# -- one-value and positional evaluation, periods ------------------------------------------------

PERIODIC = [
    ("t_${x % 16}", 16),
    ("ds${x % 32 / 16}", 32),
    ("t_${(x % 32).intdiv(16)}", 32),
    ("t_${Math.floorMod(x, 12)}", 12),
    ("t_${(x % 4) * 10 + x % 6}", 12),
    ("t_${(x % 16).toString().padLeft(2, '0')}", 16),
    ("t_${x % 7 > 3 ? 'hi' : 'lo'}_${Math.floorMod(x, -3)}", 21),
    ("t_${x % (2 * 8)}", 16),
    ("t_${10 / (x % 4)}", 4),  # fails for some remainders: at the same values either way
    ("t_0", 1),
]
NOT_PERIODIC = ["t_${x}", "t_${x.abs() % 4}", "t_${(x + 1) % 4}", "t_${x / 16 % 2}", "t_${x % 4},u", "t_${x % y}"]


def outcome(fn: Any) -> Any:
    try:
        return fn()
    except InlineExpressionError as err:
        return ("error", err.position)


@pytest.mark.parametrize("text, period", PERIODIC)
def test_period_of_remainder_expressions(text: str, period: int) -> None:
    assert compile_expression(text).period == period


@pytest.mark.parametrize("text", NOT_PERIODIC)
def test_no_period_when_the_variable_is_used_otherwise(text: str) -> None:
    assert compile_expression(text).period is None


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(PERIODIC), st.one_of(st.integers(-(2**70), 2**70), st.integers(-100, 100)))
def test_a_period_means_each_remainder_names_the_same(case: tuple[str, int], x: int) -> None:
    text, period = case
    compiled = compile_expression(text)
    r = x % period if x >= 0 else -(-x % period)
    assert outcome(lambda: compiled.evaluate({"x": x})) == outcome(lambda: compiled.evaluate({"x": r}))


_any_value = st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=4), st.booleans(), st.none(), st.floats())


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([t for t, _ in PERIODIC] + NOT_PERIODIC[:4] + ["t_${x + 'a'}", "t_${x == 'a' || x == 3}"]),
       _any_value)
def test_bind_one_is_evaluate_without_the_mapping(text: str, value: Any) -> None:
    compiled = compile_expression(text)
    assert outcome(lambda: compiled.bind_one()(value)) == outcome(lambda: compiled.evaluate({"x": value}))


@settings(max_examples=300, deadline=None)
@given(_any_value, _any_value)
def test_bind_reads_values_by_position(x: Any, y: Any) -> None:
    compiled = compile_expression("t_${(x + y) % 4}_${y}")
    assert outcome(lambda: compiled.bind(["y", "x"])((y, x))) == outcome(lambda: compiled.evaluate({"x": x, "y": y}))
    missing = outcome(lambda: compiled.bind(["x"])((x,)))
    assert missing == outcome(lambda: compiled.evaluate({"x": x}))  # no value for y: the same error


def test_bind_one_refuses_two_variables() -> None:
    with pytest.raises(InlineExpressionError) as excinfo:
        compile_expression("t_${x % 2}${y % 2}").bind_one()
    assert excinfo.value.position == 12  # the second variable
