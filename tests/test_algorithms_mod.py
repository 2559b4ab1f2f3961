"""MOD, HASH_MOD, SALTED_MOD, COMPLEX_HASH_MOD: hand-computed expectations and edges."""

from __future__ import annotations

import ctypes
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddm_core.algorithms import ValueRange, create
from ddm_core.algorithms._vhash import combine, combine_array, hash64_array
from ddm_core.errors import ConfigError, RoutingError, ShardKeyNotFoundError, ShardValueError
from ddm_core.hashing import hash64

T16 = [f"t_order_{i}" for i in range(16)]
DS16 = [f"ds_{i}" for i in range(16)]
DS4 = ["ds_0", "ds_1", "ds_2", "ds_3"]
INT64 = st.integers(-(2**63), 2**63 - 1)


# -- MOD ----------------------------------------------------------------------


def test_mod_16_sends_users_5_128_3_to_shards_5_0_3() -> None:
    mod = create("MOD", {"sharding-count": 16}, name="order_t")
    assert [mod.precise(T16, {"user_id": u}) for u in (5, 128, 3)] == [["t_order_5"], ["t_order_0"], ["t_order_3"]]


@pytest.mark.parametrize(
    ("value", "shard"),
    [
        (0, 0),
        (15, 15),
        (16, 0),
        (2**31, 0),  # > int32
        (2**31 + 5, 5),
        (2**63 - 1, 15),
        (2**63, 0),  # >= 2**63 (uint64)
        (2**64 + 3, 3),  # wider than 64 bits: plain arithmetic is still defined
        (-1, 15),  # floored, like BigInteger.mod
        (-7, 9),
        (-(2**63), 0),
        ("42", 10),  # numeric strings, like Long.parseLong
        (" -7 ", 9),
        (np.int64(21), 5),
        (np.uint64(2**63 + 1), 1),
        (5.0, 5),  # integral floats only
        (Decimal("17"), 1),
        (True, 1),
    ],
)
def test_mod_values(value: object, shard: int) -> None:
    mod = create("MOD", {"sharding-count": "16"})
    assert mod.precise(T16, {"user_id": value}) == [f"t_order_{shard}"]


@pytest.mark.parametrize("value", [None, "abc", "1_000", "0x10", "5.5", 5.5, float("nan"), b"5", object()])
def test_mod_rejects_non_integers(value: object) -> None:
    mod = create("MOD", {"sharding-count": 16}, name="m")
    with pytest.raises(ShardValueError) as info:
        mod.precise(T16, {"user_id": value})
    assert "'user_id'" in str(info.value) and "MOD 'm'" in str(info.value)
    if value is None:
        assert "NULL" in str(info.value)


def test_mod_suffix_is_matched_as_a_whole_number() -> None:
    mod = create("MOD", {"sharding-count": 16})
    # 1 must not pick t_order_11 (ends with "1"); zero-padded names match by number.
    assert mod.precise(["t_order_11", "t_order_1"], {"id": 1}) == ["t_order_1"]
    assert mod.precise(["t_order_11", "t_order_1"], {"id": 11}) == ["t_order_11"]
    assert mod.precise(["t_order_00", "t_order_01"], {"id": 17}) == ["t_order_01"]
    with pytest.raises(RoutingError, match=r"value 2 computes shard 2.*no target"):
        mod.precise(["t_order_11", "t_order_1"], {"id": 2})
    with pytest.raises(RoutingError, match="several targets"):
        mod.precise(["a_1", "b_01"], {"id": 1})


def test_mod_routing_error_names_algorithm_value_and_targets() -> None:
    mod = create("MOD", {"sharding-count": 16}, name="tbl-mod")
    with pytest.raises(RoutingError) as info:
        mod.precise(["t_order_0", "t_order_1"], {"id": 7})
    err = info.value
    assert "MOD 'tbl-mod'" in str(err) and "7" in str(err) and "'t_order_0'" in str(err)
    assert err.algorithm == "tbl-mod" and err.value == 7 and err.result == 7


