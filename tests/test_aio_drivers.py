"""The asyncio drivers against real servers: the same rows, types, session and errors as the thread runner.

MariaDB (asyncmy) in a database of this module's own, dropped afterwards; SQLite (aiosqlite) files
in ``tmp_path``; PostgreSQL (psycopg's AsyncConnection) on the local server; a private ``mariadbd``
stopped mid-statement for "the server went away". Every MySQL column type is read through
``ddm_core.Executor`` (the thread runner) and through the asyncio driver, buffered and streamed, and
compared value by value, types included.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import signal
import sqlite3
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from aio_support import SilentServer, closed_port, mysql_endpoint, pg_endpoint, run, sqlite_endpoint
from ddm_core import Executor, load_config
from ddm_core.aio import AsyncDriver, UnitAnswer, async_driver_for
from ddm_core.aio.drivers import AsyncMySQLDriver
from ddm_core.dialects import dialect_for
from ddm_core.errors import (
    ConfigError,
    DataSourceUnavailableError,
    DuplicateKeyError,
    ExecutionError,
    MissingExtraError,
)
from ddm_core.execute.driver_errors import ends_connection, is_disconnect, map_driver_error
from ddm_core.execute.drivers import driver_for
from ddm_core.execute.mysql_connect import open_mysql
from ddm_core.execute.pools import discard_on
from ddm_core.metadata.model import Endpoint
from services import fresh_mariadb_databases, mariadb_connect, mariadb_rows, require_module, require_service
from test_execute_support import running_mariadb

asyncmy_errors: Any = require_module("asyncmy.errors", "the asyncio MySQL driver (the aio extra)")

# -- MariaDB ------------------------------------------------------------------------------------

ALL_TYPES_DDL = """CREATE TABLE t_all (
  id INT PRIMARY KEY AUTO_INCREMENT, ti TINYINT, tb TINYINT(1), si SMALLINT UNSIGNED, mi MEDIUMINT,
  i INT, bi BIGINT UNSIGNED, sbi BIGINT, dc DECIMAL(65,30), dc0 DECIMAL(10,0), fl FLOAT, db DOUBLE,
  d DATE, dt DATETIME, dt6 DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME, tm3 TIME(3), y YEAR,
  bt BIT(1), bt9 BIT(9), bl BLOB, tbl TINYBLOB, mbl MEDIUMBLOB, lbl LONGBLOB, bn BINARY(3), vb VARBINARY(10),
  j JSON, e ENUM('a','b'), s SET('x','y','z'), ch CHAR(5), vc VARCHAR(20), tx TEXT, mtx MEDIUMTEXT, ltx LONGTEXT,
  nl INT NULL, u UUID, inet INET6, vlat VARCHAR(10) CHARACTER SET latin1, vbin VARCHAR(10) COLLATE utf8mb4_bin,
  g POINT NULL
) DEFAULT CHARSET=utf8mb4"""

ALL_TYPES_ROWS = [
    """INSERT INTO t_all VALUES (NULL, -128, 1, 65535, -8388608, -2147483648, 18446744073709551615,
      -9223372036854775808, '12345678901234567890123456789.123456789012345678901234567890', 42, 1.25, 2.5e300,
      '2024-02-29', '2024-02-29 23:59:59', '2024-02-29 23:59:59.999999', '2024-02-29 23:59:59.123',
      '-838:59:59', '12:34:56.789', 2024, b'1', b'100000001', x'00ff00', x'01', x'0203', x'deadbeef', 'ab',
      x'0001', '{"k": [1, 2, "é"]}', 'b', 'x,z', 'ab', 'héllo 😀', 'text é', 'medium', 'long 😀', NULL,
      '123e4567-e89b-12d3-a456-426614174000', '::1', 'café', 'BiN', POINT(1, 2))""",
    """INSERT INTO t_all VALUES (NULL, 127, 0, 0, 8388607, 2147483647, 0, 9223372036854775807, '-0.5', -1,
      -0.0, -1e-300, '0000-00-00', '0000-00-00 00:00:00', '1000-01-01 00:00:00.000001', NULL, '00:00:00',
      '-00:00:00.001', 0, b'0', b'0', '', '', '', '', '', '', 'null', 'a', '', '', '', '', '', '', 0,
      '00000000-0000-0000-0000-000000000000', '::', '', '', NULL)""",
    "INSERT INTO t_all (id) VALUES (NULL)",
]


@pytest.fixture(scope="module")
def mariadb() -> Iterator[str]:
    """A database of this module's own on the local MariaDB, holding ``t_all``; dropped afterwards."""
    with fresh_mariadb_databases(1) as (name,):
        conn = mariadb_connect(database=name)
        with conn.cursor() as cur:
            cur.execute(ALL_TYPES_DDL)
            for sql in ALL_TYPES_ROWS:
                cur.execute(sql)
            cur.execute("CREATE TABLE t_kv (k INT PRIMARY KEY, v VARCHAR(20))")
        conn.close()
        yield name


