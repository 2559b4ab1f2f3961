"""The ``ddm_migration`` table: every step of a migration as a row, so a killed migrator resumes.

As in a Vitess workflow, the state is written down before it takes effect and
lives next to the data, on a configured data source. The table is append-only:
each row is one event of one migration, numbered ``seq`` 1, 2, 3... within it,
and carries the phase and the read-shift percentage in force after it:

=============  ===================================================================
event          meaning
=============  ===================================================================
``enter``      a phase's work starts (``detail``: the plan, on entering prepare)
``complete``   its work is done and its gate passed: the next phase may be entered
``batch``      a slot's copy reached ``high_water`` (the primary key of its last
               row, JSON), ``rows_copied`` rows so far, ``checksum`` of the batch
``slot_done``  a slot is copied completely
``scan``       a backfill scan (one source physical table, ``detail.scan``) reached
               ``high_water`` with ``rows_copied`` moving rows so far and the
               ``checksum`` of the batch (docs/migration.md#backfill)
``scan_done``  that scan is complete
``read_shift`` ``read_shift_pct`` of the moving slots' reads go to the new location
``stop``       the phase stopped with a report (``detail``); fixing the cause and
               running the step again resumes it
=============  ===================================================================

The current state is the fold of the rows (:meth:`MigrationLog.state`). Every
append names the ``seq`` it follows; the primary key ``(migration, seq)``
makes a second migrator working on the same migration fail at its first
write instead of interleaving with the first (:class:`~ddm_core.errors.MigrationStateError`).
"""

from __future__ import annotations

import abc
import json
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Generic, Mapping, Protocol, Sequence, TypeVar

from ddm_core.errors import MigrationError, MigrationStateError
from ddm_core.metadata.sources.kept_connection import KeptConnection
from ddm_core.migrate.checkpoint import CHECKPOINT, CHECKPOINT_EVERY, PHASE_ROWS, encode, expand, last_of
from ddm_core.migrate.event import Event
from ddm_core.migrate.phases import Phase, may_enter

__all__ = ["WorkflowLog", "MigrationLog", "MigrationState", "PhaseTrack", "fold_scans", "SlotProgress", "ScanProgress", "Event", "DEFAULT_TABLE",
           "create_table_sql"]

#: The state table's default name.
DEFAULT_TABLE = "ddm_migration"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,63}")
_MIGRATION = re.compile(r"[A-Za-z0-9_.:-]{1,64}")

_CREATE = """CREATE TABLE IF NOT EXISTS `{table}` (
  migration VARCHAR(64) CHARACTER SET ascii NOT NULL,
  seq BIGINT UNSIGNED NOT NULL,
  event VARCHAR(16) CHARACTER SET ascii NOT NULL,
  phase VARCHAR(16) CHARACTER SET ascii NOT NULL,
  slot INT NULL,
  high_water TEXT NULL,
  rows_copied BIGINT UNSIGNED NULL,
  checksum VARCHAR(32) CHARACTER SET ascii NULL,
  read_shift_pct DECIMAL(6,3) NOT NULL DEFAULT 0,
  detail MEDIUMTEXT NULL,
  created TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (migration, seq),
  KEY by_slot (migration, slot, seq),
  KEY by_event (migration, event, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""

_COLUMNS = "seq, event, phase, slot, high_water, rows_copied, checksum, read_shift_pct, detail, created"


def create_table_sql(table: str = DEFAULT_TABLE) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for the state table (MySQL / MariaDB)."""
    if not _NAME.fullmatch(table):
        raise MigrationError(f"migration state table name {table!r} must be a plain identifier", table=table)
    return _CREATE.format(table=table)


@dataclass(frozen=True, slots=True)
class SlotProgress:
    """How far the copy of one slot is.

    Attributes:
        slot: The slot.
        high_water: Primary key of the last row copied (``None``: nothing yet).
        rows_copied: Rows copied so far.
        checksum: Checksum of the last batch.
        done: The slot is copied completely.
    """

    slot: int
    high_water: tuple[Any, ...] | None = None
    rows_copied: int = 0
    checksum: str | None = None
    done: bool = False


@dataclass(frozen=True, slots=True)
class ScanProgress:
    """How far a backfill scan of one source physical table is (the fields of :class:`SlotProgress`)."""

    scan: str
    high_water: tuple[Any, ...] | None = None
    rows_copied: int = 0
    checksum: str | None = None
    done: bool = False


