"""Checkpoint rows of the workflow state tables (``ddm_migration``, ``ddm_cutover``) and their prune.

The state read from the last checkpoint and the rows after it must equal the
fold of every row; a writer killed at random points (mid-append, mid-checkpoint,
mid-prune) must leave a table whose state still equals the fold of every row
ever written (the table's and the archive's).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from ddm_core.cutover.phases import CutoverPhase
from ddm_core.cutover.state import KEPT_FINDINGS, CutoverLog, Transition
from ddm_core.errors import DdmError, MigrationError
from ddm_core.metadata.cutover import BucketState
from ddm_core.migrate.checkpoint import CHECKPOINT
from ddm_core.migrate.event import Event
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.prune import prune
from ddm_core.migrate.state import MigrationLog, WorkflowLog, create_table_sql
from services import fresh_mariadb_databases, mariadb_connect, mariadb_rows

HERE = Path(__file__).resolve().parent


@pytest.fixture()
def database() -> Iterator[str]:
    with fresh_mariadb_databases(1) as names:
        yield names[0]


def _connect(database: str) -> Any:
    return lambda: mariadb_connect(database=database)


def _everything(log: WorkflowLog[Any], database: str, archive: str | None = None) -> list[Event]:
    """Every row ever written for ``log``'s workflow (the archive's too: the same layout), by step."""
    rows = list(log.events())
    if archive is not None:
        with type(log)(_connect(database), log.name, table=archive) as old:
            rows += old.events()
    return sorted(rows, key=lambda ev: ev.seq)


def _migration_steps(log: MigrationLog, rng: random.Random, steps: int) -> None:
    log.enter(Phase.PREPARE, detail={"plan": "p"})
    log.complete(Phase.PREPARE)
    log.enter(Phase.DUAL_WRITE)
    log.complete(Phase.DUAL_WRITE)
    log.enter(Phase.BACKFILL, detail={"binlog": {"s": ["b.000001", 4]}})
    for i in range(steps):
        if rng.random() < 0.5:
            log.record_batch(rng.randrange(6), [i, f"k{i}"], i * 10, f"c{i}", done=rng.random() < 0.1)
        else:
            log.record_scan(f"ds_{rng.randrange(3)}.t_{rng.randrange(2)}", [i], i, f"c{i}", done=rng.random() < 0.1)
        if i % 17 == 0:
            log.stop(Phase.BACKFILL, {"at": i})
            log.enter(Phase.BACKFILL)


def test_a_migration_read_from_its_checkpoint_equals_the_fold_of_every_row(database: str) -> None:
    with MigrationLog(_connect(database), "grow", checkpoint_every=10) as log:
        log.create_table()
        _migration_steps(log, random.Random(7), 150)
        log.complete(Phase.BACKFILL)
        log.enter(Phase.CATCH_UP)
        log.complete(Phase.CATCH_UP)
        log.enter(Phase.VERIFY)
        log.complete(Phase.VERIFY)
        log.enter(Phase.SHIFT_READS)
        for pct in (10.0, 50.0, 75.0):
            log.set_read_shift(pct)
        every = log.events()
        tail = log.tail()
        assert sum(1 for ev in every if ev.event == CHECKPOINT) >= 15
        assert tail[0].event == CHECKPOINT and len(tail) <= 11
        state = log.state()
        assert state == log.fold(every)
        assert state.read_shift_pct == 75.0 and state.phase is Phase.SHIFT_READS
        assert state.slots and state.scans and len(state.history) > 20
        assert log.scans() == state.scans


def test_a_cutover_keeps_its_transitions_and_last_findings_across_checkpoints(database: str) -> None:
    with CutoverLog(_connect(database), "cut", checkpoint_every=8) as log:
        log.create_table()
        log.enter(CutoverPhase.PREPARE, detail={"buckets": 4, "table": "t"})
        log.complete(CutoverPhase.PREPARE)
        for phase in (CutoverPhase.COPY, CutoverPhase.REPLAY):
            log.enter(phase)
            log.complete(phase)
        log.enter(CutoverPhase.LIVE)
        for i in range(60):
            log.record_scan("forward:legacy", ["b.000001", i], i, "", phase=CutoverPhase.LIVE)
            log.record_finding({"sampled": 10, "differences": i % 3, "rows": [], "at": i})
            if i % 10 == 0:
                state = log.state()
                t = Transition(state.next_transition, (i % 4,), BucketState.PRE_GRAY)
                log.begin_transition(t)
                log.end_transition(t, {"legacy": {"legacy": ["b.000001", i]}})
        state = log.state()
        assert state == log.fold(log.events())
        assert len(state.findings) == KEPT_FINDINGS and state.findings[-1]["at"] == 59
        assert state.next_transition == 7 and len(state.switches) == 6
        assert len(log.tail()) <= 9


def test_a_table_made_before_checkpoints_gets_its_index_and_first_checkpoint(database: str) -> None:
    old_ddl = create_table_sql("ddm_cutover").replace(",\n  KEY by_event (migration, event, seq)", "")
    assert "by_event" not in old_ddl
    conn = mariadb_connect(database=database)
    with conn.cursor() as cur:
        cur.execute(old_ddl)
        # an older version's rows: prepare, then 5 000 position rows of one scan, filled by the server
        cur.execute("INSERT INTO ddm_cutover (migration, seq, event, phase, detail) VALUES "
                    "('old', 1, 'enter', 'prepare', '{\"buckets\": 4}'), ('old', 2, 'complete', 'prepare', NULL), "
                    "('old', 3, 'enter', 'copy', NULL)")
        cur.execute("INSERT INTO ddm_cutover (migration, seq, event, phase, high_water, rows_copied, detail) "
                    "SELECT 'old', seq + 3, 'scan', 'copy', CONCAT('[', seq, ']'), seq, '{\"scan\": \"copy\"}' "
                    "FROM seq_1_to_5000")
    conn.close()
    with CutoverLog(_connect(database), "old") as log:
        before = log.state()  # read without the index: every row
        assert before.scans["copy"].rows_copied == 5000 and before.seq == 5003
        log.create_table()
        assert mariadb_rows(database, "SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = "
                            "DATABASE() AND table_name = 'ddm_cutover' AND index_name = 'by_event'")[0][0] == 3
        after = log.record_scan("copy", [5001], 5001, "", done=True, phase=CutoverPhase.COPY)
        tail = log.tail()
        assert [ev.event for ev in tail] == [CHECKPOINT]  # the first append after 5 000 rows checkpoints
        assert after.seq == 5005 and log.state() == log.fold(log.events())
        assert after.scans["copy"].done and after.plan == {"buckets": 4}


def test_prune_refuses_without_a_checkpoint_then_archives_what_one_covers(database: str) -> None:
    with MigrationLog(_connect(database), "grow", checkpoint_every=1_000_000) as log:
        log.create_table()
        _migration_steps(log, random.Random(3), 40)
        with pytest.raises(MigrationError, match="no checkpoint yet, so pruning would drop its state") as refused:
            prune(log)
        assert isinstance(refused.value, DdmError)
        whole = log.state()
        report = prune(log, archive="ddm_migration_archive", checkpoint=True, batch=16)
        assert report.deleted == report.archived == whole.seq and report.checkpoint == whole.seq + 1
        assert [ev.event for ev in log.events()] == [CHECKPOINT]
        assert log.state() == log.fold(_everything(log, database, "ddm_migration_archive"))
        log.record_batch(2, [999], 999, "c")  # steps go on after the prune
        assert log.state().slots[2].rows_copied == 999
        again = prune(log)
        assert again.deleted == 0 and again.kept == 2
    with pytest.raises(MigrationError, match="no rows to prune"):
        with MigrationLog(_connect(database), "nothing") as empty:
            prune(empty)


class _Killed(Exception):
    """Stands for a prune's process dying between two of its committed batches."""


