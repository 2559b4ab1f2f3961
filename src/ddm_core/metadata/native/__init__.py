"""ddm-core's own YAML format → the keyword arguments of :class:`~ddm_core.metadata.model.ShardingConfig`
(docs/configuration.md#own-format).

:func:`read_native` reads the document's top level and hands each part to the
module that reads it:

* :mod:`~ddm_core.metadata.native.data_sources` — ``dataSources`` (endpoints, replicas,
  pools; the top-level ``pool`` and ``readWrite`` defaults);
* :mod:`~ddm_core.metadata.native.tables` — ``algorithms``, ``keyGenerators``, ``tables``
  (the short form and the spelled-out one), ``bindingTables``, ``broadcastTables``, ``singleTables``;
* :mod:`~ddm_core.metadata.native.settings` — ``runtime``, ``xa``, ``metadata``;
* :mod:`~ddm_core.metadata.native.proxy` — ``proxy``;
* the ``migration:`` and ``cutover:`` blocks — :mod:`ddm_core.metadata.migration`,
  :mod:`ddm_core.metadata.cutover`.

Field names match loosely (``tablePerShard`` = ``table_per_shard`` = ``table-per-shard``);
data source and table names are the user's and match exactly.
"""

from __future__ import annotations

from typing import Any

from ddm_core.metadata.build import Context, ParseConfig, read_write_settings
from ddm_core.metadata.cutover import read_cutover
from ddm_core.metadata.fields import Section
from ddm_core.metadata.limits import PROXY_LIMIT_FIELDS
from ddm_core.metadata.migration import read_migration
from ddm_core.metadata.model import BindingGroup, PoolSettings, ReadWriteSettings, freeze
from ddm_core.metadata.native.data_sources import data_source_entry, read_data_sources, read_pool
from ddm_core.metadata.native.proxy import read_proxy
from ddm_core.metadata.native.settings import read_metadata_center, read_runtime, read_xa
from ddm_core.metadata.native.tables import (
    DEFAULT_SLOT_COUNT,
    read_algorithms,
    read_binding_groups,
    read_broadcast,
    read_singles,
    read_tables,
)

__all__ = ["read_native", "DEFAULT_SLOT_COUNT", "PROXY_LIMIT_FIELDS", "data_source_entry"]


def read_native(doc: Any, ctx: Context, parse: ParseConfig) -> dict[str, Any]:
    """Read a native document; returns the keyword arguments of :class:`ShardingConfig`.

    Problems go to ``ctx.problems``; the result may be partial when there are some. ``parse``
    (the loader's ``parse_config``) loads a ``migration:`` block's target.
    """
    top = Section(doc, "", ctx.problems, loose=True)
    top.mark("format", "version")
    name = top.str("name")
    # the application settings may be wrapped in `ddm:` or sit at the top (not both)
    ddm = top.section("ddm")
    app_name = _one_of(ddm, top, "appName", ctx).str("appName")
    metadata = read_metadata_center(_one_of(ddm, top, "metadata", ctx).section("metadata"))
    pool_sec = ddm.section("datasource").section("pool") if ddm.has("datasource") else top.section("pool")
    if ddm.has("datasource") and top.has("pool"):
        ctx.problems.add(top.field_path("pool"), "pool is also given under ddm.datasource.pool", None)
    default_pool = read_pool(pool_sec, PoolSettings())
    route_owner = top
    if ddm.has("route"):
        route_owner = ddm
        if top.has("runtime", "route"):
            ctx.problems.add(
                top.field_path("runtime", "route"), "runtime settings are also given under ddm.route", None
            )
    runtime = read_runtime(route_owner.section("runtime", "route"), app_name)
    if ddm.has("datasource"):
        ds_wrapper = ddm.section("datasource")
        ds_wrapper.mark("pool")
        ds_wrapper.finish()
    ddm.finish()
    # data source names are the user's keys: matched exactly, unlike field names
    ds_section = Section(top.get("dataSources"), top.field_path("dataSources"), ctx.problems)
    default_rw = read_write_settings(top.section("readWrite"), ReadWriteSettings())  # docs/readwrite.md
    data_sources = read_data_sources(ds_section, default_pool, ctx, default_rw)

    read_algorithms(top, ctx)
    groups = read_binding_groups(top, ctx)
    tables = read_tables(top, ctx, groups)
    broadcast = read_broadcast(top, ctx)
    singles, patterns = read_singles(top, ctx)

    default_ds = top.str("defaultDataSource")
    ctx.paths.default_data_source = top.field_path("defaultDataSource")
    props = freeze(dict(top.mapping("props")))
    xa = read_xa(top.section("xa"))
    proxy = read_proxy(top.section("proxy"), ctx)
    # the block of a version published during a migration (metadata/migration.py); attached by parse_config
    migration = read_migration(top.section("migration"), ctx, parse) if top.has("migration") else None
    # likewise a gray cut-over's block (metadata/cutover.py); its legacy entry reads as a dataSources entry
    cutover = None
    if top.has("cutover"):
        cutover = read_cutover(
            top.section("cutover"), ctx,
            lambda ds_name, spec, path: data_source_entry(ds_name, spec, path, default_pool, ctx, default_rw),
        )  # fmt: skip
    top.finish()
    return dict(
        data_sources=data_sources,
        tables=tables,
        binding_groups=tuple(BindingGroup(tuple(g)) for g in groups.groups),
        broadcast_tables=tuple(broadcast),
        single_tables=singles,
        single_patterns=tuple(patterns),
        default_data_source=default_ds,
        runtime=runtime,
        xa=xa,
        proxy=proxy,
        metadata=metadata,
        name=name,
        props=props,
        migration=migration,
        cutover=cutover,
    )


def _one_of(ddm: Section, top: Section, field_name: str, ctx: Context) -> Section:
    """The section holding ``field_name``: ``ddm:`` or the top level (both is a problem)."""
    if ddm.has(field_name):
        if top.has(field_name):
            ctx.problems.add(top.field_path(field_name), f"{field_name} is also given under ddm", None)
        return ddm
    return top
