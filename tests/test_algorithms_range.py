"""Range and time algorithms: BOUNDARY_RANGE, VOLUME_RANGE, INTERVAL, AUTO_INTERVAL, TIME_RANGE."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import numpy as np
import pytest

from ddm_core.algorithms import ValueRange, create
from ddm_core.algorithms.temporal import JavaPattern, PatternError
from ddm_core.errors import ConfigError, RoutingError, ShardValueError

P4 = [f"t_{i}" for i in range(4)]
P6 = [f"t_{i}" for i in range(6)]
MONTHS = [f"t_order_2024{m:02d}" for m in range(1, 7)]


# -- BOUNDARY_RANGE / VOLUME_RANGE -------------------------------------------------


@pytest.mark.parametrize(
    ("value", "partition"),
    [(-5, 0), (0, 0), (1, 1), (4, 1), (5, 2), (9, 2), (10, 3), (2**63, 3), (-(2**63), 0), ("7", 2), (np.int32(4), 1)],
)
def test_boundary_range_partitions(value: object, partition: int) -> None:
    alg = create("BOUNDARY_RANGE", {"sharding-ranges": "10, 1,5"})  # sorted like ShardingSphere
    assert alg.precise(P4, {"id": value}) == [f"t_{partition}"]


def test_boundary_range_ranges_are_exact() -> None:
    alg = create("BOUNDARY_RANGE", {"sharding-ranges": [1, 5, 10]})
    assert alg.supports_range
    assert alg.range(P4, {"id": ValueRange(3, 7)}) == ["t_1", "t_2"]
    assert alg.range(P4, {"id": ValueRange(5, 10, lower_closed=False, upper_closed=False)}) == ["t_2"]
    assert alg.range(P4, {"id": ValueRange(4, 5, upper_closed=False)}) == ["t_1"]
    assert alg.range(P4, {"id": ValueRange(lower=10)}) == ["t_3"]
    assert alg.range(P4, {"id": ValueRange(upper=1, upper_closed=False)}) == ["t_0"]
    assert alg.range(P4, {"id": ValueRange()}) == P4
    assert alg.range(P4, {"id": ValueRange(9, 2)}) == []
    assert alg.range(P4, {"id": ValueRange(0.5, 0.9)}) == []  # no integer inside
    assert alg.range(P4, {"id": ValueRange("-3", "12")}) == P4


def test_volume_range() -> None:
    # lower 10, upper 45, volume 10: <10 | [10,20) [20,30) [30,40) [40,45) | >=45
    alg = create("VOLUME_RANGE", {"range-lower": 10, "range-upper": "45", "sharding-volume": 10})
    assert alg.result_count == 6
    expect = {9: 0, 10: 1, 19: 1, 20: 2, 39: 3, 40: 4, 44: 4, 45: 5, 10**20: 5, -(10**20): 0}
    for value, partition in expect.items():
        assert alg.precise(P6, {"id": value}) == [f"t_{partition}"], value
    assert alg.range(P6, {"id": ValueRange(15, 41)}) == ["t_1", "t_2", "t_3", "t_4"]
    assert alg.describe().startswith("VOLUME_RANGE(lower=10, upper=45, volume=10")
    with pytest.raises(RoutingError, match="no target"):
        alg.precise(P4, {"id": 44})  # partition 4 has no table among t_0..t_3


def test_range_config_errors() -> None:
    bad = [
        ("BOUNDARY_RANGE", {"sharding-ranges": "1,x,3"}, "sharding-ranges"),
        ("BOUNDARY_RANGE", {"sharding-ranges": "1,3,3"}, "sharding-ranges"),
        ("BOUNDARY_RANGE", {"sharding-ranges": ""}, "sharding-ranges"),
        ("BOUNDARY_RANGE", {}, "sharding-ranges"),
        ("VOLUME_RANGE", {"range-lower": 0, "range-upper": 5, "sharding-volume": 10}, "sharding-volume"),
        ("VOLUME_RANGE", {"range-lower": 0, "range-upper": 5}, "sharding-volume"),
        ("VOLUME_RANGE", {"range-lower": 0, "range-upper": 10, "sharding-volume": 0}, "sharding-volume"),
    ]
    for type_name, props, prop in bad:
        with pytest.raises(ConfigError) as info:
            create(type_name, props, name="r")
        assert info.value.prop == prop, (type_name, props)
        assert repr(prop) in str(info.value)


def test_check_targets_at_start() -> None:
    alg = create("BOUNDARY_RANGE", {"sharding-ranges": "1,5,10"}, name="r")
    alg.check_targets(P4)
    with pytest.raises(ConfigError, match=r"no target for shard number\(s\) 3"):
        alg.check_targets(P4[:3])
    mod = create("MOD", {"sharding-count": 4}, name="m")
    with pytest.raises(ConfigError, match="several targets"):
        mod.check_targets(["a_0", "a_1", "a_2", "a_3", "b_03"])


# -- INTERVAL -------------------------------------------------------------------------


def monthly(**extra: object) -> object:
    props = {
        "datetime-pattern": "yyyy-MM-dd HH:mm:ss",
        "datetime-lower": "2024-01-01 00:00:00",
        "datetime-upper": "2024-06-30 23:59:59",
        "sharding-suffix-pattern": "yyyyMM",
        "datetime-interval-amount": 1,
        "datetime-interval-unit": "MONTHS",
    }
    props.update(extra)
    return create("INTERVAL", props, name="by-month")


@pytest.mark.parametrize(
    ("value", "month"),
    [
        (datetime(2024, 3, 15, 10, 0), 3),
        (date(2024, 1, 1), 1),
        ("2024-02-29 23:59:59", 2),
        ("2024-02-29", 2),  # ISO date
        ("2024-03-01T00:00:00Z", 3),
        ("2024-03-01 00:00:00.999", 3),  # longer than the pattern: ISO reads it exactly
        (1709251200, 3),  # 2024-03-01T00:00:00Z in epoch seconds
        (1709251199, 2),
        (1709251200000, 3),  # epoch milliseconds
        (1709251199999, 2),
        ("1709251200", 3),
        (1709251200.5, 3),
        (np.datetime64("2024-05-31T23:59:59"), 5),
        (datetime(2024, 3, 1, 7, 0, tzinfo=timezone(timedelta(hours=8))), 2),  # 2024-02-29 23:00 UTC
        (datetime(2024, 6, 30, 23, 59, 59), 6),
        (datetime(2024, 7, 1) - timedelta(microseconds=1), 6),
    ],
)
def test_interval_monthly(value: object, month: int) -> None:
    assert monthly().precise(MONTHS, {"create_time": value}) == [f"t_order_2024{month:02d}"]


def test_interval_outside_and_bad_values() -> None:
    alg = monthly()
    for value in (datetime(2023, 12, 31, 23, 59, 59), datetime(2024, 7, 1), "2099-01-01"):
        with pytest.raises(RoutingError, match="outside the configured intervals"):
            alg.precise(MONTHS, {"create_time": value})
    with pytest.raises(ShardValueError, match="NULL"):
        alg.precise(MONTHS, {"create_time": None})
    for value in ("yesterday", True, [2024], float("inf")):
        with pytest.raises(ShardValueError, match="not a date-time"):
            alg.precise(MONTHS, {"create_time": value})
    with pytest.raises(RoutingError, match="no target ends with '202403'"):
        alg.precise(MONTHS[:2], {"create_time": "2024-03-05"})


def test_interval_time_zone_and_epoch_unit() -> None:
    alg = monthly(**{"time-zone": "Asia/Shanghai"})
    # 2024-02-29T16:00:00Z is 2024-03-01 00:00 in Shanghai.
    assert alg.precise(MONTHS, {"t": 1709222400}) == ["t_order_202403"]
    assert alg.precise(MONTHS, {"t": 1709222399}) == ["t_order_202402"]
    ms = monthly(**{"epoch-unit": "ms"})
    assert ms.precise(MONTHS, {"t": 1709251200000}) == ["t_order_202403"]
    s = monthly(**{"epoch-unit": "s"})
    with pytest.raises(RoutingError):  # 1.7e12 seconds is far beyond 2024
        s.precise(MONTHS, {"t": 1709251200000})


def test_interval_ranges() -> None:
    alg = monthly()
    assert alg.supports_range
    r = alg.range(MONTHS, {"t": ValueRange("2024-02-15", "2024-04-01", upper_closed=False)})
    assert r == ["t_order_202402", "t_order_202403"]
    r = alg.range(MONTHS, {"t": ValueRange("2024-02-15", "2024-04-01")})
    assert r == ["t_order_202402", "t_order_202403", "t_order_202404"]
    assert alg.range(MONTHS, {"t": ValueRange(upper=date(2024, 2, 1))}) == MONTHS[:2]
    assert alg.range(MONTHS, {"t": ValueRange(lower=datetime(2024, 6, 30))}) == MONTHS[5:]
    assert alg.range(MONTHS, {"t": ValueRange(lower="2024-06-01", lower_closed=False)}) == MONTHS[5:]
    assert alg.range(MONTHS, {"t": ValueRange("2030-01-01", "2031-01-01")}) == []
    assert alg.range(MONTHS, {"t": ValueRange()}) == MONTHS
    # the point of time sharding: "the last three months" touch three shards.
    assert len(alg.range(MONTHS, {"t": ValueRange("2024-04-01", "2024-06-30 23:59:59")})) == 3


def test_interval_days_and_month_end_clamping() -> None:
    weekly = create(
        "INTERVAL",
        {
            "datetime-pattern": "yyyy-MM-dd",
            "datetime-lower": "2024-01-01",
            "datetime-upper": "2024-01-31",
            "sharding-suffix-pattern": "yyyyMMdd",
            "datetime-interval-amount": "7",
        },
    )
    starts = ["20240101", "20240108", "20240115", "20240122", "20240129"]
    targets = [f"t_{s}" for s in starts]
    assert weekly.precise(targets, {"d": "2024-01-14"}) == ["t_20240108"]
    assert weekly.precise(targets, {"d": "2024-02-04"}) == ["t_20240129"]  # the last interval runs on
    # Java's plusMonths clamps and then drifts: Jan 31 -> Feb 29 -> Mar 29.
    clamped = create(
        "INTERVAL",
        {
            "datetime-pattern": "yyyy-MM-dd",
            "datetime-lower": "2024-01-31",
            "datetime-upper": "2024-04-30",
            "sharding-suffix-pattern": "yyyyMMdd",
            "datetime-interval-unit": "months",
        },
    )
    assert clamped.suffixes == ["20240131", "20240229", "20240329", "20240429"]


def test_interval_suffix_does_not_match_inside_a_longer_number() -> None:
    yearly = create(
        "INTERVAL",
        {
            "datetime-pattern": "yyyy",
            "datetime-lower": "2023",
            "datetime-upper": "2025",
            "sharding-suffix-pattern": "yy",
            "datetime-interval-unit": "YEARS",
        },
    )
    # "24" must pick t_24, not t_124.
    assert yearly.precise(["t_124", "t_24", "t_23", "t_25"], {"y": "2024-05-01"}) == ["t_24"]


def test_interval_config_errors() -> None:
    base = {
        "datetime-pattern": "yyyy-MM-dd HH:mm:ss",
        "datetime-lower": "2024-01-01 00:00:00",
        "datetime-upper": "2024-06-30 23:59:59",
        "sharding-suffix-pattern": "yyyyMM",
    }
    cases = [
        ({**base, "datetime-lower": "January"}, "datetime-lower"),
        ({**base, "datetime-upper": "2023-01-01 00:00:00"}, "datetime-upper"),
        ({**base, "datetime-interval-unit": "FORTNIGHTS"}, "datetime-interval-unit"),
        ({**base, "datetime-interval-amount": 0}, "datetime-interval-amount"),
        ({**base, "datetime-pattern": "EEE yyyy"}, "datetime-pattern"),
        ({**base, "sharding-suffix-pattern": "MM"}, "sharding-suffix-pattern"),  # no year
        ({**base, "datetime-interval-unit": "SECONDS"}, "datetime-interval-amount"),  # too many intervals
        ({**base, "time-zone": "Mars/Olympus"}, "time-zone"),
        ({k: v for k, v in base.items() if k != "sharding-suffix-pattern"}, "sharding-suffix-pattern"),
    ]
    for props, prop in cases:
        with pytest.raises(ConfigError) as info:
            create("INTERVAL", props, name="iv")
        assert info.value.prop == prop, props


def test_java_patterns() -> None:
    p = JavaPattern("yyyy-MM-dd'T'HH:mm:ss.SSS")
    dt = datetime(2024, 3, 5, 7, 8, 9, 123456)
    assert p.format(dt) == "2024-03-05T07:08:09.123"
    assert p.parse("2024-03-05T07:08:09.123", prefix=False) == datetime(2024, 3, 5, 7, 8, 9, 123000)
    assert JavaPattern("yyyyMM").format(dt) == "202403"
    assert JavaPattern("yy''M").format(dt) == "24'3"  # '' is a quote; M is unpadded
    assert JavaPattern("yyyy-MM-dd").parse("2024-02-30") is None
    for bad in ("yyyy-MMM", "hh:mm a", "'open", "MM-dd"):
        with pytest.raises(PatternError):
            JavaPattern(bad)


# -- AUTO_INTERVAL ----------------------------------------------------------------------

# ShardingSphere's AutoIntervalShardingAlgorithm arithmetic run on JDK 17 for
# lower 2020-01-01 00:00:00, upper 2020-01-03 12:00:00, sharding-seconds 86400
# (autoTablesAmount 4). Note the two-decimal rounding: 00:07:11 (0.00499 days)
# stays on shard 0, and 2020-01-02 00:07:12 (1.005 days, 1.00499... as a double)
# stays on shard 1.
AUTO_GOLDEN = {
    "2019-12-31 23:59:59": 0,
    "2020-01-01 00:00:00": 0,
    "2020-01-01 00:00:01": 0,
    "2020-01-01 00:07:11": 0,
    "2020-01-01 00:07:12": 1,
    "2020-01-01 00:07:13": 1,
    "2020-01-02 00:00:00": 1,
    "2020-01-02 00:00:01": 1,
    "2020-01-02 00:07:11": 1,
    "2020-01-02 00:07:12": 1,
    "2020-01-02 00:07:13": 2,
    "2020-01-03 00:00:00": 2,
    "2020-01-03 12:00:00": 3,
    "2021-01-01 00:00:00": 3,
    "2019-01-01 00:00:00": 0,
}


def auto_interval() -> object:
    return create(
        "AUTO_INTERVAL",
        {"datetime-lower": "2020-01-01 00:00:00", "datetime-upper": "2020-01-03 12:00:00", "sharding-seconds": 86400},
    )


@pytest.mark.parametrize(("value", "shard"), sorted(AUTO_GOLDEN.items()))
def test_auto_interval_matches_shardingsphere(value: str, shard: int) -> None:
    alg = auto_interval()
    assert alg.result_count == 4
    assert alg.precise(P4, {"t": value}) == [f"t_{shard}"]
    assert alg.precise(P4, {"t": datetime.fromisoformat(value)}) == [f"t_{shard}"]


def test_auto_interval_range_and_errors() -> None:
    alg = auto_interval()
    assert alg.range(P4, {"t": ValueRange("2020-01-01 12:00:00", "2020-01-02 12:00:00")}) == ["t_1", "t_2"]
    assert alg.range(P4, {"t": ValueRange(upper="2020-01-01 00:00:00")}) == ["t_0"]
    assert alg.range(P4, {"t": ValueRange(lower="2020-01-03 00:00:00")}) == ["t_2", "t_3"]
    with pytest.raises(ConfigError) as info:
        create("AUTO_INTERVAL", {"datetime-lower": "2020-01-01 00:00:00", "datetime-upper": "2019-01-01 00:00:00",
                                 "sharding-seconds": 60})
    assert info.value.prop == "datetime-upper"
    with pytest.raises(ConfigError) as info:
        create("AUTO_INTERVAL", {"datetime-lower": "2020-01-01", "datetime-upper": "2020-02-01 00:00:00"})
    assert info.value.prop == "sharding-seconds"


# -- TIME_RANGE ---------------------------------------------------------------------------

QUARTERS = [
    {"start": "2024-01-01", "end": "2024-04-01", "target": "ds_q1_2024"},
    {"start": "2024-04-01", "end": "2024-07-01", "target": "ds_q2_2024"},
    ["2024-07-01", "2024-10-01", "ds_q3_2024"],
]
QDS = ["ds_q1_2024", "ds_q2_2024", "ds_q3_2024"]


def test_time_range_quarters() -> None:
    alg = create("TIME_RANGE", {"ranges": QUARTERS}, name="orders-by-quarter")
    assert alg.precise(QDS, {"order_time": "2024-03-31 23:59:59"}) == ["ds_q1_2024"]
    assert alg.precise(QDS, {"order_time": date(2024, 4, 1)}) == ["ds_q2_2024"]
    assert alg.precise(QDS, {"order_time": datetime(2024, 9, 30, 23, 59)}) == ["ds_q3_2024"]
    for outside in ("2023-12-31 23:59:59", "2024-10-01"):
        with pytest.raises(RoutingError, match="no configured time range"):
            alg.precise(QDS, {"order_time": outside})
    with pytest.raises(RoutingError, match="not among the available targets"):
        alg.precise(QDS[:1], {"order_time": "2024-05-01"})
    # "the last three months" from mid-May
    assert alg.range(QDS, {"t": ValueRange("2024-05-15", "2024-08-15")}) == QDS[1:]
    assert alg.range(QDS, {"t": ValueRange("2024-01-01", "2024-04-01", upper_closed=False)}) == QDS[:1]
    assert alg.range(QDS, {"t": ValueRange(lower="2024-06-30")}) == QDS[1:]
    alg.check_targets(QDS)
    with pytest.raises(ConfigError, match="ds_q3_2024"):
        alg.check_targets(QDS[:2])


def test_time_range_overlap_and_gap_are_refused() -> None:
    overlapping = [QUARTERS[0], {"start": "2024-03-31", "end": "2024-07-01", "target": "ds_q2_2024"}]
    with pytest.raises(ConfigError) as info:
        create("TIME_RANGE", {"ranges": overlapping}, name="q")
    msg = str(info.value)
    assert info.value.prop == "ranges" and "overlap" in msg and "ds_q1_2024" in msg and "ds_q2_2024" in msg
    gapped = [QUARTERS[0], {"start": "2024-04-02", "end": "2024-07-01", "target": "ds_q2_2024"}]
    with pytest.raises(ConfigError, match=r"gap \[2024-04-01 00:00:00, 2024-04-02 00:00:00\)"):
        create("TIME_RANGE", {"ranges": gapped})
    allowed = create("TIME_RANGE", {"ranges": gapped, "allow-gaps": "true"})
    with pytest.raises(RoutingError, match="no configured time range"):
        allowed.precise(QDS, {"t": "2024-04-01 12:00:00"})
    for bad in ([], [{"start": "2024-02-01", "end": "2024-01-01", "target": "x"}],
                [{"start": "2024-01-01", "end": "2024-02-01"}], [["2024-01-01", "2024-02-01", ""]], "2024"):
        with pytest.raises(ConfigError) as info:
            create("TIME_RANGE", {"ranges": bad})
        assert info.value.prop == "ranges"


def test_time_range_pattern_and_numpy_batch() -> None:
    alg = create(
        "TIME_RANGE",
        {"datetime-pattern": "yyyyMMdd", "ranges": [["20240101", "20240201", "t_jan"], ["20240201", "20240301", "t_feb"]]},
    )
    assert alg.precise(["t_jan", "t_feb"], {"d": "20240215"}) == ["t_feb"]
    days = np.array(["2024-01-31T23:59:59", "2024-02-01T00:00:00"], dtype="datetime64[s]")
    assert alg.batch(["t_jan", "t_feb"], {"d": days}).tolist() == [0, 1]
    ns = days.astype("datetime64[ns]")
    assert alg.batch(["t_feb", "t_jan"], {"d": ns}).tolist() == [1, 0]
