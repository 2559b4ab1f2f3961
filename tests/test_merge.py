"""heap_merge: k-way streaming merge of sorted shard results, on both twins.

The oracle is independent of both twins: a stable sort of the concatenated
sources (in source order), one pass per key from the least significant, with
NULL (None) before every value — MySQL's order ascending, reversed (NULLs last)
descending — then ``[offset:offset + limit]``.
"""

from __future__ import annotations

import datetime as dt
import inspect
import itertools
import weakref
from collections import namedtuple
from decimal import Decimal
from typing import Any, Callable, Generator, Iterable, Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddm_core.merge
from ddm_core._fast import SELECTED, Implementation
from ddm_core.errors import MergeError

Row = Sequence[Any]
Keys = list[tuple[int, bool]]


# -- the oracle ------------------------------------------------------------------------------


def _null_first(col: int) -> Callable[[Row], tuple[bool, Any]]:
    return lambda row: (False, 0) if row[col] is None else (True, row[col])


def oracle_sort(rows: Iterable[Row], keys: Keys) -> list[Row]:
    out = list(rows)
    for col, desc in reversed(keys):
        out.sort(key=_null_first(col), reverse=desc)  # reverse=True keeps the sort stable
    return out


def oracle(sources: Sequence[Sequence[Row]], keys: Keys, offset: int = 0, limit: int | None = None) -> list[Row]:
    merged = oracle_sort(itertools.chain.from_iterable(sources), keys)
    return merged[offset : None if limit is None else offset + limit]


def same_rows(got: Sequence[Row], want: Sequence[Row]) -> bool:
    """Equal, and the very same row objects (so ties came out in source order)."""
    return len(got) == len(want) and all(a is b for a, b in zip(got, want))


def test_oracle_orders_nulls_like_mysql() -> None:
    # The oracle itself, checked against hand-written MySQL orders.
    rows = [(2, "b"), (None, "n1"), (1, "a"), (None, "n2"), (2, "c")]
    assert [r[1] for r in oracle_sort(rows, [(0, False)])] == ["n1", "n2", "a", "b", "c"]
    assert [r[1] for r in oracle_sort(rows, [(0, True)])] == ["b", "c", "a", "n1", "n2"]
    assert [r[1] for r in oracle_sort(rows, [(0, True), (1, True)])] == ["c", "b", "a", "n2", "n1"]


# -- strategies ------------------------------------------------------------------------------

DATES = [dt.datetime(2024, 1, 1) + dt.timedelta(hours=h) for h in range(0, 200, 37)]
BIG = [2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 2**64, 2**70, -(2**70)]

KIND_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "small_int": st.integers(-3, 3),
    "wide_int": st.integers(-(2**70), 2**70) | st.sampled_from(BIG) | st.integers(-3, 3),
    "float": st.floats(allow_nan=False, width=64) | st.sampled_from([-0.0, 0.0, 1.5, -1.5]),
    "int_float": st.integers(-4, 4) | st.floats(-4, 4, allow_nan=False) | st.sampled_from(BIG),
    "str": st.text(alphabet="aAbé中😀 \x00z", max_size=3) | st.text(max_size=4),
    "decimal": st.decimals(min_value=-5, max_value=5, places=1, allow_nan=False, allow_infinity=False),
    "datetime": st.sampled_from(DATES) | st.datetimes(),
    "bytes": st.binary(max_size=2),
}
KINDS = sorted(KIND_VALUES)


def _nullable(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values, values)


def _as_source(rows: list[Row], how: str) -> Iterable[Row]:
    if how == "list":
        return rows
    if how == "tuple":
        return tuple(rows)
    if how == "iter":
        return iter(rows)
    return (r for r in rows)  # a generator


