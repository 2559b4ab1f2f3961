"""INSERT and REPLACE: rows split per node, keys generated, batch-routed.

The statement text is cut, not regenerated: a prefix (``INSERT INTO {table}
(cols) VALUES``), one template per row, and a suffix (``ON DUPLICATE KEY
UPDATE ...``). Each unit gets its rows in their original order with exactly
their params. Rows are routed in one batch through the algorithms' numpy /
compiled paths, so a 10 000-row INSERT costs no 10 000 algorithm calls.

Forms: ``INSERT ... SET a = 1`` is rewritten to ``INSERT ... (a) VALUES (1)``
first (:mod:`~ddm_core.route.insert.insert_forms`); an INSERT without a column list
gets the table's columns from its schema (:mod:`~ddm_core.route.table_schema`),
written into every unit; INSERT ... SELECT is a query
(:mod:`~ddm_core.route.insert.insert_select` says whether it may run per node).

Generated keys: a key column the statement leaves out is appended to every
row with a generated value; a key column it sets keeps the values given,
except NULL (or DEFAULT, or a NULL param), which gets a generated key — as
MySQL's AUTO_INCREMENT does, and as ``INSERT INTO t VALUES (NULL, ...)``
needs.
"""

from __future__ import annotations

import re
import threading
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ddm_core._text import BACKTICKED, BLOCK_COMMENT, DOUBLE_QUOTED, SINGLE_QUOTED
from ddm_core.dialects import INPUT
from ddm_core.errors import MigrationError, ShardKeyUpdateError, ShardValueError, UnsupportedSQLError
from ddm_core.hashing import slot_of
from ddm_core.ids import GeneIdGenerator, Snowflake, gene_of
from ddm_core.metadata.model import KeyGeneratorSpec, ShardedTable, TableKind
from ddm_core.route.context import RouteContext, physical_name
from ddm_core.route.hints import Hint
from ddm_core.route.insert.insert_fast import OneRowInsert, one_row_insert
from ddm_core.route.insert.insert_forms import column_list, set_form_text, value_spans
from ddm_core.route.insert.leased_workers import leased_generator
from ddm_core.route.insert.insert_select import check_insert_select
from ddm_core.route.plan import NO_MERGE, RouteKind, RoutePlan, RouteUnit, TableRoute
from ddm_core.route.query.query import QueryStatement
from ddm_core.route.shards.analyze import NodeIndex, analyze, placement_assignments
from ddm_core.route.shards.coerce import Normalizer, coerce_source, integer_columns, normalizer
from ddm_core.route.shards.conditions import Param, Source, value_source
from ddm_core.route.shards.targets import route_rows
from ddm_core.route.table_schema import TableSchema
from ddm_core.route.text.edits import param_edits, span, table_edits
from ddm_core.route.text.template import Edit, Template, from_edits

__all__ = ["compile_insert", "InsertStatement", "generator_for", "reuse_generated_keys"]

