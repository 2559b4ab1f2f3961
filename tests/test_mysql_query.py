"""A unit sent without a cursor and its answer read in one go (a multi-unit read sent from the proxy's loop):

* :func:`ddm_core.execute.mysql_query.query_text` writes the text PyMySQL's ``Cursor.execute`` writes, for every
  kind of value a route can put into a unit, with and without ``NO_BACKSLASH_ESCAPES``;
* :meth:`MySQLDriver.send_read` sends it, and :meth:`MySQLDriver.read_answer` reads the answer taken off the
  socket into the description and rows a PyMySQL cursor reads from the same statement (both ``wire`` twins),
  or raises what the cursor raises; the server reads back the values it was sent.
"""

from __future__ import annotations

import datetime
import enum
from decimal import Decimal
from typing import Any, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddm_core._fast import SELECTED, load
from ddm_core.execute import pymysql_results
from ddm_core.execute.drivers import MySQLDriver, driver_for
from ddm_core.execute.mysql_query import query_bytes, query_text
from param_ids import stable_repr
from services import stock_and_ours_mariadb

TWINS = [load("python")]
try:
    TWINS.append(load("cython"))
except ImportError:  # not built: the pure twin alone
    pass


class Level(enum.IntEnum):
    HIGH = 7


#: Every kind of value a routed unit carries (the caller's parameters, the router's own bounds and keys).
VALUES: list[Any] = [
    0, -1, 2**63 - 1, -(2**63), 10**30, True, False, None, 1.5, -0.0, 1e300, 2.5e-300, Decimal("-12.340"),
    Decimal("1E+5"), "", "plain", "it's", 'say "hi"', "back\\slash", "nul\x00byte", "new\nline\r\x1a",
    "ünï cödé ✓ 😀", "%s %% %(x)s", b"", b"\x00\x01'\"\\\xff\xfe", bytearray(b"ab'c"), memoryview(b"m\\v"),
    datetime.date(2024, 2, 29), datetime.datetime(2024, 1, 2, 3, 4, 5, 678900), datetime.datetime(2024, 1, 2),
    datetime.time(23, 59, 58, 1), datetime.timedelta(hours=-25, minutes=30), Level.HIGH,
]  # fmt: skip


@pytest.fixture(scope="module")
def connections() -> Iterator[tuple[Any, Any]]:
    with stock_and_ours_mariadb() as both:
        yield both


@pytest.fixture(params=[False, True], ids=["backslash-escapes", "no-backslash-escapes"])
def ours(connections: tuple[Any, Any], request: Any) -> Iterator[Any]:
    """ddm-core's connection, under a sql_mode with or without NO_BACKSLASH_ESCAPES (set back afterwards)."""
    _, conn = connections
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = %s", ("NO_BACKSLASH_ESCAPES" if request.param else "",))
    assert bool(conn.server_status & pymysql.constants.SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES) is request.param
    yield conn
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = DEFAULT")


@pytest.fixture(params=TWINS, ids=lambda m: m.name)
def wire(request: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(pymysql_results, "wire", request.param.wire)
    return request.param.wire


def _mysql() -> MySQLDriver:
    driver = driver_for("mariadb")
    assert isinstance(driver, MySQLDriver)
    return driver


def _answer(raw: Any, sql: str, params: Any) -> bytes:
    """Send ``sql`` with :meth:`MySQLDriver.send_read` and take its whole answer off the socket, as the proxy's
    loop does (proxy/relay_many.py): the relay finds where it ends."""
    relay_unit = SELECTED.relay
    _mysql().send_read(raw, sql, params)
    relay = relay_unit.ResultRelay(1, True, True, True)
    taken = b""
    state = relay.feed(b"")
    while state in (relay_unit.FIRST, relay_unit.ROWS, relay_unit.HEADER):
        if state == relay_unit.HEADER:
            state = relay.header([], 0)
            continue
        relay.take()
        data = raw._sock.recv(65536)
        assert data, "the server closed the connection"
        taken += data
        state = relay.feed(data)
    assert not relay.rest()
    return taken


def _cursor_read(raw: Any, sql: str, params: Any) -> tuple[Any, list[Any]]:
    with raw.cursor() as cur:
        cur.execute(sql, params)
        return cur.description, list(cur.fetchall())


def _read(raw: Any, answer: bytes) -> tuple[Any, list[Any]]:
    description, rows = _mysql().read_answer(raw, answer)
    return description, list(rows)  # a list, where a cursor's fetchall gives a tuple


@pytest.mark.parametrize("value", VALUES, ids=stable_repr)
def test_the_text_is_pymysqls(ours: Any, value: Any) -> None:
    sql = "SELECT %s, a FROM t WHERE b = %s AND c LIKE 'x%%'"
    with ours.cursor() as cur:
        for values in ((value, value), [value, 1]):
            assert query_text(ours, sql, values) == cur._mogrify(sql, values)
            assert query_bytes(ours, sql, values) == cur._mogrify(sql, values).encode(ours.encoding)


def test_mappings_and_none_take_pymysqls_own_path(ours: Any) -> None:
    with ours.cursor() as cur:
        assert query_text(ours, "SELECT %(a)s, %(b)s", {"a": "x'y", "b": 3}) == cur._mogrify(
            "SELECT %(a)s, %(b)s", {"a": "x'y", "b": 3})  # fmt: skip
        assert query_text(ours, "SELECT 100%", None) == "SELECT 100%"  # no values: the text untouched, as PyMySQL


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.booleans(), st.none(), st.text(), st.binary(),
    st.floats(allow_nan=False, allow_infinity=False), st.decimals(allow_nan=False, allow_infinity=False),
    st.datetimes(), st.dates(), st.times()), max_size=6))  # fmt: skip
