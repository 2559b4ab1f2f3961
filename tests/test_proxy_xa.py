"""XA transactions through ``ddm proxy``: a client's BEGIN .. COMMIT over two data sources, atomically.

Two proxy subprocesses over the same fresh MariaDB databases: one with
``proxy.transactionMode: xa``, one with the default ``local``. Clients are
PyMySQL; what they did is checked on the physical tables, read behind the
proxy's back, and no XA branch may be left prepared on the servers.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, innodb_trx_fresh, mariadb_connect, mariadb_rows, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's XA tests")

from ddm_core import Router, load_config  # noqa: E402
from test_proxy_support import ProxyProcess, connect, create_tables, proxy_config, write_config  # noqa: E402

START = 100  # every account's balance before a test


class Bank:
    """Accounts (``t_order`` rows): ``a`` and ``a2`` on ds_0, ``b`` on ds_1, and where each one's row lives."""

    def __init__(self, config: dict[str, Any], databases: list[str]) -> None:
        self.config = config
        router = Router(load_config(config))
        self.where: dict[int, tuple[str, str]] = {}  # user_id -> (database, physical SQL prefix)
        by_source: dict[str, list[int]] = {"ds_0": [], "ds_1": []}
        for user_id in range(1, 200):
            unit = router.route("SELECT amount FROM t_order WHERE user_id = %s", (user_id,)).units[0]
            if len(by_source[unit.data_source]) < 2:
                by_source[unit.data_source].append(user_id)
                database = databases[int(unit.data_source.split("_")[1])]
                table = unit.sql.split("FROM ", 1)[1].split(" ", 1)[0]
                self.where[user_id] = (database, table)
        (self.a, self.a2), self.b = by_source["ds_0"], by_source["ds_1"][0]

    def reset(self) -> None:
        for database, table in set(self.where.values()):
            conn = mariadb_connect(database=database)
            with conn.cursor() as cur:
                cur.execute(f"DELETE FROM {table}")
            conn.commit()
            conn.close()
        for user_id, (database, table) in self.where.items():
            conn = mariadb_connect(database=database)
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {table} (order_id, user_id, amount) VALUES (%s, %s, %s)",
                            (user_id, user_id, START))  # fmt: skip
            conn.commit()
            conn.close()

    def balance(self, user_id: int) -> int:
        database, table = self.where[user_id]
        return int(mariadb_rows(database, f"SELECT amount FROM {table} WHERE user_id = %s", (user_id,))[0][0])

    def balances(self) -> tuple[int, int]:
        """The balances of ``a`` and ``b``, read from the physical tables."""
        return self.balance(self.a), self.balance(self.b)

    def lock_waits(self) -> int:
        """Transactions of the server waiting for a row lock."""
        database = self.where[self.a][0]
        innodb_trx_fresh()
        return int(mariadb_rows(database, "SELECT COUNT(*) FROM information_schema.innodb_trx "
                                          "WHERE trx_state = 'LOCK WAIT'")[0][0])  # fmt: skip

    def prepared_branches(self) -> list[tuple[Any, ...]]:
        """XA branches of these databases' transactions left prepared on the server (XA RECOVER)."""
        rows: list[tuple[Any, ...]] = []
        for database, _ in self.where.values():
            rows.extend(r for r in mariadb_rows(database, "XA RECOVER") if b"ddm-" in bytes(r[3]))
        return rows


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyProcess, ProxyProcess, Bank]]:
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases)
        create_tables(config)
        folder = tmp_path_factory.mktemp("proxy-xa")
        xa = ProxyProcess(write_config(proxy_config(databases, transactionMode="xa"), folder / "xa.yaml")).start()
        local = ProxyProcess(write_config(config, folder / "local.yaml")).start()
        try:
            yield xa, local, Bank(config, databases)
        finally:
            xa.stop()
            local.stop()


@pytest.fixture()
def accounts(bank: tuple[ProxyProcess, ProxyProcess, Bank]) -> Iterator[tuple[ProxyProcess, ProxyProcess, Bank]]:
    bank[2].reset()
    yield bank
    assert bank[2].prepared_branches() == []


def _transfer(cur: Any, bank: Bank, amount: int) -> None:
    cur.execute("UPDATE t_order SET amount = amount - %s WHERE user_id = %s", (amount, bank.a))  # ds_0
    cur.execute("UPDATE t_order SET amount = amount + %s WHERE user_id = %s", (amount, bank.b))  # ds_1


def test_a_transfer_over_two_data_sources_commits_on_both(accounts: tuple[ProxyProcess, ProxyProcess, Bank]) -> None:
    xa, _, bank = accounts
    conn = connect(xa.port)  # PyMySQL: autocommit off, so the first statement opens the transaction
    with conn.cursor() as cur:
        cur.execute("SELECT @@transaction_type")
        assert cur.fetchone() == ("XA",)
        _transfer(cur, bank, 25)
        assert conn.server_status & 1  # SERVER_STATUS_IN_TRANS
        assert bank.balances() == (START, START)  # nothing visible before the commit
        cur.execute("SELECT amount FROM t_order WHERE user_id = %s", (bank.a,))
        assert cur.fetchone() == (START - 25,)  # the transaction reads its own write
        conn.commit()
    assert bank.balances() == (START - 25, START + 25)
    with conn.cursor() as cur:  # BEGIN .. COMMIT as statements, the same way
        cur.execute("BEGIN")
        _transfer(cur, bank, 5)
        cur.execute("COMMIT")
    conn.close()
    assert bank.balances() == (START - 30, START + 30)


