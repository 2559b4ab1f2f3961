"""Derived tables: the enclosing query's WHERE, read as conditions on the derived table's shard column.

``SELECT * FROM (SELECT account_id AS a FROM t_account) t WHERE t.a = ?``
selects only rows whose ``account_id`` is the parameter, so the inner SELECT
needs only the node that holds that account. A condition of the enclosing
WHERE on a column of the derived table is a condition on the inner
expression that column names — when filtering after the inner SELECT keeps
the same rows as filtering before it:

* the column is a plain column of the inner SELECT (``account_id AS a``, or
  through ``*``), not an expression or an aggregate;
* the inner SELECT has no LIMIT / OFFSET and no window function (both look
  at rows the filter would remove);
* if it groups (or aggregates), the column is one of its group keys.

Chains of derived tables are followed level by level. Only WHERE is read,
never an ON: an outer join's ON does not remove rows of its preserved side.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from sqlglot import exp

from ddm_core.route.shards.conditions import extract

__all__ = ["outer_conditions"]

ColumnResolver = Callable[[exp.Column], "str | None"]


def outer_conditions(inner: exp.Expression, column_of: ColumnResolver, params: Mapping[str, int]) -> list[Any]:
    """Condition trees the enclosing WHEREs put on ``inner``'s shard columns (``[]``: not a derived table).

    Args:
        inner: A SELECT's node.
        column_of: The inner scope's resolver: its column reference → sharding column, or ``None``.
        params: Placeholder name → bound-parameter index.
    """
    trees: list[Any] = []
    chain: list[exp.Select] = []  # derived SELECTs from ``inner`` outwards
    node = inner
    while isinstance(node, exp.Select):
        outer = _enclosing(node)
        if outer is None:
            break
        chain.append(node)
        where = outer.args.get("where")
        if where is not None:
            trees.append(extract(where.this, _Resolver(outer, tuple(chain), column_of), params))
        node = outer
    return trees


class _Resolver:
    """Maps a column of ``outer`` down the chain of derived tables to the inner scope's shard column."""

    __slots__ = ("outer", "chain", "column_of")

    def __init__(self, outer: exp.Select, chain: tuple[exp.Select, ...], column_of: ColumnResolver) -> None:
        self.outer = outer
        self.chain = chain  # innermost first; chain[-1] is a derived table of ``outer``
        self.column_of = column_of

    def __call__(self, column: exp.Column) -> str | None:
        level: exp.Select = self.outer
        current: exp.Column | None = column
        for derived in reversed(self.chain):
            if current is None or not _names(current, derived, level):
                return None
            current = _projected(derived, current.name)
            level = derived
        return self.column_of(current) if current is not None else None


def _enclosing(select: exp.Select) -> exp.Select | None:
    """The SELECT whose FROM / JOIN has ``select`` as a derived table, or ``None``."""
    subquery = select.parent
    if not isinstance(subquery, exp.Subquery) or not subquery.alias:
        return None
    holder = subquery.parent
    if not isinstance(holder, (exp.From, exp.Join)):
        return None
    outer = holder.parent
    return outer if isinstance(outer, exp.Select) else None


def _names(column: exp.Column, derived: exp.Select, level: exp.Select) -> bool:
    """Whether ``column`` (written in ``level``) is a column of the derived table ``derived``."""
    subquery = derived.parent
    assert isinstance(subquery, exp.Subquery)
    qualifier = column.table
    if qualifier:
        return bool(column.args.get("db") is None and qualifier.lower() == subquery.alias.lower())
    # Unqualified: only when the derived table is the level's one source.
    from_ = level.args.get("from_") or level.args.get("from")
    return not level.args.get("joins") and isinstance(from_, exp.From) and from_.this is subquery


def _projected(derived: exp.Select, name: str) -> exp.Column | None:
    """The inner column the derived table's column ``name`` is, if filtering on it commutes with ``derived``."""
    if derived.args.get("limit") or derived.args.get("offset"):
        return None
    items = derived.expressions
    if any(item.find(exp.Window) is not None for item in items):
        return None
    subquery = derived.parent
    assert isinstance(subquery, exp.Subquery)
    alias = subquery.args.get("alias")
    listed = [c.name.lower() for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
    key = name.lower()
    found: exp.Column | None = None
    position = -1
    if listed:  # (SELECT ...) AS t (x, y): by position
        if key in listed and not any(isinstance(i, exp.Star) for i in items):
            position = listed.index(key)
            found = _plain_column(items[position]) if position < len(items) else None
    else:
        for i, item in enumerate(items):
            if item.alias_or_name.lower() == key and not isinstance(item, exp.Star):
                position, found = i, _plain_column(item)
                break
        else:
            found = _through_star(items, name)
    if found is None or not _keeps_rows(derived, found, position):
        return None
    return found


def _plain_column(item: exp.Expression) -> exp.Column | None:
    inner = item.this if isinstance(item, exp.Alias) else item
    if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star):
        return inner
    return None


def _through_star(items: list[exp.Expression], name: str) -> exp.Column | None:
    """``name`` as a column of ``*`` / ``t.*`` (the only star of the list: two could both have it)."""
    stars = [i for i in items if isinstance(i, exp.Star) or (isinstance(i, exp.Column) and isinstance(i.this, exp.Star))]
    if len(stars) != 1:
        return None
    star = stars[0]
    # A new node, not attached to the statement's tree: only read by the resolver.
    return exp.column(name, star.table) if isinstance(star, exp.Column) and star.table else exp.column(name)


def _keeps_rows(derived: exp.Select, column: exp.Column, position: int) -> bool:
    """Filtering on ``column`` after ``derived`` keeps the rows filtering before it would."""
    group = derived.args.get("group")
    keys = group.expressions if isinstance(group, exp.Group) else []
    if not keys:
        # Aggregates without GROUP BY make one row of all rows: a filter on it cannot move inside.
        return not any(item.find(exp.AggFunc) is not None for item in derived.expressions)
    item = derived.expressions[position] if position >= 0 else None
    alias = item.alias.lower() if item is not None and item.alias else None
    for key in keys:
        if key == column:
            return True
        if isinstance(key, exp.Literal) and key.is_int and int(key.this) == position + 1:
            return True
        if alias and isinstance(key, exp.Column) and not key.table and key.name.lower() == alias:
            return True
    return False
