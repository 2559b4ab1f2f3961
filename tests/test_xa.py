"""XA transactions on the machine's MariaDB: modes, two-phase and one-phase commit, the log, aborts, limits.

Two fresh databases on 127.0.0.1:3306 are ``ds_0`` (also the XA log's data
source) and ``ds_1``; see tests/test_xa_support.py for the bank they hold.
The crash tests (real processes killed) are in tests/test_xa_crash.py.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

import ddm_core
from ddm_core import load_config
from ddm_core.cli.app import cli
from ddm_core.errors import (
    ConfigError,
    CrossShardTransactionError,
    TransactionError,
    XaBranchAbortedError,
    XaCapacityError,
    XaError,
    XaTimeoutError,
)
from ddm_core.execute import Executor
from ddm_core.xa import GlobalState, recover
from ddm_core.xa import branches as xa_branches
from ddm_core.xa.xid import FORMAT_ID, Xid, gtrid_started_ms, namespace_of, new_gtrid, ours
from runners import RUNNERS, BlockingAsyncExecutor
from services import fresh_mariadb_databases, innodb_trx_fresh, mariadb_connect
from test_execute_support import assert_no_leaks
from test_xa_support import (
    ACCOUNTS,
    START_BALANCE,
    balances,
    bank_config,
    check_bank,
    create_bank,
    detached_trx,
    ledger,
    prepared_xids,
    LOG_PLACES,
    log_apart,
    transfer,
    xa_host,
    xa_runtime,
)
from ddm_core.xa.runtime import MARK_BATCH


@pytest.fixture(scope="module")
def bank_dbs() -> Iterator[dict[str, Any]]:
    with fresh_mariadb_databases(3) as names:
        urls = {f"ds_{i}": f"mysql://127.0.0.1:3306/{db}" for i, db in enumerate(names[:2])}
        config = bank_config(urls)
        create_bank(config)
        apart = log_apart(bank_config(urls), f"mysql://127.0.0.1:3306/{names[2]}")
        yield {"config": config, "participant": config, "apart": apart, "names": names}


def _reset(ex: Executor) -> None:
    ex.execute("DELETE FROM t_transfer").close()
    ex.execute("UPDATE t_account SET balance = %s", (START_BALANCE,)).close()


@contextmanager
def _bank_executor(bank_dbs: dict[str, Any], runner: str, log_place: str = "participant") -> Iterator[Any]:
    """An executor of ``runner`` over the bank (its log at ``log_place``, :data:`LOG_PLACES`), reset first;
    afterwards no connection borrowed, nothing prepared."""
    make = Executor if runner == "threads" else BlockingAsyncExecutor
    executor = make(load_config(bank_dbs[log_place]), load_schema=False, timeout=10.0)
    _reset(executor)
    yield executor
    try:
        assert_no_leaks(executor)
        conn = mariadb_connect()
        try:
            ns = xa_runtime(executor).log.namespace
            assert ours(prepared_xids(conn), ns) == [], "a test left prepared XA branches"
        finally:
            conn.close()
    finally:
        executor.close()


@pytest.fixture(params=RUNNERS)
def ex(request: pytest.FixtureRequest, bank_dbs: dict[str, Any]) -> Iterator[Executor]:
    """The bank's executor on each runner (tests/runners.py: the asyncio one driven from this test)."""
    with _bank_executor(bank_dbs, request.param) as executor:
        yield executor


@pytest.fixture(params=[(r, p) for p in LOG_PLACES for r in RUNNERS], ids=lambda rp: f"{rp[0]}-log-{rp[1]}")
def placed_ex(request: pytest.FixtureRequest, bank_dbs: dict[str, Any]) -> Iterator[Executor]:
    """:func:`ex` with the log on ``ds_0`` (a participant: the last resource) and on a data source of its own."""
    with _bank_executor(bank_dbs, *request.param) as executor:
        yield executor


@pytest.fixture(params=RUNNERS)
def apart_ex(request: pytest.FixtureRequest, bank_dbs: dict[str, Any]) -> Iterator[Executor]:
    """:func:`ex` with the log on a data source of its own: every branch prepares, the decision is a log write."""
    with _bank_executor(bank_dbs, request.param, "apart") as executor:
        yield executor


