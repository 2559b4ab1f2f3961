"""The ``wire`` unit (both twins) against PyMySQL's own packet reading, and on a real server.

Byte streams are built here the way a server frames them (4-byte header:
3-byte length, sequence number) and read by each twin and by PyMySQL's
``MysqlPacket`` / ``_read_row_from_packet``; rows, types, sequence numbers and
outcomes must agree. The real-server half checks what ``execute/pymysql_results.py``
raises for an error in the middle of a result, and that the connection goes on.
"""

from __future__ import annotations

import io
from datetime import datetime
from decimal import Decimal
from typing import Any, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddm_core._fast import load
from raw_mysql import lenenc_bytes as _lenenc
from services import stock_and_ours_mariadb

TWINS = [load("python").wire]
try:
    TWINS.append(load("cython").wire)
except ImportError:  # not built: the pure twin alone (the compiled pass requires it)
    pass

MAX = 0xFFFFFF
CONVERTERS = (("utf8", int), ("utf8", None), (None, None), ("latin1", None), ("utf8", Decimal))


def _value(v: bytes | None) -> bytes:
    return b"\xfb" if v is None else _lenenc(len(v)) + v


def _frame(payloads: list[bytes], seq: int = 1) -> bytes:
    """Packets as a server sends them; a payload of 16 MB or more is split into continuations."""
    out = bytearray()
    for payload in payloads:
        while True:
            chunk, payload = payload[:MAX], payload[MAX:]
            out += len(chunk).to_bytes(3, "little") + bytes([seq])
            out += chunk
            seq = (seq + 1) & 0xFF
            if len(chunk) < MAX:
                break
    return bytes(out)


EOF_PACKET = b"\xfe\x02\x00\x22\x00"  # 2 warnings, status 0x22


def _pymysql_row(payload: bytes, converters: Any) -> tuple[Any, ...]:
    """PyMySQL's own row decoding (``MySQLResult._read_row_from_packet``)."""
    result = pymysql.connections.MySQLResult.__new__(pymysql.connections.MySQLResult)
    result.converters = list(converters)
    result.unbuffered_active = False  # read by its __del__
    return result._read_row_from_packet(pymysql.protocol.MysqlPacket(payload, "utf8"))  # type: ignore[no-any-return]


values = st.one_of(st.none(), st.binary(max_size=300), st.integers(0, 10**12).map(lambda i: str(i).encode()))


@pytest.fixture(params=TWINS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def wire(request: Any) -> Any:
    return request.param


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.lists(values, min_size=3, max_size=3), max_size=12), seq=st.integers(0, 255))
def test_rows_decode_as_pymysql_decodes_them(rows: list[list[bytes | None]], seq: int) -> None:
    converters = ((None, None), (None, None), (None, None))
    payloads = [b"".join(_value(v) for v in row) for row in rows]
    stream = _frame([*payloads, EOF_PACKET], seq)
    expected = [_pymysql_row(p, converters) for p in payloads]
    for twin in TWINS:
        got, next_seq, last, outcome = twin.read_rows(io.BytesIO(stream).read, seq, converters)
        assert outcome == twin.EOF and last == EOF_PACKET
        assert got == expected
        assert next_seq == (seq + len(rows) + 1) & 0xFF


def test_converters_encodings_and_short_rows(wire: Any) -> None:
    row = b"".join(_value(v) for v in (b"42", "caf\u00e9".encode(), b"\x00\xff", "\u00e9".encode("latin1"), b"1.50"))
    short = _value(b"7") + _value(None)  # fewer values than columns: the row ends there, as in PyMySQL
    stream = _frame([row, short, EOF_PACKET])
    got, _, _, outcome = wire.read_rows(io.BytesIO(stream).read, 1, CONVERTERS)
    assert outcome == wire.EOF
    assert got == [_pymysql_row(row, CONVERTERS), _pymysql_row(short, CONVERTERS)]
    assert got == [(42, "caf\u00e9", b"\x00\xff", "\u00e9", Decimal("1.50")), (7, None)]
    assert [type(v) for v in got[0]] == [int, str, bytes, str, Decimal]


def test_every_length_encoding_and_a_value_over_16_mb(wire: Any) -> None:
    sizes = [0, 250, 251, 65535, 65536, (1 << 24) - 1, 1 << 24]  # 1, 3, 4 and 9-byte lengths
    payload = b"".join(_value(bytes([i % 256]) * n) for i, n in enumerate(sizes))
    stream = _frame([payload, EOF_PACKET])  # the payload spans two packets: a continuation
    converters = [(None, None)] * len(sizes)
    got, seq, _, outcome = wire.read_rows(io.BytesIO(stream).read, 1, converters)
    assert outcome == wire.EOF
    assert [len(v) for v in got[0]] == sizes
    assert got[0] == _pymysql_row(payload, converters)
    assert len(payload) // MAX == 2 and seq == 1 + 3 + 1  # the row in three packets, then the EOF


