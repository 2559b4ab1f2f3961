"""``ddm config check``: validate a configuration and summarise what the router will see."""

from __future__ import annotations

import os
from typing import Any, Sequence

import click

from ddm_core.algorithms import TargetSet
from ddm_core.cli.app import cli, load, render_table
from ddm_core.cli.describe import short_nodes
from ddm_core.metadata.model import ShardedTable, ShardingConfig, Strategy, StrategyKind

__all__ = ["config_group", "check", "summary_lines", "slot_distribution"]


@cli.group("config")
def config_group() -> None:
    """Inspect configuration files."""


@config_group.command("check")
@click.argument("config_path", metavar="CONFIG", type=click.Path(exists=True, dir_okay=False))
@click.option("--check-env/--no-check-env", default=False, show_default=True,
              help="Also fail when a password environment variable is not set.")
def check(config_path: str, check_env: bool) -> None:
    """Validate CONFIG and print its data sources, tables, algorithms and slot layout.

    Every problem of an invalid file is listed (exit status 2).
    """
    config = load(config_path, check_env=check_env, show_warnings=False)
    for line in summary_lines(config):
        click.echo(line)


def summary_lines(config: ShardingConfig) -> list[str]:
    """The ``config check`` report."""
    origin = config.origin
    head = "ok"
    if origin is not None:
        head += f": {origin.location} ({origin.format} format, sha256 {origin.digest[:12]})"
    if config.name:
        head += f", name {config.name!r}"
    lines = [head, ""]
    lines += _data_sources(config)
    lines += _tables(config)
    lines += _others(config)
    lines += _algorithms(config)
    lines += _runtime(config)
    credentials = _credentials(config)
    if credentials:
        lines += ["", "credentials (environment variables):"] + credentials
    if config.warnings:
        lines += ["", f"warnings ({len(config.warnings)}):"] + [f"  - {w}" for w in config.warnings]
    return lines


def _data_sources(config: ShardingConfig) -> list[str]:
    rows = []
    for name, ds in config.data_sources.items():
        replicas = ", ".join(f"{r.url} (weight {r.weight})" for r in ds.replicas) or "-"
        pool = f"max {ds.pool.max_size}, min idle {ds.pool.min_idle}, acquire {ds.pool.acquire_timeout_ms} ms"
        rows.append((name, ds.primary.dialect, ds.primary.url, replicas, pool))
    out = [f"data sources ({len(rows)}):"]
    out += ["  " + line for line in render_table(("name", "dialect", "primary", "replicas", "pool"), rows)]
    return out


def _tables(config: ShardingConfig) -> list[str]:
    if not config.tables:
        return ["", "sharded tables: none"]
    out = ["", f"sharded tables ({len(config.tables)}):"]
    for table in config.tables.values():
        out.append(f"  {table.name}: {_node_summary(table)}")
        if table.auto:
            out.append("    database  none (auto table: the data source follows from the physical table)")
        else:
            out.append(f"    database  {_strategy(table.database_strategy)}")
        out.append(f"    table     {_strategy(table.table_strategy)}")
        kg = table.key_generation
        if kg is not None:
            gen = kg.generator
            extra = []
            if gen.gene_bits is not None:
                extra.append(f"gene bits {gen.gene_bits}")
            if gen.shard_column:
                extra.append(f"shard column {gen.shard_column}")
            # Without a configured worker id the router uses 0: two processes then share it.
            extra.append(
                f"worker id {gen.worker_id}" if gen.worker_id is not None else "worker id 0: none configured, set workerId per process"
            )
            out.append(f"    key       {kg.column} ← {gen.type} {gen.name!r} ({', '.join(extra)})")
        group = config.binding_group_of(table.name)
        if group is not None and len(group.tables) > 1:
            out.append(f"    bound to  {', '.join(t for t in group.tables if t.lower() != table.name.lower())}")
        out += _slot_lines(table)
    return out


def _node_summary(table: ShardedTable) -> str:
    n = table.shard_count
    per = {ds: len(t) for ds, t in table.tables_by_source.items()}
    counts = set(per.values())
    if len(counts) == 1 and not table.auto:
        k = counts.pop()
        shape = f"{len(per)} data source{'s' if len(per) != 1 else ''} × {k} table{'s' if k != 1 else ''}"
    else:
        shape = ", ".join(f"{ds}: {c}" for ds, c in per.items())
    nodes = [str(node) for node in table.data_nodes]
    first_last = f"{nodes[0]} .. {nodes[-1]}" if len(nodes) > 1 else nodes[0]
    return f"{n} node{'s' if n != 1 else ''} ({shape}; {first_last})"


def _strategy(strategy: Strategy) -> str:
    if strategy.kind is StrategyKind.NONE or strategy.algorithm is None:
        return "none"
    spec = strategy.algorithm
    cols = ", ".join(strategy.columns) or "(hint value)"
    return f"{strategy.kind.value} on {cols}: {spec.type} {spec.name!r} = {strategy.sharder.describe()}"