class Case:
    """One generated merge: sorted sources (row objects fixed), keys, offset, limit."""

    def __init__(self, sources: list[list[Row]], hows: list[str], keys: Keys, offset: int, limit: int | None):
        self.sources, self.hows, self.keys, self.offset, self.limit = sources, hows, keys, offset, limit

    def fresh_sources(self) -> list[Iterable[Row]]:
        """The sources again, as their container kinds (generators are single-use)."""
        return [_as_source(rows, how) for rows, how in zip(self.sources, self.hows)]

    def expected(self) -> list[Row]:
        return oracle(self.sources, self.keys, self.offset, self.limit)

    def __repr__(self) -> str:
        return f"Case(sources={self.sources!r}, hows={self.hows}, keys={self.keys}, offset={self.offset}, limit={self.limit})"


@st.composite
def merge_cases(draw: st.DrawFn, max_k: int = 20, max_rows: int = 12) -> Case:
    ncols = draw(st.integers(1, 4))
    kinds = [draw(st.sampled_from(KINDS)) for _ in range(ncols)]
    cells = [_nullable(KIND_VALUES[kind]) for kind in kinds]
    keys = draw(st.lists(st.tuples(st.integers(0, ncols - 1), st.booleans()), min_size=1, max_size=ncols + 1))
    k = draw(st.integers(0, max_k))
    sources: list[list[Row]] = []
    hows: list[str] = []
    for _ in range(k):
        rows: list[Row] = draw(st.lists(st.tuples(*cells), max_size=max_rows))
        as_list = draw(st.sampled_from(["tuples", "lists", "mixed"]))
        if as_list == "lists":
            rows = [list(r) for r in rows]
        elif as_list == "mixed":
            rows = [list(r) if i % 2 else r for i, r in enumerate(rows)]
        sources.append(oracle_sort(rows, keys))
        hows.append(draw(st.sampled_from(["list", "tuple", "iter", "gen"])))
    total = sum(map(len, sources))
    offset = draw(st.integers(0, total + 2))
    limit = draw(st.none() | st.integers(0, total + 2))
    return Case(sources, hows, keys, offset, limit)


MERGE = settings(max_examples=200, deadline=None)


# -- ordering: oracle and differential -------------------------------------------------------------


@MERGE
@given(case=merge_cases())
def test_matches_the_oracle(impl: Implementation, case: Case) -> None:
    got = list(impl.merge.heap_merge(case.fresh_sources(), case.keys, offset=case.offset, limit=case.limit))
    want = case.expected()
    assert got == want
    assert same_rows(got, want), "ties must come out in source order (same row objects)"


@MERGE
@given(case=merge_cases())
def test_compiled_equals_pure_equals_oracle(both: tuple[Implementation, Implementation], case: Case) -> None:
    compiled, pure = (
        list(impl.merge.heap_merge(case.fresh_sources(), case.keys, offset=case.offset, limit=case.limit))
        for impl in both
    )
    want = case.expected()
    assert same_rows(compiled, want)
    assert same_rows(pure, want)


@settings(max_examples=60, deadline=None)
@given(case=merge_cases(max_k=3, max_rows=60))
def test_few_long_sources(impl: Implementation, case: Case) -> None:
    got = list(impl.merge.heap_merge(case.fresh_sources(), case.keys, offset=case.offset, limit=case.limit))
    assert same_rows(got, case.expected())


def test_mysql_null_order_and_stable_ties(impl: Implementation) -> None:
    a = [(None, "a0"), (None, "a1"), (1, "a2"), (3, "a3")]
    b = [(None, "b0"), (1, "b1"), (2, "b2")]
    asc = [r[1] for r in impl.merge.heap_merge([a, b], [(0, False)])]
    assert asc == ["a0", "a1", "b0", "a2", "b1", "b2", "a3"]
    a_desc = [(3, "a3"), (1, "a2"), (None, "a0"), (None, "a1")]
    b_desc = [(2, "b2"), (1, "b1"), (None, "b0")]
    desc = [r[1] for r in impl.merge.heap_merge([a_desc, b_desc], [(0, True)])]
    assert desc == ["a3", "b2", "a2", "b1", "a0", "a1", "b0"]