@pytest.fixture()
def thread_ex(bank_dbs: dict[str, Any]) -> Iterator[Executor]:
    """The thread executor only: for tests that drive it from several threads, or its DB-API facade."""
    with _bank_executor(bank_dbs, "threads") as executor:
        yield executor


def _log_state(ex: Executor, gtrid: str) -> GlobalState | None:
    row = xa_runtime(ex).log.read([gtrid]).get(gtrid)
    return row.state if row is not None else None


# -- xids ------------------------------------------------------------------------------------------


def test_xids_carry_the_prefix_namespace_and_start_time() -> None:
    ns = namespace_of("127.0.0.1:3306/app/ddm_xa_log")
    gtrid = new_gtrid(ns, now_ms=1_700_000_000_123)
    assert gtrid.startswith(f"ddm-{ns}-") and len(gtrid) <= 64
    assert gtrid_started_ms(gtrid) == 1_700_000_000_123
    assert gtrid_started_ms("someone-else") is None
    xid = Xid.branch(gtrid, "ds_1")
    assert xid.bqual == b"ds_1" and xid.format_id == FORMAT_ID
    long_name = Xid.branch(gtrid, "d" * 100)
    assert len(long_name.bqual) == 40  # hashed into the 64-byte limit


def test_xa_recover_rows_are_filtered_to_this_namespace() -> None:
    ns, other = namespace_of("a"), namespace_of("b")
    mine, theirs = new_gtrid(ns), new_gtrid(other)
    rows = [
        (FORMAT_ID, len(mine), 4, (mine + "ds_0").encode()),
        (FORMAT_ID, len(theirs), 4, (theirs + "ds_0").encode()),  # another application's log
        (1, len(mine), 4, (mine + "ds_1").encode()),  # another transaction manager's format
        (FORMAT_ID, 3, 2, b"abcde"),  # not ddm's prefix
    ]
    assert ours(rows, ns) == [Xid(mine, b"ds_0")]


# -- modes -----------------------------------------------------------------------------------------


def test_local_mode_refuses_a_second_data_source_naming_xa_and_autocommit(ex: Executor) -> None:
    with pytest.raises(CrossShardTransactionError) as info:
        with ex.transaction() as tx:
            transfer(tx, 1, 0, 1, 5)
    message = str(info.value)
    assert "mode='xa'" in message and "transaction_mode='xa'" in message and "autocommit=True" in message
    assert balances(ex) == {a: START_BALANCE for a in range(ACCOUNTS)}


def test_unknown_mode_is_refused(bank_dbs: dict[str, Any], ex: Executor) -> None:
    with pytest.raises(ConfigError, match="'bogus' is not one of local, xa"):
        ex.transaction(mode="bogus")
    with pytest.raises(ConfigError, match="transaction_mode 'two-phase'"):
        Executor(load_config(bank_dbs["config"]), load_schema=False, transaction_mode="two-phase")
    with pytest.raises(ddm_core.dbapi.InterfaceError, match="'bogus'"):
        ddm_core.connect(executor=ex, transaction_mode="bogus")


def test_two_phase_transfer_commits_both_data_sources_and_logs_it(placed_ex: Executor) -> None:
    ex = placed_ex
    steps: list[tuple[str, str | None]] = []
    xa_runtime(ex).step_hook = lambda step, ds: steps.append((step, ds))
    with ex.transaction(mode="xa") as tx:
        transfer(tx, 7, 2, 3, 40)
        assert tx.written_data_sources == ("ds_0", "ds_1")
    if xa_runtime(ex).log.data_source == "ds_0":  # the last resource: never prepared, its commit is the decision
        assert steps == [("logged", None), ("prepared", "ds_1"), ("committed", "ds_0"), ("decided", None),
                         ("committed", "ds_1"), ("finished", None)]
    else:
        assert steps == [("logged", None), ("prepared", "ds_0"), ("prepared", "ds_1"), ("decided", None),
                         ("committed", "ds_0"), ("committed", "ds_1"), ("finished", None)]
    assert tx.state == "committed"
    assert balances(ex)[2] == START_BALANCE - 40 and balances(ex)[3] == START_BALANCE + 40  # visible at once
    assert _log_state(ex, tx.gtrid) is GlobalState.COMMITTING  # COMMITTED is deferred
    report = recover(xa_host(ex))
    assert report.finished == [] and report.committed == []  # its own marks are written first, in one go
    assert _log_state(ex, tx.gtrid) is GlobalState.COMMITTED
    check_bank(ex)


