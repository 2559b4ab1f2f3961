"""``ddm migrate``: plan and run a resharding by slots, step by resumable step (docs/migration.md).

The steps of :class:`ddm_core.migrate.Migration`: ``start`` (prepare, dual write,
backfill, catch-up, verify), ``verify``, ``shift-reads PCT``, ``cutover``,
``rollback``, ``finish`` and ``status``; each can be run again after a crash and
continues. The single phases stay available: ``plan``, ``prepare``,
``backfill``, ``catch-up`` and ``config-publish``; ``prune`` trims the state table.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ddm_core.cli.app import cli, load, needs_extra
from ddm_core.cli.display import FenceBar, console as _console, duration as _duration, size as _size, spinner as _status
from ddm_core.cli.live import REFRESH_S, DirectionRow, LiveTable, RateMeter, bytes_behind, position_text
from ddm_core.errors import ConfigError
from ddm_core.metadata.model import ShardingConfig
from ddm_core.migrate import Connections, config_table_source, connector
from ddm_core.migrate.backfill import (
    BATCH_ROWS, MAX_BATCH_ROWS, ScanReport, backfill, backfill_scans, estimated_rows,
)
from ddm_core.migrate.binlog import binlog_positions
from ddm_core.migrate.catchup import FLUSH_ROWS, MAX_LAG, catch_up
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import MigrationPlan, plan_migration
from ddm_core.migrate.prepare import prepare
from ddm_core.migrate.state import MigrationLog

__all__ = ["migrate"]


def _plan_tables(plan: MigrationPlan, per_slot: bool) -> Iterator[tuple[str, Table]]:
    for tp in plan.tables:
        title = f"{tp.table}: {len(tp.moves)} of {1 << tp.slot_bits} slots move (by {tp.column}; rows {tp.counted})"
        table = Table()
        for name, justify in (("slots", "left"), ("from", "left"), ("to", "left"), ("count", "right"),
                              ("rows", "right"), ("bytes", "right")):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        if per_slot:
            for m in tp.moves:
                table.add_row(str(m.slot), m.source, m.target, "1", f"{m.rows or 0:,}", _size(m.bytes or 0))
        else:
            for first, last, source, target, rows, size in tp.runs():
                span = str(first) if first == last else f"{first}-{last}"
                table.add_row(span, source, target, f"{last - first + 1}", f"{rows:,}", _size(size))
        table.add_section()
        table.add_row("total", "", "", f"{len(tp.moves)}", f"{tp.rows:,}", _size(tp.bytes))
        yield title, table
    if plan.broadcasts:
        table = Table()
        for name in ("table", "from", "to", "rows", "bytes"):
            table.add_column(name)
        for b in plan.broadcasts:
            table.add_row(b.table, b.source, ", ".join(b.targets), f"{b.rows:,}", _size(b.bytes))
        yield "broadcast tables copied to the new data sources", table


def _print_plan(console: Console, plan: MigrationPlan, per_slot: bool) -> None:
    for title, table in _plan_tables(plan, per_slot):
        console.print(title)
        console.print(table)
    for tp in plan.tables:
        if len(tp.moves) > tp.fewest_moves:
            console.print(
                f"note: {tp.table} moves {len(tp.moves)} slots; the smallest resize to this many data sources "
                f"moves {tp.fewest_moves} (ddm_core.algorithms.slot_based.slot_layout_spec(old.moved_to(n), names))"
            )
    if plan.new_data_sources:
        console.print(f"new data sources: {', '.join(plan.new_data_sources)}")
    rate = "unknown" if plan.rate is None else f"{plan.rate:,.0f} rows/s ({'measured' if plan.rate_measured else 'given'})"
    console.print(f"to copy: {plan.rows:,} rows, {_size(plan.bytes)}; copy rate {rate}; "
                  f"estimated time {_duration(plan.seconds)}")


def _configs(old_path: str, new_path: str) -> tuple[ShardingConfig, ShardingConfig]:
    return load(old_path, check_env=True), load(new_path, check_env=True)


_FROM = click.option("--from", "old_path", required=True, type=click.Path(exists=True, dir_okay=False),
                     help="The configuration serving now.")
_TO = click.option("--to", "new_path", required=True, type=click.Path(exists=True, dir_okay=False),
                   help="The configuration to migrate to.")
_PROGRESS = click.option("--progress/--no-progress", default=True, help="Show a spinner on stderr.")


@cli.group()
def migrate() -> None:
    """Online resharding by slots (docs/migration.md).

    start | status | verify | shift-reads PCT | cutover | rollback | finish, each resumable;
    plan, prepare, backfill, catch-up and config-publish run single phases; prune deletes the state
    rows a checkpoint covers. The steps that read binlogs need the 'migrate' extra:
    pip install 'ddm-core[migrate]'.
    """


@migrate.command("plan")
@_FROM
@_TO
@click.option("--count", type=click.Choice(["exact", "estimate", "none"]), default="exact", show_default=True,
              help="Rows per slot: read every shard key, spread information_schema estimates, or skip.")
@click.option("--rate", type=click.FloatRange(min=1), help="Rows/s to estimate with (default: measured).")
@click.option("--per-slot", is_flag=True, help="One line per slot instead of per run of slots.")
@_PROGRESS
def plan_cmd(old_path: str, new_path: str, count: str, rate: float | None, per_slot: bool, progress: bool) -> None:
    """Which slots move where, rows and bytes per slot, estimated time at a measured copy rate."""
    old, new = _configs(old_path, new_path)
    console = _console()
    if count == "none":
        plan = plan_migration(old, new, count="none", rate=rate)
    else:
        with Connections(old, new) as conns, _status(console, progress) as spinner:
            plan = plan_migration(old, new, conns=conns, count=count, rate=rate,  # type: ignore[arg-type]
                                  progress=spinner.update)
    if not plan.tables and not plan.broadcasts:
        console.print("nothing moves: the two configurations place every row alike")
        return
    _print_plan(console, plan, per_slot)


_STATE = click.option("--state", "state_ds", required=True, help="Data source holding the ddm_migration table.")
_NAME = click.option("--name", required=True, help="The migration's name.")
#: The catch-up options, of ``catch-up`` and of every step that runs binlog passes.
_MAX_LAG = click.option("--max-lag", type=click.FloatRange(min=0.01, max=3600), default=MAX_LAG, show_default=True,
                        help="The catch-up gate: a binlog pass shorter than this many seconds.")
_PASS_TIMEOUT = click.option("--pass-timeout", type=click.FloatRange(min=1, max=86400), default=120.0,
                             show_default=True,
                             help="A catch-up pass that has not reached the end of the binlog by then fails.")
_FLUSH_ROWS = click.option("--flush-rows", type=click.IntRange(min=1, max=100_000), default=FLUSH_ROWS,
                           show_default=True, help="Binlog changes applied (and the position recorded) per flush.")


@migrate.command("prepare")
@_FROM
@_TO
@_STATE
@_NAME
@click.option("--rate", type=click.FloatRange(min=1), help="Rows/s to estimate with (default: measured).")
@_PROGRESS
def prepare_cmd(old_path: str, new_path: str, state_ds: str, name: str, rate: float | None, progress: bool) -> None:
    """Create the target tables and check every physical table's schema (resumable)."""
    old, new = _configs(old_path, new_path)
    console = _console()
    with Connections(old, new) as conns, MigrationLog(connector(old, state_ds), name) as log, \
            _status(console, progress) as spinner:
        log.create_table()
        plan = plan_migration(old, new, conns=conns, count="estimate", rate=rate, progress=spinner.update)
        spinner.update("creating target tables and checking schemas")
        result = prepare(old, new, plan, conns, log)
    for stmt in result.created:
        console.print(f"created {stmt.data_source}: {stmt.sql.splitlines()[0].rstrip(' (')}")
    for report in result.reports:
        console.print(f"{report.table}: {len(report.checked)} physical tables, schemas consistent")
    console.print(f"migration {name!r}: prepare completed")


