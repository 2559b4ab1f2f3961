"""The ``migration:`` block of a configuration version: how routers follow a resharding migration.

While a migration runs, the migrator publishes versions that are the OLD
configuration plus a block naming the migration, its phase, the read-shift
percentage, the fail-closed delay and the COMPLETE new configuration
(docs/migration.md#dual-write)::

    migration:
      name: grow-8
      phase: dual_write          # dual_write, backfill, catch_up, verify, shift_reads, cutover, finish
      readShiftPercent: 0        # 0..100
      fenceAfterSeconds: 5       # > 0
      target: {...}              # to_native() of the new configuration

Phase ``finish`` turns the block around: published at cutover, its base is the
NEW configuration and its ``target`` the OLD one, whose tables still hold copies
of the moved rows until ``ddm migrate finish`` deletes them. Writes follow the
base only, and reads over several shards are refused (they would see both
copies) until the plain new configuration is published.

The base placement stays authoritative (a hot reload never moves data); the
router derives from the block where each write is copied to (``target``) and
where reads go (``reads``: the target placement for the *shifted* slots only).
The target must differ from the base only by moves the migration planner
accepts (:func:`ddm_core.metadata.slot_moves.slot_moves`).

Shifted slots: the moving slots of a table ranked by xxh3_64 of the slot
number (4 bytes, little endian), the first ``ceil(pct / 100 * n)`` of them. A
key has one slot, so one user reads from one place, and raising the
percentage only adds slots.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import xxhash

from ddm_core.algorithms.slot_based import slot_layout_spec
from ddm_core.errors import ConfigError, DdmError, MigrationConfigError
from ddm_core.metadata.build import Context, ParseConfig
from ddm_core.metadata.dump import native_copy
from ddm_core.metadata.fields import Section
from ddm_core.metadata.model import DataSource, MigrationRouting, ShardingConfig
from ddm_core.metadata.phases import ROUTED
from ddm_core.metadata.slot_moves import slot_moves, slot_owners
from ddm_core.slots import SlotMap

__all__ = [
    "MIGRATION_PHASES",
    "MigrationConfigError",  # defined in ddm_core.errors, re-exported: the block's error
    "MigrationRouting",  # defined with ShardingConfig (model.py), which holds it: the block's value
    "MigrationSpec",
    "migration_document",
    "migration_routing",
    "routing_data_sources",
    "shifted_slots",
]

#: Phases a published version may carry (the ones in which routers do something), as written in it.
MIGRATION_PHASES: tuple[str, ...] = tuple(phase.value for phase in ROUTED)


@dataclass(frozen=True, slots=True)
class MigrationSpec:
    """The block as read from a document, before the base configuration exists (the loader's step)."""

    name: str
    phase: str
    read_shift_pct: float
    fence_after_s: float
    target: ShardingConfig


def routing_data_sources(config: ShardingConfig) -> Mapping[str, DataSource]:
    """Every data source a plan routed on ``config`` may name: its own, plus those only its
    migration's target has (dual units and shifted reads go there), plus a cut-over's legacy
    data source (docs/cutover.md#routing). What an executor opens pools for."""
    migration = config.migration
    if migration is not None:
        return migration.data_sources_with(config)
    cutover = config.cutover
    if cutover is not None:
        return cutover.data_sources_with(config)
    return config.data_sources


# -- shifted slots -----------------------------------------------------------------------------


def _rank(slot: int) -> int:
    return xxhash.xxh3_64_intdigest(int(slot).to_bytes(4, "little"))


def shifted_slots(moving: Any, pct: float) -> frozenset[int]:
    """The first ``ceil(pct / 100 * n)`` of the ``moving`` slots ranked by their stable hash."""
    slots = sorted({int(s) for s in moving}, key=lambda s: (_rank(s), s))
    count = math.ceil(len(slots) * pct / 100.0 - 1e-9) if pct > 0 else 0
    return frozenset(slots[: min(count, len(slots))])


# -- building ------------------------------------------------------------------------------------


def _check_values(name: Any, phase: Any, pct: Any, fence: Any) -> list[tuple[str, str, Any]]:
    """``(field, problem, value)`` for each bad value of the block."""
    out: list[tuple[str, str, Any]] = []
    if not isinstance(name, str) or not name.strip():
        out.append(("name", f"must name the migration, not {name!r}", name))
    if phase not in MIGRATION_PHASES:
        out.append(("phase", f"must be one of {', '.join(MIGRATION_PHASES)}, not {phase!r}", phase))
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not 0 <= pct <= 100:
        out.append(("readShiftPercent", f"must be a number from 0 to 100, not {pct!r}", pct))
    if isinstance(fence, bool) or not isinstance(fence, (int, float)) or not (fence > 0 and math.isfinite(fence)):
        out.append(("fenceAfterSeconds", f"must be a number of seconds > 0, not {fence!r}", fence))
    return out


def migration_document(
    base: ShardingConfig | Mapping[str, Any],
    target: ShardingConfig | Mapping[str, Any],
    *,
    name: str,
    phase: str,
    read_shift_pct: float = 0.0,
    fence_after_s: float = 5.0,
) -> dict[str, Any]:
    """The document to publish during a migration: ``base`` plus the ``migration:`` block (deep copies).

    Args:
        base: The configuration serving now (a native document or a loaded configuration).
        target: The configuration migrated to (likewise); a block it carries is dropped.
        name, phase, read_shift_pct, fence_after_s: The block's values.

    Raises:
        MigrationConfigError: a value is out of range (naming ``migration.<field>``).
            The target's moves are checked when the document is loaded.
    """
    problems = _check_values(name, phase, read_shift_pct, fence_after_s)
    if problems:
        field_name, why, value = problems[0]
        raise MigrationConfigError(f"migration.{field_name}: {why}", field=f"migration.{field_name}", value=value)
    doc = native_copy(base)
    doc.pop("migration", None)
    target_doc = native_copy(target)
    target_doc.pop("migration", None)
    doc["migration"] = {
        "name": name,
        "phase": phase,
        "readShiftPercent": float(read_shift_pct),
        "fenceAfterSeconds": float(fence_after_s),
        "target": target_doc,
    }
    return doc


def migration_routing(
    base: ShardingConfig,
    target: ShardingConfig,
    *,
    name: str,
    phase: str,
    read_shift_pct: float = 0.0,
    fence_after_s: float = 5.0,
    parse: ParseConfig,
) -> MigrationRouting:
    """The routing of a migration from ``base`` to ``target`` (what the loader attaches to ``base``).

    ``parse`` loads the configuration reads go to when only some moving slots are shifted.

    Raises:
        MigrationConfigError: a value is out of range, the target carries a block
            of its own or moves nothing.
        MigrationError: the target changes placement in a way no slot migration makes.
    """
    problems = _check_values(name, phase, read_shift_pct, fence_after_s)
    if problems:
        field_name, why, value = problems[0]
        raise MigrationConfigError(f"migration.{field_name}: {why}", field=f"migration.{field_name}", value=value)
    if target.migration is not None:
        raise MigrationConfigError(
            f"migration.target: carries a migration block of its own ({target.migration.name!r})",
            field="migration.target",
        )
    moved, copied = slot_moves(base, target)
    if not moved and not copied:
        raise MigrationConfigError(
            f"migration.target: places every table as the configuration does; migration {name!r} moves nothing",
            field="migration.target",
        )
    shifted: dict[str, frozenset[int]] = {}
    receiving: dict[str, frozenset[str]] = {}
    tables = {t.table.lower() for t in moved} | {b.table.lower() for b in copied}
    for b in copied:
        receiving[b.table.lower()] = frozenset(b.targets)
    reads_doc: dict[str, Any] | None = None
    whole = True  # every moving slot shifted: reads follow the target
    for tp in moved:
        key = tp.table.lower()
        receiving[key] = frozenset(m.target for m in tp.moves)
        chosen = shifted_slots((m.slot for m in tp.moves), float(read_shift_pct))
        shifted[key] = chosen
        if len(chosen) == len(tp.moves):
            continue
        whole = False
        if read_shift_pct <= 0:
            continue  # reads stay on the base (below): no reads configuration to build
        if reads_doc is None:
            reads_doc = native_copy(target)
        _shift_table(reads_doc, base, target, tp.table, chosen)
    if whole:
        reads = target
    elif read_shift_pct <= 0 or not any(shifted.values()):
        reads = base
    else:
        assert reads_doc is not None
        reads = parse(reads_doc, origin=f"migration {name!r} reads", format="native", check_env=False)
    return MigrationRouting(
        name, phase, float(read_shift_pct), float(fence_after_s), target, reads, frozenset(tables),
        {k: v for k, v in shifted.items()}, receiving,
    )  # fmt: skip


def _shift_table(
    doc: dict[str, Any], base: ShardingConfig, target: ShardingConfig, table: str, chosen: frozenset[int],
) -> None:
    """Point ``table``'s database algorithm in ``doc`` at a slot map with only ``chosen`` at the new owners."""

    old_t, new_t = base.table(table), target.table(table)
    assert old_t is not None and new_t is not None
    old_map, old_names = slot_owners(old_t, "old")
    new_map, new_names = slot_owners(new_t, "new")
    names = list(new_names)
    before = np.asarray(old_names, dtype=object)[np.asarray(old_map.nodes)]
    nodes = np.asarray(new_map.nodes, dtype=np.int32).copy()
    for slot in np.flatnonzero(before != np.asarray(new_names, dtype=object)[nodes]):
        if int(slot) in chosen:
            continue
        owner = str(before[slot])
        if owner not in names:
            raise MigrationConfigError(
                f"migration.readShiftPercent: table {table!r} leaves data source {owner!r}; reads of its "
                "slots shift all at once (0 or 100 %)",
                field="migration.readShiftPercent",
                table=table,
            )
        nodes[slot] = names.index(owner)
    spec = slot_layout_spec(SlotMap(nodes, len(names)), names)
    algorithm = new_t.database_strategy.algorithm
    assert algorithm is not None
    reads_name = f"{algorithm.name}#reads"
    algorithms = doc.setdefault("algorithms", {})
    entry = copy.deepcopy(algorithms[algorithm.name])
    entry.setdefault("props", {})["slots"] = spec
    algorithms[reads_name] = entry  # its own algorithm: another table may share the original
    for item in doc["tables"]:
        if str(item.get("logicTable", "")).lower() == table.lower():
            item["databaseStrategy"]["algorithm"] = reads_name


# -- loading -------------------------------------------------------------------------------------


_FIELDS = ("name", "phase", "readShiftPercent", "fenceAfterSeconds", "target")


def read_migration(sec: Section, ctx: Context, parse: ParseConfig) -> MigrationSpec | None:
    """Read the native ``migration:`` section (problems go to ``ctx.problems``); ``parse`` loads its target."""
    raw = {f: sec.get(f) for f in _FIELDS}
    sec.finish()  # unknown keys are problems naming the field
    bad = False
    for field_name, why, value in _check_values(
        raw["name"], raw["phase"],
        0 if raw["readShiftPercent"] is None else raw["readShiftPercent"],
        5.0 if raw["fenceAfterSeconds"] is None else raw["fenceAfterSeconds"],
    ):  # fmt: skip
        ctx.problems.add(sec.field_path(field_name), why, value)
        bad = True
    tpath = sec.field_path("target")
    target_doc = raw["target"]
    if not isinstance(target_doc, Mapping):
        ctx.problems.add(tpath, f"must be the complete new configuration (a mapping), not {target_doc!r}", None)
        return None
    try:
        target = parse(
            target_doc, origin=f"{ctx.problems.origin} {tpath}", format="native", base_dir=ctx.base_dir,
            check_env=ctx.check_env,
        )  # fmt: skip
    except ConfigError as exc:
        for p in getattr(exc, "problems", None) or ():
            ctx.problems.add(f"{tpath}.{p.path}" if p.path else tpath, p.message, p.value)
        if not getattr(exc, "problems", None):
            ctx.problems.add(tpath, exc.message, None)
        return None
    if bad:
        return None
    return MigrationSpec(
        str(raw["name"]), str(raw["phase"]), float(raw["readShiftPercent"] or 0),
        float(5.0 if raw["fenceAfterSeconds"] is None else raw["fenceAfterSeconds"]), target,
    )  # fmt: skip


def attach_migration(config: ShardingConfig, spec: MigrationSpec, ctx: Context, parse: ParseConfig) -> ShardingConfig:
    """``config`` with its migration routing (problems go to ``ctx.problems``; ``config`` unchanged then)."""
    try:
        routing = migration_routing(
            config, spec.target, name=spec.name, phase=spec.phase, read_shift_pct=spec.read_shift_pct,
            fence_after_s=spec.fence_after_s, parse=parse,
        )  # fmt: skip
    except DdmError as exc:
        path = str(exc.context.get("field") or "migration.target")
        message = exc.message.removeprefix(f"{path}: ")
        ctx.problems.add(path, message, exc.context.get("value"))
        return config
    return dataclasses.replace(config, migration=routing)
