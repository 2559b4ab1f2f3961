"""The protocol every algorithm shares: registry, strategy ids, None handling, batch == precise."""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddm_core.algorithms import (
    ShardingAlgorithm,
    StrategyRegistry,
    TargetSet,
    ValueRange,
    create,
    known_types,
    register,
)
from ddm_core.algorithms import Props
from ddm_core.errors import ConfigError, RoutingError, ShardKeyNotFoundError, ShardValueError

ALL_TYPES = [
    "AUTO_INTERVAL", "BOUNDARY_RANGE", "COMPLEX_HASH_MOD", "COMPLEX_INLINE", "CONSISTENT_HASH", "GENE",
    "HASH_MOD", "HINT_INLINE", "INLINE", "INTERVAL", "MOD", "SALTED_MOD", "SLOTS", "TIME_RANGE", "VOLUME_RANGE",
]


def names(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


INT64 = st.integers(-(2**63), 2**63 - 1)
UINT64 = st.integers(0, 2**64 - 1)
ANY_INT = st.integers(-(2**70), 2**70)
DAY0 = datetime(2024, 1, 1)
TIMES = st.integers(0, 180 * 24 * 3600 - 1).map(lambda s: DAY0 + timedelta(seconds=s))


class Case:
    """One configured algorithm, its targets and how to draw a row of values."""

    def __init__(self, alg: ShardingAlgorithm, targets: list[str], columns: dict[str, st.SearchStrategy[Any]],
                 vectorised: bool) -> None:
        self.alg, self.targets, self.columns, self.vectorised = alg, targets, columns, vectorised


def cases() -> dict[str, Case]:
    month_targets = [f"t_order_2024{m:02d}" for m in range(1, 7)]
    return {
        "MOD": Case(create("MOD", {"sharding-count": 16}), names("t_", 16), {"id": ANY_INT}, True),
        "HASH_MOD": Case(create("HASH_MOD", {"sharding-count": 7}), names("ds_", 7), {"id": INT64 | UINT64}, True),
        "SALTED_MOD": Case(create("SALTED_MOD", {"sharding-count": 16}), names("ds_", 16), {"id": INT64}, True),
        "VOLUME_RANGE": Case(
            create("VOLUME_RANGE", {"range-lower": -100, "range-upper": 1000, "sharding-volume": 100}),
            names("t_", 13), {"id": ANY_INT | st.integers(-200, 1100)}, True),
        "BOUNDARY_RANGE": Case(create("BOUNDARY_RANGE", {"sharding-ranges": "0,10,100"}),
                               names("t_", 4), {"id": ANY_INT | st.integers(-5, 120)}, True),
        "AUTO_INTERVAL": Case(
            create("AUTO_INTERVAL", {"datetime-lower": "2024-01-01 00:00:00",
                                     "datetime-upper": "2024-03-01 00:00:00", "sharding-seconds": 7 * 86400}),
            names("t_", 11), {"t": TIMES}, False),
        "INTERVAL": Case(
            create("INTERVAL", {"datetime-pattern": "yyyy-MM-dd HH:mm:ss", "datetime-lower": "2024-01-01 00:00:00",
                                "datetime-upper": "2024-06-30 00:00:00", "sharding-suffix-pattern": "yyyyMM",
                                "datetime-interval-unit": "MONTHS"}),
            month_targets, {"t": TIMES}, False),
        "TIME_RANGE": Case(
            create("TIME_RANGE", {"ranges": [["2024-01-01", "2024-04-01", "q1"], ["2024-04-01", "2024-07-01", "q2"]]}),
            ["q1", "q2"], {"t": TIMES}, False),
        "SLOTS": Case(create("SLOTS"), names("ds_", 5), {"id": INT64 | UINT64 | st.text(max_size=6)}, True),
        "GENE": Case(create("GENE", {"gene-bits": 6}), names("ds_", 3), {"order_id": UINT64}, True),
        "CONSISTENT_HASH": Case(create("CONSISTENT_HASH", {"virtual-nodes": 16}), names("ds_", 4),
                                {"id": INT64 | UINT64 | st.text(max_size=6)}, True),
        "COMPLEX_HASH_MOD": Case(
            create("COMPLEX_HASH_MOD", {"sharding-columns": "tenant_id,user_id", "sharding-count": 8}),
            names("ds_", 8), {"tenant_id": st.integers(0, 50), "user_id": INT64}, True),
        "INLINE": Case(create("INLINE", {"algorithm-expression": "t_order_${user_id % 16}"}),
                       names("t_order_", 16), {"user_id": st.integers(0, 2**64 - 1)}, True),
        "COMPLEX_INLINE": Case(
            create("COMPLEX_INLINE", {"algorithm-expression": "t_${(a + b) % 4}"}), names("t_", 4),
            {"a": st.integers(0, 10**6), "b": st.integers(0, 10**6)}, False),
        "HINT_INLINE": Case(create("HINT_INLINE", {"algorithm-expression": "ds${value % 2}"}), ["ds0", "ds1"],
                            {"value": st.integers(0, 10**9)}, False),
    }


CASES = cases()


def test_every_type_is_registered_and_covered() -> None:
    assert sorted(known_types()) == ALL_TYPES
    assert sorted(CASES) == ALL_TYPES


def as_array(values: list[Any]) -> np.ndarray:
    if values and all(type(v) is int for v in values):
        if all(-(2**63) <= v < 2**63 for v in values):
            return np.array(values, dtype=np.int64)
        if all(0 <= v < 2**64 for v in values):
            return np.array(values, dtype=np.uint64)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


@pytest.mark.parametrize("type_name", ALL_TYPES)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_batch_equals_a_loop_of_precise(type_name: str, data: st.DataObject) -> None:
    case = CASES[type_name]
    n = data.draw(st.integers(0, 40), label="rows")
    rows = [{c: data.draw(s, label=c) for c, s in case.columns.items()} for _ in range(n)]
    expected = [case.targets.index(case.alg.precise(case.targets, row)[0]) for row in rows]
    for pack in (as_array, lambda vs: np.array(vs, dtype=object) if vs else np.empty(0, dtype=object)):
        columns = {c: pack([row[c] for row in rows]) for c in case.columns}
        got = case.alg.batch(case.targets, columns)
        assert got.dtype == np.intp
        assert got.tolist() == expected


class _Counter:
    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def evaluate(self, variables: Any) -> str:
        self.calls += 1
        return self.inner.evaluate(variables)


@pytest.mark.parametrize("type_name", [t for t in ALL_TYPES if CASES[t].vectorised])
def test_vectorised_batches_make_no_per_row_calls(type_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Routing a 10 000-row INSERT must not cost 10 000 Python-level algorithm calls.
    case = cases()[type_name]
    alg = case.alg
    calls = []
    monkeypatch.setattr(alg, "precise", lambda *a, **k: calls.append(a) or [])
    rng = np.random.default_rng(7)
    columns = {c: rng.integers(0, 2**62, size=10_000, dtype=np.int64) for c in case.columns}
    if type_name == "COMPLEX_HASH_MOD":
        columns["tenant_id"] %= 50
    if type_name == "INLINE":
        counter = _Counter(alg.expression)
        monkeypatch.setattr(alg, "expression", counter)
    out = alg.batch(case.targets, columns)
    assert out.shape == (10_000,) and calls == []
    if type_name == "INLINE":
        assert counter.calls <= 16  # once per distinct shard, never per row


@pytest.mark.parametrize("type_name", ALL_TYPES)
def test_none_is_never_routed(type_name: str) -> None:
    case = CASES[type_name]
    row = {c: None for c in case.columns}
    with pytest.raises(ShardValueError) as info:
        case.alg.precise(case.targets, row)
    assert "NULL" in str(info.value) or "None" in str(info.value)
    with pytest.raises(ShardValueError):
        case.alg.batch(case.targets, {c: np.array([None], dtype=object) for c in case.columns})


@pytest.mark.parametrize("type_name", ALL_TYPES)
def test_missing_column_is_never_routed(type_name: str) -> None:
    case = CASES[type_name]
    with pytest.raises(ShardKeyNotFoundError):
        case.alg.precise(case.targets, {})


@pytest.mark.parametrize("type_name", ALL_TYPES)
def test_describe_pickle_and_check_targets(type_name: str) -> None:
    case = CASES[type_name]
    assert case.alg.describe().startswith(type_name + "(")
    assert type_name in repr(case.alg)
    clone = pickle.loads(pickle.dumps(case.alg))
    assert type(clone) is type(case.alg) and clone.describe() == case.alg.describe()
    case.alg.check_targets(case.targets)


@pytest.mark.parametrize("type_name", ALL_TYPES)
def test_ranges_are_supersets_of_the_precise_routes(type_name: str) -> None:
    case = CASES[type_name]
    alg = case.alg
    if len(case.columns) != 1 or type_name in ("HINT_INLINE",):
        return
    (column, strategy), = case.columns.items()
    is_time = type_name in ("AUTO_INTERVAL", "INTERVAL", "TIME_RANGE")
    points = ([DAY0 + timedelta(days=d, hours=5) for d in (0, 20, 40, 70, 100, 150)] if is_time
              else [-150, -1, 0, 5, 9, 10, 55, 99, 100, 1000, 1099])
    if type_name == "INLINE":
        alg = create("INLINE", {"algorithm-expression": "t_order_${user_id % 16}",
                                "allow-range-query-with-inline-sharding": True})
    if type_name in ("GENE", "INLINE"):  # ids / Java's signed % have no shard for negatives
        points = [p for p in points if p >= 0]
    for lo in points:
        for hi in points:
            if hi < lo:
                continue
            got = alg.range(case.targets, {column: ValueRange(lo, hi)})
            inside = [p for p in points if lo <= p <= hi]
            for p in inside:
                assert alg.precise(case.targets, {column: p})[0] in got, (lo, hi, p)
            assert got == [t for t in case.targets if t in got]  # configured order
            if not alg.supports_range:
                assert got == case.targets


# -- registry ---------------------------------------------------------------------------


def test_create_unknown_type_lists_known_types() -> None:
    with pytest.raises(ConfigError) as info:
        create("MODULO", {}, name="x")
    assert "'MODULO'" in str(info.value) and "HASH_MOD" in str(info.value) and "SLOTS" in str(info.value)
    assert create("mod", {"sharding-count": 2}).type_name == "MOD"  # case-insensitive
    with pytest.raises(ConfigError):
        create(None, {})  # type: ignore[arg-type]


def test_register_a_custom_type(monkeypatch: pytest.MonkeyPatch) -> None:
    from ddm_core.algorithms import registry

    monkeypatch.setattr(registry, "_TYPES", dict(registry._TYPES))  # keep the global registry clean

    @register
    class EvenOdd(ShardingAlgorithm):
        type_name = "TEST_EVEN_ODD"
        PROPS = {"prefix": "target prefix"}

        def _configure(self, props: Props) -> None:
            self.prefix = props.text("prefix", "t_")

        def precise(self, targets, values):  # type: ignore[no-untyped-def]
            (_, v), = values.items()
            return [f"{self.prefix}{v % 2}"] if v >= 0 else ["t_0", "t_1"]

    alg = create("test_even_odd", {}, name="eo")
    assert alg.precise(["t_0", "t_1"], {"x": 3}) == ["t_1"]
    # the default batch loops precise, and needs one target per row
    assert alg.batch(["t_0", "t_1"], {"x": np.array([1, 2, 3])}).tolist() == [1, 0, 1]
    with pytest.raises(RoutingError, match="row 1"):
        alg.batch(["t_0", "t_1"], {"x": np.array([1, -2])})
    assert alg.range(["t_0", "t_1"], {"x": ValueRange(1, 2)}) == ["t_0", "t_1"]  # conservative default
    with pytest.raises(ConfigError) as info:
        create("TEST_EVEN_ODD", {"prefx": "a"})
    assert info.value.prop == "prefx" and "known props: prefix" in str(info.value)

    class Clash(EvenOdd):
        type_name = "MOD"

    with pytest.raises(ConfigError, match="already registered"):
        register(Clash)


# -- strategy ids (docs/architecture.md#strategy-ids-not-classes) --------------------------


def test_strategy_registry() -> None:
    reg = StrategyRegistry({
        "user_id_mod_16": {"type": "SALTED_MOD", "props": {"sharding-count": 16}},
        "db-inline": {"type": "INLINE", "props": {"algorithm-expression": "ds${user_id % 32 / 16}"}},
        "ready": create("MOD", {"sharding-count": 2}),
    })
    alg = reg.resolve("user_id_mod_16")
    assert alg.name == "user_id_mod_16" and alg.type_name == "SALTED_MOD"
    assert alg.precise(names("ds_", 16), {"user_id": 1001}) == ["ds_2"]
    assert len(reg) == 3 and set(reg) == {"user_id_mod_16", "db-inline", "ready"}
    with pytest.raises(ConfigError) as info:
        reg.resolve("user_id_mod_32")
    assert "'user_id_mod_32'" in str(info.value) and "user_id_mod_16" in str(info.value)
    newer = reg.with_strategy("user_id_mod_32", {"type": "MOD", "props": {"sharding-count": 32}})
    assert "user_id_mod_32" in newer and "user_id_mod_32" not in reg  # immutable: a new registry
    for bad in ({"s": {"props": {}}}, {"s": {"type": "MOD", "prop": {}}}, {"s": "MOD"},
                {"s": {"type": "MOD", "props": {"sharding-count": -1}}}, {"": {"type": "MOD"}}):
        with pytest.raises(ConfigError):
            StrategyRegistry(bad)
    with pytest.raises(ConfigError) as info:
        StrategyRegistry({"s": {"type": "MOD", "props": {"sharding-count": -1}}})
    assert info.value.algorithm == "s" and info.value.prop == "sharding-count"


# -- database and table strategies are independent -----------------------------------------


def test_database_by_user_table_by_order_no() -> None:
    db = create("HASH_MOD", {"sharding-count": 4}, name="db-by-user")
    tbl = create("MOD", {"sharding-count": 4}, name="tbl-by-order-no")
    databases = names("ds_", 4)
    tables = names("t_order_", 4)
    user = 10086
    orders = [20240501000001 + k for k in range(12)]
    placed = {(db.precise(databases, {"user_id": user})[0], tbl.precise(tables, {"order_no": o})[0]) for o in orders}
    assert len({d for d, _ in placed}) == 1  # one user, one database
    assert len({t for _, t in placed}) == 4  # a big user's orders spread over the 4 tables
    for order_no in orders:  # "order_no 后四位取模": the last four digits mod 4 is order_no mod 4
        assert tbl.precise(tables, {"order_no": order_no}) == [f"t_order_{int(str(order_no)[-4:]) % 4}"]


# -- TargetSet / ValueRange ---------------------------------------------------------------


def test_target_set() -> None:
    ts = TargetSet(["t_order_0", "t_order_1", "t_order_11", "x"])
    assert len(ts) == 4 and ts[2] == "t_order_11" and list(ts) == ["t_order_0", "t_order_1", "t_order_11", "x"]
    assert ts == ["t_order_0", "t_order_1", "t_order_11", "x"] and "x" in ts
    assert ts.index_of_number(1) == 1 and ts.index_of_number(11) == 2 and ts.index_of_number(2) == -1
    mod = create("MOD", {"sharding-count": 16})
    assert mod.precise(ts, {"id": 11}) == ["t_order_11"]
    for bad in (["a", "a"], ["a", ""], ["a", 3]):
        with pytest.raises(ConfigError):
            TargetSet(bad)  # type: ignore[arg-type]


def test_value_range() -> None:
    r = ValueRange(upper=5, upper_closed=False)
    assert r.lower is None and r.lower_closed and not r.bounded
    assert ValueRange(1, 2).bounded
    with pytest.raises(AttributeError):
        r.lower = 3  # type: ignore[misc]
