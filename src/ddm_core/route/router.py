"""The router: ``route(sql, params)`` → :class:`RoutePlan`, with a plan cache.

First sight of a SQL text: translate placeholders, parse with sqlglot, analyse
tables and shard conditions, build rewrite templates — a *compiled
statement*. It is cached by SQL text (bounded LRU), so later calls only bind
params, hash / look up the shard (compiled core), and fill templates.
"""

from __future__ import annotations

import abc

import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Protocol, Sequence

from ddm_core.errors import (
    ConfigError,
    CutoverError,
    CutoverFencedError,
    DdmError,
    MigrationError,
    MigrationFencedError,
    ShardKeyUpdateError,
    UnsupportedSQLError,
)
from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.cutover import DUAL_STATES, L_AUTHORITATIVE, BucketState, CutoverRouting
from ddm_core.metadata.migration import MigrationRouting
from ddm_core.metadata.model import ShardingConfig
from ddm_core.route.compile import compile_statement, quote_statement
from ddm_core.route.context import RouteContext
from ddm_core.route.hints import Hint, current_hint
from ddm_core.route.insert import reuse_generated_keys
from ddm_core.route.placeholders import Translated, translate
from ddm_core.route.plan import RoutePlan, RouteUnit
from ddm_core.route.table_schema import TableSchema, statement_tables

__all__ = ["Router", "CacheInfo", "Compiled"]


class Compiled(Protocol):
    """A statement compiled once per SQL text."""

    def route(self, bound: Sequence[Any], hint: Hint | None) -> RoutePlan: ...


@dataclass(frozen=True, slots=True)
class CacheInfo:
    hits: int
    misses: int
    size: int
    maxsize: int
    #: Cached statements with a fast path routed by the general path instead (see the plan's reason).
    fast_path_misses: int = 0


class _Entry:
    __slots__ = ("translated", "statement")

    def __init__(self, translated: Translated, statement: Compiled) -> None:
        self.translated = translated
        self.statement = statement


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
        self._ctx = RouteContext(self._current_config(config))
        self._follower = _follower_of(self, self._ctx.config)

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

    def use_config(self, config: ShardingConfig) -> None:
        """Switch to another configuration version; cached plans are dropped.

        A statement being compiled meanwhile is served from the version it
        started with but not cached (see :meth:`_compile`).
        """
        with self._lock:
            self._switch(config)

    def _switch(self, config: ShardingConfig) -> None:
        # A new context per version: its identity is the generation _compile checks.
        self._ctx = RouteContext(config, self._ctx.stats, self._ctx.schemas)
        self._follower = _follower_of(self, config)
        self._cache.clear()

    @property
    def _migration(self) -> _Migrating | None:
        """The migration this version follows (``None`` also during a cut-over)."""
        follower = self._follower
        return follower if isinstance(follower, _Migrating) else None

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
            self._ctx = RouteContext(ctx.config, ctx.stats, MappingProxyType(current))
            self._follower = _follower_of(self, ctx.config)  # its sub-routers take the schemas anew
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
        if self._holder is not None:
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
                return entry.statement.route(bound, current_hint())
            return follower.follow(entry.statement, bound, sql, params)
        except DdmError as err:  # no cost on the way through; on a refusal, name the statement
            quote_statement(err, sql)
            raise

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
        statement = compile_statement(ctx, translated, sql)
        entry = _Entry(translated, statement)
        with self._lock:
            self._misses += 1
            # Built on a version a reload replaced meanwhile: good for this call, never cached.
            if ctx is self._ctx:
                self._cache.put(sql if key is None else key, entry)
        return entry

    def cache_info(self) -> CacheInfo:
        """Plan cache hit / miss counters and size."""
        return CacheInfo(self._hits, self._misses, len(self._cache), self._maxsize, self._ctx.stats.fast_path_misses)

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()


_WRITE_PHASES = frozenset({"dual_write", "backfill", "catch_up", "verify", "shift_reads"})


class _Following(abc.ABC):
    """What a router does for one configuration version carrying a migration or cut-over block.

    Sub-routers for the block's other configurations are built lazily, once per
    version; each has its own plan cache and context, sharing nothing mutable
    with the main router.
    """

    __slots__ = ("router", "_subs", "_lock")

    fence_after_s: float

    def __init__(self, router: Router) -> None:
        self.router = router
        self._subs: dict[str, Router] = {}
        self._lock = threading.Lock()

    def _sub(self, which: str, config: ShardingConfig) -> Router:
        built = self._subs.get(which)
        if built is not None:
            return built
        with self._lock:
            sub = self._subs.get(which)
            if sub is None:
                sub = Router(config, cache_size=self.router._maxsize)
                sub.set_schemas(self.router._ctx.schemas)
                self._subs[which] = sub
            return sub

    @abc.abstractmethod
    def follow(self, statement: Compiled, bound: Sequence[Any], sql: str, params: Any) -> RoutePlan:
        """The plan of ``statement`` as the block wants it."""

    def unconfirmed_for(self) -> float | None:
        """Seconds since the holder last confirmed its version, when longer than the fence (else ``None``)."""
        holder = self.router._holder
        if holder is None:
            return None  # a plain configuration counts as confirmed
        confirmed = getattr(holder, "confirmed_at", None)
        age = math.inf if confirmed is None else time.monotonic() - confirmed
        return age if age > self.fence_after_s else None


