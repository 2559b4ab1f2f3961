"""DDL, SHOW / DESCRIBE and other statements that are not routed by conditions.

* DDL on a logic table (CREATE / ALTER / DROP / TRUNCATE TABLE, CREATE / DROP
  INDEX) → every physical table; on a broadcast table → every data source.
  Constraint names on a sharded table get the physical table's suffix
  (:mod:`ddm_core.route.ddl.ddl_names`).
* SHOW / DESCRIBE on a logic table → its first node (the physical tables are
  alike). ``FROM <logical schema>`` / ``<logical schema>.t`` is dropped there
  (the unit runs in the data source's own database; :mod:`ddm_core.route.text.edits`).
* ``SHOW [FULL] TABLES`` (of the logical schema) → the logic table names
  (:mod:`ddm_core.route.ddl.show_tables`).
* Anything else without a configured table (SET, unknown tables) → the
  default data source, or an error when none is configured.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from sqlglot import exp

from ddm_core._text import shorten_sql
from ddm_core.errors import UnsupportedSQLError
from ddm_core.route.context import RouteContext
from ddm_core.route.ddl.auto_increment import refuse_auto_increment
from ddm_core.route.ddl.ddl_names import constraint_edits
from ddm_core.route.ddl.logic_ddl import logic_show_create, logic_show_index
from ddm_core.route.ddl.show_tables import compile_show_tables
from ddm_core.route.plan import NO_MERGE, MergeSpec
from ddm_core.route.query.query import QueryStatement
from ddm_core.route.shards.analyze import NodeIndex, analyze
from ddm_core.route.text.edits import is_logical_schema, param_edits, span, table_edits
from ddm_core.route.text.template import Edit, from_edits

__all__ = ["compile_other", "DDL_TYPES"]

# ANALYZE TABLE maintains each physical table's statistics: it goes everywhere, like DDL.
DDL_TYPES = (exp.Create, exp.Drop, exp.Alter, exp.TruncateTable, exp.Analyze)

# The FROM / IN that introduces a SHOW statement's schema (``SHOW COLUMNS FROM t FROM db``).
_SCHEMA_KEYWORD = re.compile(r"\s*\b(?:FROM|IN)\s*\Z", re.I)


def compile_other(
    ctx: RouteContext, tree: exp.Expr, text: str, params: dict[str, int], style: str, nodes: NodeIndex | None = None
) -> Any:
    """Compile a statement that is neither a query nor an INSERT."""
    if isinstance(tree, exp.Command):
        # sqlglot could not structure it (e.g. some SHOW forms): run it where unrouted SQL goes.
        return _passthrough(ctx, tree, text, params, style)
    extra: list[Edit] = []
    if isinstance(tree, exp.Show):
        db = tree.args.get("db")
        if str(tree.this).upper() == "TABLES" and (db is None or is_logical_schema(db.name, ctx.config.name)):
            return compile_show_tables(ctx, tree, text, style)
        target = tree.args.get("target")
        known = isinstance(target, exp.Identifier) and ctx.config.kind_of(target.name) is not None
        if known:
            # SHOW CREATE TABLE t / SHOW COLUMNS FROM t: sqlglot keeps t as a bare identifier;
            # make it a table so it is rewritten to the physical table like DESCRIBE t.
            tree.set("target", exp.Table(this=target))
            nodes = None  # the tree changed: analyze walks it again
        if isinstance(db, exp.Identifier) and (known or is_logical_schema(db.name, ctx.config.name)):
            extra.append(_drop_show_schema(text, db, target))
    if isinstance(tree, DDL_TYPES):
        refuse_auto_increment(ctx.config, tree, f"DDL {shorten_sql(text)!r}")
    analysis = analyze(tree, ctx.config, params, nodes)
    edits = table_edits(analysis, ctx.config.name) + param_edits(text) + extra
    if isinstance(tree, DDL_TYPES):
        edits += constraint_edits(ctx.config, tree, analysis)
    template = from_edits(text, edits, style)
    if isinstance(tree, exp.Describe) and isinstance(tree.this, exp.Query):
        # EXPLAIN <statement>: the plan of the node(s) the statement itself would run on.
        return QueryStatement(ctx, analysis, template, "show", reason="EXPLAIN on the statement's own nodes")
    if isinstance(tree, DDL_TYPES):
        return QueryStatement(ctx, analysis, template, "ddl", mode="every", reason="DDL on every physical table")
    if isinstance(tree, (exp.Describe, exp.Show)):
        return QueryStatement(ctx, analysis, template, "show", mode="first", reason="first node (tables are alike)",
                              merge=_shown_as_logic(ctx, tree))  # fmt: skip
    return QueryStatement(ctx, analysis, template, "other", mode="first", reason="")


def _shown_as_logic(ctx: RouteContext, tree: exp.Expr) -> MergeSpec:
    """``SHOW CREATE TABLE`` and ``SHOW INDEX`` of a sharded table answer with the logic table's name, text and
    key names (its first physical table's, route/ddl/logic_ddl.py); any other SHOW / DESCRIBE as the physical
    table answers."""
    target = tree.args.get("target")
    kind = str(tree.this).upper() if isinstance(tree, exp.Show) else ""
    if kind not in ("CREATE TABLE", "INDEX") or not isinstance(target, exp.Table):
        return NO_MERGE
    table = ctx.config.table(target.name)
    if table is None:
        return NO_MERGE
    if kind == "INDEX":
        return MergeSpec(rewrite=partial(logic_show_index, table.name))
    sharded = frozenset(name.lower() for name in ctx.config.tables)
    return MergeSpec(rewrite=partial(logic_show_create, table.name, sharded))


def _drop_show_schema(text: str, db: exp.Identifier, target: object) -> Edit:
    """Cut a SHOW statement's schema: ``db.`` before its table, or `` FROM db`` / `` IN db`` after it."""
    start, end = span(db)
    if isinstance(target, exp.Identifier) and target.meta.get("start") is not None and start < target.meta["start"]:
        return Edit(start, target.meta["start"], text="")
    keyword = _SCHEMA_KEYWORD.search(text, 0, start)
    return Edit(keyword.start() if keyword is not None else start, end, text="")


def _passthrough(ctx: RouteContext, tree: exp.Command, text: str, params: dict[str, int], style: str) -> Any:
    words = text.split()
    keyword = (tree.name or (words[0] if words else "")).upper()
    for name in _mentioned_tables(ctx, text):
        raise UnsupportedSQLError(
            f"{keyword} statement mentions configured table {name!r} but could not be parsed into a "
            "routable form; use a form sqlglot understands",
            construct=keyword,
            table=name,
        )
    analysis = analyze(exp.Select(), ctx.config, params)
    template = from_edits(text, param_edits(text), style)
    return QueryStatement(ctx, analysis, template, "other", mode="first", reason=f"{keyword}: no configured table")


def _mentioned_tables(ctx: RouteContext, text: str) -> list[str]:
    words = {w.strip("`;,()").lower() for w in text.split()}
    config = ctx.config
    return [t for t in (*config.tables, *config.broadcast_tables, *config.single_tables) if t.lower() in words]
