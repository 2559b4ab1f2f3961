"""The Migration API on a private mariadbd with a ROW binlog: every step, its records, its refusals, the throttle.

An application (tests/migrate_live_support.Writers: an executor following the
``ddm_config`` table) writes the whole time; the end state is counted against
the writers' own reference copy, each row placed by the scalar slot hash and the
grown slot map.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from ddm_core import load_config
from ddm_core.errors import MigrationError, MigrationStateError
from ddm_core.metadata.dump import dump_native
from ddm_core.migrate import Connections, Migration, config_table_source, connector
from ddm_core.migrate.backfill import Throttle, replica_lag
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import plan_migration
from ddm_core.migrate.prepare import prepare
from ddm_core.migrate.state import MigrationLog
from migrate_live_support import BINLOG_ARGS, Writers, docs, fill_old, placement_counts, publish_old
from services import fresh_mariadb_databases, mariadb_rows, require_module
from test_cli import run
from test_execute_support import PrivateMariaDB, running_mariadb
from test_migrate_backfill_support import checker_differences

require_module("pymysqlreplication", "the Migration API tests")

FAST = {"fence_after_s": 0.5, "poll_s": 0.3, "batch": 1000}


@pytest.fixture(scope="module")
def binlog_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateMariaDB]:
    with running_mariadb(tmp_path_factory.mktemp("migration"), BINLOG_ARGS) as server:
        yield server


@pytest.fixture()
def eight(binlog_server: PrivateMariaDB) -> Iterator[list[str]]:
    with fresh_mariadb_databases(8, connect=binlog_server.raw) as names:
        yield names


def _migration(old_doc: dict[str, Any], new_doc: dict[str, Any], name: str = "grow", **kw: Any) -> Migration:
    return Migration(load_config(old_doc), load_config(new_doc), name=name, state_on="ds_0", config_source="ds_0",
                     **{**FAST, **kw})


def _versions(old_doc: dict[str, Any]) -> list[tuple[int, str]]:
    """``(version, what)`` of every row of the config table: the phase of a migration block, else "plain"."""
    out = []
    for version, body in mariadb_rows(old_doc["dataSources"]["ds_0"]["url"].rsplit("/", 1)[1],
                                      "SELECT version, body FROM ddm_config ORDER BY version",
                                      port=int(old_doc["dataSources"]["ds_0"]["url"].split(":")[2].split("/")[0])):
        doc = yaml.safe_load(body)
        block = doc.get("migration")
        out.append((int(version), "plain" if block is None else f"{block['phase']}:{block['readShiftPercent']:g}"))
    return out


def test_every_step_under_writers(eight: list[str], binlog_server: PrivateMariaDB) -> None:
    port = binlog_server.port
    old_doc, new_doc = docs(eight, port)
    reference = fill_old(old_doc, 6000)
    publish_old(old_doc)
    writers = Writers(old_doc, reference, threads=3).start()
    lines: list[str] = []
    try:
        with _migration(old_doc, new_doc, echo=lines.append) as m:
            st = m.start()
            assert (st.phase, st.completed) == (Phase.VERIFY, True)
            assert st.findings is not None and st.findings["differences"] == 0
            assert st.scans and all(s.done for s in st.scans) and st.rows_copied > 0
            assert st.catch_up_lag is not None and st.catch_up_lag < 1.0
            with pytest.raises(MigrationStateError, match="cutover follows reads shifted 100 %"):
                m.cutover()
            for pct in (1, 10, 50):
                assert m.shift_reads(pct).read_shift_pct == pct
            with pytest.raises(MigrationStateError, match="reads are shifted 50 % already"):
                m.shift_reads(10)
            assert m.shift_reads(50).read_shift_pct == 50  # the same share again: a resume, nothing new
            st = m.shift_reads(100)
            assert (st.phase, st.completed) == (Phase.SHIFT_READS, True)
            st = m.cutover()
            assert (st.phase, st.completed) == (Phase.CUTOVER, True)
            assert st.write_pause_s is not None and st.write_pause_s > 0
            print(f"\nwrite pause at cutover: {st.write_pause_s:.2f} s (fence {FAST['fence_after_s']} s, "
                  f"poll {FAST['poll_s']} s)")
            assert m.cutover().write_pause_s == st.write_pause_s  # completed: not redone
            with pytest.raises(MigrationStateError, match="rollback is possible until cutover"):
                m.rollback()
            moved_before = placement_counts(eight, port, {})["rows"]
            st = m.finish(archive="_archive")
            assert (st.phase, st.completed) == (Phase.FINISH, True)
            deleted = sum(s.rows_copied for s in st.finish_scans)
    finally:
        final = writers.finish()
    counts = placement_counts(eight, port, final)
    assert {k: v for k, v in counts.items() if k != "rows"} == {
        "lost": 0, "duplicated": 0, "differing": 0, "extra": 0, "misplaced": 0}, counts
    assert writers.errors == [], writers.errors
    assert sum(writers.ops) > 100 and sum(writers.missed) == 0
    assert counts["rows"] == len(final)
    # finish deleted exactly the old copies (the rows counted twice before it), and archived them
    assert deleted > 0 and moved_before - deleted <= counts["rows"] + 5 * sum(writers.ops)
    archived = sum(mariadb_rows(eight[d], f"SELECT COUNT(*) FROM t_order_{d}_{t}_archive", port=port)[0][0]
                   for d in range(4) for t in range(2))
    assert archived == deleted
    assert _versions(old_doc) == [(1, "plain"), (2, "dual_write:0"), (3, "shift_reads:1"), (4, "shift_reads:10"),
                                  (5, "shift_reads:50"), (6, "shift_reads:100"), (7, "cutover:100"), (8, "finish:0"),
                                  (9, "plain")]  # the new placement with the old copies named, then without
    assert any("published version 8 (target)" in line for line in lines), lines
    assert any("published version 9 (plain)" in line for line in lines), lines
    with MigrationLog(connector(load_config(old_doc), "ds_0"), "grow") as log:
        shifts = [e.read_shift_pct for e in log.events() if e.event == "read_shift"]
    assert shifts == [1.0, 10.0, 50.0, 100.0]


def test_a_version_published_before_a_crash_is_not_published_again(eight: list[str],
                                                                    binlog_server: PrivateMariaDB) -> None:
    port = binlog_server.port
    old_doc, new_doc = docs(eight, port)
    fill_old(old_doc, 500)
    publish_old(old_doc)
    old, new = load_config(old_doc), load_config(new_doc)
    with _migration(old_doc, new_doc) as m:
        # the migrator entered dual write and committed its version, then died before recording it
        with Connections(old, new) as conns, MigrationLog(connector(old, "ds_0"), "grow") as log:
            log.create_table()
            prepare(old, new, plan_migration(old, new, conns=conns, count="estimate", rate=1.0), conns, log)
            log.enter(Phase.DUAL_WRITE)
        with config_table_source(old, "ds_0") as source:
            version = source.publish(m.document("dual_write"))
        st = m.start()
        assert st.published["dual_write"] == version == 2
        with config_table_source(old, "ds_0") as source:
            assert source.latest_version() == 2
    assert checker_differences(old, new) == 0


def test_rollback_while_a_cutover_pauses_writes(eight: list[str], binlog_server: PrivateMariaDB) -> None:
    port = binlog_server.port
    old_doc, new_doc = docs(eight, port)
    fill_old(old_doc, 500)
    publish_old(old_doc)
    with _migration(old_doc, new_doc) as m:
        m.start()
        m.shift_reads(100)
        # a cutover that paused writes and stopped there (its final check failed, or it was killed)
        m.log.enter(Phase.CUTOVER)
        m.publisher.publish("cutover", m.document("cutover", 100.0))
        st = m.rollback()
        assert (st.phase, st.completed) == (Phase.ROLLED_BACK, True)
    assert [what for _, what in _versions(old_doc)][-3:] == ["shift_reads:100", "cutover:100", "plain"]
    with config_table_source(load_config(old_doc), "ds_0") as source:
        assert source.fetch().content == dump_native(load_config(old_doc), secrets="keep")


def test_rollback_returns_to_the_old_configuration(eight: list[str], binlog_server: PrivateMariaDB) -> None:
    port = binlog_server.port
    old_doc, new_doc = docs(eight, port)
    fill_old(old_doc, 500)
    publish_old(old_doc)
    with _migration(old_doc, new_doc) as m:
        m.start()
        m.shift_reads(10)
        st = m.rollback()
        assert (st.phase, st.completed, st.read_shift_pct) == (Phase.ROLLED_BACK, True, 0.0)
        assert m.rollback().published == st.published  # over: nothing more
        with pytest.raises(MigrationStateError):
            m.shift_reads(50)
    versions = _versions(old_doc)
    assert versions[-1] == (4, "plain")
    with config_table_source(load_config(old_doc), "ds_0") as source:
        assert source.fetch().content == dump_native(load_config(old_doc), secrets="keep")


def test_the_cli_steps_refuse_out_of_order(eight: list[str], binlog_server: PrivateMariaDB, tmp_path: Path) -> None:
    old_doc, new_doc = docs(eight, binlog_server.port)
    fill_old(old_doc, 200)
    old_path, new_path = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old_path.write_text(yaml.safe_dump(old_doc))
    new_path.write_text(yaml.safe_dump(new_doc))
    common = ["--from", str(old_path), "--to", str(new_path), "--state", "ds_0", "--name", "cli",
              "--fence-after-s", "0.3", "--poll-s", "0.2", "--no-progress"]
    early = run("migrate", "shift-reads", "10", *common)
    assert early.exit_code == 2 and "reads shift after a completed verification" in early.stderr, early.stderr
    started = run("migrate", "start", *common)
    assert started.exit_code == 0, started.output + started.stderr
    assert "ConfigHolder(config_table_source(load_config(" in started.stdout
    assert "verify completed; next: ddm migrate shift-reads 1" in started.stdout
    status = run("migrate", "status", "--from", str(old_path), "--to", str(new_path), "--state", "ds_0",
                 "--name", "cli", "--config-on", "ds_0")
    assert status.exit_code == 0, status.stderr
    out = status.stdout
    assert "phase verify (completed)" in out and "9 of 9 scans done" in out and "catch-up lag" in out
    assert "dual_write v1" in out and "newest version 1" in out
    verify = run("migrate", "verify", *common)
    assert verify.exit_code == 0 and "consistent" in verify.stdout
    cut = run("migrate", "cutover", *common)
    assert cut.exit_code == 2 and "cutover follows reads shifted 100 %" in cut.stderr
    assert run("migrate", "shift-reads", "100", *common).exit_code == 0
    cut = run("migrate", "cutover", *common)
    assert cut.exit_code == 0 and "cutover completed; writes to the moving slots were paused" in cut.stdout
    back = run("migrate", "rollback", *common)
    assert back.exit_code == 2 and "rollback is possible until cutover" in back.stderr, back.stderr
    fin = run("migrate", "finish", *common, "--observation-s", "3600")
    assert fin.exit_code == 2 and "observation period" in fin.stderr
    fin = run("migrate", "finish", *common)
    assert fin.exit_code == 0 and "finish completed" in fin.stdout
    counts = placement_counts(eight, binlog_server.port, {})
    assert counts["misplaced"] == 0 and counts["duplicated"] == 0


# -- the throttle (no server) ------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def test_the_throttle_pauses_while_replicas_lag() -> None:
    clock = _Clock()
    lags = iter([12.0, 7.0, 2.0, 0.5])
    looked: list[str] = []

    def lag(ds: str) -> float:
        looked.append(ds)
        return next(lags)

    throttle = Throttle(None, clock=clock, sleep=clock.sleep, max_replica_lag_s=3.0, replica_lag=lag, lag_poll=0.5)
    assert throttle.after(100, "ds_1") == 1.0  # two looks over the ceiling, half a second each
    assert clock.slept == [0.5, 0.5] and looked == ["ds_1"] * 3
    assert throttle.after(100, "ds_1") == 0.0 and clock.slept == [0.5, 0.5]
    stuck = Throttle(None, clock=clock, sleep=clock.sleep, max_replica_lag_s=1.0, replica_lag=lambda ds: float("inf"),
                     lag_poll=1.0, lag_timeout=3.0)
    with pytest.raises(MigrationError, match="paused 3 s on data source 'ds_2'"):
        stuck.after(1, "ds_2")
    both = Throttle(100.0, clock=clock, sleep=clock.sleep, max_replica_lag_s=1.0, replica_lag=lambda ds: 0.0)
    assert both.after(200, "ds_0") == pytest.approx(2.0)  # the rows/s ceiling still applies


def test_start_refuses_a_server_without_binlog(tmp_path: Path) -> None:
    with fresh_mariadb_databases(8) as names:  # the shared server: no binlog
        old_doc, new_doc = docs(names, 3306)
        fill_old(old_doc, 100)
        with _migration(old_doc, new_doc) as m:
            with pytest.raises(MigrationError, match="server 127.0.0.1:3306 shows no binlog position"):
                m.start()
            assert m.status().phase is None  # nothing recorded, nothing created


def test_replica_lag_of_the_configured_replicas() -> None:
    with fresh_mariadb_databases(1) as (db,):
        url = f"mysql://127.0.0.1:3306/{db}"
        base = {"dataSources": {"ds_0": {"url": url, "username": "root", "password": ""}},
                "singleTables": {"t": "ds_0"}}
        assert replica_lag(load_config(base), "ds_0") == 0.0  # no replicas: nothing to wait for
        with_replica = {**base, "dataSources": {"ds_0": {
            "url": url, "username": "root", "password": "", "replicas": [url]}}}
        with pytest.raises(MigrationError, match="is not replicating"):
            replica_lag(load_config(with_replica), "ds_0")
