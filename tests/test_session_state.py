"""Session state never leaks from one caller to the next (docs/operations.md#session-state).

Each statement kind that changes a session is either refused (with the reason,
nothing sent) or runs on a pinned session whose connection is reset before it
goes back to the pool. The MariaDB tests use pools of one connection, so "the
next borrower" is provably the same physical connection (same
``CONNECTION_ID()``, no discard) and must see a fresh session.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddm_core.dbapi as dbapi
from ddm_core import load_config
from ddm_core.errors import ExecutionError, SessionStateError, UnsupportedSQLError
from ddm_core.execute import Executor
from ddm_core.execute.drivers import driver_for
from ddm_core.execute.session_state import code_of, effect_of
from test_execute_support import ORDER_DDL, assert_no_leaks, mysql_raw, sharding_config

# -- classification (no server) -------------------------------------------------------------------

CLASSIFIED = [
    ("SET autocommit = 0", "autocommit"),
    ("SET @@session.autocommit = 0", "autocommit"),
    ("SET LOCAL autocommit=0", "autocommit"),
    ("SET `autocommit` = 0", "autocommit"),
    ("SET sql_mode = 'A,B', autocommit = 1", "autocommit"),
    ("SET NAMES latin1", "character set"),
    ("SET CHARACTER SET latin1", "character set"),
    ("SET character_set_results = latin1", "character set"),
    ("/*!40101 SET NAMES utf8 */", "character set"),
    ("USE other_db", "database"),
    ("-- a comment\nUSE other_db", "database"),
    ("LOCK TABLES t WRITE", "table lock"),
    ("UNLOCK TABLES", "table lock"),
    ("BEGIN", "transaction control"),
    ("START TRANSACTION", "transaction control"),
    ("COMMIT", "transaction control"),
    ("ROLLBACK TO SAVEPOINT a", "transaction control"),
    ("SET SESSION sql_mode = ''", "session variable"),
    ("SET time_zone = '+00:00'", "session variable"),
    ("SET GLOBAL a = 1, SESSION b = 2", "session variable"),
    ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "session variable"),
    ("SET ROLE r", "session variable"),
    ("SET @x = 1", "user variable"),
    ("/* app=a,shard=ds_0 */ SET @x = 1", "user variable"),
    ("SELECT @x := user_id FROM t WHERE user_id = 1", "user variable"),
    ("UPDATE t SET a = (@x := a + 1)", "user variable"),
    ("SELECT a INTO @v FROM t", "user variable"),
    ("SET STATEMENT max_statement_time = 1 FOR SET @a = 1", "user variable"),
    ("SELECT GET_LOCK('k', 1)", "named lock"),
    ("SELECT RELEASE_LOCK('k')", "named lock"),
    ("SELECT RELEASE_ALL_LOCKS()", "named lock"),
    ("CREATE TEMPORARY TABLE tmp (a INT)", "temporary table"),
    ("CREATE TEMP TABLE tmp (a)", "temporary table"),
    ("DROP TEMPORARY TABLE tmp", "temporary table"),
    ("PREPARE s FROM 'SELECT 1'", "prepared statement"),
    ("DEALLOCATE PREPARE s", "prepared statement"),
    # Ordinary statements: no session left different.
    ("SELECT 1", None),
    ("SELECT @x, @@session.sql_mode", None),
    ("SELECT 'GET_LOCK(' AS t, \"@x := 1\" AS u", None),
    ("SELECT 1 FROM t WHERE a = 'it''s; USE x'", None),
    ("SELECT * FROM t -- USE x", None),
    ("SELECT my_get_lock(1)", None),
    ("SELECT IS_FREE_LOCK('k'), IS_USED_LOCK('k')", None),
    ("SELECT * FROM t WHERE id = 1 FOR UPDATE", None),
    ("SET GLOBAL max_connections = 100", None),
    ("SET @@global.autocommit = 0", None),
    ("SET GLOBAL TRANSACTION ISOLATION LEVEL READ COMMITTED", None),
    ("SET PASSWORD = 'x'", None),
    ("SET STATEMENT max_statement_time = 1 FOR SELECT 1", None),
]


@pytest.mark.parametrize(("sql", "kind"), CLASSIFIED)
def test_statements_are_classified_by_what_they_leave_in_the_session(sql: str, kind: str | None) -> None:
    effect = effect_of(sql)
    assert (effect.kind if effect is not None else None) == kind


# -- MariaDB: two data sources, one connection per pool ---------------------------------------------


@pytest.fixture(scope="module")
def databases() -> Iterator[list[str]]:
    tag = uuid.uuid4().hex[:8]
    names = [f"ddm_sess_{tag}_{i}" for i in range(2)]
    admin = mysql_raw()
    with admin.cursor() as cur:
        for name in names:
            cur.execute(f"CREATE DATABASE {name}")
            cur.execute(f"CREATE TABLE {name}.ddm_plain (a INT)")
    try:
        yield names
    finally:
        with admin.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


@pytest.fixture(scope="module")
def config(databases: list[str]) -> Any:
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(databases)}
    cfg = load_config(sharding_config(urls, tables=1, pool={"maxSize": 1, "minIdle": 1, "acquireTimeoutMs": 2000}))
    with Executor(cfg) as ex:
        ex.execute(ORDER_DDL).close()
    return cfg


@pytest.fixture()
def ex(config: Any, request: pytest.FixtureRequest) -> Iterator[Executor]:
    """The thread executor; tests marked ``on_both_runners`` also run on the asyncio executor."""
    if getattr(request, "param", "threads") == "asyncio":
        from runners import BlockingAsyncExecutor

        executor: Any = BlockingAsyncExecutor(config, timeout=5.0)
    else:
        executor = Executor(config, timeout=5.0)
    executor.execute("DELETE FROM t_order").close()
    yield executor
    try:
        assert_no_leaks(executor)
    finally:
        executor.close()


on_both_runners = pytest.mark.parametrize("ex", ["threads", "asyncio"], indirect=True)


LOCK = f"ddm_lock_{uuid.uuid4().hex[:8]}"


def session(ex: Executor) -> dict[str, Any]:
    """The session the next borrower of ``ds_0``'s one pooled connection sees."""
    sql = (
        "SELECT CONNECTION_ID(), DATABASE(), @ddm_x, @@session.sql_mode = @@global.sql_mode, "
        "@@session.time_zone = @@global.time_zone, @@autocommit, @@character_set_client, "
        f"IS_USED_LOCK('{LOCK}') IS NOT NULL"
    )
    with ex.execute(sql) as r:
        row = r.fetchone()
    assert row is not None
    keys = ("id", "database", "user_var", "sql_mode_default", "time_zone_default", "autocommit", "charset", "holds_lock")
    return dict(zip(keys, row))


