"""XA under real crashes: a coordinator process SIGKILLed at each commit step, a participant server killed mid-commit.

Everything runs against private ``mariadbd`` processes (tests/test_execute_support.py
``PrivateMariaDB``) so that ``information_schema.innodb_trx`` can be required to be
*empty* afterwards. The coordinator is a real child process running the bank's
transfers (tests/test_xa_support.py); it appends ``INTENT <id>`` before and ``DONE
<id>`` after each commit to a file (fsynced): the independent record the ledger is
counted against. It stops itself at the chosen step of its last transfer and says so;
the test then SIGKILLs it, runs recovery and checks that every transfer is all
committed or all rolled back, no money was made or lost, no ledger row is unknown or
missing, and nothing is left prepared or open on any server.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.errors import XaError, XaInDoubtError
from ddm_core.execute import Executor
from ddm_core.xa import GlobalState, recover
from ddm_core.xa.xid import ours
from services import fresh_mariadb_databases, mariadb_connect
from test_execute_support import PrivateMariaDB, assert_no_leaks, running_mariadb
from runners import RUNNERS, BlockingAsyncExecutor
from test_xa_support import (
    assert_nothing_left, bank_config, check_bank, create_bank, detached_trx_left, ledger, log_apart, prepared_xids,
    transfer, xa_host, xa_runtime,
)

TESTS = Path(__file__).resolve().parent
BEFORE = 3  # transfers that complete before the one the coordinator dies in

CHILD = r'''
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from ddm_core import load_config
from ddm_core.execute import Executor
from runners import BlockingAsyncExecutor
from test_xa_support import transfer, xa_runtime

config, step, where, before, intents = json.loads(sys.argv[2]), sys.argv[3], sys.argv[4] or None, int(sys.argv[5]), sys.argv[6]
make = Executor if sys.argv[7] == "threads" else BlockingAsyncExecutor  # the asyncio coordinator, driven here
ex = make(load_config(config), load_schema=False, timeout=10.0)
rt = xa_runtime(ex)

def record(kind, tid):
    with open(intents, "a") as f:
        f.write(f"{kind} {tid}\n")
        f.flush()
        os.fsync(f.fileno())

current = {}
def stop_here(s, ds):
    if s == step and (where is None or ds == where):
        print("AT", current["gtrid"], flush=True)
        time.sleep(600)  # the test SIGKILLs us here

for i in range(before + 1):
    tid = 100 + i
    if i == before:
        rt.step_hook = stop_here
    record("INTENT", tid)
    tx = ex.transaction(mode="xa")
    current["gtrid"] = tx.gtrid
    source = 2 * (tid % 5)
    transfer(tx, tid, source, source + 1, 1 + tid % 7)
    tx.commit()
    record("DONE", tid)
print("NO STOP", flush=True)
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateMariaDB]:
    with running_mariadb(tmp_path_factory.mktemp("xa_mariadbd")) as s:
        yield s


def _private_bank(server: PrivateMariaDB, log_place: str = "participant") -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    conn = server.raw()
    with conn.cursor() as cur:
        for i in ("0", "1", "log"):
            cur.execute(f"CREATE DATABASE xa_{tag}_{i}")
    conn.close()
    config = bank_config({f"ds_{i}": f"mysql://127.0.0.1:{server.port}/xa_{tag}_{i}" for i in range(2)})
    if log_place == "apart":
        log_apart(config, f"mysql://127.0.0.1:{server.port}/xa_{tag}_log")
    create_bank(config)
    return config


def _run_child(config: dict[str, Any], step: str, where: str | None, intents: Path, runner: str) -> str:
    """Start the coordinator on ``runner``, wait until it stops at ``step``, SIGKILL it; its gtrid there."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent / "src"), str(TESTS)]))
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(TESTS), json.dumps(config), step, where or "", str(BEFORE), str(intents),
         runner],
        stdout=subprocess.PIPE, env=env,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        line = proc.stdout.readline().decode() if ready else ""
        assert line.startswith("AT "), f"the coordinator did not stop at {step}: {line!r} (exit {proc.poll()})"
        return line.split()[1]
    finally:
        proc.send_signal(signal.SIGKILL)  # a real crash: no rollback, no socket shutdown by Python
        proc.wait(timeout=30)