def _is_slotted(strategy: Strategy) -> bool:
    return strategy.algorithm is not None and strategy.algorithm.type.upper() in ("SLOTS", "GENE")


def slot_distribution(strategy: Strategy, targets: Sequence[str]) -> list[tuple[str, int, str]]:
    """``(target, slot count, slot ranges)`` for a SLOTS / GENE strategy over ``targets``."""
    sharder: Any = strategy.sharder
    bits = getattr(sharder, "slot_bits", None) or getattr(sharder, "gene_bits")
    ts = TargetSet(targets)
    owned: dict[str, list[int]] = {t: [] for t in targets}
    for slot in range(1 << bits):
        if hasattr(sharder, "target_of_slot"):
            owner = sharder.target_of_slot(ts, slot)[0]
        else:  # GENE: an id whose gene is `slot` lives where the slot does
            owner = sharder.precise(ts, {"__slot__": slot})[0]
        owned[owner].append(slot)
    return [(t, len(s), _runs(s)) for t, s in owned.items()]


def _runs(slots: list[int], limit: int = 4) -> str:
    if not slots:
        return "-"
    runs: list[str] = []
    start = prev = slots[0]
    for s in [*slots[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        runs.append(f"{start}-{prev}" if prev != start else str(start))
        if s is not None:
            start = prev = s
    if len(runs) > limit:
        return ", ".join(runs[:limit]) + f", ... ({len(runs)} runs)"
    return ", ".join(runs)


def _slot_lines(table: ShardedTable) -> list[str]:
    out: list[str] = []
    db, tb = table.database_strategy, table.table_strategy
    if _is_slotted(db) and not table.auto:
        rows = slot_distribution(db, table.data_sources)
        total = sum(r[1] for r in rows)
        out.append(f"    slots     {total} database slots per data source:")
        out += [f"      {t:<12} {n:>6}  {runs}" for t, n, runs in rows]
    if _is_slotted(tb):
        groups = {"": table.all_tables} if table.auto else dict(table.tables_by_source)
        for ds, tables in groups.items():
            rows = slot_distribution(tb, tables)
            total = sum(r[1] for r in rows)
            where = f" in {ds}" if ds else ""
            out.append(f"    slots     {total} table slots per table{where}:")
            out += [f"      {t:<16} {n:>6}  {runs}" for t, n, runs in rows]
    return out


def _others(config: ShardingConfig) -> list[str]:
    out = [""]
    groups = [g for g in config.binding_groups if len(g.tables) > 1]
    out.append("binding groups: " + ("; ".join("[" + ", ".join(g.tables) + "]" for g in groups) or "none"))
    out.append("broadcast tables: " + (", ".join(config.broadcast_tables) or "none"))
    singles = [f"{s.name} → {s.data_source}" for s in config.single_tables.values()]
    singles += [f"{p} (pattern)" for p in config.single_patterns]
    out.append("single tables: " + (", ".join(singles) or "none"))
    out.append(f"default data source: {config.default_data_source or 'none (unknown tables are refused)'}")
    return out


def _algorithms(config: ShardingConfig) -> list[str]:
    out = ["", f"algorithms ({len(config.algorithms)}):"]
    rows = []
    for name, spec in config.algorithms.items():
        describe = spec.algorithm.describe() if spec.algorithm is not None else "-"
        rows.append((name, spec.type, describe))
    if rows:
        out += ["  " + line for line in render_table(("name", "type", "describe()"), rows)]
    if config.key_generators:
        out.append(f"key generators ({len(config.key_generators)}):")
        for name, gen in config.key_generators.items():
            props = ", ".join(f"{k}={v}" for k, v in gen.props.items())
            out.append(f"  {name}: {gen.type}" + (f" ({props})" if props else ""))
    return out


def _runtime(config: ShardingConfig) -> list[str]:
    rt = config.runtime
    fields = [(name, getattr(rt, name)) for name in getattr(rt, "__dataclass_fields__", {})]
    text = ", ".join(f"{k}={_show(v)}" for k, v in fields)
    out = ["", f"runtime: {text}"]
    md = config.metadata
    if md.server or md.namespace or md.failover_snapshot:
        out.append(
            f"metadata center: server={md.server or '-'}, namespace={md.namespace or '-'}, "
            f"failover snapshot={md.failover_snapshot or '-'}"
        )
    return out


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "-" if value is None else str(value)


def _credentials(config: ShardingConfig) -> list[str]:
    seen: dict[str, list[str]] = {}
    for ds in config.data_sources.values():
        for ep in ds.endpoints:
            env = getattr(ep.password, "env", None)
            if env:
                seen.setdefault(env, []).append(ep.name)
    return [
        f"  {env}: {'set' if env in os.environ else 'NOT SET'} (password of {', '.join(users)})"
        for env, users in seen.items()
    ]
