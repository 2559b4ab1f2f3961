"""The template level: filling literal text and placeholder values into names.

A compiled template is a list of comma-separated items, each a tuple of
literal strings and compiled placeholders. :func:`evaluator` turns the one
item into a closure giving the one name for an environment (the routing
path); :func:`expand_items` lists every name a constant template stands for
(data nodes), in ShardingSphere's order.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, NoReturn, Union

from ddm_core.algorithms.inline_expr._ast import Placeholder, Template
from ddm_core.algorithms.inline_expr._compiler import Compiled, Compiler
from ddm_core.algorithms.inline_expr._errors import OpError, error
from ddm_core.algorithms.inline_expr._ops import Value, length, to_str
from ddm_core.errors import InlineExpressionError

__all__ = ["MAX_EXPANSION", "Slot", "Item", "compile_items", "evaluator", "expand_items"]

#: Most names one expression may expand to (larger is a configuration mistake).
MAX_EXPANSION = 100_000

Namer = Callable[[Any], str]  # environment -> name


class Slot:
    """A compiled placeholder: its value and the position of its ``$``."""

    __slots__ = ("node", "pos")

    def __init__(self, node: Compiled, pos: int) -> None:
        self.node = node
        self.pos = pos


Item = tuple[Union[str, Slot], ...]


def compile_items(template: Template, compiler: Compiler) -> list[Item]:
    """Every placeholder of every item compiled (constants computed: errors surface here)."""
    return [
        tuple(Slot(compiler.node(p.expr), p.pos) if isinstance(p, Placeholder) else p for p in item)
        for item in template.items
    ]


# -- placeholder values ---------------------------------------------------------------------


def placeholder_values(x: Value, text: str, pos: int) -> list[str]:
    """The strings one placeholder stands for (ShardingSphere: a LinkedHashSet of toString())."""
    t = type(x)
    if t is range:
        if length(x) > MAX_EXPANSION:
            raise error(text, f"range of {length(x)} values is larger than MAX_EXPANSION={MAX_EXPANSION}", pos)
        out = [str(k) for k in x]
    elif t is tuple:
        try:
            out = list(dict.fromkeys([to_str(k) for k in x]))
        except OpError as e:
            raise error(text, e.msg, pos) from None
    else:
        try:
            return [to_str(x)]
        except OpError as e:
            raise error(text, e.msg, pos) from None
    if not out:
        raise error(text, "placeholder yields no value", pos)
    return out


def _single(x: Value, text: str, pos: int) -> str:
    values = placeholder_values(x, text, pos)
    if len(values) != 1:
        raise error(
            text,
            f"placeholder yields {len(values)} values where one is needed (use expand() for data nodes)",
            pos,
        )
    return values[0]


def _as_str(slot: Slot, text: str) -> Namer:
    f = slot.node.fn
    pos = slot.pos

    def as_str(v: Any) -> str:
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


# -- evaluation -------------------------------------------------------------------------------


def evaluator(items: list[Item], commas: tuple[int, ...], text: str) -> Namer:
    """A closure giving the one name of the template for an environment."""
    if len(items) != 1:
        comma = commas[0]
        count = len(items)

        def several(_v: Any) -> str:
            raise error(
                text, f"evaluate() needs one name but the expression lists {count} comma-separated items", comma
            )

        return several
    pieces: list[str | Namer] = []
    for part in items[0]:
        if isinstance(part, Slot):
            if part.node.const:
                try:
                    part = _single(part.node.value, text, part.pos)
                except InlineExpressionError as e:
                    return _raiser(e)
            else:
                pieces.append(_as_str(part, text))
                continue
        if pieces and isinstance(pieces[-1], str):
            pieces[-1] += part
        else:
            pieces.append(part)
    return _join(pieces)


def _raiser(err: InlineExpressionError) -> Namer:
    message, expression, position = err.message, err.expression, err.position  # type: ignore[attr-defined]

    def fail(_v: Any) -> NoReturn:
        raise InlineExpressionError(message, expression=expression, position=position)

    return fail


def _join(pieces: list[str | Namer]) -> Namer:
    """A closure that fills the template; the common shapes get a direct form."""
    shape = tuple(isinstance(p, str) for p in pieces)
    if shape == ():
        return lambda _v: ""
    if shape == (True,):
        s = pieces[0]
        return lambda _v: s  # type: ignore[return-value]
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


# -- expansion --------------------------------------------------------------------------------


def expand_items(items: list[Item], text: str) -> list[str]:
    """Every name of a template without variables (the caller checks there are none)."""
    result: list[str] = []
    for item in items:
        choices: list[list[str]] = []
        total = len(result)
        count = 1
        for part in item:
            if isinstance(part, str):
                choices.append([part])
                continue
            values = placeholder_values(part.node.value, text, part.pos)
            choices.append(values)
            count *= len(values)
            if total + count > MAX_EXPANSION:
                raise error(text, f"expands to more than MAX_EXPANSION={MAX_EXPANSION} names", part.pos)
        result.extend("".join(combo) for combo in itertools.product(*choices))
    return result