def test_mixed_directions_on_two_columns(impl: Implementation) -> None:
    s0 = [(1, "z"), (1, "b"), (2, None)]
    s1 = [(1, "y"), (1, None), (2, "q")]
    got = list(impl.merge.heap_merge([s0, s1], [(0, False), (1, True)]))
    assert got == [(1, "z"), (1, "y"), (1, "b"), (1, None), (2, "q"), (2, None)]


def test_other_comparable_types(impl: Implementation) -> None:
    # Past the int/float/str fast paths: Decimal, datetime, ints beyond int64, int vs float.
    cases: list[tuple[list[list[Row]], list[Any]]] = [
        ([[(Decimal("1.5"),), (Decimal("3"),)], [(Decimal("2.25"),)]], [Decimal("1.5"), Decimal("2.25"), Decimal("3")]),
        ([[(dt.datetime(2024, 1, 2),)], [(dt.datetime(2024, 1, 1),), (dt.datetime(2024, 1, 3),)]],
         [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2), dt.datetime(2024, 1, 3)]),
        ([[(-(2**64),), (2**63,)], [(-(2**63),), (2**63 - 1,), (2**64,)]],
         [-(2**64), -(2**63), 2**63 - 1, 2**63, 2**64]),
        ([[(1,), (2.5,), (2**70,)], [(1.25,), (2,), (3.0,)]], [1, 1.25, 2, 2.5, 3.0, 2**70]),
        ([[(2**53 + 1,)], [(float(2**53),)]], [float(2**53), 2**53 + 1]),  # exact, not via double
        ([[(False,), (True,)], [(0,), (2,)]], [False, 0, True, 2]),
    ]
    for sources, want in cases:
        got = [r[0] for r in impl.merge.heap_merge(sources, [(0, False)])]
        assert got == want
        assert [type(v) for v in got] == [type(v) for v in want]


def test_row_types(impl: Implementation) -> None:
    Pair = namedtuple("Pair", "key tag")
    s0 = [Pair(1, "p1"), [3, "l3"]]
    s1 = [(2, "t2"), Pair(4, "p4")]
    got = list(impl.merge.heap_merge([s0, s1], [(0, False)]))
    assert same_rows(got, [s0[0], s1[0], s0[1], s1[1]])


def test_no_sources_and_empty_sources(impl: Implementation) -> None:
    assert list(impl.merge.heap_merge([], [(0, False)])) == []
    assert list(impl.merge.heap_merge([[], (), iter([])], [(0, True)], offset=3, limit=2)) == []


def test_offset_and_limit_beyond_machine_ints(impl: Implementation) -> None:
    rows = [[(1,), (3,)], [(2,)]]
    assert list(impl.merge.heap_merge(rows, [(0, False)], limit=2**64)) == [(1,), (2,), (3,)]
    assert list(impl.merge.heap_merge(rows, [(0, False)], offset=2**64)) == []
    assert list(impl.merge.heap_merge(rows, [(0, False)], offset=1, limit=2**63)) == [(2,), (3,)]


def test_public_facade_uses_the_selected_twin() -> None:
    assert ddm_core.merge.heap_merge is SELECTED.merge.heap_merge


# -- streaming ------------------------------------------------------------------------------


