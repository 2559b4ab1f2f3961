"""Text edits for token-level rewriting: where tables and placeholders sit in the SQL.

Schema qualifiers: each unit runs in its data source's own database, so a
qualifier naming the logical database must go. On a configured table
(sharded, broadcast, single) any qualifier is taken for the logical database
and dropped, as sharded tables always did; on a table the configuration does
not know, only the logical schema name (``config.name``) is dropped, so
``information_schema.tables`` or another database on the default server keep
theirs (docs/architecture.md#schema-qualified-names).
"""

from __future__ import annotations

from sqlglot import exp

from ddm_core.errors import UnsupportedSQLError
from ddm_core.metadata.model import TableKind
from ddm_core.route.shards.analyze import Analysis
from ddm_core.route.text.template import QUOTED_OR_PARAM, Edit

__all__ = ["param_edits", "table_edits", "span", "drops_schema", "is_logical_schema", "LOGIC_DB"]


def param_edits(numbered: str) -> list[Edit]:
    """Edits turning every ``:pN`` of ``numbered`` into a parameter slot."""
    return [
        Edit(m.start(), m.end(), param=int(m.group("param")))
        for m in QUOTED_OR_PARAM.finditer(numbered)
        if m.group("param") is not None
    ]


#: The logical schema name when the configuration gives none (ShardingSphere's default database
#: name; ``SHOW TABLES`` answers with it, so a qualifier naming it is logical too).
LOGIC_DB = "logic_db"


def is_logical_schema(name: str, logical_schema: str | None) -> bool:
    """Does the qualifier ``name`` name the configuration's logical database (``config.name``, else ``logic_db``)?"""
    return name.lower() == (logical_schema if logical_schema is not None else LOGIC_DB).lower()


def drops_schema(kind: TableKind | None, qualifier: str, logical_schema: str | None) -> bool:
    """Is the schema qualifier of a table of this ``kind`` dropped (see the module docstring)?"""
    return kind is not None or is_logical_schema(qualifier, logical_schema)


def table_edits(analysis: Analysis, logical_schema: str | None = None) -> list[Edit]:
    """Edits replacing sharded table references (and qualifiers naming them) by slots.

    Schema qualifiers are dropped as the module docstring says; ``logical_schema``
    is the configuration's logical database name (``config.name``).
    """
    edits: list[Edit] = []
    sharded = {u.key: u.slot for u in analysis.uses if u.kind is TableKind.SHARDED}
    unaliased = {u.key for u in analysis.uses if u.kind is TableKind.SHARDED and not u.alias}
    kinds = {u.key: u.kind for u in analysis.uses if not u.alias}
    for use in analysis.uses:
        ident = use.node.this
        db = _located(use.node.args.get("db"))
        if use.kind is TableKind.SHARDED:
            start, end = span(ident)
            if db is not None:
                start = db.meta["start"]  # drop the schema: the unit runs in its own data source
            edits.append(Edit(start, end, table=use.slot))
        elif db is not None and drops_schema(use.kind, db.name, logical_schema):
            edits.append(Edit(db.meta["start"], span(ident)[0], text=""))
    for col in analysis.nodes.columns if kinds else ():
        qualifier = col.args.get("table")
        db = _located(col.args.get("db"))
        if not isinstance(qualifier, exp.Identifier):
            continue
        key = qualifier.name.lower()
        if key in unaliased:
            start, end = span(qualifier)
            if db is not None:
                start = db.meta["start"]  # schema.t.col: the schema goes, as it does in FROM
            edits.append(Edit(start, end, table=sharded[key]))
        elif db is not None and key in kinds and drops_schema(kinds[key], db.name, logical_schema):
            edits.append(Edit(db.meta["start"], span(qualifier)[0], text=""))
    return edits


def _located(node: object) -> exp.Identifier | None:
    """``node`` when it is an identifier whose place in the text is known."""
    if isinstance(node, exp.Identifier) and node.meta.get("start") is not None:
        return node
    return None


def span(ident: exp.Expression) -> tuple[int, int]:
    meta = ident.meta
    if meta.get("start") is None:
        raise UnsupportedSQLError(f"cannot locate {ident.sql()!r} in the statement text")
    return meta["start"], meta["end"] + 1
