"""instance registry: point selects of a registered executor against an unregistered one, same run, interleaved.

Registering must not slow the statement path: the heartbeat is a thread of its own and the
statement path has no line of the registry. Both executors follow the same ``ddm_config`` table
(MariaDB on 127.0.0.1:3306) over the SLOTS layout of test_bench_executor.py (4 databases x 4
tables, 20 000 orders); the registered one writes its ``ddm_instances`` row every 0.1 s (a TTL of
0.3 s, thirty times the default rate), so any cost the heartbeat has on the caller's thread (the
GIL, its own connection) shows. The unregistered executor's round runs untimed before each timed
round of the registered one; ``report.py`` prints the ratio. Nothing here asserts a speed.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest

import ddm_core.dbapi as dbapi
from ddm_core.execute import Executor
from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.dump import dump_native
from ddm_core.migrate import config_table_source
from test_bench_executor import (
    CALLS, DDL, INSERT, POINT, SEED, SHARDS, Paired, _connect, _point_keys, _timed, make_rows, measure_pair,
    slots_config,
)  # fmt: skip

ROWS = 20_000
TABLE = "instance registry: registered executor vs unregistered (interleaved rounds)"


@pytest.fixture(scope="module")
def executors() -> Iterator[tuple[Executor, Executor]]:
    """(registered, unregistered) executors over holders following one ``ddm_config`` table."""
    admin = _connect()
    names = [f"ddm_bench_{uuid.uuid4().hex[:8]}_{i}" for i in range(SHARDS)]
    with admin.cursor() as cur:
        for db in names:
            cur.execute(f"CREATE DATABASE {db}")
    opened: list[Any] = []
    try:
        config = slots_config(names)
        source = config_table_source(config, "ds_0", create=True)
        opened.append(source)
        source.publish(dump_native(config, secrets="keep"))
        plain = Executor(ConfigHolder(source, check_env=False), instance_role=None, load_schema=False,
                         replica_monitor=False)  # fmt: skip
        opened.append(plain)
        plain.execute(DDL.format(table="t_order")).close()
        dbapi.connect(executor=plain, autocommit=True).cursor().executemany(INSERT, make_rows(1, ROWS, SEED))
        registered = Executor(ConfigHolder(config_table_source(config, "ds_0"), check_env=False),
                              instance_ttl=0.3, load_schema=False, replica_monitor=False)  # fmt: skip
        opened.append(registered)
        assert registered.instance is not None
        yield registered, plain
        assert registered.instance.status.healthy, "the registry was written throughout"
    finally:
        for thing in reversed(opened):
            thing.close()
        with admin.cursor() as cur:
            for db in names:
                cur.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.close()


def test_point_select_registered(executors: tuple[Executor, Executor], benchmark: Any) -> None:
    registered, plain = executors
    keys = _point_keys(CALLS, ROWS, SEED)

    def round_of(executor: Executor) -> None:
        for k in keys:
            with executor.execute(POINT, (k,)) as result:
                result.fetchall()

    round_of(registered)
    round_of(plain)
    measure_pair(benchmark, lambda: round_of(registered), Paired(_timed(lambda: round_of(plain))),
                 case="point select by key, registered (heartbeat every 0.1 s)", target="<= 1.05", items=CALLS,
                 unit="call", rounds=60, table=TABLE, group="instance registry")  # fmt: skip
