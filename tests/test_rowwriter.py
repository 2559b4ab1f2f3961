"""The ``rowwriter`` unit (both twins) as proxy/row_writer.py drives it: mysql-mimic's row bytes, faster.

The reference is mimic's own code, called directly: ``MysqlStream.write_text_rows`` (what the proxy
framed text rows with before) and ``make_binary_resultrow`` framed by ``MysqlStream.write`` (the
binary rows). Rows come from a real MariaDB table holding every column type, decoded by stock
PyMySQL and by ddm-core's wire reader (what the proxy merges), then from hypothesis.

Where mimic's bytes were wrong for a client the writer differs on purpose (proxy/row_writer.py):
rows over 16 MiB are split (compared with mimic's one-row path, which splits), TIME values of a day
or more and negative ones are MariaDB's (compared with what MariaDB itself returns, through a proxy
in test_proxy_row_writer.py, and with the values here), and a ``Decimal`` is spelled in plain notation
as MariaDB spells it (the reference gets it so spelled).
"""

from __future__ import annotations

import asyncio
import datetime
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services import require_module, stock_and_ours_mariadb

require_module("mysql_mimic", "ddm proxy")

from mysql_mimic import ColumnType, ResultColumn  # noqa: E402
from mysql_mimic.charset import CharacterSet  # noqa: E402
from mysql_mimic.packets import make_binary_resultrow, make_text_resultset_row  # noqa: E402
from mysql_mimic.stream import MysqlStream  # noqa: E402

from ddm_core._fast import Implementation, load  # noqa: E402
from ddm_core.proxy.columns import BINARY, Column, described_columns, wire_columns  # noqa: E402
from ddm_core.proxy.row_writer import RowPlan, binary_plan, text_plan  # noqa: E402

#: Every column type MariaDB has (the shard key ``user_id`` for the proxy's copy, test_proxy_row_writer.py).
TYPES_DDL = (
    "CREATE TABLE t_types (id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, "
    "ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED, "
    "i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED, dc DECIMAL(30,10), f FLOAT, d DOUBLE, "
    "ch CHAR(20), vc VARCHAR(300), tx MEDIUMTEXT, bn BINARY(4), vb VARBINARY(20), bl BLOB, "
    "dt DATE, dtm DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME(6), yr YEAR, bt BIT(10), "
    "en ENUM('a','b','ü'), st SET('x','y','z'), js JSON) CHARACTER SET utf8mb4"
)
_LONG_TEXT = "ünïcødé 日本語 😀 " * 20  # over 250 bytes: a 3-byte length
#: (id, user_id, then the columns in order): smallest, largest, zeros and specials, NULLs, the rest.
TYPES_ROWS: list[tuple[Any, ...]] = [
    (1, 10, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -(2**63), 0, Decimal("-12345678901234567890.1234567890"),
     -3.40282e38, -1.7976931348623157e308, "ascii", "héllo wörld 日本 😀", _LONG_TEXT * 150, b"\x00\x01\x02\x03", b"",
     bytes(range(256)) * 255, "1000-01-01", "1000-01-01 00:00:00.000000", "1970-01-02 00:00:01.5", "-838:59:59",
     1901, b"\x00\x00", "a", "", '{"a": [1, 2.5, "ü"]}'),
    (2, 11, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 2**63 - 1, 2**64 - 1,
     Decimal("99999999999999999999.9999999999"), 3.40282e38, 1.7976931348623157e308, "z" * 20, "ü" * 300, "",
     b"\xff\xfe\xfd\xfc", b"\xff" * 20, b"", "9999-12-31", "9999-12-31 23:59:59.999999", "2038-01-19 03:14:07.999",
     "838:59:59.999999", 2155, b"\x03\xff", "ü", "x,y,z", "null"),
    (3, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, Decimal("0"), -0.0, 2.2250738585072014e-308, "", " ", " ", b"\x00" * 4,
     b"\x00", b"\x00", "2024-02-29", "2024-02-29 00:00:00", "2024-02-29 12:00:00", "-00:00:00.5", 0, b"\x00\x01",
     "b", "x", "[]"),
    (4, 13, *([None] * 28)),
    (5, 14, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, Decimal("0.0000000001"), 1.17549e-38, 5e-324, "日本", "'\"\\\n\t",
     "NULL", b"ab\x00\x00", b"\xfb", b"\xfb" * 251, "0001-01-01", "2024-02-29 13:14:15", None, "25:00:00", 2000,
     b"\x02\x00", "a", "y,z", '{"k": null, "n": 1e300}'),
    (6, 15, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, Decimal("1.5"), 0.1, 0.1, "é", "é", "é", b"\x80\x81\x82\x83", b"\x80",
     b"\x80", "2000-01-01", "2000-01-01 00:00:00.000001", "2000-01-01 00:00:00", "-25:30:00", 1999, b"\x00\x80",
     "b", "x,z", '"string"'),
]
_NAMES = ("id, user_id, ti, tiu, si, siu, mi, miu, i, iu, bi, biu, dc, f, d, ch, vc, tx, bn, vb, bl, dt, dtm, ts, tm, "
          "yr, bt, en, st, js")  # fmt: skip