def test_a_rollback_leaves_both_untouched(accounts: tuple[ProxyProcess, ProxyProcess, Bank]) -> None:
    xa, _, bank = accounts
    conn = connect(xa.port)
    with conn.cursor() as cur:
        _transfer(cur, bank, 40)
        conn.rollback()
        assert bank.balances() == (START, START)
        _transfer(cur, bank, 40)
        with pytest.raises(pymysql.err.IntegrityError) as duplicate:  # a failed statement: the transaction goes on
            cur.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", (bank.a, bank.a))
        assert duplicate.value.args[0] == 1062
        cur.execute("ROLLBACK")
    assert bank.balances() == (START, START)
    with conn.cursor() as cur:
        _transfer(cur, bank, 7)
    conn.close()  # a client gone mid-transaction: both branches roll back
    assert bank.balances() == (START, START)


def test_local_mode_refuses_a_second_data_source_and_a_session_may_switch(
    accounts: tuple[ProxyProcess, ProxyProcess, Bank],
) -> None:
    _, local, bank = accounts
    conn = connect(local.port)
    with conn.cursor() as cur:
        cur.execute("SELECT @@transaction_type")
        assert cur.fetchone() == ("LOCAL",)
        cur.execute("UPDATE t_order SET amount = amount - 1 WHERE user_id = %s", (bank.a,))
        with pytest.raises(pymysql.err.MySQLError) as refused:
            cur.execute("UPDATE t_order SET amount = amount + 1 WHERE user_id = %s", (bank.b,))
        assert refused.value.args[0] == 1235 and refused.value.args[1].startswith("ddm: ")
        with pytest.raises(pymysql.err.MySQLError) as busy:  # not inside an open transaction
            cur.execute("SET transaction_type = 'XA'")
        assert busy.value.args[0] == 1568
        conn.rollback()
        assert bank.balances() == (START, START)
        cur.execute("SET VARIABLE transaction_type = XA")  # ShardingSphere-Proxy's DistSQL spelling
        cur.execute("SHOW VARIABLES LIKE 'transaction_type'")
        assert cur.fetchone() == ("transaction_type", "XA")
        _transfer(cur, bank, 3)
        conn.commit()
        assert bank.balances() == (START - 3, START + 3)
        cur.execute("SET DIST VARIABLE transaction_type = 'local'")  # ShardingSphere 5.2+
        cur.execute("UPDATE t_order SET amount = amount - 1 WHERE user_id = %s", (bank.a,))
        with pytest.raises(pymysql.err.MySQLError) as again:
            cur.execute("UPDATE t_order SET amount = amount + 1 WHERE user_id = %s", (bank.b,))
        assert again.value.args[0] == 1235
        conn.rollback()
        with pytest.raises(pymysql.err.MySQLError) as wrong:
            cur.execute("SET transaction_type = 'BASE'")
        assert wrong.value.args[0] == 1231
    conn.close()
    other = connect(local.port)  # the switch was this session's only
    with other.cursor() as cur:
        cur.execute("SELECT @@transaction_type")
        assert cur.fetchone() == ("LOCAL",)
    other.close()
    assert bank.balances() == (START - 3, START + 3)


def test_the_transaction_mode_field_is_checked_and_dumped() -> None:
    from ddm_core.errors import ConfigError
    from ddm_core.metadata.dump import to_native

    config = proxy_config(["db_a", "db_b"], transactionMode="XA")
    loaded = load_config(config)
    assert loaded.proxy.transaction_mode == "xa"
    assert to_native(loaded)["proxy"]["transactionMode"] == "xa"
    assert load_config(to_native(loaded, secrets="keep")).proxy.transaction_mode == "xa"
    assert "transactionMode" not in to_native(load_config(proxy_config(["db_a", "db_b"])))["proxy"]  # the default
    with pytest.raises(ConfigError) as refused:
        load_config(proxy_config(["db_a", "db_b"], transactionMode="base"))
    assert "proxy.transactionMode" in str(refused.value) and "local or xa" in str(refused.value)



def test_a_deadlock_rolls_the_xa_transaction_back_with_1213_and_the_session_goes_on(
    accounts: tuple[ProxyProcess, ProxyProcess, Bank],
) -> None:
    import threading
    import time

    xa, _, bank = accounts
    first, second = connect(xa.port), connect(xa.port)
    one, two = first.cursor(), second.cursor()
    update = "UPDATE t_order SET amount = amount + %s WHERE user_id = %s"
    one.execute(update, (1, bank.b))  # ds_1: an XA transaction with two branches
    one.execute(update, (1, bank.a))
    two.execute(update, (10, bank.a2))
    codes: dict[str, int] = {}

    def blocked() -> None:
        try:
            one.execute(update, (1, bank.a2))  # waits for two's lock
        except pymysql.err.MySQLError as exc:
            codes["one"] = exc.args[0]

    waiter = threading.Thread(target=blocked)
    waiter.start()
    deadline = time.monotonic() + 10  # a bound on the wait, not a measurement
    while bank.lock_waits() == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        two.execute(update, (10, bank.a))  # the cycle: MariaDB rolls one of them back
    except pymysql.err.MySQLError as exc:
        codes["two"] = exc.args[0]
    waiter.join(10)
    assert list(codes.values()) == [1213], codes
    winner, loser = (first, second) if "two" in codes else (second, first)
    winner.commit()
    loser.commit()  # nothing left to commit: the deadlock ended its transaction
    if "two" in codes:
        assert (bank.balance(bank.a), bank.balance(bank.a2), bank.balance(bank.b)) == (START + 1, START + 1, START + 1)
    else:
        assert (bank.balance(bank.a), bank.balance(bank.a2), bank.balance(bank.b)) == (START + 10, START + 10, START)
    with loser.cursor() as cur:  # the session goes on, in a new transaction
        cur.execute(update, (5, bank.b))
    loser.commit()
    first.close()
    second.close()
    assert bank.balance(bank.b) in (START + 6, START + 5)
