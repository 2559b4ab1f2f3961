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
  ``auditors``), ``!BROADCAST``, ``!SINGLE``, ``!READWRITE_SPLITTING`` (5.0
  ``dataSources``, 5.1 ``staticStrategy`` / ``type: Static``, 5.4
  ``dataSourceGroups``; load balancers ROUND_ROBIN, RANDOM, WEIGHT).
* ``databaseName`` / ``schemaName``, ``props``, ``mode`` (kept in
  ``config.props``).

Refused with a problem naming them: any other rule tag (``!ENCRYPT``,
``!SHADOW``, ``!MASK``...), unknown algorithm / key generator / load balancer
types, dynamic read/write splitting, sequence key generation. Accepted with a
warning (loaded, not enforced): ``auditStrategy`` / ``auditors``,
``shardingCache``.
"""

from __future__ import annotations

from typing import Any, Mapping

from ddm_core.metadata.build import LOAD_BALANCERS, Context, pool_settings
from ddm_core.metadata.fields import Section
from ddm_core.metadata.model import (
    NO_SHARDING,
    BindingGroup,
    DataNode,
    DataSource,
    Endpoint,
    KeyGeneration,
    MetadataCenter,
    PoolSettings,
    ShardedTable,
    SingleTable,
    Strategy,
    StrategyKind,
    freeze,
)
from ddm_core.metadata.nodes import expand_names, expand_nodes
from ddm_core.metadata.problems import join_path
from ddm_core.metadata.yaml_tags import Tagged

__all__ = ["read_shardingsphere", "SUPPORTED_RULES"]

SUPPORTED_RULES = ("SHARDING", "BROADCAST", "SINGLE", "READWRITE_SPLITTING")
_URL_KEYS = ("jdbcUrl", "url", "standardJdbcUrl", "jdbc-url", "jdbc_url")
_POOL_KEYS = {
    "maximumPoolSize": "max_size", "maxActive": "max_size", "maxPoolSize": "max_size",
    "minimumIdle": "min_idle", "minIdle": "min_idle", "minPoolSize": "min_idle",
    "connectionTimeout": "acquire_timeout_ms", "connectionTimeoutMilliseconds": "acquire_timeout_ms",
    "maxWait": "acquire_timeout_ms",
    "idleTimeout": "idle_timeout_ms", "idleTimeoutMilliseconds": "idle_timeout_ms",
    "maxLifetime": "max_lifetime_ms", "maxLifetimeMilliseconds": "max_lifetime_ms",
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
    if out["default_data_source"] is None and len(data_sources) == 1:
        out["default_data_source"] = next(iter(data_sources))
    top.finish()
    return out


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
    for key, spec in sec.data.items():
        name = str(key)
        sec.mark(name)
        path = join_path(sec.path, name)
        ctx.paths.data_sources[name] = path
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
            if isinstance(v, str) and v.strip().isdigit():
                v = int(v)
            if type(v) is not int or v < 0:
                ctx.problems.add(
                    paths.get(k, join_path(path, k)), f"must be a non-negative integer, not {v!r}", v
                )
            else:
                pool[_POOL_KEYS[k]] = v
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
    sec = Section(value, path, ctx.problems)
    balancers: dict[str, tuple[str, Mapping[str, Any]]] = {}
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
        balancers[str(lb_name)] = ((lb_type or "").upper(), lsec.mapping("props"))
        lsec.finish()
    members: set[str] = set()
    gpath = sec.field_path("dataSourceGroups", "dataSources")
    for group_name, spec in sec.mapping("dataSourceGroups", "dataSources").items():
        group = str(group_name)
        path_g = join_path(gpath, group)
        g = Section(spec, path_g, ctx.problems)
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
            g.mark(
                "dynamicStrategy",
                "autoAwareDataSourceName",
                "loadBalancerName",
                "transactionalReadQueryStrategy",
            )
            g.finish()
            continue
        elif g.has("type"):  # 5.1.0: type: Static + props
            kind = g.str("type")
            if (kind or "").lower() != "static":
                ctx.problems.add(
                    g.field_path("type"), f"only Static read/write splitting is supported, not {kind!r}", kind
                )
            inner = g.section("props")
        write = inner.str(
            "writeDataSourceName", "write-data-source-name", "write_data_source_name", required=True
        )
        reads = inner.list(
            "readDataSourceNames", "read-data-source-names", "read_data_source_names", split=True
        )
        if inner is not g:
            inner.finish()
        lb_name = g.str("loadBalancerName")
        tx = (g.str("transactionalReadQueryStrategy") or "PRIMARY").lower()
        if tx not in ("primary", "fixed", "dynamic"):
            ctx.problems.add(
                g.field_path("transactionalReadQueryStrategy"),
                f"must be PRIMARY, FIXED or DYNAMIC, not {tx!r}",
                tx,
            )
        g.finish()
        if group in data_sources:
            ctx.problems.add(path_g, f"read/write group {group!r} has the name of a data source", group)
            continue
        lb_type, lb_props = balancers.get(lb_name, ("ROUND_ROBIN", {})) if lb_name else ("ROUND_ROBIN", {})
        if lb_name and lb_name not in balancers:
            ctx.problems.add(
                join_path(path_g, "loadBalancerName"),
                f"unknown load balancer {lb_name!r} (configured: {sorted(balancers)})",
                lb_name,
            )
        missing = [n for n in [write, *reads] if n is not None and n not in data_sources]
        failed = [n for n in missing if n in ctx.failed_data_sources]
        if missing != failed:
            ctx.problems.add(
                path_g,
                f"names data source(s) {[m for m in missing if m not in failed]} that are not in dataSources",
                missing,
            )
        if missing or write is None:
            ctx.failed_data_sources.add(group)
            continue
        replicas = []
        for r in reads:
            weight = lb_props.get(r, 1) if lb_type == "WEIGHT" else 1
            try:
                weight = int(weight)
            except (TypeError, ValueError):
                ctx.problems.add(
                    join_path(lpath, f"{lb_name}.props.{r}"),
                    f"weight must be an integer, not {weight!r}",
                    weight,
                )
                weight = 1
            ep = data_sources[r].primary
            replicas.append(
                Endpoint(
                    ep.name,
                    ep.dialect,
                    ep.host,
                    ep.port,
                    ep.database,
                    ep.username,
                    ep.password,
                    ep.options,
                    weight,
                    ep.props,
                )
            )
        primary = data_sources[write]
        data_sources[group] = DataSource(
            group,
            primary.primary,
            tuple(replicas),
            primary.pool,
            LOAD_BALANCERS.get(lb_type, "round_robin"),
            tx,
        )
        ctx.paths.data_sources[group] = path_g
        members.update([write, *reads])
    for m in members:  # members are endpoints of their group now, not data sources of their own
        data_sources.pop(m, None)
    sec.finish()


def _single(value: Any, path: str, ctx: Context) -> tuple[dict[str, SingleTable], list[str], str | None]:
    sec = Section(value, path, ctx.problems)
    singles: dict[str, SingleTable] = {}
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
        elif table.lower() in (t.lower() for t in singles):
            ctx.problems.add(ipath, f"single table {table!r} is listed twice", table)
        else:
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
    sec = Section(value, path, ctx.problems)
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
    apath2 = sec.field_path("auditors")
    for aud_name, spec in sec.mapping("auditors").items():
        a = Section(spec, join_path(apath2, str(aud_name)), ctx.problems)
        aud_type = a.str("type", required=True)
        if aud_type is not None and aud_type.upper() != "DML_SHARDING_CONDITIONS":
            ctx.problems.add(
                a.field_path("type"),
                f"unknown sharding auditor type {aud_type!r} (known: DML_SHARDING_CONDITIONS)",
                aud_type,
            )
        a.mark("props")
        a.finish()
        ctx.warn(
            a.path,
            "sharding auditors are loaded but not enforced; use runtime.allowFullRoute to refuse unsharded statements",
        )
    for unsupported in ("shardingCache", "defaultAuditStrategy"):
        if sec.has(unsupported):
            ctx.warn(
                sec.field_path(unsupported), f"{unsupported} is not supported by ddm-core and has no effect"
            )

    default_column = sec.str("defaultShardingColumn")
    default_db = _strategy(
        sec.get("defaultDatabaseStrategy"), sec.field_path("defaultDatabaseStrategy"), default_column, ctx
    )
    default_tb = _strategy(
        sec.get("defaultTableStrategy"), sec.field_path("defaultTableStrategy"), default_column, ctx
    )
    default_key = _key_strategy(
        sec.get("defaultKeyGenerateStrategy"), sec.field_path("defaultKeyGenerateStrategy"), ctx
    )
    key_by_table = _key_strategies(sec, ctx)

    tables: dict[str, ShardedTable] = {}
    tpath = sec.field_path("tables")
    for logic, spec in sec.mapping("tables").items():
        name = str(logic)
        path_t = join_path(tpath, name)
        t = Section(spec, path_t, ctx.problems)
        if t.has("actualDataNodes"):
            nodes = expand_nodes(t.get("actualDataNodes"), ctx.problems, t.field_path("actualDataNodes"))
        else:  # database sharding only: the logic table's name in every data source
            nodes = [DataNode(ds, name) for ds in data_sources]
        db = (
            _strategy(t.get("databaseStrategy"), t.field_path("databaseStrategy"), default_column, ctx)
            if t.has("databaseStrategy")
            else default_db
        )
        tb = (
            _strategy(t.get("tableStrategy"), t.field_path("tableStrategy"), default_column, ctx)
            if t.has("tableStrategy")
            else default_tb
        )
        key = _own_key(t, ctx)
        _audit(t, ctx)
        t.finish()
        _add_table(
            tables,
            ShardedTable(name, tuple(nodes), db, tb, _chosen_key(key, key_by_table, default_key, name)),
            path_t,
            ctx,
        )
        ctx.paths.data_nodes[name] = t.field_path("actualDataNodes")
        ctx.paths.database_strategy[name] = (
            t.field_path("databaseStrategy")
            if t.has("databaseStrategy")
            else sec.field_path("defaultDatabaseStrategy")
        )
        ctx.paths.table_strategy[name] = (
            t.field_path("tableStrategy")
            if t.has("tableStrategy")
            else sec.field_path("defaultTableStrategy")
        )
        _key_path(key, key_by_table, default_key, name, t, sec, ctx)

    atpath = sec.field_path("autoTables")
    for logic, spec in sec.mapping("autoTables").items():
        name = str(logic)
        path_t = join_path(atpath, name)
        t = Section(spec, path_t, ctx.problems)
        ds_names = (
            expand_names(t.get("actualDataSources"), ctx.problems, t.field_path("actualDataSources"))
            if t.has("actualDataSources")
            else list(data_sources)
        )
        strategy = _strategy(t.get("shardingStrategy"), t.field_path("shardingStrategy"), default_column, ctx)
        key = _own_key(t, ctx)
        _audit(t, ctx)
        t.finish()
        amount = getattr(strategy.sharder, "result_count", None) if strategy.algorithm else None
        if not t.has("shardingStrategy"):
            ctx.problems.add(
                t.field_path("shardingStrategy"), f"auto table {name!r} needs a shardingStrategy", None
            )
            continue
        if strategy.algorithm is not None and not isinstance(amount, int):
            ctx.problems.add(
                t.field_path("shardingStrategy"),
                f"algorithm {strategy.algorithm.name!r} ({strategy.algorithm.type}) cannot size an auto table; "
                "use MOD, HASH_MOD, VOLUME_RANGE, BOUNDARY_RANGE or AUTO_INTERVAL",
                strategy.algorithm.type,
            )
            continue
        if not ds_names or strategy.algorithm is None or amount is None:
            continue
        nodes = [DataNode(ds_names[i % len(ds_names)], f"{name}_{i}") for i in range(amount)]
        _add_table(
            tables,
            ShardedTable(
                name,
                tuple(nodes),
                NO_SHARDING,
                strategy,
                _chosen_key(key, key_by_table, default_key, name),
                auto=True,
            ),
            path_t,
            ctx,
        )
        ctx.paths.data_nodes[name] = t.field_path("actualDataSources")
        ctx.paths.table_strategy[name] = t.field_path("shardingStrategy")
        ctx.paths.database_strategy[name] = t.field_path("shardingStrategy")
        _key_path(key, key_by_table, default_key, name, t, sec, ctx)

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
    broadcast: list[str] = []
    _add_broadcast(broadcast, sec, "broadcastTables", ctx)
    sec.finish()
    return tables, groups, broadcast


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
    for i, table in _split_items(sec.list(field_name, split=True), path, ctx):
        if table.lower() in (b.lower() for b in broadcast):
            ctx.problems.add(join_path(path, i), f"broadcast table {table!r} is listed twice", table)
        else:
            broadcast.append(table)
            ctx.paths.broadcast[table] = join_path(path, i)


def _split_items(items: list[Any], path: str, ctx: Context) -> list[tuple[int, str]]:
    """Table names of a list whose items may themselves be comma-separated (seed 004)."""
    out: list[tuple[int, str]] = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            ctx.problems.add(join_path(path, i), f"must be a table name, not {item!r}", item)
            continue
        out.extend((i, part.strip()) for part in item.split(",") if part.strip())
    return out


def _add_table(tables: dict[str, ShardedTable], table: ShardedTable, path: str, ctx: Context) -> None:
    if table.name.lower() in (t.lower() for t in tables):
        ctx.problems.add(
            path, f"logic table {table.name!r} is configured twice (tables and autoTables)", table.name
        )
        return
    tables[table.name] = table
    ctx.paths.tables[table.name] = path


def _audit(t: Section, ctx: Context) -> None:
    if t.has("auditStrategy"):
        ctx.warn(t.field_path("auditStrategy"), "auditStrategy is loaded but not enforced")


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
                    f"{', '.join(sorted(ctx.algorithms)) or 'none'})",
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
                f"unknown key generator {gen!r} (defined in keyGenerators: {', '.join(sorted(ctx.key_generators)) or 'none'})",
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
