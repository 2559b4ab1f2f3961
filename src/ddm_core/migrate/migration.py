"""The migration as one resumable state machine: ``start``, ``shift_reads``, ``cutover``, ``rollback``, ``finish``.

:class:`Migration` drives the phases of :mod:`ddm_core.migrate.phases` over the
pieces that do the work (prepare, backfill, catch-up, the checker) and
publishes every version the application instances must follow to the
configuration table they watch (docs/migration.md#the-migration-api):

============  ==============================================================
version       what routers do
============  ==============================================================
dual_write    the old configuration plus a ``migration:`` block: writes to
              moving slots go old (authoritative), then new; reads stay old
shift_reads   the same block with ``readShiftPercent``: that share of the
              moving slots is read at the new location
cutover       the block in phase ``cutover``: writes to moving slots refused
target        the new configuration with a block in phase ``finish`` naming the
              old one (watchers accept it: it is the target the block
              announced); writes resume at the new location, reads over several
              shards wait until the old copies are deleted
plain         the plain new configuration, published by ``finish``
old           the plain old configuration: a rollback, in one version
============  ==============================================================

Every step is written to ``ddm_migration`` before it takes effect, and every
side effect is idempotent or guarded by a recorded mark, so a migrator killed
anywhere (SIGKILL) and run again continues where it stopped and redoes no
completed step:

* a phase is *entered* (recorded) before its work; a version is published only
  when no mark ``config:<step>`` says it was, and not at all when the newest
  row of the configuration table already holds exactly its text (the migrator
  died between the commit and the mark);
* a published version is *effective* ``fence_after_s`` + ``poll_s`` after its
  commit: every instance polling every ``poll_s`` seconds has taken it, or has
  not confirmed its version for ``fence_after_s`` and refuses writes to moving
  slots (the router's fence). That moment is recorded as ``effective:<step>``;
* backfill, catch-up and finish keep high-water marks (scans, binlog positions).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import yaml

from ddm_core.errors import MigrationError, MigrationStateError, SourceUnavailableError
from ddm_core.metadata.dump import dump_native
from ddm_core.metadata.instances.fence import FenceProgress
from ddm_core.metadata.migration import migration_document
from ddm_core.metadata.model import ShardingConfig
from ddm_core.metadata.sources.table import TableSource
from ddm_core.migrate.backfill import BATCH_ROWS, BackfillResult, ScanReport, backfill, backfill_scans
from ddm_core.migrate.binlog import binlog_positions
from ddm_core.migrate.catchup import FLUSH_ROWS, MAX_LAG, CatchUpResult, binlog_passes, catch_up
from ddm_core.migrate.checker import CheckReport, Checker, RowSource, migration_sides
from ddm_core.migrate.connections import Connections, config_table_source, connector
from ddm_core.migrate.phases import ROLLBACK_FROM, Phase
from ddm_core.migrate.plan import MigrationPlan, plan_migration
from ddm_core.migrate.prepare import prepare
from ddm_core.migrate.publish import CONFIG_MARK, EFFECTIVE_MARK, Publisher
from ddm_core.migrate.state import Event, MigrationLog, MigrationState, ScanProgress

__all__ = ["Migration", "MigrationStatus", "READ_SHIFT_STEPS"]

#: Differing rows a verification lists (and re-compares after a binlog pass) before it gives up listing.
MAX_LISTED = 100_000

#: The read-shift steps the issue names (any increasing percentages are accepted).
READ_SHIFT_STEPS = (1.0, 10.0, 50.0, 100.0)

# Prefixes of the state table's scan names that are not backfill scans.
_CONFIG, _EFFECTIVE, _FINISH, _STEP, _BINLOG = CONFIG_MARK, EFFECTIVE_MARK, "finish:", "step:", "binlog:"


@dataclass(frozen=True, slots=True)
class MigrationStatus:
    """A migration as ``ddm migrate status`` shows it.

    Attributes:
        name: The migration.
        phase / completed: Where it is (``None``: nothing recorded).
        stopped: The report of the current phase's last stop, if any.
        read_shift_pct: Share of the moving slots read at the new location.
        scans: Backfill scans (one per source physical table), in plan order.
        finish_scans: Deletion scans of :meth:`Migration.finish`.
        binlog: Binlog positions reached per server (``host:port -> (file, position)``).
        catch_up_lag: Seconds the last gate pass took (``None``: no pass yet).
        published: The version of each step published to the configuration table.
        config_version: The newest version in the configuration table (``None``: not read).
        findings: The last verification's result (``rows``, ``transient``, ``differences``).
        write_pause_s: How long writes to moving slots were paused at cutover.
        history: Every ``enter`` / ``complete`` / ``stop`` row.
    """

    name: str
    phase: Phase | None
    completed: bool
    stopped: Any
    read_shift_pct: float
    scans: tuple[ScanProgress, ...]
    finish_scans: tuple[ScanProgress, ...]
    binlog: Mapping[str, tuple[Any, ...]]
    catch_up_lag: float | None
    published: Mapping[str, int]
    config_version: int | None
    findings: Mapping[str, Any] | None
    write_pause_s: float | None
    history: tuple[Event, ...] = field(default=())

    @property
    def rows_copied(self) -> int:
        return sum(s.rows_copied for s in self.scans)


class Migration:
    """One resharding migration from ``old`` to ``new``, step by resumable step.

    Args:
        old / new: The configuration serving now and the one to migrate to.
        name: The migration's name in ``ddm_migration``.
        state_on: Data source of ``old`` holding the ``ddm_migration`` table.
        config_source: Data source of ``old`` holding the ``ddm_config`` table the
            application instances watch, or a :class:`TableSource`.
        conns: Connections to both configurations' data sources (default: opened here,
            closed by :meth:`close`).
        batch: Rows per backfill (and finish) batch.
        max_rows_per_s: Ceiling on rows read per second by backfill and finish.
        max_replica_lag_s: Backfill pauses while the source's replicas lag more than this.
        fence_after_s: The ``fenceAfterSeconds`` published: an instance that did not
            confirm its version for this long refuses writes to moving slots.
        poll_s: How often the application instances poll the configuration table.
        fence_timeout_s: How long a step waits for the registered instances to take its
            version (docs/operations.md#instance-registry); ``on_fence`` sees each look.
        observation_s: Seconds after cutover before :meth:`finish` may delete old rows.
        max_lag: The catch-up gate, seconds.
        verify_cutover: Compare the moving slots once more while writes are paused.
        chunk_rows: The checker's chunk size.
        rate: Copy rate for the plan recorded at prepare (``None``: measured).
        echo: Called with a line of text for each step taken.
        on_scan: Called with each backfill scan's report after each batch.
        on_catch_up: Called as ``on_catch_up(pass, changes applied)`` during catch-up.
        on_catch_up_pass: Called as ``on_catch_up_pass(pass, seconds it took)`` after each catch-up pass.
    """

    def __init__(
        self,
        old: ShardingConfig,
        new: ShardingConfig,
        *,
        name: str,
        state_on: str,
        config_source: str | TableSource,
        conns: Connections | None = None,
        batch: int = BATCH_ROWS,
        max_rows_per_s: float | None = None,
        max_replica_lag_s: float | None = None,
        fence_after_s: float = 5.0,
        poll_s: float = 1.0,
        observation_s: float = 0.0,
        max_lag: float = MAX_LAG,
        pass_timeout: float = 120.0,
        flush_rows: int = FLUSH_ROWS,
        verify_cutover: bool = True,
        verify_rounds: int = 5,
        chunk_rows: int = 10_000,
        rate: float | None = None,
        echo: Callable[[str], None] | None = None,
        on_scan: Callable[[ScanReport], None] | None = None,
        on_catch_up: Callable[[int, int], None] | None = None,
        on_catch_up_pass: Callable[[int, float], None] | None = None,
        fence_timeout_s: float = 60.0,
        on_fence: Callable[[FenceProgress], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if fence_after_s <= 0 or poll_s <= 0:
            raise MigrationError(f"migration {name!r}: fence_after_s and poll_s must be > 0 "
                                 f"(not {fence_after_s:g} and {poll_s:g})", migration=name)
        self.old, self.new, self.name = old, new, name
        self._own_conns = conns is None
        self.conns = conns if conns is not None else Connections(old, new)
        self.log = MigrationLog(connector(old, state_on), name)
        if isinstance(config_source, TableSource):
            self.source = config_source
            self.config_on: str | None = None
        else:
            self.source = config_table_source(old, config_source)
            self.config_on = config_source
        self.batch, self.max_rows_per_s, self.max_replica_lag_s = batch, max_rows_per_s, max_replica_lag_s
        self.fence_after_s, self.poll_s, self.observation_s = float(fence_after_s), float(poll_s), observation_s
        self.max_lag, self.pass_timeout, self.flush_rows = max_lag, pass_timeout, flush_rows
        self.verify_cutover, self.verify_rounds, self.chunk_rows, self.rate = (
            verify_cutover, verify_rounds, chunk_rows, rate)
        self.echo = echo or (lambda line: None)
        self.on_scan, self.on_catch_up, self.on_catch_up_pass = on_scan, on_catch_up, on_catch_up_pass
        self.fence_timeout_s, self.on_fence = fence_timeout_s, on_fence
        self.clock, self.sleep, self.wall = clock, sleep, wall
        self._plan: MigrationPlan | None = None
        self._publisher: Publisher | None = None
        self._ready = False
        self._sides: list[tuple[RowSource, RowSource, Any, Any]] | None = None
        self.last_backfill: BackfillResult | None = None
        self.last_check: CheckReport | None = None

    # -- plumbing ---------------------------------------------------------------------------

    def close(self) -> None:
        if self._publisher is not None:
            self._publisher.close()
        self.log.close()
        self.source.close()
        if self._own_conns:
            self.conns.close()

    def __enter__(self) -> "Migration":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def plan(self) -> MigrationPlan:
        """The moves (no rows counted: the steps need only which slots go where)."""
        if self._plan is None:
            self._plan = plan_migration(self.old, self.new, count="none", rate=1.0)
        return self._plan

    def _state(self) -> MigrationState:
        if not self._ready:  # every step may be the first one run against a fresh data source
            self.log.create_table()
            self._ready = True
        return self.log.state()

    def _refuse(self, doing: str, why: str) -> MigrationStateError:
        state = self._state()
        return MigrationStateError(f"migration {self.name!r} cannot {doing}: {why}", migration=self.name,
                                   phase=state.phase)

    def _mark(self, state: MigrationState, key: str) -> ScanProgress | None:
        return state.scans.get(key)

    # -- the configuration table --------------------------------------------------------------

    def document(self, phase: str, pct: float = 0.0) -> str:
        """The text published for a migration phase (old config + ``migration:`` block).

        Phase ``finish`` (published at cutover) is the new config with a block naming the old one:
        its tables hold copies of the moved rows until :meth:`finish` deletes them, so reads over
        several shards are refused meanwhile (docs/migration.md#routing-during-a-migration).
        """
        base, target = (self.new, self.old) if phase == "finish" else (self.old, self.new)
        doc = migration_document(base, target, name=self.name, phase=phase, read_shift_pct=pct,
                                 fence_after_s=self.fence_after_s)
        text: str = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
        return text

    @property
    def publisher(self) -> Publisher:
        if self._publisher is None:
            self._state()  # the state table exists before the first mark is read
            self._publisher = Publisher(self.log, self.source, fence_after_s=self.fence_after_s, poll_s=self.poll_s,
                                        echo=self.echo, sleep=self.sleep, wall=self.wall,
                                        fence_timeout_s=self.fence_timeout_s, on_fence=self.on_fence)
        return self._publisher

    # -- start: prepare, dual write, backfill, catch-up, verify ----------------------------------

    def start(self) -> MigrationStatus:
        """Run (or resume) every phase up to a completed verification.

        Raises:
            SchemaMismatchError: prepare found differing schemas.
            BackfillMismatchError: a backfill batch kept differing.
            MigrationError: catch-up did not reach its gate, or verification kept finding differences.
            MigrationStateError: the migration is past verification (or over).
        """
        self.log.create_table()
        self.source.create_table()
        state = self._state()
        if state.phase is not None and state.phase not in (Phase.PREPARE, Phase.DUAL_WRITE, Phase.BACKFILL,
                                                             Phase.CATCH_UP, Phase.VERIFY):
            raise self._refuse("start", f"it is at {state.phase}")
        if state.phase is None or (state.phase is Phase.PREPARE and not state.completed):
            self._need_binlog()
            self.echo("prepare: creating target tables and checking schemas")
            plan = plan_migration(self.old, self.new, conns=self.conns, count="estimate", rate=self.rate)
            prepare(self.old, self.new, plan, self.conns, self.log)
            state = self._state()
        if state.phase is Phase.PREPARE:
            state = self.log.enter(Phase.DUAL_WRITE, state=state)
        if state.phase is Phase.DUAL_WRITE and not state.completed:
            version = self.publisher.publish("dual_write", self.document("dual_write"))
            self.publisher.effective("dual_write")
            state = self.log.complete(Phase.DUAL_WRITE, detail={"version": version})
        if state.phase in (Phase.DUAL_WRITE, Phase.BACKFILL) and not (
                state.phase is Phase.BACKFILL and state.completed):
            self.echo("backfill: copying the moving slots")
            self.last_backfill = backfill(
                self.old, self.new, self.plan, self.conns, self.log, batch=self.batch,
                max_rows_per_s=self.max_rows_per_s, max_replica_lag_s=self.max_replica_lag_s,
                progress=self.on_scan, clock=self.clock, sleep=self.sleep, under_writes=True)
            state = self._state()
        if state.phase is Phase.BACKFILL or (state.phase is Phase.CATCH_UP and not state.completed):
            self._catch_up()
            state = self._state()
        if state.phase is Phase.CATCH_UP or (state.phase is Phase.VERIFY and not state.completed):
            self.verify()
        return self.status()

    def _need_binlog(self) -> None:
        """Refuse before any work when a source server has no binlog position to catch up from."""
        sources = sorted({scan.source for scan in backfill_scans(self.old, self.new, self.plan)})
        missing = [server for server, at in binlog_positions(self.old, self.conns, sources).items() if at is None]
        if missing:
            raise MigrationError(
                f"migration {self.name!r}: server {', '.join(missing)} shows no binlog position (SHOW MASTER STATUS); "
                "catch-up under live writes needs log_bin and binlog_format=ROW there", migration=self.name)

    def _catch_up(self, rounds: int = 5) -> CatchUpResult:
        """The catch-up phase until its gate passes (at most ``rounds`` calls of 20 passes)."""
        self.echo("catch-up: applying the binlog since the backfill started")
        result = CatchUpResult(0, 0, 0.0, False)
        for _ in range(rounds):
            result = catch_up(self.old, self.new, self.plan, self.conns, self.log, max_lag=self.max_lag,
                              pass_timeout=self.pass_timeout, flush_rows=self.flush_rows, clock=self.clock,
                              progress=self.on_catch_up, on_pass=self.on_catch_up_pass)
            if result.completed:
                return result
        raise MigrationError(
            f"migration {self.name!r}: catch-up did not get under {self.max_lag:g} s of lag in {result.passes} "
            f"passes (last {result.last_pass:.2f} s); throttle the application or raise max_lag, and run again",
            migration=self.name)

    def _passes(self, why: str) -> CatchUpResult:
        """Binlog passes in the current phase until one is under the gate (the lag < ``max_lag``)."""
        state = self._state()
        assert state.phase is not None
        self.echo(f"catch-up pass ({why})")
        result = binlog_passes(self.old, self.new, self.plan, self.conns, self.log, phase=state.phase,
                               max_lag=self.max_lag, pass_timeout=self.pass_timeout, flush_rows=self.flush_rows,
                               clock=self.clock, progress=self.on_catch_up, on_pass=self.on_catch_up_pass)
        if not result.completed:
            raise MigrationError(
                f"migration {self.name!r}: the binlog pass before {why} took {result.last_pass:.2f} s, over the "
                f"gate of {self.max_lag:g} s, {result.passes} times; run the step again", migration=self.name)
        return result

    # -- verify ------------------------------------------------------------------------------

    def check(self) -> CheckReport:
        """The checker over every moving slot (old location against new); changes nothing."""
        total: CheckReport | None = None
        for table, a, b in migration_sides(self.old, self.new, self.plan, self.conns):
            report = Checker(a, b, chunk_rows=self.chunk_rows, max_listed=MAX_LISTED).check()
            if total is None:
                total = report
                total.a, total.b = "old locations", "new locations"
            else:
                total.merge(report)
        self.last_check = total if total is not None else CheckReport("old locations", "new locations")
        return self.last_check

    def _settled(self, why: str, rounds: int = 3) -> tuple[CheckReport, int]:
        """A full check, then differing rows re-compared after binlog passes (rows written while
        the checker read them). Returns the check and how many differences remain."""
        report = self.check()
        if report.consistent:
            return report, 0
        if not report.listed_all:
            return report, report.found
        pending = sorted({tuple(d.key) for d in report.differences if d.kind not in ("precision", "collation")})
        for _ in range(rounds):
            self._passes(why)
            pending = self._still_differing(pending)
            if not pending:
                return report, 0
        return report, len(pending)

    def _still_differing(self, keys: list[Any]) -> list[Any]:
        """Which of ``keys`` differ now between the old and the new location (rows read by key)."""
        if self._sides is None:
            self._sides = []
            for _, a, b in migration_sides(self.old, self.new, self.plan, self.conns):
                checker = Checker(a, b, chunk_rows=self.chunk_rows)
                self._sides.append((a, b, checker.shape_a, checker.shape_b))
        left: set[Any] = set()
        for a, b, shape_a, shape_b in self._sides:
            ra, rb = a.rows_of(keys, shape_a), b.rows_of(keys, shape_b)
            left.update(k for k in set(ra) | set(rb) if ra.get(k) != rb.get(k))
        return sorted(left)

    def verify(self) -> CheckReport:
        """Run (or resume) the verify phase; differences send the migration back to catch-up.

        Past verification, only compares (records nothing).

        Raises:
            MigrationError: differences remained after ``verify_rounds`` rounds of catch-up.
        """
        state = self._state()
        if state.phase in (Phase.SHIFT_READS, Phase.CUTOVER) or (state.phase is Phase.VERIFY and state.completed):
            return self.check()
        if not (state.phase is Phase.VERIFY or (state.phase is Phase.CATCH_UP and state.completed)):
            raise self._refuse("verify", f"verification follows a completed catch-up, it is at {state.phase}"
                               + ("" if state.completed else " (not completed)"))
        for _ in range(self.verify_rounds):
            state = self.log.enter(Phase.VERIFY)
            self.echo("verify: comparing every moving slot, old against new")
            report, left = self._settled("verifying")
            findings = {"rows": report.rows_a, "transient": report.found - left, "differences": left,
                        "summary": report.summary()}
            if left == 0:
                self.log.complete(Phase.VERIFY, detail=findings)
                return report
            self.log.stop(Phase.VERIFY, findings)
            self.echo(f"verify: {left} rows differ; back to catch-up")
            self.log.enter(Phase.CATCH_UP)
            self._catch_up()
        raise MigrationError(f"migration {self.name!r}: verification still finds differences after "
                             f"{self.verify_rounds} rounds of catch-up: {report.summary()}", migration=self.name)

    # -- read shift ----------------------------------------------------------------------------

    def shift_reads(self, pct: float) -> MigrationStatus:
        """Send ``pct`` % of the moving slots' reads to the new location (monotone: 1 -> 10 -> 50 -> 100).

        Raises:
            MigrationStateError: verification is not completed, or ``pct`` is lower than the current
                share (use :meth:`rollback` to go back).
        """
        pct = float(pct)
        if not 0.0 < pct <= 100.0:
            raise MigrationError(f"migration {self.name!r}: a read shift is a percentage in (0, 100], not {pct:g}",
                                 migration=self.name)
        state = self._state()
        if state.phase is Phase.VERIFY and state.completed:
            state = self.log.enter(Phase.SHIFT_READS, state=state)
        elif state.phase is not Phase.SHIFT_READS:
            raise self._refuse(f"shift reads to {pct:g} %", f"reads shift after a completed verification; it is at "
                               f"{state.phase or 'no phase'}")
        if pct < state.read_shift_pct:
            raise self._refuse(f"shift reads to {pct:g} %", f"reads are shifted {state.read_shift_pct:g} % already; "
                               "the shift only grows (roll back to return every read)")
        step = f"shift_reads:{pct:g}"
        if self._mark(state, _CONFIG + step) is None:
            self._passes(f"shifting reads to {pct:g} %")
            if state.read_shift_pct != pct:
                self.log.set_read_shift(pct)
            self.publisher.publish(step, self.document("shift_reads", pct))
        self.publisher.effective(step)
        state = self._state()
        if pct == 100.0 and not state.completed:
            self.log.complete(Phase.SHIFT_READS, detail={"read_shift_pct": pct})
        return self.status()

    # -- cutover ---------------------------------------------------------------------------

    def cutover(self) -> MigrationStatus:
        """Pause writes to the moving slots, catch up to the binlog's end, publish the new configuration.

        Writes to the moving slots are paused from the commit of the ``cutover`` version
        to the commit of the target version; the time is recorded (``write_pause_s``).

        Raises:
            MigrationStateError: reads are not shifted 100 % yet.
            MigrationError: the final comparison found differences (writes stay paused: run
                ``cutover`` again after fixing the cause).
        """
        state = self._state()
        if state.phase is Phase.CUTOVER and state.completed:
            return self.status()
        if state.phase is Phase.SHIFT_READS and state.completed:
            state = self.log.enter(Phase.CUTOVER, state=state)
        elif state.phase is not Phase.CUTOVER:
            raise self._refuse("cut over", f"cutover follows reads shifted 100 %; it is at "
                               f"{state.phase or 'no phase'} ({state.read_shift_pct:g} %)")
        self.publisher.publish("cutover", self.document("cutover", 100.0))
        self.publisher.effective("cutover")
        state = self._state()
        if self._mark(state, _STEP + "cutover:caught_up") is None:
            self._passes("the cutover")  # writes to moving slots are refused: this reaches the binlog's end
            self.publisher.record(_STEP + "cutover:caught_up", (self.wall(),))
        if self.verify_cutover and self._mark(self._state(), _STEP + "cutover:verified") is None:
            report, left = self._settled("the cutover")
            if left:
                self.log.stop(Phase.CUTOVER, {"differences": left, "summary": report.summary()})
                raise MigrationError(
                    f"migration {self.name!r}: at cutover {left} rows of moving slots differ between old and new "
                    f"({report.summary()}); writes to them stay paused; run cutover again", migration=self.name)
            self.publisher.record(_STEP + "cutover:verified", (report.rows_a,))
        self.publisher.publish("target", self.document("finish"))  # the new placement; old copies still there
        fenced, resumed = self.publisher.published_at("cutover"), self.publisher.published_at("target")
        pause = resumed - fenced if fenced is not None and resumed is not None else None
        self.publisher.effective("target")
        if self._state().phase is Phase.CUTOVER and self._state().stopped is not None:
            self.log.enter(Phase.CUTOVER)  # clears the stop of an earlier attempt
        self.log.complete(Phase.CUTOVER, detail={"write_pause_s": pause, "at": self.wall()})
        self.echo(f"cutover completed: writes to the moving slots were paused {pause or 0:.2f} s")
        return self.status()

    # -- rollback --------------------------------------------------------------------------

    def rollback(self) -> MigrationStatus:
        """Return every read and write to the old location in one version (until cutover).

        The old location stayed authoritative throughout (every write reached it first),
        so nothing is lost; the rows copied to the new location are left as they are.
        """
        state = self._state()
        if not (state.phase is Phase.ROLLED_BACK and not state.completed):
            if state.phase is Phase.ROLLED_BACK:
                return self.status()
            # During a cutover the old location is complete until the new placement is published.
            cutting = state.phase is Phase.CUTOVER and not state.completed
            if state.phase not in ROLLBACK_FROM and not cutting:
                raise self._refuse("roll back", f"rollback is possible until {Phase.CUTOVER} completes; it is at "
                                   f"{state.phase or 'no phase'}")
            if cutting and (self._mark(state, _CONFIG + "target") is not None
                            or self.publisher.newest()[1] == self.document("finish")):  # published, then killed
                raise self._refuse("roll back", "the cutover published the new placement already: writes go "
                                   "there only; run cutover again to complete it")
            self.log.enter(Phase.ROLLED_BACK, state=state)
        self.publisher.publish("rolled_back", dump_native(self.old, secrets="keep"))
        self.publisher.effective("rolled_back")
        self.log.complete(Phase.ROLLED_BACK)
        self.echo("rolled back: every read and write goes to the old location")
        return self.status()

    # -- finish ------------------------------------------------------------------------------

    def finish(self, archive: str | None = None) -> MigrationStatus:
        """Delete the moving slots' rows from their old tables (after the observation period).

        Args:
            archive: Copy each deleted row first to ``<old physical table><archive>`` on the same data
                source (created ``LIKE`` the table), e.g. ``"_archive"``.

        Raises:
            MigrationStateError: cutover is not completed.
            MigrationError: the observation period is not over.
        """
        from ddm_core.migrate.finish import finish_scans

        state = self._state()
        if state.phase is Phase.FINISH and state.completed:
            return self.status()
        if state.phase is Phase.CUTOVER and state.completed:
            done_at = _detail_of(state, Phase.CUTOVER, "complete").get("at")
            if done_at is not None and self.wall() < float(done_at) + self.observation_s:
                raise MigrationError(
                    f"migration {self.name!r}: the observation period after cutover ends in "
                    f"{float(done_at) + self.observation_s - self.wall():.0f} s; finish deletes the old rows after it",
                    migration=self.name)
            self.log.enter(Phase.FINISH, detail={"archive": archive}, state=state)
        elif state.phase is not Phase.FINISH:
            raise self._refuse("finish", f"finish follows a completed cutover; it is at {state.phase or 'no phase'}")
        else:
            archive = _detail_of(state, Phase.FINISH, "enter").get("archive", archive)
        deleted = finish_scans(self.old, self.new, self.plan, self.conns, self.log, batch=self.batch,
                               archive=archive, max_rows_per_s=self.max_rows_per_s, clock=self.clock,
                               sleep=self.sleep, echo=self.echo)
        self.publisher.publish("plain", dump_native(self.new, secrets="keep"))  # no copies left: every read allowed
        self.publisher.effective("plain")
        self.log.complete(Phase.FINISH, detail={"deleted": deleted, "archive": archive})
        self.echo(f"finish: {deleted:,} old rows of moved slots deleted" + (f" (archived to *{archive})" if archive
                                                                             else ""))
        return self.status()

    # -- status ----------------------------------------------------------------------------

    def status(self, *, read_config: bool = True) -> MigrationStatus:
        """The migration as its rows say (and the configuration table's newest version)."""
        state = self._state()
        version: int | None = None
        if read_config:
            try:
                version = self.source.latest_version()
            except SourceUnavailableError:  # no table yet (nothing published), or unreachable: not shown
                version = None
        return status_of(state, self.old, self.new, self.plan, version)


def status_of(state: MigrationState, old: ShardingConfig | None, new: ShardingConfig | None,
              plan: MigrationPlan | None, config_version: int | None) -> MigrationStatus:
    """:class:`MigrationStatus` of a folded state (``old``/``new``/``plan`` order the scans when given)."""
    order = [s.name for s in backfill_scans(old, new, plan)] if old and new and plan else []
    special = (_CONFIG, _EFFECTIVE, _FINISH, _STEP, _BINLOG)
    scans = [s for n, s in state.scans.items() if not n.startswith(special)]
    scans.sort(key=lambda s: order.index(s.scan) if s.scan in order else len(order))
    if order:  # scans not started yet, shown at 0
        seen = {s.scan for s in scans}
        scans.extend(ScanProgress(n) for n in order if n not in seen)
        scans.sort(key=lambda s: order.index(s.scan) if s.scan in order else len(order))
    published = {n[len(_CONFIG):]: int(s.high_water[0]) for n, s in state.scans.items()
                 if n.startswith(_CONFIG) and s.high_water}
    lag: float | None = None
    findings: dict[str, Any] | None = None
    pause: float | None = None
    for ev in state.history:
        detail = ev.detail if isinstance(ev.detail, dict) else {}
        if ev.event == "complete" and ev.phase is Phase.CATCH_UP and "last_pass" in detail:
            lag = float(detail["last_pass"])
        if ev.phase is Phase.VERIFY and ev.event in ("complete", "stop") and "differences" in detail:
            findings = detail
        if ev.event == "complete" and ev.phase is Phase.CUTOVER and detail.get("write_pause_s") is not None:
            pause = float(detail["write_pause_s"])
    return MigrationStatus(
        state.name, state.phase, state.completed, state.stopped, state.read_shift_pct, tuple(scans),
        tuple(s for n, s in state.scans.items() if n.startswith(_FINISH)),
        {n[len(_BINLOG):]: tuple(s.high_water) for n, s in state.scans.items()
         if n.startswith(_BINLOG) and s.high_water},
        lag, published, config_version, findings, pause, state.history,
    )


def _detail_of(state: MigrationState, phase: Phase, event: str) -> dict[str, Any]:
    for ev in reversed(state.history):
        if ev.phase is phase and ev.event == event and isinstance(ev.detail, dict):
            return dict(ev.detail)
    return {}
