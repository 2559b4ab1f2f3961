"""Routing state shared by every compiled statement of one configuration version."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ddm_core.algorithms import ShardingAlgorithm
from ddm_core.errors import FullRouteError, RoutingError
from ddm_core.metadata.model import ShardedTable, ShardingConfig
from ddm_core.route.hints import Hint
from ddm_core.route.shards.targets import TableRouter
from ddm_core.route.table_schema import TableSchema, declared_schema

__all__ = ["RouteContext", "RouteStats", "physical_name"]

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*\Z")


def physical_name(name: str) -> str:
    """A table name as it goes into SQL text (backticked unless a plain identifier)."""
    return name if _PLAIN.match(name) else "`" + name.replace("`", "``") + "`"


@dataclass(slots=True)
class RouteStats:
    """Counters a router keeps across configuration versions (each version's context shares them)."""

    #: Routes of statements with a fast path that the general path answered instead (each says so in its plan).
    fast_path_misses: int = 0


@dataclass(slots=True)
class RouteContext:
    """One configuration version plus what routing derives from it (built lazily)."""

    config: ShardingConfig
    stats: RouteStats = field(default_factory=RouteStats)
    #: Loaded table metadata by logic table (lower case); see :mod:`ddm_core.route.table_schema`.
    schemas: Mapping[str, TableSchema] = field(default_factory=dict)
    _routers: dict[str, TableRouter] = field(default_factory=dict)
    _comments: dict[str, str] = field(default_factory=dict)

    def comment(self, data_source: str) -> str:
        """``/* app=...,shard=ds_2 */ `` to prefix unit SQL with, or ``""`` when off (docs/operations.md#sql-comments)."""
        text = self._comments.get(data_source)
        if text is None:
            runtime = self.config.runtime
            if not runtime.sql_comment:
                text = ""
            else:
                app = runtime.app_name or self.config.name or "ddm"
                # Nothing from the config may end the comment early or look like a placeholder.
                safe = re.sub(r"[^A-Za-z0-9_.:=,-]", "_", f"app={app},shard={data_source}")
                text = f"/* {safe} */ "
            self._comments[data_source] = text
        return text

    def schema_of(self, name: str) -> TableSchema | None:
        """The schema of logic table ``name``: loaded first, else declared in the configuration."""
        found = self.schemas.get(name.lower())
        if found is not None:
            return found
        table = self.config.table(name)
        return declared_schema(table) if table is not None else None

    def router_of(self, table: ShardedTable) -> TableRouter:
        key = table.name.lower()
        router = self._routers.get(key)
        if router is None:
            router = self._routers[key] = TableRouter(table)
        return router

    def hinted_sources(self, table: ShardedTable, hint: Hint | None) -> Sequence[str] | None:
        """Data sources chosen by a ``@shard_database`` strategy hint, else ``None``."""
        if hint is None or hint.strategy is None:
            return None
        spec = self.config.algorithms.get(hint.strategy)
        if spec is None or spec.algorithm is None:
            raise RoutingError(
                f"hint strategy {hint.strategy!r} is not a configured sharding algorithm "
                f"(known: {', '.join(sorted(self.config.algorithms)) or 'none'})",
                strategy=hint.strategy,
            )
        router = self.router_of(table)
        # An INLINE algorithm evaluates its expression over a named column (ds${user_id % 2}).
        algorithm: ShardingAlgorithm = spec.algorithm
        variables: Sequence[str] = getattr(algorithm, "variables", ())
        column = variables[0] if len(variables) == 1 else "value"
        return algorithm.precise(router.sources, {column: hint.strategy_value})

    def check_full_route(
        self, table: ShardedTable, nodes: int, is_write: bool, tables: Sequence[ShardedTable | None] = ()
    ) -> None:
        """Refuse an all-shard route the governance forbids (docs/operations.md#full-routes).

        ``table`` routes the statement; ``tables`` are all its sharded tables
        (their ShardingSphere auditors apply too). A ShardingSphere table
        (``auditors`` not ``None``) follows its audit strategy instead of
        ``runtime.allowDmlFullRoute``.
        """
        runtime = self.config.runtime
        columns = ", ".join(table.sharding_columns) or "(none configured)"
        audited = next((t for t in (table, *tables) if t is not None and t.auditors), None)
        if audited is not None and audited.auditors:
            audited_columns = ", ".join(audited.sharding_columns) or "(none configured)"
            raise FullRouteError(
                f"statement on {audited.name!r} has no condition on its shard column(s) {audited_columns}; "
                f"the table's ShardingSphere auditor {audited.auditors[0]!r} (DML_SHARDING_CONDITIONS) "
                "refuses it. Add the shard key",
                table=audited.name,
                columns=audited.sharding_columns,
                auditor=audited.auditors[0],
            )
        if is_write and not runtime.allow_dml_full_route and table.auditors is None:
            raise FullRouteError(
                f"UPDATE/DELETE on {table.name!r} has no condition on its shard column(s) "
                f"{columns} and would change all {nodes} shards; add the shard key "
                "(or set runtime.allowDmlFullRoute: true)",
                table=table.name,
                columns=table.sharding_columns,
            )
        if not runtime.allow_full_route and table.shard_count > runtime.full_route_threshold:
            raise FullRouteError(
                f"statement on {table.name!r} has no condition on its shard column(s) {columns} "
                f"and would hit all {table.shard_count} shards (allow_full_route is false, "
                f"threshold {runtime.full_route_threshold})",
                table=table.name,
                columns=table.sharding_columns,
            )

    def default_source(self, what: str) -> str:
        """The default data source, or a RoutingError naming ``what`` needed it."""
        ds = self.config.default_data_source
        if ds is None:
            raise RoutingError(
                f"{what} is not in the sharding configuration and no default data source is set",
                what=what,
            )
        return ds

    def first_source(self) -> str:
        return self.config.default_data_source or next(iter(self.config.data_sources))

    def sources(self) -> list[str]:
        return list(self.config.data_sources)
