"""First sight of a SQL text: parse it and compile the statement that routes it."""

from __future__ import annotations

import re
from typing import Any, Callable, Protocol, Sequence

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ddm_core._text import shorten_sql
from ddm_core.errors import DdmError, UnsupportedSQLError
from ddm_core.metadata.model import TableKind
from ddm_core.route.context import RouteContext
from ddm_core.route.ddl.ddl import compile_other
from ddm_core.route.hints import Hint
from ddm_core.route.insert.insert import compile_insert
from ddm_core.route.plan import RoutePlan
from ddm_core.route.query.query import QueryStatement, ShardKeySet
from ddm_core.route.query.select_rewrite import multi_factory
from ddm_core.route.shards.analyze import Analysis, NodeIndex, TableUse, analyze, placement_assignments
from ddm_core.route.shards.conditions import value_source
from ddm_core.route.text.edits import param_edits, table_edits
from ddm_core.route.text.parse_errors import explain, locate
from ddm_core.route.text.placeholders import Translated, source_offset
from ddm_core.route.text.sql_hint import HintedStatement, pass_through, read_sql_hint
from ddm_core.route.text.statement_parser import parse_statements
from ddm_core.route.text.template import Edit, from_edits

__all__ = ["Compiled", "compile_statement", "parse", "quote_statement", "REPLACE_HEAD"]


class Compiled(Protocol):
    """A statement compiled once per SQL text."""

    def route(self, bound: Sequence[Any], hint: Hint | None) -> RoutePlan: ...


#: A statement opening with REPLACE (after comments): group 1 is what comes before the word.
REPLACE_HEAD = re.compile(r"\A(\s*(?:/\*.*?\*/\s*)*)REPLACE\b", re.I | re.S)
_HEAD = 24  # characters of a statement's start an error message must show to count as quoting it
# A %-placeholder or %% escape the caller may have meant, in a statement routed without params.
_PERCENT_PLACEHOLDER = re.compile(r"%(?:%|s|\([^()]*\)s)")


def parse(text: str, original: str, to_source: Callable[[int], int] | None = None, note: str = "") -> exp.Expr:
    """Parse one MySQL statement, mapping sqlglot's errors to ours.

    Args:
        text: What sqlglot parses.
        original: The caller's statement, quoted in errors.
        to_source: Maps an offset in ``text`` to the same place in ``original``
            (default: they are the same text).
        note: Appended to a parse error's message.

    Raises:
        UnsupportedSQLError: the statement does not parse (the message says
            what is wrong in SQL words, at which line and column, with a caret),
            or it is not exactly one statement.
    """
    try:
        trees = parse_statements(text)  # with an error context that reports the failing token's offset
    except (ParseError, TokenError) as err:
        problem, offset = explain(err, text)
        where = ""
        context: dict[str, Any] = {}
        if offset is not None:
            offset = to_source(offset) if to_source is not None else offset
            where = " " + locate(original, offset)
            context["position"] = offset
        raise UnsupportedSQLError(
            f"cannot parse statement {shorten_sql(original)!r}: {problem}{where}{note}", sql=original, **context
        ) from err
    except RecursionError:
        raise
    except Exception as err:  # noqa: BLE001 - sqlglot trips over some hostile text (IndexError...)
        raise UnsupportedSQLError(
            f"cannot parse statement {shorten_sql(original)!r}: it is incomplete or not a statement form "
            f"ddm-core can read{note}",
            sql=original,
        ) from err
    statements = [t for t in trees if t is not None]
    if len(statements) != 1:
        raise UnsupportedSQLError(
            f"expected exactly one statement, got {len(statements)}: {shorten_sql(original)!r}", sql=original
        )
    return statements[0]


def _check_placeholders(nodes: NodeIndex, found: int, params: dict[str, int], original: str) -> None:
    """Refuse ``:name`` placeholders the caller wrote: they would collide with the ``:pN`` ones."""
    names = [p.name for p in nodes.placeholders]
    stray = [n for n in names if n not in params]
    seen: set[str] = set()
    for name in names if not stray else ():
        if name in seen:  # a :pN the caller wrote twice
            stray.append(name)
            break
        seen.add(name)
    if not stray and found == len(params):
        return
    fragment = ":" + stray[0] if stray else ":p"
    raise UnsupportedSQLError(
        f"placeholder {fragment!r} in {shorten_sql(original)!r} is not a supported parameter style "
        "(use %s, %(name)s or ?)",
        sql=original,
        construct=fragment,
    )


