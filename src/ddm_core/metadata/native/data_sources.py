"""The ``dataSources`` entries of ddm-core's own format: endpoints, replicas, pools, read/write settings.

An entry is a URL or a mapping (``url``, credentials, ``replicas``, ``pool``,
``loadBalancer``, ``transactionalReads``, ``readWrite``); the top-level ``pool``
and ``readWrite`` sections are the defaults each entry refines
(docs/configuration.md#datasources).
"""

from __future__ import annotations

from typing import Any

from ddm_core.metadata.build import POOL_RANGES, Context, pool_settings, read_write_settings
from ddm_core.metadata.fields import Section
from ddm_core.metadata.limits import MAX_DATA_SOURCES, RANGES, too_many
from ddm_core.metadata.model import DataSource, Endpoint, PoolSettings, ReadWriteSettings
from ddm_core.metadata.nodes import name_problem
from ddm_core.metadata.problems import join_path

__all__ = ["read_pool", "read_data_sources", "data_source_entry"]


_POOL_FIELDS = (
    ("max_size", ("maxSize", "maximumPoolSize")),
    ("min_idle", ("minIdle", "minimumIdle")),
    ("acquire_timeout_ms", ("acquireTimeoutMs", "connectionTimeoutMs", "connectionTimeout")),
    ("idle_timeout_ms", ("idleTimeoutMs", "idleTimeout")),
    ("max_lifetime_ms", ("maxLifetimeMs", "maxLifetime")),
    ("alive_bypass_window_ms", ("aliveBypassWindowMs",)),
)


def read_pool(sec: Section, base: PoolSettings) -> PoolSettings:
    values = {}
    for field_name, aliases in _POOL_FIELDS:
        value = sec.int(*aliases, bounds=POOL_RANGES[field_name])
        if value is not None:
            values[field_name] = value
    sec.finish()
    pool = pool_settings(values, base)
    if pool.min_idle > pool.max_size:
        sec.problems.add(sec.path, f"minIdle {pool.min_idle} exceeds maxSize {pool.max_size}", pool.min_idle)
    return pool


def read_data_sources(
    sec: Section, default_pool: PoolSettings, ctx: Context, default_rw: ReadWriteSettings = ReadWriteSettings()
) -> dict[str, DataSource]:
    out: dict[str, DataSource] = {}
    if not sec.data:
        ctx.problems.add(sec.path, "at least one data source is required", None)
    if too_many(len(sec.data), MAX_DATA_SOURCES, "data sources", sec.path, ctx.problems):
        sec.mark(*map(str, sec.data))
        return out
    for ds_name, spec in sec.data.items():
        name = str(ds_name)
        path = join_path(sec.path, name)
        ctx.paths.data_sources[name] = path
        sec.mark(name)
        why = name_problem(name, "data source name")
        if why is not None:
            ctx.problems.add(path, why, name)
            ctx.failed_data_sources.add(name)
            continue
        built = data_source_entry(name, spec, path, default_pool, ctx, default_rw)
        if built is not None:
            out[name] = built
        else:
            ctx.failed_data_sources.add(name)
    return out


def data_source_entry(
    name: str, spec: Any, path: str, default_pool: PoolSettings, ctx: Context,
    default_rw: ReadWriteSettings = ReadWriteSettings(),
) -> DataSource | None:
    """One ``dataSources`` entry (a URL or a mapping) read at ``path``; ``None`` when it has problems.

    Also what reads a cut-over's ``legacy`` data source (metadata/cutover.py).
    """
    if isinstance(spec, str):
        spec = {"url": spec}
    ds = Section(spec, path, ctx.problems, loose=True)
    primary = _endpoint(ds, ds.str("primaryName", default=name), ctx, weight_default=1)
    replicas: list[Endpoint] = []
    rpath = ds.field_path("replicas")
    for i, rspec in enumerate(ds.list("replicas")):
        if isinstance(rspec, str):
            rspec = {"url": rspec}
        rsec = Section(rspec, join_path(rpath, i), ctx.problems, loose=True)
        rname = rsec.str("name") or f"{name}.replica[{i}]"
        rep = _endpoint(rsec, rname, ctx, weight_default=1, inherit=primary)
        rsec.finish()
        if rep is not None:
            replicas.append(rep)
    pool = read_pool(ds.section("pool"), default_pool)
    balancer = (ds.str("loadBalancer") or "weight").lower().replace("-", "_")
    if balancer not in ("weight", "round_robin", "random"):
        ctx.problems.add(
            ds.field_path("loadBalancer"),
            f"must be weight, round_robin or random, not {balancer!r}",
            balancer,
        )
    tx_reads = (ds.str("transactionalReads") or "primary").lower()
    if tx_reads not in ("primary", "fixed", "dynamic"):
        ctx.problems.add(
            ds.field_path("transactionalReads"),
            f"must be primary, fixed or dynamic, not {tx_reads!r}",
            tx_reads,
        )
    read_write = read_write_settings(ds.section("readWrite"), default_rw)
    ds.finish()
    if primary is None:
        return None
    return DataSource(name, primary, tuple(replicas), pool, balancer, tx_reads, read_write)


def _endpoint(
    sec: Section, name: str, ctx: Context, *, weight_default: int, inherit: Endpoint | None = None
) -> Endpoint | None:
    username = ctx.text(sec.get("username", "user"), sec.field_path("username", "user"))
    password = ctx.secret(
        sec.get("password"), sec.get("passwordEnv"), sec.field_path("password"), sec.field_path("passwordEnv")
    )
    if inherit is not None:  # a replica without its own credentials uses the primary's (`null`: none)
        username = username if sec.has("username", "user") else inherit.username
        password = password if sec.has("password", "passwordEnv") else inherit.password
    weight = sec.int("weight", default=weight_default, bounds=RANGES["weight"])
    props = sec.mapping("props")
    return ctx.endpoint(
        name,
        sec.get("url", "jdbcUrl"),
        sec.field_path("url", "jdbcUrl"),
        username=username,
        password=password,
        weight=weight,
        props=props,
    )
