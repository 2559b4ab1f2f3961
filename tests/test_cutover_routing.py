"""The ``cutover:`` block and how the router follows it: buckets, states, dual writes, fences.

Routing tests never connect (SQLite URLs under a temp dir that is never opened); the
executor test at the end runs on SQLite files: a legacy table and two shards.
"""

from __future__ import annotations

import copy
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ddm_core import Router, load_config
from ddm_core.errors import ConfigError, CutoverError, CutoverFencedError
from ddm_core.execute import Executor
from ddm_core.hashing import slot_of
from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.cutover import (
    BucketState,
    CutoverConfigError,
    bucket_lookup,
    bucket_slots,
    cutover_document,
    format_buckets,
    parse_buckets,
)
from ddm_core.metadata.dump import dump_native, to_native
from ddm_core.metadata.migration import migration_document, routing_data_sources
from ddm_core.metadata.model import ShardingConfig
from ddm_core.metadata.sources.static import StaticSource
from ddm_core.route import hint

N, P, G, R = BucketState.NORMAL, BucketState.PRE_GRAY, BucketState.GRAY, BucketState.ROLLBACK
INSERT = "INSERT INTO t_order (user_id, amount) VALUES (%s, %s)"
BY_USER = "SELECT * FROM t_order WHERE user_id = %s"


def base_doc(folder: str = "/nonexistent") -> dict[str, Any]:
    """t_order on 2 data sources x 2 tables, SLOTS 1024 by user_id, GENE order ids; a broadcast t_dict."""
    return {
        "dataSources": {"ds_0": f"sqlite:///{folder}/s0.db", "ds_1": f"sqlite:///{folder}/s1.db"},
        "tables": [{
            "logicTable": "t_order", "shardKey": "user_id", "algorithm": "slots", "slotCount": 1024,
            "shardCount": 2, "tablePerShard": 2, "databases": ["ds_0", "ds_1"], "tableKey": "user_id",
            "keyGenerator": {"column": "order_id", "type": "gene", "shardColumn": "user_id"},
        }],  # fmt: skip
        "broadcastTables": ["t_dict"],
        "runtime": {"allowFullRoute": True, "allowDmlFullRoute": False},
    }


LEGACY = {"name": "legacy", "url": "sqlite:////nonexistent/legacy.db", "table": "orders"}


def bucket(user_id: int) -> int:
    return slot_of(user_id, 10) * 100 // 1024  # the documented formula, not the code's


def user_in(b: int, start: int = 1) -> int:
    """The first user id from ``start`` in bucket ``b``."""
    uid = start
    while bucket(uid) != b:
        uid += 1
    return uid


def cutting(states: dict[int, BucketState] | None = None, paused: tuple[int, ...] = (), **kw: Any) -> ShardingConfig:
    return load_config(cutover_document(
        base_doc(), name="orders-go", table="t_order", legacy=LEGACY, states=states or {}, paused=paused, **kw,
    ))  # fmt: skip


STATES = {0: N, 1: P, 2: G, 3: R}


# -- bucket math -------------------------------------------------------------------------------


def test_bucket_math() -> None:
    lookup = bucket_lookup(1024, 100)
    assert lookup.shape == (1024,) and lookup.dtype == np.int32
    assert [int(lookup[s]) for s in (0, 10, 11, 1023)] == [0, 0, 1, 99]
    seen: list[int] = []
    for b in range(100):
        slots = bucket_slots(1024, 100, b)
        assert len(slots) >= 1 and all(int(lookup[s]) == b for s in slots)
        seen.extend(slots)
    assert seen == list(range(1024))  # every slot once, in order
    assert list(bucket_slots(1024, 1024, 7)) == [7]
    with pytest.raises(CutoverConfigError, match="cutover.buckets"):
        bucket_lookup(1024, 2000)
    assert parse_buckets("0-9, 12,20-29", 100, "cutover.gray") == frozenset([*range(10), 12, *range(20, 30)])
    assert parse_buckets([3, "5-6"], 100, "f") == {3, 5, 6} and parse_buckets(7, 100, "f") == {7}
    assert parse_buckets("", 100, "f") == parse_buckets(None, 100, "f") == frozenset()
    with pytest.raises(CutoverConfigError, match=r"cutover.gray: bucket 120 is outside 0..99"):
        parse_buckets("110-120", 100, "cutover.gray")
    with pytest.raises(CutoverConfigError, match="cutover.paused"):
        parse_buckets("x", 100, "cutover.paused")
    assert format_buckets([29, *range(10), 12, *range(20, 29)]) == "0-9,12,20-29"
    assert format_buckets([]) == ""


