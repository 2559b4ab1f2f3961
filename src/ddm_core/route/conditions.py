"""Shard conditions: what a WHERE / JOIN ... ON says about sharding columns.

At compile time (first sight of a SQL text) a predicate becomes a tree of
:class:`Eq` / :class:`In` / :class:`Range` atoms joined by AND / OR, whose
values are *sources* (a literal, or the index of a bound parameter). Anything
the router cannot reason about — ``NOT``, functions of the column, ``IS
NULL``, comparisons between columns — becomes :data:`ANY` ("no restriction"),
so the routed targets can only grow, never shrink wrongly.

The tree is flattened into disjunctive normal form: a list of conjunctions,
each mapping a column to its atoms. At route time the sources are resolved
against the call's params (:func:`resolve`), which is all the hot path does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, Union, final

from sqlglot import exp

from ddm_core.algorithms import ValueRange

__all__ = [
    "Param",
    "Literal",
    "Source",
    "Eq",
    "In",
    "Range",
    "Atom",
    "ANY",
    "NONE_MATCH",
    "Conjunction",
    "ColumnValues",
    "extract",
    "conjoin",
    "to_dnf",
    "resolve",
    "value_source",
]

#: A DNF larger than this is not worth enumerating: treat it as unrestricted.
MAX_CONJUNCTIONS = 64


@final
@dataclass(frozen=True, slots=True)
class Param:
    """The value of bound parameter number ``index`` (0-based, text order)."""

    index: int


@final
@dataclass(frozen=True, slots=True)
class Literal:
    """A value written in the SQL text."""

    value: Any


Source = Union[Param, Literal]


@final
@dataclass(frozen=True, slots=True)
class Eq:
    column: str  # lower-cased column name
    source: Source


@final
@dataclass(frozen=True, slots=True)
class In:
    column: str
    sources: tuple[Source, ...]


@final
@dataclass(frozen=True, slots=True)
class Range:
    column: str
    lower: Source | None
    upper: Source | None
    lower_closed: bool = True
    upper_closed: bool = True


Atom = Union[Eq, In, Range]


@dataclass(frozen=True, slots=True)
class _And:
    parts: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class _Or:
    parts: tuple[Any, ...]


class _Any:
    """No restriction (unknown predicate)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()

#: A conjunction: column → atoms that all hold. The empty mapping matches everything.
Conjunction = Mapping[str, tuple[Atom, ...]]

#: ``None`` as the DNF: the predicate cannot select rows (``WHERE 1 = 0``).
NONE_MATCH: list[Conjunction] = []


def value_source(node: exp.Expr, params: Mapping[str, int]) -> Source | None:
    """The source of a value expression, or ``None`` when it is not a plain value.

    Args:
        node: A literal, a ``:pN`` placeholder, a negated number, NULL, TRUE/FALSE.
        params: Placeholder name (``p3``) → bound-parameter index.
    """
    if isinstance(node, exp.Paren):
        return value_source(node.this, params)
    if isinstance(node, exp.Placeholder):
        index = params.get(node.name)
        return Param(index) if index is not None else None
    if isinstance(node, exp.Literal):
        if node.is_string:
            return Literal(node.this)
        text = node.this
        try:
            return Literal(int(text))
        except ValueError:
            try:
                return Literal(float(text)) if "." in text or "e" in text.lower() else None
            except ValueError:
                return None
    if isinstance(node, exp.Neg):
        inner = value_source(node.this, params)
        if isinstance(inner, Literal) and isinstance(inner.value, (int, float)):
            return Literal(-inner.value)
        return None
    if isinstance(node, exp.Boolean):
        return Literal(1 if node.this else 0)
    return None


ColumnResolver = Callable[[exp.Column], "str | None"]


def extract(predicate: exp.Expr | None, column_of: ColumnResolver, params: Mapping[str, int]) -> Any:
    """The condition tree of ``predicate``.

    Args:
        predicate: A WHERE / ON expression (``None``: no predicate).
        column_of: Maps a column reference to the sharding column name it
            restricts (lower case), or ``None`` when it is not one.
        params: Placeholder name → bound-parameter index.
    """
    if predicate is None:
        return ANY
    return _extract(predicate, column_of, params)


def _column_and_value(
    left: exp.Expr, right: exp.Expr, column_of: ColumnResolver, params: Mapping[str, int]
) -> tuple[str, Source, bool] | None:
    """(column, value, flipped) when one side is a sharding column and the other a value."""
    for col_side, val_side, flipped in ((left, right, False), (right, left, True)):
        if isinstance(col_side, exp.Column):
            column = column_of(col_side)
            if column is not None:
                source = value_source(val_side, params)
                if source is not None:
                    return column, source, flipped
    return None


_FLIP: dict[type[exp.Expr], type[exp.Expr]] = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}


