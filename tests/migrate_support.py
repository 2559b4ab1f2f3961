"""Configurations of a 4 -> 8 data source migration on fresh MariaDB databases (shared by tests/test_migrate*.py)."""

from __future__ import annotations

from typing import Any

from ddm_core import load_config
from ddm_core.algorithms.slot_based import slot_layout_spec
from ddm_core.metadata.model import ShardingConfig
from ddm_core.slots import SlotMap
from test_execute_support import sharding_config

TABLES_PER_SOURCE = 2
ORDER_DDL = (
    "CREATE TABLE t_order (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, "
    "amount INT NOT NULL DEFAULT 0, note VARCHAR(40), slow INT NOT NULL DEFAULT 0, KEY by_user (user_id))"
)


def urls(databases: list[str], port: int = 3306) -> dict[str, Any]:
    return {f"ds_{i}": {"url": f"mysql://127.0.0.1:{port}/{db}", "username": "root", "password": ""}
            for i, db in enumerate(databases)}


def reshard_docs(databases: list[str], old_count: int = 4, *, port: int = 3306
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The old configuration over the first ``old_count`` databases, the new one over all of them.

    The new slot layout is the smallest resize (``SlotMap.moved_to``), as docs/migration.md advises.
    """
    pool = {"maxSize": 2, "minIdle": 0, "acquireTimeoutMs": 2000}
    old = sharding_config(urls(databases[:old_count], port), tables=TABLES_PER_SOURCE, pool=pool)
    new = sharding_config(urls(databases, port), tables=TABLES_PER_SOURCE, pool=pool)
    old_map = SlotMap.even(old_count, 10)
    grown, _ = old_map.moved_to(len(databases))
    old["tables"][0]["slots"] = slot_layout_spec(old_map, list(urls(databases[:old_count])))
    new["tables"][0]["slots"] = slot_layout_spec(grown, list(urls(databases)))
    return old, new


def reshard_configs(databases: list[str], old_count: int = 4) -> tuple[ShardingConfig, ShardingConfig]:
    old, new = reshard_docs(databases, old_count)
    return load_config(old), load_config(new)
