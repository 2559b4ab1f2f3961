"""One unit per data source: a multi-shard SELECT's tables on one data source read by one ``UNION ALL``.

A SELECT that reaches several physical tables gets one unit per table; units on the
same data source each cost a round trip and a connection (or a turn on a
transaction's pinned connection). When it is provably the same to the merge, the
router sends one statement per data source instead (``runtime.oneUnitPerDataSource``;
docs/architecture.md#one-unit-per-data-source)::

    (SELECT c, k FROM t_0 WHERE ...) UNION ALL (SELECT c, k FROM t_1 WHERE ...) [ORDER BY 1, 2 DESC [LIMIT m+n]]

Each branch is the unit SQL it replaces (its own ORDER BY / LIMIT m+n kept: a parenthesised
branch with LIMIT is honoured by MySQL and MariaDB); the trailing ORDER BY — by column
position, the only reference a union's ORDER BY takes that cannot name something else —
sorts the whole answer again when the merge needs sorted units, and stops at the units' LIMIT m+n
(the data source's first m+n rows are all the merge can use of it). The merge spec does not
change: concatenation, the k-way merge, DISTINCT and re-aggregation all take any number of
rows per unit.

Only where the union's answer carries the same values, in the same order, as the separate
answers did (:func:`union_suffix` decides once per statement shape): a plain SELECT of one
sharded table (no join, subquery, locking read, ``INTO``, modifier such as
``SQL_CALC_FOUND_ROWS``, no ``*``) on MySQL / MariaDB, whose every column is a plain column,
``COUNT`` / ``SUM`` / ``AVG``, or ``MIN`` / ``MAX`` of a column, of a type a union keeps:
MariaDB turns ``ENUM`` / ``SET`` into ``VARCHAR`` (sorted as text, not by member number),
``TEXT`` / ``JSON`` / ``BLOB`` into other lengths, ``TINYINT(1)`` into ``TINYINT(4)`` (which
clients that map it to a boolean would read as a number), so a statement with one of those,
or with columns of unknown type (no table metadata), keeps one unit per table.
"""

from __future__ import annotations

import re
from typing import Sequence

from sqlglot import exp

from ddm_core.route.context import RouteContext
from ddm_core.route.shards.analyze import Analysis
from ddm_core.route.shards.conditions import Param, Source
from ddm_core.route.query.unit_shapes import UnitShape
from ddm_core.route.table_schema import TableSchema

__all__ = ["union_suffix", "per_data_source"]

#: Data source dialects whose union of parenthesised branches this module writes.
UNION_DIALECTS = frozenset({"mysql", "mariadb"})

#: Declared column types a MariaDB / MySQL ``UNION ALL`` of equal columns answers with the same
#: type, values and order (ZEROFILL, ``TINYINT(1)`` and anything else: not listed, not combined).
_KEPT_TYPE = re.compile(
    r"\s*(?:(?:small|medium|big)?int(?:eger)?(?:\(\d+\))?|tinyint(?:\((?:[2-9]|\d\d+)\))?|"
    r"(?:decimal|numeric|dec)(?:\(\d+(?:,\s*\d+)?\))?|float(?:\(\d+(?:,\s*\d+)?\))?|double(?: precision)?(?:\(\d+,\s*\d+\))?|real|"
    r"date|datetime(?:\(\d\))?|timestamp(?:\(\d\))?|time(?:\(\d\))?|year(?:\(4\))?|"
    r"(?:var)?char(?:acter)?(?:\(\d+\))?|(?:var)?binary(?:\(\d+\))?)"
    r"(?:\s+(?:signed|unsigned))?\s*$",
    re.I,
)

#: Nodes that keep one unit per table: another query inside, a join, a locking read, a window
#: (computed per branch as per unit, but not proven here), a user-variable assignment.
_REFUSED = (exp.Query, exp.Subquery, exp.Join, exp.Lock, exp.Window, exp.PropertyEQ)


