"""``Result.fetchmany`` over a merge takes the merge's rows a batch at a time (the proxy reads every
multi-unit result so): the same rows, count, closing and error mapping as row by row."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from ddm_core.errors import ExecutionError
from ddm_core.execute.result import Result
from ddm_core.merge.engine import UnitRows, merge_results
from ddm_core.merge.spec import MergeSpec

DESCRIPTION = (("id", 3, None, None, None, None, True), ("name", 253, None, None, None, None, True))


class Closing:
    """A unit's rows that say whether they were closed."""

    def __init__(self, rows: list[Any], fail_at: int | None = None) -> None:
        self.rows, self.fail_at, self.closed = rows, fail_at, False

    def __iter__(self) -> Iterator[Any]:
        for i, row in enumerate(self.rows):
            if i == self.fail_at:
                raise RuntimeError("the unit broke")
            yield row

    def close(self) -> None:
        self.closed = True


def result_of(units: list[Closing], spec: MergeSpec | None = None) -> Result:
    merged = merge_results(spec or MergeSpec(), [UnitRows(DESCRIPTION, u) for u in units])
    return Result(description=merged.description, rows=merged, closers=[merged])


def units_of(sizes: list[int]) -> list[Closing]:
    base = 0
    units = []
    for size in sizes:
        # lists as rows (a driver's) come out as tuples, as row by row
        units.append(Closing([[base + i, f"n{base + i}"] if i % 2 else (base + i, f"n{base + i}") for i in range(size)]))
        base += size
    return units


@pytest.mark.parametrize("sizes", [[0, 0], [3, 0, 4], [5, 5], [10, 1, 0, 7]])
@pytest.mark.parametrize("batch", [1, 2, 5, 500])
def test_batches_match_rows_one_by_one(sizes: list[int], batch: int) -> None:
    expected = list(Result(description=DESCRIPTION, rows=iter([r for u in units_of(sizes) for r in u.rows])))
    expected = [tuple(r) for r in expected]
    units = units_of(sizes)
    result = result_of(units)
    got: list[Any] = []
    while True:
        rows = result.fetchmany(batch)
        assert all(type(r) is tuple for r in rows)
        got += rows
        if len(rows) < batch:
            break
    assert got == expected
    assert result.rowcount == len(expected)
    assert result.closed and all(u.closed for u in units)
    assert result.fetchmany(batch) == []


def test_a_unit_failing_mid_batch_closes_every_unit_and_is_mapped() -> None:
    units = [Closing([(1, "a"), (2, "b")]), Closing([(3, "c"), (4, "d")], fail_at=1)]
    result = result_of(units)
    with pytest.raises(ExecutionError, match="the unit broke"):
        result.fetchmany(10)
    assert result.closed and all(u.closed for u in units)


def test_a_limit_counts_down_across_batches() -> None:
    units = units_of([4, 4])
    result = result_of(units, MergeSpec(limit=5))
    assert [r[0] for r in result.fetchmany(3)] == [0, 1, 2]
    assert [r[0] for r in result.fetchmany(3)] == [3, 4]
    assert result.closed and all(u.closed for u in units)
