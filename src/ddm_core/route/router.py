"""The router: ``route(sql, params)`` → :class:`RoutePlan`, with a plan cache.

First sight of a SQL text: translate placeholders, parse with sqlglot, analyse
tables and shard conditions, build rewrite templates — a *compiled
statement*. It is cached by SQL text (bounded LRU), so later calls only bind
params, hash / look up the shard (compiled core), and fill templates.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from ddm_core.errors import ConfigError, DdmError, UnsupportedSQLError
from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.model import ShardingConfig
from sqlglot import exp

from ddm_core.route.compile import REPLACE_HEAD, Compiled, compile_statement, parse, quote_statement
from ddm_core.route.crossnode import CrossNodeStatement, ExplainedStatement, compile_cross_node, pyformat_sql
from ddm_core.route.crossnode.insert_select import InsertSelectStatement, compile_insert_select
from ddm_core.route.context import RouteContext
from ddm_core.route.follow import Migrating, follower_of
from ddm_core.route.hints import HINT_VAR
from ddm_core.route.plan import RoutePlan
from ddm_core.route.query.point_path import PointFront
from ddm_core.route.table_schema import TableSchema, statement_tables
from ddm_core.route.text.placeholders import Translated, translate
from ddm_core.route.text.sql_hint import HintedStatement

__all__ = ["Router", "CacheInfo", "Compiled"]

#: hints.current_hint's lookup, called in C (the route of every statement reads it)
_current_hint = HINT_VAR.get


@dataclass(frozen=True, slots=True)
class CacheInfo:
    hits: int
    misses: int
    size: int
    maxsize: int
    #: Cached statements with a fast path routed by the general path instead (see the plan's reason).
    fast_path_misses: int = 0


class _Refused:
    """A statement refused at first sight because its rows cannot stay on their nodes: routing it raises
    that refusal again, which :meth:`Router.route` may answer across nodes."""

    def __init__(self, err: DdmError) -> None:
        self.err = err

    def route(self, bound: Any, hint: Any) -> RoutePlan:
        raise copy.copy(self.err).with_traceback(None)  # a fresh one per call: tracebacks never pile up


class _Entry:
    __slots__ = ("translated", "statement", "cross", "point")

    def __init__(self, translated: Translated, statement: Compiled) -> None:
        self.translated = translated
        self.statement = statement
        self.cross: CrossNodeStatement | ExplainedStatement | InsertSelectStatement | None = None  # on first need
        #: The compiled point path :class:`PointFront` answers with (route/query/point_path.py);
        #: ``False``: none; ``None``: not known yet (set after a general route).
        self.point: Any = None


def _point_of(entry: _Entry) -> Any:
    build = getattr(entry.statement, "point_path", None)
    return False if build is None else build(entry.translated)


#: Characters of SQL text the plan cache keeps at most, besides its count of texts: a plan holds
#: its text (and templates about its size), so 4 096 texts of megabytes each would hold gigabytes.
CACHED_CHARS = 32 * 1024 * 1024
#: A text longer than this is routed but never cached (it would push out hundreds of others).
CACHED_TEXT_LIMIT = CACHED_CHARS // 8


class _PlanCache(OrderedDict[Any, _Entry]):
    """Compiled plans by text, least recently used first, bounded by count and by characters."""

    def __init__(self, maxsize: int) -> None:
        super().__init__()
        self.maxsize = maxsize
        self.chars = 0

    def put(self, key: str | tuple[str], entry: _Entry) -> None:
        size = _chars(key)
        if size > CACHED_TEXT_LIMIT:
            return
        if key in self:
            self.drop(key)
        self[key] = entry
        self.chars += size
        while len(self) > self.maxsize or self.chars > CACHED_CHARS:
            oldest = next(iter(self))
            self.drop(oldest)

    def drop(self, key: str | tuple[str]) -> None:
        del self[key]
        self.chars -= _chars(key)

    def clear(self) -> None:
        super().clear()
        self.chars = 0


def _chars(key: str | tuple[str]) -> int:
    return len(key if isinstance(key, str) else key[0])


class Router:
    """Routes SQL written against logic tables to physical data nodes.

    Args:
        config: A validated :class:`~ddm_core.metadata.model.ShardingConfig`
            (from :func:`ddm_core.load_config`), or a
            :class:`~ddm_core.metadata.ConfigHolder` (hot reload: each new
            version clears the plan cache).
        cache_size: Most SQL texts whose compiled plans are kept.
    """

    def __init__(self, config: Any, *, cache_size: int = 4096) -> None:
        if cache_size < 1:
            raise ConfigError(f"Router cache_size must be >= 1, not {cache_size}")
        self._holder = None if isinstance(config, ShardingConfig) else config
        self._maxsize = cache_size
        # Keyed by the SQL text; ``(sql,)`` for a text with ``%`` routed without params,
        # which is read as sent rather than %-formatted (see placeholders.translate).
        self._cache = _PlanCache(cache_size)
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._use(RouteContext(self._current_config(config)))
        self._follower = follower_of(self._ctx.config, self._sub_router, self._holder)
        self._front_hits = 0  # counted by fronts replaced since
        self._new_front()

    # -- configuration -------------------------------------------------------

    @staticmethod
    def _current_config(source: Any) -> ShardingConfig:
        if isinstance(source, ShardingConfig):
            return source
        if isinstance(source, ConfigHolder):
            return source.config  # one atomic read of the current version
        raise TypeError(f"Router needs a ShardingConfig or a ConfigHolder, got {type(source).__name__}")

    @property
    def config(self) -> ShardingConfig:
        """The configuration version plans are currently built from."""
        self._sync()
        return self._ctx.config

    @property
    def holder(self) -> ConfigHolder | None:
        """The holder this router follows (``None``: a fixed configuration)."""
        return self._holder

    def _use(self, ctx: RouteContext) -> None:
        """Route with ``ctx`` from now on; :attr:`routed_config` is its configuration."""
        self._ctx = ctx
        #: The version the last :meth:`route` used, not checked against a holder's newer one (what a caller that
        #: just routed needs, without a second check): a plain attribute, read for every statement.
        self.routed_config: ShardingConfig = ctx.config

    def use_config(self, config: ShardingConfig) -> None:
        """Switch to another configuration version; cached plans are dropped.

        A statement being compiled meanwhile is served from the version it
        started with but not cached (see :meth:`_compile`).
        """
        with self._lock:
            self._switch(config)

    def _switch(self, config: ShardingConfig) -> None:
        # A new context per version: its identity is the generation _compile checks.
        self._use(RouteContext(config, self._ctx.stats, self._ctx.schemas))
        self._follower = follower_of(config, self._sub_router, self._holder)
        self._cache.clear()
        self._new_front()

    def _new_front(self) -> None:
        """The compiled first step of :meth:`route` for the current version (and follower)."""
        old: PointFront | None = getattr(self, "_front", None)
        if old is not None:
            self._front_hits += old.hits
        self._front = PointFront(self._cache, self._holder, self._ctx.config, _current_hint, self._follower is None)
        #: The compiled hit path for a cached point statement (``route``'s first step, for a caller that routes
        #: many): its plan, or ``None`` — then :meth:`route` routes it.
        self.point_route = self._front.route

    @property
    def _migration(self) -> Migrating | None:
        """The migration this version follows (``None`` also during a cut-over)."""
        follower = self._follower
        return follower if isinstance(follower, Migrating) else None

    def _sub_router(self, config: ShardingConfig) -> Router:
        """A router for another configuration of a migration or cut-over block, with this one's table metadata."""
        sub = Router(config, cache_size=self._maxsize)
        sub.set_schemas(self._ctx.schemas)
        return sub

    # -- table metadata ------------------------------------------------------

    @property
    def schemas(self) -> Mapping[str, TableSchema]:
        """Loaded table metadata by logic table (lower case); see :meth:`set_schemas`."""
        return self._ctx.schemas

    def set_schemas(self, schemas: Mapping[str, TableSchema | None]) -> None:
        """Give the router the columns of logic tables (what ``Executor(load_schema=True)`` loads).

        Used for INSERTs without a column list and to compare strings with
        integer shard columns as numbers (docs/configuration.md#table-metadata).
        Tables not named keep their schema; ``None`` forgets one. The cached
        plans of every table whose schema changed are dropped.

        Args:
            schemas: Logic table name → :class:`~ddm_core.route.table_schema.TableSchema` or ``None``.
        """
        with self._lock:
            current = dict(self._ctx.schemas)
            changed = set()
            for name, schema in schemas.items():
                key = name.lower()
                if current.get(key) != schema:
                    changed.add(key)
                    if schema is None:
                        del current[key]
                    else:
                        current[key] = schema
            if not changed:
                return
            ctx = self._ctx
            self._use(RouteContext(ctx.config, ctx.stats, MappingProxyType(current)))
            # A new follower: its sub-routers take the schemas anew.
            self._follower = follower_of(ctx.config, self._sub_router, self._holder)
            self._new_front()
            for cached, entry in list(self._cache.items()):
                tables = statement_tables(entry.statement)
                if tables is None or not tables.isdisjoint(changed):
                    self._cache.drop(cached)

    def _sync(self) -> None:
        holder = self._holder
        if holder is not None and holder.config is not self._ctx.config:
            with self._lock:
                # Read again under the lock: a thread that read an older version first must not put it back.
                config = self._current_config(holder)
                if config is not self._ctx.config:
                    self._switch(config)

    # -- routing -------------------------------------------------------------

    def route(self, sql: str, params: Any = None) -> RoutePlan:
        """Route one statement.

        Args:
            sql: MySQL-dialect SQL against logic tables, with ``%s``,
                ``%(name)s`` or ``?`` placeholders (or literals only).
            params: The statement's parameters (sequence or mapping), as for
                the DB-API driver.

        Raises:
            DdmError: every refusal names what was wrong (table, column,
                construct or parameter) — see :mod:`ddm_core.errors`.
        """
        plan: RoutePlan | None = self.point_route(sql, params)  # a cached point statement, in one compiled call
        if plan is not None:
            return plan
        holder = self._holder
        if holder is not None and holder.config is not self._ctx.config:  # _sync's test, without its frame
            self._sync()
        follower = self._follower  # None outside a migration or cut-over: the one test on the hot path
        key: Any = sql
        if params is None and isinstance(sql, str) and "%" in sql:
            key = (sql,)  # sent unchanged without params, as PyMySQL does: ``%`` is modulo
        try:
            entry = self._cache.get(key)
        except TypeError:  # unhashable, so not SQL text: _compile says so
            entry = None
        if entry is None:
            entry = self._compile(sql, key)
        else:
            self._hits += 1
            try:
                self._cache.move_to_end(key)
            except KeyError:  # evicted by another thread meanwhile
                pass
        try:
            bound = entry.translated.bind(params)
            if follower is None:
                plan = entry.statement.route(bound, _current_hint())
                if entry.point is None:
                    entry.point = _point_of(entry)
                return plan
            return follower.follow(entry.statement, bound, sql, params)
        except DdmError as err:  # no cost on the way through; on a refusal, name the statement
            if getattr(err, "across_nodes", False) and self._ctx.config.runtime.cross_node_queries:
                return self._cross_node(entry, bound, err, sql)
            quote_statement(err, sql)
            raise

    def _cross_node(self, entry: _Entry, bound: Any, err: DdmError, sql: str) -> RoutePlan:
        """A SELECT whose rows need not share a node: its parts and the statement over their copies."""
        cross = entry.cross
        try:
            if cross is None:
                cross = entry.cross = self._compile_cross(entry, err, sql)
            if isinstance(cross, InsertSelectStatement):
                return cross.route(bound)
            return cross.route(bound, self.route)
        except DdmError as exc:
            if exc is not err:
                exc.__cause__ = err
            quote_statement(exc, sql)
            raise exc

    def _compile_cross(self, entry: _Entry, err: DdmError, sql: str
                       ) -> CrossNodeStatement | ExplainedStatement | InsertSelectStatement:  # fmt: skip
        if isinstance(entry.statement, HintedStatement):
            raise err
        text = entry.translated.numbered()
        replace = REPLACE_HEAD.match(text)
        if replace is not None:  # sqlglot reads REPLACE as an opaque command: parsed as INSERT
            text = text[: replace.end(1)] + "INSERT" + text[replace.end():]
        tree = parse(text, sql)
        if isinstance(tree, exp.Insert) and isinstance(tree.expression, exp.Query):
            statement = compile_insert_select(tree, err.message, pyformat_sql)
            if replace is not None:
                statement = statement._replace(head="REPLACE" + statement.head[len("INSERT"):])
            return statement
        if isinstance(tree, exp.Describe) and isinstance(tree.this, exp.Query):  # EXPLAIN: the plan's steps
            return ExplainedStatement(compile_cross_node(tree.this, self._ctx.config, err.message, self._sub_router,
                                                         self._ctx.schema_of))
        if not isinstance(tree, exp.Query):
            raise err
        return compile_cross_node(tree, self._ctx.config, err.message, self._sub_router, self._ctx.schema_of)

    def compile(self, sql: str) -> Compiled:
        """The compiled (and cached) statement for ``sql``."""
        self._sync()
        try:
            entry = self._cache.get(sql)
        except TypeError:  # unhashable, so not SQL text: _compile says so
            entry = None
        return (entry or self._compile(sql)).statement

    def _compile(self, sql: str, key: Any = None) -> _Entry:
        if not isinstance(sql, str):
            raise UnsupportedSQLError(f"SQL must be a str, got {type(sql).__name__}", sql=sql)
        ctx = self._ctx  # one version for the whole build, read once
        translated = translate(sql, formatted=not isinstance(key, tuple))
        try:
            statement = compile_statement(ctx, translated, sql)
        except DdmError as err:
            if not getattr(err, "across_nodes", False):
                raise
            statement = _Refused(err)  # cached: each call is answered across nodes (or refused) in route()
        entry = _Entry(translated, statement)
        with self._lock:
            self._misses += 1
            # Built on a version a reload replaced meanwhile: good for this call, never cached.
            if ctx is self._ctx:
                self._cache.put(sql if key is None else key, entry)
        return entry

    def cache_info(self) -> CacheInfo:
        """Plan cache hit / miss counters and size."""
        hits = self._hits + self._front_hits + self._front.hits
        return CacheInfo(hits, self._misses, len(self._cache), self._maxsize, self._ctx.stats.fast_path_misses)

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
