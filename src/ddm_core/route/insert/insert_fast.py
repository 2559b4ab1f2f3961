"""The one-row INSERT fast path: ``INSERT INTO t (...) VALUES (%s, ...)`` without batch routing.

Batch routing (:func:`~ddm_core.route.shards.targets.route_rows`) splits rows with
numpy arrays, which is what a 10 000-row INSERT needs and what costs tens of
microseconds for one row. A one-row INSERT is a point route instead: its row's
sharding-column values decide the node through the same scalar functions as
``WHERE key = ?`` (:mod:`ddm_core.route.shards.fast`), and the unit's SQL text is
built once per node. Key generation, the gene-id check and the plan are the
general path's, value for value; when the fast path cannot route a row the
general path does (and raises the real error, or counts a fast-path miss).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from ddm_core.route.context import physical_name
from ddm_core.route.plan import RoutePlan, TableRoute, single_unit_plan
from ddm_core.route.shards.conditions import Param, Source
from ddm_core.route.shards.fast import GENERATED, PointRoute, miss_note, row_route
from ddm_core.route.text.template import Template

if TYPE_CHECKING:
    from ddm_core.route.insert.insert import InsertStatement

__all__ = ["OneRowInsert", "one_row_insert"]

_NodeParts = tuple[str, str, tuple[tuple[str, str], ...], tuple[TableRoute, ...]]


def one_row_insert(stmt: InsertStatement) -> OneRowInsert | None:
    """The fast path of a one-row INSERT, or ``None`` when its row cannot decide a node alone."""
    if len(stmt.rows) != 1:
        return None
    fill = stmt.fills[0][1] if stmt.fills else None
    if fill is not None and any(stmt.rows[0].sources[stmt.columns.index(c)] == Param(fill) for c in stmt.needed):
        return None  # a NULL key that also routes: generated first, the general path's order
    row = stmt.rows[0]
    sources: dict[str, Source] = {}
    for column in stmt.needed:
        if column == stmt.key_column and stmt.generator is not None:
            sources[column] = GENERATED
            continue
        source = row.sources[stmt.columns.index(column)]
        if source is None:
            return None  # an expression: the general path refuses it
        sources[column] = source
    router = stmt.ctx.router_of(stmt.routing)
    point = row_route(router, sources)
    if point is None:
        return None
    key_routes = any(s is GENERATED for s in sources.values())
    return OneRowInsert(stmt, point, key_routes, fill)


class OneRowInsert:
    """Routes the one row of an INSERT by its values; the unit's SQL is cached per node."""

    def __init__(self, stmt: InsertStatement, point: PointRoute, key_routes: bool, fill: int | None = None) -> None:
        self.stmt = stmt
        # The param slot of a key column the row sets: NULL there gets a generated key
        # (slots past the caller's params stand for a NULL written in the text).
        self.fill = fill
        self.virtual = (None,) * stmt.n_virtual
        self.point = point
        self.pick = point.pick
        self.key_routes = key_routes  # the generated key is a sharding column: generate, then route
        router = stmt.ctx.router_of(stmt.routing)
        gene = router.gene
        self.gene = gene if gene is not None and stmt.key_column is None and gene[0] in stmt.columns else None
        row = stmt.rows[0].template
        head = (*stmt.prefix.params, *row.params)
        self.params = Template("", head + stmt.suffix.params)  # no generated key
        self.head, self.tail = Template("", head), stmt.suffix  # around a generated key
        self.reason = f"1 row(s) routed by {', '.join(stmt.needed)}"
        self._nodes: dict[int, _NodeParts] = {}

    @property
    def description(self) -> str:
        """Which values decide the node (what ``fast_path`` reports)."""
        return self.point.description

    def route(self, bound: Sequence[Any], general: Callable[[], RoutePlan]) -> RoutePlan:
        """The plan for ``bound``; ``general()`` routes it when the fast path cannot."""
        stmt = self.stmt
        generated = stmt._generate(bound) if self.key_routes else None
        try:
            node = self.pick(bound if generated is None else (*bound, generated[0]))
        except Exception as exc:  # the general path decides, and raises the real error
            return self._missed(exc, general())
        filled: tuple[Any, ...] = ()
        fill = self.fill
        if fill is not None and (self.virtual or bound[fill] is None):  # after routing too
            bound = [*bound, *self.virtual]
            if bound[fill] is None:
                bound[fill] = stmt._generate(bound, (0,))[0]  # type: ignore[index]
                filled = (bound[fill],)
        if self.gene is not None:
            stmt._check_genes(self.gene, bound, {c: stmt._column_values(c, bound, None) for c in stmt.needed})
        if generated is None and stmt.key_column is not None:
            generated = stmt._generate(bound)  # after routing: a miss must not spend an id
        parts = self._nodes.get(node)
        if parts is None:
            parts = self._nodes[node] = self._node_parts(node, generated is not None)
        data_source, sql, tables, why = parts
        keys: tuple[Any, ...] = filled
        if generated is None:
            params = self.params.params_of(bound)
        else:
            keys = (generated[0],)
            params = self.head.params_of(bound) + keys + self.tail.params_of(bound)
        return single_unit_plan(data_source, sql, params, tables, why, "insert", True, keys)

    def _node_parts(self, node: int, with_key: bool) -> _NodeParts:
        """The unit's data source, SQL, tables and reason on ``node`` (what the general path builds)."""
        stmt = self.stmt
        table = stmt.table
        data_node = table.data_nodes[node]
        slot = [physical_name(table.name)] * stmt.slot_count
        slot[0] = physical_name(data_node.table)
        row = stmt.rows[0].template.fmt.format(*slot)
        if with_key:
            row, _ = stmt._with_key(row, (), None)
        ds = data_node.data_source
        sql = stmt.ctx.comment(ds) + stmt.prefix.fmt.format(*slot) + row + stmt.suffix.fmt.format(*slot)
        why = (TableRoute(table.name, (str(data_node),), self.reason),)
        return ds, sql, ((table.name, data_node.table),), why

    def _missed(self, exc: Exception, plan: RoutePlan) -> RoutePlan:
        """A plan the general path made although the fast path should have: counted and said."""
        self.stmt.ctx.stats.fast_path_misses += 1
        note = miss_note(exc)
        return plan._replace(tables=tuple(t._replace(reason=t.reason + note) for t in plan.tables))
