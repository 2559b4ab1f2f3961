"""XA on the asyncio runner, where only a loop can show it: concurrent branches, cancels, recovery at start.

The XA tests themselves (two-phase and one-phase commit, the log, aborts, the cap, the per-transaction
timeout, a late PREPARE) run over both runners in tests/test_xa.py, and the crash tests (coordinator
SIGKILLed at each step, a participant server killed mid-commit) in tests/test_xa_crash.py. Here:

* a deadlock between two tasks' XA transactions on one loop: one is the victim, every branch of it
  rolled back, the other commits — the loop never blocks while a branch waits for a lock;
* transfers cancelled at random points (statements, ``XA START``/``END``/``PREPARE``/``COMMIT``, the log
  writes), on a private server: each ends committed or rolled back, never in doubt (the protocol's
  statements finish before the cancel is re-raised); nothing borrowed, the slot free; the ledger holds
  exactly the committed transfers, each whole; nothing prepared or open is left on the server;
* ``xa_recover_on_start`` runs recovery in ``warm_up()``.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.aio.executor import AsyncExecutor
from ddm_core.aio.transaction import AsyncTransaction
from ddm_core.aio.xa import AsyncXaTransaction
from ddm_core.errors import ConfigError, XaBranchAbortedError
from ddm_core.execute import Executor
from ddm_core.xa import GlobalState
from ddm_core.xa.xid import Xid, new_gtrid, ours
from runners import cancel_after
from services import fresh_mariadb_databases, innodb_trx_fresh, mariadb_connect
from test_execute_support import running_mariadb
from test_xa_support import (
    ACCOUNTS,
    START_BALANCE,
    bank_config,
    check_bank,
    create_bank,
    ledger,
    prepared_xids,
    transfer_async,
    trx_left,
    xa_host,
    xa_runtime,
)

ROUNDS = 300
WARM = 9
SEED = 20261205


@pytest.fixture(scope="module")
def bank() -> Iterator[dict[str, Any]]:
    with fresh_mariadb_databases(2) as names:
        config = bank_config({f"ds_{i}": f"mysql://127.0.0.1:3306/{db}" for i, db in enumerate(names)})
        create_bank(config)
        yield {"config": load_config(config), "names": names}


def _prepared_of(ex: AsyncExecutor) -> list[Any]:
    conn = mariadb_connect()
    try:
        return ours(prepared_xids(conn), xa_runtime(ex).log.namespace)
    finally:
        conn.close()


def test_the_default_mode_and_unknown_modes(bank: dict[str, Any]) -> None:
    async def main() -> None:
        async with AsyncExecutor(bank["config"], load_schema=False, transaction_mode="xa") as ex:
            tx = ex.transaction()
            assert isinstance(tx, AsyncXaTransaction)
            async with tx:
                await transfer_async(tx, 1, 0, 1, 5)
            assert tx.state == "committed" and tx.written_data_sources == ("ds_0", "ds_1")
            local = ex.transaction("local")
            assert type(local) is AsyncTransaction
            assert ex.borrowed() == 0
        with pytest.raises(ConfigError, match="'two-phase' is not one of local, xa"):
            AsyncExecutor(bank["config"], load_schema=False, transaction_mode="two-phase")
        async with AsyncExecutor(bank["config"], load_schema=False) as ex:
            with pytest.raises(ConfigError, match="'bogus' is not one of local, xa"):
                ex.transaction("bogus")

    asyncio.run(main())
    with Executor(bank["config"], load_schema=False) as ex:
        assert set(check_bank(ex)) >= {1}
        ex.execute("DELETE FROM t_transfer").close()
        ex.execute("UPDATE t_account SET balance = %s", (START_BALANCE,)).close()


def test_the_dbapi_facade_in_xa_mode(bank: dict[str, Any]) -> None:
    """``ddm_core.aio.connect(..., transaction_mode="xa")``: the implicit transaction writes both data sources."""
    from ddm_core.aio import dbapi as aio_dbapi

    async def main() -> None:
        conn = await aio_dbapi.connect(bank["config"], transaction_mode="xa", load_schema=False)
        try:
            async with conn.cursor() as cur:
                await cur.execute("UPDATE t_account SET balance = balance - 9 WHERE account_id = 6")
                await cur.execute("UPDATE t_account SET balance = balance + 9 WHERE account_id = 7")
                await conn.rollback()  # both branches rolled back
                await cur.execute("UPDATE t_account SET balance = balance - 2 WHERE account_id = 6")
                await cur.execute("UPDATE t_account SET balance = balance + 2 WHERE account_id = 7")
                await conn.commit()
                await cur.execute("SELECT balance FROM t_account WHERE account_id IN (6, 7) ORDER BY account_id")
                assert await cur.fetchall() == [(START_BALANCE - 2,), (START_BALANCE + 2,)]
        finally:
            await conn.ensure_closed()  # a failed check must not leave branches holding the tables

    asyncio.run(main())
    with Executor(bank["config"], load_schema=False) as ex:
        ex.execute("UPDATE t_account SET balance = %s", (START_BALANCE,)).close()


async def _lock_waits() -> bool:
    def ask() -> bool:
        innodb_trx_fresh()
        conn = mariadb_connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'")
                return bool(cur.fetchone()[0])
        finally:
            conn.close()

    return await asyncio.to_thread(ask)


def test_a_deadlock_between_two_tasks_rolls_back_every_branch_of_the_victim(bank: dict[str, Any]) -> None:
    """Tasks A and B lock accounts 0 and 2 (ds_0) in opposite orders; each also wrote ds_1. One loop."""

    async def main() -> tuple[Any, Any, dict[int, int]]:
        async with AsyncExecutor(bank["config"], load_schema=False, timeout=30.0) as ex:
            a, b = ex.transaction("xa"), ex.transaction("xa")
            await a.execute("UPDATE t_account SET balance = balance + 1 WHERE account_id = 1")  # ds_1
            await b.execute("UPDATE t_account SET balance = balance + 10 WHERE account_id = 3")  # ds_1
            await a.execute("UPDATE t_account SET balance = balance - 1 WHERE account_id = 0")
            await b.execute("UPDATE t_account SET balance = balance - 10 WHERE account_id = 2")
            first = asyncio.create_task(a.execute("UPDATE t_account SET balance = balance + 0 WHERE account_id = 2"))
            deadline = time.monotonic() + 10
            while not await _lock_waits():  # A waits for B's lock; the loop goes on
                assert time.monotonic() < deadline, "A's UPDATE never waited for B's lock"
                await asyncio.sleep(0.005)
            second = asyncio.create_task(b.execute("UPDATE t_account SET balance = balance + 0 WHERE account_id = 0"))
            outcome = await asyncio.gather(first, second, return_exceptions=True)
            errors = [o for o in outcome if isinstance(o, BaseException)]
            assert len(errors) == 1, outcome
            victim, survivor = (a, b) if isinstance(outcome[0], BaseException) else (b, a)
            await survivor.commit()
            assert victim.state == "rolled back" and survivor.state == "committed"
            assert ex.borrowed() == 0
            rows = await (await ex.execute("SELECT account_id, balance FROM t_account")).fetchall()
            return errors[0], survivor is a, {int(k): int(v) for k, v in rows}

    error, a_survived, balances = asyncio.run(main())
    assert isinstance(error, XaBranchAbortedError) and error.code == 1213
    assert "every branch (ds_1, ds_0) was rolled back" in str(error)
    expected = {acct: START_BALANCE for acct in range(ACCOUNTS)}
    moved = ((1, 0, 1) if a_survived else (3, 2, 10))
    expected[moved[0]] += moved[2]
    expected[moved[1]] -= moved[2]
    assert balances == expected  # the victim's write on ds_1 is gone too
    with Executor(bank["config"], load_schema=False) as ex:
        ex.execute("UPDATE t_account SET balance = %s", (START_BALANCE,)).close()


@pytest.fixture(scope="module")
def private_bank(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The bank on a private ``mariadbd``: what a bug in the cancel path could leave locked must not reach the
    machine's server (a stranded prepared branch holds its rows until that server restarts)."""
    with running_mariadb(tmp_path_factory.mktemp("aio_xa_mariadbd")) as server:
        urls = {f"ds_{i}": f"mysql://127.0.0.1:{server.port}/{server.create_database('xa_')}" for i in range(2)}
        config = bank_config(urls)
        create_bank(config)
        yield {"config": load_config(config), "server": server}


