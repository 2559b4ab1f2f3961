"""A legacy fail-over in the middle of a cut-over's sync: the forward replay follows the promoted replica by GTID.

Three private ``mariadbd``: the legacy primary (server id 1), its replica
(server id 2, GTID replication, ``log_slave_updates``) and the shard server.
A writer thread updates, deletes and re-inserts hot legacy rows the whole time
(autocommit, as the application does while every bucket is ``normal``), keeping
its own record of what committed. The cut-over copies and replays under those
writes and goes live; a sync thread runs passes. Then the fail-over: the writer
pauses, the replica catches up with the primary's GTID position, the primary is
SIGKILLed wherever the sync thread is, and the replica is promoted. A new
cut-over process, pointed at the new primary's address, resumes the forward
replay by GTID while the writer goes on against the new primary. At the end:
the new primary equals the writer's record, and the shards equal the new
primary — 0 rows lost, 0 duplicated, 0 differing, 0 misplaced.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

from cutover_support import SHARDS, Row, fill_legacy, layout, misplaced, read_side, shard_tables
from replication import Replication
from services import fresh_mariadb_databases, require_module
from test_execute_support import PrivateMariaDB, mysql_raw, running_mariadb

from ddm_core import load_config
from ddm_core.cutover import Cutover
from ddm_core.errors import DdmError
from ddm_core.metadata.cutover import BucketState
from ddm_core.migrate import config_table_source

require_module("pymysqlreplication", "the cut-over's binlog sync")

ROWS = 3_000
HOT = 40  # legacy rows the writer keeps changing
BUCKETS = 20
NAME = "failover"


def _args(server_id: int) -> tuple[str, ...]:
    return (f"--server-id={server_id}", "--log-bin=binlog", "--binlog-format=ROW", "--binlog-row-metadata=FULL",
            "--log-slave-updates")


class LegacyWriter:
    """Updates, deletes and re-inserts hot legacy rows (autocommit); :attr:`ref` is what committed."""

    def __init__(self, port: int, database: str, ref: dict[int, Row], hot: list[int]) -> None:
        self.port, self.database = port, database
        self.ref = dict(ref)
        self.hot = hot
        self.users = {key: ref[key][0] for key in hot}
        self.go, self.idle, self.stop = threading.Event(), threading.Event(), threading.Event()
        self.writes = 0
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.go.set()
        self.thread.start()

    def pause(self) -> None:
        """Return once no write is under way (none starts until :meth:`resume`)."""
        self.go.clear()
        assert self.idle.wait(30), "the writer did not pause"

    def resume(self, port: int) -> None:
        self.port = port
        self.idle.clear()
        self.go.set()

    def finish(self) -> None:
        self.stop.set()
        self.go.set()
        self.thread.join(30)
        assert not self.errors, self.errors[:3]

    def _run(self) -> None:
        rng = random.Random(11)
        conn: Any = None
        try:
            while not self.stop.is_set():
                if not self.go.is_set():
                    if conn is not None:
                        conn.close()
                        conn = None
                    self.idle.set()
                    self.go.wait(0.1)
                    continue
                if conn is None:
                    conn = mysql_raw(self.database, port=self.port)
                self._one(conn, rng)
                time.sleep(0.003)
        except BaseException as exc:  # reported by finish()
            self.errors.append(exc)
        finally:
            if conn is not None:
                conn.close()
            self.idle.set()

    def _one(self, conn: Any, rng: random.Random) -> None:
        key = rng.choice(self.hot)
        row = self.ref.get(key)
        with conn.cursor() as cur:
            if row is None:
                amount = rng.randrange(1000)
                cur.execute("INSERT INTO t_order (order_id, user_id, amount, note) VALUES (%s, %s, %s, 'again')",
                            (key, self.users[key], amount))
                self.ref[key] = (self.users[key], amount, "again", 0)
            elif rng.random() < 0.3:
                cur.execute("DELETE FROM t_order WHERE order_id = %s", (key,))
                del self.ref[key]
            else:
                cur.execute("UPDATE t_order SET amount = amount + 1 WHERE order_id = %s", (key,))
                self.ref[key] = (row[0], row[1] + 1, row[2], row[3])
        self.writes += 1


class SyncThread:
    """``cutover.sync_once()`` in a loop until stopped or failed (the primary may vanish under it)."""

    def __init__(self, cut: Cutover) -> None:
        self.cut = cut
        self.stop = threading.Event()
        self.passes = 0
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                self.cut.sync_once()
                self.passes += 1
                time.sleep(0.05)
        except DdmError as exc:  # the legacy primary was killed mid-pass: what a fail-over does
            self.failure = exc

    def join(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the sync thread hung"


def _cutover(doc: dict[str, Any], legacy: dict[str, Any]) -> Cutover:
    return Cutover(load_config(doc), name=NAME, table="t_order", legacy=legacy, state_on="ds_0",
                   config_source="ds_0", buckets=BUCKETS, fence_after_s=0.2, poll_s=0.1, hold_s=0.0, batch=500)


def _wait(condition: Any, what: str, timeout: float = 180.0) -> None:  # a bound: a slow host takes minutes
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f"no {what} within {timeout:g} s"
        time.sleep(0.05)


def test_forward_sync_follows_a_promoted_replica_by_gtid(tmp_path: Path) -> None:
    rng = random.Random(2024)
    with running_mariadb(tmp_path / "primary", _args(1)) as primary, \
            running_mariadb(tmp_path / "replica", _args(2)) as replica, \
            running_mariadb(tmp_path / "shards", _args(10)) as shards, \
            fresh_mariadb_databases(SHARDS, connect=shards.raw) as shard_dbs:
        Replication.sql(replica, "CHANGE MASTER TO MASTER_HOST='127.0.0.1', "
                        f"MASTER_PORT={primary.port}, MASTER_USER='root', MASTER_PASSWORD='', "
                        "MASTER_CONNECT_RETRY=1, MASTER_USE_GTID=slave_pos", "START SLAVE")
        legacy_db = primary.create_database("ddm_legacy_")
        ref = fill_legacy(primary.raw(), legacy_db, ROWS)
        _rotate(primary)  # the primary's files run ahead of the replica's: its positions mean nothing there
        doc, legacy = layout(shard_dbs, shards.port, legacy_db, primary.port)
        cut = _cutover(doc, legacy)
        with config_table_source(cut.config, "ds_0", create=True) as source:
            source.publish(cut.document((BucketState.NORMAL,) * BUCKETS))
        writer = LegacyWriter(primary.port, legacy_db, ref, rng.sample(sorted(ref), HOT))
        writer.start()
        try:
            cut.start()  # copy and replay under the writer's changes
            syncing = SyncThread(cut)
            _wait(lambda: syncing.passes >= 3 or syncing.failure is not None, "sync passes")
            _rotate(primary)
            _wait(lambda: syncing.passes >= 6 or syncing.failure is not None, "sync passes over the rotation")

            # The fail-over: writes stop, the replica catches up, the primary dies wherever the sync is.
            writer.pause()
            before = writer.writes
            _wait_replicated(primary, replica)
            time.sleep(rng.uniform(0, 0.3))
            primary.kill()
            syncing.join()
            cut.close()
            Replication.sql(replica, "STOP SLAVE", "RESET SLAVE ALL")

            moved = dict(legacy, url=f"mysql://127.0.0.1:{replica.port}/{legacy_db}")
            resumed = _cutover(doc, moved)
            writer.resume(replica.port)
            try:
                _wait(lambda: writer.writes >= before + 300, "writes on the new primary")
                syncing = SyncThread(resumed)
                _wait(lambda: syncing.passes >= 3 or syncing.failure is not None, "sync passes after the fail-over")
                writer.finish()
                syncing.join()
                assert syncing.failure is None, syncing.failure
                resumed.sync_once()  # everything the writer did is in the binlog read now
                state = resumed.log.state()
            finally:
                resumed.close()
        finally:
            writer.finish()

        new_primary = read_side(replica.port, [(legacy_db, "t_order")])
        assert {k: rows[0][0] for k, rows in new_primary.items()} == writer.ref, "the new primary lost writes"
        found = read_side(shards.port, shard_tables(shard_dbs))
        lost = sorted(set(new_primary) - set(found))
        extra = sorted(set(found) - set(new_primary))
        duplicated = sorted(k for k, rows in found.items() if len(rows) > 1)
        differing = sorted(k for k in set(found) & set(new_primary) if found[k][0][0] != new_primary[k][0][0])
        print(f"\n{writer.writes} writes ({before} before the fail-over); lost {len(lost)}, extra {len(extra)}, "
              f"duplicated {len(duplicated)}, differing {len(differing)}")
        assert (lost, extra, duplicated, differing) == ([], [], [], [])
        assert misplaced(found, shard_dbs) == 0
        # The replay went on in the new primary's own files, by its server id and GTIDs.
        mark = state.scans[f"forward:127.0.0.1:{replica.port}"].high_water
        assert mark is not None and len(mark) == 4 and int(mark[3]) == 2 and str(mark[2]).startswith("0-")


def _rotate(server: PrivateMariaDB) -> None:
    """Two new binlog files on ``server`` only (not written to the binlog, so no replica rotates with it)."""
    Replication.sql(server, "FLUSH NO_WRITE_TO_BINLOG BINARY LOGS", "FLUSH NO_WRITE_TO_BINLOG BINARY LOGS")


def _wait_replicated(primary: PrivateMariaDB, replica: PrivateMariaDB) -> None:
    target = Replication.scalar(primary, "SELECT @@gtid_binlog_pos")
    assert Replication.scalar(replica, f"SELECT MASTER_GTID_WAIT('{target}', 300)") == 0, Replication.status(replica)
