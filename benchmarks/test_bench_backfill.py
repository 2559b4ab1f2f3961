"""Backfill throughput (moved rows/s) against a plain ``INSERT ... SELECT`` between two databases, same run.

MariaDB on 127.0.0.1:3306 (root, no password; ``DDM_BENCH_BACKFILL_PORT`` names
another, e.g. a private ``mariadbd`` whose CPU is the run's alone). The module creates two
databases ``ddm_bench_bf_<tag>_0..1``: ``t_order`` (SLOTS, 1024 slots, 2 tables
per data source) with ``ROWS`` rows (1 M) on one data source, growing to two, so
about half the rows move (dropped at the end).

=========================  ======================================================  ===============================
case                       ddm-core                                                baseline (the physical floor)
=========================  ======================================================  ===============================
backfill 1 -> 2            ``backfill(batch=10 000)``: keyset reads of every       ``INSERT INTO db1.copy SELECT
                           source row (literal and row hash spelled by the          * FROM db0.t_order_0_i ... LIMIT
                           source), slots on the compiled path, upserts of the      n`` of as many rows as moved,
                           moving rows, count + checksum of each batch on both      server-side, one statement per
                           sides, a state row per batch                             table
=========================  ======================================================  ===============================

Before each round the target tables are emptied and a new migration is
recorded up to dual write (untimed). The figure is moved rows per second;
the backfill also reads the rows that stay (twice the moved rows here).
Nothing here asserts a speed.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest
from test_bench_executor import Paired, measure_pair

from ddm_core import load_config
from ddm_core.algorithms.slot_based import slot_layout_spec
from ddm_core.execute import Executor
from ddm_core.migrate import Connections, connector
from ddm_core.migrate.backfill import backfill
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import plan_migration
from ddm_core.migrate.state import MigrationLog
from ddm_core.slots import SlotMap

#: Source rows (``DDM_BENCH_BACKFILL_ROWS`` overrides; docs/migration.md quotes the 1 M figures).
ROWS = int(os.environ.get("DDM_BENCH_BACKFILL_ROWS", "1000000"))
ROUNDS = 3
PORT = int(os.environ.get("DDM_BENCH_BACKFILL_PORT", "3306"))
DDL = ("CREATE TABLE t_order (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, "
       "amount INT NOT NULL DEFAULT 0, note VARCHAR(40), KEY by_user (user_id))")


def _connect(database: str | None = None) -> Any:
    return pymysql.connect(host="127.0.0.1", port=PORT, user="root", password="", database=database,
                           autocommit=True, ssl_disabled=True)


def reshard_doc(names: list[str], count: int, port: int = PORT) -> dict[str, Any]:
    """A SLOTS config over the first ``count`` databases (1: the source layout, 2: half the slots moved)."""
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:{port}/{db}", "username": "root", "password": ""}
            for i, db in enumerate(names[:count])}
    layout = SlotMap.even(1, 10) if count == 1 else SlotMap.even(1, 10).moved_to(2)[0]
    return {
        "dataSources": urls, "pool": {"maxSize": 2, "minIdle": 0},
        "tables": [{"logicTable": "t_order", "shardKey": "user_id", "algorithm": "slots", "slotCount": 1024,
                    "shardCount": count, "tablePerShard": 2, "databases": list(urls), "tableKey": "user_id",
                    "slots": slot_layout_spec(layout, list(urls))}],
        "defaultDataSource": "ds_0",
    }


def fill_orders(config: Any, rows: int = ROWS) -> None:
    """``t_order`` created on the source layout and filled with ``rows`` rows through the executor."""
    with Executor(config, load_schema=False) as ex:
        ex.execute(DDL).close()
        for start in range(1, rows + 1, 2000):
            values = ", ".join(f"({i}, {i * 2654435761 % (1 << 40)}, {i % 977}, 'note {i}')"
                               for i in range(start, min(start + 2000, rows + 1)))
            ex.execute(f"INSERT INTO t_order (order_id, user_id, amount, note) VALUES {values}").close()


class Env:
    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.old, self.new = load_config(reshard_doc(names, 1)), load_config(reshard_doc(names, 2))
        fill_orders(self.old)
        self.direct = _connect(names[1])
        with self.direct.cursor() as cur:
            for t in (0, 1):
                cur.execute(f"CREATE TABLE t_order_1_{t} LIKE `{names[0]}`.t_order_0_{t}")
            cur.execute(f"CREATE TABLE copy_floor LIKE `{names[0]}`.t_order_0_0")
        self.plan = plan_migration(self.old, self.new, count="none", rate=1.0)
        self.moved: list[int] = [0, 0]
        self.round = 0

    def reset(self) -> tuple[Any, ...]:
        """Empty targets, a new migration recorded up to dual write (untimed)."""
        with self.direct.cursor() as cur:
            for t in (0, 1):
                cur.execute(f"TRUNCATE TABLE t_order_1_{t}")
        self.round += 1
        log = MigrationLog(connector(self.old, "ds_0"), f"bench-{self.round}")
        log.create_table()
        for phase in (Phase.PREPARE, Phase.DUAL_WRITE):
            log.enter(phase)
            log.complete(phase)
        return (log,)

    def run(self, log: MigrationLog) -> None:
        with Connections(self.old, self.new) as conns, log:
            result = backfill(self.old, self.new, self.plan, conns, log)
        assert result.rows_read == ROWS
        self.moved = [r.rows_copied for r in result.scans]

    def floor_round(self) -> float:
        with self.direct.cursor() as cur:
            cur.execute("TRUNCATE TABLE copy_floor")
            started = time.perf_counter()
            for t, n in enumerate(self.moved or [ROWS // 4, ROWS // 4]):
                cur.execute(f"INSERT INTO copy_floor SELECT * FROM `{self.names[0]}`.t_order_0_{t} "
                            f"ORDER BY order_id LIMIT {int(n)}")
            return time.perf_counter() - started


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    tag = uuid.uuid4().hex[:8]
    names = [f"ddm_bench_bf_{tag}_{i}" for i in range(2)]
    conn = _connect()
    try:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"CREATE DATABASE `{name}`")
        e = Env(names)
        e.run(e.reset()[0])  # learns the moved rows per table for the floor
        yield e
        e.direct.close()
    finally:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


def test_backfill_vs_insert_select(benchmark: Any, env: Env) -> None:
    moved = sum(env.moved)
    measure_pair(benchmark, env.run, Paired(env.floor_round, env.reset), case="backfill 1 -> 2 vs INSERT ... SELECT",
                 target="", items=moved, unit="row", rounds=ROUNDS, warmup_rounds=1, higher_is_better=True)
