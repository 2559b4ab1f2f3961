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
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Mapping, NoReturn, Sequence

from sqlglot import exp

from ddm_core.errors import ShardKeyUpdateError, UnsupportedSQLError
from ddm_core.metadata.model import ShardedTable, ShardingConfig, StrategyKind, TableKind
from ddm_core.route.analyze import Analysis, Scope, TableUse
from ddm_core.route.coerce import Normalizer, coerce_dnf, integer_columns, normalizer
from ddm_core.route.conditions import Conjunction, conjoin, extract, to_dnf
from ddm_core.route.context import RouteContext
from ddm_core.route.derived import outer_conditions
from ddm_core.route.hints import Hint
from ddm_core.route.targets import Picked, gene_route

__all__ = ["Layout", "layout_of"]


# -- compile time: occurrences, predicates, sides --------------------------------------------


@dataclass(slots=True)
class _Member:
    """One occurrence of a sharded table in a scope."""

    use: TableUse
    table: ShardedTable
    group: ShardedTable  # the binding group's first table: its strategies route the occurrence
    scope: int
    present: bool = False  # has a row in every row of its scope (not on an outer join's optional side)
    usable: frozenset[int] = frozenset()  # predicates (of its scope) that hold whenever it has a row
    canon: dict[str, str] = field(default_factory=dict)  # its sharding columns → its group's names for them
    routing: frozenset[str] = frozenset()  # the columns it routes by: sharding columns and a gene id column
    proof: frozenset[str] | None = None  # see _proof_columns (of its group)

    @classmethod
    def of(cls, use: TableUse, table: ShardedTable, group: ShardedTable, scope: int) -> _Member:
        canon, routing, proof = _facts(table, group)
        return cls(use, table, group, scope, canon=canon, routing=routing, proof=proof)

    @property
    def label(self) -> str:
        return f"{self.use.name} {self.use.alias}" if self.use.alias else self.use.name

    @property
    def qualifier(self) -> str:
        return self.use.alias or self.use.name


#: (table, group, canonical names, routing columns, proof columns) by (id(table), id(group)).
_FACTS: dict[tuple[int, int], tuple[ShardedTable, ShardedTable, dict[str, str], frozenset[str], frozenset[str] | None]] = {}


def _facts(table: ShardedTable, group: ShardedTable) -> tuple[dict[str, str], frozenset[str], frozenset[str] | None]:
    """What joins need to know of ``table`` in its ``group``; computed once per configuration's tables.

    (Tables are not hashable; an entry is used only while it holds these very objects.)
    """
    key = (id(table), id(group))
    found = _FACTS.get(key)
    if found is not None and found[0] is table and found[1] is group:
        return found[2], found[3], found[4]
    gene = gene_route(group)
    canon = _canonical(table, group)
    routing = frozenset(canon) | ({gene[0]} if gene else frozenset())
    proof = _proof_columns(group)
    if len(_FACTS) >= 1024:
        _FACTS.clear()  # configurations come and go on reload: keep the cache small
    _FACTS[key] = (table, group, canon, routing, proof)
    return canon, routing, proof


@dataclass(frozen=True, slots=True)
class _Pred:
    """A WHERE or ON predicate and when it holds.

    ``guard is None``: in every row of the scope (the WHERE). Otherwise in every
    row in which one of the ``guard`` occurrences has a row (an ON: the tables
    the join depends on).
    """

    node: exp.Expr
    guard: frozenset[int] | None


@dataclass(frozen=True, slots=True)
class _Side:
    """Occurrences of one scope whose rows, when they appear together, are on one node."""

    members: tuple[int, ...]
    group: ShardedTable
    scope: int
    top: bool  # a scope of the statement itself (not a subquery)
    present: bool  # one of them has a row in every row of the scope
    #: Condition sets whose nodes together are the side's nodes; a Scope: read its ``dnf`` when routing.
    conditions: tuple[Any, ...]
    slots: frozenset[int]  # template slots of its tables and of the subquery sides that follow it


#: One join step of a FROM clause: the joined item, its side (LEFT / RIGHT / FULL / ""), ON, USING.
_Step = tuple[exp.Expr, str, "exp.Expr | None", Sequence[exp.Expr]]


