"""The ``ddm`` click group, its error handling and the helpers every command shares."""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any, Callable, Sequence, TypeVar, cast

import click

from ddm_core._extras import require_extra
from ddm_core.errors import DdmError
from ddm_core.metadata.load import load_config
from ddm_core.metadata.model import ShardingConfig

__all__ = ["cli", "main", "EXIT_ERROR", "load", "render_table", "config_option", "needs_extra"]

#: Exit status of every refusal (a DdmError) — the same as click's usage errors.
EXIT_ERROR = 2


class DdmGroup(click.Group):
    """A group that turns :class:`DdmError` into ``error: <message>`` and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DdmError as exc:
            click.echo(f"error: {exc.message}", err=True)
            ctx.exit(EXIT_ERROR)


@click.group(cls=DdmGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="ddm-core", prog_name="ddm")
def cli() -> None:
    """ddm-core: preview routes, explain shard keys, check configurations, generate DDL.

    CONFIG is ddm-core's own YAML or ShardingSphere-JDBC 5.x YAML (detected).
    """
    # Library warnings (sqlglot's parse fallbacks, config load warnings) are shown by the
    # commands themselves, once, on stderr; the loggers would print them a second time.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    logging.getLogger("ddm_core.metadata").setLevel(logging.ERROR)


_F = TypeVar("_F", bound=Callable[..., Any])


def config_option(required: bool = True) -> Callable[[_F], _F]:
    """``--config PATH`` (also ``$DDM_CONFIG``)."""
    return click.option(
        "--config",
        "-c",
        "config_path",
        envvar="DDM_CONFIG",
        required=required,
        type=click.Path(exists=True, dir_okay=False),
        help="Configuration file (ddm-core or ShardingSphere YAML; default $DDM_CONFIG).",
    )


def needs_extra(extra: str) -> Callable[[_F], _F]:
    """Refuse the command before it does anything when ``extra`` is not installed (``--help`` still works).

    Put it right above the ``def``; the extra is kept as ``callback.needs_extra``.
    """

    def decorate(fn: _F) -> _F:
        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            require_extra(extra, needed_by=click.get_current_context().command_path)
            return fn(*args, **kwargs)

        checked.needs_extra = extra  # type: ignore[attr-defined]
        return cast(_F, checked)

    return decorate


def load(path: str, *, check_env: bool = False, show_warnings: bool = True) -> ShardingConfig:
    """Load a configuration; its load warnings go to stderr as ``warning: ...``.

    ``check_env`` is off for commands that never connect: a missing password
    variable matters only when something is executed (``Secret.reveal`` then
    names it).
    """
    config = load_config(path, check_env=check_env)
    if show_warnings:
        for warning in config.warnings:
            click.echo(f"warning: {warning}", err=True)
    return config


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()) -> list[str]:
    """An aligned text table (``|`` separated, a ``-+-`` rule under the header)."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)]
        return " | ".join(parts).rstrip()

    out = [line(headers), "-+-".join("-" * w for w in widths)]
    out.extend(line(row) for row in rows)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``ddm``)."""
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="ddm")
    except BrokenPipeError:  # `ddm ddl ... | head`
        sys.stderr.close()
        sys.exit(0)

