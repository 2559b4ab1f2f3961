"""Lag demotion, stepwise recovery, failed checks and circuit breakers on real replication.

Recovery timing runs on an injected clock; lag is real (MASTER_DELAY, STOP SLAVE
SQL_THREAD) and so are failures (SIGKILL of a replica).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from ddm_core import load_config
from ddm_core.algorithms.registry import StrategyRegistry
from ddm_core.errors import ConfigError, DataSourceUnavailableError, ShardKeyNotFoundError
from ddm_core.execute import Executor
from ddm_core.metadata.model import ReadWriteSettings
from ddm_core.readwrite.health import TRANSITIONS, Check, Observation, ReplicaHealth, ReplicaState
from replication import Replication, replication  # noqa: F401 - fixture
from test_readwrite import FakeClock, rw_config  # noqa: F401 - fixture


def _replica(ex: Executor, index: int) -> Any:
    status = ex.replica_status()
    ds = sorted(status)[0]
    return status[ds].replicas[index]


def _spec(rw_config: dict[str, Any], **read_write: Any) -> dict[str, Any]:  # noqa: F811
    return {**rw_config, "readWrite": read_write}


# -- the state machine alone -------------------------------------------------------------------


def test_every_state_has_a_next_state_for_every_observation() -> None:
    assert {(s, o) for s in ReplicaState for o in Observation} == set(TRANSITIONS)
    assert all(TRANSITIONS[(s, Observation.FAILED)] is ReplicaState.UNREACHABLE for s in ReplicaState)
    # only a caught-up replica leaves an out state
    for s in ReplicaState:
        for o in Observation:
            if s.out and o is not Observation.CAUGHT_UP:
                assert TRANSITIONS[(s, o)].out


def test_recovery_steps_follow_the_clock() -> None:
    settings = ReadWriteSettings()
    h = ReplicaHealth("ds", "r")
    h.observe(Check(Observation.LAGGING, lag_ms=5000), 0.0, settings)
    assert (h.state, h.percent) == (ReplicaState.LAGGING, 0)
    h.observe(Check(Observation.CAUGHT_UP, lag_ms=10), 100.0, settings)
    assert (h.state, h.percent) == (ReplicaState.RECOVERING, 10)
    h.observe(Check(Observation.CAUGHT_UP, lag_ms=10), 129.9, settings)
    assert h.percent == 10
    h.observe(Check(Observation.CAUGHT_UP, lag_ms=10), 130.0, settings)
    assert h.percent == 20
    h.observe(Check(Observation.CAUGHT_UP, lag_ms=10), 100.0 + 9 * 30, settings)
    assert (h.state, h.percent) == (ReplicaState.HEALTHY, 100)


# -- on real replicas -----------------------------------------------------------------------------


def test_lag_demotes_and_recovery_is_stepwise(rw_config: Any, replication: Replication) -> None:  # noqa: F811
    clock = FakeClock()
    with Executor(load_config(_spec(rw_config, maxLagMs=500)), load_schema=False, replica_monitor=False,
                  clock=clock) as ex:  # fmt: skip
        ex.replica_status(refresh=True)  # finds real replicas: heartbeats from the next round on
        ex.replica_status(refresh=True)
        replication.wait_replicated()
        ex.replica_status(refresh=True)
        assert _replica(ex, 0).state == "healthy" and _replica(ex, 0).lag_ms < 500
        replication.delay(0, 2)
        try:
            time.sleep(0.6)  # the last heartbeat replica 0 shows is at least this old from now on
            ex.replica_status(refresh=True)
            r0, r1 = _replica(ex, 0), _replica(ex, 1)
            assert r0.state == "lagging" and r0.weight_now == 0 and r0.lag_ms >= 500
            assert r1.state == "healthy" and r1.weight_now == 1
        finally:
            replication.delay(0, 0)
            replication.wait_replicated()
        ex.replica_status(refresh=True)
        assert (_replica(ex, 0).state, _replica(ex, 0).percent) == ("recovering", 10)
        for step in range(2, 11):
            clock.now += 29.9
            ex.replica_status(refresh=True)
            assert _replica(ex, 0).percent == (step - 1) * 10
            clock.now += 0.1
            ex.replica_status(refresh=True)
            assert _replica(ex, 0).percent == step * 10
        assert _replica(ex, 0).state == "healthy" and _replica(ex, 0).weight_now == 1


def test_stopped_replication_takes_a_replica_out(rw_config: Any, replication: Replication) -> None:  # noqa: F811
    with Executor(load_config(rw_config), load_schema=False, replica_monitor=False, read_your_writes="off") as ex:
        replication.stop_sql(0)
        try:
            ex.replica_status(refresh=True)
            r0 = _replica(ex, 0)
            assert r0.state == "stopped" and r0.weight_now == 0 and "SQL No" in (r0.last_error or "")
            ds = sorted(ex.replica_status())[0]
            user = next(u for u in range(100) if ex.router.route("SELECT 1 FROM t_order WHERE user_id = %s",
                                                                 (u,)).units[0].data_source == ds)  # fmt: skip
            for _ in range(20):  # only replica 1 (server id 3) takes reads now
                with ex.execute("SELECT @@server_id FROM t_order WHERE user_id = %s LIMIT 1", (user,)) as r:
                    assert r.fetchall() in ([], [(3,)])
        finally:
            replication.start_sql(0)
            replication.wait_replicated()


def test_failed_checks_never_bring_a_replica_back_and_the_breaker_opens(
    rw_config: Any, replication: Replication, caplog: pytest.LogCaptureFixture  # noqa: F811
) -> None:
    clock = FakeClock()
    spec = _spec(rw_config, breakerFailures=2, breakerResetMs=2000, recoveryIntervalMs=0)
    with Executor(load_config(spec), load_schema=False, replica_monitor=False, clock=clock) as ex:
        ex.replica_status(refresh=True)
        replication.kill(0)
        try:
            with caplog.at_level(logging.WARNING, logger="ddm_core.readwrite"):
                for _ in range(3):  # the first only loses its pooled connection; two connects fail after it
                    ex.replica_status(refresh=True)
                    assert _replica(ex, 0).state == "unreachable" and _replica(ex, 0).weight_now == 0
            r0 = _replica(ex, 0)
            assert r0.breaker == "open"
            # within the cool-down an open breaker fails fast, naming the endpoint, with the connect error chained
            pool = next(p for p in ex._pools.pools() if p.endpoint.name == r0.endpoint)
            with pytest.raises(DataSourceUnavailableError, match=r"endpoint '.*replica\[0\]'.*circuit breaker is open") as info:
                pool.borrow()
            assert "Connection refused" in str(info.value.__cause__)
            opened = [r for r in caplog.records if "circuit breaker" in r.getMessage() and "opened" in r.getMessage()]
            assert opened and opened[0].levelno == logging.ERROR and opened[0].exc_info is not None
        finally:
            replication.restart(0)
        clock.now += 0.25  # the first step is over (a jittered wait is never longer): the next check is the probe
        ex.replica_status(refresh=True)
        r0 = _replica(ex, 0)
        assert r0.breaker == "closed" and r0.state == "healthy" and r0.weight_now == 1


# -- graded errors -----------------------------------------------------------------------------------


def test_errors_are_graded() -> None:
    assert ShardKeyNotFoundError("no shard key").log_level == logging.ERROR  # a caller's bug
    with pytest.raises(ConfigError) as info:
        StrategyRegistry({}).resolve("nope")
    assert info.value.log_level == logging.WARNING  # an unknown strategy: a configuration problem
    assert DataSourceUnavailableError("gone").log_level == logging.ERROR
    from ddm_core.errors import CutoverFencedError, MigrationFencedError

    # a write paused by a migration's or a cut-over's transition: retried by the caller, logged at INFO
    assert MigrationFencedError("paused").log_level == CutoverFencedError("paused").log_level == logging.INFO


def test_the_executor_logs_a_refused_statement_at_its_grade(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    from ddm_core import load_config
    from ddm_core.errors import RoutingError
    from ddm_core.execute import Executor

    config = load_config({
        "dataSources": {f"ds_{i}": f"sqlite:///{tmp_path / f'ds_{i}.db'}" for i in range(2)},
        "tables": [{"logicTable": "t_order", "shardKey": "user_id", "algorithm": "mod", "shardCount": 2,
                    "databases": ["ds_0", "ds_1"]}],
    })
    with Executor(config, load_schema=False) as ex, caplog.at_level(logging.DEBUG, logger="ddm_core.execute"):
        with pytest.raises(RoutingError) as info:
            ex.execute("UPDATE t_order SET amount = 1")  # no shard key: every shard, refused by default
    refused = [r for r in caplog.records if r.getMessage().startswith("statement refused")]
    assert [r.levelno for r in refused] == [info.value.log_level] == [logging.ERROR]
    assert "t_order" in refused[0].getMessage()