def _follower_of(router: Router, config: ShardingConfig) -> _Following | None:
    if config.migration is not None:
        return _Migrating(router, config.migration)
    if config.cutover is not None:
        return _CuttingOver(router, config.cutover)
    return None


def _shown(stale: float) -> str:
    return "ever" if math.isinf(stale) else f"{stale:.1f} s"


class _Migrating(_Following):
    """Follows a migration block: dual writes to the target, shifted reads, fences (docs/migration.md)."""

    __slots__ = ("routing", "fence_after_s")

    def __init__(self, router: Router, routing: MigrationRouting) -> None:
        super().__init__(router)
        self.routing = routing
        self.fence_after_s = routing.fence_after_s

    def follow(self, statement: Compiled, bound: Sequence[Any], sql: str, params: Any) -> RoutePlan:
        return self._follow_plan(statement.route(bound, current_hint()), sql, params)

    def _follow_plan(self, plan: RoutePlan, sql: str, params: Any) -> RoutePlan:
        """``plan`` as the migration's phase wants it: dual units, a fence, or the shifted reads."""
        m = self.routing
        moving = [t.logic_table for t in plan.tables if t.logic_table.lower() in m.tables]
        if not moving:
            return plan
        if plan.statement == "ddl":
            raise MigrationError(
                f"DDL on {moving[0]!r} is refused while migration {m.name!r} moves it ({m.phase}); "
                "run it before the migration starts or after it finishes",
                table=moving[0],
                migration=m.name,
            )
        if not plan.is_write:
            if m.phase == "finish" and len(plan.units) > 1:
                raise MigrationFencedError(
                    f"reads of {moving[0]} over several shards wait for migration {m.name!r} to finish: the old "
                    "tables still hold copies of the moved rows (ddm migrate finish removes them); "
                    "reads by shard key work meanwhile",
                    table=moving[0],
                    migration=m.name,
                )
            if m.read_shift_pct > 0 and not plan.force_primary:
                # One unit only: a read over several tables would see a moving row at both locations.
                shifted = self._sub("reads", m.reads).route(sql, params)
                if len(shifted.units) == 1:
                    return shifted
            return plan
        if m.phase == "finish":
            return plan  # the base is the new placement already; the old copies get no writes
        with reuse_generated_keys(plan.generated_keys):
            target = self._sub("target", m.target).route(sql, params)
        dual = self._dual(plan, target)
        if not dual:
            return plan
        table = moving[0]
        if m.phase == "cutover":
            raise MigrationFencedError(
                f"writes to {table} slot(s) moving in migration {m.name!r} are paused for its cutover; "
                "retry in a few seconds",
                table=table,
                migration=m.name,
            )
        stale = self.unconfirmed_for()
        if stale is not None:
            raise MigrationFencedError(
                f"writes to {table} slot(s) moving in migration {m.name!r} are refused: config source not "
                f"confirmed for {_shown(stale)} (fenceAfterSeconds {m.fence_after_s:g}); retry in a few seconds",
                table=table,
                migration=m.name,
            )
        return plan._replace(dual=dual)

    def _dual(self, plan: RoutePlan, target: RoutePlan) -> tuple[RouteUnit, ...]:
        """The target plan's units the primary plan does not run.

        A unit identical in both is a physical table that does not move. A node the
        primary plan writes with other rows holds, in the target plan, the rows that stay
        there (already written) — unless slots move onto that data source, where rows
        arriving and rows staying would share one statement: that is refused.
        """
        have = set(plan.units)
        nodes = {(u.data_source, u.tables) for u in plan.units}
        receiving = self.routing.receiving
        out = []
        for unit in target.units:
            if unit in have:
                continue
            if (unit.data_source, unit.tables) in nodes:
                for logic, _ in unit.tables:
                    if unit.data_source in receiving.get(logic.lower(), ()):
                        raise MigrationError(
                            f"this write puts rows of {logic!r} that stay on {unit.data_source!r} and rows "
                            f"that migration {self.routing.name!r} moves there into one statement; "
                            "send them as separate statements",
                            table=logic,
                            migration=self.routing.name,
                        )
                continue
            out.append(unit)
        return tuple(out)


