"""Which slots of which tables a new configuration moves between data sources, and what else it copies.

A table a slot migration can move is sharded with a SLOTS or GENE database
strategy in both versions (same columns, slot count and table strategy, the
same number of physical tables per data source): each slot is owned by one
data source in each version, read from the compiled slot maps
(:class:`ddm_core.slots.SlotMap`), and a slot whose owner differs moves with
all its rows (the table strategy keeps each row's table index). Broadcast
tables are copied whole to data sources they are not on yet. Any other
placement change is refused: it is no slot move.

The facts of two configurations alone, no database: the migration planner
(:mod:`ddm_core.migrate.plan`) adds rows, bytes and time, and a configuration
version's ``migration:`` block (:mod:`ddm_core.metadata.migration`) is checked
and routed with them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddm_core.algorithms import TargetSet
from ddm_core.algorithms.slot_based import GeneAlgorithm, SlotsAlgorithm
from ddm_core.errors import MigrationError
from ddm_core.metadata.model import ShardedTable, ShardingConfig, Strategy
from ddm_core.metadata.placement import placement_changes
from ddm_core.slots import SlotMap

__all__ = ["SlotMove", "TablePlan", "BroadcastCopy", "slot_owners", "slot_moves", "slot_sharder", "sharder_bits"]


@dataclass(frozen=True, slots=True)
class SlotMove:
    """One slot of one table changing data source."""

    slot: int
    source: str
    target: str
    rows: int | None = None
    bytes: int | None = None


@dataclass(frozen=True, slots=True)
class TablePlan:
    """The slot moves of one logic table.

    Attributes:
        table: The logic table.
        column: Its database sharding column.
        slot_bits: log2 of its slot count.
        moves: Each moving slot, in slot order.
        fewest_moves: How many slots the smallest resize to the new number of data
            sources would move (``SlotMap.moved_to``): more moves than that is
            allowed, and worth a look.
        counted: ``"exact"``, ``"estimate"`` or ``"none"`` (rows not looked at).
    """

    table: str
    column: str
    slot_bits: int
    moves: tuple[SlotMove, ...]
    fewest_moves: int
    counted: str = "none"

    @property
    def rows(self) -> int:
        return sum(m.rows or 0 for m in self.moves)

    @property
    def bytes(self) -> int:
        return sum(m.bytes or 0 for m in self.moves)

    def runs(self) -> list[tuple[int, int, str, str, int, int]]:
        """Consecutive slots with the same source and target: ``(first, last, source, target, rows, bytes)``."""
        out: list[tuple[int, int, str, str, int, int]] = []
        for m in self.moves:
            if out and out[-1][1] == m.slot - 1 and out[-1][2:4] == (m.source, m.target):
                first, _, s, t, r, b = out[-1]
                out[-1] = (first, m.slot, s, t, r + (m.rows or 0), b + (m.bytes or 0))
            else:
                out.append((m.slot, m.slot, m.source, m.target, m.rows or 0, m.bytes or 0))
        return out


@dataclass(frozen=True, slots=True)
class BroadcastCopy:
    """A broadcast table copied whole from ``source`` to data sources that lack it."""

    table: str
    source: str
    targets: tuple[str, ...]
    rows: int = 0
    bytes: int = 0


# -- slot owners -------------------------------------------------------------------------------


def slot_sharder(table: ShardedTable, which: str) -> SlotsAlgorithm | GeneAlgorithm:
    sharder = table.database_strategy.sharder
    if not isinstance(sharder, (SlotsAlgorithm, GeneAlgorithm)):
        kind = table.database_strategy.algorithm.type if table.database_strategy.algorithm else "none"
        raise MigrationError(
            f"table {table.name!r} in the {which} configuration shards databases by {kind}, not by SLOTS or "
            "GENE: a migration moves slots between data sources",
            table=table.name,
        )
    return sharder


def sharder_bits(sharder: SlotsAlgorithm | GeneAlgorithm) -> int:
    return sharder.slot_bits if isinstance(sharder, SlotsAlgorithm) else sharder.gene_bits


def slot_owners(table: ShardedTable, which: str = "") -> tuple[SlotMap, tuple[str, ...]]:
    """The compiled slot map of a table's database strategy and the data source of each node."""
    sharder = slot_sharder(table, which)
    ts = TargetSet(table.data_sources)
    lut = sharder.layout.slot_lut(ts, sharder.label, sharder.name)
    if min(lut) < 0:
        raise MigrationError(f"table {table.name!r}: its slot layout names data sources it has no nodes on",
                             table=table.name)
    return SlotMap(np.asarray(lut, dtype=np.int32), len(ts)), tuple(ts.names)


