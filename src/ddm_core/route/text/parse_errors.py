"""sqlglot's parse errors in words a SQL user reads: what is wrong and where, with a caret.

sqlglot describes problems with its own class and token names (``Required
keyword: 'expression' missing for <class 'sqlglot.expressions.core.Mul'>``,
``Expected table name but got <Token token_type: TokenType.SENTINEL, ...>``).
:func:`explain` turns them into the SQL they stand for (``incomplete '*'``,
``expected table name but got the end of the statement``) and finds the
offset of the token the parser stopped at; :func:`locate` writes that offset
as line, column and the statement's line with a caret under it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError, TokenError

from ddm_core._text import shorten_sql
from ddm_core.dialects import INPUT

__all__ = ["explain", "locate", "sql_word", "plain_words"]

# SQL for node classes that are not binary operators or functions (those are derived).
_WORDS = {
    "Paren": "( )", "Tuple": "( )", "Alias": "AS", "In": "IN", "Between": "BETWEEN", "Not": "NOT",
    "Neg": "-", "Select": "SELECT", "Union": "UNION", "Except": "EXCEPT", "Intersect": "INTERSECT",
    "Where": "WHERE", "Order": "ORDER BY", "Ordered": "ORDER BY", "Group": "GROUP BY", "Having": "HAVING",
    "Limit": "LIMIT", "Offset": "OFFSET", "Join": "JOIN", "From": "FROM", "Insert": "INSERT",
    "Update": "UPDATE", "Delete": "DELETE", "Values": "VALUES", "Subquery": "subquery", "Column": "column",
    "Table": "table", "Star": "*", "Literal": "literal", "Identifier": "name", "With": "WITH", "CTE": "WITH",
    "Set": "SET", "Window": "OVER", "Interval": "INTERVAL", "Bracket": "[ ]", "Any": "ANY", "All": "ALL",
    "Create": "CREATE", "Drop": "DROP", "Alter": "ALTER", "Show": "SHOW", "Lambda": "->",
    "Placeholder": "parameter", "Command": "statement", "Schema": "column list",
    "ColumnDef": "column definition", "ForeignKey": "FOREIGN KEY", "Distinct": "DISTINCT",
    "Anonymous": "function call", "DPipe": "||", "ILike": "ILIKE", "Dot": ".", "Is": "IS",
}
# Token types that stand for punctuation (``Expected TokenType.R_PAREN``).
_PUNCTUATION = {
    "L_PAREN": "(", "R_PAREN": ")", "L_BRACKET": "[", "R_BRACKET": "]", "L_BRACE": "{", "R_BRACE": "}",
    "COMMA": ",", "DOT": ".", "SEMICOLON": ";", "EQ": "=", "STAR": "*", "COLON": ":",
}

_CLASS = re.compile(r"<class '(?:\w+\.)*(\w+)[^']*'>")  # compiled sqlglot may add words after the name
_TOKEN = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+, col: \d+, start: \d+.*?>", re.S)
_TOKEN_TYPE = re.compile(r"\bTokenType\.(\w+)")
_REQUIRED = re.compile(r"Required keyword: '(\w+)' missing for (.+)")
_EXPECTING = re.compile(r"Expecting (\S+)\Z")
_MISSING = re.compile(r"Missing (.+?) from (\d+):(\d+)")
_NEAR = 40  # characters of the statement quoted after "near"
_WINDOW = 60  # characters of the statement's line shown on either side of the caret


@lru_cache(maxsize=256)
def sql_word(class_name: str) -> str:
    """The SQL a sqlglot node class stands for: ``Mul`` → ``*``, ``Count`` → ``COUNT``."""
    if class_name in _WORDS:
        return _WORDS[class_name]
    cls = getattr(exp, class_name, None)
    if not isinstance(cls, type) or not issubclass(cls, exp.Expression):
        return class_name
    if issubclass(cls, exp.Func):
        return cls.sql_names()[0]
    if issubclass(cls, exp.Binary):
        try:
            text = cls(this=exp.column("a"), expression=exp.column("b")).sql(INPUT)
        except SqlglotError:
            text = ""
        if text.startswith("a ") and text.endswith(" b") and len(text) > 4:
            return text[2:-2]
    return cls.key.upper()


def plain_words(description: str) -> str:
    """``description`` with sqlglot class and token names replaced by the SQL they stand for."""
    text = _TOKEN.sub(_token_words, description).replace("CTE", "WITH query")
    text = _CLASS.sub(lambda m: repr(sql_word(m.group(1))), text)
    return _TOKEN_TYPE.sub(lambda m: repr(_PUNCTUATION.get(m.group(1), m.group(1).lower().replace("_", " "))), text)


def _sentence_case(text: str) -> str:
    """``Expected table name`` → ``expected table name`` (it follows a colon); ``CTE`` stays."""
    return text[0].lower() + text[1:] if text[:2].istitle() and text[1:2].islower() else text


def _token_words(m: re.Match[str]) -> str:
    if m.group(1) == "SENTINEL":
        return "the end of the statement"
    return repr(m.group(2))


def explain(err: Exception, text: str) -> tuple[str, int | None]:
    """What is wrong, in SQL words, and the offset in ``text`` of the token the parser stopped at.

    Args:
        err: What ``sqlglot.parse(text, ..., error_message_context=len(text))``
            raised (a larger context than the text makes ``start_context`` the
            whole text before the token, so its length is the token's offset).
        text: The text that was parsed.

    Returns:
        ``(problem, offset)``; ``offset`` is ``None`` when the error carries no position.
    """
    if isinstance(err, ParseError) and err.errors:
        first = err.errors[0]
        description = str(first.get("description") or "syntax error")
        context = first.get("start_context")
        offset = len(context) if isinstance(context, str) else None
        required = _REQUIRED.match(description)
        expecting = _EXPECTING.match(description)
        if description.startswith("Invalid expression / Unexpected token"):
            problem = "syntax error"
        elif required:
            problem = f"incomplete {plain_words(required.group(2))}"
        elif expecting:
            problem = f"expected {expecting.group(1)!r}"
        else:
            problem = _sentence_case(plain_words(description))
        return problem, offset
    if isinstance(err, TokenError):
        cause = str(err.__cause__ or err.__context__ or "")  # the tokenizer's own reason
        missing = _MISSING.search(cause)
        if missing:  # the tokenizer names the absolute offset where the unclosed token starts
            return f"missing closing {missing.group(1)}", min(int(missing.group(3)), len(text))
        return "cannot read the statement text", _token_error_offset(err, len(text))
    return "cannot parse the statement", None


def _token_error_offset(err: TokenError, size: int) -> int | None:
    """Where the tokenizer stopped: it quotes ``sql[current - 50 : current + 50]``, clipped to the text."""
    if err.start is None or err.end is None:
        return None
    if err.start > 0:
        return min(err.start + 50, size)
    return max(0, err.end - 50) if err.end < size - 1 else None


def locate(sql: str, offset: int) -> str:
    """``near '...' at line L, column C`` and the statement's line with a caret under ``offset``."""
    offset = max(0, min(offset, len(sql)))
    line_start = sql.rfind("\n", 0, offset) + 1
    line_end = sql.find("\n", offset)
    if line_end < 0:
        line_end = len(sql)
    line_no = sql.count("\n", 0, offset) + 1
    column = offset - line_start + 1
    rest = shorten_sql(sql[offset : offset + 4 * _NEAR], _NEAR)
    near = f"near {rest!r}" if rest else "at the end of the statement"
    left = max(line_start, offset - _WINDOW)
    right = min(line_end, offset + _WINDOW)
    shown = sql[left:right].replace("\t", " ")
    prefix = "..." if left > line_start else ""
    suffix = "..." if right < line_end else ""
    caret = " " * (len(prefix) + offset - left) + "^"
    return f"{near} at line {line_no}, column {column}:\n    {prefix}{shown}{suffix}\n    {caret}"