class Tracked:
    """A generator source that counts the rows pulled from it and notes its end."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows = rows
        self.pulled = 0
        self.finished = False  # its finally ran
        self.gen = self._run()

    def _run(self) -> Generator[Row, None, None]:
        try:
            for row in self.rows:
                self.pulled += 1
                yield row
        finally:
            self.finished = True


def closed(gen: Generator[Any, Any, Any]) -> bool:
    return inspect.getgeneratorstate(gen) == inspect.GEN_CLOSED


class WRow(list):  # type: ignore[type-arg]
    """A list row that can be weakly referenced (to see which rows the merge keeps)."""

    __slots__ = ("__weakref__",)


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 10), min_size=1, max_size=8),
    data=st.data(),
)
def test_reads_at_most_one_row_ahead_per_source(impl: Implementation, sizes: list[int], data: st.DataObject) -> None:
    # Rows: (key, source, index); keys with many ties.
    sources = [
        oracle_sort([(data.draw(st.integers(0, 4)), s, i) for i in range(n)], [(0, False)]) for s, n in enumerate(sizes)
    ]
    total = sum(sizes)
    offset = data.draw(st.integers(0, total + 1), label="offset")
    take = data.draw(st.integers(0, total + 1), label="take")
    tracked = [Tracked(rows) for rows in sources]
    merger = impl.merge.heap_merge([t.gen for t in tracked], [(0, False)], offset=offset)
    assert [t.pulled for t in tracked] == [0] * len(tracked), "nothing is read before the first next()"
    order = oracle(sources, [(0, False)])
    got = list(itertools.islice(merger, take))
    assert got == order[offset : offset + take]
    if take == 0:
        assert all(t.pulled == 0 for t in tracked)
        return
    # Rows handed out or skipped by the offset, per source.
    consumed = [0] * len(sources)
    for row in order[: min(offset + take, total)]:
        consumed[row[1]] += 1
    for t, used, n in zip(tracked, consumed, sizes):
        assert used <= t.pulled <= min(n, used + 1), "at most one row ahead per source"
    rest = list(merger)
    assert got + rest == order[offset:]
    assert all(t.finished for t in tracked)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 30), min_size=1, max_size=6),
    offset=st.integers(0, 100),
    take=st.integers(1, 20),
)
def test_skipped_rows_are_not_kept(impl: Implementation, sizes: list[int], offset: int, take: int) -> None:
    refs: list[weakref.ref[WRow]] = []

    def make(i: int, s: int) -> WRow:
        row = WRow([i, s])
        refs.append(weakref.ref(row))
        return row

    def source(s: int, n: int) -> Iterator[WRow]:
        for i in range(n):
            yield make(i, s)  # the generator frame keeps no reference to the row

    merger = impl.merge.heap_merge([source(s, n) for s, n in enumerate(sizes)], [(0, False)], offset=offset)
    got = list(itertools.islice(merger, take))
    kept = [r() for r in refs if r() is not None]
    held_by_merger = [row for row in kept if not any(row is g for g in got)]
    assert len(held_by_merger) <= len(sizes), "more than one row held per source"
    merger.close()
    del kept, held_by_merger  # rows form no cycles: refcounting frees them at once
    assert sum(r() is not None for r in refs) == len(got), "after close() only the caller's rows live"


def test_infinite_sources_stream(impl: Implementation) -> None:
    evens = ((n, "even") for n in itertools.count(0, 2))
    odds = ((n, "odd") for n in itertools.count(1, 2))
    got = list(impl.merge.heap_merge([evens, odds], [(0, False)], offset=10, limit=1_000))
    assert [r[0] for r in got] == list(range(10, 1_010))
    assert closed(evens) and closed(odds), "limit reached: sources closed"


# -- closing sources ----------------------------------------------------------------------------


class Closable:
    """A plain iterator (not a generator) with a close() method."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self._it = iter(rows)
        self.closed = 0

    def __iter__(self) -> Closable:
        return self

    def __next__(self) -> Row:
        return next(self._it)

    def close(self) -> None:
        self.closed += 1


def test_close_runs_the_sources_finally(impl: Implementation) -> None:
    tracked = [Tracked([(i, s) for i in range(100)]) for s in range(5)]
    closable = Closable([(i, 9) for i in range(100)])
    merger = impl.merge.heap_merge([*(t.gen for t in tracked), closable], [(0, False)])
    assert len([next(merger) for _ in range(7)]) == 7
    assert not any(t.finished for t in tracked)
    merger.close()
    assert all(t.finished for t in tracked)
    assert closable.closed >= 1
    with pytest.raises(StopIteration):
        next(merger)
    merger.close()  # idempotent


