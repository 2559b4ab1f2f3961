"""Read/write splitting for one executor: where each read goes, what a write leaves behind.

The executor asks :meth:`ReadWriteSplitter.read_pool` for the pool of a read
on a data source with replicas, and runs units of such data sources through
:meth:`ReadWriteSplitter.run` (a data source without replicas never gets
here: its pools have ``split = None``). The asyncio runner asks
:meth:`ReadWriteSplitter.read_choice` instead, which leaves a ``gtid`` read's
server questions to it (:mod:`ddm_core.readwrite.gtid_check`). In order, a read goes:

1. after a write in the same context (read-your-writes): ``window`` → the
   primary for ``write_window_ms``; ``gtid`` → a replica known to have applied
   the write's GTID, or one that applies it within ``gtid_wait_ms``
   (``MASTER_GTID_WAIT``), else the primary;
2. otherwise to a replica by the data source's load balancer over each
   replica's weight *now* (its configured weight × the health's share; 0 while
   lagging, stopped or unreachable; replicas with an open breaker are skipped);
3. no replica left → the primary.

Reads sent to the primary by 1 or 3 are *forced*; they take the primary only
while fewer than ``primary_read_cap_percent`` of its pool's connections are
borrowed, else they degrade to a replica (a lagging one if need be) and are
counted — never an error. A read that fails because its replica went away
(:class:`~ddm_core.errors.DataSourceUnavailableError`) takes the replica out
and runs once more on another replica or the primary. Writes never run twice.
See docs/readwrite.md.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Generator

from ddm_core.errors import DataSourceUnavailableError
from ddm_core.metadata.migration import routing_data_sources
from ddm_core.metadata.model import DataSource, Endpoint, ShardingConfig
from ddm_core.readwrite.breaker import EndpointBreaker, EndpointBreakers
from ddm_core.readwrite.gtid import format_position, parse_position, reached
from ddm_core.readwrite.gtid_check import LAST_GTID_SQL, POSITION_SQL, WAIT_SQL, Ask, GtidCheck, answer_blocking
from ddm_core.readwrite.health import Check, Observation, ReplicaHealth, ReplicaState
from ddm_core.readwrite.monitor import LagMonitor
from ddm_core.readwrite.ports import PoolSource, run_query
from ddm_core.readwrite.status import ReadCounters, ReadStatus, ReplicaStatus
from ddm_core.readwrite.tracker import Mode, WriteMark, WriteTracker, as_mode, mode_override

__all__ = ["ReadWriteSplitter"]

log = logging.getLogger("ddm_core.readwrite")


@dataclass(slots=True)
class _Member:
    endpoint: Endpoint
    health: ReplicaHealth
    breaker: EndpointBreaker
    pool: Any


@dataclass(slots=True)
class _Table:
    """A data source's replicas for one configuration version, resolved once."""

    ds: DataSource
    members: list[_Member]
    round_robin: itertools.count[int]
    primary: Any = None  # made when a read first needs it (see ReadWriteSplitter.primary_of)