@dataclass(frozen=True, slots=True)
class MigrationState:
    """A migration as its rows say.

    Attributes:
        name: The migration.
        phase: The phase in force (``None``: nothing recorded yet).
        completed: Whether that phase's work is done.
        read_shift_pct: Percentage of moving slots' reads sent to the new location.
        slots: Progress per slot that has any.
        seq: The last row's number (0: none).
        plan: The plan recorded on entering prepare.
        stopped: The report of the last ``stop`` of the current phase, if it has not
            been entered again since.
        history: Every ``enter`` / ``complete`` / ``stop`` row, in order.
        scans: Progress per backfill scan that has any.
    """

    name: str
    phase: Phase | None = None
    completed: bool = False
    read_shift_pct: float = 0.0
    slots: Mapping[int, SlotProgress] = field(default_factory=dict)
    seq: int = 0
    plan: Any = None
    stopped: Any = None
    history: tuple[Event, ...] = ()
    scans: Mapping[str, ScanProgress] = field(default_factory=dict)


@dataclass(slots=True)
class PhaseTrack:
    """The fold of the phase rows every workflow has: ``enter``, ``complete``, ``stop``."""

    completed: bool = False
    stopped: Any = None
    history: list[Event] = field(default_factory=list)

    def see(self, ev: Event) -> bool:
        """Take ``ev`` if it is a phase row (``True``), else leave it to the caller."""
        if ev.event == "enter":
            self.completed, self.stopped = False, None
        elif ev.event == "complete":
            self.completed = True
        elif ev.event == "stop":
            self.stopped = ev.detail
        else:
            return False
        self.history.append(ev)
        return True


def _scan_name(ev: Event) -> str | None:
    if ev.event in ("scan", "scan_done") and isinstance(ev.detail, dict) and "scan" in ev.detail:
        return str(ev.detail["scan"])
    return None


def fold_scans(events: Sequence[Event]) -> dict[str, ScanProgress]:
    """Progress per scan from the ``scan`` / ``scan_done`` rows (the last row of each scan wins)."""
    scans: dict[str, ScanProgress] = {}
    for ev in events:
        name = _scan_name(ev)
        if name is not None:
            scans[name] = ScanProgress(name, ev.high_water, ev.rows_copied or 0, ev.checksum, ev.event == "scan_done")
    return scans


def _fold(name: str, events: Sequence[Event]) -> MigrationState:
    phase: Phase | None = None
    shift = 0.0
    slots: dict[int, SlotProgress] = {}
    plan: Any = None
    track = PhaseTrack()
    for ev in events:
        phase, shift = ev.phase, ev.read_shift_pct
        if track.see(ev):
            if ev.event == "enter" and ev.phase is Phase.PREPARE and ev.detail is not None:
                plan = ev.detail
        elif ev.event in ("batch", "slot_done") and ev.slot is not None:
            was = slots.get(ev.slot, SlotProgress(ev.slot))
            slots[ev.slot] = SlotProgress(
                ev.slot,
                ev.high_water if ev.high_water is not None else was.high_water,
                ev.rows_copied if ev.rows_copied is not None else was.rows_copied,
                ev.checksum if ev.checksum is not None else was.checksum,
                ev.event == "slot_done",
            )
    return MigrationState(
        name, phase, track.completed, shift, slots, events[-1].seq if events else 0, plan, track.stopped,
        tuple(track.history), fold_scans(events),
    )


class _StateLike(Protocol):
    """What every workflow's folded state says (what :class:`WorkflowLog` relies on)."""

    @property
    def phase(self) -> Any: ...
    @property
    def completed(self) -> bool: ...
    @property
    def seq(self) -> int: ...
    @property
    def stopped(self) -> Any: ...


S = TypeVar("S", bound=_StateLike)
_L = TypeVar("_L", bound="WorkflowLog[Any]")


