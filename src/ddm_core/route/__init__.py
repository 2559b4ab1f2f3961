"""The route layer: ``Router.route(sql, params)`` → :class:`RoutePlan` (sqlglot-based).

Modules by pipeline stage: :mod:`placeholders` (paramstyles → parsable SQL),
:mod:`compile` (parse + dispatch), :mod:`analyze` (tables, scopes),
:mod:`conditions` (shard conditions → DNF), :mod:`targets` (conditions →
data nodes), :mod:`template` / :mod:`edits` (token-level rewrite),
:mod:`query`, :mod:`insert`, :mod:`ddl` (compiled statements),
:mod:`table_schema` / :mod:`coerce` (table metadata, typed comparison),
:mod:`select_rewrite` (multi-shard SELECT + merge spec), :mod:`hints`
(the hint context the router reads; ``@shard_database`` is :mod:`ddm_core.hinting`),
:mod:`router` (the cache).
"""

from ddm_core.route.hints import Hint, current_hint, hint
from ddm_core.route.plan import Aggregate, MergeSpec, RouteKind, RoutePlan, RouteUnit, TableRoute
from ddm_core.route.router import CacheInfo, Router
from ddm_core.route.table_schema import Column, TableSchema

__all__ = [
    "Router",
    "RoutePlan",
    "RouteUnit",
    "RouteKind",
    "TableRoute",
    "MergeSpec",
    "Aggregate",
    "CacheInfo",
    "TableSchema",
    "Column",
    "Hint",
    "hint",
    "current_hint",
]