class _Joins:
    """The FROM / JOIN structure of one scope: predicates with their guards, optional occurrences."""

    def __init__(self, member_of: Mapping[int, int]) -> None:
        self.member_of = member_of  # id(exp.Table) → member index
        self.preds: list[_Pred] = []
        self.nullable: set[int] = set()
        self.seen: set[int] = set()
        self.shadows: set[str] = set()  # names of its derived tables / CTE references: they hide outer aliases
        # (USING names, members left of the join, members of the joined item, guard)
        self.usings: list[tuple[list[str], list[int], list[int], frozenset[int]]] = []

    def walk(self, first: exp.Expr | None, steps: Sequence[_Step]) -> None:
        self._chain(self._item(first), steps)

    def _item(self, node: exp.Expr | None) -> list[int]:
        if isinstance(node, exp.Table):
            own = [self.member_of[id(node)]] if id(node) in self.member_of else []
            if not own:
                self.shadows.add((node.alias or node.name).lower())
            self.seen.update(own)
            nested = node.args.get("joins") or []
            return self._chain(own, _steps(nested)) if nested else own
        if isinstance(node, (exp.Subquery, exp.Paren)) and not isinstance(node.this, exp.Query):
            return self._item(node.this)  # (a JOIN b ON ...): a nested join
        if isinstance(node, exp.Expr) and node.alias:
            self.shadows.add(node.alias.lower())
        return []  # a derived table, VALUES, a table function: no occurrence of this scope

    def _chain(self, left: list[int], steps: Sequence[_Step]) -> list[int]:
        # The guard of an inner ON stays open: a table joined later (inner or LEFT) has a row only
        # where the left part has one. A RIGHT / FULL join can null-extend the left part: closed.
        opened: list[set[int]] = []
        found: list[tuple[exp.Expr, set[int]]] = []
        for item, side, on, using in steps:
            right = self._item(item)
            if side == "LEFT":
                self.nullable.update(right)
                for g in opened:
                    g.update(right)
                guard = set(right)
            elif side == "RIGHT":
                self.nullable.update(left)
                opened = []
                guard = set(left)
            elif side == "FULL":
                self.nullable.update(left + right)
                opened = []
                guard = set()  # holds for matched pairs only: for no table alone
            else:
                for g in opened:
                    g.update(right)
                guard = set(left + right)
                opened.append(guard)
            if on is not None:
                found.append((on, guard))
            if using:
                names = [u.name.lower() for u in using if isinstance(u, (exp.Identifier, exp.Column))]
                self.usings.append((names, list(left), list(right), frozenset(guard)))
            left = left + right
        self.preds.extend(_Pred(node, frozenset(g)) for node, g in found)
        return left


def _steps(joins: Sequence[exp.Expr]) -> list[_Step]:
    return [
        (j.this, str(j.args.get("side") or "").upper(), j.args.get("on"), j.args.get("using") or ())
        for j in joins
        if isinstance(j, exp.Join)
    ]


def _conjuncts(node: exp.Expr) -> Iterator[exp.Expr]:
    """The top-level AND terms of a predicate."""
    if isinstance(node, exp.Paren):
        yield from _conjuncts(node.this)
    elif isinstance(node, exp.And):
        yield from _conjuncts(node.left)
        yield from _conjuncts(node.right)
    else:
        yield node


#: Comparisons that are never true when one side is NULL (a row of an outer join's
#: optional table is then there in every row the WHERE keeps).
_NULL_REJECTING = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.In, exp.Between, exp.Like)


def _proof_columns(group: ShardedTable) -> frozenset[str] | None:
    """The shard columns whose equality puts two rows of ``group`` on one node (``None``: none does).

    A level decided by a hint, or without a strategy over several targets, does
    not follow from the row's values.
    """
    table_targets = len(group.all_tables) if group.auto else max(len(t) for t in group.tables_by_source.values())
    levels = [(group.table_strategy, table_targets)]
    if not group.auto:
        levels.append((group.database_strategy, len(group.data_sources)))
    for strategy, targets in levels:
        if strategy.kind is StrategyKind.HINT or (strategy.kind is StrategyKind.NONE and targets > 1):
            return None
    return frozenset(c.lower() for c in group.sharding_columns)


def _canonical(table: ShardedTable, group: ShardedTable) -> dict[str, str]:
    """``table``'s sharding columns → the names its group's first table gives them (strategy positions)."""
    out: dict[str, str] = {}
    for mine, theirs in ((table.database_strategy, group.database_strategy), (table.table_strategy, group.table_strategy)):
        for a, b in zip(mine.columns, theirs.columns):
            out.setdefault(a.lower(), b.lower())
    return out


