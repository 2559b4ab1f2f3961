"""Any :class:`ShardingConfig` written back in ddm-core's own format.

:func:`to_native` spells every table out (``dataNodes``, ``databaseStrategy``,
``tableStrategy`` naming entries of ``algorithms``), so the result loads back
into an equal configuration — for a ShardingSphere file too, which makes it
the converter from ShardingSphere YAML to ddm-core's format. Literal passwords
are left out unless ``secrets="keep"``; environment references are always kept.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Iterable, Mapping

import yaml

from ddm_core.errors import ConfigError
from ddm_core.metadata.buckets import STATE_FIELDS, BucketState, format_buckets
from ddm_core.metadata.build import READ_WRITE_FIELDS
from ddm_core.metadata.limits import PROXY_LIMIT_FIELDS
from ddm_core.metadata.model import (
    DataNode,
    DataSource,
    Endpoint,
    MetadataCenter,
    PoolSettings,
    ProxySettings,
    ReadWriteSettings,
    RuntimeSettings,
    ShardedTable,
    ShardingConfig,
    Strategy,
    StrategyKind,
    XaSettings,
    thaw,
)
from ddm_core.metadata.tagged import Tagged

__all__ = ["to_native", "dump_native", "native_copy", "cutover_block"]


def to_native(config: ShardingConfig, *, secrets: str = "omit") -> dict[str, Any]:
    """The configuration as a plain dict in ddm-core's own format.

    Args:
        config: Any loaded configuration.
        secrets: ``"omit"`` leaves literal passwords out; ``"keep"`` writes them.
            ``passwordEnv`` references are written either way.
    """
    if secrets not in ("omit", "keep"):
        raise ConfigError(f"dump secrets= must be 'omit' or 'keep', not {secrets!r}")
    out: dict[str, Any] = {"format": "ddm-core"}
    if config.name is not None:
        out["name"] = config.name
    out["dataSources"] = {name: _data_source(ds, secrets) for name, ds in config.data_sources.items()}
    if config.algorithms:
        out["algorithms"] = {
            name: {"type": spec.type, **({"props": thaw(spec.props)} if spec.props else {})}
            for name, spec in config.algorithms.items()
        }
    if config.key_generators:
        out["keyGenerators"] = {
            name: {"type": spec.type, **({"props": thaw(spec.props)} if spec.props else {})}
            for name, spec in config.key_generators.items()
        }
    if config.tables:
        out["tables"] = [_table(t) for t in config.tables.values()]
    if config.binding_groups:
        out["bindingTables"] = [list(g.tables) for g in config.binding_groups]
    if config.broadcast_tables:
        out["broadcastTables"] = list(config.broadcast_tables)
    singles = [f"{s.data_source}.{s.name}" for s in config.single_tables.values()] + list(
        config.single_patterns
    )
    if singles:
        out["singleTables"] = singles
    if config.default_data_source is not None:
        out["defaultDataSource"] = config.default_data_source
    runtime = _runtime(config.runtime)
    if runtime:
        out["runtime"] = runtime
    xa = _changed(config.xa, XaSettings(), {
        "log_data_source": "logDataSource", "timeout_ms": "timeoutMs", "abandon_after_ms": "abandonAfterMs",
        "max_concurrent": "maxConcurrent", "recover_on_start": "recoverOnStart",
    })  # fmt: skip
    if xa:
        out["xa"] = xa
    proxy = _changed(config.proxy, ProxySettings(), {
        "audit_all": "auditAll",
        "workers": "workers", "batch_rows": "batchRows", "shutdown_grace_ms": "shutdownGraceMs",
        "slow_sql_ms": "slowSqlMs", "audit_log": "auditLog", "inline_statements": "inlineStatements", "relay": "relay", "link_idle_ms": "linkIdleMs",
        "statement_timeout_ms": "statementTimeoutMs",
        "transaction_mode": "transactionMode", **PROXY_LIMIT_FIELDS,
    })  # fmt: skip
    if config.proxy.tls is not None:
        tls = config.proxy.tls
        proxy["tls"] = {"cert": tls.cert, "key": tls.key, **({"required": True} if tls.required else {})}
        if tls.client_ca is not None:  # clientCert too: its default depends on clientCa
            proxy["tls"].update(clientCa=tls.client_ca, clientCert=tls.client_cert)
    if config.proxy.users:
        proxy["users"] = [
            {"name": u.name, **({"passwordHash": u.password_hash} if u.password_hash is not None else {}),
             **({"sha2Hash": u.sha2_hash} if u.sha2_hash is not None else {}),
             **({"rateLimit": u.rate_limit} if u.rate_limit else {}), **({"unmask": True} if u.unmask else {}),
             **({"requireCertSubject": u.require_cert_subject} if u.require_cert_subject is not None else {}),
             **({"allow": list(u.allow)} if u.allow else {})}
            for u in config.proxy.users
        ]  # fmt: skip
    if config.proxy.table_rate_limits:
        proxy["tableRateLimits"] = dict(config.proxy.table_rate_limits)
    if config.proxy.masks:
        proxy["masks"] = [{"column": m.column, "mask": m.mask, **({"table": m.table} if m.table else {})}
                          for m in config.proxy.masks]  # fmt: skip
    if proxy:
        out["proxy"] = proxy
    metadata = _changed(config.metadata, MetadataCenter(), {
        "server": "server", "namespace": "namespace", "failover_snapshot": "failoverSnapshot",
    })  # fmt: skip
    if metadata:
        out["metadata"] = metadata
    if config.props:
        out["props"] = thaw(config.props)
    migration = config.migration
    if migration is not None:
        out["migration"] = {
            "name": migration.name,
            "phase": migration.phase,
            "readShiftPercent": migration.read_shift_pct,
            "fenceAfterSeconds": migration.fence_after_s,
            "target": to_native(migration.target, secrets=secrets),
        }
    cutover = config.cutover
    if cutover is not None:
        legacy = {"name": cutover.legacy_name, **_data_source(cutover.legacy, secrets), "table": cutover.legacy_table}
        out["cutover"] = cutover_block(
            cutover.name, cutover.table, legacy, cutover.buckets, dict(enumerate(cutover.states)), cutover.paused,
            cutover.fence_after_s,
        )  # fmt: skip
    return out


def native_copy(config: ShardingConfig | Mapping[str, Any]) -> dict[str, Any]:
    """A native document of ``config`` that the caller may change (passwords kept)."""
    if isinstance(config, ShardingConfig):
        return to_native(config, secrets="keep")
    return copy.deepcopy(dict(config))


def cutover_block(
    name: str, table: str, legacy: Mapping[str, Any], buckets: int, states: Mapping[int, BucketState],
    paused: Iterable[int], fence_after_s: float,
) -> dict[str, Any]:
    """A native ``cutover:`` block; ``legacy`` is its data source as a ``dataSources`` entry with its ``table``."""
    block: dict[str, Any] = {"name": name, "table": table, "legacy": copy.deepcopy(dict(legacy)), "buckets": buckets}
    for field_name, state in STATE_FIELDS:
        block[field_name] = format_buckets(b for b, s in states.items() if BucketState(s) is state)
    block["paused"] = format_buckets(paused)
    block["fenceAfterSeconds"] = float(fence_after_s)
    return block


class _Dumper(yaml.SafeDumper):
    """SafeDumper that double-quotes text holding a line break other than ``\\n``: PyYAML would
    single-quote a lone NEL (U+0085) and read it back as a space."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if any(ch in value for ch in "\x85\u2028\u2029") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _represent_tagged(dumper: yaml.SafeDumper, value: Tagged) -> yaml.Node:
    """A tagged value kept from the source (``!!python/tuple [1]`` in free-form props) as it was."""
    tag = "tag:yaml.org,2002:" + value.tag[2:] if value.tag.startswith("!!") else value.tag
    if isinstance(value.value, Mapping):
        return dumper.represent_mapping(tag, value.value)
    if isinstance(value.value, (list, tuple)):
        return dumper.represent_sequence(tag, value.value)
    return dumper.represent_scalar(tag, "" if value.value is None else str(value.value))


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(Tagged, _represent_tagged)


