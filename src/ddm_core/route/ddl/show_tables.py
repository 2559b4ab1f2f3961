"""``SHOW [FULL] TABLES [FROM <logical schema>] [LIKE ... | WHERE ...]`` answered with logic table names.

Sent as it is, ``SHOW TABLES`` would list one data source's physical tables
(``t_order_0_0``, ``t_order_0_1``...). The plan instead asks every data source
that holds a table a statement can name for its table list, with each
physical table already mapped to its logic table in SQL, and lets the merger
drop the repeats and sort — so the answer is the logical one, the same
``SHOW TABLES`` gives on one unsharded database:

* a sharded table's physical tables become its logic name; broadcast and
  single tables are listed by their name; the default data source (where
  tables the configuration does not name live) contributes all its tables,
  the other data sources only the configured ones; ddm-core's own XA log is not listed;
* ``LIKE`` and ``WHERE`` filter the logic names, on the servers, with their
  own pattern rules;
* the column is ``Tables_in_<logical schema>`` (``config.name``, else
  ShardingSphere's default ``logic_db``), with `` (<pattern>)`` after a
  ``LIKE`` literal as MySQL names it; ``FULL`` adds ``Table_type``.

Each unit reads the table list its backend keeps (``information_schema.tables``,
``sqlite_master`` on SQLite: :meth:`~ddm_core.dialects.Dialect.listed_tables`)
and sorts by the binary name, the order the merger compares in.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from sqlglot import exp

from ddm_core.dialects import Dialect, dialect_for
from ddm_core.errors import RoutingError
from ddm_core.merge.spec import MergeSpec
from ddm_core.metadata.model import ShardingConfig
from ddm_core.route.context import RouteContext
from ddm_core.route.hints import Hint
from ddm_core.route.plan import RouteKind, RoutePlan, RouteUnit
from ddm_core.route.text.edits import LOGIC_DB
from ddm_core.route.text.template import QUOTED_OR_PARAM, Template, from_generated

__all__ = ["ShowTablesStatement", "compile_show_tables", "LOGIC_DB"]


#: ddm-core's own tables (the XA log, ddm_core.xa.log.TABLE, on the default data source unless
#: ``xa.logDataSource`` names another): not the application's, so not listed (reflection and
#: migration tools would take them for tables of the application's).
OWN_TABLES = ("ddm_xa_log",)

_WHERE = re.compile(r"\bWHERE\b", re.I)
_TRAILING = re.compile(r"[\s;]+\Z")


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _where_text(text: str) -> str:
    """The condition after the first ``WHERE`` outside strings and comments (SHOW's last clause)."""
    pos = 0
    for quoted in [*QUOTED_OR_PARAM.finditer(text), None]:
        stop = quoted.start() if quoted is not None else len(text)
        found = _WHERE.search(text, pos, stop)
        if found is not None:
            return _TRAILING.sub("", text[found.end() :]).strip()
        pos = quoted.end() if quoted is not None else stop
    raise RoutingError(f"cannot find the WHERE condition of {text!r}")


class _Listing:
    """What one data source contributes: its physical → logic names, and whether it lists everything."""

    def __init__(self, config: ShardingConfig, data_source: str) -> None:
        self.dialect: Dialect = dialect_for(config.data_sources[data_source].primary.dialect)
        self.logic: dict[str, list[str]] = {}  # logic name → physical names that differ from it
        self.names: list[str] = []  # every configured physical name on this data source
        for table in config.tables.values():
            physical = list(table.tables_by_source.get(data_source, ()))
            self.names += physical
            renamed = [p for p in physical if p != table.name]
            if renamed:
                self.logic[table.name] = renamed
        self.names += list(config.broadcast_tables)
        self.names += [t.name for t in config.single_tables.values() if t.data_source == data_source]
        self.everything = data_source == config.default_data_source

    @property
    def empty(self) -> bool:
        return not self.names and not self.everything

    def name_sql(self, column: str) -> str:
        """The logic name of the row's table (``column`` holds the physical name)."""
        if not self.logic:
            return column
        cases = " ".join(
            f"WHEN {column} IN ({self._names(physical)}) THEN {self.dialect.string_literal(logic)}"
            for logic, physical in self.logic.items()
        )
        return f"CASE {cases} ELSE {column} END"

    def restriction(self, column: str) -> str:
        if self.everything:
            return f" AND {column} NOT IN ({self._names(OWN_TABLES)})"
        return f" AND {column} IN ({self._names(self.names)})" if self.names else " AND 1 = 0"

    def _names(self, names: Sequence[str]) -> str:
        return ", ".join(self.dialect.string_literal(n) for n in names)


def _unit_sql(config: ShardingConfig, listing: _Listing, full: bool, shown: str, where: str) -> str:
    column = _ident(f"Tables_in_{config.name or LOGIC_DB}")
    name, kind, tables = listing.dialect.listed_tables()
    source = (
        f"SELECT DISTINCT {listing.name_sql(name)} AS {column}"
        + (f", {kind} AS `Table_type`" if full else "")
        + f" {tables}"
        + listing.restriction(name)
    )
    binary = listing.dialect.binary_order(column)
    selected = column if shown == column else f"{column} AS {shown}"
    return (
        f"SELECT {selected}{', `Table_type`' if full else ''} FROM ({source}) AS ddm_tables"
        f"{where} ORDER BY {binary}"
    )


def compile_show_tables(ctx: RouteContext, tree: exp.Show, text: str, style: str) -> "ShowTablesStatement":
    """The logical ``SHOW TABLES`` of ``tree`` (its schema, if any, is the logical one).

    Args:
        ctx: The routing context.
        tree: The parsed ``SHOW ... TABLES``.
        text: The statement text sqlglot parsed (``:pN`` placeholders).
        style: Output paramstyle family (``"format"`` or ``"qmark"``).
    """
    config = ctx.config
    column = f"Tables_in_{config.name or LOGIC_DB}"
    full = bool(tree.args.get("full"))
    like = tree.args.get("like")
    shown, where = _ident(column), ""
    if isinstance(like, exp.Literal) and like.meta.get("start") is not None:
        pattern = text[like.meta["start"] : like.meta["end"] + 1]  # as written: sqlglot would re-escape it
        shown = _ident(f"{column} ({like.name})")
        where = f" WHERE {_ident(column)} LIKE {pattern}"
    elif like is not None:
        where = f" WHERE {_ident(column)} LIKE {like.sql(dialect='mysql')}"
    elif tree.args.get("where") is not None:
        where = f" WHERE {_where_text(text)}\n"  # a trailing -- comment must not swallow the ORDER BY
    units = {}
    for ds in config.data_sources:
        listing = _Listing(config, ds)
        units[ds] = (listing.empty, from_generated(_unit_sql(config, listing, full, shown, where), style))
    listed = tuple(ds for ds, (empty, _) in units.items() if not empty) or (ctx.first_source(),)
    templates = {ds: template for ds, (_, template) in units.items()}
    return ShowTablesStatement(ctx, templates, listed, 2 if full else 1)


class ShowTablesStatement:
    """A compiled logical ``SHOW TABLES``: one unit per listing data source, merged distinct and sorted."""

    statement = "show"
    fast_path: str | None = None  # no shard condition to decide on

    def __init__(
        self, ctx: RouteContext, templates: dict[str, Template], listed: tuple[str, ...], columns: int
    ) -> None:
        self.ctx = ctx
        self.templates = templates
        self.listed = listed
        self.merge = MergeSpec(order_by=((0, False),), distinct=True, visible=columns)

    def route(self, bound: Sequence[Any], hint: Hint | None) -> RoutePlan:
        sources = self.listed
        if hint is not None and hint.database is not None:
            if hint.database not in self.templates:
                raise RoutingError(
                    f"hint database={hint.database!r} is not a configured data source "
                    f"(known: {', '.join(self.templates)})",
                    data_source=hint.database,
                )
            sources = (hint.database,)
        units = []
        for ds in sources:
            template = self.templates[ds]
            units.append(RouteUnit(ds, self.ctx.comment(ds) + template.fmt, template.params_of(bound)))
        kind = RouteKind.BROADCAST if len(units) > 1 else RouteKind.SINGLE
        return RoutePlan(
            tuple(units), kind, (), self.merge, "show", False, force_primary=bool(hint and hint.force_primary)
        )