@dataclass(slots=True)
class _Builder:
    analysis: Analysis
    config: ShardingConfig
    params: Mapping[str, int]
    members: list[_Member] = field(default_factory=list)
    by_use: dict[int, int] = field(default_factory=dict)  # id(TableUse) → member
    joins: list[_Joins] = field(default_factory=list)  # per scope
    scope_of: dict[int, int] = field(default_factory=dict)  # id(Scope) → index

    # -- occurrences and their scopes ----------------------------------------------------

    def collect(self) -> None:
        scopes = self.analysis.scopes
        self.scope_of = {id(s): i for i, s in enumerate(scopes)}
        for index, scope in enumerate(scopes):
            # DELETE t FROM t ...: the t after DELETE names the FROM's table, it is no occurrence.
            targets = {id(t) for t in scope.node.args.get("tables") or []} if isinstance(scope.node, exp.Delete) else set()
            for use in scope.uses:
                table = self.config.table(use.key) if use.kind is TableKind.SHARDED else None
                if table is None or id(use.node) in targets:
                    continue
                self.by_use[id(use)] = len(self.members)
                self.members.append(_Member.of(use, table, _group_of(table, self.config), index))
        for index, scope in enumerate(scopes):
            self.joins.append(self._scope_joins(index, scope))

    def _scope_joins(self, index: int, scope: Scope) -> _Joins:
        node = scope.node
        member_of = {id(m.use.node): i for i, m in enumerate(self.members) if m.scope == index}
        joins = _Joins(member_of)
        from_ = node.args.get("from_") or node.args.get("from")
        first = from_.this if isinstance(from_, exp.From) else None
        steps = _steps(node.args.get("joins") or [])
        if isinstance(node, (exp.Update, exp.Delete)):
            # UPDATE t JOIN ...: the joins hang off the table; DELETE ... USING a, b: comma joins.
            extra = ([first] if first is not None else []) + list(node.args.get("using") or [])
            first = node.this
            steps += [(item, "", None, ()) for item in extra]
        joins.walk(first, steps)
        where = node.args.get("where")
        if where is not None:
            joins.preds.insert(0, _Pred(where.this, None))
        own = set(member_of.values())
        # An occurrence the walk did not place (an unusual FROM form) counts as optional.
        joins.nullable |= own - joins.seen
        rejected = self._null_rejected(index, where.this) if where is not None else set()
        for i in own:
            m = self.members[i]
            m.present = i not in joins.nullable or i in rejected
            m.usable = frozenset(k for k, p in enumerate(joins.preds) if p.guard is None or i in p.guard)
        return joins

    def _null_rejected(self, scope: int, where: exp.Expr) -> set[int]:
        out: set[int] = set()
        for term in _conjuncts(where):
            if isinstance(term, _NULL_REJECTING):
                for operand in (term.this, term.args.get("expression")):
                    if isinstance(operand, exp.Column):
                        found = self.resolve(operand, scope)
                        if found is not None and found[1]:
                            out.add(found[0])
        return out

    # -- column references ---------------------------------------------------------------

    def resolve(self, col: exp.Column, scope: int) -> tuple[int, bool] | None:
        """The occurrence ``col`` belongs to, and whether it is one of ``scope``'s own (not an outer one)."""
        scopes = self.analysis.scopes
        qualifier = col.table.lower() if col.table else ""
        if not qualifier:
            # An unqualified column is the one occurrence of this scope that routes by it (two
            # would make it ambiguous; an outer scope's would need this scope to lack it).
            name = col.name.lower()
            own = [i for i, m in enumerate(self.members) if m.scope == scope and name in m.routing]
            return (own[0], True) if len(own) == 1 else None
        s: Scope | None = scopes[scope]
        level = scope
        while s is not None:
            use = s.aliases().get(qualifier)
            if use is not None:
                member = self.by_use.get(id(use))
                return (member, level == scope) if member is not None else None
            if level < len(self.joins) and qualifier in self.joins[level].shadows:
                return None  # a derived table of that scope
            s = s.parent
            level = self.scope_of.get(id(s), -1) if s is not None else -1
        return None

    def link_of(self, term: exp.Expr, scope: int) -> tuple[int, int, str] | None:
        """``(member, member, canonical column)`` when ``term`` equates corresponding shard columns."""
        if not isinstance(term, exp.EQ) or not isinstance(term.left, exp.Column) or not isinstance(term.right, exp.Column):
            return None
        a, b = self.resolve(term.left, scope), self.resolve(term.right, scope)
        if a is None or b is None or a[0] == b[0]:
            return None
        ma, mb = self.members[a[0]], self.members[b[0]]
        if ma.group is not mb.group:
            return None
        ca = ma.canon.get(term.left.name.lower())
        cb = mb.canon.get(term.right.name.lower())
        if ca is None or ca != cb:
            return None
        return a[0], b[0], ca

    # -- sides -------------------------------------------------------------------------------

    def sides(self) -> list[_Side]:
        """The statement's sides, scope by scope (parents first); a correlated subquery's joins its outer side."""
        scopes = self.analysis.scopes
        placed: dict[int, int] = {}  # member → index of its side in `out`
        out: list[_Side] = []
        in_links = self._in_links()
        for index, scope in enumerate(scopes):
            own = [i for i, m in enumerate(self.members) if m.scope == index]
            if not own:
                continue
            classes, correlated = self._classes(index, own)
            for cls in classes:
                anchor = self._anchor(cls, correlated, in_links)
                if anchor is not None and anchor in placed:
                    side = out[placed[anchor]]
                    out[placed[anchor]] = replace(side, slots=side.slots | {self.members[i].use.slot for i in cls})
                    for i in cls:
                        placed[i] = placed[anchor]
                    continue
                for i in cls:
                    placed[i] = len(out)
                out.append(self._side(index, scope, cls, own))
        return out

    def _classes(self, scope: int, own: list[int]) -> tuple[list[list[int]], list[tuple[int, int, str, frozenset[int] | None]]]:
        """Sides of one scope, and its correlation links ``(own member, outer member, column, guard)``."""
        # Per pair of occurrences and shard column: which way "has a row ⇒ the other has the same value" holds.
        ways: dict[tuple[int, int], dict[str, set[tuple[int, int]]]] = {}
        correlated: list[tuple[int, int, str, frozenset[int] | None]] = []
        joins = self.joins[scope]
        terms: list[tuple[exp.Expr, frozenset[int] | None]] = [
            (t, p.guard) for p in joins.preds for t in _conjuncts(p.node)
        ]
        for term, guard in terms:
            link = self.link_of(term, scope)
            if link is None:
                continue
            a, b, column = link
            own_a, own_b = self.members[a].scope == scope, self.members[b].scope == scope
            if own_a and own_b:
                self._add_way(ways, a, b, column, guard)
            elif own_a or own_b:
                mine, outer = (a, b) if own_a else (b, a)
                correlated.append((mine, outer, column, guard))
        for names, left, right, guard in joins.usings:
            for name in names:
                lefts = [i for i in left if name in self.members[i].canon]
                rights = [i for i in right if name in self.members[i].canon]
                if len(lefts) == 1 and len(rights) == 1:
                    a, b = lefts[0], rights[0]
                    ma, mb = self.members[a], self.members[b]
                    canon = ma.canon.get(name)
                    if ma.group is mb.group and canon is not None and canon == mb.canon.get(name):
                        self._add_way(ways, a, b, canon, guard)
        parent = {i: i for i in own}

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        directed: list[tuple[int, int]] = []
        for (a, b), per_column in ways.items():
            proof = self.members[a].proof
            if not proof or set(per_column) != proof:
                continue
            both = set.intersection(*per_column.values())
            if (a, b) in both and (b, a) in both:
                parent[find(a)] = find(b)
            directed.extend(both)
        changed = True
        while changed:  # an optional occurrence joins the one side it depends on
            changed = False
            for root in {find(i) for i in own}:
                targets = {find(y) for x, y in directed if find(x) == root and find(y) != root}
                if len(targets) == 1:
                    parent[root] = targets.pop()
                    changed = True
        classes: dict[int, list[int]] = {}
        for i in own:
            classes.setdefault(find(i), []).append(i)
        return list(classes.values()), correlated

    @staticmethod
    def _add_way(ways: dict[tuple[int, int], dict[str, set[tuple[int, int]]]], a: int, b: int, column: str,
                 guard: frozenset[int] | None) -> None:
        key = (a, b) if a < b else (b, a)
        found: set[tuple[int, int]] = set()
        if guard is None or a in guard:
            found.add((a, b))
        if guard is None or b in guard:
            found.add((b, a))
        per_column = ways.setdefault(key, {})
        per_column[column] = per_column.get(column, set()) | found

    def _anchor(self, cls: list[int], correlated: list[tuple[int, int, str, frozenset[int] | None]],
                in_links: dict[int, int]) -> int | None:
        """The outer occurrence a subquery's side is correlated with on all its shard columns, if any."""
        members = set(cls)
        per_outer: dict[int, set[str]] = {}
        for mine, outer, column, guard in correlated:
            if mine in members and (guard is None or members <= guard):
                per_outer.setdefault(outer, set()).add(column)
        proof = self.members[cls[0]].proof
        for outer, columns in per_outer.items():
            if proof and columns == proof:
                return outer
        for i in cls:
            if i in in_links:
                return in_links[i]
        return None

    def _in_links(self) -> dict[int, int]:
        """``o.user_id IN (SELECT i.user_id ...)`` ANDed into a WHERE: subquery occurrence → the outer one.

        For an outer row only subquery rows with its shard value can be in the list, and
        they are on its node. (Not under NOT: a NULL elsewhere would turn NOT IN to NULL.)
        """
        out: dict[int, int] = {}
        scopes = self.analysis.scopes
        by_node = {id(s.node): i for i, s in enumerate(scopes)}
        for index, scope in enumerate(scopes):
            where = scope.node.args.get("where")
            for term in _conjuncts(where.this) if where is not None else ():
                query = term.args.get("query") if isinstance(term, exp.In) else None
                if query is None:
                    continue
                inner = query.this if isinstance(query, exp.Subquery) else query
                if not isinstance(term.this, exp.Column) or not isinstance(inner, exp.Select):
                    continue
                items = inner.expressions
                item = items[0].this if len(items) == 1 and isinstance(items[0], exp.Alias) else items[0]
                sub = by_node.get(id(inner))
                outer = self.resolve(term.this, index)
                if len(items) != 1 or not isinstance(item, exp.Column) or sub is None or outer is None or not outer[1]:
                    continue
                found = self.resolve(item, sub)
                if found is None or not found[1]:
                    continue
                a, b = self.members[outer[0]], self.members[found[0]]
                column = a.canon.get(term.this.name.lower())
                if (a.group is b.group and column is not None and a.proof == frozenset({column})
                        and column == b.canon.get(item.name.lower())):
                    out[found[0]] = outer[0]
        return out

    def _side(self, index: int, scope: Scope, cls: list[int], own: list[int]) -> _Side:
        members = [self.members[i] for i in cls]
        group = members[0].group
        joins = self.joins[index]
        every = frozenset(range(len(joins.preds)))
        top = scope.parent is None
        conditions: list[Any]
        if top and group is self.analysis.primary and set(cls) == set(own) and all(m.usable == every for m in members):
            conditions = [scope]  # the scope's own DNF holds for all of them (routes as it always did)
        else:
            conditions = []
            for usable in dict.fromkeys(m.usable for m in members):
                conditions.append(self._dnf(index, scope, cls, [joins.preds[k].node for k in sorted(usable)]))
        return _Side(
            members=tuple(cls),
            group=group,
            scope=index,
            top=top,
            present=any(m.present for m in members),
            conditions=tuple(conditions),
            slots=frozenset(m.use.slot for m in members),
        )

    def _dnf(self, index: int, scope: Scope, cls: list[int], predicates: list[exp.Expr]) -> list[Conjunction] | None:
        """The conditions ``predicates`` put on the side's shard columns (``None``: no restriction)."""
        members = set(cls)
        group = self.members[cls[0]].group
        gene = gene_route(group)

        def column_of(col: exp.Column) -> str | None:
            found = self.resolve(col, index)
            if found is None or not found[1] or found[0] not in members:
                return None
            m = self.members[found[0]]
            name = col.name.lower()
            if gene is not None and name == gene[0]:
                return name
            return m.canon.get(name)

        trees = [extract(p, column_of, self.params) for p in predicates]
        trees += outer_conditions(scope.node, column_of, self.params)  # a derived table: the enclosing WHEREs
        return to_dnf(conjoin(trees)) if trees else None


