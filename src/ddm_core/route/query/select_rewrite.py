"""Rewriting a SELECT that reaches several shards, and the merge spec that finishes it.

What each unit runs and why (ShardingSphere's rewrite rules;
docs/architecture.md#rewriting-multi-shard-selects):

* ``LIMIT n OFFSET m`` → ``LIMIT m+n`` from 0 on every unit; the merger skips
  ``m`` rows and keeps ``n``. Deeper than ``max_offset`` is refused (use a
  cursor: ``WHERE create_time < ? ORDER BY create_time DESC LIMIT n``).
* ``ORDER BY`` / ``GROUP BY`` items missing from the select list are appended
  as derived columns (``__ddm_o0``...) and dropped by the merger.
* ``AVG(x)`` runs as ``SUM(x)`` plus a derived ``COUNT(x)``;
  ``COUNT(DISTINCT x)`` / ``SUM(DISTINCT x)`` run as ``x`` added to the GROUP BY,
  so the merger sees every distinct value.
* ``HAVING`` moves to the merger (a group may span shards); ``GROUP BY``
  without ``ORDER BY`` gets ``ORDER BY`` the group keys, so groups arrive sorted.
* Aggregated statements run without LIMIT on the units (a group's parts must
  all arrive); the merger applies offset / limit after re-aggregating.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Sequence

from sqlglot import exp

from ddm_core.dialects import INPUT, input_dialect
from ddm_core.errors import DeepPaginationError, RoutingError, UnsupportedSQLError
from ddm_core.metadata.model import TableKind
from ddm_core.route.context import RouteContext
from ddm_core.route.plan import Aggregate, MergeSpec
from ddm_core.route.query.per_source import union_suffix
from ddm_core.route.query.query import MultiRewrite
from ddm_core.route.shards.analyze import Analysis
from ddm_core.route.shards.conditions import Param, Source, value_source
from ddm_core.route.text.edits import drops_schema
from ddm_core.route.text.template import from_tree, table_marker

__all__ = ["multi_factory"]

#: HAVING is evaluated by the merger, with the literals read as the statement's dialect reads them.
_INPUT = input_dialect()
#: A literal LIMIT this large means "every row after the OFFSET": MySQL's own idiom is
#: ``LIMIT <offset>, 18446744073709551615``, which SQLAlchemy writes for an OFFSET without a LIMIT.
_ALL_ROWS = 2**63 - 1
_AGGREGATES: dict[type[exp.Expr], str] = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Min: "MIN", exp.Max: "MAX", exp.Avg: "AVG"}


def multi_factory(
    ctx: RouteContext, tree: exp.Expression, analysis: Analysis, params: dict[str, int], style: str
) -> Callable[[], MultiRewrite]:
    """A builder for the multi-shard form, run the first time a route is multi-shard."""

    def build() -> MultiRewrite:
        return _Rewriter(ctx, tree.copy(), analysis, params, style).build()

    return build


@dataclass(slots=True)
class _Rewriter:
    ctx: RouteContext
    tree: exp.Expression
    analysis: Analysis
    params: dict[str, int]
    style: str
    derived: list[exp.Expr] = field(default_factory=list)
    aggregates: list[Aggregate] = field(default_factory=list)
    names: list[str | None] = field(default_factory=list)

    # -- entry -----------------------------------------------------------------

    def build(self) -> MultiRewrite:
        tree = self.tree
        self._rename_tables()
        if isinstance(tree, exp.SetOperation):
            return self._union(tree)
        assert isinstance(tree, exp.Select)
        items = [e.copy() for e in tree.expressions]  # as written, before any rewrite
        star = any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)) for e in items)
        group_node = tree.args.get("group")
        group: list[exp.Expression] = [g for g in (group_node.expressions if group_node else [])]
        self.names = [None] * len(items)
        has_aggregates = self._rewrite_aggregates(items, star)
        grouped = bool(group) or has_aggregates
        group_keys = [self._position(g, items, star, "g") for g in group]
        distinct_args = [a.args[0] for a in self.aggregates if a.distinct]
        if distinct_args:
            # Units group by the DISTINCT arguments too, so every distinct value reaches the merger.
            new_group = [*group, *(tree.expressions[i].this if isinstance(tree.expressions[i], exp.Alias) else tree.expressions[i] for i in distinct_args)]
            tree.set("group", exp.Group(expressions=[g.copy() for g in new_group]))
        order = tree.args.get("order")
        order_keys: list[tuple[int, bool]] = []
        if order is not None:
            for ordered in order.expressions:
                order_keys.append((self._position(ordered.this, items, star, "o"), bool(ordered.args.get("desc"))))
        elif grouped and (group or distinct_args):
            # Groups arrive sorted by their keys and leave in that order (as MySQL 5.7 did).
            unit_order = [*group, *(self._item_expr(i) for i in distinct_args)]
            # nulls_first=True is MySQL's own ascending order (NULL first), which the merger
            # assumes; without it sqlglot emulates NULLS LAST with a CASE expression.
            tree.set("order", exp.Order(expressions=[exp.Ordered(this=g.copy(), nulls_first=True) for g in unit_order]))
            order_keys = [(k, False) for k in group_keys]
        having = self._having(tree, items, star) if grouped else None
        # DISTINCT over rows that carry a hidden sort column: one unit's first n rows may
        # repeat a visible row, so n rows per unit can be too few. The merger limits instead.
        hidden_distinct = bool(tree.args.get("distinct")) and bool(self.derived)
        offset_src, limit_src = self._pagination(tree, grouped or hidden_distinct)
        tree.set("expressions", [*tree.expressions, *self.derived])
        visible = None if star else len(items)
        fix = self._from_end if star else (lambda i: i)
        spec = MergeSpec(
            order_by=tuple((fix(i), d) for i, d in order_keys),
            group_by=tuple(fix(i) for i in group_keys),
            aggregates=tuple(self.aggregates),
            distinct=bool(tree.args.get("distinct")) and not grouped,
            visible=visible,
            derived=len(self.derived),
            column_names=tuple(self.names) if not star else (),
        )
        rewrite = self._finish(spec, having, offset_src, limit_src)
        # Tables of one data source in one UNION ALL, where provably the same (route/query/per_source.py).
        union = None if star else union_suffix(self.ctx, tree, self.analysis, spec.order_by, limit_src, self.style)
        return rewrite if union is None else dataclasses.replace(rewrite, union=union[0], union_limit=union[1])

    # -- pieces --------------------------------------------------------------------

    def _rename_tables(self) -> None:
        sharded = {u.key: u.slot for u in self.analysis.uses if u.kind is TableKind.SHARDED}
        unaliased = {u.key for u in self.analysis.uses if u.kind is TableKind.SHARDED and not u.alias}
        config = self.ctx.config
        for table in self.tree.find_all(exp.Table):
            slot = sharded.get(table.name.lower())
            if slot is not None:
                table.set("this", exp.to_identifier(table_marker(slot)))
                table.set("db", None)
            elif table.db and drops_schema(config.kind_of(table.name), table.db, config.name):
                table.set("db", None)  # the logical schema: each unit runs in its data source's database
        for col in self.tree.find_all(exp.Column):
            qualifier = col.args.get("table")
            if isinstance(qualifier, exp.Identifier) and qualifier.name.lower() in unaliased:
                col.set("table", exp.to_identifier(table_marker(sharded[qualifier.name.lower()])))
                col.set("db", None)
            elif isinstance(qualifier, exp.Identifier) and col.args.get("db") is not None and drops_schema(
                config.kind_of(qualifier.name), col.args["db"].name, config.name
            ):
                col.set("db", None)

    def _union(self, tree: exp.SetOperation) -> MultiRewrite:
        if tree.args.get("order") or tree.args.get("limit") or tree.args.get("offset"):
            raise UnsupportedSQLError(
                "ORDER BY / LIMIT on a UNION that reaches several shards is not supported; "
                "route it to one shard (shard key in every branch) or sort in the application",
                construct="UNION ORDER BY/LIMIT",
            )
        spec = MergeSpec(distinct=bool(tree.args.get("distinct")))
        return MultiRewrite(from_tree(_as_written(tree), self.style), lambda bound: spec)

    def _item_expr(self, index: int) -> exp.Expression:
        item = self.tree.expressions[index]
        inner: exp.Expression = item.this if isinstance(item, exp.Alias) else item
        return inner

    def _rewrite_aggregates(self, items: list[exp.Expression], star: bool) -> bool:
        found = False
        for i, item in enumerate(items):
            inner = item.this if isinstance(item, exp.Alias) else item
            func = _AGGREGATES.get(type(inner))
            if func is None:
                if any(_belongs_to(n, inner) for n in inner.find_all(*_AGGREGATES)):
                    raise UnsupportedSQLError(
                        f"select item {item.sql(dialect=INPUT)!r} computes with an aggregate; across "
                        "shards only plain COUNT/SUM/MIN/MAX/AVG items can be merged (select them "
                        "separately and compute in the application)",
                        construct=item.sql(dialect=INPUT),
                    )
                continue
            if star:
                raise UnsupportedSQLError(
                    "SELECT * together with aggregates across shards is not supported; list the columns",
                    construct="SELECT * with aggregates",
                )
            found = True
            arg = inner.this
            distinct = isinstance(arg, exp.Distinct)
            self.names[i] = item.alias or inner.sql(dialect=INPUT)
            if distinct:
                if func not in ("COUNT", "SUM") or len(arg.expressions) != 1:
                    raise UnsupportedSQLError(
                        f"{inner.sql(dialect=INPUT)!r} across shards: only COUNT(DISTINCT x) and "
                        "SUM(DISTINCT x) of one expression can be merged",
                        construct=inner.sql(dialect=INPUT),
                    )
                value = arg.expressions[0].copy()
                self._replace_item(i, value)
                self.aggregates.append(Aggregate(func, i, (i,), distinct=True))
            elif func == "AVG":
                self._replace_item(i, exp.Sum(this=arg.copy()))
                count_at = self._derive(exp.Count(this=arg.copy()), "avg")
                self.aggregates.append(Aggregate("AVG", i, (i, count_at)))
            else:
                self.aggregates.append(Aggregate(func, i, (i,)))
        return found

    def _replace_item(self, index: int, value: exp.Expression) -> None:
        item = self.tree.expressions[index]
        if isinstance(item, exp.Alias):
            item.set("this", value)
        else:
            item.replace(value)

    def _derive(self, expression: exp.Expr, tag: str) -> int:
        """Append a derived column; its index among unit columns (see :meth:`_from_end`).

        A plain expression derived twice (``GROUP BY x ORDER BY x``) gets one column, so
        the merger can see that the groups arrive in order. Aggregates always get their
        own column: each is re-aggregated once.
        """
        if expression.find(*_AGGREGATES) is None:
            for k, existing in enumerate(self.derived):
                if existing.this == expression:
                    return len(self.tree.expressions) + k
        name = f"__ddm_{tag}{len(self.derived)}"
        self.derived.append(exp.alias_(expression.copy(), name))
        return len(self.tree.expressions) + len(self.derived) - 1

    def _from_end(self, index: int) -> int:
        """After a ``*`` the column count is known only at run time: count derived ones from the end."""
        return index - len(self.tree.expressions)

    def _position(self, target: exp.Expression, items: list[exp.Expression], star: bool, tag: str) -> int:
        """The unit-row column holding ``target`` (an ORDER BY / GROUP BY item)."""
        if isinstance(target, exp.Literal) and target.is_int:
            pos = int(target.this) - 1
            if star:
                raise UnsupportedSQLError(
                    f"position {target.this} in ORDER/GROUP BY with SELECT * across shards: the column "
                    "count is only known at run time; name the column instead",
                    construct=target.sql(),
                )
            if not 0 <= pos < len(items):
                raise UnsupportedSQLError(
                    f"position {target.this} in ORDER/GROUP BY is out of range", construct=target.sql()
                )
            return pos
        if not star:
            found = _find_item(target, items)
            if found is not None:
                return found
        if isinstance(target, tuple(_AGGREGATES)):
            return _aggregate_column(target, self)
        return self._derive(target, tag)

    def _having(self, tree: exp.Select, items: list[exp.Expression], star: bool) -> Evaluator | None:
        having = tree.args.get("having")
        if having is None:
            return None
        tree.set("having", None)
        return _compile_having(having.this, self, items, star)

    def _pagination(self, tree: exp.Select, keep_all: bool) -> tuple[Source | None, Source | None]:
        """Move LIMIT / OFFSET to the merger; units keep ``LIMIT offset+limit`` unless ``keep_all``."""
        limit = tree.args.get("limit")
        offset = tree.args.get("offset")
        limit_src = value_source(limit.expression, self.params) if limit is not None else None
        offset_src = value_source(offset.expression, self.params) if offset is not None else None
        if limit is not None and limit_src is None or offset is not None and offset_src is None:
            raise UnsupportedSQLError("LIMIT / OFFSET must be numbers or parameters", construct="LIMIT")
        if keep_all:
            tree.set("limit", None)
            tree.set("offset", None)
        elif limit is not None:
            tree.set("offset", None)
            if not isinstance(limit_src, Param) and int(limit_src.value) >= _ALL_ROWS:  # type: ignore[union-attr]
                tree.set("limit", None)  # every row after the OFFSET: each unit returns all of its rows
            elif isinstance(limit_src, Param) or isinstance(offset_src, Param):
                # The limit placeholder stays; its value becomes offset + limit per route.
                if not isinstance(limit_src, Param):
                    raise UnsupportedSQLError(
                        "a literal LIMIT with a parameter OFFSET across shards is not supported; "
                        "make both parameters or both literals",
                        construct="LIMIT",
                    )
            else:
                total = int(limit_src.value) + (int(offset_src.value) if offset_src else 0)  # type: ignore[union-attr]
                limit.set("expression", exp.Literal.number(total))
        return offset_src, limit_src

    def _finish(
        self,
        spec: MergeSpec,
        having: Evaluator | None,
        offset_src: Source | None,
        limit_src: Source | None,
    ) -> MultiRewrite:
        template = from_tree(_as_written(self.tree), self.style)
        max_offset = self.ctx.config.runtime.max_offset
        static_spec = spec

        def value(src: Source | None, bound: Sequence[Any]) -> int | None:
            if src is None:
                return None
            raw = bound[src.index] if isinstance(src, Param) else src.value
            try:
                return int(raw)
            except (TypeError, ValueError):
                raise RoutingError(f"LIMIT / OFFSET value {raw!r} is not an integer", value=raw) from None

        if having is None and offset_src is None and limit_src is None:  # nothing to bind: one spec for all values
            fixed = dataclasses.replace(static_spec, having=None, offset=0, limit=None)
            return MultiRewrite(template, lambda bound: fixed, ())

        def spec_for(bound: Sequence[Any]) -> MergeSpec:
            offset = value(offset_src, bound) or 0
            if offset > max_offset:
                raise DeepPaginationError(
                    f"OFFSET {offset} across shards is deeper than max_offset {max_offset}: every shard "
                    f"would return {offset} extra rows. Page with a cursor instead "
                    "(WHERE sort_key < last_seen ORDER BY sort_key DESC LIMIT n)",
                    offset=offset,
                    max_offset=max_offset,
                )
            return dataclasses.replace(
                static_spec,
                having=None if having is None else _bind_having(having, bound),
                offset=offset,
                limit=value(limit_src, bound),
            )

        overrides: tuple[tuple[int, Callable[[Sequence[Any]], Any]], ...] = ()
        if isinstance(limit_src, Param) and not static_spec.aggregates and not static_spec.group_by:
            index = limit_src.index
            overrides = ((index, lambda b: (value(limit_src, b) or 0) + (value(offset_src, b) or 0)),)
        return MultiRewrite(template, spec_for, overrides)


def _as_written(tree: exp.Expression) -> exp.Expression:
    """``tree`` with the constructs sqlglot would regenerate with another meaning put back as written.

    * ``0x0A`` / ``0b101`` come back from sqlglot as ``x'0A'`` / ``b'101'``. MariaDB
      compares ``int_col = 0x0A`` as the number 10 but ``int_col = x'0A'`` as the
      string ``'\n'`` (no row), SQLite reads ``0x0A`` as an integer and ``x'0A'``
      as a BLOB, and ``x'A'`` (odd digit count) is a syntax error: the unit SQL
      must keep the 0x form. (The token's span says which form was written.)
    * ``a REGEXP p`` / ``RLIKE`` come back as ``REGEXP_LIKE(a, p)``, a function
      MariaDB does not have.
    """
    for node in list(tree.find_all(exp.HexString, exp.BitString)):
        start, end, digits = node.meta.get("start"), node.meta.get("end"), node.this
        if isinstance(start, int) and isinstance(end, int) and end - start + 1 == len(digits) + 2:
            node.replace(exp.Var(this=("0x" if isinstance(node, exp.HexString) else "0b") + digits))
    # Innermost first: an operand's own REGEXP is text by the time its parent is written.
    for regexp in reversed(list(tree.find_all(exp.RegexpLike))):
        if regexp.args.get("flag") is None and not regexp.args.get("full_match"):
            left = regexp.this.sql(dialect=INPUT)
            right = regexp.expression.sql(dialect=INPUT)
            regexp.replace(exp.Var(this=f"({left} REGEXP {right})"))
    return tree


# -- HAVING -------------------------------------------------------------------------

_COMPARE: dict[type[exp.Binary], Callable[[Any, Any], Any]] = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
}
_ARITH: dict[type[exp.Binary], Callable[[Any, Any], Any]] = {exp.Add: operator.add, exp.Sub: operator.sub, exp.Mul: operator.mul}

Evaluator = Callable[[Sequence[Any], Sequence[Any]], Any]  # (row, bound) -> value


def _bind_having(having: Evaluator, bound: Sequence[Any]) -> Callable[[Sequence[Any]], bool]:
    return lambda row: bool(having(row, bound))


def _compile_having(node: exp.Expr, rw: _Rewriter, items: list[exp.Expression], star: bool) -> Evaluator:
    """HAVING as a function of a merged row (SQL three-valued logic: NULL is not true)."""
    if isinstance(node, exp.Paren):
        return _compile_having(node.this, rw, items, star)
    if isinstance(node, (exp.And, exp.Or)):
        left = _compile_having(node.left, rw, items, star)
        right = _compile_having(node.right, rw, items, star)
        if isinstance(node, exp.And):
            return lambda row, b: _and(left(row, b), right(row, b))
        return lambda row, b: _or(left(row, b), right(row, b))
    if isinstance(node, exp.Not):
        inner = _compile_having(node.this, rw, items, star)
        return lambda row, b: None if (v := inner(row, b)) is None else not v
    for cls, op in _COMPARE.items():
        if isinstance(node, cls):
            return _binary(op, node, rw, items, star)
    for cls, op in _ARITH.items():
        if isinstance(node, cls):
            return _binary(op, node, rw, items, star)
    if isinstance(node, exp.Div):
        return _binary(_sql_div, node, rw, items, star)
    source = value_source(node, rw.params)
    if source is not None:
        if isinstance(source, Param):
            index = source.index
            return lambda row, b: b[index]
        constant = _exact(node, source.value)
        return lambda row, b: constant
    if isinstance(node, tuple(_AGGREGATES)) or isinstance(node, exp.Column):
        column = _having_column(node, rw, items, star)
        return lambda row, b: row[column]
    raise UnsupportedSQLError(
        f"HAVING across shards supports comparisons, AND/OR/NOT, + - * / and aggregates; "
        f"not {node.sql(dialect=INPUT)!r}",
        construct=node.sql(dialect=INPUT),
    )


def _find_item(target: exp.Expr, items: list[exp.Expression]) -> int | None:
    """The select item (as written) that ``target`` names: by alias or by equal expression."""
    for i, item in enumerate(items):
        if isinstance(target, exp.Column) and not target.table and item.alias and target.name == item.alias:
            return i
        if (item.this if isinstance(item, exp.Alias) else item) == target:
            return i
    return None


def _having_column(node: exp.Expr, rw: _Rewriter, items: list[exp.Expression], star: bool) -> int:
    found = None if star else _find_item(node, items)
    if found is not None:
        return found
    return _aggregate_column(node, rw)


def _aggregate_column(node: exp.Expr, rw: _Rewriter) -> int:
    """A derived column holding aggregate ``node``, registered for re-aggregation."""
    func = _AGGREGATES.get(type(node))
    if func is None:
        raise UnsupportedSQLError(
            f"HAVING refers to {node.sql(dialect=INPUT)!r}, which is neither a select item nor an aggregate",
            construct=node.sql(dialect=INPUT),
        )
    if isinstance(node.this, exp.Distinct):
        raise UnsupportedSQLError(
            f"HAVING {node.sql(dialect=INPUT)!r} across shards: select the DISTINCT aggregate as an item first",
            construct=node.sql(dialect=INPUT),
        )
    if func == "AVG":
        sum_at = rw._derive(exp.Sum(this=node.this.copy()), "h")
        count_at = rw._derive(exp.Count(this=node.this.copy()), "h")
        rw.aggregates.append(Aggregate("AVG", sum_at, (sum_at, count_at)))
        return sum_at
    at = rw._derive(node, "h")
    rw.aggregates.append(Aggregate(func, at, (at,)))
    return at


def _binary(op: Callable[[Any, Any], Any], node: exp.Binary, rw: _Rewriter, items: list[exp.Expression], star: bool) -> Evaluator:
    left = _compile_having(node.left, rw, items, star)
    right = _compile_having(node.right, rw, items, star)

    def run(row: Sequence[Any], b: Sequence[Any]) -> Any:
        x, y = left(row, b), right(row, b)
        if x is None or y is None:
            return None
        if type(x) is not type(y) and (type(x) is float or type(y) is float):
            # MySQL compares / computes DECIMAL with DOUBLE as DOUBLE; Python's exact
            # Decimal-vs-float comparison would disagree (123.45 < float 123.45 is True)
            # and Decimal-with-float arithmetic raises.
            if type(x) is Decimal or type(y) is Decimal:
                x, y = float(x), float(y)
        return op(x, y)

    return run


def _exact(node: exp.Expr, value: Any) -> Any:
    """A HAVING number literal as the input dialect reads it: ``123.45`` is an exact DECIMAL in MySQL.

    (``1.5e3`` stays a float: MySQL reads exponent notation as DOUBLE.)
    """
    if type(value) is float:
        literal = node
        while isinstance(literal, (exp.Paren, exp.Neg)):
            literal = literal.this
        if isinstance(literal, exp.Literal) and _INPUT.exact_literal(literal.this):
            exact = Decimal(literal.this)
            return -exact if value < 0 else exact
    return value


def _sql_div(x: Any, y: Any) -> Any:
    return None if y == 0 else x / y


def _and(x: Any, y: Any) -> Any:
    if x is False or y is False or x == 0 or y == 0:
        return False if (x is not None and not x) or (y is not None and not y) else None
    if x is None or y is None:
        return None
    return True


def _or(x: Any, y: Any) -> Any:
    if (x is not None and x) or (y is not None and y):
        return True
    if x is None or y is None:
        return None
    return False


def _belongs_to(aggregate: exp.Expr, item: exp.Expr) -> bool:
    """Is ``aggregate`` the select item's own, not one of a subquery inside it (whose value is per row)?"""
    node = aggregate.parent
    while node is not None and node is not item:
        if isinstance(node, exp.Select):
            return False
        node = node.parent
    return True
