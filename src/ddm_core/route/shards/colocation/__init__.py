"""Joins that never lose rows: which sharded tables of a statement share a node, and where it runs.

Each unit of a routed statement sees only its own node's rows, and the
statement's result is the union of what its units return. That equals the
result on one unsharded database only when every combination of rows the
statement forms (a join's pairs, a subquery's rows for an outer row) lies on
one node, and no unit returns a row another unit returns too. This module
proves that from the statement's conditions, or refuses the statement, naming
the join condition that would make it provable
(docs/architecture.md#joins-that-never-lose-rows).

**Compile time** (:func:`layout_of`). The sharded table occurrences of each
scope (one SELECT, or the UPDATE / DELETE) are grouped into *sides*. Two
occurrences are on one side when equalities join all their corresponding shard
columns (a self-join, or tables of one binding group: ``o.user_id =
i.user_id``) where they hold for every row both appear in: the WHERE, an inner
join's ON, or the ON of an outer join that the optional table depends on
(``o LEFT JOIN i ON o.user_id = i.user_id``: every ``i`` row that appears has
``o``'s user). Rows of one side that appear together have one shard value, so
they live on one node. Each occurrence also keeps the predicates that hold
whenever it has a row (the WHERE, the ONs of the joins it depends on): their
conditions on the side's shard columns bound the nodes its rows can be on.

A subquery's side correlated with an outer side on the shard columns
(``EXISTS (SELECT 1 FROM t_order_item i WHERE i.user_id = o.user_id)``, or
``o.user_id IN (SELECT i.user_id ...)``) follows that side's node: for each
outer row, only rows on the outer row's node can matter.

**Route time** (:meth:`Layout.place`). Each side's nodes come from its
conditions and the bound parameters. In each scope at most one side may reach
several nodes; it *drives*: the statement runs once per node it reaches. Every
other side must reach at most one node, in the data source of every unit (as a
single table does), so each unit sees all of its rows that matter. A driving
side needs an occurrence that has a row in every result row of its scope (not
only the optional side of an outer join): a row made of broadcast rows and
NULLs would otherwise come back from every unit.

The package: ``sides.py`` (compile time), ``layout.py`` (route time), this module
(building a statement's layout).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from sqlglot import exp

from ddm_core.errors import ShardKeyUpdateError
from ddm_core.metadata.model import ShardedTable, ShardingConfig, TableKind
from ddm_core.route.shards.analyze import Analysis, Scope
from ddm_core.route.shards.colocation.layout import Layout
from ddm_core.route.shards.colocation.sides import Builder, Member, Side, group_of

__all__ = ["Layout", "layout_of"]


# -- building ------------------------------------------------------------------------------------


def layout_of(analysis: Analysis, config: ShardingConfig, params: Mapping[str, int]) -> Layout | None:
    """The layout of a statement with sharded tables (``None``: it has none).

    Raises:
        ShardKeyUpdateError: an UPDATE sets a shard column of a table that routes
            by other strategies than the statement's primary table.
    """
    primary = analysis.primary
    if primary is None:
        return None
    single = _single_table(analysis, config, primary)
    if single is not None:
        return single
    builder = Builder(analysis, config, params)
    builder.collect()
    root = _root(analysis)
    tops = [i for i, s in enumerate(analysis.scopes) if s.parent is None]
    top_index = {scope: n for n, scope in enumerate(tops)}
    # Top scopes are numbered 0.. (UNION branches); subquery sides get numbers below 0.
    sides = [replace(s, scope=top_index[s.scope] if s.top else -1 - s.scope) for s in builder.sides()]
    slot_tables: list[ShardedTable | None] = []
    slot_groups: list[ShardedTable | None] = []
    sharded_slots = {u.slot for u in analysis.uses if u.kind is TableKind.SHARDED}
    for n, key in enumerate(analysis.slots):
        table = config.table(key) if n in sharded_slots else None
        slot_tables.append(table)
        slot_groups.append(group_of(table, config) if table is not None else None)
    outside = [u for u in analysis.uses if u.kind is TableKind.SHARDED and id(u) not in builder.by_use]
    trivial = (
        len(sides) == 1
        and len(tops) == 1  # UNION branches: each must be checked to come from one unit
        and sides[0].present  # not only on the optional side of an outer join
        and isinstance(sides[0].conditions[0], Scope)
        and all(slot_groups[u.slot] is primary for u in outside)
    )
    kind = "query"
    if isinstance(root, (exp.Drop, exp.TruncateTable)):
        kind = "drop"
    elif isinstance(root, (exp.Create, exp.Alter)):
        kind = "subject"
    elif not isinstance(root, (exp.Query, exp.Update, exp.Delete, exp.Insert)):
        kind = "other"
    set_operation = None
    if isinstance(root, (exp.Intersect, exp.Except)):
        set_operation = "INTERSECT" if isinstance(root, exp.Intersect) else "EXCEPT"
    if isinstance(root, exp.Update):
        _check_key_sets(root, builder)
    return Layout(
        sides=tuple(sides),
        members=tuple(builder.members),
        slot_tables=tuple(slot_tables),
        slot_groups=tuple(slot_groups),
        primary=primary,
        tops=len(tops),
        tops_with_sides=frozenset(s.scope for s in sides if s.top),
        distinct_union=isinstance(root, exp.Union) and bool(root.args.get("distinct")),
        set_operation=set_operation,
        kind=kind,
        trivial=trivial,
    )


def _single_table(analysis: Analysis, config: ShardingConfig, primary: ShardedTable) -> Layout | None:
    """The layout of a statement on one sharded table without joins or other scopes (most statements).

    Nothing is joined, so it routes by its scope's own conditions; this skips the general build.
    """
    sharded = [u for u in analysis.uses if u.kind is TableKind.SHARDED]
    if len(sharded) != 1 or len(analysis.scopes) != 1:
        return None
    scope = analysis.scopes[0]
    node = scope.node
    table_node = node.this if isinstance(node, (exp.Update, exp.Delete)) else None
    if (len(scope.uses) != 1 or scope.uses[0] is not sharded[0] or node.args.get("joins") or node.args.get("using")
            or (isinstance(table_node, exp.Table) and table_node.args.get("joins"))):
        return None
    table = config.table(sharded[0].key)
    if table is None or group_of(table, config) is not primary:
        return None
    slot_tables = tuple(table if n == sharded[0].slot else None for n in range(len(analysis.slots)))
    return Layout(
        sides=(Side((0,), primary, 0, True, True, (scope,), frozenset({sharded[0].slot})),),
        members=(replace(Member.of(sharded[0], table, primary, 0), present=True),),
        slot_tables=slot_tables,
        slot_groups=tuple(primary if t is not None else None for t in slot_tables),
        primary=primary,
        tops=1,
        tops_with_sides=frozenset({0}),
        distinct_union=False,
        set_operation=None,
        kind="query" if isinstance(node, (exp.Select, exp.Update, exp.Delete)) else "other",
        trivial=True,
    )


def _root(analysis: Analysis) -> exp.Expr | None:
    node: exp.Expr | None = analysis.uses[0].node if analysis.uses else None
    while node is not None and node.parent is not None:
        node = node.parent
    return node


def _check_key_sets(tree: exp.Update, builder: Builder) -> None:
    """``SET a.account_id = ...`` on a table outside the primary's group: it would move the row."""
    primary = builder.analysis.primary
    top = next((i for i, s in enumerate(builder.analysis.scopes) if s.node is tree), None)
    if top is None:
        return
    for assignment in tree.expressions:
        left = assignment.left if isinstance(assignment, exp.EQ) else None
        found = builder.resolve(left, top) if isinstance(left, exp.Column) else None
        if found is None or not isinstance(left, exp.Column):
            continue
        member = builder.members[found[0]]
        name = left.name.lower()
        if member.group is primary or name not in member.routing:
            continue
        right = assignment.right
        if isinstance(right, exp.Column) and right.name.lower() == name and builder.resolve(right, top) == found:
            continue  # SET k = k
        raise ShardKeyUpdateError(
            f"UPDATE sets shard column {left.name!r} of {member.table.name!r}; that moves the row to another "
            "shard. Delete and re-insert it instead",
            table=member.table.name,
            column=left.name,
        )
