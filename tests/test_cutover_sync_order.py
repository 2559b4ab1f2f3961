"""The cut-over's forward sync racing the application's dual writes, on two private mariadbd (--log-bin, ROW).

A ``pre_gray`` bucket is written on the legacy table first, then on the shards
(dual write), while the forward sync replays the legacy binlog onto the shards:
the same race as a resharding's catch-up (tests/test_migrate_catchup_order.py).
The application's newer write is run just before the sync's first write to a
shard, and the shards must then hold the legacy row, not an older one. (The
reverse sync has no such race: in ``gray`` the application writes only the
shards, so nothing but the sync writes the legacy rows it copies.)
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
import yaml

from ddm_core import load_config
from ddm_core.cutover import Cutover
from ddm_core.cutover.placement import Buckets
from ddm_core.cutover.sync import Sync
from ddm_core.execute import Executor
from ddm_core.hashing import hash64, slot_of
from ddm_core.metadata.cutover import BucketState
from ddm_core.migrate import config_table_source
from ddm_core.slots import SlotMap
from cutover_support import SHARDS, TABLES, fill_legacy, layout
from cutover_support import servers  # noqa: F401 (a fixture)
from race_support import WRITES, RaceAtFirstWrite, RacingWrite, expected_row, write_row
from services import fresh_mariadb_databases, mariadb_rows, require_module
from test_execute_support import PrivateMariaDB

require_module("pymysqlreplication", "the cut-over sync ordering tests")

BUCKETS = 20
COLUMNS = "order_id, user_id, amount, note, slow"
ORDER_ID = 7


class _PreGray:
    """A live cut-over of 200 legacy rows with row ``ORDER_ID``'s bucket pre_gray; the application on that version."""

    def __init__(self, legacy: PrivateMariaDB, shards: PrivateMariaDB, legacy_db: str, shard_dbs: list[str]) -> None:
        doc, spec = layout(shard_dbs, shards.port, legacy_db, legacy.port)
        self.legacy, self.shards, self.legacy_db, self.shard_dbs = legacy, shards, legacy_db, shard_dbs
        self.user = fill_legacy(legacy.raw(), legacy_db, 200)[ORDER_ID][0]
        self.config = load_config(doc)
        self.cut = Cutover(self.config, name="race", table="t_order", legacy=spec, state_on="ds_0",
                           config_source="ds_0", buckets=BUCKETS, fence_after_s=0.2, poll_s=0.1, hold_s=0.0,
                           batch=1000)
        with config_table_source(self.config, "ds_0", create=True) as source:
            source.publish(self.cut.document((BucketState.NORMAL,) * BUCKETS))
        self.cut.start()
        bucket = int(Buckets(self.cut.sync.table, BUCKETS).of([self.user])[0])
        self.cut.advance([bucket], BucketState.PRE_GRAY)
        states = self.cut.log.state().states
        assert states[bucket] is BucketState.PRE_GRAY
        self.app = Executor(load_config(yaml.safe_load(self.cut.document(states))), timeout=60.0, load_schema=False)

    def write(self, kind: str, amount: int | None) -> None:
        """The application's write of row ``ORDER_ID`` (legacy, then the shards)."""
        write_row(self.app, kind, amount, self.user, ORDER_ID)

    def row(self, side: str) -> tuple[Any, ...] | None:
        """Row ``ORDER_ID`` on the legacy table or on its shard node, read behind ddm-core's back."""
        if side == "legacy":
            port, db, table = self.legacy.port, self.legacy_db, "t_order"
        else:
            d = SlotMap.even(SHARDS, 10).node_of(slot_of(self.user, 10))
            port, db, table = self.shards.port, self.shard_dbs[d], f"t_order_{d}_{hash64(self.user) % TABLES}"
        rows = mariadb_rows(db, f"SELECT {COLUMNS} FROM {table} WHERE order_id = %s", (ORDER_ID,), port=port)
        return tuple(rows[0]) if rows else None

    def close(self) -> None:
        self.app.close()
        self.cut.close()


@pytest.fixture()
def pre_gray(servers: tuple[PrivateMariaDB, PrivateMariaDB]) -> Iterator[_PreGray]:
    legacy, shards = servers
    with fresh_mariadb_databases(1, connect=legacy.raw) as legacy_db, \
            fresh_mariadb_databases(SHARDS, connect=shards.raw) as shard_dbs:
        setup = _PreGray(legacy, shards, legacy_db[0], shard_dbs)
        try:
            yield setup
        finally:
            setup.close()


@pytest.mark.parametrize("case", list(WRITES))
def test_a_dual_write_racing_the_forward_sync_is_not_set_back(pre_gray: _PreGray, case: str) -> None:
    s = pre_gray
    (first, amount), racing, want = WRITES[case]
    s.write(first, amount)
    assert s.row("shards") == s.row("legacy")  # the dual write reached the shards too
    race = RacingWrite(lambda: s.write(*racing), s.legacy.port)
    with RaceAtFirstWrite((s.config, s.cut.routing.legacy_config), s.config.data_sources, race) as conns:
        sync = Sync(s.config, s.cut.routing, conns, s.cut.log)
        result = sync.forward(s.cut.log.state(), passes=1)
    assert result.applied >= 1 and race.join() == []
    assert s.row("legacy") == expected_row(ORDER_ID, s.user, want)
    assert s.row("shards") == s.row("legacy"), f"{case}: the forward sync wrote an older version over the dual write"
    assert race.waited is True  # the application's write waited for the sync's lock on the legacy row
