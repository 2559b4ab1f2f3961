"""``ddm lint``: route the SQL of a code base against a configuration, for CI (docs/observability.md#lint).

Exit status: 0 clean, 1 findings at ``--fail-on`` severity or worse, 2 an
error (a configuration, path or file that cannot be read).
"""

from __future__ import annotations

import click

from ddm_core.cli.app import cli, config_option, load
from ddm_core.observe.lint import WARNING, LintSettings, lint_paths
from ddm_core.observe.lint.output import FORMATS, as_json, github, text

__all__ = ["lint"]

EXIT_FINDINGS = 1


@cli.command()
@config_option()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="text, json, or github (workflow annotations on the pull request's lines).")
@click.option("--fail-on", type=click.Choice(["error", "warning"]), default=WARNING, show_default=True,
              help="Lowest severity that makes the exit status 1.")
@click.option("--deep-offset", type=click.IntRange(1), default=LintSettings().deep_offset, show_default=True,
              help="OFFSET on a multi-shard SELECT from which deep pagination is reported.")
def lint(config_path: str, paths: tuple[str, ...], fmt: str, fail_on: str, deep_offset: int) -> None:
    """Find full routes, cross-shard writes, deep pages, shard-key updates and unsupported SQL in PATHS.

    PATHS are .sql and .py files or directories (walked). Nothing is executed and nothing is
    imported: .py files are read with ast.
    """
    config = load(config_path, show_warnings=False)
    report = lint_paths(config, paths, LintSettings(deep_offset=deep_offset))
    writer = {"text": text, "json": as_json, "github": github}[fmt]
    output = writer(report.findings, report.statements, report.files)
    if output:
        click.echo(output)
    if report.failed(fail_on):
        raise SystemExit(EXIT_FINDINGS)
