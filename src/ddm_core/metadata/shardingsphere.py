"""Apache ShardingSphere-JDBC 5.x YAML, read unchanged → :class:`ShardingConfig`.

Supported (5.0 to 5.5 spellings):

* ``dataSources``: any pool's keys; the URL from ``jdbcUrl`` / ``url`` /
  ``standardJdbcUrl`` / ``jdbc-url`` (also under a nested ``props:``), HikariCP
  and Druid sizing keys mapped to :class:`PoolSettings`, everything else kept
  in ``Endpoint.props``. ``passwordEnv`` and ``${ENV:NAME}`` work here too.
* ``rules``: ``!SHARDING`` (``tables``, ``autoTables``, ``bindingTables``,
  ``broadcastTables``, ``defaultDatabaseStrategy`` / ``defaultTableStrategy`` /
  ``defaultShardingColumn`` / ``defaultKeyGenerateStrategy``,
  ``keyGenerateStrategies``, ``shardingAlgorithms``, ``keyGenerators``,
  ``auditors``, ``auditStrategy`` / ``defaultAuditStrategy``), ``!BROADCAST``, ``!SINGLE``, ``!READWRITE_SPLITTING`` (5.0
  ``dataSources``, 5.1 ``staticStrategy`` / ``type: Static``, 5.4
  ``dataSourceGroups``; load balancers ROUND_ROBIN, RANDOM, WEIGHT), ``!TRANSACTION``.
* the transaction rule (``- !TRANSACTION`` or a top-level ``transaction:``):
  LOCAL and XA become ``proxy.transactionMode``; BASE and unknown providers are
  refused (:mod:`ddm_core.metadata.shardingsphere_transaction`).
* ``databaseName`` / ``schemaName``, ``props``, ``mode`` (kept in
  ``config.props``).

Refused with a problem naming them: any other rule tag (``!ENCRYPT``,
``!SHADOW``, ``!MASK``...), unknown algorithm / key generator / load balancer
types, dynamic read/write splitting, sequence key generation. Accepted with a
warning (loaded, not enforced): ``shardingCache``.

Audit strategies keep ShardingSphere's meaning (``ShardedTable.auditors``): a
statement without a shard condition on a table whose auditors include a
``DML_SHARDING_CONDITIONS`` one is refused; a table without auditors lets it
reach every shard (docs/configuration.md#audit-strategies).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from ddm_core.metadata.build import LOAD_BALANCERS, POOL_RANGES, Context, pool_settings, read_write_settings
from ddm_core.metadata.fields import Section, as_int
from ddm_core.metadata.limits import (
    MAX_DATA_SOURCES,
    MAX_LOGIC_TABLES,
    MAX_SHARDS,
    MAX_TABLE_NODES,
    RANGES,
    shown_names,
    too_many,
)
from ddm_core.metadata.model import (
    NO_SHARDING,
    BindingGroup,
    DataNode,
    DataSource,
    Endpoint,
    KeyGeneration,
    MetadataCenter,
    PoolSettings,
    ProxySettings,
    ReadWriteSettings,
    ShardedTable,
    SingleTable,
    Strategy,
    StrategyKind,
    freeze,
)
from ddm_core.metadata.nodes import expand_names, expand_nodes, name_problem
from ddm_core.metadata.problems import join_path
from ddm_core.metadata.shardingsphere_transaction import read_transaction
from ddm_core.metadata.tagged import Tagged

__all__ = ["read_shardingsphere", "SUPPORTED_RULES"]

SUPPORTED_RULES = ("SHARDING", "BROADCAST", "SINGLE", "READWRITE_SPLITTING", "TRANSACTION")
_URL_KEYS = ("jdbcUrl", "url", "standardJdbcUrl", "jdbc-url", "jdbc_url")
_POOL_KEYS = {
    "maximumPoolSize": "max_size", "maxActive": "max_size", "maxPoolSize": "max_size",
    "minimumIdle": "min_idle", "minIdle": "min_idle", "minPoolSize": "min_idle",
    "connectionTimeout": "acquire_timeout_ms", "connectionTimeoutMilliseconds": "acquire_timeout_ms",
    "maxWait": "acquire_timeout_ms",
    "idleTimeout": "idle_timeout_ms", "idleTimeoutMilliseconds": "idle_timeout_ms",
    "maxLifetime": "max_lifetime_ms", "maxLifetimeMilliseconds": "max_lifetime_ms",
    "aliveBypassWindowMs": "alive_bypass_window_ms",
}  # fmt: skip


def read_shardingsphere(doc: Any, ctx: Context) -> dict[str, Any]:
    """Read a ShardingSphere document; returns the keyword arguments of :class:`ShardingConfig`."""
    top = Section(doc, "", ctx.problems)
    top.mark("format")
    name = top.str("databaseName", "schemaName")
    props = dict(top.mapping("props"))
    metadata = MetadataCenter()
    if top.has("mode"):
        props["mode"] = top.get("mode")
        metadata = _mode(top.get("mode"))
    data_sources = _data_sources(top.section("dataSources"), ctx)

    rules = _rules(top, ctx)
    out: dict[str, Any] = dict(
        data_sources=data_sources, name=name, props=freeze(props), metadata=metadata, tables={}, binding_groups=(),
        broadcast_tables=(), single_tables={}, single_patterns=(), default_data_source=None,
    )  # fmt: skip
    if "READWRITE_SPLITTING" in rules:
        _readwrite(*rules["READWRITE_SPLITTING"], data_sources, ctx)
    broadcast: list[str] = []
    if "SHARDING" in rules:
        tables, groups, sharding_broadcast = _sharding(*rules["SHARDING"], data_sources, ctx)
        out["tables"] = tables
        out["binding_groups"] = tuple(BindingGroup(tuple(g)) for g in groups)
        broadcast += sharding_broadcast
    if "BROADCAST" in rules:
        value, path = rules["BROADCAST"]
        sec = Section(value, path, ctx.problems)
        _add_broadcast(broadcast, sec, "tables", ctx)
        sec.finish()
    out["broadcast_tables"] = tuple(broadcast)
    if "SINGLE" in rules:
        singles, patterns, default = _single(*rules["SINGLE"], ctx)
        out.update(single_tables=singles, single_patterns=tuple(patterns), default_data_source=default)
    mode = _transaction_mode(top, rules, ctx)
    if mode is not None:
        out["proxy"] = ProxySettings(transaction_mode=mode)
    if out["default_data_source"] is None and len(data_sources) == 1:
        out["default_data_source"] = next(iter(data_sources))
    top.finish()
    return out


def _transaction_mode(top: Section, rules: dict[str, tuple[Any, str]], ctx: Context) -> str | None:
    """The transaction rule's mode: ``- !TRANSACTION`` (5.0–5.2) or the top-level ``transaction:`` (5.3+)."""
    given = [rules["TRANSACTION"]] if "TRANSACTION" in rules else []
    if top.has("transaction"):
        given.append((top.get("transaction"), top.field_path("transaction")))
    if len(given) > 1:
        ctx.problems.add(given[1][1], f"the transaction rule is given twice (first at {given[0][1]})", "transaction")
        return None
    return read_transaction(*given[0], ctx) if given else None