def test_close_before_the_first_row(impl: Implementation) -> None:
    tracked = [Tracked([(1,), (2,)]) for _ in range(3)]
    merger = impl.merge.heap_merge([t.gen for t in tracked], [(0, False)])
    merger.close()
    assert all(t.pulled == 0 and closed(t.gen) for t in tracked), "closed without being read"
    assert list(merger) == []


def test_reaching_limit_closes_sources(impl: Implementation) -> None:
    tracked = [Tracked([(i, s) for i in range(50)]) for s in range(4)]
    closable = Closable([(i, 7) for i in range(50)])
    merger = impl.merge.heap_merge([*(t.gen for t in tracked), closable], [(0, False)], offset=3, limit=5)
    got = [next(merger) for _ in range(5)]
    assert [r[0] for r in got] == [0, 0, 1, 1, 1]
    # Closed as the last row was handed out, not only at the next next().
    assert all(t.finished for t in tracked) and closable.closed >= 1
    with pytest.raises(StopIteration):
        next(merger)


def test_limit_zero_reads_nothing(impl: Implementation) -> None:
    tracked = [Tracked([(1,), (2,)]) for _ in range(3)]
    assert list(impl.merge.heap_merge([t.gen for t in tracked], [(0, False)], limit=0)) == []
    assert all(t.pulled == 0 and closed(t.gen) for t in tracked)


def test_exhaustion_closes_sources(impl: Implementation) -> None:
    closable = [Closable([(i,) for i in range(s, 20, 3)]) for s in range(3)]
    assert [r[0] for r in impl.merge.heap_merge(closable, [(0, False)])] == list(range(20))
    assert all(c.closed >= 1 for c in closable)


class Boom(Exception):
    pass


@pytest.mark.parametrize("fail_after", [0, 3])
def test_source_exception_propagates_and_closes_the_others(impl: Implementation, fail_after: int) -> None:
    def failing() -> Iterator[Row]:
        for i in range(fail_after):
            yield (i, "bad")
        raise Boom("shard 2 lost its connection")

    tracked = [Tracked([(i, s) for i in range(100)]) for s in range(3)]
    closable = Closable([(i, "c") for i in range(100)])
    merger = impl.merge.heap_merge([tracked[0].gen, tracked[1].gen, failing(), closable, tracked[2].gen], [(0, False)])
    with pytest.raises(Boom, match="lost its connection"):
        list(merger)
    assert all(closed(t.gen) for t in tracked), "every generator source is closed"
    assert all(t.finished for t in tracked if t.pulled), "started ones ran their finally"
    if fail_after:
        assert all(t.finished for t in tracked)
    assert closable.closed >= 1
    with pytest.raises(StopIteration):
        next(merger)


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("row_kind", [tuple, list])
@pytest.mark.parametrize("k", [1, 2])
def test_key_column_outside_the_row(impl: Implementation, row_kind: type, k: int) -> None:
    sources = [[row_kind((1, 2))] for _ in range(k)]
    with pytest.raises(MergeError) as info:
        list(impl.merge.heap_merge(sources, [(0, False), (2, True)]))
    assert info.value.column == 2
    assert "column 2" in str(info.value)
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("row_kind", [tuple, list])
def test_key_column_outside_a_later_row(impl: Implementation, row_kind: type) -> None:
    tracked = Tracked([row_kind((1, 5)), row_kind((2, 6)), row_kind((3,))])
    other = Tracked([(9, 9)] * 3)
    merger = impl.merge.heap_merge([tracked.gen, other.gen], [(0, False), (1, False)])
    assert next(merger) == row_kind((1, 5))
    with pytest.raises(MergeError) as info:  # reading (3,) to refill after (2, 6)
        next(merger)
    assert info.value.column == 1
    assert tracked.finished and other.finished