def _mysql() -> AsyncDriver:
    return async_driver_for("mysql")


def _typed(rows: Any) -> list[list[tuple[str, str]]]:
    """Each value with its type, as text: equal lists mean equal values of equal types."""
    return [[(type(v).__name__, repr(v)) for v in row] for row in rows]


def test_every_mysql_column_type_reads_as_the_thread_executor_reads_it(mariadb: str) -> None:
    config = load_config({
        "dataSources": {"ds_0": {"url": f"mysql://127.0.0.1:3306/{mariadb}", "username": "root", "password": ""}},
        "singleTables": {"t_all": "ds_0"},
    })
    executor = Executor(config)
    try:
        with executor.execute("SELECT * FROM t_all ORDER BY id") as result:
            thread_description = result.description
            thread_rows = result.fetchall()
    finally:
        executor.close()
    assert len(thread_rows) == len(ALL_TYPES_ROWS)

    async def both_ways() -> tuple[UnitAnswer, Any, list[Any]]:
        driver = _mysql()
        raw = await driver.connect(mysql_endpoint(mariadb), 2.0)
        try:
            buffered = await driver.execute(raw, "SELECT * FROM t_all ORDER BY id", None)
            stream = await driver.open_stream(raw, "SELECT * FROM t_all ORDER BY id", None)
            streamed: list[Any] = []
            while batch := await stream.fetchmany(2):
                streamed.extend(batch)
            assert await stream.close(100)
            return buffered, stream.description, streamed
        finally:
            await driver.close(raw)

    buffered, stream_description, streamed = run(both_ways())
    assert buffered.description == thread_description  # names, type codes, lengths, scale, nullability
    assert stream_description == thread_description
    assert _typed(buffered.rows) == _typed(thread_rows)
    assert _typed(streamed) == _typed(thread_rows)
    assert buffered.rowcount == len(thread_rows) and buffered.lastrowid is None
    assert all(type(r) is tuple for r in buffered.rows) and type(buffered.rows) is list
    # The long types are where asyncmy's own description differs (a C int): PyMySQL's length is kept.
    lengths = {column[0]: column[3] for column in buffered.description}
    assert lengths["ltx"] == lengths["lbl"] == lengths["j"] == 4294967295



def test_a_result_shape_seen_before_is_read_from_the_buffer_as_asyncmy_reads_it(mariadb: str) -> None:
    """aio/asyncmy_answers.py: the first result of a shape is asyncmy's own read, the next ones are taken
    from the receive buffer; rows, types, description, session status and errors are the same."""
    lookup = "SELECT k, (SELECT v FROM t_kv y WHERE y.k >= %s) AS v FROM t_kv x WHERE x.k = 1"

    async def go() -> None:
        driver = _mysql()
        raw = await driver.connect(mysql_endpoint(mariadb), 2.0)
        try:
            every = [await driver.execute(raw, "SELECT * FROM t_all ORDER BY id", None) for _ in range(3)]
            assert raw._result is None and len(raw.ddm_shapes) == 1  # the third was read here, not by asyncmy
            first = every[0]
            for answer in every[1:]:
                assert answer.description == first.description
                assert _typed(answer.rows) == _typed(first.rows) and type(answer.rows) is list
                assert answer.rowcount == len(first.rows) and answer.lastrowid is None
            assert raw._affected_rows == len(first.rows)
            # The status bits come from the packet that ends the rows, as asyncmy reads them.
            await driver.begin(raw)
            assert (await driver.execute(raw, "SELECT * FROM t_all ORDER BY id", None)).rows == first.rows
            assert raw._result is None and driver.in_transaction(raw)
            await driver.rollback(raw)
            assert not driver.in_transaction(raw)
            # An error after column packets seen before: asyncmy's own read raises it, the connection goes on.
            await driver.execute(raw, "INSERT INTO t_kv VALUES (1, 'a'), (2, 'b')", None)
            try:
                assert (await driver.execute(raw, lookup, (2,))).rows == [(1, "b")]
                assert (await driver.execute(raw, lookup, (2,))).rows == [(1, "b")]
                assert raw._result is None
                with pytest.raises(asyncmy_errors.OperationalError) as failed:
                    await driver.execute(raw, lookup, (1,))
                assert failed.value.args[0] == 1242  # subquery returns more than 1 row
                assert (await driver.execute(raw, lookup, (2,))).rows == [(1, "b")]
            finally:
                await driver.execute(raw, "DELETE FROM t_kv", None)
            # A procedure's result is followed by another: asyncmy reads both, the next statement is read here.
            await driver.execute(raw, "CREATE PROCEDURE two_results() BEGIN SELECT 1 AS a; SELECT 2 AS a; END", None)
            try:
                for _ in range(2):
                    assert (await driver.execute(raw, "CALL two_results()", None)).rows == [(1,)]
                    assert (await driver.execute(raw, "SELECT 3 AS a", None)).rows == [(3,)]
            finally:
                await driver.execute(raw, "DROP PROCEDURE two_results", None)
        finally:
            await driver.close(raw)

    run(go())


