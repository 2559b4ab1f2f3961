"""Route plans as text: the header (kind, tables, why), the unit table, the merge."""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ddm_core.dialects import INPUT
from ddm_core.errors import DdmError
from ddm_core.route.plan import MergeSpec, RouteKind, RoutePlan
from ddm_core.route.text.placeholders import translate

__all__ = ["plan_header", "unit_rows", "merge_lines", "plan_json", "short_nodes", "one_line"]

_KIND_TEXT = {
    RouteKind.SINGLE: "single",
    RouteKind.MULTI: "multi",
    RouteKind.BROADCAST: "broadcast",
    RouteKind.FULL: "full (every node: no usable shard condition)",
}
_DERIVED = re.compile(r"^__ddm_")


def one_line(sql: str) -> str:
    """SQL with its line breaks (and the indentation after them) folded into single spaces."""
    return re.sub(r"\s*\n\s*", " ", sql.strip())


def short_nodes(nodes: Sequence[str], limit: int = 4) -> str:
    """``ds_0.t_0, ds_0.t_1, ... ds_3.t_15 (32 nodes)`` — the first few and the last one."""
    if len(nodes) <= limit:
        return ", ".join(nodes)
    return f"{', '.join(nodes[: limit - 1])}, ... {nodes[-1]} ({len(nodes)} nodes)"


def plan_header(plan: RoutePlan) -> list[str]:
    """What went where and why, one block per logic table."""
    if plan.cross_node is not None:
        return cross_node_header(plan)
    n = len(plan.units)
    access = "write" if plan.is_write else "read"
    if plan.force_primary and not plan.is_write:
        access = "read, primary forced by a hint"
    lines = [
        f"route: {_KIND_TEXT.get(plan.kind, plan.kind.value)} — {n} unit{'s' if n != 1 else ''} on "
        f"{len(plan.data_sources)} data source{'s' if len(plan.data_sources) != 1 else ''} "
        f"({plan.statement}, {access})"
    ]
    for table in plan.tables:
        lines.append(f"  {table.logic_table} → {short_nodes(table.nodes)}")
        if table.reason:
            lines.append(f"    why: {table.reason}")
    if plan.generated_keys:
        keys = ", ".join(str(k) for k in plan.generated_keys[:8])
        more = f", ... ({len(plan.generated_keys)} keys)" if len(plan.generated_keys) > 8 else ""
        lines.append(f"  generated keys: {keys}{more}")
    return lines


def cross_node_header(plan: RoutePlan) -> list[str]:
    """A cross-node plan: its strategy, each step's reason (docs/cross-node-queries.md)."""
    cross = plan.cross_node
    rows = cross.explain()
    lines = [f"route: cross-node, {cross.strategy} — {len(rows)} steps ({plan.statement}, "
             f"{'write' if plan.is_write else 'read'})"]
    for step, _, _, why in rows:
        lines.append(f"  {step}: {why}")
    return lines


def unit_rows(plan: RoutePlan) -> list[tuple[str, str, str, str]]:
    """``(#, data source, SQL, params)`` for each unit, SQL on one line (a cross-node plan: each step)."""
    if plan.cross_node is not None:
        return [(str(i), step, one_line(sql), params or "") for i, (step, sql, params, _) in
                enumerate(plan.cross_node.explain(), 1)]
    return [
        (str(i), u.data_source, one_line(u.sql), _params(u.params)) for i, u in enumerate(plan.units, 1)
    ]


def _params(params: Sequence[Any]) -> str:
    return "[" + ", ".join(repr(p) for p in params) + "]"


