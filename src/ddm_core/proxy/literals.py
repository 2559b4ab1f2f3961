"""Comparison literals → parameters, so the router's plan cache serves text-protocol clients.

Clients of the text protocol (PyMySQL, the ``mysql`` command line, JDBC
without server-side prepares) put the values into the SQL text: every
``WHERE user_id = 10086`` is a new text, so the router's plan cache (keyed by
text) misses and sqlglot parses each statement — about 0.3 ms, most of a
point select through the proxy (docs/proxy.md#measured-costs). This module
turns the literals the router only *compares* back into parameters:

* a number or a plain ``'...'`` string right after ``=``, ``<>``, ``!=``,
  ``<``, ``<=``, ``>``, ``>=``, the items of an ``IN (...)`` list, and both
  bounds of ``BETWEEN ... AND ...`` (the second when the first was taken);
  a number there may have a ``-`` right before it (``id > -5``: the
  parameter is ``-5``; the router reads the written ``-5`` as that value too);
* nothing else: LIMIT counts, ``ORDER BY 1``, type arguments, INTERVALs,
  introducers (``_utf8mb4'x'``, ``N'x'``, ``X'0A'``, ``DATE '...'``), JSON
  paths (``->'$.a'``), hex and exponent numbers, a ``-`` apart from its number
  or after anything else (``a - 5``, ``- 5``), double-quoted text and
  everything in comments stay as written.

``WHERE user_id = 10086`` becomes ``WHERE user_id = %s`` with ``[10086]``:
one text for every key, parsed once. The values go to the data source
escaped by its driver, so the data source sees the same values. A statement
holding ``%`` or ``?`` anywhere (a LIKE pattern, a modulo, a placeholder) is
left alone, as is any statement other than SELECT / INSERT / REPLACE /
UPDATE / DELETE / WITH.

Which literals are taken depends only on the text around them (the
statement's *skeleton*: everything but the number and string literals), so
the token walk runs once per skeleton. Later statements of that skeleton are
split at their literals by one compiled pass (the ``literals`` unit, the same
token patterns) and the remembered choice applied — a point select costs a few
dozen interpreted instructions instead of a thousand (docs/proxy.md#measured-costs).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Callable

from ddm_core._fast import SELECTED
from ddm_core._text import BACKTICKED, BLOCK_COMMENT, DOUBLE_QUOTED, SINGLE_QUOTED
from ddm_core.route.router import CACHED_TEXT_LIMIT

__all__ = ["parameterize", "parameterizer", "walk"]

_TOKEN = re.compile(
    rf"""(?P<space>\s+)
      |(?P<comment>{BLOCK_COMMENT}|--[ \t][^\n]*|--(?=\n|\Z)|\#[^\n]*)
      |(?P<ident>{BACKTICKED})
      |(?P<string>{SINGLE_QUOTED})
      |(?P<dstring>{DOUBLE_QUOTED})
      |(?P<number>(?<![\w.$])(?:\d+\.\d*|\.\d+|\d+)(?![\w.$]))
      |(?P<op>->>|->|<=>|<<|>>|<=|>=|<>|!=|=|<|>)
      |(?P<word>[A-Za-z_$][\w$]*)
      |(?P<other>.)""",
    re.S | re.X,
)
#: ``[text, other, string, number, text, ...]``: the statement split at the tokens that may hold a literal's
#: characters without being one and at its string and number literals (the ``literals`` unit: compiled, one
#: pass over the characters; its pure twin is a regular expression of _TOKEN's patterns).
_literals = SELECTED.literals
_string_value = _literals.string_value
#: A number right after a ``-``: _TOKEN's number pattern where a walk is (no sign: the ``-`` was read apart).
_NUMBER = re.compile(r"(?:\d+\.\d*|\.\d+|\d+)(?![\w.$])")
#: How a taken literal is read: a string, a number, a number whose ``-`` ends the text before it.
_STRING, _NUMBER_LITERAL, _NEGATIVE = _literals.STRING, _literals.NUMBER, _literals.NEGATIVE
_CHOICES_LIMIT = 4096  # skeletons remembered
_COMPARISONS = frozenset({"=", "<>", "!=", "<", "<=", ">", ">="})
_STATEMENTS = frozenset({"SELECT", "INSERT", "REPLACE", "UPDATE", "DELETE", "WITH"})


def parameterizer(literals: Any = _literals) -> Any:
    """A ``parameterize`` with a memo of its own, of the ``literals`` unit given (a test pairs the twins): its
    choice of literals remembered per skeleton (up to ``_CHOICES_LIMIT``), the token walk run for a skeleton's
    first statement; a text longer than the router caches, whose skeleton could be megabytes, walked every time."""

    def first_of_skeleton(sql: str, parts: list[str | None] | None, key: str | None) -> tuple[str, list[Any]] | None:
        """The token walk (:func:`walk`), its choice remembered under ``key`` when the split agrees with it
        (``key`` ``None``: a statement not to remember)."""
        if parts is None or key is None:
            return walk(sql)
        taken: list[int] = []
        result = walk(sql, taken)
        literals_at = [i for i in range(2, len(parts), 4) if parts[i] is not None or parts[i + 1] is not None]
        if len(literals_at) == len(taken):  # always, by the patterns; a disagreement is simply not remembered
            choice = tuple((i, _STRING) if parts[i] is not None else (i + 1, _NEGATIVE if took < 0 else _NUMBER_LITERAL)
                           for i, took in zip(literals_at, taken) if took)  # fmt: skip
            memo.remember(key, choice if result is not None else None)
        return result

    memo = literals.Parameterizer(CACHED_TEXT_LIMIT, _CHOICES_LIMIT, first_of_skeleton)
    return memo


#: ``parameterize(sql)``: ``(text with %s, params)`` for ``sql``'s comparison literals; ``None`` when there are none
#: to take (:func:`parameterizer`).
parameterize: Callable[[str], tuple[str, list[Any]] | None] = parameterizer()


def walk(sql: str, taken: list[int] | None = None) -> tuple[str, list[Any]] | None:
    """:func:`parameterize` by the token walk, uncached (the reference); ``taken`` gets, per literal, whether it was
    taken (1), taken with the ``-`` before it (-1), or not (0)."""
    if "%" in sql or "?" in sql:
        return None
    parts: list[str] = []
    params: list[Any] = []
    previous = ""  # the last significant token, upper-cased for words
    first_word: str | None = None
    in_lists: list[bool] = []  # per open parenthesis: is it an IN (...) list?
    between = False  # the last literal taken was a BETWEEN's lower bound: the AND after it leads to the upper
    negative = False  # a '-' was read right before a number where a literal is taken: the two are one literal
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        text = m.group()
        if kind in ("space", "comment"):
            parts.append(text)
            continue
        if kind == "word" and first_word is None:
            first_word = text.upper()
            if first_word not in _STATEMENTS:
                return None
        if kind in ("number", "string") or text == "-":
            in_list = bool(in_lists) and in_lists[-1] and previous in ("(", ",")
            upper = previous == "AND" and between
            take = previous in _COMPARISONS or in_list or previous == "BETWEEN" or upper
            if kind == "other":  # a '-': a number's sign where it touches one that is taken here
                negative = take and _NUMBER.match(sql, m.end()) is not None
                if negative:
                    continue
            else:
                between = take and previous == "BETWEEN"
                if taken is not None:
                    taken.append(-1 if negative else int(take))
                if take:
                    parts.append("%s")
                    if kind == "string":
                        params.append(_string_value(text))
                    else:
                        value = Decimal(text) if "." in text else int(text)
                        params.append(-value if negative else value)
                    negative = False
                    previous = "?" if not between else "?BETWEEN"
                    continue
        if text == "(":
            in_lists.append(previous == "IN")
        elif text == ")" and in_lists:
            in_lists.pop()
        parts.append(text)
        between = between and previous == "?BETWEEN" and text.upper() == "AND"
        previous = text.upper() if kind == "word" else text
    if not params or first_word is None:
        return None
    return "".join(parts), params
