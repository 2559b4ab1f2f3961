"""``ddm verify``: the consistency checker (docs/migration.md#the-consistency-checker).

Two forms:

* ``ddm verify --config ddm.yaml --a ds_0.t_item --b ds_1.t_item`` compares any two
  row sources (each a comma list of ``data_source.table``);
* ``ddm verify --from old.yaml --to new.yaml`` compares, for every table a
  migration moves, the moving slots' rows at their old and new locations.

Exit status 0: consistent; 1: rows missing, extra or differing; 2: a refusal.
"""

from __future__ import annotations

import random
import sys

import click
from rich.console import Console

from ddm_core.cli.app import cli, load
from ddm_core.errors import ConfigError
from ddm_core.migrate import Connections
from ddm_core.migrate.checker import CHUNK_ROWS, Checker, CheckReport, RowSource, migration_sides
from ddm_core.migrate.plan import plan_migration

__all__ = ["verify"]


def _parts(spec: str, option: str) -> list[tuple[str, str]]:
    parts = []
    for item in spec.split(","):
        ds, dot, table = item.strip().partition(".")
        if not dot or not ds or not table:
            raise ConfigError(f"{option} {spec!r}: each part is data_source.table (e.g. ds_0.t_order_0_1)")
        parts.append((ds, table))
    return parts


def _print(console: Console, report: CheckReport, listed: int) -> None:
    console.print(report.summary())
    for note in report.notes:
        console.print(f"  note: {note}")
    for diff in report.differences[:listed]:
        for line in diff.lines():
            console.print(f"  {line}")
    hidden = report.found - min(listed, len(report.differences))
    if hidden > 0:
        console.print(f"  ... and {hidden} more")


@cli.command("verify")
@click.option("--config", "-c", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="Configuration naming the data sources of --a and --b.")
@click.option("--a", "a_spec", help="Reference side: data_source.table[,data_source.table...].")
@click.option("--b", "b_spec", help="Side checked against it.")
@click.option("--from", "old_path", type=click.Path(exists=True, dir_okay=False),
              help="Migration mode: the configuration serving now.")
@click.option("--to", "new_path", type=click.Path(exists=True, dir_okay=False),
              help="Migration mode: the configuration migrated to.")
@click.option("--chunk-rows", type=click.IntRange(min=1, max=1_000_000), default=CHUNK_ROWS, show_default=True,
              help="Rows per compared chunk.")
@click.option("--sample", type=click.IntRange(min=1, max=1_000_000),
              help="Compare this many random keys field by field instead of every row.")
@click.option("--list", "listed", type=click.IntRange(min=0), default=50, show_default=True,
              help="Differing rows printed.")
def verify(config_path: str | None, a_spec: str | None, b_spec: str | None, old_path: str | None,
           new_path: str | None, chunk_rows: int, sample: int | None, listed: int) -> None:
    """Compare two row sources chunk by chunk (count + 64-bit hash), listing the rows that differ."""
    console = Console(highlight=False, soft_wrap=True)
    if old_path and new_path:
        old, new = load(old_path, check_env=True), load(new_path, check_env=True)
        conns = Connections(old, new)
        with conns:
            plan = plan_migration(old, new, count="none", rate=1.0)
            pairs = [(a, b) for _, a, b in migration_sides(old, new, plan, conns)]
            if not pairs:
                console.print("nothing moves: the two configurations place every row alike")
                return
            bad = _run(console, pairs, chunk_rows, sample, listed)
    elif config_path and a_spec and b_spec:
        config = load(config_path, check_env=True)
        with Connections(config) as conns:
            pair = (RowSource(conns, _parts(a_spec, "--a")), RowSource(conns, _parts(b_spec, "--b")))
            bad = _run(console, [pair], chunk_rows, sample, listed)
    else:
        raise ConfigError("ddm verify needs --config with --a and --b, or --from with --to")
    if bad:
        sys.exit(1)


def _run(console: Console, pairs: list[tuple[RowSource, RowSource]], chunk_rows: int, sample: int | None,
         listed: int) -> bool:
    bad = False
    for a, b in pairs:
        checker = Checker(a, b, chunk_rows=chunk_rows)
        report = checker.sample(sample, random.Random()) if sample else checker.check()
        _print(console, report, listed)
        console.print("consistent" if report.consistent else "NOT consistent")
        bad = bad or not report.consistent
    return bad