PARAM_CASES: list[tuple[str, Any]] = [
    ("SELECT %s, %s, %s, %s, %s", (1, -5, 2**64 - 1, 1.5, 1e300)),
    ("SELECT %s, %s, %s", (True, False, None)),
    ("SELECT %s, %s", ("a'b\\c\n😀", "%s %% ?")),
    ("SELECT %s, %s, %s, %s", (b"a'\x00\\\xff", bytearray(b"xy'"), memoryview(b"mv'"), b"")),
    ("SELECT %s, %s", (decimal.Decimal("1.50"), decimal.Decimal("-1E+3"))),
    ("SELECT %s, %s, %s", (datetime.date(2020, 1, 2), datetime.datetime(2020, 1, 2, 3, 4, 5),
                           datetime.datetime(2020, 1, 2, 3, 4, 5, 6))),
    ("SELECT %s, %s, %s, %s", (datetime.time(1, 2, 3), datetime.time(1, 2, 3, 4),
                               datetime.timedelta(days=-1, seconds=5), datetime.timedelta(hours=30, microseconds=7))),
    # Sequences: bytes inside one are binary (case-sensitive) on the thread runner; asyncmy's own
    # escaping sent them as text and refused lists and sets.
    ("SELECT 'Y' IN %s, 2 IN %s, 3 IN %s, 4 IN %s", ((b"y",), [1, 2], {3}, frozenset([4]))),
    ("SELECT %(a)s, %(b)s", {"a": 1, "b": b"x"}),
    ("SELECT 'a%%b', %s", (1,)),
    ("SELECT 'a%%b'", ()),
]


@pytest.mark.parametrize("sql, params", PARAM_CASES, ids=[str(i) for i in range(len(PARAM_CASES))])
def test_parameters_bind_as_on_the_thread_runner(mariadb: str, sql: str, params: Any) -> None:
    thread = open_mysql(host="127.0.0.1", port=3306, user="root", password="", database=mariadb, connect_timeout=2)
    try:
        with thread.cursor() as cur:
            cur.execute(sql, params)
            expected = (cur.description, cur.fetchall())
    finally:
        thread.close()

    async def go() -> UnitAnswer:
        driver = _mysql()
        raw = await driver.connect(mysql_endpoint(mariadb), 2.0)
        try:
            return await driver.execute(raw, sql, params)
        finally:
            await driver.close(raw)

    answer = run(go())
    assert answer.description == expected[0]
    assert _typed(answer.rows) == _typed(expected[1])


def test_parameters_that_do_not_fit_raise_where_the_call_is_awaited(mariadb: str) -> None:
    """The MySQL driver's execute binds parameters when called (it hands back asyncmy_answers' coroutine): a binding
    error still comes out of the await, as from a coroutine, as PyMySQL raises it, and nothing was sent."""
    thread = open_mysql(host="127.0.0.1", port=3306, user="root", password="", database=mariadb, connect_timeout=2)
    try:
        with thread.cursor() as cur, pytest.raises(Exception) as expected:
            cur.execute("SELECT %s, %s", (1,))
    finally:
        thread.close()

    async def go() -> tuple[BaseException, UnitAnswer]:
        driver = _mysql()
        raw = await driver.connect(mysql_endpoint(mariadb), 2.0)
        try:
            for params in ((1,), ("a",)):  # the all-int shortcut and PyMySQL's own binding
                call = driver.execute(raw, "SELECT %s, %s", params)  # no error yet
                with pytest.raises(Exception) as raised:
                    await call
                assert (type(raised.value), str(raised.value)) == (type(expected.value), str(expected.value))
            return raised.value, await driver.execute(raw, "SELECT %s", (2,))
        finally:
            await driver.close(raw)

    _, after = run(go())
    assert after.rows == [(2,)]  # the connection was left as it was


def test_dml_answers_row_counts_and_generated_keys(mariadb: str) -> None:
    async def go() -> list[UnitAnswer]:
        driver = _mysql()
        raw = await driver.connect(mysql_endpoint(mariadb), 2.0)
        try:
            await driver.execute(raw, "CREATE TABLE t_auto (id INT AUTO_INCREMENT PRIMARY KEY, v INT)", None)
            return [
                await driver.execute(raw, "INSERT INTO t_auto (v) VALUES (%s), (%s)", (1, 2)),
                await driver.execute(raw, "UPDATE t_auto SET v = v WHERE id > %s", (0,)),  # matched 2, changed 0
                await driver.execute(raw, "UPDATE t_auto SET v = v + 1", ()),
                await driver.execute(raw, "DROP TABLE t_auto", None),
            ]
        finally:
            await driver.close(raw)

    insert, unchanged, update, drop = run(go())
    assert (insert.description, insert.rows, insert.rowcount, insert.lastrowid) == (None, [], 2, 1)
    assert (unchanged.rowcount, unchanged.lastrowid) == (0, None)  # PyMySQL's flags: changed rows, not found rows
    assert (update.rowcount, drop.rowcount) == (2, 0)