def test_columns_then_eof(wire: Any) -> None:
    columns = [b"\x03def\x00col-a", b"\x03def\x00col-b"]
    read = io.BytesIO(_frame([*columns, EOF_PACKET], 5)).read
    assert wire.read_columns(read, 5, 2) == (tuple(columns), 8, EOF_PACKET, wire.EOF)
    not_eof = io.BytesIO(_frame([*columns, b"\x01\x02"], 5)).read
    assert wire.read_columns(not_eof, 5, 2)[2:] == (b"\x01\x02", wire.UNEXPECTED)
    error = b"\xff\x15\x04#42000no"
    assert wire.read_columns(io.BytesIO(_frame([columns[0], error], 5)).read, 5, 2)[2:] == (error, wire.ERROR)


def test_outcomes_the_caller_raises(wire: Any) -> None:
    row = _value(b"1")
    error = b"\xff\x22\x05#HY000killed"
    got, seq, last, outcome = wire.read_rows(io.BytesIO(_frame([row, error])).read, 1, [(None, None)])
    assert (got, seq, last, outcome) == ([(b"1",)], 3, error, wire.ERROR)
    # A packet numbered out of turn: its header comes back, the sequence stays where it was.
    got, seq, last, outcome = wire.read_rows(io.BytesIO(_frame([row, EOF_PACKET], 1)).read, 2, [(None, None)])
    assert (got, seq, last[3], outcome) == ([], 2, 1, wire.OUT_OF_SEQUENCE)
    # The stream ends inside a header, and inside a payload.
    stream = _frame([row, EOF_PACKET])
    for cut in (len(stream) - 7, len(stream) - 2):
        assert wire.read_rows(io.BytesIO(stream[:cut]).read, 1, [(None, None)])[3] == wire.LOST


def test_a_value_running_past_its_packet_is_refused(wire: Any) -> None:
    for bad in (b"\x05abc", b"\xfc\x10", b"\xfd\x10\x00", b"\x01a\xfe" + (100).to_bytes(8, "little")):
        with pytest.raises(ValueError, match="past the end"):
            wire.read_rows(io.BytesIO(_frame([bad, EOF_PACKET])).read, 1, [(None, None)] * 2)


# -- on a real server: what pymysql_results raises, and the connection after it -----------------


@pytest.fixture()
def connections() -> Iterator[tuple[Any, Any]]:
    with stock_and_ours_mariadb() as pair:
        yield pair


def test_an_error_in_the_middle_of_a_result_is_pymysqls_and_the_session_goes_on(connections: Any) -> None:
    stock, ours = connections
    bad = "SELECT seq, IF(seq = 3, (SELECT seq FROM seq_1_to_2), 1) FROM seq_1_to_5"  # fails at row 3
    for conn in (stock, ours):
        with conn.cursor() as cur, pytest.raises(pymysql.err.OperationalError) as info:
            cur.execute(bad)
        assert info.value.args[0] == 1242
        with conn.cursor() as cur:
            cur.execute("SELECT 7, NOW(6), 1.5")
            row = cur.fetchone()
        assert row[0] == 7 and type(row[1]) is datetime and row[2] == Decimal("1.5")


def test_multi_result_call_and_warnings_as_stock(connections: Any) -> None:
    stock, ours = connections
    for conn in (stock, ours):
        with conn.cursor() as cur:
            cur.execute("CREATE PROCEDURE IF NOT EXISTS two() BEGIN SELECT 1; SELECT 'b', 2; END")
    seen = []
    for conn in (stock, ours):
        with conn.cursor() as cur:
            cur.execute("CALL two()")
            sets = [cur.fetchall()]
            while cur.nextset():
                sets.append(cur.fetchall())
            cur.execute("SELECT CAST('12x' AS SIGNED)")  # a warning in the closing EOF packet
            sets.append((cur.fetchall(), cur.warning_count))
        seen.append(sets)
    assert seen[0] == seen[1]
    assert seen[1][:2] == [((1,),), (("b", 2),)] and seen[1][-1][1] == 1


def test_a_procedures_second_result_never_reaches_the_next_statement(connections: Any) -> None:
    """The executor lets a buffered MySQL cursor go unclosed (``MySQLDriver.closes_buffered``): the next command drains."""
    from ddm_core.execute import Executor
    from ddm_core.metadata import load_config

    stock, _ = connections
    with stock.cursor() as cur:
        cur.execute("SELECT DATABASE()")
        (database,) = cur.fetchone()
    config = load_config({
        "dataSources": {"ds_0": {"url": f"mysql://127.0.0.1:3306/{database}", "username": "root", "password": ""}},
        "pool": {"maxSize": 1, "minIdle": 1},  # one connection: every statement runs on it
        "defaultDataSource": "ds_0",
        "tables": [],
    })
    with Executor(config) as ex:
        ex.execute("CREATE PROCEDURE two() BEGIN SELECT 1; SELECT 'b', 2; END").close()
        for _ in range(3):
            with ex.execute("CALL two()") as first:
                assert first.fetchall() == [(1,)]
            with ex.execute("SELECT 7, 'seven'") as after:
                assert after.fetchall() == [(7, "seven")]