def test_list_rows_far_outside(impl: Implementation) -> None:
    # A list row indexed past its end must raise, never read memory beyond it.
    for col in (3, 100, 10_000):
        with pytest.raises(MergeError) as info:
            list(impl.merge.heap_merge([[[1, 2, 3]], [[4, 5, 6]]], [(col, False)]))
        assert info.value.column == col


@pytest.mark.parametrize("bad_row", [None, 5, object()])
def test_row_that_cannot_be_indexed(impl: Implementation, bad_row: Any) -> None:
    with pytest.raises(MergeError) as info:
        list(impl.merge.heap_merge([[(1,)], [bad_row]], [(0, False)]))
    assert info.value.column == 0


@pytest.mark.parametrize("k_extra", [0, 5])
def test_incomparable_values_name_the_column(impl: Implementation, k_extra: int) -> None:
    extra = [[(0, 0)]] * k_extra
    sources = [[(1, 1), (2, 2)], [(1, "one")], *extra]
    with pytest.raises(MergeError) as info:
        list(impl.merge.heap_merge(sources, [(0, False), (1, False)]))
    err = info.value
    assert err.column == 1
    assert "column 1" in str(err)
    assert "int" in str(err) and "str" in str(err)
    assert isinstance(err, TypeError)


BAD_ARGS: list[dict[str, Any]] = [
    {"offset": -1},
    {"offset": 1.5},
    {"offset": True},
    {"offset": "1"},
    {"offset": None},
    {"limit": -1},
    {"limit": 1.5},
    {"limit": "2"},
    {"limit": True},
    {"keys": None},
    {"keys": 5},
    {"keys": [(0,)]},
    {"keys": [(0, False, 1)]},
    {"keys": [("0", False)]},
    {"keys": [(0.5, False)]},
    {"keys": [(1.0, False)]},
    {"keys": [(True, False)]},
    {"keys": [(-1, False)]},
    {"keys": [(2**70, False)]},
    {"keys": [(0, "yes")]},
    {"keys": [(0, None)]},
    {"keys": [(0, 2)]},
    {"keys": [0, False]},
]


@pytest.mark.parametrize("bad", BAD_ARGS, ids=repr)
def test_bad_arguments(impl: Implementation, bad: dict[str, Any]) -> None:
    tracked = Tracked([(1,)])
    args: dict[str, Any] = {"keys": [(0, False)], **bad}
    keys = args.pop("keys")
    with pytest.raises(MergeError):
        impl.merge.heap_merge([tracked.gen], keys, **args)  # raised at the call, not lazily
    assert tracked.pulled == 0


def test_good_argument_spellings(impl: Implementation) -> None:
    rows = [[(1, "a"), (2, "b")], [(1, "c")]]
    plain = list(impl.merge.heap_merge(rows, [(0, True)]))
    for keys in ([(0, 1)], ((0, True),), [[0, True]]):
        assert list(impl.merge.heap_merge(rows, keys)) == plain


# -- compiled and pure fail alike --------------------------------------------------------------

MIXED = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.sampled_from(BIG),
    st.floats(allow_nan=True),
    st.text(max_size=2),
    st.binary(max_size=2),
    st.decimals(allow_nan=False, places=1, min_value=-5, max_value=5),
    st.sampled_from([dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, 12), True]),
    st.tuples(st.integers(0, 2)),
)


def _outcome(impl: Implementation, make: Callable[[], tuple[list[Any], Keys]]) -> tuple[Any, ...]:
    sources, keys = make()
    try:
        return ("rows", [id(r) for r in impl.merge.heap_merge(sources, keys)])
    except Exception as exc:  # compared across the twins below
        return ("error", type(exc), getattr(exc, "column", None))


