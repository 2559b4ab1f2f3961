"""The backfill phase on real MariaDB databases: 4 -> 8 data sources, checked batches, crash-resumable.

Every result is compared against an independent reference: the rows of the
old physical tables read directly with PyMySQL, each placed by the scalar
slot hash (``hashing.slot_of``) and the grown slot map of the test layout, not
by anything the backfill computed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from ddm_core.errors import BackfillMismatchError
from ddm_core.migrate import Connections, connector
from ddm_core.migrate.backfill import Throttle, backfill, backfill_scans
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import plan_migration
from ddm_core.migrate.state import MigrationLog
from migrate_support import TABLES_PER_SOURCE
from services import fresh_mariadb_databases, mariadb_rows
from test_migrate_backfill_support import checker_differences, count_against_reference, kill_and_restart, setup_migration

ROWS = 6000
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def eight() -> Iterator[list[str]]:
    with fresh_mariadb_databases(8) as names:
        yield names


def test_backfill_copies_every_moving_row_once_in_checked_batches(eight: list[str]) -> None:
    old, new, _, _ = setup_migration(eight, ROWS)
    seen: list[tuple[str, int]] = []
    with Connections(old, new) as conns, MigrationLog(connector(old, "ds_0"), "grow") as log:
        plan = plan_migration(old, new, count="none", rate=1.0)
        result = backfill(old, new, plan, conns, log, batch=250,
                          progress=lambda r: seen.append((r.scan.name, r.rows_copied)))
        state = log.state()
    counts = count_against_reference(eight)
    assert counts["expected"] > ROWS // 3  # about half the rows move 4 -> 8
    assert counts == {**counts, "lost": 0, "duplicated": 0, "differing": 0, "unexpected": 0}
    assert result.rows_copied == counts["expected"] + 300 and result.rows_read == ROWS + 300
    assert checker_differences(old, new) == 0
    assert state.phase is Phase.BACKFILL and state.completed
    assert len(state.scans) == 4 * TABLES_PER_SOURCE + 1 and all(s.done for s in state.scans.values())
    # a batch per 250 source rows of every scan, each recorded after its check
    batches = [e for e in MigrationLog(connector(old, "ds_0"), "grow").events() if e.event == "scan"]
    assert len(batches) == sum(-(-r.rows_read // 250) for r in result.scans)
    assert all(e.checksum and len(e.checksum) == 32 for e in batches)
    assert seen and seen[-1][1] > 0


def test_a_replayed_batch_changes_nothing(eight: list[str]) -> None:
    old, new, _, _ = setup_migration(eight, rows=2000)
    with Connections(old, new) as conns, MigrationLog(connector(old, "ds_0"), "grow") as log:
        plan = plan_migration(old, new, count="none", rate=1.0)
        backfill(old, new, plan, conns, log, batch=500)
    before = {d: mariadb_rows(eight[d], "CHECKSUM TABLE t_order_%d_0, t_order_%d_1" % (d, d)) for d in range(4, 8)}
    from ddm_core.migrate.backfill import ScanCopier  # the batch writer itself, replaying every scan whole
    with Connections(old, new) as conns:
        for scan in backfill_scans(old, new, plan)[:-1]:  # every t_order scan
            copier = ScanCopier(scan, old, conns)
            rows = conns.query(scan.source, f"SELECT order_id, user_id, amount, note, slow FROM {scan.physical}")
            copier.write(rows)  # every row of the scan again
    after = {d: mariadb_rows(eight[d], "CHECKSUM TABLE t_order_%d_0, t_order_%d_1" % (d, d)) for d in range(4, 8)}
    assert after == before
    assert count_against_reference(eight)["lost"] == 0


def test_a_batch_that_stays_different_stops_the_phase_naming_the_rows(eight: list[str]) -> None:
    old, new, _, _ = setup_migration(eight, rows=1500)
    # a target that changes what it is given (a trigger): the batch check must catch it
    from services import mariadb_connect

    conn = mariadb_connect(database=eight[4])
    with conn.cursor() as cur:
        cur.execute("CREATE TRIGGER bump BEFORE INSERT ON t_order_4_1 FOR EACH ROW SET NEW.amount = NEW.amount + 1")
    conn.close()
    with Connections(old, new) as conns, MigrationLog(connector(old, "ds_0"), "grow") as log:
        plan = plan_migration(old, new, count="none", rate=1.0)
        with pytest.raises(BackfillMismatchError) as caught:
            backfill(old, new, plan, conns, log, batch=400)
        state = log.state()
    assert "ds_4.t_order_4_1" in str(caught.value) and "amount:" in str(caught.value)
    assert state.phase is Phase.BACKFILL and state.stopped is not None
    bad = [s for s in state.scans.values() if s.scan.endswith("ds_0.t_order_0_1")]
    assert not bad  # its first batch never got a high-water mark


def test_throttle_keeps_reads_under_the_ceiling_with_an_injected_clock(eight: list[str]) -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    old, new, _, _ = setup_migration(eight, rows=2000)
    with Connections(old, new) as conns, MigrationLog(connector(old, "ds_0"), "grow") as log:
        plan = plan_migration(old, new, count="none", rate=1.0)
        result = backfill(old, new, plan, conns, log, batch=100, max_rows_per_s=500.0,
                          clock=lambda: now[0], sleep=sleep)
    # the fake clock moves only by sleeping, so reading 2000 + 300 (t_dict) rows at <= 500 rows/s sleeps exactly 4 s
    assert result.rows_read == 2300 and sum(slept) == pytest.approx(2300 / 500.0)
    t = Throttle(None)
    assert t.after(10**9) == 0.0


def _write_configs(tmp: Path, old_doc: dict[str, Any], new_doc: dict[str, Any]) -> tuple[Path, Path]:
    old_path, new_path = tmp / "old.yaml", tmp / "new.yaml"
    old_path.write_text(yaml.safe_dump(old_doc))
    new_path.write_text(yaml.safe_dump(new_doc))
    return old_path, new_path


def test_a_migrator_killed_at_random_points_finishes_with_nothing_lost(eight: list[str], tmp_path: Path) -> None:
    """SIGKILL the ``ddm migrate backfill`` process 12 times, restart it until it completes.

    Each kill waits for 1-4 more recorded batches than the last, then a random
    fraction of a batch's time, so kills land inside reads, writes, checks and
    records alike (and progress is made in between).
    """
    old, new, old_doc, new_doc = setup_migration(eight, rows=ROWS, name="crash")
    old_path, new_path = _write_configs(tmp_path, old_doc, new_doc)
    cmd = [sys.executable, "-m", "ddm_core.cli", "migrate", "backfill", "--from", str(old_path), "--to",
           str(new_path), "--state", "ds_0", "--name", "crash", "--batch", "100", "--max-rows-per-s", "2000",
           "--no-progress"]
    with MigrationLog(connector(old, "ds_0"), "crash") as log:
        # A batch of 100 takes 0.05 s at 2000 rows/s: kills land anywhere inside one.
        marks = kill_and_restart(cmd, lambda: sum(1 for e in log.events() if e.event == "scan"), kills=12,
                                 seed=1313, steps=(1, 4), pause=0.05, done=b"backfill completed", cwd=ROOT)
        state = log.state()
        assert state.phase is Phase.BACKFILL and state.completed
    assert len(set(marks)) >= 10, marks  # progress between kills, each at another point
    counts = count_against_reference(eight)
    assert (counts["lost"], counts["duplicated"], counts["differing"], counts["unexpected"]) == (0, 0, 0, 0), counts
    assert checker_differences(old, new) == 0


def test_backfill_and_verify_commands(eight: list[str], tmp_path: Path) -> None:
    """``ddm migrate backfill --writes-stopped`` with its progress bars, then ``ddm verify --from --to``."""
    from click.testing import CliRunner

    from ddm_core.cli import cli
    from ddm_core.migrate.state import MigrationLog as Log

    old, new, old_doc, new_doc = setup_migration(eight, rows=1500, name="unused")
    old_path, new_path = _write_configs(tmp_path, old_doc, new_doc)
    with Connections(old, new) as conns, Log(connector(old, "ds_0"), "cli") as log:  # prepared, not dual write
        from ddm_core.migrate.prepare import prepare

        prepare(old, new, plan_migration(old, new, conns=conns, count="none", rate=1.0), conns, log)
    runner = CliRunner()
    args = ["--from", str(old_path), "--to", str(new_path), "--state", "ds_0", "--name", "cli"]
    refused = runner.invoke(cli, ["migrate", "backfill", *args, "--batch", "300"])
    assert refused.exit_code == 2 and refused.output.strip() == (
        "error: migration 'cli' cannot enter backfill: backfill does not follow prepare (next is dual_write)")
    done = runner.invoke(cli, ["migrate", "backfill", *args, "--batch", "300", "--writes-stopped", "--progress"])
    assert done.exit_code == 0, done.output
    assert "backfill completed" in done.output and "ds_0.t_order_0_0 -> ds_4.t_order_4_0" in done.output
    status = runner.invoke(cli, ["migrate", "status", "--config", str(old_path), "--state", "ds_0", "--name", "cli"])
    assert "backfill scans: 9 of 9 started are done" in status.output, status.output
    verify = runner.invoke(cli, ["verify", "--from", str(old_path), "--to", str(new_path)])
    assert verify.exit_code == 0 and verify.output.count("\nconsistent") == 4 + 4, verify.output  # + t_dict x4
    gone = mariadb_rows(eight[5], "SELECT order_id FROM t_order_5_1 ORDER BY order_id LIMIT 1")[0][0]
    mariadb_rows(eight[5], "DELETE FROM t_order_5_1 WHERE order_id = %s", (gone,))
    verify = runner.invoke(cli, ["verify", "--from", str(old_path), "--to", str(new_path)])
    assert verify.exit_code == 1 and f"({gone}): missing" in verify.output, verify.output