# -- the document ------------------------------------------------------------------------------


def test_load_and_dump_round_trip() -> None:
    config = cutting(STATES, paused=(5,), fence_after_s=3)
    c = config.cutover
    assert c is not None
    assert (c.name, c.table, c.legacy_name, c.legacy_table, c.buckets, c.fence_after_s) == (
        "orders-go", "t_order", "legacy", "orders", 100, 3.0)
    assert [c.state_of(b) for b in range(5)] == [N, P, G, R, N]
    assert c.buckets_in(G) == {2} and c.paused == {5} and len(c.buckets_in(N)) == 97
    assert c.legacy.primary.dialect == "sqlite"
    assert load_config(to_native(config, secrets="keep")) == config
    assert load_config(dump_native(config, secrets="keep")) == config
    assert config != cutting({**STATES, 4: G}, paused=(5,), fence_after_s=3)
    block = to_native(config)["cutover"]
    assert (block["preGray"], block["gray"], block["rollback"], block["paused"]) == ("1", "2", "3", "5")
    # the executor's pools: the legacy data source too
    assert list(routing_data_sources(config)) == ["ds_0", "ds_1", "legacy"]
    # a loaded configuration as the base, and a deep copy
    doc = cutover_document(load_config(base_doc()), name="orders-go", table="t_order", legacy=LEGACY)
    assert load_config(doc) == cutting()
    doc["cutover"]["legacy"]["url"] = "changed"
    assert LEGACY["url"] != "changed"


def bad(block: dict[str, Any], doc: dict[str, Any] | None = None) -> str:
    doc = copy.deepcopy(doc or base_doc())
    doc["cutover"] = {"name": "orders-go", "table": "t_order", "legacy": dict(LEGACY), **block}
    with pytest.raises(ConfigError) as info:
        load_config(doc)
    return str(info.value)


def test_validation_names_the_field() -> None:
    assert "cutover.gray" in (m := bad({"gray": "95-120"})) and "bucket 120 is outside 0..99" in m
    assert "cutover.rollback" in (m := bad({"preGray": "0-9", "rollback": "9"})) and "also in cutover.preGray" in m
    assert "cutover.table" in (m := bad({"table": "t_nope"})) and "not a sharded table" in m
    assert "cutover.legacy.name" in (m := bad({"legacy": {**LEGACY, "name": "ds_0"}})) and "name of its own" in m
    assert "cutover.legacy.url" in bad({"legacy": {"name": "legacy", "url": "nosuch://x"}})
    assert "cutover.legacy.pool" in bad({"legacy": {**LEGACY, "pool": {"maxSize": 0}}})
    assert "cutover.legacy.colour" in bad({"legacy": {**LEGACY, "colour": 1}})  # unknown key in the entry
    assert "cutover.grey" in bad({"grey": "1"})  # unknown key, named
    assert "cutover.name" in bad({"name": "a b"})
    assert "cutover.buckets" in bad({"buckets": 0}) and "cutover.buckets" in bad({"buckets": 2048})
    assert "cutover.fenceAfterSeconds" in bad({"fenceAfterSeconds": 0})
    # not SLOTS, bound tables
    mod = base_doc()
    mod["tables"][0]["algorithm"] = "mod"
    del mod["tables"][0]["slotCount"], mod["tables"][0]["keyGenerator"]
    assert "cutover.table" in (m := bad({}, mod)) and "SLOTS" in m
    bound = base_doc()
    bound["tables"].append({"logicTable": "t_item", "bindTo": "t_order"})
    assert "cut over bound tables together is not supported" in bad({}, bound)
    # with a migration block in the same version
    moved = base_doc()
    moved["tables"][0]["slots"] = {"ds_0": "0-500", "ds_1": "501-1023"}
    mig = migration_document(base_doc(), moved, name="m", phase="dual_write")
    assert "cutover" in bad({}, mig)
    with pytest.raises(CutoverConfigError, match="cutover.paused"):
        cutover_document(base_doc(), name="x", table="t_order", legacy=LEGACY, paused=[100])
    with pytest.raises(CutoverConfigError, match="cutover.fenceAfterSeconds"):
        cutover_document(base_doc(), name="x", table="t_order", legacy=LEGACY, fence_after_s=-1)


# -- routing -----------------------------------------------------------------------------------


def sources(plan: Any) -> tuple[list[str], list[str]]:
    return [u.data_source for u in plan.units], [u.data_source for u in plan.dual]