# -- the layout ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Layout:
    """How the sharded tables of one compiled statement are placed on units.

    Attributes:
        sides: The statement's sides (a subquery side that follows an outer one is part of it).
        members: Every occurrence of a sharded table in a scope.
        slot_tables: Per template slot, its sharded table (``None``: not a sharded table).
        slot_groups: Per slot, the first table of that table's binding group (its router).
        primary: The statement's primary table (its first sharded table's group).
        tops: Number of scopes of the statement itself (UNION branches).
        tops_with_sides: Those of them that have sharded tables.
        distinct_union: The statement is a UNION (not ALL): a row several units return comes back once.
        set_operation: ``"INTERSECT"`` / ``"EXCEPT"``: rows of one branch must meet the other's.
        kind: ``"query"``; ``"drop"`` (DROP / TRUNCATE); ``"subject"`` (CREATE / ALTER: the
            first table changes, the others are referred to); ``"other"``.
        trivial: One side holds every sharded table and routes by its scope's own
            conditions: the statement routes as one table does (the fast path may take it).
    """

    sides: tuple[_Side, ...]
    members: tuple[_Member, ...]
    slot_tables: tuple[ShardedTable | None, ...]
    slot_groups: tuple[ShardedTable | None, ...]
    primary: ShardedTable
    tops: int
    tops_with_sides: frozenset[int]
    distinct_union: bool
    set_operation: str | None
    kind: str
    trivial: bool

    @property
    def scope(self) -> Scope | None:
        """The scope whose ``dnf`` routes a trivial layout (``None``: not trivial)."""
        condition = self.sides[0].conditions[0] if self.trivial else None
        return condition if isinstance(condition, Scope) else None

    def coerced(self, ctx: RouteContext) -> tuple[Layout, Normalizer | None]:
        """This layout with the literals its own conditions compare with integer shard columns read
        as integers, and the normalizer for their params (``None``: none); see :mod:`ddm_core.route.coerce`.

        Conditions that are a scope's own DNF are coerced with the scope.
        """
        params: dict[int, tuple[str, str]] = {}
        sides = []
        for side in self.sides:
            columns = integer_columns(ctx, side.group, [self.members[i].table.name for i in side.members])
            if columns:
                side = replace(side, conditions=tuple(
                    c if isinstance(c, Scope) or not c else coerce_dnf(c, columns, side.group.name, params)
                    for c in side.conditions
                ))
            sides.append(side)
        return replace(self, sides=tuple(sides)), normalizer(params)

    # -- route time ------------------------------------------------------------------------

    def place(
        self,
        ctx: RouteContext,
        bound: Sequence[Any],
        hint: Hint | None,
        check_full: Callable[[ShardedTable, int], None] | None = None,
    ) -> Picked:
        """The units of one call: each side's nodes, one side driving per scope, every other pinned.

        Args:
            check_full: Called with the table and node count of each side of the statement
                that no condition narrows, before anything else is checked: a statement the
                full-route governance refuses is refused for that first.

        Raises:
            UnsupportedSQLError: the conditions do not prove that the rows a unit
                must combine are on its node.
        """
        routes = [self._route(side, ctx, bound, hint) for side in self.sides]
        if check_full is not None:
            for side, picked in zip(self.sides, routes):
                if side.top and picked.full:
                    check_full(side.group, len(picked.nodes))
        group = self._driving_group(routes)
        drivers = self._drivers(group, routes)
        fixed = [k for k in range(len(self.sides)) if k not in drivers.values()]
        lead = next(iter(drivers.values()), fixed[0] if fixed else None)  # the side refusals name first
        nodes = sorted(set().union(*(routes[k].nodes for k in drivers.values())))
        if not nodes:
            nodes = [self._fallback(group, fixed, routes)]
        if len(nodes) > 1:
            self._check_spread(drivers, routes, len(nodes))
        units = tuple(self._unit(group, i, drivers, fixed, routes, lead) for i in nodes)
        driven = [routes[k] for k in drivers.values()]
        full = any(r.full for r in driven)
        note = "; ".join(dict.fromkeys(r.note for r in driven if r.note))
        if group is self.primary and all(index in (i, -1) for (_, slots), i in zip(units, nodes) for index in slots):
            return Picked(tuple(nodes), full, note)
        return Picked(tuple(nodes), full, note, table=group, units=units)

    def place_every(self, ctx: RouteContext, first: bool) -> Picked:
        """DDL / SHOW: every node (``first``: the first) of the table that has several; the others have one."""
        groups: list[ShardedTable] = []
        for g in self.slot_groups:
            if g is not None and all(g is not seen for seen in groups):
                groups.append(g)
        if len(groups) <= 1:
            every = ctx.router_of(self.primary).every
            return Picked(every[:1] if first else every, False, "")
        spread = [g for g in groups if g.shard_count > 1]
        if len(spread) > 1:
            raise UnsupportedSQLError(
                f"the statement names sharded tables {spread[0].name!r} and {spread[1].name!r}, which are not bound "
                f"and have {spread[0].shard_count} and {spread[1].shard_count} physical tables: no node pairs them "
                "up. Run one statement per table",
                tables=(spread[0].name, spread[1].name),
            )
        group = spread[0] if spread else self.primary
        if group is not self.primary and self.kind == "subject":
            raise UnsupportedSQLError(
                f"{self.primary.name!r} has one physical table but refers to {group.name!r}, which has "
                f"{group.shard_count}: no node holds all of {group.name!r}",
                tables=(self.primary.name, group.name),
            )
        every = ctx.router_of(group).every
        nodes = every[:1] if first else every
        if len(nodes) > 1 and self.kind == "drop":
            other = next(t for t, g in zip(self.slot_tables, self.slot_groups) if t is not None and g is not group)
            raise UnsupportedSQLError(
                f"the statement drops {group.name!r} ({len(nodes)} physical tables) together with {other.name!r}, "
                "which has one: that one would be dropped once per node. Drop them in separate statements",
                tables=(group.name, other.name),
            )
        units = []
        for i in nodes:
            ds = group.data_nodes[i].data_source
            slots = []
            for table, g in zip(self.slot_tables, self.slot_groups):
                if table is None or g is None:
                    slots.append(-1)
                elif g is group:
                    slots.append(i)
                elif g.data_nodes[0].data_source != ds:
                    raise UnsupportedSQLError(
                        f"{table.name!r} lives only on {table.data_nodes[0]}, but {group.name!r} has nodes in "
                        f"{ds!r}; a statement cannot reach tables of another data source",
                        tables=(group.name, table.name),
                        data_source=ds,
                    )
                else:
                    slots.append(0)
            units.append((ds, tuple(slots)))
        return Picked(tuple(nodes), False, "", table=group, units=tuple(units))

    # -- internals ---------------------------------------------------------------------------

    def _route(self, side: _Side, ctx: RouteContext, bound: Sequence[Any], hint: Hint | None) -> Picked:
        router = ctx.router_of(side.group)
        if hint is not None and hint.table is not None and side.group is not self.primary:
            hint = replace(hint, table=None)  # a forced physical table is one of the primary's
        sources = ctx.hinted_sources(side.group, hint)
        found: set[int] = set()
        full = False
        notes: list[str] = []
        for condition in side.conditions:
            dnf = condition.dnf if isinstance(condition, Scope) else condition
            picked = router.route(dnf, bound, hint, sources)
            found.update(picked.nodes)
            full = full or picked.full
            if picked.note:
                notes.append(picked.note)
        return Picked(tuple(sorted(found)), full, "; ".join(dict.fromkeys(notes)))

    def _driving_group(self, routes: Sequence[Picked]) -> ShardedTable:
        """Whose nodes the units are: a side's that reaches several, else the primary's."""
        for k, side in enumerate(self.sides):
            if side.top and len(routes[k].nodes) > 1:
                return side.group
        if any(side.top and side.group is self.primary for side in self.sides):
            return self.primary
        return next((side.group for side in self.sides if side.top), self.primary)

    def _drivers(self, group: ShardedTable, routes: Sequence[Picked]) -> dict[int, int]:
        """Per top scope, the side whose nodes the units are (at most one may reach several)."""
        drivers: dict[int, int] = {}
        for scope in sorted(self.tops_with_sides):
            spread = [k for k, s in enumerate(self.sides) if s.scope == scope and len(routes[k].nodes) > 1]
            if len(spread) > 1:
                self._refuse(spread[0], spread[1], routes)
            if spread:
                if self.sides[spread[0]].group is not group:  # UNION branches over unrelated tables
                    self._refuse(next(iter(drivers.values())), spread[0], routes)
                drivers[scope] = spread[0]
        for scope in sorted(self.tops_with_sides - set(drivers)):
            candidates = [k for k, s in enumerate(self.sides) if s.scope == scope and s.group is group]
            best = [k for k in candidates if self.sides[k].present and routes[k].nodes] or candidates
            if best:
                drivers[scope] = best[0]
        return drivers

    def _fallback(self, group: ShardedTable, fixed: Sequence[int], routes: Sequence[Picked]) -> int:
        """The node a statement runs on when its driving side can match no row (it answers with none)."""
        for k in fixed:
            if routes[k].nodes:
                side = self.sides[k]
                if side.group is group:
                    return routes[k].nodes[0]
                i = _first_in(group, side.group.data_nodes[routes[k].nodes[0]].data_source)
                if i >= 0:
                    return i
        return 0

    def _check_spread(self, drivers: Mapping[int, int], routes: Sequence[Picked], n: int) -> None:
        """Several units: each row of each top scope must come from exactly one of them."""
        if self.set_operation is not None:
            raise UnsupportedSQLError(
                f"{self.set_operation} of queries that reach {n} nodes: a row of one branch may have its match "
                "on another node. Route every branch to one shard (the same shard key value)",
                construct=self.set_operation,
            )
        for scope in range(self.tops):
            k = drivers.get(scope)
            if k is None:
                if self.distinct_union:
                    continue  # UNION removes the copies
                sides = [s for s in self.sides if s.scope == scope]
                what = f"the branch over {self._label(sides[0])}" if sides else "a branch without a sharded table"
                raise UnsupportedSQLError(
                    f"UNION ALL over {n} nodes: {what} would be returned once per node. Use UNION, or route "
                    "every branch to one shard",
                    construct="UNION ALL",
                )
            side = self.sides[k]
            if not side.present:
                others = [j for j, s in enumerate(self.sides) if s.scope == scope and j != k]
                if others:  # another sharded table of the scope keeps the rows: their join is what is missing
                    self._refuse(others[0], k, routes)
                label = self._label(side)
                raise UnsupportedSQLError(
                    f"{label} is on the optional side of an outer join and reaches {n} nodes: a row that matches "
                    f"none of its rows would come back from each of them. Pin {label} to one shard (its shard "
                    "key), or join it from a table it shares a node with",
                    construct="outer join",
                    tables=tuple(dict.fromkeys(self.members[i].use.name for i in side.members)),
                )

    def _unit(self, group: ShardedTable, i: int, drivers: Mapping[int, int], fixed: Sequence[int],
              routes: Sequence[Picked], lead: int | None) -> tuple[str, tuple[int, ...]]:
        """The data source of the unit at ``group``'s node ``i``, and the node of every slot's table there."""
        ds = group.data_nodes[i].data_source
        at: dict[int, int] = {}  # slot → node index of its table
        setter: dict[int, int] = {}  # slot → the side that placed it
        for k in drivers.values():
            for slot in self.sides[k].slots:
                at[slot], setter[slot] = i, k
        for k in fixed:
            side, picked = self.sides[k], routes[k]
            if len(picked.nodes) > 1:
                self._refuse(lead, k, routes)
            node = picked.nodes[0] if picked.nodes else None
            if node is not None and side.group.data_nodes[node].data_source != ds:
                self._refuse(lead, k, routes, f"is on {side.group.data_nodes[node]} while the statement runs in {ds!r}")
            for slot in sorted(side.slots):
                want = node
                if want is None:  # no row of it can match: any of its nodes in the unit's data source answers
                    want = at.get(slot, _first_in(side.group, ds))
                    if want < 0:
                        self._refuse(lead, k, routes, f"has no node in {ds!r}, where the statement runs")
                if at.get(slot, want) != want:
                    self._refuse(setter[slot], k, routes)
                at[slot], setter[slot] = want, k
        slots = []
        for slot, (table, g) in enumerate(zip(self.slot_tables, self.slot_groups)):
            if table is None or g is None:
                slots.append(-1)
            elif slot in at:
                slots.append(at[slot])
            elif g is group:
                slots.append(i)  # outside every scope (an INSERT ... SELECT target): follows the unit
            else:
                raise UnsupportedSQLError(
                    f"sharded table {table.name!r} appears where no shard condition can reach it, in a statement "
                    f"routed by {group.name!r}'s shard key",
                    table=table.name,
                )
        return ds, tuple(slots)

    def _refuse(self, a: int | None, b: int, routes: Sequence[Picked], where: str | None = None) -> NoReturn:
        """Refuse the statement: the rows of sides ``a`` and ``b`` (``a`` may be ``None``) need not share a node."""
        side_b = self.sides[b]
        mb = self.members[side_b.members[0]]
        if a is None or a == b:
            n = len(routes[b].nodes)
            if not side_b.top:
                raise UnsupportedSQLError(
                    f"subquery on sharded table(s) {self._names(side_b)} reaches {n} nodes, and a subquery or "
                    "derived table runs within the statement's one shard: pin it with its shard key, or "
                    "correlate it with the outer table on the shard key",
                    construct="subquery",
                    tables=(mb.use.name,),
                )
            raise UnsupportedSQLError(
                f"{self._label(side_b)} reaches {n} nodes, where the statement can run on one only",
                tables=(mb.use.name,),
            )
        side_a = self.sides[a]
        ma = self.members[side_a.members[0]]
        reach = f"{self._label(side_a)} reaches {len(routes[a].nodes)} node(s), {self._label(side_b)} " + (
            where or f"{len(routes[b].nodes)}")
        if side_b.members[0] < side_a.members[0]:  # name the tables in the order the statement does
            side_a, side_b, ma, mb = side_b, side_a, mb, ma
        tables = tuple(dict.fromkeys((ma.use.name, mb.use.name)))
        if not (side_a.top and side_b.top):
            inner, outer = (side_b, ma) if not side_b.top else (side_a, mb)
            mi = self.members[inner.members[0]]
            raise UnsupportedSQLError(
                f"subquery on sharded table(s) {self._names(inner)} is not constrained to the statement's "
                f"shard ({reach}): {_missing(mi, outer, subquery=True)}",
                construct="subquery",
                tables=tables,
            )
        raise UnsupportedSQLError(
            f"join of {ma.label} and {mb.label} does not prove their rows share a node ({reach}): {_missing(ma, mb)}",
            construct="join",
            tables=tables,
        )

    def _label(self, side: _Side) -> str:
        return " and ".join(self.members[i].label for i in side.members)

    def _names(self, side: _Side) -> str:
        return ", ".join(dict.fromkeys(self.members[i].use.name for i in side.members))