@migrate.command("status")
@click.option("--config", "-c", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="A configuration naming the state data source (or give --from/--to).")
@click.option("--from", "old_path", type=click.Path(exists=True, dir_okay=False),
              help="The configuration serving before the migration (orders the scans).")
@click.option("--to", "new_path", type=click.Path(exists=True, dir_okay=False), help="The configuration migrated to.")
@_STATE
@_NAME
@click.option("--config-on", help="Data source holding the ddm_config table (shows its newest version).")
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON document (for scripts).")
def status_cmd(config_path: str | None, old_path: str | None, new_path: str | None, state_ds: str, name: str,
               config_on: str | None, as_json: bool) -> None:
    """The phase, read shift, per-scan progress, catch-up lag, published versions and history."""
    from ddm_core.migrate.migration import status_of

    if config_path is None and old_path is None:
        raise click.UsageError("give --config, or --from and --to")
    config = load(config_path or old_path or "", check_env=True)
    new = load(new_path, check_env=True) if new_path else None
    console = _console()
    with MigrationLog(connector(config, state_ds), name) as log:
        state = log.state()
    if state.phase is None and not as_json:
        console.print(f"migration {name!r} has no recorded step")
        return
    version = None
    if config_on is not None:
        with config_table_source(config, config_on) as source:
            version = source.latest_version()
    plan = plan_migration(config, new, count="none", rate=1.0) if new is not None and old_path else None
    st = status_of(state, config if plan else None, new, plan, version)
    if as_json:
        click.echo(json.dumps(status_json(st), default=str, indent=2))
        return
    _print_status(console, st)


