"""The end-to-end proof of issue 13: 4 -> 8 data sources, 200 000 rows, under writers, the migrator SIGKILLed.

A private ``mariadbd --log-bin --binlog-format=ROW`` holds the 8 databases.
The application is a set of writer threads in this process
(tests/migrate_live_support.Writers): inserts, updates, deletes and reads
through one ``Executor(ConfigHolder(config_table_source(...)))`` watching the
``ddm_config`` table every 0.3 s the whole time, each thread keeping its own
reference copy of its keys and retrying writes the router fences; two more
threads update, delete and insert again 50 hot rows of the first slots whose
reads shift, every few milliseconds through every phase, and read three of
them back after each write. The migrator is ``python -m ddm_core.cli migrate
start | shift-reads | cutover | finish``, SIGKILLed at random points of every
phase and started again each time.

No read by the application returns a row other than its own last write (the
hot rows are read from the new location from ``shift-reads 1`` on). With the
writers paused after ``shift-reads 100``, ``ddm migrate verify`` finds no
difference between the old and the new location. At the end, every physical
table is read behind ddm-core's back: 0 lost, 0 duplicated, 0 differing rows
against the writers' reference, every row where the grown slot map says
(scalar ``hashing.slot_of``, not the migration's code), and the checker finds
the new layout identical to a reference table.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from ddm_core import load_config
from ddm_core.migrate import Connections, Migration, connector
from ddm_core.migrate.checker import Checker, RowSource
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.state import MigrationLog
from migrate_live_support import BINLOG_ARGS, E2E_PAUSE, Row, Writers, docs, fill_old, placement_counts, publish_old
from migrate_support import TABLES_PER_SOURCE
from services import fresh_mariadb_databases, require_module
from test_execute_support import PrivateMariaDB, running_mariadb

require_module("pymysqlreplication", "the resharding end-to-end test")

ROWS = 200_000  # the issue's number
HOT_ROWS = 50
FENCE, POLL = 1.0, 0.5

# (command, kill points): each point waits until the migrator recorded a step in that phase, then a
# random delay up to the given seconds, then SIGKILL; the command is started again after each kill.
#: The start step's backfill is held to a rate that keeps it running across its 8 kill points (unthrottled
#: it now copies the 200 000 rows in about a second, and later kill points found the step already done);
#: the cut-over's kills come within 0.5 s of its start, so that all 5 land before a fast cut-over is over.
STEPS: list[tuple[list[str], list[tuple[str, float]]]] = [
    (["start", "--max-rows-per-s", "40000"], [("prepare", 0.3), ("dual_write", 0.8)] + [("backfill", 0.6)] * 8
     + [("catch_up", 0.05)] * 2 + [("verify", 0.3)] * 3),
    (["shift-reads", "1"], [("shift_reads", 0.6)]),
    (["shift-reads", "10"], [("shift_reads", 0.6)]),
    (["shift-reads", "50"], [("shift_reads", 0.6)] * 2),
    (["shift-reads", "100"], [("shift_reads", 0.6)]),
    (["cutover"], [("cutover", 0.5)] * 5),
    (["finish"], [("finish", 0.4)] * 2),
]


@pytest.fixture(scope="module")
def binlog_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateMariaDB]:
    with running_mariadb(tmp_path_factory.mktemp("e2e"), BINLOG_ARGS) as server:
        yield server


@pytest.fixture()
def nine(binlog_server: PrivateMariaDB) -> Iterator[list[str]]:
    """8 databases of the migration and one for the reference table."""
    with fresh_mariadb_databases(9, connect=binlog_server.raw) as names:
        yield names


def _files(tmp_path: Path, old_doc: dict[str, Any], new_doc: dict[str, Any]) -> tuple[str, str]:
    old_path, new_path = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old_path.write_text(yaml.safe_dump(old_doc))
    new_path.write_text(yaml.safe_dump(new_doc))
    return str(old_path), str(new_path)


class _Killer:
    """Runs migrator commands, SIGKILLing them at the kill points; records the phase each kill hit."""

    def __init__(self, log: MigrationLog, common: list[str], seed: int) -> None:
        self.log, self.common = log, common
        self.rng = random.Random(seed)
        self.hits: list[str] = []
        self.missed: list[str] = []
        self.outputs: list[str] = []
        self.races = 0
        self.seconds: list[str] = []  # each step's, kills included

    def cmd(self, step: list[str]) -> list[str]:
        return [sys.executable, "-m", "ddm_core.cli", "migrate", *step, *self.common]

    def run(self, step: list[str], points: list[tuple[str, float]]) -> None:
        for phase, delay in points:
            before = self.log.state().seq
            proc = subprocess.Popen(self.cmd(step), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 300
            while proc.poll() is None and time.monotonic() < deadline:
                state = self.log.state()
                if state.seq > before and state.phase is not None and state.phase.value == phase:
                    break
                time.sleep(0.005)
            time.sleep(self.rng.uniform(0.0, delay))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.communicate(timeout=60)
                # The server finishes a statement the dead process sent (a state row) only after the
                # kill; a successor reading the state before that would meet it as "another migrator".
                time.sleep(0.3)
                self.hits.append(str(self.log.state().phase))
            else:
                out, err = proc.communicate(timeout=60)
                if proc.returncode != 0 and self._raced(err):
                    break
                assert proc.returncode == 0, (step, err.decode())
                self.outputs.append(out.decode())
                self.missed.append(phase)
                return  # the step completed before the kill: the next step's points follow
        for _ in range(3):
            proc = subprocess.Popen(self.cmd(step), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out, err = proc.communicate(timeout=600)
            if proc.returncode == 0 or not self._raced(err):
                break
        assert proc.returncode == 0, (step, err.decode())
        self.outputs.append(out.decode())

    def _raced(self, err: bytes) -> bool:
        """The state guard refused a successor racing its killed predecessor's last row: run again."""
        if b"another migrator wrote step" not in err:
            return False
        self.races += 1
        time.sleep(0.5)
        return True