@settings(max_examples=300, deadline=None)
@given(x=MIXED, y=MIXED, tie=MIXED, desc=st.booleans(), as_list=st.booleans())
def test_twins_agree_on_mixed_types(
    both: tuple[Implementation, Implementation], x: Any, y: Any, tie: Any, desc: bool, as_list: bool
) -> None:
    # Two sources: their heads are always compared, so both twins meet the same pair.
    wrap = list if as_list else tuple
    rows = [wrap((tie, x)), wrap((tie, y))]
    make = lambda: ([[rows[0]], [rows[1]]], [(0, False), (1, desc)])  # noqa: E731
    compiled, pure = (_outcome(impl, make) for impl in both)
    assert compiled == pure
    if compiled[0] == "error":
        assert compiled[1] is MergeError and compiled[2] in (0, 1)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ([[(1,)], [("a",)]], [(0, False)]),
        lambda: ([[(1, 2)], [[1, 2]]], [(4, False)]),
        lambda: ([[(1,)], [None]], [(0, False)]),
        lambda: ([[(dt.date(2024, 1, 1),)], [(dt.datetime(2024, 1, 1),)]], [(0, True)]),
        lambda: ([[(1,)], (_ for _ in [1, 2])], [(0, False)]),
    ],
)
def test_twins_raise_the_same_errors(both: tuple[Implementation, Implementation], make: Callable[[], Any]) -> None:
    compiled, pure = (_outcome(impl, make) for impl in both)
    assert compiled[0] == pure[0] == "error"
    assert compiled == pure


@pytest.mark.parametrize("bad", BAD_ARGS, ids=repr)
def test_twins_reject_the_same_arguments(both: tuple[Implementation, Implementation], bad: dict[str, Any]) -> None:
    messages = []
    for impl in both:
        args: dict[str, Any] = {"keys": [(0, False)], **bad}
        keys = args.pop("keys")
        with pytest.raises(MergeError) as info:
            impl.merge.heap_merge([[(1,)]], keys, **args)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


# -- one int64 key: the compiled loser tree and its switches to the heap and back ---------------------

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT64_EDGES = [INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX]

#: Values that are not int64: each one sends the compiled merge from its tree to its heap.
NOT_INT64: list[Any] = [None, 2.5, -0.5, 2**63, -(2**63) - 1, 2**70, True, Decimal("1.5")]


@st.composite
def int_key_cases(draw: st.DrawFn) -> Case:
    """Long int64 runs with a few other values (NULL, float, big int, bool, Decimal) anywhere."""
    desc = draw(st.booleans())
    keys = [(0, desc)]
    k = draw(st.sampled_from([0, 1, 2, 3, 7, 16, 33, 64]))
    ints = st.integers(-3, 3) | st.sampled_from(INT64_EDGES) | st.integers(INT64_MIN, INT64_MAX)
    odd = draw(st.sampled_from([0.0, 0.02, 0.1, 0.5]))  # how often a value is not int64
    sources: list[list[Row]] = []
    hows: list[str] = []
    for s in range(k):
        n = draw(st.integers(0, 40))
        values = [
            draw(st.sampled_from(NOT_INT64)) if draw(st.floats(0, 1)) < odd else draw(ints) for _ in range(n)
        ]
        rows: list[Row] = [(v, s, i) for i, v in enumerate(values)]
        if draw(st.booleans()):
            rows = [list(r) if i % 5 == 3 else r for i, r in enumerate(rows)]
        sources.append(oracle_sort(rows, keys))
        hows.append(draw(st.sampled_from(["list", "list", "tuple", "iter", "gen"])))
    total = sum(map(len, sources))
    offset = draw(st.sampled_from([0, 0, 1]) | st.integers(0, total + 1))
    limit = draw(st.none() | st.none() | st.integers(0, total + 1))
    return Case(sources, hows, keys, offset, limit)


