"""The ``migration:`` block and how the router follows it: dual writes, read shift, fences (no database)."""

from __future__ import annotations

import ast
import copy
import math
import time
from pathlib import Path
from typing import Any

import pytest
import xxhash

import ddm_core.metadata.migration
import ddm_core.metadata.placement
import ddm_core.route
from ddm_core import Router, load_config
from ddm_core.errors import ConfigError, MigrationError, MigrationFencedError
from ddm_core.hashing import slot_of
from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.dump import dump_native, to_native
from ddm_core.metadata.migration import (
    MigrationConfigError,
    migration_document,
    routing_data_sources,
    shifted_slots,
)
from ddm_core.metadata.migration import MIGRATION_PHASES
from ddm_core.metadata.model import ShardingConfig
from ddm_core.metadata.phases import ROUTED, Phase
from ddm_core.metadata.placement import placement_changes
from ddm_core.metadata.sources.static import StaticSource
from ddm_core.migrate import phases as migrate_phases
from ddm_core.migrate.plan import plan_migration
from migrate_support import reshard_docs

DATABASES = [f"ddm_nowhere_{i}" for i in range(8)]  # never connected: routing only
OLD, NEW = reshard_docs(DATABASES)
INSERT = "INSERT INTO t_order (user_id, amount) VALUES (%s, %s)"


def migrating(phase: str = "dual_write", pct: float = 0.0, **kw: Any) -> ShardingConfig:
    return load_config(migration_document(OLD, NEW, name="grow-8", phase=phase, read_shift_pct=pct, **kw))


MOVES = plan_migration(load_config(OLD), load_config(NEW)).moving_slots("t_order")  # slot -> (old, new owner)


def user_in(moving: bool, start: int = 0) -> int:
    """The first user id from ``start`` whose slot does (not) move."""
    uid = start
    while (slot_of(uid, 10) in MOVES) is not moving:
        uid += 1
    return uid


def physical_index(table: str) -> str:
    return table.rsplit("_", 1)[1]  # t_order_<ds>_<table index>


# -- the document -----------------------------------------------------------------------------


def test_load_and_dump_round_trip() -> None:
    config = migrating("shift_reads", 10, fence_after_s=3)
    m = config.migration
    assert m is not None
    assert (m.name, m.phase, m.read_shift_pct, m.fence_after_s) == ("grow-8", "shift_reads", 10.0, 3.0)
    assert m.target == load_config(NEW) and m.tables == {"t_order", "t_dict"}
    assert load_config(to_native(config, secrets="keep")) == config
    assert load_config(dump_native(config, secrets="keep")) == config
    # the block is part of equality; the base placement is the old one
    assert config != load_config(OLD) and config != migrating("shift_reads", 20, fence_after_s=3)
    assert placement_changes(load_config(OLD), config) == ()
    # ShardingConfig arguments work too, and the document is a deep copy
    doc = migration_document(load_config(OLD), load_config(NEW), name="grow-8", phase="dual_write")
    assert load_config(doc) == migrating()
    doc["migration"]["target"]["tables"][0]["logicTable"] = "changed"
    assert NEW["tables"][0]["logicTable"] == "t_order"


def bad(block: dict[str, Any], target: dict[str, Any] | None = None) -> ConfigError:
    doc = copy.deepcopy(OLD)
    doc["migration"] = {"name": "grow-8", "phase": "dual_write", "target": copy.deepcopy(target or NEW), **block}
    with pytest.raises(ConfigError) as info:
        load_config(doc)
    return info.value


def test_validation_names_the_field() -> None:
    assert "migration.phase" in str(bad({"phase": "rolled_back"}))
    assert "migration.readShiftPercent" in str(bad({"readShiftPercent": 150}))
    assert "migration.fenceAfterSeconds" in str(bad({"fenceAfterSeconds": 0}))
    assert "migration.readShift" in str(bad({"readShift": 5}))  # unknown key, named
    assert "migration.target" in str(bad({"target": "new.yaml"}))
    # an invalid target names the field inside it
    broken = copy.deepcopy(NEW)
    broken["tables"][0]["tablePerShard"] = 0
    assert "migration.target.tables[0]" in str(bad({}, broken))
    # a target moving data in a way no slot migration does (the planner's rule, reused)
    other = copy.deepcopy(NEW)
    other["tables"][0]["tableKey"] = "amount"
    error = bad({}, other)
    assert "migration.target" in str(error) and "cannot be moved by slots" in str(error)
    assert "moves nothing" in str(bad({}, OLD))
    with pytest.raises(MigrationConfigError, match="migration.readShiftPercent"):
        migration_document(OLD, NEW, name="grow-8", phase="dual_write", read_shift_pct=-1)
    with pytest.raises(MigrationConfigError, match="migration.phase"):
        migration_document(OLD, NEW, name="grow-8", phase="rolled_back")