def test_point_reads_and_writes_in_each_state() -> None:
    router = Router(cutting(STATES))
    shards = Router(load_config(base_doc()))
    update = "UPDATE t_order SET amount = 1 WHERE user_id = %s"
    for b, state in STATES.items():
        uid = user_in(b)
        s_units = shards.route(update, (uid,)).units
        read, write = router.route(BY_USER, (uid,)), router.route(update, (uid,))
        if state is G:
            assert read.units == shards.route(BY_USER, (uid,)).units and not read.dual
            assert write.units == s_units and write.dual == ()
        else:
            assert sources(read) == (["legacy"], [])
            assert read.units[0].sql == "SELECT * FROM orders WHERE user_id = %s"
            assert write.units[0].sql == "UPDATE orders SET amount = 1 WHERE user_id = %s"
            assert write.dual == (s_units if state in (P, R) else ())


def test_in_lists_and_full_routes() -> None:
    router = Router(cutting(STATES))
    u0, u1, u2 = user_in(0), user_in(1), user_in(2)
    in_sql = "SELECT * FROM t_order WHERE user_id IN (%s, %s)"
    assert sources(router.route(in_sql, (u0, u1))) == (["legacy"], [])
    assert sources(router.route(in_sql, (u0, u2)))[0] == ["legacy"]  # not all gray: legacy has every row
    assert set(sources(router.route(in_sql, (u2, user_in(2, u2 + 1))))[0]) <= {"ds_0", "ds_1"}
    delete = "DELETE FROM t_order WHERE user_id IN (%s, %s)"
    assert sources(router.route(delete, (u0, u1)))[0] == ["legacy"]
    with pytest.raises(CutoverError, match="split it by shard key"):
        router.route(delete, (u1, u2))
    # full routes: reads go to legacy unless every bucket is gray
    assert sources(router.route("SELECT * FROM t_order", ()))[0] == ["legacy"]
    everything = Router(cutting({b: G for b in range(100)}))
    assert len(everything.route("SELECT * FROM t_order", ()).units) == 4
    # a full-route write the shards refuse (allowDmlFullRoute off): legacy, no dual
    full = "UPDATE t_order SET amount = 2 WHERE note = 'x'"
    pre = Router(cutting({b: P for b in range(100)}))
    assert sources(pre.route(full, ())) == (["legacy"], [])
    with pytest.raises(CutoverError, match="split it by shard key"):
        router.route(full, ())
    with pytest.raises(Exception, match="allow_dml_full_route|every shard|shard key"):
        everything.route(full, ())  # all gray: the shards' refusal stands


def test_gene_id_reads_follow_the_bucket_of_the_id() -> None:
    router = Router(cutting(STATES))
    by_id = "SELECT * FROM t_order WHERE order_id = %s"
    gray_id = (77 << 10) | slot_of(user_in(2), 10)
    normal_id = (77 << 10) | slot_of(user_in(0), 10)
    assert set(sources(router.route(by_id, (gray_id,)))[0]) <= {"ds_0", "ds_1"}
    assert sources(router.route(by_id, (normal_id,)))[0] == ["legacy"]


def test_a_gene_database_algorithm_is_bucketed_by_its_slots() -> None:
    doc = base_doc()
    doc["algorithms"] = {"g": {"type": "GENE", "props": {"gene-bits": 10, "key-columns": "user_id"}}}
    doc["tables"] = [{"logicTable": "t_order", "dataNodes": ["ds_0.t_order", "ds_1.t_order"],
                      "databaseStrategy": {"kind": "complex", "columns": ["order_id", "user_id"], "algorithm": "g"}}]
    router = Router(load_config(cutover_document(doc, name="go", table="t_order", legacy=LEGACY, states=STATES)))
    sql = "SELECT * FROM t_order WHERE order_id = %s AND user_id = %s"
    for b, state in STATES.items():
        uid = user_in(b)
        got = sources(router.route(sql, ((7 << 10) | slot_of(uid, 10), uid)))[0]
        assert (got == ["legacy"]) is (state is not G)


def test_insert_generated_ids_are_the_same_on_both_sides() -> None:
    router = Router(cutting(STATES))
    u1 = user_in(1)
    plan = router.route(INSERT, (u1, 10))
    (legacy,), (dual,) = plan.units, plan.dual
    assert legacy.data_source == "legacy" and dual.data_source in ("ds_0", "ds_1")
    (key,) = plan.generated_keys
    assert key in legacy.params and key in dual.params
    assert legacy.params == dual.params and key & 1023 == slot_of(u1, 10)  # a gene id of the user's slot
    # a gray insert: the shards only, its own key
    gray = router.route(INSERT, (user_in(2), 10))
    assert sources(gray)[1] == [] and gray.generated_keys[0] != key