def clean(database: str) -> dict[str, Any]:
    return {"database": database, "user_var": None, "sql_mode_default": 1, "time_zone_default": 1,
            "autocommit": 1, "charset": "utf8mb4", "holds_lock": 0}


def lock_is_free() -> bool:
    raw = mysql_raw()
    try:
        with raw.cursor() as cur:
            cur.execute("SELECT IS_FREE_LOCK(%s)", (LOCK,))
            row = cur.fetchone()
            return bool(row[0])
    finally:
        raw.close()


def user_var(tx: Any) -> Any:
    with tx.execute("SELECT @ddm_x") as r:
        return r.fetchone()[0]


def sql_mode_changed(tx: Any) -> bool:
    with tx.execute("SELECT @@session.sql_mode") as r:
        return r.fetchone()[0] == "ANSI_QUOTES"


def temp_rows(tx: Any) -> Any:
    with tx.execute("SELECT COUNT(*) FROM ddm_tmp") as r:
        return r.fetchone()[0]


def prepared(tx: Any) -> Any:
    with tx.execute("EXECUTE ddm_stmt") as r:
        return r.fetchone()[0]


# (statement, what it is, check inside the transaction, what the next borrower must see)
PINNABLE: list[tuple[str, str, Callable[[Any], Any], Any]] = [
    ("SET @ddm_x = 41", "user variable", user_var, 41),
    ("SELECT @ddm_x := 42", "user variable", user_var, 42),
    ("SELECT 43 INTO @ddm_x", "user variable", user_var, 43),
    ("SET SESSION sql_mode = 'ANSI_QUOTES'", "session variable", sql_mode_changed, True),
    ("SET time_zone = '+05:00'", "session variable",
     lambda tx: tx.execute("SELECT @@session.time_zone").fetchone()[0], "+05:00"),
    (f"SELECT GET_LOCK('{LOCK}', 1)", "named lock", lambda tx: lock_is_free(), False),
    ("CREATE TEMPORARY TABLE ddm_tmp (a INT)", "temporary table", temp_rows, 0),
    ("PREPARE ddm_stmt FROM 'SELECT 7'", "prepared statement", prepared, 7),
]


