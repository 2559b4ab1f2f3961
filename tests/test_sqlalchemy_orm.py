"""The ORM against an oracle: the same models and operations on 4 x 4 shards (ddm+pymysql) and on one
MariaDB database (mysql+pymysql) give the same objects and rows, keys and Python types included.

The operations (tests/sqlalchemy_scenario.py): inserts of orders with items (the sharded side generates
the keys, the oracle is given them), ``session.get``, changes committed or rolled back, deletes with
their items, ORM bulk UPDATE / DELETE, filtered, ordered and paginated selects with ``selectinload``,
GROUP BY aggregates, counts, a join of the bound tables and one with the broadcast table.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from ddm_core.execute import Executor
from sqlalchemy_scenario import ORACLE_EXAMPLES, ORACLE_SETTINGS, NewOrder, SyncSide, prepare, run_example
from sqlalchemy_support import Base, Databases, databases, ddm_engine, executor  # noqa: F401 - fixtures


@pytest.fixture(scope="module")
def sides(databases: Databases, executor: Executor) -> Iterator[tuple[SyncSide, SyncSide]]:
    """The sharded and the oracle side, their tables created by ``create_all`` and the regions filled."""
    sharded, oracle = ddm_engine(executor), databases.oracle_engine()
    try:
        for engine in (sharded, oracle):
            Base.metadata.create_all(engine)
        pair = SyncSide(sharded), SyncSide(oracle)
        for side in pair:
            prepare(side)
        yield pair
    finally:
        sharded.dispose()
        oracle.dispose()


@ORACLE_SETTINGS
@ORACLE_EXAMPLES
def test_orm_matches_an_unsharded_database(
    sides: tuple[SyncSide, SyncSide], seed: list[list[NewOrder]], ops: list[tuple[str, Any]]
) -> None:
    run_example(*sides, seed, ops)