def test_refusals() -> None:
    router = Router(cutting(STATES, paused=(1,)))
    with pytest.raises(CutoverError, match="with other tables"):
        router.route("SELECT * FROM t_order o JOIN t_dict d ON o.amount = d.id WHERE o.user_id = %s", (1,))
    with pytest.raises(CutoverError, match="DDL on 't_order'"):
        router.route("ALTER TABLE t_order ADD COLUMN x INT")
    with pytest.raises(CutoverFencedError, match="paused"):
        router.route(INSERT, (user_in(1), 1))
    assert sources(router.route(BY_USER, (user_in(1),)))[0] == ["legacy"]  # reads follow the state
    assert sources(router.route(INSERT, (user_in(0), 1)))[0] == ["legacy"]
    # other tables route as always
    assert router.route("SELECT * FROM t_dict").units


def test_unconfirmed_holder_fences_writes() -> None:
    holder = ConfigHolder(StaticSource(cutover_document(
        base_doc(), name="orders-go", table="t_order", legacy=LEGACY, states=STATES, fence_after_s=5,
    )))  # fmt: skip
    router = Router(holder)
    assert sources(router.route(INSERT, (user_in(1), 1)))[0] == ["legacy"]
    holder.confirmed_at = time.monotonic() - 60
    with pytest.raises(CutoverFencedError, match="not confirmed"):
        router.route(INSERT, (user_in(1), 1))
    with pytest.raises(CutoverFencedError):
        router.route(INSERT, (user_in(2), 1))
    assert sources(router.route(BY_USER, (user_in(1),)))[0] == ["legacy"]  # reads are not fenced


def test_hot_reload_follows_the_new_states() -> None:
    doc = cutover_document(base_doc(), name="orders-go", table="t_order", legacy=LEGACY, states={2: P})
    source = StaticSource(doc)
    holder = ConfigHolder(source)
    router = Router(holder)
    uid = user_in(2)
    assert sources(router.route(INSERT, (uid, 1)))[0] == ["legacy"]
    source.set(cutover_document(base_doc(), name="orders-go", table="t_order", legacy=LEGACY, states={2: G}))
    assert holder.reload().status == "updated"
    assert set(sources(router.route(INSERT, (uid, 1)))[0]) <= {"ds_0", "ds_1"}
    assert router._migration is None  # a cut-over is no migration
    source.set(base_doc())  # the cut-over done: the plain sharded configuration
    assert holder.reload().status == "updated"
    assert sources(router.route(BY_USER, (user_in(0),)))[0] != ["legacy"]


def test_shard_key_updates_and_hints() -> None:
    router = Router(cutting(STATES))
    shards = Router(load_config(base_doc()))
    u0 = user_in(0)
    update = "UPDATE t_order SET user_id = %s WHERE user_id = %s"
    def node(uid: int) -> tuple[str, Any]:
        (unit,) = shards.route(BY_USER, (uid,)).units
        return unit.data_source, unit.tables

    def key_on_the_same_node(b: int) -> int:
        return next(u for u in range(u0 + 1, 100_000) if bucket(u) == b and node(u) == node(u0))

    # a new key the shards keep on the same physical table, but in a gray bucket: refused
    gray = key_on_the_same_node(2)
    shards.route(update, (gray, u0))  # the shards alone allow it
    with pytest.raises(CutoverError, match="between buckets in different states"):
        router.route(update, (gray, u0))
    assert sources(router.route(update, (key_on_the_same_node(0), u0)))[0] == ["legacy"]  # same state: fine
    with hint(database="ds_0"), pytest.raises(CutoverError, match="routing hints"):
        router.route(BY_USER, (u0,))
    with pytest.raises(CutoverError, match="routing hints"):
        router.route("/* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds_0 */ SELECT * FROM t_order WHERE user_id = %s", (u0,))
    with hint(force_primary=True):
        plan = router.route(BY_USER, (u0,))
    assert sources(plan)[0] == ["legacy"] and plan.force_primary
    with hint(database="ds_0"):  # other tables take hints as always
        assert sources(router.route("SELECT * FROM t_dict"))[0] == ["ds_0"]


# -- executing on SQLite -----------------------------------------------------------------------


DDL = "CREATE TABLE {} (order_id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL, amount INTEGER NOT NULL)"