def union_suffix(
    ctx: RouteContext, tree: exp.Select, analysis: Analysis, order_by: Sequence[tuple[int, bool]],
    limit: Source | None, style: str,
) -> tuple[str, int | None] | None:
    """The text after a data source's union (``" ORDER BY 1, 2 DESC LIMIT ?"`` or ``""``) and the bound
    index whose value (as the units get it) fills its LIMIT placeholder, or ``None`` when the rewritten
    multi-shard ``tree`` must keep one unit per table.

    ``order_by``: the merge's ``(column, descending)`` keys (absolute column indexes: no ``*``);
    ``limit``: the statement's LIMIT; ``style``: the units' paramstyle (``qmark`` or ``format``).
    """
    if not ctx.config.runtime.one_unit_per_data_source or len(analysis.slots) != 1 or not analysis.primary:
        return None
    if analysis.single or analysis.unknown or analysis.broadcast:
        return None
    args = tree.args
    if args.get("into") or args.get("operation_modifiers") or args.get("hint") or args.get("kind") or args.get("with_"):
        return None
    for node in tree.walk():
        if node is not tree and isinstance(node, _REFUSED):
            return None
        if isinstance(node, exp.Star) and not isinstance(node.parent, exp.Count):  # COUNT(*) is a count
            return None
    schema = ctx.schema_of(analysis.primary.name)
    if schema is None:
        return None
    for item in tree.expressions:
        if not _kept(item.this if isinstance(item, exp.Alias) else item, schema):
            return None
    if not order_by:
        return "", None
    suffix = " ORDER BY " + ", ".join(f"{i + 1} DESC" if desc else str(i + 1) for i, desc in order_by)
    kept = tree.args.get("limit")  # the units' LIMIT m+n (none when the merge needs every row)
    if kept is None or limit is None or tree.args.get("distinct"):
        # DISTINCT: the branches' rows repeat each other, and repeats would take the union's LIMIT
        return suffix, None
    # The data source's first m+n rows are all the merge can use of it: the union stops there too.
    if isinstance(limit, Param):
        return suffix + (" LIMIT ?" if style == "qmark" else " LIMIT %s"), limit.index
    return suffix + f" LIMIT {int(kept.expression.this)}", None


def _kept(value: exp.Expression, schema: TableSchema) -> bool:
    """Does a union answer ``value`` (a select item) with the type and order one table's answer has?"""
    if isinstance(value, (exp.Count, exp.Sum, exp.Avg)):
        return True  # BIGINT, DECIMAL or DOUBLE whatever the argument
    if isinstance(value, (exp.Min, exp.Max)):
        value = value.this
    if not isinstance(value, exp.Column):
        return False
    column = schema.column(value.name)
    return column is not None and bool(_KEPT_TYPE.fullmatch(column.type))


def per_data_source(
    branches: Sequence[tuple[str, str, tuple[tuple[str, str], ...]]], suffix: str, ctx: RouteContext
) -> list[UnitShape]:
    """Units from ``(data source, SQL, tables)`` branches that all take the statement's params: one per data
    source whose dialect takes the union (in the order the data sources first appear), one per branch elsewhere.

    A combined unit's ``tables`` lists every physical table it reads (one logic table may then map to
    several physical tables); it takes the params once per branch, then the suffix's (``suffixed``).
    """
    groups: dict[str, list[tuple[str, str, tuple[tuple[str, str], ...]]]] = {}
    for branch in branches:
        groups.setdefault(branch[0], []).append(branch)
    config = ctx.config
    units: list[UnitShape] = []
    for ds, parts in groups.items():
        source = config.data_source(ds)
        comment = ctx.comment(ds)
        if len(parts) == 1 or any(e.dialect not in UNION_DIALECTS for e in (source.primary, *source.replicas)):
            units.extend(UnitShape(ds, comment + sql, 1, False, tables) for _, sql, tables in parts)
            continue
        sql = comment + "(" + ") UNION ALL (".join(p[1] for p in parts) + ")" + suffix
        units.append(UnitShape(ds, sql, len(parts), True, tuple(t for p in parts for t in p[2])))
    return units
