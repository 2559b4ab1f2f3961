"""A statement's text split at its literals: the proxy's literal scan (proxy/literals.py) reads the parts.

Pure-Python twin of ``literals.pyx`` (same functions, same results; tests/test_literal_split.py compares
them on generated text). :func:`split` is ``[text, other, string, number, text, other, string, number, ...,
text]``, one of *other* (a comment, a `quoted identifier`, a "double-quoted" text), *string* (a ``'...'``
literal) and *number* set per match and the other two ``None``: ``re.split`` of :func:`pattern`. The compiled
twin scans the characters once, in C, where the regular expression tries its alternatives at every position
(docs/proxy.md#measured-costs). :func:`skeleton` is what the literals are taken by (everything but their
values), :func:`fill` the text with the taken ones as ``%s`` and their values.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import cache
from typing import Any

from ddm_core._text import BACKTICKED, BLOCK_COMMENT, DOUBLE_QUOTED, SINGLE_QUOTED

__all__ = ["split", "skeleton", "fill", "string_value", "STRING", "NUMBER", "NEGATIVE"]

#: How a taken literal is read: a string, a number, a number whose ``-`` ends the text before it.
STRING, NUMBER, NEGATIVE = 0, 1, 2
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


def skeleton(parts: list[str | None]) -> tuple[tuple[str | None, ...], tuple[str | None, ...], tuple[bool, ...]]:
    """What decides which of ``parts``' literals are taken: its text between them, its other tokens, and which of
    its literals are strings."""
    return tuple(parts[0::4]), tuple(parts[1::4]), tuple(map(bool, parts[2::4]))


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
