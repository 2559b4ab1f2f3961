"""A configuration named by a path or a configuration center's URL, followed: shared by the SQLAlchemy
dialects (``ddm+pymysql:///?config=...``) and ``ddm proxy --follow URL``.

* ``path/to/config.yaml`` — read once.
* ``redis://host:6379/0`` with ``prefix`` (default ``ddm:config``), ``group`` (a rollout group,
  docs/configuration.md#redis-config-center) and ``snapshot`` (a local file keeping the last good
  version, served when Redis cannot be reached at start) — followed: every version published later
  is taken as it is by any other instance (``RedisSource.follow``) until the returned stop function
  is called.
* ``etcd://host:2379/ddm/config`` (the path is the keys' prefix) with ``group`` and ``snapshot`` —
  followed the same way on etcd (``EtcdSource.follow``, docs/configuration.md#etcd-config-center);
  its ``workerId: lease`` key generators draw their ids from leases on the same etcd.

Any other source (the table source, a holder built by the application) is built by the application.
"""

from __future__ import annotations

from typing import Any, Callable

from ddm_core.errors import ConfigError

__all__ = ["FOLLOW_OPTIONS", "open_config"]

#: URL options that only a followed configuration center takes.
FOLLOW_OPTIONS = ("prefix", "group", "snapshot")


def open_config(config: str, options: dict[str, str]) -> tuple[Any, Callable[[], None] | None]:
    """What an executor is built from for ``config`` (a path, or a center's URL with its ``options``), and the
    function that stops following the center (``None`` for a file).

    Raises:
        ConfigError: center options given with a file, or a URL scheme ddm-core cannot follow.
        MissingExtraError: a Redis center without the ``redis`` extra, an etcd one without ``etcd``.
    """
    scheme = config.split("://", 1)[0].lower() if "://" in config else ""
    if not scheme:
        given = [name for name in FOLLOW_OPTIONS if name in options]
        if given:
            raise ConfigError(
                f"the {', '.join(given)} option(s) belong to a configuration center "
                f"(config=redis://... or etcd://...), not to the file {config!r}", option=given[0],
            )  # fmt: skip
        return config, None
    if scheme in ("etcd", "etcds"):
        return _follow_etcd(config, options)
    if scheme not in ("redis", "rediss"):
        raise ConfigError(
            f"config={config!r} names a {scheme!r} source: a path, or a redis:// or etcd:// configuration "
            "center to follow; any other source is built by the application (for SQLAlchemy: "
            "connect_args={'executor': ...})",
            option="config",
        )
    return _follow_redis(config, options)


def _follow_redis(url: str, options: dict[str, str]) -> tuple[Any, Callable[[], None]]:
    from ddm_core._extras import require_extra

    require_extra("redis", needed_by=f"the configuration center {url!r}")
    import redis

    from ddm_core.metadata.reload import ConfigHolder
    from ddm_core.metadata.sources.redis import DEFAULT_PREFIX, RedisSource

    prefix = options.get("prefix", DEFAULT_PREFIX)
    source = RedisSource(redis.Redis.from_url(url, socket_timeout=5), prefix=prefix, group=options.get("group"),
                         name=f"{url} {prefix}")  # fmt: skip
    holder = ConfigHolder(source, snapshot=options.get("snapshot"))
    return holder, source.follow(holder)


def _follow_etcd(url: str, options: dict[str, str]) -> tuple[Any, Callable[[], None]]:
    from ddm_core._extras import require_extra

    require_extra("etcd", needed_by=f"the configuration center {url!r}")
    if "prefix" in options:
        raise ConfigError(f"the prefix option belongs to a Redis center; an etcd URL carries its prefix "
                          f"as its path (config=etcd://host:2379/ddm/config), not {url!r}", option="prefix")  # fmt: skip
    from ddm_core.metadata.reload import ConfigHolder
    from ddm_core.metadata.sources.etcd import EtcdSource

    from ddm_core.idlease.config import lease_config_worker_ids

    source = EtcdSource.from_url(url, group=options.get("group"))
    holder = ConfigHolder(source, snapshot=options.get("snapshot"))
    leases = lease_config_worker_ids(source, holder.config)  # workerId: lease generators draw from these
    following = source.follow(holder)

    def stop() -> None:
        following()
        leases.release()

    return holder, stop