def _mode(mode: Any) -> MetadataCenter:
    """Cluster mode's registry (``repository.props.server-lists`` / ``namespace``) as the config center."""
    if not isinstance(mode, Mapping) or str(mode.get("type", "")).lower() != "cluster":
        return MetadataCenter()
    repo = mode.get("repository")
    props = repo.get("props") if isinstance(repo, Mapping) else None
    if not isinstance(props, Mapping):
        return MetadataCenter()
    server, namespace = props.get("server-lists"), props.get("namespace")
    return MetadataCenter(
        server=str(server) if server is not None else None,
        namespace=str(namespace) if namespace is not None else None,
    )


# -- data sources ------------------------------------------------------------------------------


def _data_sources(sec: Section, ctx: Context) -> dict[str, DataSource]:
    out: dict[str, DataSource] = {}
    if too_many(len(sec.data), MAX_DATA_SOURCES, "data sources", sec.path or "dataSources", ctx.problems):
        sec.mark(*map(str, sec.data))
        return out
    for key, spec in sec.data.items():
        name = str(key)
        sec.mark(name)
        path = join_path(sec.path, name)
        ctx.paths.data_sources[name] = path
        why = name_problem(name, "data source name")
        if why is not None:
            ctx.problems.add(path, why, name)
            ctx.failed_data_sources.add(name)
            continue
        extra: dict[str, Any] = {}
        if isinstance(spec, Tagged):  # 4.x: `ds0: !!org.apache.commons.dbcp.BasicDataSource`
            extra["dataSourceClassName"] = spec.name
            spec = spec.value
        if not isinstance(spec, Mapping):
            ctx.problems.add(path, f"must be a mapping of connection properties, not {spec!r}", spec)
            ctx.failed_data_sources.add(name)
            continue
        flat: dict[str, Any] = dict(extra)
        paths: dict[str, str] = {}
        for k, v in spec.items():
            if k == "props" and isinstance(v, Mapping):  # 5.0-beta: pool properties nested under props
                for pk, pv in v.items():
                    flat[str(pk)] = pv
                    paths[str(pk)] = join_path(join_path(path, "props"), str(pk))
            else:
                flat[str(k)] = v
                paths[str(k)] = join_path(path, str(k))
        endpoint, pool = _endpoint(name, flat, paths, path, ctx)
        if endpoint is not None:
            out[name] = DataSource(name, endpoint, (), pool)
        else:
            ctx.failed_data_sources.add(name)
    if not out and not ctx.problems:
        ctx.problems.add(sec.path or "dataSources", "at least one data source is required", None)
    return out


