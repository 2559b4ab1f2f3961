"""INSERT and REPLACE: rows split per node, keys generated, batch-routed.

The statement text is cut, not regenerated: a prefix (``INSERT INTO {table}
(cols) VALUES``), one template per row, and a suffix (``ON DUPLICATE KEY
UPDATE ...``). Each unit gets its rows in their original order with exactly
their params. Rows are routed in one batch through the algorithms' numpy /
compiled paths, so a 10 000-row INSERT costs no 10 000 algorithm calls.
"""

from __future__ import annotations

import re
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Sequence

from sqlglot import exp

from ddm_core.dialects import INPUT
from ddm_core.errors import ShardKeyUpdateError, ShardValueError, UnsupportedSQLError
from ddm_core.hashing import slot_of
from ddm_core.ids import GeneIdGenerator, Snowflake, gene_of
from ddm_core.metadata.model import KeyGeneratorSpec, ShardedTable, TableKind
from ddm_core.route.analyze import NodeIndex, analyze
from ddm_core.route.conditions import Param, Source, value_source
from ddm_core.route.context import RouteContext, physical_name
from ddm_core.route.edits import span, table_edits
from ddm_core.route.hints import Hint
from ddm_core.route.insert_fast import OneRowInsert, one_row_insert
from ddm_core.route.plan import NO_MERGE, RouteKind, RoutePlan, RouteUnit, TableRoute
from ddm_core.route.query import QueryStatement
from ddm_core.route.targets import gene_route, route_rows
from ddm_core.route.template import Edit, Template, from_edits

__all__ = ["compile_insert", "InsertStatement", "generator_for"]

_SCAN = re.compile(
    r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"|`(?:[^`]|``)*`|/\*.*?\*/|--(?=[\s\x00-\x1f]|\Z)[^\n]*|#[^\n]*"
    r"|(?P<open>\()|(?P<close>\))|(?P<values>\bVALUES?\b)",
    re.I | re.S,
)


# One generator per (kind, worker id, gene bits) for the whole process, on purpose
# not per router or per config: two routers (two executors, a config reload) with
# the same worker id must draw from one sequence, or both could hand out the same
# id within one millisecond. Worker ids are 0..1023, so this stays small.
_GENERATORS: dict[tuple[str, int, int], Any] = {}
_GENERATORS_LOCK = threading.Lock()


def _generator(kind: str, worker_id: int, gene_bits: int) -> Any:
    key = (kind, worker_id, gene_bits)
    gen = _GENERATORS.get(key)
    if gen is None:
        with _GENERATORS_LOCK:  # two first callers must not each start a sequence
            gen = _GENERATORS.get(key)
            if gen is None:
                gen = GeneIdGenerator(worker_id, gene_bits) if kind == "GENE" else Snowflake(worker_id)
                _GENERATORS[key] = gen
    return gen


def generator_for(spec: KeyGeneratorSpec) -> Any:
    """The process-wide generator object of a key generator spec (``None`` for UUID)."""
    kind = spec.type.upper()
    if kind == "UUID":
        return None
    return _generator(kind, spec.worker_id or 0, spec.gene_bits or 10)


@dataclass(frozen=True, slots=True)
class _Row:
    template: Template  # the row's text "(…)" with param slots
    sources: tuple[Source | None, ...]  # per column: the value's source, None when an expression


