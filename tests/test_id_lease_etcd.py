"""Worker-id leases on a private etcd (tests/etcd_support.py): distinct ids across processes, a SIGKILLed
holder's id freed by etcd once its lease's TTL passes, a paused holder that stops issuing, and a holder
that stops issuing when etcd is gone.

No timed assertions: waits poll for a state (etcd deleting an expired lease's key) and fail only after a
generous hang guard. Who holds what is read from etcd directly (the fixture's own calls).
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddm_core import ids
from ddm_core.errors import NoFreeWorkerIdError, WorkerLeaseLostError
from ddm_core.idlease import Phase
from ddm_core.idlease.etcd import DEFAULT_PREFIX, lease_worker_id_etcd
from etcd_support import PrivateEtcd, etcd_call, private_etcd  # noqa: F401 - the fixture
from services import require_module

require_module("requests", "worker-id leases on etcd (the 'etcd' extra)")
HOLDER = Path(__file__).with_name("id_lease_holder.py")
HANG_GUARD_S = 60


def _held(etcd: PrivateEtcd, namespace: str) -> dict[int, str]:
    """worker id -> holder token, as etcd has them."""
    prefix = f"{DEFAULT_PREFIX}/{namespace}/held/"
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    answer = etcd_call(etcd.url, "/v3/kv/range", {"key": base64.b64encode(prefix.encode()).decode(),
                                                 "range_end": base64.b64encode(end.encode()).decode()})  # fmt: skip
    return {int(base64.b64decode(kv["key"]).decode().rsplit("/", 1)[1]): base64.b64decode(kv["value"]).decode()
            for kv in answer.get("kvs") or []}  # fmt: skip


def _holder(etcd: PrivateEtcd, namespace: str, mode: str, ttl: str, env: dict[str, str] | None = None,
            ) -> subprocess.Popen[str]:  # fmt: skip
    return subprocess.Popen([sys.executable, str(HOLDER), etcd.url, namespace, mode, ttl], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip


def test_processes_starting_at_once_hold_distinct_ids(private_etcd: PrivateEtcd, tmp_path: Path) -> None:  # noqa: F811
    go = tmp_path / "go"
    procs = [_holder(private_etcd, "orders", "hold", "30", os.environ | {"GO_FILE": str(go)}) for _ in range(6)]
    try:
        go.touch()
        got = []
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("ID "), f"holder failed: {line!r}"
            got.append(int(line.split()[1]))
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
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline() == "ID 0\n"
        for _ in range(20):
            assert proc.stdout.readline().startswith("N ")
        proc.send_signal(signal.SIGSTOP)  # no ids, no keep-alive
        deadline = time.monotonic() + HANG_GUARD_S
        while True:
            try:
                heir = lease_worker_id_etcd(private_etcd.url, namespace="pause", max_workers=1, heartbeat=False)
                break
            except NoFreeWorkerIdError:
                assert time.monotonic() < deadline, "the paused holder's lease never expired"
                time.sleep(0.1)
        taken_at = time.time_ns() // 1_000_000
        heir_ids = [heir.snowflake().next_id() for _ in range(3)]
        proc.send_signal(signal.SIGCONT)
        rest = proc.stdout.read()
        assert proc.wait(HANG_GUARD_S) == 3, rest[-500:]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()
    lines = rest.splitlines()
    assert lines[-1].startswith("LOST ") and "was lost" in lines[-1], lines[-3:]
    issued = [int(line.split()[1]) for line in lines if line.startswith("N ")]
    decode = ids.Snowflake(0).decode
    assert all(decode(i).timestamp_ms < taken_at for i in issued)  # nothing issued after the takeover
    assert not set(issued) & set(heir_ids)
    heir.release()


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