TYPES_INSERT = f"INSERT INTO t_types ({_NAMES}) VALUES ({', '.join(['%s'] * 30)})"


def _impls() -> list[Any]:
    from ddm_core._fast.testing import compiled_for_tests

    compiled = compiled_for_tests()
    params = [pytest.param(load("python"), id="py")]
    if compiled is not None:
        params.insert(0, pytest.param(compiled, id="c", marks=pytest.mark.compiled))
    return params


IMPLS = _impls()


def _stream(seq: int) -> MysqlStream:
    # nothing is read or written: the stream's buffer is what is compared (and never drained)
    stream = MysqlStream(None, None)  # type: ignore[arg-type]
    stream._buffer_size = 1 << 62
    stream.seq.value = seq
    return stream


class _Plain(Decimal):
    """A ``Decimal`` whose ``str`` is its plain notation, as MariaDB spells it (``0.0000000001``, not ``1E-10``)."""

    def __str__(self) -> str:
        return format(self, "f")


def _spelled(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """``rows`` with each ``Decimal`` spelled as the writer spells it (mimic writes ``str()``)."""
    return [tuple(_Plain(v) if type(v) is Decimal else v for v in row) for row in rows]


def mimic_text(rows: Sequence[Sequence[Any]], wire: Sequence[ResultColumn], seq: int) -> tuple[bytes, int]:
    """mimic's text rows as the proxy wrote them (``write_text_rows``), and the next seq."""
    stream = _stream(seq)
    stream.write_text_rows(_spelled(rows), wire)
    return bytes(stream._buffer), stream.seq.value


def mimic_packets(payloads: Iterable[bytes], seq: int) -> tuple[bytes, int]:
    """``payloads`` framed by mimic's ``MysqlStream.write`` (which splits at 16 MiB), and the next seq."""
    stream = _stream(seq)

    async def write() -> None:
        for payload in payloads:
            await stream.write(payload, drain=False)

    asyncio.run(write())
    return bytes(stream._buffer), stream.seq.value


def mimic_binary(rows: Sequence[Sequence[Any]], wire: Sequence[ResultColumn], seq: int) -> tuple[bytes, int]:
    return mimic_packets((make_binary_resultrow(row, wire) for row in _spelled(rows)), seq)


def ours(impl: Implementation, binary: bool, rows: Sequence[Sequence[Any]], plan: RowPlan, seq: int) -> tuple[bytes, int]:
    buffer = bytearray(b"before")  # appended to, never replaced
    write = impl.rowwriter.binary_rows if binary else impl.rowwriter.text_rows
    seq = write(buffer, seq, rows, plan.kinds, plan.encoders)
    assert buffer[:6] == b"before"
    return bytes(buffer[6:]), seq


def _outcome(fn: Any, *args: Any) -> Any:
    """The result, or the type of the error raised (the writer's errors are its encoders')."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return type(exc)


def _mimic_time_is_wrong(value: Any) -> bool:
    return type(value) is datetime.timedelta and value.days != 0


@pytest.mark.parametrize("impl", IMPLS)
def test_the_twins_agree_on_the_kinds(impl: Implementation) -> None:
    """proxy/row_writer.py reads the kinds off the selected twin; both must number them alike."""
    py = load("python").rowwriter
    names = [n for n in py.__all__ if n.isupper()]
    assert {n: getattr(impl.rowwriter, n) for n in names} == {n: getattr(py, n) for n in names}
    assert len({getattr(py, n) for n in names if n != "MAX_PAYLOAD"}) == len(names) - 1


@pytest.fixture(scope="module")
def decoded() -> list[tuple[str, list[Column], list[tuple[Any, ...]]]]:
    """``t_types`` on MariaDB, read back by stock PyMySQL and by ddm-core's wire reader: (reader, columns, rows).

    The columns carry MariaDB's flags (UNSIGNED), as a prepared statement's announced columns do.
    """
    out = []
    with stock_and_ours_mariadb() as (stock, ours_conn):
        with stock.cursor() as cur:
            cur.execute(TYPES_DDL)
            cur.executemany(TYPES_INSERT, TYPES_ROWS)
            cur.execute("SELECT * FROM t_types LIMIT 0")
            flags = [field.flags for field in cur._result.fields]
        for name, conn in (("pymysql", stock), ("ddm wire reader", ours_conn)):
            with conn.cursor() as cur:
                cur.execute("SELECT * FROM t_types ORDER BY id")
                rows = [tuple(r) for r in cur.fetchall()]
                columns = described_columns(cur.description, rows)
                out.append((name, [replace(c, flags=f, _wire=None) for c, f in zip(columns, flags)], rows))
    return out


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("seq", [1, 250])  # 250: the sequence ids wrap around
def test_mariadb_rows_are_written_as_mimic_wrote_them(decoded: Any, impl: Implementation, seq: int) -> None:
    for reader, columns, rows in decoded:
        assert len(rows) == len(TYPES_ROWS), reader
        wire = wire_columns(columns)
        # TIME values mimic misencoded (a day or more, negative) are written as NULL in the comparison rows
        # here; their bytes are checked against MariaDB's own below and in test_proxy_row_writer.py.
        tm = next(i for i, c in enumerate(columns) if c.name == "tm")
        plain = [tuple(None if i == tm and _mimic_time_is_wrong(v) else v for i, v in enumerate(r)) for r in rows]
        assert sum(1 for r, p in zip(rows, plain) if r != p) == 5, reader  # -838:59:59, 838:59:59.999999, -0.5 s, 25 h, -25.5 h
        assert ours(impl, False, plain, text_plan(wire), seq) == mimic_text(plain, wire, seq), reader
        assert ours(impl, True, plain, binary_plan(columns), seq) == mimic_binary(plain, wire, seq), reader
        for row in plain:  # one row at a time: each packet on its own
            assert ours(impl, False, [row], text_plan(wire), seq) == mimic_text([row], wire, seq), (reader, row)
            assert ours(impl, True, [row], binary_plan(columns), seq) == mimic_binary([row], wire, seq), (reader, row)


#: TIME values and the text MariaDB returns for them (``CAST(tm AS CHAR)`` of TIME(6) without the zero fraction).
MARIADB_TIMES = [
    (datetime.timedelta(hours=-838, minutes=-59, seconds=-59), b"-838:59:59"),
    (datetime.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999), b"838:59:59.999999"),
    (datetime.timedelta(microseconds=-500000), b"-00:00:00.500000"),
    (datetime.timedelta(hours=25), b"25:00:00"),
    (datetime.timedelta(hours=-25, minutes=-30), b"-25:30:00"),
    (datetime.timedelta(seconds=-1), b"-00:00:01"),
    (datetime.timedelta(days=-1), b"-24:00:00"),
]


@pytest.mark.parametrize("impl", IMPLS)
def test_time_of_a_day_or_more_and_negative_is_mariadbs(impl: Implementation) -> None:
    import pymysql.converters

    column = Column("tm", ColumnType.TIME, BINARY, decimals=6)
    plan, bplan = text_plan([column.wire()]), binary_plan([column])
    for value, mariadb in MARIADB_TIMES:
        written, _ = ours(impl, False, [(value,)], plan, 0)
        assert written[5:] == mariadb, value
        assert pymysql.converters.convert_timedelta(written[5:].decode()) == value
        packet, _ = ours(impl, True, [(value,)], bplan, 0)
        field = packet[6:]
        negative, days, hours, minutes, seconds = field[1], int.from_bytes(field[2:6], "little"), *field[6:9]
        micro = int.from_bytes(field[9:13], "little") if field[0] == 12 else 0
        magnitude = datetime.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds, microseconds=micro)
        assert (-magnitude if negative else magnitude) == value
        assert bool(negative) == (value < datetime.timedelta(0))
    under_a_day = [(datetime.timedelta(hours=h, seconds=s, microseconds=u),) for h, s, u in ((0, 0, 0), (23, 59, 1), (1, 2, 3))]
    wire = [column.wire()]
    assert ours(impl, False, under_a_day, plan, 3) == mimic_text(under_a_day, wire, 3)
    assert ours(impl, True, under_a_day, bplan, 3) == mimic_binary(under_a_day, wire, 3)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_a_value_that_cannot_be_encoded_takes_back_its_row_only(impl: Implementation, binary: bool) -> None:
    """The encoder's error, after the rows before it and nothing of its own (a word in a DATETIME, which is no
    date's text — a zero date PyMySQL hands over as '0000-00-00' is written in MariaDB's binary form —, a word in
    a TINYINT): the proxy then answers an error packet."""
    columns = [Column("s", ColumnType.VAR_STRING, 255), Column("d", ColumnType.DATETIME), Column("t", ColumnType.TINY)]
    wire = wire_columns(columns)
    plan = binary_plan(columns) if binary else text_plan(wire)
    good = [("a", datetime.datetime(2024, 1, 1), 1), ("b" * 300, None, None)]
    bad = ("written first", "no date", 2) if binary else ("written first", None, "abc")
    write = impl.rowwriter.binary_rows if binary else impl.rowwriter.text_rows
    buffer = bytearray(b"before")
    with pytest.raises(AttributeError if binary else ValueError):
        write(buffer, 5, [*good, bad, *good], plan.kinds, plan.encoders)
    assert bytes(buffer) == b"before" + ours(impl, binary, good, plan, 5)[0]
    reference = mimic_binary if binary else mimic_text
    assert _outcome(reference, [*good, bad], wire, 5) == (AttributeError if binary else ValueError)


# -- rows over 16 MiB --------------------------------------------------------------------------------------

MAX = 0xFFFFFF


@pytest.fixture(scope="module")
def big_rows(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """LONGBLOB / LONGTEXT rows over 16 MiB (and one exactly at a packet's length), read from a private
    mariadbd that allows 64 MiB packets (the shared server's limit is 16 MiB)."""
    from test_execute_support import running_mariadb

    base = Path(tmp_path_factory.mktemp("bigrows"))
    with running_mariadb(base, ("--skip-log-bin", "--max-allowed-packet=64M")) as server:
        conn = server.raw()
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE big")
            cur.execute("CREATE TABLE big.t (id INT PRIMARY KEY, b LONGBLOB, t LONGTEXT CHARACTER SET utf8mb4)")
            # text payloads: b's length (4) + b, then NULL (1); exactly MAX: a last, empty packet follows
            cur.execute("INSERT INTO big.t VALUES (0, REPEAT(UNHEX('AB'), %s), REPEAT('é', %s)), "
                        "(1, REPEAT('x', %s), NULL), (2, REPEAT('y', %s), 'z')", (17 << 20, 9 << 20, MAX - 5, 2 * MAX))
            cur.execute("SELECT b, t FROM big.t ORDER BY id")
            rows = [tuple(r) for r in cur.fetchall()]
            columns = described_columns(cur.description, rows)
        conn.close()
    return columns, rows


@pytest.mark.parametrize("impl", IMPLS)
def test_rows_over_16_mib_are_split_as_mimic_splits_one_packet(big_rows: Any, impl: Implementation) -> None:
    columns, rows = big_rows
    wire = wire_columns(columns)
    assert len(rows[0][0]) == 17 << 20 and rows[0][1] == "é" * (9 << 20)
    text, seq = ours(impl, False, rows, text_plan(wire), 7)
    assert (text, seq) == mimic_packets((make_text_resultset_row(r, wire) for r in rows), 7)
    assert seq == 7 + 3 + 2 + 3  # 17 MiB + 18 MiB of text: 3 packets, MAX: 2 (the last empty), 2 × MAX + 6: 3
    binary = ours(impl, True, rows, binary_plan(columns), 255)
    assert binary == mimic_binary(rows, wire, 255)


# -- hypothesis ----------------------------------------------------------------------------------------------

#: Column types with every way the proxy builds them (signed / unsigned integers, text or binary strings).
_TYPES = [t for t in ColumnType if t not in (ColumnType.NULL, ColumnType.NEWDATE) and int(t) < 256]
_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.integers(-300, 300), st.floats(), st.floats(width=32),
    st.decimals(allow_nan=False), st.text(), st.binary(max_size=300), st.dates(), st.datetimes(),
    st.timedeltas(), st.timedeltas(min_value=datetime.timedelta(days=-1), max_value=datetime.timedelta(days=1)),
)


@st.composite
def tables(draw: Any) -> tuple[list[Column], list[tuple[Any, ...]]]:
    count = draw(st.integers(1, 5))
    columns = [
        Column(f"c{i}", draw(st.sampled_from(_TYPES)), draw(st.sampled_from([BINARY, 255, 8])),
               flags=draw(st.sampled_from([0, 32, 128, 160])))
        for i in range(count)
    ]  # fmt: skip
    rows = draw(st.lists(st.tuples(*[_VALUES] * count), max_size=4))
    return columns, rows


@pytest.mark.parametrize("impl", IMPLS)
@settings(max_examples=400, deadline=None)
@given(table=tables(), seq=st.integers(0, 255))
def test_any_values_are_written_as_mimic_wrote_them(impl: Implementation, table: Any, seq: int) -> None:
    columns, rows = table
    wire = wire_columns(columns)
    rows = [tuple(None if w.type == ColumnType.TIME and _mimic_time_is_wrong(v) else v for w, v in zip(wire, r))
            for r in rows]  # fmt: skip
    assert _outcome(ours, impl, False, rows, text_plan(wire), seq) == _outcome(mimic_text, rows, wire, seq)
    assert _outcome(ours, impl, True, rows, binary_plan(columns), seq) == _outcome(mimic_binary, rows, wire, seq)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_time_columns_other_values_are_written_as_a_strings(impl: Implementation) -> None:
    """A TIME column's text is MariaDB's for an interval; any other value (a Decimal, a string) is written as a
    STRING column writes it — a Decimal in plain notation, not ``str()``'s ``9.9999900E-7`` (hypothesis found it)."""
    wire = wire_columns([Column("t", ColumnType.TIME, 255), Column("s", ColumnType.VAR_STRING, 255)])
    for value in (Decimal("9.9999900E-7"), Decimal("0E-30"), "12:00:00", b"\x00\xff"):
        row = [(value, value)]
        time_text, _ = ours(impl, False, row, text_plan(wire), 0)
        expected, _ = mimic_text(row, wire, 0)
        assert time_text == expected, value
        if type(value) is Decimal:
            assert format(value, "f").encode() in time_text and str(value).encode() not in time_text


_INTEGER_RANGES = {ColumnType.TINY: 8, ColumnType.SHORT: 16, ColumnType.YEAR: 16, ColumnType.INT24: 32,
                   ColumnType.LONG: 32, ColumnType.LONGLONG: 64}  # fmt: skip
_STRINGS = st.one_of(st.text(), st.binary(max_size=300))
_TYPED = {ColumnType.FLOAT: st.floats(width=32), ColumnType.DOUBLE: st.floats(), ColumnType.DECIMAL: st.decimals(),
          ColumnType.NEWDECIMAL: st.decimals(allow_nan=False), ColumnType.DATE: st.dates(),
          ColumnType.DATETIME: st.one_of(st.datetimes(), st.dates()), ColumnType.TIMESTAMP: st.datetimes(),
          ColumnType.TIME: st.timedeltas(min_value=datetime.timedelta(0),  # under a day: mimic's bytes are right
                                         max_value=datetime.timedelta(hours=24, microseconds=-1)),
          ColumnType.JSON: st.text(), ColumnType.BIT: st.binary(max_size=8)}  # fmt: skip


@st.composite
def typed_tables(draw: Any) -> tuple[list[Column], list[tuple[Any, ...]]]:
    """Columns with the values MariaDB gives for their type (integers in their size and sign), NULLs among them."""
    columns, strategies = [], []
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from([*_INTEGER_RANGES, *_TYPED, ColumnType.VAR_STRING, ColumnType.BLOB]))
        unsigned = draw(st.booleans())
        bits = _INTEGER_RANGES.get(kind)
        if bits is not None:
            low, high = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
            values = st.integers(low, high)
        else:
            values = _TYPED.get(kind, _STRINGS)
        columns.append(Column(f"c{i}", kind, draw(st.sampled_from([BINARY, 255])), flags=32 if unsigned else 0))
        strategies.append(st.one_of(st.none(), values))
    return columns, draw(st.lists(st.tuples(*strategies), min_size=1, max_size=4))