class InsertStatement:
    """A compiled INSERT / REPLACE ... VALUES into a sharded table."""

    def __init__(
        self,
        ctx: RouteContext,
        table: ShardedTable,
        slot_count: int,
        prefix: Template,
        rows: list[_Row],
        suffix: Template,
        columns: list[str],
        key_column: str | None,
        generator: KeyGeneratorSpec | None,
        style: str,
        literal_only: bool,
    ) -> None:
        self.ctx = ctx
        self.table = table
        self.slot_count = slot_count
        self.prefix = prefix
        self.rows = rows
        self.suffix = suffix
        self.columns = columns  # lower case, as listed (generated key appended)
        self.key_column = key_column
        self.generator = generator
        self.style = style
        self.literal_only = literal_only
        self.needed = [c.lower() for c in table.sharding_columns]
        for c in self.needed:
            if c not in columns and c != key_column:
                raise UnsupportedSQLError(
                    f"INSERT into {table.name!r} does not set its shard column {c!r}; every row "
                    "needs it (a row without a shard key has no shard)",
                    table=table.name,
                    column=c,
                )
        self._one_row: OneRowInsert | None | bool = None  # the fast path, decided on first use

    def route(self, bound: Sequence[Any], hint: Hint | None) -> RoutePlan:
        if hint is None and len(self.rows) == 1:
            if self._one_row is None:
                self._one_row = one_row_insert(self) or False
            if self._one_row:
                return self._one_row.route(bound, lambda: self._route_rows(bound, hint))  # type: ignore[union-attr]
        return self._route_rows(bound, hint)

    @property
    def fast_path(self) -> str | None:
        """Which values decide the node of a one-row INSERT on the fast path (``None``: batch routing)."""
        if self._one_row is None:
            self._one_row = one_row_insert(self) or False
        return self._one_row.description if self._one_row else None  # type: ignore[union-attr]

    def _route_rows(self, bound: Sequence[Any], hint: Hint | None) -> RoutePlan:
        table = self.table
        n = len(self.rows)
        generated = self._generate(bound)
        values = {c: self._column_values(c, bound, generated) for c in self.needed}
        router = self.ctx.router_of(table)
        sources = self.ctx.hinted_sources(table, hint)
        nodes = route_rows(router, values, n, hint, sources)
        if router.gene is not None and generated is None and router.gene[0] in self.columns:
            self._check_genes(router.gene, bound, values)
        by_node: dict[int, list[int]] = {}
        for row, node in enumerate(nodes.tolist()):
            by_node.setdefault(node, []).append(row)
        units = []
        slot = [physical_name(table.name)] * self.slot_count
        for node in sorted(by_node):
            data_node = table.data_nodes[node]
            slot[0] = physical_name(data_node.table)
            head, head_params = self.prefix.fill(slot, bound)
            texts = [head]
            params = list(head_params)
            for i, r in enumerate(by_node[node]):
                text, row_params = self.rows[r].template.fill(slot, bound)
                if generated is not None:
                    text, row_params = self._with_key(text, row_params, generated[r])
                texts.append(text if i == 0 else ", " + text)
                params.extend(row_params)
            tail, tail_params = self.suffix.fill(slot, bound)
            texts.append(tail)
            params.extend(tail_params)
            ds = data_node.data_source
            sql = self.ctx.comment(ds) + "".join(texts)
            units.append(RouteUnit(ds, sql, tuple(params), ((table.name, data_node.table),)))
        kind = RouteKind.SINGLE if len(units) == 1 else RouteKind.MULTI
        reason = f"{n} row(s) routed by {', '.join(self.needed)}"
        route = TableRoute(table.name, tuple(str(table.data_nodes[i]) for i in sorted(by_node)), reason)
        return RoutePlan(
            tuple(units),
            kind,
            (route,),
            NO_MERGE,
            "insert",
            True,
            generated_keys=tuple(generated) if generated is not None else (),
            force_primary=bool(hint and hint.force_primary),
        )

    # -- values -------------------------------------------------------------------

    def _column_values(self, column: str, bound: Sequence[Any], generated: list[Any] | None) -> list[Any]:
        if column == self.key_column and generated is not None:
            return generated
        index = self.columns.index(column)
        out = []
        for r, row in enumerate(self.rows):
            src = row.sources[index]
            if src is None:
                raise UnsupportedSQLError(
                    f"row {r + 1} of the INSERT into {self.table.name!r} sets shard column {column!r} "
                    "to an expression; shard keys must be values or parameters",
                    table=self.table.name,
                    column=column,
                    row=r,
                )
            out.append(bound[src.index] if type(src) is Param else src.value)
        return out

    def _check_genes(self, gene: tuple[str, int], bound: Sequence[Any], values: dict[str, list[Any]]) -> None:
        """Explicit ids must carry their row's slot, or ``WHERE id = ?`` could not find the row."""
        column, bits = gene
        ids = self._column_values(column, bound, None)
        keys = values[(self.table.key_generation.generator.shard_column or "").lower()]  # type: ignore[union-attr]
        for r, (id_, key) in enumerate(zip(ids, keys)):
            if gene_of(id_, bits) != slot_of(key, bits):
                raise ShardValueError(
                    f"row {r + 1} of the INSERT into {self.table.name!r} sets {column}={id_!r}, which does "
                    f"not carry the slot of its shard key {key!r} in its low {bits} bits; rows are found "
                    f"by {column} through that gene. Leave {column} out and let the key generator fill it",
                    table=self.table.name,
                    column=column,
                    row=r,
                )

    def _generate(self, bound: Sequence[Any]) -> list[Any] | None:
        spec = self.generator
        if spec is None:
            return None
        gen = generator_for(spec)
        if gen is None:
            return [str(uuid.uuid4()) for _ in self.rows]
        if isinstance(gen, GeneIdGenerator):
            column = (spec.shard_column or "").lower()
            if column not in self.columns:
                raise ShardValueError(
                    f"gene key generator {spec.name!r} needs {column!r} in the INSERT into "
                    f"{self.table.name!r} to embed its slot in the generated id",
                    table=self.table.name,
                    column=column,
                )
            keys = self._column_values(column, bound, None)
            gene_ids: list[Any] = gen.next_ids(keys).tolist()
            return gene_ids
        ids: list[Any] = gen.next_ids(len(self.rows)).tolist()
        return ids

    def _with_key(self, text: str, params: tuple[Any, ...], key: Any) -> tuple[str, tuple[Any, ...]]:
        """Append the generated key to one row's text, always as a parameter (never spliced
        into the SQL, even in a statement written with literals only: its unit is a
        ``format`` template whose literal ``%`` are already doubled)."""
        return text[:-1] + (", %s)" if self.style == "format" else ", ?)"), (*params, key)


