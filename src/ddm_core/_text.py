"""Statements shortened for error messages and one-line output."""

from __future__ import annotations

__all__ = ["SQL_SHOWN", "shorten_sql", "first_line"]

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