def dump_native(config: ShardingConfig, *, secrets: str = "omit") -> str:
    """:func:`to_native` as YAML text."""
    text: str = yaml.dump(
        to_native(config, secrets=secrets), Dumper=_Dumper, sort_keys=False, allow_unicode=True
    )
    return text


def _endpoint(ep: Endpoint, secrets: str, *, with_name: bool, primary: Endpoint | None = None) -> dict[str, Any]:
    """An endpoint's fields; a replica without credentials of its own while its primary has some
    says so with ``null`` (the own format would otherwise give it the primary's)."""
    out: dict[str, Any] = {}
    if with_name:
        out["name"] = ep.name
    out["url"] = ep.url
    if ep.username is not None:
        out["username"] = ep.username
    elif primary is not None and primary.username is not None:
        out["username"] = None
    if ep.password is None and primary is not None and primary.password is not None:
        out["password"] = None
    if ep.password is not None:
        if ep.password.env is not None:
            out["passwordEnv"] = ep.password.env
        elif secrets == "keep":
            out["password"] = ep.password.literal
    if ep.weight != 1:
        out["weight"] = ep.weight
    if ep.props:
        out["props"] = thaw(ep.props)
    return out


def _data_source(ds: DataSource, secrets: str) -> dict[str, Any]:
    out = _endpoint(ds.primary, secrets, with_name=False)
    if ds.primary.name != ds.name:
        out["primaryName"] = ds.primary.name
    if ds.replicas:
        out["replicas"] = [_endpoint(r, secrets, with_name=True, primary=ds.primary) for r in ds.replicas]
    pool = _changed(ds.pool, PoolSettings(), {
        "max_size": "maxSize", "min_idle": "minIdle", "acquire_timeout_ms": "acquireTimeoutMs",
        "idle_timeout_ms": "idleTimeoutMs", "max_lifetime_ms": "maxLifetimeMs",
        "alive_bypass_window_ms": "aliveBypassWindowMs",
    })  # fmt: skip
    if pool:
        out["pool"] = pool
    if ds.load_balancer != "weight":
        out["loadBalancer"] = ds.load_balancer
    if ds.transactional_reads != "primary":
        out["transactionalReads"] = ds.transactional_reads
    read_write = _changed(ds.read_write, ReadWriteSettings(), {f: native for f, native, _ in READ_WRITE_FIELDS})
    if read_write:
        out["readWrite"] = read_write
    return out