SESSION = ("SELECT @@character_set_client, @@character_set_connection, @@character_set_results, "
           "@@collation_connection, @@autocommit, DATABASE(), @@sql_mode, @@time_zone, @@session.tx_isolation")


def test_the_session_is_the_thread_recipes_and_one_statement_is_one_statement(mariadb: str) -> None:
    thread = open_mysql(host="127.0.0.1", port=3306, user="root", password="", database=mariadb, connect_timeout=2)
    try:
        with thread.cursor() as cur:
            cur.execute(SESSION)
            expected = list(cur.fetchall())
            with pytest.raises(Exception) as refused:
                cur.execute("SELECT 1; SELECT 2")
    finally:
        thread.close()

    async def go() -> tuple[UnitAnswer, BaseException]:
        driver = _mysql()
        raw = await driver.connect(mysql_endpoint(mariadb), 2.0)
        try:
            session = await driver.execute(raw, SESSION, None)
            try:
                await driver.execute(raw, "SELECT 1; SELECT 2", None)
            except Exception as exc:
                return session, exc
            raise AssertionError("two statements ran as one")
        finally:
            await driver.close(raw)

    session, error = run(go())
    assert session.rows == expected
    assert error.args[0] == refused.value.args[0] == 1064  # a syntax error on both runners


def test_a_stream_is_read_as_it_is_fetched_and_its_connection_kept_when_drained(mariadb: str) -> None:
    async def go() -> None:
        driver = _mysql()
        raw = await driver.connect(mysql_endpoint(mariadb), 2.0)
        try:
            stream = await driver.open_stream(raw, "SELECT seq FROM seq_1_to_5000 WHERE seq > %s", (0,))
            assert stream.description[0][0] == "seq"
            assert [r[0] for r in await stream.fetchmany(3)] == [1, 2, 3]
            assert await stream.close(10_000)  # 4997 rows left, drained: the connection goes on
            assert (await driver.execute(raw, "SELECT 7", None)).rows == [(7,)]
            stream = await driver.open_stream(raw, "SELECT seq FROM seq_1_to_5000", None)
            await stream.fetchmany(10)
            assert not await stream.close(100)  # more left than the drain limit: drop the connection
            driver.close_now(raw)
            raw = await driver.connect(mysql_endpoint(mariadb), 2.0)
            stream = await driver.open_stream(raw, "SELECT seq FROM seq_1_to_5", None)
            assert len(await stream.fetchmany(10)) == 5  # the end seen: nothing to drain
            assert await stream.close(0)
            assert (await driver.execute(raw, "SELECT 8", None)).rows == [(8,)]
        finally:
            await driver.close(raw)

    run(go())


def test_transactions_and_in_transaction_from_the_status_bits(mariadb: str) -> None:
    async def go() -> None:
        driver = _mysql()
        raw = await driver.connect(mysql_endpoint(mariadb), 2.0)
        try:
            assert not driver.in_transaction(raw)
            await driver.begin(raw)
            assert driver.in_transaction(raw)
            await driver.execute(raw, "INSERT INTO t_kv VALUES (%s, %s)", (1, "rolled back"))
            await driver.rollback(raw)
            assert not driver.in_transaction(raw)
            await driver.begin(raw)
            await driver.execute(raw, "INSERT INTO t_kv VALUES (%s, %s)", (2, "kept"))
            await driver.commit(raw)
            assert not driver.in_transaction(raw)
            await driver.execute(raw, "DELETE FROM t_kv WHERE k = %s", (2,))
        finally:
            await driver.close(raw)

    run(go())
    assert mariadb_rows(mariadb, "SELECT k FROM t_kv") == []


def test_reset_session_gives_a_fresh_session_on_the_same_connection(mariadb: str) -> None:
    async def go() -> None:
        driver = _mysql()
        endpoint = mysql_endpoint(mariadb)
        raw = await driver.connect(endpoint, 2.0)
        try:
            thread_id = driver.thread_id(raw)
            before = (await driver.execute(raw, SESSION, None)).rows
            for sql in ("SET @x = 1", "SET SESSION sql_mode = ''", "SET NAMES latin1", "USE mysql",
                        "CREATE TEMPORARY TABLE t_tmp (a INT)", "SET autocommit = 0"):
                await driver.execute(raw, sql, None)
            assert await driver.reset_session(raw, endpoint)
            assert driver.thread_id(raw) == thread_id  # the same server session, reset in place
            assert (await driver.execute(raw, SESSION, None)).rows == before
            assert (await driver.execute(raw, "SELECT @x", None)).rows == [(None,)]
            with pytest.raises(asyncmy_errors.ProgrammingError):
                await driver.execute(raw, "SELECT * FROM t_tmp", None)
        finally:
            await driver.close(raw)

    run(go())


