"""Cutting a statement whose rows need not share a node into parts, one per sharded table occurrence.

Each part reads one occurrence's rows with the conditions that hold for every
row of it that can matter (pushed down), and only the columns the statement
uses. The statement itself is then run on one node over copies of the parts
(docs/cross-node-queries.md#how-a-statement-is-cut).

A condition is pushed into a part when it names no other table and holds for
every result row the occurrence is in: a WHERE conjunct of a SELECT in which
the occurrence is not on the optional side of an outer join, an inner join's
ON conjunct, or the ON conjunct of the LEFT JOIN that makes it optional.
Anything else (ORs across tables, subqueries, aggregates, outer joins' other
conditions) stays in the statement, where the node evaluates it as one
database would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

__all__ = ["Occurrence", "Equality", "Cut", "cut"]

#: Functions whose value changes per call or per session: a condition using one stays in the statement.
_VOLATILE = frozenset({"RAND", "UUID", "UUID_SHORT", "SLEEP", "CONNECTION_ID", "LAST_INSERT_ID", "ROW_COUNT",
                       "FOUND_ROWS", "GET_LOCK", "RELEASE_LOCK", "NEXTVAL", "LASTVAL", "SETVAL"})


@dataclass(slots=True)
class Occurrence:
    """One table occurrence the statement names, found by its node in the parsed tree."""

    node: exp.Table
    name: str  # as written
    qualifier: str  # what the statement calls it: its alias, else its name
    select: exp.Select | None  # the SELECT whose FROM / JOIN lists it (None: elsewhere)
    present: bool  # has a row in every row of its SELECT (not an outer join's optional side)
    conditions: list[exp.Expr] = field(default_factory=list)  # pushed down
    columns: set[str] | None = field(default_factory=set)  # None: every column
    pairs: list[tuple[str, int, str]] = field(default_factory=list)  # (its column, the other occurrence, its column)

    @property
    def keys(self) -> set[str]:
        """Its columns compared by equality with another occurrence."""
        return {column for column, _, _ in self.pairs}


@dataclass(frozen=True, slots=True)
class Equality:
    """``a.column = b.column`` where it may narrow ``target``'s read to ``source``'s values."""

    source: int
    source_column: str
    target: int
    target_column: str


@dataclass(slots=True)
class Cut:
    occurrences: list[Occurrence]
    narrowing: list[Equality]


def cut(tree: exp.Expr, wanted: set[int]) -> Cut:
    """The occurrences of the tables whose ``id(node)`` is in ``wanted``, with what can be pushed into each."""
    occurrences = [_occurrence(t) for t in tree.find_all(exp.Table) if id(t) in wanted]
    by_node = {id(o.node): k for k, o in enumerate(occurrences)}
    narrowing: list[Equality] = []
    for select in tree.find_all(exp.Select):
        _push(select, occurrences, by_node, narrowing)
    _columns(tree, occurrences)
    return Cut(occurrences, narrowing)


# -- occurrences ---------------------------------------------------------------------------------


def _occurrence(table: exp.Table) -> Occurrence:
    qualifier = table.alias_or_name
    holder = table.parent
    select = holder.parent if isinstance(holder, (exp.From, exp.Join)) else None
    if not isinstance(select, exp.Select):
        return Occurrence(table, table.name, qualifier, None, False)
    return Occurrence(table, table.name, qualifier, select, _entries(select).get(id(table), False))


def _entries(select: exp.Select) -> dict[int, bool]:
    """``id(node)`` → present, for each entry of a SELECT's FROM and JOIN list."""
    source = select.args.get("from_")
    joins = select.args.get("joins") or []
    nodes = [source.this if source is not None else None] + [j.this for j in joins]
    present = [True] * len(nodes)
    for k, join in enumerate(joins, 1):
        side = (join.side or "").upper()
        if side == "LEFT":
            present[k] = False
        elif side in ("RIGHT", "FULL"):
            present[:k] = [False] * k
            present[k] = side == "RIGHT"
    return {id(n): p for n, p in zip(nodes, present) if n is not None}


# -- conditions pushed down, and the equalities between parts --------------------------------------


def conjuncts(node: exp.Expr | None) -> list[exp.Expr]:
    if node is None:
        return []
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return conjuncts(node.left) + conjuncts(node.right)
    return [node]


