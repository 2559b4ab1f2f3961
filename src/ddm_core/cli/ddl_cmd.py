"""``ddm ddl``: the physical DDL of a template written against logic tables, printed or executed."""

from __future__ import annotations

from pathlib import Path

import click

from ddm_core._text import shorten_sql
from ddm_core.cli.app import cli, config_option, load
from ddm_core.errors import ConfigError
from ddm_core.ddl import DIALECTS, DdlStatement, execute_ddl, outbox_statements, physical_ddl
from ddm_core.metadata.model import ShardingConfig

__all__ = ["ddl", "by_data_source"]


def by_data_source(config: ShardingConfig, statements: list[DdlStatement]) -> list[DdlStatement]:
    """Statements grouped by data source (configuration order), template order kept inside each."""
    order = {name: i for i, name in enumerate(config.data_sources)}
    return sorted(statements, key=lambda s: order.get(s.data_source, len(order)))  # sorted() is stable


@cli.command()
@config_option()
@click.argument("template", type=click.Path(exists=True, dir_okay=False), required=False)
@click.option("--execute", is_flag=True,
              help="Run the statements on each data source's primary (SQLite files are created).")
@click.option("--dialect", type=click.Choice(DIALECTS),
              help="Write every statement in this dialect (default: each data source's own).")
@click.option("--outbox", is_flag=True,
              help="Also the outbox's message and consume-log tables on every data source (docs/outbox.md).")
def ddl(config_path: str, template: str | None, execute: bool, dialect: str | None, outbox: bool) -> None:
    """Print (or run) the DDL of every physical table of the logic tables in TEMPLATE.

    TEMPLATE is ordinary MySQL DDL against logic tables (CREATE TABLE, CREATE INDEX,
    ALTER / DROP / TRUNCATE), one or more statements. A sharded table gets one statement per
    physical table, a broadcast table one per data source. AUTO_INCREMENT on a sharded table
    and tables the configuration does not know are refused. --outbox adds the outbox tables
    (TEMPLATE may then be left out).
    """
    config = load(config_path)
    if execute and dialect is not None:
        raise click.UsageError("--dialect is for printing; --execute writes each data source's own dialect")
    if template is None and not outbox:
        raise click.UsageError("give a TEMPLATE, --outbox, or both")
    found = outbox_statements(config, dialect=dialect) if outbox else []
    if template is not None:
        try:
            text = Path(template).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read DDL template {template!r}: {exc}") from exc
        found = physical_ddl(config, text, dialect=dialect) + found
    statements = by_data_source(config, found)
    sources = list(dict.fromkeys(s.data_source for s in statements))
    summary = f"{len(statements)} statement{'s' if len(statements) != 1 else ''} on {len(sources)} data source" + (
        "s" if len(sources) != 1 else ""
    )
    if not execute:
        click.echo(f"-- {template or 'outbox tables'}: {summary}")
        current = None
        for ds, sql in statements:
            if ds != current:
                current = ds
                click.echo(f"\n-- {ds} ({config.data_sources[ds].primary.url})")
            click.echo(f"{sql};")
        return

    def echo(ds: str, sql: str) -> None:
        click.echo(f"{ds}: ok  {shorten_sql(sql, 100)}")

    done = execute_ddl(config, statements, echo=echo)
    click.echo(f"executed {done} of {summary}")
