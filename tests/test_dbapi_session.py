"""What a DB-API connection answers about its own session (``session_facts.py``), on both facades.

The statements SQLAlchemy and other clients send around their own (``SELECT VERSION()``,
``SET NAMES``, ``SET SESSION TRANSACTION ISOLATION LEVEL`` then ``COMMIT``...) are answered for
the logical session; the isolation level is proven on the server, by what a transaction sees of
a concurrent commit.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from ddm_core import errors
from ddm_core.session_facts import (
    Control, Isolation, Nothing, Rows, SessionLevel, emulated_facts, facts_of, local_answer, session_statement,
)
from test_dbapi import connect_for
from test_execute_support import (  # noqa: F401 - fixtures
    any_runner_executor,
    mysql_async_executor,
    mysql_config,
    mysql_databases,
    mysql_executor,
    mysql_raw,
    sqlite_async_executor,
    sqlite_config,
    sqlite_executor,
)


@pytest.fixture()
def conn(any_runner_executor: Any) -> Iterator[Any]:
    c = connect_for(any_runner_executor)(executor=any_runner_executor)
    yield c
    c.close()


@pytest.fixture(params=["thread", "asyncio"])
def mysql_connect(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Callable[..., Any]]]:
    """A MariaDB executor and its facade's ``connect``, on each runner."""
    ex = request.getfixturevalue("mysql_executor" if request.param == "thread" else "mysql_async_executor")
    yield ex, connect_for(ex)


def one(conn: Any, sql: str, params: Any = None) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall() if cur.description is not None else []


# -- the decisions, without a server ----------------------------------------------------------


def test_facts_drop_the_quoting_modes_the_router_does_not_read() -> None:
    facts = facts_of([("sql_mode", "ANSI_QUOTES,STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES"), ("version", "10.11.19-MariaDB"),
                      ("tx_isolation", "READ-COMMITTED"), ("lower_case_table_names", "1"),
                      ("collation_connection", "utf8mb4_general_ci")])  # fmt: skip
    assert facts.sql_mode == "STRICT_TRANS_TABLES"
    assert (facts.version, facts.isolation, facts.lower_case_table_names) == ("10.11.19-MariaDB", "READ COMMITTED", 1)


def test_statements_the_session_answers(mysql_config: Any) -> None:
    facts = facts_of([("version", "8.0.36"), ("transaction_isolation", "REPEATABLE-READ"), ("sql_mode", "")])

    def answer(sql: str, isolation: str | None = None) -> Any:
        classified = session_statement(sql)
        return None if classified is None else local_answer(sql, classified, mysql_config, facts, isolation, False)

    assert answer("SELECT order_id FROM t_order WHERE user_id = %s") is None  # the router's
    assert answer("SELECT @@version, DATABASE() AS db") == Rows(("@@version", "db"), [("8.0.36", "logic_db")])
    assert answer("SELECT @@session.transaction_isolation", "READ COMMITTED") == Rows(
        ("@@session.transaction_isolation",), [("READ-COMMITTED",)]
    )
    assert answer("SELECT @@max_allowed_packet") is None  # not the facade's: the server answers
    assert answer("SELECT LAST_INSERT_ID()") is None
    assert answer("SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci") == Nothing()
    assert answer("SET NAMES latin1") is None  # routed: refused as a character set change
    assert answer("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED") == Isolation("READ COMMITTED", True)
    assert answer("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE") == Isolation("SERIALIZABLE", False)
    assert answer("SET @@session.tx_isolation = 'READ-UNCOMMITTED'") == Isolation("READ UNCOMMITTED", True)
    assert answer("set session sql_mode = 'ANSI'") is None  # another session variable: the executor's rules
    assert [answer(s) for s in ("BEGIN", "COMMIT WORK", "ROLLBACK")] == [Control("BEGIN"), Control("COMMIT"),
                                                                         Control("ROLLBACK")]  # fmt: skip
    assert answer("USE logic_db") == Nothing() and answer("USE other") is None
    shown = answer("SHOW VARIABLES LIKE 'tx\\_%'")
    assert shown == Rows(("Variable_name", "Value"), [("tx_isolation", "REPEATABLE-READ")])
    with pytest.raises(errors.TransactionError, match="unknown transaction isolation level"):
        answer("SET transaction_isolation = 'SOMETIMES'")


def test_a_level_for_the_next_transaction_is_used_once() -> None:
    level = SessionLevel()
    level.set(Isolation("READ COMMITTED", session=True))
    level.set(Isolation("SERIALIZABLE", session=False))
    assert level.current == "SERIALIZABLE"
    assert level.take() == "SERIALIZABLE" and level.take() == "READ COMMITTED"


def test_sqlite_sources_report_mysql_8_and_serializable(sqlite_config: Any) -> None:
    facts = emulated_facts(sqlite_config)
    assert facts.version.startswith("8.0.") and "ddm-core" in facts.version
    assert facts.isolation == "SERIALIZABLE"


# -- both facades, both backends ----------------------------------------------------------------


