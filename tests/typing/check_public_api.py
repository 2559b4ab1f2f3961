"""What a type checker sees of ddm-core's public API (checked by tests/test_typing.py).

Never run, only type-checked with ``mypy --strict``: every ``assert_type`` must
hold, and every ``type: ignore[...]`` must still be needed (strict warns about
unused ignores). Both fail when a facade hands out ``Any`` instead of the
compiled units' stubs, so a regression to an untyped export is an error here.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np
from numpy.typing import NDArray
from typing_extensions import assert_type

import ddm_core
from ddm_core import (
    Executor,
    GeneIdGenerator,
    Result,
    RoutePlan,
    Router,
    ShardingConfig,
    SlotMap,
    Snowflake,
    WorkerLease,
    connect,
    heap_merge,
    lease_worker_id,
    load_config,
    slot_of,
    slots_of,
)
from ddm_core.dbapi import Connection, Cursor
from ddm_core.hashing import MAX_SLOT_BITS, canonical_bytes, hash64
from ddm_core.ids import IdParts, gene_of


def check_hashing() -> None:
    assert_type(slot_of(42), int)
    assert_type(slot_of("user-7", slot_bits=12), int)
    assert_type(ddm_core.hashing.slot_of(b"k"), int)
    assert_type(slots_of([1, 2, 3]), NDArray[np.int32])
    assert_type(slots_of(np.arange(4), 8), NDArray[np.int32])
    assert_type(hash64(1), int)
    assert_type(canonical_bytes("x"), bytes)
    assert_type(MAX_SLOT_BITS, int)
    slot_of(1, slot_bits="10")  # type: ignore[arg-type]


def check_slot_map() -> None:
    smap = SlotMap.even(4)
    assert_type(smap, SlotMap)
    assert_type(SlotMap(np.zeros(8, dtype=np.int32), 1), SlotMap)
    assert_type(smap.route(42), int)
    assert_type(smap.route_many([1, 2]), NDArray[np.int32])
    assert_type(smap.node_of(3), int)
    assert_type(smap.nodes, NDArray[np.int32])
    assert_type(smap.n_nodes, int)
    assert_type(smap.moved_to(8), tuple[SlotMap, NDArray[np.int32]])
    assert_type(smap.split(), SlotMap)
    SlotMap.even("4")  # type: ignore[arg-type]
    smap.n_nodes = 5  # type: ignore[misc]


def check_ids() -> None:
    snowflake = Snowflake(1)
    assert_type(snowflake.next_id(), int)
    assert_type(snowflake.next_ids(10), NDArray[np.int64])
    assert_type(snowflake.decode(snowflake.next_id()), IdParts)
    assert_type(snowflake.decode(1).worker_id, int)
    genes = GeneIdGenerator(3, gene_bits=10)
    assert_type(genes, GeneIdGenerator)
    assert_type(genes.next_id("user-7"), int)
    assert_type(genes.next_ids(["a", "b"]), NDArray[np.int64])
    assert_type(genes.gene_of(genes.next_id(7)), int)
    assert_type(gene_of(123456789, 10), int)
    Snowflake("1")  # type: ignore[arg-type]
    Snowflake(1, 1000)  # type: ignore[call-arg]  # epoch_ms is keyword-only


def check_worker_leases(executor: Executor) -> None:
    lease = lease_worker_id(executor, namespace="orders", heartbeat=False)
    assert_type(lease, WorkerLease)
    assert_type(lease.worker_id, int)
    assert_type(lease.snowflake(), Snowflake)
    assert_type(lease.gene_generator(10), GeneIdGenerator)
    lease_worker_id(executor, namespace=7)  # type: ignore[arg-type]


def check_heap_merge() -> None:
    rows = heap_merge([[(1, "a")], [(2, "b")]], [(0, False)], limit=10)
    merged: Iterator[Sequence[Any]] = rows
    assert_type(next(rows), Sequence[Any])
    rows.close()
    heap_merge([], [(0, False)], offset="1")  # type: ignore[arg-type]
    del merged


def check_config_and_routing(path: str) -> None:
    config = load_config(path)
    assert_type(config, ShardingConfig)
    router = Router(config)
    plan = router.route("SELECT * FROM t_order WHERE user_id = %s", (7,))
    assert_type(plan, RoutePlan)
    assert_type(plan.data_sources, tuple[str, ...])
    router.route(42)  # type: ignore[arg-type]


def check_execution(config: ShardingConfig) -> None:
    with Executor(config) as executor:
        result = executor.execute("SELECT * FROM t_order WHERE user_id = %s", (7,))
        assert_type(result, Result)
        assert_type(result.fetchall(), list[tuple[Any, ...]])
        executor.execute("SELECT 1", timeout="3")  # type: ignore[arg-type]


def check_dbapi(path: str) -> None:
    conn = connect(path)
    assert_type(conn, Connection)
    cursor = conn.cursor()
    assert_type(cursor, Cursor)
    assert_type(cursor.fetchone(), tuple[Any, ...] | None)
    conn.close()
    connect(path, autocommit="yes")  # type: ignore[arg-type]