class WorkflowLog(abc.ABC, Generic[S]):
    """The rows of one workflow (a migration, a cut-over) in its append-only state table.

    The storage and the steps every workflow shares: phases entered, completed
    and stopped by the rules of ``may_enter``, and scan progress. Subclasses
    name their phase enum, transition rule, default table and what the rows
    fold to.

    Args:
        connect: Returns a new DB-API connection (MySQL / MariaDB, autocommit)
            to the data source holding the table
            (:func:`ddm_core.migrate.connector`).
        name: The workflow (letters, digits, ``_ . : -``; at most 64).
        table: The state table.
        checkpoint_every: A checkpoint row once this many rows follow the last one.
    """

    #: The phase enum stored in the ``phase`` column.
    phases: type[Enum] = Phase
    #: How messages name the workflow.
    kind = "migration"
    #: How messages name the process running it.
    actor = "migrator"
    default_table = DEFAULT_TABLE

    def __init__(self, connect: Callable[[], Any], name: str, *, table: str | None = None,
                 checkpoint_every: int = CHECKPOINT_EVERY) -> None:
        if not _MIGRATION.fullmatch(name):
            raise MigrationError(
                f"{self.kind} name {name!r} must be 1-64 letters, digits, '_', '.', ':' or '-'", migration=name
            )
        table = table or self.default_table
        create_table_sql(table)  # checks the name
        self.name = name
        self.table = table
        self._kept = KeptConnection(connect)
        self.checkpoint_every = checkpoint_every
        self._indexed = False
        self._since_checkpoint = 0  # rows after the last checkpoint, as this process last read or wrote them

    @staticmethod
    def may_enter(current: Any, completed: bool, target: Any) -> str | None:
        """Why ``target`` cannot be entered from ``current`` (``None``: it can)."""
        return may_enter(current, completed, target)

    # -- storage ---------------------------------------------------------------------------

    def _cursor_run(self, what: str, work: Callable[[Any], Any]) -> Any:
        return self._kept.run(
            work,
            lambda exc: MigrationError(
                f"{self.kind} {self.name!r}: cannot {what} in table {self.table!r}: {exc}",
                migration=self.name,
                table=self.table,
            ),
        )

    def transact(self, what: str, work: Callable[[Any], Any]) -> Any:
        """``work(cursor)`` in one transaction on the table's connection (a failure rolls it back)."""

        def run(cur: Any) -> Any:
            cur.execute("START TRANSACTION")
            try:
                done = work(cur)
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")
            return done

        return self._cursor_run(what, run)

    def close(self) -> None:
        self._kept.close()

    def __enter__(self: _L) -> _L:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create_table(self) -> None:
        """Create the state table if it does not exist (one made by an older version gets its checkpoint index)."""
        self._cursor_run("create the table", lambda cur: cur.execute(create_table_sql(self.table)))
        self._indexed = False
        self.upgrade()

    def upgrade(self) -> None:
        """Give a state table made before checkpoints the index that finds its last checkpoint (once per process).

        Without it every read still works, but finds the last checkpoint by
        reading all of the workflow's rows.
        """
        if self._indexed:
            return

        def add(cur: Any) -> None:
            cur.execute("SELECT 1 FROM information_schema.statistics WHERE table_schema = DATABASE() "
                        "AND table_name = %s AND index_name = 'by_event' LIMIT 1", (self.table,))
            if cur.fetchone() is not None:
                return
            try:
                cur.execute(f"ALTER TABLE `{self.table}` ADD KEY by_event (migration, event, seq)")
            except Exception as exc:  # 1061: another process added it meanwhile
                if not exc.args or exc.args[0] != 1061:
                    raise

        self._cursor_run("add the checkpoint index", add)
        self._indexed = True

    def events(self, *, upto: int | None = None) -> list[Event]:
        """Every row of this workflow still in the table, in order (``upto``: up to that step)."""
        phases = self.phases
        bound = "" if upto is None else " AND seq <= %s"
        args = (self.name,) if upto is None else (self.name, upto)

        def read(cur: Any) -> list[Event]:
            cur.execute(f"SELECT {_COLUMNS} FROM `{self.table}` WHERE migration = %s{bound} ORDER BY seq", args)
            return [_event(row, phases) for row in cur.fetchall()]

        found: list[Event] = self._cursor_run("read the state", read)
        return found

    def tail(self) -> list[Event]:
        """The last checkpoint row (if any) and every row after it: what :meth:`state` folds."""
        phases = self.phases

        def read(cur: Any) -> list[Event]:
            cur.execute(f"SELECT MAX(seq) FROM `{self.table}` WHERE migration = %s AND event = %s",
                        (self.name, CHECKPOINT))
            found = cur.fetchone()
            start = int(found[0]) if found and found[0] is not None else 0
            cur.execute(f"SELECT {_COLUMNS} FROM `{self.table}` WHERE migration = %s AND seq >= %s ORDER BY seq",
                        (self.name, start))
            return [_event(row, phases) for row in cur.fetchall()]

        rows: list[Event] = self._cursor_run("read the state", read)
        self._since_checkpoint = len(rows) - (1 if rows and rows[0].event == CHECKPOINT else 0)
        return rows

    def state(self) -> S:
        """The workflow as its rows say now: the last checkpoint and the rows after it, folded."""
        return self.fold(self.expanded(self.tail()))

    def expanded(self, rows: Sequence[Event]) -> list[Event]:
        """``rows`` with a leading checkpoint row preceded by the rows it carries (what :meth:`fold` reads)."""
        try:
            return expand(rows, self.phases)
        except (ValueError, KeyError, TypeError) as exc:
            raise MigrationError(
                f"{self.kind} {self.name!r}: step {rows[0].seq} in table {self.table!r} is a checkpoint this "
                f"version cannot read ({exc}); run the ddm-core version that wrote it",
                migration=self.name, table=self.table) from exc

    @abc.abstractmethod
    def fold(self, events: Sequence[Event]) -> S:
        """The state these rows make."""

    def keep(self, events: Sequence[Event]) -> list[Event]:
        """The rows a checkpoint after ``events`` carries: those :meth:`fold` still needs, in order.

        Every workflow keeps its phase rows and the last row of each scan;
        subclasses add what their fold reads.
        """
        return [ev for ev in events if ev.event in PHASE_ROWS] + last_of(events, _scan_name)

    def checkpoint(self) -> S:
        """Append a checkpoint row covering every row so far (nothing when the last row is one)."""
        rows = self.tail()
        if not rows or rows[-1].event == CHECKPOINT:
            return self.fold(self.expanded(rows))
        self.upgrade()
        events = self.expanded(rows)
        now = self.fold(events)
        kept = sorted(self.keep([ev for ev in events if ev.event != CHECKPOINT]), key=lambda ev: ev.seq)
        self._append(now, Event(0, CHECKPOINT, now.phase, read_shift_pct=self._shift(now), detail=encode(kept)),
                     checkpointing=False)
        return self.state()

    def scans(self) -> Mapping[str, ScanProgress]:
        """Progress per scan that has any."""
        return fold_scans(self.expanded(self.tail()))

    def _append(self, after: Any, ev: Event, *, checkpointing: bool = True) -> None:
        """Insert ``ev`` as row ``after.seq + 1``; another writer of that number is a conflict.

        Once :data:`CHECKPOINT_EVERY` rows follow the last checkpoint (as the
        last read counted them), a checkpoint row follows ``ev``.
        """
        seq = after.seq + 1

        def insert(cur: Any) -> None:
            cur.execute(
                f"SELECT 1 FROM `{self.table}` WHERE migration = %s AND seq >= %s LIMIT 1", (self.name, seq)
            )
            if cur.fetchone() is None:
                try:
                    cur.execute(
                        f"INSERT INTO `{self.table}` (migration, seq, event, phase, slot, high_water, rows_copied, "
                        "checksum, read_shift_pct, detail) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        (
                            self.name,
                            seq,
                            ev.event,
                            ev.phase.value,
                            ev.slot,
                            json.dumps(list(ev.high_water), default=str) if ev.high_water is not None else None,
                            ev.rows_copied,
                            ev.checksum,
                            ev.read_shift_pct,
                            json.dumps(ev.detail, default=str) if ev.detail is not None else None,
                        ),
                    )
                    return
                except Exception:  # driver errors have no common base: was the number taken meanwhile?
                    cur.execute(
                        f"SELECT 1 FROM `{self.table}` WHERE migration = %s AND seq = %s", (self.name, seq)
                    )
                    if cur.fetchone() is None:
                        raise
            raise MigrationStateError(
                f"{self.kind} {self.name!r}: another {self.actor} wrote step {seq} first; only one {self.actor} may "
                f"run a {self.kind} at a time (read the state again to resume after it stops)",
                migration=self.name,
                phase=after.phase,
            )

        self._cursor_run("record a step", insert)
        self._since_checkpoint += 1
        if checkpointing and self._since_checkpoint >= self.checkpoint_every:
            self.checkpoint()

    # -- transitions -----------------------------------------------------------------------

    def enter(self, phase: Any, *, detail: Any = None, state: S | None = None) -> S:
        """Record that ``phase``'s work starts.

        Entering the phase the workflow is already in (not completed) is a
        resume and records nothing.

        Raises:
            MigrationStateError: ``phase`` does not follow the recorded state.
        """
        now = state if state is not None else self.state()
        if now.phase is phase and not now.completed and now.stopped is None:
            return now
        why = self.may_enter(now.phase, now.completed, phase)
        if why is not None:
            raise MigrationStateError(
                f"{self.kind} {self.name!r} cannot enter {phase}: {why}", migration=self.name, phase=now.phase
            )
        self._append(now, Event(0, "enter", phase, read_shift_pct=self._shift_on_enter(now, phase), detail=detail))
        return self.state()

    def _shift_on_enter(self, now: Any, phase: Any) -> float:
        return 0.0

    def complete(self, phase: Any, *, detail: Any = None) -> S:
        """Record that ``phase``'s work is done and its gate passed.

        Raises:
            MigrationStateError: the workflow is not in ``phase``.
        """
        now = self._in(phase, "complete it")
        if now.completed:
            return now
        self._append(now, Event(0, "complete", phase, read_shift_pct=self._shift(now), detail=detail))
        return self.state()

    def stop(self, phase: Any, report: Any) -> S:
        """Record that ``phase`` stopped with ``report`` (a JSON-able description of why)."""
        now = self._in(phase, "stop it")
        self._append(now, Event(0, "stop", phase, read_shift_pct=self._shift(now), detail=report))
        return self.state()

    def record_scan(
        self,
        scan: str,
        high_water: Sequence[Any] | None,
        rows_copied: int,
        checksum: str,
        *,
        done: bool = False,
        phase: Any = Phase.BACKFILL,
    ) -> S:
        """Record a scan's high-water mark after a checked batch (``done``: the scan is complete)."""
        now = self._in(phase, "record scan progress")
        self._append(
            now,
            Event(0, "scan_done" if done else "scan", phase, None,
                  tuple(high_water) if high_water is not None else None, rows_copied, checksum,
                  self._shift(now), {"scan": scan}),
        )
        return self.state()

    @staticmethod
    def _shift(now: Any) -> float:
        return float(getattr(now, "read_shift_pct", 0.0))

    def _in(self, phase: Any, doing: str) -> S:
        now = self.state()
        if now.phase is not phase:
            raise MigrationStateError(
                f"{self.kind} {self.name!r} is in {now.phase or 'no phase yet'}, not {phase}: cannot {doing}",
                migration=self.name,
                phase=now.phase,
            )
        return now


