"""Text rows converted to binary rows by the ``relay`` unit (both twins) are the decoded path's bytes.

A multi-unit read of a prepared statement is answered by the data sources as text rows; the relay converts
them (``ResultRelay.convert``, kinds picked by proxy/binary_rows.py) where the decoded path would write the
same bytes: PyMySQL's converters read the text into a value and the row writer encodes it for the column
announced to the client. Here each column type's texts — the extremes, zeros, fractions, ZEROFILL digits,
lengths at the length-encoding boundaries, NULL — go through both: the definitions a column's
``Column.packet`` makes, the header columns the relay's client is announced (``relayed_columns``), the
decoded value written by ``row_writer.write_binary``. Values the decoded path cannot write at all (a zero
or invalid date, which PyMySQL hands over as a ``str``) get MariaDB's own binary form; values that are not
their column's text end the answer (UNEXPECTED), nothing of their row framed.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mysql_mimic import ColumnType
from mysql_mimic.charset import CharacterSet

from ddm_core._fast import load
from ddm_core.proxy.binary_rows import conversions
from ddm_core.proxy.columns import BINARY, Column, relayed_columns
from ddm_core.proxy.row_writer import binary_plan, write_binary
from raw_mysql import lenenc_bytes

pymysql_converters: Any = pytest.importorskip("pymysql.converters")

TWINS = [load("python").relay]
try:
    TWINS.append(load("cython").relay)
except ImportError:  # not built: the pure twin alone (the compiled pass requires it)
    pass

UNSIGNED, ZEROFILL = 0x20, 0x40
UTF8 = int(CharacterSet.utf8mb4)
#: PyMySQL's TEXT_TYPES: handed over as they are (bytes in the binary character set, else str)
_AS_IS = {ColumnType.BIT, ColumnType.BLOB, ColumnType.LONG_BLOB, ColumnType.MEDIUM_BLOB, ColumnType.STRING,
          ColumnType.TINY_BLOB, ColumnType.VAR_STRING, ColumnType.VARCHAR, ColumnType.GEOMETRY}  # fmt: skip


def _int_texts(bits: int, unsigned: bool) -> list[bytes]:
    low, high = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return [str(v).encode() for v in (low, high, 0, 1, low + 1, high - 1, 7)]


#: (label, type, flags, charset, texts): the texts a MariaDB writes for such a column
CASES: list[tuple[str, ColumnType, int, int, list[bytes]]] = [
    ("TINYINT", ColumnType.TINY, 0, BINARY, _int_texts(8, False)),
    ("TINYINT UNSIGNED", ColumnType.TINY, UNSIGNED, BINARY, _int_texts(8, True)),
    ("SMALLINT", ColumnType.SHORT, 0, BINARY, _int_texts(16, False)),
    ("SMALLINT UNSIGNED", ColumnType.SHORT, UNSIGNED, BINARY, _int_texts(16, True)),
    ("MEDIUMINT", ColumnType.INT24, 0, BINARY, _int_texts(24, False)),
    ("MEDIUMINT UNSIGNED", ColumnType.INT24, UNSIGNED, BINARY, _int_texts(24, True)),
    ("INT", ColumnType.LONG, 0, BINARY, _int_texts(32, False)),
    ("INT UNSIGNED", ColumnType.LONG, UNSIGNED, BINARY, _int_texts(32, True)),
    ("INT ZEROFILL", ColumnType.LONG, UNSIGNED | ZEROFILL, BINARY, [b"0000000042", b"0000000000", b"4294967295"]),
    ("BIGINT", ColumnType.LONGLONG, 0, BINARY, _int_texts(64, False)),
    ("BIGINT UNSIGNED", ColumnType.LONGLONG, UNSIGNED, BINARY, _int_texts(64, True)),
    ("YEAR", ColumnType.YEAR, UNSIGNED | ZEROFILL, BINARY, [b"1901", b"2155", b"0000", b"2024"]),
    ("DECIMAL(10,2)", ColumnType.NEWDECIMAL, 0, BINARY, [b"-99999999.99", b"99999999.99", b"0.00", b"-0.01", b"12.50"]),
    ("DECIMAL(65,30)", ColumnType.NEWDECIMAL, 0, BINARY,
     [b"-" + b"9" * 35 + b"." + b"9" * 30, b"0." + b"0" * 30, b"0." + b"0" * 29 + b"1", b"0.000001" + b"0" * 24,
      b"0.0000001" + b"0" * 23, b"-0.00000012" + b"0" * 22, b"123." + b"0" * 30]),
    ("DECIMAL(20,0)", ColumnType.NEWDECIMAL, 0, BINARY, [b"-99999999999999999999", b"0", b"1"]),
    ("DECIMAL(10,7) ZEROFILL", ColumnType.NEWDECIMAL, UNSIGNED | ZEROFILL, BINARY, [b"000.0000001", b"012.5000000"]),
    ("FLOAT", ColumnType.FLOAT, 0, BINARY,
     [b"0.1", b"-3.40282e38", b"3.40282e38", b"1.17549e-38", b"-0", b"0", b"16777200", b"1.1", b"1e-45"]),
    ("DOUBLE", ColumnType.DOUBLE, 0, BINARY,
     [b"0.1", b"-1.7976931348623157e308", b"2.2250738585072014e-308", b"-0", b"0.30000000000000004", b"5e-324"]),
    ("DATE", ColumnType.DATE, 0, BINARY, [b"1000-01-01", b"9999-12-31", b"2024-02-29"]),
    ("DATETIME", ColumnType.DATETIME, 0, BINARY,
     [b"1000-01-01 00:00:00", b"9999-12-31 23:59:59", b"2024-02-29 00:00:01"]),
    ("DATETIME(6)", ColumnType.DATETIME, 0, BINARY,
     [b"1000-01-01 00:00:00.000000", b"9999-12-31 23:59:59.999999", b"2024-02-29 23:59:58.000001"]),
    ("TIMESTAMP(3)", ColumnType.TIMESTAMP, 0, BINARY, [b"1970-01-01 00:00:01.000", b"2038-01-19 03:14:07.999"]),
    ("TIME", ColumnType.TIME, 0, BINARY, [b"00:00:00", b"23:59:59", b"-838:59:59", b"838:59:59", b"-26:00:05",
                                          b"-00:00:01", b"24:00:00", b"-00:00:00"]),
    ("TIME(6)", ColumnType.TIME, 0, BINARY, [b"00:00:00.000000", b"-838:59:59.999999", b"-00:00:00.000001",
                                             b"100:00:00.123456", b"00:00:00.500000"]),
    ("CHAR", ColumnType.STRING, 0, UTF8, [b"", "🎉中文ü".encode(), b"x" * 250, b"y" * 251, b"z" * 65535, b"w" * 65536]),
    ("VARCHAR", ColumnType.VAR_STRING, 0, UTF8, [b"", b"0", "𝄞".encode()]),
    ("TEXT", ColumnType.BLOB, 0, UTF8, ["中".encode() * 21845, b"tab\there"]),
    ("BINARY", ColumnType.STRING, 0, BINARY, [b"\x00\xff\x00\xff", b"\x00"]),
    ("VARBINARY", ColumnType.VAR_STRING, 0, BINARY, [b"", b"\xff" * 300]),
    ("BLOB", ColumnType.BLOB, 0, BINARY, [b"\x00" * 251, b"\xfe" * 65535, b"\xab" * 70000, b"\xcd" * (1 << 24)]),
    ("BIT(64)", ColumnType.BIT, UNSIGNED, BINARY, [b"\xff" * 8, b"\x00" * 8, b"\x01"]),
    ("ENUM", ColumnType.STRING, 0x100, UTF8, ["🎉".encode(), b"a"]),
    ("SET", ColumnType.STRING, 0x800, UTF8, [b"", b"x,y,z"]),
    ("JSON (MariaDB's LONGTEXT)", ColumnType.BLOB, 0, UTF8, ['{"k": [1, 2.5, "🎉"]}'.encode()]),
    ("GEOMETRY", ColumnType.GEOMETRY, 0, BINARY, [bytes(range(25))]),
    ("NULL", ColumnType.NULL, 0, BINARY, []),
]  # fmt: skip

#: Values PyMySQL hands over as a str, which the decoded path cannot write (its result ends in an error):
#: MariaDB's own binary form, a length byte 0 for a zero date and 4 / 7 / 11 for the others.
ZERO_DATES = [
    (ColumnType.DATE, b"0000-00-00", b"\x00"),
    (ColumnType.DATE, b"2024-00-00", b"\x04\xe8\x07\x00\x00"),
    (ColumnType.DATETIME, b"0000-00-00 00:00:00", b"\x00"),
    (ColumnType.DATETIME, b"0000-00-00 00:00:00.000000", b"\x00"),
    (ColumnType.TIMESTAMP, b"0000-00-00 00:00:00.000", b"\x00"),
    (ColumnType.DATETIME, b"2024-02-30 10:00:00", b"\x07\xe8\x07\x02\x1e\x0a\x00\x00"),
    (ColumnType.DATETIME, b"0000-01-01 00:00:00.5", b"\x0b\x00\x00\x01\x01\x00\x00\x00" + struct.pack("<I", 500000)),
]  # fmt: skip


def _definition(type_: ColumnType, flags: int, charset: int) -> bytes:
    return Column("c", type_, charset, 10, flags).packet(CharacterSet.utf8mb4)


def _decoded(type_: ColumnType, charset: int, text: bytes | None) -> Any:
    """The value PyMySQL reads from ``text`` (its decoders, the connection's utf8mb4)."""
    if text is None:
        return None
    if type_ in _AS_IS:
        return text if charset == BINARY else text.decode()
    convert = pymysql_converters.decoders.get(type_)
    return text.decode() if convert is None else convert(text.decode("ascii"))


def _answer(definitions: list[bytes], rows: list[list[bytes | None]]) -> bytes:
    """A data source's text answer (with EOF packets), from sequence id 1."""
    payloads = [bytes([len(definitions)]), *definitions, b"\xfe\x00\x00\x02\x00"]
    for row in rows:
        payloads.append(b"".join(b"\xfb" if v is None else lenenc_bytes(len(v)) + v for v in row))
    payloads.append(b"\xfe\x00\x00\x02\x00")
    out, seq = bytearray(), 1
    for p in payloads:
        for at in range(0, len(p) + 1, 0xFFFFFF):  # a row of 16 MiB or more: several packets
            piece = p[at : at + 0xFFFFFF]
            out += len(piece).to_bytes(3, "little") + bytes([seq & 0xFF]) + piece
            seq += 1
            if len(piece) < 0xFFFFFF:
                break
    return bytes(out)


def _relayed(twin: Any, definitions: list[bytes], rows: list[list[bytes | None]], cut: int = 0) -> tuple[int, bytes]:
    """The relay's state and the rows' framed bytes (from sequence id 5, after the EOF of the empty header) for
    the answer, fed in pieces of ``cut``."""
    columns = relayed_columns(definitions)
    kinds = conversions(definitions, columns)
    assert kinds is not None, "the conversion was refused"
    relay = twin.ResultRelay(4, True, True, False)
    data = _answer(definitions, rows)
    pieces = [data[i : i + cut] for i in range(0, len(data), cut)] if cut else [data]
    state = twin.FIRST
    while state == twin.FIRST:
        state = relay.feed(pieces.pop(0))
    assert state == twin.HEADER
    relay.convert(kinds)
    state = relay.header([], 0)
    for piece in pieces:
        state = relay.feed(piece)
    out = relay.take()[9:]
    return state, out[: len(out) - 9] if state == twin.DONE else out  # without the closing EOF


def _written(definitions: list[bytes], rows: list[list[Any]]) -> bytes:
    buffer = bytearray()
    write_binary(buffer, 5, rows, binary_plan(relayed_columns(definitions)))
    return bytes(buffer)


@pytest.mark.parametrize("twin", TWINS, ids=[t.__name__.rsplit(".", 1)[-1] for t in TWINS])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_types_texts_are_the_decoded_paths_bytes(twin: Any, case: tuple[Any, ...]) -> None:
    _, type_, flags, charset, texts = case
    definitions = [_definition(type_, flags, charset), _definition(ColumnType.LONG, 0, BINARY)]
    rows: list[list[bytes | None]] = [[text, str(i).encode()] for i, text in enumerate(texts)]
    rows += [[None, b"-1"], [None, None]]
    state, got = _relayed(twin, definitions, rows)
    assert state == twin.DONE
    want = _written(definitions, [[_decoded(type_, charset, v) for v in row[:1]] + [None if row[1] is None else
                                  int(row[1])] for row in rows])  # fmt: skip
    assert got == want


@pytest.mark.parametrize("twin", TWINS, ids=[t.__name__.rsplit(".", 1)[-1] for t in TWINS])
def test_many_columns_in_one_row_and_cut_anywhere(twin: Any) -> None:
    """Every type in one row (NULL bitmaps over several bytes), the answer fed in pieces of 7 bytes."""
    cases = [c for c in CASES if c[4] and c[0] != "BLOB"]
    definitions = [_definition(t, f, cs) for _, t, f, cs, _ in cases]
    rows = [[texts[i % len(texts)] if (i + j) % 3 else None for j, (_, _, _, _, texts) in enumerate(cases)]
            for i in range(6)]  # fmt: skip
    state, got = _relayed(twin, definitions, rows, cut=7)
    assert state == twin.DONE
    want = [[_decoded(t, cs, v) for (_, t, _, cs, _), v in zip(cases, row)] for row in rows]
    assert got == _written(definitions, want)


@pytest.mark.parametrize("twin", TWINS, ids=[t.__name__.rsplit(".", 1)[-1] for t in TWINS])
@pytest.mark.parametrize(("type_", "text", "binary"), ZERO_DATES, ids=[z[1].decode() for z in ZERO_DATES])
def test_zero_and_invalid_dates_take_mariadbs_binary_form(twin: Any, type_: ColumnType, text: bytes,
                                                          binary: bytes) -> None:  # fmt: skip
    assert isinstance(_decoded(type_, BINARY, text), str)  # the decoded path cannot write it
    state, got = _relayed(twin, [_definition(type_, 0, BINARY)], [[text]])
    assert state == twin.DONE
    assert got == len(binary + b"  ").to_bytes(3, "little") + b"\x05\x00\x00" + binary  # 0x00, the NULL bitmap


@pytest.mark.parametrize("twin", TWINS, ids=[t.__name__.rsplit(".", 1)[-1] for t in TWINS])
@pytest.mark.parametrize(("type_", "flags", "text"), [
    (ColumnType.TINY, 0, b"128"), (ColumnType.TINY, UNSIGNED, b"-1"),
    (ColumnType.LONGLONG, UNSIGNED, b"18446744073709551616"),
    (ColumnType.LONG, 0, b"1.5"), (ColumnType.LONG, 0, b""), (ColumnType.LONG, 0, b"-"), (ColumnType.LONG, 0, b" 1"),
    (ColumnType.FLOAT, 0, b"1e39"), (ColumnType.FLOAT, 0, b"inf"), (ColumnType.DOUBLE, 0, b"1_0"),
    (ColumnType.DOUBLE, 0, b"1e"),
    (ColumnType.NEWDECIMAL, 0, b"1e5"), (ColumnType.NEWDECIMAL, 0, b"NaN"), (ColumnType.NEWDECIMAL, 0, b"1.2.3"),
    (ColumnType.DATE, 0, b"2024-1-02"), (ColumnType.DATETIME, 0, b"2024-01-02T10:00:00"),
    (ColumnType.DATETIME, 0, b"2024-01-02 10:00:00.1234567"), (ColumnType.TIME, 0, b"1000:00:00"),
    (ColumnType.TIME, 0, b"10:0:00"), (ColumnType.TIME, 0, b"10:00"), (ColumnType.NULL, 0, b"x"),
])  # fmt: skip
def test_a_value_not_of_its_columns_text_ends_the_answer(twin: Any, type_: ColumnType, flags: int, text: bytes) -> None:
    definitions = [_definition(type_, flags, BINARY)]
    state, got = _relayed(twin, definitions, [[None], [text], [None]])
    assert state == twin.UNEXPECTED
    assert got == _written(definitions, [[None]])  # the row before it, nothing of its own


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.binary(max_size=12), min_size=1, max_size=4), st.integers(0, 15))
def test_the_twins_agree_on_any_text(texts: list[bytes], kind_seed: int) -> None:
    """Whatever the text, both twins end in the same state with the same bytes."""
    if len(TWINS) < 2:
        pytest.skip("the compiled relay is not built")
    types = [ColumnType.LONG, ColumnType.TINY, ColumnType.NEWDECIMAL, ColumnType.FLOAT, ColumnType.DOUBLE,
             ColumnType.DATETIME, ColumnType.TIME, ColumnType.VAR_STRING, ColumnType.LONGLONG]  # fmt: skip
    definitions = [_definition(types[(kind_seed + i) % len(types)], UNSIGNED if (kind_seed + i) % 2 else 0, BINARY)
                   for i in range(len(texts))]  # fmt: skip
    results = {_relayed(twin, definitions, [list(texts)]) for twin in TWINS}
    assert len(results) == 1


def test_columns_announced_otherwise_are_decoded() -> None:
    """A signed column announced UNSIGNED, a binary string announced as text read as str: refused."""
    signed = _definition(ColumnType.LONG, 0, BINARY)
    assert conversions([signed], [Column("c", ColumnType.LONG, BINARY, 10, UNSIGNED)]) is None
    text = _definition(ColumnType.VAR_STRING, 0, UTF8)
    assert conversions([text], [Column("c", ColumnType.VAR_STRING, BINARY, 10, 0x80)]) is None
    assert conversions([text], [Column("c", ColumnType.VAR_STRING, UTF8, 10)]) is not None
    assert conversions([_definition(ColumnType.ENUM, 0, UTF8)], [Column("c", ColumnType.ENUM, UTF8)]) is None
    assert conversions([signed], []) is None
