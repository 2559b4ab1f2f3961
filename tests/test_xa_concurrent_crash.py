"""XA's concurrent phases under a real crash: the coordinator SIGKILLed with some branches prepared (or committed)
and the others not, while writers move money between the same hot accounts.

``ds_0`` lives on the machine's MariaDB, ``ds_1`` on a private ``mariadbd`` the test freezes (SIGSTOP) just
before a round of one *subject* transfer: ``ds_0``'s statement of that round is answered, ``ds_1``'s waits in its
socket. Once that shows from outside, the coordinator process is SIGKILLed and ``ds_1`` thawed; whether ``ds_1``
still runs the statement that sat in its socket is the server's business. Two placements of the log
(docs/xa.md#commit):

* on a data source of its own (the machine's MariaDB): every branch prepares; frozen before the PREPARE round
  (``ds_0`` prepared, no decision: rolled back everywhere) or the COMMIT round (``ds_0`` committed after the
  logged decision: committed everywhere);
* on ``ds_1`` itself, the last resource: frozen before the PREPARE round (``ds_0`` prepared, ``ds_1``'s decision
  row uncommitted: rolled back) or before its one-phase commit, which carries the decision (it sits in the
  frozen socket: committed everywhere if the thawed server ran it, rolled back everywhere if not — recovery's
  tombstone finds out which).

Meanwhile writer threads of the same process run XA transfers between the same four hot accounts (both data
sources) and record each one before and after (``INTENT`` / ``DONE``, fsynced): the independent reference.
After recovery the bank must hold (tests/test_xa_support.py ``check_bank``): no money made or lost, no
transfer half applied, no ledger row of a transfer never intended, none missing of a transfer reported done,
and nothing left prepared on either server.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.execute import Executor
from ddm_core.xa import GlobalState, recover
from ddm_core.xa.xid import ours
from processes import freeze
from runners import RUNNERS
from services import fresh_mariadb_databases, mariadb_connect
from test_execute_support import PrivateMariaDB, assert_no_leaks, running_mariadb
from test_xa_support import (
    assert_nothing_left, bank_config, check_bank, create_bank, detached_trx_left, log_apart, prepared_xids, xa_runtime,
)

TESTS = Path(__file__).resolve().parent
SUBJECT = 1  # the subject transfer's id; writers use 1000 * (writer + 1) + n
WRITERS = 3

CHILD = r'''
import json, os, sys, threading
sys.path.insert(0, sys.argv[1])
from ddm_core import load_config
from ddm_core.execute import Executor
from runners import BlockingAsyncExecutor
from test_xa_support import transfer, xa_runtime

config, step, intents, runner, writers = json.loads(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
make = Executor if runner == "threads" else BlockingAsyncExecutor  # the asyncio coordinator, driven here
record_lock = threading.Lock()

def record(kind, tid):
    with record_lock, open(intents, "a") as f:
        f.write(f"{kind} {tid}\n")
        f.flush()
        os.fsync(f.fileno())

def run(ex, tid, source, target, amount):
    record("INTENT", tid)
    tx = ex.transaction(mode="xa")
    transfer(tx, tid, source, target, amount)
    tx.commit()
    record("DONE", tid)

started = threading.Barrier(writers + 1)

def writer(w):  # the same hot rows as the subject: accounts 0 / 2 (ds_0) and 1 / 3 (ds_1)
    ex = make(load_config(config), load_schema=False, timeout=60.0)
    for n in range(10_000):
        if n == 3:
            started.wait()
        source = 2 * ((w + n) % 2)
        try:
            run(ex, 1000 * (w + 1) + n, source, 3 - source, 1 + n % 5)
        except Exception as exc:  # a deadlock rolled it back (it stays INTENT only): the next one
            print("writer", w, type(exc).__name__, exc, file=sys.stderr, flush=True)

for w in range(writers):
    threading.Thread(target=writer, args=(w,), daemon=True).start()
started.wait()
ex = make(load_config(config), load_schema=False, timeout=60.0)

def stop_before_round(s, ds):
    if s == step:
        print("AT", current["gtrid"], flush=True)
        sys.stdin.readline()  # the test froze ds_1's server meanwhile

current = {}
xa_runtime(ex).step_hook = stop_before_round
record("INTENT", 1)
tx = ex.transaction(mode="xa")
current["gtrid"] = tx.gtrid
transfer(tx, 1, 0, 1, 7)
tx.commit()
record("DONE", 1)
print("NO STOP", flush=True)
'''


@pytest.fixture(scope="module")
def frozen_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateMariaDB]:
    # A session of the dead coordinator waiting for a row lock notices its closed socket only when the wait ends.
    with running_mariadb(tmp_path_factory.mktemp("xa_frozen"), ("--skip-log-bin", "--innodb-lock-wait-timeout=3")) as s:
        yield s


@pytest.fixture(params=["apart", "ds_1"])
def split_bank(request: pytest.FixtureRequest, frozen_server: PrivateMariaDB) -> Iterator[dict[str, Any]]:
    """ds_0 on the machine's MariaDB, ds_1 on the private server; the log apart (machine) or on ds_1."""
    db = frozen_server.create_database("xa_cc_")
    with fresh_mariadb_databases(2) as (main_db, log_db):
        config = bank_config({"ds_0": f"mysql://127.0.0.1:3306/{main_db}",
                              "ds_1": f"mysql://127.0.0.1:{frozen_server.port}/{db}"}, maxConcurrent=8)
        if request.param == "apart":
            log_apart(config, f"mysql://127.0.0.1:3306/{log_db}")
        else:
            config["xa"]["logDataSource"] = "ds_1"
        config["pool"]["acquireTimeoutMs"] = 30_000
        create_bank(config)
        yield config
        with Executor(load_config(config), load_schema=False) as ex:  # a failed test leaves nothing prepared behind
            recover(ex, abandon_after_ms=0)


