"""What a merge held in memory at once (ddm_core.merge.memory), against tracemalloc's count of the same rows."""

from __future__ import annotations

import tracemalloc
from typing import Any, Iterator

from ddm_core.merge import UnitRows, merge_results
from ddm_core.merge.memory import MergeMemory
from ddm_core.route.plan import Aggregate, MergeSpec

DESC = (("k", 8, None, None, None, None, True), ("name", 253, None, None, None, None, True))


def _rows(n: int, start: int = 0) -> list[tuple[Any, ...]]:
    return [(i, f"name-{i:08d}") for i in range(start, start + n)]


def _streamed(rows: list[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    yield from rows


def test_buffered_units_are_counted_and_their_bytes_estimated_close_to_tracemalloc() -> None:
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    units = [_rows(5000, 5000 * u) for u in range(4)]
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    reports: list[MergeMemory] = []
    merged = merge_results(MergeSpec(order_by=((0, False),), limit=10), [UnitRows(DESC, r) for r in units],
                           memory=MergeMemory(reports.append))  # fmt: skip
    assert [row[0] for row in merged] == list(range(10))
    assert len(reports) == 1
    meter = reports[0]
    assert meter.rows == 20_000 and meter.peak_extra == 0
    # An estimate from sampled rows: within a factor of two of what the rows really take.
    assert held / 2 < meter.bytes < held * 2, (meter.bytes, held)


def test_hash_groups_count_the_groups_held() -> None:
    units = [_streamed([(i % 700, "x", 1) for i in range(3000)]) for _ in range(3)]
    spec = MergeSpec(order_by=((2, True),), group_by=(0,), aggregates=(Aggregate("COUNT", 2, (2,)),))
    meter = MergeMemory()
    with merge_results(spec, [UnitRows(DESC + (("n", 8, None, None, None, None, True),), u) for u in units],
                       memory=meter) as merged:  # fmt: skip
        rows = merged.fetchall()
    assert len(rows) == 700 and meter.buffered == 0 and meter.peak_extra == 700 and meter.bytes > 0


def test_distinct_counts_the_distinct_rows_when_the_result_closes_early() -> None:
    units = [_streamed([(i % 50, "same") for i in range(1000)]) for _ in range(2)]
    reports: list[MergeMemory] = []
    merged = merge_results(MergeSpec(distinct=True), [UnitRows(DESC, u) for u in units],
                           memory=MergeMemory(reports.append))  # fmt: skip
    first = merged.fetchmany(20)
    merged.close()
    merged.close()  # reported once
    assert len(first) == 20 and len(reports) == 1
    assert reports[0].peak_extra == 20 and reports[0].buffered == 0


def test_streamed_ordered_merges_hold_nothing_counted() -> None:
    meter = MergeMemory()
    units = [_streamed(_rows(1000, 1000 * u)) for u in range(3)]
    with merge_results(MergeSpec(order_by=((0, True),)), [UnitRows(DESC, u) for u in units], memory=meter) as merged:
        assert len(merged.fetchall()) == 3000
    assert meter.rows == 0 and meter.bytes == 0
