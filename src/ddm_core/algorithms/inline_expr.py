"""Apache ShardingSphere inline expressions (``t_order_${user_id % 16}``), evaluated safely.

ShardingSphere writes sharding rules as Groovy GStrings: ``actualDataNodes:
ds$->{0..1}.t_order_$->{0..15}`` lists physical tables, ``algorithm-expression:
t_order_${user_id % 16}`` names the table of a row. This module reads that
notation without Groovy and without ``eval``: a hand-written tokenizer and
precedence-climbing parser turn each ``${...}`` into a small tree, and the tree
is compiled once into nested closures, so routing a value is a few function
calls (:func:`compile_expression` caches the compiled form).

API::

    compile_expression("t_order_${user_id % 16}").evaluate({"user_id": 21})  # 't_order_5'
    expand("ds${0..1}.t_order_${0..1}")  # ['ds0.t_order_0', 'ds0.t_order_1', 'ds1.t_order_0', 'ds1.t_order_1']

Text outside placeholders is literal. ``${...}`` and ``$->{...}`` mean the same.
A placeholder whose value is a range or a list stands for each of its values;
several such placeholders expand to the cartesian product, the left-most varying
slowest. A comma outside every placeholder separates items, as in ShardingSphere
(``ds0.t_${0..1},ds1.t_${2..3}``); the results are concatenated in order and
each item is trimmed like Java's ``String.trim()``. The type prefixes of
ShardingSphere 5.4+ are understood: ``<GROOVY>`` (and ``<ESPRESSO>``, the same
syntax) is this notation, ``<LITERAL>a, b`` is a plain comma-separated list taken
as written; other types (``<INTERVAL>``) are refused.

Supported inside a placeholder, with Groovy's precedence (loosest first):

==================  ===========================================================
``c ? a : b``       ternary (only the chosen branch is evaluated)
``||`` ``&&``       logical, on Groovy truth (0, ``''`` and ``[]`` are false)
``==`` ``!=``       equality (an int never equals a string, as in Groovy)
``<`` ``<=`` ...    ordering of two integers or two strings
``a..b`` ``a..<b``  integer ranges, inclusive / exclusive; descending if a > b
``+`` ``-``         integers; ``+`` concatenates when either side is a string
``*`` ``/`` ``%``   integers; see below for ``/`` and ``%``
``-x +x !x``        unary
``x.m(...)``        ``intdiv(n)``, ``abs()``, ``toString()``; on strings
                    ``padLeft(n[, pad])``, ``padRight(n[, pad])`` (zero-padded
                    names: ``${(id % 16).toString().padLeft(2, '0')}``)
``Math.f(...)``     ``abs``, ``floorMod``, ``floorDiv``, ``max``, ``min``;
                    also ``String.valueOf(x)``
literals            decimal integers (optional ``L``), ``'..'`` / ``".."``
                    strings (Java escapes, no interpolation), ``true``,
                    ``false``, lists ``[a, b]``, parentheses
names               variables: the sharding columns passed to
                    :meth:`InlineExpression.evaluate`
==================  ===========================================================

Integer semantics are Java's where Python differs: ``%`` takes the sign of the
dividend (``-7 % 3 == -1``).

**Deliberate difference from Groovy — ``/``.** Between two integers, ``/`` is
integer division truncating toward zero (``-7 / 2 == -3``, ``5 / 16 == 0``).
Real Groovy returns a BigDecimal (``5 / 16 == 0.3125``), so ShardingSphere turns
``ds${user_id % 32 / 16}`` into ``ds0.3125``; the users who write that mean
integer division (seed 004: "``user_id % 32 >= 16 ? 1 : 0``"), and a data
source called ``ds0.3125`` never exists. ``x.intdiv(n)`` is the Groovy-correct
spelling and gives the same result here, so an expression using it routes the
same under ddm-core and ShardingSphere.

Other differences, all on the side of refusing rather than guessing:

* integers never overflow (Groovy ``Integer``/``Long`` arithmetic wraps);
* variables must be ``int`` (or an integral type such as ``numpy.int64``),
  ``str`` or ``bool``; ``None``, floats and decimals are refused;
* an integer literal with a leading zero (Groovy reads ``010`` as octal 8),
  decimal literals, a bare ``$`` (Groovy interpolates ``$name``), and ``\\`` or
  ``"`` in literal text are refused;
* a list inside a list (``${[0..1]}``, which ShardingSphere would print as
  ``[0, 1]``) and a placeholder yielding no value (``${[]}``, ``${0..<0}``,
  which ShardingSphere silently drops) are refused; duplicate values of one
  placeholder are kept once, as ShardingSphere does;
* an empty comma-separated item (``a,,b``, ``a,``) is refused;
* :meth:`InlineExpression.evaluate` needs exactly one result: a range, a list
  of several values or a top-level comma is an error there (Groovy would print
  the list);
* constant sub-expressions are computed at compile time, so ``${x / 0}`` and
  ``${1 / 0}`` fail in :func:`compile_expression`, not at routing time;
* an expansion is capped at :data:`MAX_EXPANSION` names; brackets, calls, unary
  operators and ternaries nest at most 32 deep, and the expression tree is at
  most 64 operations deep (recursion stays bounded for any input).

Refused syntax raises :class:`~ddm_core.errors.InlineExpressionError`: closures
(``{ it -> }``; write zero-padded data nodes as ``t_0${0..9},t_${10..20}``
instead of ``.collect{}``), assignments, ``hashCode()``, unknown methods or
functions, property access, indexing, bitwise operators, comments, ``null``,
``new`` and other Groovy keywords, an unterminated ``${``, stray characters.
Every error this module raises is that class (a ``ConfigError``); its message
quotes the whole expression and the 0-based position of the offending fragment,
also available as ``.expression`` and ``.position``.
"""

