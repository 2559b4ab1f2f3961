"""The catch-up phase: changes made to moving rows since the backfill started, applied from the binlog.

The backfill records each source server's binlog position (``SHOW MASTER
STATUS``) in its ``enter`` row before it copies anything
(:func:`ddm_core.migrate.binlog.binlog_positions`). Catch-up reads every server's binlog from there
with ``mysql-replication`` (row events; the server needs ``log_bin``,
``binlog_format=ROW`` and, for column names, ``binlog_row_metadata=FULL``):

* only the source physical tables of the backfill scans are looked at; the
  rows of each event are assigned to slots on the compiled batch path, and
  rows of non-moving slots are ignored;
* the row images only name the keys that changed: a flush copies each key's
  row as the source holds it *now*, under the source's row lock, to its
  target (or deletes it there), so an apply never sets back a newer version
  the application's dual write put there meanwhile
  (:mod:`ddm_core.migrate.keycopy`). Every apply is idempotent, and replaying
  the binlog from any earlier position (a restart, the reader's known
  re-deliveries) converges on the source's rows;
* the position is recorded (a ``scan`` event named ``binlog:host:port``, the
  ``(file, position)`` after the last transaction applied, followed by the
  GTID position there and the server's ``@@server_id`` when the start position
  carried them) after each flush, so a killed catch-up resumes from its last
  recorded position — by GTID when the server answering is another one than
  the one that wrote it (a promoted replica: :mod:`ddm_core.migrate.gtid`);
* every read is bounded: the stream connection has a read timeout and each
  pass a deadline (:class:`~ddm_core.errors.CatchUpTimeoutError`); a pass
  reads without blocking up to the end of the binlog — one that starts by
  GTID blocking, with heartbeats, up to the end the binlog had when it began.

The gate to the next phase: a pass — from the recorded position to the end
of every server's binlog — that takes under ``max_lag`` seconds (1 s): at its
end the targets are less than that behind their sources.
"""

from __future__ import annotations

import importlib.util
import math
import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ddm_core.errors import CatchUpTimeoutError, MigrationError
from ddm_core.execute.mysql_connect import tls_arguments
from ddm_core.metadata.model import ShardingConfig
from ddm_core.migrate.backfill import Scan, ScanCopier, backfill_scans
from ddm_core.migrate.binlog import binlog_positions, server_of
from ddm_core.migrate.connections import Connections
from ddm_core.migrate.gtid import advance, is_mariadb, server_gtid
from ddm_core.migrate.keycopy import Applier
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import MigrationPlan
from ddm_core.migrate.state import MigrationLog, WorkflowLog

__all__ = ["CatchUpResult", "catch_up", "binlog_passes", "replay_passes", "Applier", "Keep", "FLUSH_ROWS", "MAX_LAG"]

#: Changes applied per flush (and position record).
FLUSH_ROWS = 1000
#: The gate: a pass over the remaining binlog shorter than this, in seconds.
MAX_LAG = 1.0
#: Read timeout of the binlog stream connection, in seconds.
READ_TIMEOUT = 10
#: Seconds between the server's heartbeats on a blocking read (a start by GTID): an idle server says where it is.
HEARTBEAT_S = 0.5


def _sources(config: ShardingConfig, scans: Sequence[Scan]) -> dict[str, list[str]]:
    """``server -> data sources`` read by ``scans``."""
    out: dict[str, list[str]] = {}
    for ds in sorted({s.source for s in scans}):
        out.setdefault(server_of(config.data_sources[ds].primary), []).append(ds)
    return out


@dataclass(frozen=True, slots=True)
class CatchUpResult:
    """Passes run, changes applied (upserts and deletes), the last pass's seconds, whether the gate passed."""

    passes: int
    applied: int
    last_pass: float
    completed: bool


def _reader_id(migration: str, server: str) -> int:
    # A replica server id of its own per migration and server (must differ from every real replica's).
    return 0x40000000 + zlib.crc32(f"{migration}@{server}".encode()) % 0x3FFFFFFF