_SCAN = re.compile(
    rf"{SINGLE_QUOTED}|{DOUBLE_QUOTED}|{BACKTICKED}|{BLOCK_COMMENT}|--(?=[\s\x00-\x1f]|\Z)[^\n]*|#[^\n]*"
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


# Keys a route must use instead of generating (reuse_generated_keys); None: generate.
_SUPPLIED_KEYS: ContextVar[tuple[Any, ...] | None] = ContextVar("ddm_supplied_keys", default=None)


@contextmanager
def reuse_generated_keys(keys: Sequence[Any]) -> Iterator[None]:
    """Within the block, INSERTs routed in this context take ``keys`` (in row order) instead of
    generating: a migration's dual-write route of a statement writes the rows the first route wrote."""
    token = _SUPPLIED_KEYS.set(tuple(keys))
    try:
        yield
    finally:
        _SUPPLIED_KEYS.reset(token)


def generator_for(spec: KeyGeneratorSpec) -> Any:
    """The process-wide generator object of a key generator spec (``None`` for UUID)."""
    kind = spec.type.upper()
    if kind == "UUID":
        return None
    if spec.leased:  # workerId: lease
        return leased_generator(kind, spec.gene_bits or 10)
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
        *,
        analysis: Any = None,
        fills: tuple[tuple[int, int], ...] = (),
        n_virtual: int = 0,
        normalize: Normalizer | None = None,
    ) -> None:
        self.ctx = ctx
        self.table = table
        self.slot_count = slot_count
        self.prefix = prefix
        self.rows = rows
        self.suffix = suffix
        self.columns = columns  # lower case, as listed (generated key appended)
        self.key_column = key_column  # the generated key column appended to every row, if any
        self.generator = generator
        self.style = style
        self.literal_only = literal_only
        self.analysis = analysis  # the tables it depends on (a schema change drops its plan)
        # (row, param index) whose value, when NULL, gets a generated key; indexes from
        # the statement's param count up are "virtual": a NULL written in the row's text.
        self.fills = fills
        self.n_virtual = n_virtual
        self.normalize = normalize  # strings for integer shard columns read as integers (route.shards.coerce)
        # A row is written where reads look for it: a bound table's rows route through its group's first table
        self.routing = routing_table(analysis.primary if analysis is not None else None, table)
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
        self._uniform = _uniform_rows(rows)

    def route(self, bound: Sequence[Any], hint: Hint | None) -> RoutePlan:
        if self.normalize is not None:
            bound = self.normalize(bound)
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
        bound, filled = self.fill_keys(bound)
        values = {c: self._column_values(c, bound, generated) for c in self.needed}
        router = self.ctx.router_of(self.routing)
        sources = self.ctx.hinted_sources(self.routing, hint)
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
            params = list(head_params)
            uniform = self._uniform
            if uniform is not None and generated is None:  # a bulk INSERT: every row the same text
                text, width = uniform
                chosen = by_node[node]
                for r in chosen:
                    params.extend(bound[r * width : r * width + width])
                texts = [head, ", ".join([text] * len(chosen))]
            else:
                texts = [head, *self._row_texts(by_node[node], slot, bound, generated, params)]
            tail, tail_params = self.suffix.fill(slot, bound)
            texts.append(tail)
            params.extend(tail_params)
            ds = data_node.data_source
            sql = self.ctx.comment(ds) + "".join(texts)
            units.append(RouteUnit(ds, sql, tuple(params), ((table.name, data_node.table),)))
        kind = RouteKind.SINGLE if len(units) == 1 else RouteKind.MULTI
        reason = f"{n} row(s) routed by {', '.join(self.needed)}"
        route = TableRoute(table.name, tuple(str(table.data_nodes[i]) for i in sorted(by_node)), reason)
        keys = generated if generated is not None else filled
        return RoutePlan(
            tuple(units),
            kind,
            (route,),
            NO_MERGE,
            "insert",
            True,
            generated_keys=tuple(keys),
            force_primary=bool(hint and hint.force_primary),
        )

    def _row_texts(
        self, rows: list[int], slot: list[str], bound: Sequence[Any], generated: list[Any] | None, params: list[Any]
    ) -> list[str]:
        """The rows' texts, ``", "``-joined, on one node; their params appended to ``params``."""
        texts = []
        for i, r in enumerate(rows):
            text, row_params = self.rows[r].template.fill(slot, bound)
            if generated is not None:
                text, row_params = self._with_key(text, row_params, generated[r])
            texts.append(text if i == 0 else ", " + text)
            params.extend(row_params)
        return texts

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
        """Explicit ids must carry their row's slot, or ``WHERE id = ?`` could not find the row (``gene``: the routing
        table's, whose key generator names the shard column)."""
        column, bits = gene
        ids = self._column_values(column, bound, None)
        keys = values[(self.routing.key_generation.generator.shard_column or "").lower()]  # type: ignore[union-attr]
        for r, (id_, key) in enumerate(zip(ids, keys)):
            if gene_of(id_, bits) != slot_of(key, bits):
                raise ShardValueError(
                    f"row {r + 1} of the INSERT into {self.table.name!r} sets {column}={id_!r}, which does "
                    f"not carry the slot of its shard key {key!r} in its low {bits} bits; rows are found "
                    f"by {column} through that gene. Leave {column} out (or NULL) and let the key generator fill it",
                    table=self.table.name,
                    column=column,
                    row=r,
                )

    def fill_keys(self, bound: Sequence[Any]) -> tuple[Sequence[Any], list[Any]]:
        """``bound`` with a generated key for every NULL key value, and those keys in row order.

        Without NULL keys (or a key column in the statement) ``bound`` comes back as it is.
        """
        if not self.fills:
            return bound, []
        ext = [*bound, *([None] * self.n_virtual)] if self.n_virtual else list(bound)
        need = [(r, i) for r, i in self.fills if ext[i] is None]
        if not need:
            return (ext if self.n_virtual else bound), []
        keys = self._generate(ext, [r for r, _ in need]) or []
        for (_, i), key in zip(need, keys):
            ext[i] = key
        return ext, keys

    def _generate(self, bound: Sequence[Any], rows: Sequence[int] | None = None) -> list[Any] | None:
        """Keys for every row (the appended key column), or for ``rows`` only (NULL keys)."""
        spec = self.generator
        if spec is None or (rows is None and self.key_column is None):
            return None
        count = len(self.rows) if rows is None else len(rows)
        supplied = _SUPPLIED_KEYS.get()
        if supplied is not None:  # a migration's second route of the statement: the first one's keys
            if len(supplied) != count:
                raise MigrationError(
                    f"INSERT into {self.table.name!r}: the dual-write route needs {count} generated key(s) "
                    f"but the first route generated {len(supplied)}",
                    table=self.table.name,
                )
            return list(supplied)
        gen = generator_for(spec)
        if gen is None:
            return [str(uuid.uuid4()) for _ in range(count)]
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
            if rows is not None:
                keys = [keys[r] for r in rows]
            gene_ids: list[Any] = gen.next_ids(keys).tolist()
            return gene_ids
        ids: list[Any] = gen.next_ids(count).tolist()
        return ids

    def _with_key(self, text: str, params: tuple[Any, ...], key: Any) -> tuple[str, tuple[Any, ...]]:
        """Append the generated key to one row's text, always as a parameter (never spliced
        into the SQL, even in a statement written with literals only: its unit is a
        ``format`` template whose literal ``%`` are already doubled)."""
        return text[:-1] + (", %s)" if self.style == "format" else ", ?)"), (*params, key)