def test_committed_marks_ride_along_a_later_commit_round(placed_ex: Executor) -> None:
    """The ``COMMITTED`` marks of :data:`MARK_BATCH` commits are written together in a later commit's COMMIT round;
    marks a process never wrote are recovery's: it finishes a ``COMMITTING`` row with nothing prepared."""
    ex = placed_ex
    gtrids = []
    for i in range(MARK_BATCH + 1):
        with ex.transaction(mode="xa") as tx:
            transfer(tx, 300 + i, 2 * (i % 5), 2 * (i % 5) + 1, 1)
        gtrids.append(tx.gtrid)
    states = [_log_state(ex, g) for g in gtrids]
    assert states == [GlobalState.COMMITTED] * MARK_BATCH + [GlobalState.COMMITTING]
    xa_runtime(ex).flush_marks = lambda: None  # as if the process died with the last mark unwritten
    report = recover(xa_host(ex))
    assert report.finished == [gtrids[-1]] and report.committed == []
    assert _log_state(ex, gtrids[-1]) is GlobalState.COMMITTED
    check_bank(ex)


def test_closing_the_executor_writes_its_waiting_marks(placed_ex: Executor) -> None:
    """Marks still short of a batch are written when the executor closes, not left to recovery."""
    ex = placed_ex
    gtrids = []
    for i in range(2):
        with ex.transaction(mode="xa") as tx:
            transfer(tx, 400 + i, 2 * i, 2 * i + 1, 1)
        gtrids.append(tx.gtrid)
    assert [_log_state(ex, g) for g in gtrids] == [GlobalState.COMMITTING] * 2
    ex.close()
    with Executor(ex.config, load_schema=False) as reader:
        assert [_log_state(reader, g) for g in gtrids] == [GlobalState.COMMITTED] * 2


def test_a_tombstone_refuses_the_last_resource_or_waits_for_its_commit(ex: Executor) -> None:
    """Recovery's tombstone and the last resource's decision row share the log's primary key: a tombstone
    written first refuses the commit (every branch rolled back); one tried while the row is in flight waits
    for the one-phase commit and then follows it."""
    txlog = xa_runtime(ex).log
    tx = ex.transaction(mode="xa")
    transfer(tx, 61, 0, 1, 5)
    assert txlog.tombstone(tx.gtrid) is GlobalState.ROLLING_BACK  # as recovery of an old row-less branch does
    with pytest.raises(XaError, match="already has a log row"):
        tx.commit()
    assert tx.state == "rolled back" and ledger(ex) == {}
    raced: list[GlobalState] = []

    def race(step: str, ds: str | None) -> None:
        if step == "prepared":  # ds_1 prepared, the decision row uncommitted in ds_0's branch
            t = threading.Thread(target=lambda: raced.append(txlog.tombstone(tx2.gtrid)))
            t.start()
            t.join(0.5)
            assert t.is_alive(), "the tombstone must wait for the row's key"
            waiting.append(t)

    waiting: list[threading.Thread] = []
    xa_runtime(ex).step_hook = race
    tx2 = ex.transaction(mode="xa")
    transfer(tx2, 62, 0, 1, 5)
    tx2.commit()
    waiting[0].join(10)
    assert raced == [GlobalState.COMMITTING] and tx2.state == "committed"
    assert sorted(ledger(ex)[62]) == [(0, -5), (1, 5)]
    check_bank(ex)