def catch_up(
    old: ShardingConfig,
    new: ShardingConfig,
    plan: MigrationPlan,
    conns: Connections,
    log: MigrationLog,
    *,
    max_lag: float = MAX_LAG,
    max_passes: int = 20,
    pass_timeout: float = 120.0,
    flush_rows: int = FLUSH_ROWS,
    clock: Callable[[], float] = time.monotonic,
    progress: Callable[[int, int], None] | None = None,
    on_pass: Callable[[int, float], None] | None = None,
) -> CatchUpResult:
    """Run (or resume) the catch-up phase: binlog passes until one takes under ``max_lag`` seconds.

    Args:
        max_passes: Give up (the phase stays entered) after this many passes.
        pass_timeout: Deadline of one pass, in seconds.
        flush_rows: Changes applied (and the position recorded) per flush.
        progress: Called as ``progress(pass number, changes applied so far)`` after each flush.
        on_pass: Called as ``on_pass(pass number, seconds it took)`` after each pass.

    Raises:
        MigrationStateError: the migration is not at catch-up or a completed backfill.
        MigrationError: the backfill recorded no binlog position for a source server.
        CatchUpTimeoutError: a pass did not reach the end of a binlog before its deadline.
    """
    if importlib.util.find_spec("pymysqlreplication") is None:  # fail before entering the phase
        raise MigrationError("catch-up reads the binlog with mysql-replication: pip install 'ddm-core[migrate]'",
                             migration=log.name)

    state = log.state()
    if state.phase is Phase.CATCH_UP and state.completed:
        return CatchUpResult(0, 0, 0.0, True)
    start = _checked_start(old, new, plan, log)
    state = log.enter(Phase.CATCH_UP, detail={"from": start}, state=state)
    return binlog_passes(old, new, plan, conns, log, phase=Phase.CATCH_UP, complete=True, max_lag=max_lag,
                         max_passes=max_passes, pass_timeout=pass_timeout, flush_rows=flush_rows, clock=clock,
                         progress=progress, on_pass=on_pass)


def _checked_start(old: ShardingConfig, new: ShardingConfig, plan: MigrationPlan, log: MigrationLog
                   ) -> dict[str, Any]:
    """The backfill's recorded binlog positions; refuses a source server without one."""
    scans = backfill_scans(old, new, plan)
    start = _recorded_positions(log)
    servers = _sources(old, scans)
    for server in servers:
        if start.get(server) is None:
            raise MigrationError(
                f"the backfill recorded no binlog position for server {server} (data sources "
                f"{', '.join(servers[server])}): catch-up needs log_bin and binlog_format=ROW there",
                migration=log.name)
    return start


def binlog_passes(
    old: ShardingConfig,
    new: ShardingConfig,
    plan: MigrationPlan,
    conns: Connections,
    log: MigrationLog,
    *,
    phase: Phase,
    **options: Any,
) -> CatchUpResult:
    """Binlog passes from the recorded positions until one takes under ``max_lag`` seconds.

    The catch-up phase's work, also run in the later phases (verify, the read
    shift, cutover) while the migration is in ``phase``: the positions reached
    are recorded as ``scan`` events of that phase, so each phase continues where
    the last pass stopped. ``options`` are :func:`replay_passes`' (``complete``:
    complete ``phase`` when the gate passes; ``max_lag``, ``max_passes``...).
    """
    start = _checked_start(old, new, plan, log)
    copiers = [ScanCopier(scan, old, conns) for scan in backfill_scans(old, new, plan)]
    return replay_passes(old, Applier(old, conns, copiers), log, start, phase=phase, **options)


#: ``keep(copier, kind, rows, position)``: the row images of one event to apply (a replay's filter);
#: ``position``: ``(file, pos, gtid, server_id)``, the event's binlog position, its transaction's GTID
#: (``""``: none) and the ``@@server_id`` of the server read (``0``: not asked, when no GTID is tracked).
Keep = Callable[[ScanCopier, str, Sequence[dict[str, Any]], tuple[str, int, str, int]], Sequence[dict[str, Any]]]


def _server_id(conns: Connections, data_source: str) -> int:
    """``@@server_id`` of the server answering for ``data_source`` now (a fail-over changes it)."""
    return server_gtid(lambda sql, params: conns.query(data_source, sql, params))[1]


def _binlog_end(config: ShardingConfig, conns: Connections, server: str, data_source: str) -> tuple[str, int]:
    """``server``'s binlog file and position now (read through ``data_source``): where a blocking pass stops."""
    end = binlog_positions(config, conns, [data_source]).get(server)
    if end is None:
        raise MigrationError(f"catch-up of server {server}: SHOW MASTER STATUS through data source "
                             f"{data_source!r} shows no binlog (log_bin off, or no privilege to look)")
    return str(end[0]), int(end[1])


