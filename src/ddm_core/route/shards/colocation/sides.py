"""Compile time of the co-location proof: the sharded table occurrences of each scope, the
predicates that hold for their rows, and the sides they form (see :mod:`ddm_core.route.shards.colocation`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping, Sequence

from sqlglot import exp

from ddm_core.metadata.model import ShardedTable, ShardingConfig, StrategyKind, TableKind
from ddm_core.route.shards.analyze import Analysis, Scope, TableUse
from ddm_core.route.shards.conditions import Conjunction, conjoin, extract, to_dnf
from ddm_core.route.shards.derived import outer_conditions
from ddm_core.route.shards.targets import gene_route

__all__ = ["Builder", "Member", "Side", "canonical", "group_of", "proof_columns"]


# -- compile time: occurrences, predicates, sides --------------------------------------------


@dataclass(slots=True)
class Member:
    """One occurrence of a sharded table in a scope."""

    use: TableUse
    table: ShardedTable
    group: ShardedTable  # the binding group's first table: its strategies route the occurrence
    scope: int
    present: bool = False  # has a row in every row of its scope (not on an outer join's optional side)
    usable: frozenset[int] = frozenset()  # predicates (of its scope) that hold whenever it has a row
    canon: dict[str, str] = field(default_factory=dict)  # its sharding columns → its group's names for them
    routing: frozenset[str] = frozenset()  # the columns it routes by: sharding columns and a gene id column
    proof: frozenset[str] | None = None  # see proof_columns (of its group)

    @classmethod
    def of(cls, use: TableUse, table: ShardedTable, group: ShardedTable, scope: int) -> Member:
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
    canon = canonical(table, group)
    routing = frozenset(canon) | ({gene[0]} if gene else frozenset())
    proof = proof_columns(group)
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
class Side:
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


def proof_columns(group: ShardedTable) -> frozenset[str] | None:
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


def canonical(table: ShardedTable, group: ShardedTable) -> dict[str, str]:
    """``table``'s sharding columns → the names its group's first table gives them (strategy positions)."""
    out: dict[str, str] = {}
    for mine, theirs in ((table.database_strategy, group.database_strategy), (table.table_strategy, group.table_strategy)):
        for a, b in zip(mine.columns, theirs.columns):
            out.setdefault(a.lower(), b.lower())
    return out


@dataclass(slots=True)
class Builder:
    analysis: Analysis
    config: ShardingConfig
    params: Mapping[str, int]
    members: list[Member] = field(default_factory=list)
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
                self.members.append(Member.of(use, table, group_of(table, self.config), index))
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

    def sides(self) -> list[Side]:
        """The statement's sides, scope by scope (parents first); a correlated subquery's joins its outer side."""
        scopes = self.analysis.scopes
        placed: dict[int, int] = {}  # member → index of its side in `out`
        out: list[Side] = []
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

    def _side(self, index: int, scope: Scope, cls: list[int], own: list[int]) -> Side:
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
        return Side(
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


def group_of(table: ShardedTable, config: ShardingConfig) -> ShardedTable:
    """The first table of ``table``'s binding group (``table`` itself when it has none): its router."""
    found = config.binding_group_of(table.name)
    return (config.table(found.tables[0]) if found else None) or table

