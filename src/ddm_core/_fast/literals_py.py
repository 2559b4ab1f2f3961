"""A statement's text split at its literals: the proxy's literal scan (proxy/literals.py) reads the parts.

Pure-Python twin of ``literals.pyx`` (same functions, same results; tests/test_literal_split.py compares
them on generated text). :func:`split` is ``[text, other, string, number, text, other, string, number, ...,
text]``, one of *other* (a comment, a `quoted identifier`, a "double-quoted" text), *string* (a ``'...'``
literal) and *number* set per match and the other two ``None``: ``re.split`` of :func:`pattern`. The compiled
twin scans the characters once, in C, where the regular expression tries its alternatives at every position
(docs/proxy.md#measured-costs). :func:`fill` is the text with the taken literals as ``%s`` and their values.
:class:`Parameterizer` is the proxy's literal scan with its memo: a statement's literals taken by the choice
remembered for its skeleton (everything but its literals' values, keyed by :meth:`Parameterizer.key_of`).
:func:`filled_text` is the way back: a unit's text with its integer values written in, as a driver sends it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import cache
from typing import Any, Callable

from ddm_core._text import BACKTICKED, BLOCK_COMMENT, DOUBLE_QUOTED, SINGLE_QUOTED

__all__ = ["split", "fill", "string_value", "Parameterizer", "filled_text", "STRING", "NUMBER", "NEGATIVE"]

#: How a taken literal is read: a string, a number, a number whose ``-`` ends the text before it.
STRING, NUMBER, NEGATIVE = 0, 1, 2
#: A literal's mark in a skeleton's key: no text between literals holds a NUL (a statement that does is not
#: remembered), so a key is one skeleton's
_STRING_MARK, _NUMBER_MARK = "\0'", "\0#"
_MISSING = object()
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "_": "\\_"}

#: The tokens that may hold a literal's characters without being one (comments, `identifiers`,
#: "double-quoted" text), then string and number literals: the token walk's patterns (proxy/literals.py), so
#: a split here cuts where the walk finds its string and number tokens (no other token can hold a match's
#: start: words, spaces and operators hold no quote, comment mark or number a lookbehind lets through).
#: The lookahead first: a position no alternative can start at (most of a statement's characters) fails
#: on one character test instead of trying each alternative.
_LITERALS = rf"""(?=[/\-\#`"'.\d])
      (?:({BLOCK_COMMENT}|--[ \t][^\n]*|--(?=\n|\Z)|\#[^\n]*|{BACKTICKED}|{DOUBLE_QUOTED})
      |({SINGLE_QUOTED})
      |((?<![\w.$])(?:\d+\.\d*|\.\d+|\d+)(?![\w.$])))"""


@cache
def pattern() -> re.Pattern[str]:
    """The split's regular expression, compiled on first use (not when ``ddm_core`` is imported)."""
    return re.compile(_LITERALS, re.S | re.X)


def split(sql: str) -> list[str | None]:
    """The parts described above."""
    return pattern().split(sql)


def fill(parts: list[str | None], choice: tuple[tuple[int, int], ...]) -> tuple[str, list[Any]]:
    """``(text with %s, params)``: the literals ``choice`` names (index into ``parts``, how it is read) taken
    out of ``parts`` (changed in place)."""
    params: list[Any] = []
    for index, read in choice:
        text = parts[index]
        assert text is not None  # the choice names a literal of this skeleton
        if read == STRING:
            params.append(string_value(text))
        else:
            value = Decimal(text) if "." in text else int(text)
            if read == NEGATIVE:  # its '-' ends the text before the match (index - 3: 4 parts a match)
                value = -value
                before = parts[index - 3]
                assert before is not None
                parts[index - 3] = before[:-1]
            params.append(value)
        parts[index] = "%s"
    return "".join(filter(None, parts)), params


#: What a ``%`` in a unit's text may start: a value's place, or a ``%`` written twice
_MARKS = re.compile(r"%(.?)", re.S)


def filled_text(sql: str, params: Any) -> bytes | None:
    """``(sql % tuple(map(str, params))).encode()``: the text PyMySQL sends for ``sql`` with ``params`` in it when
    every value is an ``int`` (its ``str()``, what PyMySQL's ``escape_int`` writes) — each ``%s`` a value, ``%%`` a
    ``%`` —, ``sql`` is ASCII and its values fit 64 bits; ``None``: anything else (other values, marks or counts),
    which the driver writes itself. The compiled twin writes the bytes straight from the text and the integers."""
    if not sql.isascii() or type(params) not in (tuple, list):
        return None
    if any(type(p) is not int or not -(2**63) <= p < 2**63 for p in params):
        return None
    marks = _MARKS.findall(sql)
    if any(mark not in ("s", "%") for mark in marks) or marks.count("s") != len(params):
        return None
    return (sql % tuple(map(str, params))).encode("ascii")


def string_value(token: str) -> str:
    """The value of a MySQL ``'...'`` literal (default sql_mode: backslash escapes on)."""
    body = token[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
        elif ch == "'" and body[i + 1 : i + 2] == "'":
            out.append("'")
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


#: ``first(sql, parts, key)``: the token walk's answer for a statement whose skeleton has no choice remembered
#: yet, which it remembers under ``key`` (:meth:`Parameterizer.remember`); ``parts`` and ``key`` ``None``: one
#: not to remember (too long, a NUL in it)
First = Callable[[str, "list[str | None] | None", "str | None"], "tuple[str, list[Any]] | None"]


class Parameterizer:
    """A statement's comparison literals as parameters (``(text with %s, params)``; ``None``: none to take) by the
    choice remembered for its skeleton, ``first`` asked for a skeleton not seen yet.

    The skeleton is keyed by one string: the text with each string literal marked ``\\0'`` and each number
    ``\\0#`` (:meth:`key_of`); a statement holding ``%`` or ``?`` has nothing taken, one longer than
    ``text_limit`` or holding a NUL is not remembered. At ``entries`` skeletons the memo starts over.
    The compiled twin makes the key and the text from one scan of the characters, with no parts list.
    """

    def __init__(self, text_limit: int, entries: int, first: First) -> None:
        self._choices: dict[str, tuple[tuple[int, int], ...] | None] = {}
        self._text_limit = text_limit
        self._entries = entries
        self._first = first

    def __call__(self, sql: str) -> tuple[str, list[Any]] | None:
        if "%" in sql or "?" in sql:
            return None
        if len(sql) > self._text_limit or "\0" in sql:
            return self._first(sql, None, None)
        parts = split(sql)
        key = self.key_of(parts)
        choice = self._choices.get(key, _MISSING)
        if choice is _MISSING:
            return self._first(sql, parts, key)
        if choice is None:
            return None
        return fill(parts, choice)  # type: ignore[arg-type]  # a remembered choice, not _MISSING

    @staticmethod
    def key_of(parts: list[str | None]) -> str:
        """The key of a split's skeleton."""
        pieces: list[str] = []
        for k in range(0, len(parts) - 1, 4):
            pieces.append(parts[k] or "")
            other = parts[k + 1]
            pieces.append(other if other is not None else _STRING_MARK if parts[k + 2] is not None else _NUMBER_MARK)
        pieces.append(parts[-1] or "")
        return "".join(pieces)

    def key(self, sql: str) -> str | None:
        """The key a call looks ``sql``'s skeleton up by (``None``: it looks up none)."""
        if "%" in sql or "?" in sql or len(sql) > self._text_limit or "\0" in sql:
            return None
        return self.key_of(split(sql))

    def remember(self, key: str, choice: tuple[tuple[int, int], ...] | None) -> None:
        if len(self._choices) >= self._entries:
            self._choices.clear()
        self._choices[key] = choice

    def __len__(self) -> int:
        return len(self._choices)
