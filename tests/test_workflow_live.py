"""Live progress and ``--json`` status of the workflows: the table's content and the documents scripts read.

The live table is drawn on a recording rich Console (a terminal, so rich's
Live draws) and its text checked; nothing here depends on timing. The
``ddm migrate status --json`` / ``ddm migrate prune`` cases run against a
migration recorded in a real ``ddm_migration`` table. (The cut-over's live
table and ``ddm cutover status --json`` need binlog servers:
tests/test_cutover_live_status.py.)
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from rich.console import Console

from ddm_core import load_config
from ddm_core.cli.live import DirectionRow, LiveTable, RateMeter, bytes_behind, position_text
from ddm_core.cli.migrate_cmd import _CatchUpLive
from ddm_core.migrate import Connections, connector
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.state import MigrationLog
from cli_support import run
from migrate_support import reshard_docs
from services import fresh_mariadb_databases

SERVER = "127.0.0.1:3306"


def _recording() -> Console:
    return Console(record=True, force_terminal=True, width=140, file=io.StringIO())


def test_the_live_table_draws_every_direction_and_the_last_check() -> None:
    console = _recording()
    rows = [DirectionRow("forward", "10.0.0.1:3306", "binlog.000007:1234", 1520.4, 0.42, 2048, 91_000),
            DirectionRow("reverse", "10.0.0.2:3306", "binlog.000003:88", None, None, None, 0)]
    with LiveTable("cut-over 'orders': sync", console=console) as live:
        live.show(rows, {"sampled": 1000, "differences": 2, "rows": []})
    text = console.export_text()
    assert "cut-over 'orders': sync" in text
    forward = next(line for line in text.splitlines() if "forward" in line)
    for cell in ("10.0.0.1:3306", "1,520", "0.42", "binlog.000007:1234", "2.0 KiB", "91,000"):
        assert cell in forward, (cell, forward)
    reverse = next(line for line in text.splitlines() if "reverse" in line)
    assert "binlog.000003:88" in reverse and reverse.count(" - ") >= 2  # no rate, lag or bytes measured yet
    assert "last check: 1,000 keys compared, 2 differ" in text


def test_no_progress_draws_nothing() -> None:
    console = _recording()
    with LiveTable("quiet", enabled=False, console=console) as live:
        live.show([DirectionRow("forward", "s", "f:1")])
    assert console.export_text() == ""


def test_figures_rates_positions_and_bytes_behind() -> None:
    now = [100.0]
    meter = RateMeter(clock=lambda: now[0])
    assert meter.see(1000) is None  # one reading: no interval yet
    now[0] += 2.0
    assert meter.see(4000) == 1500.0
    now[0] += 1.0
    assert meter.see(4000) == 0.0
    assert position_text(["binlog.000002", 77]) == "binlog.000002:77" and position_text(None) is None
    assert position_text(["0-1-42"]) == "0-1-42"  # a GTID as it is
    assert bytes_behind(["b.1", 100], ["b.1", 350]) == 250
    assert bytes_behind(["b.1", 100], ["b.2", 4]) is None and bytes_behind(None, ["b.1", 4]) is None
    # After a fail-over the promoted server's file may carry the same name: its offsets mean nothing here.
    assert bytes_behind(["b.1", 100, "0-1-9", 1], ["b.1", 350, "0-2-12", 2]) is None
    assert bytes_behind(["b.1", 100, "0-1-9", 1], ["b.1", 350, "0-1-12", 1]) == 250


@pytest.fixture()
def recorded(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A migration recorded up to a completed catch-up, and its configuration file."""
    with fresh_mariadb_databases(8) as names:
        old, _ = reshard_docs(names)
        path = tmp_path / "old.yaml"
        path.write_text(yaml.safe_dump(old, sort_keys=False))
        config = load_config(old)
        with MigrationLog(connector(config, "ds_0"), "grow") as log:
            log.create_table()
            for phase in (Phase.PREPARE, Phase.DUAL_WRITE):
                log.enter(phase)
                log.complete(phase)
            log.enter(Phase.BACKFILL, detail={"binlog": {SERVER: ["binlog.000001", 4]}})
            log.record_scan("ds_0.t_order_0_0", [10], 10, "c1")
            log.record_scan("ds_0.t_order_0_0", [20], 20, "c2", done=True)
            log.complete(Phase.BACKFILL)
            log.enter(Phase.CATCH_UP)
            log.record_scan(f"binlog:{SERVER}", ["binlog.000001", 1200], 55, "", phase=Phase.CATCH_UP)
            log.complete(Phase.CATCH_UP, detail={"passes": 3, "applied": 55, "last_pass": 0.25})
            yield {"path": str(path), "config": config, "log": log}


def test_migrate_status_json_is_the_recorded_state(recorded: dict[str, Any]) -> None:
    result = run("migrate", "status", "--config", recorded["path"], "--state", "ds_0", "--name", "grow", "--json")
    assert result.exit_code == 0, result.output + result.stderr
    doc = json.loads(result.stdout)
    assert doc["name"] == "grow" and doc["phase"] == "catch_up" and doc["completed"] is True
    assert doc["binlog"] == {SERVER: "binlog.000001:1200"} and doc["catch_up_lag_s"] == 0.25
    assert doc["scans"] == [{"scan": "ds_0.t_order_0_0", "high_water": [20], "rows_copied": 20, "done": True}]
    assert [(h["event"], h["phase"]) for h in doc["history"]][-2:] == [("enter", "catch_up"), ("complete", "catch_up")]
    none = run("migrate", "status", "--config", recorded["path"], "--state", "ds_0", "--name", "other", "--json")
    assert none.exit_code == 0 and json.loads(none.stdout)["phase"] is None


def test_migrate_prune_keeps_the_status_and_refuses_without_a_checkpoint(recorded: dict[str, Any]) -> None:
    args = ("--config", recorded["path"], "--state", "ds_0", "--name", "grow")
    before = run("migrate", "status", *args, "--json").stdout
    refused = run("migrate", "prune", *args, "--no-progress")
    assert refused.exit_code == 2 and "no checkpoint yet" in refused.stderr
    pruned = run("migrate", "prune", *args, "--checkpoint", "--archive", "ddm_migration_old", "--no-progress")
    assert pruned.exit_code == 0, pruned.stderr
    assert "11 rows before step 12 moved to ddm_migration_old; 1 rows kept" in pruned.stdout
    assert run("migrate", "status", *args, "--json").stdout == before
    assert len(recorded["log"].events()) == 1


def test_the_catch_up_live_table_shows_the_recorded_position_rate_and_lag(recorded: dict[str, Any]) -> None:
    console = _recording()
    with Connections(recorded["config"]) as conns:
        live = _CatchUpLive(recorded["config"], conns, recorded["log"], True)
        live.table = LiveTable("migration 'grow': catch-up", console=console)
        with live:
            live.applied(1, 40)
            live.passed(1, 0.31)
            live.table.show(*live.rows())
    text = console.export_text()
    row = next(line for line in text.splitlines() if "catch-up" in line and SERVER in line)
    assert "binlog.000001:1200" in row and "0.31" in row and "40" in row
    assert "last check: none yet" in text
