"""The plan of a migration: which slots move where, how many rows and bytes, how long it takes.

``plan_migration(old, new)`` compares two configurations table by table. A
table a migration can move is sharded with a SLOTS or GENE database strategy
in both (same columns, slot count and table strategy): each slot is owned by
one data source in each version, read from the compiled slot maps
(:class:`ddm_core.slots.SlotMap`), and a slot whose owner differs moves, with
all its rows, from the old owner's physical tables to the new owner's
(the table strategy keeps each row's table index). Any other placement change
(a single table moved, an algorithm changed) is refused: it is no slot move.
Broadcast tables get copied whole to data sources they are not on yet.

Rows per slot are counted (``count="exact"``) by reading the shard-key column
of every losing physical table in primary-key order and hashing it in batches
on the compiled path (:func:`ddm_core.hashing.slots_of`), or estimated
(``count="estimate"``) from ``information_schema`` row counts spread evenly over
the slots each data source owns. Bytes per slot are rows times the table's
average row size. The copy rate is measured by copying a sample of real rows
into a temporary table on a target data source (:func:`measure_copy_rate`), or
given.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from ddm_core.algorithms.slot_based import GeneAlgorithm, SlotsAlgorithm
from ddm_core.algorithms import TargetSet
from ddm_core.errors import MigrationError
from ddm_core.hashing import slots_of
from ddm_core.metadata.model import ShardedTable, ShardingConfig, Strategy
from ddm_core.metadata.placement import placement_changes
from ddm_core.migrate.connections import Connections
from ddm_core.migrate.tables import (
    keyset_chunks,
    primary_key,
    quote,
    show_create_table,
    table_columns,
    table_stats,
)
from ddm_core.metadata.slot_moves import (
    BroadcastCopy,
    SlotMove,
    TablePlan,
    sharder_bits,
    slot_moves,
    slot_owners,
    slot_sharder,
)

__all__ = [
    "SlotMove",
    "TablePlan",
    "BroadcastCopy",
    "MigrationPlan",
    "slot_owners",
    "plan_migration",
    "count_rows",
    "slot_counts",
    "measure_copy_rate",
    "slots_of_values",
    "COUNT_BATCH",
]

#: Shard-key values read per query when counting rows per slot.
COUNT_BATCH = 10_000
#: Rows copied to measure the copy rate.
SAMPLE_ROWS = 5_000


@dataclass(frozen=True, slots=True)
class MigrationPlan:
    """Everything a migration from ``old`` to ``new`` moves.

    Attributes:
        tables: Slot moves per logic table (tables that move nothing are left out).
        broadcasts: Broadcast tables to copy to new data sources.
        new_data_sources: Data sources of ``new`` that ``old`` does not have.
        rate: Rows per second used for the estimate (``None``: unknown).
        rate_measured: Whether ``rate`` was measured (else given).
    """

    tables: tuple[TablePlan, ...]
    broadcasts: tuple[BroadcastCopy, ...] = ()
    new_data_sources: tuple[str, ...] = ()
    rate: float | None = None
    rate_measured: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables) + sum(b.rows * len(b.targets) for b in self.broadcasts)

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tables) + sum(b.bytes * len(b.targets) for b in self.broadcasts)

    @property
    def seconds(self) -> float | None:
        """Estimated copy time at :attr:`rate` (``None`` when the rate is unknown)."""
        return self.rows / self.rate if self.rate else None

    def moving_slots(self, table: str) -> dict[int, tuple[str, str]]:
        """``slot -> (source, target)`` for one logic table."""
        for t in self.tables:
            if t.table.lower() == table.lower():
                return {m.slot: (m.source, m.target) for m in t.moves}
        return {}

    def to_json(self) -> dict[str, Any]:
        """A JSON-able description (recorded in the state table on entering prepare)."""
        return {
            "tables": [
                {"table": t.table, "column": t.column, "slot_bits": t.slot_bits, "counted": t.counted,
                 "moves": [[m.slot, m.source, m.target, m.rows, m.bytes] for m in t.moves]}
                for t in self.tables
            ],
            "broadcasts": [
                {"table": b.table, "source": b.source, "targets": list(b.targets), "rows": b.rows}
                for b in self.broadcasts
            ],
            "new_data_sources": list(self.new_data_sources),
            "rate": self.rate,
        }


# -- counting ------------------------------------------------------------------------------------


def slots_of_values(sharder: SlotsAlgorithm | GeneAlgorithm, column: str, values: Sequence[Any]) -> np.ndarray:
    """The slot of each shard-key value, on the compiled batch path where the values allow it."""
    if isinstance(sharder, GeneAlgorithm) and column.lower() not in sharder.key_columns:
        ids = np.asarray(values, dtype=np.uint64)
        return (ids & np.uint64(sharder.mask)).astype(np.int64)
    bits = sharder_bits(sharder)
    if sharder.key_type == "auto":
        if all(type(v) is int for v in values):
            arr = np.asarray(values, dtype=np.int64) if values else np.zeros(0, dtype=np.int64)
            return np.asarray(slots_of(arr, bits), dtype=np.int64)
        return np.asarray(slots_of(list(values), bits), dtype=np.int64)
    slot = sharder.slot if isinstance(sharder, SlotsAlgorithm) else (lambda v, c: sharder.slot(c, v))
    return np.asarray([slot(v, column) for v in values], dtype=np.int64)


def count_rows(
    conns: Connections, table: ShardedTable, data_source: str, *, batch: int = COUNT_BATCH
) -> np.ndarray:
    """Rows per slot of ``table``'s physical tables on ``data_source`` (an array over every slot)."""
    sharder = slot_sharder(table, "old")
    column = table.database_strategy.column or ""
    counts = np.zeros(1 << sharder_bits(sharder), dtype=np.int64)
    for physical in table.tables_by_source.get(data_source, ()):
        counts += slot_counts(conns, sharder, column, data_source, physical, batch=batch)
    return counts