def _endpoint(
    name: str, flat: dict[str, Any], paths: dict[str, str], path: str, ctx: Context
) -> tuple[Endpoint | None, PoolSettings]:
    url_key = next((k for k in _URL_KEYS if k in flat), None)
    username_key = "username" if "username" in flat else "user"
    username = ctx.text(flat.get(username_key), paths.get(username_key, join_path(path, "username")))
    password = ctx.secret(
        flat.get("password"),
        flat.get("passwordEnv"),
        paths.get("password", join_path(path, "password")),
        paths.get("passwordEnv", join_path(path, "passwordEnv")),
    )
    pool: dict[str, int] = {}
    other: dict[str, Any] = {}
    for k, v in flat.items():
        if k in _POOL_KEYS:
            bounds = POOL_RANGES[_POOL_KEYS[k]]
            number = as_int(v)
            why = f"must be {bounds.describe()}, not {v!r}" if number is None else bounds.problem(number)
            if why is not None:
                ctx.problems.add(paths.get(k, join_path(path, k)), why, v)
            elif number is not None:
                pool[_POOL_KEYS[k]] = number
        elif k not in (*_URL_KEYS, "username", "user", "password", "passwordEnv"):
            other[k] = v
    settings = pool_settings(pool)
    if settings.min_idle > settings.max_size:  # a pool that sets only its max below our min idle
        settings = pool_settings({**pool, "min_idle": min(settings.min_idle, settings.max_size)})
    url_path = paths.get(url_key, join_path(path, "jdbcUrl")) if url_key else join_path(path, "jdbcUrl")
    if url_key is None:
        ctx.problems.add(url_path, f"data source {name!r} has no jdbcUrl (or url)", None)
        return None, settings
    endpoint = ctx.endpoint(name, flat[url_key], url_path, username=username, password=password, props=other)
    return endpoint, settings


# -- rules ---------------------------------------------------------------------------------------


def _rules(top: Section, ctx: Context) -> dict[str, tuple[Any, str]]:
    found: dict[str, tuple[Any, str]] = {}
    rpath = top.field_path("rules")
    for i, item in enumerate(top.list("rules")):
        path = join_path(rpath, i)
        if isinstance(item, Tagged):
            tag, value = item.name, item.value
        elif isinstance(item, Mapping) and len(item) == 1 and str(next(iter(item))).startswith("!"):
            tag, value = str(next(iter(item))).lstrip("!"), next(iter(item.values()))  # dict sources
        else:
            ctx.problems.add(
                path,
                f"a rule must be tagged with its type (- !SHARDING, - !BROADCAST...), got {item!r}",
                item,
            )
            continue
        if tag not in SUPPORTED_RULES:
            ctx.problems.add(
                path,
                f"unknown or unsupported rule type !{tag} (supported: "
                f"{', '.join('!' + r for r in SUPPORTED_RULES)})",
                f"!{tag}",
            )
            continue
        if tag in found:
            ctx.problems.add(path, f"rule !{tag} is given twice (first at {found[tag][1]})", f"!{tag}")
            continue
        found[tag] = (value, path)
    return found


def _readwrite(value: Any, path: str, data_sources: dict[str, DataSource], ctx: Context) -> None:
    """``!READWRITE_SPLITTING``: each group becomes a data source whose members are its endpoints."""
    sec = Section(value, path, ctx.problems)
    balancers = _load_balancers(sec, ctx)
    # ddm-core's own: read-your-writes, lag and breaker settings of every group (docs/readwrite.md)
    read_write = read_write_settings(sec.section("props"), ReadWriteSettings(), shardingsphere=True)
    members: set[str] = set()
    gpath = sec.field_path("dataSourceGroups", "dataSources")
    for group_name, spec in sec.mapping("dataSourceGroups", "dataSources").items():
        group = str(group_name)
        path_g = join_path(gpath, group)
        built = _readwrite_group(group, Section(spec, path_g, ctx.problems), balancers, data_sources, ctx)
        if built is None:
            continue
        built = (dataclasses.replace(built[0], read_write=read_write), built[1])
        data_sources[group], group_members = built
        ctx.paths.data_sources[group] = path_g
        members.update(group_members)
    for m in members:  # members are endpoints of their group now, not data sources of their own
        data_sources.pop(m, None)
    sec.finish()


@dataclass(frozen=True)
class _Balancer:
    """A configured load balancer: type, props and where it was written."""

    type: str
    props: Mapping[str, Any]
    path: str


_ROUND_ROBIN = _Balancer("ROUND_ROBIN", {}, "")


def _load_balancers(sec: Section, ctx: Context) -> dict[str, _Balancer]:
    balancers: dict[str, _Balancer] = {}
    lpath = sec.field_path("loadBalancers")
    for lb_name, spec in sec.mapping("loadBalancers").items():
        lsec = Section(spec, join_path(lpath, str(lb_name)), ctx.problems)
        lb_type = lsec.str("type", required=True)
        if lb_type is not None and lb_type.upper() not in LOAD_BALANCERS:
            ctx.problems.add(
                lsec.field_path("type"),
                f"unknown load balancer type {lb_type!r} (supported: {', '.join(LOAD_BALANCERS)})",
                lb_type,
            )
        balancers[str(lb_name)] = _Balancer((lb_type or "").upper(), lsec.mapping("props"), lsec.path)
        lsec.finish()
    return balancers