P, A = "participant", "apart"


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize(
    ("log_place", "step", "where", "prepared", "decided"),
    [
        # The log on ds_0, a participant: its branch is the last resource (never prepared, holds the row).
        (P, "logged", None, set(), False),  # every other branch ended, the decision row uncommitted in ds_0's branch
        (P, "prepared", "ds_1", {"ds_1"}, False),  # ds_1 prepared, before ds_0's one-phase commit: no decision
        (P, "committed", "ds_0", {"ds_1"}, True),  # right after ds_0's one-phase commit: that is the decision
        (P, "finished", None, set(), True),  # the COMMIT round answered, COMMITTED not written (deferred)
        # The log on a data source of its own: every branch prepares, the PREPARING row beside the PREPAREs.
        (A, "prepared", "ds_0", {"ds_0", "ds_1"}, False),  # the PREPARE round answered (and the row), no decision
        (A, "decided", None, {"ds_0", "ds_1"}, True),  # after the COMMIT decision (a log write)
        (A, "finished", None, set(), True),  # the COMMIT round answered, COMMITTED not written (deferred)
    ],  # a crash in the middle of a round (some branches prepared / committed): tests/test_xa_concurrent_crash.py
)
def test_coordinator_killed_at_each_step(server: PrivateMariaDB, tmp_path: Path, log_place: str, step: str,
                                         where: str | None, prepared: set[str], decided: bool, runner: str) -> None:
    config = _private_bank(server, log_place)
    intents = tmp_path / "intents.log"
    gtrid = _run_child(config, step, where, intents, runner)
    crashed = 100 + BEFORE
    with Executor(load_config(config), load_schema=False) as ex:
        raw = server.raw()
        try:
            left = {x.bqual.decode() for x in ours(prepared_xids(raw), xa_runtime(ex).log.namespace)}
        finally:
            raw.close()
        assert left == prepared, "prepared branches must outlive their coordinator's death"
        first = recover(ex)  # the default abandon age (60 s): undecided ones are young, kept
        if decided:  # committed, and the row marked COMMITTED (its mark was never written)
            assert sorted(first.committed) == sorted(f"{gtrid}/{ds}" for ds in prepared)
            assert gtrid in first.finished
        else:
            assert first.committed == [] and first.rolled_back == []
            assert sorted(first.kept) == sorted(f"{gtrid}/{ds}" for ds in prepared)
            assert crashed not in ledger(ex)  # prepared rows are not visible
            second = recover(ex, abandon_after_ms=0)  # now abandoned: rolled back (a tombstone when there is no row)
            assert sorted(second.rolled_back) == sorted(f"{gtrid}/{ds}" for ds in prepared)
            assert second.finished == ([gtrid] if prepared else [])
        row = xa_runtime(ex).log.read([gtrid]).get(gtrid)  # none: the decision row rolled back with its branch
        assert (row.state if row else None) is (GlobalState.COMMITTED if decided else
                                                GlobalState.ROLLED_BACK if prepared else None)
        rows = check_bank(ex, intents)
        assert set(rows) == set(range(100, crashed)) | ({crashed} if decided else set())
        assert recover(ex, abandon_after_ms=0).summary().startswith("0 branch(es) committed, 0 rolled back, 0 kept")
        assert xa_runtime(ex).log.unfinished() == []  # the earlier transfers' deferred COMMITTED marks too
        assert_nothing_left(server, ex)
        assert_no_leaks(ex)


# -- a participant server killed mid-commit ----------------------------------------------------------


@pytest.fixture(scope="module", params=["skip-log-bin", "log-bin"])
def participant(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateMariaDB]:
    """ds_1's server; with the binary log on, MariaDB coordinates prepared XA through it (MDEV-742)."""
    args = () if request.param == "skip-log-bin" else ("--log-bin=mysql-bin", "--server-id=1", "--binlog-format=ROW")
    with running_mariadb(tmp_path_factory.mktemp(f"xa_participant_{request.param}"), args) as s:
        yield s


@contextmanager
def _split_bank(participant: PrivateMariaDB, private: str) -> Iterator[dict[str, Any]]:
    """The bank with data source ``private`` on the private participant server, the other on the machine's
    MariaDB; the log on ds_0."""
    if participant.proc is None:
        participant.start()
    db = participant.create_database("xa_")
    with fresh_mariadb_databases(1) as (main_db,):
        here = {private: f"mysql://127.0.0.1:{participant.port}/{db}"}
        config = bank_config({ds: here.get(ds, f"mysql://127.0.0.1:3306/{main_db}") for ds in ("ds_0", "ds_1")})
        create_bank(config)
        yield config


def _nothing_left_on_both(participant: PrivateMariaDB, ex: Any) -> None:
    """Nothing prepared or open on the participant server nor the machine's, nothing borrowed."""
    assert_nothing_left(participant, ex)
    main = mariadb_connect()
    try:
        assert ours(prepared_xids(main), xa_runtime(ex).log.namespace) == []
        assert detached_trx_left(main) == []
    finally:
        main.close()
    assert_no_leaks(ex)


