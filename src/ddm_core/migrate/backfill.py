"""The backfill phase: copy the moving slots' rows to their new data sources, batch by checked batch.

A slot is a hash of the shard key, so its rows cannot be read in key order
without reading their whole table: the unit of work is a **scan** of one
source physical table in primary-key order (docs/migration.md#backfill).
Each batch of ``batch`` rows (10 000 by default) is

1. read with one keyset query (``WHERE key > high water ORDER BY key LIMIT``)
   returning each row's ``VALUES`` tuple spelled by the source server
   (:mod:`ddm_core.migrate.literals`; the PyMySQL way for a table with a
   column type it cannot spell) and the checker's hash of the row;
2. assigned to slots on the compiled batch path
   (:func:`ddm_core.migrate.plan.slots_of_values`, i.e. ``hashing.slots_of`` on a
   numpy array) and, through a slot → target lookup array, to the target
   physical table of each moving row (the row keeps its table index);
3. written with ``INSERT ... ON DUPLICATE KEY UPDATE`` every column, the tuples
   joined into statements of up to ``max_allowed_packet``, so a batch replayed
   after a crash changes nothing;
4. checked: the count and the 64-bit digest of the checker
   (:class:`~ddm_core.migrate.checker.Checker`) over the batch's key range,
   source rows written (summed from the hashes read in 1: one scan of the
   source, not two) against the target's rows, must agree;
   a disagreement rewrites the batch once, then stops the phase with the
   rows that differ (:class:`~ddm_core.errors.BackfillMismatchError`);
5. recorded: only then is the batch's last key saved as the scan's high-water
   mark in ``ddm_migration`` (a ``scan`` event with rows so far and the batch
   checksum). A migrator killed anywhere resumes after the last recorded mark.

Reads, writes and checks overlap on three threads (:func:`run_scan`).
Broadcast tables new data sources lack are scanned the same way, every row to
every new data source. A rows/s ceiling throttles the reads.
"""

from __future__ import annotations

import functools
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np

from ddm_core.algorithms.slot_based import GeneAlgorithm, SlotsAlgorithm
from ddm_core.errors import BackfillMismatchError, DataSourceUnavailableError, MigrationError
from ddm_core.metadata.model import ShardedTable, ShardingConfig
from ddm_core.migrate.binlog import binlog_positions
from ddm_core.migrate.checker import Checker, Digest, RowFilter, RowSource, SlotFilter, row_hash_sql
from ddm_core.migrate.connections import Connections
from ddm_core.migrate.literals import insert_statements, row_literal_sql, statement_limit
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import MigrationPlan, slots_of_values
from ddm_core.migrate.state import MigrationLog, WorkflowLog
from ddm_core.migrate.tables import keyset_chunks, primary_key, quote, table_columns, table_stats

__all__ = ["Target", "Scan", "Sent", "Placement", "SlotPlacement", "ScanReport", "BackfillResult", "Throttle", "ScanCopier", "backfill_scans",
           "backfill", "run_scan", "estimated_rows", "replica_lag", "BATCH_ROWS", "MAX_BATCH_ROWS"]

#: Rows read per batch.
BATCH_ROWS = 10_000
#: The largest batch accepted (one INSERT of that many rows stays under PyMySQL's statement split).
MAX_BATCH_ROWS = 1_000_000


@dataclass(frozen=True, slots=True)
class Target:
    """One target physical table of a scan and the slots whose rows go there (``None``: every row)."""

    data_source: str
    table: str
    slots: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class Scan:
    """One source physical table read in key order, its moving rows sent to ``targets``."""

    table: str
    source: str
    physical: str
    targets: tuple[Target, ...]

    @property
    def name(self) -> str:
        """The scan's name in ``ddm_migration`` (``logic:data_source.physical``)."""
        return f"{self.table}:{self.source}.{self.physical}"

    def describe(self) -> str:
        parts = []
        for t in self.targets:
            slots = "all rows" if t.slots is None else f"{len(t.slots)} slots ({_runs(t.slots)})"
            parts.append(f"{t.data_source}.{t.table} {slots}")
        return f"{self.source}.{self.physical} -> " + ", ".join(parts)


