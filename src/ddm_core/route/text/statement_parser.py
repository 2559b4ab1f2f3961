"""sqlglot's parse of the input dialect, without rebuilding the dialect, tokenizer and parser per call.

``sqlglot.parse(text, read="mysql")`` looks the dialect up by name, builds a
new tokenizer (its keyword tables included) and a new parser every time:
about a fifth of parsing a short statement, which is most of first-sight
routing. One tokenizer and one parser per thread (neither is safe to share
between threads) give the same trees and the same errors.
"""

from __future__ import annotations

import threading

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.parser import Parser
from sqlglot.tokens import Tokenizer

from ddm_core.dialects import INPUT

__all__ = ["parse_statements"]

_DIALECT = Dialect.get_or_raise(INPUT)
#: Statements up to this long may keep their tokens referenced by the thread's tools until the next parse.
_KEEP = 4096


class _Tools(threading.local):
    """This thread's tokenizer and parser (built on first use in the thread)."""

    def __init__(self) -> None:
        self.tokenizer: Tokenizer = _DIALECT.tokenizer_class(dialect=_DIALECT)
        self.parser: Parser = _DIALECT.parser()


_TOOLS = _Tools()


def parse_statements(text: str) -> list[exp.Expr | None]:
    """``sqlglot.parse(text, read=INPUT, error_message_context=len(text) + 1)``, with reused tools.

    The error context longer than the text makes sqlglot report a failing
    token's offset exactly (see :mod:`ddm_core.route.text.parse_errors`).

    Raises:
        sqlglot.errors.ParseError, sqlglot.errors.TokenError: as ``sqlglot.parse`` does.
    """
    tools = _TOOLS
    parser = tools.parser
    parser.error_message_context = len(text) + 1
    try:
        return list(parser.parse(tools.tokenizer.tokenize(text), text))
    finally:
        if len(text) > _KEEP:  # a 10 000-row INSERT's tokens would stay alive until the thread's next parse
            parser.reset()
            tools.tokenizer.tokenize("")
