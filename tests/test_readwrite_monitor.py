"""The lag monitor on its own: it checks the replicas of the backends that report replication and hands
each finding to the callback it was given, through the breakers it was given (no splitter needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from ddm_core import load_config
from ddm_core.execute.pools import PoolRegistry
from ddm_core.metadata.model import DataSource, Endpoint
from ddm_core.readwrite.breaker import EndpointBreaker, EndpointBreakers
from ddm_core.readwrite.health import Check, Observation
from ddm_core.readwrite.monitor import LagMonitor
from services import fresh_mariadb_databases


@pytest.fixture()
def database() -> Iterator[str]:
    with fresh_mariadb_databases(1) as names:
        yield names[0]


def test_the_monitor_reports_to_its_callbacks(database: str, tmp_path: Path) -> None:
    server = f"mysql://root@127.0.0.1:3306/{database}"
    config = load_config({"dataSources": {
        "ds_0": {"url": server, "replicas": [server]},  # the primary itself, under a replica's name
        "ds_1": {"url": f"sqlite:///{tmp_path}/a.db", "replicas": [f"sqlite:///{tmp_path}/b.db"]},
    }})  # fmt: skip
    breakers = EndpointBreakers()
    asked: list[str] = []
    found: list[tuple[str, str, Observation, float | None]] = []

    def breaker_of(ds: DataSource, endpoint: Endpoint) -> EndpointBreaker:
        asked.append(endpoint.name)
        return breakers.of(ds, endpoint)

    def observed(ds: DataSource, replica: Endpoint, check: Check) -> None:
        found.append((ds.name, replica.name, check.observation, check.lag_ms))

    probes = PoolRegistry()
    monitor = LagMonitor(lambda: [ds for ds in config.data_sources.values() if ds.replicas], probes,
                         breaker_of=breaker_of, observed=observed)  # fmt: skip
    try:
        monitor.check_now()
        pools = probes.pools()
    finally:
        monitor.stop()
    # Same @@server_id as the primary: caught up by definition. SQLite reports no replication: not checked.
    assert found == [("ds_0", "ds_0.replica[0]", Observation.CAUGHT_UP, 0.0)]
    assert set(asked) == {"ds_0", "ds_0.replica[0]"}
    assert sorted(pool.endpoint.name for pool in pools) == ["ds_0", "ds_0.replica[0]"]
    assert all(pool.breaker is breakers.of(config.data_sources["ds_0"], pool.endpoint) for pool in pools)