def _runs(slots: Sequence[int]) -> str:
    out: list[str] = []
    start = prev = slots[0]
    for s in [*slots[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if s is not None:
            start = prev = s
    return ", ".join(out[:4]) + (", ..." if len(out) > 4 else "")


def backfill_scans(old: ShardingConfig, new: ShardingConfig, plan: MigrationPlan) -> list[Scan]:
    """Every scan the plan needs, in plan order (tables, then broadcast copies)."""
    scans: list[Scan] = []
    for tp in plan.tables:
        old_t, new_t = old.table(tp.table), new.table(tp.table)
        assert old_t is not None and new_t is not None
        by_source: dict[str, dict[str, list[int]]] = {}
        for m in tp.moves:
            by_source.setdefault(m.source, {}).setdefault(m.target, []).append(m.slot)
        for source, targets in sorted(by_source.items()):
            for index, physical in enumerate(old_t.tables_by_source[source]):
                scans.append(Scan(tp.table, source, physical, tuple(
                    Target(ds, new_t.tables_by_source[ds][index], tuple(sorted(slots)))
                    for ds, slots in sorted(targets.items()))))
    for b in plan.broadcasts:
        scans.append(Scan(b.table, b.source, b.table, tuple(Target(ds, b.table, None) for ds in b.targets)))
    return scans


class Throttle:
    """Keeps reads under ``rows_per_s`` (``None``: no ceiling) and pauses while a source's replicas lag.

    Args:
        rows_per_s: Ceiling on rows read per second.
        max_replica_lag_s: Pause while the source data source's replicas are more
            than this many seconds behind (``None``: do not look).
        replica_lag: ``replica_lag(data source)``: the largest lag of its replicas in
            seconds (``inf``: one is not replicating); default :func:`replica_lag`
            on the configuration given as ``config``.
        lag_poll: Seconds between two looks while paused.
        lag_timeout: Give up (:class:`~ddm_core.errors.MigrationError`) after pausing this long at once.
        clock, sleep: Injectable.
    """

    def __init__(self, rows_per_s: float | None, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, max_replica_lag_s: float | None = None,
                 replica_lag: Callable[[str], float] | None = None, config: ShardingConfig | None = None,
                 lag_poll: float = 1.0, lag_timeout: float = 3600.0) -> None:
        if rows_per_s is not None and rows_per_s <= 0:
            raise MigrationError(f"the backfill's rows/s ceiling must be positive, not {rows_per_s}")
        if max_replica_lag_s is not None and max_replica_lag_s < 0:
            raise MigrationError(f"the backfill's replica lag ceiling must be >= 0 s, not {max_replica_lag_s}")
        self.rows_per_s, self.clock, self.sleep = rows_per_s, clock, sleep
        self.max_replica_lag_s, self.lag_poll, self.lag_timeout = max_replica_lag_s, lag_poll, lag_timeout
        if replica_lag is None and max_replica_lag_s is not None:
            if config is None:
                raise MigrationError("pausing on replica lag needs the configuration naming the replicas")
            replica_lag = functools.partial(_lag_of, config)
        self.replica_lag = replica_lag
        self.started = clock()
        self.rows = 0
        self.slept = 0.0
        self.lag_paused = 0.0

    def after(self, rows: int, source: str | None = None) -> float:
        """Count ``rows`` read from ``source``; sleep until the rate is back under the ceiling and the
        source's replicas are within the lag ceiling. Returns the seconds slept."""
        self.rows += rows
        waited = self._lag_pause(source) if source is not None else 0.0
        if self.rows_per_s is None:
            return waited
        wait = self.rows / self.rows_per_s - (self.clock() - self.started)
        if wait > 0:
            self.sleep(wait)
            self.slept += wait
            return waited + wait
        return waited

    def _lag_pause(self, source: str) -> float:
        if self.max_replica_lag_s is None or self.replica_lag is None:
            return 0.0
        began = self.clock()
        while True:
            lag = self.replica_lag(source)
            if lag <= self.max_replica_lag_s:
                return self.clock() - began
            paused = self.clock() - began
            if paused >= self.lag_timeout:
                raise MigrationError(
                    f"backfill paused {paused:.0f} s on data source {source!r}: its replicas are {lag:g} s behind "
                    f"(ceiling {self.max_replica_lag_s:g} s); fix replication and run the step again",
                    data_source=source)
            self.sleep(self.lag_poll)
            self.slept += self.lag_poll
            self.lag_paused += self.lag_poll


def _lag_of(config: ShardingConfig, data_source: str) -> float:
    return replica_lag(config, data_source)  # the module function (Throttle's argument shadows the name)


def replica_lag(config: ShardingConfig, data_source: str, *, connect_timeout: float = 5.0) -> float:
    """The largest ``Seconds_Behind_Master`` of ``data_source``'s replicas (0 without replicas).

    A replica whose replication threads are not both running (or that reports
    no lag) counts as infinitely behind: the backfill waits for it.

    Raises:
        MigrationError: a configured replica is no replica (``SHOW SLAVE STATUS`` is empty).
        DataSourceUnavailableError: a replica cannot be reached.
    """
    from ddm_core.execute.drivers import driver_for

    ds = config.data_sources[data_source]
    worst = 0.0
    for ep in ds.replicas:
        try:
            conn = driver_for(ep.dialect).connect(ep, connect_timeout)
        except Exception as exc:  # driver errors have no common base
            raise DataSourceUnavailableError(
                f"replica {ep.url} of data source {data_source!r}: cannot connect to read its lag: {exc}",
                data_source=data_source) from exc
        try:
            cur = conn.cursor()
            cur.execute("SHOW SLAVE STATUS")
            row = cur.fetchone()
            names = [d[0] for d in cur.description or ()]
            cur.close()
        finally:
            conn.close()
        if row is None:
            raise MigrationError(
                f"replica {ep.url} of data source {data_source!r} is not replicating (SHOW SLAVE STATUS is "
                "empty): the backfill cannot pause on its lag", data_source=data_source)
        status = dict(zip(names, row))
        behind = status.get("Seconds_Behind_Master")
        running = status.get("Slave_IO_Running") == "Yes" and status.get("Slave_SQL_Running") == "Yes"
        worst = max(worst, float(behind) if running and behind is not None else float("inf"))
    return worst


@dataclass(slots=True)
class ScanReport:
    """What one scan did in this run (``rows_copied``: moving rows in total, earlier runs included)."""

    scan: Scan
    rows_read: int = 0
    rows_copied: int = 0
    batches: int = 0
    rewrites: int = 0
    done: bool = False
    #: Batches that still differed after the rewrite, left to catch-up (``under_writes`` only).
    unsettled: int = 0


@dataclass(frozen=True, slots=True)
class BackfillResult:
    """Every scan's report, and this run's seconds and throttle sleep."""

    scans: tuple[ScanReport, ...]
    seconds: float
    throttled: float

    @property
    def rows_copied(self) -> int:
        return sum(s.rows_copied for s in self.scans)

    @property
    def rows_read(self) -> int:
        return sum(s.rows_read for s in self.scans)


Progress = Callable[[ScanReport], None]


@dataclass(frozen=True, slots=True)
class Sent:
    """The rows of a batch written to one target: their keys, and their source digest when it was read with
    them (``None``: the check asks the source for it)."""

    keys: list[tuple[Any, ...]]
    digest: Digest | None = None


class Placement(Protocol):
    """Which target of a scan each row goes to, decided by one shard column of the row.

    A migration's scans place rows by slot (:class:`SlotPlacement`); a cut-over
    places a legacy table's rows on the sharded table's nodes.
    """

    #: The column the placement reads (a column of the source table).
    column: str

    def assign(self, values: Sequence[Any]) -> np.ndarray:
        """The target index of each row's ``column`` value (-1: the row goes nowhere)."""
        ...

    def filter(self, target: int) -> RowFilter:
        """Keeps the source rows that go to ``target`` (the checker's view of that target)."""
        ...


class SlotPlacement:
    """A migration scan's placement: a slot → target lookup array over the old table's slots."""

    def __init__(self, table: ShardedTable, targets: Sequence[Target]) -> None:
        sharder = table.database_strategy.sharder
        assert isinstance(sharder, (SlotsAlgorithm, GeneAlgorithm))
        self.table, self.sharder = table, sharder
        self.column = table.database_strategy.column or ""
        self.targets = tuple(targets)
        bits = sharder.slot_bits if isinstance(sharder, SlotsAlgorithm) else sharder.gene_bits
        self.dest = np.full(1 << bits, -1, dtype=np.int64)
        for i, t in enumerate(targets):
            assert t.slots is not None
            self.dest[np.asarray(t.slots, dtype=np.int64)] = i

    def assign(self, values: Sequence[Any]) -> np.ndarray:
        return np.asarray(self.dest[slots_of_values(self.sharder, self.column, values)], dtype=np.int64)

    def filter(self, target: int) -> RowFilter:
        slots = self.targets[target].slots
        assert slots is not None
        return SlotFilter.of_table(self.table, slots)


class ScanCopier:
    """One scan's copying tools: rows assigned to targets, upserted, checked (also used by catch-up).

    Args:
        placement: Where each row goes; default: by slot of the old table
            (targets with slots), every row to every target (targets without).
    """

    def __init__(self, scan: Scan, old: ShardingConfig, conns: Connections,
                 placement: Placement | None = None) -> None:
        self.scan, self.conns, self.old = scan, conns, old
        src = scan.source
        self.key = primary_key(conns, src, scan.physical)
        self.table_order = table_columns(conns, src, scan.physical)
        self.columns = [c for c in self.table_order if c not in self.key]
        self.all_columns = [*self.key, *self.columns]
        if placement is None and scan.targets[0].slots is not None:
            sharded = old.table(scan.table)
            assert sharded is not None
            placement = SlotPlacement(sharded, scan.targets)
        self.placement = placement
        self.shard_at = 0
        filters: list[RowFilter | None] = [None] * len(scan.targets)
        if placement is not None:
            filters = [placement.filter(i) for i in range(len(scan.targets))]
            self.shard_at = [c.lower() for c in self.all_columns].index(placement.column.lower())
        self.checkers = [
            Checker(RowSource(conns, [(src, scan.physical)], slots=f, label=f"{src}.{scan.physical}"),
                    RowSource(conns, [(t.data_source, t.table)], slots=f, label=f"{t.data_source}.{t.table}"))
            for t, f in zip(scan.targets, filters)
        ]
        self.upserts = [self._upsert_sql(t) for t in scan.targets]
        self.sources = [c.a for c in self.checkers]
        self.whole_targets = [RowSource(conns, [(t.data_source, t.table)]) for t in scan.targets]
        by_name = {c.name.lower(): c for c in self.sources[0].columns}
        # The source server spells each row's VALUES tuple (migrate/literals.py); None: a column type it cannot.
        self.literal = row_literal_sql(conns, src, [by_name[c.lower()] for c in self.all_columns])
        self._read_columns = self.columns
        self._shard_in_read = self.shard_at
        # Each target's source row hash (its checker's shape), read with the literal: distinct expressions.
        self._hashes: list[str] = []
        self._hash_of: list[int] = []
        if self.literal is not None:
            shard = self.all_columns[self.shard_at] if placement is not None else None
            self._read_columns = [shard] if shard is not None and self.shard_at >= len(self.key) else []
            self._shard_in_read = self.shard_at if self.shard_at < len(self.key) else len(self.key)
            for checker in self.checkers:
                h = row_hash_sql(conns, src, checker.shape_a)
                if h not in self._hashes:
                    self._hashes.append(h)
                self._hash_of.append(self._hashes.index(h))
        #: Where a read row holds its literal (then its hashes): after the key and the shard value.
        self._literal_at = len(self.key) + len(self._read_columns)
        self._limits: dict[str, int] = {}

    def on(self, conns: Connections) -> "ScanCopier":
        """The same copier over other connections (for another thread)."""
        return ScanCopier(self.scan, self.old, conns, self.placement)

    @property
    def every_target(self) -> bool:
        """Every row goes to every target (a broadcast copy)."""
        return self.placement is None

    def _upsert_parts(self, target: Target) -> tuple[str, str]:
        """``INSERT INTO target (columns) VALUES`` and `` ON DUPLICATE KEY UPDATE`` every column."""
        def q(name: str) -> str:
            return quote(self.conns, target.data_source, name)

        names = ", ".join(q(c) for c in self.all_columns)
        update = ", ".join(f"{q(c)} = VALUES({q(c)})" for c in self.columns) or f"{q(self.key[0])} = {q(self.key[0])}"
        return f"INSERT INTO {q(target.table)} ({names}) VALUES ", f" ON DUPLICATE KEY UPDATE {update}"

    def _upsert_sql(self, target: Target) -> str:
        head, tail = self._upsert_parts(target)
        return head + "(" + ", ".join(["%s"] * len(self.all_columns)) + ")" + tail

    def assign(self, rows: Sequence[tuple[Any, ...]], shard_at: int | None = None) -> np.ndarray:
        """The target index of each row (-1: it goes nowhere, e.g. its slot does not move), in one batch call.

        ``shard_at``: where the shard value is in ``rows`` (default: full rows, :attr:`all_columns` order).
        """
        if self.placement is None:
            return np.zeros(len(rows), dtype=np.int64)  # broadcast: every row to every target
        at = self.shard_at if shard_at is None else shard_at
        return self.placement.assign([r[at] for r in rows])

    def read(self, batch: int, *, after: Sequence[Any] | None = None,
             upto: Sequence[Any] | None = None) -> Iterator[list[tuple[Any, ...]]]:
        """The scan's source rows in key order, ``batch`` at a time, as :meth:`write_read` takes them.

        With literals: the key, the shard value (unless it is a key column),
        the row's ``VALUES`` tuple (bytes), then its source row hash for each
        distinct target shape, so the batch check needs no second look at the
        source; without: full rows.
        """
        extra = [self.literal, *self._hashes] if self.literal is not None else []
        chunks = keyset_chunks(self.conns, self.scan.source, self.scan.physical, self._read_columns, self.key, batch,
                               after=after, upto=upto, extra=extra)
        return chunks if self.literal is None else (self._checked(rows) for rows in chunks)

    def _checked(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """``rows`` if each has its literal (a part of the row's literal NULL: the SQL lacks a case)."""
        at = self._literal_at
        for r in rows:
            if r[at] is None:
                raise MigrationError(f"backfill of {self.scan.describe()}: the source server spelled no row literal "
                                     f"for key {r[:len(self.key)]}", table=self.scan.table)
        return rows

    def write_read(self, rows: Sequence[tuple[Any, ...]]) -> list[Sent]:
        """Upsert rows as :meth:`read` returns them; returns what was written to each target, with the
        source digest of those rows (summed from the hashes read with them)."""
        if self.literal is None:
            return self.write(rows)
        where = self.assign(rows, self._shard_in_read)
        n, at = len(self.key), self._literal_at
        sent: list[Sent] = []
        for i, target in enumerate(self.scan.targets):
            picked = range(len(rows)) if self.every_target else np.flatnonzero(where == i).tolist()
            batch = [rows[j] for j in picked]
            if batch:
                self._send(target, [r[at] for r in batch])
            h = at + 1 + self._hash_of[i]
            digest = Digest.of(np.fromiter((r[h] for r in batch), dtype=np.uint64, count=len(batch)))
            sent.append(Sent([tuple(r[:n]) for r in batch], digest))
        return sent

    def _send(self, target: Target, values: list[bytes]) -> None:
        ds = target.data_source
        limit = self._limits.get(ds)
        if limit is None:
            limit = self._limits[ds] = statement_limit(self.conns, ds)
        head, tail = (p.encode() for p in self._upsert_parts(target))
        for statement in insert_statements(head, tail, values, limit):
            self.conns.send(ds, statement, f"upsert of {len(values)} rows into {target.table}")

    def write(self, rows: Sequence[tuple[Any, ...]]) -> list[Sent]:
        """Upsert the moving rows of ``rows`` (full rows) into their targets; returns the keys written to each."""
        where = self.assign(rows)
        n = len(self.key)
        written: list[Sent] = []
        for i, target in enumerate(self.scan.targets):
            picked = np.arange(len(rows)) if self.every_target else np.flatnonzero(where == i)
            batch = [rows[j] for j in picked.tolist()]
            if batch:
                self.conns.execute_many(target.data_source, self.upserts[i], batch)
            written.append(Sent([tuple(r[:n]) for r in batch]))
        return written

    def check(self, rng: tuple[Any, Any], written: Sequence[Sent]) -> tuple[bool, Digest]:
        """Source and target digests of the batch agree for every target?

        The fast comparison, both computed by the servers: the source rows
        written (their hashes read with their literals, or aggregated by key)
        against every target row of the key range. A target
        table that also holds rows of other slots in that range (it receives
        from several source tables) fails it; then the slot-filtered digests of
        the range decide (:class:`~ddm_core.migrate.checker.Checker`).
        """
        total, same = Digest(), True
        for i, sent in enumerate(written):
            ok, digest = self._check_target(i, rng, sent)
            same, total = same and ok, total + digest
        return same, total

    def _check_target(self, i: int, rng: tuple[Any, Any], sent: Sent) -> tuple[bool, Digest]:
        checker, source, target = self.checkers[i], self.sources[i], self.whole_targets[i]
        a = sent.digest
        if a is None:
            a = source.digest_of_keys(sent.keys, checker.shape_a) if sent.keys else Digest()
        if target.digest(rng, checker.shape_b) == a:
            return True, a
        a, b = checker.digests(rng)
        return a == b, a

    def mismatch(self, rng: tuple[Any, Any]) -> str:
        lines = []
        for checker in self.checkers:
            report = checker.compare_range(rng)
            if report.found:
                lines.append(report.summary())
                lines.extend(f"    {line}" for d in report.differences[:10] for line in d.lines())
        return "\n".join(lines)


def backfill(
    old: ShardingConfig,
    new: ShardingConfig,
    plan: MigrationPlan,
    conns: Connections,
    log: MigrationLog,
    *,
    batch: int = BATCH_ROWS,
    max_rows_per_s: float | None = None,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    max_replica_lag_s: float | None = None,
    lag_of: Callable[[str], float] | None = None,
    under_writes: bool = False,
) -> BackfillResult:
    """Run (or resume) the backfill phase of ``plan``.

    The migration must be in ``backfill`` or have completed ``dual_write``
    (backfill is then entered). Completed scans are skipped; the others resume
    after their recorded high-water mark. The phase is completed when every
    scan is.

    Args:
        conns: Connections reaching the data sources of both configurations.
        log: The migration's state.
        batch: Source rows per batch.
        max_rows_per_s: Ceiling on source rows read per second.
        max_replica_lag_s: Pause after a batch while the source data source's replicas lag more
            than this many seconds (:func:`replica_lag`, or ``lag_of(data source)`` when given).
        progress: Called with a scan's report after each of its batches.
        under_writes: The application writes the moving rows meanwhile (dual write): a batch
            that still differs after its rewrite (a row deleted or changed again between the
            read and the check) is counted (``ScanReport.unsettled``) and left to catch-up,
            which replays every change since the binlog position recorded before the backfill.

    Raises:
        MigrationStateError: the migration is not at backfill.
        BackfillMismatchError: a batch still differs after being rewritten (recorded as a stop).
    """
    if not 1 <= batch <= MAX_BATCH_ROWS:
        raise MigrationError(f"backfill batch {batch} is outside 1..{MAX_BATCH_ROWS}")
    started = clock()
    state = log.state()
    scans = backfill_scans(old, new, plan)
    reports = [ScanReport(s) for s in scans]
    throttle = Throttle(max_rows_per_s, clock=clock, sleep=sleep, max_replica_lag_s=max_replica_lag_s,
                        replica_lag=lag_of, config=old)
    if not (state.phase is Phase.BACKFILL and state.completed):
        detail: dict[str, Any] = {"batch": batch, "scans": [s.name for s in scans]}
        if state.phase is not Phase.BACKFILL:  # first entry: where catch-up starts reading the binlog
            detail["binlog"] = binlog_positions(old, conns, sorted({s.source for s in scans}))
        state = log.enter(Phase.BACKFILL, detail=detail, state=state)
        for report in reports:
            run_scan(report, lambda scan: ScanCopier(scan, old, conns), conns, log, batch, throttle, progress,
                     under_writes)
        log.complete(Phase.BACKFILL)
    else:
        for report in reports:
            done = state.scans.get(report.scan.name)
            report.rows_copied, report.done = (done.rows_copied, done.done) if done else (0, False)
    return BackfillResult(tuple(reports), clock() - started, throttle.slept)


#: Batches read but not yet recorded: one being checked, one being written, one just read.
IN_FLIGHT = 3


@dataclass(slots=True)
class _InFlight:
    """A batch handed to the writer thread, then to the check thread."""

    rng: tuple[Any, Any]
    rows_read: int
    write: "Future[list[Sent]]"
    check: "Future[tuple[bool, Digest]]"

    def cancel(self) -> None:
        self.write.cancel()
        self.check.cancel()


def run_scan(report: ScanReport, copier_of: Callable[[Scan], ScanCopier], conns: Connections,
             log: WorkflowLog[Any], batch: int, throttle: Throttle, progress: Progress | None,
             under_writes: bool = False, phase: Any = Phase.BACKFILL) -> None:
    """Copy one scan from its recorded high-water mark to its end, batch by checked batch (module docs).

    Three threads overlap, each over connections of its own: this one reads
    batch ``i + 2`` while the writer thread upserts batch ``i + 1`` and the
    check thread checks batch ``i``. A batch is recorded (here) only once its
    check passed, and batches are recorded in key order, so a crash anywhere
    still resumes after the last checked batch; the batches after it are
    written again, which changes nothing.
    """
    scan = report.scan
    was = log.scans().get(scan.name)
    if was is not None and was.done:
        report.rows_copied, report.done = was.rows_copied, True
        if progress is not None:
            progress(report)
        return
    copier = copier_of(scan)
    high_water = was.high_water if was is not None else None
    report.rows_copied = was.rows_copied if was is not None else 0
    checksum = was.checksum if was is not None and was.checksum else Digest().hex
    n = len(copier.key)

    def settle(done: _InFlight) -> None:
        nonlocal checksum, high_water
        rng, last = done.rng, done.rng[1]
        same, digest = done.check.result()
        written = done.write.result()
        if not same:  # rewrite once: a row changed between read and check (or a write was lost)
            report.rewrites += 1
            again = [r for chunk in copier.read(batch, after=rng[0], upto=last) for r in chunk]
            written = copier.write_read(again)
            same, digest = copier.check(rng, written)
            if not same and under_writes:
                report.unsettled += 1
            elif not same:
                why = copier.mismatch(rng)
                log.stop(phase, {"scan": scan.name, "after": rng[0], "upto": last, "differences": why})
                raise BackfillMismatchError(
                    f"backfill of {scan.describe()}: the batch after {rng[0]} up to {last} differs between source "
                    f"and target after being written twice:\n{why}",
                    table=scan.table, scan=scan.name, high_water=rng[0],
                )
        report.rows_copied += len(written[0].keys) if copier.every_target else sum(len(w.keys) for w in written)
        report.rows_read += done.rows_read
        report.batches += 1
        checksum = digest.hex
        log.record_scan(scan.name, last, report.rows_copied, checksum, phase=phase)
        high_water = last
        if progress is not None:
            progress(report)
        throttle.after(done.rows_read, scan.source)

    with conns.twin() as write_conns, conns.twin() as check_conns, \
            ThreadPoolExecutor(1, thread_name_prefix="ddm-backfill-write") as writer, \
            ThreadPoolExecutor(1, thread_name_prefix="ddm-backfill-check") as checker:
        writing, checking = copier.on(write_conns), copier.on(check_conns)
        pending: deque[_InFlight] = deque()
        after = tuple(high_water) if high_water is not None else None
        try:
            for rows in copier.read(batch, after=high_water):
                rng = (after, tuple(rows[-1][:n]))
                write = writer.submit(writing.write_read, rows)
                check = checker.submit(_check_after, checking, rng, write)
                pending.append(_InFlight(rng, len(rows), write, check))
                after = rng[1]
                if len(pending) >= IN_FLIGHT:
                    settle(pending.popleft())
            while pending:
                settle(pending.popleft())
        except BaseException:
            for p in pending:  # nothing after a failed batch is recorded; do not write it either
                p.cancel()
            raise
    log.record_scan(scan.name, high_water, report.rows_copied, checksum, done=True, phase=phase)
    report.done = True
    if progress is not None:
        progress(report)


def _check_after(copier: ScanCopier, rng: tuple[Any, Any],
                 write: "Future[list[Sent]]") -> tuple[bool, Digest]:
    """A batch's check, once the writer thread wrote it (its failure is the check's)."""
    return copier.check(rng, write.result())


def estimated_rows(conns: Connections, scan: Scan) -> int:
    """Rows of a scan's source table (``information_schema`` estimate) for progress bars."""
    return table_stats(conns, scan.source, scan.physical).rows
