"""SELECTs whose rows need not share a node: read each sharded table's part, join the copies on one node.

When the co-location proof (:mod:`ddm_core.route.shards.colocation`) cannot
show that the rows a SELECT pairs live on one node, running it per node would
lose rows. Instead of refusing it, the router cuts it (:mod:`.parts`): one
*part* per sharded table occurrence, a SELECT of that table alone with the
conditions that hold for its rows and the columns the statement uses, routed
as any statement is. Each part's rows are copied into a temporary table on one
data source (the *gathering node*), and the statement itself runs there over
the copies: that server joins, groups, orders and compares strings as one
unsharded database would, because it is one (docs/cross-node-queries.md).

Parts are read one after another, those with conditions of their own first.
A part joined to an already read part by an equality that must hold for its
rows is *narrowed*: it reads only rows whose column is among the values the
other part returned (``IN (...)``, routed by key when it is the shard key): a
batched nested loop. Otherwise both sides are read whole and the gathering
node's server joins them: a hash join (or an index join on the copies' keys).
Two other strategies avoid the gathering node: a *client join* for simple
equi-joins (:mod:`.local`), and a *broadcast copy*, where the other parts are
copied beside the widest part's shards and the statement runs there per node,
merged as any multi-shard SELECT. An INSERT ... SELECT whose rows leave their
nodes is :mod:`.insert_select`'s.

This module compiles a statement once per SQL text (:func:`compile_cross_node`)
and routes it per call (:meth:`CrossNodeStatement.route`); the top-level
``crossnode`` package runs the plan.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from sqlglot import exp

from ddm_core.dialects import INPUT, dialect_for
from ddm_core.errors import UnsupportedSQLError
from ddm_core.metadata.model import ShardingConfig, SingleTable, TableKind
from ddm_core.route.crossnode.local import LocalJoin, local_join
from ddm_core.route.crossnode.parts import Equality, Occurrence, cut
from ddm_core.route.hints import HINT_VAR
from ddm_core.route.plan import EXPLAIN_COLUMNS, RouteKind, RoutePlan
from ddm_core.route.table_schema import TableSchema, column_kind

__all__ = ["TEMP_PREFIX", "MAX_KEYS", "Part", "CrossNodeStatement", "CrossNodePlan", "ExplainPlan",
           "ExplainedStatement", "compile_cross_node",
           "pyformat_sql", "params_for", "with_keys", "copy_source"]

#: Temporary copies are named ``ddm_x<k>``: per connection, dropped after the statement.
TEMP_PREFIX = "ddm_x"
#: Most distinct values one narrowed read sends as ``IN (...)``; with more, the part is read whole.
MAX_KEYS = 4096
#: Rows fetched from a part and inserted into its copies at a time.
COPY_BATCH = 1000



class Part(NamedTuple):
    """One sharded table occurrence's rows, read alone (and copied into ``temp`` unless joined in the client)."""

    number: int
    table: str  # logic table, as written
    qualifier: str  # what the statement calls it
    temp: str  # its copy's name, wherever copies go
    physical: str  # a physical table of it on the gathering node: the copy there takes its column types
    columns: tuple[str, ...] | None  # None: every column
    read: str  # SELECT of its rows (pyformat placeholders %(pN)s), without narrowing
    pushed: str  # the pushed conditions, for explain ("" none)
    keys: tuple[str, ...]  # columns compared by equality with another part: indexed on the copy (copy.py)
    pairs: tuple[tuple[str, int, str], ...] = ()  # (its column, the other part, that part's column) per equality
    declared: tuple[tuple[str, str], ...] = ()  # (key column, lower case; its kind) where the table's schema says


class _Push(NamedTuple):
    """The statement with every part but the driver's renamed to copies declared broadcast tables."""

    final: str
    router: Any


