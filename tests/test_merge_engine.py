"""merge_results: the units' rows merged must equal the same query on one table.

No database: a table (hypothesis) is split into k shards; each unit's rows are
computed in Python the way MySQL would run the *rewritten* unit statement
(partial aggregates, derived columns, the unit's ORDER BY, LIMIT offset+limit
when not grouped — see ``route/query/select_rewrite.py``); the oracle runs the
caller's query on the whole table. The spec is built the way the router builds
it (derived columns appended after the visible ones, AVG → SUM + derived COUNT,
DISTINCT aggregates → the raw argument added to the units' GROUP BY, HAVING on
the merged row, negative indexes for ``SELECT *``).

Ordered results are compared row for row on their sort keys, and every row
must be an oracle row (as a multiset), so ties may come out in any order but
nothing is lost, invented or repeated.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import inspect
import operator
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from math import floor
from typing import Any, Callable, Iterable, Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddm_core._fast import Implementation
from ddm_core.errors import MergeError
from ddm_core.merge import Merged, UnitRows, avg_value, merge_results
from ddm_core.route.plan import Aggregate, MergeSpec

Row = tuple[Any, ...]
Expr = tuple[Any, ...]  # ("col", c) | ("agg", func, c or None for *, distinct)

COLS = ("id", "g", "h", "x", "d")
ID, G, H, X, D = range(5)
SCALE = {X: 0, D: 2}  # MySQL: SUM(INT) is DECIMAL(.., 0), d is DECIMAL(10, 2)


def merger(impl: Implementation) -> Callable[..., Merged]:
    """``merge_results`` running on one heap_merge twin."""
    return functools.partial(merge_results, heap_merge=impl.merge.heap_merge)


def typed(rows: Iterable[Sequence[Any]]) -> list[tuple[tuple[type, Any], ...]]:
    """Rows as (type, value) pairs: ``Decimal(3) == 3``, but only one of them is what MySQL sends."""
    return [tuple((type(v), v) for v in row) for row in rows]


def assert_rows(got: Iterable[Sequence[Any]], want: Iterable[Sequence[Any]]) -> None:
    """Equal rows, every value of the expected type too."""
    got, want = list(got), list(want)
    assert typed(got) == typed(want), (got, want)


def desc(names: Sequence[str]) -> tuple[tuple[Any, ...], ...]:
    return tuple((n, None, None, None, None, None, None) for n in names)


# -- a tiny MySQL, in Python --------------------------------------------------------------


def mysql_avg(values: list[Any], scale: int) -> Decimal:
    """AVG as MySQL returns it: DECIMAL with scale + 4, rounded half away from zero (exact)."""
    q = Fraction(sum(values)) / len(values) * 10 ** (scale + 4)
    n = floor(abs(q) + Fraction(1, 2))
    return Decimal(n if q >= 0 else -n).scaleb(-(scale + 4))


def db_agg(func: str, col: int | None, distinct: bool, group: Sequence[Row]) -> Any:
    if col is None:
        return len(group)  # COUNT(*)
    vals = [r[col] for r in group if r[col] is not None]
    if distinct:
        vals = list(set(vals))
    if func == "COUNT":
        return len(vals)
    if not vals:
        return None
    if func == "SUM":
        return Decimal(sum(vals))  # MySQL: SUM of INT or DECIMAL is a DECIMAL
    if func == "MIN":
        return min(vals)
    if func == "MAX":
        return max(vals)
    assert func == "AVG"
    return mysql_avg(vals, SCALE[col])


def sort_like_mysql(rows: list[Row], order: Sequence[tuple[int, bool]]) -> None:
    for col, descending in reversed(order):
        rows.sort(key=lambda r: (False,) if r[col] is None else (True, r[col]), reverse=descending)


def run_select(
    rows: Sequence[Row],
    exprs: Sequence[Expr],
    *,
    group: Sequence[int],
    grouped: bool,
    order: Sequence[tuple[int, bool]],
    distinct: bool = False,
    distinct_width: int | None = None,
    having: Callable[[Sequence[Any]], bool] | None = None,
    limit: int | None = None,
) -> list[Row]:
    """SELECT [DISTINCT] exprs FROM rows [GROUP BY group] [HAVING] ORDER BY order [LIMIT]."""
    if grouped:
        groups: dict[tuple[Any, ...], list[Row]] = {}
        for r in rows:
            groups.setdefault(tuple(r[c] for c in group), []).append(r)
        if not group:
            groups = {(): list(rows)}  # aggregates without GROUP BY: one row, even over nothing
        out = [
            tuple(g[0][e[1]] if e[0] == "col" else db_agg(e[1], e[2], e[3], g) for e in exprs)
            for g in groups.values()
        ]
    else:
        out = [tuple(r[e[1]] for e in exprs) for r in rows]
    if having is not None:
        out = [r for r in out if having(r)]
    if distinct:
        seen: set[tuple[Any, ...]] = set()
        kept = []
        for r in out:
            key = r[:distinct_width]
            if key not in seen:
                seen.add(key)
                kept.append(r)
        out = kept
    sort_like_mysql(out, order)
    return out if limit is None else out[:limit]


# -- the query model and the router's rewrite of it ---------------------------------------


@dataclass
class Query:
    items: list[Expr] | None  # None: SELECT *
    group: list[int] = field(default_factory=list)
    aggregates_only: bool = False
    order: list[tuple[Expr, bool]] = field(default_factory=list)
    having: tuple[Expr, str, Any] | None = None
    distinct: bool = False
    offset: int = 0
    limit: int | None = None


_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "=": operator.eq, "!=": operator.ne}


@dataclass
class Built:
    spec: MergeSpec
    unit_exprs: list[Expr]
    oracle_exprs: list[Expr]
    unit_group: list[int]
    unit_order: list[tuple[int, bool]]
    order: list[tuple[int, bool]]  # spec.order_by, resolved (>= 0)
    grouped: bool
    visible: int
    width: int
    unit_limit: int | None


def expr_name(e: Expr) -> str:
    if e[0] == "col":
        return COLS[e[1]]
    _, func, col, distinct = e
    return f"{func}({'DISTINCT ' if distinct else ''}{'*' if col is None else COLS[col]})"


def build(q: Query) -> Built:
    """What select_rewrite does to ``q``: unit expressions, derived columns and the MergeSpec."""
    star = q.items is None
    items: list[Expr] = [("col", c) for c in range(len(COLS))] if q.items is None else list(q.items)
    n = len(items)
    unit: list[Expr] = []
    oracle: list[Expr] = []
    extra_unit: list[Expr] = []
    extra_oracle: list[Expr] = []
    aggs: list[Aggregate] = []
    distinct_args: list[tuple[int, int]] = []

    def derive(unit_expr: Expr, oracle_expr: Expr) -> int:
        extra_unit.append(unit_expr)
        extra_oracle.append(oracle_expr)
        return n + len(extra_unit) - 1

    for i, e in enumerate(items):
        if e[0] == "agg":
            _, func, col, distinct = e
            if distinct:
                unit.append(("col", col))
                aggs.append(Aggregate(func, i, (i,), distinct=True))
                distinct_args.append((i, col))
            elif func == "AVG":
                unit.append(("agg", "SUM", col, False))
                count_at = derive(("agg", "COUNT", col, False), ("agg", "COUNT", col, False))
                aggs.append(Aggregate("AVG", i, (i, count_at)))
            else:
                unit.append(e)
                aggs.append(Aggregate(func, i, (i,)))
        else:
            unit.append(e)
        oracle.append(e)
    grouped = bool(q.group) or bool(aggs)

    def position(e: Expr) -> int:
        if not star and e in items:
            return items.index(e)
        if e[0] == "agg":
            func, col = e[1], e[2]
            if func == "AVG":
                sum_at = derive(("agg", "SUM", col, False), ("agg", "AVG", col, False))
                count_at = derive(("agg", "COUNT", col, False), ("agg", "COUNT", col, False))
                aggs.append(Aggregate("AVG", sum_at, (sum_at, count_at)))
                return sum_at
            at = derive(e, e)
            aggs.append(Aggregate(func, at, (at,)))
            return at
        return derive(e, e)

    group_pos = [position(("col", c)) for c in q.group]
    order = [(position(e), d) for e, d in q.order]
    unit_order = list(order)
    if not q.order and grouped and (q.group or distinct_args):
        unit_order = [(p, False) for p in group_pos] + [(i, False) for i, _ in distinct_args]
        order = [(p, False) for p in group_pos]
    having = None
    if q.having is not None and grouped:
        target, op, const = q.having
        col = position(target)
        fn = _OPS[op]
        having = lambda row, col=col, fn=fn, const=const: row[col] is not None and fn(row[col], const)  # noqa: E731
    width = n + len(extra_unit)

    def fix(i: int) -> int:
        return i - width if star else i

    spec = MergeSpec(
        order_by=tuple((fix(i), d) for i, d in order),
        group_by=tuple(fix(i) for i in group_pos),
        aggregates=tuple(aggs),
        distinct=q.distinct and not grouped,
        having=having,
        offset=q.offset,
        limit=q.limit,
        visible=None if star else n,
        derived=len(extra_unit),
        column_names=() if star else tuple(expr_name(e) if e[0] == "agg" else None for e in items),
    )
    return Built(
        spec=spec,
        unit_exprs=unit + extra_unit,
        oracle_exprs=oracle + extra_oracle,
        unit_group=list(q.group) + [c for _, c in distinct_args],
        unit_order=unit_order,
        order=order,
        grouped=grouped,
        visible=n,
        width=width,
        unit_limit=None if grouped or q.limit is None else q.offset + q.limit,
    )


def unit_results(b: Built, q: Query, shards: Sequence[Sequence[Row]], lazy: bool = False) -> list[UnitRows]:
    names = [f"c{i}" for i in range(b.width)]
    out = []
    for shard in shards:
        rows = run_select(
            shard,
            b.unit_exprs,
            group=b.unit_group,
            grouped=b.grouped,
            order=b.unit_order,
            distinct=q.distinct,
            distinct_width=b.width,
            limit=b.unit_limit,
        )
        out.append(UnitRows(desc(names), iter(rows) if lazy else rows))
    return out


def oracle(b: Built, q: Query, table: Sequence[Row]) -> list[Row]:
    """The whole query on one table, derived columns kept (with their merged meaning), unsliced."""
    return run_select(
        table,
        b.oracle_exprs,
        group=q.group,
        grouped=b.grouped,
        order=b.order,
        distinct=q.distinct,
        distinct_width=b.visible,
        having=b.spec.having,
    )


def check(q: Query, table: list[Row], assign: list[int], k: int, merge: Callable[..., Merged] = merge_results) -> None:
    b = build(q)
    shards: list[list[Row]] = [[] for _ in range(k)]
    for row, s in zip(table, assign):
        shards[s].append(row)
    got = list(merge(b.spec, unit_results(b, q, shards)))
    # The same merge keeping the derived columns: what the sort keys are checked on.
    full_spec = dataclasses.replace(b.spec, visible=b.width, derived=0)
    full = list(merge(full_spec, unit_results(b, q, shards, lazy=True)))
    assert_rows(got, [r[: b.visible] for r in full])
    want_all = oracle(b, q, table)
    want = want_all[q.offset : None if q.limit is None else q.offset + q.limit]
    assert len(full) == len(want), (full, want)
    if b.order:

        def key(r: Sequence[Any]) -> tuple[Any, ...]:
            return tuple((type(r[c]), r[c]) for c, _ in b.order)

        assert [key(r) for r in full] == [key(r) for r in want], (full, want)
    # Every row is an oracle row, no more often than there: ties may differ, nothing else.
    assert not Counter(typed(full)) - Counter(typed(want_all)), (full, want_all)
    if not b.order and len(want) == len(want_all):
        assert Counter(typed(full)) == Counter(typed(want_all))


# -- strategies ---------------------------------------------------------------------------

_g = st.sampled_from(["a", "b", "B", None])
_h = st.sampled_from([0, 1, 2, None])
_x = st.one_of(st.none(), st.integers(-3, 3))
_d = st.one_of(st.none(), st.integers(-400, 400).map(lambda n: Decimal(n).scaleb(-2)))


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[Row], list[int], int]:
    body = draw(st.lists(st.tuples(_g, _h, _x, _d), max_size=30))
    k = draw(st.integers(1, 5))
    assign = draw(st.lists(st.integers(0, k - 1), min_size=len(body), max_size=len(body)))
    return [(i, *r) for i, r in enumerate(body)], assign, k


@st.composite
def plain_queries(draw: st.DrawFn) -> Query:
    star = draw(st.integers(0, 4)) == 0
    distinct = draw(st.booleans())
    items = None if star else draw(st.lists(st.integers(0, len(COLS) - 1), min_size=1, max_size=4))
    # SELECT DISTINCT ... ORDER BY needs the sort keys in the select list (MySQL says so too).
    refs = items if distinct and items is not None else list(range(len(COLS)))
    order = draw(st.lists(st.tuples(st.sampled_from(refs), st.booleans()), max_size=3))
    return Query(
        items=None if items is None else [("col", c) for c in items],
        order=[(("col", c), d) for c, d in order],
        distinct=distinct,
        offset=draw(st.integers(0, 4)),
        limit=draw(st.one_of(st.none(), st.integers(0, 6))),
    )


_PLAIN_AGGS = [
    ("COUNT", None), ("COUNT", X), ("COUNT", D), ("SUM", X), ("SUM", D), ("MIN", X), ("MIN", G),
    ("MAX", D), ("MAX", G), ("AVG", X), ("AVG", D),
]  # fmt: skip
_DISTINCT_AGGS = [("COUNT", X), ("COUNT", G), ("COUNT", D), ("SUM", X), ("SUM", D)]


def _agg(func_col: tuple[str, int | None], distinct: bool = False) -> Expr:
    return ("agg", func_col[0], func_col[1], distinct)


def _const_for(e: Expr) -> st.SearchStrategy[Any]:
    func, col = e[1], e[2]
    if func == "COUNT":
        return st.integers(0, 4)
    if col == G:
        return st.sampled_from(["a", "b", "B"])
    if col == D:
        return st.integers(-400, 400).map(lambda n: Decimal(n).scaleb(-2))
    return st.integers(-4, 4)


@st.composite
def grouped_queries(draw: st.DrawFn) -> Query:
    group = draw(st.lists(st.sampled_from([G, H, X]), unique=True, max_size=2))
    plain = [_agg(a) for a in draw(st.lists(st.sampled_from(_PLAIN_AGGS), max_size=3))]
    distinct = [_agg(a, True) for a in draw(st.lists(st.sampled_from(_DISTINCT_AGGS), max_size=2))]
    if not group and not plain and not distinct:
        plain = [_agg(("COUNT", None))]
    shown = [("col", c) for c in draw(st.lists(st.sampled_from(group), unique=True))] if group else []
    items = draw(st.permutations(shown + plain + distinct)) or [_agg(("COUNT", None))]
    extra = [_agg(a) for a in _PLAIN_AGGS]  # ORDER BY / HAVING an aggregate not selected: derived
    refs = [("col", c) for c in group] + [e for e in items if e[0] == "agg"] + extra
    order = draw(st.lists(st.tuples(st.sampled_from(refs), st.booleans()), max_size=3))
    having = None
    if draw(st.booleans()):
        target = draw(st.sampled_from([e for e in items if e[0] == "agg"] + extra))
        having = (target, draw(st.sampled_from(sorted(_OPS))), draw(_const_for(target)))
    return Query(
        items=list(items),
        group=group,
        order=order,
        having=having,
        offset=draw(st.integers(0, 3)),
        limit=draw(st.one_of(st.none(), st.integers(0, 4))),
    )


# -- the properties -------------------------------------------------------------------------


@settings(max_examples=250, deadline=None)
@given(t=tables(), q=plain_queries())
def test_plain_selects_match_one_table(impl: Implementation, t: tuple[list[Row], list[int], int], q: Query) -> None:
    check(q, *t, merge=merger(impl))


@settings(max_examples=250, deadline=None)
@given(t=tables(), q=grouped_queries())
def test_grouped_selects_match_one_table(impl: Implementation, t: tuple[list[Row], list[int], int], q: Query) -> None:
    check(q, *t, merge=merger(impl))


# -- hand-written cases -------------------------------------------------------------------


TABLE: list[Row] = [
    (0, "a", 1, 3, Decimal("1.50")),
    (1, "b", None, None, Decimal("2.25")),
    (2, "a", 2, 1, None),
    (3, None, 1, 3, Decimal("-0.75")),
    (4, "b", 0, -2, Decimal("1.50")),
    (5, "B", 2, None, None),
    (6, "a", None, 2, Decimal("9.99")),
    (7, None, 0, 3, Decimal("0.01")),
]
SPLIT = [0, 1, 2, 0, 1, 2, 0, 0]  # shard 3 stays empty


@pytest.mark.parametrize(
    "q",
    [
        pytest.param(Query(items=[("col", ID), ("col", X)], order=[(("col", X), True), (("col", D), False)], offset=1, limit=4), id="order-mixed-nulls-derived"),
        pytest.param(Query(items=None, order=[(("col", H), False), (("col", G), True)], offset=2, limit=3), id="star-negative-indexes"),
        pytest.param(Query(items=None, distinct=True, order=[(("col", G), False)]), id="star-distinct"),
        pytest.param(Query(items=[("col", G)], distinct=True, order=[(("col", G), True)], offset=1, limit=2), id="distinct-order-limit"),
        pytest.param(Query(items=[("col", G), ("col", H)], distinct=True, limit=3), id="distinct-unordered-limit"),
        pytest.param(
            Query(
                items=[("col", G), _agg(("COUNT", None)), _agg(("AVG", D)), _agg(("COUNT", X), True), _agg(("SUM", D), True), _agg(("MIN", X)), _agg(("MAX", X))],
                group=[G],
                having=(_agg(("COUNT", None)), ">", 1),
            ),
            id="group-all-aggregates-having",
        ),
        pytest.param(Query(items=[_agg(("COUNT", None))], group=[G], order=[(("col", G), True)]), id="group-key-not-selected"),
        pytest.param(Query(items=[("col", H), _agg(("SUM", X))], group=[H], order=[(_agg(("SUM", X)), True)], limit=2), id="order-by-aggregate-hash"),
        pytest.param(Query(items=[("col", G), _agg(("COUNT", None))], group=[G], having=(_agg(("AVG", X)), ">", 1)), id="having-derived-avg"),
        pytest.param(Query(items=[_agg(("COUNT", None)), _agg(("SUM", X)), _agg(("AVG", D)), _agg(("COUNT", G), True)]), id="aggregates-no-group"),
    ],
)
def test_hand_written(impl: Implementation, q: Query) -> None:
    check(q, TABLE, SPLIT, 4, merger(impl))
    check(q, [], [], 3, merger(impl))  # no unit returns a row


def test_group_values_are_what_mysql_returns() -> None:
    q = Query(
        items=[("col", G), _agg(("COUNT", None)), _agg(("SUM", X)), _agg(("AVG", X)), _agg(("AVG", D)), _agg(("COUNT", X), True), _agg(("SUM", X), True)],
        group=[G],
    )
    b = build(q)
    shards: list[list[Row]] = [[], [], [], []]
    for row, s in zip(TABLE, SPLIT):
        shards[s].append(row)
    got = list(merge_results(b.spec, unit_results(b, q, shards)))
    # SUM(DISTINCT x) over an INT column is a DECIMAL in MySQL, like SUM(x).
    assert_rows(got, [
        (None, 2, Decimal(6), Decimal("3.0000"), Decimal("-0.370000"), 1, Decimal(3)),
        ("B", 1, None, None, None, 0, None),
        ("a", 3, Decimal(6), Decimal("2.0000"), Decimal("5.745000"), 3, Decimal(6)),
        ("b", 2, Decimal(-2), Decimal("-2.0000"), Decimal("1.875000"), 1, Decimal(-2)),
    ])
    assert [str(r[3]) for r in got] == ["3.0000", "None", "2.0000", "-2.0000"]  # MySQL's scale, not just equal


def test_avg_types() -> None:
    assert avg_value(Decimal(5), 3) == Decimal("1.6667") and str(avg_value(Decimal(5), 3)) == "1.6667"
    assert str(avg_value(5, 3)) == "1.6667"  # int sums (drivers other than MySQL's) → MySQL's DECIMAL
    assert str(avg_value(Decimal("5.00"), 3)) == "1.666667"  # DECIMAL(.., 2) → scale 6
    assert str(avg_value(Decimal("-5"), 3)) == "-1.6667"  # half away from zero, like MySQL
    assert str(avg_value(Decimal("1"), 8)) == "0.1250"
    assert avg_value(5.0, 3) == 5.0 / 3  # DOUBLE stays a float
    assert avg_value(Decimal(5), 3, "sqlite") == 5 / 3  # SQLite's avg() is REAL
    assert avg_value(None, 0) is None and avg_value(Decimal(0), 0) is None
    big = Decimal("9" * 65)  # 65-digit DECIMAL sums stay exact
    assert avg_value(big, 1) == big


def test_partial_sums_and_counts_across_units() -> None:
    spec = MergeSpec(
        aggregates=(
            Aggregate("COUNT", 0, (0,)),
            Aggregate("SUM", 1, (1,)),
            Aggregate("MIN", 2, (2,)),
            Aggregate("MAX", 3, (3,)),
            Aggregate("AVG", 4, (4, 5)),
        ),
        visible=5,
        derived=1,
    )
    d = desc(["COUNT(*)", "SUM(x)", "MIN(x)", "MAX(x)", "AVG(x)", "__ddm_avg0"])
    units = [
        UnitRows(d, [(2, None, None, None, None, 0)]),  # two rows, every x NULL
        UnitRows(d, [(3, Decimal("1.10"), Decimal("0.10"), Decimal("0.90"), Decimal("1.10"), 3)]),
        UnitRows(d, [(0, None, None, None, None, 0)]),
        UnitRows(d, []),
    ]
    assert_rows(merge_results(spec, units), [(5, Decimal("1.10"), Decimal("0.10"), Decimal("0.90"), Decimal("0.366667"))])
    nulls = [UnitRows(d, [(1, None, None, None, None, 0)]), UnitRows(d, [(1, None, None, None, None, 0)])]
    assert_rows(merge_results(spec, nulls), [(2, None, None, None, None)])
    assert_rows(merge_results(spec, []), [(0, None, None, None, None)])  # no units at all: still one row
    floats = [UnitRows(d, [(1, 1.5, 1.5, 1.5, 1.5, 1)]), UnitRows(d, [(1, Decimal("1.5"), 0.5, 2, Decimal("1.5"), 1)])]
    assert_rows(merge_results(spec, floats), [(2, 3.0, 0.5, 2, 1.5)])


def test_description_names() -> None:
    spec = MergeSpec(
        group_by=(0,),
        order_by=((0, False),),
        aggregates=(Aggregate("AVG", 1, (1, 2)),),
        visible=2,
        derived=1,
        column_names=(None, "AVG(amount)"),
    )
    unit = UnitRows((("status", 3, None, None, None, None, True), ("SUM(amount)", 246, None, None, 20, 2, True), ("__ddm_avg0", 8, None, None, None, None, True)), [])
    m = merge_results(spec, [unit, unit])
    assert m.description == (("status", 3, None, None, None, None, True), ("AVG(amount)", 246, None, None, 20, 2, True))
    assert list(m) == []
    star = MergeSpec(order_by=((-1, False),), derived=1)
    m = merge_results(star, [UnitRows(desc(["a", "b", "__ddm_o0"]), [(1, 2, 3)])])
    assert [d[0] for d in m.description] == ["a", "b"]
    assert_rows(m, [(1, 2)])
    assert merge_results(star, []).description == ()


def test_trivial_spec_concatenates_in_unit_order() -> None:
    d = desc(["a"])
    m = merge_results(MergeSpec(), [UnitRows(d, [(3,), (1,)]), UnitRows(d, iter([(2,)])), UnitRows(None, ())])
    assert_rows(m, [(3,), (1,), (2,)])
    derived = MergeSpec(visible=1, derived=1)
    assert_rows(merge_results(derived, [UnitRows(desc(["a", "o"]), [(1, 9), (2, 8)])]), [(1,), (2,)])
    assert_rows(merge_results(MergeSpec(limit=2, offset=1), [UnitRows(d, [(1,), (2,)]), UnitRows(d, [(3,)])]), [(2,), (3,)])
    everything = MergeSpec(offset=1, limit=18446744073709551615)  # MySQL's "all rows after the offset"
    assert_rows(merge_results(everything, [UnitRows(d, [(1,), (2,)]), UnitRows(d, [(3,)])]), [(2,), (3,)])
    ordered = dataclasses.replace(everything, order_by=((0, True),))
    assert_rows(merge_results(ordered, [UnitRows(d, [(2,), (1,)]), UnitRows(d, [(3,)])]), [(2,), (1,)])
    assert list(merge_results(MergeSpec(offset=2**64), [UnitRows(d, [(1,)])])) == []


def test_group_stream_follows_descending_keys() -> None:
    # ORDER BY g DESC, h over GROUP BY h, g: streamed (the prefix is the group keys, any order).
    spec = MergeSpec(order_by=((1, True), (0, False)), group_by=(0, 1), aggregates=(Aggregate("COUNT", 2, (2,)),), visible=3)
    d = desc(["h", "g", "n"])
    u0 = [(1, "b", 2), (2, "b", 1), (1, "a", 1), (None, None, 4)]
    u1 = [(2, "b", 5), (0, "a", 1), (1, "a", 1)]
    got = list(merge_results(spec, [UnitRows(d, iter(u0)), UnitRows(d, iter(u1))]))
    assert_rows(got, [(1, "b", 2), (2, "b", 6), (0, "a", 1), (1, "a", 2), (None, None, 4)])


def test_group_keys_out_of_python_order_raise() -> None:
    # A case-insensitive collation sorts 'a' < 'B'; Python sorts 'B' < 'a'. Streaming would
    # split group 'B' in two, so the merge refuses loudly.
    spec = MergeSpec(order_by=((0, False),), group_by=(0,), aggregates=(Aggregate("COUNT", 1, (1,)),), visible=2)
    d = desc(["name", "n"])
    closed = []

    def unit(rows: list[Row]) -> Iterator[Row]:
        try:
            yield from rows
        finally:
            closed.append(True)

    m = merge_results(spec, [UnitRows(d, unit([("a", 1), ("B", 1)])), UnitRows(d, unit([("B", 2)]))])
    with pytest.raises(MergeError, match="out of order.*collation"):
        list(m)
    assert closed == [True, True] and m.closed


def test_string_keys_compare_case_sensitively() -> None:
    # The documented difference from MySQL's default collation: 'B' and 'b' are two groups.
    spec = MergeSpec(order_by=((0, False),), group_by=(0,), aggregates=(Aggregate("COUNT", 1, (1,)),), visible=2)
    d = desc(["name", "n"])
    got = list(merge_results(spec, [UnitRows(d, [("B", 1), ("b", 1)]), UnitRows(d, [("B", 2)])]))
    assert_rows(got, [("B", 3), ("b", 1)])
    distinct = MergeSpec(distinct=True, visible=1)
    assert_rows(merge_results(distinct, [UnitRows(desc(["s"]), [("x",), ("X",)]), UnitRows(desc(["s"]), [("x",)])]), [("x",), ("X",)])


def test_distinct_compares_visible_columns_only(impl: Implementation) -> None:
    # SELECT DISTINCT g ... ORDER BY h (MariaDB allows it): h is derived, rows differ only there.
    spec = MergeSpec(order_by=((1, False),), distinct=True, visible=1, derived=1, offset=1, limit=2)
    d = desc(["g", "__ddm_o0"])
    u0 = [("a", 1), ("b", 2), ("a", 3), ("c", 4)]
    u1 = [("b", 1), ("d", 5)]
    assert_rows(merger(impl)(spec, [UnitRows(d, u0), UnitRows(d, u1)]), [("b",), ("c",)])


def test_sqlite_dialect_gives_float_avg() -> None:
    spec = MergeSpec(aggregates=(Aggregate("AVG", 0, (0, 1)),), visible=1, derived=1)
    d = desc(["AVG(x)", "__ddm_avg0"])
    units = [UnitRows(d, [(1, 1)]), UnitRows(d, [(4, 2)])]
    assert_rows(merge_results(spec, units, dialect="sqlite"), [(5 / 3,)])
    units = [UnitRows(d, [(1, 1)]), UnitRows(d, [(4, 2)])]
    (row,) = merge_results(spec, units)
    assert str(row[0]) == "1.6667"


# -- errors and closing ---------------------------------------------------------------------


class Tracked:
    """A unit whose rows come from a generator that records how far it got and whether it closed."""

    def __init__(self, rows: Sequence[Row], fail_at: int | None = None) -> None:
        self.pulled = 0
        self.finally_ran = False
        self._rows = rows
        self._fail_at = fail_at
        self.gen = self._run()

    def _run(self) -> Iterator[Row]:
        try:
            for i, row in enumerate(self._rows):
                if i == self._fail_at:
                    raise RuntimeError("shard went away")
                self.pulled += 1
                yield row
        finally:
            self.finally_ran = True

    @property
    def closed(self) -> bool:
        """Closed: its ``finally`` ran, or it was closed before it started (nothing to clean up)."""
        return self.finally_ran or inspect.getgeneratorstate(self.gen) == inspect.GEN_CLOSED  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "spec",
    [
        MergeSpec(),
        MergeSpec(order_by=((0, False),)),
        MergeSpec(order_by=((0, False),), distinct=True),
        MergeSpec(group_by=(0,), order_by=((0, False),)),
        MergeSpec(group_by=(0,), order_by=((1, True),)),
    ],
    ids=["chain", "heap", "heap-distinct", "group-stream", "group-hash"],
)
def test_close_closes_unit_generators_early(impl: Implementation, spec: MergeSpec) -> None:
    units = [Tracked([(i * 3 + u, i) for i in range(1000)]) for u in range(3)]
    m = merger(impl)(spec, [UnitRows(desc(["a", "b"]), t.gen) for t in units])
    assert not any(t.pulled for t in units)  # lazy: nothing read before the first next()
    for _ in range(2):
        next(m)
    m.close()
    assert all(t.closed for t in units) and m.closed
    assert list(m) == []
    if spec.group_by and spec.order_by[0][0] == 1:
        return  # hashing had to read everything
    assert sum(t.pulled for t in units) < 20


def test_limit_reached_closes_units_without_another_next() -> None:
    units = [Tracked([(i,) for i in range(100)]) for _ in range(2)]
    m = merge_results(MergeSpec(limit=3), [UnitRows(desc(["a"]), t.gen) for t in units])
    assert_rows([next(m) for _ in range(3)], [(0,), (1,), (2,)])
    assert all(t.closed for t in units)
    with merge_results(MergeSpec(order_by=((0, True),)), [UnitRows(desc(["a"]), t.gen) for t in (Tracked([(1,)]), Tracked([(2,)]))]) as m2:
        assert_rows([next(m2)], [(2,)])
    assert m2.closed


def test_unit_error_closes_the_others() -> None:
    units = [Tracked([(i,) for i in range(10)]), Tracked([(i,) for i in range(10)], fail_at=3)]
    m = merge_results(MergeSpec(order_by=((0, False),)), [UnitRows(desc(["a"]), t.gen) for t in units])
    with pytest.raises(RuntimeError, match="went away"):
        list(m)
    assert all(t.closed for t in units) and m.closed


def test_bad_specs_raise_and_close() -> None:
    d = desc(["a", "b"])
    for spec, match in [
        (MergeSpec(order_by=((5, False),)), "outside"),
        (MergeSpec(group_by=(-3,)), "outside"),
        (MergeSpec(visible=3), "visible"),
        (MergeSpec(derived=3), "derived"),
        (MergeSpec(offset=-1), "offset"),
        (MergeSpec(limit=-1), "limit"),
        (MergeSpec(aggregates=(Aggregate("MEDIAN", 0, (0,)),)), "MEDIAN"),
        (MergeSpec(aggregates=(Aggregate("AVG", 0, (0,)),)), "AVG"),
        (MergeSpec(aggregates=(Aggregate("MIN", 0, (0,), distinct=True),)), "DISTINCT"),
    ]:
        t = Tracked([(1, 2)])
        with pytest.raises(MergeError, match=match):
            merge_results(spec, [UnitRows(d, t.gen)])
        assert t.closed, spec
    with pytest.raises(MergeError, match="different column counts"):
        merge_results(MergeSpec(), [UnitRows(d, []), UnitRows(desc(["a"]), [])])
    with pytest.raises(MergeError, match="dialect"):
        merge_results(MergeSpec(), [], dialect="oracle")
    with pytest.raises(MergeError, match="compared"):
        list(merge_results(MergeSpec(group_by=(0,), order_by=((1, False),)), [UnitRows(d, [(1, 2), (2, "x")])]))


# -- memory: O(units × (offset + limit)), not O(rows) ----------------------------------------

UNITS, ROWS = 16, 50_000
BOUND = 2 * 1024 * 1024


def _lazy_unit(u: int, n: int, pulled: list[int]) -> Iterator[Row]:
    for i in range(n):
        pulled[u] += 1
        yield (i * UNITS + u, f"order-{u}-{i}", Decimal(i) / 100)


def _peak(fn: Callable[[], Any]) -> tuple[Any, int]:
    gc.collect()
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_ordered_limit_streams_in_bounded_memory(impl: Implementation) -> None:
    pulled = [0] * UNITS
    spec = MergeSpec(order_by=((0, True),), offset=40, limit=20, visible=2, derived=1)

    def unit(u: int) -> Iterator[Row]:  # sorted DESC on column 0, lazily
        for i in reversed(range(ROWS)):
            pulled[u] += 1
            yield (i * UNITS + u, f"order-{u}-{i}", Decimal(i) / 100)

    def run() -> list[Sequence[Any]]:
        units = [UnitRows(desc(["id", "no", "__ddm_o0"]), unit(u)) for u in range(UNITS)]
        return list(merger(impl)(spec, units))

    got, peak = _peak(run)
    top = UNITS * ROWS - 1
    assert [r[0] for r in got] == list(range(top - 40, top - 60, -1))
    assert all(len(r) == 2 for r in got)
    assert sum(pulled) <= 40 + 20 + UNITS  # one row ahead per unit, nothing else read
    assert peak < BOUND, peak
    # What materializing the units would have cost: one unit measured, times UNITS.
    one_unit, unit_peak = _peak(lambda: list(_lazy_unit(0, ROWS, [0])))
    assert len(one_unit) == ROWS
    assert UNITS * unit_peak > 20 * BOUND > 20 * peak


def test_grouped_stream_keeps_one_group(impl: Implementation) -> None:
    groups, units = 8_000, 8
    spec = MergeSpec(
        order_by=((0, False),),
        group_by=(0,),
        aggregates=(Aggregate("COUNT", 1, (1,)), Aggregate("SUM", 2, (2,)), Aggregate("AVG", 3, (3, 4))),
        visible=4,
        derived=1,
    )
    d = desc(["k", "COUNT(*)", "SUM(v)", "AVG(v)", "__ddm_avg0"])

    def unit(u: int) -> Iterator[Row]:
        for k in range(groups):
            yield (k, 2, k + u, k + u, 2)

    def consume(s: MergeSpec) -> tuple[int, Sequence[Any] | None]:
        n, last = 0, None
        for row in merger(impl)(s, [UnitRows(d, unit(u)) for u in range(units)]):
            n, last = n + 1, row
        return n, last

    (n, last), stream_peak = _peak(lambda: consume(spec))
    k = groups - 1
    assert n == groups and last is not None
    assert_rows([last], [(k, 2 * units, units * k + 28, avg_value(units * k + 28, 2 * units))])
    assert stream_peak < BOUND, stream_peak
    # Ordered by an aggregate instead: every group must be held (hash merge) — far more memory.
    hashed = dataclasses.replace(spec, order_by=((1, False), (0, False)))
    (n, _), hash_peak = _peak(lambda: consume(hashed))
    assert n == groups and hash_peak > BOUND and hash_peak > 100 * stream_peak


def test_merged_is_an_iterator_with_fetch_methods() -> None:
    m = merge_results(MergeSpec(), [UnitRows(desc(["a"]), [(1,)])])
    assert isinstance(m, Merged) and iter(m) is m and "a" in repr(m)
    units = [Tracked([(i,) for i in range(0, 10, 2)]), Tracked([(i,) for i in range(1, 10, 2)])]
    m = merge_results(MergeSpec(order_by=((0, False),)), [UnitRows(desc(["a"]), t.gen) for t in units])
    assert_rows([m.fetchone() or ()], [(0,)])
    assert_rows(m.fetchmany(3), [(1,), (2,), (3,)])
    assert_rows(m.fetchall(), [(i,) for i in range(4, 10)])
    assert m.closed and all(t.closed for t in units)
    assert m.fetchone() is None and m.fetchmany(2) == [] and m.fetchall() == []
