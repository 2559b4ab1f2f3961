"""A gray cut-over as one resumable workflow: ``start``, ``advance``, ``rollback``, ``sync``, ``check``, ``finish``.

:class:`Cutover` moves one logic table from a legacy data source onto its
sharded layout bucket by bucket (docs/cutover.md). Every application instance
follows the bucket states through the configuration table it watches: each
change is a version (the sharded configuration plus a ``cutover:`` block),
published once across crashes (:class:`ddm_core.migrate.publish.Publisher`).

A change that moves a bucket's authority (to ``gray``, or from ``gray`` back)
runs under a pause: the buckets' writes are refused in one version, the
process waits until every instance took it or fences itself, drains the side
losing authority, records every server's binlog position (the *switch* the
sync directions filter by) and publishes the new state. Writes to those
buckets wait for ``fence_after_s`` + ``poll_s`` + the drain; reads never wait.

Copying and replaying run under one lock per cut-over (``GET_LOCK`` on the
state data source): ``ddm cutover sync`` takes it round by round and a
transition holds it throughout, so exactly one process applies changes at a
time, and every row of ``ddm_cutover`` is written under it.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import yaml

from ddm_core.cutover.phases import CutoverPhase
from ddm_core.cutover.state import CutoverLog, CutoverState, Transition, authority_of
from ddm_core.cutover.sync import FORWARD, REVERSE, Sync, SyncPass
from ddm_core.ddl import execute_ddl
from ddm_core.errors import CutoverError
from ddm_core.metadata.cutover import BucketState, CutoverRouting, cutover_document, format_buckets
from ddm_core.metadata.dump import dump_native
from ddm_core.metadata.instances.fence import FenceProgress
from ddm_core.metadata.load import parse_config
from ddm_core.metadata.model import ShardingConfig
from ddm_core.metadata.sources.table import TableSource
from ddm_core.migrate.backfill import BATCH_ROWS, ScanReport
from ddm_core.migrate.catchup import FLUSH_ROWS, MAX_LAG, CatchUpResult
from ddm_core.migrate.checker import Checker, CheckReport, RowSource
from ddm_core.migrate.connections import Connections, config_table_source, connector
from ddm_core.migrate.prepare import target_ddl
from ddm_core.migrate.publish import Publisher
from ddm_core.migrate.schema_check import check_table

__all__ = ["Cutover", "CutoverStatus", "ALLOWED", "next_state"]

#: Which state each state may change to.
ALLOWED: Mapping[BucketState, frozenset[BucketState]] = {
    BucketState.NORMAL: frozenset({BucketState.PRE_GRAY}),
    BucketState.PRE_GRAY: frozenset({BucketState.GRAY, BucketState.NORMAL}),
    BucketState.GRAY: frozenset({BucketState.ROLLBACK}),
    BucketState.ROLLBACK: frozenset({BucketState.PRE_GRAY, BucketState.GRAY, BucketState.NORMAL}),
}

_POSITIONS = "positions"


def next_state(state: BucketState) -> BucketState | None:
    """Where ``advance`` takes a bucket by default (``None``: it is on the shards already)."""
    return {BucketState.NORMAL: BucketState.PRE_GRAY, BucketState.PRE_GRAY: BucketState.GRAY,
            BucketState.ROLLBACK: BucketState.GRAY}.get(state)


@dataclass(frozen=True, slots=True)
class CutoverStatus:
    """A cut-over as ``ddm cutover status`` shows it.

    Attributes:
        name / table / legacy: What moves from where.
        phase / completed / stopped: Where it is.
        states: Each bucket's state; ``pending``: a transition not finished.
        copied: Rows the copy wrote so far (``copy_done``: it is complete).
        behind: Binlog bytes each sync direction is behind (``None``: not reading / unknown).
        findings: The last sampled comparison's result.
        switches: How many times authority moved.
    """

    name: str
    table: str
    legacy: str
    phase: CutoverPhase | None
    completed: bool
    stopped: Any
    states: tuple[BucketState, ...]
    pending: Transition | None
    copied: int
    copy_done: bool
    behind: Mapping[str, int | None]
    findings: Mapping[str, Any] | None
    switches: int

    def buckets_in(self, state: BucketState) -> tuple[int, ...]:
        return tuple(b for b, s in enumerate(self.states) if s is state)


class Cutover:
    """One cut-over of ``table`` from the legacy data source onto ``config``'s layout.

    Args:
        config: The sharded configuration (every instance follows it plus the ``cutover:`` block).
        name: The cut-over's name in ``ddm_cutover``.
        table: The logic table.
        legacy: The legacy data source as a native mapping: ``name``, ``url`` (and any other
            ``dataSources`` field) and ``table`` (the legacy physical table; default ``table``).
        state_on: Data source of ``config`` holding the ``ddm_cutover`` table.
        config_source: Data source of ``config`` holding the ``ddm_config`` table the
            instances watch, or a :class:`TableSource`.
        buckets: Slot-aligned buckets of the shard key.
        fence_after_s / poll_s: The fence the versions carry and how often instances poll.
        fence_timeout_s: How long a step waits for the registered instances to take its
            version (docs/operations.md#instance-registry); ``on_fence`` sees each look.
        hold_s: The gate to ``gray``: forward replay passes under ``max_lag`` for this long.
        batch / max_rows_per_s: The copy's batch size and read ceiling.
        lock_timeout: Seconds to wait for the cut-over's lock held by another process.
    """

    def __init__(
        self,
        config: ShardingConfig,
        *,
        name: str,
        table: str,
        legacy: Mapping[str, Any],
        state_on: str,
        config_source: str | TableSource,
        buckets: int = 100,
        fence_after_s: float = 5.0,
        poll_s: float = 1.0,
        hold_s: float = 10.0,
        batch: int = BATCH_ROWS,
        max_rows_per_s: float | None = None,
        max_lag: float = MAX_LAG,
        pass_timeout: float = 120.0,
        flush_rows: int = FLUSH_ROWS,
        lock_timeout: float = 60.0,
        echo: Callable[[str], None] | None = None,
        on_copy: Callable[[ScanReport], None] | None = None,
        fence_timeout_s: float = 60.0,
        on_fence: Callable[[FenceProgress], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if fence_after_s <= 0 or poll_s <= 0 or hold_s < 0:
            raise CutoverError(f"cut-over {name!r}: fence_after_s and poll_s must be > 0 and hold_s >= 0",
                               cutover=name, table=table)
        self.config, self.name, self.legacy, self.buckets = config, name, dict(legacy), buckets
        self.fence_after_s, self.poll_s, self.hold_s = float(fence_after_s), float(poll_s), float(hold_s)
        self.echo = echo or (lambda line: None)
        self.on_copy, self.clock, self.sleep, self.wall = on_copy, clock, sleep, wall
        self.lock_timeout = lock_timeout
        self.routing = self._routing((BucketState.NORMAL,) * buckets, (), table)
        self.table = self.routing.table
        self.conns = Connections(config, self.routing.legacy_config)
        self.state_on = state_on
        self.log = CutoverLog(connector(config, state_on), name)
        self.source = (config_source if isinstance(config_source, TableSource)
                       else config_table_source(config, config_source))
        self.publisher = Publisher(self.log, self.source, fence_after_s=self.fence_after_s, poll_s=self.poll_s,
                                   echo=self.echo, sleep=sleep, wall=wall, fence_timeout_s=fence_timeout_s,
                                   on_fence=on_fence)
        self.sync = Sync(config, self.routing, self.conns, self.log, batch=batch, max_rows_per_s=max_rows_per_s,
                         max_lag=max_lag, pass_timeout=pass_timeout, flush_rows=flush_rows, clock=clock)
        self._lock_conn: Any = None
        self._locked = 0
        self._ready = False

    # -- plumbing ---------------------------------------------------------------------------

    def close(self) -> None:
        if self._lock_conn is not None:
            with contextlib.suppress(Exception):
                self._lock_conn.close()
            self._lock_conn = None
        self.publisher.close()
        self.log.close()
        self.source.close()
        self.conns.close()

    def __enter__(self) -> "Cutover":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _refuse(self, doing: str, why: str) -> CutoverError:
        return CutoverError(f"cut-over {self.name!r} cannot {doing}: {why}", cutover=self.name, table=self.table)

    def _state(self) -> CutoverState:
        if not self._ready:
            self.log.create_table()
            self._ready = True
        state = self.log.state()
        recorded = (state.plan.get("table"), state.plan.get("buckets"))
        if state.plan and recorded != (self.table, self.buckets):
            raise self._refuse("run", f"it was started for table {recorded[0]!r} with {recorded[1]} buckets, not "
                               f"{self.table!r} with {self.buckets}; give the same table and bucket count")
        return state

    def _document(self, states: Sequence[BucketState], paused: Iterable[int], table: str | None = None) -> dict[str, Any]:
        return cutover_document(self.config, name=self.name, table=table or self.table, legacy=self.legacy,
                                buckets=self.buckets, fence_after_s=self.fence_after_s,
                                states={b: s for b, s in enumerate(states) if s is not BucketState.NORMAL},
                                paused=paused)

    def _routing(self, states: Sequence[BucketState], paused: Iterable[int], table: str) -> CutoverRouting:
        loaded = parse_config(self._document(states, paused, table), origin=f"cut-over {self.name!r}",
                              format="native", check_env=False)
        assert loaded.cutover is not None
        return loaded.cutover

    def document(self, states: Sequence[BucketState], paused: Iterable[int] = ()) -> str:
        """The text published for these bucket states (the sharded configuration plus the block)."""
        text: str = yaml.safe_dump(self._document(states, paused), sort_keys=False, allow_unicode=True)
        return text

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the cut-over's lock (re-entrant within this object); the sync and every transition run under it."""
        if not self._locked and not self._take_lock(self.lock_timeout):
            raise self._refuse("take its lock", f"another cut-over process held it for {self.lock_timeout:g} s "
                               "(ddm cutover sync, or another step); only one applies changes at a time")
        self._locked += 1
        try:
            yield
        finally:
            self._locked -= 1
            if not self._locked:
                self._give_lock()

    def _try_lock(self) -> bool:
        """Take the lock if it is free within a second (the sync's rounds wait for transitions this way)."""
        if self._locked or not self._take_lock(1.0):
            return bool(self._locked)
        self._locked = 1
        return True

    def _release(self) -> None:
        self._locked -= 1
        if not self._locked:
            self._give_lock()

    def _take_lock(self, timeout: float) -> bool:
        if self._lock_conn is None:
            self._lock_conn = connector(self.config, self.state_on)()
        cur = self._lock_conn.cursor()
        try:
            cur.execute("SELECT GET_LOCK(%s, %s)", (self._lock_name, timeout))
            got = cur.fetchone()
        finally:
            cur.close()
        return bool(got and got[0] == 1)

    def _give_lock(self) -> None:
        try:
            cur = self._lock_conn.cursor()
            cur.execute("SELECT RELEASE_LOCK(%s)", (self._lock_name,))
            cur.fetchall()
            cur.close()
        except Exception:  # the connection is gone, and the server released the lock with it
            with contextlib.suppress(Exception):
                self._lock_conn.close()
            self._lock_conn = None

    @property
    def _lock_name(self) -> str:
        return f"ddm_cutover:{self.name}"[:64]

    # -- start: prepare, copy, replay ------------------------------------------------------------

    def start(self) -> CutoverStatus:
        """Run (or resume) everything before the buckets move: publish the all-normal version, create
        and check the shard tables, copy every row, replay what changed meanwhile; enter ``live``."""
        with self.locked():
            state = self._state()
            if state.phase is None:
                self.log.enter(CutoverPhase.PREPARE, detail={
                    "table": self.table, "legacy": self.routing.legacy_name, "legacy_table": self.routing.legacy_table,
                    "buckets": self.buckets})
                state = self._state()
            if state.phase is CutoverPhase.PREPARE:
                self.publisher.publish("normal", self.document(state.states))
                if not state.completed:
                    self._prepare()
                self.log.enter(CutoverPhase.COPY, detail={"binlog": {
                    self.sync.legacy_server: list(self.sync.positions()[self.sync.legacy_server])}})
                state = self._state()
            if state.phase is CutoverPhase.COPY:
                if not state.completed:
                    self.echo(f"copy: {self.routing.legacy_name}.{self.routing.legacy_table} onto the shards")
                    report = self.sync.copy(self.on_copy)
                    self.log.complete(CutoverPhase.COPY, detail={"rows": report.rows_copied})
                self.log.enter(CutoverPhase.REPLAY)
                state = self._state()
            if state.phase is CutoverPhase.REPLAY:
                if not state.completed:
                    self.echo("replay: the legacy binlog since the copy started")
                    result = self._gate(state)
                    self.log.complete(CutoverPhase.REPLAY, detail={"applied": result.applied,
                                                                    "last_pass": result.last_pass})
                self.log.enter(CutoverPhase.LIVE)
        return self.status()

    def _prepare(self) -> None:
        statements = target_ddl(self.conns, self.routing.legacy_config, self.config, self.table)
        if statements:
            execute_ddl(self.config, statements, echo=lambda ds, sql: self.echo(f"{ds}: {sql.splitlines()[0]} ..."))
        report = check_table(self.conns, self.table, [self.routing.legacy_config, self.config])
        if not report.consistent:
            self.log.stop(CutoverPhase.PREPARE, {"schema": report.to_json()})
            report.raise_if_inconsistent()
        self.log.complete(CutoverPhase.PREPARE)

    def _gate(self, state: CutoverState, rounds: int = 5) -> CatchUpResult:
        """Forward passes until one takes under the lag gate."""
        result = CatchUpResult(0, 0, 0.0, False)
        for _ in range(rounds):
            result = self.sync.forward(self._state(), passes=20)
            if result.completed:
                return result
            self.echo(f"replay: {result.passes} more passes ({result.applied} changes applied in all); the last "
                      f"took {result.last_pass:.2f} s, the gate is {self.sync.max_lag:g} s")
        raise self._refuse("pass its replay gate", f"a forward pass still took {result.last_pass:.2f} s after "
                           f"{rounds * 20} passes (gate {self.sync.max_lag:g} s); throttle the writers and run again")

    # -- sync -------------------------------------------------------------------------------------

    def sync_once(self) -> SyncPass:
        """One pass each way (live phase), under the lock."""
        with self.locked():
            state = self._live("sync")
            return self.sync.both(state)

    def run_sync(self, *, stop: Callable[[], bool] = lambda: False, interval: float = 0.2,
                 check_every_s: float = 600.0, sample: int = 1000,
                 on_pass: Callable[[SyncPass], None] | None = None) -> None:
        """Sync both ways until ``stop()`` or the cut-over ends; a sampled comparison every ``check_every_s``.

        Started before the cut-over is live (``start`` still copying, holding the lock), it
        waits for it; a transition holding the lock only delays the next round. The schedule
        is kept in the log, not in the process: a comparison is due ``check_every_s`` after the
        last recorded one (a cut-over never compared: after the first pass), so a sync that is
        restarted more often than that still compares.
        """
        while not stop():
            phase = self._state().phase
            if phase in (CutoverPhase.FINISHED, CutoverPhase.ROLLED_BACK):
                return
            done: SyncPass | None = None
            if phase is CutoverPhase.LIVE and self._try_lock():
                try:
                    state = self._state()
                    if state.phase is CutoverPhase.LIVE:
                        done = self.sync.both(state)
                        last = state.findings[-1]["at"] if state.findings else None
                        if last is None or self.wall() >= float(last) + check_every_s:
                            self._check(sample)
                finally:
                    self._release()
            if done is not None and on_pass is not None:
                on_pass(done)
            self.sleep(interval if done is not None else max(interval, 0.5))

    # -- transitions ------------------------------------------------------------------------------

    def _live(self, doing: str) -> CutoverState:
        state = self._state()
        if state.phase is not CutoverPhase.LIVE:
            raise self._refuse(doing, f"it is at {state.phase or 'nothing yet'}; run ddm cutover start first")
        return state

    def advance(self, buckets: Iterable[int], to: BucketState | None = None) -> CutoverStatus:
        """Move ``buckets`` one state on (normal → pre_gray → gray; rollback → gray), or to ``to``."""
        return self._change(list(buckets), to, "advance")

    def rollback(self, buckets: Iterable[int]) -> CutoverStatus:
        """Send ``buckets`` back to the legacy table (gray → rollback, pre_gray → normal)."""
        return self._change(list(buckets), None, "rollback")

    def _change(self, buckets: list[int], to: BucketState | None, how: str) -> CutoverStatus:
        with self.locked():
            state = self._live(f"{how} buckets")
            if state.pending is not None:
                self.echo(f"finishing transition {state.pending.id} first")
                self._run(state.pending)
                state = self._state()
            groups = self._targets(state, buckets, to, how)
            for target, members in groups.items():
                state = self._state()
                transition = Transition(state.next_transition, tuple(members), target)
                self.log.begin_transition(transition)
                self._run(transition)
        return self.status()

    def _targets(self, state: CutoverState, buckets: list[int], to: BucketState | None, how: str
                 ) -> dict[BucketState, list[int]]:
        """Buckets grouped by the state each goes to (one transition per group); refuses an illegal change."""
        if not buckets:
            raise self._refuse(how, "no buckets named")
        out: dict[BucketState, list[int]] = {}
        for b in sorted(set(buckets)):
            if not 0 <= b < state.buckets:
                raise self._refuse(how, f"bucket {b} is outside 0..{state.buckets - 1}")
            now = state.states[b]
            if how == "rollback":
                target = {BucketState.GRAY: BucketState.ROLLBACK, BucketState.PRE_GRAY: BucketState.NORMAL}.get(now)
            else:
                target = to or next_state(now)
            if target is None or target is now:
                continue  # already where it is sent
            if target not in ALLOWED[now]:
                raise self._refuse(how, f"bucket {b} is {now.value}; it may go to "
                                   f"{', '.join(sorted(s.value for s in ALLOWED[now]))}, not {target.value}")
            out.setdefault(target, []).append(b)
        return out

    def _run(self, t: Transition) -> None:
        """Carry ``t`` out from wherever a killed process left it (every step marked or idempotent)."""
        state = self._state()
        before = state.states
        after = tuple(t.to if b in t.buckets else s for b, s in enumerate(before))
        step = f"t{t.id}"
        moves = {authority_of(before[b]) for b in t.buckets} != {authority_of(t.to)}
        positions: dict[str, Any] | None = None
        if moves:
            if t.to is BucketState.GRAY and self.publisher.mark(f"{step}:held") is None:
                self._hold()
                self.publisher.record(f"{step}:held", (self.wall(),))
            started = self.wall()
            self.publisher.publish(f"{step}:paused", self.document(before, t.buckets))
            self.publisher.effective(f"{step}:paused")
            positions = self._switch_positions(step, to_shards=t.to is BucketState.GRAY)
            self.publisher.publish(step, self.document(after))
            self.echo(f"buckets {format_buckets(t.buckets)}: writes paused {self.wall() - started:.1f} s")
        else:
            self.publisher.publish(step, self.document(after))
        self.log.end_transition(t, positions)
        self.echo(f"buckets {format_buckets(t.buckets)} are {t.to.value}")

    def _hold(self) -> None:
        """The gate to gray: forward passes under the lag gate, without a slower one, for ``hold_s``."""
        began = self.clock()
        tries = 0
        while self.clock() - began < self.hold_s or tries == 0:
            result = self.sync.forward(self._state())
            tries += 1
            if result.last_pass >= self.sync.max_lag:
                began = self.clock()  # lag seen: the hold starts again
            if tries > 10_000:
                raise self._refuse("hold its gate", "forward replay never stayed under the lag gate")
            self.sleep(min(0.2, self.hold_s))

    def _switch_positions(self, step: str, *, to_shards: bool) -> dict[str, Any]:
        """Drain the side losing authority and record every server's position (once)."""
        mark = self.publisher.mark(f"{step}:{_POSITIONS}")
        if mark is not None and mark.high_water:
            found: dict[str, Any] = json.loads(str(mark.high_water[0]))
            return found
        state = self._state()
        legacy = self.sync.legacy_server
        if to_shards:
            legacy_at = self.sync.positions()[legacy]
            self.sync.forward(state)  # reads past legacy_at: every legacy change of these buckets is on the shards
            self.sync.drained(FORWARD, {legacy: legacy_at})
            shard_at = self.sync.positions()
        else:
            shard_at = {k: v for k, v in self.sync.positions().items() if k in self.sync.shard_servers}
            self.sync.reverse(state)  # every shard change of these buckets is on the legacy table
            self.sync.drained(REVERSE, shard_at)
            legacy_at = self.sync.positions()[legacy]
        out = {"legacy": {legacy: list(legacy_at)},
               "shards": {k: list(v) for k, v in shard_at.items() if k in self.sync.shard_servers}}
        self.publisher.record(f"{step}:{_POSITIONS}", (json.dumps(out),))
        return out

    # -- check ----------------------------------------------------------------------------------

    def check(self, sample: int = 1000, *, rng: random.Random | None = None) -> CheckReport:
        """Compare ``sample`` random legacy keys field by field with the shards; recorded as a finding."""
        with self.locked():
            self._live("check")
            return self._check(sample, rng)

    def _sides(self) -> tuple[RowSource, RowSource]:
        legacy = RowSource(self.conns, [(self.routing.legacy_name, self.routing.legacy_table)],
                           label=f"{self.routing.legacy_name}.{self.routing.legacy_table}")
        shards = RowSource(self.conns, [(n.data_source, n.table) for n in self.sync.table.data_nodes],
                           label=f"the shards of {self.table}")
        return legacy, shards

    def _check(self, sample: int, rng: random.Random | None = None) -> CheckReport:
        a, b = self._sides()
        checker = Checker(a, b)
        report = checker.sample(sample, rng)
        if report.found:  # written while sampled, or not synced yet: look again after a pass each way
            self.sync.both(self._state())
            keys = [d.key for d in report.differences]
            ra, rb = a.rows_of(keys, checker.shape_a), b.rows_of(keys, checker.shape_b)
            still = [d for d in report.differences if ra.get(d.key) != rb.get(d.key) or d.kind == "precision"]
            report.differences = still
        finding = {"sampled": report.rows_a, "differences": len(report.differences),
                   "precision": sum(1 for d in report.differences if d.kind == "precision"),
                   "rows": [line for d in report.differences[:20] for line in d.lines()], "at": self.wall()}
        self.log.record_finding(finding)
        return report

    # -- the end -----------------------------------------------------------------------------------

    def finish(self) -> CutoverStatus:
        """With every bucket gray: publish the plain sharded configuration; the cut-over is over."""
        with self.locked():
            state = self._live("finish")
            if state.pending is not None:
                self._run(state.pending)
                state = self._state()
            left = [b for b, s in enumerate(state.states) if s is not BucketState.GRAY]
            if left:
                raise self._refuse("finish", f"buckets {format_buckets(left)} are not gray yet")
            self.publisher.publish("plain", dump_native(self.config, secrets="keep"))
            self.publisher.effective("plain")
            self.log.enter(CutoverPhase.FINISHED)
        return self.status()

    def abort(self) -> CutoverStatus:
        """With every bucket on the legacy table: end the cut-over (the all-normal version stays)."""
        with self.locked():
            state = self._state()
            if state.pending is not None:
                self._run(state.pending)
                state = self._state()
            held = [b for b, s in enumerate(state.states) if s is BucketState.GRAY]
            if held:
                raise self._refuse("end on the legacy table", f"buckets {format_buckets(held)} are gray; roll them "
                                   "back first")
            self.publisher.publish("aborted", self.document((BucketState.NORMAL,) * state.buckets))
            self.log.enter(CutoverPhase.ROLLED_BACK)
        return self.status()

    # -- status -------------------------------------------------------------------------------------

    def status(self, *, lag: bool = True) -> CutoverStatus:
        state = self._state()
        copy = state.scans.get(self.sync.forward_scan.name)
        behind: Mapping[str, int | None] = {}
        if lag and state.phase in (CutoverPhase.REPLAY, CutoverPhase.LIVE):
            behind = self.sync.behind(state)
        return CutoverStatus(
            self.name, self.table, f"{self.routing.legacy_name}.{self.routing.legacy_table}", state.phase,
            state.completed, state.stopped, state.states or (BucketState.NORMAL,) * self.buckets, state.pending,
            copy.rows_copied if copy else 0, bool(copy and copy.done), behind,
            state.findings[-1] if state.findings else None, len(state.switches))