def _push(select: exp.Select, occurrences: list[Occurrence], by_node: dict[int, int], out: list[Equality]) -> None:
    mine = {o.qualifier.lower(): k for k, o in enumerate(occurrences) if o.select is select}
    if not mine:
        return
    entries = _entries(select)
    single = len(entries) == 1 and select.parent_select is None  # an unqualified column can only be its own
    where = select.args.get("where")
    for condition in conjuncts(where.this if where is not None else None):
        _place(condition, mine, occurrences, single, None, out)
    for join in select.args.get("joins") or []:
        side = (join.side or "").upper()
        if side not in ("", "LEFT") or join.args.get("using") or join.args.get("method"):
            continue  # RIGHT / FULL / NATURAL: their ON conditions stay in the statement
        joined = by_node.get(id(join.this))
        for condition in conjuncts(join.args.get("on")):
            _place(condition, mine, occurrences, single, joined if side == "LEFT" else None, out)


def _place(condition: exp.Expr, mine: dict[str, int], occurrences: list[Occurrence], single: bool,
           optional: int | None, out: list[Equality]) -> None:
    """Push ``condition`` into the one occurrence it is about, or record it as an equality between two.

    ``optional``: the ON belongs to a LEFT JOIN that makes this occurrence optional
    (only it may take the condition); ``None``: a WHERE or inner join's ON.
    """
    if isinstance(condition, exp.EQ) and isinstance(condition.left, exp.Column) \
            and isinstance(condition.right, exp.Column):
        a, b = mine.get(condition.left.table.lower()), mine.get(condition.right.table.lower())
        if a is not None and b is not None and a != b:
            occurrences[a].pairs.append((condition.left.name, b, condition.right.name))
            occurrences[b].pairs.append((condition.right.name, a, condition.left.name))
            for s, sc, t, tc in ((a, condition.left, b, condition.right), (b, condition.right, a, condition.left)):
                if optional == t or (optional is None and occurrences[s].present and occurrences[t].present):
                    out.append(Equality(s, sc.name, t, tc.name))
            return
    if not _pushable(condition):
        return
    owners = {c.table.lower() for c in condition.find_all(exp.Column)}
    if "" in owners:
        if not single or len(owners) > 1:
            return
        owners = {next(iter(mine))}
    if len(owners) != 1:
        return
    k = mine.get(next(iter(owners)))
    if k is None or (optional is not None and k != optional) or (optional is None and not occurrences[k].present):
        return
    occurrences[k].conditions.append(condition)


def _pushable(condition: exp.Expr) -> bool:
    for node in condition.walk():
        if isinstance(node, (exp.Subquery, exp.Select, exp.Exists, exp.AggFunc, exp.Window, exp.Parameter,
                             exp.SessionParameter)):
            return False
        if isinstance(node, exp.Func) and (node.sql_name() or "").upper() in _VOLATILE:
            return False
    return True


# -- columns each part must read ---------------------------------------------------------------------


def _columns(tree: exp.Expr, occurrences: list[Occurrence]) -> None:
    """The columns each occurrence's part reads (``None``: every column, when one cannot tell).

    A qualified column belongs to the table its qualifier names in the nearest SELECT that has a
    table (or derived table) of that name, as SQL resolves it: two subqueries may both call their
    tables ``s``.
    """
    names: dict[int, dict[str, Occurrence | None]] = {}  # SELECT → what its FROM / JOIN names
    by_node = {id(o.node): o for o in occurrences}
    for select in tree.find_all(exp.Select):
        source = select.args.get("from_")
        entries = [source.this if source is not None else None] + [j.this for j in select.args.get("joins") or []]
        names[id(select)] = {e.alias_or_name.lower(): by_node.get(id(e)) for e in entries if e is not None}
    everything: set[int] = set()  # SELECTs whose occurrences read every column
    for column in tree.find_all(exp.Column):
        qualifier = column.table.lower()
        if not qualifier:  # an alias, or a column of any table of its SELECT or one enclosing it
            enclosing = column.parent_select
            while enclosing is not None:
                everything.add(id(enclosing))
                enclosing = enclosing.parent_select
            continue
        owner = _resolve(column, qualifier, names)
        if owner is None or owner.columns is None:
            continue
        if isinstance(column.this, exp.Star):
            owner.columns = None
        else:
            owner.columns.add(column.name)
    for select in tree.find_all(exp.Select):
        if any(isinstance(e, exp.Star) for e in select.expressions) or any(
                j.args.get("using") or j.args.get("method") for j in select.args.get("joins") or []):
            everything.add(id(select))
    for o in occurrences:
        if o.select is None or id(o.select) in everything:
            o.columns = None
        elif o.columns is not None:
            o.columns.update(o.keys)


def _resolve(column: exp.Column, qualifier: str, names: dict[int, dict[str, Occurrence | None]]
             ) -> Occurrence | None:  # fmt: skip
    """The occurrence ``qualifier`` names where ``column`` stands (``None``: another kind of table)."""
    select = column.parent_select
    while select is not None:
        scope = names.get(id(select), {})
        if qualifier in scope:
            return scope[qualifier]
        select = select.parent_select
    return None