def test_one_data_source_commits_in_one_phase_without_the_log(ex: Executor) -> None:
    steps: list[tuple[str, str | None]] = []
    xa_runtime(ex).step_hook = lambda step, ds: steps.append((step, ds))
    with ex.transaction(mode="xa") as tx:
        tx.execute("UPDATE t_account SET balance = balance - 1 WHERE account_id = 0").close()
        tx.execute("UPDATE t_account SET balance = balance + 1 WHERE account_id = 2").close()
    assert steps == [("committed", "ds_0")]  # no log row, no PREPARE
    assert _log_state(ex, tx.gtrid) is None
    assert balances(ex)[0] == START_BALANCE - 1 and balances(ex)[2] == START_BALANCE + 1


def test_executor_default_mode_and_the_dbapi_facade(bank_dbs: dict[str, Any], thread_ex: Executor) -> None:
    ex = thread_ex
    with Executor(load_config(bank_dbs["config"]), load_schema=False, transaction_mode="xa") as xa_ex:
        with xa_ex.transaction() as tx:
            transfer(tx, 11, 4, 5, 3)
        assert type(tx).__name__ == "XaTransaction"
        conn = ddm_core.connect(executor=xa_ex, transaction_mode="local")  # per connection
        cur = conn.cursor()
        cur.execute("UPDATE t_account SET balance = balance - 1 WHERE account_id = 4")
        with pytest.raises(ddm_core.dbapi.NotSupportedError):
            cur.execute("UPDATE t_account SET balance = balance + 1 WHERE account_id = 5")
        conn.rollback()
        conn.close()
        assert_no_leaks(xa_ex)
    conn = ddm_core.connect(bank_dbs["config"], transaction_mode="xa", load_schema=False)
    with conn:
        cur = conn.cursor()
        cur.execute("UPDATE t_account SET balance = balance - 9 WHERE account_id = 6")
        cur.execute("UPDATE t_account SET balance = balance + 9 WHERE account_id = 7")
        conn.rollback()  # both branches rolled back
        cur.execute("UPDATE t_account SET balance = balance - 2 WHERE account_id = 6")
        cur.execute("UPDATE t_account SET balance = balance + 2 WHERE account_id = 7")
        conn.commit()
    assert balances(ex)[6] == START_BALANCE - 2 and balances(ex)[7] == START_BALANCE + 2
    assert balances(ex)[4] == START_BALANCE - 3 and balances(ex)[5] == START_BALANCE + 3


def test_rollback_undoes_every_branch_and_an_empty_rollback_succeeds(ex: Executor) -> None:
    tx = ex.transaction(mode="xa")
    transfer(tx, 21, 0, 1, 100)
    tx.rollback()
    assert tx.state == "rolled back"
    assert balances(ex) == {a: START_BALANCE for a in range(ACCOUNTS)} and ledger(ex) == {}
    tx.rollback()  # over: nothing to do
    # A branch that never reached PREPARE (or never existed) rolls back without an error.
    pinned = xa_host(ex).primary_pool("ds_1").borrow()
    try:
        assert xa_branches.rollback(pinned, Xid.branch(new_gtrid(xa_runtime(ex).log.namespace), "ds_1")) is False
    finally:
        pinned.release()


def test_a_statement_error_keeps_the_transaction_and_commit_still_works(ex: Executor) -> None:
    with ex.transaction(mode="xa") as tx:
        transfer(tx, 31, 0, 1, 1)
        with pytest.raises(ddm_core.DuplicateKeyError):
            tx.execute("INSERT INTO t_transfer (transfer_id, account_id, delta) VALUES (31, 1, 1)").close()
    assert set(ledger(ex)) == {31}
    check_bank(ex)


