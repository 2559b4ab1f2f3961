"""Where a cut-over's rows go: legacy rows onto the shard nodes, shard rows back, by bucket.

The copy and the forward replay read the one legacy table and place each row
on the node the sharded table's own strategies give it (:func:`route_rows`,
the router's batch path for multi-row INSERTs), so a row lands exactly where
the router will look for it. The reverse sync reads each shard node and
writes to the legacy table. Both sides compare by bucket: the bucket of a row
is its slot's group (:func:`ddm_core.metadata.cutover.bucket_lookup`), the same
function the router uses to pick a bucket's state.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ddm_core.algorithms.slot_based import GeneAlgorithm, SlotsAlgorithm
from ddm_core.errors import CutoverError
from ddm_core.metadata.cutover import CutoverRouting, bucket_lookup, bucket_slots
from ddm_core.metadata.model import ShardedTable, ShardingConfig
from ddm_core.migrate.backfill import Scan, Target
from ddm_core.migrate.checker import SlotFilter
from ddm_core.migrate.plan import slots_of_values
from ddm_core.route.shards.targets import TableRouter, route_rows

__all__ = ["NodePlacement", "Buckets", "forward_scan", "reverse_scans", "sharded_table"]


def sharded_table(config: ShardingConfig, routing: CutoverRouting) -> ShardedTable:
    """The cut-over table in the sharded configuration; refuses strategies a row's one column cannot place."""
    table = config.table(routing.table)
    if table is None:
        raise CutoverError(f"table {routing.table!r} is not a sharded table of the configuration",
                           table=routing.table, cutover=routing.name)
    columns = {c.lower() for c in (*table.database_strategy.columns, *table.table_strategy.columns)}
    if len(columns) != 1:
        raise CutoverError(
            f"table {routing.table!r} shards by {', '.join(sorted(columns)) or 'no column'}; a cut-over places "
            "each row by one shard column (the database and table strategies must read the same one)",
            table=routing.table, cutover=routing.name)
    return table


class NodePlacement:
    """A legacy row's target: the index of its node in the sharded table's ``data_nodes``."""

    def __init__(self, table: ShardedTable) -> None:
        self.router = TableRouter(table)
        self.column = (table.database_strategy.column or "").lower()
        self.table = table

    def assign(self, values: Sequence[Any]) -> np.ndarray:
        if not len(values):
            return np.zeros(0, dtype=np.int64)
        return np.asarray(route_rows(self.router, {self.column: list(values)}, len(values), None), dtype=np.int64)

    def filter(self, target: int) -> "NodeFilter":
        return NodeFilter(self, target)


class NodeFilter:
    """Keeps the rows whose node is ``node`` (the checker's view of one shard node in the legacy table)."""

    def __init__(self, placement: NodePlacement, node: int) -> None:
        self.placement, self.node = placement, node
        self.column = placement.column

    def keep(self, values: Sequence[Any]) -> np.ndarray:
        return np.asarray(self.placement.assign(values) == self.node, dtype=bool)


class Buckets:
    """The bucket of shard-key values, on the compiled batch path (slots, then the slot → bucket array)."""

    def __init__(self, table: ShardedTable, buckets: int) -> None:
        sharder = table.database_strategy.sharder
        assert isinstance(sharder, (SlotsAlgorithm, GeneAlgorithm))
        self.table, self.sharder = table, sharder
        self.column = table.database_strategy.column or ""
        bits = sharder.slot_bits if isinstance(sharder, SlotsAlgorithm) else sharder.gene_bits
        self.slot_count, self.count = 1 << bits, buckets
        self.lookup = bucket_lookup(self.slot_count, buckets)

    def of(self, values: Sequence[Any]) -> np.ndarray:
        """The bucket of each value."""
        if not len(values):
            return np.zeros(0, dtype=np.int32)
        return np.asarray(self.lookup[slots_of_values(self.sharder, self.column, values)])

    def filter(self, buckets: Sequence[int]) -> SlotFilter:
        """Keeps the rows of ``buckets`` (a checker filter, usable on either side)."""
        slots = [s for b in buckets for s in bucket_slots(self.slot_count, self.count, b)]
        return SlotFilter.of_table(self.table, slots)


def forward_scan(table: ShardedTable, routing: CutoverRouting) -> Scan:
    """The legacy table read in key order, every row sent to its node."""
    targets = tuple(Target(n.data_source, n.table, None) for n in table.data_nodes)
    return Scan(table.name, routing.legacy_name, routing.legacy_table, targets)


def reverse_scans(table: ShardedTable, routing: CutoverRouting) -> list[Scan]:
    """Each shard node's rows sent back to the legacy table."""
    back = (Target(routing.legacy_name, routing.legacy_table, None),)
    return [Scan(table.name, n.data_source, n.table, back) for n in table.data_nodes]
