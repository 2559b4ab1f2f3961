"""``ddm migrate``: plan a resharding by slots, run its prepare phase, show its state, publish configurations.

What exists is the foundation of docs/migration.md: ``plan``, ``prepare``,
``status`` and ``config-publish``; the later phases (dual write, backfill,
catch-up, read shift, cutover) are not implemented yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import click
from rich.console import Console
from rich.table import Table

from ddm_core.cli.app import cli, load
from ddm_core.errors import ConfigError
from ddm_core.metadata.model import ShardingConfig
from ddm_core.migrate import Connections, config_table_source, connector
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
    """Online resharding by slots (docs/migration.md): plan, prepare, status.

    Dual write, backfill, catch-up, read shift and cutover are not implemented yet.
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
