"""Statement analysis: which logic tables a statement uses, and where its shard conditions are.

A statement is cut into *scopes*, one per SELECT (and one for the UPDATE /
DELETE itself): each scope knows the tables of its own FROM / JOIN, its
aliases, and the predicates (WHERE and JOIN ... ON) that restrict them.
Columns are resolved through the scope's aliases first, then the enclosing
scopes' (correlated subqueries). Whether the sharded tables of a statement
may be joined node by node is :mod:`ddm_core.route.shards.colocation`'s decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from sqlglot import exp

from ddm_core.errors import UnsupportedSQLError
from ddm_core.metadata.model import ShardedTable, ShardingConfig, TableKind
from ddm_core.route.shards.conditions import Conjunction, conjoin, extract, to_dnf
from ddm_core.route.shards.derived import outer_conditions
from ddm_core.route.shards.targets import gene_route

__all__ = ["TableUse", "Scope", "Analysis", "NodeIndex", "analyze"]

#: ``DROP <kind> name`` forms whose name is an index or constraint, not a table.
_NAMED_DROPS = frozenset({"INDEX", "FOREIGN KEY", "CONSTRAINT", "CHECK"})


@dataclass(slots=True)
class TableUse:
    """One occurrence of a table in the statement."""

    node: exp.Table
    name: str  # as written
    key: str  # lower case
    alias: str | None
    kind: TableKind | None
    slot: int  # template slot; one per distinct logic table


@dataclass(slots=True)
class Scope:
    """One SELECT (or the UPDATE / DELETE): its tables and shard conditions."""

    node: exp.Expression
    parent: "Scope | None"
    uses: list[TableUse] = field(default_factory=list)
    predicates: list[exp.Expression] = field(default_factory=list)
    dnf: list[Conjunction] | None = None
    is_subquery: bool = False

    def aliases(self) -> dict[str, TableUse]:
        out: dict[str, TableUse] = {}
        for use in self.uses:
            out[(use.alias or use.name).lower()] = use
        return out


@dataclass(slots=True)
class NodeIndex:
    """The nodes first-sight analysis looks at, collected in one walk of the tree.

    sqlglot's ``find_all`` walks the whole tree per call; a statement's
    analysis needs five kinds of node, so one walk saves four.
    """

    selects: list[exp.Select] = field(default_factory=list)
    tables: list[exp.Table] = field(default_factory=list)
    columns: list[exp.Column] = field(default_factory=list)
    placeholders: list[exp.Placeholder] = field(default_factory=list)
    ctes: list[exp.CTE] = field(default_factory=list)

    @classmethod
    def of(cls, tree: exp.Expr) -> "NodeIndex":
        index = cls()
        # Each list holds exactly the node type that keys it, a pairing the
        # dict's type cannot state: the fields above keep the precise types.
        buckets: dict[type[exp.Expr], list[Any]] = {
            exp.Select: index.selects,
            exp.Table: index.tables,
            exp.Column: index.columns,
            exp.Placeholder: index.placeholders,
            exp.CTE: index.ctes,
        }
        for node in tree.walk():
            bucket = buckets.get(type(node))
            if bucket is not None:
                bucket.append(node)
        return index


@dataclass(slots=True)
class Analysis:
    """Everything routing needs to know about a statement's tables."""

    uses: list[TableUse]
    slots: list[str]  # logic table key per template slot
    scopes: list[Scope]
    primary: ShardedTable | None  # the table whose strategies route the sharded group
    sharded: list[str]  # distinct sharded logic table keys, first-seen order
    broadcast: list[str]
    single: list[str]
    unknown: list[str]
    nodes: NodeIndex
    params: Mapping[str, int] = field(default_factory=dict)  # placeholder name → bound-parameter index

    @property
    def sharded_scopes(self) -> list[Scope]:
        return [s for s in self.scopes if any(u.kind is TableKind.SHARDED for u in s.uses)]


