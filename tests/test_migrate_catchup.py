"""Catch-up from the binlog on a private mariadbd (--log-bin, ROW, full row metadata): 4 -> 8 data sources.

The application's changes made while the backfill runs (through the executor,
on the old configuration: there is no dual write yet) reach the new tables
only through catch-up; the result is counted against the independent
reference of test_migrate_backfill_support (the old tables read directly).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from ddm_core.errors import MigrationError
from ddm_core.execute import Executor
from ddm_core.migrate import Connections, connector
from ddm_core.migrate.backfill import ScanReport, backfill
from ddm_core.migrate.catchup import catch_up
from ddm_core.migrate.gtid import gtid_at
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import plan_migration
from ddm_core.migrate.state import MigrationLog
from services import fresh_mariadb_databases, require_module
from test_execute_support import PrivateMariaDB, running_mariadb
from test_migrate_backfill_support import checker_differences, count_against_reference, kill_and_restart, setup_migration

require_module("pymysqlreplication", "the resharding catch-up tests")

BINLOG_ARGS = ("--server-id=1", "--log-bin=binlog", "--binlog-format=ROW", "--binlog-row-metadata=FULL")


@pytest.fixture(scope="module")
def binlog_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateMariaDB]:
    with running_mariadb(tmp_path_factory.mktemp("binlog"), BINLOG_ARGS) as server:
        yield server


@pytest.fixture()
def eight(binlog_server: PrivateMariaDB) -> Iterator[list[str]]:
    with fresh_mariadb_databases(8, connect=binlog_server.raw) as names:
        yield names


def _changes(old: Any, round_: int) -> None:
    """What an application does meanwhile, through the executor: inserts below every high-water mark
    (negative ids), updates and deletes of rows already copied and not yet copied."""
    with Executor(old, timeout=20.0, load_schema=False) as ex:
        base = -1000 * (round_ + 1)
        values = ", ".join(f"({base - i}, {7919 * (i + 1) + round_}, {i}, 'late {round_}')" for i in range(40))
        ex.execute(f"INSERT INTO t_order (order_id, user_id, amount, note) VALUES {values}").close()
        for order_id in range(1 + round_, 3000, 97):
            ex.execute("UPDATE t_order SET amount = amount + 1000, note = NULL WHERE order_id = ?",
                       (order_id,)).close()
        for order_id in range(50 + round_, 3000, 211):
            ex.execute("DELETE FROM t_order WHERE order_id = ?", (order_id,)).close()
        ex.execute("DELETE FROM t_order WHERE order_id = ?", (base - 3,)).close()  # inserted, then deleted
        ex.execute("UPDATE t_dict SET name = ? WHERE id = ?", (f"renamed {round_}", 10 + round_)).close()


def _log(old: Any, name: str) -> MigrationLog:
    return MigrationLog(connector(old, "ds_0"), name)


def test_changes_made_during_the_backfill_are_caught_up(eight: list[str], binlog_server: PrivateMariaDB,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    port = binlog_server.port
    old, new, _, _ = setup_migration(eight, 3000, port=port)
    calls = [0]

    def during(report: ScanReport) -> None:
        calls[0] += 1
        if calls[0] in (3, 12):
            _changes(old, calls[0])

    with Connections(old, new) as conns, _log(old, "grow") as log:
        plan = plan_migration(old, new, count="none", rate=1.0)
        backfill(old, new, plan, conns, log, batch=200, progress=during)
        behind = count_against_reference(eight, port)
        assert behind["lost"] > 0 and behind["differing"] > 0 and behind["unexpected"] > 0, behind
        result = catch_up(old, new, plan, conns, log)
        state = log.state()
    assert result.completed and result.applied > 0
    assert state.phase is Phase.CATCH_UP and state.completed
    counts = count_against_reference(eight, port)
    assert (counts["lost"], counts["duplicated"], counts["differing"], counts["unexpected"]) == (0, 0, 0, 0), counts
    assert checker_differences(old, new) == 0
    positions = [s for name, s in state.scans.items() if name.startswith("binlog:")]
    assert len(positions) == 1 and positions[0].high_water is not None  # one server behind all 8 sources

    # Replaying the whole binlog from the backfill's start position (a second migration record with the
    # same recorded position) over the caught-up tables changes nothing: every apply is idempotent.
    start = next(e.detail["binlog"] for e in _log(old, "grow").events()
                 if e.event == "enter" and e.phase is Phase.BACKFILL)
    with Connections(old, new) as conns, _log(old, "replay") as replay:
        for phase in (Phase.PREPARE, Phase.DUAL_WRITE):
            replay.enter(phase)
            replay.complete(phase)
        replay.enter(Phase.BACKFILL, detail={"binlog": start})
        replay.complete(Phase.BACKFILL)
        again = catch_up(old, new, plan, conns, replay)
    assert again.completed and again.applied >= result.applied
    counts = count_against_reference(eight, port)
    assert (counts["lost"], counts["duplicated"], counts["differing"], counts["unexpected"]) == (0, 0, 0, 0), counts

    # The same replay by GTID, as on a promoted replica (a position another server wrote): the binlog after it
    # holds the backfill's copies, far more than the ~140 KB after which MariaDB resets a non-blocking dump
    # begun at a GTID (the reader then reconnected at that GTID until the pass timed out).
    with Connections(old, new) as conns, _log(old, "by-gtid") as by_gtid:
        (server, (file, pos)), = start.items()
        gtid = gtid_at(lambda sql, params: conns.query("ds_0", sql, params), file, pos)
        assert gtid, f"no GTID at {file}:{pos}"
        end_file, end_pos = conns.query("ds_0", "SHOW MASTER STATUS")[0][:2]
        assert end_file != file or end_pos - pos > 200_000, (file, pos, end_file, end_pos)
        for phase in (Phase.PREPARE, Phase.DUAL_WRITE):
            by_gtid.enter(phase)
            by_gtid.complete(phase)
        by_gtid.enter(Phase.BACKFILL, detail={"binlog": {server: ["", 0, gtid, 4242]}})  # 4242: not this server
        by_gtid.complete(Phase.BACKFILL)
        caplog.clear()
        third = catch_up(old, new, plan, conns, by_gtid, pass_timeout=60)
        mark = by_gtid.state().scans[f"binlog:{server}"].high_water
    assert third.completed and third.applied >= result.applied
    reconnects = [r for r in caplog.records if r.name == "pymysqlreplication"]
    assert not reconnects, f"the reader lost its connection {len(reconnects)} times"  # 4 078 before the fix
    assert mark is not None and mark[0] and int(mark[3]) == 1  # carried on in this server's own files
    counts = count_against_reference(eight, port)
    assert (counts["lost"], counts["duplicated"], counts["differing"], counts["unexpected"]) == (0, 0, 0, 0), counts


def test_catch_up_needs_a_recorded_binlog_position() -> None:
    with fresh_mariadb_databases(8) as names:  # the shared server: no binlog
        old, new, _, _ = setup_migration(names, 200)
        with Connections(old, new) as conns, _log(old, "grow") as log:
            plan = plan_migration(old, new, count="none", rate=1.0)
            backfill(old, new, plan, conns, log)
            with pytest.raises(MigrationError, match="recorded no binlog position for server 127.0.0.1:3306"):
                catch_up(old, new, plan, conns, log)
            assert log.state().phase is Phase.BACKFILL


def test_a_catch_up_killed_at_random_points_converges(eight: list[str], binlog_server: PrivateMariaDB,
                                                        tmp_path: Path) -> None:
    """SIGKILL ``ddm migrate catch-up`` 6 times while it applies thousands of small transactions."""
    import sys

    import yaml

    port = binlog_server.port
    old, new, old_doc, new_doc = setup_migration(eight, 2000, name="crash", port=port)

    def during(report: ScanReport) -> None:
        if report.batches == 1 and report.scan.physical == "t_order_0_0":
            with Executor(old, timeout=20.0, load_schema=False) as ex:
                for round_ in range(3):
                    for k in range(0, 2000, 8):  # small transactions, each on every physical table
                        ex.execute("UPDATE t_order SET amount = amount + 1, note = ? WHERE order_id BETWEEN ? AND ?",
                                   (f"r{round_}", k, k + 7)).close()
                ex.execute("DELETE FROM t_order WHERE order_id BETWEEN 100 AND 160").close()

    with Connections(old, new) as conns, _log(old, "crash") as log:
        plan = plan_migration(old, new, count="none", rate=1.0)
        backfill(old, new, plan, conns, log, batch=500, progress=during)
    old_path, new_path = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old_path.write_text(yaml.safe_dump(old_doc))
    new_path.write_text(yaml.safe_dump(new_doc))
    cmd = [sys.executable, "-m", "ddm_core.cli", "migrate", "catch-up", "--from", str(old_path), "--to",
           str(new_path), "--state", "ds_0", "--name", "crash", "--flush-rows", "20", "--no-progress"]
    with _log(old, "crash") as log:
        marks = kill_and_restart(
            cmd, lambda: sum(1 for e in log.events() if e.event == "scan" and e.phase is Phase.CATCH_UP),
            kills=6, seed=77, steps=(1, 3), pause=0.01, done=b"catch-up completed",
        )
        assert log.state().phase is Phase.CATCH_UP and log.state().completed
    assert len(set(marks)) >= 5, marks  # progress between kills, each at another point
    counts = count_against_reference(eight, port)
    assert (counts["lost"], counts["duplicated"], counts["differing"], counts["unexpected"]) == (0, 0, 0, 0), counts
    assert checker_differences(old, new) == 0