# -- read shift ---------------------------------------------------------------------------------------


def test_shifted_slots_are_stable_and_grow_with_the_percentage() -> None:
    moving = sorted(MOVES)
    ranked = sorted(moving, key=lambda s: xxhash.xxh3_64_intdigest(s.to_bytes(4, "little")))
    previous: frozenset[int] = frozenset()
    for pct in (0, 1, 10, 33.3, 50, 99, 100):
        chosen = migrating("shift_reads", pct).migration.shifted_slots["t_order"]  # type: ignore[union-attr]
        assert chosen == frozenset(ranked[: math.ceil(len(moving) * pct / 100)])
        assert chosen == shifted_slots(reversed(moving), pct)  # the order given does not matter
        assert previous <= chosen
        previous = chosen
    assert previous == frozenset(moving) and len(moving) == 512


def test_reads_at_0_50_100_percent() -> None:
    base, target = Router(load_config(OLD)), Router(load_config(NEW))
    sql = "SELECT * FROM t_order WHERE user_id = %s"
    for pct in (0, 50, 100):
        config = migrating("shift_reads", pct)
        m = config.migration
        assert m is not None
        if pct == 0:
            assert placement_changes(load_config(OLD), m.reads) == ()
        if pct == 100:
            assert placement_changes(load_config(NEW), m.reads) == ()
        router = Router(config)
        shifted = new_place = 0
        for uid in range(400):
            got = router.route(sql, (uid,)).units
            expect = target if slot_of(uid, 10) in m.shifted_slots["t_order"] else base
            assert got == expect.route(sql, (uid,)).units
            shifted += slot_of(uid, 10) in m.shifted_slots["t_order"]
            new_place += got != base.route(sql, (uid,)).units
        assert new_place == shifted and (shifted == 0) is (pct == 0)
        assert router.route("SELECT * FROM t_config").units == base.route("SELECT * FROM t_config").units
        # A read over several tables stays on the base at every percentage: at the new location too it
        # would count each moving row twice (the old tables keep their copies until finish).
        full = router.route("SELECT COUNT(*) FROM t_order").units
        assert full == base.route("SELECT COUNT(*) FROM t_order").units
        moving, staying = user_in(True), user_in(False)
        pair = "SELECT * FROM t_order WHERE user_id IN (%s, %s)"
        assert router.route(pair, (moving, staying)).units == base.route(pair, (moving, staying)).units


def test_reads_forced_to_the_primary_stay_on_the_base() -> None:
    router = Router(migrating("shift_reads", 100))
    uid = user_in(moving=True)
    sql = "SELECT * FROM t_order WHERE user_id = %s FOR UPDATE"
    assert router.route(sql, (uid,)).units[0].data_source == MOVES[slot_of(uid, 10)][0]


# -- dual writes ----------------------------------------------------------------------------------------


def test_single_row_writes_dual_only_for_moving_slots() -> None:
    router = Router(migrating("dual_write"))
    for moving in (True, False):
        uid = user_in(moving)
        for sql, params in (
            (INSERT, (uid, 1)),
            ("UPDATE t_order SET amount = amount + 1 WHERE user_id = %s", (uid,)),
            ("DELETE FROM t_order WHERE user_id = %s", (uid,)),
        ):
            plan = router.route(sql, params)
            assert len(plan.units) == 1
            if not moving:
                assert plan.dual == ()
                continue
            old, new = MOVES[slot_of(uid, 10)]
            (unit,) = plan.units
            (dual,) = plan.dual
            assert (unit.data_source, dual.data_source) == (old, new)
            physical = dual.tables[0][1]
            assert physical == f"t_order_{new.split('_')[1]}_{physical_index(unit.tables[0][1])}"
            assert dual.sql == unit.sql.replace(unit.tables[0][1], physical) and dual.params == unit.params