@pytest.mark.parametrize(("sql", "kind", "inside", "expected"), PINNABLE, ids=[p[0].replace(LOCK, "ddm_lock") for p in PINNABLE])
@on_both_runners
def test_session_changes_run_pinned_and_the_connection_is_reset(
    ex: Executor, databases: list[str], sql: str, kind: str, inside: Callable[[Any], Any], expected: Any
) -> None:
    before = session(ex)
    assert {k: v for k, v in before.items() if k != "id"} == clean(databases[0])
    borrows = ex.pool_stats()["ds_0"].borrows

    # On a pooled connection: refused, nothing sent, and the message says where it can run.
    with pytest.raises(SessionStateError) as info:
        ex.execute(sql)
    err = info.value
    assert err.kind == kind and err.pinned is False
    assert "transaction" in str(err) and "'ds_0'" in str(err) and "nothing was sent" in str(err)
    assert ex.pool_stats()["ds_0"].borrows == borrows

    # Pinned to a transaction: it runs, and its effect is there for the transaction's statements.
    with ex.transaction() as tx:
        tx.execute(sql).close()
        assert inside(tx) == expected
        with tx.execute("SELECT CONNECTION_ID()") as r:
            assert r.fetchone() == (before["id"],)  # the pool's one connection

    # The next borrower gets the same connection, reset.
    after = session(ex)
    assert after["id"] == before["id"]
    assert {k: v for k, v in after.items() if k != "id"} == clean(databases[0])
    assert lock_is_free()
    assert ex.pool_stats()["ds_0"].discards == 0
    with ex.transaction() as tx:  # and nothing of it survives for a transaction either
        if kind == "temporary table":
            with pytest.raises(ExecutionError, match="ddm_tmp"):
                tx.execute("SELECT COUNT(*) FROM ddm_tmp")
        elif kind == "prepared statement":
            with pytest.raises(ExecutionError, match="ddm_stmt"):
                tx.execute("EXECUTE ddm_stmt")
        elif kind == "user variable":
            assert user_var(tx) is None


REFUSED = [
    ("SET autocommit = 0", "autocommit", "autocommit="),
    ("SET @@autocommit = 0", "autocommit", "autocommit="),
    ("SET NAMES latin1", "character set", "utf8mb4"),
    ("SET CHARACTER SET latin1", "character set", "utf8mb4"),
    ("SET character_set_client = latin1", "character set", "utf8mb4"),
    ("USE {other}", "database", "url"),
    ("LOCK TABLES ddm_plain WRITE", "table lock", "FOR UPDATE"),
    ("UNLOCK TABLES", "table lock", "FOR UPDATE"),
    ("BEGIN", "transaction control", "conn.commit()"),
    ("START TRANSACTION", "transaction control", "conn.commit()"),
    ("COMMIT", "transaction control", "conn.commit()"),
    ("ROLLBACK", "transaction control", "conn.commit()"),
]