def compile_statement(ctx: RouteContext, translated: Translated, source: str | None = None) -> Any:
    """Compile one statement for ``ctx``'s configuration.

    ``source``: the caller's own text, quoted in error messages (default: the translated text).
    """
    original = translated.sql if source is None else source
    try:
        return _compile_statement(ctx, translated, original)
    except DdmError as err:
        quote_statement(err, original)
        raise
    except RecursionError:
        raise UnsupportedSQLError(
            f"statement {shorten_sql(original)!r} nests too deeply to route (parentheses, subqueries or "
            "chained operators several hundred levels deep)",
            sql=original,
            construct="nesting",
        ) from None


def quote_statement(err: DdmError, sql: str) -> None:
    """Make ``err``'s message quote ``sql`` (appended when the message does not already show its start).

    Every routing error names the statement it is about, also those raised deep
    in analysis or routing that only know a table or a value.
    """
    head = shorten_sql(sql[:400], _HEAD)
    message = err.message
    if head.endswith("..."):
        head = head[:-3]
    inner = repr(head)[1:-1].replace("\\'", "'")  # repr escapes ' only when the text also holds a "
    if any(form in message for form in (head, inner, inner.replace("'", "\\'"))):
        return
    err.message = f"{message} (statement: {shorten_sql(sql)!r})"
    err.args = (err.message, *err.args[1:])
    if "sql" not in err.context:
        err.context["sql"] = sql
        setattr(err, "sql", sql)


def _compile_statement(ctx: RouteContext, translated: Translated, original: str) -> Any:
    numbered = translated.numbered()
    sql_hint = read_sql_hint(numbered, ctx.config, original)
    if sql_hint is None:
        return _compile_text(ctx, translated, original, numbered, 0)
    # The hint comment opens the statement and is not sent on: compile what follows it.
    text = numbered[sql_hint.end :]
    if sql_hint.skip_rewrite:
        style = "qmark" if translated.style == "qmark" else "format"
        return pass_through(ctx, sql_hint, from_edits(text, param_edits(text), style), text)
    return HintedStatement(_compile_text(ctx, translated, original, text, sql_hint.end), sql_hint)


def _compile_text(ctx: RouteContext, translated: Translated, original: str, numbered: str, cut: int) -> Any:
    """Compile ``numbered``, the translated statement from offset ``cut`` on (after an opening SQL hint)."""
    found = REPLACE_HEAD.match(numbered)
    replace_span = (found.end(1), found.end(1) + len("INSERT")) if found else None
    # sqlglot reads REPLACE INTO as an opaque command: parse it as INSERT, write REPLACE back.
    text = numbered[: found.end(1)] + "INSERT" + numbered[found.end() :] if found else numbered

    def to_source(offset: int) -> int:
        if replace_span is not None and offset >= replace_span[0]:  # "INSERT" is one shorter than "REPLACE"
            offset = replace_span[0] if offset < replace_span[1] else offset + 1
        return source_offset(translated, original, offset + cut)

    note = ""
    if not translated.formatted and _PERCENT_PLACEHOLDER.search(original):
        note = (
            " (no parameters were given, so the text is read as sent, as PyMySQL does: '%s' and "
            "'%(name)s' are no placeholders and '%%' no escape; pass the parameters, [] for none)"
        )
    tree = parse(text, original, to_source, note)
    params = {f"p{i}": i for i in range(len(translated.names))}
    spans = param_edits(text)  # one scan, shared: a 10 000-row INSERT has 30 000 of them
    nodes = NodeIndex.of(tree)  # one walk of the tree for all of first-sight analysis
    _check_placeholders(nodes, len(spans), params, original)
    if isinstance(tree, (exp.Condition, exp.Alias, exp.Identifier, exp.Tuple, exp.Star)):
        # sqlglot accepts a bare expression ("SELEC * FORM t" reads as an alias): not a statement.
        raise UnsupportedSQLError(f"not a SQL statement: {shorten_sql(original)!r}", sql=original)
    if any(not select.expressions for select in nodes.selects):
        raise UnsupportedSQLError(
            f"cannot parse statement {shorten_sql(original)!r}: SELECT without a select list", sql=original
        )
    if any(isinstance(t.this, exp.Placeholder) for t in nodes.tables):
        raise UnsupportedSQLError(
            f"a parameter placeholder cannot stand for a table name in {shorten_sql(original)!r}; "
            "table names are part of the SQL text",
            sql=original,
            construct="placeholder as table",
        )
    style = "qmark" if translated.style == "qmark" else "format"
    if isinstance(tree, exp.Insert):
        return compile_insert(
            ctx, tree, text, params, style, spans, replace=found is not None, replace_span=replace_span, nodes=nodes
        )
    if isinstance(tree, (exp.Select, exp.SetOperation, exp.Update, exp.Delete)):
        return _compile_query(ctx, tree, text, params, style, spans, nodes)
    return compile_other(ctx, tree, text, params, style, nodes=nodes)