def _readwrite_group(
    group: str, g: Section, balancers: dict[str, _Balancer], data_sources: dict[str, DataSource], ctx: Context
) -> tuple[DataSource, list[str]] | None:
    """One read/write group → its data source and member names (``None``: problems recorded)."""
    names = _group_members(g, ctx)
    if names is None:
        return None
    why = name_problem(group, "read/write group name")
    if why is not None:
        ctx.problems.add(g.path, why, group)
        return None
    write, reads, lb_name, tx = names
    if group in data_sources:
        ctx.problems.add(g.path, f"read/write group {group!r} has the name of a data source", group)
        return None
    balancer = balancers.get(lb_name, _ROUND_ROBIN) if lb_name else _ROUND_ROBIN
    if lb_name and lb_name not in balancers:
        ctx.problems.add(
            join_path(g.path, "loadBalancerName"),
            f"unknown load balancer {lb_name!r} (configured: {shown_names(sorted(balancers))})",
            lb_name,
        )
    if not _members_known(g.path, write, reads, data_sources, ctx) or write is None:
        ctx.failed_data_sources.add(group)
        return None
    replicas = _weighted_replicas(reads, balancer, data_sources, ctx)
    primary = data_sources[write]
    source = DataSource(
        group, primary.primary, tuple(replicas), primary.pool, LOAD_BALANCERS.get(balancer.type, "round_robin"), tx
    )
    return source, [write, *reads]


def _group_members(g: Section, ctx: Context) -> tuple[str | None, list[str], str | None, str] | None:
    """``(writeDataSourceName, readDataSourceNames, loadBalancerName, transactional reads)`` of a
    group in any 5.x spelling; ``None`` for dynamic splitting (refused)."""
    inner = g
    if g.has("staticStrategy"):
        inner = g.section("staticStrategy")
    elif g.has("dynamicStrategy") or g.has("autoAwareDataSourceName"):
        ctx.problems.add(
            g.field_path("dynamicStrategy", "autoAwareDataSourceName"),
            "dynamic read/write splitting (database discovery) is not supported; "
            "list writeDataSourceName and readDataSourceNames",
            None,
        )
        g.mark("dynamicStrategy", "autoAwareDataSourceName", "loadBalancerName", "transactionalReadQueryStrategy")
        g.finish()
        return None
    elif g.has("type"):  # 5.1.0: type: Static + props
        kind = g.str("type")
        if (kind or "").lower() != "static":
            ctx.problems.add(
                g.field_path("type"), f"only Static read/write splitting is supported, not {kind!r}", kind
            )
        inner = g.section("props")
    write = inner.str("writeDataSourceName", "write-data-source-name", "write_data_source_name", required=True)
    read_names = ("readDataSourceNames", "read-data-source-names", "read_data_source_names")
    reads = [
        name
        for _, name in _split_items(
            inner.list(*read_names, split=True), inner.field_path(*read_names), ctx, "a data source name"
        )
    ]
    if inner is not g:
        inner.finish()
    lb_name = g.str("loadBalancerName")
    tx = (g.str("transactionalReadQueryStrategy") or "PRIMARY").lower()
    if tx not in ("primary", "fixed", "dynamic"):
        ctx.problems.add(
            g.field_path("transactionalReadQueryStrategy"), f"must be PRIMARY, FIXED or DYNAMIC, not {tx!r}", tx
        )
    g.finish()
    return write, reads, lb_name, tx


def _members_known(
    path: str, write: str | None, reads: list[str], data_sources: dict[str, DataSource], ctx: Context
) -> bool:
    """Every member is a configured data source (one that failed to build is not reported again)."""
    missing = [n for n in [write, *reads] if n is not None and n not in data_sources]
    unreported = [m for m in missing if m not in ctx.failed_data_sources]
    if unreported:
        ctx.problems.add(
            path, f"names data source(s) {shown_names(map(str, unreported))} that are not in dataSources", missing
        )
    return not missing


def _weighted_replicas(
    reads: list[str], balancer: _Balancer, data_sources: dict[str, DataSource], ctx: Context
) -> list[Endpoint]:
    """The read members as replicas; a WEIGHT balancer's props give each its weight."""
    bounds = RANGES["weight"]
    replicas = []
    for r in reads:
        raw = balancer.props.get(r, 1) if balancer.type == "WEIGHT" else 1
        weight = as_int(raw)
        why = f"must be {bounds.describe()}, not {raw!r}" if weight is None else bounds.problem(weight)
        if why is not None or weight is None:
            ctx.problems.add(join_path(join_path(balancer.path, "props"), str(r)), f"weight {why}", raw)
            weight = 1
        replicas.append(dataclasses.replace(data_sources[r].primary, weight=weight))
    return replicas


