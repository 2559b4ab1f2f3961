"""What the values of an inline expression are and what its operations do (Groovy / Java semantics).

Values are ``int``, ``str``, ``bool``, and lists (``tuple``, or ``range`` for
``a..b``). Each operation checks its operand types and raises :class:`OpError`
(the compiler adds the position); integer ``/`` and ``%`` follow Java (truncate
toward zero, remainder takes the dividend's sign), ``Math.floorMod`` and
``Math.floorDiv`` floor.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable
from typing import Any

from ddm_core.algorithms.inline_expr._errors import OpError, error

__all__ = [
    "Value",
    "BINARY",
    "UNARY",
    "METHODS",
    "STATIC",
    "show",
    "to_str",
    "truth",
    "length",
    "kind",
    "coerce",
]

Value = Any  # int | str | bool | tuple[Value, ...] | range


def show(x: Value) -> str:
    """Describe a value for an error message (short, never a huge number)."""
    t = type(x)
    if t is bool:
        return "true" if x else "false"
    if t is int:
        return str(x) if x.bit_length() <= 128 else f"an integer of {x.bit_length()} bits"
    if t is str:
        return f"string {x if len(x) <= 30 else x[:27] + '...'!r}"
    if t is range or t is tuple:
        return f"a list of {length(x)} value{'s' if length(x) != 1 else ''}"
    return t.__name__


def to_str(x: Value) -> str:
    """Groovy's toString() of a single value."""
    t = type(x)
    if t is str:
        return x  # type: ignore[no-any-return]
    if t is int:
        try:
            return str(x)
        except ValueError:  # beyond sys.get_int_max_str_digits()
            raise OpError(f"{show(x)} is too large to print") from None
    if t is bool:
        return "true" if x else "false"
    raise OpError(f"{show(x)} cannot be used as one text value")


def truth(x: Value) -> bool:
    """Groovy truth."""
    t = type(x)
    if t is bool:
        return x  # type: ignore[no-any-return]
    if t is int:
        return x != 0  # type: ignore[no-any-return]
    return bool(x)  # str, tuple, range: non-empty