def _compile_query(
    ctx: RouteContext,
    tree: exp.Expression,
    text: str,
    params: dict[str, int],
    style: str,
    spans: list[Edit],
    nodes: NodeIndex,
) -> QueryStatement:
    analysis = analyze(tree, ctx.config, params, nodes)
    template = from_edits(text, table_edits(analysis, ctx.config.name) + spans, style)
    if isinstance(tree, (exp.Update, exp.Delete)):
        statement = "update" if isinstance(tree, exp.Update) else "delete"
        if analysis.primary is not None:
            _check_written_tables(tree, analysis)
        sets = _shard_key_sets(tree, analysis, params) if isinstance(tree, exp.Update) else []
        # ORDER BY ... LIMIT picks rows across the whole table: only one shard can honour it.
        single_only = bool(tree.args.get("limit") or tree.args.get("order"))
        return QueryStatement(
            ctx, analysis, template, statement, shard_key_sets=sets, reason=_reason(analysis), single_only=single_only
        )
    multi = None
    if analysis.primary is not None:
        multi = multi_factory(ctx, tree, analysis, params, style)
    # SELECT ... FOR UPDATE / FOR SHARE / LOCK IN SHARE MODE takes locks: only the primary can (docs/readwrite.md)
    locking = tree.find(exp.Lock) is not None
    return QueryStatement(ctx, analysis, template, "select", multi=multi, reason=_reason(analysis), locking=locking)


def _check_written_tables(tree: exp.Update | exp.Delete, analysis: Analysis) -> None:
    """A multi-table UPDATE / DELETE must not change a broadcast table on a shard's node only."""
    by_alias = {(u.alias or u.name).lower(): u for u in analysis.uses}
    written = []
    if isinstance(tree, exp.Delete):
        for ref in tree.args.get("tables") or [tree.this]:
            use = by_alias.get(ref.name.lower()) if isinstance(ref, exp.Table) else None
            if use is not None:
                written.append(use)
    else:
        for assignment in tree.expressions:
            col = assignment.left if isinstance(assignment, exp.EQ) else None
            if isinstance(col, exp.Column):
                use = _written_use(tree, col, by_alias)
                if use is not None:
                    written.append(use)
    for use in written:
        if use.kind is TableKind.BROADCAST:
            raise UnsupportedSQLError(
                f"{'UPDATE' if isinstance(tree, exp.Update) else 'DELETE'} changes broadcast table "
                f"{use.name!r} together with sharded "
                f"table {analysis.primary.name!r}; it would run only where the shard is, leaving "  # type: ignore[union-attr]
                f"{use.name!r} different elsewhere. Change {use.name!r} in a statement of its own",
                tables=(use.name, analysis.primary.name),  # type: ignore[union-attr]
            )


def _reason(analysis: Analysis) -> str:
    primary = analysis.primary
    if primary is None:
        return ""
    parts = []
    for level, strategy in (("database", primary.database_strategy), ("table", primary.table_strategy)):
        if strategy.is_sharded and strategy.algorithm is not None:
            cols = ", ".join(strategy.columns) or "hint"
            parts.append(f"{level} by {cols} via {strategy.algorithm.type} {strategy.algorithm.name!r}")
    return "; ".join(parts) or "not sharded by any column"


def _written_use(tree: exp.Update, col: exp.Column, by_alias: dict[str, TableUse]) -> TableUse | None:
    """The table ``SET [alias.]col = ...`` writes; an unqualified column is the first table's."""
    first = tree.this
    key = col.table or ((first.alias or first.name) if isinstance(first, exp.Table) else "")
    return by_alias.get(key.lower())


def _shard_key_sets(tree: exp.Update, analysis: Analysis, params: dict[str, int]) -> list[ShardKeySet]:
    primary = analysis.primary
    if primary is None:
        return []
    by_alias = {(u.alias or u.name).lower(): u for u in analysis.uses}
    out = []
    for name, column, right in placement_assignments(primary, tree.expressions):
        same = isinstance(right, exp.Column) and right.name.lower() == name
        written = _written_use(tree, column, by_alias)
        # Name the table the statement writes, not its binding group's first table.
        table = written.name if written is not None else primary.name
        out.append(ShardKeySet(name, value_source(right, params), same, table))
    return out