@dataclass(frozen=True)
class CrossNodeStatement:
    """A cross-node SELECT compiled once per SQL text."""

    parts: tuple[Part, ...]
    narrowing: tuple[Equality, ...]
    narrowed: Mapping[tuple[int, str], str]  # (part, column) → its read with ``AND column IN (<keys>)``
    final: str  # the statement over the copies (pyformat)
    gather: str  # the gathering node's data source
    dialect: str  # the gathering node's backend
    reason: str  # why it cannot run per node
    final_router: Any = field(compare=False)  # routes ``final``: the copies are single tables on ``gather``
    pristine: exp.Expr = field(compare=False)  # the parsed statement, for the broadcast variants
    positions: tuple[int, ...]  # each part's occurrence: its index among the tree's tables
    config: ShardingConfig = field(compare=False)
    router_for: Callable[[ShardingConfig], Any] = field(compare=False)  # a router of a derived configuration
    local: LocalJoin | None  # the statement's shape as a join in the client, if it is that simple
    _pushes: dict[int, _Push] = field(default_factory=dict, compare=False)

    def route(self, bound: Sequence[Any], route_part: Callable[[str, Any], RoutePlan]) -> RoutePlan:
        """The plan: parts in read order with their narrowing, and the final statement routed."""
        params = {f"p{i}": v for i, v in enumerate(bound)}
        widths = [len(route_part(p.read, params_for(p.read, params)).units) for p in self.parts]
        # A client join reads the parts once and sends nothing back; it is tried first where it applies.
        plan = (self.local is None and self._broadcast_plan(params, widths)) or self._gather_plan(params, widths)
        return RoutePlan((), RouteKind.CROSS_NODE, plan.final.tables, statement="select", cross_node=plan)

    def gathered(self, plan: CrossNodePlan) -> CrossNodePlan:
        """``plan`` with every part copied to the gathering node (for a runner that cannot run a
        broadcast copy's merged statement)."""
        return plan if plan.driver is None else self._gather_plan(plan.params, list(plan.widths))

    def _gather_plan(self, params: dict[str, Any], widths: list[int]) -> CrossNodePlan:
        order, narrow = self._order(widths, None)
        final = _unhinted(self.final_router.route, self.final, params)
        creates = {(k, self.gather): copy_source(self.dialect, p, p.physical) for k, p in enumerate(self.parts)}
        return CrossNodePlan(self, params, tuple(order), narrow, tuple(widths), final, (self.gather,), creates,
                             None, self.local)

    def _broadcast_plan(self, params: dict[str, Any], widths: list[int]) -> CrossNodePlan | None:
        """Copy the other parts to every data source of the widest part's units, and run the statement there
        per node, merged as any multi-shard SELECT: the widest part is never read through the client."""
        config = self.config
        driver = max(range(len(widths)), key=lambda k: widths[k])
        if (config.migration is not None or config.cutover is not None or widths[driver] < 2
                or any(w >= widths[driver] for k, w in enumerate(widths) if k != driver)):
            return None
        push = self._push(driver, config)
        try:
            final = _unhinted(push.router.route, push.final, params)
        except UnsupportedSQLError:
            return None  # the driver cannot lead the statement (an outer join's optional side...)
        targets = final.data_sources
        creates: dict[tuple[int, str], str] = {}
        for k, part in enumerate(self.parts):
            table = config.table(part.table)
            for ds in targets if k != driver else ():
                physical = table.tables_by_source.get(ds) if table is not None else None
                if not physical or config.data_sources[ds].primary.dialect != self.dialect:
                    return None  # a copy takes its column types from a node of its table in that data source
                creates[(k, ds)] = copy_source(self.dialect, part, physical[0])
        order, narrow = self._order(widths, driver)
        return CrossNodePlan(self, params, tuple(order), narrow, tuple(widths), final, targets, creates, driver,
                             None)

    def _push(self, driver: int, config: ShardingConfig) -> _Push:
        if driver in self._pushes:
            return self._pushes[driver]
        tree = self.pristine.copy()
        tables = list(tree.find_all(exp.Table))
        for k, part in enumerate(self.parts):
            if k != driver:
                tables[self.positions[k]].replace(_aliased(part.temp, part.qualifier))
        temps = tuple(p.temp for k, p in enumerate(self.parts) if k != driver)
        derived = _derived(config, broadcast_tables=(*config.broadcast_tables, *temps))
        push = _Push(pyformat_sql(tree), self.router_for(derived))
        self._pushes[driver] = push
        return push

    def _order(self, widths: Sequence[int], driver: int | None) -> tuple[list[int], dict[int, Equality]]:
        """Read a part with conditions of its own first (the narrowest of them), then, while one is left,
        one an already read part can narrow: a whole table is read last, if at all, and then usually
        narrowed to the keys the others returned (the ``driver`` of a broadcast copy is not read)."""
        left = sorted((k for k in range(len(self.parts)) if k != driver),
                      key=lambda k: (not self.parts[k].pushed, widths[k], k))
        order: list[int] = []
        narrow: dict[int, Equality] = {}
        while left:
            pick = left[0]
            for k in left:
                by = next((e for e in self.narrowing if e.target == k and e.source in order), None)
                if by is not None and widths[k] > 1:
                    pick, narrow[k] = k, by
                    break
            left.remove(pick)
            order.append(pick)
        return order, narrow