@settings(max_examples=150, deadline=None)
@given(case=int_key_cases())
def test_int64_key_with_other_values_mid_stream(impl: Implementation, case: Case) -> None:
    got = list(impl.merge.heap_merge(case.fresh_sources(), case.keys, offset=case.offset, limit=case.limit))
    assert same_rows(got, case.expected())


@pytest.mark.parametrize("desc", [False, True])
@pytest.mark.parametrize("k", [0, 1, 2, 5, 16, 64, 65])
def test_int64_keys_at_the_edges(impl: Implementation, k: int, desc: bool) -> None:
    # INT64_MAX ascending (INT64_MIN descending) ties the tree's mark of an exhausted source.
    sources = [oracle_sort([(v, s, i) for i, v in enumerate(INT64_EDGES[s % 3 :])], [(0, desc)]) for s in range(k)]
    got = list(impl.merge.heap_merge(sources, [(0, desc)]))
    assert same_rows(got, oracle(sources, [(0, desc)]))


@pytest.mark.parametrize("how", ["list", "tuple", "iter", "gen"])
@pytest.mark.parametrize("k", [1, 3, 64])
def test_ties_across_many_sources(impl: Implementation, k: int, how: str) -> None:
    sources = [[(v, s, i) for i, v in enumerate([1, 1, 2, 2, 2, 3])] for s in range(k)]
    for desc in (False, True):
        ordered = [list(reversed(rows)) if desc else rows for rows in sources]
        ordered = [oracle_sort(rows, [(0, desc)]) for rows in ordered]
        got = list(impl.merge.heap_merge([_as_source(r, how) for r in ordered], [(0, desc)]))
        assert same_rows(got, oracle(ordered, [(0, desc)]))


@pytest.mark.parametrize("desc", [False, True])
@pytest.mark.parametrize("odd", NOT_INT64)
def test_switch_to_the_heap_and_back(impl: Implementation, odd: Any, desc: bool) -> None:
    # One source meets a non-int64 value after 50 ints, then ints again (where that keeps it sorted).
    k = 8
    sources = []
    for s in range(k):
        values: list[Any] = list(range(s, 400, 3))
        if s == 3:
            values.insert(50, odd)
        if s == 5:
            values = [odd] + values  # at the very first row too
        rows = [(v, s, i) for i, v in enumerate(values)]
        sources.append(oracle_sort(rows, [(0, desc)]))
    for offset, limit in [(0, None), (7, 100), (120, None)]:
        got = list(impl.merge.heap_merge(sources, [(0, desc)], offset=offset, limit=limit))
        assert same_rows(got, oracle(sources, [(0, desc)], offset, limit))


@pytest.mark.parametrize("row_kind", [tuple, list])
def test_incomparable_value_mid_stream_of_int_keys(impl: Implementation, row_kind: type) -> None:
    tracked = Tracked([row_kind((i, "t")) for i in range(0, 100, 2)] + [row_kind(("x", "bad"))])
    others = [Tracked([(i, s) for i in range(1, 300, 2)]) for s in range(5)]
    merger = impl.merge.heap_merge([o.gen for o in others[:2]] + [tracked.gen] + [o.gen for o in others[2:]], [(0, False)])
    with pytest.raises(MergeError) as info:
        list(merger)
    assert info.value.column == 0
    assert "int" in str(info.value) and "str" in str(info.value)
    assert tracked.finished and all(o.finished for o in others)


def test_list_source_changed_while_merged(impl: Implementation) -> None:
    # List sources are read by index, live: rows appended during the merge are merged too.
    a = [(1, "a"), (4, "a")]
    b = [(2, "b"), (3, "b")]
    merger = impl.merge.heap_merge([a, b], [(0, False)])
    assert next(merger) == (1, "a")
    a.append((5, "a"))
    b.append((None, "b"))  # not sorted, but merged as it comes: after (3, "b")
    assert [r[0] for r in merger] == [2, 3, None, 4, 5]
