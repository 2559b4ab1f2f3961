"""Expression text → :class:`~ddm_core.algorithms.inline_expr._ast.Template` (syntax only).

Two levels: the template (literal text, ``${...}`` / ``$->{...}``
placeholders, top-level commas, the ``<GROOVY>`` / ``<LITERAL>`` type prefix)
is scanned here character by character; the code inside a placeholder is read
from :class:`~ddm_core.algorithms.inline_expr._lexer.Lexer` tokens by
precedence climbing. Nothing is computed: unknown functions and wrong
argument counts are syntax, division by zero of constants is the compiler's.
Recursion is bounded: brackets, calls, unary operators and ternaries nest at
most :data:`MAX_NESTING` deep, and the tree is at most :data:`MAX_DEPTH`
operations deep.
"""

from __future__ import annotations

from typing import NoReturn

from ddm_core.algorithms.inline_expr._ast import (
    Binary,
    Call,
    Const,
    Expr,
    ListOf,
    Part,
    Placeholder,
    Template,
    Ternary,
    Unary,
    Var,
)
from ddm_core.algorithms.inline_expr._errors import error
from ddm_core.algorithms.inline_expr._lexer import Lexer, Token
from ddm_core.algorithms.inline_expr._ops import METHODS, STATIC, UNARY
from ddm_core.errors import InlineExpressionError

__all__ = ["parse", "MAX_NESTING", "MAX_DEPTH"]

MAX_NESTING = 32  # parentheses / brackets / unary operators / ternaries inside each other
MAX_DEPTH = 64  # depth of the expression tree (bounds recursion when compiling)

_JAVA_WS = "".join(map(chr, range(33)))  # what String.trim() removes
_STATIC_RECEIVERS = ("Math", "String")
# Groovy's precedence, loosest first.
_PRECEDENCE = {
    "||": 1,
    "&&": 2,
    "==": 3,
    "!=": 3,
    "<": 4,
    "<=": 4,
    ">": 4,
    ">=": 4,
    "..": 5,
    "..<": 5,
    "+": 6,
    "-": 6,
    "*": 7,
    "/": 7,
    "%": 7,
}
_RANGE_PREC = 5


class _Static:
    """The receiver ``Math`` / ``String`` of a static call (only valid before ``.name(``)."""

    __slots__ = ("name", "pos")

    def __init__(self, name: str, pos: int) -> None:
        self.name = name
        self.pos = pos