def _reached(stream: Any, until: tuple[str, int]) -> bool:
    """Has ``stream`` read up to ``until`` (a file name and position; files sort by their numbered suffix)?"""
    return (str(stream.log_file or ""), int(stream.log_pos or 0)) >= until


def _resume_point(marks: Sequence[Sequence[Any]], start: Sequence[Any]) -> tuple[str, int, str, int]:
    """``(file, pos, gtid, server_id)`` to read from: the furthest mark, else ``start`` (missing parts: empty)."""
    found = max(marks, key=lambda m: (str(m[0]), int(m[1])), default=start)
    padded = [*found, "", 0][:4] if len(found) < 4 else list(found)
    return str(padded[0] or ""), int(padded[1] or 0), str(padded[2] or ""), int(padded[3] or 0)


def replay_passes(
    config: ShardingConfig,
    applier: Applier,
    log: WorkflowLog[Any],
    start: Mapping[str, Any],
    *,
    phase: Any,
    complete: bool = False,
    max_lag: float = MAX_LAG,
    max_passes: int = 20,
    pass_timeout: float = 120.0,
    flush_rows: int = FLUSH_ROWS,
    clock: Callable[[], float] = time.monotonic,
    progress: Callable[[int, int], None] | None = None,
    keep: Keep | None = None,
    position_prefix: str = "binlog:",
    record_every_s: float = 0.0,
    on_pass: Callable[[int, float], None] | None = None,
) -> CatchUpResult:
    """Binlog passes over the servers of ``applier``'s source tables until one takes under ``max_lag`` s.

    Each server's binlog is read from the position last recorded in ``log`` (a
    ``scan`` event named ``<position_prefix>host:port``), else from ``start``.

    Args:
        config: Names the data sources of the applier's scan sources (their servers and databases).
        start: ``server -> [file, position, gtid, server_id]`` where a server's first pass begins (gtid
            and server_id optional; an empty file: by GTID only). A position whose ``server_id`` is
            not the answering server's is resumed from by its GTID (``auto_position``), and then
            carries on in that server's own files.
        keep: Filters each event's row images before they are queued (``None``: every row).
        record_every_s: Record a server's position at most this often (0: after every flush). A
            position not recorded is read again after a restart, which the idempotent applies allow;
            a sync that runs for days keeps its state table small this way.
    """
    from pymysqlreplication import BinLogStreamReader  # type: ignore[import-untyped]
    from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, XidEvent  # type: ignore[import-untyped]
    from pymysqlreplication.row_event import (  # type: ignore[import-untyped]
        DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent,
    )
    from pymysqlreplication.event import HeartbeatLogEvent

    scans = [c.scan for c in applier.copiers.values()]
    servers = _sources(config, scans)
    schemas = sorted({(config.data_sources[s.source].primary.database or "") for s in scans})
    tables = sorted({s.physical for s in scans})
    kinds = {WriteRowsEvent: "write", UpdateRowsEvent: "update", DeleteRowsEvent: "delete"}
    passes, last = 0, float("inf")
    recorded = applier.recorded  # when each server's position was last recorded (clock())
    while passes < max_passes:
        passes += 1
        began = clock()
        for server, sources in servers.items():
            name = f"{position_prefix}{server}"
            at = log.scans().get(name)
            marks = [tuple(at.high_water)] if at is not None and at.high_water else []
            if name in applier.reached:  # read further than recorded (recording is throttled)
                marks.append(applier.reached[name])
            # The later of the two: a switch recorded by another process may be ahead of this one.
            file, pos, gtid, written_by = _resume_point(marks, start.get(server) or ("", 0))
            here = _server_id(applier.conns, sources[0]) if gtid else 0
            # A position another server wrote means nothing in this one's files: resume by GTID.
            by_gtid = bool(gtid) and (not file or (written_by != 0 and written_by != here))
            if not file and not gtid:
                raise MigrationError(f"catch-up of server {server}: no binlog file nor GTID to start from",
                                     migration=log.name)
            ep = config.data_sources[sources[0]].primary
            settings = {"host": ep.host or "127.0.0.1", "port": ep.port or 3306, "user": ep.username or "root",
                        "password": ep.password.reveal() if ep.password is not None else "",
                        "read_timeout": READ_TIMEOUT, "write_timeout": READ_TIMEOUT, "connect_timeout": 5,
                        # TLS as the data source's URL says (PyMySQL would otherwise build a TLS context
                        # per connection, ~27 ms, and a pass opens two).
                        **tls_arguments(ep.options, f"data source {sources[0]!r}")}
            # A start by GTID is read blocking, with heartbeats, up to the end the server's binlog had now
            # (``until``): MariaDB resets a non-blocking dump begun at a GTID once ~140 KB have gone, and the
            # reader reconnects at that same GTID, for ever (docs/migration.md#catch-up).
            until = _binlog_end(config, applier.conns, server, sources[0]) if by_gtid else None
            where: dict[str, Any] = (
                # MariaDB: is_mariadb only together with auto_position (with a file it loops on reconnects).
                {"auto_position": gtid, "is_mariadb": is_mariadb(gtid), "blocking": True,
                 "slave_heartbeat": HEARTBEAT_S} if by_gtid
                else {"log_file": file, "log_pos": int(pos), "resume_stream": True, "blocking": False})
            stream = BinLogStreamReader(
                connection_settings=settings, server_id=_reader_id(log.name, server),
                only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent, GtidEvent,
                             MariadbGtidEvent, HeartbeatLogEvent],
                only_schemas=schemas, only_tables=tables, **where,
            )
            committed: tuple[Any, ...] | None = None
            current = ""  # the GTID of the transaction being read
            # Track the GTID position only from a known one: a partial MySQL set would be wrong to resume from.
            track = bool(gtid)
            try:
                for event in stream:
                    if clock() - began > pass_timeout:
                        raise CatchUpTimeoutError(
                            f"catch-up of server {server}: a pass did not reach the end of the binlog within "
                            f"{pass_timeout:g} s (at {stream.log_file}:{stream.log_pos})", server=server)
                    if isinstance(event, HeartbeatLogEvent):  # an idle server's word of where it is
                        if until is not None and _reached(stream, until):
                            break
                        continue
                    if isinstance(event, (GtidEvent, MariadbGtidEvent)):
                        current = str(event.gtid)
                        continue
                    if isinstance(event, XidEvent):
                        if track:
                            gtid = advance(gtid, current)
                        committed = (str(stream.log_file), int(stream.log_pos), *((gtid, here) if track else ()))
                        if len(applier) >= flush_rows:
                            applier.flush()
                            applier.reached[name] = committed
                            if clock() - recorded.get(name, -math.inf) >= record_every_s:
                                log.record_scan(name, committed, applier.applied, "", phase=phase)
                                recorded[name] = clock()
                            if progress is not None:
                                progress(passes, applier.applied)
                        if until is not None and _reached(stream, until):
                            break  # a blocking read's end: every transaction the binlog had when it began
                        continue
                    copier = applier.copier_of(event.schema, event.table)
                    if copier is not None:
                        kind, rows = kinds[type(event)], event.rows
                        if keep is not None:
                            rows = keep(copier, kind, rows, (str(stream.log_file), int(stream.log_pos), current, here))
                        applier.add(copier, kind, rows)
            except CatchUpTimeoutError:
                raise
            except MigrationError:
                raise
            except Exception as exc:  # driver / reader errors have no common base
                raise MigrationError(f"catch-up of server {server}: reading the binlog failed: {exc}",
                                     migration=log.name) from exc
            finally:
                stream.close()
            applier.flush()
            if committed is not None:
                applier.reached[name] = committed
            if committed is not None and clock() - recorded.get(name, -math.inf) >= record_every_s:
                log.record_scan(name, committed, applier.applied, "", phase=phase)
                recorded[name] = clock()
            if progress is not None:
                progress(passes, applier.applied)
        last = clock() - began
        if on_pass is not None:
            on_pass(passes, last)
        if last < max_lag:
            if complete:
                log.complete(phase, detail={"passes": passes, "applied": applier.applied, "last_pass": last})
            return CatchUpResult(passes, applier.applied, last, True)
    return CatchUpResult(passes, applier.applied, last, False)


def _recorded_positions(log: MigrationLog) -> dict[str, Any]:
    """The binlog positions the backfill recorded on first entering (``server -> [file, pos]``)."""
    for ev in log.state().history:
        if ev.event == "enter" and ev.phase is Phase.BACKFILL and isinstance(ev.detail, dict):
            return dict(ev.detail.get("binlog") or {})
    return {}
