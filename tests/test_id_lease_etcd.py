"""Worker-id leases on a private etcd (tests/etcd_support.py): distinct ids across processes, a SIGKILLed
holder's id freed by etcd once its lease's TTL passes, a paused holder that stops issuing, and a holder
that stops issuing when etcd is gone.

No timed assertions: waits poll for a state (etcd deleting an expired lease's key) and fail only after a
generous hang guard. Who holds what is read from etcd directly (the fixture's own calls).
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddm_core import ids
from ddm_core.errors import (
    ConfigError,
    ConfigValidationError,
    NoFreeWorkerIdError,
    WorkerIdError,
    WorkerLeaseLostError,
)
from ddm_core.execute import Executor
from ddm_core.idlease import Phase, lease_config_worker_ids
from ddm_core.idlease.etcd import DEFAULT_PREFIX, lease_worker_id_etcd
from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.load import parse_config
from ddm_core.metadata.sources.etcd import EtcdSource
from ddm_core.metadata.sources.etcd_client import EtcdClient
from etcd_support import PrivateEtcd, etcd_call, private_etcd  # noqa: F401 - the fixture
from services import require_module
from test_id_lease import assert_a_paused_holder_yields, leased_ids

require_module("requests", "worker-id leases on etcd (the 'etcd' extra)")
HOLDER = Path(__file__).with_name("id_lease_holder.py")
HANG_GUARD_S = 60


def _held_under(etcd: PrivateEtcd, prefix: str) -> dict[int, str]:
    """worker id -> holder token of the ``held/`` keys under ``prefix``, as etcd has them."""
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    answer = etcd_call(etcd.url, "/v3/kv/range", {"key": base64.b64encode(prefix.encode()).decode(),
                                                 "range_end": base64.b64encode(end.encode()).decode()})  # fmt: skip
    return {int(base64.b64decode(kv["key"]).decode().rsplit("/", 1)[1]): base64.b64decode(kv["value"]).decode()
            for kv in answer.get("kvs") or []}  # fmt: skip


def _held(etcd: PrivateEtcd, namespace: str) -> dict[int, str]:
    return _held_under(etcd, f"{DEFAULT_PREFIX}/{namespace}/held/")


def _holder(etcd: PrivateEtcd, namespace: str, mode: str, ttl: str, env: dict[str, str] | None = None,
            ) -> subprocess.Popen[str]:  # fmt: skip
    return subprocess.Popen([sys.executable, str(HOLDER), etcd.url, namespace, mode, ttl], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip


def test_processes_starting_at_once_hold_distinct_ids(private_etcd: PrivateEtcd, tmp_path: Path) -> None:  # noqa: F811
    go = tmp_path / "go"
    procs = [_holder(private_etcd, "orders", "hold", "30", os.environ | {"GO_FILE": str(go)}) for _ in range(6)]
    try:
        go.touch()
        got = leased_ids(procs)
        assert sorted(got) == list(range(6)), got
        held = _held(private_etcd, "orders")
        assert sorted(held) == list(range(6)) and len(set(held.values())) == 6  # one holder per id, in etcd too
        with pytest.raises(NoFreeWorkerIdError, match="every worker id of lease namespace 'orders'"):
            lease_worker_id_etcd(private_etcd.url, namespace="orders", max_workers=6)
    finally:
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()  # each releases its lease and exits
        codes = [proc.wait(HANG_GUARD_S) for proc in procs]
    assert codes == [0] * 6 and _held(private_etcd, "orders") == {}
    with lease_worker_id_etcd(private_etcd.url, namespace="orders", heartbeat=False) as lease:
        assert lease.worker_id == 0 and lease.previous_last_ms == 0  # "hold" issued no id


def test_a_killed_holders_id_is_freed_after_its_ttl(private_etcd: PrivateEtcd) -> None:  # noqa: F811
    proc = _holder(private_etcd, "kill", "issue", "2")
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first == "ID 0\n", first
    issued = []
    for _ in range(400):  # ~1.2 s of ids: at least one renewal stored last_ms
        line = proc.stdout.readline()
        assert line.startswith("N ")
        issued.append(int(line.split()[1]))
    proc.kill()
    proc.wait()
    # Right after the kill the id is still held (its lease has not expired): a newcomer gets id 1.
    with lease_worker_id_etcd(private_etcd.url, namespace="kill", heartbeat=False) as newcomer:
        assert newcomer.worker_id == 1 and 0 in _held(private_etcd, "kill")
    deadline = time.monotonic() + HANG_GUARD_S
    while 0 in _held(private_etcd, "kill"):
        assert time.monotonic() < deadline, "etcd never let the killed holder's lease expire"
        time.sleep(0.1)
    with lease_worker_id_etcd(private_etcd.url, namespace="kill", heartbeat=False) as heir:
        assert heir.worker_id == 0
        decode = ids.Snowflake(0).decode
        assert heir.previous_last_ms >= decode(issued[0]).timestamp_ms  # a renewal stored it
        first_of_heir = heir.snowflake().next_id()
        assert decode(first_of_heir).timestamp_ms > heir.previous_last_ms
        assert first_of_heir not in issued


def test_a_paused_holder_stops_issuing_before_its_id_is_taken(private_etcd: PrivateEtcd) -> None:  # noqa: F811
    proc = _holder(private_etcd, "pause", "issue", "2")
    assert_a_paused_holder_yields(proc, lambda: lease_worker_id_etcd(private_etcd.url, namespace="pause", max_workers=1,
                                                                   heartbeat=False), worker=0)  # fmt: skip


def test_a_holder_stops_issuing_when_etcd_is_gone(private_etcd: PrivateEtcd) -> None:  # noqa: F811
    lease = lease_worker_id_etcd(private_etcd.url, namespace="gone", ttl=2)
    gen = lease.snowflake()
    gen.next_id()
    private_etcd.kill()
    deadline = time.monotonic() + HANG_GUARD_S
    with pytest.raises(WorkerLeaseLostError, match="worker id 0 of namespace 'gone' was lost"):
        while time.monotonic() < deadline:
            gen.next_id()
            time.sleep(0.01)
    assert lease.phase is Phase.LOST
    lease.release()  # etcd unreachable: nothing to free, the lease expires there by itself


def test_a_configuration_saying_workerid_lease_issues_ids_on_its_etcd_lease(private_etcd: PrivateEtcd,  # noqa: F811
                                                                            tmp_path: Path) -> None:  # fmt: skip
    """``workerId: lease`` in a configuration on etcd: INSERTs get ids on the worker id the process leased
    under the configuration's prefix; none before the lease is taken, none after it is released."""
    text = (
        f"dataSources:\n  ds_0: sqlite:///{tmp_path / 'a.db'}\n  ds_1: sqlite:///{tmp_path / 'b.db'}\n"
        "tables:\n  - {logicTable: t_order, shardKey: user_id, databases: [ds_0, ds_1], shardCount: 2,\n"
        "     keyGenerator: {column: order_id, workerId: lease}}\n"
    )
    source = EtcdSource(EtcdClient(private_etcd.url), prefix="/app/config")
    source.publish(text)
    holder = ConfigHolder(source, check_env=False)
    assert holder.config.tables["t_order"].key_generation.generator.leased  # type: ignore[union-attr]
    executor = Executor(holder, load_schema=False, replica_monitor=False)
    # Another process holds worker id 0 of the configuration's snowflake family.
    other = lease_worker_id_etcd(private_etcd.url, namespace="snowflake", prefix="/app/config/worker-leases",
                                 heartbeat=False)  # fmt: skip
    try:
        executor.execute("CREATE TABLE t_order (order_id BIGINT PRIMARY KEY, user_id INT)").close()
        with pytest.raises(WorkerIdError, match="workerId: lease, and this process holds no leased worker id"):
            executor.execute("INSERT INTO t_order (user_id) VALUES (?)", (1,)).close()
        leases = lease_config_worker_ids(source, holder.config)
        assert leases.leases["SNOWFLAKE"].worker_id == 1 and other.worker_id == 0
        for user in range(10):
            executor.execute("INSERT INTO t_order (user_id) VALUES (?)", (user,)).close()
        with executor.execute("SELECT order_id FROM t_order") as result:
            issued = [row[0] for row in result.fetchall()]
        assert len(issued) == 10 and {ids.Snowflake(1).decode(i).worker_id for i in issued} == {1}
        held = _held_under(private_etcd, "/app/config/worker-leases/snowflake/held/")
        assert sorted(held) == [0, 1]
        leases.release()
        with pytest.raises(WorkerIdError, match="holds no leased worker id"):
            executor.execute("INSERT INTO t_order (user_id) VALUES (?)", (11,)).close()
        assert sorted(_held_under(private_etcd, "/app/config/worker-leases/snowflake/held/")) == [0]
    finally:
        other.release()
        executor.close()
        source.client.close()


def test_workerid_lease_needs_a_configuration_on_etcd(tmp_path: Path) -> None:
    text = (
        f"dataSources:\n  ds_0: sqlite:///{tmp_path / 'a.db'}\n  ds_1: sqlite:///{tmp_path / 'b.db'}\n"
        "tables:\n  - {logicTable: t_order, shardKey: user_id, databases: [ds_0, ds_1], shardCount: 2,\n"
        "     keyGenerator: {column: order_id, workerId: %s}}\n"
    )
    path = tmp_path / "ddm.yaml"
    path.write_text(text % "lease")
    holder = ConfigHolder(path, check_env=False)
    with pytest.raises(ConfigError, match="workerId: lease need a configuration on etcd"):
        lease_config_worker_ids(holder.source, holder.config)
    with pytest.raises(ConfigValidationError, match="worker-id: must be an integer from 0 to 1023, not 'leese'"):
        parse_config(text % "leese", origin="t", check_env=False)