@pytest.mark.parametrize(("sql", "kind", "advice"), REFUSED, ids=[r[0] for r in REFUSED])
@on_both_runners
def test_kinds_that_would_break_routing_or_transactions_are_refused_everywhere(
    ex: Executor, databases: list[str], sql: str, kind: str, advice: str
) -> None:
    sql = sql.format(other=databases[1])
    before = session(ex)
    borrows = ex.pool_stats()["ds_0"].borrows
    with pytest.raises(SessionStateError) as info:
        ex.execute(sql)
    assert info.value.kind == kind and advice in str(info.value) and "nothing was sent" in str(info.value)
    assert ex.pool_stats()["ds_0"].borrows == borrows

    # Inside a transaction too — and the transaction is untouched: no implicit commit happened.
    with ex.transaction() as tx:
        tx.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", (1, 1)).close()
        with pytest.raises(SessionStateError) as info:
            tx.execute(sql)
        assert info.value.pinned is True
        assert tx.active
        tx.rollback()
    with ex.execute("SELECT COUNT(*) FROM t_order") as r:
        assert r.fetchone() == (0,)
    after = session(ex)
    assert after == before


@on_both_runners
def test_lock_tables_on_a_configured_table_is_refused_too(ex: Executor) -> None:
    with pytest.raises(UnsupportedSQLError):
        ex.execute("LOCK TABLES t_order WRITE")


@on_both_runners
def test_what_fault_injection_found_cannot_happen(ex: Executor, databases: list[str]) -> None:
    """The three faults found: manual commit left on, a USE moving later writes, a lock held by an idle connection."""
    with pytest.raises(SessionStateError):
        ex.execute("SET autocommit = 0")
    with pytest.raises(SessionStateError):
        ex.execute(f"USE {databases[1]}")
    with pytest.raises(SessionStateError):
        ex.execute(f"SELECT GET_LOCK('{LOCK}', 0)")
    user = next(u for u in range(1, 1000)
                if ex.router.route("SELECT 1 FROM t_order WHERE user_id = %s", (u,)).units[0].data_source == "ds_0")
    with ex.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", (7, user)) as r:
        assert r.rowcount == 1
    raw = mysql_raw(databases[0])  # behind ddm-core's back: the row is committed, in ds_0's database
    try:
        with raw.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM t_order WHERE order_id = 7")
            assert cur.fetchone() == (1,)
    finally:
        raw.close()
    assert lock_is_free()


def test_dbapi_connections_pin_session_state_to_their_transaction(ex: Executor) -> None:
    auto = dbapi.connect(executor=ex, autocommit=True)
    try:
        with pytest.raises(dbapi.NotSupportedError) as info:
            auto.cursor().execute("SET @ddm_x = 5")
        assert isinstance(info.value, SessionStateError) and "conn.begin()" in str(info.value)
        auto.begin()  # an explicit transaction pins even in autocommit mode
        cur = auto.cursor()
        cur.execute("SET @ddm_x = 5")
        cur.execute("SELECT @ddm_x")
        assert cur.fetchall() == [(5,)]
        auto.commit()
        cur.execute("SELECT @ddm_x")
        assert cur.fetchall() == [(None,)]
    finally:
        auto.close()

    conn = dbapi.connect(executor=ex)  # autocommit off: every statement runs in the implicit transaction
    try:
        cur = conn.cursor()
        cur.execute("SET @ddm_x = 6")
        cur.execute("SELECT @ddm_x")
        assert cur.fetchall() == [(6,)]
        conn.rollback()
        cur.execute("SELECT @ddm_x")
        assert cur.fetchall() == [(None,)]  # the state lasted as long as the transaction
        conn.commit()
    finally:
        conn.close()


def test_a_connection_that_cannot_be_reset_is_discarded(ex: Executor, monkeypatch: pytest.MonkeyPatch) -> None:
    first = session(ex)["id"]
    driver = driver_for("mysql")

    def broken(raw: Any, endpoint: Any) -> bool:
        raise OSError("reset failed")

    monkeypatch.setattr(driver, "reset_session", broken)
    with ex.transaction() as tx:
        tx.execute("SET @ddm_x = 1").close()
    assert ex.pool_stats()["ds_0"].discards == 1
    monkeypatch.undo()
    after = session(ex)
    assert after["id"] != first and after["user_var"] is None