def _checker_against_reference(new_doc: dict[str, Any], ref_db: str, port: int, final: dict[int, Row]) -> Any:
    """The checker: the new layout's 16 physical tables as one side, a reference table as the other."""
    ref_doc = {"dataSources": {"ref": {"url": f"mysql://127.0.0.1:{port}/{ref_db}", "username": "root",
                                       "password": ""}}, "singleTables": {"t_ref": "ref"}}
    new = load_config(new_doc)
    with Connections(new, load_config(ref_doc)) as conns:
        conns.query("ref", "CREATE TABLE t_ref (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, "
                           "amount INT NOT NULL DEFAULT 0, note VARCHAR(40), slow INT NOT NULL DEFAULT 0)")
        rows = [(k, *v) for k, v in sorted(final.items())]
        for i in range(0, len(rows), 5000):
            conns.execute_many("ref", "INSERT INTO t_ref VALUES (%s, %s, %s, %s, %s)", rows[i:i + 5000])
        a = RowSource(conns, [("ref", "t_ref")], label="reference")
        b = RowSource(conns, [(f"ds_{d}", f"t_order_{d}_{t}") for d in range(8) for t in range(TABLES_PER_SOURCE)],
                      label="new layout")
        return Checker(a, b, chunk_rows=20_000).check()


