"""Read/write splitting settings in both configuration formats: defaults, ranges, round trips."""

from __future__ import annotations

from typing import Any

import pytest

from ddm_core import load_config
from ddm_core.errors import ConfigError, ConfigValidationError
from ddm_core.metadata.dump import to_native
from ddm_core.metadata.model import ReadWriteSettings
from ddm_core.readwrite import read_your_writes

NATIVE: dict[str, Any] = {
    "dataSources": {"ds_0": {"url": "mysql://10.0.0.1/db", "replicas": ["mysql://10.0.0.2/db"]}},
    "defaultDataSource": "ds_0",
}

SS = """
dataSources:
  write_ds: {jdbcUrl: "jdbc:mysql://10.0.0.1:3306/demo", username: root}
  read_ds_0: {jdbcUrl: "jdbc:mysql://10.0.0.2:3306/demo", username: root}
rules:
- !READWRITE_SPLITTING
  dataSourceGroups:
    readwrite_ds: {writeDataSourceName: write_ds, readDataSourceNames: [read_ds_0]}
  props:
    read-your-writes: GTID
    max-lag-ms: 5000
    primary-read-cap-percent: 50
"""


def test_the_defaults_are_the_stated_figures() -> None:
    rw = load_config(NATIVE).data_sources["ds_0"].read_write
    assert rw == ReadWriteSettings()
    assert (rw.read_your_writes, rw.write_window_ms, rw.primary_read_cap_percent, rw.max_lag_ms,
            rw.lag_check_interval_ms, rw.recovery_step_percent, rw.recovery_interval_ms) == (
        "window", 1000, 30, 3000, 1000, 10, 30_000)  # fmt: skip


def test_native_top_level_defaults_and_per_data_source_overrides_round_trip() -> None:
    spec = {**NATIVE, "readWrite": {"breakerFailures": 3, "writeWindowMs": 500},
            "dataSources": {"ds_0": {**NATIVE["dataSources"]["ds_0"], "readWrite": {"readYourWrites": "gtid"}}}}  # fmt: skip
    config = load_config(spec)
    rw = config.data_sources["ds_0"].read_write
    assert (rw.read_your_writes, rw.breaker_failures, rw.write_window_ms, rw.max_lag_ms) == ("gtid", 3, 500, 3000)
    assert load_config(to_native(config)).data_sources == config.data_sources


def test_shardingsphere_readwrite_props() -> None:
    rw = load_config(SS).data_sources["readwrite_ds"].read_write
    assert (rw.read_your_writes, rw.max_lag_ms, rw.primary_read_cap_percent) == ("gtid", 5000, 50)


@pytest.mark.parametrize(("fields", "path", "message"), [
    ({"maxLagMs": 5}, "readWrite.maxLagMs", "from 100 to 86400000"),
    ({"primaryReadCapPercent": 101}, "readWrite.primaryReadCapPercent", "from 0 to 100"),
    ({"readYourWrites": "causal"}, "readWrite.readYourWrites", "window, gtid or off"),
    ({"maxLag": 5000}, "readWrite.maxLag", "did you mean 'maxLagMs'"),
    ({"breakerProbeMs": 5}, "readWrite.breakerProbeMs", "from 10 to 86400000"),
    ({"breakerProbeMs": 20_000}, "readWrite.breakerProbeMs",
     "(20000 ms) must not exceed breakerResetMs, the longest wait (10000 ms)"),
    ({"breakerProbeMs": 500, "breakerResetMs": 400}, "readWrite.breakerProbeMs", "must not exceed breakerResetMs"),
])  # fmt: skip
def test_bad_values_name_the_field(fields: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config({**NATIVE, "readWrite": fields})
    assert [p.path for p in info.value.problems] == [path] and message in str(info.value)


def test_a_bad_per_block_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="window, gtid or off"):
        with read_your_writes("causal"):
            pass


def test_breaker_waits_in_both_formats() -> None:
    spec = {**NATIVE, "readWrite": {"breakerProbeMs": 100, "breakerResetMs": 2000}}
    rw = load_config(spec).data_sources["ds_0"].read_write
    assert (rw.breaker_probe_ms, rw.breaker_reset_ms) == (100, 2000)
    assert load_config(to_native(load_config(spec))).data_sources["ds_0"].read_write == rw
    ss = SS + "    breaker-probe-ms: 50\n    breaker-reset-ms: 1000\n"
    rw = load_config(ss).data_sources["readwrite_ds"].read_write
    assert (rw.breaker_probe_ms, rw.breaker_reset_ms) == (50, 1000)
    with pytest.raises(ConfigValidationError) as info:
        load_config(SS + "    breaker-probe-ms: 2000\n    breaker-reset-ms: 1000\n")
    [problem] = info.value.problems
    assert problem.path.endswith("props.breaker-probe-ms") and "must not exceed breaker-reset-ms" in problem.message


def test_an_older_config_with_only_a_short_breaker_reset_still_loads() -> None:
    """breakerResetMs below the new default first wait (250 ms) was valid before breakerProbeMs existed."""
    rw = load_config({**NATIVE, "readWrite": {"breakerResetMs": 100}}).data_sources["ds_0"].read_write
    assert (rw.breaker_probe_ms, rw.breaker_reset_ms) == (250, 100)  # the breaker's first wait is then 100 ms
