"""The ``literals`` unit: a statement's text split at its literals, the compiled scan against the regular
expression that is its contract (``literals_py.pattern()``), on generated text full of what the scan must get
right: quotes doubled, escaped, unterminated; comments of each kind, closed or not; numbers touching words,
dots and dollars; Unicode digits and letters."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddm_core._fast import Implementation, load
from ddm_core._fast.testing import compiled_for_tests

PYTHON = load("python").literals
#: Both twins (the compiled one only where it was built; a run that requires it fails without it)
TWINS = [PYTHON] + ([] if (compiled := compiled_for_tests()) is None else [compiled.literals])

#: Characters that start, end or border a token, and some that are plain.
ALPHABET = "'\"`\\/*-#.$_ \t\n\r019aZé٣５x=(),;"
PIECES = ["''", '""', "``", "\\'", '\\"', "/*", "*/", "-- ", "--\n", "--", "#", "1.5", ".5", "5.", "1.2.3", "a1", "1a",
          "$1", "x.1", "'a''b'", "'it\\'s'", "`a``b`", '"q""r"', "SELECT * FROM t WHERE a = ", " AND b IN (1, 2) "]  # fmt: skip

texts = st.lists(st.one_of(st.text(alphabet=ALPHABET, max_size=6), st.sampled_from(PIECES)), max_size=14).map("".join)


@settings(max_examples=3000, deadline=None, derandomize=True)
@given(sql=texts)
def test_the_scan_splits_as_the_expression(sql: str) -> None:
    expected = PYTHON.pattern().split(sql)
    for twin in TWINS:
        assert twin.split(sql) == expected, sql


@pytest.mark.parametrize("sql", [
    "", "x", "'", "''", "'''", "'a''", "'a''b''c", "'a\\", "'a\\'", "'a''\\'", "`a", "`a``", "\"a\"\"", "/*", "/*/", "/**/",
    "--", "-- x", "--x", "--\n1", "#1\n2", "1", "1.", ".1", "1.e5", "1.2.3", "a1 1a 1", "$1 1$", "٣ = ٣.٥", "x = .5;",
    "SELECT id FROM t WHERE a = 'x' AND b = 10 AND c IN (1, 2.5) -- note 3\n/* 4 */ AND `d``5` = \"6\" # 7",
])  # fmt: skip
def test_edges(impl: Implementation, sql: str) -> None:
    assert impl.literals.split(sql) == PYTHON.pattern().split(sql)


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(sql=texts)
def test_skeleton_and_fill_agree(sql: str) -> None:
    """The skeleton's key of a split, and every literal of it taken (strings and numbers, a number's ``-`` when the
    text before it ends in one), read the same by both twins."""
    python = PYTHON
    parts = python.split(sql)
    for twin in TWINS:
        key_of = twin.Parameterizer(1 << 20, 1, lambda sql, parts, key: None).key_of
        assert key_of(list(parts)) == python.Parameterizer.key_of(list(parts))
    choice = []
    for i in range(2, len(parts), 4):
        if parts[i] is not None:
            choice.append((i, python.STRING))
        elif parts[i + 1] is not None:
            negative = (parts[i - 2] or "").endswith("-") and parts[i - 1] is None
            choice.append((i + 1, python.NEGATIVE if negative else python.NUMBER))
    for twin in TWINS:
        got = twin.fill(list(parts), tuple(choice))
        want = python.fill(list(parts), tuple(choice))
        assert got == want and [type(v) for v in got[1]] == [type(v) for v in want[1]], sql


@pytest.mark.parametrize(("token", "value"), [
    ("''", ""), ("'a'", "a"), ("'it''s'", "it's"), ("'a\\'b'", "a'b"), ("'\\n\\t\\0\\Z'", "\n\t\0\x1a"),
    ("'\\_'", "\\_"), ("'x\\\\'", "x\\"), ("'é٣'", "é٣"),
])  # fmt: skip
def test_string_value(impl: Implementation, token: str, value: str) -> None:
    """A ``'...'`` literal's value as MySQL reads it (backslash escapes on; ``\\_`` keeps its backslash)."""
    assert impl.literals.string_value(token) == value


@pytest.mark.parametrize("number", ["0", "007", "9" * 18, "9" * 19, "1" + "0" * 30, "٣", "1٣", "５"])
def test_a_numbers_value_is_the_same_however_long_or_in_whatever_digits(impl: Implementation, number: str) -> None:
    """A number taken is read as ``int`` reads it: 18 ASCII digits by the compiled scan's own reading, longer ones
    and other scripts' digits by ``int``; negated with its ``-``."""
    for read, sign in ((PYTHON.NUMBER, 1), (PYTHON.NEGATIVE, -1)):
        parts = impl.literals.split(f"SELECT 1 FROM t WHERE a = -{number}")
        index = next(i for i in range(3, len(parts), 4) if parts[i] == number)
        text, params = impl.literals.fill(parts, ((index, read),))
        assert params == [sign * int(number)] and type(params[0]) is int
        assert text == "SELECT 1 FROM t WHERE a = " + ("-%s" if sign > 0 else "%s")


