"""Catch-up throughput (binlog row changes/s) against a bare ``mysql-replication`` read of the same binlog.

A private ``mariadbd --log-bin --binlog-format=ROW --binlog-row-metadata=FULL``
(tests/test_execute_support.py ``PrivateMariaDB``) holds two databases:
``t_order`` (SLOTS, 1024 slots, 2 tables per data source) with ``ROWS`` rows on
one data source, growing to two, so about half of the rows move.

=========================  ======================================================  =================================
case                       ddm-core                                                baseline (the reader's floor)
=========================  ======================================================  =================================
catch-up 1 -> 2            ``catch_up()``: read the binlog from the recorded       ``BinLogStreamReader`` over the
                           position, slots of each event's rows on the compiled    same position range, every row
                           path, changes of moving rows collapsed per key and      event decoded, nothing applied
                           upserted at their targets, position recorded per flush
=========================  ======================================================  =================================

Before each round (untimed) a new migration is recorded up to a completed
backfill whose binlog position is the server's current one, then ``ROWS``
row updates are made (one ``UPDATE`` per physical table, each row once). The
figure is row changes read per second; about half are applied. Nothing here
asserts a speed.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_bench_backfill import fill_orders, reshard_doc  # noqa: E402
from test_bench_executor import Paired, measure_pair  # noqa: E402
from test_execute_support import PrivateMariaDB  # noqa: E402

from ddm_core import load_config  # noqa: E402
from ddm_core.migrate import Connections, connector  # noqa: E402
from ddm_core.migrate.binlog import binlog_positions  # noqa: E402
from ddm_core.migrate.catchup import catch_up  # noqa: E402
from ddm_core.migrate.phases import Phase  # noqa: E402
from ddm_core.migrate.plan import plan_migration  # noqa: E402
from ddm_core.migrate.state import MigrationLog  # noqa: E402

pytest.importorskip("pymysqlreplication")

ROWS = 20_000
ROUNDS = 3
BINLOG_ARGS = ("--server-id=1", "--log-bin=binlog", "--binlog-format=ROW", "--binlog-row-metadata=FULL")


class Env:
    def __init__(self, server: PrivateMariaDB, names: list[str]) -> None:
        self.server, self.names = server, names
        self.old = load_config(reshard_doc(names, 1, server.port))
        self.new = load_config(reshard_doc(names, 2, server.port))
        fill_orders(self.old, ROWS)
        conn = server.raw(names[1])
        with conn.cursor() as cur:
            for t in (0, 1):
                cur.execute(f"CREATE TABLE t_order_1_{t} LIKE `{names[0]}`.t_order_0_{t}")
        conn.close()
        self.plan = plan_migration(self.old, self.new, count="none", rate=1.0)
        self.round = 0
        self.start: list[Any] = []

    def prepare_round(self) -> tuple[Any, ...]:
        """A migration at a completed backfill from the current binlog position, then ROWS updates."""
        self.round += 1
        log = MigrationLog(connector(self.old, "ds_0"), f"bench-{self.round}")
        log.create_table()
        with Connections(self.old) as conns:
            positions = binlog_positions(self.old, conns, ["ds_0"])
        for phase in (Phase.PREPARE, Phase.DUAL_WRITE, Phase.BACKFILL):
            log.enter(phase, detail={"binlog": positions} if phase is Phase.BACKFILL else None)
            log.complete(phase)
        self.start = next(iter(positions.values()))
        conn = self.server.raw(self.names[0])
        with conn.cursor() as cur:
            for t in (0, 1):
                cur.execute(f"UPDATE t_order_0_{t} SET amount = amount + 1")
        conn.close()
        return (log,)

    def catch_up_round(self, log: MigrationLog) -> None:
        with Connections(self.old, self.new) as conns, log:
            result = catch_up(self.old, self.new, self.plan, conns, log, flush_rows=5000)
        assert result.completed and result.applied > ROWS // 3

    def reader_round(self) -> float:
        from pymysqlreplication import BinLogStreamReader  # type: ignore[import-untyped]
        from pymysqlreplication.row_event import UpdateRowsEvent  # type: ignore[import-untyped]

        self.prepare_round()  # its own changes: the same amount, from a position of its own
        started = time.perf_counter()
        stream = BinLogStreamReader(
            connection_settings={"host": "127.0.0.1", "port": self.server.port, "user": "root", "password": "",
                                 "read_timeout": 10},
            server_id=0x40000001, log_file=self.start[0], log_pos=int(self.start[1]), resume_stream=True,
            blocking=False, only_events=[UpdateRowsEvent], only_schemas=[self.names[0]])
        rows = sum(len(ev.rows) for ev in stream)
        stream.close()
        assert rows == ROWS
        return time.perf_counter() - started


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    with tempfile.TemporaryDirectory() as tmp:
        server = PrivateMariaDB(Path(tmp), BINLOG_ARGS)
        server.start()
        try:
            names = [f"ddm_bench_cu_{uuid.uuid4().hex[:8]}_{i}" for i in range(2)]
            conn = server.raw()
            with conn.cursor() as cur:
                for name in names:
                    cur.execute(f"CREATE DATABASE `{name}`")
            conn.close()
            yield Env(server, names)
        finally:
            server.kill()


def test_catch_up_vs_bare_binlog_read(benchmark: Any, env: Env) -> None:
    measure_pair(benchmark, env.catch_up_round, Paired(env.reader_round, env.prepare_round),
                 case="catch-up 1 -> 2 vs mysql-replication read", target="", items=ROWS, unit="row",
                 rounds=ROUNDS, warmup_rounds=1, higher_is_better=True)