async def _processlist(database: str, thread_id: int) -> tuple[Any, ...] | None:
    rows = await asyncio.to_thread(
        mariadb_rows, database, "SELECT COMMAND, STATE, INFO FROM information_schema.PROCESSLIST WHERE ID = %s",
        (thread_id,),
    )
    return rows[0] if rows else None


def test_cancel_stops_a_sleep_on_the_server_and_keeps_the_connection(mariadb: str) -> None:
    async def go() -> None:
        driver = _mysql()
        endpoint = mysql_endpoint(mariadb)
        raw = await driver.connect(endpoint, 2.0)
        try:
            thread_id = driver.thread_id(raw)
            assert thread_id is not None
            sleeping = asyncio.create_task(driver.execute(raw, "SELECT SLEEP(5)", None))
            for _ in range(500):  # until the server runs it
                row = await _processlist(mariadb, thread_id)
                if row is not None and row[2] == "SELECT SLEEP(5)":
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the statement never showed in the processlist")
            assert await driver.cancel(endpoint, raw)
            with pytest.raises(asyncmy_errors.OperationalError) as info:
                await sleeping
            assert info.value.args[0] == 1317  # "Query execution was interrupted"
            mapped = map_driver_error(info.value, data_source="ds_0", endpoint="ds_0", sql="SELECT SLEEP(5)")
            assert type(mapped) is ExecutionError and not discard_on(info.value)
            command, _state, info_text = await _processlist(mariadb, thread_id) or (None, None, None)
            assert (command, info_text) == ("Sleep", None)  # idle: nothing runs on that session any more
            assert (await driver.execute(raw, "SELECT 1", None)).rows == [(1,)]  # KILL QUERY kept the session
        finally:
            await driver.close(raw)

    run(go())


def test_ping_and_close_now(mariadb: str) -> None:
    async def go() -> None:
        driver = _mysql()
        raw = await driver.connect(mysql_endpoint(mariadb), 2.0)
        thread_id = driver.thread_id(raw)
        assert thread_id is not None
        await driver.ping(raw)
        await asyncio.to_thread(mariadb_rows, mariadb, f"KILL CONNECTION {thread_id}")
        with pytest.raises(Exception) as info:
            await driver.ping(raw)
        assert is_disconnect(info.value) and discard_on(info.value)
        driver.close_now(raw)
        driver.close_now(raw)  # twice: nothing left to close, no raise
        with pytest.raises(Exception) as again:
            await driver.ping(raw)
        assert is_disconnect(again.value)

        other = await driver.connect(mysql_endpoint(mariadb), 2.0)
        other_id = driver.thread_id(other)
        assert other_id is not None
        driver.close_now(other)
        for _ in range(500):  # the server sees the session end (a QUIT, not an aborted connection)
            if await _processlist(mariadb, other_id) is None:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the closed connection is still on the server")

    run(go())


def test_errors_map_as_the_thread_runners(mariadb: str) -> None:
    async def go() -> list[BaseException]:
        driver = _mysql()
        raw = await driver.connect(mysql_endpoint(mariadb), 2.0)
        found: list[BaseException] = []
        try:
            await driver.execute(raw, "INSERT INTO t_kv VALUES (%s, %s)", (10, "a"))
            for sql, params in (("INSERT INTO t_kv VALUES (%s, %s)", (10, "again")), ("SELECT * FROM t_nope", None)):
                try:
                    await driver.execute(raw, sql, params)
                except Exception as exc:
                    found.append(exc)
            await driver.execute(raw, "DELETE FROM t_kv", None)
            thread_id = driver.thread_id(raw)
            await asyncio.to_thread(mariadb_rows, mariadb, f"KILL CONNECTION {thread_id}")
            try:
                await driver.execute(raw, "SELECT 1", None)
            except Exception as exc:
                found.append(exc)
        finally:
            await driver.close(raw)
        return found

    duplicate, unknown, gone = run(go())

    def mapped(exc: BaseException) -> Any:
        return map_driver_error(exc, data_source="ds_0", endpoint="ds_0", sql="...")

    assert isinstance(mapped(duplicate), DuplicateKeyError) and mapped(duplicate).code == 1062
    assert type(mapped(unknown)) is ExecutionError and mapped(unknown).code == 1146 and "t_nope" in str(mapped(unknown))
    assert not discard_on(duplicate) and not discard_on(unknown)
    assert isinstance(mapped(gone), DataSourceUnavailableError) and discard_on(gone)
    assert "ds_0" in str(mapped(gone))