@settings(max_examples=400, deadline=None, derandomize=True)
@given(sql=texts, values=st.lists(st.sampled_from(["7", "-3", "'a'", "'it''s'", "2.50", "'x\\'y'", "90071992547409931"]),
                                  min_size=1, max_size=3))
def test_the_memo_takes_what_the_walk_takes(sql: str, values: list[str]) -> None:
    """Each twin's ``Parameterizer`` keys a statement by its scan as by its split, and takes, from the choice
    remembered for the skeleton, what the token walk takes from every statement of that skeleton (values of the
    same kind put in another's place: its skeleton's first statement decided)."""
    from ddm_core.proxy.literals import parameterizer, walk

    shapes = [sql, f"SELECT a FROM t WHERE {sql} = {values[0]} AND b IN ({', '.join(values)})"]
    for twin in TWINS:
        memo = parameterizer(twin)
        for text in shapes:
            key = memo.key(text)
            if key is not None:
                assert key == memo.key_of(twin.split(text)) == PYTHON.Parameterizer.key_of(PYTHON.split(text)), text
            want = walk(text)
            for _ in range(2):  # walked and remembered, then taken by the remembered choice
                got = memo(text)
                assert got == want and (got is None or [type(v) for v in got[1]] == [type(v) for v in want[1]]), text


@pytest.mark.parametrize(("first", "second"), [
    ("SELECT a FROM t WHERE a = 1", "SELECT a FROM t WHERE a = 'x'"),  # a number and a string: two skeletons
    ("SELECT a FROM t WHERE a = 1 -- c", "SELECT a FROM t WHERE a = 1 /* c */"),
    ("SELECT a FROM t WHERE a = `1`", "SELECT a FROM t WHERE a = 1"),  # an identifier is no literal
    ("SELECT a FROM t WHERE a = 'é'", "SELECT a FROM t WHERE a = 'e'"),  # the same skeleton, two kinds of text
])  # fmt: skip
def test_a_skeletons_key_tells_what_its_literals_are(first: str, second: str) -> None:
    for twin in TWINS:
        memo = twin.Parameterizer(1000, 10, lambda sql, parts, key: None)
        same = first.replace("é", "e") == second
        assert (memo.key(first) == memo.key(second)) is same, (first, second)


def test_a_statement_with_a_nul_or_too_long_is_walked_and_not_remembered() -> None:
    """A NUL could stand where a literal's mark does, and a long statement's skeleton could be megabytes: both
    go to ``first`` without a key, and nothing is remembered."""
    for twin in TWINS:
        asked: list[tuple[str, object, object]] = []
        memo = twin.Parameterizer(40, 10, lambda sql, parts, key: asked.append((sql, parts, key)))
        nul = "SELECT a FROM t WHERE a = '\0' AND b = 1"
        long = "SELECT a FROM t WHERE a = 1 AND b = 2 AND c = 3"
        assert memo(nul) is None and memo(long) is None and memo("SELECT 1 % 2") is None
        assert asked == [(nul, None, None), (long, None, None)] and len(memo) == 0


def test_the_memo_starts_over_when_full() -> None:
    from ddm_core.proxy.literals import walk

    for twin in TWINS:
        memo = twin.Parameterizer(1000, 3, lambda sql, parts, key: memo.remember(key, None) or walk(sql))
        for column in "abcd":
            memo(f"SELECT x FROM t WHERE {column} = 1")
        assert len(memo) == 1


@settings(max_examples=600, deadline=None, derandomize=True)
@given(sql=st.lists(st.sampled_from(["%s", "%%", "%", "%d", "SELECT a FROM t WHERE b = ", " AND ", "é", "x"]),
                    max_size=8).map("".join),
       params=st.lists(st.one_of(st.integers(min_value=-(2**64), max_value=2**64), st.booleans(), st.just(1.0)),
                       max_size=4),
       kind=st.sampled_from([list, tuple]))  # fmt: skip
def test_filled_text_writes_what_the_format_writes(sql: str, params: list[Any], kind: type) -> None:
    """Both twins write ``(sql % tuple(map(str, params))).encode()`` for an ASCII text whose marks are ``%s`` and
    ``%%`` with a 64-bit ``int`` for each ``%s``, and decline anything else."""
    takes = (sql.isascii() and all(type(p) is int and -(2**63) <= p < 2**63 for p in params)
             and sql.replace("%%", "").replace("%s", "").count("%") == 0 and sql.replace("%%", "").count("%s") == len(params))  # fmt: skip
    want = (sql % tuple(map(str, params))).encode() if takes else None
    for twin in TWINS:
        assert twin.filled_text(sql, kind(params)) == want, (sql, params)
