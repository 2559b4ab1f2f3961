"""Worker-id leases on a real MariaDB: lowest free id, 16 processes at once, a paused holder, clock back.

No timed assertions: waits poll for a state (a lease expiring by the
database's clock) and fail only after a generous hang guard.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest
from services import fresh_mariadb_databases, mariadb_rows

import ddm_core
from ddm_core import WorkerLease, idlease, ids, lease_worker_id
from ddm_core.errors import (
    ClockMovedBackwardsError,
    ConfigError,
    NoFreeWorkerIdError,
    WorkerLeaseError,
    WorkerLeaseLostError,
)
from ddm_core.execute import Executor
from ddm_core.idlease import LEASE_TABLE, Phase

HOLDER = Path(__file__).with_name("id_lease_holder.py")
HANG_GUARD_S = 120
T0 = 1_800_000_000_000  # ms, an injected "now"


class StepClock:
    """Milliseconds: ``start``, then one more per reading."""

    def __init__(self, start: int) -> None:
        self.now = start - 1

    def __call__(self) -> int:
        self.now += 1
        return self.now


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with fresh_mariadb_databases(1) as names:
        yield names[0]


@pytest.fixture()
def url(database: str) -> str:
    return f"mysql://root@127.0.0.1:3306/{database}"


@pytest.fixture()
def namespace() -> str:
    return f"ns_{uuid.uuid4().hex[:12]}"


_rows = mariadb_rows


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


# -- in one process ------------------------------------------------------------------------------------


def test_leases_are_exported_by_idlease_and_the_package_not_by_ids() -> None:
    """A lease needs the executor, which sits above the id generators' face: ``ids`` does not reach up for it."""
    assert ddm_core.lease_worker_id is idlease.lease_worker_id is lease_worker_id
    assert ddm_core.WorkerLease is idlease.WorkerLease is WorkerLease
    assert {"lease_worker_id", "WorkerLease"} <= set(ddm_core.__all__) & set(idlease.__all__)
    assert not hasattr(ids, "lease_worker_id") and not hasattr(ids, "WorkerLease")
    assert not {"lease_worker_id", "WorkerLease"} & set(ids.__all__)



def test_lowest_free_id_is_taken_and_released(url: str, namespace: str, database: str) -> None:
    a = lease_worker_id(url, namespace=namespace, heartbeat=False)
    b = lease_worker_id(url, namespace=namespace, heartbeat=False)
    assert (a.worker_id, b.worker_id) == (0, 1)
    assert isinstance(a, WorkerLease) and a.phase is Phase.HELD
    gen = a.snowflake()
    issued = [gen.next_id() for _ in range(5)]
    assert {gen.decode(i).worker_id for i in issued} == {0}
    newest = max(gen.decode(i).timestamp_ms for i in issued)
    a.release()
    assert a.phase is Phase.RELEASED
    assert _rows(database, f"SELECT state, last_ms FROM {LEASE_TABLE} WHERE namespace = %s AND worker_id = 0",
                 (namespace,)) == [("released", newest)]
    with pytest.raises(WorkerLeaseError, match="released"):
        gen.next_id()
    c = lease_worker_id(url, namespace=namespace, heartbeat=False)
    assert c.worker_id == 0, "the released id is the lowest free one again"
    assert c.previous_last_ms == newest
    later = c.snowflake().next_id()
    assert ids.Snowflake(0).decode(later).timestamp_ms > newest
    b.release()
    c.release()


def test_no_free_id_fails_start_up(url: str, namespace: str) -> None:
    held = [lease_worker_id(url, namespace=namespace, max_workers=2, heartbeat=False) for _ in range(2)]
    with pytest.raises(NoFreeWorkerIdError) as info:
        lease_worker_id(url, namespace=namespace, max_workers=2)
    assert namespace in str(info.value) and "0 to 1" in str(info.value)
    assert info.value.namespace == namespace
    for lease in held:
        lease.release()
    with lease_worker_id(url, namespace=namespace, max_workers=2, heartbeat=False) as again:
        assert again.worker_id == 0