def status_json(st: Any) -> dict[str, Any]:
    """What ``ddm migrate status --json`` prints (``st``: a :class:`~ddm_core.migrate.migration.MigrationStatus`)."""

    def scan(s: Any) -> dict[str, Any]:
        return {"scan": s.scan, "high_water": list(s.high_water) if s.high_water else None,
                "rows_copied": s.rows_copied, "done": s.done}

    return {
        "name": st.name, "phase": st.phase.value if st.phase is not None else None, "completed": st.completed,
        "stopped": st.stopped, "read_shift_pct": st.read_shift_pct, "rows_copied": st.rows_copied,
        "scans": [scan(s) for s in st.scans], "finish_scans": [scan(s) for s in st.finish_scans],
        "binlog": {server: position_text(at) for server, at in st.binlog.items()},
        "catch_up_lag_s": st.catch_up_lag, "last_verify": st.findings, "published": dict(st.published),
        "config_version": st.config_version, "write_pause_s": st.write_pause_s,
        "history": [{"step": ev.seq, "event": ev.event, "phase": str(ev.phase)} for ev in st.history],
    }


@migrate.command("prune")
@click.option("--config", "-c", "config_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A configuration naming the state data source.")
@_STATE
@_NAME
@click.option("--archive", help="Copy the pruned rows into this table first (same layout, created if missing).")
@click.option("--checkpoint", is_flag=True,
              help="Write a checkpoint covering every row first (only while no ddm migrate process runs).")
@_PROGRESS
def prune_cmd(config_path: str, state_ds: str, name: str, archive: str | None, checkpoint: bool,
              progress: bool) -> None:
    """Delete (or archive) the ddm_migration rows before the last checkpoint; the state is unchanged."""
    from ddm_core.migrate.prune import prune

    config = load(config_path, check_env=True)
    console = _console()
    with MigrationLog(connector(config, state_ds), name) as log, _status(console, progress) as spinner:
        report = prune(log, archive=archive, checkpoint=checkpoint,
                       progress=lambda n: spinner.update(f"pruning: {n:,} rows"))
    console.print(f"migration {name!r}: {report.deleted:,} rows before step {report.checkpoint} "
                  + (f"moved to {archive}" if archive else "deleted") + f"; {report.kept} rows kept")


