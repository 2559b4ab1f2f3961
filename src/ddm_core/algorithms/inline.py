"""Inline-expression sharding: INLINE, COMPLEX_INLINE, HINT_INLINE (ShardingSphere props).

The expression (``t_order_${user_id % 16}``) is evaluated by
:mod:`ddm_core.algorithms.inline_expr` — a safe Groovy subset with one
deliberate difference: ``/`` between integers is integer division, so
``ds${user_id % 32 / 16}`` names ``ds0``/``ds1`` (real Groovy would build
``ds0.3125``; docs/notes.md#integer-division-in-inline-expressions). ``%``
keeps Java's sign rule (``-7 % 16 == -7``: a negative id names ``t_order_-7``,
which exists nowhere, so it raises RoutingError — use
``Math.floorMod(user_id, 16)`` for negative keys). Values are passed as they
arrive (ints, strings, booleans); a value the expression cannot compute on
(``None``, ``'abc' % 16``) raises ShardValueError. The name must be one of the
targets, else RoutingError.

INLINE
    One sharding column; ``algorithm-expression`` may reference only it.
    Range conditions: ShardingSphere refuses them unless
    ``allow-range-query-with-inline-sharding: true``, and then routes to every
    target. ddm-core does the same: ``supports_range`` mirrors the flag and
    :meth:`range` raises :class:`~ddm_core.errors.UnsupportedSQLError` naming
    the prop when it is off.

COMPLEX_INLINE
    Several columns (``sharding-columns``, default: those the expression
    references); every referenced column is required.

HINT_INLINE
    The value comes from the hint context, not the SQL: ``precise(targets,
    {"value": v})`` (a single value under another key is taken as the hint
    value too); ``algorithm-expression`` defaults to ``${value}``.

Batches: ``<prefix>${col % N}<suffix>`` and the other common single-column
shapes (``${col % N / M}``, ``${(col % N).intdiv(M)}``,
``${Math.floorMod(col, N)}``) route integer arrays in numpy; the expression
itself is evaluated once per distinct shard (and must agree with the numpy
result, else the batch falls back). Other expressions are evaluated per row.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ddm_core.errors import InlineExpressionError, RoutingError, ShardValueError, UnsupportedSQLError
from ddm_core.algorithms._props import Props
from ddm_core.algorithms._targets import TargetSet, show_targets, target_set
from ddm_core.algorithms._values import null_error
from ddm_core.algorithms.base import ShardingAlgorithm, ValueRange
from ddm_core.algorithms.inline_expr import InlineExpression, compile_expression
from ddm_core.algorithms.registry import register

__all__ = ["InlineAlgorithm", "ComplexInlineAlgorithm", "HintInlineAlgorithm"]

_ALLOW_RANGE = "allow-range-query-with-inline-sharding"

# -- the numpy fast path for the common single-column shapes ----------------------------

_LIT = r"[^${}\\,\"'<]*"
_NUM = r"([1-9][0-9]{0,17})"
_COL = r"([A-Za-z_][A-Za-z_0-9]*)"
_S = r"\s*"
_TEMPLATE = re.compile(rf"(?P<pre>{_LIT})\$(?:->)?\{{(?P<body>[^{{}}]*)\}}(?P<post>{_LIT})")
_BODIES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"{_S}{_COL}{_S}%{_S}{_NUM}{_S}"), "rem"),
    (re.compile(rf"{_S}{_COL}{_S}%{_S}{_NUM}{_S}/{_S}{_NUM}{_S}"), "rem_div"),
    (re.compile(rf"{_S}\({_S}{_COL}{_S}%{_S}{_NUM}{_S}\){_S}\.{_S}intdiv{_S}\({_S}{_NUM}{_S}\){_S}"), "rem_div"),
    (re.compile(rf"{_S}Math{_S}\.{_S}floorMod{_S}\({_S}{_COL}{_S},{_S}{_NUM}{_S}\){_S}"), "floor_mod"),
]


class _FastShape:
    """A recognised ``<pre>${col % N [/ M]}<post>`` expression, computed on int arrays."""

    def __init__(self, pre: str, post: str, column: str, kind: str, n: int, m: int) -> None:
        self.pre, self.post = pre, post
        self.column, self.kind, self.n, self.m = column, kind, n, m

    def numbers(self, a: np.ndarray) -> np.ndarray:
        if a.dtype == np.uint64:
            r = (a % np.uint64(self.n)).astype(np.int64)
        elif self.kind == "floor_mod":
            r = np.remainder(a, self.n)
        else:
            r = np.fmod(a, self.n)  # Java %: the sign of the dividend
        if self.kind == "rem_div":
            r = np.sign(r) * (np.abs(r) // self.m)  # Java /: truncate toward zero
        return r

    def name(self, number: int) -> str:
        return f"{self.pre}{number}{self.post}"


def _recognise(text: str) -> _FastShape | None:
    m = _TEMPLATE.fullmatch(text)
    if m is None:
        return None
    for pattern, kind in _BODIES:
        b = pattern.fullmatch(m.group("body"))
        if b is not None:
            groups = b.groups()
            m2 = int(groups[2]) if len(groups) > 2 else 1
            return _FastShape(m.group("pre"), m.group("post"), groups[0], kind, int(groups[1]), m2)
    return None


# -- shared ---------------------------------------------------------------------------------


class _InlineBase(ShardingAlgorithm):
    """Evaluate an inline expression and check the name against the targets."""

    expression: InlineExpression
    variables: tuple[str, ...]

    def _compile(self, props: Props, default: str | None = None) -> None:
        text = props.text("algorithm-expression") if default is None else props.text("algorithm-expression", default)
        try:
            self.expression = compile_expression(text.strip())
        except InlineExpressionError as exc:
            props.fail("algorithm-expression", text, exc.message)
        self.variables = tuple(sorted(self.expression.columns))
        self._fast = _recognise(self.expression.text)

    def _bind(self, values: Mapping[str, Any]) -> dict[str, Any]:
        bound = {}
        for column in self.variables:
            value = self._column(values, column)
            if value is None:
                raise null_error(self.label, self.name, column)
            bound[column] = value
        return bound

    def _evaluate(self, bound: Mapping[str, Any], row: int | None = None) -> str:
        try:
            return self.expression.evaluate(bound)
        except InlineExpressionError as exc:
            where = f"row {row}: " if row is not None else ""
            raise ShardValueError(
                f"{self.label}: {where}cannot evaluate {self.expression.text!r} for {dict(bound)}: "
                f"{exc.message}",
                algorithm=self.name,
                value=dict(bound),
            ) from exc

    def _index(self, ts: TargetSet, name: str, bound: Mapping[str, Any], row: int | None = None) -> int:
        i = ts.position.get(name)
        if i is None:
            where = f"row {row}: " if row is not None else ""
            raise RoutingError(
                f"{self.label}: {where}{self.expression.text!r} gives {name!r} for {dict(bound)}, "
                f"which is not among the targets {show_targets(ts.names)}",
                algorithm=self.name,
                value=dict(bound),
                result=name,
                targets=ts.names,
            )
        return i

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        bound = self._bind(values)
        name = self._evaluate(bound)
        ts = target_set(targets)
        if name not in ts.position:
            self._index(ts, name, bound)
        return [name]

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        slow = super().scalar(targets, column)
        if not self._reads(column):
            return slow  # the expression needs another column: precise says which
        return _point_index(self.expression, target_set(targets), slow)

    def multi_scalar(self, targets: Sequence[str], columns: Sequence[str]) -> Callable[[Sequence[Any]], int]:
        slow = super().multi_scalar(targets, columns)
        by_lower = {v.lower(): v for v in self.variables}
        order = [by_lower.get(c.lower(), "") for c in columns]  # "" names no variable
        if not set(self.variables) <= set(order):
            return slow  # a referenced column has no value: precise names it
        name_of, position = self.expression.bind(order), target_set(targets).position

        def index(values: Sequence[Any]) -> int:
            try:
                i = position.get(name_of(values))
            except InlineExpressionError:
                i = None
            return i if i is not None else slow(values)

        return index

    def _reads(self, column: str) -> bool:
        """Whether the one value of ``column`` is all the expression needs."""
        return not self.variables or (len(self.variables) == 1 and self.variables[0].lower() == column.lower())

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        ts = target_set(targets)
        if self._fast is not None and len(self.variables) == 1:
            arr = np.asarray(self._column(columns, self._fast.column))
            if arr.ndim == 1 and arr.dtype.kind in "iu":
                out = self._fast_batch(ts, arr)
                if out is not None:
                    return out
        arrays = {c: np.asarray(self._column(columns, c)) for c in self.variables}
        lengths = {a.shape for a in arrays.values()}
        if len(lengths) > 1 or any(len(s) != 1 for s in lengths):
            raise RoutingError(f"{self.label}: batch columns must be 1-D arrays of one length", algorithm=self.name)
        if not arrays:  # a constant expression
            n = len(next(iter(columns.values()))) if columns else 0
            return np.full(n, self._index(ts, self._evaluate({}), {}), dtype=np.intp)
        lists = {c: a.tolist() for c, a in arrays.items()}
        n = len(next(iter(lists.values())))
        out = np.empty(n, dtype=np.intp)
        position = ts.position
        evaluate: Callable[[Mapping[str, Any]], str] = self.expression.evaluate
        for row in range(n):
            bound = {c: lst[row] for c, lst in lists.items()}
            try:
                name = evaluate(bound)
            except InlineExpressionError:
                for c, v in bound.items():
                    if v is None:
                        raise null_error(self.label, self.name, c) from None
                name = self._evaluate(bound, row)
            i = position.get(name)
            out[row] = i if i is not None else self._index(ts, name, bound, row)
        return out

    def _fast_batch(self, ts: TargetSet, arr: np.ndarray) -> np.ndarray | None:
        """Route by the numpy shape; ``None`` if the expression disagrees with it."""
        fast = self._fast
        assert fast is not None
        numbers = fast.numbers(arr)
        if fast.n <= 1 << 16:  # results lie in -(n-1) .. n-1: a table, no sort
            shifted = numbers + fast.n
            first = np.full(2 * fast.n, -1, dtype=np.intp)
            first[shifted[::-1]] = np.arange(numbers.shape[0] - 1, -1, -1, dtype=np.intp)
            present = np.flatnonzero(first >= 0)
            lut = np.full(2 * fast.n, -1, dtype=np.intp)
            for slot in present.tolist():
                index = self._fast_target(ts, fast, arr, int(first[slot]), slot - fast.n)
                if index is None:
                    return None
                lut[slot] = index
            routed: np.ndarray = lut[shifted]
            return routed
        uniq, first_rows, inverse = np.unique(numbers, return_index=True, return_inverse=True)
        table = np.empty(uniq.shape[0], dtype=np.intp)
        for k, (number, row) in enumerate(zip(uniq.tolist(), first_rows.tolist())):
            index = self._fast_target(ts, fast, arr, row, number)
            if index is None:
                return None
            table[k] = index
        return table[inverse.reshape(-1)]

    def _fast_target(self, ts: TargetSet, fast: _FastShape, arr: np.ndarray, row: int, number: int) -> int | None:
        bound = {fast.column: int(arr[row])}
        name = self._evaluate(bound, row)  # the real expression, once per distinct shard
        if name != fast.name(number):
            return None  # the shape did not mean what we thought: evaluate row by row
        return self._index(ts, name, bound, row)


#: Most distinct remainders a periodic expression remembers the target of (per target list).
_MAX_PERIOD = 1 << 16


def _point_index(expression: InlineExpression, ts: TargetSet, slow: Callable[[Any], int]) -> Callable[[Any], int]:
    """``value → target index`` through the expression compiled for one value.

    A periodic expression (``t_${user_id % 16}``, ``ds${user_id % 32 / 16}``:
    see :attr:`InlineExpression.period`) is evaluated once per distinct
    remainder, then answered from a dict; any other is evaluated per call.
    Values the expression cannot name a target for go to ``slow`` (precise),
    which raises the full error.
    """
    name_of, position, period = expression.bind_one(), ts.position, expression.period

    def evaluated(value: Any) -> int:
        try:
            i = position.get(name_of(value))
        except InlineExpressionError:
            i = None
        return i if i is not None else slow(value)

    if not expression.columns:
        return evaluated  # a constant name (no variable to compute on)
    if period is None or period > _MAX_PERIOD:
        return evaluated
    known: dict[int, int] = {}

    def periodic(value: Any) -> int:
        if type(value) is not int:
            return evaluated(value)  # numpy integers, strings...: the closures coerce or refuse them
        r = value % period if value >= 0 else -(-value % period)  # names what `value` names
        i = known.get(r)
        if i is None:
            i = evaluated(r)  # raises (through precise) when r names no target
            known[r] = i
        return i

    return periodic


@register
class InlineAlgorithm(_InlineBase):
    """``INLINE``: ``algorithm-expression`` over one sharding column."""

    type_name = "INLINE"
    PROPS = {
        "algorithm-expression": "e.g. t_order_${user_id % 16} (required)",
        _ALLOW_RANGE: "true: range conditions route to every target (default false: refused)",
    }

    def _configure(self, props: Props) -> None:
        self._compile(props)
        if len(self.variables) > 1:
            props.fail(
                "algorithm-expression",
                self.expression.text,
                f"references {len(self.variables)} columns {list(self.variables)}; use COMPLEX_INLINE",
            )
        self.allow_range = props.boolean(_ALLOW_RANGE, False)
        self.supports_range = self.allow_range  # type: ignore[misc]

    def range(self, targets: Sequence[str], ranges: Mapping[str, ValueRange]) -> list[str]:
        if not self.allow_range:
            raise UnsupportedSQLError(
                f"{self.label}: a range condition on {sorted(ranges)} cannot be routed by "
                f"{self.expression.text!r}; set {_ALLOW_RANGE}: true to send it to every target",
                algorithm=self.name,
                prop=_ALLOW_RANGE,
            )
        return list(targets)

    def describe(self) -> str:
        return f"INLINE({self.expression.text})"


@register
class ComplexInlineAlgorithm(_InlineBase):
    """``COMPLEX_INLINE``: ``algorithm-expression`` over several sharding columns."""

    type_name = "COMPLEX_INLINE"
    PROPS = {
        "algorithm-expression": "e.g. t_order_${(user_id + tenant_id) % 16} (required)",
        "sharding-columns": "the sharding columns (default: those the expression references)",
        _ALLOW_RANGE: "true: range conditions route to every target (default false: refused)",
    }

    def _configure(self, props: Props) -> None:
        self._compile(props)
        declared = props.columns("sharding-columns") if props.has("sharding-columns") else self.variables
        missing = sorted(set(v.lower() for v in self.variables) - {c.lower() for c in declared})
        if missing:
            props.fail(
                "sharding-columns",
                props.raw("sharding-columns", None),
                f"does not list {missing}, which algorithm-expression references",
            )
        self.sharding_columns = tuple(declared)
        self.allow_range = props.boolean(_ALLOW_RANGE, False)
        self.supports_range = self.allow_range  # type: ignore[misc]

    range = InlineAlgorithm.range

    def describe(self) -> str:
        return f"COMPLEX_INLINE({self.expression.text})"


@register
class HintInlineAlgorithm(_InlineBase):
    """``HINT_INLINE``: the hint value, through ``algorithm-expression`` (default ``${value}``)."""

    type_name = "HINT_INLINE"
    PROPS = {"algorithm-expression": "over the variable 'value' (default ${value})"}

    def _configure(self, props: Props) -> None:
        self._compile(props, "${value}")
        extra = [v for v in self.variables if v != "value"]
        if extra:
            props.fail(
                "algorithm-expression",
                self.expression.text,
                f"may reference only 'value' (the hint value), not {extra}",
            )

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        if "value" not in values:
            if len(values) == 1:  # a hint given under another key: take the one value
                values = {"value": next(iter(values.values()))}
            else:
                self._column(values, "value")  # raises ShardKeyNotFoundError
        return super().precise(targets, values)

    def _reads(self, column: str) -> bool:
        return True  # a single value under any key is the hint value (see precise)

    def describe(self) -> str:
        return f"HINT_INLINE({self.expression.text})"