def _single(value: Any, path: str, ctx: Context) -> tuple[dict[str, SingleTable], list[str], str | None]:
    sec = Section(value, path, ctx.problems)
    singles: dict[str, SingleTable] = {}
    seen: set[str] = set()
    patterns: list[str] = []
    tpath = sec.field_path("tables")
    for i, entry in enumerate(sec.list("tables", split=True)):
        ipath = join_path(tpath, i)
        parts = entry.split(".") if isinstance(entry, str) else []
        if len(parts) not in (2, 3) or not all(parts):
            ctx.problems.add(
                ipath, f"must be data_source.table (or data_source.schema.table), not {entry!r}", entry
            )
            continue
        ds, table = parts[0], parts[-1]
        if "*" in ds or "*" in table:
            patterns.append(entry)
        elif table.lower() in seen:
            ctx.problems.add(ipath, f"single table {table!r} is listed twice", table)
        else:
            seen.add(table.lower())
            singles[table] = SingleTable(table, ds)
            ctx.paths.single[table] = ipath
    default = sec.str("defaultDataSource")
    ctx.paths.default_data_source = sec.field_path("defaultDataSource")
    sec.finish()
    return singles, patterns, default


# -- !SHARDING ------------------------------------------------------------------------------------


def _sharding(
    value: Any, path: str, data_sources: dict[str, DataSource], ctx: Context
) -> tuple[dict[str, ShardedTable], list[list[str]], list[str]]:
    """``!SHARDING``: its algorithms and key generators, then tables, auto tables, bindings, broadcasts."""
    sec = Section(value, path, ctx.problems)
    _named_algorithms(sec, ctx)
    defaults = _rule_defaults(sec, ctx, _auditors(sec, ctx))
    tables = _Tables()
    count = len(sec.mapping("tables")) + len(sec.mapping("autoTables"))
    if too_many(count, MAX_LOGIC_TABLES, "logic tables (tables and autoTables)", sec.path, ctx.problems):
        sec.mark("tables", "autoTables", "bindingTables", "broadcastTables")
        return {}, [], []
    tpath = sec.field_path("tables")
    for logic, spec in sec.mapping("tables").items():
        if ctx.names.spent:
            break  # the problem is reported; the remaining tables would only repeat it
        path_t = join_path(tpath, str(logic))
        _plain_table(str(logic), Section(spec, path_t, ctx.problems), defaults, data_sources, tables, ctx)
    atpath = sec.field_path("autoTables")
    for logic, spec in sec.mapping("autoTables").items():
        if ctx.names.spent:
            break
        path_t = join_path(atpath, str(logic))
        _auto_table(str(logic), Section(spec, path_t, ctx.problems), defaults, data_sources, tables, ctx)
    groups = _binding_tables(sec, ctx)
    broadcast: list[str] = []
    _add_broadcast(broadcast, sec, "broadcastTables", ctx)
    sec.finish()
    return tables.by_name, groups, broadcast


def _named_algorithms(sec: Section, ctx: Context) -> None:
    """``shardingAlgorithms`` and ``keyGenerators``: built and registered by name."""
    apath = sec.field_path("shardingAlgorithms")
    for alg_name, spec in sec.mapping("shardingAlgorithms").items():
        a = Section(spec, join_path(apath, str(alg_name)), ctx.problems)
        ctx.algorithm(str(alg_name), a.get("type"), a.get("props"), a.path)
        a.finish()
    kpath = sec.field_path("keyGenerators")
    for gen_name, spec in sec.mapping("keyGenerators").items():
        k = Section(spec, join_path(kpath, str(gen_name)), ctx.problems)
        ctx.key_generator(str(gen_name), k.get("type"), k.get("props"), k.path)
        k.finish()


def _auditors(sec: Section, ctx: Context) -> frozenset[str]:
    """``auditors`` (their names) and the rule's unsupported extras, checked."""
    apath = sec.field_path("auditors")
    names: set[str] = set()
    for aud_name, spec in sec.mapping("auditors").items():
        a = Section(spec, join_path(apath, str(aud_name)), ctx.problems)
        aud_type = a.str("type", required=True)
        if aud_type is not None and aud_type.upper() != "DML_SHARDING_CONDITIONS":
            ctx.problems.add(
                a.field_path("type"),
                f"unknown sharding auditor type {aud_type!r} (known: DML_SHARDING_CONDITIONS)",
                aud_type,
            )
        a.mark("props")
        a.finish()
        names.add(str(aud_name))
    if sec.has("shardingCache"):
        ctx.warn(sec.field_path("shardingCache"), "shardingCache is not supported by ddm-core and has no effect")
    return frozenset(names)


@dataclass(frozen=True)
class _Defaults:
    """What a ``!SHARDING`` rule gives each table that does not say otherwise."""

    rule: Section
    column: str | None
    database: Strategy
    table: Strategy
    key: KeyGeneration | None
    key_by_table: dict[str, KeyGeneration]
    auditors: frozenset[str]  # declared auditor names
    audit: tuple[str, ...]  # defaultAuditStrategy's auditors

    def key_of(self, own: KeyGeneration | None, name: str) -> KeyGeneration | None:
        return _chosen_key(own, self.key_by_table, self.key, name)


