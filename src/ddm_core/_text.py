"""Statements as text: shortened for error messages, and the lexical forms that hide SQL.

The forms (strings, quoted identifiers, comments) are regular expression sources shared by every
scanner of statement text. They are written unrolled — ``'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'`` —
never as a repetition of alternatives (``'(?:[^'\\]|\\.|'')*'``): Python's ``re`` keeps
backtracking state for each repetition of a group, so the second form costs about a hundred bytes
per character of a literal, and one 8 MB string literal took gigabytes (docs/proxy.md#limits-and-timeouts).
A run of plain characters (``[^'\\]*``) keeps none.
"""

from __future__ import annotations

__all__ = [
    "SQL_SHOWN", "shorten_sql", "first_line", "SINGLE_QUOTED", "DOUBLE_QUOTED", "BACKTICKED", "BLOCK_COMMENT",
]  # fmt: skip

#: ``'...'``: backslash escapes and doubled quotes inside.
SINGLE_QUOTED = r"'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'"
#: ``"..."``: as ``'...'``.
DOUBLE_QUOTED = r'"[^"\\]*(?:(?:\\.|"")[^"\\]*)*"'
#: `` `name` ``: doubled backticks inside.
BACKTICKED = r"`[^`]*(?:``[^`]*)*`"
#: ``/* ... */`` (compile with ``re.S``).
BLOCK_COMMENT = r"/\*.*?\*/"

#: Characters of a statement an error message quotes: enough to recognise it,
#: short enough that a 10 000-row INSERT does not flood a log line.
SQL_SHOWN = 200


def shorten_sql(sql: str, limit: int = SQL_SHOWN) -> str:
    """``sql`` on one line, at most ``limit`` characters.

    Every run of whitespace (line breaks, indentation) becomes one space; a
    statement still longer than ``limit`` is cut and ends with ``...``, the
    dots counted in the limit.

    Args:
        sql: The statement as written.
        limit: The longest result (at least 4).

    Returns:
        The statement, flattened and cut.
    """
    flat = " ".join(sql.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (sqlglot's run on with context), or its class name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