class CrossNodePlan(NamedTuple):
    """What one call of a cross-node statement runs (``RoutePlan.cross_node``)."""

    statement: CrossNodeStatement
    params: dict[str, Any]  # pN → value, for the parts and the final statement
    order: tuple[int, ...]  # part indexes in read order
    narrow: dict[int, Equality]  # part → the equality that narrows its read
    widths: tuple[int, ...]  # units of each part's whole read
    final: RoutePlan  # the statement over the copies
    targets: tuple[str, ...]  # data sources that get a copy of every part read
    creates: Mapping[tuple[int, str], str]  # (part, data source) → the SELECT its copy there takes its columns from
    driver: int | None  # a broadcast copy: the part left in place, whose nodes run the statement
    local: LocalJoin | None  # join the parts in the client while they are few and their keys plain

    @property
    def reason(self) -> str:
        """Why the statement cannot run node by node (the co-location proof's refusal)."""
        return self.statement.reason

    @property
    def strategy(self) -> str:
        """How the parts meet: ``broadcast copy``, ``client join`` (copied to the gathering node after
        all when they turn out many or their keys not plain), ``batched nested loop`` or ``hash join``."""
        if self.driver is not None:
            return "broadcast copy"
        if self.local is not None:
            return "client join"
        return "batched nested loop" if self.narrow else "hash join"

    def explain(self) -> list[tuple[str, str, str, str]]:
        """Preview rows: each part's read, then the statement over the copies."""
        s = self.statement
        strategy = self.strategy
        where = ", ".join(self.targets)
        rows = []
        for step, k in enumerate(self.order, 1):
            part = s.parts[k]
            by = self.narrow.get(k)
            how = f"read whole from {self.widths[k]} unit(s)"
            if by is not None:
                src = s.parts[by.source]
                how = (f"narrowed to {part.qualifier}.{by.target_column} IN (values of "
                       f"{src.qualifier}.{by.source_column}, up to {MAX_KEYS} per read)")
            goes = f"{part.temp} on {where}" if self.local is None else f"the client (else {part.temp} on {where})"
            rows.append((f"part {step}", part.read, "", f"{strategy}: {part.table} {part.qualifier} → {goes}; "
                         f"{how}; pushed: {part.pushed or 'nothing'}"))
        over = f"{len(self.order)} copies on {where}"
        if self.local is not None:
            over = (f"{len(self.order)} parts in the client; if they are many or their keys not integers, "
                    f"this statement over their copies on {where}")
        if self.driver is not None:
            lead = s.parts[self.driver]
            over += f", {lead.table} {lead.qualifier} read in place on its {self.widths[self.driver]} nodes"
        units = sum(self.widths[k] for k in self.order)
        trips = (f"round trips: {len(self.order)} part read(s) on at most {units} unit(s)"
                 + ("" if self.local is not None else
                    f", then per data source of {where}: one CREATE per copy, its rows in INSERTs of "
                    f"{COPY_BATCH} rows, the statement on {len(self.final.units)} unit(s), one DROP per copy"))
        for unit in self.final.units:
            rows.append((unit.data_source, unit.sql, repr(list(unit.params)),
                         f"{strategy} over {over}; {trips}; {s.reason}"))
        return rows