def test_driver_errors_read_asyncmy_exceptions_as_pymysqls() -> None:
    """The driver_errors change on its own: asyncmy's classes and numbers, no server needed."""
    e = asyncmy_errors
    cases: list[tuple[BaseException, type[Exception], bool, bool]] = [
        (e.IntegrityError(1062, "Duplicate entry '1' for key 'PRIMARY'"), DuplicateKeyError, False, False),
        (e.OperationalError(2013, "Lost connection to MySQL server during query"), DataSourceUnavailableError, True, False),
        (e.OperationalError(2006, "MySQL server has gone away"), DataSourceUnavailableError, True, False),
        (e.OperationalError(2003, "Can't connect to MySQL server"), DataSourceUnavailableError, True, False),
        (e.OperationalError(1927, "Connection was killed"), DataSourceUnavailableError, True, False),
        (e.InterfaceError(0, "Not connected"), DataSourceUnavailableError, True, False),
        (e.OperationalError(1153, "Got a packet bigger than 'max_allowed_packet' bytes"), ExecutionError, False, True),
        (e.ProgrammingError(1146, "Table 'x.t' doesn't exist"), ExecutionError, False, False),
        (e.OperationalError(1317, "Query execution was interrupted"), ExecutionError, False, False),
    ]
    for exc, kind, disconnect, ends in cases:
        mapped = map_driver_error(exc, data_source="ds_0", endpoint="ds_0.replica[0]", sql="SELECT 1")
        assert type(mapped) is kind, exc
        assert mapped.context["code"] == exc.args[0] and "ds_0.replica[0]" in str(mapped)
        assert is_disconnect(exc) is disconnect and ends_connection(exc) is ends, exc
        assert discard_on(exc) is (disconnect or ends)


def test_url_options_are_read_as_the_thread_driver_reads_them(mariadb: str) -> None:
    """``useSSL=true``: TLS where offered (this server offers none); REQUIRED refused alike; timeouts honoured."""

    async def connect(options: str) -> Any:
        driver = _mysql()
        raw = await driver.connect(mysql_endpoint(mariadb, options=options), 2.0)
        try:
            return (await driver.execute(raw, "SELECT @@have_ssl", None)).rows
        finally:
            await driver.close(raw)

    assert run(connect("useSSL=true")) == run(connect("sslMode=PREFERRED")) == [("DISABLED",)]
    with pytest.raises(asyncmy_errors.OperationalError) as required:
        run(connect("sslMode=REQUIRED"))
    sync = driver_for("mysql")
    with pytest.raises(Exception) as sync_required:
        sync.connect(mysql_endpoint(mariadb, options="sslMode=REQUIRED"), 2.0)
    assert required.value.args == sync_required.value.args  # (2026, "SSL is required but ...")
    with pytest.raises(ConfigError, match="endpoint 'ds_0'.*sslMode='VERIFY_CA'"):
        run(connect("sslMode=VERIFY_CA"))
    with pytest.raises(ConfigError, match="endpoint 'ds_0'.*socketTimeout='-1'"):
        run(connect("socketTimeout=-1"))

    async def bound(options: str) -> float | None:
        driver = _mysql()
        raw = await driver.connect(mysql_endpoint(mariadb, options=options), 2.0)
        try:
            return driver.read_bound(raw)
        finally:
            driver.close_now(raw)

    # asyncmy itself gets no read timeout (it would wrap every read in a task, and lose cancels):
    # the runner bounds each statement by it (tests/test_aio_executor.py).
    assert run(bound("socketTimeout=200")) == 0.2


def test_a_server_that_never_answers_fails_the_connect_and_the_kill_within_their_timeouts(mariadb: str) -> None:
    silent = SilentServer()
    try:
        async def go() -> None:
            with pytest.raises(Exception) as info:
                await _mysql().connect(mysql_endpoint("db", port=silent.port), 0.3)
            assert is_disconnect(info.value)
            mapped = map_driver_error(info.value, data_source="ds_0", endpoint="ds_0", sql=None)
            assert isinstance(mapped, DataSourceUnavailableError)
            with pytest.raises(Exception) as refused:
                await _mysql().connect(mysql_endpoint("db", port=closed_port()), 0.3)
            assert refused.value.args[0] == 2003 and is_disconnect(refused.value)
            # A KILL QUERY whose server does not answer gives up (after KILL_TIMEOUT) instead of hanging.
            raw = await _mysql().connect(mysql_endpoint(mariadb), 2.0)
            try:
                assert not await _mysql().cancel(mysql_endpoint("db", port=silent.port), raw)
            finally:
                _mysql().close_now(raw)

        run(go())
        for _ in range(500):  # the handshakes that timed out closed their sockets
            if silent.closed == silent.accepted == 2:
                break
            time.sleep(0.01)
        assert silent.closed == silent.accepted == 2
    finally:
        silent.close()


def test_a_server_that_goes_away_is_unavailable(tmp_path: Path) -> None:
    with running_mariadb(tmp_path) as server:
        endpoint = mysql_endpoint("mysql", port=server.port)

        async def go() -> tuple[BaseException, BaseException]:
            driver = _mysql()
            busy = await driver.connect(endpoint, 2.0)
            idle = await driver.connect(endpoint, 2.0)
            sleeping = asyncio.create_task(driver.execute(busy, "SELECT SLEEP(10)", None))
            await asyncio.sleep(0.2)
            assert server.proc is not None
            server.proc.send_signal(signal.SIGTERM)  # a shutdown: MariaDB says so on every session
            try:
                with pytest.raises(Exception) as during:
                    await sleeping
                await asyncio.to_thread(server.proc.wait, 30)
                with pytest.raises(Exception) as after:
                    await driver.execute(idle, "SELECT 1", None)
                return during.value, after.value
            finally:
                driver.close_now(busy)
                driver.close_now(idle)

        during, after = run(go())
    for exc in (during, after):
        mapped = map_driver_error(exc, data_source="ds_0", endpoint="ds_0", sql="SELECT 1")
        assert isinstance(mapped, DataSourceUnavailableError), exc
        assert discard_on(exc)


