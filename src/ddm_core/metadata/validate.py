"""Cross-checks over a whole configuration: fail at start, not at run time (docs/configuration.md#checks-at-load).

The readers check each field on its own; this module checks how the pieces
fit, for both formats alike, adding every problem to the load's collector:

* data nodes: each in a configured data source; no physical table claimed
  twice (within or across logic tables);
* strategies: the algorithm fits the strategy kind (``COMPLEX_*`` for
  complex, ``HINT_*`` for hint); an INLINE expression uses the strategy's
  columns; the algorithm accepts the targets it will be given
  (``check_targets``: every shard number has exactly one table, every slot
  owner exists...); MOD-family ``sharding-count`` matches the targets;
* binding groups: known sharded tables, one group per table, and sharded
  alike — same data sources, same table suffixes, equivalent algorithms
  (ShardingSphere's rule: INLINE expressions compare with the table prefix
  and column names taken out);
* GENE key generators: the gene's shard column is the table's shard column
  and gene bits equal the table's slot bits;
* names: a table is sharded, broadcast or single, never two of these;
  single tables and the default data source point at configured data sources.

Also warnings (load, but look wrong): an INLINE table expression that yields
names outside the table's own nodes for sample values (a table strategy copied
from another table: ``t_order_${user_id % 16}`` reused for ``t_order_item``).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from ddm_core.algorithms.inline_expr import compile_expression
from ddm_core.errors import ConfigError
from ddm_core.metadata.build import Context
from ddm_core.metadata.limits import shown_names
from ddm_core.metadata.model import (
    AlgorithmSpec,
    ShardedTable,
    ShardingConfig,
    Strategy,
    StrategyKind,
    thaw,
)
from ddm_core.metadata.problems import join_path

__all__ = ["validate"]

_MOD_FAMILY = frozenset({"MOD", "HASH_MOD", "SALTED_MOD"})
_INLINE_TYPES = frozenset({"INLINE", "COMPLEX_INLINE", "HINT_INLINE"})
_PROBE_VALUES = 64


def validate(config: ShardingConfig, ctx: Context) -> None:
    """Add every cross-field problem of ``config`` to ``ctx.problems`` (and warnings)."""
    _data_nodes(config, ctx)
    for table in config.tables.values():
        _strategies(table, ctx)
        _key_generation(table, ctx)
    _binding_groups(config, ctx)
    _names(config, ctx)
    _xa(config, ctx)


# -- data nodes -----------------------------------------------------------------------------


def _member_groups(config: ShardingConfig) -> dict[str, str]:
    """Endpoint name → the read/write group it is a member of (computed once, not per node)."""
    members: dict[str, str] = {}
    for group in config.data_sources.values():
        for ep in group.replicas:
            members.setdefault(ep.name, group.name)
        if group.primary.name != group.name:
            members.setdefault(group.primary.name, group.name)
    return members


def _member_hint(members: dict[str, str], ds: str) -> str:
    group = members.get(ds)
    return f"; it is a member of read/write group {group!r}, use that name" if group is not None else ""


def _data_nodes(config: ShardingConfig, ctx: Context) -> None:
    owner: dict[tuple[str, str], str] = {}
    known = shown_names(config.data_sources)
    members = _member_groups(config)
    for table in config.tables.values():
        path = ctx.paths.data_nodes.get(table.name) or ctx.paths.tables.get(table.name, table.name)
        if not table.data_nodes:
            ctx.problems.add(path, f"logic table {table.name!r} has no data nodes", None)
        unknown: dict[str, list[str]] = {}
        seen: set[tuple[str, str]] = set()
        for node in table.data_nodes:
            if (
                config.data_sources
                and node.data_source not in config.data_sources
                and node.data_source not in ctx.failed_data_sources
            ):
                unknown.setdefault(node.data_source, []).append(str(node))
            key = (node.data_source.lower(), node.table.lower())
            if key in seen:
                ctx.problems.add(path, f"data node {node} is listed twice", str(node))
                continue
            seen.add(key)
            first = owner.setdefault(key, table.name)
            if first != table.name:
                ctx.problems.add(
                    path, f"data node {node} already belongs to logic table {first!r}", str(node)
                )
        for ds, nodes in unknown.items():
            shown = ", ".join(nodes[:3]) + (f" (+{len(nodes) - 3} more)" if len(nodes) > 3 else "")
            ctx.problems.add(
                path,
                f"data node(s) {shown} are in unknown data source {ds!r} (configured: {known})"
                + _member_hint(members, ds),
                ds,
            )


# -- strategies ----------------------------------------------------------------------------------


def _strategies(table: ShardedTable, ctx: Context) -> None:
    levels = (
        ("database", table.database_strategy, ctx.paths.database_strategy.get(table.name)),
        ("table", table.table_strategy, ctx.paths.table_strategy.get(table.name)),
    )
    for level, strategy, path in levels:
        path = path or ctx.paths.tables.get(table.name, table.name)
        spec = strategy.algorithm
        if strategy.kind is StrategyKind.NONE or spec is None:
            continue
        _kind_fits(table, level, strategy, spec, path, ctx)
        _inline_columns(table, level, strategy, spec, ctx)
        before = len(ctx.problems)
        for targets in _target_lists(table, level):
            try:
                spec.algorithm.check_targets(targets)
            except ConfigError as exc:
                if level == "table" and not table.auto and _global_numbering_ok(spec, table):
                    break  # tables numbered across data sources (t_0..15 in ds0, t_16..31 in ds1)
                where = ctx.paths.slot_maps.get(spec.name, path) if getattr(exc, "missing", None) else path
                ctx.problems.add(where, f"{table.name}: {exc.message}", list(targets))
                break
        if len(ctx.problems) == before:  # a count that leaves targets unused (MOD 2 over 4 databases)
            _mod_count(table, level, spec, path, ctx)
        _probe_inline(table, level, strategy, spec, path, ctx)


def _target_lists(table: ShardedTable, level: str) -> list[tuple[str, ...]]:
    if table.auto:
        return [table.all_tables]
    if level == "database":
        return [table.data_sources]
    return list(table.tables_by_source.values())


def _global_numbering_ok(spec: AlgorithmSpec, table: ShardedTable) -> bool:
    try:
        spec.algorithm.check_targets(table.all_tables)
    except ConfigError:
        return False
    return True


def _kinds(type_key: str) -> tuple[str, ...]:
    if type_key.startswith("COMPLEX_"):
        return ("complex",)
    if type_key.startswith("HINT_"):
        return ("hint",)
    if type_key == "GENE":  # an id column, optionally with its key columns
        return ("standard", "complex")
    return ("standard",)


def _kind_fits(
    table: ShardedTable, level: str, strategy: Strategy, spec: AlgorithmSpec, path: str, ctx: Context
) -> None:
    kinds = _kinds(spec.type)
    wants = " or ".join(kinds)
    if strategy.kind.value not in kinds:
        ctx.problems.add(
            path,
            f"{table.name} {level} strategy is {strategy.kind.value} but algorithm {spec.name!r} "
            f"({spec.type}) needs a {wants} strategy",
            spec.type,
        )


def _expression(spec: AlgorithmSpec) -> Any:
    text = spec.props.get("algorithm-expression")
    if spec.type not in _INLINE_TYPES or not isinstance(text, str):
        return None
    try:
        return compile_expression(text)
    except ConfigError:
        return None  # the algorithm factory already reported it


def _inline_columns(
    table: ShardedTable, level: str, strategy: Strategy, spec: AlgorithmSpec, ctx: Context
) -> None:
    expr = _expression(spec)
    if expr is None or strategy.kind is StrategyKind.HINT:
        return
    allowed = {c.lower() for c in strategy.columns}
    stray = sorted(c for c in expr.columns if c.lower() not in allowed)
    if stray:
        ctx.problems.add(
            join_path(
                join_path(ctx.paths.algorithms.get(spec.name, spec.name), "props"), "algorithm-expression"
            ),
            f"{expr.text!r} uses column(s) {stray}, but the {level} strategy of {table.name} "
            f"shards by {list(strategy.columns)}",
            expr.text,
        )


def _mod_count(table: ShardedTable, level: str, spec: AlgorithmSpec, path: str, ctx: Context) -> None:
    if spec.type not in _MOD_FAMILY or table.auto:
        return
    count = getattr(spec.algorithm, "count", None)
    if not isinstance(count, int):
        return
    if level == "database":
        fits = {len(table.data_sources)}
        what = f"{len(table.data_sources)} data source(s)"
    else:
        per = {len(v) for v in table.tables_by_source.values()}
        fits = per | {len(table.data_nodes)}
        what = f"{'/'.join(map(str, sorted(per)))} table(s) per data source ({len(table.data_nodes)} in all)"
    if count not in fits:
        ctx.problems.add(
            path,
            f"{table.name}: {spec.type} {spec.name!r} has sharding-count {count} but the {level} level has {what}",
            count,
        )


def _probe_inline(
    table: ShardedTable, level: str, strategy: Strategy, spec: AlgorithmSpec, path: str, ctx: Context
) -> None:
    """Warn when an INLINE expression yields names outside its targets for small integer keys."""
    expr = _expression(spec)
    if expr is None or strategy.kind is not StrategyKind.STANDARD or len(expr.columns) != 1:
        return
    targets = {t.lower() for t in (table.data_sources if level == "database" else table.all_tables)}
    column = next(iter(expr.columns))
    outside: list[str] = []
    for value in range(_PROBE_VALUES):
        try:
            name = expr.evaluate({column: value})
        except ConfigError:
            return  # the expression wants other values (strings, dates): nothing to learn
        if name.lower() not in targets and name not in outside:
            outside.append(name)
    if outside:
        ctx.warn(
            path,
            f"{level} algorithm {spec.name!r} ({expr.text!r}) yields {outside[:3]} for {column} in "
            f"0..{_PROBE_VALUES - 1}, which are not {level}s of {table.name}; statements routed by it "
            "alone will fail",
        )


# -- key generation --------------------------------------------------------------------------------


def _slot_strategy(strategy: Strategy) -> tuple[int, set[str]] | None:
    """(slot bits, the columns hashed into slots) of a SLOTS / GENE strategy, else ``None``."""
    spec = strategy.algorithm
    if spec is None or spec.type not in ("SLOTS", "GENE"):
        return None
    bits = getattr(spec.algorithm, "slot_bits", None) or getattr(spec.algorithm, "gene_bits", None)
    if not isinstance(bits, int):
        return None
    if spec.type == "GENE":  # ids carry the slot; the key columns are hashed like SLOTS
        columns = {c.lower() for c in getattr(spec.algorithm, "key_columns", ())}
    else:
        columns = {c.lower() for c in strategy.columns}
    return bits, columns


def _key_generation(table: ShardedTable, ctx: Context) -> None:
    kg = table.key_generation
    if kg is None or kg.generator.type != "GENE":
        return
    gen = kg.generator
    path = ctx.paths.key_generation.get(table.name) or ctx.paths.key_generators.get(gen.name, table.name)
    found = _slot_strategy(table.database_strategy) or _slot_strategy(table.table_strategy)
    broken = any(
        s.is_sharded and s.algorithm is None for s in (table.database_strategy, table.table_strategy)
    )
    if found is None:
        if not broken:  # a failed algorithm is reported already; its slot bits are unknown
            ctx.problems.add(
                path,
                f"GENE key generator {gen.name!r} on {table.name} needs a SLOTS (or GENE) sharding "
                "strategy to take its slot bits from",
                gen.name,
            )
        return
    bits, columns = found
    if gen.shard_column is not None and columns and gen.shard_column.lower() not in columns:
        ctx.problems.add(
            path,
            f"GENE key generator {gen.name!r} carries the slot of {gen.shard_column!r}, but {table.name} "
            f"is sharded by {sorted(columns)[0]!r}; ids would route to the wrong shard",
            gen.shard_column,
        )
    if gen.gene_bits is not None and gen.gene_bits != bits:
        ctx.problems.add(
            path,
            f"GENE key generator {gen.name!r} has gene-bits {gen.gene_bits} but {table.name} "
            f"uses {bits} slot bits ({1 << bits} slots); they must be equal",
            gen.gene_bits,
        )
    if kg.column.lower() == (gen.shard_column or "").lower():
        ctx.problems.add(path, f"GENE key column {kg.column!r} cannot be its own shard column", kg.column)


# -- binding groups -------------------------------------------------------------------------------------


def _binding_groups(config: ShardingConfig, ctx: Context) -> None:
    member: dict[str, int] = {}
    for i, group in enumerate(config.binding_groups):
        path = ctx.paths.binding_groups[i] if i < len(ctx.paths.binding_groups) else f"bindingTables[{i}]"
        if len(group.tables) < 2:
            ctx.problems.add(
                path, f"binding group {list(group.tables)} needs at least two tables", list(group.tables)
            )
        tables: list[ShardedTable] = []
        for name in group.tables:
            table = config.table(name)
            if table is None:
                ctx.problems.add(path, f"binding table {name!r} is not a sharded logic table", name)
                continue
            if name.lower() in member:
                j = member[name.lower()]
                what = "twice in this group" if j == i else f"in binding group {j} too"
                ctx.problems.add(path, f"table {name!r} appears {what}", name)
                continue
            member[name.lower()] = i
            tables.append(table)
        for other in tables[1:]:
            for why in _binding_differences(tables[0], other):
                ctx.problems.add(
                    path,
                    f"binding tables {tables[0].name!r} and {other.name!r} are sharded differently: {why}",
                    other.name,
                )


def _suffixes(table: ShardedTable, tables: Iterable[str]) -> list[str]:
    names = list(tables)
    prefix = table.name.lower()
    if not all(n.lower().startswith(prefix) for n in names):
        prefix = _common_prefix([n.lower() for n in names])
    return sorted(n[len(prefix) :] for n in names)


def _common_prefix(names: list[str]) -> str:
    if not names:
        return ""
    lo, hi = min(names), max(names)
    i = 0
    while i < len(lo) and i < len(hi) and lo[i] == hi[i]:
        i += 1
    return lo[:i]


def _binding_differences(a: ShardedTable, b: ShardedTable) -> list[str]:
    out: list[str] = []
    if a.data_sources != b.data_sources:
        out.append(f"data sources {list(a.data_sources)} vs {list(b.data_sources)}")
    else:
        for ds in a.data_sources:
            xa, xb = _suffixes(a, a.tables_by_source[ds]), _suffixes(b, b.tables_by_source.get(ds, ()))
            if xa != xb:
                out.append(
                    f"in {ds} {len(xa)} table(s) {list(a.tables_by_source[ds][:2])}... vs {len(xb)} table(s) "
                    f"{list(b.tables_by_source.get(ds, ())[:2])}... (table suffixes differ)"
                )
                break
    for level in ("database", "table"):
        sa: Strategy = getattr(a, f"{level}_strategy")
        sb: Strategy = getattr(b, f"{level}_strategy")
        if sa.kind is not sb.kind or len(sa.columns) != len(sb.columns):
            out.append(
                f"{level} strategy {sa.kind.value}{list(sa.columns)} vs {sb.kind.value}{list(sb.columns)}"
            )
        elif sa.algorithm is None or sb.algorithm is None or sa.algorithm.name == sb.algorithm.name:
            continue  # one failed to build (reported already), or literally the same algorithm
        elif _structure(sa, a) != _structure(sb, b):
            na = sa.algorithm.name if sa.algorithm else None
            nb = sb.algorithm.name if sb.algorithm else None
            out.append(f"{level} algorithms {na!r} and {nb!r} differ")
    return out


def _structure(strategy: Strategy, table: ShardedTable) -> Any:
    """What must match between bound tables: the algorithm, up to table prefix and column names."""
    spec = strategy.algorithm
    if spec is None:
        return None
    props = dict(spec.props)
    expr = props.get("algorithm-expression")
    if spec.type in _INLINE_TYPES and isinstance(expr, str):
        text = expr.replace("$->{", "${")
        prefix = (
            _common_prefix([n.lower() for n in table.all_tables]) if table.all_tables else table.name.lower()
        )
        if text.lower().startswith(prefix):
            text = text[len(prefix) :]
        elif text.lower().startswith(table.name.lower()):
            text = text[len(table.name) :]
        for i, col in enumerate(strategy.columns):
            text = text.replace(col, f"\x00{i}")
        props["algorithm-expression"] = text
        return (spec.type, json.dumps(thaw(props), sort_keys=True, default=str))
    return (spec.type, json.dumps(thaw(spec.props), sort_keys=True, default=str))


# -- names -----------------------------------------------------------------------------------------------


def _names(config: ShardingConfig, ctx: Context) -> None:
    for name in config.broadcast_tables:
        path = ctx.paths.broadcast.get(name, "broadcastTables")
        if config.table(name) is not None:
            ctx.problems.add(path, f"table {name!r} is both sharded and broadcast", name)
    for name, single in config.single_tables.items():
        path = ctx.paths.single.get(name, "singleTables")
        if config.table(name) is not None or config.is_broadcast(name):
            kind = "sharded" if config.table(name) is not None else "broadcast"
            ctx.problems.add(path, f"table {name!r} is both single and {kind}", name)
        if (
            single.data_source not in config.data_sources
            and single.data_source not in ctx.failed_data_sources
        ):
            ctx.problems.add(
                path,
                f"single table {name!r} is in unknown data source {single.data_source!r} "
                f"(configured: {shown_names(config.data_sources)})",
                single.data_source,
            )
    for pattern in config.single_patterns:
        ds = pattern.split(".", 1)[0]
        if ds != "*" and ds not in config.data_sources:
            ctx.problems.add("singleTables", f"pattern {pattern!r} names unknown data source {ds!r}", pattern)
    default = config.default_data_source
    if default is not None and default not in config.data_sources and default not in ctx.failed_data_sources:
        ctx.problems.add(
            ctx.paths.default_data_source,
            f"default data source {config.default_data_source!r} is not configured "
            f"(configured: {shown_names(config.data_sources)})",
            config.default_data_source,
        )


# -- xa -----------------------------------------------------------------------------------------------


def _xa(config: ShardingConfig, ctx: Context) -> None:
    """The XA log must live on a configured data source; recovery must not outrun a live transaction."""
    xa = config.xa
    name = xa.log_data_source
    if name is not None and name not in config.data_sources and name not in ctx.failed_data_sources:
        ctx.problems.add(
            "xa.logDataSource",
            f"XA log data source {name!r} is not configured (configured: {shown_names(config.data_sources)})",
            name,
        )
    if xa.abandon_after_ms <= xa.timeout_ms:
        ctx.problems.add(
            "xa.abandonAfterMs",
            f"xa.abandonAfterMs ({xa.abandon_after_ms}) must be longer than xa.timeoutMs ({xa.timeout_ms}): "
            "recovery would roll back transactions that are still running",
            xa.abandon_after_ms,
        )
