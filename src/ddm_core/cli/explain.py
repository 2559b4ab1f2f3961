"""Where one shard-key value lives: hash, slot, data source, physical table, and which algorithm decided.

The strategies are called directly, level by level, the way the router does
for ``WHERE <column> = value``: the database strategy picks among the table's
data sources, then the table strategy among that data source's physical
tables (auto tables: among every physical table, the data source following).
A level that the value cannot decide (another column, a hint strategy, a
complex strategy needing more columns) is reported as such, with every target
it leaves open.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ddm_core.algorithms import TargetSet
from ddm_core.cli.describe import short_nodes
from ddm_core.errors import DdmError, ShardKeyNotFoundError, ShardValueError, UnsupportedSQLError
from ddm_core.hashing import hash64, slot_of
from ddm_core.ids import gene_of
from ddm_core.metadata.model import ShardedTable, ShardingConfig, Strategy, StrategyKind, TableKind
from ddm_core.route.shards.targets import gene_route

__all__ = ["LevelResult", "KeyExplanation", "explain_key", "parse_value", "explanation_lines"]

_INT = re.compile(r"[+-]?[0-9]+")


def parse_value(text: str, force_str: bool = False) -> int | str:
    """``"10086"`` → ``10086``; anything else (or ``force_str``) stays a string."""
    if not force_str and _INT.fullmatch(text.strip()):
        return int(text.strip())
    return text


@dataclass
class LevelResult:
    """What one level (database or table) decided for the value."""

    level: str
    strategy: Strategy
    targets: tuple[str, ...]  # what was chosen (all candidates when undecided)
    decided: bool
    note: str = ""
    slot: int | None = None
    slot_bits: int | None = None
    slot_source: str = ""


@dataclass
class KeyExplanation:
    table: str
    column: str
    value: Any
    hash: int | None
    hash_error: str
    levels: list[LevelResult] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    gene: str = ""
    via: str = ""  # the binding group's first table, when routing went through it


def explain_key(config: ShardingConfig, table_name: str, value: Any, column: str | None = None) -> KeyExplanation:
    """Explain where ``value`` of ``column`` (default: the table's first sharding column) routes.

    Raises:
        UnsupportedSQLError: the table is unknown or not sharded, or the column
            is not one of its sharding columns.
        DdmError: the value cannot be routed (a bad type, no target answers).
    """
    table = config.table(table_name)
    if table is None:
        kind = config.kind_of(table_name)
        if kind is TableKind.BROADCAST:
            where = ", ".join(config.data_sources)
            raise UnsupportedSQLError(
                f"{table_name!r} is a broadcast table: every data source ({where}) holds all its rows; "
                "no shard key decides anything",
                table=table_name,
            )
        if kind is TableKind.SINGLE:
            single = config.single_table(table_name)
            assert single is not None
            raise UnsupportedSQLError(
                f"{table_name!r} is a single table in data source {single.data_source!r}; "
                "no shard key decides anything",
                table=table_name,
            )
        raise UnsupportedSQLError(
            f"table {table_name!r} is not in the configuration (sharded tables: {', '.join(config.tables) or 'none'})",
            table=table_name,
        )
    columns = _key_columns(table)
    if column is None:
        if not columns:
            raise UnsupportedSQLError(
                f"table {table.name!r} has no sharding column: its strategies are "
                f"{table.database_strategy.kind.value} / {table.table_strategy.kind.value} (a hint decides)",
                table=table.name,
            )
        column = columns[0]
    elif column.lower() not in (c.lower() for c in columns):
        raise UnsupportedSQLError(
            f"{column!r} is not a sharding column of {table.name!r} (its columns: {', '.join(columns) or 'none'})",
            table=table.name,
            column=column,
        )
    bound = _bound_explanation(config, table, value, column)
    if bound is not None:
        return bound
    try:
        hashed: int | None = int(hash64(value))
        hash_error = ""
    except DdmError as exc:
        hashed, hash_error = None, exc.message
    out = KeyExplanation(table.name, column, value, hashed, hash_error)

    if table.auto:
        out.levels.append(
            LevelResult("database", table.database_strategy, table.data_sources, False,
                        "auto table: the data source follows from the physical table")
        )
        level = _level("table", table.table_strategy, table.all_tables, column, value)
        out.levels.append(level)
        out.nodes = [str(table.node_of_table[t]) for t in level.targets if t in table.node_of_table]
    else:
        db = _level("database", table.database_strategy, table.data_sources, column, value, gene_route(table))
        out.levels.append(db)
        nodes: list[str] = []
        table_levels: list[LevelResult] = []
        for ds in db.targets:
            level = _level("table", table.table_strategy, table.tables_by_source[ds], column, value)
            table_levels.append(level)
            nodes.extend(f"{ds}.{t}" for t in level.targets)
        out.levels.append(_merge_table_levels(table_levels))
        out.nodes = nodes
    out.gene = _gene_note(table, column, value)
    return out


def _bound_explanation(config: ShardingConfig, table: ShardedTable, value: Any, column: str) -> KeyExplanation | None:
    """A bound table routes through its group's first table and takes the node with the same index (as the router does)."""
    group = config.binding_group_of(table.name)
    primary = config.table(group.tables[0]) if group is not None else None
    if primary is None or primary.name.lower() == table.name.lower():
        return None
    if column.lower() not in (c.lower() for c in _key_columns(primary)) or primary.shard_count != table.shard_count:
        return None
    out = explain_key(config, primary.name, value, column)
    index = {str(node): i for i, node in enumerate(primary.data_nodes)}
    out.nodes = [str(table.data_nodes[index[n]]) for n in out.nodes]
    out.table, out.via = table.name, primary.name
    out.gene = _gene_note(table, column, value)
    return out


def _key_columns(table: ShardedTable) -> list[str]:
    cols = list(table.sharding_columns)
    gene = gene_route(table)
    if gene is not None and gene[0] not in (c.lower() for c in cols):
        assert table.key_generation is not None
        cols.append(table.key_generation.column)  # ids carry the slot the database strategy hashes to
    return cols


def _level(
    level: str, strategy: Strategy, targets: Sequence[str], column: str, value: Any,
    gene: tuple[str, int] | None = None,
) -> LevelResult:
    targets = tuple(targets)
    if strategy.kind is StrategyKind.NONE:
        note = "not sharded at this level" + (f": {targets[0]}" if len(targets) == 1 else ": every target")
        return LevelResult(level, strategy, targets, len(targets) == 1, note)
    if strategy.kind is StrategyKind.HINT:
        return LevelResult(level, strategy, targets, False, "a hint decides (ddm_core.hint(...)); every target shown")
    sharder = strategy.sharder
    own = [c for c in strategy.columns if c.lower() == column.lower()]
    if not own:
        by_gene = _gene_level(level, strategy, targets, column, value, gene)
        if by_gene is not None:
            return by_gene
        return LevelResult(
            level, strategy, targets, False,
            f"shards by {', '.join(strategy.columns)}, not {column}: every target of this level",
        )
    try:
        chosen = tuple(sharder.precise(TargetSet(targets), {own[0]: value}))
    except ShardKeyNotFoundError:
        return LevelResult(
            level, strategy, targets, False,
            f"{strategy.kind.value} strategy needs {', '.join(strategy.columns)}; {column} alone cannot decide",
        )
    result = LevelResult(level, strategy, chosen, True)
    if hasattr(sharder, "slot_bits") and hasattr(sharder, "slot"):  # SLOTS
        result.slot = int(sharder.slot(value, own[0]))
        result.slot_bits = int(sharder.slot_bits)
        result.slot_source = "high bits of the hash"
    elif hasattr(sharder, "gene_bits") and hasattr(sharder, "slot"):  # GENE
        result.slot = int(sharder.slot(own[0], value))
        result.slot_bits = int(sharder.gene_bits)
        keyed = own[0].lower() in getattr(sharder, "key_columns", ())
        result.slot_source = "high bits of the hash" if keyed else "the id's low gene bits"
    return result


def _gene_level(
    level: str, strategy: Strategy, targets: tuple[str, ...], column: str, value: Any, gene: tuple[str, int] | None
) -> LevelResult | None:
    """A gene id column on the SLOTS database level: the id's low gene bits are the slot (the router's gene path)."""
    if level != "database" or gene is None or gene[0] != column.lower():
        return None
    bits = gene[1]
    if type(value) is not int:
        raise ShardValueError(f"{column} is a gene id and must be an integer, not {value!r}", column=column, value=value)
    slot = int(gene_of(value, bits))
    chosen = tuple(strategy.sharder.target_of_slot(TargetSet(targets), slot))
    return LevelResult(
        level, strategy, chosen, True, f"{column} is a gene id: no hash, its gene is the slot",
        slot, bits, "id's low gene bits",
    )


def _merge_table_levels(levels: list[LevelResult]) -> LevelResult:
    if len(levels) == 1:
        return levels[0]
    first = levels[0]
    targets = tuple(t for lv in levels for t in lv.targets)
    decided = all(lv.decided for lv in levels)
    note = first.note or ("decided in each data source" if decided else "")
    return LevelResult(first.level, first.strategy, targets, decided, note, first.slot, first.slot_bits, first.slot_source)


def _gene_note(table: ShardedTable, column: str, value: Any) -> str:
    kg = table.key_generation
    if kg is None or kg.generator.type.upper() != "GENE" or kg.generator.gene_bits is None:
        return ""
    bits = kg.generator.gene_bits
    if (kg.generator.shard_column or "").lower() != column.lower():
        return ""
    try:
        gene = int(slot_of(value, bits))
    except DdmError:
        return ""
    return (
        f"{kg.column} values generated for this {column} ({kg.generator.name!r}, GENE) end in gene "
        f"{gene} (low {bits} bits: {gene:0{bits}b}), so WHERE {kg.column} = ? finds the same data source"
    )


def explanation_lines(ex: KeyExplanation) -> list[str]:
    """The explanation as text."""
    lines = [f"{ex.table}: {ex.column} = {ex.value!r}"]
    if ex.via:
        lines.append(
            f"  bound to  {ex.via}: routed by {ex.via}'s strategies below, then the node with the same index is taken"
        )
    if ex.hash is not None:
        lines.append(f"  hash64    {ex.hash} (0x{ex.hash:016x}; xxh3_64 of the canonical {_encoding(ex.value)})")
    else:
        lines.append(f"  hash64    n/a: {ex.hash_error}")
    for level in ex.levels:
        strategy = level.strategy
        if strategy.algorithm is not None:
            alg = strategy.sharder
            algo = f"{strategy.algorithm.type} {strategy.algorithm.name!r} = {alg.describe()}"
            head = f"{strategy.kind.value} on {', '.join(strategy.columns) or '(hint)'} via {algo}"
        else:
            head = "none"
        lines.append(f"  {level.level:<9} {head}")
        if level.slot is not None and level.slot_bits is not None:
            lines.append(
                f"            slot {level.slot} of {1 << level.slot_bits} (slot bits {level.slot_bits}: "
                f"{level.slot:0{level.slot_bits}b}, the {level.slot_source})"
            )
        chosen = short_nodes(level.targets)
        if level.decided:
            lines.append(f"            → {chosen}" + (f"  ({level.note})" if level.note else ""))
        else:
            lines.append(f"            → {level.note}: {chosen}")
    if len(ex.nodes) == 1:
        lines.append(f"  node      {ex.nodes[0]}")
    else:
        lines.append(f"  nodes     {short_nodes(ex.nodes)} — the value alone does not pick one node")
    if ex.gene:
        lines.append(f"  gene      {ex.gene}")
    return lines


def _encoding(value: Any) -> str:
    if isinstance(value, int):
        return "signed 64-bit little-endian int" if value < 1 << 63 else "unsigned 64-bit little-endian int"
    if isinstance(value, str):
        return "UTF-8 bytes"
    return "bytes"
