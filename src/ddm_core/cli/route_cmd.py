"""``ddm route``: a route preview (like ShardingSphere's PREVIEW) or one key's explanation."""

from __future__ import annotations

import json
from typing import Any

import click

from ddm_core.cli.app import cli, config_option, load, render_table
from ddm_core.cli.describe import merge_lines, plan_header, plan_json, unit_rows
from ddm_core.cli.explain import explain_key, explanation_lines, parse_value
from ddm_core.route.router import Router

__all__ = ["route", "parse_params"]


def parse_params(ctx: click.Context | None, param: click.Parameter | None, text: str | None) -> Any:
    """``--params``: a JSON list (``%s`` / ``?``) or object (``%(name)s``); ``None`` when absent."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON ({exc.msg} at column {exc.colno}): {text}") from exc
    if not isinstance(value, (list, dict)):
        raise click.BadParameter(
            f"must be a JSON list (for %s or ?) or object (for %(name)s), not {type(value).__name__}: {text}"
        )
    return value


@cli.command(context_settings={"ignore_unknown_options": False})
@config_option()
@click.argument("sql", required=False)
@click.option("--params", "-p", "params", metavar="JSON", callback=parse_params,
              help='Parameters as a JSON list ("[10086]") or object (\'{"uid": 10086}\').')
@click.option("--explain-key", "explain", nargs=2, metavar="TABLE VALUE",
              help="Explain where one shard-key VALUE of logic TABLE lives, instead of routing SQL.")
@click.option("--column", metavar="NAME",
              help="With --explain-key: the sharding column VALUE belongs to (default: the first one).")
@click.option("--str", "force_str", is_flag=True,
              help="With --explain-key: VALUE is a string even if it looks like an integer.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def route(
    config_path: str,
    sql: str | None,
    params: Any,
    explain: tuple[str, str] | None,
    column: str | None,
    force_str: bool,
    as_json: bool,
) -> None:
    """Show where SQL goes: data source, rewritten SQL, params and why.

    \b
      ddm route -c examples/orders.yaml "SELECT * FROM t_order WHERE user_id = %s" -p "[10086]"
      ddm route -c examples/orders.yaml --explain-key t_order 10086

    Multi-shard SELECTs also say how the rows are merged (order keys, aggregates,
    offset/limit). Nothing is executed.
    """
    if explain:
        if sql is not None or params is not None or as_json:
            raise click.UsageError("--explain-key takes no SQL, --params or --json")
        config = load(config_path)
        table, raw = explain
        ex = explain_key(config, table, parse_value(raw, force_str), column)
        for line in explanation_lines(ex):
            click.echo(line)
        return
    if column or force_str:
        raise click.UsageError("--column and --str go with --explain-key")
    if sql is None:
        raise click.UsageError("give the SQL to route (or --explain-key TABLE VALUE)")
    config = load(config_path)
    plan = Router(config).route(sql, params)
    if as_json:
        click.echo(plan_json(plan))
        return
    for line in plan_header(plan):
        click.echo(line)
    click.echo()
    for line in render_table(("#", "data source", "SQL", "params"), unit_rows(plan), right=(0,)):
        click.echo(line)
    merge = merge_lines(plan)
    if merge:
        click.echo()
        for line in merge:
            click.echo(line)
