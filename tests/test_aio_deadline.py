"""The loop's shared deadline timer (``aio/deadline.py``): what ``asyncio.timeout`` guarantees, on one timer.

No server: each case awaits a future that never completes (the stand-in for a read whose answer
does not come) and checks what the waiting code sees.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from ddm_core.aio.deadline import Deadlines, finished_then_cancelled


async def _wait_until(deadlines: Deadlines, seconds: float) -> str:
    """Wait for nothing with a deadline ``seconds`` away; what ended the wait."""
    armed = deadlines.arm(time.monotonic() + seconds)
    try:
        await asyncio.get_running_loop().create_future()
    except BaseException as exc:
        if armed.timed_out(exc):
            return "timed out"
        raise
    raise AssertionError("the future completed")


def test_a_deadline_ends_the_wait_and_leaves_no_cancel_pending() -> None:
    async def main() -> None:
        deadlines = Deadlines()
        started = time.monotonic()
        assert await _wait_until(deadlines, 0.02) == "timed out"
        assert time.monotonic() - started >= 0.02
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0  # taken back: later awaits are not cancelled
        await asyncio.sleep(0.01)

    asyncio.run(main())


def test_many_deadlines_fire_in_order_and_disarmed_ones_never_do() -> None:
    async def main() -> None:
        deadlines = Deadlines()
        waits = [asyncio.ensure_future(_wait_until(deadlines, 0.01 * (i + 1))) for i in range(5)]
        quiet = deadlines.arm(time.monotonic() + 0.005)
        quiet.disarm()  # an answer came in time
        assert await asyncio.gather(*waits) == ["timed out"] * 5
        assert not quiet.fired

    asyncio.run(main())


def test_the_callers_own_cancel_stays_a_cancel_when_the_deadline_fires_too() -> None:
    async def main() -> None:
        deadlines = Deadlines()
        outer = asyncio.ensure_future(_wait_until(deadlines, 0.0005))
        await asyncio.sleep(0)  # armed, waiting
        time.sleep(0.001)  # the deadline passes while the loop is busy
        deadlines._fire()  # the timer's turn: it cancels the wait...
        outer.cancel()  # ...and in the same turn the caller cancels too
        with pytest.raises(asyncio.CancelledError):
            await outer

    asyncio.run(main())


def test_disarmed_entries_are_dropped_from_the_queue_and_a_long_heap() -> None:
    async def main() -> None:
        deadlines = Deadlines()
        for _ in range(3 * Deadlines.COMPACT_AT):
            deadlines.arm(time.monotonic() + 60).disarm()  # one timeout, deadlines in order: the queue
        assert len(deadlines._queue) <= 1 and not deadlines._heap
        start = time.monotonic() + 60
        for i in range(3 * Deadlines.COMPACT_AT):
            deadlines.arm(start - i * 1e-6).disarm()  # each sooner than the last: the heap
        assert len(deadlines._heap) <= Deadlines.COMPACT_AT + 1024
        assert await _wait_until(deadlines, 0.01) == "timed out"  # still fires for a live one

    asyncio.run(main())


def test_a_shorter_deadline_after_longer_ones_fires_first() -> None:
    """Deadlines out of order (a statement's own shorter timeout among the executor's): each fires at its time."""

    async def main() -> None:
        deadlines = Deadlines()
        ended: list[str] = []

        async def wait(name: str, seconds: float) -> None:
            assert await _wait_until(deadlines, seconds) == "timed out"
            ended.append(name)

        long_wait = asyncio.ensure_future(wait("long", 0.3))
        await asyncio.sleep(0)
        middle = asyncio.ensure_future(wait("middle", 0.15))
        await asyncio.sleep(0)
        started = time.monotonic()
        await wait("short", 0.02)  # armed last, due first
        assert time.monotonic() - started < 0.12 and ended == ["short"]
        await asyncio.gather(middle, long_wait)
        assert ended == ["short", "middle", "long"]

    asyncio.run(main())


def test_work_that_must_finish_is_awaited_through_a_cancel() -> None:
    async def main() -> None:
        done: list[str] = []

        async def commit() -> str:
            await asyncio.sleep(0.03)
            done.append("committed")
            return "ok"

        async def caller() -> str:
            return await finished_then_cancelled(asyncio.ensure_future(commit()))

        task = asyncio.ensure_future(caller())
        await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert done == ["committed"]  # the cancel came out only after the work was done

    asyncio.run(main())


def test_one_timer_serves_a_new_loop_after_the_old_one_closed() -> None:
    deadlines = Deadlines()

    async def short_then_none() -> None:
        deadlines.arm(time.monotonic() + 0.2).disarm()  # its timer belongs to this loop, which closes first

    async def wait() -> str:  # a later deadline than that timer's, on the new loop
        return await asyncio.wait_for(_wait_until(deadlines, 0.4), 3)

    asyncio.run(short_then_none())
    assert asyncio.run(wait()) == "timed out"