def test_transfers_cancelled_at_random_points_end_committed_or_rolled_back(private_bank: dict[str, Any]) -> None:
    """A cancel anywhere — a statement, ``XA START``/``END``/``PREPARE``/``COMMIT``, a log write — ends the
    transfer committed or rolled back, never half-way: the protocol's statements finish first."""
    config, server = private_bank["config"], private_bank["server"]
    rng = random.Random(SEED)
    committed: set[int] = set()
    outcomes = {"returned": 0, "cancelled, committed": 0, "cancelled, rolled back": 0}

    async def main() -> None:
        async with AsyncExecutor(config, load_schema=False, timeout=10.0) as ex:
            holder: list[AsyncXaTransaction] = []

            async def one(tid: int) -> None:
                source = 2 * (tid % 5)
                tx = ex.transaction("xa")
                assert isinstance(tx, AsyncXaTransaction)
                holder.append(tx)
                async with tx:
                    await transfer_async(tx, tid, source, source + 1, 1 + tid % 7)

            took = []
            for tid in range(WARM):  # how long an uncancelled transfer takes here, connections open
                started = time.monotonic()
                await one(tid)
                took.append(time.monotonic() - started)
                committed.add(tid)
            span = sorted(took)[WARM // 2] * 1.2
            for tid in range(WARM, WARM + ROUNDS):
                holder.clear()
                task = await cancel_after(one(tid), rng.uniform(0, span))
                await ex.settle()
                state = holder[0].state if holder else "rolled back"
                assert state in ("committed", "rolled back"), f"transfer {tid} ended {state}"
                if state == "committed":
                    committed.add(tid)
                outcomes["returned" if not task.cancelled() else f"cancelled, {state}"] += 1
                assert ex.borrowed() == 0, f"transfer {tid} ({state}) left a connection borrowed"
            rt = xa_runtime(ex)
            assert rt.async_slots._value == rt.max_concurrent, "an XA slot was not given back"

    asyncio.run(main())
    assert outcomes["cancelled, committed"] > 0 and outcomes["cancelled, rolled back"] > 0, outcomes
    raw = server.raw()
    try:
        assert prepared_xids(raw) == [] and trx_left(raw) == [], "a branch was left prepared or open"
    finally:
        raw.close()
    with Executor(config, load_schema=False) as ex:
        assert set(check_bank(ex)) == committed  # exactly the transfers that ended committed, each whole


def test_recovery_at_start_runs_in_warm_up(bank: dict[str, Any]) -> None:
    """An old prepared branch whose log row is missing: rolled back when the executor warms up."""
    async def main() -> GlobalState | None:
        ex = AsyncExecutor(bank["config"], load_schema=False, xa_recover_on_start=True)
        old = new_gtrid(xa_runtime(ex).log.namespace, now_ms=int(time.time() * 1000) - 3_600_000)
        conn = mariadb_connect(database=bank["names"][1])  # ds_1
        try:
            with conn.cursor() as cur:
                xid = Xid.branch(old, "ds_1").sql()
                cur.execute(f"XA START {xid}")
                cur.execute("UPDATE t_account SET balance = balance + 1000 WHERE account_id = 1")
                cur.execute(f"XA END {xid}")
                cur.execute(f"XA PREPARE {xid}")
        finally:
            conn.close()  # the branch stays prepared, detached
        async with ex:
            await ex.warm_up()
            row = (await asyncio.to_thread(xa_runtime(ex).log.read, [old])).get(old)
            assert await ex.recover_xa() is not None
            return row.state if row is not None else None

    assert asyncio.run(main()) is GlobalState.ROLLED_BACK
    with Executor(bank["config"], load_schema=False) as ex:
        check_bank(ex)
        assert ledger(ex) == {}
