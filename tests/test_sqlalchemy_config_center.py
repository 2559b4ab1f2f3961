"""A ``ddm+pymysql`` URL that names a Redis or etcd configuration center: the engine's executor follows it."""

from __future__ import annotations

import time
from typing import Any

import pytest
import sqlalchemy as sa
import yaml

from ddm_core import errors
from ddm_core.metadata.sources.etcd import EtcdSource
from ddm_core.metadata.sources.etcd_client import EtcdClient
from ddm_core.metadata.sources.redis import RedisSource
from etcd_support import PrivateEtcd, private_etcd  # noqa: F401 - fixture
from test_config_redis import client, prefix  # noqa: F401 - fixtures
from test_execute_support import mysql_config, mysql_databases, sharding_config  # noqa: F401 - fixtures


def _config_text(databases: list[str], name: str) -> str:
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(databases)}  # fmt: skip
    return yaml.safe_dump({**sharding_config(urls), "name": name})


def _database(engine: sa.Engine) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT DATABASE()")).scalar()


def test_the_engine_follows_the_versions_published_later(
    client: Any, prefix: str, mysql_config: Any, mysql_databases: list[str]
) -> None:
    source = RedisSource(client, prefix=prefix)
    _follows(source, f"ddm+pymysql:///?config=redis://127.0.0.1:6379/0&prefix={prefix}", mysql_databases)


def test_the_engine_follows_an_etcd_center(
    private_etcd: PrivateEtcd, mysql_config: Any, mysql_databases: list[str]  # noqa: F811
) -> None:
    source = EtcdSource(EtcdClient(private_etcd.url), prefix="/shop/config")
    _follows(source, f"ddm+pymysql:///?config=etcd://127.0.0.1:{private_etcd.client_port}/shop/config",
             mysql_databases)  # fmt: skip


def _follows(source: RedisSource | EtcdSource, url: str, mysql_databases: list[str]) -> None:
    source.publish(_config_text(mysql_databases, "shop_a"))
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 3, 5)"))
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT amount FROM t_order WHERE user_id = 3")).all() == [(5,)]
        assert _database(engine) == "shop_a"
        source.publish(_config_text(mysql_databases, "shop_b"))
        deadline = time.monotonic() + 10
        while _database(engine) != "shop_b" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _database(engine) == "shop_b"  # the new version was taken without a restart
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM t_order WHERE user_id = 3"))
    finally:
        engine.dispose()
        engine.dialect.close_executor()  # type: ignore[attr-defined]


def test_center_options_with_a_file_are_refused() -> None:
    engine = sa.create_engine("ddm+pymysql:///?config=examples/orders.yaml&prefix=x")
    with pytest.raises(errors.ConfigError, match="prefix option"):
        engine.connect()


def test_a_source_the_url_cannot_follow_is_refused() -> None:
    engine = sa.create_engine("ddm+pymysql:///?config=zookeeper://127.0.0.1:2181")
    with pytest.raises(errors.ConfigError, match="names a 'zookeeper' source"):
        engine.connect()