def length(x: Value) -> int:
    """len() that also works for ranges beyond sys.maxsize."""
    if type(x) is range:
        return max(0, (x.stop - x.start + x.step + (-1 if x.step > 0 else 1)) // x.step)
    return len(x)


def kind(x: Value) -> str:
    t = type(x)
    return "list" if t is tuple or t is range else t.__name__


def eq(a: Value, b: Value) -> bool:
    ka = kind(a)
    if ka != kind(b):
        return False
    if ka == "list":
        if type(a) is range and type(b) is range:
            return a == b
        return length(a) == length(b) and all(eq(x, y) for x, y in zip(a, b))
    return a == b  # type: ignore[no-any-return]


def _ints(a: Value, b: Value, op: str) -> None:
    if type(a) is not int or type(b) is not int:
        raise OpError(f"{op!r} needs two integers, got {show(a)} and {show(b)}")


def add(a: Value, b: Value) -> Value:
    if type(a) is int and type(b) is int:
        return a + b
    if type(a) is str or type(b) is str:
        try:
            return to_str(a) + to_str(b)
        except OpError:
            raise OpError(f"'+' cannot join {show(a)} and {show(b)}") from None
    raise OpError(f"'+' needs two integers or a string, got {show(a)} and {show(b)}")


def sub(a: Value, b: Value) -> Value:
    _ints(a, b, "-")
    return a - b


def mul(a: Value, b: Value) -> Value:
    _ints(a, b, "*")
    return a * b


def div(a: Value, b: Value) -> Value:
    """Integer division truncating toward zero (Java; Groovy itself would give a BigDecimal)."""
    _ints(a, b, "/")
    if b == 0:
        raise OpError("division by zero")
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def mod(a: Value, b: Value) -> Value:
    """Java remainder: the sign of the dividend."""
    _ints(a, b, "%")
    if b == 0:
        raise OpError("modulo by zero")
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
    raise OpError(f"{op!r} compares two integers or two strings, got {show(a)} and {show(b)}")


def lt(a: Value, b: Value) -> bool:
    x, y = _ordered(a, b, "<")
    return x < y  # type: ignore[no-any-return]


def le(a: Value, b: Value) -> bool:
    x, y = _ordered(a, b, "<=")
    return x <= y  # type: ignore[no-any-return]


def gt(a: Value, b: Value) -> bool:
    x, y = _ordered(a, b, ">")
    return x > y  # type: ignore[no-any-return]


def ge(a: Value, b: Value) -> bool:
    x, y = _ordered(a, b, ">=")
    return x >= y  # type: ignore[no-any-return]


def ne(a: Value, b: Value) -> bool:
    return not eq(a, b)


def range_incl(a: Value, b: Value) -> range:
    _ints(a, b, "..")
    return range(a, b + 1) if a <= b else range(a, b - 1, -1)


def range_excl(a: Value, b: Value) -> range:
    _ints(a, b, "..<")
    return range(a, b) if a <= b else range(a, b, -1)


def negate(a: Value) -> Value:
    if type(a) is not int:
        raise OpError(f"unary '-' needs an integer, got {show(a)}")
    return -a


def plus(a: Value) -> Value:
    if type(a) is not int:
        raise OpError(f"unary '+' needs an integer, got {show(a)}")
    return a


def not_(a: Value) -> bool:
    return not truth(a)


def abs_(a: Value) -> Value:
    if type(a) is not int:
        raise OpError(f"abs() needs an integer, got {show(a)}")
    return abs(a)


def intdiv(a: Value, b: Value) -> Value:
    _ints(a, b, "intdiv")
    return div(a, b)


def floor_mod(a: Value, b: Value) -> Value:
    _ints(a, b, "Math.floorMod")
    if b == 0:
        raise OpError("modulo by zero")
    return a % b


def floor_div(a: Value, b: Value) -> Value:
    _ints(a, b, "Math.floorDiv")
    if b == 0:
        raise OpError("division by zero")
    return a // b


def max_(a: Value, b: Value) -> Value:
    _ints(a, b, "Math.max")
    return max(a, b)


def min_(a: Value, b: Value) -> Value:
    _ints(a, b, "Math.min")
    return min(a, b)


def value_of(a: Value) -> str:
    return to_str(a)


_MAX_PAD = 10_000


def _pad(side: str, s: Value, width: Value, padding: Value) -> str:
    if type(s) is not str:
        raise OpError(f"{side}() needs a string receiver (call .toString() first), got {show(s)}")
    if type(width) is not int or type(padding) is not str:
        raise OpError(f"{side}() takes an integer width and a string, got {show(width)} and {show(padding)}")
    if width > _MAX_PAD:
        raise OpError(f"{side}() width {show(width)} is larger than {_MAX_PAD}")
    missing = width - len(s)
    if missing <= 0:
        return s
    if not padding:
        raise OpError(f"{side}() with an empty padding string")
    fill = (padding * (missing // len(padding) + 1))[:missing]
    return fill + s if side == "padLeft" else s + fill


def pad_left(s: Value, width: Value, padding: Value = " ") -> str:
    return _pad("padLeft", s, width, padding)


def pad_right(s: Value, width: Value, padding: Value = " ") -> str:
    return _pad("padRight", s, width, padding)


#: The non-logical binary operators (``&&`` and ``||`` short-circuit: the compiler builds them).
BINARY: dict[str, Callable[[Value, Value], Value]] = {
    "==": eq,
    "!=": ne,
    "<": lt,
    "<=": le,
    ">": gt,
    ">=": ge,
    "..": range_incl,
    "..<": range_excl,
    "+": add,
    "-": sub,
    "*": mul,
    "/": div,
    "%": mod,
}
UNARY: dict[str, Callable[[Value], Value]] = {"-": negate, "+": plus, "!": not_}
# name -> (accepted argument counts, implementation taking the receiver first)
METHODS: dict[str, tuple[tuple[int, ...], Callable[..., Value]]] = {
    "intdiv": ((1,), intdiv),
    "abs": ((0,), abs_),
    "toString": ((0,), value_of),
    "padLeft": ((1, 2), pad_left),
    "padRight": ((1, 2), pad_right),
}
STATIC: dict[str, tuple[tuple[int, ...], Callable[..., Value]]] = {
    "Math.abs": ((1,), abs_),
    "Math.floorMod": ((2,), floor_mod),
    "Math.floorDiv": ((2,), floor_div),
    "Math.max": ((2,), max_),
    "Math.min": ((2,), min_),
    "String.valueOf": ((1,), value_of),
}


def coerce(x: Any, name: str, text: str, pos: int) -> Value:
    """A variable's value as the engine computes on it (``int``, ``str`` or ``bool``), else an error."""
    if type(x) is bool:
        return x
    if isinstance(x, str):
        return str.__str__(x)
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return operator.index(x)
    if x is None:
        raise error(text, f"variable {name!r} is None (SQL NULL has no shard)", pos)
    raise error(
        text,
        f"variable {name!r} has unsupported type {type(x).__name__} (integers, strings and booleans only)",
        pos,
    )