def test_multi_row_insert_duals_only_the_moving_rows_with_the_same_keys() -> None:
    router = Router(migrating("backfill"))
    users = [user_in(True), user_in(False), user_in(True, user_in(True) + 1), user_in(False, user_in(False) + 1)]
    sql = "INSERT INTO t_order (user_id, amount) VALUES " + ", ".join(["(%s, %s)"] * len(users))
    plan = router.route(sql, [v for u in users for v in (u, 7)])
    assert len(plan.generated_keys) == 4
    key_of = dict(zip(users, plan.generated_keys))
    dual_rows = {}
    for unit in plan.dual:
        for uid, _, key in zip(*[iter(unit.params)] * 3):
            dual_rows[uid] = (unit.data_source, key)
    assert dual_rows == {u: (MOVES[slot_of(u, 10)][1], key_of[u]) for u in users if slot_of(u, 10) in MOVES}
    assert len(dual_rows) == 2


def test_generated_keys_are_reused_never_generated_again() -> None:
    router = Router(migrating("dual_write"))
    uid = user_in(True)
    for sql in (INSERT, "INSERT INTO t_order (order_id, user_id, amount) VALUES (NULL, %s, %s)"):
        plan = router.route(sql, (uid, 1))
        (key,) = plan.generated_keys
        (dual,) = plan.dual
        assert key in plan.units[0].params and key in dual.params
        # the next statement's key follows directly: the dual route drew none of its own
        following = Router(load_config(OLD)).route(INSERT, (uid, 1)).generated_keys[0]
        assert following > key
    # given keys are kept as written
    plan = router.route("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)", (42, uid, 1))
    assert plan.generated_keys == () and plan.dual[0].params == (42, uid, 1)


def test_full_route_update_duals_the_new_data_sources() -> None:
    router = Router(migrating("verify"))
    plan = router.route("UPDATE t_order SET amount = 0 WHERE amount > %s", (5,))
    assert {u.data_source for u in plan.units} == {"ds_0", "ds_1", "ds_2", "ds_3"}
    assert sorted(u.tables[0][1] for u in plan.dual) == [f"t_order_{d}_{t}" for d in range(4, 8) for t in (0, 1)]
    # a broadcast table is copied to the new data sources: its writes go there too
    plan = router.route("UPDATE t_dict SET v = 1 WHERE id = 2")
    assert [u.data_source for u in plan.dual] == ["ds_4", "ds_5", "ds_6", "ds_7"]
    # a table that does not move is left alone
    assert router.route("UPDATE t_config SET v = 1").dual == ()


def test_without_a_migration_nothing_changes() -> None:
    router = Router(load_config(OLD))
    assert router._migration is None
    assert router.route(INSERT, (user_in(True), 1)).dual == ()


# -- fences ---------------------------------------------------------------------------------------------


def test_cutover_fences_writes_to_moving_slots_only() -> None:
    router = Router(migrating("cutover", 100))
    uid = user_in(True)
    with pytest.raises(MigrationFencedError) as info:
        router.route("UPDATE t_order SET amount = 1 WHERE user_id = %s", (uid,))
    assert str(info.value).startswith(
        "writes to t_order slot(s) moving in migration 'grow-8' are paused for its cutover; retry in a few seconds"
    )
    assert info.value.context["migration"] == "grow-8" and isinstance(info.value, MigrationError)
    with pytest.raises(MigrationFencedError):
        router.route("DELETE FROM t_order WHERE amount = 3")  # full route over a moving table
    stay = user_in(False)
    plan = router.route(INSERT, (stay, 1))
    assert plan.dual == () and plan.units[0].data_source == Router(load_config(OLD)).route(
        "SELECT 1 FROM t_order WHERE user_id = %s", (stay,)).units[0].data_source
    # reads keep working, at the new owner
    assert router.route("SELECT * FROM t_order WHERE user_id = %s", (uid,)).units[0].data_source == MOVES[
        slot_of(uid, 10)][1]


def test_an_unconfirmed_config_source_fences_moving_writes() -> None:
    holder = ConfigHolder(StaticSource(migration_document(OLD, NEW, name="grow-8", phase="dual_write",
                                                          fence_after_s=5)), check_env=False)
    router = Router(holder)
    moving, stay = user_in(True), user_in(False)
    assert router.route(INSERT, (moving, 1)).dual  # just confirmed at start
    holder.confirmed_at = time.monotonic() - 60
    with pytest.raises(MigrationFencedError, match=r"config source not confirmed for 6\d\.\d s"):
        router.route(INSERT, (moving, 1))
    assert router.route(INSERT, (stay, 1)).dual == ()
    assert router.route("SELECT * FROM t_order WHERE user_id = %s", (moving,)).units
    assert holder.reload().status == "unchanged"  # a successful check confirms again
    assert router.route(INSERT, (moving, 1)).dual


