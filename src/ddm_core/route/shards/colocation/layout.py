"""Route time of the co-location proof: :class:`Layout` places each side on the units
(see :mod:`ddm_core.route.shards.colocation`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, NoReturn, Sequence


from ddm_core.errors import UnsupportedSQLError
from ddm_core.metadata.model import ShardedTable
from ddm_core.route.context import RouteContext
from ddm_core.route.hints import Hint
from ddm_core.route.shards.analyze import Scope
from ddm_core.route.shards.coerce import Normalizer, coerce_dnf, integer_columns, normalizer
from ddm_core.route.shards.targets import Picked

from ddm_core.route.shards.colocation.sides import Member, Side, canonical, proof_columns

__all__ = ["Layout"]


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

    sides: tuple[Side, ...]
    members: tuple[Member, ...]
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
        as integers, and the normalizer for their params (``None``: none); see :mod:`ddm_core.route.shards.coerce`.

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

    def _route(self, side: Side, ctx: RouteContext, bound: Sequence[Any], hint: Hint | None) -> Picked:
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
            raise _unpaired(
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
                raise _unpaired(
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
                raise _unpaired(
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
                raise _unpaired(
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
                raise _unpaired(
                    f"subquery on sharded table(s) {self._names(side_b)} reaches {n} nodes, and a subquery or "
                    "derived table runs within the statement's one shard: pin it with its shard key, or "
                    "correlate it with the outer table on the shard key",
                    construct="subquery",
                    tables=(mb.use.name,),
                )
            raise _unpaired(
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
            raise _unpaired(
                f"subquery on sharded table(s) {self._names(inner)} is not constrained to the statement's "
                f"shard ({reach}): {_missing(mi, outer, subquery=True)}",
                construct="subquery",
                tables=tables,
            )
        raise _unpaired(
            f"join of {ma.label} and {mb.label} does not prove their rows share a node ({reach}): {_missing(ma, mb)}",
            construct="join",
            tables=tables,
        )

    def _label(self, side: Side) -> str:
        return " and ".join(self.members[i].label for i in side.members)

    def _names(self, side: Side) -> str:
        return ", ".join(dict.fromkeys(self.members[i].use.name for i in side.members))


def _missing(a: Member, b: Member, subquery: bool = False) -> str:
    """What the user can write so that the rows of ``a`` and ``b`` provably share a node."""
    proof = proof_columns(a.group)
    if a.group is b.group and proof:
        names_a = {v: k for k, v in canonical(a.table, a.group).items()}
        names_b = {v: k for k, v in canonical(b.table, b.group).items()}
        condition = " AND ".join(f"{a.qualifier}.{names_a[c]} = {b.qualifier}.{names_b[c]}" for c in sorted(proof))
        where = "to the subquery's WHERE (correlate it on the shard key)" if subquery else \
            "to the join condition (or the WHERE)"
        return f"add {condition} {where}, or give both the same shard key value so that one shard holds them"
    return (f"{a.table.name!r} and {b.table.name!r} are not bound tables, so only shard key conditions that pin "
            "both to one shard in one data source keep them on one node (or make one of them a broadcast table)")


def _unpaired(message: str, **context: Any) -> UnsupportedSQLError:
    """A refusal because rows the statement combines need not share a node: a SELECT so refused can
    still be answered by reading its parts (``across_nodes``; docs/cross-node-queries.md)."""
    return UnsupportedSQLError(message, across_nodes=True, **context)


def _first_in(table: ShardedTable, ds: str) -> int:
    """The index of ``table``'s first node in data source ``ds`` (-1: none)."""
    return next((i for i, n in enumerate(table.data_nodes) if n.data_source == ds), -1)