def analyze(
    tree: exp.Expr, config: ShardingConfig, params: Mapping[str, int], nodes: NodeIndex | None = None
) -> Analysis:
    """Find tables, scopes and shard conditions of a parsed statement.

    Args:
        tree: The parsed statement (placeholders are ``:pN``).
        config: The sharding configuration.
        params: Placeholder name → bound-parameter index.
        nodes: The tree's :class:`NodeIndex`, when the caller already built it.

    Raises:
        UnsupportedSQLError: an INSERT ... SELECT over sharded tables that are not bound to each other.
    """
    if nodes is None:
        nodes = NodeIndex.of(tree)
    slots: list[str] = []
    uses: list[TableUse] = []
    scopes: list[Scope] = []
    by_node: dict[int, Scope] = {}

    def scope_of(node: exp.Expression) -> Scope | None:
        parent = node.parent
        while parent is not None:
            if id(parent) in by_node:
                return by_node[id(parent)]
            parent = parent.parent
        return None

    containers: list[exp.Expression] = [tree] if isinstance(tree, (exp.Update, exp.Delete)) else []
    containers += nodes.selects
    # Parents before children, so a subquery finds its enclosing scope.
    containers.sort(key=lambda n: _depth(n))
    for node in containers:
        parent = scope_of(node)
        scope = Scope(node, parent, is_subquery=parent is not None)
        by_node[id(node)] = scope
        scopes.append(scope)

    # Names of common table expressions: ``FROM x`` after ``WITH x AS (...)`` is no table.
    ctes = {c.alias.lower() for c in nodes.ctes if c.alias}
    # ``DELETE o FROM t_order o ...``: the ``o`` after DELETE names an alias, not a table.
    delete_refs = {id(t) for t in tree.args.get("tables") or []} if isinstance(tree, exp.Delete) else set()
    aliases = {t.alias.lower() for t in nodes.tables if t.alias and id(t) not in delete_refs}
    for table in nodes.tables:
        if not table.name or isinstance(table.parent, (exp.Column,)):
            continue
        if isinstance(table.parent, exp.Drop) and str(table.parent.args.get("kind") or "").upper() in _NAMED_DROPS:
            continue  # DROP INDEX idx ON t, ALTER TABLE t DROP FOREIGN KEY fk: sqlglot reads the name as a table
        if (ctes or delete_refs) and not table.args.get("db") and (
            table.name.lower() in ctes or (id(table) in delete_refs and table.name.lower() in aliases)
        ):
            continue
        key = table.name.lower()
        if key not in slots:
            slots.append(key)
        use = TableUse(table, table.name, key, table.alias or None, config.kind_of(table.name), slots.index(key))
        uses.append(use)
        owner = scope_of(table)
        if owner is not None:
            owner.uses.append(use)

    for scope in scopes:
        node = scope.node
        where = node.args.get("where")
        if where is not None:
            scope.predicates.append(where.this)
        for join in node.args.get("joins") or []:
            on = join.args.get("on")
            if on is not None:
                scope.predicates.append(on)

    sharded = list(dict.fromkeys(u.key for u in uses if u.kind is TableKind.SHARDED))
    # INSERT ... SELECT writes each row where it is read: its tables must all be bound. Every
    # other statement's tables are checked by route.shards.colocation (joins that provably share a node).
    primary = _primary(sharded, config, strict=isinstance(tree, exp.Insert))
    if primary is not None:
        gene = gene_route(primary)
        columns = {c.lower() for c in primary.sharding_columns} | ({gene[0]} if gene else set())
        for scope in scopes:
            if any(u.kind is TableKind.SHARDED for u in scope.uses):
                scope.dnf = _scope_dnf(scope, columns, params)
    return Analysis(
        uses=uses,
        slots=slots,
        scopes=scopes,
        primary=primary,
        sharded=sharded,
        broadcast=list(dict.fromkeys(u.key for u in uses if u.kind is TableKind.BROADCAST)),
        single=list(dict.fromkeys(u.key for u in uses if u.kind is TableKind.SINGLE)),
        unknown=list(dict.fromkeys(u.key for u in uses if u.kind is None)),
        nodes=nodes,
        params=params,
    )


def _depth(node: exp.Expr) -> int:
    depth = 0
    while node.parent is not None:
        node = node.parent
        depth += 1
    return depth


def _primary(sharded: list[str], config: ShardingConfig, strict: bool = False) -> ShardedTable | None:
    """The table whose strategies route the statement's first sharded table (and its binding group).

    Tables of a binding group always route through the group's first table and
    follow it by node index (ShardingSphere's primary-table rule), also when a
    statement names only one of them. Tables of other groups route by their own
    strategies (:mod:`ddm_core.route.shards.colocation` decides whether they may be
    joined); with ``strict`` they are refused here.
    """
    if not sharded:
        return None
    first = config.table(sharded[0])
    group = config.binding_group_of(sharded[0])
    strays = [t for t in sharded[1:] if group is None or t not in group]
    if strays and strict:
        raise UnsupportedSQLError(
            f"tables {sharded[0]!r} and {strays[0]!r} are both sharded but not bound to each other; "
            "a join between them cannot be routed correctly (configure them as binding tables, "
            "or make one of them a broadcast table)",
            tables=tuple(sharded),
            across_nodes=True,  # an INSERT ... SELECT can still route each row by itself
        )
    if group is None:
        return first
    return config.table(group.tables[0]) or first


def _scope_dnf(scope: Scope, columns: set[str], params: Mapping[str, int]) -> Any:
    aliases: list[dict[str, TableUse]] = []
    s: Scope | None = scope
    while s is not None:
        aliases.append(s.aliases())
        s = s.parent
    own_sharded = [u for u in scope.uses if u.kind is TableKind.SHARDED]

    def column_of(col: exp.Column) -> str | None:
        name = col.name.lower()
        if name not in columns:
            return None
        qualifier = col.table.lower() if col.table else ""
        if not qualifier:
            return name if own_sharded else None
        for level in aliases:
            use = level.get(qualifier)
            if use is not None:
                return name if use.kind is TableKind.SHARDED else None
        return None

    trees = [extract(p, column_of, params) for p in scope.predicates]
    trees += outer_conditions(scope.node, column_of, params)  # a derived table: the enclosing WHEREs
    if not trees:
        return None
    return to_dnf(conjoin(trees))


def placement_assignments(table: ShardedTable, assignments: Any) -> list[tuple[str, exp.Column, exp.Expr]]:
    """``(name, column, value)`` for each ``col = value`` of ``assignments`` (an UPDATE's SET,
    an ON DUPLICATE KEY UPDATE) that writes a column placing ``table``'s rows: its sharding
    columns, and the column whose gene id routes the database too."""
    columns = {c.lower() for c in table.sharding_columns}
    gene = gene_route(table)
    if gene is not None:
        columns.add(gene[0])
    found = []
    for assignment in assignments or ():
        if isinstance(assignment, exp.EQ) and isinstance(column := assignment.left, exp.Column):
            name = column.name.lower()
            if name in columns:
                found.append((name, column, assignment.right))
    return found