def _strategy(strategy: Strategy) -> dict[str, Any] | None:
    if strategy.kind is StrategyKind.NONE:
        return None
    out: dict[str, Any] = {"kind": strategy.kind.value}
    if strategy.columns:
        out["columns"] = list(strategy.columns)
    if strategy.algorithm is not None:
        out["algorithm"] = strategy.algorithm.name
    return out


#: Longer compacted node lists are written as a round robin when the nodes are one.
_LONG_NODE_LIST = 256


def _table(table: ShardedTable) -> dict[str, Any]:
    nodes: Any = _compact(table.data_nodes)
    if len(nodes) > _LONG_NODE_LIST:
        nodes = _round_robin(table.data_nodes) or nodes
    out: dict[str, Any] = {"logicTable": table.name, "dataNodes": nodes}
    for key, strategy in (
        ("databaseStrategy", table.database_strategy),
        ("tableStrategy", table.table_strategy),
    ):
        spelled = _strategy(strategy)
        if spelled is not None:
            out[key] = spelled
    if table.key_generation is not None:
        out["keyGenerator"] = {
            "column": table.key_generation.column,
            "generator": table.key_generation.generator.name,
        }
    if table.auto:
        out["auto"] = True
    if table.columns:
        out["columns"] = thaw(table.columns)
    return out


_NUMBERED = re.compile(r"^(.*?)(0|[1-9][0-9]*)$")


def _round_robin(nodes: tuple[DataNode, ...]) -> dict[str, Any] | None:
    """``{roundRobin: [...], tables: "t_${0..n}"}`` when table ``i`` is ``prefix + (first + i)`` on the
    ``i % k``-th data source (an auto table), else ``None``."""
    sources = list(dict.fromkeys(n.data_source for n in nodes))
    first = _NUMBERED.match(nodes[0].table)
    if first is None or any("$" in s or "," in s for s in sources):
        return None
    prefix, start = first.group(1), int(first.group(2))
    for i, node in enumerate(nodes):
        if node.data_source != sources[i % len(sources)] or node.table != f"{prefix}{start + i}":
            return None
    if "$" in prefix or "," in prefix:
        return None
    return {"roundRobin": sources, "tables": f"{prefix}${{{start}..{start + len(nodes) - 1}}}"}


def _compact(nodes: tuple[DataNode, ...]) -> list[str]:
    """Runs like ds0.t_0, ds0.t_1, ... ds0.t_15 → ``ds0.t_${0..15}`` (same order on expansion)."""
    out: list[str] = []
    run: list[Any] = []  # [data_source, prefix, first, last]

    def flush() -> None:
        if run:
            ds, prefix, first, last = run
            out.append(f"{ds}.{prefix}{first}" if first == last else f"{ds}.{prefix}${{{first}..{last}}}")
            run.clear()

    for node in nodes:
        m = _NUMBERED.match(node.table)
        if m is None or "$" in node.table or "$" in node.data_source or "," in node.table:
            flush()
            out.append(str(node))
            continue
        prefix, number = m.group(1), int(m.group(2))
        if run and run[0] == node.data_source and run[1] == prefix and number == run[3] + 1:
            run[3] = number
        else:
            flush()
            run.extend([node.data_source, prefix, number, number])
    flush()
    return out


def _runtime(rt: RuntimeSettings) -> dict[str, Any]:
    return _changed(rt, RuntimeSettings(), {
        "allow_full_route": "allowFullRoute", "allow_dml_full_route": "allowDmlFullRoute",
        "full_route_threshold": "fullRouteThreshold",
        "max_offset": "maxOffset", "slow_sql_ms": "slowSqlMs", "sql_comment": "sqlComment", "app_name": "appName",
        "merge_memory_warn_mb": "mergeMemoryWarnMb", "cross_node_queries": "crossNodeQueries",
        "max_join_rows": "maxJoinRows", "max_join_memory_mb": "maxJoinMemoryMb",
        "insert_select_autocommit": "insertSelectAutocommit", "one_unit_per_data_source": "oneUnitPerDataSource",
    })  # fmt: skip


def _changed(obj: Any, default: Any, names: dict[str, str]) -> dict[str, Any]:
    return {key: getattr(obj, f) for f, key in names.items() if getattr(obj, f) != getattr(default, f)}
