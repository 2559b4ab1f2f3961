"""``ddm config push|history|rollback|promote``: configuration versions on Redis (docs/configuration.md#redis-config-center).

Every application instance follows the same keys with
``RedisSource(client, prefix=...).follow(ConfigHolder(source, snapshot=...))``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, TypeVar

import click

from ddm_core.cli.app import needs_extra, render_table
from ddm_core.cli.config_cmd import config_group
from ddm_core.metadata.sources.redis import DEFAULT_PREFIX, RedisSource

__all__ = ["push", "history", "rollback", "promote"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _redis_options(fn: _F) -> _F:
    fn = needs_extra("redis")(fn)
    fn = click.option("--prefix", default=DEFAULT_PREFIX, show_default=True, help="The keys' prefix.")(fn)
    fn = click.option("--redis", "redis_url", envvar="DDM_CONFIG_REDIS", required=True, metavar="URL",
                      help="redis://host:port/db of the configuration center (default $DDM_CONFIG_REDIS).")(fn)  # fmt: skip
    return fn


def _source(redis_url: str, prefix: str) -> RedisSource:
    import redis

    return RedisSource(redis.Redis.from_url(redis_url, socket_timeout=5), prefix=prefix, name=f"{redis_url} {prefix}")


@config_group.command("push")
@_redis_options
@click.argument("config_path", metavar="CONFIG", type=click.Path(exists=True, dir_okay=False))
@click.option("--expect-version", type=click.IntRange(0), default=None,
              help="Publish only if the newest version is this one (compare-and-set).")
@click.option("--group", default=None, metavar="NAME",
              help="Publish for this rollout group only (instances whose source names it); promote it later.")
def push(redis_url: str, prefix: str, config_path: str, expect_version: int | None, group: str | None) -> None:
    """Validate CONFIG and publish it as the next version (for everyone, or for one group first)."""
    source = _source(redis_url, prefix)
    version = source.publish(Path(config_path).read_text(encoding="utf-8"), expect_version=expect_version, group=group)
    click.echo(f"published version {version}{'' if group is None else f' for group {group!r}'} to {source.where}")


@config_group.command("history")
@_redis_options
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
def history(redis_url: str, prefix: str, limit: int) -> None:
    """The newest versions, newest first."""
    source = _source(redis_url, prefix)
    rows = [(str(v.version), v.created, v.group or "everyone", v.checksum[:16]) for v in source.history(limit)]
    for line in render_table(["version", "created", "for", "checksum"], rows, right=[0]):
        click.echo(line)


@config_group.command("rollback")
@_redis_options
@click.option("--to", "to_version", type=click.IntRange(1), required=True, help="The version whose content returns.")
@click.option("--expect-version", type=click.IntRange(0), default=None,
              help="Publish only if the newest version is this one (compare-and-set).")
def rollback(redis_url: str, prefix: str, to_version: int, expect_version: int | None) -> None:
    """Publish an earlier version's content again, as a new version (versions never go back)."""
    source = _source(redis_url, prefix)
    version = source.rollback(to_version, expect_version=expect_version)
    click.echo(f"published version {version} (the content of version {to_version}) to {source.where}")


@config_group.command("promote")
@_redis_options
@click.option("--group", required=True, metavar="NAME", help="The rollout group whose newest version goes to everyone.")
@click.option("--expect-version", type=click.IntRange(0), default=None,
              help="Publish only if the newest version is this one (compare-and-set).")
def promote(redis_url: str, prefix: str, group: str, expect_version: int | None) -> None:
    """Publish a rollout group's newest version for everyone, as a new version."""
    source = _source(redis_url, prefix)
    version = source.promote(group, expect_version=expect_version)
    click.echo(f"published version {version} (group {group!r}'s version, now for everyone) to {source.where}")
