"""The route layer: ``Router.route(sql, params)`` → :class:`RoutePlan` (sqlglot-based).

The folders are the stages a statement goes through the first time its text is
seen (docs/architecture.md#one-statement-end-to-end):

* :mod:`.text` — the SQL text in: placeholders, parsing, parse errors, SQL hints;
  and out again: rewrite templates and the edits that cut them.
* :mod:`.shards` — which shards it reaches: tables and scopes, shard conditions,
  conditions → data nodes (and the point-lookup fast path), joins' co-location.
* :mod:`.query`, :mod:`.insert`, :mod:`.ddl` — the compiled statement of each kind
  (SELECT / UPDATE / DELETE with the multi-shard rewrite; INSERT; DDL and SHOW).

Beside them: :mod:`.router` (the plan cache, the entry point), :mod:`.compile`
(parse + dispatch to the kind's compiler), :mod:`.follow` (routing during a
migration or cut-over, by its phase or bucket states), :mod:`.context` (what one
configuration version derives), :mod:`.plan` (what routing returns),
:mod:`.table_schema` (table metadata) and :mod:`.hints` (the hint context the
router reads; ``@shard_database`` is the access layer's, :mod:`ddm_core.hinting`).
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