def _rule_defaults(sec: Section, ctx: Context, auditors: frozenset[str]) -> _Defaults:
    column = sec.str("defaultShardingColumn")
    audit_path = sec.field_path("defaultAuditStrategy")
    return _Defaults(
        rule=sec,
        column=column,
        database=_strategy(
            sec.get("defaultDatabaseStrategy"), sec.field_path("defaultDatabaseStrategy"), column, ctx
        ),
        table=_strategy(sec.get("defaultTableStrategy"), sec.field_path("defaultTableStrategy"), column, ctx),
        key=_key_strategy(sec.get("defaultKeyGenerateStrategy"), sec.field_path("defaultKeyGenerateStrategy"), ctx),
        key_by_table=_key_strategies(sec, ctx),
        auditors=auditors,
        audit=_audit_strategy(sec.get("defaultAuditStrategy"), audit_path, auditors, ctx),
    )


class _Tables:
    """The rule's logic tables by name; a name given twice (any case) is a problem."""

    def __init__(self) -> None:
        self.by_name: dict[str, ShardedTable] = {}
        self._lower: set[str] = set()

    def add(self, table: ShardedTable, path: str, ctx: Context) -> None:
        if table.name.lower() in self._lower:
            ctx.problems.add(
                path, f"logic table {table.name!r} is configured twice (tables and autoTables)", table.name
            )
            return
        self._lower.add(table.name.lower())
        self.by_name[table.name] = table
        ctx.paths.tables[table.name] = path


def _plain_table(
    name: str, t: Section, defaults: _Defaults, data_sources: dict[str, DataSource], tables: _Tables, ctx: Context
) -> None:
    """One ``tables`` entry: its data nodes and strategies (the rule's defaults where it gives none)."""
    if _bad_table_name(name, t, ctx):
        return
    if t.has("actualDataNodes"):
        nodes = expand_nodes(
            t.get("actualDataNodes"), ctx.problems, t.field_path("actualDataNodes"),
            budget=ctx.names, limit=MAX_TABLE_NODES,
        )  # fmt: skip
    elif ctx.names.charge(len(data_sources), t.path, ctx.problems):
        nodes = [DataNode(ds, name) for ds in data_sources]  # database sharding only: the same name everywhere
    else:
        nodes = []
    db = _own_strategy(t, "databaseStrategy", defaults.database, defaults.column, ctx)
    tb = _own_strategy(t, "tableStrategy", defaults.table, defaults.column, ctx)
    key = _own_key(t, ctx)
    audit = _audit(t, defaults, ctx)
    t.finish()
    tables.add(ShardedTable(name, tuple(nodes), db, tb, defaults.key_of(key, name), auditors=audit), t.path, ctx)
    ctx.paths.data_nodes[name] = t.field_path("actualDataNodes")
    ctx.paths.database_strategy[name] = _strategy_path(t, defaults.rule, "databaseStrategy")
    ctx.paths.table_strategy[name] = _strategy_path(t, defaults.rule, "tableStrategy")
    _key_path(key, defaults.key_by_table, defaults.key, name, t, defaults.rule, ctx)


def _bad_table_name(name: str, t: Section, ctx: Context) -> bool:
    why = name_problem(name, "logic table name")
    if why is None:
        return False
    ctx.problems.add(t.path, why, name)
    return True


def _own_strategy(t: Section, field_name: str, default: Strategy, column: str | None, ctx: Context) -> Strategy:
    if not t.has(field_name):
        return default
    return _strategy(t.get(field_name), t.field_path(field_name), column, ctx)


def _strategy_path(t: Section, rule: Section, field_name: str) -> str:
    """Where a table's strategy was written: its own field, or the rule's ``default...`` one."""
    if t.has(field_name):
        return t.field_path(field_name)
    return rule.field_path("default" + field_name[0].upper() + field_name[1:])


def _auto_table(
    name: str, t: Section, defaults: _Defaults, data_sources: dict[str, DataSource], tables: _Tables, ctx: Context
) -> None:
    """One ``autoTables`` entry: ``name_0..name_N-1`` spread round-robin over its data sources,
    N given by the sharding algorithm (checked against the size limits before a node is built)."""
    if _bad_table_name(name, t, ctx):
        return
    ds_path = t.field_path("actualDataSources")
    ds_names = (
        expand_names(t.get("actualDataSources"), ctx.problems, ds_path, budget=ctx.names, limit=MAX_SHARDS,
                     what="data sources")
        if t.has("actualDataSources")
        else list(data_sources)
    )  # fmt: skip
    spath = t.field_path("shardingStrategy")
    strategy = _strategy(t.get("shardingStrategy"), spath, defaults.column, ctx)
    key = _own_key(t, ctx)
    audit = _audit(t, defaults, ctx)
    t.finish()
    amount = _auto_table_size(name, t, strategy, ctx)
    if amount is None or not ds_names:
        return
    nodes = [DataNode(ds_names[i % len(ds_names)], f"{name}_{i}") for i in range(amount)]
    auto = ShardedTable(
        name, tuple(nodes), NO_SHARDING, strategy, defaults.key_of(key, name), auto=True, auditors=audit
    )
    tables.add(auto, t.path, ctx)
    ctx.paths.data_nodes[name] = ds_path
    ctx.paths.table_strategy[name] = spath
    ctx.paths.database_strategy[name] = spath
    _key_path(key, defaults.key_by_table, defaults.key, name, t, defaults.rule, ctx)