def rows(path: Path, table: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT order_id, user_id, amount FROM {table} ORDER BY order_id").fetchall()


def test_executor_writes_and_reads_where_the_states_say(tmp_path: Path) -> None:
    doc = base_doc(str(tmp_path))
    legacy = {"name": "legacy", "url": f"sqlite:///{tmp_path}/legacy.db", "table": "orders"}
    with sqlite3.connect(tmp_path / "legacy.db") as conn:
        conn.execute(DDL.format("orders"))
    for i in range(2):
        with sqlite3.connect(tmp_path / f"s{i}.db") as conn:
            for t in range(2):
                conn.execute(DDL.format(f"t_order_{i}_{t}"))
    config = load_config(cutover_document(doc, name="go", table="t_order", legacy=legacy, states=STATES))
    shards = Router(load_config(doc))
    u_pre, u_gray, u_normal = user_in(1), user_in(2), user_in(0)

    def shard_of(uid: int) -> tuple[Path, str]:
        unit = shards.route(BY_USER, (uid,)).units[0]
        return tmp_path / f"s{unit.data_source[-1]}.db", unit.tables[0][1]

    with Executor(config, replica_monitor=False) as ex:
        ex.execute(INSERT, (u_pre, 10)).close()
        ex.execute(INSERT, (u_gray, 20)).close()
        ex.execute(INSERT, (u_normal, 30)).close()
        on_legacy = rows(tmp_path / "legacy.db", "orders")
        assert sorted((u, amount) for _, u, amount in on_legacy) == sorted([(u_pre, 10), (u_normal, 30)])
        pre_row = next(r for r in on_legacy if r[1] == u_pre)
        assert [r for r in rows(*shard_of(u_pre)) if r[1] == u_pre] == [pre_row]  # the dual write, same id
        assert [(u, amount) for _, u, amount in rows(*shard_of(u_gray)) if u == u_gray] == [(u_gray, 20)]
        assert all(r[1] != u_gray for r in on_legacy)  # a gray write goes to the shards only
        assert all(r[1] != u_normal for r in rows(*shard_of(u_normal)))  # a normal one to legacy only
        # reads: normal from legacy (a row only legacy has), gray from the shard (a row only it has)
        with sqlite3.connect(tmp_path / "legacy.db") as conn:
            conn.execute("INSERT INTO orders VALUES (1, ?, 99)", (u_normal,))
        path, table = shard_of(u_gray)
        with sqlite3.connect(path) as conn:
            conn.execute(f"INSERT INTO {table} VALUES (2, ?, 98)", (u_gray,))
        amounts = "SELECT amount FROM t_order WHERE user_id = %s ORDER BY amount"
        with ex.execute(amounts, (u_normal,)) as cur:
            assert [r[0] for r in cur.fetchall()] == [30, 99]
        with ex.execute(amounts, (u_gray,)) as cur:
            assert [r[0] for r in cur.fetchall()] == [20, 98]


def test_a_hot_reload_may_start_and_end_an_all_normal_cut_over_on_the_legacy_table() -> None:
    """From the table single on the legacy database to the block with every bucket normal (and back):
    the router sends the table where the previous version did, so the reload accepts the version."""
    from ddm_core.errors import PlacementChangeError
    from ddm_core.metadata.placement import check_reload_placement

    before_doc = base_doc()
    before_doc["tables"], before_doc["broadcastTables"] = [], []
    before_doc["dataSources"]["old"] = "sqlite:////nonexistent/legacy.db"
    before_doc["singleTables"] = {"t_order": "old"}
    before = load_config(before_doc)
    same_name = {**LEGACY, "table": "t_order"}
    start = load_config(cutover_document(base_doc(), name="go", table="t_order", legacy=same_name))
    assert check_reload_placement(before, start, "test") is True
    assert check_reload_placement(start, before, "test") is True  # ending on the legacy table
    gray = load_config(cutover_document(base_doc(), name="go", table="t_order", legacy=same_name, states={0: G}))
    with pytest.raises(PlacementChangeError):
        check_reload_placement(before, gray, "test")  # a gray bucket: rows the old version cannot see
    elsewhere = {**same_name, "url": "sqlite:////nonexistent/other.db"}
    with pytest.raises(PlacementChangeError):
        check_reload_placement(before, load_config(cutover_document(base_doc(), name="go", table="t_order",
                                                                     legacy=elsewhere)), "test")
    with pytest.raises(PlacementChangeError):
        check_reload_placement(before, load_config(base_doc()), "test")  # sharded without a cut-over
