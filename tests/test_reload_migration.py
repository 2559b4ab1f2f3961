"""Watchers following a migration: the announced cutover version is taken, nothing else that moves data.

Also the holder's confirmation time (what fail-closed routing reads) and, on real MariaDB, a holder on
the ``ddm_config`` table following dual_write -> shift_reads 50 -> cutover -> the plain target.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

import pytest
import yaml

from ddm_core import Router, load_config
from ddm_core.errors import MigrationFencedError, PlacementChangeError
from ddm_core.hashing import slot_of
from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.migration import migration_document
from ddm_core.metadata.sources.static import StaticSource
from ddm_core.migrate import config_table_source
from ddm_core.migrate.plan import plan_migration
from migrate_support import reshard_docs
from services import fresh_mariadb_databases

INSERT = "INSERT INTO t_order (user_id, amount) VALUES (%s, %s)"
SELECT = "SELECT * FROM t_order WHERE user_id = %s"


def docs(databases: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    return reshard_docs(databases)


def phase_doc(old: dict[str, Any], new: dict[str, Any], phase: str, pct: float = 0) -> dict[str, Any]:
    return migration_document(old, new, name="grow-8", phase=phase, read_shift_pct=pct)


OLD, NEW = docs([f"ddm_nowhere_{i}" for i in range(8)])


def test_the_announced_target_is_taken_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    source = StaticSource(OLD)
    holder = ConfigHolder(source, check_env=False)
    source.set(phase_doc(OLD, NEW, "dual_write"))
    assert holder.reload().status == "updated"  # the block changes no placement
    source.set(phase_doc(OLD, NEW, "cutover", 100))
    assert holder.reload().status == "updated"
    source.set(NEW)
    with caplog.at_level(logging.WARNING, logger="ddm_core.metadata"):
        result = holder.reload()
    assert result.status == "updated" and holder.config == load_config(NEW) and holder.config.migration is None
    assert any("migration 'grow-8' announced" in r.getMessage() for r in caplog.records)


def test_a_rollback_to_the_base_placement_is_taken() -> None:
    source = StaticSource(phase_doc(OLD, NEW, "shift_reads", 50))
    holder = ConfigHolder(source, check_env=False)
    source.set(OLD)
    assert holder.reload().status == "updated" and holder.config == load_config(OLD)


def test_anything_else_that_moves_data_is_refused() -> None:
    # straight to the target without an announcing version
    source = StaticSource(OLD)
    holder = ConfigHolder(source, check_env=False)
    source.set(NEW)
    result = holder.reload()
    assert result.status == "rejected" and isinstance(result.error, PlacementChangeError)
    # a placement other than the announced target
    source.set(phase_doc(OLD, NEW, "dual_write"))
    assert holder.reload().status == "updated"
    other = copy.deepcopy(NEW)
    slots = other["tables"][0]["slots"]
    slots["ds_4"], slots["ds_5"] = slots["ds_5"], slots["ds_4"]  # another layout over the same nodes
    source.set(other)
    result = holder.reload()
    assert result.status == "rejected" and isinstance(result.error, PlacementChangeError)
    assert holder.config.migration is not None and holder.config.migration.phase == "dual_write"
    # Before cutover the new location may not have caught up: the target itself is refused too.
    with pytest.raises(PlacementChangeError):
        holder.publish(NEW)
    # publish() without allow_placement_change follows the same rule
    assert holder.publish(phase_doc(OLD, NEW, "cutover", 100)).status == "updated"
    with pytest.raises(PlacementChangeError):
        holder.publish(other)
    assert holder.publish(phase_doc(NEW, OLD, "finish")).status == "updated"
    # In the finish window the block names where the rows came from: going back there loses writes.
    with pytest.raises(PlacementChangeError):
        holder.publish(OLD)
    assert holder.publish(NEW).status == "updated"


def test_confirmed_at_moves_only_on_a_successful_check() -> None:
    source = StaticSource(OLD)
    holder = ConfigHolder(source, check_env=False)
    first = holder.confirmed_at
    assert first > float("-inf")
    source.available = False
    source.set(phase_doc(OLD, NEW, "dual_write"))
    assert holder.reload().status == "unreachable" and holder.confirmed_at == first
    source.available = True
    assert holder.reload().status == "updated" and holder.confirmed_at > first
    second = holder.confirmed_at
    assert holder.reload().status == "unchanged" and holder.confirmed_at > second
    third = holder.confirmed_at
    source.set(NEW | {"runtime": {"maxOffset": "lots"}})  # invalid: refused, not confirmed
    assert holder.reload().status == "rejected" and holder.confirmed_at == third
    assert holder.reload().status == "rejected" and holder.confirmed_at == third


def test_a_holder_on_the_config_table_follows_a_migration() -> None:
    with fresh_mariadb_databases(8) as databases:
        old, new = docs(databases)
        moves = plan_migration(load_config(old), load_config(new)).moving_slots("t_order")
        moving = next(u for u in range(1000) if slot_of(u, 10) in moves)
        staying = next(u for u in range(1000) if slot_of(u, 10) not in moves)
        old_owner, new_owner = moves[slot_of(moving, 10)]
        with config_table_source(load_config(old), "ds_0", create=True) as source:
            source.publish(yaml.safe_dump(old, sort_keys=False))
            holder = ConfigHolder(source, check_env=False)
            router = Router(holder)
            assert router.route(INSERT, (moving, 1)).dual == ()

            source.publish(yaml.safe_dump(phase_doc(old, new, "dual_write"), sort_keys=False))
            assert holder.reload().status == "updated"
            plan = router.route(INSERT, (moving, 1))
            assert [u.data_source for u in plan.units] == [old_owner]
            assert [u.data_source for u in plan.dual] == [new_owner]
            assert plan.dual[0].params == plan.units[0].params
            assert router.route(INSERT, (staying, 1)).dual == ()
            assert router.route(SELECT, (moving,)).units[0].data_source == old_owner

            source.publish(yaml.safe_dump(phase_doc(old, new, "shift_reads", 50), sort_keys=False))
            assert holder.reload().status == "updated"
            m = holder.config.migration
            assert m is not None and len(m.shifted_slots["t_order"]) == len(moves) // 2
            for uid in range(200):
                slot = slot_of(uid, 10)
                want = moves[slot][1] if slot in m.shifted_slots["t_order"] else router_base(old, uid)
                assert router.route(SELECT, (uid,)).units[0].data_source == want
            assert router.route(INSERT, (moving, 1)).dual
            holder.confirmed_at = time.monotonic() - 30  # as if the table had not answered for 30 s
            with pytest.raises(MigrationFencedError, match="config source not confirmed"):
                router.route(INSERT, (moving, 1))
            assert holder.reload().status == "unchanged"  # one primary-key lookup confirms again
            assert router.route(INSERT, (moving, 1)).dual

            source.publish(yaml.safe_dump(phase_doc(old, new, "cutover", 100), sort_keys=False))
            assert holder.reload().status == "updated"
            with pytest.raises(MigrationFencedError, match="paused for its cutover"):
                router.route(INSERT, (moving, 1))
            assert router.route(INSERT, (staying, 1)).dual == ()
            assert router.route(SELECT, (moving,)).units[0].data_source == new_owner

            source.publish(yaml.safe_dump(new, sort_keys=False))
            assert holder.reload().status == "updated" and holder.config.migration is None
            plan = router.route(INSERT, (moving, 1))
            assert [u.data_source for u in plan.units] == [new_owner] and plan.dual == ()
            assert holder.version == 5


def router_base(old: dict[str, Any], uid: int) -> str:
    return Router(load_config(old)).route(SELECT, (uid,)).units[0].data_source
