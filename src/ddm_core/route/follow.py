"""How a router follows a migration or cut-over block of its configuration version.

A version published during an online resharding carries a ``migration:`` block
(:mod:`ddm_core.metadata.migration`), one published during a gray cut-over a
``cutover:`` block (:mod:`ddm_core.metadata.cutover`). The router routes each
statement as usual, then hands the plan to the block's follower here:

* :class:`Migrating` — by the migration's :class:`~ddm_core.metadata.phases.Phase`:
  writes to moving slots also go to their new owner (dual units), a share of
  the reads goes there (read shift), writes pause for the cutover and fail
  closed when the config source is not confirmed; after cutover (``finish``)
  the base is the new placement and reads over several shards wait
  (docs/migration.md#routing-during-a-migration).
* :class:`CuttingOver` — by the states of the buckets a statement touches: the
  legacy table or the shards, with dual units while both must stay equal
  (docs/cutover.md#routing).

A phase or bucket state that routes differently is a change here only.
"""

from __future__ import annotations

import abc
import math
import threading
import time
from typing import Any, Callable, Protocol, Sequence

from ddm_core.errors import (
    CutoverError,
    CutoverFencedError,
    DdmError,
    MigrationError,
    MigrationFencedError,
    ShardKeyUpdateError,
)
from ddm_core.metadata.cutover import DUAL_STATES, L_AUTHORITATIVE, BucketState, CutoverRouting
from ddm_core.metadata.migration import MigrationRouting
from ddm_core.metadata.model import ShardingConfig
from ddm_core.metadata.phases import Phase
from ddm_core.route.compile import Compiled
from ddm_core.route.hints import Hint, current_hint
from ddm_core.route.insert.insert import reuse_generated_keys
from ddm_core.route.plan import RoutePlan, RouteUnit
from ddm_core.route.table_schema import statement_tables

__all__ = ["Following", "Migrating", "CuttingOver", "Routes", "follower_of"]


class Routes(Protocol):
    """A router for one of the block's other configurations."""

    def route(self, sql: str, params: Any = None) -> RoutePlan: ...


class Following(abc.ABC):
    """What a router does for one configuration version carrying a migration or cut-over block.

    Sub-routers for the block's other configurations are built lazily, once per
    version; each has its own plan cache and context, sharing nothing mutable
    with the main router.

    Args:
        sub_router: Builds a router for another configuration of the block.
        holder: The main router's configuration holder (``None``: a plain
            configuration, always confirmed).
    """

    __slots__ = ("_new_router", "_holder", "_subs", "_lock")

    fence_after_s: float

    def __init__(self, sub_router: Callable[[ShardingConfig], Routes], holder: Any) -> None:
        self._new_router = sub_router
        self._holder = holder
        self._subs: dict[str, Routes] = {}
        self._lock = threading.Lock()

    def _sub(self, which: str, config: ShardingConfig) -> Routes:
        built = self._subs.get(which)
        if built is not None:
            return built
        with self._lock:
            sub = self._subs.get(which)
            if sub is None:
                sub = self._new_router(config)
                self._subs[which] = sub
            return sub

    @abc.abstractmethod
    def follow(self, statement: Compiled, bound: Sequence[Any], sql: str, params: Any) -> RoutePlan:
        """The plan of ``statement`` as the block wants it."""

    def unconfirmed_for(self) -> float | None:
        """Seconds since the holder last confirmed its version, when longer than the fence (else ``None``)."""
        holder = self._holder
        if holder is None:
            return None  # a plain configuration counts as confirmed
        confirmed = getattr(holder, "confirmed_at", None)
        age = math.inf if confirmed is None else time.monotonic() - confirmed
        return age if age > self.fence_after_s else None


def follower_of(
    config: ShardingConfig, sub_router: Callable[[ShardingConfig], Routes], holder: Any
) -> Following | None:
    """What follows ``config``'s migration or cut-over block (``None``: it has neither)."""
    if config.migration is not None:
        return Migrating(config.migration, sub_router, holder)
    if config.cutover is not None:
        return CuttingOver(config.cutover, sub_router, holder)
    return None


def _shown(stale: float) -> str:
    return "ever" if math.isinf(stale) else f"{stale:.1f} s"


class Migrating(Following):
    """Follows a migration block: dual writes to the target, shifted reads, fences (docs/migration.md)."""

    __slots__ = ("routing", "phase", "fence_after_s")

    def __init__(
        self, routing: MigrationRouting, sub_router: Callable[[ShardingConfig], Routes], holder: Any
    ) -> None:
        super().__init__(sub_router, holder)
        self.routing = routing
        self.phase = Phase(routing.phase)  # validated at load: one of the routed phases
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
            if self.phase is Phase.FINISH and len(plan.units) > 1:
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
        if self.phase is Phase.FINISH:
            return plan  # the base is the new placement already; the old copies get no writes
        with reuse_generated_keys(plan.generated_keys):
            target = self._sub("target", m.target).route(sql, params)
        dual = self._dual(plan, target)
        if not dual:
            return plan
        table = moving[0]
        if self.phase is Phase.CUTOVER:
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


class CuttingOver(Following):
    """Follows a cut-over block: each statement on its table goes to the legacy table or the shards
    by the states of the buckets it touches (docs/cutover.md#routing)."""

    __slots__ = ("routing", "fence_after_s", "_key")

    def __init__(
        self, routing: CutoverRouting, sub_router: Callable[[ShardingConfig], Routes], holder: Any
    ) -> None:
        super().__init__(sub_router, holder)
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