@pytest.fixture()
def split_bank(participant: PrivateMariaDB) -> Iterator[dict[str, Any]]:
    """ds_0 (and the log) on the machine's MariaDB, ds_1 on the private participant server."""
    with _split_bank(participant, "ds_1") as config:
        yield config


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("kill_after", ["decided", "logged"])  # just before the COMMIT / the PREPARE round
def test_participant_server_killed_mid_commit(participant: PrivateMariaDB, split_bank: dict[str, Any],
                                              kill_after: str, runner: str) -> None:
    make = Executor if runner == "threads" else BlockingAsyncExecutor
    with make(load_config(split_bank), load_schema=False) as ex:
        tx = ex.transaction(mode="xa")
        transfer(tx, 1, 0, 1, 25)

        def kill_participant(step: str, ds: str | None) -> None:
            if step == kill_after:
                participant.kill()  # SIGKILL: ds_1 goes away before the round that runs on both

        xa_runtime(ex).step_hook = kill_participant
        if kill_after == "decided":
            with pytest.raises(XaInDoubtError) as info:
                tx.commit()
            assert info.value.committed is True and info.value.pending == ("ds_1",)
        else:
            with pytest.raises(XaError, match="XA (END|PREPARE) failed on data source 'ds_1'"):
                tx.commit()
        xa_runtime(ex).step_hook = None
        participant.start()
        raw = participant.raw()
        try:
            survived = {x.gtrid for x in ours(prepared_xids(raw), xa_runtime(ex).log.namespace)}
        finally:
            raw.close()
        # A branch prepared before the crash survives the restart; one that never prepared is gone.
        assert survived == ({tx.gtrid} if kill_after == "decided" else set())
        report = recover(xa_host(ex))
        if kill_after == "decided":
            assert report.committed == [f"{tx.gtrid}/ds_1"] and report.finished == [tx.gtrid]
            assert set(check_bank(ex)) == {1}
        else:
            assert report.committed == [] and ledger(ex) == {}
            check_bank(ex)
        row = xa_runtime(ex).log.read([tx.gtrid]).get(tx.gtrid)  # "logged": ds_0's decision row rolled back with it
        assert (row.state if row else None) is (GlobalState.COMMITTED if kill_after == "decided" else None)
        _nothing_left_on_both(participant, ex)


@pytest.fixture()
def log_on_killed(participant: PrivateMariaDB) -> Iterator[dict[str, Any]]:
    """ds_0 and the log on the private server (ds_0's branch is the last resource), ds_1 on the machine's MariaDB."""
    with _split_bank(participant, "ds_0") as config:
        yield config


@pytest.mark.parametrize("runner", RUNNERS)
def test_last_resource_server_killed_before_its_one_phase_commit(participant: PrivateMariaDB,
                                                                 log_on_killed: dict[str, Any], runner: str) -> None:
    """The server of the last resource (the log's data source) dies after ds_1 prepared, before the one-phase
    commit that would be the decision: the commit's outcome is unknown and the log cannot be read, so ds_1 stays
    prepared (``committed=None``); after the restart ds_0's unprepared branch is gone with its row, and
    recovery's tombstone rolls ds_1 back."""
    make = Executor if runner == "threads" else BlockingAsyncExecutor
    with make(load_config(log_on_killed), load_schema=False) as ex:
        tx = ex.transaction(mode="xa")
        transfer(tx, 1, 0, 1, 25)

        def kill_log_server(step: str, ds: str | None) -> None:
            if step == "prepared":
                participant.kill()

        xa_runtime(ex).step_hook = kill_log_server
        with pytest.raises(XaInDoubtError) as info:
            tx.commit()
        assert info.value.committed is None and tx.state == "in doubt"
        xa_runtime(ex).step_hook = None
        participant.start()
        kept = recover(xa_host(ex))  # young, no row: kept
        assert kept.kept == [f"{tx.gtrid}/ds_1"] and kept.rolled_back == []
        report = recover(xa_host(ex), abandon_after_ms=0)
        assert report.rolled_back == [f"{tx.gtrid}/ds_1"] and report.finished == [tx.gtrid]
        assert xa_runtime(ex).log.read([tx.gtrid])[tx.gtrid].state is GlobalState.ROLLED_BACK  # the tombstone
        assert ledger(ex) == {}
        check_bank(ex)
        _nothing_left_on_both(participant, ex)
