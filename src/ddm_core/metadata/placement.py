"""Where data lives, as a configuration says it, and what a new version would move.

A hot reload may retune a running system — runtime switches, pools, replicas
and their weights, hosts and credentials — but it must never change which
physical table a row belongs to: the rows would stay where they are while
statements go elsewhere. :func:`placement_changes` lists every difference in
*placement* between two versions:

* per sharded table: its data nodes (in order: index-based algorithms and
  binding tables follow node positions), the kind, sharding columns,
  algorithm type and every algorithm property (the slot map, sharding
  counts, ranges) of both strategies, the auto-table flag, the gene key
  (GENE ids carry the slot that picks the database), and the table it routes
  through (a binding group's first table);
* per broadcast table: the data sources it is copied to (all of them);
* per single table: its data source; the default data source (where
  unconfigured tables live) and the ShardingSphere single-table patterns;
* per data source present in both versions: the database it names (its
  dialect and schema or file) — the same name pointing at other data.

A table that is removed, or changes kind, is a change too. A table that the
old version does not know is an addition and moves nothing, so it is not
reported. Properties are compared as written: a slot map spelled differently
but meaning the same is reported (a false alarm is safe; a silent move is not).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

from ddm_core.errors import PlacementChangeError
from ddm_core.metadata.model import ShardedTable, ShardingConfig, Strategy, thaw
from ddm_core.metadata.phases import Phase

__all__ = ["PlacementChange", "placement_changes", "check_placement", "check_reload_placement"]

log = logging.getLogger("ddm_core.metadata")

_UNSET = object()
_SHOWN_CHARS = 240  # long values are cut in messages
_SHOWN_ITEMS = 8


@dataclass(frozen=True, slots=True)
class PlacementChange:
    """One thing a new configuration version would move.

    Attributes:
        subject: What moved, in the configuration's words (``"table 't_order'"``,
            ``"data source 'ds_1'"``, ``"default data source"``).
        table: The logic table concerned, when there is one.
        aspect: Which part of its placement (``"data nodes"``,
            ``"database algorithm slots"``, ``"kind"``; empty when the subject
            is one value, like the default data source).
        old: The old value, as shown to people.
        new: The new value, as shown to people.
    """

    subject: str
    table: str | None
    aspect: str
    old: str
    new: str

    def __str__(self) -> str:
        aspect = f"{self.aspect}: " if self.aspect else ""
        return f"{self.subject}: {aspect}{self.old} -> {self.new}"


@dataclass(slots=True)
class _Subject:
    label: str
    table: str | None
    aspects: dict[str, Any] = field(default_factory=dict)
    may_vanish: bool = False  # gone without moving anything (an unused data source or hint algorithm)


def placement_changes(old: ShardingConfig, new: ShardingConfig) -> tuple[PlacementChange, ...]:
    """Every placement difference from ``old`` to ``new`` (empty: nothing moves).

    Args:
        old: The version serving now.
        new: The candidate version.

    Returns:
        The changes, tables first in ``old``'s order.
    """
    before, after = _subjects(old), _subjects(new)
    changes: list[PlacementChange] = []
    for key, was in before.items():
        now = after.get(key)
        if now is None and was.may_vanish:
            continue
        theirs = now.aspects if now is not None else {}
        if "kind" in was.aspects and was.aspects["kind"] != theirs.get("kind"):
            new_kind = _show(theirs["kind"]) if "kind" in theirs else "(not configured)"
            changes.append(PlacementChange(was.label, was.table, "kind", _show(was.aspects["kind"]), new_kind))
            continue  # every other aspect differs too; the kind says it all
        for aspect in dict.fromkeys([*was.aspects, *theirs]):
            a, b = was.aspects.get(aspect, _UNSET), theirs.get(aspect, _UNSET)
            if a != b:
                changes.append(PlacementChange(was.label, was.table, aspect, _show(a), _show(b)))
    return tuple(changes)


def check_placement(old: ShardingConfig, new: ShardingConfig, origin: str) -> None:
    """Refuse ``new`` if it would move data that ``old`` places.

    Args:
        old: The version serving now.
        new: The candidate version.
        origin: Names the candidate in the message (file path, URL).

    Raises:
        PlacementChangeError: naming each table and what moved (old -> new).
    """
    changes = placement_changes(old, new)
    if not changes:
        return
    lines = [
        f"configuration {origin} changes where data lives, which a hot reload never does "
        f"({len(changes)} change{'' if len(changes) == 1 else 's'}):"
    ]
    lines += [f"  - {c}" for c in changes]
    lines.append(
        "  a reload may change runtime settings, pools, replicas and weights; move data with a "
        "migration step, which publishes the new placement with "
        "ConfigHolder.publish(config, allow_placement_change=True) once the rows are moved"
    )
    first_table = next((c.table for c in changes if c.table is not None), None)
    raise PlacementChangeError("\n".join(lines), origin=origin, changes=changes, table=first_table)


def check_reload_placement(serving: ShardingConfig, new: ShardingConfig, origin: str) -> bool:
    """:func:`check_placement` for a reload, with the one announced exception.

    A version starting a cut-over (a ``cutover:`` block, every bucket normal, after a
    version placing the table on the legacy table the block names) and the one
    ending it there are accepted too: with every bucket normal the router sends
    the table's statements to the legacy table, where the previous version did.

    A serving version carrying a ``migration:`` block in phase ``cutover`` announced
    its target: a new version placing data exactly as that target does (the
    cutover's last step) is accepted and logged at WARNING naming the migration.
    Only from ``cutover``: before it the new location may not have caught up, and
    in ``finish`` the block's target names the placement the rows left. Anything
    else that moves data is refused as :func:`check_placement` does.

    Returns:
        ``True`` when ``new`` changes placement as the serving migration announced.

    Raises:
        PlacementChangeError: ``new`` moves data otherwise.
    """
    started = _cutover_bracket(serving, new)
    if started is not None:
        log.warning("configuration %s %s cut-over %r: table %r moves between its legacy table and its shards "
                    "with every bucket on the legacy table", origin, *started)
        return True
    migration = serving.migration
    if migration is not None and migration.phase == Phase.CUTOVER and not placement_changes(migration.target, new):
        changes = placement_changes(serving, new)
        if changes:
            log.warning(
                "configuration %s takes the placement migration %r announced (%d change%s):\n%s",
                origin, migration.name, len(changes), "" if len(changes) == 1 else "s",
                "\n".join(f"  - {c}" for c in changes),
            )  # fmt: skip
            return True
    check_placement(serving, new, origin)
    return False


def _cutover_bracket(serving: ShardingConfig, new: ShardingConfig) -> tuple[str, str, str] | None:
    """``(starts / ends, name, table)`` when ``new`` starts or ends an all-normal cut-over (see above)."""
    for before, after, how in ((serving, new, "starts"), (new, serving, "ends")):
        cut = after.cutover
        if cut is None or before.cutover is not None or cut.paused or any(s.value != "normal" for s in cut.states):
            continue
        changes = placement_changes(before, after)
        legacy_source = f"data source {cut.legacy_name!r}"
        if all((c.table or "").lower() == cut.table.lower() or c.subject == legacy_source for c in changes) \
                and _on_legacy(before, cut.table, cut.legacy_table, cut.legacy.primary):
            return how, cut.name, cut.table
    return None


def _on_legacy(config: ShardingConfig, table: str, legacy_table: str, legacy: Any) -> bool:
    """Does ``config`` place ``table`` whole on the database ``legacy`` names, as ``legacy_table``?"""
    single = config.single_table(table)
    sharded = config.table(table)
    if single is not None:
        source, physical = single.data_source, single.name
    elif sharded is not None and len(sharded.data_nodes) == 1:
        source, physical = sharded.data_nodes[0].data_source, sharded.data_nodes[0].table
    else:
        return False
    ds = config.data_sources.get(source)
    if ds is None or physical.lower() != legacy_table.lower():
        return False
    ep = ds.primary
    return (ep.dialect, ep.host, ep.port, ep.database) == (legacy.dialect, legacy.host, legacy.port, legacy.database)


# -- what each version places ---------------------------------------------------------


def _subjects(config: ShardingConfig) -> dict[str, _Subject]:
    out: dict[str, _Subject] = {}
    referenced: set[str] = set()
    for table in config.tables.values():
        out[f"table:{table.name.lower()}"] = _sharded(config, table)
        for strategy in (table.database_strategy, table.table_strategy):
            if strategy.algorithm is not None:
                referenced.add(strategy.algorithm.name)
    every_source = tuple(sorted(config.data_sources))
    for name in config.broadcast_tables:
        out[f"table:{name.lower()}"] = _Subject(
            f"table {name!r}", name, {"kind": "broadcast", "data sources": every_source}
        )
    for single in config.single_tables.values():
        out[f"table:{single.name.lower()}"] = _Subject(
            f"table {single.name!r}", single.name, {"kind": "single", "data source": single.data_source}
        )
    if config.default_data_source is not None:
        out["default"] = _Subject("default data source", None, {"": config.default_data_source})
    if config.single_patterns:
        out["patterns"] = _Subject("single table patterns", None, {"": config.single_patterns})
    for ds in config.data_sources.values():
        out[f"ds:{ds.name}"] = _Subject(
            f"data source {ds.name!r}",
            None,
            {"database": f"{ds.primary.dialect} {ds.primary.database}"},
            may_vanish=True,
        )
    # Algorithms no table names are reached by hints (``@shard_database=name``).
    for spec in config.algorithms.values():
        if spec.name not in referenced:
            # Dropping one makes such hints fail loudly; it moves nothing.
            out[f"algorithm:{spec.name}"] = _Subject(
                f"sharding algorithm {spec.name!r}", None, {"type": spec.type, "props": thaw(spec.props)}, True
            )
    return out


def _sharded(config: ShardingConfig, table: ShardedTable) -> _Subject:
    aspects: dict[str, Any] = {"kind": "sharded", "data nodes": tuple(str(n) for n in table.data_nodes)}
    _strategy(aspects, "database", table.database_strategy)
    _strategy(aspects, "table", table.table_strategy)
    if table.auto:
        aspects["auto table"] = True
    key = table.key_generation
    if key is not None and key.generator.type.upper() == "GENE":
        gen = key.generator
        aspects["gene key"] = f"{key.column} carries {gen.gene_bits} slot bits of {gen.shard_column}"
    group = config.binding_group_of(table.name)
    if group is not None and group.tables[0].lower() != table.name.lower():
        aspects["routed through"] = group.tables[0].lower()
    return _Subject(f"table {table.name!r}", table.name, aspects)


def _strategy(aspects: dict[str, Any], level: str, strategy: Strategy) -> None:
    aspects[f"{level} strategy"] = strategy.kind.value
    if strategy.columns:
        aspects[f"{level} sharding columns"] = tuple(c.lower() for c in strategy.columns)
    spec = strategy.algorithm
    if spec is None:
        return
    aspects[f"{level} algorithm"] = spec.type.upper()
    for prop, value in spec.props.items():
        aspects[f"{level} algorithm {prop}"] = thaw(value)


def _show(value: Any) -> str:
    if value is _UNSET or value is None:
        return "(not set)"
    if isinstance(value, Mapping):
        text = "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    elif isinstance(value, (list, tuple)):
        items = [_show(v) for v in value]
        if len(items) > _SHOWN_ITEMS:  # the ends and the count say enough; the attributes keep all
            items = [*items[:3], "...", *items[-2:]]
            text = "[" + ", ".join(items) + f"] ({len(value)})"
        else:
            text = "[" + ", ".join(items) + "]"
    else:
        text = str(value)
    if len(text) > _SHOWN_CHARS:
        text = text[: _SHOWN_CHARS - 3] + "..."
    return text