def _missing(a: _Member, b: _Member, subquery: bool = False) -> str:
    """What the user can write so that the rows of ``a`` and ``b`` provably share a node."""
    proof = _proof_columns(a.group)
    if a.group is b.group and proof:
        names_a = {v: k for k, v in _canonical(a.table, a.group).items()}
        names_b = {v: k for k, v in _canonical(b.table, b.group).items()}
        condition = " AND ".join(f"{a.qualifier}.{names_a[c]} = {b.qualifier}.{names_b[c]}" for c in sorted(proof))
        where = "to the subquery's WHERE (correlate it on the shard key)" if subquery else \
            "to the join condition (or the WHERE)"
        return f"add {condition} {where}, or give both the same shard key value so that one shard holds them"
    return (f"{a.table.name!r} and {b.table.name!r} are not bound tables, so only shard key conditions that pin "
            "both to one shard in one data source keep them on one node (or make one of them a broadcast table)")


def _first_in(table: ShardedTable, ds: str) -> int:
    """The index of ``table``'s first node in data source ``ds`` (-1: none)."""
    return next((i for i, n in enumerate(table.data_nodes) if n.data_source == ds), -1)


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
    builder = _Builder(analysis, config, params)
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
        slot_groups.append(_group_of(table, config) if table is not None else None)
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
    if table is None or _group_of(table, config) is not primary:
        return None
    slot_tables = tuple(table if n == sharded[0].slot else None for n in range(len(analysis.slots)))
    return Layout(
        sides=(_Side((0,), primary, 0, True, True, (scope,), frozenset({sharded[0].slot})),),
        members=(replace(_Member.of(sharded[0], table, primary, 0), present=True),),
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


def _group_of(table: ShardedTable, config: ShardingConfig) -> ShardedTable:
    found = config.binding_group_of(table.name)
    return (config.table(found.tables[0]) if found else None) or table


def _root(analysis: Analysis) -> exp.Expr | None:
    node: exp.Expr | None = analysis.uses[0].node if analysis.uses else None
    while node is not None and node.parent is not None:
        node = node.parent
    return node


def _check_key_sets(tree: exp.Update, builder: _Builder) -> None:
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