def _extract(node: exp.Expr, column_of: ColumnResolver, params: Mapping[str, int]) -> Any:
    if isinstance(node, exp.Paren):
        return _extract(node.this, column_of, params)
    if isinstance(node, exp.And):
        return _And((_extract(node.left, column_of, params), _extract(node.right, column_of, params)))
    if isinstance(node, exp.Or):
        return _Or((_extract(node.left, column_of, params), _extract(node.right, column_of, params)))
    if isinstance(node, (exp.EQ, exp.NullSafeEQ)):
        found = _column_and_value(node.left, node.right, column_of, params)
        if found is None:
            return ANY
        column, source, _ = found
        if isinstance(source, Literal) and source.value is None:
            return ANY
        return Eq(column, source)
    if isinstance(node, exp.In):
        if not isinstance(node.this, exp.Column) or node.args.get("query") or node.args.get("unnest"):
            return ANY
        in_column = column_of(node.this)
        if in_column is None:
            return ANY
        sources = [value_source(v, params) for v in node.expressions]
        if not sources or any(s is None for s in sources):
            return ANY
        return In(in_column, tuple(s for s in sources if s is not None))
    if isinstance(node, exp.Between):
        if not isinstance(node.this, exp.Column):
            return ANY
        between_column = column_of(node.this)
        low = value_source(node.args["low"], params)
        high = value_source(node.args["high"], params)
        if between_column is None or low is None or high is None:
            return ANY
        return Range(between_column, low, high)
    cls = type(node)
    if cls in _FLIP and isinstance(node, exp.Binary):
        found = _column_and_value(node.left, node.right, column_of, params)
        if found is None:
            return ANY
        column, source, flipped = found
        op = _FLIP[cls] if flipped else cls
        if op is exp.GT:
            return Range(column, source, None, lower_closed=False)
        if op is exp.GTE:
            return Range(column, source, None)
        if op is exp.LT:
            return Range(column, None, source, upper_closed=False)
        return Range(column, None, source)
    if isinstance(node, exp.Boolean) and not node.this:
        return _Or(())  # FALSE: matches nothing
    return ANY  # NOT, IS NULL, LIKE, functions, column = column ...: no restriction


def conjoin(trees: list[Any]) -> Any:
    """The AND of several condition trees (WHERE and every JOIN ... ON)."""
    return trees[0] if len(trees) == 1 else _And(tuple(trees))


def to_dnf(tree: Any) -> list[Conjunction] | None:
    """Flatten a condition tree into OR-of-ANDs.

    Returns:
        A list of conjunctions (an empty list: nothing can match), or ``None``
        when the predicate does not restrict sharding columns usefully (the
        statement must go to every target).
    """
    conjunctions = _dnf(tree)
    if conjunctions is None:
        return None
    return [_group(c) for c in conjunctions]


def _dnf(node: Any) -> list[list[Atom]] | None:
    if node is ANY:
        return [[]]
    if isinstance(node, (Eq, In, Range)):
        return [[node]]
    if isinstance(node, _Or):
        out: list[list[Atom]] = []
        for part in node.parts:
            sub = _dnf(part)
            if sub is None:
                return None
            if [] in sub:  # one branch is unrestricted: so is the OR
                return [[]]
            out.extend(sub)
            if len(out) > MAX_CONJUNCTIONS:
                return None
        return out
    if isinstance(node, _And):
        acc: list[list[Atom]] = [[]]
        for part in node.parts:
            sub = _dnf(part)
            if sub is None:
                return None
            acc = [a + b for a in acc for b in sub]
            if len(acc) > MAX_CONJUNCTIONS:
                return None
        return acc
    raise TypeError(f"not a condition node: {node!r}")  # a bug, not user input


def _group(atoms: list[Atom]) -> Conjunction:
    grouped: dict[str, list[Atom]] = {}
    for atom in atoms:
        grouped.setdefault(atom.column, []).append(atom)
    return {k: tuple(v) for k, v in grouped.items()}


# -- route time -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ColumnValues:
    """What one conjunction allows for one column, with params resolved.

    ``values`` is the set of exact values (``None``: not restricted to exact
    values); ``ranges`` the range conditions that also hold.
    """

    values: tuple[Any, ...] | None
    ranges: tuple[ValueRange, ...]

    @property
    def is_empty(self) -> bool:
        return self.values is not None and not self.values


def _value(source: Source, bound: Sequence[Any]) -> Any:
    return bound[source.index] if type(source) is Param else source.value


def resolve(atoms: tuple[Atom, ...], bound: Sequence[Any]) -> ColumnValues:
    """Resolve one column's atoms of a conjunction against the bound params."""
    values: list[Any] | None = None
    ranges: list[ValueRange] = []
    for atom in atoms:
        if type(atom) is Eq:
            found = [_value(atom.source, bound)]
        elif type(atom) is In:
            found = _distinct([_value(s, bound) for s in atom.sources])
        else:
            ranges.append(
                ValueRange(
                    None if atom.lower is None else _value(atom.lower, bound),
                    None if atom.upper is None else _value(atom.upper, bound),
                    atom.lower_closed,
                    atom.upper_closed,
                )
            )
            continue
        values = found if values is None else [v for v in values if _same_in(v, found)]
    if values is not None and ranges:
        values = [v for v in values if all(_may_be_in(v, r) for r in ranges)]
    return ColumnValues(None if values is None else tuple(values), tuple(ranges))


def _distinct(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if not any(_equal(v, seen) for seen in out):
            out.append(v)
    return out


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except TypeError:
        return False


def _same_in(value: Any, found: list[Any]) -> bool:
    try:
        return value in found
    except TypeError:
        return True  # cannot compare: keep it (more targets, never fewer)


def _may_be_in(value: Any, rng: ValueRange) -> bool:
    """False only when ``value`` provably lies outside ``rng``."""
    try:
        if rng.lower is not None:
            if value < rng.lower or (value == rng.lower and not rng.lower_closed):
                return False
        if rng.upper is not None:
            if value > rng.upper or (value == rng.upper and not rng.upper_closed):
                return False
    except TypeError:
        return True
    return True
