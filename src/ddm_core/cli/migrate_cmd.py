"""``ddm migrate``: plan a resharding by slots, run its prepare phase, show its state, publish configurations.

What exists: ``plan``, ``prepare``, ``backfill``, ``catch-up``, ``status`` and
``config-publish`` (docs/migration.md); dual write, read shift and
cutover are not implemented yet (``backfill --writes-stopped`` stands in for
dual write while the application does not write the moving tables).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ddm_core.cli.app import cli, load
from ddm_core.errors import ConfigError
from ddm_core.metadata.model import ShardingConfig
from ddm_core.migrate import Connections, config_table_source, connector
from ddm_core.migrate.backfill import (
    BATCH_ROWS, MAX_BATCH_ROWS, ScanReport, backfill, backfill_scans, estimated_rows,
)
from ddm_core.migrate.catchup import FLUSH_ROWS, MAX_LAG, catch_up
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import MigrationPlan, plan_migration
from ddm_core.migrate.prepare import prepare
from ddm_core.migrate.state import MigrationLog

__all__ = ["migrate"]


def _console() -> Console:
    return Console(highlight=False, soft_wrap=False, width=120)


def _status(console: Console, enabled: bool) -> Any:
    """A spinner on stderr for steps slower than a second (``--no-progress``: nothing)."""

    class Spinner:
        def __init__(self) -> None:
            self._status: Any = None

        def __enter__(self) -> "Spinner":
            if enabled:
                self._status = Console(stderr=True).status("starting")
                self._status.start()
            return self

        def update(self, text: str) -> None:
            if self._status is not None:
                self._status.update(text)

        def __exit__(self, *exc: object) -> None:
            if self._status is not None:
                self._status.stop()

    return Spinner()


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown (no rows counted or no rate)"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


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
    """Online resharding by slots (docs/migration.md): plan, prepare, backfill, catch-up, status.

    Dual write, read shift and cutover are not implemented yet.
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
@click.option("--config", "-c", "config_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A configuration naming the state data source.")
@_STATE
@_NAME
def status_cmd(config_path: str, state_ds: str, name: str) -> None:
    """The phase, read shift, per-slot progress and history of a migration."""
    config = load(config_path, check_env=True)
    console = _console()
    with MigrationLog(connector(config, state_ds), name) as log:
        state = log.state()
    if state.phase is None:
        console.print(f"migration {name!r} has no recorded step")
        return
    done = "completed" if state.completed else ("stopped" if state.stopped is not None else "in progress")
    console.print(f"migration {name!r}: phase {state.phase} ({done}), reads shifted {state.read_shift_pct:g} %")
    history = Table()
    for col in ("step", "event", "phase"):
        history.add_column(col)
    for ev in state.history:
        history.add_row(str(ev.seq), ev.event, str(ev.phase))
    console.print(history)
    if state.slots:
        copied = sum(1 for s in state.slots.values() if s.done)
        console.print(f"slots: {copied} of {len(state.slots)} started are copied, "
                      f"{sum(s.rows_copied for s in state.slots.values()):,} rows")
    if state.scans:
        finished = sum(1 for s in state.scans.values() if s.done)
        console.print(f"backfill scans: {finished} of {len(state.scans)} started are done, "
                      f"{sum(s.rows_copied for s in state.scans.values()):,} rows copied")
    if state.stopped is not None:
        console.print(f"stopped: {state.stopped}")


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
@click.option("--max-lag", type=click.FloatRange(min=0.01, max=3600), default=MAX_LAG, show_default=True,
              help="The gate: a pass over the remaining binlog shorter than this many seconds.")
@click.option("--pass-timeout", type=click.FloatRange(min=1, max=86400), default=120.0, show_default=True,
              help="Deadline of one pass, in seconds.")
@click.option("--flush-rows", type=click.IntRange(min=1, max=100_000), default=FLUSH_ROWS, show_default=True,
              help="Changes applied (and the binlog position recorded) per flush.")
@click.option("--progress/--no-progress", default=True, help="Show a spinner on stderr.")
def catch_up_cmd(old_path: str, new_path: str, state_ds: str, name: str, max_lag: float, pass_timeout: float,
                 flush_rows: int, progress: bool) -> None:
    """Apply the binlog changes made since the backfill started (resumable; needs binlog_format=ROW)."""
    old, new = _configs(old_path, new_path)
    console = _console()
    with Connections(old, new) as conns, MigrationLog(connector(old, state_ds), name) as log, \
            _status(console, progress) as spinner:
        plan = plan_migration(old, new, count="none", rate=1.0)
        result = catch_up(old, new, plan, conns, log, max_lag=max_lag, pass_timeout=pass_timeout,
                          flush_rows=flush_rows,
                          progress=lambda n, applied: spinner.update(f"pass {n}: {applied:,} changes applied"))
    if result.completed:
        console.print(f"migration {name!r}: catch-up completed after {result.passes} passes, "
                      f"{result.applied:,} changes applied (last pass {result.last_pass:.2f} s)")
    else:
        console.print(f"migration {name!r}: catch-up not completed: the last of {result.passes} passes took "
                      f"{result.last_pass:.2f} s (gate {max_lag:g} s); run it again")
        raise SystemExit(1)
