"""The syntax tree of an inline expression, as the parser builds it.

Every node records ``pos``, the 0-based position in the expression text that
an error about it points at (an operator, a method name, a literal), and two
facts the parser needs for its limits: ``const`` (no variable below it) and
``depth`` (operations below it, counting a constant sub-tree as one — it is
computed once at compile time).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

__all__ = ["Const", "Var", "Unary", "Binary", "Ternary", "ListOf", "Call", "Expr", "Placeholder", "Part", "Template"]


@dataclass(frozen=True, slots=True)
class Const:
    """A literal: an integer, a string or a boolean."""

    value: Any
    pos: int
    const: bool = field(default=True, compare=False)
    depth: int = field(default=1, compare=False)


@dataclass(frozen=True, slots=True)
class Var:
    """A variable: a sharding column."""

    name: str
    pos: int
    const: bool = field(default=False, compare=False)
    depth: int = field(default=1, compare=False)


@dataclass(frozen=True, slots=True)
class Unary:
    """``-x``, ``+x``, ``!x``."""

    op: str
    operand: Expr
    pos: int
    const: bool = field(compare=False)
    depth: int = field(compare=False)


@dataclass(frozen=True, slots=True)
class Binary:
    """``left op right``, the logical ``&&`` / ``||`` included."""

    op: str
    left: Expr
    right: Expr
    pos: int
    const: bool = field(compare=False)
    depth: int = field(compare=False)


@dataclass(frozen=True, slots=True)
class Ternary:
    """``cond ? yes : no``."""

    cond: Expr
    yes: Expr
    no: Expr
    pos: int
    const: bool = field(compare=False)
    depth: int = field(compare=False)


@dataclass(frozen=True, slots=True)
class ListOf:
    """``[a, b, ...]``."""

    items: tuple[Expr, ...]
    pos: int
    const: bool = field(compare=False)
    depth: int = field(compare=False)


@dataclass(frozen=True, slots=True)
class Call:
    """A method call (``name`` is ``.intdiv``, receiver first in ``args``) or a static one (``Math.abs``)."""

    name: str
    args: tuple[Expr, ...]
    pos: int
    const: bool = field(compare=False)
    depth: int = field(compare=False)


Expr = Union[Const, Var, Unary, Binary, Ternary, ListOf, Call]


@dataclass(frozen=True, slots=True)
class Placeholder:
    """One ``${...}``; ``pos`` is its ``$``."""

    expr: Expr
    pos: int


Part = Union[str, Placeholder]


@dataclass(frozen=True, slots=True)
class Template:
    """A whole expression: comma-separated items of literal text and placeholders.

    Attributes:
        items: The items, each a tuple of literal strings and placeholders.
        commas: Positions of the separating commas.
        columns: Variable name → position of its first use.
    """

    items: tuple[tuple[Part, ...], ...]
    commas: tuple[int, ...]
    columns: Mapping[str, int]