def routing_table(primary: ShardedTable | None, table: ShardedTable) -> ShardedTable:
    """The table whose strategies route an INSERT into ``table``: ``primary``, the statement's primary table (the
    first of ``table``'s binding group, route/shards/analyze.py), as a read or an UPDATE of it routes, when the
    two shard by the same columns; else ``table`` itself. Bound tables are sharded alike (metadata/validate.py),
    so the node index is the same either way — except where a bound table's own algorithm names another table's
    physical tables, which the read path never asks it for."""
    if primary is None or primary is table:
        return table
    same = ({c.lower() for c in primary.sharding_columns} == {c.lower() for c in table.sharding_columns}
            and len(primary.data_nodes) == len(table.data_nodes))  # fmt: skip
    return primary if same else table


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
    rewritten = set_form_text(tree, text)
    if rewritten is not None:  # INSERT ... SET: the column-list form from here on
        text, tree = rewritten, _reparse(rewritten, tree)
        param_spans, nodes = param_edits(text), None
    analysis = analyze(tree, ctx.config, params, nodes)
    target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
    keyword = [Edit(*replace_span, text="REPLACE")] if replace and replace_span else []
    kind = ctx.config.kind_of(target.name) if isinstance(target, exp.Table) else None
    source = tree.expression
    if kind is not TableKind.SHARDED or not isinstance(source, exp.Values):
        # Broadcast / single / unknown targets, and INSERT ... SELECT: routed like a query
        # (INSERT ... SELECT into a sharded table stays on one shard unless each node copies into itself).
        if kind is TableKind.BROADCAST and analysis.primary is not None:
            raise UnsupportedSQLError(
                f"INSERT into broadcast table {target.name!r} reads sharded table "
                f"{analysis.primary.name!r}; it would run only where the shard is, leaving the copies "
                "of the broadcast table different",
                tables=(target.name, analysis.primary.name),
            )
        per_node = False
        if kind is TableKind.SHARDED:
            per_node = check_insert_select(ctx, tree, target, analysis)
            _check_on_duplicate(tree, ctx.config.table(target.name))  # type: ignore[arg-type]
        template = from_edits(text, keyword + table_edits(analysis) + param_spans, style)
        single_only = kind is TableKind.SHARDED and not per_node
        reason = "INSERT ... SELECT, each node into itself" if per_node else "INSERT ... SELECT on one shard"
        return QueryStatement(ctx, analysis, template, "insert", single_only=single_only,
                              reason=reason if kind is TableKind.SHARDED else "")
    table = ctx.config.table(target.name)
    assert table is not None
    schema = tree.this if isinstance(tree.this, exp.Schema) else None
    edits = list(keyword)
    known: TableSchema | None = None
    listed_end: int | None = None
    if schema is not None:
        columns = [c.name.lower() for c in schema.expressions]
        after = span(schema.expressions[-1])[1] if schema.expressions else span(target.this)[1]
        listed_end = after
    else:  # INSERT INTO t VALUES (...): the table's columns, written into every unit
        known = _schema_for_values(ctx, table)
        columns = [c.lower() for c in known.names]
        after = span(target.this)[1]
    _check_on_duplicate(tree, table)
    rows_node = source.expressions
    spans = _row_spans(text, after, len(rows_node), table.name)
    all_params = param_spans
    head_end, tail_start = spans[0][0], spans[-1][1]
    edits += [e for e in table_edits(analysis) if e.start < head_end]
    width = len(columns)
    key = table.key_generation
    key_column = None
    written = list(known.names) if known is not None else []
    if key is not None and key.column.lower() not in columns:
        key_column = key.column.lower()
        if listed_end is not None:
            edits.append(Edit(listed_end, listed_end, text=", " + physical_name(key.column)))
        else:
            written.append(key.column)
        columns = [*columns, key_column]
    if known is not None:
        edits.append(Edit(after, after, text=" " + column_list(written)))
    prefix = from_edits(text[:head_end], edits + [e for e in all_params if e.end <= head_end], style)
    suffix_edits = [Edit(e.start - tail_start, e.end - tail_start, param=e.param) for e in all_params if e.start >= tail_start]
    suffix_edits += [
        Edit(e.start - tail_start, e.end - tail_start, table=e.table)
        for e in table_edits(analysis) if e.start >= tail_start
    ]
    suffix = from_edits(text[tail_start:], suffix_edits, style)
    # A key column the statement sets: NULL / DEFAULT there gets a generated key.
    fill_at = columns.index(key.column.lower()) if key is not None and key_column is None else None
    fills: list[tuple[int, int]] = []
    n_virtual = 0
    rows = []
    at = 0  # params and rows are both in text order: one pass over the params
    for r, ((start, end), node) in enumerate(zip(spans, rows_node)):
        values = node.expressions if isinstance(node, exp.Tuple) else [node]
        if len(values) != width:
            raise _row_width_error(table, len(values), width, known)
        while at < len(all_params) and all_params[at].start < start:
            at += 1
        row_edits = []
        while at < len(all_params) and all_params[at].start < end:
            e = all_params[at]
            row_edits.append(Edit(e.start - start, e.end - start, param=e.param))
            at += 1
        sources = [value_source(v, params) for v in values]
        if fill_at is not None:
            filled = sources[fill_at]
            if _is_null_or_default(values[fill_at]):
                index = len(params) + n_virtual  # a param slot of its own, filled with the key
                n_virtual += 1
                found = value_spans(text, start, end)
                if len(found) != width:
                    raise UnsupportedSQLError(
                        f"cannot split row {r + 1} of the INSERT into {table.name!r} into its {width} values",
                        table=table.name,
                    )
                s, e_ = found[fill_at]
                row_edits.append(Edit(s - start, e_ - start, param=index))
                sources[fill_at] = Param(index)
                fills.append((r, index))
            elif type(filled) is Param:
                fills.append((r, filled.index))
        rows.append(_Row(from_edits(text[start:end], row_edits, style), tuple(sources)))
    literal_only = not params
    normalize = _coerce_rows(ctx, table, columns[:width], rows, len(params))
    generator = key.generator if key is not None and (key_column is not None or fills) else None
    return InsertStatement(ctx, table, len(analysis.slots) or 1, prefix, rows, suffix, columns, key_column,
                           generator, style, literal_only,
                           analysis=analysis, fills=tuple(fills), n_virtual=n_virtual, normalize=normalize)