def _print_status(console: Console, st: Any) -> None:
    done = "completed" if st.completed else ("stopped" if st.stopped is not None else "in progress")
    console.print(f"migration {st.name!r}: phase {st.phase} ({done}), reads shifted {st.read_shift_pct:g} %")
    summary = Table(show_header=False)
    summary.add_column("what")
    summary.add_column("value")
    if st.scans:
        finished = sum(1 for s in st.scans if s.done)
        summary.add_row("backfill", f"{finished} of {len(st.scans)} scans done, {st.rows_copied:,} rows copied")
        started = [s for s in st.scans if s.done or s.high_water is not None]
        console.print(f"backfill scans: {sum(1 for s in started if s.done)} of {len(started)} started are done, "
                      f"{st.rows_copied:,} rows copied")
    if st.catch_up_lag is not None:
        summary.add_row("catch-up lag", f"{st.catch_up_lag:.2f} s (the last gate pass)")
    for server, (file, pos) in st.binlog.items():
        summary.add_row(f"binlog {server}", f"{file}:{pos}")
    if st.findings is not None:
        summary.add_row("verify", f"{st.findings.get('differences', 0)} differences, "
                        f"{st.findings.get('transient', 0)} transient ({st.findings.get('rows', 0):,} rows)")
    if st.published:
        summary.add_row("published", ", ".join(f"{k} v{v}" for k, v in st.published.items()))
    if st.config_version is not None:
        summary.add_row("config table", f"newest version {st.config_version}")
    if st.write_pause_s is not None:
        summary.add_row("cutover write pause", f"{st.write_pause_s:.2f} s")
    if st.finish_scans:
        summary.add_row("finish", f"{sum(1 for s in st.finish_scans if s.done)} of {len(st.finish_scans)} scans "
                        f"done, {sum(s.rows_copied for s in st.finish_scans):,} old rows deleted")
    if st.stopped is not None:
        summary.add_row("stopped", str(st.stopped)[:300])
    console.print(summary)
    if st.scans:
        scans = Table()
        for col, justify in (("scan", "left"), ("high water", "left"), ("rows copied", "right"), ("done", "left")):
            scans.add_column(col, justify=justify)  # type: ignore[arg-type]
        for s in st.scans:
            hw = ", ".join(map(str, s.high_water)) if s.high_water else "-"
            scans.add_row(s.scan, hw, f"{s.rows_copied:,}", "yes" if s.done else "")
        console.print(scans)
    history = Table()
    for col in ("step", "event", "phase"):
        history.add_column(col)
    for ev in st.history:
        history.add_row(str(ev.seq), ev.event, str(ev.phase))
    console.print(history)


@migrate.command("config-publish")
@click.option("--config", "-c", "config_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A configuration naming the data source that holds the ddm_config table.")
@click.option("--on", "data_source", required=True, help="Data source holding the ddm_config table.")
@click.argument("document", type=click.Path(exists=True, dir_okay=False))
def config_publish_cmd(config_path: str, data_source: str, document: str) -> None:
    """Insert DOCUMENT as the next version of the ddm_config table (created if missing)."""
    config = load(config_path, check_env=True)
    try:
        text = Path(document).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read configuration {document!r}: {exc}") from exc
    with config_table_source(config, data_source, create=True) as source:
        version = source.publish(text)
    click.echo(f"published {document} as version {version} of {source.where}")
    click.echo("applications follow it with: ConfigHolder(config_table_source(config, "
               f"{data_source!r})).watch(1.0)  # from ddm_core.migrate import config_table_source")


@migrate.command("backfill")
@_FROM
@_TO
@_STATE
@_NAME
@click.option("--batch", type=click.IntRange(min=1, max=MAX_BATCH_ROWS), default=BATCH_ROWS, show_default=True,
              help="Source rows per checked batch.")
@click.option("--max-rows-per-s", type=click.FloatRange(min=1), help="Ceiling on source rows read per second.")
@click.option("--writes-stopped", is_flag=True,
              help="The application does not write the moving tables now: record the dual-write phase as "
                   "complete (it has nothing to do) and go on to backfill.")
@click.option("--progress/--no-progress", default=True, help="Show per-scan progress bars on stderr.")
def backfill_cmd(old_path: str, new_path: str, state_ds: str, name: str, batch: int, max_rows_per_s: float | None,
                 writes_stopped: bool, progress: bool) -> None:
    """Copy the moving slots' rows in checked batches (resumable: run it again after a crash)."""
    old, new = _configs(old_path, new_path)
    console = _console()
    with Connections(old, new) as conns, MigrationLog(connector(old, state_ds), name) as log:
        state = log.state()
        if writes_stopped and state.phase is Phase.PREPARE and state.completed:
            log.enter(Phase.DUAL_WRITE, detail={"writes_stopped": True}, state=state)
            log.complete(Phase.DUAL_WRITE, detail={"writes_stopped": True})
        plan = plan_migration(old, new, count="none", rate=1.0)
        with _BackfillBars(conns, plan, old, new, enabled=progress) as bars:
            result = backfill(old, new, plan, conns, log, batch=batch, max_rows_per_s=max_rows_per_s,
                              progress=bars.update)
    for report in result.scans:
        console.print(f"{report.scan.describe()}: {report.rows_copied:,} rows copied"
                      + (f" ({report.rows_read:,} read now in {report.batches} batch"
                         f"{'es' if report.batches != 1 else ''})" if report.batches else ""))
    rate = result.rows_read / result.seconds if result.seconds > 0 else 0.0
    console.print(f"migration {name!r}: backfill completed; this run read {result.rows_read:,} rows "
                  f"in {result.seconds:.1f} s ({rate:,.0f} rows/s, throttled {result.throttled:.1f} s)")


