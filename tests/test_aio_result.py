"""``InMemoryResult`` (aio/result.py): a one-unit answer read as ``AsyncResult(Result.buffered(...))`` reads it.

The executor hands the common statement's rows back without building the thread executor's ``Result``
under them; every read, row count and closed state must be what the ``Result``-backed ``AsyncResult``
gives for the same rows, and ``.result`` must hand over the rows not read yet. No server.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from ddm_core.aio.result import AsyncResult, InMemoryResult
from ddm_core.execute.result import Result

DESCRIPTION = (("id", 3, None, 11, 11, 0, False), ("name", 253, None, 80, 80, 0, True))


def _rows(n: int) -> list[tuple[Any, ...]]:
    return [(i, f"n{i}") for i in range(n)]


async def _step(result: AsyncResult, op: str, size: int) -> Any:
    if op == "one":
        return await result.fetchone()
    if op == "many":
        return await result.fetchmany(size)
    if op == "many_default":
        return await result.fetchmany()
    if op == "all":
        return await result.fetchall()
    if op == "iter":
        return [row async for row in result]
    await result.aclose()
    return None


@pytest.mark.parametrize("seed", range(40))
def test_reads_match_a_result_backed_async_result(seed: int) -> None:
    rnd = random.Random(seed)
    n = rnd.choice([0, 1, 2, 3, 7, 20])
    ops = [(rnd.choice(["one", "one", "many", "many_default", "all", "iter", "close"]), rnd.randint(0, 5))
           for _ in range(rnd.randint(1, 8))]  # fmt: skip

    async def main() -> None:
        lean = InMemoryResult(DESCRIPTION, _rows(n), n, "select")
        full = AsyncResult(Result.buffered(DESCRIPTION, _rows(n), statement="select"))
        assert (lean.rowcount, lean.closed, lean.description) == (full.rowcount, full.closed, full.description)
        for op, size in ops:
            assert await _step(lean, op, size) == await _step(full, op, size), (op, size)
            assert (lean.rowcount, lean.closed) == (full.rowcount, full.closed), (op, size)
        assert (lean.lastrowid, lean.generated_keys, lean.complete, lean.statement, lean.units) == (
            full.lastrowid, full.generated_keys, full.complete, full.statement, full.units
        )

    asyncio.run(main())


def test_result_hands_over_the_rows_not_read_yet() -> None:
    async def main() -> None:
        lean = InMemoryResult(DESCRIPTION, _rows(5), 5, "select")
        assert await lean.fetchone() == (0, "n0")
        underneath = lean.result
        assert underneath is lean.result and underneath.rowcount == 5 and underneath.description == DESCRIPTION
        assert await lean.fetchone() == (1, "n1")  # reads go on through the Result
        assert underneath.fetchall() == [(2, "n2"), (3, "n3"), (4, "n4")]
        assert await lean.fetchall() == [] and lean.closed and lean.rowcount == 5

        closed = InMemoryResult(DESCRIPTION, _rows(2), 2, "select")
        await closed.aclose()
        assert closed.closed and closed.result.closed and closed.result.fetchall() == []

    asyncio.run(main())


def test_a_statement_without_rows() -> None:
    async def main() -> None:
        lean = InMemoryResult(None, None, 3, "insert", 41, (7, 8, 9))
        full = AsyncResult(Result.counted(3, 41, (7, 8, 9), "insert"))
        for name in ("description", "rowcount", "lastrowid", "generated_keys", "closed", "statement", "units"):
            assert getattr(lean, name) == getattr(full, name), name
        assert await lean.fetchone() is None and await lean.fetchmany(3) == [] and await lean.fetchall() == []
        underneath = lean.result
        assert (underneath.rowcount, underneath.lastrowid, underneath.generated_keys) == (3, 41, (7, 8, 9))
        assert repr(lean) == "<AsyncResult insert rowcount=3 closed>"

    asyncio.run(main())