def test_drawn_values_are_written_as_pymysql_writes_them(ours: Any, values: list[Any]) -> None:
    sql = "SELECT " + ", ".join(["%s"] * len(values)) if values else "SELECT 1"
    with ours.cursor() as cur:
        assert query_text(ours, sql, tuple(values)) == cur._mogrify(sql, tuple(values))
        assert query_bytes(ours, sql, values) == cur._mogrify(sql, tuple(values)).encode(ours.encoding)


@pytest.mark.parametrize("value", [v for v in VALUES if not isinstance(v, float) or abs(v) < 1e300], ids=stable_repr)
def test_the_server_reads_back_what_a_cursor_reads_back(ours: Any, wire: Any, value: Any) -> None:
    """send_read + read_answer against execute + fetchall on the same connection: description, rows, types."""
    sql = "SELECT %s AS v, %s IS NULL AS n, 'lit%%' AS l"
    answer = _answer(ours, sql, (value, value))
    assert _read(ours, answer) == _cursor_read(ours, sql, (value, value))


def test_a_table_read_matches_a_cursors_and_the_connection_stays_in_step(connections: tuple[Any, Any],
                                                                         wire: Any) -> None:  # fmt: skip
    _, ours = connections
    with ours.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS q (id INT PRIMARY KEY, u BIGINT UNSIGNED NULL, d DECIMAL(9,2) NULL, "
                    "s VARCHAR(50) COLLATE utf8mb4_general_ci NULL, b VARBINARY(20) NULL, t DATETIME(6) NULL)")
        cur.execute("DELETE FROM q")
        cur.executemany("INSERT INTO q VALUES (%s, %s, %s, %s, %s, %s)", [
            (i, None if i % 3 == 0 else 2**64 - i, None if i % 4 == 0 else Decimal(i) / 4, "Ä" * (i % 5) + str(i),
             None if i % 2 else bytes([i, 0, 39, 92]), datetime.datetime(2024, 1, 1 + i % 28, 12, 0, 0, i))
            for i in range(1, 60)])  # fmt: skip
    sql = "SELECT * FROM q WHERE id BETWEEN %s AND %s ORDER BY id"
    for bounds in [(1, 59), (10, 20), (70, 80)]:  # the last reads no rows
        assert _read(ours, _answer(ours, sql, bounds)) == _cursor_read(ours, sql, bounds)
    assert ours.ddm_read_answer(_answer(ours, sql, (1, 2))) is not None  # the fast read took it
    ours.ping()  # nothing left unread on the connection


def test_an_error_answer_raises_what_a_cursor_raises(connections: tuple[Any, Any], wire: Any) -> None:
    _, ours = connections
    sql = "SELECT * FROM no_such_table WHERE id = %s"
    answer = _answer(ours, sql, (1,))
    assert ours.ddm_read_answer(answer) is None  # left to PyMySQL's reader
    with pytest.raises(pymysql.err.ProgrammingError) as ours_error:
        _mysql().read_answer(ours, answer)
    with pytest.raises(pymysql.err.ProgrammingError) as cursor_error:
        _cursor_read(ours, sql, (1,))
    assert ours_error.value.args == cursor_error.value.args
    assert _read(ours, _answer(ours, "SELECT %s", (5,)))[1] == [(5,)]  # usable afterwards


def test_an_answer_without_rows_reads_as_a_cursors(connections: tuple[Any, Any], wire: Any) -> None:
    _, ours = connections
    answer = _answer(ours, "DO %s", (1,))  # an OK packet, no result set
    assert ours.ddm_read_answer(answer) is None
    assert _read(ours, answer) == _cursor_read(ours, "DO %s", (1,))
