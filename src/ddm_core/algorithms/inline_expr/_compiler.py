"""Syntax tree → nested Python closures, once per expression (no ``eval``, no generated source).

Constant sub-trees are computed here, so ``${1 / 0}`` fails when the
expression is compiled rather than when a row is routed. What is left becomes
closures over the *environment* a caller evaluates with — a mapping of column
names to values, a tuple of values in a fixed column order, or the one value
of a single-column expression itself (the router's scalar path: no dict built
per call). The routing hot path, an integer variable ``%`` or ``/`` a constant
(``user_id % 16``, ``user_id % 32 / 16``), gets closures with the integer case
inlined.

Each compiled node also says how it depends on its variables: ``moduli`` is
the set of constants ``n`` the variable occurs under as ``col % n`` or
``Math.floorMod(col, n)`` (and nowhere else), or ``None`` when it occurs
otherwise. For a one-variable expression that set makes the result periodic
in the variable (see :func:`period`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from ddm_core.algorithms.inline_expr._ast import Binary, Call, Const, Expr, ListOf, Ternary, Unary, Var
from ddm_core.algorithms.inline_expr._errors import OpError, error
from ddm_core.algorithms.inline_expr._ops import BINARY, METHODS, STATIC, UNARY, Value, coerce, kind, truth

__all__ = ["Compiled", "Compiler", "Fn", "period"]

Fn = Callable[[Any], Value]  # environment -> value


class Compiled:
    """One compiled sub-expression: a constant, or a closure over the environment."""

    __slots__ = ("fn", "const", "value", "moduli")

    def __init__(self, fn: Fn | None, value: Value = None, moduli: frozenset[int] | None = frozenset()) -> None:
        self.fn: Fn = fn if fn is not None else (lambda _v: value)
        self.const = fn is None
        self.value = value
        self.moduli = moduli


def _union(parts: Iterable[Compiled]) -> frozenset[int] | None:
    out: frozenset[int] = frozenset()
    for p in parts:
        if p.moduli is None:
            return None
        out |= p.moduli
    return out


def period(moduli: frozenset[int] | None) -> int | None:
    """The period of a one-variable result in its variable, from the ``moduli`` of its nodes.

    For ``P = lcm(moduli)`` the result for an integer ``v >= 0`` equals the
    result for ``v % P``, and for ``v < 0`` the result for ``-((-v) % P)``:
    Java's ``%`` keeps the dividend's sign and ``floorMod`` is periodic, so
    each ``col % n`` (n dividing P) sees the same remainder. ``None``: the
    variable occurs outside such a remainder.
    """
    if moduli is None:
        return None
    return math.lcm(*moduli) if moduli else 1


class Compiler:
    """Compiles nodes of one expression text for one way of reading variables.

    Args:
        text: The expression text (for error messages).
        key_of: Variable name → the key closures subscript the environment
            with (the name for a mapping, an index for a tuple); ``None``:
            the environment *is* the value of the one variable.
    """

    def __init__(self, text: str, key_of: Callable[[str], Any] | None) -> None:
        self.text = text
        self.key_of = key_of

    def error(self, msg: str, pos: int) -> Exception:
        return error(self.text, msg, pos)

    def node(self, node: Expr) -> Compiled:
        """Compile one expression node."""
        if type(node) is Const:
            return Compiled(None, node.value)
        if type(node) is Var:
            return self.var(node)
        if type(node) is Unary:
            return self.apply(UNARY[node.op], [self.node(node.operand)], node.pos)
        if type(node) is Binary:
            return self.binary(node)
        if type(node) is Ternary:
            return self.ternary(node)
        if type(node) is ListOf:
            return self.list_of(node)
        if type(node) is Call:
            return self.call(node)
        raise TypeError(f"not an expression node: {node!r}")  # a bug, not user input

    # -- leaves ---------------------------------------------------------------------------

    def var(self, node: Var) -> Compiled:
        name, pos, text = node.name, node.pos, self.text
        if self.key_of is None:

            def value(v: Any) -> Value:
                if type(v) is int or type(v) is str:
                    return v
                return coerce(v, name, text, pos)

            return Compiled(value, moduli=None)
        key = self.key_of(name)

        def lookup(v: Any) -> Value:
            try:
                x = v[key]
            except (KeyError, IndexError):
                raise error(text, f"no value for variable {name!r}", pos) from None
            except TypeError:
                raise error(text, "variables must be a mapping of names to values", pos) from None
            if type(x) is int or type(x) is str:
                return x
            return coerce(x, name, text, pos)

        return Compiled(lookup, moduli=None)

    # -- operations -----------------------------------------------------------------------

    def apply(
        self, impl: Callable[..., Value], args: list[Compiled], pos: int, moduli: frozenset[int] | None = None
    ) -> Compiled:
        """``impl`` over the arguments (computed now when all are constant).

        ``moduli``: what the result's ``moduli`` is, when not the union of the arguments'.
        """
        text = self.text
        if all(a.const for a in args):
            try:
                return Compiled(None, impl(*[a.value for a in args]))
            except OpError as e:
                raise error(text, e.msg, pos) from None
        mod = _union(args) if moduli is None else moduli
        if len(args) == 1:
            f = args[0].fn

            def apply1(v: Any) -> Value:
                try:
                    return impl(f(v))
                except OpError as e:
                    raise error(text, e.msg, pos) from None

            return Compiled(apply1, moduli=mod)
        if len(args) == 2:
            f, g = args[0].fn, args[1].fn

            def apply2(v: Any) -> Value:
                try:
                    return impl(f(v), g(v))
                except OpError as e:
                    raise error(text, e.msg, pos) from None

            return Compiled(apply2, moduli=mod)
        fns = [a.fn for a in args]

        def apply_n(v: Any) -> Value:
            try:
                return impl(*[f(v) for f in fns])
            except OpError as e:
                raise error(text, e.msg, pos) from None

        return Compiled(apply_n, moduli=mod)

    def binary(self, node: Binary) -> Compiled:
        op = node.op
        left, right = self.node(node.left), self.node(node.right)
        if op == "&&" or op == "||":
            return self.logical(op == "&&", left, right)
        if op in ("/", "%") and right.const and type(right.value) is int and not left.const:
            c = right.value
            if c == 0:
                raise self.error("division by zero" if op == "/" else "modulo by zero", node.pos)
            moduli = frozenset((abs(c),)) if op == "%" and type(node.left) is Var else left.moduli
            return self.const_divisor(op, left, node.left, c, node.pos, BINARY[op], moduli)
        return self.apply(BINARY[op], [left, right], node.pos)

    def const_divisor(
        self,
        op: str,
        left: Compiled,
        left_node: Expr,
        c: int,
        pos: int,
        slow: Callable[[Value, Value], Value],
        moduli: frozenset[int] | None,
    ) -> Compiled:
        """The routing hot path (``user_id % 16``, ``x % 32 / 16``): inline the integer case."""
        f = left.fn
        ac = abs(c)
        text = self.text

        def fallback(a: Value) -> NoReturn:
            try:
                slow(a, c)
            except OpError as e:
                raise error(text, e.msg, pos) from None
            raise AssertionError("unreachable")  # pragma: no cover

        if op == "%" and type(left_node) is Var and self.key_of is not None:
            # `column % n`, the most common rule: look the variable up here, saving a call;
            # anything unusual (missing, bool, numpy, wrong type) goes through the variable's closure.
            key = self.key_of(left_node.name)

            def var_rem(v: Any) -> Value:
                try:
                    a = v[key]
                except Exception:
                    a = f(v)  # raises the variable's own error
                if type(a) is not int:
                    a = f(v)
                    if type(a) is not int:
                        fallback(a)
                return a % ac if a >= 0 else -(-a % ac)

            return Compiled(var_rem, moduli=moduli)

        if op == "%":

            def rem(v: Any) -> Value:
                a = f(v)
                if type(a) is int:
                    return a % ac if a >= 0 else -(-a % ac)
                fallback(a)

            return Compiled(rem, moduli=moduli)

        def quot(v: Any) -> Value:
            a = f(v)
            if type(a) is int:
                q = a // ac if a >= 0 else -(-a // ac)
                return q if c > 0 else -q
            fallback(a)

        return Compiled(quot, moduli=moduli)

    def logical(self, is_and: bool, left: Compiled, right: Compiled) -> Compiled:
        moduli = _union((left, right))
        if left.const:
            if truth(left.value) != is_and:  # false && x, true || x
                return Compiled(None, not is_and)
            if right.const:
                return Compiled(None, truth(right.value))
            g = right.fn
            return Compiled(lambda v: truth(g(v)), moduli=right.moduli)
        f, g = left.fn, right.fn
        if is_and:
            return Compiled(lambda v: truth(f(v)) and truth(g(v)), moduli=moduli)
        return Compiled(lambda v: truth(f(v)) or truth(g(v)), moduli=moduli)

    def ternary(self, node: Ternary) -> Compiled:
        cond, yes, no = self.node(node.cond), self.node(node.yes), self.node(node.no)
        if cond.const:
            return yes if truth(cond.value) else no
        c, a, b = cond.fn, yes.fn, no.fn
        return Compiled(lambda v: a(v) if truth(c(v)) else b(v), moduli=_union((cond, yes, no)))

    def list_of(self, node: ListOf) -> Compiled:
        items = [self.node(item) for item in node.items]
        for item, source in zip(items, node.items):
            if item.const and kind(item.value) == "list":
                raise self.error("a list inside a list is not supported", source.pos)
        if all(item.const for item in items):
            return Compiled(None, tuple(item.value for item in items))
        fns = [item.fn for item in items]
        return Compiled(lambda v: tuple([f(v) for f in fns]), moduli=_union(items))

    def call(self, node: Call) -> Compiled:
        name, pos = node.name, node.pos
        args = [self.node(a) for a in node.args]
        if name == ".intdiv" and not args[0].const and args[1].const and type(args[1].value) is int:
            c = args[1].value
            if c == 0:
                raise self.error("division by zero", pos)
            return self.const_divisor("/", args[0], node.args[0], c, pos, METHODS["intdiv"][1], args[0].moduli)
        impl = STATIC[name][1] if not name.startswith(".") else METHODS[name[1:]][1]
        moduli = None
        if name == "Math.floorMod" and type(node.args[0]) is Var and args[1].const:
            divisor = args[1].value
            if type(divisor) is int and divisor != 0:
                moduli = frozenset((abs(divisor),))
        return self.apply(impl, args, pos, moduli)