class ExplainPlan(NamedTuple):
    """``EXPLAIN`` of a cross-node SELECT: answered with the plan's steps, never sent to a server (the
    statement runs nowhere as written)."""

    plan: CrossNodePlan

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns of the answer (those of ``PREVIEW``)."""
        return EXPLAIN_COLUMNS

    @property
    def strategy(self) -> str:
        return self.plan.strategy

    @property
    def reason(self) -> str:
        return self.plan.reason

    def explain(self) -> list[tuple[str, str, str, str]]:
        return self.plan.explain()


class ExplainedStatement(NamedTuple):
    inner: CrossNodeStatement

    def route(self, bound: Sequence[Any], route_part: Callable[[str, Any], RoutePlan]) -> RoutePlan:
        plan = self.inner.route(bound, route_part)
        return plan._replace(cross_node=ExplainPlan(plan.cross_node), statement="select")


# -- compile ----------------------------------------------------------------------------------------


def compile_cross_node(tree: exp.Expr, config: ShardingConfig, reason: str,
                       router_for: Callable[[ShardingConfig], Any],
                       schema_of: Callable[[str], TableSchema | None] = lambda name: None) -> CrossNodeStatement:
    """Cut a parsed SELECT (``:pN`` placeholders) into parts; ``reason``: the co-location refusal; ``schema_of``:
    a logic table's known columns and types (which of a copy's join columns may get an index: crossnode/copy.py).

    Raises:
        UnsupportedSQLError: the statement cannot be answered this way (named why).
    """
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    sharded = [t for t in tree.find_all(exp.Table)
               if t.name.lower() not in ctes and config.kind_of(t.name) is TableKind.SHARDED]
    if any(select.args.get("locks") for select in tree.find_all(exp.Select)):
        raise UnsupportedSQLError(f"{reason}; a locking read (FOR UPDATE / LOCK IN SHARE MODE) cannot be "
                                  "answered from copies of the rows", construct="locking read")
    if any(t.args.get("db") for t in sharded):
        raise UnsupportedSQLError(f"{reason}; a sharded table qualified with a database name cannot be copied",
                                  construct="join")
    pristine = tree.copy()
    found = cut(tree, {id(t) for t in sharded})
    local = local_join(tree, found.occurrences)
    every = {id(t): n for n, t in enumerate(tree.find_all(exp.Table))}
    positions = tuple(every[id(o.node)] for o in found.occurrences)
    gather = _gathering_node(tree, config, found.occurrences, ctes, reason)
    parts = tuple(_part(k, o, config, gather, schema_of(o.name)) for k, o in enumerate(found.occurrences))
    narrowed = {(e.target, e.target_column): _narrowed(found.occurrences[e.target], e.target_column)
                for e in found.narrowing}
    for occurrence, part in zip(found.occurrences, parts):
        occurrence.node.replace(_aliased(part.temp, occurrence.qualifier))
    final = pyformat_sql(tree)
    extra = {p.temp: SingleTable(p.temp, gather) for p in parts}
    derived = _derived(config, single_tables={**config.single_tables, **extra})
    dialect = config.data_sources[gather].primary.dialect
    return CrossNodeStatement(parts, tuple(found.narrowing), narrowed, final, gather, dialect, reason,
                              router_for(derived), pristine, positions, config, router_for, local)


def _unhinted(route: Callable[[str, Any], RoutePlan], sql: str, params: Any) -> RoutePlan:
    """Route the statement over the copies with no hint: the copies are where the plan put them, and a
    hint's data source or table (which the parts' reads took) would send it where they are not."""
    token = HINT_VAR.set(None)
    try:
        return route(sql, params)
    finally:
        HINT_VAR.reset(token)


def _derived(config: ShardingConfig, **changes: Any) -> ShardingConfig:
    """The configuration the statement over the copies is routed with: the copies added, no migration
    to follow (only copies and tables that stay put are named), and no cross-node answer of its own."""
    runtime = replace(config.runtime, cross_node_queries=False)
    return replace(config, migration=None, cutover=None, runtime=runtime, **changes)


def _part(k: int, o: Occurrence, config: ShardingConfig, gather: str, schema: TableSchema | None) -> Part:
    table = config.table(o.name)
    assert table is not None
    physical = table.tables_by_source[gather][0]
    columns = None if o.columns is None else tuple(sorted(o.columns, key=str.lower))
    select = _select(o.name, o.qualifier, columns)
    condition = _condition(o)
    if condition is not None:
        select = select.where(condition)
    pushed = condition.sql(INPUT) if condition is not None else ""
    keys = tuple(sorted(o.keys, key=str.lower))
    declared = tuple((c.lower(), kind) for c in keys if (kind := column_kind(schema, c)) is not None)
    return Part(k, o.name, o.qualifier, f"{TEMP_PREFIX}{k}", physical, columns, pyformat_sql(select), pushed, keys,
                tuple(o.pairs), declared)


def _narrowed(o: Occurrence, column: str) -> str:
    """``o``'s read with ``AND column IN (<keys>)``; the runner fills ``<keys>`` (:func:`key_list`)."""
    columns = None if o.columns is None else tuple(sorted(o.columns, key=str.lower))
    keys = exp.column(column, table=o.qualifier, quoted=True).isin(exp.var(_KEYS))
    condition = _condition(o)
    return pyformat_sql(_select(o.name, o.qualifier, columns).where(
        keys if condition is None else exp.and_(condition, keys)))