def test_sqlite_data_sources_cannot_join_an_xa_transaction(bank_dbs: dict[str, Any], tmp_path: Path) -> None:
    only_sqlite = bank_config({"ds_0": f"sqlite:///{tmp_path / 'a.db'}", "ds_1": f"sqlite:///{tmp_path / 'b.db'}"})
    with Executor(load_config(only_sqlite), load_schema=False) as ex:
        with pytest.raises(XaError, match="XA transaction log needs a MySQL or MariaDB data source; "
                                          "xa.logDataSource 'ds_0' is sqlite"):
            ex.transaction(mode="xa")
    mixed = bank_config({"ds_0": f"mysql://127.0.0.1:3306/{bank_dbs['names'][0]}",
                         "ds_1": f"sqlite:///{tmp_path / 'b.db'}"})
    with Executor(load_config(mixed), load_schema=False) as ex:
        pinned = ex.primary_pool("ds_1").borrow()  # ds_0 has the bank already
        pinned.raw.execute("CREATE TABLE t_account (account_id BIGINT PRIMARY KEY, balance BIGINT)")
        pinned.release()
        with pytest.raises(XaError, match="'ds_1' is sqlite: XA transactions need MySQL or MariaDB"):
            with ex.transaction(mode="xa") as tx:
                tx.execute("SELECT * FROM t_account WHERE account_id = 0").close()
                tx.execute("SELECT * FROM t_account WHERE account_id = 1").close()
        assert tx.state == "rolled back"
        assert_no_leaks(ex)


# -- aborts, timeouts, the cap ----------------------------------------------------------------------


def test_a_deadlock_in_one_branch_rolls_back_every_branch(thread_ex: Executor) -> None:
    """A and B lock accounts 0 and 2 (ds_0) in opposite orders; A also wrote ds_1. One is InnoDB's victim."""
    ex = thread_ex
    a, b = ex.transaction(mode="xa"), ex.transaction(mode="xa")
    a.execute("UPDATE t_account SET balance = balance + 1 WHERE account_id = 1").close()  # ds_1
    b.execute("UPDATE t_account SET balance = balance + 10 WHERE account_id = 3").close()  # ds_1
    a.execute("UPDATE t_account SET balance = balance - 1 WHERE account_id = 0").close()
    b.execute("UPDATE t_account SET balance = balance - 10 WHERE account_id = 2").close()
    outcome: dict[str, BaseException | None] = {}
    blocked = threading.Event()

    def a_second() -> None:
        blocked.set()
        try:
            a.execute("UPDATE t_account SET balance = balance + 0 WHERE account_id = 2").close()
            outcome["a"] = None
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertions
            outcome["a"] = exc

    thread = threading.Thread(target=a_second)
    thread.start()
    blocked.wait()
    _wait_for_lock_wait()
    try:
        b.execute("UPDATE t_account SET balance = balance + 0 WHERE account_id = 0").close()
        outcome["b"] = None
    except BaseException as exc:  # noqa: BLE001
        outcome["b"] = exc
    thread.join(30)
    victims = [name for name, exc in outcome.items() if exc is not None]
    if len(victims) != 1:
        a.rollback(), b.rollback()
        raise AssertionError(outcome)
    victim, survivor = (a, b) if victims == ["a"] else (b, a)
    error = outcome[victims[0]]
    try:
        assert isinstance(error, XaBranchAbortedError) and error.code == 1213
        assert "every branch (ds_1, ds_0) was rolled back" in str(error)
        assert victim.state == "rolled back"
    finally:
        survivor.commit()
    expected = {a_: START_BALANCE for a_ in range(ACCOUNTS)}
    if survivor is a:
        expected[1] += 1
        expected[0] -= 1
    else:
        expected[3] += 10
        expected[2] -= 10
    assert balances(ex) == expected  # the victim's write on ds_1 is gone too


def _wait_for_lock_wait() -> None:
    """Until some InnoDB transaction waits for a lock (A's second UPDATE is blocked)."""
    conn = mariadb_connect()
    try:
        for _ in range(200):  # each read spaced by innodb_trx_fresh: about 30 s in all
            innodb_trx_fresh()
            with conn.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'")
                if cur.fetchone()[0]:
                    return
        raise AssertionError("A's UPDATE never waited for B's lock")
    finally:
        conn.close()


def test_a_lock_wait_timeout_rolls_back_every_branch(ex: Executor) -> None:
    holder = ex.transaction(mode="xa")
    holder.execute("UPDATE t_account SET balance = balance + 5 WHERE account_id = 0").close()
    waiter = ex.transaction(mode="xa")
    waiter.execute("UPDATE t_account SET balance = balance - 5 WHERE account_id = 1").close()  # ds_1
    waiter.execute("SET SESSION innodb_lock_wait_timeout = 1").close()  # ds_0's pinned session
    with pytest.raises(XaBranchAbortedError) as info:
        waiter.execute("UPDATE t_account SET balance = balance - 5 WHERE account_id = 0").close()
    assert info.value.code == 1205 and waiter.state == "rolled back"
    holder.rollback()
    assert balances(ex) == {a: START_BALANCE for a in range(ACCOUNTS)}