def test_connect_probes_are_answered_for_the_logical_session(conn: Any, any_runner_executor: Any) -> None:
    assert conn.character_set_name() == "utf8mb4"
    assert one(conn, "SELECT DATABASE()") == [("logic_db",)]
    [(version,)] = one(conn, "SELECT VERSION()")
    backend = any_runner_executor.config.data_sources["ds_0"].primary.dialect
    if backend == "sqlite":
        assert "ddm-core" in version
    else:  # the server's own, as SQLAlchemy must see it to pick MariaDB's flavour
        raw = mysql_raw()
        with raw.cursor() as cur:
            cur.execute("SELECT VERSION()")
            assert (version,) == cur.fetchone()
        raw.close()
    for sql in ("SET NAMES utf8mb4", "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci'", "USE logic_db"):
        with conn.cursor() as cur:
            assert cur.execute(sql) == 0 and cur.description is None
    assert one(conn, "SHOW VARIABLES LIKE 'character_set_client'") == [("character_set_client", "utf8mb4")]
    assert not conn.in_transaction  # none of it opened a transaction
    with pytest.raises(errors.SessionStateError, match="character set"):
        one(conn, "SET NAMES latin1")


def test_begin_and_commit_statements_end_the_connections_own_transaction(conn: Any, any_runner_executor: Any) -> None:
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 7, 10)")
        assert conn.in_transaction
        cur.execute("BEGIN")  # commits the open transaction first, as on MySQL, and opens one
        cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (2, 7, 20)")
        cur.execute("ROLLBACK")
        assert not conn.in_transaction
        cur.execute("SELECT order_id FROM t_order WHERE user_id = 7")
        assert cur.fetchall() == [(1,)]
        cur.execute("UPDATE t_order SET amount = 11 WHERE user_id = 7")
        cur.execute("COMMIT")
    assert committed_amounts(any_runner_executor) == [(11,)]


def test_ddl_inside_a_transaction_commits_it_first(conn: Any, any_runner_executor: Any) -> None:
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (3, 7, 30)")
        cur.execute("CREATE TABLE IF NOT EXISTS t_scratch (id INT PRIMARY KEY)")  # on its own, after a COMMIT
        assert not conn.in_transaction
        cur.execute("DROP TABLE t_scratch")
    assert committed_amounts(any_runner_executor) == [(30,)]


def committed_amounts(ex: Any) -> list[Any]:
    """User 7's amounts as another connection sees them (what was committed)."""
    other = connect_for(ex)(executor=ex, autocommit=True)
    try:
        return one(other, "SELECT amount FROM t_order WHERE user_id = 7")  # type: ignore[no-any-return]
    finally:
        other.close()


def test_lastrowid_is_the_first_generated_key(conn: Any) -> None:
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (user_id, amount) VALUES (%s, %s), (%s, %s)", (7, 1, 7, 2))
        assert cur.generated_keys and cur.lastrowid == cur.generated_keys[0]
    conn.rollback()


def sees_concurrent_commit(ex: Any, connect: Callable[..., Any], setup: str | None, **options: Any) -> bool:
    """A transaction reads user 7's order, another connection updates it and commits, the transaction reads again."""
    user = 7
    unit = ex.router.route("SELECT amount FROM t_order WHERE user_id = %s", (user,)).units[0]
    database = ex.config.data_sources[unit.data_source].primary.database
    table = unit.sql.split("FROM ")[1].split()[0]
    conn = connect(executor=ex, **options)
    try:
        if setup:
            one(conn, setup)
        [(before,)] = one(conn, "SELECT amount FROM t_order WHERE user_id = %s", (user,))
        raw = mysql_raw(database)
        with raw.cursor() as cur:
            cur.execute(f"UPDATE {table} SET amount = amount + 1 WHERE user_id = %s", (user,))
        raw.close()
        [(after,)] = one(conn, "SELECT amount FROM t_order WHERE user_id = %s", (user,))
        conn.commit()
        return bool(after != before)
    finally:
        conn.close()


def seed_order(ex: Any, connect: Callable[..., Any]) -> None:
    seed = connect(executor=ex, autocommit=True)
    one(seed, "INSERT INTO t_order (order_id, user_id, amount) VALUES (5, 7, 1)")
    seed.close()


@pytest.mark.parametrize("statement", ["SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                                       "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"])  # fmt: skip
def test_the_isolation_level_holds_on_the_server(mysql_connect: tuple[Any, Callable[..., Any]], statement: str) -> None:
    """READ COMMITTED sees a concurrent commit inside the transaction; the default REPEATABLE READ does not."""
    ex, connect = mysql_connect
    seed_order(ex, connect)
    assert sees_concurrent_commit(ex, connect, statement)  # the transaction opened at READ COMMITTED
    assert not sees_concurrent_commit(ex, connect, None)  # a new connection: the server's REPEATABLE READ


def test_xa_transactions_open_their_branches_at_the_level(mysql_executor: Any) -> None:
    import ddm_core.dbapi as dbapi

    seed_order(mysql_executor, dbapi.connect)
    level = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
    assert sees_concurrent_commit(mysql_executor, dbapi.connect, level, transaction_mode="xa")
    assert not sees_concurrent_commit(mysql_executor, dbapi.connect, None, transaction_mode="xa")
