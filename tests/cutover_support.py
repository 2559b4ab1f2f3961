"""Helpers of the cut-over tests (no tests here): a legacy server, four shard databases, a reference.

* :func:`layout` gives the sharded configuration (4 data sources x 2 tables,
  SLOTS over ``user_id`` with an even slot map, tables by ``hash64(user_id) % 2``)
  and the legacy data source, each on its own private ``mariadbd``;
* :func:`fill_legacy` creates the one legacy table and fills it, returning the
  reference rows (built by the test, not read back);
* :func:`read_side` reads every row of one side behind ddm-core's back, and
  :func:`misplaced` places each shard row with the scalar ``hashing.slot_of``,
  the even slot map and ``hash64 % 2`` (none of the cut-over's code).
"""

from __future__ import annotations

import random
from typing import Any

from ddm_core.hashing import hash64, slot_of
from ddm_core.slots import SlotMap
from migrate_support import ORDER_DDL
from services import mariadb_rows

__all__ = ["layout", "fill_legacy", "read_side", "shard_tables", "misplaced", "TABLES", "SHARDS", "Row"]

SHARDS, TABLES = 4, 2
Row = tuple[int, int, str | None, int]  # user_id, amount, note, slow


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