from __future__ import annotations

import functools
import itertools
import numbers
import operator
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from ddm_core.errors import InlineExpressionError

__all__ = ["MAX_EXPANSION", "InlineExpression", "compile_expression", "expand"]

#: Most names one expression may expand to (larger is a configuration mistake).
MAX_EXPANSION = 100_000

_MAX_NESTING = 32  # parentheses / brackets / unary operators / ternaries inside each other
_MAX_DEPTH = 64  # depth of the expression tree (bounds recursion when evaluating)
_CACHE_SIZE = 4096

_JAVA_WS = "".join(map(chr, range(33)))  # what String.trim() removes
_SPACE = " \t\r\n\f"
_DIGITS = "0123456789"
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "$": "$", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_KEYWORDS = frozenset(
    "abstract as assert boolean break byte case catch char class const continue def default do double else "
    "enum extends final finally float for goto if implements import in instanceof int interface long native "
    "new null package private protected public return short static strictfp super switch synchronized this "
    "throw throws trait transient try var void volatile while yield".split()
)
_STATIC_RECEIVERS = ("Math", "String")

Value = Any  # int | str | bool | tuple[Value, ...] | range
Variables = Mapping[str, Any]
Fn = Callable[[Variables], Value]


# -- errors ------------------------------------------------------------------------------


class _OpError(Exception):
    """An operation failed; the caller turns it into an InlineExpressionError at its position."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg


def _error(text: str, msg: str, pos: int) -> InlineExpressionError:
    if pos >= len(text):
        where = f"at position {pos} (end of text)"
    else:
        frag = text[pos : pos + 24]
        where = f"at position {pos} (near {frag!r})"
    return InlineExpressionError(
        f"{msg} {where} in inline expression {text!r}", expression=text, position=pos
    )


# -- values ------------------------------------------------------------------------------


def _show(x: Value) -> str:
    """Describe a value for an error message (short, never a huge number)."""
    t = type(x)
    if t is bool:
        return "true" if x else "false"
    if t is int:
        return str(x) if x.bit_length() <= 128 else f"an integer of {x.bit_length()} bits"
    if t is str:
        return f"string {x if len(x) <= 30 else x[:27] + '...'!r}"
    if t is range or t is tuple:
        return f"a list of {_len(x)} value{'s' if _len(x) != 1 else ''}"
    return t.__name__


def _to_str(x: Value) -> str:
    """Groovy's toString() of a single value."""
    t = type(x)
    if t is str:
        return x  # type: ignore[no-any-return]
    if t is int:
        try:
            return str(x)
        except ValueError:  # beyond sys.get_int_max_str_digits()
            raise _OpError(f"{_show(x)} is too large to print") from None
    if t is bool:
        return "true" if x else "false"
    raise _OpError(f"{_show(x)} cannot be used as one text value")


def _truth(x: Value) -> bool:
    """Groovy truth."""
    t = type(x)
    if t is bool:
        return x  # type: ignore[no-any-return]
    if t is int:
        return x != 0  # type: ignore[no-any-return]
    return bool(x)  # str, tuple, range: non-empty


