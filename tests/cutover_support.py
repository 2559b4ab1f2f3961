"""Helpers of the cut-over tests (no tests here): a legacy server, four shard databases, a reference.

* :func:`layout` gives the sharded configuration (4 data sources x 2 tables,
  SLOTS over ``user_id`` with an even slot map, tables by ``hash64(user_id) % 2``)
  and the legacy data source, each on its own private ``mariadbd``;
* :func:`fill_legacy` creates the one legacy table and fills it, returning the
  reference rows (built by the test, not read back);
* :func:`read_side` reads every row of one side behind ddm-core's back, and
  :func:`misplaced` places each shard row with the scalar ``hashing.slot_of``,
  the even slot map and ``hash64 % 2`` (none of the cut-over's code);
* :class:`LagProbe` times rows written through the application until the other
  side has them (the sync lag under load);
* :func:`servers` is the module fixture of the two private ``mariadbd`` (import it).
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Iterator

import pytest

from ddm_core.errors import CutoverFencedError
from ddm_core.hashing import hash64, slot_of
from ddm_core.metadata.cutover import BucketState
from ddm_core.slots import SlotMap
from migrate_live_support import BINLOG_ARGS
from migrate_support import ORDER_DDL
from services import mariadb_rows
from test_execute_support import PrivateMariaDB, running_mariadb

__all__ = ["servers", "layout", "fill_legacy", "read_side", "shard_tables", "misplaced", "LagProbe", "TABLES", "SHARDS", "Row"]

SHARDS, TABLES = 4, 2
Row = tuple[int, int, str | None, int]  # user_id, amount, note, slow


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PrivateMariaDB, PrivateMariaDB]]:
    """The legacy server and the shard server: two private ``mariadbd --log-bin --binlog-format=ROW``."""
    with running_mariadb(tmp_path_factory.mktemp("legacy"), BINLOG_ARGS) as legacy, \
            running_mariadb(tmp_path_factory.mktemp("shards"), BINLOG_ARGS) as shards:
        yield legacy, shards


def layout(shard_dbs: list[str], shard_port: int, legacy_db: str, legacy_port: int
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sharded configuration document and the legacy data source mapping."""
    sources = {f"ds_{i}": {"url": f"mysql://127.0.0.1:{shard_port}/{db}", "username": "root", "password": ""}
               for i, db in enumerate(shard_dbs[:SHARDS])}
    doc = {
        "dataSources": sources,
        "pool": {"maxSize": 8, "minIdle": 0, "acquireTimeoutMs": 10000},
        "tables": [{"logicTable": "t_order", "shardKey": "user_id", "algorithm": "slots", "slotCount": 1024,
                    "databases": list(sources), "tablePerShard": TABLES, "tableKey": "user_id"}],
    }
    legacy = {"name": "legacy", "url": f"mysql://127.0.0.1:{legacy_port}/{legacy_db}", "username": "root",
              "password": "", "table": "t_order"}
    return doc, legacy


def fill_legacy(raw: Any, database: str, rows: int, seed: int = 5) -> dict[int, Row]:
    """The legacy ``t_order`` created and filled (``raw``: a connection to the legacy server)."""
    rng = random.Random(seed)
    ref: dict[int, Row] = {}
    values = []
    for i in range(1, rows + 1):
        note = None if i % 7 == 0 else ("" if i % 11 == 0 else f"note {i}")
        user = rng.randrange(1, 1 << 40)
        ref[i] = (user, i % 500, note, 0)
        values.append((i, user, i % 500, note))
    with raw.cursor() as cur:
        cur.execute(f"USE `{database}`")
        cur.execute(ORDER_DDL)
        for start in range(0, len(values), 5000):
            cur.executemany("INSERT INTO t_order (order_id, user_id, amount, note) VALUES (%s, %s, %s, %s)",
                            values[start:start + 5000])
    return ref


def read_side(port: int, tables: list[tuple[str, str]]) -> dict[int, list[tuple[Row, tuple[str, str]]]]:
    """``order_id -> [(row, (database, table))]`` of every row in ``tables`` (duplicates kept)."""
    out: dict[int, list[tuple[Row, tuple[str, str]]]] = {}
    for db, table in tables:
        for order_id, user, amount, note, slow in mariadb_rows(
                db, f"SELECT order_id, user_id, amount, note, slow FROM `{table}`", port=port):
            out.setdefault(int(order_id), []).append(((int(user), int(amount), note, int(slow)), (db, table)))
    return out


