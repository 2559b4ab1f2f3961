"""Text edits for token-level rewriting: where tables and placeholders sit in the SQL."""

from __future__ import annotations

from sqlglot import exp

from ddm_core.errors import UnsupportedSQLError
from ddm_core.metadata.model import TableKind
from ddm_core.route.analyze import Analysis
from ddm_core.route.template import QUOTED_OR_PARAM, Edit

__all__ = ["param_edits", "table_edits", "span"]


def param_edits(numbered: str) -> list[Edit]:
    """Edits turning every ``:pN`` of ``numbered`` into a parameter slot."""
    return [
        Edit(m.start(), m.end(), param=int(m.group("param")))
        for m in QUOTED_OR_PARAM.finditer(numbered)
        if m.group("param") is not None
    ]


def table_edits(analysis: Analysis) -> list[Edit]:
    """Edits replacing sharded table references (and qualifiers naming them) by slots."""
    edits: list[Edit] = []
    sharded = {u.key: u.slot for u in analysis.uses if u.kind is TableKind.SHARDED}
    unaliased = {u.key for u in analysis.uses if u.kind is TableKind.SHARDED and not u.alias}
    for use in analysis.uses:
        if use.kind is not TableKind.SHARDED:
            continue
        ident = use.node.this
        start, end = span(ident)
        db = use.node.args.get("db")
        if isinstance(db, exp.Identifier) and db.meta.get("start") is not None:
            start = db.meta["start"]  # drop the schema: the unit runs in its own data source
        edits.append(Edit(start, end, table=use.slot))
    for col in analysis.nodes.columns if unaliased else ():
        qualifier = col.args.get("table")
        if isinstance(qualifier, exp.Identifier) and qualifier.name.lower() in unaliased:
            start, end = span(qualifier)
            db = col.args.get("db")
            if isinstance(db, exp.Identifier) and db.meta.get("start") is not None:
                start = db.meta["start"]  # schema.t.col: the schema goes, as it does in FROM
            edits.append(Edit(start, end, table=sharded[qualifier.name.lower()]))
    return edits


def span(ident: exp.Expression) -> tuple[int, int]:
    meta = ident.meta
    if meta.get("start") is None:
        raise UnsupportedSQLError(f"cannot locate {ident.sql()!r} in the statement text")
    return meta["start"], meta["end"] + 1