def _reparse(text: str, original: exp.Insert) -> exp.Insert:
    """The tree of a rewritten INSERT (the caller's statement parsed, so this one does too)."""
    table = original.this.this.name if isinstance(original.this, exp.Schema) else ""
    try:
        tree = sqlglot.parse_one(text, read=INPUT)
    except (ParseError, TokenError) as err:
        raise UnsupportedSQLError(
            f"cannot rewrite the INSERT ... SET into {table!r} to its VALUES form", table=table
        ) from err
    if not isinstance(tree, exp.Insert):
        raise UnsupportedSQLError(f"cannot rewrite the INSERT ... SET into {table!r} to its VALUES form", table=table)
    return tree


def _schema_for_values(ctx: RouteContext, table: ShardedTable) -> TableSchema:
    """The columns an INSERT without a column list fills, or the error saying how to provide them."""
    found = ctx.schema_of(table.name)
    if found is None or not found.columns:
        raise UnsupportedSQLError(
            f"INSERT into sharded table {table.name!r} without a column list needs the table's columns in "
            f"order to find the shard column, and none are known: list them (INSERT INTO {table.name} "
            "(a, b) VALUES ...), declare them under the table's 'columns:' in the configuration, or let the "
            "Executor load them from the table's first data node (load_schema=True, the default)",
            table=table.name,
        )
    return found