def slot_counts(
    conns: Connections, sharder: SlotsAlgorithm | GeneAlgorithm, column: str, data_source: str, physical: str, *,
    batch: int = COUNT_BATCH, progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Rows per slot of one physical table, its keys and ``column`` read in key order (``progress``: rows so far)."""
    counts = np.zeros(1 << sharder_bits(sharder), dtype=np.int64)
    key = primary_key(conns, data_source, physical)
    extra = [] if column.lower() in (k.lower() for k in key) else [column]
    at = [k.lower() for k in (*key, *extra)].index(column.lower())
    for rows in keyset_chunks(conns, data_source, physical, extra, key, batch):
        counts += np.bincount(slots_of_values(sharder, column, [r[at] for r in rows]), minlength=counts.size)
        if progress is not None:
            progress(int(counts.sum()))
    return counts


def _fill_rows(conns: Connections, old: ShardingConfig, tp: TablePlan, how: str) -> TablePlan:
    table = old.table(tp.table)
    assert table is not None
    owners, names = slot_owners(table, "old")
    nodes = np.asarray(owners.nodes)
    by_source: dict[str, np.ndarray] = {}
    per_row: dict[str, float] = {}
    for ds in sorted({m.source for m in tp.moves}):
        stats = [table_stats(conns, ds, p) for p in table.tables_by_source.get(ds, ())]
        rows_est = sum(s.rows for s in stats)
        per_row[ds] = (sum(s.data_bytes for s in stats) / rows_est) if rows_est else 0.0
        if how == "exact":
            by_source[ds] = count_rows(conns, table, ds)
        else:
            owned = int(np.count_nonzero(nodes == names.index(ds)))
            by_source[ds] = np.full(nodes.size, rows_est / owned if owned else 0.0)
    moves = tuple(
        SlotMove(m.slot, m.source, m.target, int(round(by_source[m.source][m.slot])),
                 int(round(by_source[m.source][m.slot] * per_row[m.source])))
        for m in tp.moves
    )
    return TablePlan(tp.table, tp.column, tp.slot_bits, moves, tp.fewest_moves, how)


def _fill_broadcast(conns: Connections, copy: BroadcastCopy) -> BroadcastCopy:
    rows = conns.query(copy.source, f"SELECT COUNT(*) FROM {quote(conns, copy.source, copy.table)}")
    n = int(rows[0][0])
    stats = table_stats(conns, copy.source, copy.table)
    return BroadcastCopy(copy.table, copy.source, copy.targets, n, int(n * stats.bytes_per_row))


# -- copy rate ---------------------------------------------------------------------------------------


def measure_copy_rate(
    conns: Connections,
    source: str,
    table: str,
    target: str,
    *,
    sample: int = SAMPLE_ROWS,
    clock: Callable[[], float] = time.perf_counter,
) -> float | None:
    """Rows per second of reading ``table`` on ``source`` and writing it on ``target``.

    Reads up to ``sample`` rows in primary-key order and inserts them, 1000 per
    statement, into a temporary table of the same definition on ``target``
    (gone with the connection; nothing else is written). ``None`` when the
    table is empty.
    """
    probe = quote(conns, target, "ddm_copy_rate_probe")
    body = show_create_table(conns, source, table).partition("(")[2]
    key = primary_key(conns, source, table)
    columns = [c for c in table_columns(conns, source, table) if c not in key]
    names = ", ".join(quote(conns, target, c) for c in (*key, *columns))
    insert = f"INSERT INTO {probe} ({names}) VALUES ({', '.join(['%s'] * (len(key) + len(columns)))})"
    conns.query(target, f"DROP TEMPORARY TABLE IF EXISTS {probe}")
    conns.query(target, f"CREATE TEMPORARY TABLE {probe} (" + body)
    copied = 0
    try:
        started = clock()
        for rows in keyset_chunks(conns, source, table, columns, key, min(1000, sample)):
            conns.execute_many(target, insert, rows)
            copied += len(rows)
            if copied >= sample:
                break
        elapsed = clock() - started
    finally:
        conns.query(target, f"DROP TEMPORARY TABLE IF EXISTS {probe}")
    if copied == 0:
        return None
    return copied / elapsed if elapsed > 0 else float("inf")


# -- the plan ----------------------------------------------------------------------------------------


def plan_migration(
    old: ShardingConfig,
    new: ShardingConfig,
    *,
    conns: Connections | None = None,
    count: Literal["exact", "estimate", "none"] = "exact",
    rate: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> MigrationPlan:
    """Which slots of which tables move where, with rows, bytes and time when ``conns`` is given.

    Args:
        old: The configuration serving now.
        new: The configuration to migrate to.
        conns: Connections to ``old``'s data sources (``None``: no counting, no rate).
        count: How rows per slot are found (see the module docstring).
        rate: Rows per second to estimate with; ``None`` measures it (with ``conns``).
        progress: Called with a short description before each slow step.

    Raises:
        MigrationError: a table cannot be moved by slots, or the new configuration
            changes placement in another way.
    """
    tables, broadcasts = slot_moves(old, new)
    added = tuple(ds for ds in new.data_sources if ds not in old.data_sources)
    measured = False
    if conns is not None and count != "none":
        filled = []
        for tp in tables:
            if progress is not None:
                progress(f"counting rows per slot of {tp.table} ({count})")
            filled.append(_fill_rows(conns, old, tp, count))
        tables = filled
        broadcasts = [_fill_broadcast(conns, b) for b in broadcasts]
    if rate is None and conns is not None and tables:
        biggest = max(tables, key=lambda t: t.rows)
        source = biggest.moves[0].source
        biggest_table = old.table(biggest.table)
        assert biggest_table is not None
        physical = biggest_table.tables_by_source[source][0]
        if progress is not None:
            progress(f"measuring the copy rate ({physical} on {source})")
        rate = measure_copy_rate(conns, source, physical, biggest.moves[0].target)
        measured = rate is not None
    return MigrationPlan(tuple(tables), tuple(broadcasts), added, rate, measured)