def test_mod_missing_column() -> None:
    mod = create("MOD", {"sharding-count": 16})
    with pytest.raises(ShardKeyNotFoundError):
        mod.precise(T16, {})
    with pytest.raises(RoutingError, match="one column"):
        mod.precise(T16, {"a": 1, "b": 2})


def test_mod_offsets() -> None:
    # ShardingSphere start-offset/stop-offset: cut the value's text before parsing.
    mod = create("MOD", {"sharding-count": 10, "start-offset": 2, "stop-offset": 1})
    t10 = [f"t_{i}" for i in range(10)]
    assert mod.precise(t10, {"no": "AB1237X"}) == ["t_7"]  # "AB1237X"[2:6] == "1237"
    assert mod.precise(t10, {"no": 991234}) == ["t_3"]  # "991234"[2:5] == "123"
    with pytest.raises(ShardValueError, match="start-offset"):
        mod.precise(t10, {"no": "AB"})


def test_mod_range() -> None:
    mod = create("MOD", {"sharding-count": 16})
    assert mod.supports_range
    assert mod.range(T16, {"id": ValueRange(14, 17)}) == ["t_order_0", "t_order_1", "t_order_14", "t_order_15"]
    assert mod.range(T16, {"id": ValueRange(3, 3)}) == ["t_order_3"]
    assert mod.range(T16, {"id": ValueRange(3, 5, lower_closed=False, upper_closed=False)}) == ["t_order_4"]
    assert mod.range(T16, {"id": ValueRange(2.5, 4.5)}) == ["t_order_3", "t_order_4"]
    assert mod.range(T16, {"id": ValueRange(5, 4)}) == []
    assert mod.range(T16, {"id": ValueRange(0, 15)}) == T16  # the whole cycle
    assert mod.range(T16, {"id": ValueRange(lower=3)}) == T16  # open: every target
    assert mod.range(T16, {"id": ValueRange(-2, 1)}) == ["t_order_0", "t_order_1", "t_order_14", "t_order_15"]
    assert mod.range(T16, {"id": ValueRange(2**63 - 1, 2**63 + 1)}) == ["t_order_0", "t_order_1", "t_order_15"]


@settings(max_examples=60, deadline=None)
@given(st.integers(-(2**70), 2**70), st.integers(0, 40), st.booleans(), st.booleans())
def test_mod_range_is_exact(lo: int, span: int, lc: bool, uc: bool) -> None:
    mod = create("MOD", {"sharding-count": 16})
    hi = lo + span
    got = mod.range(T16, {"id": ValueRange(lo, hi, lc, uc)})
    members = range(lo if lc else lo + 1, hi + 1 if uc else hi)
    assert got == sorted({f"t_order_{v % 16}" for v in members}, key=T16.index)


# -- HASH_MOD ----------------------------------------------------------------


def test_hash_mod_is_xxh3_mod_count() -> None:
    hm = create("HASH_MOD", {"sharding-count": 4}, name="db")
    for value in (0, 1, -1, 10086, 2**31, 2**63 - 1, 2**63, "882341", "用户", b"raw"):
        assert hm.precise(DS4, {"user_id": value}) == [f"ds_{hash64(value) % 4}"]
    assert hm.describe() == "HASH_MOD(count=4)"
    assert not hm.supports_range
    assert hm.range(DS4, {"user_id": ValueRange(1, 2)}) == DS4


def test_hash_mod_is_stable_across_processes() -> None:
    # Fixed expectations (xxh3_64 of the canonical bytes): a Python hash() or a Java
    # Object.hashCode() would not survive a restart; these must never change.
    assert hash64(10086) % 4 == 2
    assert hash64(0) == 0xC77B3ABB6F87ACD9
    hm = create("HASH_MOD", {"sharding-count": 4})
    assert hm.precise(DS4, {"user_id": 10086}) == ["ds_2"]