def _condition(o: Occurrence) -> exp.Expr | None:
    return exp.and_(*(c.copy() for c in o.conditions)) if o.conditions else None


def _select(table: str, qualifier: str, columns: tuple[str, ...] | None) -> exp.Select:
    items = [exp.column(c, table=qualifier, quoted=True) for c in columns] if columns else [exp.Star()]
    return exp.select(*items).from_(_aliased(table, qualifier))


def _aliased(table: str, alias: str) -> exp.Table:
    return exp.Table(this=exp.to_identifier(table), alias=exp.TableAlias(this=exp.to_identifier(alias)))


def _gathering_node(tree: exp.Expr, config: ShardingConfig, occurrences: list[Occurrence], ctes: set[str],
                    reason: str) -> str:
    """The data source that holds a node of every part's table and every other non-broadcast table."""
    fixed: set[str] = set()
    for t in tree.find_all(exp.Table):
        name = t.name.lower()
        if not name or name in ctes or config.kind_of(t.name) in (TableKind.SHARDED, TableKind.BROADCAST):
            continue
        single = config.single_table(t.name)
        where = single.data_source if single is not None else config.default_data_source
        if where is not None:
            fixed.add(where)
    if len(fixed) > 1:
        raise UnsupportedSQLError(f"{reason}; its unsharded tables live in {sorted(fixed)}, so no data source "
                                  "can join the copies with them", construct="join")
    tables = [config.table(o.name) for o in occurrences]
    candidates = sorted(fixed) if fixed else list(config.data_sources)
    for ds in candidates:
        if all(t is not None and ds in t.tables_by_source for t in tables):
            return ds
    names = sorted({o.name for o in occurrences})
    raise UnsupportedSQLError(f"{reason}; no data source holds a node of each of {names} (and the statement's "
                              "unsharded tables), where their rows could be joined", construct="join")


# -- SQL text with named placeholders -----------------------------------------------------------------

_MARK = "\x00"
_KEYS = "\x01KEYS\x01"  # where a narrowed read's IN list goes


def pyformat_sql(tree: exp.Expr) -> str:
    """``tree`` as MySQL text whose ``:pN`` placeholders are ``%(pN)s`` and other ``%`` doubled."""

    def mark(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder):
            return exp.var(f"{_MARK}{node.name}{_MARK}")
        return node

    text = tree.transform(mark).sql(INPUT).replace("%", "%%")
    pieces = text.split(_MARK)
    return "".join(f"%({p})s" if i % 2 else p for i, p in enumerate(pieces))


def params_for(sql: str, params: Mapping[str, Any]) -> Mapping[str, Any] | list[Any]:
    """What to route ``sql`` (pyformat) with: the named values, or none when it has no placeholder."""
    return params if "%(" in sql else []


def with_keys(narrowed: str, keys: Sequence[Any], params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A narrowed read for ``keys``: its ``IN`` list has a power-of-two length (the last value repeated),
    so few distinct statement texts exist and their plans stay cached."""
    size = 1
    while size < len(keys):
        size *= 2
    filled = dict(params)
    for i in range(size):
        filled[f"k{i}"] = keys[min(i, len(keys) - 1)]
    return narrowed.replace(_KEYS, ", ".join(f"%(k{i})s" for i in range(size))), filled


@functools.lru_cache(maxsize=1024)
def copy_source(dialect_name: str, part: Part, physical: str) -> str:
    """The SELECT (of no row) whose columns ``part``'s copy takes: those of ``physical``, a physical table of
    it in the data source the copy goes to, with their types, character sets and collations."""
    dialect = dialect_for(dialect_name)
    never = exp.false() if dialect.name == "postgresql" else "1 = 0"
    return _select(physical, part.qualifier, part.columns).where(never).sql(dialect.sqlglot_name)