def merge_lines(plan: RoutePlan) -> list[str]:
    """How the units' rows become one result (only when there is more than one unit)."""
    if len(plan.units) <= 1:
        return []
    if plan.statement != "select":
        if plan.is_write or plan.statement in ("insert", "update", "delete"):
            return ["merge: affected-row counts are added up"]
        return []
    spec = plan.merge
    if spec.is_trivial:
        return ["merge: none needed — the units' rows are streamed one unit after another"]
    names = _unit_columns(plan.units[0].sql)
    lines = ["merge:"]
    if spec.group_by:
        lines.append("  group by " + ", ".join(_col(i, spec, names) for i in spec.group_by))
    for agg in spec.aggregates:
        lines.append("  aggregate " + _aggregate(agg, spec, names))
    if spec.having is not None:
        lines.append("  having: re-checked on the merged groups")
    if spec.distinct:
        lines.append("  distinct: duplicate rows across units removed")
    if spec.order_by:
        keys = ", ".join(f"{_col(i, spec, names)} {'DESC' if desc else 'ASC'}" for i, desc in spec.order_by)
        lines.append(f"  order by {keys} (heap merge of the units' sorted rows)")
    if spec.offset or spec.limit is not None:
        per_unit = (spec.offset + spec.limit) if spec.limit is not None else None
        window = f"skip {spec.offset}, " if spec.offset else ""
        window += f"return {spec.limit}" if spec.limit is not None else "return the rest"
        if per_unit is not None:
            window += f"; each unit returns at most {per_unit} rows (offset + limit)"
        lines.append(f"  {window}")
    if spec.derived:
        lines.append(
            f"  drop {spec.derived} column{'s' if spec.derived != 1 else ''} the router added "
            "(sort keys, AVG counts) before returning rows"
        )
    return lines


def _unit_columns(sql: str) -> list[str] | None:
    """Display names of a unit's select list (derived ``__ddm_*`` columns show their expression)."""
    try:
        tree = sqlglot.parse_one(translate(sql).numbered(), read=INPUT)
    except (SqlglotError, DdmError):
        return None
    if not isinstance(tree, exp.Select):
        return None
    names = []
    for e in tree.expressions:
        if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)):
            names.append("*")
        elif isinstance(e, exp.Alias):
            names.append(e.this.sql(INPUT) if _DERIVED.match(e.alias) else e.alias)
        elif isinstance(e, exp.Column):
            names.append(e.name)
        else:
            names.append(e.sql(INPUT))
    return names


def _col(index: int, spec: MergeSpec, names: list[str] | None) -> str:
    label = None
    if index >= 0 and spec.column_names and index < len(spec.column_names) and spec.column_names[index]:
        label = spec.column_names[index]
    elif names:
        star = "*" in names
        if index < 0 and -index <= len(names) and names[index] != "*":
            label = names[index]
        elif 0 <= index < len(names) and not star:
            label = names[index]
    where = f"unit column {index + 1}" if index >= 0 else f"unit column {-index} from the end"
    return f"{label} ({where})" if label else where


def _aggregate(agg: Any, spec: MergeSpec, names: list[str] | None) -> str:
    name = (
        spec.column_names[agg.column]
        if spec.column_names and agg.column < len(spec.column_names) and spec.column_names[agg.column]
        else agg.func
    )
    distinct = "DISTINCT " if agg.distinct else ""
    if agg.func == "AVG" and len(agg.args) == 2:
        how = f"SUM of unit column {agg.args[0] + 1} / SUM of COUNT in unit column {agg.args[1] + 1}"
    elif agg.func == "COUNT" and not agg.distinct:
        how = f"unit counts in column {agg.args[0] + 1} added up"
    elif agg.distinct:
        how = f"{agg.func} over the distinct values of unit column {agg.args[0] + 1}"
    else:
        how = f"{agg.func} of unit column {agg.args[0] + 1}"
    return f"{distinct}{name}: {how}"


def plan_json(plan: RoutePlan) -> str:
    """The plan as JSON (for scripts): kind, statement, tables, units, merge."""
    spec = plan.merge
    doc = {
        "kind": plan.kind.value,
        "statement": plan.statement,
        "is_write": plan.is_write,
        "tables": [
            {"logic_table": t.logic_table, "nodes": list(t.nodes), "reason": t.reason} for t in plan.tables
        ],
        "units": [
            {"data_source": u.data_source, "sql": u.sql, "params": list(u.params)} for u in plan.units
        ],
        "generated_keys": list(plan.generated_keys),
        "cross_node": None if plan.cross_node is None else {
            "strategy": plan.cross_node.strategy,
            "steps": [{"step": step, "sql": sql, "params": params, "why": why}
                      for step, sql, params, why in plan.cross_node.explain()],
        },
        "merge": {
            "order_by": [[i, desc] for i, desc in spec.order_by],
            "group_by": list(spec.group_by),
            "aggregates": [
                {"func": a.func, "column": a.column, "args": list(a.args), "distinct": a.distinct}
                for a in spec.aggregates
            ],
            "distinct": spec.distinct,
            "having": spec.having is not None,
            "offset": spec.offset,
            "limit": spec.limit,
            "visible": spec.visible,
            "derived": spec.derived,
        },
    }
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str)