def compile_insert(
    ctx: RouteContext,
    tree: exp.Insert,
    text: str,
    params: dict[str, int],
    style: str,
    param_spans: list[Edit],
    *,
    replace: bool,
    replace_span: tuple[int, int] | None = None,
    nodes: NodeIndex | None = None,
) -> Any:
    """Compile an INSERT / REPLACE statement."""
    analysis = analyze(tree, ctx.config, params, nodes)
    target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
    keyword = [Edit(*replace_span, text="REPLACE")] if replace and replace_span else []
    kind = ctx.config.kind_of(target.name) if isinstance(target, exp.Table) else None
    source = tree.expression
    if kind is not TableKind.SHARDED or not isinstance(source, exp.Values):
        # Broadcast / single / unknown targets, and INSERT ... SELECT: routed like a query
        # (INSERT ... SELECT into a sharded table must stay on one shard).
        if kind is TableKind.BROADCAST and analysis.primary is not None:
            raise UnsupportedSQLError(
                f"INSERT into broadcast table {target.name!r} reads sharded table "
                f"{analysis.primary.name!r}; it would run only where the shard is, leaving the copies "
                "of the broadcast table different",
                tables=(target.name, analysis.primary.name),
            )
        if kind is TableKind.SHARDED:
            _check_insert_select(tree, target, analysis)
            _check_on_duplicate(tree, ctx.config.table(target.name))  # type: ignore[arg-type]
        template = from_edits(text, keyword + table_edits(analysis) + param_spans, style)
        single_only = kind is TableKind.SHARDED
        return QueryStatement(ctx, analysis, template, "insert", single_only=single_only,
                              reason="INSERT ... SELECT on one shard" if single_only else "")
    table = ctx.config.table(target.name)
    assert table is not None
    schema = tree.this if isinstance(tree.this, exp.Schema) else None
    if schema is None or not schema.expressions:
        raise UnsupportedSQLError(
            f"INSERT into sharded table {table.name!r} must list its columns "
            "(INSERT INTO t (a, b) VALUES ...), so the shard column can be found",
            table=table.name,
        )
    columns = [c.name.lower() for c in schema.expressions]
    _check_on_duplicate(tree, table)
    rows_node = source.expressions
    spans = _row_spans(text, span(schema.expressions[-1])[1], len(rows_node), table.name)
    all_params = param_spans
    head_end, tail_start = spans[0][0], spans[-1][1]
    edits = keyword + [e for e in table_edits(analysis) if e.start < head_end]
    key = table.key_generation
    key_column = None
    generator = None
    if key is not None and key.column.lower() not in columns:
        key_column = key.column.lower()
        generator = key.generator
        close = span(schema.expressions[-1])[1]
        edits.append(Edit(close, close, text=", " + physical_name(key.column)))
        columns = [*columns, key_column]
    prefix = from_edits(text[:head_end], edits + [e for e in all_params if e.end <= head_end], style)
    suffix_edits = [Edit(e.start - tail_start, e.end - tail_start, param=e.param) for e in all_params if e.start >= tail_start]
    suffix_edits += [
        Edit(e.start - tail_start, e.end - tail_start, table=e.table)
        for e in table_edits(analysis) if e.start >= tail_start
    ]
    suffix = from_edits(text[tail_start:], suffix_edits, style)
    rows = []
    width = len(schema.expressions)
    at = 0  # params and rows are both in text order: one pass over the params
    for (start, end), node in zip(spans, rows_node):
        values = node.expressions if isinstance(node, exp.Tuple) else [node]
        if len(values) != width:
            raise UnsupportedSQLError(
                f"a row of the INSERT into {table.name!r} has {len(values)} values for {width} columns",
                table=table.name,
            )
        while at < len(all_params) and all_params[at].start < start:
            at += 1
        row_edits = []
        while at < len(all_params) and all_params[at].start < end:
            e = all_params[at]
            row_edits.append(Edit(e.start - start, e.end - start, param=e.param))
            at += 1
        rows.append(_Row(from_edits(text[start:end], row_edits, style), tuple(value_source(v, params) for v in values)))
    literal_only = not params
    return InsertStatement(ctx, table, len(analysis.slots) or 1, prefix, rows, suffix, columns, key_column,
                           generator, style, literal_only)


