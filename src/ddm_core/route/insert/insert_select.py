"""INSERT ... SELECT into a sharded table: when each data node may copy its own rows into itself.

ShardingSphere routes one INSERT ... SELECT per data node: node *i* reads its
rows and writes them into the target's node *i*. That is right only when every
row it writes belongs to node *i*, i.e. when the target's routing columns are
filled with the source rows' own routing columns — the same table, or one bound
to it (binding tables share nodes by index) — at the same position, and when
running per node gives the rows one unsharded table would (no LIMIT, no
aggregate across nodes, no window). Then the statement may reach several
nodes; otherwise it must stay on one shard, and a value that could
belong to another shard (a constant, an expression, another table's column) is
refused outright.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from ddm_core.dialects import INPUT
from ddm_core.errors import UnsupportedSQLError
from ddm_core.metadata.model import ShardedTable, TableKind
from ddm_core.route.context import RouteContext
from ddm_core.route.shards.analyze import Analysis, Scope, TableUse
from ddm_core.route.shards.targets import gene_route

__all__ = ["check_insert_select"]


def check_insert_select(ctx: RouteContext, tree: exp.Insert, target: exp.Table, analysis: Analysis) -> bool:
    """Refuse an INSERT ... SELECT whose rows could land on another shard; say whether it may run per node.

    Returns:
        ``True`` when each node may copy into itself (one unit per node
        reached), ``False`` when the statement must stay on one shard.

    Raises:
        UnsupportedSQLError: no sharded table is read, a routing column is not
            set, or it is set from something other than the source rows' own
            routing column.
    """
    name = target.name
    readers = [u for u in analysis.uses if u.kind is TableKind.SHARDED and u.node is not target]
    if not readers:
        raise UnsupportedSQLError(
            f"INSERT ... SELECT into sharded table {name!r} reads no sharded table, so the shard of "
            "each row is unknown; insert with VALUES (the router splits rows by shard key)",
            table=name,
            construct="INSERT ... SELECT",
            across_nodes=True,  # each row can still be routed by itself (docs/cross-node-queries.md)
        )
    table = ctx.config.table(name)
    source = tree.expression
    if table is None or analysis.primary is None:
        return False
    columns = _target_columns(ctx, tree, table)
    key = table.key_generation
    if key is not None and columns is not None and key.column.lower() not in columns:
        # Run on the shards, the SELECT would insert rows without their generated key.
        raise UnsupportedSQLError(
            f"INSERT ... SELECT into {name!r} leaves out {key.column!r}, which its key generator fills; "
            "the shards cannot generate it themselves",
            table=name,
            column=key.column,
            construct="INSERT ... SELECT",
            across_nodes=True,  # each row can still be inserted with a generated key
        )
    if isinstance(source, exp.SetOperation):
        # Every branch's rows must keep their shard; per node a UNION could not dedupe across nodes.
        for branch in _branches(source):
            scope = next((s for s in analysis.scopes if s.node is branch), None)
            if columns is not None and scope is not None:
                _keys_per_node(ctx, table, columns, branch, scope)
        return False
    if not isinstance(source, exp.Select):
        return False
    scope = next((s for s in analysis.scopes if s.node is source), None)
    if scope is None:
        return False
    if columns is None:
        # No column list and no schema: only ``SELECT *`` from the table itself keeps positions.
        return _copies_itself(source, scope, table) and _per_node_result(source, [])
    keys = [c.lower() for c in table.sharding_columns]
    return _keys_per_node(ctx, table, columns, source, scope) and _per_node_result(source, keys)


def _branches(node: exp.Expr) -> list[exp.Select]:
    """The SELECTs of a UNION / INTERSECT / EXCEPT (a branch that is something else is skipped)."""
    if isinstance(node, exp.SetOperation):
        return _branches(node.left) + _branches(node.right)
    if isinstance(node, exp.Subquery):
        return _branches(node.this)
    return [node] if isinstance(node, exp.Select) else []


def _keys_per_node(ctx: RouteContext, table: ShardedTable, columns: list[str], select: exp.Select,
                   scope: Scope) -> bool:
    """Check the routing columns one SELECT fills; ``True`` when each is certainly the read rows' own."""
    name = table.name
    items = _select_items(ctx, select, scope)
    if items is None:
        return False
    gene = gene_route(table)
    keys = [c.lower() for c in table.sharding_columns]
    per_node = True
    for column in (*keys, *((gene[0],) if gene else ())):
        if column not in columns:
            if column in keys:
                raise UnsupportedSQLError(
                    f"INSERT ... SELECT into {name!r} does not set its shard column {column!r}; every row "
                    "needs it (a row without a shard key has no shard)",
                    table=name,
                    column=column,
                    construct="INSERT ... SELECT",
                    across_nodes=True,  # each row can still be routed by itself (docs/cross-node-queries.md)
                )
            continue  # an id column left to its default
        at = columns.index(column)
        if at >= len(items):
            continue  # fewer values than columns: the database refuses the statement itself
        value = items[at].this if isinstance(items[at], exp.Alias) else items[at]
        owner = _owner(value, column, scope, select)
        if owner is False:
            raise UnsupportedSQLError(
                f"INSERT ... SELECT into sharded table {name!r} sets shard column {column!r} from "
                f"{value.sql(dialect=INPUT)!r}; only the selected rows' own {column!r} keeps each "
                "row on the shard it is read from",
                table=name,
                column=column,
                construct="INSERT ... SELECT",
                across_nodes=True,  # each row can still be routed by itself (docs/cross-node-queries.md)
            )
        per_node = per_node and owner is True
    return per_node


