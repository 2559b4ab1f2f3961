"""Shadow routing: every route also computed on a second configuration, and the differences counted (docs/observability.md#shadow-routing).

How a team checks an algorithm change before switching: give the executor a
:class:`ShadowRouter` built on the configuration in use and the candidate
(the same file with another algorithm for ``t_order``, say). Statements are
routed and run by the configuration in use as before; each route is computed
again on the shadow and, for every compared logic table, the data nodes are
compared. A difference — other nodes, or the shadow refusing what the primary
routed (a negative key an INLINE expression cannot map) — is counted per
table, kept in :attr:`ShadowRouter.recent` and logged to
``ddm_core.observe.shadow`` with the statement and its parameters (the shard
key is among them), at most ``log_limit`` times per table.

Not compared: INSERTs whose keys the router generated (the shadow would
generate other ids), and statements the primary refuses (they raise as
before). The shadow costs a second route per statement — ``sample`` (0..1)
compares only that share of them.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ddm_core.errors import ConfigError, DdmError
from ddm_core.route.plan import RoutePlan
from ddm_core.route.router import Router
from ddm_core.route.table_schema import TableSchema

__all__ = ["ShadowRouter", "ShadowMismatch", "ShadowCounts", "NODES", "SHADOW_ERROR"]

log = logging.getLogger("ddm_core.observe.shadow")

#: Mismatch kinds: the shadow chose other nodes / the shadow refused the statement.
NODES, SHADOW_ERROR = "nodes", "shadow-error"


@dataclass(frozen=True, slots=True)
class ShadowMismatch:
    """One statement whose shadow route differs for ``table``."""

    table: str
    kind: str  # NODES or SHADOW_ERROR
    sql: str
    params: Any
    primary: tuple[str, ...]
    shadow: tuple[str, ...]  # empty for a shadow error
    error: str | None = None

    def __str__(self) -> str:
        got = f"shadow refused it: {self.error}" if self.error else f"shadow {', '.join(self.shadow) or '(none)'}"
        return (f"shadow route of {self.table} differs for params {self.params!r}: primary "
                f"{', '.join(self.primary)}, {got} (statement: {self.sql})")  # fmt: skip


@dataclass(frozen=True, slots=True)
class ShadowCounts:
    """Per logic table: statements compared, and differences by kind."""

    compared: Mapping[str, int]
    mismatches: Mapping[tuple[str, str], int]  # (table, kind) -> count
    skipped: int  # statements not compared (generated keys)


class ShadowRouter(Router):
    """A :class:`Router` on ``config`` that also routes every statement on ``shadow`` and compares.

    Args:
        config: The configuration in use (a ``ShardingConfig`` or ``ConfigHolder``).
        shadow: The candidate configuration (idem).
        tables: Logic tables to compare (default: every sharded table of the shadow).
        sample: Share of statements compared (1.0: all).
        log_limit: Differences logged per table (counting goes on).
        recent: Differences kept in :attr:`recent`.
        rng: Returns floats in [0, 1) for sampling (tests inject one).
    """

    def __init__(
        self,
        config: Any,
        shadow: Any,
        *,
        tables: list[str] | None = None,
        sample: float = 1.0,
        log_limit: int = 100,
        recent: int = 100,
        cache_size: int = 4096,
        rng: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(config, cache_size=cache_size)
        if not 0.0 <= sample <= 1.0:
            raise ConfigError(f"shadow routing sample must be within 0..1, not {sample}", sample=sample)
        self.shadow = shadow if isinstance(shadow, Router) else Router(shadow, cache_size=cache_size)
        known = {name.lower() for name in self.shadow.config.tables}
        if tables is not None:
            unknown = [t for t in tables if t.lower() not in known]
            if unknown:
                raise ConfigError(
                    f"shadow routing table(s) {', '.join(unknown)} are not sharded tables of the shadow "
                    f"configuration (it has {', '.join(sorted(known)) or 'none'})",
                    tables=tuple(unknown),
                )
        self._compared_tables = frozenset(t.lower() for t in tables) if tables is not None else frozenset(known)
        self.sample = sample
        self.log_limit = log_limit
        self._rng = rng or random.random
        self._lock = threading.Lock()
        self._compared: dict[str, int] = {}
        self._mismatches: dict[tuple[str, str], int] = {}
        self._logged: dict[str, int] = {}
        self._skipped = 0
        self.recent: deque[ShadowMismatch] = deque(maxlen=recent)

    def set_schemas(self, schemas: Mapping[str, TableSchema | None]) -> None:
        super().set_schemas(schemas)
        self.shadow.set_schemas(schemas)  # the same tables: INSERTs without a column list route alike

    def route(self, sql: str, params: Any = None) -> RoutePlan:
        plan = super().route(sql, params)
        if self.sample >= 1.0 or self._rng() < self.sample:
            self._compare(sql, params, plan)
        return plan

    def counts(self) -> ShadowCounts:
        with self._lock:
            return ShadowCounts(dict(self._compared), dict(self._mismatches), self._skipped)

    def _compare(self, sql: str, params: Any, plan: RoutePlan) -> None:
        compared = [t for t in plan.tables if t.logic_table.lower() in self._compared_tables]
        if not compared:
            return
        if plan.generated_keys:
            with self._lock:
                self._skipped += 1
            return
        try:
            shadow_plan = self.shadow.route(sql, params)
            error = None
        except DdmError as exc:
            shadow_plan, error = None, exc.message.split("\n")[0]
        shadow_nodes = {t.logic_table.lower(): t.nodes for t in shadow_plan.tables} if shadow_plan else {}
        found: list[ShadowMismatch] = []
        for t in compared:
            key = t.logic_table.lower()
            if error is not None:
                found.append(ShadowMismatch(t.logic_table, SHADOW_ERROR, sql, params, t.nodes, (), error))
            elif sorted(shadow_nodes.get(key, ())) != sorted(t.nodes):
                found.append(ShadowMismatch(t.logic_table, NODES, sql, params, t.nodes, shadow_nodes.get(key, ())))
        to_log = []
        with self._lock:
            for t in compared:
                self._compared[t.logic_table] = self._compared.get(t.logic_table, 0) + 1
            for m in found:
                key2 = (m.table, m.kind)
                self._mismatches[key2] = self._mismatches.get(key2, 0) + 1
                self.recent.append(m)
                logged = self._logged.get(m.table, 0)
                if logged < self.log_limit:
                    self._logged[m.table] = logged + 1
                    to_log.append(m)
        for m in to_log:
            log.warning("%s", m)