def test_4_to_8_under_writers_with_the_migrator_killed(nine: list[str], binlog_server: PrivateMariaDB,
                                                       tmp_path: Path) -> None:
    began = time.monotonic()
    port = binlog_server.port
    eight, ref_db = nine[:8], nine[8]
    old_doc, new_doc = docs(eight, port)
    reference = fill_old(old_doc, ROWS)
    publish_old(old_doc)
    old_path, new_path = _files(tmp_path, old_doc, new_doc)
    filled = time.monotonic()
    common = ["--from", old_path, "--to", new_path, "--state", "ds_0", "--name", "e2e", "--fence-after-s",
              str(FENCE), "--poll-s", str(POLL), "--flush-rows", "100", "--no-progress",
              # Bounds, not measurements: a slow host's passes take minutes here, and under these writers a pass
              # over what they wrote meanwhile took 4.7 s twenty times (the 1 s gate is the command's default)
              "--pass-timeout", "600", "--max-lag", "30"]
    old = load_config(old_doc)
    writers = Writers(old_doc, reference, threads=4, pause=E2E_PAUSE, hot_threads=2, hot_rows=HOT_ROWS).start()
    with MigrationLog(connector(old, "ds_0"), "e2e") as log:
        log.create_table()
        killer = _Killer(log, common, seed=2026)
        try:
            for step, points in STEPS:
                step_began = time.monotonic()
                killer.run(step, points)
                killer.seconds.append(f"{step[0]} {time.monotonic() - step_began:.0f} s")
                if step == ["shift-reads", "100"]:
                    with writers.paused():  # nothing in flight: the two locations must hold the same rows
                        verify = subprocess.run(killer.cmd(["verify"]), capture_output=True, timeout=600)
        finally:
            final = writers.finish()
        state = log.state()
        pause = next(e.detail["write_pause_s"] for e in log.events()
                     if e.event == "complete" and e.phase is Phase.CUTOVER)
        verified = [e.detail for e in log.events() if e.event == "complete" and e.phase is Phase.VERIFY]
    migrated = time.monotonic()
    assert (state.phase, state.completed) == (Phase.FINISH, True)
    hit = Counter(killer.hits)
    print(f"\ne2e: {len(killer.hits)} kills {dict(hit)}, missed {killer.missed}, races {killer.races}; write pause at cutover {pause:.2f} s; "
          f"writer ops {sum(writers.ops)} (hot rows {writers.hot_ops}), fenced {sum(writers.fenced)}, "
          f"stale reads {sum(writers.stale_reads)}, "
          f"dual-write failures {writers.dual_failures} {dict(writers.dual_failure_kinds)}; "
          f"fill {filled - began:.0f} s, migration {migrated - filled:.0f} s ({', '.join(killer.seconds)})")
    assert verify.returncode == 0 and b"consistent" in verify.stdout, (verify.stdout + verify.stderr).decode()
    assert sum(writers.stale_reads) == 0 and writers.hot_ops > 1000, (writers.stale_reads, writers.hot_ops)
    assert len(killer.hits) >= 20, (hit, killer.missed)
    assert hit["backfill"] >= 1 and hit["catch_up"] >= 1 and hit["cutover"] >= 1, hit
    assert hit["verify"] + hit["shift_reads"] >= 1, hit
    assert "ConfigHolder(config_table_source(load_config(" in killer.outputs[0]
    assert verified and verified[-1]["differences"] == 0

    counts = placement_counts(eight, port, final)
    assert {k: v for k, v in counts.items() if k != "rows"} == {
        "lost": 0, "duplicated": 0, "differing": 0, "extra": 0, "misplaced": 0}, counts
    assert counts["rows"] == len(final) and len(final) > ROWS // 2
    report = _checker_against_reference(new_doc, ref_db, port, final)
    assert report.consistent and report.found == 0 and report.rows_a == len(final), report.summary()
    assert writers.errors == [], writers.errors
    assert sum(writers.missed) == 0 and sum(writers.ops) > 1000
    assert sum(writers.fenced) > 0  # writes met the cutover's pause and were retried
    print(f"e2e: checked {counts['rows']} rows; total {time.monotonic() - began:.0f} s")


def test_rollback_from_half_the_reads_shifted_loses_no_write(nine: list[str], binlog_server: PrivateMariaDB) -> None:
    port = binlog_server.port
    eight = nine[:8]
    old_doc, new_doc = docs(eight, port)
    reference = fill_old(old_doc, 20_000)
    publish_old(old_doc)
    writers = Writers(old_doc, reference, threads=3, pause=0.003).start()
    try:
        with Migration(load_config(old_doc), load_config(new_doc), name="back", state_on="ds_0",
                       config_source="ds_0", fence_after_s=FENCE, poll_s=POLL, batch=5000) as m:
            m.start()
            m.shift_reads(10)
            m.shift_reads(50)
            ops_before = sum(writers.ops)
            st = m.rollback()
            assert (st.phase, st.completed, st.read_shift_pct) == (Phase.ROLLED_BACK, True, 0.0)
        # the writers go on, now on the plain old configuration
        while sum(writers.ops) < ops_before + 300 and not writers.errors:
            time.sleep(0.05)
        assert writers.holder.config.migration is None
    finally:
        final = writers.finish()
    counts = placement_counts(eight, port, final, layout="old")
    assert {k: v for k, v in counts.items() if k != "rows"} == {
        "lost": 0, "duplicated": 0, "differing": 0, "extra": 0, "misplaced": 0}, counts
    assert writers.errors == [], writers.errors
    assert sum(writers.missed) == 0