def _len(x: Value) -> int:
    """len() that also works for ranges beyond sys.maxsize."""
    if type(x) is range:
        return max(0, (x.stop - x.start + x.step + (-1 if x.step > 0 else 1)) // x.step)
    return len(x)


def _kind(x: Value) -> str:
    t = type(x)
    return "list" if t is tuple or t is range else t.__name__


def _eq(a: Value, b: Value) -> bool:
    ka = _kind(a)
    if ka != _kind(b):
        return False
    if ka == "list":
        if type(a) is range and type(b) is range:
            return a == b
        return _len(a) == _len(b) and all(_eq(x, y) for x, y in zip(a, b))
    return a == b  # type: ignore[no-any-return]


def _ints(a: Value, b: Value, op: str) -> None:
    if type(a) is not int or type(b) is not int:
        raise _OpError(f"{op!r} needs two integers, got {_show(a)} and {_show(b)}")


def _add(a: Value, b: Value) -> Value:
    if type(a) is int and type(b) is int:
        return a + b
    if type(a) is str or type(b) is str:
        try:
            return _to_str(a) + _to_str(b)
        except _OpError:
            raise _OpError(f"'+' cannot join {_show(a)} and {_show(b)}") from None
    raise _OpError(f"'+' needs two integers or a string, got {_show(a)} and {_show(b)}")


def _sub(a: Value, b: Value) -> Value:
    _ints(a, b, "-")
    return a - b


def _mul(a: Value, b: Value) -> Value:
    _ints(a, b, "*")
    return a * b


def _div(a: Value, b: Value) -> Value:
    """Integer division truncating toward zero (Java; Groovy itself would give a BigDecimal)."""
    _ints(a, b, "/")
    if b == 0:
        raise _OpError("division by zero")
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def _mod(a: Value, b: Value) -> Value:
    """Java remainder: the sign of the dividend."""
    _ints(a, b, "%")
    if b == 0:
        raise _OpError("modulo by zero")
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _utf16(s: str) -> bytes:
    # Java compares strings by UTF-16 code unit; so does comparing these bytes.
    return s.encode("utf-16-be", "surrogatepass")


def _ordered(a: Value, b: Value, op: str) -> tuple[Any, Any]:
    if type(a) is int and type(b) is int:
        return a, b
    if type(a) is str and type(b) is str:
        return _utf16(a), _utf16(b)
    raise _OpError(f"{op!r} compares two integers or two strings, got {_show(a)} and {_show(b)}")


def _lt(a: Value, b: Value) -> bool:
    x, y = _ordered(a, b, "<")
    return x < y  # type: ignore[no-any-return]


def _le(a: Value, b: Value) -> bool:
    x, y = _ordered(a, b, "<=")
    return x <= y  # type: ignore[no-any-return]


def _gt(a: Value, b: Value) -> bool:
    x, y = _ordered(a, b, ">")
    return x > y  # type: ignore[no-any-return]


def _ge(a: Value, b: Value) -> bool:
    x, y = _ordered(a, b, ">=")
    return x >= y  # type: ignore[no-any-return]


def _ne(a: Value, b: Value) -> bool:
    return not _eq(a, b)


def _range_incl(a: Value, b: Value) -> range:
    _ints(a, b, "..")
    return range(a, b + 1) if a <= b else range(a, b - 1, -1)


def _range_excl(a: Value, b: Value) -> range:
    _ints(a, b, "..<")
    return range(a, b) if a <= b else range(a, b, -1)


def _neg(a: Value) -> Value:
    if type(a) is not int:
        raise _OpError(f"unary '-' needs an integer, got {_show(a)}")
    return -a


def _pos(a: Value) -> Value:
    if type(a) is not int:
        raise _OpError(f"unary '+' needs an integer, got {_show(a)}")
    return a


def _not(a: Value) -> bool:
    return not _truth(a)


def _abs(a: Value) -> Value:
    if type(a) is not int:
        raise _OpError(f"abs() needs an integer, got {_show(a)}")
    return abs(a)


def _intdiv(a: Value, b: Value) -> Value:
    _ints(a, b, "intdiv")
    return _div(a, b)


def _floor_mod(a: Value, b: Value) -> Value:
    _ints(a, b, "Math.floorMod")
    if b == 0:
        raise _OpError("modulo by zero")
    return a % b


def _floor_div(a: Value, b: Value) -> Value:
    _ints(a, b, "Math.floorDiv")
    if b == 0:
        raise _OpError("division by zero")
    return a // b


def _max(a: Value, b: Value) -> Value:
    _ints(a, b, "Math.max")
    return max(a, b)


def _min(a: Value, b: Value) -> Value:
    _ints(a, b, "Math.min")
    return min(a, b)


def _value_of(a: Value) -> str:
    return _to_str(a)


_MAX_PAD = 10_000


def _pad(side: str, s: Value, width: Value, padding: Value) -> str:
    if type(s) is not str:
        raise _OpError(f"{side}() needs a string receiver (call .toString() first), got {_show(s)}")
    if type(width) is not int or type(padding) is not str:
        raise _OpError(f"{side}() takes an integer width and a string, got {_show(width)} and {_show(padding)}")
    if width > _MAX_PAD:
        raise _OpError(f"{side}() width {_show(width)} is larger than {_MAX_PAD}")
    missing = width - len(s)
    if missing <= 0:
        return s
    if not padding:
        raise _OpError(f"{side}() with an empty padding string")
    fill = (padding * (missing // len(padding) + 1))[:missing]
    return fill + s if side == "padLeft" else s + fill


def _pad_left(s: Value, width: Value, padding: Value = " ") -> str:
    return _pad("padLeft", s, width, padding)


def _pad_right(s: Value, width: Value, padding: Value = " ") -> str:
    return _pad("padRight", s, width, padding)


_BINARY: dict[str, tuple[int, Callable[[Value, Value], Value]]] = {
    "||": (1, lambda a, b: a),  # placeholders: built specially (short circuit)
    "&&": (2, lambda a, b: a),
    "==": (3, _eq),
    "!=": (3, _ne),
    "<": (4, _lt),
    "<=": (4, _le),
    ">": (4, _gt),
    ">=": (4, _ge),
    "..": (5, _range_incl),
    "..<": (5, _range_excl),
    "+": (6, _add),
    "-": (6, _sub),
    "*": (7, _mul),
    "/": (7, _div),
    "%": (7, _mod),
}
_UNARY: dict[str, Callable[[Value], Value]] = {"-": _neg, "+": _pos, "!": _not}
# name -> (accepted argument counts, implementation taking the receiver first)
_METHODS: dict[str, tuple[tuple[int, ...], Callable[..., Value]]] = {
    "intdiv": ((1,), _intdiv),
    "abs": ((0,), _abs),
    "toString": ((0,), _value_of),
    "padLeft": ((1, 2), _pad_left),
    "padRight": ((1, 2), _pad_right),
}
_STATIC: dict[str, tuple[tuple[int, ...], Callable[..., Value]]] = {
    "Math.abs": ((1,), _abs),
    "Math.floorMod": ((2,), _floor_mod),
    "Math.floorDiv": ((2,), _floor_div),
    "Math.max": ((2,), _max),
    "Math.min": ((2,), _min),
    "String.valueOf": ((1,), _value_of),
}
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
_OPERATORS = sorted(
    [*_BINARY, "!", "(", ")", "[", "]", ",", ".", "?", ":", "}", *_REFUSED_OPS], key=len, reverse=True
)


# -- compiled tree -------------------------------------------------------------------------


class _Node:
    """One compiled sub-expression: either a constant or a closure over the variables."""

    __slots__ = ("fn", "is_const", "value", "depth", "pos", "var_name")

    def __init__(self, fn: Fn | None, value: Value, depth: int, pos: int) -> None:
        self.fn: Fn = fn if fn is not None else (lambda _v: value)
        self.is_const = fn is None
        self.value = value
        self.depth = depth
        self.pos = pos
        self.var_name: str | None = None  # set when the node is a bare variable


class _Static:
    """The receiver ``Math`` / ``String`` of a static call."""

    __slots__ = ("name", "pos")

    def __init__(self, name: str, pos: int) -> None:
        self.name = name
        self.pos = pos


class _Placeholder:
    __slots__ = ("node", "pos")

    def __init__(self, node: _Node, pos: int) -> None:
        self.node = node
        self.pos = pos


_Part = str | _Placeholder


class _Token:
    __slots__ = ("kind", "value", "start", "end")

    def __init__(self, kind: str, value: Any, start: int, end: int) -> None:
        self.kind = kind  # "INT", "STR", "BOOL", "NAME", "EOF" or the operator itself
        self.value = value
        self.start = start
        self.end = end

    def describe(self) -> str:
        if self.kind == "EOF":
            return "end of text"
        if self.kind in ("INT", "STR", "BOOL", "NAME"):
            return {"INT": "number", "STR": "string", "BOOL": "boolean", "NAME": "name"}[self.kind]
        return f"{self.kind!r}"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self._peeked: _Token | None = None
        self.columns: dict[str, int] = {}  # name -> first position
        self.nesting = 0
        self.open_pos = 0  # position of the '$' of the placeholder being parsed

    def error(self, msg: str, pos: int) -> InlineExpressionError:
        return _error(self.text, msg, pos)

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

    def parse_literal_list(self, start: int) -> tuple[list[tuple[_Part, ...]], list[int]]:
        """``<LITERAL>a, b``: comma-separated names, nothing interpreted."""
        text = self.text
        items: list[tuple[_Part, ...]] = []
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

    def check_items(self, items: list[tuple[_Part, ...]], commas: list[int]) -> None:
        if len(items) > 1:
            for k, item in enumerate(items):
                if not item:
                    where = commas[k] if k < len(commas) else len(self.text)
                    raise self.error("empty item in a comma-separated list", where)

    def parse_template(self, start: int = 0) -> tuple[list[tuple[_Part, ...]], list[int]]:
        """Split into comma-separated items of literal text and placeholders."""
        text = self.text
        n = len(text)
        items: list[tuple[_Part, ...]] = []
        commas: list[int] = []
        parts: list[tuple[int, int] | _Placeholder] = []  # literal spans and placeholders
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
                parts.append(_Placeholder(node, i))
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

    def finish_item(self, parts: list[tuple[int, int] | _Placeholder]) -> tuple[_Part, ...]:
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
        out: list[_Part] = []
        for p in parts:
            if isinstance(p, _Placeholder):
                out.append(p)
                continue
            a, b = p
            for k in range(a, b):
                if text[k] < " ":
                    raise self.error(f"control character {text[k]!r} inside a name", k)
            if a < b:
                out.append(text[a:b])
        return tuple(out)

    def parse_placeholder(self, dollar: int, body: int) -> tuple[_Node, int]:
        self.open_pos = dollar
        self.i = body
        self._peeked = None
        if self.peek().kind == "}":
            raise self.error("empty placeholder", dollar)
        node = self.parse_ternary()
        tok = self.next()
        if tok.kind != "}":
            self.unexpected(tok, "'}' or an operator")
        return node, tok.end

    # -- tokens -------------------------------------------------------------------------

    def peek(self) -> _Token:
        if self._peeked is None:
            self._peeked = self.lex()
        return self._peeked

    def next(self) -> _Token:
        tok = self.peek()
        self._peeked = None
        return tok

    def expect(self, kind: str, what: str) -> _Token:
        tok = self.next()
        if tok.kind != kind:
            self.unexpected(tok, what)
        return tok

    def unexpected(self, tok: _Token, expected: str) -> NoReturn:
        if tok.kind == "EOF":
            raise self.error("unterminated placeholder: no closing '}'", self.open_pos)
        raise self.error(f"expected {expected}, found {tok.describe()}", tok.start)

    def lex(self) -> _Token:
        text = self.text
        n = len(text)
        i = self.i
        while i < n and text[i] in _SPACE:
            i += 1
        if i >= n:
            self.i = n
            return _Token("EOF", None, n, n)
        ch = text[i]
        start = i
        if ch in _DIGITS:
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
            return _Token("INT", value, start, i)
        if ch == "_" or ch.isalpha():
            i += 1
            while i < n and (text[i] == "_" or text[i].isalnum()):
                i += 1
            word = text[start:i]
            self.i = i
            if word in ("true", "false"):
                return _Token("BOOL", word == "true", start, i)
            if word in _KEYWORDS:
                raise self.error(f"the Groovy keyword {word!r} is not supported", start)
            return _Token("NAME", word, start, i)
        if ch == "'" or ch == '"':
            return self.lex_string(start)
        for op in _OPERATORS:
            if text.startswith(op, i):
                if op in _REFUSED_OPS:
                    raise self.error(_REFUSED_OPS[op], start)
                self.i = i + len(op)
                return _Token(op, None, start, self.i)
        if ch == "$":
            raise self.error("'$' inside a placeholder (nested placeholders are not supported)", start)
        raise self.error(f"unexpected character {ch!r}", start)

    def lex_string(self, start: int) -> _Token:
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
        return _Token("STR", "".join(out), start, self.i)

    # -- expressions ---------------------------------------------------------------------

    def enter(self, pos: int) -> None:
        self.nesting += 1
        if self.nesting > _MAX_NESTING:
            raise self.error(f"expression nested more than {_MAX_NESTING} levels deep", pos)

    def parse_ternary(self) -> _Node:
        cond = self.parse_binary(1)
        tok = self.peek()
        if tok.kind == "?":
            self.enter(tok.start)
            self.next()
            yes = self.parse_ternary()
            self.expect(":", "':' of the ternary operator")
            no = self.parse_ternary()
            cond = self.make_ternary(cond, yes, no, tok.start)
            self.nesting -= 1
        return cond

    def parse_binary(self, min_prec: int) -> _Node:
        left = self.parse_unary()
        while True:
            tok = self.peek()
            entry = _BINARY.get(tok.kind)
            if entry is None or entry[0] < min_prec:
                return left
            prec = entry[0]
            self.next()
            right = self.parse_binary(prec + 1)
            left = self.make_binary(tok.kind, left, right, tok.start)
            if prec == 5 and self.peek().kind in ("..", "..<"):
                raise self.error("a range cannot be the bound of another range", self.peek().start)

    def parse_unary(self) -> _Node:
        tok = self.peek()
        if tok.kind in _UNARY:
            self.enter(tok.start)
            self.next()
            operand = self.parse_unary()
            self.nesting -= 1
            return self.make_apply(_UNARY[tok.kind], [operand], tok.start)
        return self.parse_postfix()

    def parse_postfix(self) -> _Node:
        target: _Node | _Static = self.parse_primary()
        while True:
            tok = self.peek()
            if tok.kind == ".":
                self.next()
                name = self.expect("NAME", "a method name after '.'")
                if self.peek().kind != "(":
                    raise self.error(f"property access '.{name.value}' is not supported", name.start)
                self.enter(self.next().start)
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

    def parse_args(self, close: str) -> list[_Node]:
        args: list[_Node] = []
        if self.peek().kind == close:
            self.next()
            return args
        while True:
            args.append(self.parse_ternary())
            tok = self.next()
            if tok.kind == close:
                return args
            if tok.kind == ":" and close == "]":
                raise self.error("map literals are not supported", tok.start)
            if tok.kind != ",":
                self.unexpected(tok, f"',' or {close!r}")
            if close == "]" and self.peek().kind == "]":  # Groovy allows [a, b,]
                self.next()
                return args

    def parse_primary(self) -> _Node | _Static:
        tok = self.next()
        kind = tok.kind
        if kind in ("INT", "STR", "BOOL"):
            return _Node(None, tok.value, 1, tok.start)
        if kind == "NAME":
            if tok.value in _STATIC_RECEIVERS and self.peek().kind == ".":
                return _Static(tok.value, tok.start)
            if self.peek().kind == "(":
                raise self.error(f"unknown function {tok.value!r}", tok.start)
            return self.make_var(tok.value, tok.start)
        if kind == "(":
            self.enter(tok.start)
            node = self.parse_ternary()
            self.expect(")", "')'")
            self.nesting -= 1
            return node
        if kind == "[":
            self.enter(tok.start)
            items = self.parse_args("]")
            self.nesting -= 1
            return self.make_list(items, tok.start)
        self.unexpected(tok, "a value")

    # -- node builders ------------------------------------------------------------------------

    def depth_of(self, nodes: list[_Node], pos: int) -> int:
        depth = 1 + max((n.depth for n in nodes), default=0)
        if depth > _MAX_DEPTH:
            raise self.error(f"expression more than {_MAX_DEPTH} operations deep", pos)
        return depth

    def make_var(self, name: str, pos: int) -> _Node:
        self.columns.setdefault(name, pos)
        text = self.text

        def var(v: Variables) -> Value:
            try:
                x = v[name]
            except KeyError:
                raise _error(text, f"no value for variable {name!r}", pos) from None
            except TypeError:
                raise _error(text, "variables must be a mapping of names to values", pos) from None
            if type(x) is int or type(x) is str:
                return x
            return _coerce(x, name, text, pos)

        node = _Node(var, None, 1, pos)
        node.var_name = name
        return node

    def make_apply(self, impl: Callable[..., Value], args: list[_Node], pos: int) -> _Node:
        depth = self.depth_of(args, pos)
        text = self.text
        if all(a.is_const for a in args):
            try:
                value = impl(*[a.value for a in args])
            except _OpError as e:
                raise _error(text, e.msg, pos) from None
            return _Node(None, value, 1, pos)
        if len(args) == 1:
            f = args[0].fn

            def apply1(v: Variables) -> Value:
                try:
                    return impl(f(v))
                except _OpError as e:
                    raise _error(text, e.msg, pos) from None

            return _Node(apply1, None, depth, pos)
        if len(args) == 2:
            f, g = args[0].fn, args[1].fn

            def apply2(v: Variables) -> Value:
                try:
                    return impl(f(v), g(v))
                except _OpError as e:
                    raise _error(text, e.msg, pos) from None

            return _Node(apply2, None, depth, pos)
        fns = [a.fn for a in args]

        def apply_n(v: Variables) -> Value:
            try:
                return impl(*[f(v) for f in fns])
            except _OpError as e:
                raise _error(text, e.msg, pos) from None

        return _Node(apply_n, None, depth, pos)

    def make_binary(self, op: str, left: _Node, right: _Node, pos: int) -> _Node:
        if op == "&&" or op == "||":
            return self.make_logical(op, left, right, pos)
        if op in ("/", "%") and right.is_const and type(right.value) is int and not left.is_const:
            c = right.value
            if c == 0:
                raise self.error("division by zero" if op == "/" else "modulo by zero", pos)
            return self.make_const_divisor(op, left, c, pos, _BINARY[op][1])
        return self.make_apply(_BINARY[op][1], [left, right], pos)

    def make_const_divisor(
        self, op: str, left: _Node, c: int, pos: int, slow: Callable[[Value, Value], Value]
    ) -> _Node:
        """The routing hot path (``user_id % 16``, ``x % 32 / 16``): inline the integer case."""
        depth = self.depth_of([left], pos)
        f = left.fn
        ac = abs(c)
        text = self.text

        def fallback(a: Value) -> NoReturn:
            try:
                slow(a, c)
            except _OpError as e:
                raise _error(text, e.msg, pos) from None
            raise AssertionError("unreachable")  # pragma: no cover

        name = left.var_name
        if op == "%" and name is not None:
            # `column % n`, the most common rule: look the variable up here, saving a call;
            # anything unusual (missing, bool, numpy, wrong type) goes through the variable's closure.

            def var_rem(v: Variables) -> Value:
                try:
                    a = v[name]
                except Exception:
                    a = f(v)  # raises the variable's own error
                if type(a) is not int:
                    a = f(v)
                    if type(a) is not int:
                        fallback(a)
                return a % ac if a >= 0 else -(-a % ac)

            return _Node(var_rem, None, depth, pos)

        if op == "%":

            def rem(v: Variables) -> Value:
                a = f(v)
                if type(a) is int:
                    return a % ac if a >= 0 else -(-a % ac)
                fallback(a)

            return _Node(rem, None, depth, pos)

        def quot(v: Variables) -> Value:
            a = f(v)
            if type(a) is int:
                q = a // ac if a >= 0 else -(-a // ac)
                return q if c > 0 else -q
            fallback(a)

        return _Node(quot, None, depth, pos)

    def make_logical(self, op: str, left: _Node, right: _Node, pos: int) -> _Node:
        depth = self.depth_of([left, right], pos)
        is_and = op == "&&"
        if left.is_const:
            if _truth(left.value) != is_and:  # false && x, true || x
                return _Node(None, not is_and, 1, pos)
            if right.is_const:
                return _Node(None, _truth(right.value), 1, pos)
            g = right.fn
            return _Node(lambda v: _truth(g(v)), None, depth, pos)
        f, g = left.fn, right.fn
        if is_and:
            return _Node(lambda v: _truth(f(v)) and _truth(g(v)), None, depth, pos)
        return _Node(lambda v: _truth(f(v)) or _truth(g(v)), None, depth, pos)

    def make_ternary(self, cond: _Node, yes: _Node, no: _Node, pos: int) -> _Node:
        depth = self.depth_of([cond, yes, no], pos)
        if cond.is_const:
            return yes if _truth(cond.value) else no
        c, a, b = cond.fn, yes.fn, no.fn
        return _Node(lambda v: a(v) if _truth(c(v)) else b(v), None, depth, pos)

    def make_list(self, items: list[_Node], pos: int) -> _Node:
        for item in items:
            if item.is_const and _kind(item.value) == "list":
                raise self.error("a list inside a list is not supported", item.pos)
        depth = self.depth_of(items, pos)
        if all(item.is_const for item in items):
            return _Node(None, tuple(item.value for item in items), 1, pos)
        fns = [item.fn for item in items]
        return _Node(lambda v: tuple([f(v) for f in fns]), None, depth, pos)

    def make_call(self, target: _Node | _Static, name: _Token, args: list[_Node]) -> _Node | _Static:
        method = name.value
        if isinstance(target, _Static):
            qualified = f"{target.name}.{method}"
            entry = _STATIC.get(qualified)
            if entry is None:
                raise self.error(f"unknown function {qualified}()", name.start)
            arity, impl = entry
            call_args = args
        else:
            entry = _METHODS.get(method)
            if entry is None:
                if method == "hashCode":
                    raise self.error(
                        "hashCode() is not supported (Java's hash depends on the runtime type; "
                        "use a hash-based sharding algorithm)",
                        name.start,
                    )
                raise self.error(f"unsupported method {method}()", name.start)
            arity, impl = entry
            qualified = f".{method}"
            call_args = [target, *args]
            if method == "intdiv" and len(args) == 1 and not target.is_const:
                (divisor,) = args
                if divisor.is_const and type(divisor.value) is int:
                    if divisor.value == 0:
                        raise self.error("division by zero", name.start)
                    return self.make_const_divisor("/", target, divisor.value, name.start, _intdiv)
        if len(args) not in arity:
            wanted = " or ".join(map(str, arity))
            raise self.error(
                f"{qualified}() takes {wanted} argument{'s' if arity != (1,) else ''}, got {len(args)}", name.start
            )
        return self.make_apply(impl, call_args, name.start)


def _coerce(x: Any, name: str, text: str, pos: int) -> Value:
    if type(x) is bool:
        return x
    if isinstance(x, str):
        return str.__str__(x)
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return operator.index(x)
    if x is None:
        raise _error(text, f"variable {name!r} is None (SQL NULL has no shard)", pos)
    raise _error(
        text,
        f"variable {name!r} has unsupported type {type(x).__name__} (integers, strings and booleans only)",
        pos,
    )


# -- placeholder values ---------------------------------------------------------------------


def _values(x: Value, text: str, pos: int) -> list[str]:
    """The strings one placeholder stands for (ShardingSphere: a LinkedHashSet of toString())."""
    t = type(x)
    if t is range:
        if _len(x) > MAX_EXPANSION:
            raise _error(text, f"range of {_len(x)} values is larger than MAX_EXPANSION={MAX_EXPANSION}", pos)
        out = [str(k) for k in x]
    elif t is tuple:
        try:
            out = list(dict.fromkeys([_to_str(k) for k in x]))
        except _OpError as e:
            raise _error(text, e.msg, pos) from None
    else:
        try:
            return [_to_str(x)]
        except _OpError as e:
            raise _error(text, e.msg, pos) from None
    if not out:
        raise _error(text, "placeholder yields no value", pos)
    return out


def _single(x: Value, text: str, pos: int) -> str:
    values = _values(x, text, pos)
    if len(values) != 1:
        raise _error(
            text,
            f"placeholder yields {len(values)} values where one is needed (use expand() for data nodes)",
            pos,
        )
    return values[0]


def _placeholder_str(ph: _Placeholder, text: str) -> Fn:
    f = ph.node.fn
    pos = ph.pos

    def as_str(v: Variables) -> str:
        x = f(v)
        if type(x) is str:
            return x
        if type(x) is int:
            try:
                return str(x)
            except ValueError:
                pass  # too many digits: _single() says so
        return _single(x, text, pos)

    return as_str


# -- public API ----------------------------------------------------------------------------


class InlineExpression:
    """A compiled inline expression; get one from :func:`compile_expression` (cached).

    Attributes:
        text: The expression as written.
        columns: The variable (sharding column) names it references.
    """

    __slots__ = ("text", "columns", "_items", "_commas", "_column_pos", "_evaluate", "_expanded")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise InlineExpressionError(
                f"an inline expression must be a string, got {type(text).__name__}",
                expression=text,
                position=0,
            )
        text = str.__str__(text)
        parser = _Parser(text)
        self.text = text
        kind, start = parser.parse_type()
        if kind == "LITERAL":
            self._items, self._commas = parser.parse_literal_list(start)
        else:
            self._items, self._commas = parser.parse_template(start)
        self._column_pos = parser.columns
        self.columns = frozenset(parser.columns)
        self._expanded: tuple[str, ...] | None = None
        self._evaluate = self._build_evaluator()

    def evaluate(self, variables: Mapping[str, Any]) -> str:
        """The one name this expression gives for ``variables`` (column name → value).

        Raises:
            InlineExpressionError: a variable is missing or has an unsupported type, an
                operation fails (division by zero, wrong types), or the expression
                yields more or fewer than one name.
        """
        return self._evaluate(variables)  # type: ignore[no-any-return]

    def expand(self) -> list[str]:
        """Every name the expression stands for, in ShardingSphere's order (a new list).

        Raises:
            InlineExpressionError: the expression references a variable, a placeholder
                yields no value, or there would be more than :data:`MAX_EXPANSION` names.
        """
        if self._expanded is None:
            self._expanded = tuple(self._expand())
        return list(self._expanded)

    def __repr__(self) -> str:
        return f"compile_expression({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InlineExpression) and other.text == self.text

    def __hash__(self) -> int:
        return hash((InlineExpression, self.text))

    def __reduce__(self) -> tuple[Any, ...]:
        return (compile_expression, (self.text,))

    # -- internals ------------------------------------------------------------------------

    def _expand(self) -> list[str]:
        text = self.text
        if self._column_pos:
            name, pos = min(self._column_pos.items(), key=lambda kv: kv[1])
            raise _error(
                text, f"expand() has no value for variable {name!r} (use evaluate() with variables)", pos
            )
        result: list[str] = []
        for item in self._items:
            choices: list[list[str]] = []
            total = len(result)
            count = 1
            for part in item:
                if isinstance(part, str):
                    choices.append([part])
                    continue
                values = _values(part.node.value, text, part.pos)
                choices.append(values)
                count *= len(values)
                if total + count > MAX_EXPANSION:
                    raise _error(text, f"expands to more than MAX_EXPANSION={MAX_EXPANSION} names", part.pos)
            result.extend("".join(combo) for combo in itertools.product(*choices))
        return result

    def _build_evaluator(self) -> Fn:
        text = self.text
        if len(self._items) != 1:
            comma = self._commas[0]
            count = len(self._items)

            def several(_v: Variables) -> str:
                raise _error(
                    text, f"evaluate() needs one name but the expression lists {count} comma-separated items", comma
                )

            return several
        pieces: list[str | Fn] = []
        for part in self._items[0]:
            if isinstance(part, _Placeholder):
                if part.node.is_const:
                    try:
                        part = _single(part.node.value, text, part.pos)
                    except InlineExpressionError as e:
                        return _raiser(e)
                else:
                    pieces.append(_placeholder_str(part, text))
                    continue
            if pieces and isinstance(pieces[-1], str):
                pieces[-1] += part
            else:
                pieces.append(part)
        return _join(pieces)


def _raiser(err: InlineExpressionError) -> Fn:
    message, expression, position = err.message, err.expression, err.position  # type: ignore[attr-defined]

    def fail(_v: Variables) -> NoReturn:
        raise InlineExpressionError(message, expression=expression, position=position)

    return fail


def _join(pieces: list[str | Fn]) -> Fn:
    """A closure that fills the template; the common shapes get a direct form."""
    shape = tuple(isinstance(p, str) for p in pieces)
    if shape == ():
        return lambda _v: ""
    if shape == (True,):
        s = pieces[0]
        return lambda _v: s
    if shape == (False,):
        return pieces[0]  # type: ignore[return-value]
    if shape == (True, False):
        s, f = pieces
        return lambda v: s + f(v)  # type: ignore[operator]
    if shape == (False, True):
        f, s = pieces
        return lambda v: f(v) + s  # type: ignore[operator]
    if shape == (True, False, True):
        s, f, t = pieces
        return lambda v: s + f(v) + t  # type: ignore[operator]
    fns = [p if not isinstance(p, str) else (lambda _v, _s=p: _s) for p in pieces]
    return lambda v: "".join([f(v) for f in fns])


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compile_cached(text: str) -> InlineExpression:
    return InlineExpression(text)


def compile_expression(text: str) -> InlineExpression:
    """Parse and compile ``text`` once (cached); see the module documentation for the syntax.

    Raises:
        InlineExpressionError: the syntax is malformed or unsupported, or a constant
            part fails (``${1 / 0}``); ``.position`` points at the offending fragment.
    """
    if type(text) is not str:
        return InlineExpression(text)  # validates and raises for non-strings
    return _compile_cached(text)


def expand(text: str) -> list[str]:
    """All names ``text`` stands for: ``expand("ds${0..1}")`` → ``['ds0', 'ds1']``."""
    return compile_expression(text).expand()
