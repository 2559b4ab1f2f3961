"""Finishing aggregates across shards: fold the units' partial rows of one group.

Each unit ran the rewritten statement (see ``route/query/select_rewrite.py``), so a
group's partial rows carry partial aggregates; this module folds them into the
value one unsharded table would have given:

* ``COUNT`` — the sum of the partial counts (``0`` when there are none).
* ``SUM`` — the sum of the non-NULL partial sums; NULL when every one is NULL.
* ``MIN`` / ``MAX`` — over the non-NULL partials; NULL when there are none. A
  string column with a collation key compares by it; of equal values the first
  partial (in unit order) is kept.
* ``AVG`` — ``sum(partial sums) / sum(partial counts)``; NULL when the count is 0.
* ``COUNT(DISTINCT x)`` / ``SUM(DISTINCT x)`` — the units grouped by ``x`` too,
  so the column holds raw ``x`` values: count / sum the distinct non-NULL ones
  (``0`` / NULL when there are none); ``COUNT(DISTINCT)`` counts distinct
  collation keys of a string column that has one. The units sent raw values, so a MySQL
  ``SUM(DISTINCT int_column)`` is turned into the ``Decimal`` MySQL returns.

Numbers (MySQL semantics, ``dialect="mysql"``):

* Sums keep the type their arithmetic gives: ``Decimal`` partials (MySQL returns
  DECIMAL for SUM of DECIMAL *and* of integer columns) stay exact ``Decimal`` —
  added in a 120-digit context, so 65-digit DECIMALs never round — ints stay
  ints, floats stay floats. A ``Decimal`` meeting a ``float`` gives a float.
* ``AVG`` of ``Decimal`` or ``int`` partial sums is a ``Decimal`` with MySQL's
  scale: the sum's scale + 4 (``div_precision_increment``), at most 30, rounded
  half up — ``AVG`` of ``1, 2, 2`` is ``Decimal("1.6667")``, of DECIMAL(10,2)
  ``1.00, 2.00, 2.00`` it is ``Decimal("1.666667")``, exactly what MySQL sends.
  ``AVG`` of float partial sums is a float, like MySQL's AVG of DOUBLE.
* ``dialect="sqlite"``: ``AVG`` is always a float (SQLite's ``avg()`` returns
  REAL), so a sharded SQLite result compares equal to an unsharded one.

Each backend's rules are answers of its :class:`~ddm_core.dialects.Dialect`
(``exact_average``, ``sum_of_integers_is_decimal``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable, Mapping, Sequence

from ddm_core import dialects
from ddm_core.dialects import EXACT as _CTX
from ddm_core.errors import MergeError

from ddm_core.merge.collation import Collation
from ddm_core.merge.spec import Aggregate

__all__ = ["Reaggregator", "DIALECTS", "avg_value"]

#: ``dialect`` values :func:`ddm_core.merge.merge_results` understands: every backend's name.
DIALECTS = dialects.KINDS

_COUNT, _SUM, _MIN, _MAX, _AVG, _COUNT_DISTINCT, _SUM_DISTINCT, _MIN_KEYED, _MAX_KEYED = range(9)
_KINDS = {"COUNT": _COUNT, "SUM": _SUM, "MIN": _MIN, "MAX": _MAX, "AVG": _AVG}


def _add(a: Any, b: Any) -> Any:
    """``a + b`` for partial sums: exact for Decimal, float when a float is involved."""
    if type(a) is Decimal or type(b) is Decimal:
        if isinstance(a, float) or isinstance(b, float):
            return float(a) + float(b)
        return _CTX.add(a, b)
    return a + b


def avg_value(total: Any, count: Any, dialect: str = dialects.INPUT) -> Any:
    """``total / count`` the way the database's own ``AVG`` would have returned it.

    Args:
        total: Sum of the values (None when there were none).
        count: How many values were summed.
        dialect: The backend's name: exact sums are divided as its
            :meth:`~ddm_core.dialects.Dialect.exact_average` says (MySQL: DECIMAL
            with scale + 4; SQLite: a float); float sums give a float.
    """
    return _average(total, count, dialects.dialect_for(dialect))


def _average(total: Any, count: Any, dialect: dialects.Dialect) -> Any:
    if total is None or not count:
        return None
    if isinstance(total, float):
        return float(total) / count
    if isinstance(total, (Decimal, int)) and not isinstance(total, bool):
        return dialect.exact_average(Decimal(total), count)
    try:
        return float(total) / count
    except (TypeError, ValueError):
        raise MergeError(f"AVG cannot divide a sum of type {type(total).__name__}", value=total) from None


class Reaggregator:
    """Folds the partial rows of one group into the merged row.

    Args:
        aggregates: The spec's aggregates, column indexes already resolved (>= 0).
        dialect: See :func:`avg_value`.
        keys: Collations by column (:mod:`ddm_core.merge.keys`): ``MIN`` /
            ``MAX`` and ``COUNT(DISTINCT)`` of those columns compare their keys.

    A group's state is a list ``[first_row, acc_0, acc_1, ...]``; columns that
    are not aggregates keep the first partial row's value (group keys are equal
    in every partial row; other columns are MySQL's ``ANY_VALUE``).
    """

    __slots__ = ("_ops", "_dialect", "_keys")
    _keys: dict[int, Callable[[str], str]]  # str values of a column → their collation keys

    def __init__(
        self,
        aggregates: Sequence[Aggregate],
        dialect: str = dialects.INPUT,
        keys: Mapping[int, Collation] | None = None,
    ) -> None:
        text_keys = {col: c.key for col, c in (keys or {}).items() if c.key is not None}
        ops: list[tuple[int, int, int, int]] = []  # (kind, column, arg, count_arg)
        for agg in aggregates:
            kind = _KINDS.get(str(agg.func).upper())
            if kind is None:
                raise MergeError(f"cannot merge aggregate {agg.func!r}: only COUNT, SUM, MIN, MAX, AVG", value=agg)
            if agg.distinct:
                if kind not in (_COUNT, _SUM) or len(agg.args) != 1:
                    raise MergeError(f"cannot merge {agg.func}(DISTINCT) with args {agg.args!r}", value=agg)
                kind = _COUNT_DISTINCT if kind == _COUNT else _SUM_DISTINCT
            if kind == _AVG:
                if len(agg.args) != 2:
                    raise MergeError(f"AVG needs (sum_column, count_column) args, not {agg.args!r}", value=agg)
                ops.append((kind, agg.column, agg.args[0], agg.args[1]))
            else:
                if len(agg.args) != 1:
                    raise MergeError(f"{agg.func} needs one arg column, not {agg.args!r}", value=agg)
                if agg.args[0] in text_keys and kind in (_MIN, _MAX):
                    kind = _MIN_KEYED if kind == _MIN else _MAX_KEYED
                ops.append((kind, agg.column, agg.args[0], -1))
        self._ops = tuple(ops)
        self._dialect = dialects.dialect_for(dialect)
        self._keys = text_keys

    def start(self, row: Sequence[Any]) -> list[Any]:
        """A new group whose first partial row is ``row``."""
        state: list[Any] = [row]
        for kind, _, _, _ in self._ops:
            if kind == _COUNT:
                state.append(0)
            elif kind == _AVG:
                state.append([None, 0])
            elif kind in (_COUNT_DISTINCT, _SUM_DISTINCT):
                state.append(set())
            else:
                state.append(None)
        self.add(state, row)
        return state

    def add(self, state: list[Any], row: Sequence[Any]) -> None:
        """Fold one more partial row of the group."""
        i = 0
        for kind, _, arg, count_arg in self._ops:
            i += 1
            v = row[arg]
            if kind == _AVG:
                acc = state[i]
                if v is not None:
                    acc[0] = v if acc[0] is None else _add(acc[0], v)
                c = row[count_arg]
                if c is not None:
                    acc[1] += c
                continue
            if v is None:
                continue
            if kind == _COUNT:
                state[i] += v
            elif kind == _SUM:
                acc = state[i]
                state[i] = v if acc is None else _add(acc, v)
            elif kind == _MIN_KEYED or kind == _MAX_KEYED:
                acc = state[i]  # (key, value): the value's key, computed once
                k = self._keys[arg](v)
                if acc is None or (k < acc[0] if kind == _MIN_KEYED else acc[0] < k):
                    state[i] = (k, v)
            elif kind == _MIN or kind == _MAX:
                acc = state[i]
                try:
                    if acc is None or (v < acc if kind == _MIN else acc < v):
                        state[i] = v
                except TypeError:
                    raise MergeError(
                        f"column {arg} holds values that cannot be compared: "
                        f"{type(acc).__name__} and {type(v).__name__}",
                        column=arg,
                    ) from None
            else:
                if kind == _COUNT_DISTINCT and arg in self._keys:
                    v = self._keys[arg](v)  # distinct under the collation
                try:
                    state[i].add(v)
                except TypeError:
                    raise MergeError(
                        f"DISTINCT aggregate column {arg} holds an unhashable {type(v).__name__}", column=arg
                    ) from None

    def result(self, state: list[Any]) -> tuple[Any, ...]:
        """The merged row of a finished group (derived columns still in place)."""
        out = list(state[0])
        i = 0
        for kind, column, _, count_arg in self._ops:
            i += 1
            acc = state[i]
            if kind == _AVG:
                out[column] = _average(acc[0], acc[1], self._dialect)
                out[count_arg] = acc[1]  # the derived COUNT(x), now the total
            elif kind == _COUNT_DISTINCT:
                out[column] = len(acc)
            elif kind == _MIN_KEYED or kind == _MAX_KEYED:
                out[column] = None if acc is None else acc[1]
            elif kind == _SUM_DISTINCT:
                total: Any = None
                for v in acc:
                    total = v if total is None else _add(total, v)
                if type(total) is int and self._dialect.sum_of_integers_is_decimal:
                    total = Decimal(total)  # as the backend types SUM of an integer column
                out[column] = total
            else:
                out[column] = acc
        return tuple(out)

    def empty(self, width: int) -> tuple[Any, ...]:
        """The one row of an aggregate without GROUP BY over no rows at all."""
        return self.result(self.start((None,) * width))
