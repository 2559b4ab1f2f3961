"""Keeping the legacy table and the shards current both ways (docs/cutover.md#sync).

* **Copy** — the legacy table read in primary-key order and every row upserted
  on its node, batch by checked batch, resumable from its high-water mark
  (:func:`ddm_core.migrate.backfill.run_scan`, the resharding backfill's loop).
  The legacy server's binlog position is recorded before the copy starts.
* **Forward replay** — the legacy binlog from that position, applied to the
  shards idempotently (:func:`ddm_core.migrate.catchup.replay_passes`, the
  resharding catch-up's reader and applier). Changes made during the copy are
  held in the binlog and replayed once it is done, so the copy and the replay
  never write the same keys at once.
* **Reverse sync** — each shard server's binlog applied to the legacy table, for
  buckets on the shards.

Both apply by key (:mod:`ddm_core.migrate.keycopy`): a changed key's row is
copied as the reading side holds it then, under that side's row lock, so the
forward replay never sets back a newer dual write of a ``pre_gray`` or
``rollback`` bucket.

A bucket's changes are applied only from the side that was authoritative when
they were made. Authority moves at a *switch*, recorded with the binlog
position of every server while the bucket's writes are paused and after the
side losing authority was drained; a change at a later position than the
switch on its server belongs to the new side. So a change the reverse sync
wrote into the legacy table (after the switch to the shards) is never replayed
forward, and the forward replay's own writes (before it) never come back: no
loop, and no marker in the data.

Every position is ``(file, pos)`` and, where the server keeps GTIDs, the GTID
position there and the server's ``@@server_id`` (:mod:`ddm_core.migrate.gtid`).
When the legacy primary is replaced by its promoted replica (another address,
or other binlog files at the same one), the forward replay resumes on the new
server by GTID from where it had read the old one, and a change is placed
before or after a switch by its GTID: positions on the old server's files mean
nothing in the new one's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ddm_core.cutover.placement import Buckets, NodePlacement, forward_scan, reverse_scans, sharded_table
from ddm_core.cutover.phases import CutoverPhase
from ddm_core.cutover.state import CutoverLog, CutoverState, Switch
from ddm_core.errors import CutoverError
from ddm_core.metadata.cutover import CutoverRouting
from ddm_core.metadata.model import ShardingConfig
from ddm_core.migrate.backfill import BATCH_ROWS, ScanCopier, ScanReport, Throttle, run_scan
from ddm_core.migrate.binlog import binlog_positions, server_of
from ddm_core.migrate.catchup import FLUSH_ROWS, MAX_LAG, Applier, CatchUpResult, replay_passes
from ddm_core.migrate.connections import Connections
from ddm_core.migrate.gtid import gtid_at, is_after, merge, server_gtid

__all__ = ["Sync", "SyncPass", "FORWARD", "REVERSE"]

FORWARD, REVERSE = "forward:", "reverse:"
#: Seconds between two recorded positions of one direction: a restarted sync reads at most this much again.
RECORD_EVERY_S = 2.0

#: ``(file, pos)``, or ``(file, pos, gtid, server_id)`` where the server keeps GTIDs.
Position = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class SyncPass:
    """One pass of both directions: changes applied and seconds taken (``None``: nothing to read)."""

    forward: CatchUpResult
    reverse: CatchUpResult | None


class Sync:
    """The cut-over's copy and replays over one set of connections (a single applier at a time)."""

    def __init__(self, sharded: ShardingConfig, routing: CutoverRouting, conns: Connections, log: CutoverLog, *,
                 batch: int = BATCH_ROWS, max_rows_per_s: float | None = None, max_lag: float = MAX_LAG,
                 pass_timeout: float = 120.0, flush_rows: int = FLUSH_ROWS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sharded, self.routing, self.conns, self.log = sharded, routing, conns, log
        self.legacy_config = routing.legacy_config
        self.table = sharded_table(sharded, routing)
        self.buckets = Buckets(self.table, routing.buckets)
        self.placement = NodePlacement(self.table)
        self.forward_scan = forward_scan(self.table, routing)
        self.reverse_scans = reverse_scans(self.table, routing)
        self.legacy_server = server_of(self.legacy_config.data_sources[routing.legacy_name].primary)
        self.shard_servers = sorted({server_of(sharded.data_sources[n.data_source].primary)
                                     for n in self.table.data_nodes})
        self.batch, self.max_rows_per_s, self.max_lag = batch, max_rows_per_s, max_lag
        self.pass_timeout, self.flush_rows, self.clock = pass_timeout, flush_rows, clock
        self._forward: Applier | None = None
        self._reverse: Applier | None = None

    # -- positions ---------------------------------------------------------------------------

    def positions(self) -> dict[str, Position]:
        """Every server's binlog position now (legacy and shards), with its GTID position where it keeps one;
        refuses a server without a binlog."""
        out: dict[str, Position] = {}
        sources = [(self.legacy_config, self.routing.legacy_name)] + [
            (self.sharded, ds) for ds in sorted({n.data_source for n in self.table.data_nodes})]
        for config, ds in sources:
            if server_of(config.data_sources[ds].primary) in out:
                continue

            def query(sql: str, params: Any, ds: str = ds) -> list[tuple[Any, ...]]:
                return self.conns.query(ds, sql, params)

            before, server_id = server_gtid(query)  # read first: it may lag the file position, never lead it
            for server, at in binlog_positions(config, self.conns, [ds]).items():
                if at is None:
                    raise CutoverError(
                        f"cut-over {self.routing.name!r}: server {server} (data source {ds!r}) shows no binlog "
                        "position; the sync needs log_bin and binlog_format=ROW on every server",
                        table=self.routing.table, cutover=self.routing.name)
                file, pos = str(at[0]), int(at[1])
                exact = gtid_at(query, file, pos)
                gtid = before if exact is None else exact
                out[server] = (file, pos, gtid, server_id) if gtid else (file, pos)
        return out

    # -- copy ----------------------------------------------------------------------------------

    def copier(self) -> ScanCopier:
        return ScanCopier(self.forward_scan, self.sharded, self.conns, placement=self.placement)

    def copy(self, progress: Callable[[ScanReport], None] | None = None) -> ScanReport:
        """Run (or resume) the full copy in the copy phase; its report."""
        report = ScanReport(self.forward_scan)
        throttle = Throttle(self.max_rows_per_s, clock=self.clock)
        run_scan(report, lambda scan: self.copier(), self.conns, self.log, self.batch, throttle, progress,
                 under_writes=True, phase=CutoverPhase.COPY)
        return report

    # -- replay --------------------------------------------------------------------------------

    def copy_start(self, state: CutoverState) -> dict[str, Any]:
        """The legacy binlog position recorded on entering the copy."""
        for ev in state.history:
            if ev.event == "enter" and ev.phase is CutoverPhase.COPY and isinstance(ev.detail, dict):
                return dict(ev.detail.get("binlog") or {})
        raise CutoverError(f"cut-over {self.routing.name!r} recorded no binlog position before its copy",
                           table=self.routing.table, cutover=self.routing.name)

    def forward(self, state: CutoverState, *, passes: int = 1, progress: Callable[[int, int], None] | None = None
                ) -> CatchUpResult:
        """Legacy binlog passes onto the shards, for the changes of buckets the legacy table held then."""
        if self._forward is None:
            self._forward = Applier(self.legacy_config, self.conns, [self.copier()])
        keep = self._keep(state.switches, "legacy", lambda copier: self.legacy_server)
        return replay_passes(self.legacy_config, self._forward, self.log, self._forward_start(state), phase=state.phase,
                             max_lag=self.max_lag, max_passes=passes, pass_timeout=self.pass_timeout,
                             flush_rows=self.flush_rows, clock=self.clock, progress=progress, keep=keep,
                             position_prefix=FORWARD, record_every_s=RECORD_EVERY_S)

    def _forward_start(self, state: CutoverState) -> dict[str, Any]:
        """Where the forward replay starts on the legacy server: the copy's position, or — when the legacy
        primary was replaced by a server at another address — the furthest GTID read on the ones before."""
        start = self.copy_start(state)
        server = self.legacy_server
        if server in start or FORWARD + server in state.scans:
            return start
        read = [tuple(at.high_water) for name, at in state.scans.items()
                if name.startswith(FORWARD) and at.high_water] + [tuple(at) for at in start.values()]
        gtids = [str(at[2]) for at in read if len(at) > 2 and at[2]]
        if not gtids:
            raise CutoverError(
                f"cut-over {self.routing.name!r}: the legacy data source now points at {server}, but the positions "
                f"recorded on {', '.join(sorted(start))} carry no GTID to resume from there; point it back, or "
                "restart the cut-over", table=self.routing.table, cutover=self.routing.name)
        start[server] = ["", 0, merge(gtids), 0]  # an empty file: read by GTID (the new server's own files follow)
        return start

    def reverse(self, state: CutoverState, *, passes: int = 1, progress: Callable[[int, int], None] | None = None
                ) -> CatchUpResult | None:
        """Shard binlog passes onto the legacy table, for buckets the shards held then (``None``: none ever)."""
        start = _earliest(state.switches)
        if not start:
            return None
        if self._reverse is None:
            self._reverse = Applier(self.sharded, self.conns, [
                ScanCopier(scan, self.sharded, self.conns) for scan in self.reverse_scans])
        servers = {c.scan.source: server_of(self.sharded.data_sources[c.scan.source].primary)
                   for c in self._reverse.copiers.values()}
        keep = self._keep(state.switches, "shards", lambda copier: servers[copier.scan.source])
        return replay_passes(self.sharded, self._reverse, self.log, start, phase=state.phase, max_lag=self.max_lag,
                             max_passes=passes, pass_timeout=self.pass_timeout, flush_rows=self.flush_rows,
                             clock=self.clock, progress=progress, keep=keep, position_prefix=REVERSE,
                             record_every_s=RECORD_EVERY_S)

    def drained(self, prefix: str, positions: Mapping[str, Position]) -> None:
        """Record that the ``prefix`` direction applied everything up to ``positions`` (a pass read past them).

        A switch moves authority at these positions; a direction that later read
        from before them again would apply the side that lost authority over the
        side that has it. Recorded before the switch itself, so it holds across a crash.
        """
        scans = self.log.scans()
        for server, at in positions.items():
            was = scans.get(prefix + server)
            if was is None or not was.high_water or (
                    (str(was.high_water[0]), int(was.high_water[1])) < (str(at[0]), int(at[1]))):
                self.log.record_scan(prefix + server, [at[0], int(at[1]), *at[2:]], was.rows_copied if was else 0,
                                     "", phase=CutoverPhase.LIVE)

    def both(self, state: CutoverState) -> SyncPass:
        """One pass each way."""
        return SyncPass(self.forward(state), self.reverse(state))

    def _keep(self, switches: Sequence[Switch], side: str, server_of_copier: Callable[[ScanCopier], str]
              ) -> Callable[[ScanCopier, str, Sequence[dict[str, Any]], Position], Sequence[dict[str, Any]]]:
        """The replay filter: a row image passes when ``side`` held its bucket at the change's position."""
        column = self.buckets.column.lower()

        def keep(copier: ScanCopier, kind: str, rows: Sequence[dict[str, Any]], position: Position
                 ) -> Sequence[dict[str, Any]]:
            if not rows:
                return rows
            images = [r.get("after_values") or r.get("values") or {} for r in rows]
            values = [_value(image, column) for image in images]
            buckets = self.buckets.of(values)
            holders = _holders(switches, side, server_of_copier(copier), position, self.routing.buckets)
            mask = holders[buckets] == (side == "shards")
            return [r for r, m in zip(rows, mask.tolist()) if m]

        return keep

    # -- lag -----------------------------------------------------------------------------------

    def behind(self, state: CutoverState) -> dict[str, int | None]:
        """Binlog bytes between each direction's position (recorded, else where it starts) and its
        servers' ends now (``None``: not reading, or a server moved to another binlog file meanwhile)."""
        now = self.positions()

        def gap(prefix: str, servers: Sequence[str], start: Mapping[str, Any]) -> int | None:
            total = 0
            for server in servers:
                at = state.scans.get(prefix + server)
                mark = at.high_water if at is not None and at.high_water else start.get(server)
                end = now.get(server)
                if not mark or end is None or end[0] != mark[0]:
                    return None
                total += max(0, end[1] - int(mark[1]))
            return total

        reverse = _earliest(state.switches)
        return {"forward": gap(FORWARD, [self.legacy_server], self.copy_start(state)),
                "reverse": gap(REVERSE, self.shard_servers, reverse) if reverse else None}


def _value(image: Mapping[str, Any], column: str) -> Any:
    for name, value in image.items():
        if str(name).lower() == column:
            return value
    raise CutoverError(f"a binlog row image has no column {column!r}: set binlog_row_metadata=FULL on the server",
                       column=column)


def _holders(switches: Sequence[Switch], side: str, server: str, position: Position, buckets: int) -> np.ndarray:
    """Per bucket: ``True`` where the shards held it at ``position`` of ``server``'s binlog, as read by ``side``."""
    on_shards = np.zeros(buckets, dtype=bool)
    for sw in switches:
        recorded = sw.legacy if side == "legacy" else sw.shards
        at = recorded.get(server)
        other = at is None and side == "legacy" and bool(recorded)  # the legacy primary was replaced since
        if other:
            at = next(iter(recorded.values()))
        if at is not None and _later(position, at, server, other_server=other):
            on_shards[list(sw.buckets)] = sw.to == "shards"
    return on_shards


def _later(position: Position, at: Position, server: str, *, other_server: bool) -> bool:
    """Is the change at ``position`` after the switch recorded at ``at``?

    By file and offset when both come from one server (exact everywhere); by
    GTID when the switch was recorded on another server of the topology (another
    address, or another ``@@server_id`` at the same one).
    """
    at_id = int(at[3]) if len(at) > 3 else 0
    here_id = int(position[3]) if len(position) > 3 else 0
    if not other_server and not (at_id and here_id and at_id != here_id):
        return (str(position[0]), int(position[1])) > (str(at[0]), int(at[1]))
    if len(at) > 2 and at[2] and len(position) > 2 and position[2]:
        return is_after(str(position[2]), str(at[2]))
    raise CutoverError(f"a change read on server {server} cannot be placed before or after a switch recorded on "
                       "another server without GTIDs on both", server=server)


def _earliest(switches: Sequence[Switch]) -> dict[str, Any]:
    """Per shard server, the earliest position of a switch to the shards (where the reverse sync starts)."""
    out: dict[str, Any] = {}
    for sw in switches:
        if sw.to != "shards":
            continue
        for server, at in sw.shards.items():
            if server not in out or tuple(at) < tuple(out[server]):
                out[server] = [at[0], at[1]]
    return out
