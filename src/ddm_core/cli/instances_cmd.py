"""``ddm instances``: the executors and proxies following a configuration center, and the version each serves
(docs/operations.md#instance-registry)."""

from __future__ import annotations

import json
import time
from typing import Any

import click
from rich.table import Table

from ddm_core.cli.app import cli, load
from ddm_core.cli.display import console as make_console
from ddm_core.errors import ConfigError
from ddm_core.metadata.instances import InstanceRecord, InstanceStore, store_for
from ddm_core.metadata.sources.redis import DEFAULT_PREFIX

__all__ = ["instances", "instance_rows"]


def _store(config_path: str | None, config_on: str | None, redis_url: str | None, prefix: str,
           etcd_url: str | None) -> InstanceStore:  # fmt: skip
    if etcd_url is not None:
        from ddm_core._extras import require_extra

        require_extra("etcd", needed_by="ddm instances --etcd")
        from ddm_core.metadata.sources.etcd import EtcdSource

        source: Any = EtcdSource.from_url(etcd_url)
    elif redis_url is not None:
        from ddm_core._extras import require_extra

        require_extra("redis", needed_by="ddm instances --redis")
        import redis

        from ddm_core.metadata.sources.redis import RedisSource

        source = RedisSource(redis.Redis.from_url(redis_url, socket_timeout=5), prefix=prefix,
                                  name=f"{redis_url} {prefix}")  # fmt: skip
    elif config_path is not None and config_on is not None:
        from ddm_core.migrate.connections import config_table_source

        source = config_table_source(load(config_path, check_env=True), config_on)
    else:
        raise ConfigError("ddm instances needs the configuration center: --etcd URL, --redis URL, or -c CONFIG "
                          "with --config-on DATA_SOURCE (the data source holding the ddm_config table)")  # fmt: skip
    store = store_for(source)
    assert store is not None  # every shared source keeps a registry
    return store


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.1f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def instance_rows(records: list[InstanceRecord], active: int | None, now: float) -> list[dict[str, Any]]:
    """Each record with its age and how many versions it is behind ``active`` (``None``: unknown)."""
    return [
        {**r.to_json(), "age_s": round(max(0.0, now - r.started_at), 3),
         "lag": None if active is None or r.version is None else max(0, active - r.version)}
        for r in records
    ]  # fmt: skip


@cli.command()
@click.option("--config", "-c", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="A configuration naming the data source of the ddm_config table (with --config-on).")
@click.option("--config-on", help="Data source holding the ddm_config table (and ddm_instances).")
@click.option("--redis", "redis_url", envvar="DDM_CONFIG_REDIS", metavar="URL",
              help="redis://host:port/db of a Redis configuration center (default $DDM_CONFIG_REDIS).")
@click.option("--prefix", default=DEFAULT_PREFIX, show_default=True, help="The Redis keys' prefix.")
@click.option("--etcd", "etcd_url", envvar="DDM_CONFIG_ETCD", metavar="URL",
              help="etcd://host:2379/<prefix> of an etcd configuration center (default $DDM_CONFIG_ETCD).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of the table.")
def instances(config_path: str | None, config_on: str | None, redis_url: str | None, prefix: str,
              etcd_url: str | None, as_json: bool) -> None:  # fmt: skip
    """The instances registered with a configuration center: role, where, version in use, lag, heartbeat.

    \b
      ddm instances -c orders.yaml --config-on ds_0
      ddm instances --redis redis://127.0.0.1:6379/0 --json
      ddm instances --etcd etcd://127.0.0.1:2379/ddm/config
    """
    store = _store(config_path, config_on, redis_url, prefix, etcd_url)
    try:
        records, active = store.live(), store.newest_version()
    finally:
        store.close()
    rows = instance_rows(records, active, time.time())
    if as_json:
        click.echo(json.dumps({"where": store.where, "active_version": active, "instances": rows}, indent=2))
        return
    out = make_console()
    behind = sum(1 for r in rows if r["lag"] != 0)
    out.print(store.where)
    table = Table(title=f"{len(rows)} instance{'' if len(rows) == 1 else 's'}; active version "
                        f"{active if active else 'none'}" + (f"; {behind} behind" if behind else ""))  # fmt: skip
    for col, justify in (("id", "left"), ("role", "left"), ("host", "left"), ("pid", "right"),
                         ("version", "right"), ("lag", "right"), ("age", "right"), ("heartbeat", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        lag = "?" if r["lag"] is None else str(r["lag"])
        table.add_row(r["instance_id"][:8], r["role"], r["host"], str(r["pid"]),
                      "?" if r["version"] is None else str(r["version"]),
                      lag if lag in ("0",) else f"[red]{lag}[/red]", _ago(r["age_s"]),
                      f"{_ago(r['heartbeat_age_s'])} ago")  # fmt: skip
    out.print(table)