class _BackfillBars:
    """One rich progress bar per scan (rows read of the table's estimate), with rows/s."""

    def __init__(self, conns: Connections, plan: MigrationPlan, old: ShardingConfig, new: ShardingConfig,
                 *, enabled: bool) -> None:
        self.enabled = enabled
        self.tasks: dict[str, Any] = {}
        self.progress: Any = None
        self.started = False
        if enabled:
            self.progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[moved]:>10,} moved"), TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(), console=Console(stderr=True),
            )
            for scan in backfill_scans(old, new, plan):
                self.tasks[scan.name] = self.progress.add_task(
                    scan.describe()[:60], total=max(estimated_rows(conns, scan), 1), moved=0, rate="")

    def __enter__(self) -> "_BackfillBars":
        return self

    def update(self, report: ScanReport) -> None:
        if self.progress is None:
            return
        if not self.started:  # drawn from the first batch on: a refused start draws nothing
            self.progress.start()
            self.started = True
        task = self.tasks[report.scan.name]
        speed = self.progress.tasks[task].speed
        fields: dict[str, Any] = {"moved": report.rows_copied, "rate": f"{speed:,.0f} rows/s" if speed else ""}
        if report.done:
            total = self.progress.tasks[task].total
            self.progress.update(task, completed=max(report.rows_read, 1) if report.rows_read else total,
                                 total=max(report.rows_read, 1) if report.rows_read else total, **fields)
        else:
            self.progress.update(task, completed=report.rows_read, **fields)

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None and self.started:
            self.progress.stop()


@migrate.command("catch-up")
@_FROM
@_TO
@_STATE
@_NAME
@_MAX_LAG
@_PASS_TIMEOUT
@_FLUSH_ROWS
@click.option("--progress/--no-progress", default=True, help="Show a spinner on stderr.")
@needs_extra("migrate")
def catch_up_cmd(old_path: str, new_path: str, state_ds: str, name: str, max_lag: float, pass_timeout: float,
                 flush_rows: int, progress: bool) -> None:
    """Apply the binlog changes made since the backfill started (resumable; needs binlog_format=ROW)."""
    old, new = _configs(old_path, new_path)
    console = _console()
    with Connections(old, new) as conns, MigrationLog(connector(old, state_ds), name) as log:
        plan = plan_migration(old, new, count="none", rate=1.0)
        with _CatchUpLive(old, conns, log, progress) as live:
            result = catch_up(old, new, plan, conns, log, max_lag=max_lag, pass_timeout=pass_timeout,
                              flush_rows=flush_rows, progress=live.applied, on_pass=live.passed)
    if result.completed:
        console.print(f"migration {name!r}: catch-up completed after {result.passes} passes, "
                      f"{result.applied:,} changes applied (last pass {result.last_pass:.2f} s)")
    else:
        console.print(f"migration {name!r}: catch-up not completed: the last of {result.passes} passes took "
                      f"{result.last_pass:.2f} s (gate {max_lag:g} s); run it again")
        raise SystemExit(1)


class _CatchUpLive:
    """The live table of a catch-up: per source server the position recorded and the bytes to the server's
    end; the changes applied per second and the last pass's seconds (the lag the gate reads)."""

    def __init__(self, old: ShardingConfig, conns: Connections, log: MigrationLog, enabled: bool) -> None:
        self.old, self.conns, self.log, self.enabled = old, conns, log, enabled
        self.table = LiveTable(f"migration {log.name!r}: catch-up", enabled=enabled)
        self.meter = RateMeter()
        self.total = 0
        self.lag_s: float | None = None
        self.shown = -REFRESH_S

    def applied(self, passes: int, applied: int) -> None:
        self.total = applied
        self.refresh()

    def passed(self, passes: int, seconds: float) -> None:
        self.lag_s = seconds
        self.refresh()

    def refresh(self) -> None:
        if self.enabled and time.monotonic() - self.shown >= REFRESH_S:
            self.shown = time.monotonic()
            self.table.show(*self.rows())

    def rows(self) -> tuple[list[DirectionRow], Any]:
        from ddm_core.migrate.migration import status_of

        st = status_of(self.log.state(), None, None, None, None)
        start: dict[str, Any] = {}
        for ev in st.history:
            if ev.event == "enter" and ev.phase is Phase.BACKFILL and isinstance(ev.detail, dict):
                start = dict(ev.detail.get("binlog") or {})
        recorded = {**start, **{server: list(at) for server, at in st.binlog.items()}}
        ends = binlog_positions(self.old, self.conns, sorted(self.old.data_sources)) if recorded else {}
        rows = [DirectionRow("catch-up", server, position_text(at), self.meter.see(self.total) if i == 0 else None,
                             self.lag_s if i == 0 else None, bytes_behind(at, ends.get(server)),
                             self.total if i == 0 else 0)
                for i, (server, at) in enumerate(sorted(recorded.items()))]
        return rows, st.findings

    def __enter__(self) -> "_CatchUpLive":
        self.table.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.table.__exit__()


