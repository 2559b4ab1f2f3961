"""Shard conditions: what a WHERE / JOIN ... ON says about sharding columns.

At compile time (first sight of a SQL text) a predicate becomes a tree of
:class:`Eq` / :class:`In` / :class:`Range` atoms joined by AND / OR, whose
values are *sources* (a literal, or the index of a bound parameter). ``NOT``
is pushed down to the comparisons; anything the router cannot reason about —
functions of the column, ``IS NULL``, comparisons between columns, hex
literals — becomes :data:`ANY` ("no restriction"), so the routed targets can
only grow, never shrink wrongly (see :class:`_Extractor`).

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
        node: A literal, a ``:pN`` placeholder, a negated number, TRUE/FALSE.
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
    return _Extractor(column_of, params).tree(predicate, False)


#: ``NOT (col op v)`` as the range it leaves: the comparison that is TRUE exactly when ``col op v`` is FALSE.
_COMPLEMENT: dict[type[exp.Expr], type[exp.Expr]] = {exp.GT: exp.LTE, exp.GTE: exp.LT, exp.LT: exp.GTE, exp.LTE: exp.GT}
#: ``v op col`` read as ``col op' v``.
_FLIP: dict[type[exp.Expr], type[exp.Expr]] = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}
#: Integer arithmetic folded at compile time (``user_id = 40 + 2``); MySQL's DIV and % round
#: differently from Python's, and ``/`` gives a DECIMAL, so only these.
_ARITHMETIC: dict[type[exp.Expr], Callable[[int, int], int]] = {
    exp.Add: lambda a, b: a + b,
    exp.Sub: lambda a, b: a - b,
    exp.Mul: lambda a, b: a * b,
}
#: MySQL's integer arithmetic is BIGINT (signed or unsigned): a result outside fails on the server.
_BIGINT = range(-(1 << 63), 1 << 64)
_NOTHING = _Or(())  # an OR of nothing: matches no row (FALSE)


class _Extractor:
    """Turns one predicate into a condition tree (``negated``: the tree of ``NOT predicate``).

    Negation is pushed down to the comparisons (De Morgan holds in SQL's
    three-valued logic, and WHERE keeps only rows where the predicate is TRUE),
    so ``NOT user_id > 5`` narrows like ``user_id <= 5``. Whatever cannot be
    reasoned about is :data:`ANY`:

    * ``IS NULL`` and ``<=> NULL``: rows of an outer join's missing side match
      them on every node;
    * hex and bit literals (``0x0A``, ``x'0A'``, ``b'1'``) compared with a shard
      column: MySQL and MariaDB read them as a number or as bytes depending on
      the column's type and the server, so the value an algorithm should see is
      not known;
    * expressions of parameters (``user_id = ? + 1``), functions, columns compared
      with columns, subqueries, ``<>``, ``NOT IN``, ``LIKE``.

    ``col = NULL`` (and a NULL in an IN list) never holds and restricts to nothing.
    """

    __slots__ = ("column_of", "params")

    def __init__(self, column_of: ColumnResolver, params: Mapping[str, int]) -> None:
        self.column_of = column_of
        self.params = params

    def tree(self, node: exp.Expr, negated: bool) -> Any:
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Not):
            return self.tree(node.this, not negated)
        if isinstance(node, (exp.And, exp.Or)):
            parts = (self.tree(node.left, negated), self.tree(node.right, negated))
            return _And(parts) if isinstance(node, exp.And) != negated else _Or(parts)
        if isinstance(node, exp.Boolean):
            return ANY if bool(node.this) != negated else _NOTHING
        cls = type(node)
        if cls in _FLIP or cls is exp.EQ or cls is exp.NEQ or cls is exp.NullSafeEQ:
            assert isinstance(node, exp.Binary)
            return self._comparison(cls, node.left, node.right, negated)
        if negated:
            if cls is exp.Between and not node.args.get("symmetric"):
                # NOT (c BETWEEN l AND h) holds exactly when c < l or c > h.
                return _Or((self._comparison(exp.LT, node.this, node.args["low"], False),
                            self._comparison(exp.GT, node.this, node.args["high"], False)))
            return ANY  # NOT IN, NOT LIKE, IS NOT NULL...: no restriction
        if isinstance(node, exp.In):
            return self._in(node)
        if isinstance(node, exp.Between) and not node.args.get("symmetric"):
            return self._between(node)
        return ANY  # IS NULL, LIKE, EXISTS, functions...: no restriction

    def _comparison(self, cls: type[exp.Expr], left: exp.Expr, right: exp.Expr, negated: bool) -> Any:
        """``left <cls> right`` (or its negation) when one side is a shard column and the other a value."""
        if isinstance(left, exp.Tuple) and isinstance(right, exp.Tuple):
            return self._row_comparison(cls, left, right, negated)
        side = self._column_side(left, right)
        if side is None:
            return ANY
        column, value, flipped = side
        if flipped and cls in _FLIP:
            cls = _FLIP[cls]
        if negated:
            if cls is exp.NEQ:
                cls = exp.EQ  # NOT (c <> v) holds exactly when c = v
            elif cls in _COMPLEMENT:
                cls = _COMPLEMENT[cls]
            else:
                return ANY  # NOT (c = v): every other value
        if isinstance(value, exp.Null):
            # c = NULL, c < NULL, c <> NULL: never TRUE. c <=> NULL is c IS NULL.
            return ANY if cls is exp.NullSafeEQ else _NOTHING
        if cls is exp.NEQ:
            return ANY
        source = self.source(value)
        if source is None:
            return ANY
        if cls is exp.EQ or cls is exp.NullSafeEQ:
            return Eq(column, source)
        if cls is exp.GT:
            return Range(column, source, None, lower_closed=False)
        if cls is exp.GTE:
            return Range(column, source, None)
        if cls is exp.LT:
            return Range(column, None, source, upper_closed=False)
        return Range(column, None, source)

    def _between(self, node: exp.Between) -> Any:
        low, high = node.args["low"], node.args["high"]
        if isinstance(node.this, exp.Column):
            column = self.column_of(node.this)
            lower, upper = self.source(low), self.source(high)
            if column is not None and lower is not None and upper is not None:
                return Range(column, lower, upper)
        # v BETWEEN a AND b, a NULL bound...: as the two comparisons it stands for.
        return _And((self._comparison(exp.GTE, node.this, low, False), self._comparison(exp.LTE, node.this, high, False)))

    def _row_comparison(self, cls: type[exp.Expr], left: exp.Tuple, right: exp.Tuple, negated: bool) -> Any:
        """``(a, b) = (1, ?)`` is ``a = 1 AND b = ?``; ``NOT`` of it is ``a <> 1 OR b <> ?``."""
        lefts, rights = left.expressions, right.expressions
        if cls is not exp.EQ or len(lefts) != len(rights):
            return ANY  # row <, <>, <=>: lexicographic, not per column
        parts = tuple(self._comparison(exp.EQ, a, b, negated) for a, b in zip(lefts, rights))
        return _Or(parts) if negated else _And(parts)

    def _in(self, node: exp.In) -> Any:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            return ANY
        target = node.this
        values = node.expressions
        if isinstance(target, exp.Tuple):
            # (a, b) IN ((1, 2), (3, ?)): one row comparison per listed row.
            if not values or not all(isinstance(v, exp.Tuple) for v in values):
                return ANY
            return _Or(tuple(self._comparison(exp.EQ, target, v, False) for v in values))
        if not isinstance(target, exp.Column):
            return ANY
        column = self.column_of(target)
        if column is None:
            return ANY
        listed = [v for v in values if not isinstance(v, exp.Null)]  # NULL never equals anything
        sources = [self.source(v) for v in listed]
        if not values:
            return ANY
        if any(s is None for s in sources):
            return ANY
        if not sources:
            return _NOTHING
        return In(column, tuple(s for s in sources if s is not None))

    def _column_side(self, left: exp.Expr, right: exp.Expr) -> tuple[str, exp.Expr, bool] | None:
        """(sharding column, the other side, flipped) when one side is a sharding column."""
        for col_side, val_side, flipped in ((left, right, False), (right, left, True)):
            while isinstance(col_side, exp.Paren):
                col_side = col_side.this
            if isinstance(col_side, exp.Column):
                column = self.column_of(col_side)
                if column is not None:
                    while isinstance(val_side, exp.Paren):
                        val_side = val_side.this
                    return column, val_side, flipped
        return None

    def source(self, node: exp.Expr) -> Source | None:
        """A value's source; integer arithmetic of literals is folded to its result."""
        while isinstance(node, exp.Paren):
            node = node.this
        found = value_source(node, self.params)
        if found is not None or type(node) not in _ARITHMETIC:
            return found
        assert isinstance(node, exp.Binary)
        left, right = self.source(node.left), self.source(node.right)
        if type(left) is not Literal or type(right) is not Literal:
            return None
        a, b = left.value, right.value
        if type(a) is not int or type(b) is not int:
            return None  # '4' + 1, 2.5 * 2: DOUBLE / DECIMAL arithmetic, not worth guessing
        result = _ARITHMETIC[type(node)](a, b)
        return Literal(result) if result in _BIGINT else None


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