def _auto_table_size(name: str, t: Section, strategy: Strategy, ctx: Context) -> int | None:
    """How many tables the auto table's algorithm makes, if it can say and the limits allow."""
    spath = t.field_path("shardingStrategy")
    if not t.has("shardingStrategy"):
        ctx.problems.add(spath, f"auto table {name!r} needs a shardingStrategy", None)
        return None
    spec = strategy.algorithm
    if spec is None:
        return None  # its problem is listed already
    amount = getattr(strategy.sharder, "result_count", None)
    if not isinstance(amount, int):
        ctx.problems.add(
            spath,
            f"algorithm {spec.name!r} ({spec.type}) cannot size an auto table; "
            "use MOD, HASH_MOD, VOLUME_RANGE, BOUNDARY_RANGE or AUTO_INTERVAL",
            spec.type,
        )
        return None
    if amount > MAX_TABLE_NODES:
        ctx.problems.add(
            spath,
            f"algorithm {spec.name!r} ({spec.type}) makes {amount} tables for auto table {name!r}; "
            f"one logic table has at most {MAX_TABLE_NODES}",
            amount,
        )
        return None
    return amount if ctx.names.charge(amount, spath, ctx.problems) else None


def _binding_tables(sec: Section, ctx: Context) -> list[list[str]]:
    groups: list[list[str]] = []
    bpath = sec.field_path("bindingTables")
    for i, item in enumerate(sec.list("bindingTables")):
        ipath = join_path(bpath, i)
        if isinstance(item, str):
            text = item.split(":", 1)[1] if ":" in item else item  # 5.3+: `name:t_order,t_order_item`
            groups.append([p.strip() for p in text.split(",") if p.strip()])
        elif isinstance(item, list) and all(isinstance(x, str) for x in item):
            groups.append([x.strip() for x in item])
        else:
            ctx.problems.add(ipath, f"must be a comma-separated list of logic tables, not {item!r}", item)
            continue
        ctx.paths.binding_groups.append(ipath)
    return groups


def _chosen_key(
    own: KeyGeneration | None, by_table: dict[str, KeyGeneration], default: KeyGeneration | None, name: str
) -> KeyGeneration | None:
    return own or by_table.get(name.lower()) or default


def _key_path(
    own: KeyGeneration | None,
    by_table: dict[str, KeyGeneration],
    default: KeyGeneration | None,
    name: str,
    table: Section,
    rule: Section,
    ctx: Context,
) -> None:
    """Record where table ``name``'s key generation comes from: its own strategy or the rule's default.

    (A ``keyGenerateStrategies`` entry recorded its own path when it was read.)
    """
    if own is not None:
        ctx.paths.key_generation[name] = table.field_path("keyGenerateStrategy")
    elif name.lower() not in by_table and default is not None:
        ctx.paths.key_generation[name] = rule.field_path("defaultKeyGenerateStrategy")


def _own_key(table: Section, ctx: Context) -> KeyGeneration | None:
    """A table's own ``keyGenerateStrategy`` (``None`` when it gives none)."""
    if not table.has("keyGenerateStrategy"):
        return None
    return _key_strategy(table.get("keyGenerateStrategy"), table.field_path("keyGenerateStrategy"), ctx)


def _add_broadcast(broadcast: list[str], sec: Section, field_name: str, ctx: Context) -> None:
    """Append the broadcast tables listed in ``field_name``; a table already in ``broadcast`` is a problem."""
    path = sec.field_path(field_name)
    seen = {b.lower() for b in broadcast}
    for i, table in _split_items(sec.list(field_name, split=True), path, ctx):
        if table.lower() in seen:
            ctx.problems.add(join_path(path, i), f"broadcast table {table!r} is listed twice", table)
        else:
            seen.add(table.lower())
            broadcast.append(table)
            ctx.paths.broadcast[table] = join_path(path, i)


def _split_items(items: list[Any], path: str, ctx: Context, what: str = "a table name") -> list[tuple[int, str]]:
    """Names of a list whose items may themselves be comma-separated (``- t_a, t_b``)."""
    out: list[tuple[int, str]] = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            ctx.problems.add(join_path(path, i), f"must be {what}, not {item!r}", item)
            continue
        out.extend((i, part.strip()) for part in item.split(",") if part.strip())
    return out


def _audit(t: Section, defaults: _Defaults, ctx: Context) -> tuple[str, ...]:
    """The table's own ``auditStrategy``, else the rule's ``defaultAuditStrategy`` (ShardingSphere's order)."""
    if not t.has("auditStrategy"):
        return defaults.audit
    return _audit_strategy(t.get("auditStrategy"), t.field_path("auditStrategy"), defaults.auditors, ctx)