def _row_width_error(table: ShardedTable, got: int, width: int, known: TableSchema | None) -> UnsupportedSQLError:
    if known is None:
        text = f"a row of the INSERT into {table.name!r} has {got} values for {width} columns"
    else:
        text = (
            f"a row of the INSERT into {table.name!r} has {got} values, but the INSERT lists no columns and "
            f"{known.describe()} has {width}; give a value for every column, or list the columns"
        )
    return UnsupportedSQLError(text, table=table.name)


def _is_null_or_default(value: exp.Expression) -> bool:
    if isinstance(value, exp.Paren):
        return _is_null_or_default(value.this)
    return isinstance(value, exp.Null) or (isinstance(value, exp.Var) and value.name.upper() == "DEFAULT")


def _coerce_rows(
    ctx: RouteContext, table: ShardedTable, columns: list[str], rows: list[_Row], n_params: int
) -> Normalizer | None:
    """Read the string values of integer routing columns as integers (literals now, params per route).

    ``columns``: the values' columns (not an appended key); params from ``n_params``
    up are the slots of generated keys, integers already.
    """
    wanted = integer_columns(ctx, table)
    at = [(columns.index(c), c) for c in sorted(wanted) if c in columns]
    if not at:
        return None
    params: dict[int, tuple[str, str]] = {}
    for r, row in enumerate(rows):
        sources = list(row.sources)
        for i, column in at:
            sources[i] = coerce_source(sources[i], table.name, column, params)
        if sources != list(row.sources):
            rows[r] = _Row(row.template, tuple(sources))
    return normalizer({i: where for i, where in params.items() if i < n_params})


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
    for name, _column, right in placement_assignments(table, conflict.expressions):
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


def _uniform_rows(rows: Sequence[_Row]) -> tuple[str, int] | None:
    """``(row text, params per row)`` when every row is the same constant text taking the next
    ``width`` parameters (``executemany``'s chunks), else ``None``: the bulk path's shortcut."""
    if not rows:
        return None
    first = rows[0].template.constant
    if first is None or first[1] != 0:
        return None
    text, _, width = first
    for r, row in enumerate(rows):
        if row.template.constant != (text, r * width, r * width + width):
            return None
    return text, width