# -- the Migration steps ----------------------------------------------------------------------------


def _steps(f: Any) -> Any:
    """The options every Migration step takes."""
    options = [
        _FROM, _TO, _STATE, _NAME,
        click.option("--config-on", help="Data source holding the ddm_config table the application watches "
                                         "(default: the state data source)."),
        click.option("--fence-after-s", type=click.FloatRange(min=0.1, max=3600), default=5.0, show_default=True,
                     help="An instance that did not confirm its version this long refuses writes to moving slots."),
        click.option("--poll-s", type=click.FloatRange(min=0.05, max=3600), default=1.0, show_default=True,
                     help="How often the application instances poll the ddm_config table."),
        click.option("--fence-timeout-s", type=click.FloatRange(min=0.1, max=86400), default=60.0, show_default=True,
                     help="How long a step waits for every registered instance to take its version "
                          "(docs/operations.md#instance-registry)."),
        click.option("--batch", type=click.IntRange(min=1, max=MAX_BATCH_ROWS), default=BATCH_ROWS,
                     show_default=True, help="Rows per backfill / finish batch."),
        click.option("--max-rows-per-s", type=click.FloatRange(min=1), help="Ceiling on rows read per second."),
        click.option("--max-replica-lag-s", type=click.FloatRange(min=0),
                     help="Backfill pauses while the source's replicas lag more than this."),
        _MAX_LAG, _FLUSH_ROWS, _PASS_TIMEOUT,
        click.option("--observation-s", type=click.FloatRange(min=0), default=0.0, show_default=True,
                     help="Seconds after cutover before finish may delete the old rows."),
        click.option("--verify-cutover/--no-verify-cutover", default=True, show_default=True,
                     help="Compare the moving slots once more while writes are paused at cutover."),
        click.option("--progress/--no-progress", default=True, help="Show progress bars on stderr."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


class _Run:
    """A Migration built from the step options, with rich progress on stderr and step lines on stdout."""

    def __init__(self, opts: dict[str, Any]) -> None:
        self.old, self.new = _configs(opts["old_path"], opts["new_path"])
        self.console = _console()
        self.progress = bool(opts["progress"])
        self.conns = Connections(self.old, self.new)
        self.bars: _BackfillBars | None = None
        self.spinner = _status(self.console, self.progress)
        self.fence = FenceBar(self.progress)
        self.live: _CatchUpLive | None = None
        from ddm_core.migrate.migration import Migration

        self.migration = Migration(
            self.old, self.new, name=opts["name"], state_on=opts["state_ds"],
            config_source=opts["config_on"] or opts["state_ds"], conns=self.conns, batch=opts["batch"],
            max_rows_per_s=opts["max_rows_per_s"], max_replica_lag_s=opts["max_replica_lag_s"],
            fence_after_s=opts["fence_after_s"], poll_s=opts["poll_s"], observation_s=opts["observation_s"],
            max_lag=opts["max_lag"], flush_rows=opts["flush_rows"], pass_timeout=opts["pass_timeout"],
            verify_cutover=opts["verify_cutover"], echo=self.echo,
            on_scan=self.scan, on_catch_up=self.catch_up, on_catch_up_pass=self.catch_up_pass,
            fence_timeout_s=opts["fence_timeout_s"],
            on_fence=self.fence,
        )

    def echo(self, line: str) -> None:
        self.spinner.update(line)
        self.console.print(line)

    def scan(self, report: ScanReport) -> None:
        if not self.progress:
            return
        if self.bars is None:
            self.spinner.__exit__()
            self.bars = _BackfillBars(self.conns, self.migration.plan, self.old, self.new, enabled=True)
        self.bars.update(report)

    def _live(self) -> "_CatchUpLive":
        if self.live is None:  # the live table takes stderr from here on
            if self.bars is not None:
                self.bars.__exit__()
                self.bars = None
            self.spinner.__exit__()
            self.live = _CatchUpLive(self.old, self.conns, self.migration.log, self.progress).__enter__()
        return self.live

    def catch_up(self, passes: int, applied: int) -> None:
        self._live().applied(passes, applied)

    def catch_up_pass(self, passes: int, seconds: float) -> None:
        self._live().passed(passes, seconds)

    def __enter__(self) -> "_Run":
        self.spinner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bars is not None:
            self.bars.__exit__()
        if self.live is not None:
            self.live.__exit__()
        self.fence.close()
        self.spinner.__exit__()
        self.migration.close()
        self.conns.close()


_SNIPPET = """point every application instance at the configuration table:

    from ddm_core import load_config
    from ddm_core.execute import Executor
    from ddm_core.metadata import ConfigHolder
    from ddm_core.migrate import config_table_source

    holder = ConfigHolder(config_table_source(load_config({old!r}), {on!r}))
    holder.watch({poll:g})          # poll every {poll:g} s (--poll-s); writes to moving slots fence after {fence:g} s
    executor = Executor(holder)"""


@migrate.command("start")
@_steps
@needs_extra("migrate")
def start_cmd(**opts: Any) -> None:
    """Prepare, dual write, backfill, catch-up and verify (resumable: run it again after a crash)."""
    with _Run(opts) as run:
        run.console.print(_SNIPPET.format(old=opts["old_path"], on=opts["config_on"] or opts["state_ds"],
                                          poll=opts["poll_s"], fence=opts["fence_after_s"]))
        st = run.migration.start()
        if run.bars is not None:
            run.bars.__exit__()
            run.bars = None
        _print_status(run.console, st)
        run.console.print(f"migration {opts['name']!r}: verify completed; next: ddm migrate shift-reads 1")


@migrate.command("verify")
@_steps
@needs_extra("migrate")
def verify_cmd(**opts: Any) -> None:
    """Compare every moving slot, old against new (the verify phase; afterwards only a comparison)."""
    with _Run(opts) as run:
        report = run.migration.verify()
        run.console.print(report.summary())
        for d in report.differences[:20]:
            for line in d.lines():
                run.console.print(f"    {line}")
        run.console.print(f"migration {opts['name']!r}: " + ("consistent" if report.consistent else "differences"))
    if not report.consistent:
        raise SystemExit(1)


@migrate.command("shift-reads")
@click.argument("pct", type=click.FloatRange(min=0, max=100, min_open=True))
@_steps
@needs_extra("migrate")
def shift_reads_cmd(pct: float, **opts: Any) -> None:
    """Send PCT % of the moving slots' reads to the new location (1 -> 10 -> 50 -> 100)."""
    with _Run(opts) as run:
        st = run.migration.shift_reads(pct)
        run.console.print(f"migration {opts['name']!r}: reads shifted {st.read_shift_pct:g} %"
                          + ("; next: ddm migrate cutover" if st.completed else ""))


@migrate.command("cutover")
@_steps
@needs_extra("migrate")
def cutover_cmd(**opts: Any) -> None:
    """Pause writes to the moving slots, catch up, publish the new configuration (resumable)."""
    with _Run(opts) as run:
        st = run.migration.cutover()
        pause = st.write_pause_s
        run.console.print(f"migration {opts['name']!r}: cutover completed; writes to the moving slots were paused "
                          + (f"{pause:.2f} s" if pause is not None else "(unknown)"))


@migrate.command("rollback")
@_steps
def rollback_cmd(**opts: Any) -> None:
    """Return every read and write to the old location in one configuration version (before cutover)."""
    with _Run(opts) as run:
        run.migration.rollback()
        run.console.print(f"migration {opts['name']!r}: rolled back")


@migrate.command("finish")
@click.option("--archive", help="Copy each deleted row to <old table><ARCHIVE> first (e.g. _archive).")
@_steps
def finish_cmd(archive: str | None, **opts: Any) -> None:
    """Delete the moved slots' rows from their old tables in batches (after the observation period)."""
    with _Run(opts) as run:
        st = run.migration.finish(archive)
        deleted = sum(s.rows_copied for s in st.finish_scans)
        run.console.print(f"migration {opts['name']!r}: finish completed, {deleted:,} old rows deleted")
