"""The router: ``route(sql, params)`` → :class:`RoutePlan`, with a plan cache.

First sight of a SQL text: translate placeholders, parse with sqlglot, analyse
tables and shard conditions, build rewrite templates — a *compiled
statement*. It is cached by SQL text (bounded LRU), so later calls only bind
params, hash / look up the shard (compiled core), and fill templates.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from ddm_core.errors import UnsupportedSQLError
from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.model import ShardingConfig
from ddm_core.route.compile import compile_statement
from ddm_core.route.context import RouteContext
from ddm_core.route.hints import Hint, current_hint
from ddm_core.route.placeholders import Translated, translate
from ddm_core.route.plan import RoutePlan

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


class _Entry:
    __slots__ = ("translated", "statement")

    def __init__(self, translated: Translated, statement: Compiled) -> None:
        self.translated = translated
        self.statement = statement


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
            raise ValueError(f"cache_size must be >= 1, not {cache_size}")
        self._holder = None if isinstance(config, ShardingConfig) else config
        self._maxsize = cache_size
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._ctx = RouteContext(self._current_config(config))

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
        """Switch to another configuration version; cached plans are dropped."""
        with self._lock:
            self._ctx = RouteContext(config)
            self._cache.clear()

    def _sync(self) -> None:
        if self._holder is not None:
            config = self._current_config(self._holder)
            if config is not self._ctx.config:
                self.use_config(config)

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
        entry = self._cache.get(sql)
        if entry is None:
            entry = self._compile(sql)
        else:
            self._hits += 1
            try:
                self._cache.move_to_end(sql)
            except KeyError:  # evicted by another thread meanwhile
                pass
        bound = entry.translated.bind(params)
        return entry.statement.route(bound, current_hint())

    def compile(self, sql: str) -> Compiled:
        """The compiled (and cached) statement for ``sql``."""
        entry = self._cache.get(sql)
        return (entry or self._compile(sql)).statement

    def _compile(self, sql: str) -> _Entry:
        if not isinstance(sql, str):
            raise UnsupportedSQLError(f"SQL must be a str, got {type(sql).__name__}", sql=sql)
        translated = translate(sql)
        statement = compile_statement(self._ctx, translated, sql)
        entry = _Entry(translated, statement)
        with self._lock:
            self._misses += 1
            self._cache[sql] = entry
            if len(self._cache) > self._maxsize:
                self._cache.popitem(last=False)
        return entry

    def cache_info(self) -> CacheInfo:
        """Plan cache hit / miss counters and size."""
        return CacheInfo(self._hits, self._misses, len(self._cache), self._maxsize)

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
