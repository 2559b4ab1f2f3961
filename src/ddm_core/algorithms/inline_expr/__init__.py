"""Apache ShardingSphere inline expressions (``t_order_${user_id % 16}``), evaluated safely.

ShardingSphere writes sharding rules as Groovy GStrings: ``actualDataNodes:
ds$->{0..1}.t_order_$->{0..15}`` lists physical tables, ``algorithm-expression:
t_order_${user_id % 16}`` names the table of a row. This module reads that
notation without Groovy and without ``eval``, in three steps with a module
each: a hand-written lexer (:mod:`._lexer`) and precedence-climbing parser
(:mod:`._parser`) turn the text into a syntax tree (:mod:`._ast`); the compiler
(:mod:`._compiler`, with the operations' semantics in :mod:`._ops`) turns the
tree once into nested closures, and :mod:`._template` fills the names. Routing
a value is a few function calls (:func:`compile_expression` caches the
compiled form).

API::

    compile_expression("t_order_${user_id % 16}").evaluate({"user_id": 21})  # 't_order_5'
    expand("ds${0..1}.t_order_${0..1}")  # ['ds0.t_order_0', 'ds0.t_order_1', 'ds1.t_order_0', 'ds1.t_order_1']
    one = compile_expression("t_order_${user_id % 16}").bind_one()
    one(21)  # 't_order_5': the value itself, no mapping (the router's scalar path)

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
integer division (``user_id % 32 >= 16 ? 1 : 0``), and a data
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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ddm_core.algorithms.inline_expr._compiler import Compiler, period
from ddm_core.algorithms.inline_expr._errors import error
from ddm_core.algorithms.inline_expr._parser import parse
from ddm_core.algorithms.inline_expr._template import MAX_EXPANSION, Item, Slot, compile_items, evaluator, expand_items
from ddm_core.errors import InlineExpressionError

__all__ = ["MAX_EXPANSION", "InlineExpression", "compile_expression", "expand"]

_CACHE_SIZE = 4096


def _by_name(name: str) -> str:
    return name


class InlineExpression:
    """A compiled inline expression; get one from :func:`compile_expression` (cached).

    Attributes:
        text: The expression as written.
        columns: The variable (sharding column) names it references.
    """

    __slots__ = ("text", "columns", "_template", "_items", "_evaluate", "_expanded", "_one")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise InlineExpressionError(
                f"an inline expression must be a string, got {type(text).__name__}",
                expression=text,
                position=0,
            )
        text = str.__str__(text)
        self.text = text
        self._template = parse(text)
        self.columns = frozenset(self._template.columns)
        self._items: list[Item] = compile_items(self._template, Compiler(text, _by_name))
        self._evaluate = evaluator(self._items, self._template.commas, text)
        self._expanded: tuple[str, ...] | None = None
        self._one: Callable[[Any], str] | None = None

    def evaluate(self, variables: Mapping[str, Any]) -> str:
        """The one name this expression gives for ``variables`` (column name → value).

        Raises:
            InlineExpressionError: a variable is missing or has an unsupported type, an
                operation fails (division by zero, wrong types), or the expression
                yields more or fewer than one name.
        """
        return self._evaluate(variables)

    def bind_one(self) -> Callable[[Any], str]:
        """``value → name`` for an expression of at most one variable: the value itself goes in.

        The same closures as :meth:`evaluate`, compiled to read the variable's value
        directly (no mapping built per call). Raises like :meth:`evaluate`.

        Raises:
            InlineExpressionError: the expression references more than one variable.
        """
        if self._one is None:
            if len(self.columns) > 1:
                name, pos = sorted(self._template.columns.items(), key=lambda kv: kv[1])[1]
                raise error(self.text, f"bind_one() needs at most one variable; {name!r} is another", pos)
            self._one = self._namer(Compiler(self.text, None))
        return self._one

    def bind(self, order: Sequence[str]) -> Callable[[Sequence[Any]], str]:
        """``values → name`` where ``values[i]`` is the value of variable ``order[i]``.

        A variable missing from ``order`` raises "no value for variable" when
        evaluated, as :meth:`evaluate` does for a missing key.
        """
        index = {name: i for i, name in enumerate(order)}
        missing = len(order)  # past the end: the lookup fails as a missing variable
        return self._namer(Compiler(self.text, lambda name: index.get(name, missing)))

    @property
    def period(self) -> int | None:
        """``P`` such that an integer ``v`` names what ``v % P`` (``v >= 0``) or ``-((-v) % P)`` names.

        Known when the expression has one name to give (no top-level comma) and
        its one variable occurs only as ``col % n`` / ``Math.floorMod(col, n)``
        for constants ``n`` (``P`` is their least common multiple; 1 without a
        variable). ``None`` otherwise. Lets a router compute each distinct
        remainder's name once.
        """
        if len(self._items) != 1 or len(self.columns) > 1:
            return None
        moduli: frozenset[int] = frozenset()
        for part in self._items[0]:
            if isinstance(part, Slot):
                if part.node.moduli is None:
                    return None
                moduli |= part.node.moduli
        return period(moduli)

    def expand(self) -> list[str]:
        """Every name the expression stands for, in ShardingSphere's order (a new list).

        Raises:
            InlineExpressionError: the expression references a variable, a placeholder
                yields no value, or there would be more than :data:`MAX_EXPANSION` names.
        """
        if self._expanded is None:
            columns = self._template.columns
            if columns:
                name, pos = min(columns.items(), key=lambda kv: kv[1])
                raise error(
                    self.text, f"expand() has no value for variable {name!r} (use evaluate() with variables)", pos
                )
            self._expanded = tuple(expand_items(self._items, self.text))
        return list(self._expanded)

    def __repr__(self) -> str:
        return f"compile_expression({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InlineExpression) and other.text == self.text

    def __hash__(self) -> int:
        return hash((InlineExpression, self.text))

    def __reduce__(self) -> tuple[Any, ...]:
        return (compile_expression, (self.text,))

    def _namer(self, compiler: Compiler) -> Callable[[Any], str]:
        items = self._items if compiler.key_of is _by_name else compile_items(self._template, compiler)
        return evaluator(items, self._template.commas, self.text)


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