def parse(text: str) -> Template:
    """The syntax tree of a whole inline expression.

    Raises:
        InlineExpressionError: Malformed or unsupported syntax, at its position.
    """
    return _Parser(text).parse()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = Lexer(text)
        self.columns: dict[str, int] = {}  # name -> first position
        self.nesting = 0
        self.open_pos = 0  # position of the '$' of the placeholder being parsed

    def error(self, msg: str, pos: int) -> InlineExpressionError:
        return error(self.text, msg, pos)

    def parse(self) -> Template:
        kind, start = self.parse_type()
        if kind == "LITERAL":
            items, commas = self.parse_literal_list(start)
        else:
            items, commas = self.parse_template(start)
        return Template(tuple(items), tuple(commas), dict(self.columns))

    # -- template level ---------------------------------------------------------------

    def parse_type(self) -> tuple[str, int]:
        """ShardingSphere 5.4+ prefixes: ``<GROOVY>`` (the default), ``<LITERAL>``, ..."""
        text = self.text
        if not text.startswith("<"):
            return "GROOVY", 0
        end = text.find(">")
        if end < 0:
            raise self.error("expression type prefix '<...' is not closed with '>'", 0)
        kind = text[1:end].strip().upper()
        if kind == "ESPRESSO":  # the same Groovy syntax, run by another engine
            kind = "GROOVY"
        if kind not in ("GROOVY", "LITERAL"):
            raise self.error(f"expression type {text[1:end]!r} is not supported (GROOVY and LITERAL are)", 1)
        return kind, end + 1

    def parse_literal_list(self, start: int) -> tuple[list[tuple[Part, ...]], list[int]]:
        """``<LITERAL>a, b``: comma-separated names, nothing interpreted."""
        text = self.text
        items: list[tuple[Part, ...]] = []
        commas: list[int] = []
        begin = start
        for i in range(start, len(text) + 1):
            if i == len(text) or text[i] == ",":
                items.append(self.finish_item([(begin, i)] if begin < i else []))
                if i < len(text):
                    commas.append(i)
                begin = i + 1
        self.check_items(items, commas)
        return items, commas

    def check_items(self, items: list[tuple[Part, ...]], commas: list[int]) -> None:
        if len(items) > 1:
            for k, item in enumerate(items):
                if not item:
                    where = commas[k] if k < len(commas) else len(self.text)
                    raise self.error("empty item in a comma-separated list", where)

    def parse_template(self, start: int = 0) -> tuple[list[tuple[Part, ...]], list[int]]:
        """Split into comma-separated items of literal text and placeholders."""
        text = self.text
        n = len(text)
        items: list[tuple[Part, ...]] = []
        commas: list[int] = []
        parts: list[tuple[int, int] | Placeholder] = []  # literal spans and placeholders
        i = lit = start
        while i < n:
            ch = text[i]
            if ch == "$":
                if text.startswith("${", i):
                    body = i + 2
                elif text.startswith("$->{", i):
                    body = i + 4
                else:
                    raise self.error("a bare '$' is Groovy interpolation; write ${...} (or ${'$'} for a dollar)", i)
                if lit < i:
                    parts.append((lit, i))
                node, end = self.parse_placeholder(i, body)
                parts.append(Placeholder(node, i))
                i = end
                lit = i
                continue
            if ch == ",":
                if lit < i:
                    parts.append((lit, i))
                items.append(self.finish_item(parts))
                commas.append(i)
                parts = []
                lit = i = i + 1
                continue
            if ch == "\\" or ch == '"':
                raise self.error(f"{ch!r} outside a placeholder is not supported (Groovy reads it as syntax)", i)
            i += 1
        if lit < n:
            parts.append((lit, n))
        items.append(self.finish_item(parts))
        self.check_items(items, commas)
        return items, commas

    def finish_item(self, parts: list[tuple[int, int] | Placeholder]) -> tuple[Part, ...]:
        text = self.text
        # String.trim() at both ends of the item (only literal text can be trimmed).
        if parts and isinstance(parts[0], tuple):
            a, b = parts[0]
            a += len(text[a:b]) - len(text[a:b].lstrip(_JAVA_WS))
            parts[0] = (a, b)
        if parts and isinstance(parts[-1], tuple):
            a, b = parts[-1]
            b -= len(text[a:b]) - len(text[a:b].rstrip(_JAVA_WS))
            parts[-1] = (a, b)
        out: list[Part] = []
        for p in parts:
            if isinstance(p, Placeholder):
                out.append(p)
                continue
            a, b = p
            for k in range(a, b):
                if text[k] < " ":
                    raise self.error(f"control character {text[k]!r} inside a name", k)
            if a < b:
                out.append(text[a:b])
        return tuple(out)

    def parse_placeholder(self, dollar: int, body: int) -> tuple[Expr, int]:
        self.open_pos = dollar
        self.tokens.seek(body)
        if self.tokens.peek().kind == "}":
            raise self.error("empty placeholder", dollar)
        node = self.parse_ternary()
        tok = self.tokens.next()
        if tok.kind != "}":
            self.unexpected(tok, "'}' or an operator")
        return node, tok.end

    # -- expressions ---------------------------------------------------------------------

    def expect(self, kind: str, what: str) -> Token:
        tok = self.tokens.next()
        if tok.kind != kind:
            self.unexpected(tok, what)
        return tok

    def unexpected(self, tok: Token, expected: str) -> NoReturn:
        if tok.kind == "EOF":
            raise self.error("unterminated placeholder: no closing '}'", self.open_pos)
        raise self.error(f"expected {expected}, found {tok.describe()}", tok.start)

    def enter(self, pos: int) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.error(f"expression nested more than {MAX_NESTING} levels deep", pos)

    def facts(self, children: tuple[Expr, ...], pos: int) -> tuple[bool, int]:
        """(const, depth) of an operation over ``children``; refuses a tree deeper than MAX_DEPTH."""
        const = all(c.const for c in children)
        depth = 1 + max((c.depth for c in children), default=0)
        if depth > MAX_DEPTH:
            raise self.error(f"expression more than {MAX_DEPTH} operations deep", pos)
        return const, 1 if const else depth

    def parse_ternary(self) -> Expr:
        cond = self.parse_binary(1)
        tok = self.tokens.peek()
        if tok.kind == "?":
            self.enter(tok.start)
            self.tokens.next()
            yes = self.parse_ternary()
            self.expect(":", "':' of the ternary operator")
            no = self.parse_ternary()
            const, depth = self.facts((cond, yes, no), tok.start)
            cond = Ternary(cond, yes, no, tok.start, const, depth)
            self.nesting -= 1
        return cond

    def parse_binary(self, min_prec: int) -> Expr:
        left = self.parse_unary()
        while True:
            tok = self.tokens.peek()
            prec = _PRECEDENCE.get(tok.kind)
            if prec is None or prec < min_prec:
                return left
            self.tokens.next()
            right = self.parse_binary(prec + 1)
            const, depth = self.facts((left, right), tok.start)
            left = Binary(tok.kind, left, right, tok.start, const, depth)
            if prec == _RANGE_PREC and self.tokens.peek().kind in ("..", "..<"):
                raise self.error("a range cannot be the bound of another range", self.tokens.peek().start)

    def parse_unary(self) -> Expr:
        tok = self.tokens.peek()
        if tok.kind in UNARY:
            self.enter(tok.start)
            self.tokens.next()
            operand = self.parse_unary()
            self.nesting -= 1
            const, depth = self.facts((operand,), tok.start)
            return Unary(tok.kind, operand, tok.start, const, depth)
        return self.parse_postfix()

    def parse_postfix(self) -> Expr:
        target: Expr | _Static = self.parse_primary()
        while True:
            tok = self.tokens.peek()
            if tok.kind == ".":
                self.tokens.next()
                name = self.expect("NAME", "a method name after '.'")
                if self.tokens.peek().kind != "(":
                    raise self.error(f"property access '.{name.value}' is not supported", name.start)
                self.enter(self.tokens.next().start)
                args = self.parse_args(")")
                self.nesting -= 1
                target = self.make_call(target, name, args)
            elif tok.kind == "[":
                raise self.error("indexing with '[...]' is not supported", tok.start)
            elif tok.kind == "(":
                raise self.error("only methods and Math/String functions can be called", tok.start)
            else:
                break
        if isinstance(target, _Static):
            raise self.error(f"{target.name!r} can only be used to call a function", target.pos)
        return target

    def parse_args(self, close: str) -> list[Expr]:
        args: list[Expr] = []
        if self.tokens.peek().kind == close:
            self.tokens.next()
            return args
        while True:
            args.append(self.parse_ternary())
            tok = self.tokens.next()
            if tok.kind == close:
                return args
            if tok.kind == ":" and close == "]":
                raise self.error("map literals are not supported", tok.start)
            if tok.kind != ",":
                self.unexpected(tok, f"',' or {close!r}")
            if close == "]" and self.tokens.peek().kind == "]":  # Groovy allows [a, b,]
                self.tokens.next()
                return args

    def parse_primary(self) -> Expr | _Static:
        tok = self.tokens.next()
        kind = tok.kind
        if kind in ("INT", "STR", "BOOL"):
            return Const(tok.value, tok.start)
        if kind == "NAME":
            if tok.value in _STATIC_RECEIVERS and self.tokens.peek().kind == ".":
                return _Static(tok.value, tok.start)
            if self.tokens.peek().kind == "(":
                raise self.error(f"unknown function {tok.value!r}", tok.start)
            self.columns.setdefault(tok.value, tok.start)
            return Var(tok.value, tok.start)
        if kind == "(":
            self.enter(tok.start)
            node = self.parse_ternary()
            self.expect(")", "')'")
            self.nesting -= 1
            return node
        if kind == "[":
            self.enter(tok.start)
            items = tuple(self.parse_args("]"))
            self.nesting -= 1
            const, depth = self.facts(items, tok.start)
            return ListOf(items, tok.start, const, depth)
        self.unexpected(tok, "a value")

    def make_call(self, target: Expr | _Static, name: Token, args: list[Expr]) -> Expr:
        method = name.value
        if isinstance(target, _Static):
            qualified = f"{target.name}.{method}"
            entry = STATIC.get(qualified)
            if entry is None:
                raise self.error(f"unknown function {qualified}()", name.start)
            call_args = tuple(args)
        else:
            entry = METHODS.get(method)
            if entry is None:
                if method == "hashCode":
                    raise self.error(
                        "hashCode() is not supported (Java's hash depends on the runtime type; "
                        "use a hash-based sharding algorithm)",
                        name.start,
                    )
                raise self.error(f"unsupported method {method}()", name.start)
            qualified = f".{method}"
            call_args = (target, *args)
        arity = entry[0]
        if len(args) not in arity:
            wanted = " or ".join(map(str, arity))
            raise self.error(
                f"{qualified}() takes {wanted} argument{'s' if arity != (1,) else ''}, got {len(args)}", name.start
            )
        const, depth = self.facts(call_args, name.start)
        return Call(qualified, call_args, name.start, const, depth)