def shard_tables(shard_dbs: list[str]) -> list[tuple[str, str]]:
    return [(db, f"t_order_{d}_{t}") for d, db in enumerate(shard_dbs[:SHARDS]) for t in range(TABLES)]


def misplaced(found: dict[int, list[tuple[Row, tuple[str, str]]]], shard_dbs: list[str]) -> int:
    """Rows not on the node the layout gives their user (scalar slot function, even map, hash64 % tables)."""
    even = SlotMap.even(SHARDS, 10)
    bad = 0
    for copies in found.values():
        for (user, *_), (db, table) in copies:
            d = even.node_of(slot_of(user, 10))
            bad += (db, table) != (shard_dbs[d], f"t_order_{d}_{hash64(user) % TABLES}")
    return bad


class LagProbe:
    """Every ~0.5 s a row written through the application's executor, timed until the other side has it:
    a normal bucket's row on the shards (forward sync), a gray bucket's on the legacy table (reverse)."""

    def __init__(self, app: Any, legacy_port: int, legacy_db: str, shard_port: int, shard_dbs: list[str], *,
                 buckets: int = 100) -> None:
        from ddm_core.cutover.placement import Buckets

        self.app = app
        self.legacy = (legacy_port, legacy_db)
        self.shards = (shard_port, shard_dbs)
        self.rows: dict[int, Row] = {}
        self.lags: dict[str, list[float]] = {"forward": [], "reverse": []}
        #: Measurements are also kept per label (the test names what is going on: "steady", ...).
        self.label = ""
        self.labelled: dict[str, list[float]] = {}
        self.stop = threading.Event()
        self.errors: list[str] = []
        table = app.holder.config.table("t_order")
        assert table is not None
        self.buckets = Buckets(table, buckets)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self._probe()
        except Exception as exc:  # the test fails on it
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _probe(self) -> None:
        from services import mariadb_rows

        rng = random.Random(7)
        next_id = 900_000_000
        while not self.stop.wait(0.5):
            cut = self.app.holder.config.cutover
            if cut is None:
                continue
            user = rng.randrange(1, 1 << 40)
            state = cut.states[int(self.buckets.of([user])[0])]
            if state not in (BucketState.NORMAL, BucketState.GRAY):
                continue  # pre_gray / rollback write both sides at once: nothing to time
            try:
                self.app.executor.execute("INSERT INTO t_order (order_id, user_id, amount, note) VALUES (?, ?, 1, "
                                          "'probe')", (next_id, user)).close()
            except CutoverFencedError:
                continue  # a transition paused the bucket: the row was not written
            written = time.monotonic()
            self.rows[next_id] = (user, 1, "probe", 0)
            if state is BucketState.NORMAL:
                port, dbs = self.shards
                where = [(db, f"t_order_{d}_{t}") for d, db in enumerate(dbs[:4]) for t in range(2)]
            else:
                port, db = self.legacy
                where = [(db, "t_order")]
            while time.monotonic() - written < 60 and not any(
                    mariadb_rows(db, f"SELECT 1 FROM `{table}` WHERE order_id = %s", (next_id,), port=port)
                    for db, table in where):
                time.sleep(0.01)
            direction = "forward" if state is BucketState.NORMAL else "reverse"
            self.lags[direction].append(time.monotonic() - written)
            if self.label:
                self.labelled.setdefault(f"{self.label} {direction}", []).append(time.monotonic() - written)
            next_id += 1

    def finish(self) -> dict[int, Row]:
        """Stop probing; the rows it wrote (part of the reference from now on)."""
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=90)
        return self.rows

    def summary(self) -> str:
        out = []
        for direction, lags in (*self.lags.items(), *self.labelled.items()):
            if lags:
                ordered = sorted(lags)
                out.append(f"{direction} p50 {ordered[len(ordered) // 2]:.2f} s max {ordered[-1]:.2f} s "
                           f"({len(ordered)} rows)")
        return "; ".join(out)