class _CuttingOver(_Following):
    """Follows a cut-over block: each statement on its table goes to the legacy table or the shards
    by the states of the buckets it touches (docs/cutover.md#routing)."""

    __slots__ = ("routing", "fence_after_s", "_key")

    def __init__(self, router: Router, routing: CutoverRouting) -> None:
        super().__init__(router)
        self.routing = routing
        self.fence_after_s = routing.fence_after_s
        self._key = routing.table.lower()

    def follow(self, statement: Compiled, bound: Sequence[Any], sql: str, params: Any) -> RoutePlan:
        hint = current_hint()
        tables = statement_tables(getattr(statement, "inner", statement))  # a SQL-hinted statement's own
        try:
            plan: RoutePlan | None = statement.route(bound, hint)
        except DdmError:
            if tables is None or self._key not in tables:
                raise
            plan = None  # the shards refuse it (a full route, say): the legacy table may still take it
        if tables is None:
            assert plan is not None
            tables = frozenset(t.logic_table.lower() for t in plan.tables)
        if self._key not in tables:
            assert plan is not None
            return plan
        c = self.routing
        table = c.table
        if len(tables) > 1:
            others = ", ".join(sorted(tables - {self._key}))
            raise CutoverError(
                f"a statement naming {table!r} with other tables ({others}) is refused during cut-over {c.name!r}: "
                f"the rows of {table!r} live in two places meanwhile; send it as separate statements",
                table=table, cutover=c.name,
            )  # fmt: skip
        if _routes_by_hint(hint, statement):
            raise CutoverError(
                f"routing hints on {table!r} are refused during cut-over {c.name!r}: its buckets decide "
                "where a statement goes", table=table, cutover=c.name,
            )  # fmt: skip
        keys = plan.generated_keys if plan is not None else ()
        try:
            with reuse_generated_keys(keys):
                states_plan = self._sub("states", c.states_config).route(sql, params)
        except ShardKeyUpdateError as err:  # the shards keep the row where it is; the buckets' states do not
            raise CutoverError(
                f"this UPDATE moves rows of {table} between buckets in different states of cut-over {c.name!r}; "
                "delete and re-insert them instead", table=table, cutover=c.name,
            ) from err  # fmt: skip
        if states_plan.statement == "ddl":
            raise CutoverError(
                f"DDL on {table!r} is refused during cut-over {c.name!r}; run it before the cut-over starts "
                "or after it finishes", table=table, cutover=c.name,
            )  # fmt: skip
        touched = {c.node_states[u.data_source] for u in states_plan.units}
        states = {state for state, _ in touched}
        gray_only = bool(states) and states == {BucketState.GRAY}
        if not states_plan.is_write:
            return self._shards(plan, statement, bound, hint) if gray_only else self._legacy(sql, params, keys)
        if any(paused for _, paused in touched):
            raise CutoverFencedError(
                f"writes to {table} bucket(s) in transition in cut-over {c.name!r} are paused; "
                "retry in a few seconds", table=table, cutover=c.name,
            )  # fmt: skip
        stale = self.unconfirmed_for()
        if stale is not None:
            raise CutoverFencedError(
                f"writes to {table} during cut-over {c.name!r} are refused: config source not confirmed for "
                f"{_shown(stale)} (fenceAfterSeconds {c.fence_after_s:g}); retry in a few seconds",
                table=table, cutover=c.name,
            )  # fmt: skip
        if gray_only:
            return self._shards(plan, statement, bound, hint)
        if states <= L_AUTHORITATIVE:
            legacy = self._legacy(sql, params, keys or states_plan.generated_keys)
            # No dual when the shards refused the statement: the sync engine repairs them.
            if plan is not None and states & DUAL_STATES:
                return legacy._replace(dual=plan.units)
            return legacy
        raise CutoverError(
            f"this write to {table} touches buckets served by the shards and buckets served by the legacy "
            f"table in cut-over {c.name!r}; split it by shard key so each statement stays on one side",
            table=table, cutover=c.name,
        )  # fmt: skip

    @staticmethod
    def _shards(plan: RoutePlan | None, statement: Compiled, bound: Sequence[Any], hint: Any) -> RoutePlan:
        if plan is None:
            return statement.route(bound, hint)  # raises the shards' refusal again
        return plan

    def _legacy(self, sql: str, params: Any, keys: Sequence[Any]) -> RoutePlan:
        with reuse_generated_keys(keys):
            return self._sub("legacy", self.routing.legacy_config).route(sql, params)


def _routes_by_hint(hint: Hint | None, statement: Compiled) -> bool:
    """Does a context hint or the statement's SQL hint pick shards (more than the primary for reads)?"""
    sql_hint = getattr(statement, "sql_hint", None)
    if sql_hint is not None and sql_hint.routes:
        return True
    if hint is None:
        return False
    return bool(hint.database or hint.table or hint.strategy or hint.has_strategy_value) or (
        hint.database_value is not None or hint.table_value is not None
    )