def test_the_per_transaction_timeout_rolls_back(ex: Executor) -> None:
    now = [1000.0]
    rt = xa_runtime(ex)
    rt.clock = lambda: now[0]
    tx = ex.transaction(mode="xa")
    transfer(tx, 41, 0, 1, 1)
    now[0] += rt.timeout + 0.001
    with pytest.raises(XaTimeoutError, match="xa.timeoutMs"):
        tx.execute("UPDATE t_account SET balance = balance WHERE account_id = 0").close()
    assert tx.state == "rolled back" and ledger(ex) == {}
    tx2 = ex.transaction(mode="xa")
    transfer(tx2, 42, 0, 1, 1)
    now[0] += rt.timeout + 0.001
    with pytest.raises(XaTimeoutError, match="before its commit"):
        tx2.commit()
    assert ledger(ex) == {} and _log_state(ex, tx2.gtrid) is None  # rolled back before anything was logged
    tx3 = ex.transaction(mode="xa")
    transfer(tx3, 43, 0, 1, 1)
    tx3.commit()
    now[0] += rt.timeout + 0.001  # an ended transaction's deadline passes: it stays what it was
    with pytest.raises(TransactionError, match="is committed"):
        tx3.execute("UPDATE t_account SET balance = balance WHERE account_id = 0").close()
    assert tx3.state == "committed" and set(ledger(ex)) == {43}


def test_the_cap_on_concurrent_xa_transactions(ex: Executor) -> None:
    rt = xa_runtime(ex)
    assert rt.max_concurrent == 4
    open_ = [ex.transaction(mode="xa") for _ in range(4)]
    for i, tx in enumerate(open_):
        tx.execute("SELECT balance FROM t_account WHERE account_id = %s", (2 * i,)).close()
    extra = ex.transaction(mode="xa")
    with pytest.raises(XaCapacityError, match="all 4 XA transaction slots"):
        extra.execute("SELECT balance FROM t_account WHERE account_id = 0").close()
    open_[0].rollback()
    extra.execute("SELECT balance FROM t_account WHERE account_id = 0").close()  # a slot is free again
    extra.commit()
    for tx in open_[1:]:
        tx.commit()


# -- recovery and the log ------------------------------------------------------------------------------


def test_a_late_prepare_after_recovery_rolled_back_is_refused(apart_ex: Executor) -> None:
    """Recovery decides ROLLBACK while the coordinator stalls after its PREPAREs, before the decision (a hanging
    transaction); the PREPAREs run at once, so at the first branch's ``prepared`` step every branch is prepared.
    (With the log on a participant there is no PREPARING row to decide on: the tombstone test below.)"""
    ex = apart_ex
    reports = []

    def stall(step: str, ds: str | None) -> None:
        if step == "prepared" and ds == "ds_0":
            reports.append(recover(xa_host(ex), abandon_after_ms=0))

    xa_runtime(ex).step_hook = stall
    tx = ex.transaction(mode="xa")
    transfer(tx, 51, 0, 1, 10)
    with pytest.raises(XaError, match="rolled back by recovery while it was preparing"):
        tx.commit()
    (report,) = reports
    assert sorted(report.kept) == [f"{tx.gtrid}/ds_0", f"{tx.gtrid}/ds_1"]  # still attached to the coordinator's sessions
    assert _log_state(ex, tx.gtrid) is GlobalState.ROLLED_BACK
    assert ledger(ex) == {} and balances(ex) == {a: START_BALANCE for a in range(ACCOUNTS)}
    conn = mariadb_connect()
    try:
        assert detached_trx(conn) == []
    finally:
        conn.close()


