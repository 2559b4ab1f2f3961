"""Shared set-up of the outbox tests: two fresh databases with the business and outbox tables, on either store.

A *store* is the server the data sources live on: the local MariaDB or the local
PostgreSQL. The outbox tests take it as a parameter (:data:`STORES`), so every
guarantee is checked by the same test on both.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator

from services import fresh_mariadb_databases, fresh_postgresql_databases, mariadb_rows, postgresql_rows
from test_execute_support import ORDER_DDL, sharding_config

from ddm_core import load_config
from ddm_core.ddl import execute_ddl, outbox_statements
from ddm_core.execute import Executor

#: Effects of the consumer: deliberately without a unique key, so only consume_once can keep them single.
EFFECT_DDL = (
    "CREATE TABLE t_effect (user_id BIGINT NOT NULL, message_id VARCHAR(64) NOT NULL)",
    "CREATE INDEX idx_effect_message ON t_effect (message_id)",
)
#: The consumer's copy of the hot business rows: the last version it applied, and the amount (NULL: deleted).
MIRROR_DDL = "CREATE TABLE t_mirror (user_id BIGINT NOT NULL PRIMARY KEY, version BIGINT NOT NULL, amount INT NULL)"


@dataclass(frozen=True)
class Store:
    """A server the outbox tables live on, and how the tests reach it behind ddm-core's back."""

    name: str
    scheme: str
    port: int
    login: dict[str, str]
    fresh: Callable[[int], ContextManager[list[str]]]
    rows: Callable[[str, str], list[tuple[Any, ...]]]

    def url(self, database: str) -> dict[str, str]:
        return {"url": f"{self.scheme}://127.0.0.1:{self.port}/{database}", **self.login}


MARIADB_STORE = Store("mariadb", "mysql", 3306, {"username": "root", "password": ""},
                      fresh_mariadb_databases, mariadb_rows)
POSTGRESQL_STORE = Store("postgresql", "postgresql", 5432, {"username": "postgres"},
                         fresh_postgresql_databases, postgresql_rows)
STORES = (MARIADB_STORE, POSTGRESQL_STORE)
STORE_IDS = [s.name for s in STORES]

#: The store of every database :func:`outbox_databases` made, so :func:`rows` reads the right server.
_STORE_OF: dict[str, Store] = {}


def outbox_config_dict(databases: list[str], store: Store = MARIADB_STORE) -> dict[str, Any]:
    urls = {f"ds_{i}": store.url(db) for i, db in enumerate(databases)}
    cfg = sharding_config(urls, tables=1, extra_tables=("t_effect", "t_mirror"),
                          pool={"maxSize": 4, "minIdle": 0, "acquireTimeoutMs": 5000})
    return cfg


@contextlib.contextmanager
def outbox_databases(count: int = 2, store: Store = MARIADB_STORE) -> Iterator[tuple[list[str], dict[str, Any]]]:
    """Fresh databases with ``t_order``, ``t_effect`` and the outbox tables (made by ``ddm ddl --outbox``'s code)."""
    with store.fresh(count) as names:
        _STORE_OF.update(dict.fromkeys(names, store))
        try:
            cfg = outbox_config_dict(names, store)
            config = load_config(cfg)
            assert execute_ddl(config, outbox_statements(config)) == len(outbox_statements(config))
            with Executor(config, load_schema=False) as ex:
                for sql in (ORDER_DDL, *EFFECT_DDL, MIRROR_DDL):
                    ex.execute(sql).close()
            yield names, cfg
        finally:
            for name in names:
                _STORE_OF.pop(name, None)


def rows(database: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` in a database :func:`outbox_databases` made, read on its server behind ddm-core's back."""
    return _STORE_OF[database].rows(database, sql)


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
