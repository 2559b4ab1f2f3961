"""``ddm xa``: XA recovery and the transaction log, from the command line (docs/xa.md#recovery)."""

from __future__ import annotations

import click

from ddm_core.cli.app import cli, config_option, load, render_table
from ddm_core.execute import Executor
from ddm_core.xa import RecoveryReport, recover, runtime_of

__all__ = ["xa_group"]


@cli.group("xa")
def xa_group() -> None:
    """XA two-phase commit: recover prepared branches, show the transaction log."""


@xa_group.command("recover")
@config_option()
@click.option("--abandon-after-ms", type=click.IntRange(0, None), default=None,
              help="Roll back undecided branches older than this (default: xa.abandonAfterMs; 0: all now).")
def recover_cmd(config_path: str, abandon_after_ms: int | None) -> None:
    """Commit prepared branches whose log says COMMIT, roll back abandoned ones, on every data source.

    Exit status 0 when everything ddm-core left prepared was settled, 1 when branches were kept
    (undecided and young, or attached to a live session) or a data source was unreachable.
    """
    config = load(config_path, check_env=True)
    with Executor(config, load_schema=False, max_concurrency=1) as executor:
        report = recover(executor, abandon_after_ms=abandon_after_ms)
    _print_report(report)
    if report.kept or report.unreachable:
        raise SystemExit(1)


def _print_report(report: RecoveryReport) -> None:
    for label, branches in (("committed", report.committed), ("rolled back", report.rolled_back), ("kept", report.kept)):
        for branch in branches:
            click.echo(f"{label}: {branch}")
    for ds in report.unreachable:
        click.echo(f"unreachable: {ds}")
    click.echo(report.summary() + f"; {report.purged} finished log row(s) purged")


@xa_group.command("status")
@config_option()
def status_cmd(config_path: str) -> None:
    """List the unfinished global transactions of the transaction log."""
    config = load(config_path, check_env=True)
    with Executor(config, load_schema=False, max_concurrency=1) as executor:
        txlog = runtime_of(executor).log
        rows = txlog.unfinished()
    if not rows:
        click.echo(f"no unfinished XA transactions in {txlog.location}")
        return
    table = [[r.gtrid, r.state.value, ", ".join(r.participants) or "-", f"{r.age_ms / 1000:.1f}", r.coordinator]
             for r in rows]
    for line in render_table(["gtrid", "state", "participants", "age s", "coordinator"], table, right=[3]):
        click.echo(line)
