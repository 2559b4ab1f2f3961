"""INLINE, COMPLEX_INLINE, HINT_INLINE."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddm_core.algorithms import ValueRange, create
from ddm_core.errors import (
    ConfigError,
    InlineExpressionError,
    RoutingError,
    ShardKeyNotFoundError,
    ShardValueError,
    UnsupportedSQLError,
)

DS2 = ["ds0", "ds1"]
T16 = [f"t_order_{i}" for i in range(16)]


def order_db_2x16() -> tuple[object, object]:
    db = create("INLINE", {"algorithm-expression": "ds${user_id % 32 / 16}"}, name="db-inline")
    tbl = create("INLINE", {"algorithm-expression": "t_order_${user_id % 16}"}, name="tbl-inline")
    return db, tbl


def test_order_db_user_882341() -> None:
    # 882341 % 32 = 5 (computed: docs/notes.md#compute-expected-routes), so the user lives in ds0.t_order_5.
    db, tbl = order_db_2x16()
    assert 882341 % 32 == 5 and 882341 % 16 == 5
    assert db.precise(DS2, {"user_id": 882341}) == ["ds0"]
    assert tbl.precise(T16, {"user_id": 882341}) == ["t_order_5"]


@pytest.mark.parametrize(("user_id", "ds", "table"), [(0, 0, 0), (15, 0, 15), (16, 1, 0), (31, 1, 15), (32, 0, 0),
                                                       (2**31 + 16, 1, 0), (2**63 + 17, 1, 1), (2**80 + 31, 1, 15)])
def test_order_db_layout(user_id: int, ds: int, table: int) -> None:
    # ds${user_id % 32 / 16} is integer division: user_id % 32 >= 16 ? 1 : 0
    db, tbl = order_db_2x16()
    assert db.precise(DS2, {"user_id": user_id}) == [f"ds{ds}"]
    assert tbl.precise(T16, {"user_id": user_id}) == [f"t_order_{table}"]


def test_inline_values_and_errors() -> None:
    db, tbl = order_db_2x16()
    with pytest.raises(ShardValueError, match="NULL"):
        tbl.precise(T16, {"user_id": None})
    with pytest.raises(ShardValueError, match="cannot evaluate"):
        tbl.precise(T16, {"user_id": "882341"})  # Groovy cannot '%' a String either
    with pytest.raises(ShardValueError):
        tbl.precise(T16, {"user_id": 1.5})
    # Java's % keeps the sign: a negative id names t_order_-7, which is no target.
    with pytest.raises(RoutingError, match="'t_order_-7'.*not among the targets"):
        tbl.precise(T16, {"user_id": -7})
    floor = create("INLINE", {"algorithm-expression": "t_order_${Math.floorMod(user_id, 16)}"})
    assert floor.precise(T16, {"user_id": -7}) == ["t_order_9"]
    with pytest.raises(ShardKeyNotFoundError, match="user_id"):
        tbl.precise(T16, {"order_id": 5})
    assert tbl.precise(T16, {"USER_ID": 5}) == ["t_order_5"]  # SQL names fold case
    with pytest.raises(RoutingError, match="not among the targets"):
        tbl.precise(T16[:4], {"user_id": 5})


def test_inline_range_flag() -> None:
    _, tbl = order_db_2x16()
    assert not tbl.supports_range
    with pytest.raises(UnsupportedSQLError, match="allow-range-query-with-inline-sharding"):
        tbl.range(T16, {"user_id": ValueRange(1, 5)})
    allowed = create("INLINE", {"algorithm-expression": "t_order_${user_id % 16}",
                                "allow-range-query-with-inline-sharding": "true"})
    assert allowed.supports_range
    assert allowed.range(T16, {"user_id": ValueRange(1, 5)}) == T16
    assert type(allowed).supports_range is False  # the class default is untouched


def test_inline_config_errors() -> None:
    with pytest.raises(ConfigError) as info:
        create("INLINE", {"algorithm-expression": "t_${a % 2}_${b % 2}"}, name="x")
    assert info.value.prop == "algorithm-expression" and "COMPLEX_INLINE" in str(info.value)
    with pytest.raises(ConfigError) as info:
        create("INLINE", {"algorithm-expression": "t_${user_id %"})
    assert info.value.prop == "algorithm-expression"
    assert isinstance(info.value, ConfigError) and not isinstance(info.value, InlineExpressionError)
    with pytest.raises(ConfigError) as info:
        create("INLINE", {})
    assert info.value.prop == "algorithm-expression"
    with pytest.raises(ConfigError) as info:
        create("INLINE", {"algorithm-expression": "t", "allow-range-query-with-inline-sharding": "yes"})
    assert info.value.prop == "allow-range-query-with-inline-sharding"


def test_complex_inline() -> None:
    alg = create("COMPLEX_INLINE", {"algorithm-expression": "t_${(user_id + tenant_id) % 4}",
                                    "sharding-columns": "user_id,tenant_id"}, name="ci")
    t4 = [f"t_{i}" for i in range(4)]
    assert alg.precise(t4, {"user_id": 5, "tenant_id": 2}) == ["t_3"]
    with pytest.raises(ShardKeyNotFoundError, match="tenant_id"):
        alg.precise(t4, {"user_id": 5})
    assert alg.batch(t4, {"user_id": np.array([5, 6]), "tenant_id": np.array([2, 2])}).tolist() == [3, 0]
    with pytest.raises(ConfigError) as info:
        create("COMPLEX_INLINE", {"algorithm-expression": "t_${a + b}", "sharding-columns": "a"})
    assert info.value.prop == "sharding-columns"
    with pytest.raises(UnsupportedSQLError):
        alg.range(t4, {"user_id": ValueRange(1, 2)})


def test_hint_inline() -> None:
    plain = create("HINT_INLINE")
    assert plain.precise(DS2, {"value": "ds1"}) == ["ds1"]
    mod = create("HINT_INLINE", {"algorithm-expression": "ds${value % 2}"})
    assert mod.precise(DS2, {"value": 7}) == ["ds1"]
    with pytest.raises(ShardValueError, match="NULL"):
        mod.precise(DS2, {"value": None})
    with pytest.raises(RoutingError):
        plain.precise(DS2, {"value": "ds9"})
    with pytest.raises(ConfigError) as info:
        create("HINT_INLINE", {"algorithm-expression": "ds${user_id % 2}"})
    assert info.value.prop == "algorithm-expression"


T16X = [f"t_order_{i}_x" for i in range(16)]


@pytest.mark.parametrize(
    ("expression", "targets"),
    [
        ("t_order_${user_id % 16}", T16),
        ("t_order_$->{user_id % 16}", T16),
        ("ds${user_id % 32 / 16}", DS2),
        ("ds${(user_id % 32).intdiv(16)}", DS2),
        ("t_order_${Math.floorMod(user_id, 16)}", T16),
        ("t_order_${user_id % 16 + 0}", T16),  # not a recognised shape: evaluated per row
        ("t_order_${user_id % 16}_x", T16X),
    ],
)
@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.integers(0, 2**63 - 1), min_size=0, max_size=60))
def test_inline_batch_equals_precise(expression: str, targets: list[str], values: list[int]) -> None:
    alg = create("INLINE", {"algorithm-expression": expression})
    arr = np.array(values, dtype=np.int64)
    got = alg.batch(targets, {"user_id": arr}).tolist()
    assert got == [targets.index(alg.precise(targets, {"user_id": v})[0]) for v in values]


def test_inline_batch_negative_and_unsigned() -> None:
    floor = create("INLINE", {"algorithm-expression": "t_order_${Math.floorMod(user_id, 16)}"})
    arr = np.array([-1, -16, -17, 5], dtype=np.int64)
    assert floor.batch(T16, {"user_id": arr}).tolist() == [15, 0, 15, 5]
    _, tbl = order_db_2x16()
    with pytest.raises(RoutingError, match="row 0"):
        tbl.batch(T16, {"user_id": np.array([-7, 1])})
    big = np.array([2**64 - 1, 2**63], dtype=np.uint64)
    assert tbl.batch(T16, {"user_id": big}).tolist() == [15, 0]
    with pytest.raises(ShardValueError, match="NULL"):
        tbl.batch(T16, {"user_id": np.array([1, None], dtype=object)})
