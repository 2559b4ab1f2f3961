"""The phases, the ``ddm_migration`` table and the plan of a 4 -> 8 migration, on the local MariaDB."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from ddm_core.errors import MigrationError, MigrationStateError
from ddm_core.execute import Executor
from ddm_core.migrate import Connections, connector
from ddm_core.migrate.phases import FORWARD, Phase, may_enter
from ddm_core.migrate.plan import plan_migration
from ddm_core.migrate.state import MigrationLog
from ddm_core.route.router import Router
from migrate_support import ORDER_DDL, reshard_configs, reshard_docs
from services import fresh_mariadb_databases

from ddm_core import load_config


# -- phases ---------------------------------------------------------------------------------------


def test_the_phases_follow_the_issue_in_order() -> None:
    assert [p.value for p in FORWARD] == [
        "prepare", "dual_write", "backfill", "catch_up", "verify", "shift_reads", "cutover", "finish",
    ]
    assert may_enter(None, False, Phase.PREPARE) is None
    assert "starts with prepare" in (may_enter(None, False, Phase.BACKFILL) or "")
    assert "not completed" in (may_enter(Phase.BACKFILL, False, Phase.CATCH_UP) or "")
    assert may_enter(Phase.BACKFILL, True, Phase.CATCH_UP) is None
    assert "does not follow" in (may_enter(Phase.BACKFILL, True, Phase.VERIFY) or "")
    assert may_enter(Phase.VERIFY, False, Phase.CATCH_UP) is None  # differences found: repair
    assert may_enter(Phase.SHIFT_READS, False, Phase.ROLLED_BACK) is None
    assert "until cutover" in (may_enter(Phase.CUTOVER, True, Phase.ROLLED_BACK) or "")
    assert may_enter(Phase.CUTOVER, False, Phase.ROLLED_BACK) is None  # writes paused: the old location is complete
    assert "over" in (may_enter(Phase.ROLLED_BACK, True, Phase.PREPARE) or "")


# -- the state table ------------------------------------------------------------------------------


@pytest.fixture()
def eight() -> Iterator[list[str]]:
    with fresh_mariadb_databases(8) as names:
        yield names


@pytest.fixture()
def log(eight: list[str]) -> Iterator[MigrationLog]:
    old, _ = reshard_configs(eight)
    with MigrationLog(connector(old, "ds_0"), "grow-8") as migration:
        migration.create_table()
        yield migration


def test_transitions_are_rows_and_a_new_migrator_resumes_from_them(eight: list[str], log: MigrationLog) -> None:
    log.enter(Phase.PREPARE, detail={"plan": "p"})
    with pytest.raises(MigrationStateError, match="prepare is not completed yet"):
        log.enter(Phase.DUAL_WRITE)
    log.complete(Phase.PREPARE)
    log.enter(Phase.DUAL_WRITE)
    log.complete(Phase.DUAL_WRITE)
    log.enter(Phase.BACKFILL)
    log.record_batch(7, [1000], 10_000, "00ff")
    log.record_batch(7, [2000], 20_000, "0a0a")
    log.record_batch(9, ["x", 3], 5, "0101", done=True)

    old, _ = reshard_configs(eight)
    with MigrationLog(connector(old, "ds_0"), "grow-8") as again:  # as a restarted migrator would
        state = again.state()
        assert state.phase is Phase.BACKFILL and not state.completed
        assert state.plan == {"plan": "p"}
        assert state.slots[7].high_water == (2000,) and state.slots[7].rows_copied == 20_000
        assert not state.slots[7].done and state.slots[9].done and state.slots[9].high_water == ("x", 3)
        assert [(e.event, e.phase) for e in state.history] == [
            ("enter", Phase.PREPARE), ("complete", Phase.PREPARE), ("enter", Phase.DUAL_WRITE),
            ("complete", Phase.DUAL_WRITE), ("enter", Phase.BACKFILL),
        ]
        assert again.enter(Phase.BACKFILL).seq == state.seq  # resuming records nothing
        with pytest.raises(MigrationStateError, match="in backfill, not shift_reads"):
            again.set_read_shift(10)


def test_a_second_migrator_fails_at_its_first_write(eight: list[str], log: MigrationLog) -> None:
    log.enter(Phase.PREPARE)
    log.complete(Phase.PREPARE)
    old, _ = reshard_configs(eight)
    with MigrationLog(connector(old, "ds_0"), "grow-8") as other:
        seen = other.state()  # both read the same state...
        log.enter(Phase.DUAL_WRITE)  # ...the first writes...
        with pytest.raises(MigrationStateError, match="another migrator wrote step 3 first"):
            other.enter(Phase.DUAL_WRITE, state=seen)  # ...and the second's write fails
    assert [e.event for e in log.events()] == ["enter", "complete", "enter"]


def test_read_shift_and_rollback(log: MigrationLog) -> None:
    for phase in FORWARD[:5]:
        log.enter(phase)
        log.complete(phase)
    log.enter(Phase.SHIFT_READS)
    for pct in (1, 10, 50):
        assert log.set_read_shift(pct).read_shift_pct == pct
    with pytest.raises(MigrationError, match="outside 0..100"):
        log.set_read_shift(150)
    state = log.enter(Phase.ROLLED_BACK)
    assert state.phase is Phase.ROLLED_BACK and state.read_shift_pct == 0
    with pytest.raises(MigrationStateError, match="over"):
        log.enter(Phase.PREPARE)


def test_a_stopped_phase_reports_and_resumes(log: MigrationLog) -> None:
    log.enter(Phase.PREPARE)
    state = log.stop(Phase.PREPARE, {"differences": ["ds_1.t_order_1_0: column 'amount'"]})
    assert state.stopped == {"differences": ["ds_1.t_order_1_0: column 'amount'"]} and not state.completed
    state = log.enter(Phase.PREPARE)  # after the fix: run it again
    assert state.stopped is None and state.phase is Phase.PREPARE


# -- the plan ---------------------------------------------------------------------------------------


def _create_and_fill(config: Any, users: range) -> None:
    with Executor(config, timeout=10.0, load_schema=False) as ex:
        ex.execute(ORDER_DDL).close()
        ex.execute("CREATE TABLE t_dict (id INT NOT NULL PRIMARY KEY, name VARCHAR(40))").close()
        ex.execute("CREATE TABLE t_config (id INT NOT NULL PRIMARY KEY, name VARCHAR(40))").close()
        ex.execute("INSERT INTO t_dict (id, name) VALUES (1, 'a'), (2, 'b'), (3, 'c')").close()
        rows = [(u * 10 + k, u, k) for u in users for k in range(2)]
        for i in range(0, len(rows), 500):
            chunk = rows[i : i + 500]
            marks = ", ".join(["(%s, %s, %s)"] * len(chunk))
            ex.execute(f"INSERT INTO t_order (order_id, user_id, amount) VALUES {marks}",
                       [v for r in chunk for v in r]).close()


def test_plan_counts_exactly_the_rows_whose_data_source_changes(eight: list[str]) -> None:
    old, new = reshard_configs(eight)
    users = range(1, 1501)
    _create_and_fill(old, users)
    # Reference: route every row by both configurations, one at a time.
    r_old, r_new = Router(old), Router(new)
    expected: dict[tuple[str, str], int] = {}
    for u in users:
        a = r_old.route("SELECT * FROM t_order WHERE user_id = %s", [u]).units[0].data_source
        b = r_new.route("SELECT * FROM t_order WHERE user_id = %s", [u]).units[0].data_source
        if a != b:
            expected[(a, b)] = expected.get((a, b), 0) + 2
    with Connections(old, new) as conns:
        plan = plan_migration(old, new, conns=conns, count="exact")
    (table,) = plan.tables
    assert table.table == "t_order" and table.counted == "exact"
    assert len(table.moves) == 512 and table.fewest_moves == 512  # half the 1024 slots
    found: dict[tuple[str, str], int] = {}
    for m in table.moves:
        found[(m.source, m.target)] = found.get((m.source, m.target), 0) + (m.rows or 0)
    assert {k: v for k, v in found.items() if v} == expected
    assert plan.new_data_sources == tuple(f"ds_{i}" for i in range(4, 8))
    (copy,) = plan.broadcasts
    assert copy.table == "t_dict" and copy.rows == 3 and copy.targets == plan.new_data_sources
    assert plan.rate is not None and plan.rate > 0 and plan.rate_measured
    assert plan.seconds == pytest.approx(plan.rows / plan.rate)
    slots = plan.moving_slots("t_order")
    assert all(src in {"ds_0", "ds_1", "ds_2", "ds_3"} and dst >= "ds_4" for src, dst in slots.values())


def test_plan_refuses_what_is_no_slot_move(eight: list[str]) -> None:
    old_doc, new_doc = reshard_docs(eight)
    new_doc["singleTables"] = {"t_config": "ds_1"}
    with pytest.raises(MigrationError, match="t_config"):
        plan_migration(load_config(old_doc), load_config(new_doc))
    old_doc, new_doc = reshard_docs(eight)
    new_doc["tables"][0]["tablePerShard"] = 4
    with pytest.raises(MigrationError, match="cannot be moved by slots"):
        plan_migration(load_config(old_doc), load_config(new_doc))
