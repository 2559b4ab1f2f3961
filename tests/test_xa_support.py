"""Shared pieces of the XA tests (no tests here): a two-data-source bank, checks of what servers hold.

The bank: ``t_account`` (``account_id`` → balance) and ``t_transfer`` (one
ledger row per account a transfer touched) sharded by ``account_id`` MOD 2
over ``ds_0`` / ``ds_1``; even accounts live on ``ds_0``, odd ones on ``ds_1``.
A transfer moves an amount from an even account to an odd one in one XA
transaction, so after any crash and recovery:

* the total balance is unchanged (sum-invariant);
* each transfer has a ledger row on both data sources or on neither;
* every ledger row belongs to a transfer the coordinator recorded as intended
  (its own append-only file), none is duplicated (primary key).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from ddm_core import load_config
from ddm_core.execute import Executor
from ddm_core.xa import XaRuntime, runtime_of
from ddm_core.xa.log import XaHost
from ddm_core.xa.xid import ours
from services import innodb_trx_fresh

ACCOUNTS = 10  # 0..9: even on ds_0, odd on ds_1
START_BALANCE = 1_000
ACCOUNT_DDL = "CREATE TABLE t_account (account_id BIGINT NOT NULL PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB"
TRANSFER_DDL = (
    "CREATE TABLE t_transfer (transfer_id BIGINT NOT NULL, account_id BIGINT NOT NULL, delta BIGINT NOT NULL, "
    "PRIMARY KEY (transfer_id, account_id)) ENGINE=InnoDB"
)


def bank_config(urls: dict[str, str], **xa: Any) -> dict[str, Any]:
    """A native configuration dict of the bank over ``urls`` (``ds_0``, ``ds_1``); ``xa`` fields merged in."""
    def table(name: str) -> dict[str, Any]:
        return {"logicTable": name, "shardKey": "account_id", "algorithm": "MOD", "shardCount": 2,
                "databases": list(urls)}

    return {
        "dataSources": {name: {"url": url, "username": "root", "password": ""} for name, url in urls.items()},
        "pool": {"maxSize": 6, "minIdle": 0, "acquireTimeoutMs": 1000},
        "tables": [table("t_account"), table("t_transfer")],
        "defaultDataSource": "ds_0",
        "runtime": {"allowDmlFullRoute": True},
        "xa": {"logDataSource": "ds_0", "timeoutMs": 20_000, "abandonAfterMs": 60_000, "maxConcurrent": 4, **xa},
    }


def log_apart(config: dict[str, Any], url: str) -> dict[str, Any]:
    """``config`` with the XA log on a data source of its own (``ds_log`` at ``url``, no tables): no branch is
    the last resource, every branch prepares and the log rows are autocommitted (docs/xa.md#commit)."""
    config["dataSources"]["ds_log"] = {"url": url, "username": "root", "password": ""}
    config["xa"]["logDataSource"] = "ds_log"
    return config


#: Where the XA log lives in a test's bank: on ``ds_0``, a participant (its branch is the last resource), or
#: on a data source of its own.
LOG_PLACES = ["participant", "apart"]


def create_bank(config: Any) -> None:
    with Executor(load_config(config), load_schema=False) as ex:
        ex.execute(ACCOUNT_DDL).close()
        ex.execute(TRANSFER_DDL).close()
        for account in range(ACCOUNTS):
            ex.execute("INSERT INTO t_account (account_id, balance) VALUES (%s, %s)", (account, START_BALANCE)).close()


def transfer_statements(transfer_id: int, source: int, target: int, amount: int) -> list[tuple[str, tuple[int, ...]]]:
    """The two-row transfer: debit ``source``, credit ``target``, a ledger row for each."""
    ledger_row = "INSERT INTO t_transfer (transfer_id, account_id, delta) VALUES (%s, %s, %s)"
    return [
        ("UPDATE t_account SET balance = balance - %s WHERE account_id = %s", (amount, source)),
        (ledger_row, (transfer_id, source, -amount)),
        ("UPDATE t_account SET balance = balance + %s WHERE account_id = %s", (amount, target)),
        (ledger_row, (transfer_id, target, amount)),
    ]


def transfer(tx: Any, transfer_id: int, source: int, target: int, amount: int) -> None:
    """:func:`transfer_statements` in ``tx``."""
    for sql, params in transfer_statements(transfer_id, source, target, amount):
        tx.execute(sql, params).close()


async def transfer_async(tx: Any, transfer_id: int, source: int, target: int, amount: int) -> None:
    """:func:`transfer_statements` in an asyncio transaction."""
    for sql, params in transfer_statements(transfer_id, source, target, amount):
        await tx.execute(sql, params)


def balances(ex: Executor) -> dict[int, int]:
    with ex.execute("SELECT account_id, balance FROM t_account") as r:
        return {int(a): int(b) for a, b in r.fetchall()}


def ledger(ex: Executor) -> dict[int, list[tuple[int, int]]]:
    """transfer id → its ledger rows ``(account, delta)``."""
    out: dict[int, list[tuple[int, int]]] = {}
    with ex.execute("SELECT transfer_id, account_id, delta FROM t_transfer") as r:
        for tid, account, delta in r.fetchall():
            out.setdefault(int(tid), []).append((int(account), int(delta)))
    return out


def read_intents(path: Path) -> tuple[set[int], set[int]]:
    """The coordinator's own record: ``(intended, committed)`` transfer ids."""
    intended, done = set(), set()
    if path.exists():
        for line in path.read_text().splitlines():
            kind, _, tid = line.partition(" ")
            (intended if kind == "INTENT" else done).add(int(tid))
    return intended, done


def check_bank(ex: Executor, intents: Path | None = None) -> dict[int, list[tuple[int, int]]]:
    """Assert the bank's invariants (module docstring); the ledger."""
    total = sum(balances(ex).values())
    assert total == ACCOUNTS * START_BALANCE, f"money created or lost: total {total}"
    rows = ledger(ex)
    for tid, entries in rows.items():
        assert len(entries) == 2 and sum(d for _, d in entries) == 0, f"transfer {tid} is half applied: {entries}"
    moved = {a: 0 for a in range(ACCOUNTS)}
    for entries in rows.values():
        for account, delta in entries:
            moved[account] += delta
    assert {a: START_BALANCE + d for a, d in moved.items()} == balances(ex), "balances differ from the ledger"
    if intents is not None:
        intended, done = read_intents(intents)
        assert set(rows) <= intended, f"ledger rows of transfers never intended: {set(rows) - intended}"
        assert done <= set(rows), f"transfers reported committed but missing: {done - set(rows)}"
    return rows


def prepared_xids(raw: Any) -> list[Any]:
    with raw.cursor() as cur:
        cur.execute("XA RECOVER")
        return list(cur.fetchall())


def detached_trx(raw: Any) -> list[Any]:
    """InnoDB transactions with no session (prepared XA branches left behind)."""
    innodb_trx_fresh(raw.port)
    with raw.cursor() as cur:
        cur.execute("SELECT trx_id, trx_state FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = 0")
        return list(cur.fetchall())


def detached_trx_left(raw: Any, within: float = 5.0) -> list[Any]:
    """The session-less InnoDB transactions still there ``within`` seconds from now (at once if none is).

    The machine's server is shared: another client's commit can show for a moment as a session-less
    transaction (seen: trx_id 0, COMMITTING; RUNNING). A branch left behind stays; a passing commit goes."""
    return _still_there(lambda: detached_trx(raw), within)


def all_trx(raw: Any) -> list[Any]:
    innodb_trx_fresh(raw.port)
    with raw.cursor() as cur:
        cur.execute("SELECT trx_id, trx_state, trx_mysql_thread_id FROM information_schema.innodb_trx")
        return list(cur.fetchall())


def trx_left(raw: Any, within: float = 10.0) -> list[Any]:
    """The InnoDB transactions still open ``within`` seconds from now (at once if none is).

    A connection the client closed in a transaction (a branch discarded on a cancel) is rolled back by
    the server after it reads the COM_QUIT, which a loaded machine may not have done yet when the client
    asks; a transaction held by a session that stays connected is still listed when the time is up."""
    return _still_there(lambda: all_trx(raw), within)


def _still_there(read: Callable[[], list[Any]], within: float) -> list[Any]:
    """What ``read`` still finds ``within`` seconds from now, polled (at once if it finds nothing)."""
    deadline = time.monotonic() + within
    while True:
        rows = read()
        if not rows or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def assert_nothing_left(server: Any, ex: Any) -> None:
    """On ``server`` (a tests/test_execute_support.py ``PrivateMariaDB``): no branch prepared, of ``ex``'s log
    namespace or anyone's, and no InnoDB transaction open."""
    raw = server.raw()
    try:
        assert ours(prepared_xids(raw), xa_runtime(ex).log.namespace) == []
        assert prepared_xids(raw) == []
        assert trx_left(raw) == [], "transactions left open on the server"
    finally:
        raw.close()


def xa_host(ex: Any) -> XaHost:
    """Where recovery and the log's tools reach ``ex``'s data sources: the thread executor itself, or the
    asyncio one's blocking side (``AsyncExecutor.xa_host``; ``ex`` may be tests/runners.py's wrapper)."""
    inner = getattr(ex, "inner", ex)
    host: XaHost = getattr(inner, "xa_host", inner)
    return host


def xa_runtime(ex: Any) -> XaRuntime:
    """``ex``'s XA runtime (the log, the cap, the step hook), on either runner."""
    return runtime_of(xa_host(ex))
