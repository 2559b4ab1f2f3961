"""SELECT, UPDATE and DELETE: routed by the shard conditions of their scopes.

Compiled once per SQL text into a :class:`QueryStatement`; :meth:`route` then
only resolves parameters, asks the table router for node indexes and fills
templates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from sqlglot import exp

from ddm_core.errors import RoutingError, ShardKeyUpdateError, UnsupportedSQLError
from ddm_core.metadata.model import DataNode, ShardedTable, TableKind
from ddm_core.route.context import RouteContext, physical_name
from ddm_core.route.hints import Hint
from ddm_core.merge.spec import remember
from ddm_core.route.plan import MergeSpec, NO_MERGE, RouteKind, RoutePlan, RouteUnit, TableRoute, single_unit_plan
from ddm_core.route.query.per_source import per_data_source
from ddm_core.route.query.point_path import PointPath, point_path
from ddm_core.route.query.unit_shapes import MAX_SHAPES, PlanShape, UnitShape, fill_units
from ddm_core.route.shards.analyze import Analysis
from ddm_core.route.shards.coerce import Normalizer, coerce_conditions, normalized_indexes
from ddm_core.route.shards.colocation import Layout, layout_of
from ddm_core.route.shards.conditions import Conjunction, Eq, Literal, Param, Source
from ddm_core.route.shards.fast import PointRoute, miss_note, point_route
from ddm_core.route.shards.targets import Picked
from ddm_core.route.text.placeholders import Translated
from ddm_core.route.text.template import Template

__all__ = ["QueryStatement", "MultiRewrite"]


@dataclass(frozen=True, slots=True)
class MultiRewrite:
    """How a SELECT runs when it reaches several nodes (built by ``select_rewrite``)."""

    template: Template
    #: The merge spec for one call's params (offset/limit/HAVING values; the max_offset guard).
    spec_for: Callable[[Sequence[Any]], MergeSpec]
    #: Param index → function giving the value each unit gets instead (LIMIT m+n).
    param_overrides: tuple[tuple[int, Callable[[Sequence[Any]], Any]], ...] = ()
    #: Units on one data source may run as one ``UNION ALL`` followed by this text
    #: (``None``: one unit per table; route/query/per_source.py).
    union: str | None = None
    #: The bound index whose value (as the units get it) fills the union's own LIMIT placeholder.
    union_limit: int | None = None


@dataclass(slots=True)
class ShardKeySet:
    """``SET shard_col = value`` in an UPDATE: allowed only if it routes where the row is."""

    column: str
    source: Source | None  # None: not a plain value (an expression) → refused
    same_column: bool  # SET k = k
    table: str  # the logic table written, as the statement names it


class QueryStatement:
    """A compiled SELECT / UPDATE / DELETE."""

    def __init__(
        self,
        ctx: RouteContext,
        analysis: Analysis,
        template: Template,
        statement: str,
        *,
        multi: Callable[[], MultiRewrite] | None = None,
        shard_key_sets: Sequence[ShardKeySet] = (),
        reason: str = "",
        single_only: bool = False,
        mode: str = "conditions",
        locking: bool = False,
        merge: MergeSpec = NO_MERGE,
    ) -> None:
        self.ctx = ctx
        self._merge = merge  # a one-node plan's (SHOW CREATE TABLE's rows as the logic table's); else NO_MERGE
        self.locking = locking  # a locking read: always the primary, like a force_primary hint
        self.analysis = analysis
        self.template = template
        self.statement = statement
        # INSERT reaches here for broadcast / single / unknown targets and INSERT ... SELECT.
        self.is_write = statement in ("update", "delete", "insert")
        self._multi_factory = multi
        self._multi: MultiRewrite | None = None
        self.shard_key_sets = tuple(shard_key_sets)
        self.reason = reason
        self.single_only = single_only
        # "conditions": routed by shard conditions; "every": every node (DDL);
        # "first": the first node only (SHOW / DESCRIBE on a logic table).
        self.mode = mode
        if statement == "ddl":
            self.is_write = True
        a = analysis
        self.primary = a.primary
        self.tables = [ctx.config.table(k) for k in a.slots]
        # Which tables provably share a node, and how the units are placed (route.shards.colocation).
        self.layout: Layout | None = layout_of(a, ctx.config, a.params)
        if self.layout is not None:
            self._check_bindings(self.layout)
        # Strings compared with integer shard columns route as the integers (see route.shards.coerce).
        self._normalize = coerce_conditions(ctx, a, self.shard_key_sets) if self.primary is not None else None
        if self.layout is not None:
            self.layout, own = self.layout.coerced(ctx)
            self._normalize = _in_turn(self._normalize, own)
        # The point fast path is decided on first use (None: not yet; False: not eligible).
        self._point: PointRoute | None | bool = None
        self._nodes: dict[int, tuple[str, str, tuple[tuple[str, str], ...], tuple[TableRoute, ...]]] = {}
        # Multi-node plans apart from their values, per picked nodes (route/query/unit_shapes.py).
        self._shapes: dict[tuple[tuple[int, ...], bool, str], PlanShape] = {}
        # The pick without a hint when no value can change it (TableRouter.value_blind); None: not decided yet,
        # False: the values decide.
        self._blind: Picked | bool | None = None

    # -- compile-time checks ------------------------------------------------------

    def _check_bindings(self, layout: Layout) -> None:
        for table, primary in zip(self.tables, layout.slot_groups):
            if table is None or primary is None or table is primary:
                continue
            ours = [n.data_source for n in table.data_nodes]
            theirs = [n.data_source for n in primary.data_nodes]
            if ours != theirs:
                raise UnsupportedSQLError(
                    f"binding tables {primary.name!r} and {table.name!r} do not have matching data "
                    "nodes (same count, same data source at each position), so a join between "
                    "them cannot be routed node by node",
                    tables=(primary.name, table.name),
                )

    # -- routing ---------------------------------------------------------------------

    def route(self, bound: Sequence[Any], hint: Hint | None) -> RoutePlan:
        if self._normalize is not None:
            bound = self._normalize(bound)
        miss: Exception | None = None
        if hint is None and self._point is not False:
            point = self._point if self._point is not None else self._init_point()
            if point:
                try:
                    found = point.pick(bound)  # type: ignore[union-attr]
                except Exception as exc:  # the general path decides, and raises the real error
                    miss = exc
                else:
                    if type(found) is int:
                        return self._single_plan(found, bound)
                    if len(found) == 1:
                        return self._single_plan(found[0], bound)
                    return self._plan(Picked(found, False, ""), bound, hint)
        if self.primary is None:
            return self._route_unsharded(bound, hint)
        if self.mode == "conditions":
            picked = self._pick(bound, hint)
        else:
            assert self.layout is not None
            picked = self.layout.place_every(self.ctx, first=self.mode != "every")
        plan = self._plan(picked, bound, hint, miss)
        if miss is not None:
            self.ctx.stats.fast_path_misses += 1  # a silent slow route: counted, and named in the plan
        return plan

    @property
    def fast_path(self) -> str | None:
        """Which conditions decide the target on the fast path, or ``None`` (every call takes the general path)."""
        if self.primary is None:
            return None
        point = self._point if self._point is not None else self._init_point()
        return point.description if point else None  # type: ignore[union-attr]

    def _plan(self, picked: Picked, bound: Sequence[Any], hint: Hint | None, miss: Exception | None = None) -> RoutePlan:
        """The plan for the picked nodes: the general path's, which a multi-node fast pick joins.

        Its units apart from their values are made once per picked nodes (route/query/unit_shapes.py),
        unless a hint chose them, the tables of a join have nodes of their own, or a check reads the values.
        """
        if hint is None and miss is None and picked.units is None and picked.table is None and not self.shard_key_sets:
            key = (picked.nodes, picked.full, picked.note)
            shape = self._shapes.get(key)
            if shape is None:
                shape = self._plan_shape(picked, bound, hint, miss)
                remember(self._shapes, key, shape, MAX_SHAPES)
        else:
            shape = self._plan_shape(picked, bound, hint, miss)
        template, merge, bound_for_units = self.template, self._merge, bound
        suffix_params: tuple[Any, ...] = ()
        if shape.multi:
            multi = self._multi or self._build_multi()
            template, merge = multi.template, multi.spec_for(bound)
            if multi.param_overrides:
                values = list(bound)
                for index, fn in multi.param_overrides:
                    values[index] = fn(bound)
                bound_for_units = values
            if shape.union and multi.union_limit is not None:
                suffix_params = (bound_for_units[multi.union_limit],)
        units = fill_units(shape.units, template.params_of(bound_for_units), suffix_params)
        return _new_tuple(RoutePlan, (units, shape.kind, shape.tables, merge, self.statement, self.is_write, (),
                                      self.locking or bool(hint and hint.force_primary), (), None))  # fmt: skip

    def _plan_shape(self, picked: Picked, bound: Sequence[Any], hint: Hint | None, miss: Exception | None) -> PlanShape:
        """The checks of a route to the picked nodes, and its plan apart from the values."""
        primary = self.primary
        assert primary is not None
        # ``picked.nodes`` are nodes of ``table``: the primary's, or (a join of tables of several
        # binding groups) the driving table's, with each slot's node given per unit.
        table = picked.table or primary
        nodes = picked.nodes
        if not nodes:
            # Nothing can match; one node still answers with the right columns.
            nodes = (0,)
        if picked.units is None:
            at = [(i,) * len(self.tables) for i in nodes]
        else:
            at = [slots for _, slots in picked.units]
        self._check_pinned(table, [table.data_nodes[i] for i in nodes])
        if self.single_only and len(nodes) > 1:
            construct = "INSERT ... SELECT" if self.statement == "insert" else "ORDER BY/LIMIT"
            what = construct if self.statement == "insert" else f"{self.statement.upper()} with ORDER BY / LIMIT"
            raise UnsupportedSQLError(
                f"{what} on {table.name!r} reaches {len(nodes)} shards; which rows it changes "
                "would depend on the shard. Add the shard key so it stays on one shard",
                table=table.name,
                construct=construct,
                # an INSERT ... SELECT can still read across shards and insert each row where it belongs
                across_nodes=self.statement == "insert",
            )
        if picked.full:
            self.ctx.check_full_route(table, len(nodes), self.is_write, self.tables)
        if self.shard_key_sets:
            self._check_shard_key_update(bound, hint, self._primary_nodes(at, nodes))
        if len(nodes) == 1:
            kind = RouteKind.SINGLE
        elif self.mode == "every":
            kind = RouteKind.BROADCAST
        else:
            kind = RouteKind.FULL if picked.full else RouteKind.MULTI
        multi = len(nodes) > 1 and self._multi_factory is not None
        template, union = self.template, None
        if multi:
            rewrite = self._multi or self._build_multi()
            template = rewrite.template
            if (rewrite.union is not None and hint is None and picked.units is None
                    and len(nodes) > len({table.data_nodes[i].data_source for i in nodes})):
                union = rewrite.union  # a hint's units stay as it chose them
        if union is not None:
            units = per_data_source(
                [(table.data_nodes[i].data_source, template.text(physical := self._physical(i)),
                  self._unit_tables(physical)) for i in nodes],
                union, self.ctx,
            )  # fmt: skip
        else:
            units = []
            for i, slots in zip(nodes, at):
                physical = self._physical(i) if picked.units is None else self._physical_at(slots)
                ds = table.data_nodes[i].data_source
                units.append(UnitShape(ds, self.ctx.comment(ds) + template.text(physical), 1, False,
                                       self._unit_tables(physical)))  # fmt: skip
        if picked.full:
            columns = ", ".join(table.sharding_columns) or "no column"
            reason = f"no condition on {columns} narrows the route: every node"
        else:
            reason = self.reason
        if picked.note:
            reason += f"; {picked.note}"
        if miss is not None:
            reason += miss_note(miss)
        return PlanShape(tuple(units), kind, self._table_routes(at, reason), multi, union is not None)

    def _init_point(self) -> PointRoute | bool:
        # Only a statement that routes as one table does (layout.trivial): the point route
        # answers for its one side.
        scope = self.layout.scope if self.layout is not None else None
        eligible = self.mode == "conditions" and not self.shard_key_sets and scope is not None
        point = point_route(self.ctx.router_of(self.primary), scope.dnf) if eligible else None  # type: ignore[arg-type,union-attr]
        self._point = point if point is not None else False
        return self._point

    def point_path(self, translated: Translated) -> PointPath | bool | None:
        """This statement's compiled point path (route/query/point_path.py); ``False``: it has none;
        ``None``: not known yet (no call without a hint has decided its point route)."""
        if self._point is None:
            return None
        found = point_path(self._point, translated, normalized_indexes(self._normalize), self.template, self._nodes,
                           self.statement, self.is_write, self.locking)
        return False if found is None else found

    def _node_parts(self, i: int) -> tuple[str, str, tuple[tuple[str, str], ...], tuple[TableRoute, ...]]:
        """Per node, what a single-node plan reuses on every call (its SQL text included)."""
        parts = self._nodes.get(i)
        if parts is None:
            primary = self.primary
            assert primary is not None
            node = primary.data_nodes[i]
            self._check_pinned(primary, (node,))
            physical = self._physical(i)
            why = self._table_routes([(i,) * len(self.tables)], self.reason)
            sql = self.ctx.comment(node.data_source) + self.template.fmt.format(*physical)
            parts = self._nodes[i] = (node.data_source, sql, self._unit_tables(physical), why)
        return parts

    def _single_plan(self, i: int, bound: Sequence[Any]) -> RoutePlan:
        # Every point route ends here: _node_parts' cache and params_of's common case read in place
        parts = self._nodes.get(i)
        if parts is None:
            parts = self._node_parts(i)
        data_source, sql, tables, why = parts
        template = self.template
        if template.identity and len(bound) == len(template.params):
            params = tuple(bound)
        else:
            params = template.params_of(bound)
        return single_unit_plan(data_source, sql, params, tables, why, self.statement, self.is_write, (), self.locking)

    def _build_multi(self) -> MultiRewrite:
        assert self._multi_factory is not None
        self._multi = self._multi_factory()
        return self._multi

    def _pick(self, bound: Sequence[Any], hint: Hint | None) -> Picked:
        primary = self.primary
        layout = self.layout
        assert primary is not None and layout is not None
        if not layout.sides:
            raise UnsupportedSQLError(
                f"sharded table {primary.name!r} appears where no shard condition can reach it "
                f"(not in a FROM / JOIN of the {self.statement.upper()})",
                table=primary.name,
            )
        scope = layout.scope
        if scope is None:  # a join (or subquery) whose tables must be proven to share a node

            def check_full(table: ShardedTable, nodes: int) -> None:
                self.ctx.check_full_route(table, nodes, self.is_write, self.tables)

            return layout.place(self.ctx, bound, hint, check_full)
        if hint is None:
            blind = self._blind
            if blind is None:
                blind = self._blind = self._blind_pick(scope.dnf, bound)
            if blind is not False:
                return blind  # type: ignore[return-value]
        return self.ctx.router_of(primary).route(scope.dnf, bound, hint, self.ctx.hinted_sources(primary, hint))

    def _blind_pick(self, dnf: list[Conjunction] | None, bound: Sequence[Any]) -> Picked | bool:
        """The pick of every call without a hint when the values cannot change it, else ``False``."""
        router = self.ctx.router_of(self.primary)  # type: ignore[arg-type]
        return router.route(dnf, bound, None) if router.value_blind(dnf) else False

    def _table_routes(self, at: Sequence[Sequence[int]], reason: str) -> tuple[TableRoute, ...]:
        """One entry per sharded table of the statement, with its own physical node in each unit.

        ``at``: per unit, the node index of each template slot's table (-1: not sharded).
        """
        seen = {}
        for slot, table in enumerate(self.tables):
            if table is not None and table.name not in seen:
                nodes = tuple(str(table.data_nodes[slots[slot]]) for slots in at)
                seen[table.name] = TableRoute(table.name, nodes, reason)
        return tuple(seen.values())

    def _primary_nodes(self, at: Sequence[Sequence[int]], nodes: Sequence[int]) -> tuple[int, ...]:
        """The primary's nodes of the units (they are ``nodes`` unless other tables drive)."""
        groups = self.layout.slot_groups if self.layout is not None else ()
        slots = [k for k, g in enumerate(groups) if g is self.primary]
        if not slots:
            return tuple(nodes)
        return tuple(sorted({unit[slots[0]] for unit in at}))

    def _physical(self, i: int) -> list[str]:
        out = []
        for key, table in zip(self.analysis.slots, self.tables):
            out.append(physical_name(table.data_nodes[i].table) if table is not None else physical_name(key))
        return out

    def _physical_at(self, slots: Sequence[int]) -> list[str]:
        """Physical names when each slot's table has its own node index (``slots``)."""
        return [
            physical_name(table.data_nodes[i].table) if table is not None else physical_name(key)
            for key, table, i in zip(self.analysis.slots, self.tables, slots)
        ]

    def _unit_tables(self, physical: list[str]) -> tuple[tuple[str, str], ...]:
        return tuple(
            (t.name, p) for t, p in zip(self.tables, physical) if t is not None
        )

    def _check_shard_key_update(self, bound: Sequence[Any], hint: Hint | None, nodes: Sequence[int]) -> None:
        primary = self.primary
        assert primary is not None
        router = self.ctx.router_of(primary)
        for item in self.shard_key_sets:
            if item.same_column:
                continue
            if item.source is not None and len(nodes) == 1:
                value = bound[item.source.index] if isinstance(item.source, Param) else item.source.value
                # Where the new value lives by the table's own strategies: a hint that forces a
                # data source / table says where the statement runs, not where the value belongs.
                probe = hint if hint is None or (hint.database is None and hint.table is None) else None
                moved = router.route([{item.column: (Eq(item.column, Literal(value)),)}], bound, probe)
                if moved.nodes == tuple(nodes) and _only_column(primary, item.column):
                    continue
            raise ShardKeyUpdateError(
                f"UPDATE sets shard column {item.column!r} of {item.table!r}; that moves the row "
                "to another shard. Delete and re-insert it instead (only SET k = k, or a value "
                "that provably routes to the same shard, is allowed)",
                table=item.table,
                column=item.column,
            )

    def _check_pinned(self, table: ShardedTable, nodes: Sequence[DataNode]) -> None:
        """Single and unknown tables live in one data source: every unit's node of ``table`` must be in it."""
        a = self.analysis
        if not (a.single or a.unknown):
            return
        ctx = self.ctx
        places: dict[str, str] = {}
        for k in a.single:
            places.setdefault(ctx.config.single_table(k).data_source, k)  # type: ignore[union-attr]
        for k in a.unknown:
            places.setdefault(ctx.default_source(f"table {k!r}"), k)
        for node in nodes:
            for ds, k in places.items():
                if ds != node.data_source:
                    raise UnsupportedSQLError(
                        f"table {k!r} lives only in data source {ds!r}, but sharded table "
                        f"{table.name!r} is routed to {node}; a statement cannot join across data "
                        f"sources (keep the shard key on {ds!r}, or make {k!r} a broadcast table)",
                        tables=(table.name, k),
                        data_source=ds,
                        across_nodes=True,  # a SELECT can still copy the sharded rows there
                    )

    # -- statements without sharded tables --------------------------------------

    def _route_unsharded(self, bound: Sequence[Any], hint: Hint | None) -> RoutePlan:
        a = self.analysis
        ctx = self.ctx
        physical = [physical_name(k) for k in a.slots]
        if a.unknown and not a.single:
            sources = [ctx.default_source(f"table {a.unknown[0]!r}")]
            why = f"unknown table {a.unknown[0]!r} → default data source"
        elif a.single:
            places = {ctx.config.single_table(k).data_source for k in a.single}  # type: ignore[union-attr]
            # Unknown tables live in the default data source: joined with single tables, both must agree.
            places.update(ctx.default_source(f"table {k!r}") for k in a.unknown)
            if len(places) > 1:
                raise UnsupportedSQLError(
                    f"single tables {a.single + a.unknown} live in different data sources {sorted(places)}; "
                    "a statement cannot join across data sources",
                    tables=tuple(a.single + a.unknown),
                )
            sources = list(places)
            why = f"single table(s) {', '.join(a.single)}"
        elif a.broadcast:
            sources = ctx.sources() if self.is_write else [ctx.first_source()]
            why = "broadcast table(s) " + ", ".join(a.broadcast) + (" → every data source" if self.is_write else "")
        else:
            sources = [ctx.first_source()]
            why = "no table"
        if hint is not None and hint.database is not None and not self.is_write:
            sources = [hint.database]
        sql, params = self.template.fill(physical, bound)
        units = tuple(RouteUnit(ds, self.ctx.comment(ds) + sql, params) for ds in sources)
        kind = RouteKind.BROADCAST if len(units) > 1 else RouteKind.SINGLE
        tables = tuple(TableRoute(k, tuple(f"{ds}.{k}" for ds in sources), why) for k in a.slots)
        return RoutePlan(units, kind, tables, NO_MERGE, self.statement, self.is_write,
                         force_primary=self.locking or bool(hint and hint.force_primary))


_new_tuple = tuple.__new__


def _in_turn(first: Normalizer | None, second: Normalizer | None) -> Normalizer | None:
    """A normalizer applying ``first`` then ``second`` (either may be ``None``)."""
    if first is None or second is None:
        return first or second

    def both(bound: Sequence[Any]) -> Sequence[Any]:
        return second(first(bound))

    indexes = (normalized_indexes(first), normalized_indexes(second))
    if indexes[0] is not None and indexes[1] is not None:
        setattr(both, "indexes", indexes[0] | indexes[1])
    return both


def _only_column(table: ShardedTable, column: str) -> bool:
    """True when ``column`` alone decides both strategies (so one value fixes the node)."""
    cols = {c.lower() for c in table.sharding_columns}
    return cols == {column}