def test_lease_through_an_executor(database: str, namespace: str) -> None:
    config = {"dataSources": {"ds_0": f"mysql://root@127.0.0.1:3306/{database}"}, "pool": {"maxSize": 2, "minIdle": 0}}
    with Executor(config, load_schema=False) as ex:
        with lease_worker_id(ex, namespace=namespace, heartbeat=False) as lease:
            gene = lease.gene_generator(8, worker_bits=4)
            oid = gene.next_id(12345)
            assert gene.decode(oid).worker_id == lease.worker_id == 0
            assert lease.renew() is True
        # The executor stays usable: the lease does not close what it did not open.
        assert ex.execute("SELECT 1").fetchall() == [(1,)]
        # Leased inside a transaction that rolls back, the lease still stands: it never joins the caller's.
        tx = ex.transaction()
        with tx:
            inside = lease_worker_id(ex, namespace=namespace, heartbeat=False)
            assert tx.data_sources == ()
            tx.rollback()
        assert inside.renew() is True
        assert _rows(database, f"SELECT worker_id, state FROM {LEASE_TABLE} WHERE namespace = %s",
                     (namespace,)) == [(0, "held")]
        inside.release()


def test_a_stolen_lease_fails_renewal_and_stops_the_generator(url: str, namespace: str, database: str) -> None:
    a = lease_worker_id(url, namespace=namespace, heartbeat=False)
    gen = a.snowflake()
    gen.next_id()
    # Behind its back, the lease expires by the database's clock and another process takes the id.
    _rows(database, f"UPDATE {LEASE_TABLE} SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE namespace = %s",
          (namespace,))
    b = lease_worker_id(url, namespace=namespace, heartbeat=False)
    assert b.worker_id == a.worker_id == 0
    assert a.renew() is False
    assert a.phase is Phase.LOST
    with pytest.raises(WorkerLeaseLostError) as info:
        gen.next_id()
    assert "worker id 0" in str(info.value) and namespace in str(info.value)
    assert a.renew() is False, "lost is final"
    a.release()  # a lost lease releases nothing: b's row is untouched
    assert _rows(database, f"SELECT state, holder FROM {LEASE_TABLE} WHERE namespace = %s", (namespace,)) == [
        ("held", b.holder)
    ]
    b.release()


def test_clock_back_across_a_restart_is_detected(url: str, namespace: str) -> None:
    first = lease_worker_id(url, namespace=namespace, heartbeat=False, clock=StepClock(T0))
    gen = first.snowflake()
    newest = max(gen.decode(gen.next_id()).timestamp_ms for _ in range(10))
    assert first.renew()  # a renewal stores the newest issued timestamp
    first.release()
    # The next process's clock is 50 ms behind that: refused, and the id is not left held.
    with pytest.raises(ClockMovedBackwardsError) as info:
        lease_worker_id(url, namespace=namespace, heartbeat=False, clock=StepClock(newest - 50))
    assert info.value.backward_ms == 50
    # 3 ms behind is within max_backward_ms (5): waited out, ids start after the newest.
    clock = StepClock(newest - 3)
    second = lease_worker_id(url, namespace=namespace, heartbeat=False, clock=clock)
    assert second.worker_id == 0 and second.previous_last_ms == newest
    stamp = second.snowflake().decode(second.snowflake().next_id()).timestamp_ms
    assert stamp > newest
    second.release()


def test_expired_holder_leaves_its_newest_timestamp(url: str, namespace: str, database: str) -> None:
    crashed = lease_worker_id(url, namespace=namespace, heartbeat=False, ttl=1, clock=StepClock(T0))
    gen = crashed.snowflake()
    newest = max(gen.decode(gen.next_id()).timestamp_ms for _ in range(3))
    assert crashed.renew()
    # The holder "dies" (never releases); its lease expires by the database's clock.
    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        try:
            heir = lease_worker_id(url, namespace=namespace, max_workers=1, heartbeat=False,
                                       clock=StepClock(newest + 1))
            break
        except NoFreeWorkerIdError:
            if time.monotonic() > deadline:
                pytest.fail("the dead holder's lease never expired")
            time.sleep(0.1)
    assert heir.worker_id == 0 and heir.previous_last_ms == newest
    heir.release()


