"""``ddm health baseline|check``: row-count baselines of every physical table, and the check against one.

``check`` exits 0 when healthy, 1 when it flags something (a row count that
dropped or jumped, a missing physical table, a schema differing from its
siblings), 2 on an error (docs/observability.md#health).
"""

from __future__ import annotations

import json

import click

from ddm_core.cli.app import cli, config_option, load
from ddm_core.migrate.connections import Connections
from ddm_core.observe.health import DEFAULT_ESTIMATE_ABOVE, Baseline, check, take_baseline

__all__ = ["health"]

EXIT_FINDINGS = 1


@cli.group()
def health() -> None:
    """Row-count baselines and schema checks of the physical tables (MySQL / MariaDB)."""


@health.command("baseline")
@config_option()
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), required=True,
              help="JSON file to write the baseline to.")
@click.option("--table", "tables", multiple=True, metavar="LOGIC_TABLE",
              help="Only this logic table (repeatable; default: every one).")
@click.option("--estimate-above", type=click.IntRange(0), default=DEFAULT_ESTIMATE_ABOVE, show_default=True,
              help="Use information_schema's row estimate instead of COUNT(*) above this many rows.")
def baseline_cmd(config_path: str, output: str, tables: tuple[str, ...], estimate_above: int) -> None:
    """Record the row count of every physical table into OUTPUT."""
    config = load(config_path, check_env=True)
    with Connections(config) as conns:
        baseline = take_baseline(config, conns, tables=tables or None, estimate_above=estimate_above)
    baseline.save(output)
    physical = sum(len(c) for c in baseline.tables.values())
    estimated = sum(1 for c in baseline.tables.values() for t in c.values() if t.method == "estimate")
    click.echo(f"baseline of {len(baseline.tables)} logic tables, {physical} physical tables "
               f"({estimated} estimated) written to {output}")  # fmt: skip
    for logic, names in baseline.missing.items():
        for name in names:
            click.echo(f"warning: {name} ({logic}) does not exist", err=True)


@health.command("check")
@config_option()
@click.option("--baseline", "baseline_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="A file written by 'ddm health baseline'.")
@click.option("--threshold", type=click.FloatRange(0, min_open=True), default=0.2, show_default=True,
              help="Relative change of a counted table's rows that is flagged.")
@click.option("--estimate-threshold", type=click.FloatRange(0, min_open=True), default=0.5, show_default=True,
              help="The same for tables the baseline estimated.")
@click.option("--min-change", type=click.IntRange(0), default=100, show_default=True,
              help="Changes of at most this many rows are never flagged.")
@click.option("--no-schemas", is_flag=True, help="Skip the schema comparison.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def check_cmd(config_path: str, baseline_path: str, threshold: float, estimate_threshold: float, min_change: int,
              no_schemas: bool, fmt: str) -> None:
    """Compare the physical tables with a baseline; exit 1 if anything is flagged."""
    config = load(config_path, check_env=True)
    baseline = Baseline.load(baseline_path)
    with Connections(config) as conns:
        report = check(baseline, config, conns, threshold=threshold, estimate_threshold=estimate_threshold,
                       min_change=min_change, schemas=not no_schemas)  # fmt: skip
    if fmt == "json":
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        for finding in report.findings:
            click.echo(str(finding))
        problems = sum(1 for f in report.findings if f.problem)
        click.echo(f"{report.checked} physical tables checked against the baseline of {baseline.taken_at}: "
                   + ("healthy" if report.healthy else f"{problems} problem{'s' if problems != 1 else ''}"))  # fmt: skip
    if not report.healthy:
        raise SystemExit(EXIT_FINDINGS)