def _same_strategy(a: Strategy, b: Strategy) -> bool:
    if a.kind != b.kind or tuple(c.lower() for c in a.columns) != tuple(c.lower() for c in b.columns):
        return False
    if a.algorithm is None or b.algorithm is None:
        return a.algorithm is b.algorithm
    return a.algorithm.type.upper() == b.algorithm.type.upper() and dict(a.algorithm.props) == dict(b.algorithm.props)


def _table_moves(old: ShardedTable, new: ShardedTable) -> TablePlan:
    old_sharder, new_sharder = slot_sharder(old, "old"), slot_sharder(new, "new")
    problems = []
    if type(old_sharder) is not type(new_sharder) or sharder_bits(old_sharder) != sharder_bits(new_sharder):
        problems.append(f"its algorithm changes from {old_sharder.describe()} to {new_sharder.describe()}")
    if tuple(old.database_strategy.columns) != tuple(new.database_strategy.columns):
        problems.append(f"its database sharding columns change from {old.database_strategy.columns} "
                        f"to {new.database_strategy.columns}")
    if not _same_strategy(old.table_strategy, new.table_strategy):
        problems.append("its table strategy changes (a slot migration moves rows between data sources only)")
    counts_old = {len(v) for v in old.tables_by_source.values()}
    counts_new = {len(v) for v in new.tables_by_source.values()}
    if len(counts_old | counts_new) > 1:
        problems.append("its data sources do not all hold the same number of physical tables")
    if problems:
        raise MigrationError(f"table {old.name!r} cannot be moved by slots: " + "; ".join(problems), table=old.name)
    old_map, old_names = slot_owners(old, "old")
    new_map, new_names = slot_owners(new, "new")
    before = np.asarray(old_names, dtype=object)[np.asarray(old_map.nodes)]
    after = np.asarray(new_names, dtype=object)[np.asarray(new_map.nodes)]
    moving = np.flatnonzero(before != after)
    grow = len(set(old_names) | set(new_names))
    fewest = int(np.asarray(old_map.moved_to(grow)[1]).size) if grow >= old_map.n_nodes else int(moving.size)
    moves = tuple(SlotMove(int(s), str(before[s]), str(after[s])) for s in moving)
    return TablePlan(old.name, old.database_strategy.column or "", sharder_bits(old_sharder), moves, fewest)


def _slot_tables(plan: list[TablePlan]) -> set[str]:
    return {t.table.lower() for t in plan}


def _check_other_changes(old: ShardingConfig, new: ShardingConfig, moved: set[str], copied: set[str]) -> None:
    others = [
        c for c in placement_changes(old, new)
        if not (c.table and c.table.lower() in moved)
        and not (c.table and c.table.lower() in copied and c.aspect == "data sources")
    ]
    if others:
        raise MigrationError(
            "the new configuration changes placement in ways a slot migration does not make:\n"
            + "\n".join(f"  - {c}" for c in others),
            changes=tuple(others),
        )


def _broadcasts(old: ShardingConfig, new: ShardingConfig) -> list[BroadcastCopy]:
    added = tuple(ds for ds in new.data_sources if ds not in old.data_sources)
    if not added:
        return []
    source = old.default_data_source or next(iter(old.data_sources))
    return [BroadcastCopy(name, source, added) for name in old.broadcast_tables if name in new.broadcast_tables]


def slot_moves(old: ShardingConfig, new: ShardingConfig) -> tuple[list[TablePlan], list[BroadcastCopy]]:
    """The slot moves per table and the broadcast copies from ``old`` to ``new`` (rows not counted).

    Raises:
        MigrationError: a table cannot be moved by slots, or ``new`` changes placement in another way.
    """
    changed = {c.table.lower() for c in placement_changes(old, new) if c.table}
    tables: list[TablePlan] = []
    for table in old.tables.values():
        if table.name.lower() not in changed:
            continue
        other = new.table(table.name)
        if other is None:
            raise MigrationError(f"table {table.name!r} is not in the new configuration", table=table.name)
        plan = _table_moves(table, other)
        if plan.moves:
            tables.append(plan)
    broadcasts = _broadcasts(old, new)
    # A broadcast table leaving data sources moves nothing: the others hold every row.
    shrunk = {name.lower() for name in new.broadcast_tables if name in old.broadcast_tables}
    _check_other_changes(old, new, _slot_tables(tables), {b.table.lower() for b in broadcasts} | shrunk)
    return tables, broadcasts