class ReadWriteSplitter:
    """Balancer, read-your-writes tracker, breakers and lag monitor of one executor.

    Args:
        pools: The executor's pool registry (``pool(ds, endpoint)``).
        config: The configuration in use now (follows hot reloads).
        mode: Read-your-writes mode for every data source (``None``: each data source's own).
        clock: Monotonic seconds; drives write windows, recovery steps and breaker waits (tests inject one).
        monitor: Start the lag monitor thread (``False``: only :meth:`check_now` checks).
        probes: A second registry for the monitor's own connections (default: ``pools``).
    """

    def __init__(
        self,
        pools: PoolSource,
        config: Callable[[], ShardingConfig],
        *,
        mode: str | None = None,
        clock: Callable[[], float] | None = None,
        monitor: bool = True,
        probes: PoolSource | None = None,
    ) -> None:
        self.pools = pools
        self._config = config
        self._mode = as_mode(mode) if mode is not None else None
        self._clock = clock or time.monotonic
        self.tracker = WriteTracker(self._clock)
        self.breakers = EndpointBreakers(self._clock)
        self._health: dict[tuple[str, str], ReplicaHealth] = {}
        self._tables: dict[str, _Table] = {}
        self._counters: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()
        self._all_out: set[str] = set()
        self._any: tuple[ShardingConfig, bool] | None = None
        self.monitor = LagMonitor(self.replicated, probes or pools, breaker_of=self.breakers.of, observed=self.observed)
        if monitor and self.replicated():
            self.monitor.start()

    def replicated(self) -> list[DataSource]:
        """The data sources with replicas, in the configuration in use."""
        return [ds for ds in self._config().data_sources.values() if ds.replicas]

    def close(self) -> None:
        self.monitor.stop()

    # -- tables ----------------------------------------------------------------------

    def table(self, ds: DataSource) -> _Table:
        """``ds``'s replicas resolved to health, breaker and pool (once per configuration version)."""
        found = self._tables.get(ds.name)
        if found is not None and found.ds is ds:
            return found
        members = []
        for r in ds.replicas:
            pool = self.pools.pool(ds, r)
            breaker = pool.breaker = self.breakers.of(ds, r)
            pool.split, pool.replica = self, True
            members.append(_Member(r, self._health_of(ds.name, r.name), breaker, pool))
        found = self._tables[ds.name] = _Table(ds, members, itertools.count())
        return found

    def mark_primary(self, ds: DataSource, pool: Any) -> None:
        """``pool`` is the primary's of ``ds`` (which has replicas): its units run through :meth:`run`."""
        pool.breaker = self.breakers.of(ds, ds.primary)
        pool.split = self

    def primary_of(self, table: _Table) -> Any:
        pool = table.primary
        if pool is None:
            pool = self.pools.pool(table.ds, table.ds.primary)
            self.mark_primary(table.ds, pool)
            table.primary = pool
        return pool

    def _health_of(self, data_source: str, endpoint: str) -> ReplicaHealth:
        key = (data_source, endpoint)
        found = self._health.get(key)
        if found is None:
            with self._lock:
                found = self._health.setdefault(key, ReplicaHealth(data_source, endpoint))
        return found

    def _data_source(self, name: str) -> DataSource:
        return routing_data_sources(self._config())[name]  # a migration's target data sources too

    # -- choosing ----------------------------------------------------------------------

    def mode_of(self, ds: DataSource) -> Mode:
        return mode_override() or self._mode or Mode(ds.read_write.read_your_writes)

    def read_pool(self, ds: DataSource) -> Any:
        """The pool a read on ``ds`` (which has replicas) borrows from; a GTID check asks its servers here, blocking."""
        chosen = self.read_choice(ds)
        return chosen.run(answer_blocking) if type(chosen) is GtidCheck else chosen

    def read_choice(self, ds: DataSource) -> Any:
        """The pool a read on ``ds`` borrows from, or a :class:`GtidCheck` the runner answers first (a ``gtid``
        read after a write of this context: nothing asked, nothing counted yet)."""
        table = self.table(ds)
        mode = self.mode_of(ds)
        if mode is not Mode.OFF:
            mark = self.tracker.mark(ds.name)
            if mark is not None:
                if mode is Mode.GTID:
                    return GtidCheck(self._gtid_read(table, mark))
                if self._within_window(table, mark):
                    return self._forced(table)
        return self._balanced(table)

    def _balanced(self, table: _Table) -> Any:
        """A replica by the balancer, else the primary (forced)."""
        member = self._balance(table)
        if member is None:
            return self._forced(table)
        self._count(table.ds.name, "replica_reads")
        return member.pool

    def _within_window(self, table: _Table, mark: WriteMark) -> bool:
        return self.tracker.within(mark, table.ds.read_write.write_window_ms / 1000.0)

    def _gtid_read(self, table: _Table, mark: WriteMark) -> Generator[Ask, Any, Any]:
        """A read after a write in ``gtid`` mode: a replica that applied the write, else the primary (the
        decision of :class:`GtidCheck`; each server question yielded, its answer sent back)."""
        ds = table.ds
        if mark.gtid is None:  # not read at once: the primary's position now is at least as far
            text = yield Ask(self.primary_of(table), POSITION_SQL)
            position = parse_position(text)
            if position is not None and text is not None:
                mark = self.tracker.resolved(ds.name, mark, position, str(text))
        if mark.gtid is None or mark.text is None:  # no GTID to be had (not MariaDB): the window rule
            return self._forced(table) if self._within_window(table, mark) else self._balanced(table)
        target = mark.gtid
        member = self._balance(table, among=[m for m in table.members if reached(m.health.position, target)])
        if member is None:
            candidate = self._balance(table)
            if candidate is not None:  # does it apply the write within gtid_wait_ms?
                self._count(ds.name, "gtid_waits")
                seconds = ds.read_write.gtid_wait_ms / 1000.0
                got = yield Ask(candidate.pool, WAIT_SQL, (mark.text, seconds), wait=seconds)
                if got is not None and int(got) == 0:
                    candidate.health.applied(target)
                    member = candidate
        if member is None:
            return self._forced(table)
        self._count(ds.name, "replica_reads")
        return member.pool

    def _balance(self, table: _Table, among: list[_Member] | None = None, exclude: Any = None) -> _Member | None:
        """A replica by the load balancer over the weights now (``None``: none can take reads)."""
        live: list[_Member] = []
        weights: list[float] = []
        for m in table.members if among is None else among:
            percent = m.health.percent
            if percent <= 0 or m.endpoint.weight <= 0 or m is exclude or m.breaker.is_open:
                continue
            live.append(m)
            weights.append(m.endpoint.weight * percent)
        if not live:
            return None
        if len(live) == 1:
            return live[0]
        balancer = table.ds.load_balancer
        if balancer == "round_robin":
            return live[next(table.round_robin) % len(live)]
        if balancer == "random":
            return random.choice(live)
        return random.choices(live, weights)[0]

    def _forced(self, table: _Table) -> Any:
        """The primary for a read that must (or can only) go there, within the primary cap."""
        ds, primary = table.ds, self.primary_of(table)
        cap = primary.max_size * ds.read_write.primary_read_cap_percent / 100.0
        if primary.stats().borrowed < cap:
            self._count(ds.name, "forced_primary")
            return primary
        member = self._balance(table) or self._answering(table)
        if member is not None:
            self._count(ds.name, "degraded")
            return member.pool
        self._count(ds.name, "over_cap")
        return primary

    @staticmethod
    def _answering(table: _Table) -> _Member | None:
        """A replica that is out but still answers (lagging or stopped): stale, yet not an error."""
        for m in table.members:
            if m.health.state in (ReplicaState.LAGGING, ReplicaState.STOPPED) and not m.breaker.is_open:
                return m
        return None

    # -- running -----------------------------------------------------------------------

    def run(
        self,
        run_unit: Callable[..., Any],
        unit: Any,
        pool: Any,
        style: str,
        stream: bool,
        deadline: float | None,
        *,
        write: bool | None,
        lent: Any = None,
    ) -> Any:
        """Run one unit of a data source with replicas through ``run_unit`` (the executor's).

        ``write``: the unit's statement writes (``None``: not known here, as in a
        fan-out lane — the write is then recorded by :meth:`wrote` for the plan).
        """
        if write:
            return self._run_write(run_unit, unit, pool, style, deadline)
        if not pool.replica:
            return run_unit(unit, pool, None, style, stream, deadline, lent)
        try:
            return run_unit(unit, pool, None, style, stream, deadline, lent)
        except DataSourceUnavailableError as exc:
            other = self.retry_pool(unit.data_source, pool, exc)
            return run_unit(unit, other, None, style, stream, deadline)

    def retry_pool(self, data_source: str, pool: Any, exc: BaseException) -> Any:
        """A read on replica ``pool`` failed because it went away: mark it, and the pool to retry on once.

        Another replica by the balancer, else the primary. Both runners retry through this.
        """
        ds = self._data_source(data_source)
        table = self.table(ds)
        lost = self.lost(data_source, pool, exc)
        member = self._balance(table, exclude=lost)
        other = member.pool if member is not None else self.primary_of(table)
        self._count(ds.name, "retried")
        log.warning("a read on %s (data source %r) failed, the replica went away: %s; retried once on %s",
                    pool.endpoint.name, ds.name, exc, other.endpoint.name)  # fmt: skip
        return other

    def lost(self, data_source: str, pool: Any, exc: BaseException) -> _Member | None:
        """A read on replica ``pool`` of ``data_source`` failed because it went away: it is out of reads until
        the lag monitor finds it back (``None``: ``pool`` is none of its replicas now)."""
        ds = self._data_source(data_source)
        member = next((m for m in self.table(ds).members if m.pool is pool), None)
        if member is not None:
            self.observed(ds, member.endpoint, Check(Observation.FAILED, error=str(exc)))
        return member

    def _run_write(self, run_unit: Callable[..., Any], unit: Any, pool: Any, style: str, deadline: float | None) -> Any:
        if not self.gtid_writes(unit.data_source):
            result = run_unit(unit, pool, None, style, False, deadline)
            self.tracker.wrote(unit.data_source)
            return result
        # gtid: the write's own GTID, read on its connection right after it (MariaDB @@last_gtid)
        borrowed = pool.borrow()
        try:
            result = run_unit(unit, pool, borrowed, style, False, deadline)
        except BaseException:
            borrowed.release(discard=True)  # a failed or cancelled write: its session state is unknown
            raise
        text: Any = None
        discard = True
        try:
            rows = run_query(borrowed, LAST_GTID_SQL)
            text = rows[0][0] if rows else None
            discard = False
        except Exception as exc:  # not MariaDB: the first read after it reads the primary's position
            log.debug("@@last_gtid on %s failed: %s", pool.endpoint.name, exc)
        finally:
            borrowed.release(discard=discard)
        self.wrote_gtid(unit.data_source, text)
        return result

    def gtid_writes(self, data_source: str) -> bool:
        """Does a single-unit write to ``data_source`` read its own GTID after it (``gtid`` mode, this context)?"""
        return self.mode_of(self._data_source(data_source)) is Mode.GTID

    def wrote_gtid(self, data_source: str, text: Any) -> None:
        """A single-unit write to ``data_source`` left ``text`` in ``@@last_gtid`` (``None``: it could not be read,
        and the first read that needs the position reads the primary's)."""
        if isinstance(text, bytes):
            text = text.decode("ascii", "replace")
        position = parse_position(text)
        self.tracker.wrote(data_source, position, text if position is not None else None)

    def tracks(self, plan: Any) -> bool:
        """Does ``plan`` touch a data source with replicas? (cheap when none has any)"""
        config = self._config()
        if self._any is None or self._any[0] is not config:
            self._any = (config, any(ds.replicas for ds in config.data_sources.values()))
        if not self._any[1]:
            return False
        sources = config.data_sources
        return any(name in sources and sources[name].replicas for name in plan.data_sources)

    def wrote(self, data_sources: Any) -> None:
        """A plan wrote to ``data_sources`` in this context (several units, or a transaction)."""
        config = self._config().data_sources
        for name in data_sources:
            ds = config.get(name)
            if ds is not None and ds.replicas:
                self.tracker.wrote(name)  # GTID unknown here: resolved by the first read that needs it

    # -- health ------------------------------------------------------------------------

    def observed(self, ds: DataSource, replica: Endpoint, check: Check) -> None:
        """A check (or a failed read) of ``replica``: update its health and log what changed."""
        health = self._health_of(ds.name, replica.name)
        before = health.observe(check, self._clock(), ds.read_write)
        after = health.state
        if after.out and not before.out:
            log.warning("replica %s of data source %r is out of reads (%s): %s",
                        replica.name, ds.name, after.value, health.last_error or f"lag {check.lag_ms} ms")  # fmt: skip
        elif before.out and not after.out:
            log.info("replica %s of data source %r is back (%s, %d %% of its weight)",
                     replica.name, ds.name, after.value, health.percent)  # fmt: skip
        all_out = all(self._health_of(ds.name, r.name).percent == 0 for r in ds.replicas)
        if all_out and ds.name not in self._all_out:
            self._all_out.add(ds.name)
            log.error("every replica of data source %r is out: reads go to the primary %s (within the primary cap)",
                      ds.name, ds.primary.name)  # fmt: skip
        elif not all_out:
            self._all_out.discard(ds.name)

    def check_now(self) -> None:
        """One monitor round now, on the caller's thread."""
        self.monitor.check_now()

    # -- counters and status --------------------------------------------------------------

    def _count(self, data_source: str, what: str) -> None:
        with self._lock:
            counters = self._counters.setdefault(data_source, {})
            counters[what] = counters.get(what, 0) + 1

    def status(self) -> dict[str, ReadStatus]:
        """Per data source with replicas: each replica's state and weight now, and the read counters."""
        out = {}
        for ds in self.replicated():
            table = self.table(ds)
            replicas = tuple(
                ReplicaStatus(
                    endpoint=m.endpoint.name,
                    state=m.health.state.value,
                    weight=m.endpoint.weight,
                    weight_now=m.endpoint.weight * m.health.percent / 100.0,
                    percent=m.health.percent,
                    lag_ms=m.health.lag_ms,
                    last_error=m.health.last_error,
                    breaker=m.breaker.state,
                    gtid=format_position(m.health.position),
                )
                for m in table.members
            )
            with self._lock:
                counters = ReadCounters(**self._counters.get(ds.name, {}))
            out[ds.name] = ReadStatus(
                data_source=ds.name,
                primary=ds.primary.name,
                primary_breaker=self.breakers.of(ds, ds.primary).state,
                replicas=replicas,
                all_out=all(r.weight_now <= 0 or r.breaker == "open" for r in replicas),
                counters=counters,
            )
        return out