def test_recovery_with_nothing_to_do_and_the_cli(bank_dbs: dict[str, Any], ex: Executor, tmp_path: Path) -> None:
    report = ex.recover_xa()
    assert (report.committed, report.rolled_back, report.kept, report.unreachable) == ([], [], [], [])
    import yaml

    path = tmp_path / "bank.yaml"
    path.write_text(yaml.safe_dump(bank_dbs["config"]))
    result = CliRunner().invoke(cli, ["xa", "recover", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert "0 branch(es) committed, 0 rolled back, 0 kept" in result.output
    result = CliRunner().invoke(cli, ["xa", "status", "--config", str(path)])
    assert result.exit_code == 0 and "no unfinished XA transactions" in result.output


def test_config_fields_round_trip_and_are_checked(bank_dbs: dict[str, Any]) -> None:
    from ddm_core.metadata.dump import to_native

    config = load_config(bank_dbs["config"])
    assert config.xa.log_data_source == "ds_0" and config.xa.max_concurrent == 4
    assert load_config(to_native(config)).xa == config.xa
    bad = dict(bank_dbs["config"], xa={"logDataSource": "ds_9", "maxConcurrent": 0})
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    text = str(info.value)
    assert "xa.logDataSource" in text and "'ds_9' is not configured" in text and "xa.maxConcurrent" in text


def test_recovery_at_start_rolls_back_an_old_branch_that_has_no_log_row(bank_dbs: dict[str, Any],
                                                                          thread_ex: Executor) -> None:
    """A prepared branch of this log whose row is missing: aged by its gtrid, tombstoned, rolled back at start."""
    import time

    from ddm_core.xa.xid import Xid as _Xid

    ex = thread_ex
    namespace = xa_runtime(ex).log.namespace
    old = new_gtrid(namespace, now_ms=int(time.time() * 1000) - 3_600_000)  # started an hour ago
    young = new_gtrid(namespace)
    for gtrid, account in ((old, 1), (young, 3)):
        conn = mariadb_connect(database=bank_dbs["names"][1])  # ds_1; one session per prepared branch
        try:
            with conn.cursor() as cur:
                xid = _Xid.branch(gtrid, "ds_1").sql()
                cur.execute(f"XA START {xid}")
                cur.execute("UPDATE t_account SET balance = balance + 1000 WHERE account_id = %s", (account,))
                cur.execute(f"XA END {xid}")
                cur.execute(f"XA PREPARE {xid}")
        finally:
            conn.close()  # the branch stays prepared, detached
    with Executor(load_config(bank_dbs["config"]), load_schema=False, xa_recover_on_start=True) as started:
        assert _log_state(started, old) is GlobalState.ROLLED_BACK  # the tombstone, finished
        assert _log_state(started, young) is None  # young: kept, untouched
        report = started.recover_xa()
        assert report.kept == [f"{young}/ds_1"] and report.rolled_back == []
        report = recover(started, abandon_after_ms=0)
        assert report.rolled_back == [f"{young}/ds_1"] and report.finished == [young]
    assert balances(ex) == {a: START_BALANCE for a in range(ACCOUNTS)}


def test_a_failed_end_with_its_prepare_queued_behind_it_keeps_the_connection_in_step(thread_ex: Executor) -> None:
    """XA END and XA PREPARE of a branch go out back to back (docs/xa.md#how-a-round-runs): when the END is
    refused (here the branch was ended already behind the coordinator's back) both answers are still read, every
    branch is rolled back, and the connection, returned to the pool, answers the next transactions in step."""
    ex = thread_ex
    tx = ex.transaction(mode="xa")
    transfer(tx, 71, 0, 1, 9)
    pinned = tx._pins["ds_1"]
    pinned.raw.cursor().execute(xa_branches.statement("END", Xid.branch(tx.gtrid, "ds_1")))
    with pytest.raises(XaError, match="XA END failed on data source 'ds_1'"):
        tx.commit()
    assert tx.state == "rolled back" and ledger(ex) == {}
    for i in range(4):  # the same pooled connections, reused
        with ex.transaction(mode="xa") as again:
            transfer(again, 72 + i, 0, 1, 1)
    assert set(ledger(ex)) == {72, 73, 74, 75}
    check_bank(ex)