def test_ddl_on_a_migrating_table_is_refused() -> None:
    router = Router(migrating("catch_up"))
    for sql in ("ALTER TABLE t_order ADD COLUMN x INT", "TRUNCATE TABLE t_dict"):
        with pytest.raises(MigrationError, match="is refused while migration 'grow-8' moves it") as info:
            router.route(sql)
        assert info.value.context["table"] in ("t_order", "t_dict")
    assert router.route("ALTER TABLE t_config ADD COLUMN x INT").units


def test_routing_data_sources_include_the_targets() -> None:
    config = migrating("dual_write")
    assert list(routing_data_sources(config)) == [f"ds_{i}" for i in range(8)]
    assert list(config.data_sources) == [f"ds_{i}" for i in range(4)]
    assert routing_data_sources(load_config(OLD)) == load_config(OLD).data_sources


def test_finish_phase_writes_new_only_and_refuses_reads_that_would_see_old_copies() -> None:
    finishing = load_config(migration_document(NEW, OLD, name="grow-8", phase="finish"))
    assert finishing.migration is not None and finishing.migration.tables == frozenset({"t_order"})
    router, target = Router(finishing), Router(load_config(NEW))
    moving, staying = user_in(True), user_in(False)
    for uid in (moving, staying):  # by key: the new placement, nothing written twice
        for sql in ("SELECT * FROM t_order WHERE user_id = %s", "UPDATE t_order SET amount = 1 WHERE user_id = %s"):
            plan = router.route(sql, (uid,))
            assert plan.units == target.route(sql, (uid,)).units and plan.dual == ()
    with pytest.raises(MigrationFencedError, match="wait for migration 'grow-8' to finish"):
        router.route("SELECT COUNT(*) FROM t_order")
    assert router.route("SELECT * FROM t_config").units == target.route("SELECT * FROM t_config").units
    # Published at cutover and then replaced by the plain new configuration: neither moves placement.
    cutover = migrating("cutover", 100)
    assert placement_changes(cutover.migration.target, finishing) == ()  # type: ignore[union-attr]
    assert placement_changes(finishing, load_config(NEW)) == ()


# -- phases: one enum for the migrator, the block and the router -------------------------------------


def test_the_migrator_publishes_the_phases_the_router_follows() -> None:
    assert migrate_phases.Phase is Phase
    # Every forward phase after prepare is published (before it nothing is), and no other.
    assert ROUTED == migrate_phases.FORWARD[1:]
    assert MIGRATION_PHASES == tuple(phase.value for phase in ROUTED)


#: What a write to a moving slot gets in each phase a published version may carry.
WRITE_IN_PHASE = {
    Phase.DUAL_WRITE: "dual",
    Phase.BACKFILL: "dual",
    Phase.CATCH_UP: "dual",
    Phase.VERIFY: "dual",
    Phase.SHIFT_READS: "dual",
    Phase.CUTOVER: "paused",
    Phase.FINISH: "new placement only",
}


@pytest.mark.parametrize("phase", ROUTED, ids=str)
def test_the_router_follows_every_published_phase(phase: Phase) -> None:
    assert set(WRITE_IN_PHASE) == set(ROUTED)
    uid = user_in(True)
    sql = "UPDATE t_order SET amount = 1 WHERE user_id = %s"
    old, new = MOVES[slot_of(uid, 10)]
    if phase is Phase.FINISH:  # published at cutover: the new placement is the base
        router = Router(load_config(migration_document(NEW, OLD, name="grow-8", phase=phase)))
    else:
        router = Router(migrating(phase, 100 if phase is Phase.CUTOVER else 0))
    if WRITE_IN_PHASE[phase] == "paused":
        with pytest.raises(MigrationFencedError, match="paused for its cutover"):
            router.route(sql, (uid,))
        return
    plan = router.route(sql, (uid,))
    if WRITE_IN_PHASE[phase] == "dual":
        assert [u.data_source for u in plan.units] == [old] and [u.data_source for u in plan.dual] == [new]
    else:
        assert [u.data_source for u in plan.units] == [new] and plan.dual == ()


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module's code (docstrings left out), with their lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_phase_name_is_copied_where_phases_are_read() -> None:
    """The router and the block's reader name phases by the enum: a string copy could drift from it."""
    names = {phase.value for phase in Phase}
    route_dir = Path(ddm_core.route.__file__).parent
    readers = [*sorted(route_dir.rglob("*.py")), Path(ddm_core.metadata.migration.__file__),
               Path(ddm_core.metadata.placement.__file__)]
    copies = [
        f"{path.name}:{line}: {text!r}" for path in readers for line, text in _code_strings(path) if text in names
    ]
    assert copies == []

