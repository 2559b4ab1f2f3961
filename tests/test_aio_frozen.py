"""A frozen data source on the asyncio runner: it fails in time, and on one loop it stalls nobody else.

The same private ``mariadbd`` (``ds_0``, frozen with SIGSTOP) and healthy shared MariaDB (``ds_1``)
as tests/test_frozen_data_source.py, whose fixtures this module reuses. Every wait runs as a task
with a generous bound derived from the configured timeouts: one that ignored its timeout would
wait until the server is resumed. The test that matters most on one loop: statements on the
healthy data source keep answering while other tasks hammer the frozen one.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Awaitable, Iterator

import pytest

from ddm_core.aio.executor import AsyncExecutor
from ddm_core.errors import QueryTimeoutError
from ddm_core.execute.pools import PING_AFTER
from test_execute_support import assert_no_leaks
from test_frozen_data_source import (  # noqa: F401 - fixtures
    ACQUIRE_TIMEOUT,
    BOUND,
    FAILURES,
    SOCKET_TIMEOUT,
    STATEMENT_TIMEOUT,
    Frozen,
    config,
    frozen_sources,
    user_on,
)


@pytest.fixture()
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture()
def ex(config: Any, loop: asyncio.AbstractEventLoop) -> Iterator[AsyncExecutor]:
    executor = AsyncExecutor(config, timeout=STATEMENT_TIMEOUT)
    yield executor
    try:
        loop.run_until_complete(asyncio.wait_for(executor.settle(), BOUND * 5))
        assert_no_leaks(executor, wait=0)  # type: ignore[arg-type]
    finally:
        loop.run_until_complete(executor.close())


def within_bound(loop: asyncio.AbstractEventLoop, work: Awaitable[Any], bound: float) -> tuple[float, BaseException | None]:
    """Run ``work`` on the loop; fail the test if it is still waiting after ``bound`` seconds."""

    async def timed() -> tuple[float, BaseException | None]:
        start = time.monotonic()
        task = asyncio.ensure_future(work)
        done, _ = await asyncio.wait({task}, timeout=bound)  # ddm-core's own timeouts are TimeoutErrors too
        if not done:
            task.cancel()
            pytest.fail(f"still waiting after {time.monotonic() - start:.1f} s: the configured timeouts were not honoured")
        return time.monotonic() - start, task.exception()

    return loop.run_until_complete(timed())


async def point_select(ex: AsyncExecutor, user: int, **kw: Any) -> list[Any]:
    result = await ex.execute("SELECT user_id FROM t_order WHERE user_id = %s", (user,), **kw)
    return await result.fetchall()


def test_a_statement_in_flight_fails_at_its_deadline(ex: AsyncExecutor, frozen_sources: Frozen, loop: Any) -> None:
    user = user_on(ex, "ds_0")  # type: ignore[arg-type]
    loop.run_until_complete(point_select(ex, user))  # used just now: the next borrow does not ping it
    with frozen_sources.frozen():
        _, error = within_bound(loop, point_select(ex, user), BOUND * STATEMENT_TIMEOUT)
        assert isinstance(error, QueryTimeoutError) and error.data_source == "ds_0", error
        # The KILL QUERY meant for the stopped server runs in the background, bounded too.
        _, error = within_bound(loop, ex.settle(), BOUND * (ACQUIRE_TIMEOUT + STATEMENT_TIMEOUT))
        assert error is None


def test_a_multi_unit_read_gives_up_on_the_frozen_unit_in_time(ex: AsyncExecutor, frozen_sources: Frozen,
                                                               loop: Any) -> None:  # fmt: skip
    healthy = next(u for u in range(5_000, 10_000)
                   if ex.router.route("SELECT 1 FROM t_order WHERE user_id = %s", (u,)).units[0].data_source == "ds_1")
    scan = "SELECT user_id FROM t_order"

    async def read(**kw: Any) -> Any:
        result = await ex.execute(scan, **kw)
        return await result.fetchall(), result.complete

    loop.run_until_complete(ex.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)",
                                       (uuid.uuid4().int % 10**12, healthy)))  # fmt: skip
    try:
        expected, _ = loop.run_until_complete(read())
        with frozen_sources.frozen():
            _, error = within_bound(loop, read(), BOUND * STATEMENT_TIMEOUT)
            assert isinstance(error, QueryTimeoutError) and "ds_0" in str(error), error
        loop.run_until_complete(read())  # both connections fresh again
        with frozen_sources.frozen():
            rows, complete = loop.run_until_complete(read(allow_partial=True))
        assert complete is False and rows and set(rows) == {r for r in expected if r[0] == healthy}
    finally:
        loop.run_until_complete(ex.execute("DELETE FROM t_order WHERE user_id = %s", (healthy,)))


def test_an_idle_connection_is_pinged_within_the_acquire_timeout(ex: AsyncExecutor, frozen_sources: Frozen,
                                                                  loop: Any) -> None:  # fmt: skip
    user = user_on(ex, "ds_0")  # type: ignore[arg-type]
    loop.run_until_complete(point_select(ex, user))
    time.sleep(PING_AFTER + 0.2)  # idle long enough to be pinged on the next borrow
    with frozen_sources.frozen():
        _, error = within_bound(loop, point_select(ex, user), BOUND * (ACQUIRE_TIMEOUT + STATEMENT_TIMEOUT))
    assert isinstance(error, FAILURES), error


def test_a_new_connection_fails_within_the_acquire_timeout(ex: AsyncExecutor, frozen_sources: Frozen,
                                                           loop: Any) -> None:  # fmt: skip
    user = user_on(ex, "ds_0")  # type: ignore[arg-type]  # the pool is empty: the first borrow connects
    with frozen_sources.frozen():
        _, error = within_bound(loop, point_select(ex, user), BOUND * 2 * ACQUIRE_TIMEOUT)
    assert isinstance(error, FAILURES) and "ds_0" in str(error), error


def test_commit_fails_within_the_socket_timeout(ex: AsyncExecutor, frozen_sources: Frozen, loop: Any) -> None:
    user = user_on(ex, "ds_0")  # type: ignore[arg-type]
    tx = ex.transaction()
    loop.run_until_complete(tx.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)",
                                       (uuid.uuid4().int % 10**12, user)))  # fmt: skip
    with frozen_sources.frozen():
        _, error = within_bound(loop, tx.commit(), BOUND * SOCKET_TIMEOUT)
    assert isinstance(error, FAILURES), error
    loop.run_until_complete(tx.rollback())


def test_a_statement_without_deadline_fails_within_the_socket_timeout(config: Any, frozen_sources: Frozen,
                                                                      loop: Any) -> None:  # fmt: skip
    ex = AsyncExecutor(config, timeout=None)
    try:
        user = user_on(ex, "ds_0")  # type: ignore[arg-type]
        loop.run_until_complete(point_select(ex, user))
        with frozen_sources.frozen():
            _, error = within_bound(loop, point_select(ex, user), BOUND * SOCKET_TIMEOUT)
        assert isinstance(error, FAILURES) and "socketTimeout" in str(error), error
    finally:
        loop.run_until_complete(ex.close())


def test_a_healthy_data_source_is_not_delayed_on_the_same_loop(ex: AsyncExecutor, frozen_sources: Frozen,
                                                               loop: Any) -> None:  # fmt: skip
    frozen_user, healthy_user = user_on(ex, "ds_0"), user_on(ex, "ds_1")  # type: ignore[arg-type]
    loop.run_until_complete(ex.execute("INSERT INTO t_order (order_id, user_id, slow) VALUES (%s, %s, 5)",
                                       (uuid.uuid4().int % 10**12, healthy_user)))  # fmt: skip
    loop.run_until_complete(point_select(ex, frozen_user))
    frozen_errors: list[BaseException] = []

    async def hammer(stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await point_select(ex, frozen_user)
            except FAILURES as exc:
                frozen_errors.append(exc)

    async def scenario() -> tuple[float, BaseException | None]:
        stop = asyncio.Event()
        hammers = [asyncio.ensure_future(hammer(stop)) for _ in range(3)]  # three tasks stuck on ds_0
        try:
            await asyncio.sleep(STATEMENT_TIMEOUT * 1.2)  # the first deadlines fired: their kills are running
            worst = 0.0
            for _ in range(20):
                start = time.monotonic()
                assert await point_select(ex, healthy_user) == [(healthy_user,)]
                worst = max(worst, time.monotonic() - start)
            assert worst < STATEMENT_TIMEOUT, worst
            start = time.monotonic()
            try:  # a slow statement on ds_1 is cancelled at its own deadline
                await ex.execute("SELECT SLEEP(slow) FROM t_order WHERE user_id = %s", (healthy_user,), timeout=0.5)
            except QueryTimeoutError as exc:
                return time.monotonic() - start, exc
            return time.monotonic() - start, None
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*hammers), BOUND * (ACQUIRE_TIMEOUT + STATEMENT_TIMEOUT))

    with frozen_sources.frozen():
        elapsed, error = loop.run_until_complete(scenario())
    assert isinstance(error, QueryTimeoutError) and error.data_source == "ds_1", error
    assert frozen_errors and all(e.data_source == "ds_0" for e in frozen_errors)  # type: ignore[attr-defined]
    loop.run_until_complete(ex.execute("DELETE FROM t_order WHERE user_id = %s", (healthy_user,)))