def _target_columns(ctx: RouteContext, tree: exp.Insert, table: ShardedTable) -> list[str] | None:
    """The columns the statement fills, in order: its column list, else the table's schema."""
    if isinstance(tree.this, exp.Schema):
        return [c.name.lower() for c in tree.this.expressions]
    schema = ctx.schema_of(table.name)
    return [c.lower() for c in schema.names] if schema is not None else None


def _select_items(ctx: RouteContext, select: exp.Select, scope: Scope) -> list[exp.Expression] | None:
    """The select list with ``*`` / ``t.*`` expanded by the tables' schemas (``None``: a star is unknown)."""
    out: list[exp.Expression] = []
    for item in select.expressions:
        star = isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))
        if not star:
            out.append(item)
            continue
        if isinstance(item, exp.Star):
            if len(scope.uses) != 1 or select.args.get("joins"):
                return None
            use = scope.uses[0]
        else:
            found = scope.aliases().get(item.table.lower())
            if found is None:
                return None
            use = found
        schema = ctx.schema_of(use.name)
        if schema is None:
            return None
        out.extend(exp.column(c, table=use.alias or use.name) for c in schema.names)
    return out


def _owner(value: exp.Expression, column: str, scope: Scope, select: exp.Select) -> bool | None:
    """Is ``value`` the read rows' own ``column``? ``True``: of a sharded table of the scope;
    ``None``: a column of that name whose table is not certain; ``False``: anything else."""
    if not isinstance(value, exp.Column) or value.name.lower() != column:
        return False
    if value.table:
        use: TableUse | None = scope.aliases().get(value.table.lower())
        if use is None:
            return None  # a derived table's column: its origin is not followed
        return True if use.kind is TableKind.SHARDED else False
    # Unqualified: certain only when every table of the scope is sharded (and so bound),
    # and no derived table could hold a column of that name.
    sources = [select.args.get("from_"), *(select.args.get("joins") or [])]
    derived = any(isinstance(s.this, exp.Subquery) for s in sources if s is not None)
    certain = scope.uses and not derived and all(u.kind is TableKind.SHARDED for u in scope.uses)
    return True if certain else None


def _copies_itself(select: exp.Select, scope: Scope, table: ShardedTable) -> bool:
    """``SELECT * FROM <the target table>``: every column lands in its own position."""
    return (
        len(select.expressions) == 1
        and isinstance(select.expressions[0], exp.Star)
        and len(scope.uses) == 1
        and scope.uses[0].key == table.name.lower()
        and not select.args.get("joins")
    )


def _per_node_result(select: exp.Select, keys: list[str]) -> bool:
    """Do the nodes' results together equal the result over one table (so each node may run it)?

    Groups must not span nodes (GROUP BY every shard column, no ROLLUP) and
    nothing may count rows across nodes (LIMIT, window functions).
    """
    if select.args.get("limit") or select.args.get("offset") or any(True for _ in select.find_all(exp.Window)):
        return False
    group: Any = select.args.get("group")
    if group is None:
        aggregated = select.args.get("having") is not None or any(
            True for item in select.expressions for _ in item.find_all(exp.AggFunc)
        )
        return not aggregated
    if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
        return False
    grouped = {c.name.lower() for c in group.expressions if isinstance(c, exp.Column)}
    return bool(keys) and all(k in grouped for k in keys)