def test_argument_checks(url: str) -> None:
    for kwargs in ({"namespace": ""}, {"namespace": "x" * 65}, {"max_workers": 0}, {"ttl": 0.5}, {"ttl": True},
                   {"max_backward_ms": -1}):
        with pytest.raises(ConfigError):
            lease_worker_id(url, **kwargs)
    config = {"dataSources": {"ds_0": "sqlite:///:memory:"}}
    with Executor(config, load_schema=False) as ex:
        with pytest.raises(WorkerLeaseError, match="MySQL or MariaDB"):
            lease_worker_id(ex)


# -- processes -------------------------------------------------------------------------------------------


def test_16_processes_starting_at_once_get_16_distinct_ids(url: str, namespace: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    env = _env() | {"GO_FILE": str(go)}
    procs = [
        subprocess.Popen([sys.executable, str(HOLDER), url, namespace, "hold", "30"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=env, text=True)
        for _ in range(16)
    ]
    try:
        go.touch()  # all of them lease now
        got = leased_ids(procs)
        assert sorted(got) == list(range(16)), got
        with pytest.raises(NoFreeWorkerIdError):
            lease_worker_id(url, namespace=namespace, max_workers=16)
    finally:
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()  # each releases its lease and exits
        codes = [proc.wait(HANG_GUARD_S) for proc in procs]
    assert codes == [0] * 16
    with lease_worker_id(url, namespace=namespace, max_workers=16, heartbeat=False) as lease:
        assert lease.worker_id == 0, "every holder released on exit"


def leased_ids(procs: list[subprocess.Popen[str]]) -> list[int]:
    """The worker id each holder process (tests/id_lease_holder.py) printed first, in order."""
    got = []
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("ID "), f"holder failed: {line!r}"
        got.append(int(line.split()[1]))
    return got


def assert_a_paused_holder_yields(proc: subprocess.Popen[str], take: Callable[[], WorkerLease],
                                  worker: int | None = None) -> None:  # fmt: skip
    """``proc`` (tests/id_lease_holder.py ``issue``: its ``ID`` line, ``worker`` if given) is paused until ``take()``
    gets its id, then resumed: it must end with ``LOST``, having issued nothing after the takeover and nothing the
    heir issues. Shared by the table and the etcd lease stores (tests/test_id_lease_etcd.py).
    """
    assert proc.stdout is not None
    try:
        first = proc.stdout.readline()
        assert first.startswith("ID ") and (worker is None or first == f"ID {worker}\n"), first
        worker = int(first.split()[1])
        for _ in range(20):  # it issues
            assert proc.stdout.readline().startswith("N ")
        proc.send_signal(signal.SIGSTOP)  # paused: no ids, no heartbeat
        deadline = time.monotonic() + HANG_GUARD_S
        while True:
            try:
                heir = take()
                break
            except NoFreeWorkerIdError:
                if time.monotonic() > deadline:
                    pytest.fail("the paused holder's lease never expired")
                time.sleep(0.1)
        taken_at = time.time_ns() // 1_000_000
        assert heir.worker_id == worker
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
    decode = ids.Snowflake(worker).decode
    # Whatever it printed after the pause was issued before its lease ended: nothing after the takeover.
    assert all(decode(i).timestamp_ms < taken_at for i in issued)
    assert not set(issued) & set(heir_ids)
    heir.release()


def test_a_paused_holder_loses_its_lease_and_stops_issuing(url: str, namespace: str) -> None:
    proc = subprocess.Popen([sys.executable, str(HOLDER), url, namespace, "issue", "2"],
                            stdout=subprocess.PIPE, env=_env(), text=True)
    assert_a_paused_holder_yields(proc, lambda: lease_worker_id(url, namespace=namespace, max_workers=1, heartbeat=False))