def test_a_driver_without_its_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patched:
        patched.setitem(sys.modules, "asyncmy", None)  # as if not installed
        with pytest.raises(MissingExtraError) as info:
            AsyncMySQLDriver(dialect_for("mysql"))
    assert info.value.extra == "aio" and "pip install 'ddm-core[aio]'" in str(info.value)
    with pytest.raises(ExecutionError, match="no asyncio driver for dialect 'oracle'"):
        async_driver_for("oracle")
    assert async_driver_for("mariadb").dialect.name == "mariadb"
    assert async_driver_for("mysql").sql_for("SELECT ? + 1", "qmark") == "SELECT %s + 1"
    assert async_driver_for("sqlite").sql_for("SELECT %s, '%%'", "format") == "SELECT ?, '%'"


# -- SQLite -------------------------------------------------------------------------------------


def test_sqlite_reads_and_writes_as_the_thread_driver(tmp_path: Path) -> None:
    endpoint = sqlite_endpoint(str(tmp_path / "a.db"))
    sync = driver_for("sqlite")
    conn = sync.connect(endpoint, 1.0)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, d DECIMAL(10,2), ts DATETIME, b BLOB, r REAL, n TEXT UNIQUE)")
    conn.close()
    params = (decimal.Decimal("1.50"), datetime.datetime(2020, 1, 2, 3, 4, 5), memoryview(b"\x00\x01"), 0.5, "é")

    async def go() -> tuple[UnitAnswer, UnitAnswer, list[Any], BaseException]:
        driver = async_driver_for("sqlite")
        raw = await driver.connect(endpoint, 1.0)
        try:
            insert = await driver.execute(raw, "INSERT INTO t (d, ts, b, r, n) VALUES (?, ?, ?, ?, ?)", params)
            select = await driver.execute(raw, "SELECT * FROM t WHERE id = ?", (insert.lastrowid,))
            stream = await driver.open_stream(raw, "SELECT * FROM t", ())
            streamed = await stream.fetchmany(10)
            assert await stream.close(0)
            try:
                await driver.execute(raw, "INSERT INTO t (n) VALUES (?)", ("é",))
            except Exception as exc:
                return insert, select, streamed, exc
            raise AssertionError("a duplicate went in")
        finally:
            await driver.close(raw)

    insert, select, streamed, duplicate = run(go())
    conn = sync.connect(endpoint, 1.0)
    cursor = sync.cursor(conn, False)
    cursor.execute("SELECT * FROM t WHERE id = ?", (insert.lastrowid,))
    expected_description, expected_rows = cursor.description, cursor.fetchall()
    conn.close()
    assert (insert.rowcount, insert.lastrowid) == (1, 1)
    assert select.description == expected_description and _typed(select.rows) == _typed(expected_rows)
    assert select.rows == [(1, 1.5, "2020-01-02 03:04:05", b"\x00\x01", 0.5, "é")]
    assert _typed(streamed) == _typed(expected_rows)
    assert isinstance(map_driver_error(duplicate, data_source="ds_0", endpoint="ds_0", sql="INSERT"), DuplicateKeyError)


def test_sqlite_transactions_reset_and_cancel(tmp_path: Path) -> None:
    endpoint = sqlite_endpoint(str(tmp_path / "b.db"))

    async def go() -> BaseException:
        driver = async_driver_for("sqlite")
        raw = await driver.connect(endpoint, 1.0)
        try:
            await driver.execute(raw, "CREATE TABLE t (a INT)", ())
            await driver.begin(raw)
            assert driver.in_transaction(raw)
            await driver.execute(raw, "INSERT INTO t VALUES (1)", ())
            await driver.rollback(raw)
            assert not driver.in_transaction(raw)
            await driver.begin(raw)
            await driver.execute(raw, "INSERT INTO t VALUES (2)", ())
            await driver.commit(raw)
            assert (await driver.execute(raw, "SELECT a FROM t", ())).rows == [(2,)]
            await driver.execute(raw, "CREATE TEMP TABLE t_tmp (x INT)", ())
            assert await driver.reset_session(raw, endpoint)
            with pytest.raises(sqlite3.OperationalError, match="no such table"):
                await driver.execute(raw, "SELECT * FROM t_tmp", ())
            await driver.ping(raw)
            endless = asyncio.create_task(driver.execute(
                raw, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", ()
            ))
            for _ in range(1000):  # interrupt() is a no-op until the statement runs: repeat until it ends
                await asyncio.sleep(0.01)
                assert await driver.cancel(endpoint, raw)
                if endless.done():
                    break
            try:
                await endless
            except Exception as exc:
                assert (await driver.execute(raw, "SELECT 3", ())).rows == [(3,)]  # the connection goes on
                return exc
            raise AssertionError("the endless statement ended by itself")
        finally:
            await driver.close(raw)
            with pytest.raises(sqlite3.ProgrammingError):  # what sqlite3 says of a closed connection
                await driver.execute(raw, "SELECT 1", ())
            with pytest.raises(sqlite3.ProgrammingError):
                await driver.ping(raw)

    interrupted = run(go())
    assert isinstance(interrupted, sqlite3.OperationalError) and "interrupted" in str(interrupted)