class MigrationLog(WorkflowLog[MigrationState]):
    """The rows of one migration in the state table (``ddm_migration``)."""

    def fold(self, events: Sequence[Event]) -> MigrationState:
        return _fold(self.name, events)

    def keep(self, events: Sequence[Event]) -> list[Event]:
        """Besides the phase and scan rows: the last row of each slot (it carries all of the slot's progress)."""
        slot_rows = last_of(events, lambda ev: ev.slot if ev.event in ("batch", "slot_done") else None)
        return super().keep(events) + slot_rows

    def _shift_on_enter(self, now: Any, phase: Any) -> float:
        return 0.0 if phase is Phase.ROLLED_BACK else float(now.read_shift_pct)

    def record_batch(
        self,
        slot: int,
        high_water: Sequence[Any],
        rows_copied: int,
        checksum: str,
        *,
        done: bool = False,
        phase: Phase = Phase.BACKFILL,
    ) -> MigrationState:
        """Record a slot's high-water mark after a checked batch (``done``: the slot is complete)."""
        now = self._in(phase, "record slot progress")
        self._append(
            now,
            Event(0, "slot_done" if done else "batch", phase, slot, tuple(high_water), rows_copied, checksum,
                  now.read_shift_pct),
        )
        return self.state()

    def set_read_shift(self, pct: float) -> MigrationState:
        """Record that ``pct`` % of the moving slots' reads go to the new location."""
        if not 0.0 <= pct <= 100.0:
            raise MigrationError(f"read shift {pct} % is outside 0..100", migration=self.name)
        now = self._in(Phase.SHIFT_READS, "shift reads")
        self._append(now, Event(0, "read_shift", Phase.SHIFT_READS, read_shift_pct=float(pct)))
        return self.state()


def _event(row: Sequence[Any], phases: type[Enum]) -> Event:
    seq, event, phase, slot, high_water, rows_copied, checksum, shift, detail, created = row
    return Event(
        int(seq),
        str(event),
        phases(phase),
        int(slot) if slot is not None else None,
        tuple(json.loads(high_water)) if high_water is not None else None,
        int(rows_copied) if rows_copied is not None else None,
        checksum,
        float(shift),
        json.loads(detail) if detail is not None else None,
        created,
    )