def test_hash_mod_key_type() -> None:
    auto = create("HASH_MOD", {"sharding-count": 1024})
    as_int = create("HASH_MOD", {"sharding-count": 1024, "key-type": "int"})
    as_str = create("HASH_MOD", {"sharding-count": 1024, "key-type": "STR"})
    t = [f"t_{i}" for i in range(1024)]
    assert as_int.precise(t, {"k": "123"}) == auto.precise(t, {"k": 123})
    assert as_str.precise(t, {"k": 123}) == auto.precise(t, {"k": "123"})
    with pytest.raises(ShardValueError):
        as_int.precise(t, {"k": "abc"})
    for alg in (auto, as_int, as_str):
        with pytest.raises(ShardValueError, match="NULL"):
            alg.precise(t, {"k": None})
    with pytest.raises(ShardValueError):
        auto.precise(t, {"k": 1.5})  # a float has no canonical encoding
    with pytest.raises(ShardValueError):
        auto.precise(t, {"k": 2**64})


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(INT64, st.integers(0, 2**64 - 1)), max_size=50))
def test_vectorised_hash_matches_hash64(values: list[int]) -> None:
    signed = [v for v in values if v < 2**63]
    unsigned = [v for v in values if v >= 0]
    assert hash64_array(np.array(signed, dtype=np.int64)).tolist() == [hash64(v) for v in signed]
    assert hash64_array(np.array(unsigned, dtype=np.uint64)).tolist() == [hash64(v) for v in unsigned]
    small = np.array([v % 128 for v in values], dtype=np.int8)
    assert hash64_array(small).tolist() == [hash64(int(v)) for v in small]
    h = hash64_array(np.array(signed, dtype=np.int64))
    assert combine_array(h, h[::-1]).tolist() == [combine(a, b) for a, b in zip(h.tolist(), h[::-1].tolist())]


# -- SALTED_MOD ---------------------------------------------------------------


def java_reference(user_id: int, salt: int = 1_000_000_007, count: int = 16) -> int:
    """The salted modulo ``Math.abs((int)(((id ^ salt) * salt) % count))`` in Java semantics, computed
    independently of the implementation."""
    x = ctypes.c_int64(user_id ^ salt).value  # long ^ long
    salted = ctypes.c_int64(x * salt).value  # long * long wraps
    rem = int(Decimal(salted) % Decimal(count))  # Java %: sign of the dividend (Decimal does the same)
    as_int = ctypes.c_int32(rem).value  # (int) cast
    return as_int if as_int == -(2**31) else abs(as_int)  # Math.abs


# Produced by running that Java expression (JDK 17) on these ids, for counts 16, 7 and 1000.
JAVA_GOLDEN = {
    0: (1, 1, 49),
    1: (10, 2, 42),
    15: (8, 0, 56),
    16: (1, 6, 161),
    1000000001: (10, 1, 42),
    1001: (2, 5, 874),
    1002: (11, 6, 867),
    1016: (9, 2, 993),
    10086: (7, 2, 399),
    882341: (14, 6, 790),
    -1: (8, 0, 56),
    -7: (14, 6, 14),
    2147483647: (8, 5, 480),
    2147483648: (1, 6, 585),
    4294967296: (1, 4, 121),
    9223372036854775807: (8, 1, 752),
    -9223372036854775808: (15, 0, 759),
    1000000007: (0, 0, 0),
    123456789012345: (14, 4, 486),
    -123456789012345: (0, 6, 472),
}


@pytest.mark.parametrize("user_id", sorted(JAVA_GOLDEN))
def test_salted_mod_matches_java(user_id: int) -> None:
    for count, expected in zip((16, 7, 1000), JAVA_GOLDEN[user_id]):
        alg = create("SALTED_MOD", {"sharding-count": count})
        targets = [f"ds_{i}" for i in range(count)]
        assert alg.precise(targets, {"user_id": user_id}) == [f"ds_{expected}"]
        assert java_reference(user_id, count=count) == expected


@settings(max_examples=200, deadline=None)
@given(INT64, st.integers(-(2**63), 2**63 - 1), st.integers(1, 2**31 - 1))
def test_salted_mod_against_independent_java_arithmetic(user_id: int, salt: int, count: int) -> None:
    from ddm_core.algorithms import java_salted_mod

    assert java_salted_mod(user_id, salt, count) == java_reference(user_id, salt, count)