def test_mysql_reset_restores_the_connection_recipe(config: Any, databases: list[str]) -> None:
    """The driver's reset puts back database, character set and autocommit, whatever the session did."""
    endpoint = config.data_sources["ds_0"].primary
    driver = driver_for(endpoint.dialect)
    raw = driver.connect(endpoint, 2.0)
    try:
        with raw.cursor() as cur:
            for sql in (f"USE {databases[1]}", "SET NAMES latin1", "SET autocommit = 0", "SET @ddm_x = 1",
                        f"SELECT GET_LOCK('{LOCK}', 1)", "CREATE TEMPORARY TABLE ddm_tmp (a INT)"):
                cur.execute(sql)
        thread = raw.thread_id()
        assert driver.reset_session(raw, endpoint) is True
        assert raw.thread_id() == thread and raw.get_autocommit()
        with raw.cursor() as cur:
            cur.execute("SELECT DATABASE(), @@character_set_client, @@character_set_results, @@autocommit, @ddm_x")
            assert cur.fetchone() == (databases[0], "utf8mb4", "utf8mb4", 1, None)
        assert lock_is_free()
    finally:
        raw.close()


# -- SQLite: temporary tables ---------------------------------------------------------------------------


def test_sqlite_temporary_tables_are_pinned_and_dropped(tmp_path: Path) -> None:
    urls = {"ds_0": f"sqlite:///{tmp_path / 'a.db'}", "ds_1": f"sqlite:///{tmp_path / 'b.db'}"}
    config = load_config(sharding_config(urls, tables=1, pool={"maxSize": 1, "minIdle": 1, "acquireTimeoutMs": 1000}))
    with Executor(config) as ex:
        with pytest.raises(SessionStateError) as info:
            ex.execute("CREATE TEMP TABLE ddm_tmp (a)")
        assert info.value.kind == "temporary table"
        with ex.transaction() as tx:
            tx.execute("CREATE TEMP TABLE ddm_tmp (a)").close()
            tx.execute("INSERT INTO ddm_tmp (a) VALUES (1)").close()
            with tx.execute("SELECT COUNT(*) FROM ddm_tmp") as r:
                assert r.fetchone() == (1,)
        with pytest.raises(ExecutionError, match="ddm_tmp"):
            ex.execute("SELECT COUNT(*) FROM ddm_tmp")
        assert ex.pool_stats()["ds_0"].discards == 0  # reset in place, not reconnected
        assert_no_leaks(ex)


# -- code_of: what the classification reads -------------------------------------------------------

_PIECES = st.sampled_from([
    "SET ", "@x := 1", "autocommit", " ", "\n", "'zq''s'", '"q\\"x"', "`na``me`", "/* c */", "/*!40101 SET NAMES utf8 */",
    "-- note\n", "--x", "# hash\n", "a-b", "10/2", "%s", ", ", "(", ")", "'unclosed", "/* unclosed",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=12))
def test_code_of_blanks_strings_and_comments_and_keeps_the_rest(pieces: list[str]) -> None:
    sql = "".join(pieces)
    code = code_of(sql)
    ordinary = [p for p in pieces if not any(ch in p for ch in "`'\"/#-")]
    if ordinary == pieces:  # no quote or comment: the text itself, upper-cased
        assert code == sql.upper()
    if not {"'unclosed", "/* unclosed"} & set(pieces):  # every string and comment closes
        # strings blanked, comments dropped ("ZQ" and " C " occur in no other piece, nor across two)
        assert "ZQ" not in code and " C " not in code.replace("/*", "")
        if "/*!40101 SET NAMES utf8 */" in pieces:
            assert "SET NAMES UTF8" in code  # an executable comment is kept: MySQL runs it


def test_code_of_examples() -> None:
    assert code_of("set @a := 'x' -- c\n, `auto``commit` = 0 /* y */ # z") == "SET @A := ''  \n, AUTO_COMMIT = 0    "
    assert code_of("INSERT INTO t VALUES (%s, %s), (%s, %s)") == "INSERT INTO T VALUES (%S, %S), (%S, %S)"
    assert code_of("select 10-2, 4/2, 'a''b' \"c\"") == "SELECT 10-2, 4/2, '' \"\""

