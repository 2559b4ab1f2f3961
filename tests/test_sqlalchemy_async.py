"""The ORM oracle scenario of tests/test_sqlalchemy_orm.py through asyncio: ``create_async_engine("ddm+asyncmy://")``
on an :class:`~ddm_core.aio.AsyncExecutor` and ``AsyncSession``, against the same unsharded MariaDB oracle.

The operations are the thread test's (tests/sqlalchemy_scenario.py), each run in
``AsyncSession.run_sync``: SQLAlchemy drives them on the event loop, so every statement goes
through the ``ddm+asyncmy`` dialect and the asyncio facade.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Coroutine, Iterator, TypeVar

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from sqlalchemy_scenario import ORACLE_EXAMPLES, ORACLE_SETTINGS, NewOrder, Side, SyncSide, prepare, run_example
from sqlalchemy_support import Base, Databases, databases  # noqa: F401 - fixtures

pytest.importorskip("asyncmy")  # the aio extra (the test extra installs it)

T = TypeVar("T")


class AsyncSide:
    """Steps in an ``AsyncSession`` of ``engine`` (``run_sync``), on ``runner``'s event loop."""

    def __init__(self, runner: asyncio.Runner, engine: AsyncEngine) -> None:
        self.runner = runner
        self.engine = engine
        self.autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(work)

    def run(self, step: Callable[..., Any], *args: Any) -> Any:
        return self._run(_in_session(self.engine, step, *args))

    def run_autocommit(self, step: Callable[[Session], Any]) -> Any:
        return self._run(_in_session(self.autocommit, step))


async def _in_session(engine: AsyncEngine, step: Callable[..., Any], *args: Any) -> Any:
    async with AsyncSession(engine) as session:
        return await session.run_sync(step, *args)


@pytest.fixture(scope="module")
def sides(databases: Databases) -> Iterator[tuple[Side, Side]]:
    """The asyncio sharded side and the oracle, tables created and regions filled."""
    from ddm_core.aio import AsyncExecutor

    oracle = databases.oracle_engine()
    with asyncio.Runner() as runner:

        async def start() -> tuple[AsyncExecutor, AsyncEngine]:
            executor = AsyncExecutor(databases.config, timeout=10.0, matched_rows=True)
            engine = create_async_engine("ddm+asyncmy://", connect_args={"executor": executor})
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
            return executor, engine

        executor, engine = runner.run(start())
        try:
            Base.metadata.create_all(oracle)
            pair: tuple[Side, Side] = AsyncSide(runner, engine), SyncSide(oracle)
            for side in pair:
                prepare(side)
            yield pair
        finally:
            oracle.dispose()
            runner.run(engine.dispose())
            runner.run(executor.close())


@ORACLE_SETTINGS
@ORACLE_EXAMPLES
def test_async_orm_matches_an_unsharded_database(
    sides: tuple[Side, Side], seed: list[list[NewOrder]], ops: list[tuple[str, Any]]
) -> None:
    run_example(*sides, seed, ops)
