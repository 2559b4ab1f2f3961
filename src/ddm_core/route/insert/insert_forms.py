"""The text of INSERT forms the router rewrites: ``INSERT ... SET`` and the values of one row.

``INSERT INTO t SET a = 1, b = ?`` (and ``REPLACE ... SET``) is MySQL's
one-row form of ``INSERT INTO t (a, b) VALUES (1, ?)``. sqlglot reads both
into the same tree, but the router cuts units out of the statement's own text,
so the SET form is rewritten to the column-list form first — which every
backend runs, SQLite included. Values are cut out of the text as written, so
expressions, quoting and placeholders stay byte for byte.
"""

from __future__ import annotations

import re

from sqlglot import exp

from ddm_core._text import BACKTICKED, BLOCK_COMMENT, DOUBLE_QUOTED, SINGLE_QUOTED
from ddm_core.dialects import INPUT
from ddm_core.errors import UnsupportedSQLError
from ddm_core.route.text.edits import span

__all__ = ["set_form_text", "value_spans", "column_list"]

# Skipped (strings, quoted names, comments), or what splits a list: parentheses, commas,
# an assignment's "=" (not part of <=, >=, !=, :=, <=>) and the start of ON DUPLICATE KEY UPDATE.
_TOKENS = re.compile(
    rf"{SINGLE_QUOTED}|{DOUBLE_QUOTED}|{BACKTICKED}"
    rf"|(?P<comment>{BLOCK_COMMENT}|--(?=[\s\x00-\x1f]|\Z)[^\n]*|#[^\n]*)"
    r"|(?P<open>\()|(?P<close>\))|(?P<comma>,)|(?P<eq>(?<![<>!:=])=(?!>))|(?P<on>\bON\s+DUPLICATE\b)",
    re.I | re.S,
)
_SET_HEAD = re.compile(r"(?:\s|/\*.*?\*/)*SET\b", re.I | re.S)
_TRAILING = " \t\r\n\f\v;"


def column_list(names: list[str]) -> str:
    """``(a, `order`, b)``: column names as MySQL reads them (quoted only where needed)."""
    return "(" + ", ".join(exp.to_identifier(n).sql(dialect=INPUT) for n in names) + ")"


def set_form_text(tree: exp.Insert, text: str) -> str | None:
    """``text`` of an ``INSERT ... SET`` rewritten to ``INSERT ... (cols) VALUES (...)``, else ``None``.

    Raises:
        UnsupportedSQLError: the SET list cannot be split into its assignments.
    """
    schema = tree.this
    if not isinstance(schema, exp.Schema) or not isinstance(schema.this, exp.Table) or not schema.expressions:
        return None
    table_end = span(schema.this.this)[1]
    head = _SET_HEAD.match(text, table_end)
    if head is None:
        return None
    assignments: list[tuple[int, int, int]] = []  # (start, end of "=", end)
    depth, start, eq, stop = 0, head.end(), -1, -1
    comments: dict[int, int] = {}  # end → start of each comment, to drop trailing ones
    for m in _TOKENS.finditer(text, head.end()):
        if m.group("comment"):
            comments[m.end()] = m.start()
        elif m.group("open"):
            depth += 1
        elif m.group("close"):
            depth -= 1
        elif depth == 0 and m.group("eq") and eq < 0:
            eq = m.end()
        elif depth == 0 and m.group("comma"):
            assignments.append((start, eq, m.start()))
            start, eq = m.end(), -1
        elif depth == 0 and m.group("on"):
            stop = m.start()
            break
    if stop < 0:  # the list runs to the end: without the statement's trailing ';' and comments
        stop = len(text.rstrip(_TRAILING))
        while stop in comments:
            stop = len(text[: comments[stop]].rstrip(_TRAILING))
    assignments.append((start, eq, stop))
    names = schema.expressions
    if len(assignments) != len(names) or any(e < 0 for _, e, _ in assignments):
        table = schema.this.name
        raise UnsupportedSQLError(
            f"cannot read the SET list of the INSERT into {table!r} as 'column = value' pairs", table=table
        )
    values = ", ".join(text[e:end].strip() for _, e, end in assignments)
    columns = column_list([n.name for n in names])
    rest = text[stop:]  # ON DUPLICATE KEY UPDATE ..., a trailing ';' or comment: kept as written
    gap = " " if rest[:1].isalpha() else ""
    return f"{text[:table_end]} {columns} VALUES ({values}){gap}{rest}"


def value_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Spans of the top-level values of one row ``text[start:end]`` (``(a, f(b, c), 'x')``), stripped."""
    spans: list[tuple[int, int]] = []
    depth = 0
    at = start + 1
    for m in _TOKENS.finditer(text, start, end):
        if m.group("open"):
            depth += 1
        elif m.group("close"):
            depth -= 1
            if depth == 0:
                spans.append((at, m.start()))
        elif depth == 1 and m.group("comma"):
            spans.append((at, m.start()))
            at = m.end()
    out = []
    for s, e in spans:
        piece = text[s:e]
        lead = len(piece) - len(piece.lstrip())
        out.append((s + lead, s + len(piece.rstrip())))
    return out
