"""``ddm config push|history|rollback|promote``: configuration versions on Redis or etcd
(docs/configuration.md#redis-config-center, docs/configuration.md#etcd-config-center).

Every application instance follows the same keys with
``RedisSource(client, prefix=...).follow(ConfigHolder(source, snapshot=...))``, or
``EtcdSource.from_url("etcd://host:2379/ddm/config").follow(...)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, TypeVar

import click

from ddm_core._extras import require_extra
from ddm_core.cli.app import render_table
from ddm_core.cli.config_cmd import config_group
from ddm_core.errors import ConfigError
from ddm_core.metadata.sources.etcd import EtcdSource
from ddm_core.metadata.sources.redis import DEFAULT_PREFIX, RedisSource

__all__ = ["push", "history", "rollback", "promote"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _center_options(fn: _F) -> _F:
    fn = click.option("--prefix", default=DEFAULT_PREFIX, show_default=True,
                      help="The Redis keys' prefix (an etcd URL carries its own).")(fn)  # fmt: skip
    fn = click.option("--etcd", "etcd_url", envvar="DDM_CONFIG_ETCD", default=None, metavar="URL",
                      help="etcd://host:port/<prefix> of the configuration center (default $DDM_CONFIG_ETCD).")(fn)  # fmt: skip
    fn = click.option("--redis", "redis_url", envvar="DDM_CONFIG_REDIS", default=None, metavar="URL",
                      help="redis://host:port/db of the configuration center (default $DDM_CONFIG_REDIS).")(fn)  # fmt: skip
    # The extra as app.needs_extra records it (the bare-install check runs these with --redis); which
    # extra is asked for depends on the center named, so _source asks before anything is connected.
    fn.needs_extra = "redis"  # type: ignore[attr-defined]
    return fn


def _source(redis_url: str | None, etcd_url: str | None, prefix: str) -> RedisSource | EtcdSource:
    """The center named by exactly one of ``--redis`` / ``--etcd``."""
    command = click.get_current_context().command_path
    if (redis_url is None) == (etcd_url is None):
        raise ConfigError(f"{command}: name one configuration center, --redis URL or --etcd URL "
                          "(or $DDM_CONFIG_REDIS / $DDM_CONFIG_ETCD)", option="--redis")  # fmt: skip
    if etcd_url is not None:
        require_extra("etcd", needed_by=command)
        return EtcdSource.from_url(etcd_url)
    require_extra("redis", needed_by=command)
    import redis

    assert redis_url is not None
    return RedisSource(redis.Redis.from_url(redis_url, socket_timeout=5), prefix=prefix, name=f"{redis_url} {prefix}")


@config_group.command("push")
@_center_options
@click.argument("config_path", metavar="CONFIG", type=click.Path(exists=True, dir_okay=False))
@click.option("--expect-version", type=click.IntRange(0), default=None,
              help="Publish only if the newest version is this one (compare-and-set).")
@click.option("--group", default=None, metavar="NAME",
              help="Publish for this rollout group only (instances whose source names it); promote it later.")
def push(redis_url: str | None, etcd_url: str | None, prefix: str, config_path: str, expect_version: int | None,
         group: str | None) -> None:  # fmt: skip
    """Validate CONFIG and publish it as the next version (for everyone, or for one group first)."""
    source = _source(redis_url, etcd_url, prefix)
    version = source.publish(Path(config_path).read_text(encoding="utf-8"), expect_version=expect_version, group=group)
    click.echo(f"published version {version}{'' if group is None else f' for group {group!r}'} to {source.where}")


@config_group.command("history")
@_center_options
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
def history(redis_url: str | None, etcd_url: str | None, prefix: str, limit: int) -> None:
    """The newest versions, newest first."""
    source = _source(redis_url, etcd_url, prefix)
    if isinstance(source, EtcdSource):
        found = [(str(v.version), v.created, v.group or "everyone", v.checksum[:16], ", ".join(v.active_for))
                 for v in source.history(limit)]  # fmt: skip
        lines = render_table(["version", "created", "for", "checksum", "active for"], found, right=[0])
    else:
        rows = [(str(v.version), v.created, v.group or "everyone", v.checksum[:16]) for v in source.history(limit)]
        lines = render_table(["version", "created", "for", "checksum"], rows, right=[0])
    for line in lines:
        click.echo(line)


@config_group.command("rollback")
@_center_options
@click.option("--to", "to_version", type=click.IntRange(1), required=True, help="The version whose content returns.")
@click.option("--expect-version", type=click.IntRange(0), default=None,
              help="Publish only if the newest version is this one (compare-and-set).")
@click.option("--group", default=None, metavar="NAME", help="etcd: flip this rollout group's pointer instead.")
def rollback(redis_url: str | None, etcd_url: str | None, prefix: str, to_version: int,
             expect_version: int | None, group: str | None) -> None:  # fmt: skip
    """Return to an earlier version: on Redis its content is published again as a new version, on etcd the
    active-version pointer (everyone's, or --group's) flips back to it."""
    source = _source(redis_url, etcd_url, prefix)
    if isinstance(source, EtcdSource):
        version = source.rollback(to_version, expect_version=expect_version, group=group)
        whose = "" if group is None else f" for group {group!r}"
        click.echo(f"version {version} is active again{whose} on {source.where} (the pointer flipped back)")
        return
    if group is not None:
        raise ConfigError("ddm config rollback --group flips a group's pointer on etcd; on Redis, push a good version "
                          "with --group instead", option="--group")  # fmt: skip
    version = source.rollback(to_version, expect_version=expect_version)
    click.echo(f"published version {version} (the content of version {to_version}) to {source.where}")


@config_group.command("promote")
@_center_options
@click.option("--group", required=True, metavar="NAME", help="The rollout group whose newest version goes to everyone.")
@click.option("--expect-version", type=click.IntRange(0), default=None,
              help="Publish only if the newest version is this one (compare-and-set).")
def promote(redis_url: str | None, etcd_url: str | None, prefix: str, group: str,
            expect_version: int | None) -> None:
    """Give everyone a rollout group's version (Redis: as a new version; etcd: the pointer flips to it and the
    group's stage ends)."""
    source = _source(redis_url, etcd_url, prefix)
    version = source.promote(group, expect_version=expect_version)
    if isinstance(source, EtcdSource):
        click.echo(f"version {version} (the version of group {group!r}) is active for everyone on {source.where}")
    else:
        click.echo(f"published version {version} (group {group!r}'s version, now for everyone) to {source.where}")