def test_salted_mod_edges() -> None:
    alg = create("SALTED_MOD", {"sharding-count": 16, "salt": "1000000007"}, name="user_id_mod_16")
    assert alg.describe() == "SALTED_MOD(count=16, salt=1000000007)"
    assert alg.precise(DS16, {"user_id": "1001"}) == ["ds_2"]  # Long.parseLong(String.valueOf(key))
    with pytest.raises(ShardValueError, match="Java's long"):
        alg.precise(DS16, {"user_id": 2**63})
    with pytest.raises(ShardValueError, match="NULL"):
        alg.precise(DS16, {"user_id": None})
    with pytest.raises(ShardValueError):
        alg.precise(DS16, {"user_id": "abc"})
    # Consecutive ids spread out (the point of the salt): 1001..1016 do not share one shard.
    shards = {alg.precise(DS16, {"user_id": u})[0] for u in range(1001, 1017)}
    assert len(shards) > 8


# -- COMPLEX_HASH_MOD ----------------------------------------------------------


def test_complex_hash_mod() -> None:
    alg = create("COMPLEX_HASH_MOD", {"sharding-columns": "tenant_id, user_id", "sharding-count": 16}, name="c")
    h = combine(hash64(7), hash64(10086))
    assert alg.precise(DS16, {"user_id": 10086, "tenant_id": 7}) == [f"ds_{h % 16}"]
    assert alg.precise(DS16, {"USER_ID": 10086, "Tenant_Id": 7}) == [f"ds_{h % 16}"]  # SQL names fold case
    # order matters: (a, b) != (b, a) in general
    assert combine(hash64(7), hash64(10086)) != combine(hash64(10086), hash64(7))
    with pytest.raises(ShardKeyNotFoundError, match="tenant_id"):
        alg.precise(DS16, {"user_id": 1})
    with pytest.raises(ShardValueError, match="NULL"):
        alg.precise(DS16, {"user_id": 1, "tenant_id": None})
    one = create("COMPLEX_HASH_MOD", {"sharding-columns": "user_id", "sharding-count": 16})
    hm = create("HASH_MOD", {"sharding-count": 16})
    for u in (0, 1, -5, 2**63, "x"):
        assert one.precise(DS16, {"user_id": u}) == hm.precise(DS16, {"user_id": u})
    assert "tenant_id,user_id" in alg.describe()


# -- props ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_name", "props", "prop"),
    [
        ("MOD", {}, "sharding-count"),
        ("MOD", {"sharding-count": 0}, "sharding-count"),
        ("MOD", {"sharding-count": "sixteen"}, "sharding-count"),
        ("MOD", {"sharding-count": 2**31}, "sharding-count"),
        ("MOD", {"sharding-count": 16, "start-offset": -1}, "start-offset"),
        ("MOD", {"sharding-count": 16, "zero-padding": "maybe"}, "zero-padding"),
        ("MOD", {"sharding-count": 16, "sharding_count": 16}, "sharding_count"),  # typo'd unknown prop
        ("HASH_MOD", {"sharding-count": 4, "key-type": "float"}, "key-type"),
        ("SALTED_MOD", {"sharding-count": 16, "salt": 2**63}, "salt"),
        ("SALTED_MOD", {"sharding-count": True}, "sharding-count"),
        ("COMPLEX_HASH_MOD", {"sharding-count": 4}, "sharding-columns"),
        ("COMPLEX_HASH_MOD", {"sharding-columns": "a,A", "sharding-count": 4}, "sharding-columns"),
        ("COMPLEX_HASH_MOD", {"sharding-columns": "a,,b", "sharding-count": 4}, "sharding-columns"),
    ],
)
def test_config_errors_name_the_prop(type_name: str, props: dict, prop: str) -> None:
    with pytest.raises(ConfigError) as info:
        create(type_name, props, name="my-alg")
    err = info.value
    assert err.prop == prop and err.algorithm == "my-alg" and err.algorithm_type == type_name
    assert repr(prop) in str(err) and "'my-alg'" in str(err) and type_name in str(err)