def test_a_prune_stopped_between_batches_leaves_a_log_that_starts_at_a_checkpoint(database: str) -> None:
    """Each batch ends before a checkpoint, so the next prune can still check the state and go on."""
    with MigrationLog(_connect(database), "halfway", checkpoint_every=5) as log:
        log.create_table()
        _migration_steps(log, random.Random(11), 60)
        whole = log.state()

        def die_after_the_first_batch(removed: int) -> None:
            raise _Killed(removed)

        with pytest.raises(_Killed):
            prune(log, archive="ddm_migration_archive", batch=7, progress=die_after_the_first_batch)
        first = log.events()[0]
        assert first.seq > 1 and first.event == CHECKPOINT
        report = prune(log, archive="ddm_migration_archive", batch=7)
        assert report.deleted > 0 and log.state() == whole
        assert log.fold(_everything(log, database, "ddm_migration_archive")) == whole
        assert [ev.seq for ev in _everything(log, database, "ddm_migration_archive")] == list(range(1, whole.seq + 1))


def test_a_writer_killed_at_random_points_leaves_the_state_of_every_row(database: str) -> None:
    """SIGKILL mid-append, mid-checkpoint, mid-prune; after each kill the state equals the fold of all rows."""
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    archive = "ddm_cutover_archive"
    name = "crash"
    kills = 0
    checked = 0
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, str(HERE / "workflow_log_writer.py"), database, name,
                                 str(rng.randrange(1 << 30))], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
            time.sleep(0.1 + rng.random() * 0.6)
            if proc.poll() is not None:
                pytest.fail(f"the writer ended by itself: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
            proc.send_signal(signal.SIGKILL)
            kills += 1
        finally:
            proc.wait(10)
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        with CutoverLog(_connect(database), name) as log:
            everything = _everything(log, database, archive if _has_table(database, archive) else None)
            seqs = [ev.seq for ev in everything]
            assert seqs == list(range(1, len(seqs) + 1)), "steps lost or written twice across table and archive"
            differences = _differences(log.state(), log.fold(everything))
            assert differences == [], differences
            checked += 1
    with CutoverLog(_connect(database), name) as log:
        assert any(ev.event == CHECKPOINT for ev in log.events())
        assert log.state().seq > 50
    assert kills == checked == 6


def _has_table(database: str, table: str) -> bool:
    return bool(mariadb_rows(database, "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() "
                                       "AND table_name = %s", (table,)))


def _differences(a: Any, b: Any) -> list[str]:
    """The fields in which two folded states differ."""
    return [f for f in a.__dataclass_fields__ if getattr(a, f) != getattr(b, f)]


def test_a_checkpoint_of_an_unknown_layout_is_refused_by_name(database: str) -> None:
    with MigrationLog(_connect(database), "future") as log:
        log.create_table()
        log.enter(Phase.PREPARE)
        conn = mariadb_connect(database=database)
        with conn.cursor() as cur:  # as a later version might write it
            cur.execute("INSERT INTO ddm_migration (migration, seq, event, phase, detail) "
                        "VALUES ('future', 2, 'checkpoint', 'prepare', '{\"version\": 99}')")
        conn.close()
        with pytest.raises(MigrationError, match="step 2 in table 'ddm_migration' is a checkpoint this version "
                                                 "cannot read"):
            log.state()
