"""The ORM against an oracle: the same models and operations on 4 x 4 shards (ddm+pymysql) and on one
MariaDB database (mysql+pymysql) give the same objects and rows, keys and Python types included.

The operations (tests/sqlalchemy_scenario.py): inserts of orders with items (the sharded side generates
the keys, the oracle is given them), ``session.get``, changes committed or rolled back, deletes with
their items, ORM bulk UPDATE / DELETE, filtered, ordered and paginated selects with ``selectinload``,
GROUP BY aggregates, counts, a join of the bound tables and one with the broadcast table.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from ddm_core.execute import Executor
from sqlalchemy_scenario import NewOrder, Scenario, empty_tables, fill_regions, new_orders, operations
from sqlalchemy_support import Base, Databases, databases, ddm_engine, executor  # noqa: F401 - fixtures

ORACLE_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class SyncSide:
    """Steps in a ``Session`` of ``engine``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    def run(self, step: Callable[..., Any], *args: Any) -> Any:
        with Session(self.engine) as session:
            return step(session, *args)

    def run_autocommit(self, step: Callable[[Session], Any]) -> Any:
        with Session(self.autocommit) as session:
            return step(session)


@pytest.fixture(scope="module")
def sides(databases: Databases, executor: Executor) -> Iterator[tuple[SyncSide, SyncSide]]:
    """The sharded and the oracle side, their tables created by ``create_all`` and the regions filled."""
    sharded, oracle = ddm_engine(executor), databases.oracle_engine()
    try:
        for engine in (sharded, oracle):
            Base.metadata.create_all(engine)
        pair = SyncSide(sharded), SyncSide(oracle)
        for side in pair:
            side.run_autocommit(fill_regions)
        yield pair
    finally:
        sharded.dispose()
        oracle.dispose()


@ORACLE_SETTINGS
@given(seed=st.lists(new_orders(), min_size=1, max_size=6), ops=st.lists(operations, min_size=4, max_size=24))
def test_orm_matches_an_unsharded_database(
    sides: tuple[SyncSide, SyncSide], seed: list[list[NewOrder]], ops: list[tuple[str, Any]]
) -> None:
    sharded, oracle = sides
    for side in sides:
        side.run_autocommit(empty_tables)
    scenario = Scenario(sharded, oracle)
    for name, args in [("insert", orders) for orders in seed] + ops:
        scenario.apply(name, args)