# -- PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture()
def pg_table() -> Iterator[str]:
    psycopg: Any = require_module("psycopg", "psycopg 3, the PostgreSQL driver")
    table = f"t_aio_{uuid.uuid4().hex[:8]}"
    try:
        conn = psycopg.connect("host=127.0.0.1 dbname=test user=postgres", connect_timeout=2, autocommit=True)
    except Exception as exc:
        require_service("PostgreSQL on 127.0.0.1:5432", str(exc))
    conn.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20), amount NUMERIC(10,2), at TIMESTAMP)")
    try:
        yield table
    finally:
        conn.execute(f"DROP TABLE {table}")
        conn.close()


def test_postgresql_through_asyncconnection(pg_table: str) -> None:
    endpoint = pg_endpoint()
    table = pg_table
    at = datetime.datetime(2024, 1, 2, 3, 4, 5)

    async def go() -> tuple[UnitAnswer, BaseException, BaseException]:
        driver = async_driver_for("postgresql")
        assert not driver.can_stream
        raw = await driver.connect(endpoint, 2.0)
        try:
            insert = await driver.execute(raw, f"INSERT INTO {table} VALUES (%s, %s, %s, %s), (%s, %s, %s, %s)",
                                          (1, "a", decimal.Decimal("1.50"), at, 2, "b%", None, None))  # fmt: skip
            assert insert.rowcount == 2 and insert.description is None
            select = await driver.execute(raw, f"SELECT * FROM {table} WHERE name LIKE %s ORDER BY id", ("%%",))
            stream = await driver.open_stream(raw, f"SELECT id FROM {table} ORDER BY id", None)
            assert await stream.fetchmany(1) == [(1,)] and await stream.fetchmany(5) == [(2,)]
            assert await stream.close(0)
            await driver.begin(raw)
            assert driver.in_transaction(raw)
            await driver.execute(raw, f"DELETE FROM {table}", None)
            await driver.rollback(raw)
            assert not driver.in_transaction(raw)
            await driver.ping(raw)
            with pytest.raises(Exception) as duplicate:
                await driver.execute(raw, f"INSERT INTO {table} (id) VALUES (%s)", (1,))
            sleeping = asyncio.create_task(driver.execute(raw, "SELECT pg_sleep(5)", None))
            pid = driver.thread_id(raw)
            for _ in range(500):
                other = await driver.connect(endpoint, 2.0)
                try:
                    state = await driver.execute(other, "SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,))
                finally:
                    await driver.close(other)
                if state.rows == [("active",)]:
                    break
                await asyncio.sleep(0.01)
            assert await driver.cancel(endpoint, raw)
            with pytest.raises(Exception) as cancelled:
                await sleeping
            assert (await driver.execute(raw, "SELECT 1", None)).rows == [(1,)]
            return select, duplicate.value, cancelled.value
        finally:
            await driver.close(raw)

    select, duplicate, cancelled = run(go())
    sync = driver_for("postgresql")
    conn = sync.connect(endpoint, 2.0)
    try:
        cursor = conn.cursor()
        cursor.execute(f"SELECT * FROM {table} WHERE name LIKE %s ORDER BY id", ("%%",))
        assert [tuple(c) for c in select.description] == [tuple(c) for c in cursor.description]
        assert _typed(select.rows) == _typed(cursor.fetchall())
    finally:
        conn.close()
    assert select.rows == [(1, "a", decimal.Decimal("1.50"), at), (2, "b%", None, None)]
    mapped = map_driver_error(duplicate, data_source="ds_0", endpoint="ds_0", sql="INSERT")
    assert isinstance(mapped, DuplicateKeyError) and mapped.context["code"] == "23505"
    assert getattr(cancelled, "sqlstate", None) == "57014"  # query_canceled


def test_every_endpoint_kind_has_an_asyncio_driver() -> None:
    endpoints: list[Endpoint] = [mysql_endpoint("db"), sqlite_endpoint(":memory:"), pg_endpoint()]
    for endpoint in endpoints:
        driver = async_driver_for(endpoint.dialect)
        assert driver.dialect.name == endpoint.dialect and driver.paramstyle == driver.sync.paramstyle
