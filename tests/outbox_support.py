"""Shared set-up of the outbox tests: two fresh MariaDB databases with the business and outbox tables."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any, Iterator

from services import fresh_mariadb_databases, mariadb_rows
from test_execute_support import ORDER_DDL, sharding_config

from ddm_core import load_config
from ddm_core.ddl import execute_ddl, outbox_statements
from ddm_core.execute import Executor

#: Effects of the consumer: deliberately without a unique key, so only consume_once can keep them single.
EFFECT_DDL = "CREATE TABLE t_effect (user_id BIGINT NOT NULL, message_id VARCHAR(64) NOT NULL, KEY (message_id))"


def outbox_config_dict(databases: list[str]) -> dict[str, Any]:
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(databases)}
    cfg = sharding_config(urls, tables=1, extra_tables=("t_effect",),
                          pool={"maxSize": 4, "minIdle": 0, "acquireTimeoutMs": 5000})
    return cfg


@contextlib.contextmanager
def outbox_databases(count: int = 2) -> Iterator[tuple[list[str], dict[str, Any]]]:
    """Fresh databases with ``t_order``, ``t_effect`` and the outbox tables (made by ``ddm ddl --outbox``'s code)."""
    with fresh_mariadb_databases(count) as names:
        cfg = outbox_config_dict(names)
        config = load_config(cfg)
        assert execute_ddl(config, outbox_statements(config)) == 2 * count
        with Executor(config, load_schema=False) as ex:
            ex.execute(ORDER_DDL).close()
            ex.execute(EFFECT_DDL).close()
        yield names, cfg


rows = mariadb_rows  # the outbox tests' name for it


def redis_client() -> Any:
    from services import require_module, require_service

    redis: Any = require_module("redis", "the outbox's Redis Streams sink")
    client = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:
        require_service("Redis on 127.0.0.1:6379", str(exc))
    return client


def stream_prefix() -> str:
    return f"ddm_test_{uuid.uuid4().hex[:10]}:"