def _branch_on_ds0(namespace: str, gtrid: str) -> bool:
    conn = mariadb_connect()
    try:
        return any(x.gtrid == gtrid for x in ours(prepared_xids(conn), namespace))
    finally:
        conn.close()


def _sessions_on(server: PrivateMariaDB, database: str) -> set[int]:
    """The ids of the sessions using ``database`` on ``server`` (this test's own connection uses none)."""
    conn = server.raw()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s", (database,))
            return {int(row[0]) for row in cur.fetchall()}
    finally:
        conn.close()


def _wait_for(check: Any, what: str, within: float = 30.0) -> None:
    end = time.monotonic() + within
    while not check():
        assert time.monotonic() < end, f"{what} did not happen within {within:g} s"
        time.sleep(0.005)


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("round_", ["PREPARE", "DECISION"])
def test_coordinator_killed_mid_round(frozen_server: PrivateMariaDB, split_bank: dict[str, Any], tmp_path: Path,
                                      round_: str, runner: str) -> None:
    last_resource = split_bank["xa"]["logDataSource"] == "ds_1"
    if round_ == "DECISION" and not last_resource:
        round_ = "COMMIT"  # the decision is a log write on the machine's server: freeze before the COMMIT round
    step = {"PREPARE": "logged", "DECISION": "prepared", "COMMIT": "decided"}[round_]  # the hook just before it
    intents = tmp_path / "intents.log"
    ds1_db = split_bank["dataSources"]["ds_1"]["url"].rsplit("/", 1)[1]
    with Executor(load_config(split_bank), load_schema=False) as ex:
        namespace = xa_runtime(ex).log.namespace
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent / "src"), str(TESTS)]))
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(TESTS), json.dumps(split_bank), step, str(intents), runner,
             str(WRITERS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None and frozen_server.proc is not None
        frozen = False
        try:
            ready, _, _ = select.select([proc.stdout], [], [], 120)
            line = proc.stdout.readline().decode() if ready else ""
            assert line.startswith("AT "), f"the coordinator did not stop before its {round_}: {line!r}"
            gtrid = line.split()[1]
            dead = _sessions_on(frozen_server, ds1_db)  # all the coordinator's: this process has none there yet
            freeze(frozen_server.proc.pid)  # ds_1 answers nothing from now on
            frozen = True
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
            if round_ == "PREPARE":  # ds_0 prepared, ds_1's PREPARE (or END) unanswered
                _wait_for(lambda: _branch_on_ds0(namespace, gtrid), "ds_0's XA PREPARE")
            elif round_ == "COMMIT":  # ds_0 committed, ds_1's COMMIT unanswered
                _wait_for(lambda: not _branch_on_ds0(namespace, gtrid), "ds_0's XA COMMIT")
            else:  # ds_1's XA COMMIT ... ONE PHASE sent into the frozen socket; nothing on ds_0 moves meanwhile
                time.sleep(0.3)
                assert _branch_on_ds0(namespace, gtrid)
        finally:
            proc.send_signal(signal.SIGKILL)  # a real crash, mid-round
            proc.wait(timeout=30)
            if frozen:
                frozen_server.proc.send_signal(signal.SIGCONT)
        # The thawed server first runs what sat in the dead process's sockets (ds_1's PREPARE or COMMIT may
        # still happen now), then closes those sessions (one waiting for a row lock only once its wait ends).
        # Recovery passes run until nothing is kept and every session of the dead process has ended, so the
        # last pass sees the servers as the crash and the thaw left them.
        committed: list[str] = []
        rolled_back: list[str] = []
        end = time.monotonic() + 60
        while True:
            sessions = len(dead & _sessions_on(frozen_server, ds1_db))
            report = recover(ex, abandon_after_ms=0)
            committed += report.committed
            rolled_back += report.rolled_back
            if not report.kept and not report.unreachable and sessions == 0:
                break
            assert time.monotonic() < end, (f"recovery still keeps {report.kept} / cannot reach {report.unreachable}; "
                                            f"{sessions} session(s) of the dead coordinator on ds_1")
            time.sleep(0.1)
        subject_row = xa_runtime(ex).log.read([gtrid]).get(gtrid)
        subject_state = subject_row.state if subject_row is not None else None
        rows = check_bank(ex, intents)
        if round_ == "PREPARE" or (round_ == "DECISION" and subject_state is not GlobalState.COMMITTED):
            # no decision: rolled back everywhere, whatever ds_1 did after the thaw (a tombstone, or the
            # PREPARING row rolled back)
            assert subject_state is GlobalState.ROLLED_BACK
            assert SUBJECT not in rows and f"{gtrid}/ds_0" in rolled_back
        else:  # decided: committed everywhere
            assert subject_state is GlobalState.COMMITTED
            assert sorted(rows[SUBJECT]) == [(0, -7), (1, 7)]
            if round_ == "COMMIT":
                assert f"{gtrid}/ds_0" not in committed  # ds_0 had committed before the crash
            else:  # the thawed server ran the one-phase commit: recovery commits ds_0 by its row
                assert f"{gtrid}/ds_0" in committed
        writers_done = [tid for tid in rows if tid >= 1000]
        assert writers_done, "the writers never committed a transfer: nothing ran against the hot rows"
        assert_nothing_left(frozen_server, ex)
        main = mariadb_connect()
        try:
            assert ours(prepared_xids(main), namespace) == [] and detached_trx_left(main) == []
        finally:
            main.close()
        assert_no_leaks(ex)
