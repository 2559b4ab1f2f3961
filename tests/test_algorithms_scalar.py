"""``scalar`` / ``multi_scalar`` of every algorithm agree with ``precise``, value for value.

The router's point fast path calls these functions instead of ``precise``. They
may not answer differently: for every value either both give the same one
target, or both refuse (the scalar by any exception, after which the router
takes the general path and ``precise`` raises the real error). A scalar that
refused a value ``precise`` routes would be a silent slow path; that is
checked too.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddm_core.algorithms import ShardingAlgorithm, create, known_types
from ddm_core.errors import DdmError
from ddm_core.ids import GeneIdGenerator

REFUSED = "refused"

NUMBERED = [f"t_{i}" for i in range(4)]
MONTHLY = [f"t_2024{m:02d}" for m in range(1, 7)]

# (type, props, targets, column) — every registered type, some in several shapes.
SINGLE: list[tuple[str, dict[str, Any], list[str], str]] = [
    ("MOD", {"sharding-count": 4}, NUMBERED, "user_id"),
    ("MOD", {"sharding-count": 4, "start-offset": 1}, NUMBERED, "user_id"),
    ("HASH_MOD", {"sharding-count": 4}, NUMBERED, "user_id"),
    ("HASH_MOD", {"sharding-count": 4, "key-type": "str"}, NUMBERED, "user_id"),
    ("SALTED_MOD", {"sharding-count": 4}, NUMBERED, "user_id"),
    ("VOLUME_RANGE", {"range-lower": 0, "range-upper": 200, "sharding-volume": 100}, NUMBERED, "user_id"),
    ("BOUNDARY_RANGE", {"sharding-ranges": "10,20,30"}, NUMBERED, "user_id"),
    ("AUTO_INTERVAL", {"datetime-lower": "2024-01-01 00:00:00", "datetime-upper": "2024-01-03 00:00:00",
                       "sharding-seconds": 86400}, NUMBERED, "created"),
    ("INTERVAL", {"datetime-pattern": "yyyy-MM-dd HH:mm:ss", "datetime-lower": "2024-01-01 00:00:00",
                  "datetime-upper": "2024-06-01 00:00:00", "sharding-suffix-pattern": "yyyyMM",
                  "datetime-interval-unit": "MONTHS"}, MONTHLY, "created"),
    ("TIME_RANGE", {"ranges": [["2024-01-01", "2024-02-01", "t_0"], ["2024-02-01", "2024-04-01", "t_1"]]},
     NUMBERED, "created"),
    ("SLOTS", {"slot-bits": 4}, NUMBERED, "user_id"),
    ("SLOTS", {"slot-bits": 2, "slots": {"t_0": "0", "t_1": "1-2", "t_9": "3"}}, NUMBERED, "user_id"),
    ("SLOTS", {"slot-bits": 4, "key-type": "int"}, NUMBERED, "user_id"),
    ("GENE", {"gene-bits": 4}, NUMBERED, "order_id"),
    ("GENE", {"gene-bits": 4, "key-columns": "user_id"}, NUMBERED, "user_id"),
    ("CONSISTENT_HASH", {"virtual-nodes": 20}, NUMBERED, "user_id"),
    ("INLINE", {"algorithm-expression": "t_${user_id % 4}"}, NUMBERED, "user_id"),
    ("INLINE", {"algorithm-expression": "t_${Math.floorMod(user_id, 8).intdiv(2)}"}, NUMBERED, "user_id"),
    ("INLINE", {"algorithm-expression": "t_${user_id.abs() % 4}"}, NUMBERED, "user_id"),
    ("INLINE", {"algorithm-expression": "t_${user_id}"}, NUMBERED, "user_id"),
    ("INLINE", {"algorithm-expression": "t_${USER_ID % 5}"}, NUMBERED, "user_id"),
    ("INLINE", {"algorithm-expression": "t_1"}, NUMBERED, "user_id"),
    ("HINT_INLINE", {"algorithm-expression": "t_${value % 4}"}, NUMBERED, "user_id"),
]
MULTI: list[tuple[str, dict[str, Any], list[str], tuple[str, ...]]] = [
    ("COMPLEX_HASH_MOD", {"sharding-columns": "tenant_id,user_id", "sharding-count": 4}, NUMBERED,
     ("user_id", "tenant_id")),
    ("COMPLEX_HASH_MOD", {"sharding-columns": "tenant_id,user_id", "sharding-count": 4}, NUMBERED, ("user_id",)),
    ("COMPLEX_INLINE", {"algorithm-expression": "t_${(tenant_id + user_id) % 4}"}, NUMBERED,
     ("user_id", "tenant_id")),
    ("COMPLEX_INLINE", {"algorithm-expression": "t_${tenant_id}"}, ["t_a", "t_b"], ("TENANT_ID",)),
    ("GENE", {"gene-bits": 4, "key-columns": "user_id"}, NUMBERED, ("order_id", "user_id")),
    ("MOD", {"sharding-count": 4}, NUMBERED, ("user_id",)),
]

values = st.one_of(
    st.integers(-(2**64), 2**64),
    st.integers(-40, 240),
    st.sampled_from([0, 1, 7, 16, 2**63 - 1, 2**63, 2**64 - 1, True, False, None, "", "42", " 7", "-3",
                     "abc", "a", "b", 5.0, 5.5, Decimal("12"), np.int64(77), np.uint64(2**63 + 1),
                     np.int32(-5), b"7"]),
    st.text(max_size=8),
    st.datetimes(dt.datetime(2023, 12, 1), dt.datetime(2024, 7, 1)),
    st.dates(dt.date(2023, 12, 1), dt.date(2024, 7, 1)),
    st.sampled_from(["2024-01-02 10:00:00", "2024-03-03", "2024-02-29T23:59:59", "1704067200"]),
    st.sampled_from(GeneIdGenerator(2, 4).next_ids([1, 5, 99, "x"]).tolist()),
)


def outcome_precise(alg: ShardingAlgorithm, targets: Sequence[str], values: dict[str, Any]) -> Any:
    try:
        got = alg.precise(targets, values)
    except DdmError:
        return REFUSED
    return list(targets).index(got[0]) if len(got) == 1 else REFUSED


def outcome_scalar(fn: Any, arg: Any) -> Any:
    try:
        return fn(arg)
    except Exception:  # any refusal: the router would take the general path
        return REFUSED


def build(type_name: str, props: dict[str, Any]) -> ShardingAlgorithm:
    return create(type_name, props, name=f"{type_name.lower()}-under-test")


def test_every_registered_type_is_covered() -> None:
    assert set(known_types()) == {t for t, *_ in SINGLE} | {t for t, *_ in MULTI}


@pytest.mark.parametrize("type_name, props, targets, column", SINGLE, ids=[f"{c[0]}-{i}" for i, c in enumerate(SINGLE)])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=values)
def test_scalar_agrees_with_precise(type_name: str, props: dict[str, Any], targets: list[str], column: str,
                                    value: Any) -> None:
    alg = build(type_name, props)
    scalar = alg.scalar(targets, column)
    want = outcome_precise(alg, targets, {column: value})
    assert outcome_scalar(scalar, value) == want, (type_name, props, value)
    assert outcome_scalar(scalar, value) == want  # and again: cached remainders answer the same


@pytest.mark.parametrize("type_name, props, targets, columns", MULTI, ids=[f"{c[0]}-{i}" for i, c in enumerate(MULTI)])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_multi_scalar_agrees_with_precise(type_name: str, props: dict[str, Any], targets: list[str],
                                          columns: tuple[str, ...], data: Any) -> None:
    alg = build(type_name, props)
    row = tuple(data.draw(values) for _ in columns)
    fn = alg.multi_scalar(targets, [c.lower() for c in columns])
    want = outcome_precise(alg, targets, {c.lower(): v for c, v in zip(columns, row)})
    assert outcome_scalar(fn, row) == want, (type_name, props, row)


def test_gene_scalar_reads_the_column_it_is_given() -> None:
    """The key column is hashed like SLOTS, an id column read by its gene: the column decides."""
    alg = build("GENE", {"gene-bits": 4, "key-columns": "user_id"})
    slots = build("SLOTS", {"slot-bits": 4})
    by_user, by_order = alg.scalar(NUMBERED, "user_id"), alg.scalar(NUMBERED, "order_id")
    spread = set()
    for user in range(200):
        (order_id,) = GeneIdGenerator(1, 4).next_ids([user]).tolist()
        assert by_user(user) == by_order(order_id) == slots.scalar(NUMBERED, "user_id")(user)
        spread.add(by_user(user))
    assert spread == {0, 1, 2, 3}
