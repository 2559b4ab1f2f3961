"""SLOTS, GENE and CONSISTENT_HASH."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddm_core.algorithms import create
from ddm_core.algorithms.slot_based import parse_slot_spec, slot_layout_spec
from ddm_core.errors import ConfigError, RoutingError, ShardKeyNotFoundError, ShardValueError
from ddm_core.hashing import hash64, slot_of
from ddm_core.ids import GeneIdGenerator
from ddm_core.slots import SlotMap

DS4 = ["ds_0", "ds_1", "ds_2", "ds_3"]
DS8 = [f"ds_{i}" for i in range(8)]


# -- SLOTS -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 1, -1, 10086, 2**31, 2**63 - 1, 2**63, 2**64 - 1, "u-42", "用户", b"k"])
def test_slots_even_layout(value: object) -> None:
    alg = create("SLOTS")
    # even: target i owns slots [i*1024/4, (i+1)*1024/4)
    assert alg.precise(DS4, {"user_id": value}) == [DS4[slot_of(value, 10) * 4 // 1024]]
    assert alg.slot(value) == slot_of(value, 10)


def test_slots_values() -> None:
    alg = create("SLOTS", {"slot-bits": 4}, name="s")
    assert alg.describe() == "SLOTS(slots=16, even)"
    for bad in (None, 1.5, 2**64, object()):
        with pytest.raises(ShardValueError) as info:
            alg.precise(DS4, {"user_id": bad})
        assert "SLOTS 's'" in str(info.value) and "'user_id'" in str(info.value)
    with pytest.raises(ShardKeyNotFoundError):
        alg.precise(DS4, {})
    as_int = create("SLOTS", {"key-type": "int"})
    assert as_int.precise(DS4, {"u": " 10086"}) == create("SLOTS").precise(DS4, {"u": 10086})


def test_slots_explicit_layout() -> None:
    layout = {"ds_a": "0-255", "ds_b": "256-511, 768-1023", "ds_c": ["512-700", 701, "702-767"]}
    alg = create("SLOTS", {"slots": layout}, name="s")
    names = ["ds_a", "ds_b", "ds_c"]
    for value in range(200):
        slot = slot_of(value, 10)
        want = "ds_a" if slot < 256 else "ds_c" if 512 <= slot < 768 else "ds_b"
        assert alg.precise(names, {"id": value}) == [want]
        assert alg.precise(names[::-1], {"id": value}) == [want]  # names, not positions
    assert "explicit over 3 targets" in alg.describe()
    alg.check_targets(names)
    with pytest.raises(ConfigError, match="ds_c"):
        alg.check_targets(names[:2])
    # a value owned by a target that is not available is an error, never another target
    value = next(v for v in range(1000) if 512 <= slot_of(v, 10) < 768)
    with pytest.raises(RoutingError, match="'ds_c', which is not among"):
        alg.precise(names[:2], {"id": value})


def test_slots_layout_gaps_and_overlaps_are_named() -> None:
    with pytest.raises(ConfigError) as info:
        create("SLOTS", {"slots": {"a": "0-511", "b": "500-900"}}, name="s")
    msg = str(info.value)
    assert info.value.prop == "slots"
    assert "'b' and 'a' both claim slot(s) 500-511" in msg
    assert "slot(s) 901-1023 have no target (123 of 1024 uncovered)" in msg
    with pytest.raises(ConfigError, match=r"slot\(s\) 0-9, 20-1023 have no target"):
        create("SLOTS", {"slots": {"a": "10-19"}})
    for bad in ({"a": "0-1024"}, {"a": "5-3"}, {"a": "x"}, {"a": 1.5}, {}, "0-1023"):
        with pytest.raises(ConfigError) as info:
            create("SLOTS", {"slots": bad})
        assert info.value.prop == "slots"
    with pytest.raises(ConfigError) as info:
        create("SLOTS", {"slot-bits": 17})
    assert info.value.prop == "slot-bits"
    assert parse_slot_spec("0-3, 7", 16) == [(0, 3), (7, 7)]


def test_slots_growth_moves_half_with_an_explicit_layout() -> None:
    # 4 -> 8 databases with 1024 slots moves 512 slots (50 %).
    old = SlotMap.even(4, 10)
    new, moved = old.moved_to(8)
    assert len(moved) == 512
    before = create("SLOTS")
    after = create("SLOTS", {"slots": slot_layout_spec(new, DS8)})
    keys = range(20_000)
    changed = sum(before.precise(DS4, {"k": k}) != after.precise(DS8, {"k": k}) for k in keys)
    assert 0.45 < changed / len(keys) < 0.55
    # whereas MOD 4 -> 8 moves half too, and MOD 4 -> 5 moves ~80 % (a slot map moves ~20 % there)
    mod4, mod5 = create("MOD", {"sharding-count": 4}), create("MOD", {"sharding-count": 5})
    ds5 = DS8[:5]
    assert sum(mod4.precise(DS4, {"k": k}) != mod5.precise(ds5, {"k": k}) for k in keys) / len(keys) > 0.75


def test_slots_too_many_targets() -> None:
    alg = create("SLOTS", {"slot-bits": 2})
    with pytest.raises(ConfigError, match="cannot share 4 slots"):
        alg.precise([f"t_{i}" for i in range(5)], {"k": 1})


# -- GENE ----------------------------------------------------------------------------------


@pytest.mark.parametrize("gene_bits", [5, 10])
def test_gene_routes_like_slots(gene_bits: int) -> None:
    gen = GeneIdGenerator(3, gene_bits)
    slots = create("SLOTS", {"slot-bits": gene_bits})
    gene = create("GENE", {"gene-bits": gene_bits})
    users = [0, 1, 882341, 10086, -5, 2**40, "user-7"]
    for uid in users:
        oid = gen.next_id(uid)
        assert gene.precise(DS8, {"order_id": oid}) == slots.precise(DS8, {"user_id": uid})
    oids = gen.next_ids([1, 2, 3, 882341])
    assert gene.batch(DS8, {"order_id": oids}).tolist() == slots.batch(DS8, {"user_id": np.array([1, 2, 3, 882341])}).tolist()


def test_gene_with_explicit_layout_and_key_columns() -> None:
    layout = {"ds_x": "0-15", "ds_y": "16-31"}
    gene = create("GENE", {"gene-bits": 5, "slots": layout, "key-columns": "user_id"}, name="g")
    slots = create("SLOTS", {"slot-bits": 5, "slots": layout})
    gen = GeneIdGenerator(1, 5)
    names = ["ds_x", "ds_y"]
    for uid in range(50):
        oid = gen.next_id(uid)
        want = slots.precise(names, {"user_id": uid})
        assert gene.precise(names, {"order_id": oid}) == want
        assert gene.precise(names, {"user_id": uid}) == want  # key column: hashed like SLOTS
        assert gene.precise(names, {"USER_ID": uid, "order_id": oid}) == want  # both, agreeing
    other = next(u for u in range(1, 50) if slot_of(u, 5) != slot_of(0, 5))
    with pytest.raises(RoutingError, match="cannot belong to one row"):
        gene.precise(names, {"user_id": other, "order_id": gen.next_id(0)})
    with pytest.raises(RoutingError, match="cannot belong to one row"):
        gene.batch(names, {"user_id": np.array([0, other]), "order_id": np.array([gen.next_id(0)] * 2)})


def test_gene_values() -> None:
    gene = create("GENE", {"gene-bits": 10}, name="g")
    assert gene.precise(DS4, {"order_id": 1023}) == [DS4[3]]  # gene 1023 -> the last quarter
    assert gene.precise(DS4, {"order_id": "256"}) == [DS4[1]]  # numeric strings
    assert gene.precise(DS4, {"order_id": 2**64 - 1}) == [DS4[3]]
    for bad in (-1, None, "x", 2**64):
        with pytest.raises(ShardValueError):
            gene.precise(DS4, {"order_id": bad})
    with pytest.raises(ShardValueError, match="negative"):
        gene.batch(DS4, {"order_id": np.array([5, -1])})
    with pytest.raises(ShardKeyNotFoundError):
        gene.precise(DS4, {})
    assert gene.describe() == "GENE(gene-bits=10, even)"


# -- CONSISTENT_HASH -----------------------------------------------------------------------


def test_consistent_hash_lookup_is_the_next_point_on_the_ring() -> None:
    alg = create("CONSISTENT_HASH", {"virtual-nodes": 3})
    ring = sorted((hash64(f"{name}#{v}"), name) for name in DS4 for v in range(3))
    for key in (0, 1, 10086, "abc", 2**63):
        h = hash64(key)
        owner = next((name for point, name in ring if point >= h), ring[0][1])
        assert alg.precise(DS4, {"k": key}) == [owner]


def test_consistent_hash_properties() -> None:
    alg = create("CONSISTENT_HASH", name="ring")
    keys = np.arange(40_000, dtype=np.int64)
    four = alg.batch(DS4, {"k": keys})
    # Depends on names, not order.
    assert (np.array(DS4)[four] == np.array(DS4[::-1])[alg.batch(DS4[::-1], {"k": keys})]).all()
    # 160 virtual nodes: every target within 25 % of the mean.
    counts = np.bincount(four, minlength=4)
    assert counts.min() > 0.75 * 10_000 and counts.max() < 1.25 * 10_000
    # Adding a fifth target moves about a fifth of the keys, all of them to the new target.
    five_names = DS4 + ["ds_4"]
    five = np.array(five_names)[alg.batch(five_names, {"k": keys})]
    moved = five != np.array(DS4)[four]
    assert 0.12 < moved.mean() < 0.28
    assert set(five[moved]) == {"ds_4"}


def test_consistent_hash_weights() -> None:
    alg = create("CONSISTENT_HASH", {"weights": {"ds_0": 3, "ds_1": "1", "ds_2": 0}}, name="w")
    names = ["ds_0", "ds_1", "ds_2"]
    counts = Counter(alg.batch(names, {"k": np.arange(20_000)}).tolist())
    assert counts[2] == 0  # weight 0 drains ds_2
    assert 2.2 < counts[0] / counts[1] < 4.0
    with pytest.raises(ConfigError, match="ds_9"):
        create("CONSISTENT_HASH", {"weights": {"ds_9": 1}}).precise(names, {"k": 1})
    with pytest.raises(ConfigError, match="weight 0"):
        create("CONSISTENT_HASH", {"weights": {"a": 0}}).precise(["a"], {"k": 1})
    for props, prop in (({"weights": {"a": -1}}, "weights"), ({"weights": [1]}, "weights"),
                        ({"virtual-nodes": 0}, "virtual-nodes")):
        with pytest.raises(ConfigError) as info:
            create("CONSISTENT_HASH", props)
        assert info.value.prop == prop
    with pytest.raises(ShardValueError, match="NULL"):
        alg.precise(names, {"k": None})


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(max_size=8), min_size=1, max_size=20))
def test_consistent_hash_batch_of_strings(keys: list[str]) -> None:
    alg = create("CONSISTENT_HASH", {"virtual-nodes": 20})
    arr = np.array(keys, dtype=object)
    assert [DS4[i] for i in alg.batch(DS4, {"k": arr})] == [alg.precise(DS4, {"k": k})[0] for k in keys]