def _check_insert_select(tree: exp.Insert, target: exp.Table, analysis: Any) -> None:
    """INSERT ... SELECT into a sharded table: rows must be read from, and keep, their shard."""
    name = target.name
    readers = [u for u in analysis.uses if u.kind is TableKind.SHARDED and u.node is not target]
    if not readers:
        raise UnsupportedSQLError(
            f"INSERT ... SELECT into sharded table {name!r} reads no sharded table, so the shard of "
            "each row is unknown; insert with VALUES (the router splits rows by shard key)",
            table=name,
            construct="INSERT ... SELECT",
        )
    schema = tree.this if isinstance(tree.this, exp.Schema) else None
    select = tree.expression
    if schema is None or not isinstance(select, exp.Select) or not analysis.primary:
        return
    columns = [c.name.lower() for c in schema.expressions]
    items = select.expressions
    if any(isinstance(i, exp.Star) or (isinstance(i, exp.Column) and isinstance(i.this, exp.Star)) for i in items):
        return
    gene = gene_route(analysis.primary)
    for column in (*analysis.primary.sharding_columns, *((gene[0],) if gene else ())):
        if column.lower() not in columns or columns.index(column.lower()) >= len(items):
            continue
        item = items[columns.index(column.lower())]
        value = item.this if isinstance(item, exp.Alias) else item
        if not (isinstance(value, exp.Column) and value.name.lower() == column.lower()):
            raise UnsupportedSQLError(
                f"INSERT ... SELECT into sharded table {name!r} sets shard column {column!r} from "
                f"{value.sql(dialect=INPUT)!r}; only the selected rows' own {column!r} keeps each "
                "row on the shard it is read from",
                table=name,
                column=column,
                construct="INSERT ... SELECT",
            )


def _row_spans(text: str, after: int, expected: int, table: str) -> list[tuple[int, int]]:
    """Spans of the top-level ``(...)`` row groups after VALUES."""
    spans: list[tuple[int, int]] = []
    depth = 0
    seen_values = False
    start = 0
    for m in _SCAN.finditer(text, after):
        if m.group("values") and depth == 0:
            seen_values = True
        elif m.group("open") and seen_values:
            if depth == 0:
                start = m.start()
            depth += 1
        elif m.group("close") and seen_values:
            depth -= 1
            if depth == 0:
                spans.append((start, m.end()))
                if len(spans) == expected:
                    break
    if len(spans) != expected:
        raise UnsupportedSQLError(
            f"cannot split the VALUES of the INSERT into {table!r} into its {expected} row(s)",
            table=table,
        )
    return spans


def _check_on_duplicate(tree: exp.Insert, table: ShardedTable) -> None:
    conflict = tree.args.get("conflict")
    if conflict is None:
        return
    columns = {c.lower() for c in table.sharding_columns}
    gene = gene_route(table)
    if gene is not None:  # a gene id routes the database too
        columns.add(gene[0])
    for assignment in conflict.expressions or []:
        if not isinstance(assignment, exp.EQ) or not isinstance(assignment.left, exp.Column):
            continue
        name = assignment.left.name.lower()
        if name not in columns:
            continue
        right = assignment.right
        same = (isinstance(right, exp.Column) and right.name.lower() == name) or (
            isinstance(right, exp.Values) and isinstance(right.this, exp.Column) and right.this.name.lower() == name
        ) or (isinstance(right, exp.Anonymous) and right.name.upper() == "VALUES" and right.expressions
              and isinstance(right.expressions[0], (exp.Column, exp.Identifier))  # sqlglot: VALUES(Identifier)
              and right.expressions[0].name.lower() == name)
        if not same:
            raise ShardKeyUpdateError(
                f"ON DUPLICATE KEY UPDATE sets shard column {name!r} of {table.name!r}; that would "
                "move the row to another shard",
                table=table.name,
                column=name,
            )

