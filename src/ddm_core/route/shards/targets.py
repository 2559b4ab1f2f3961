"""From resolved shard conditions to the data nodes of one sharded table.

The database strategy picks data sources, then the table strategy picks
physical tables inside each chosen data source (the two are independent:
docs/architecture.md#independent-database-and-table-strategies). When every sharding column of both strategies has exact values,
the values are enumerated together so ``user_id IN (1, 2)`` gives exactly the
two nodes those users live on, not the cross product of their databases and
tables.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from ddm_core.algorithms import ShardingAlgorithm, TargetSet, ValueRange
from ddm_core.errors import RoutingError, ShardKeyNotFoundError
from ddm_core.ids import gene_of
from ddm_core.metadata.model import ShardedTable, Strategy, StrategyKind
from ddm_core.route.hints import Hint
from ddm_core.route.shards.conditions import ColumnValues, Conjunction, Range, resolve

__all__ = ["TableRouter", "Picked", "route_rows", "gene_route"]

#: More exact-value combinations than this are routed level by level instead.
MAX_COMBINATIONS = 4096


class _SlotTargets(Protocol):
    """An algorithm that can name the target of a slot (SLOTS): what :func:`gene_route` requires."""

    def target_of_slot(self, targets: Sequence[str], slot: int) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class Picked:
    """Node indexes (into ``table.data_nodes``, ascending) and whether that is every node.

    A join of tables that do not follow one table's node index (tables of other
    binding groups pinned to one node each, see :mod:`ddm_core.route.shards.colocation`)
    also says which table's nodes ``nodes`` are (``table``) and, per unit, its data
    source and the node index of every template slot's table (``units``; -1 for a
    slot that is not a sharded table). ``units is None``: every sharded slot follows
    ``nodes`` of the statement's primary table.
    """

    nodes: tuple[int, ...]
    full: bool
    note: str  # "" or why a condition could not narrow (range on a hash algorithm...)
    table: ShardedTable | None = None
    units: tuple[tuple[str, tuple[int, ...]], ...] | None = None


class TableRouter:
    """Routing state precomputed for one sharded table (built once per config)."""

    def __init__(self, table: ShardedTable) -> None:
        self.table = table
        self.db = table.database_strategy
        self.tb = table.table_strategy
        self.sources = TargetSet(table.data_sources)
        if table.auto:
            # Auto tables: the table strategy picks among every physical table.
            self.tables_of: Mapping[str, TargetSet] = {"": TargetSet(table.all_tables)}
        else:
            self.tables_of = {ds: TargetSet(t) for ds, t in table.tables_by_source.items()}
        self.index = {(n.data_source, n.table): i for i, n in enumerate(table.data_nodes)}
        self.auto_index = {n.table: i for i, n in enumerate(table.data_nodes)} if table.auto else {}
        self.every = tuple(range(len(table.data_nodes)))
        self.gene = gene_route(table)
        extra = (self.gene[0],) if self.gene else ()
        self.columns = frozenset(c.lower() for c in (*self.db.columns, *self.tb.columns, *extra))
        # The point fast path's per-table scalars (a TableScalars, which route.shards.fast builds on first use).
        self.point_scalars: object = None

    # -- public ------------------------------------------------------------------

    def route(
        self,
        dnf: list[Conjunction] | None,
        bound: Sequence[Any],
        hint: Hint | None,
        sources: Sequence[str] | None = None,
    ) -> Picked:
        """The nodes the conjunctions can reach (``dnf is None``: every node).

        Args:
            sources: Data sources a hint strategy already chose (``None``: the
                database strategy chooses).
        """
        if hint is not None and (hint.database is not None or hint.table is not None):
            return self._forced(hint)
        if dnf is None:
            dnf = [{}]
        if not dnf:
            return Picked((), False, "no row can match")
        found: set[int] = set()
        notes: list[str] = []
        for conj in dnf:
            resolved = {c: resolve(atoms, bound) for c, atoms in conj.items() if c in self.columns}
            if any(cv.is_empty for cv in resolved.values()):
                continue  # contradictory conjunction (a = 1 AND a = 2)
            found.update(self._conjunction(resolved, hint, sources, notes))
            if len(found) == len(self.every):
                break
        nodes = tuple(sorted(found))
        # "Full" means no usable shard condition (RouteKind.FULL): some OR branch restricts no
        # shard column, or a condition could not narrow (a range on a hash...). Values that
        # merely happen to cover every node (a long IN list) are a MULTI route.
        every = len(nodes) == len(self.every) and len(nodes) > 1
        unrestricted = every and (bool(notes) or any(not any(c in self.columns for c in conj) for conj in dnf))
        return Picked(nodes, unrestricted, "; ".join(dict.fromkeys(notes)))

    def value_blind(self, dnf: Sequence[Conjunction] | None) -> bool:
        """Does :meth:`route` without a hint pick the same nodes whatever the bound values are?

        True when no conjunction has an exact value (``=``, ``IN``) on a routing column, so only ranges reach
        the strategies, and no strategy's algorithm narrows a range (it keeps the base class's ``range``: every
        target, as a hash such as ``SLOTS`` or ``HASH_MOD`` does): then which columns carry a range decides the
        pick, and that is the statement's, not the call's. A statement can then route once per shape.
        """
        for strategy in (self.db, self.tb):
            if strategy.kind in (StrategyKind.STANDARD, StrategyKind.COMPLEX) and (
                    type(strategy.sharder).range is not ShardingAlgorithm.range):  # fmt: skip
                return False
        columns = self.columns
        return dnf is None or all(
            type(atom) is Range for conj in dnf for column, atoms in conj.items() if column in columns for atom in atoms
        )

    # -- internals -----------------------------------------------------------------

    def _forced(self, hint: Hint) -> Picked:
        nodes = [
            i
            for i, n in enumerate(self.table.data_nodes)
            if (hint.database is None or n.data_source == hint.database)
            and (hint.table is None or n.table == hint.table)
        ]
        if not nodes:
            raise RoutingError(
                f"hint database={hint.database!r} table={hint.table!r} names no node of "
                f"table {self.table.name!r}",
                table=self.table.name,
            )
        return Picked(tuple(nodes), False, "forced by hint")

    def _conjunction(
        self,
        resolved: dict[str, ColumnValues],
        hint: Hint | None,
        sources: Sequence[str] | None,
        notes: list[str],
    ) -> list[int]:
        combos = self._exact_combinations(resolved)
        if combos is not None:
            out = []
            for values in combos:
                out.extend(self._nodes_for(values, {}, hint, sources, notes))
            return out
        ranges = {c: cv.ranges for c, cv in resolved.items() if cv.values is None and cv.ranges}
        exact = {c: cv.values for c, cv in resolved.items() if cv.values is not None}
        out = []
        # Columns with exact values are still enumerated; the rest go level by level.
        for values in _product(exact):
            out.extend(self._nodes_for(values, ranges, hint, sources, notes))
        return out

    def _exact_combinations(self, resolved: dict[str, ColumnValues]) -> list[dict[str, Any]] | None:
        needed = [c.lower() for c in (*self.db.columns, *self.tb.columns)]
        if not needed or any(c not in resolved or resolved[c].values is None for c in needed):
            return None
        exact = {c: resolved[c].values for c in dict.fromkeys(needed)}
        size = 1
        for vals in exact.values():
            size *= len(vals)  # type: ignore[arg-type]
        return _product(exact) if size <= MAX_COMBINATIONS else None

    def _nodes_for(
        self,
        values: Mapping[str, Any],
        ranges: Mapping[str, tuple[ValueRange, ...]],
        hint: Hint | None,
        sources: Sequence[str] | None,
        notes: list[str],
    ) -> list[int]:
        table = self.table
        if table.auto:
            picked = self._pick(self.tb, self.tables_of[""], values, ranges, hint, "table", notes)
            names = self.tables_of[""] if picked is None else picked
            return [self.auto_index[t] for t in names]
        out: list[int] = []
        if sources is None:
            sources = self._pick(self.db, self.sources, values, ranges, hint, "database", notes)
        for ds in self.sources if sources is None else sources:
            targets = self.tables_of[ds]
            tables = self._pick(self.tb, targets, values, ranges, hint, "table", notes)
            index = self.index
            out.extend(index[(ds, t)] for t in (targets if tables is None else tables))
        return out

    def _pick(
        self,
        strategy: Strategy,
        targets: TargetSet,
        values: Mapping[str, Any],
        ranges: Mapping[str, tuple[ValueRange, ...]],
        hint: Hint | None,
        level: str,
        notes: list[str],
    ) -> Sequence[str] | None:
        """Targets of one strategy, or ``None`` for all of them."""
        kind = strategy.kind
        if kind is StrategyKind.NONE:
            return None
        algorithm: ShardingAlgorithm = strategy.sharder
        if kind is StrategyKind.HINT:
            value = None if hint is None else (hint.database_value if level == "database" else hint.table_value)
            if value is None:
                notes.append(f"{level} strategy is a hint strategy and no hint value is set")
                return None
            return algorithm.precise(targets, {"value": value})
        columns = [c.lower() for c in strategy.columns]
        if all(c in values for c in columns):
            return algorithm.precise(targets, {c: values[c] for c in columns})
        gene = self.gene
        if gene is not None and level == "database" and gene[0] in values:
            # A gene id carries its user's slot: the database follows without the user id.
            # (gene_route() admits only a database algorithm that has target_of_slot.)
            slotted: _SlotTargets = strategy.sharder
            return slotted.target_of_slot(targets, gene_of(values[gene[0]], gene[1]))
        column_ranges = {c: _intersect(ranges[c]) for c in columns if c in ranges}
        # A complex strategy narrows only when every column is constrained;
        # its exact values join the ranges as one-point ranges.
        column_ranges.update({c: ValueRange(values[c], values[c]) for c in columns if c in values})
        if len(column_ranges) == len(columns) or (kind is StrategyKind.STANDARD and column_ranges):
            if not algorithm.supports_range:
                notes.append(f"{algorithm.label} cannot narrow a range: every {level} target")
            return algorithm.range(targets, column_ranges)
        return None


def gene_route(table: ShardedTable) -> tuple[str, int] | None:
    """(id column, gene bits) when ids of ``table`` carry the slot its database is chosen by.

    That holds for a GENE key generator whose shard column is the column of a
    SLOTS database strategy with as many slot bits as the ids have gene bits.
    """
    key = table.key_generation
    db = table.database_strategy
    if key is None or key.generator.type.upper() != "GENE" or db.kind is not StrategyKind.STANDARD:
        return None
    algorithm = db.sharder
    bits = key.generator.gene_bits
    column = (key.generator.shard_column or "").lower()
    if not hasattr(algorithm, "target_of_slot") or getattr(algorithm, "slot_bits", None) != bits:
        return None
    if db.column is None or db.column.lower() != column or bits is None:
        return None
    return key.column.lower(), bits


def _product(exact: Mapping[str, Sequence[Any] | None]) -> list[dict[str, Any]]:
    names = list(exact)
    return [dict(zip(names, combo)) for combo in itertools.product(*(exact[n] or () for n in names))]


def _intersect(ranges: tuple[ValueRange, ...]) -> ValueRange:
    """One range that all of ``ranges`` imply (the tightest bounds that compare)."""
    if len(ranges) == 1:
        return ranges[0]
    lower, lower_closed, upper, upper_closed = None, True, None, True
    for r in ranges:
        try:
            if r.lower is not None and (lower is None or r.lower > lower or (r.lower == lower and not r.lower_closed)):
                lower, lower_closed = r.lower, r.lower_closed
            if r.upper is not None and (upper is None or r.upper < upper or (r.upper == upper and not r.upper_closed)):
                upper, upper_closed = r.upper, r.upper_closed
        except TypeError:
            return ranges[0]  # incomparable bounds: one of them is still a valid superset
    return ValueRange(lower, upper, lower_closed, upper_closed)


def route_rows(
    router: TableRouter,
    columns: Mapping[str, Sequence[Any]],
    n_rows: int,
    hint: Hint | None,
    sources: Sequence[str] | None = None,
) -> np.ndarray:
    """The node index of every row of a multi-row INSERT, through the algorithms' batch paths.

    Args:
        router: The table's router.
        columns: Sharding column (lower case) → one value per row.
        n_rows: Number of rows.
        hint: Active hint (forced data source / table, hint strategy values).
        sources: Data sources a strategy hint chose (``None``: the database strategy chooses).

    Raises:
        RoutingError: a row cannot go to exactly one node.
    """
    table = router.table
    if hint is not None and (hint.database is not None or hint.table is not None):
        forced = router._forced(hint).nodes
        if len(forced) != 1:
            raise RoutingError(
                f"hint leaves {len(forced)} nodes of {table.name!r} for inserted rows; force one node",
                table=table.name,
            )
        return np.full(n_rows, forced[0], dtype=np.intp)
    arrays = {c: _array(v) for c, v in columns.items()}  # once: each database's rows are a mask of it
    if table.auto:
        targets = router.tables_of[""]
        picked = _level(router.tb, targets, arrays, n_rows, hint, "table", table.name)
        lut = np.array([router.auto_index[t] for t in targets], dtype=np.intp)
        nodes: np.ndarray = lut[picked]
        return nodes
    if sources is not None:
        if len(sources) != 1:
            raise RoutingError(
                f"strategy hint chose {len(sources)} data sources for rows of {table.name!r}; need one",
                table=table.name,
            )
        ds_index = np.full(n_rows, router.sources.position[sources[0]], dtype=np.intp)
    else:
        ds_index = _level(router.db, router.sources, arrays, n_rows, hint, "database", table.name)
    out = np.empty(n_rows, dtype=np.intp)
    for k in np.unique(ds_index).tolist():
        ds = router.sources[k]
        mask = ds_index == k
        targets = router.tables_of[ds]
        sub = {c: values[mask] for c, values in arrays.items()}
        picked = _level(router.tb, targets, sub, int(mask.sum()), hint, "table", table.name)
        lut = np.array([router.index[(ds, t)] for t in targets], dtype=np.intp)
        out[mask] = lut[picked]
    return out


def _level(
    strategy: Strategy,
    targets: TargetSet,
    columns: Mapping[str, np.ndarray],
    n_rows: int,
    hint: Hint | None,
    level: str,
    table: str,
) -> np.ndarray:
    """Target index per row for one strategy."""
    kind = strategy.kind
    if kind is StrategyKind.NONE:
        if len(targets) != 1:
            raise RoutingError(
                f"{table!r} has no {level} strategy but {len(targets)} {level} targets; "
                "an inserted row would have no single home",
                table=table,
            )
        return np.zeros(n_rows, dtype=np.intp)
    algorithm = strategy.sharder
    if kind is StrategyKind.HINT:
        value = None if hint is None else (hint.database_value if level == "database" else hint.table_value)
        if value is None:
            raise RoutingError(
                f"{table!r} routes its {level} by a hint and no hint value is set for the inserted rows",
                table=table,
            )
        got = algorithm.precise(targets, {"value": value})
        return np.full(n_rows, targets.position[got[0]], dtype=np.intp)
    arrays = {}
    for column in strategy.columns:
        values = columns.get(column.lower())
        if values is None:
            raise ShardKeyNotFoundError(
                f"INSERT into {table!r} does not set shard column {column!r}; every row needs it",
                table=table,
                column=column,
            )
        arrays[column] = values
    return np.asarray(algorithm.batch(targets, arrays), dtype=np.intp)


def _array(values: Sequence[Any]) -> np.ndarray:
    if values and all(type(v) is int for v in values):
        try:
            return np.asarray(values, dtype=np.int64)
        except OverflowError:
            pass
    arr = np.empty(len(values), dtype=object)
    arr[:] = list(values)
    return arr