@pytest.mark.parametrize("impl", IMPLS)
@settings(max_examples=400, deadline=None)
@given(table=typed_tables(), seq=st.integers(0, 255))
def test_typed_values_are_written_as_mimic_wrote_them(impl: Implementation, table: Any, seq: int) -> None:
    columns, rows = table
    wire = wire_columns(columns)
    assert _outcome(ours, impl, False, rows, text_plan(wire), seq) == _outcome(mimic_text, rows, wire, seq)
    assert _outcome(ours, impl, True, rows, binary_plan(columns), seq) == _outcome(mimic_binary, rows, wire, seq)


@pytest.mark.parametrize("impl", IMPLS)
def test_columns_mimic_built_itself_are_written_as_mimic_wrote_them(impl: Implementation) -> None:
    """mimic's own columns (the proxy's answers to SHOW and the like): string columns in other codecs,
    a BOOL column (its text encoder is a binary one), a NULL column."""
    wire = [ResultColumn("a", ColumnType.VAR_STRING), ResultColumn("b", ColumnType.BOOL),
            ResultColumn("c", ColumnType.STRING, character_set=CharacterSet.latin1),
            ResultColumn("d", ColumnType.NULL), ResultColumn("e", ColumnType.TINY)]  # fmt: skip
    rows = [("x", True, "ü", None, True), (b"\xff", 0, b"\xfe", None, 3), (1.5, None, Decimal("2"), None, -7)]
    assert ours(impl, False, rows, text_plan(wire), 0) == mimic_text(rows, wire, 0)
    assert _outcome(ours, impl, False, [(1, 1, 1, 1, 1)], text_plan(wire), 0) == _outcome(mimic_text, [(1, 1, 1, 1, 1)], wire, 0)
