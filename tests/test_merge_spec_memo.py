"""What the merge works out once per spec and column description (``MergeSpec.memo``): a spec reused by the next
statement of its shape — other rows, another description, another dialect, another statement still open — merges
as a spec built afresh does.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any, Sequence

from ddm_core.execute.collations import ResultCollations
from ddm_core.merge import UnitRows, merge_results
from ddm_core.merge.spec import MEMO_LIMIT
from ddm_core.route.plan import Aggregate, MergeSpec

VARCHAR, LONG = 253, 3  # MySQL field types: a text column, an integer one


def desc(*columns: tuple[str, int]) -> tuple[tuple[Any, ...], ...]:
    return tuple((name, kind, None, None, None, None, True) for name, kind in columns)


def merged(spec: MergeSpec, units: Sequence[UnitRows], dialect: str = "mysql") -> tuple[Any, list[tuple[Any, ...]]]:
    result = merge_results(spec, units, dialect=dialect)
    return result.description, list(result)


def afresh(spec: MergeSpec) -> MergeSpec:
    return dataclasses.replace(spec)  # equal, with an empty memo


def test_a_select_star_spec_takes_each_statements_width() -> None:
    spec = MergeSpec(order_by=((-1, False),), derived=1)  # SELECT * ... ORDER BY a hidden sort column
    narrow = [UnitRows(desc(("a", LONG), ("s", LONG)), [(1, 1), (3, 3)]), UnitRows(desc(("a", LONG), ("s", LONG)), [(2, 2)])]
    wide = [UnitRows(desc(("a", LONG), ("b", VARCHAR), ("s", LONG)), [(9, "x", 2)]),
            UnitRows(desc(("a", LONG), ("b", VARCHAR), ("s", LONG)), [(8, "y", 1)])]  # fmt: skip
    for units, want in [(narrow, [(1,), (2,), (3,)]), (wide, [(8, "y"), (9, "x")]), (narrow, [(1,), (2,), (3,)])]:
        description, rows = merged(spec, units)
        assert rows == want and (description, rows) == merged(afresh(spec), units)
        assert [d[0] for d in description] == [d[0] for d in units[0].description[:-1]]


def test_column_names_follow_each_description() -> None:
    spec = MergeSpec(aggregates=(Aggregate("SUM", 0, (0,)),), visible=1, column_names=("SUM(k)",))
    plain = MergeSpec(visible=1, order_by=((0, False),))
    for name in ("k", "other", "k"):
        assert merged(plain, [UnitRows(desc((name, LONG)), [(1,)]), UnitRows(desc((name, LONG)), [(2,)])])[0][0][0] == name
        assert merged(spec, [UnitRows(desc((name, LONG)), [(1,)]), UnitRows(desc((name, LONG)), [(2,)])])[0][0][0] == "SUM(k)"


def test_an_aggregate_spec_keeps_no_state_between_statements() -> None:
    spec = MergeSpec(aggregates=(Aggregate("SUM", 0, (0,)), Aggregate("MAX", 1, (1,))), visible=2)
    d = desc(("s", LONG), ("m", LONG))
    first = merge_results(spec, [UnitRows(d, [(1, 5)]), UnitRows(d, [(2, 7)])], dialect="mysql")
    second = merge_results(spec, [UnitRows(d, [(10, 1)]), UnitRows(d, [(20, 2)])], dialect="mysql")
    assert list(second) == [(Decimal(30), 2)]  # read first although made second
    assert list(first) == [(Decimal(3), 7)]


def test_the_dialect_decides_as_without_the_memo() -> None:
    spec = MergeSpec(aggregates=(Aggregate("SUM", 0, (0,), distinct=True),), visible=1)  # SUM(DISTINCT k)
    units = [UnitRows(desc(("s", LONG)), [(1,), (2,)]), UnitRows(desc(("s", LONG)), [(2,)])]
    for dialect in ("mysql", "sqlite", "mysql"):
        rows = merged(spec, units, dialect)[1]
        assert rows == merged(afresh(spec), units, dialect)[1]
        assert type(rows[0][0]) is (Decimal if dialect == "mysql" else int)


def test_more_descriptions_than_a_spec_keeps_stay_right() -> None:
    spec = MergeSpec(order_by=((0, True),), visible=1)
    for i in range(3 * MEMO_LIMIT):
        d = desc((f"c{i}", LONG))
        assert merged(spec, [UnitRows(d, [(i,)]), UnitRows(d, [(i + 1,)])]) == (desc((f"c{i}", LONG)), [(i + 1,), (i,)])
    assert len(spec.memo) <= MEMO_LIMIT


def test_whether_collations_are_asked_follows_each_description() -> None:
    """A compared column that holds text in one statement's answer and not in another's (the column's type)."""
    spec = MergeSpec(order_by=((0, False),), visible=1)
    collations = ResultCollations()
    for kind, asks in [(VARCHAR, True), (LONG, False), (VARCHAR, True)]:
        assert collations.pending(spec, desc(("c", kind)), "ds_0", "SELECT c FROM t ORDER BY c") is asks
    assert not collations.pending(MergeSpec(visible=1), desc(("c", VARCHAR)), "ds_0", "SELECT c FROM t")  # not compared