def _audit_strategy(value: Any, path: str, auditors: frozenset[str], ctx: Context) -> tuple[str, ...]:
    """``{auditorNames: [...], allowHintDisable: ...}`` → the auditors it names, each declared under ``auditors``."""
    if value is None:
        return ()
    sec = Section(value, path, ctx.problems)
    npath = sec.field_path("auditorNames")
    names: list[str] = []
    for i, name in _split_items(sec.list("auditorNames", split=True), npath, ctx, "an auditor name"):
        if name in auditors:
            names.append(name)
        else:
            declared = ", ".join(sorted(auditors)) or "none"
            ctx.problems.add(
                join_path(npath, i), f"auditor {name!r} is not declared under auditors (declared: {declared})", name
            )
    sec.bool("allowHintDisable")  # checked; no hint switches an auditor off in ddm-core
    sec.finish()
    return tuple(dict.fromkeys(names))


def _strategy(value: Any, path: str, default_column: str | None, ctx: Context) -> Strategy:
    """``{standard: {...}}`` / ``{complex: ...}`` / ``{hint: ...}`` / ``{none: }`` → Strategy."""
    if value is None:
        return NO_SHARDING
    if not isinstance(value, Mapping) or len(value) != 1:
        ctx.problems.add(
            path, f"must hold exactly one of standard, complex, hint or none, not {value!r}", value
        )
        return NO_SHARDING
    kind_name, body = next(iter(value.items()))
    kpath = join_path(path, str(kind_name))
    try:
        kind = StrategyKind(str(kind_name))
    except ValueError:
        ctx.problems.add(
            kpath, f"unknown strategy kind {kind_name!r} (standard, complex, hint or none)", kind_name
        )
        return NO_SHARDING
    if kind is StrategyKind.NONE:
        return NO_SHARDING
    s = Section(body, kpath, ctx.problems)
    if kind is StrategyKind.STANDARD:
        column = s.str("shardingColumn", default=default_column)
        if column is None:
            ctx.problems.add(
                s.field_path("shardingColumn"), "is required (no defaultShardingColumn either)", None
            )
        columns: tuple[str, ...] = (column,) if column else ()
    elif kind is StrategyKind.COMPLEX:
        columns = tuple(str(c) for c in s.list("shardingColumns", split=True))
        if not columns:
            ctx.problems.add(s.field_path("shardingColumns"), "must name at least one column", None)
    else:
        columns = ()
    alg_name = s.str("shardingAlgorithmName", required=True)
    s.finish()
    spec = None
    if alg_name is not None:
        spec = ctx.algorithms.get(alg_name)
        if spec is None:
            if alg_name not in ctx.paths.algorithms:  # a broken definition already reported
                ctx.problems.add(
                    s.field_path("shardingAlgorithmName"),
                    f"unknown sharding algorithm {alg_name!r} (defined in shardingAlgorithms: "
                    f"{shown_names(sorted(ctx.algorithms))})",
                    alg_name,
                )
            return Strategy(kind, columns, None)
    return Strategy(kind, columns, spec)


def _key_strategy(value: Any, path: str, ctx: Context) -> KeyGeneration | None:
    if value is None:
        return None
    s = Section(value, path, ctx.problems)
    column = s.str("column", required=True)
    gen = s.str("keyGeneratorName", required=True)
    s.finish()
    if gen is not None and gen not in ctx.key_generators:
        if gen not in ctx.paths.key_generators:
            ctx.problems.add(
                s.field_path("keyGeneratorName"),
                f"unknown key generator {gen!r} (defined in keyGenerators: {shown_names(sorted(ctx.key_generators))})",
                gen,
            )
        return None
    if column is None or gen is None:
        return None
    return KeyGeneration(column, ctx.key_generators[gen])


def _key_strategies(sec: Section, ctx: Context) -> dict[str, KeyGeneration]:
    """5.5 ``keyGenerateStrategies``: name → {keyGenerateType: column, logicTable, keyGenerateColumn, keyGeneratorName}."""
    out: dict[str, KeyGeneration] = {}
    kpath = sec.field_path("keyGenerateStrategies")
    for sname, spec in sec.mapping("keyGenerateStrategies").items():
        s = Section(spec, join_path(kpath, str(sname)), ctx.problems)
        kind = (s.str("keyGenerateType", default="column") or "column").lower()
        if kind != "column":
            ctx.problems.add(
                s.field_path("keyGenerateType"),
                f"only keyGenerateType column is supported, not {kind!r}",
                kind,
            )
            s.mark("keyGeneratorName", "logicTable", "keyGenerateColumn", "keyGenerateSequence")
            s.finish()
            continue
        table = s.str("logicTable", required=True)
        column = s.str("keyGenerateColumn", required=True)
        gen = s.str("keyGeneratorName", required=True)
        s.finish()
        if gen is not None and gen not in ctx.key_generators:
            ctx.problems.add(s.field_path("keyGeneratorName"), f"unknown key generator {gen!r}", gen)
            continue
        if table and column and gen:
            if table.lower() in out:
                ctx.problems.add(s.path, f"table {table!r} already has a key generate strategy", table)
                continue
            out[table.lower()] = KeyGeneration(column, ctx.key_generators[gen])
            ctx.paths.key_generation[table] = s.path  # the table loop keeps this path
    return out
