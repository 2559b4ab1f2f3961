"""Tokens of the code inside a ``${...}`` placeholder.

The lexer reads from a position of the whole expression text (so every token
and every error carries its position in what the user wrote) and stops at
nothing: the parser asks for one token at a time and decides where a
placeholder ends. Refused Groovy syntax (closures, assignment, bitwise
operators, comments, keywords, octal literals...) is refused here, with a
message saying what it is.
"""

from __future__ import annotations

from typing import Any

from ddm_core.algorithms.inline_expr._errors import error
from ddm_core.errors import InlineExpressionError

__all__ = ["Token", "Lexer", "BINARY_OPERATORS"]

SPACE = " \t\r\n\f"
_DIGITS = "0123456789"
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "$": "$", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_KEYWORDS = frozenset(
    "abstract as assert boolean break byte case catch char class const continue def default do double else "
    "enum extends final finally float for goto if implements import in instanceof int interface long native "
    "new null package private protected public return short static strictfp super switch synchronized this "
    "throw throws trait transient try var void volatile while yield".split()
)
#: The binary operators the parser knows (their precedence lives there).
BINARY_OPERATORS = ("||", "&&", "==", "!=", "<", "<=", ">", ">=", "..", "..<", "+", "-", "*", "/", "%")
# Refused with a specific message (anything else unknown gets a generic one).
_REFUSED_OPS = {
    "=": "assignment is not supported",
    "{": "closures and blocks are not supported",
    ";": "statements are not supported",
    "->": "closures are not supported",
    "?.": "safe navigation '?.' is not supported",
    "?:": "the elvis operator '?:' is not supported",
    "**": "the power operator '**' is not supported",
    "++": "'++' is not supported",
    "--": "'--' is not supported",
    "<<": "shift operators are not supported",
    ">>": "shift operators are not supported",
    "<=>": "the '<=>' operator is not supported",
    "=~": "regular expressions are not supported",
    "&": "bitwise operators are not supported",
    "|": "bitwise operators are not supported",
    "^": "bitwise operators are not supported",
    "~": "bitwise operators are not supported",
    ".&": "method pointers are not supported",
    ".@": "field access is not supported",
    "//": "comments are not supported",
    "/*": "comments are not supported",
}
# Longest first, so that "..<" wins over ".." and "<=" over "<".
_OPERATORS = sorted(
    [*BINARY_OPERATORS, "!", "(", ")", "[", "]", ",", ".", "?", ":", "}", *_REFUSED_OPS], key=len, reverse=True
)
_KIND_NAMES = {"INT": "number", "STR": "string", "BOOL": "boolean", "NAME": "name"}


class Token:
    """One token: ``kind`` is ``INT``, ``STR``, ``BOOL``, ``NAME``, ``EOF`` or the operator itself."""

    __slots__ = ("kind", "value", "start", "end")

    def __init__(self, kind: str, value: Any, start: int, end: int) -> None:
        self.kind = kind
        self.value = value
        self.start = start
        self.end = end

    def describe(self) -> str:
        """How an error message names this token."""
        if self.kind == "EOF":
            return "end of text"
        if self.kind in _KIND_NAMES:
            return _KIND_NAMES[self.kind]
        return f"{self.kind!r}"


class Lexer:
    """A token stream over ``text`` from a position, with one token of lookahead."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self._peeked: Token | None = None

    def error(self, msg: str, pos: int) -> InlineExpressionError:
        return error(self.text, msg, pos)

    def seek(self, pos: int) -> None:
        """Continue reading at ``pos`` (forgets the lookahead)."""
        self.i = pos
        self._peeked = None

    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._lex()
        return self._peeked

    def next(self) -> Token:
        tok = self.peek()
        self._peeked = None
        return tok

    def _lex(self) -> Token:
        text = self.text
        n = len(text)
        i = self.i
        while i < n and text[i] in SPACE:
            i += 1
        if i >= n:
            self.i = n
            return Token("EOF", None, n, n)
        ch = text[i]
        if ch in _DIGITS:
            return self._number(i)
        if ch == "_" or ch.isalpha():
            return self._word(i)
        if ch == "'" or ch == '"':
            return self._string(i)
        for op in _OPERATORS:
            if text.startswith(op, i):
                if op in _REFUSED_OPS:
                    raise self.error(_REFUSED_OPS[op], i)
                self.i = i + len(op)
                return Token(op, None, i, self.i)
        if ch == "$":
            raise self.error("'$' inside a placeholder (nested placeholders are not supported)", i)
        raise self.error(f"unexpected character {ch!r}", i)

    def _number(self, start: int) -> Token:
        text = self.text
        n = len(text)
        i = start
        while i < n and text[i] in _DIGITS:
            i += 1
        digits = text[start:i]
        if i < n and text[i] in "lL":
            i += 1
        if i + 1 < n and text[i] == "." and text[i + 1] in _DIGITS:
            raise self.error("decimal numbers are not supported", start)
        if i < n and (text[i] == "_" or text[i].isalnum()):
            raise self.error("malformed number (only decimal integers are supported)", start)
        if len(digits) > 1 and digits[0] == "0":
            raise self.error("an integer with a leading zero is octal in Groovy; write it without the zero", start)
        try:
            value = int(digits)
        except ValueError:  # more digits than sys.get_int_max_str_digits()
            raise self.error("integer literal too long", start) from None
        self.i = i
        return Token("INT", value, start, i)

    def _word(self, start: int) -> Token:
        text = self.text
        n = len(text)
        i = start + 1
        while i < n and (text[i] == "_" or text[i].isalnum()):
            i += 1
        word = text[start:i]
        self.i = i
        if word in ("true", "false"):
            return Token("BOOL", word == "true", start, i)
        if word in _KEYWORDS:
            raise self.error(f"the Groovy keyword {word!r} is not supported", start)
        return Token("NAME", word, start, i)

    def _string(self, start: int) -> Token:
        text = self.text
        n = len(text)
        quote = text[start]
        out: list[str] = []
        i = start + 1
        while True:
            if i >= n or text[i] in "\r\n":
                raise self.error("unterminated string literal", start)
            ch = text[i]
            if ch == quote:
                break
            if ch == "\\":
                esc = text[i + 1] if i + 1 < n else ""
                if esc == "u":
                    hexdigits = text[i + 2 : i + 6]
                    if len(hexdigits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in hexdigits):
                        raise self.error("malformed \\u escape", i)
                    out.append(chr(int(hexdigits, 16)))
                    i += 6
                    continue
                if esc not in _ESCAPES:
                    raise self.error("unsupported escape sequence in a string literal", i)
                out.append(_ESCAPES[esc])
                i += 2
                continue
            if ch == "$" and quote == '"':
                raise self.error("interpolation inside a string literal is not supported (use '+')", i)
            out.append(ch)
            i += 1
        self.i = i + 1
        return Token("STR", "".join(out), start, self.i)
