"""Relayed and decoded results of ``ddm proxy`` are the same bytes on the wire.

``proxy.relay: true`` (the default) passes a one-unit statement's result from
its data source to the client packet by packet (sequence ids, status flags and
column definitions rewritten, rows never decoded); ``proxy.relay: false``
decodes the rows into Python values and frames them again. A client must not be
able to tell which one answered. Two proxy subprocesses over the same sharded
databases, one of each, get the same statements from raw-socket clients, and
every packet of every answer (header and all) must be equal:

* COM_QUERY (text protocol) and COM_STMT_PREPARE / COM_STMT_EXECUTE (binary
  protocol: the key a parameter, sent with its type, then without:
  new-params-bound 0, as libmariadb does after its first execute), for one
  column of every MariaDB type at a time and for ``SELECT *``, over rows of
  edge values (minimums, maximums, zeros and zero dates, -0.0, fractions of a
  second, negative and over-24-hour times, lengths at the length-encoding
  boundaries, UTF-8 beyond the BMP, 0x00 / 0xFF bytes, NULL everywhere) and
  rows drawn by hypothesis (derandomized);
* results of several rows, of more rows than ``proxy.batchRows`` (streamed in
  batches), of none; with and without ``CLIENT_DEPRECATE_EOF``; after
  ``SET NAMES latin1``;
* a LONGBLOB of more than 16 MiB, its row several packets long;
* the OK packets of INSERT / UPDATE / DELETE by key and the error packets of
  statements the data source refuses (1062, 1264, 1406, 1048, 1054).

The relay applies from the second run of a statement shape (the first goes
through a worker thread), so each statement runs three times on each proxy and
every run is compared. The values of both proxies' answers are also checked
against the data source itself: text results decoded as PyMySQL decodes them,
against PyMySQL's rows straight from MariaDB; binary results against MariaDB's
own binary answer to the same prepared statement.

What differs today is written down case by case, each case an
``xfail(strict=True)`` naming the difference: :data:`TEXT_BYTES_DIFFER` and
:data:`BINARY_BYTES_DIFFER` for the bytes, :data:`TEXT_VALUES_DIFFER` and
:data:`BINARY_VALUES_DIFFER` for values against MariaDB's. The relayed rows are
MariaDB's own bytes, so the byte cases are where the decoded path writes a value
otherwise (Python's repr of a float, str of a datetime or timedelta, ...). A
case that starts to pass fails until its entry goes; the byte cases also show
that the relay applies at all (with ``relay: false`` on both proxies they pass).
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import itertools
import json
import struct
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Iterator, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raw_mysql import COM_QUERY, COM_STMT_EXECUTE, COM_STMT_PREPARE, LONGLONG, MAX_PAYLOAD, RawClient, _lenenc
from services import fresh_mariadb_databases, mariadb_connect, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql_protocol: Any = require_module("pymysql.protocol", "reading column definitions as PyMySQL does")
pymysql_connections: Any = require_module("pymysql.connections", "decoding text values as PyMySQL does")
pymysql_converters: Any = require_module("pymysql.converters", "decoding text values as PyMySQL does")

from ddm_core import Router, load_config  # noqa: E402
from test_proxy_support import PASSWORD, USER, ProxyProcess, proxy_config, write_config  # noqa: E402

TRANSACTIONS = 0x2000  # CLIENT_TRANSACTIONS: status flags in OK packets
DEPRECATE_EOF = 1 << 24  # CLIENT_DEPRECATE_EOF
JSON_TYPE = 0xF5
UNSIGNED_FLAG = 0x20
BINARY_CHARSET = 63
RUNS = 3  # the first run of a statement shape goes through a worker; the relay applies from the second
BIG = 16 * 1024 * 1024 + 4321  # a LONGBLOB value longer than one packet can carry
MAX_ALLOWED_PACKET = 48 * 1024 * 1024


class Col(NamedTuple):
    name: str
    ddl: str
    label: str  # the test id: the MariaDB type, and what is special about the values


COLUMNS = (
    Col("c_tinyint", "TINYINT", "TINYINT"),
    Col("c_tinyint_u", "TINYINT UNSIGNED", "TINYINT_UNSIGNED"),
    Col("c_bool", "BOOLEAN", "BOOLEAN"),
    Col("c_smallint", "SMALLINT", "SMALLINT"),
    Col("c_smallint_u", "SMALLINT UNSIGNED", "SMALLINT_UNSIGNED"),
    Col("c_mediumint", "MEDIUMINT", "MEDIUMINT"),
    Col("c_mediumint_u", "MEDIUMINT UNSIGNED", "MEDIUMINT_UNSIGNED"),
    Col("c_int", "INT", "INT"),
    Col("c_int_u", "INT UNSIGNED", "INT_UNSIGNED"),
    Col("c_bigint", "BIGINT", "BIGINT"),
    Col("c_bigint_u", "BIGINT UNSIGNED", "BIGINT_UNSIGNED"),
    Col("c_decimal", "DECIMAL(10,2)", "DECIMAL(10,2)"),
    Col("c_decimal_wide", "DECIMAL(65,30)", "DECIMAL(65,30)"),
    Col("c_decimal_int", "DECIMAL(20,0)", "DECIMAL(20,0)"),
    Col("c_float", "FLOAT", "FLOAT"),  # values of at most 6 significant digits (MariaDB's text of a FLOAT)
    Col("c_float_full", "FLOAT", "FLOAT_7digits"),  # values that need more
    Col("c_double", "DOUBLE", "DOUBLE"),  # values of at most 15 significant digits (MariaDB's text of a DOUBLE)
    Col("c_double_full", "DOUBLE", "DOUBLE_17digits"),  # values that need more
    Col("c_bit1", "BIT(1)", "BIT(1)"),
    Col("c_bit10", "BIT(10)", "BIT(10)"),
    Col("c_bit64", "BIT(64)", "BIT(64)"),
    Col("c_date", "DATE", "DATE"),
    Col("c_datetime", "DATETIME", "DATETIME"),
    Col("c_datetime6", "DATETIME(6)", "DATETIME(6)"),
    Col("c_timestamp3", "TIMESTAMP(3) NULL DEFAULT NULL", "TIMESTAMP(3)"),
    Col("c_time", "TIME", "TIME"),  # within one day, not negative
    Col("c_time6", "TIME(6)", "TIME(6)"),
    Col("c_time_wide", "TIME", "TIME_wide"),  # negative, or over 24 hours
    Col("c_time6_wide", "TIME(6)", "TIME(6)_wide"),
    Col("c_year", "YEAR", "YEAR"),
    Col("c_char", "CHAR(10)", "CHAR"),
    Col("c_varchar", "VARCHAR(300)", "VARCHAR"),
    Col("c_varchar_latin1", "VARCHAR(20) CHARACTER SET latin1", "VARCHAR_latin1"),
    Col("c_binary", "BINARY(4)", "BINARY"),
    Col("c_varbinary", "VARBINARY(300)", "VARBINARY"),
    Col("c_tinyblob", "TINYBLOB", "TINYBLOB"),
    Col("c_blob", "BLOB", "BLOB"),
    Col("c_mediumblob", "MEDIUMBLOB", "MEDIUMBLOB"),
    Col("c_longblob", "LONGBLOB", "LONGBLOB"),
    Col("c_tinytext", "TINYTEXT", "TINYTEXT"),
    Col("c_text", "TEXT", "TEXT"),
    Col("c_mediumtext", "MEDIUMTEXT", "MEDIUMTEXT"),
    Col("c_longtext", "LONGTEXT", "LONGTEXT"),
    Col("c_enum", "ENUM('a','b','ü','🎉')", "ENUM"),
    Col("c_set", "SET('x','y','z')", "SET"),
    Col("c_json", "JSON", "JSON"),
    Col("c_inet6", "INET6", "INET6"),
    Col("c_uuid", "UUID", "UUID"),
    Col("c_geometry", "GEOMETRY", "GEOMETRY"),
    Col("c_point", "POINT", "POINT"),
)
BY_NAME = {c.name: c for c in COLUMNS}
NINES = "9" * 35 + "." + "9" * 30  # DECIMAL(65,30)'s largest

#: Edge rows: key, name, and per column a SQL expression MariaDB stores (a column left out is NULL).
EDGE_ROWS: dict[str, tuple[int, dict[str, str]]] = {
    "min": (1, {
        "c_tinyint": "-128", "c_tinyint_u": "0", "c_bool": "0", "c_smallint": "-32768", "c_smallint_u": "0",
        "c_mediumint": "-8388608", "c_mediumint_u": "0", "c_int": "-2147483648", "c_int_u": "0",
        "c_bigint": "-9223372036854775808", "c_bigint_u": "0", "c_decimal": "-99999999.99",
        "c_decimal_wide": "-" + NINES, "c_decimal_int": "-99999999999999999999", "c_float": "-3.40282e38",
        "c_float_full": "-3.4028234663852886e38", "c_double": "-1.79769313486231e308",
        "c_double_full": "-1.7976931348623157e308", "c_bit1": "b'0'", "c_bit10": "b'0'", "c_bit64": "b'0'",
        "c_date": "'1000-01-01'", "c_datetime": "'1000-01-01 00:00:00'", "c_datetime6": "'1000-01-01 00:00:00.000000'",
        "c_timestamp3": "'1970-01-01 00:00:01.000'", "c_time": "'00:00:00'", "c_time6": "'00:00:00.000000'",
        "c_time_wide": "'-838:59:59'", "c_time6_wide": "'-838:59:59.999999'", "c_year": "1901", "c_char": "''",
        "c_varchar": "''", "c_varchar_latin1": "''", "c_binary": "X''", "c_varbinary": "X''", "c_tinyblob": "X''",
        "c_blob": "X''", "c_mediumblob": "X''", "c_longblob": "X''", "c_tinytext": "''", "c_text": "''",
        "c_mediumtext": "''", "c_longtext": "''", "c_enum": "'a'", "c_set": "''", "c_json": "'[]'",
        "c_inet6": "'::'", "c_uuid": "'00000000-0000-0000-0000-000000000000'",
        "c_geometry": "ST_GeomFromText('POINT(0 0)')", "c_point": "POINT(0, 0)",
    }),  # fmt: skip
    "max": (2, {
        "c_tinyint": "127", "c_tinyint_u": "255", "c_bool": "1", "c_smallint": "32767", "c_smallint_u": "65535",
        "c_mediumint": "8388607", "c_mediumint_u": "16777215", "c_int": "2147483647", "c_int_u": "4294967295",
        "c_bigint": "9223372036854775807", "c_bigint_u": "18446744073709551615", "c_decimal": "99999999.99",
        "c_decimal_wide": NINES, "c_decimal_int": "99999999999999999999", "c_float": "3.40282e38",
        "c_float_full": "3.4028234663852886e38", "c_double": "1.79769313486231e308",
        "c_double_full": "1.7976931348623157e308", "c_bit1": "b'1'", "c_bit10": "b'1111111111'",
        "c_bit64": "X'FFFFFFFFFFFFFFFF'", "c_date": "'9999-12-31'", "c_datetime": "'9999-12-31 23:59:59'",
        "c_datetime6": "'9999-12-31 23:59:59.999999'", "c_timestamp3": "'2038-01-19 03:14:07.999'",
        "c_time": "'23:59:59'", "c_time6": "'23:59:59.999999'", "c_time_wide": "'838:59:59'",
        "c_time6_wide": "'838:59:59.999999'", "c_year": "2155", "c_char": "'🎉中文ü的字符串'",
        "c_varchar": "REPEAT('x', 300)", "c_varchar_latin1": "REPEAT('é', 20)", "c_binary": "X'FFFFFFFF'",
        "c_varbinary": "REPEAT(X'FF', 300)", "c_tinyblob": "REPEAT(X'FF', 255)", "c_blob": "REPEAT(X'FE', 65535)",
        "c_mediumblob": "REPEAT(X'AB', 70000)", "c_longblob": "REPEAT(X'CD', 65536)",
        "c_tinytext": "REPEAT('é', 127)", "c_text": "REPEAT('中', 21845)", "c_mediumtext": "REPEAT('🎉', 20000)",
        "c_longtext": "REPEAT('z', 251)", "c_enum": "'🎉'", "c_set": "'x,y,z'",
        "c_json": "'{\"k\": [1, 2.5, \"🎉\", null, true, {\"nested\": \"中文\"}]}'",
        "c_inet6": "'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'", "c_uuid": "'ffffffff-ffff-ffff-ffff-ffffffffffff'",
        "c_geometry": "ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0))')",
        "c_point": "POINT(1.7976931348623157e308, -1.5)",
    }),  # fmt: skip
    "zero": (3, {
        "c_tinyint": "0", "c_tinyint_u": "0", "c_bool": "0", "c_smallint": "0", "c_smallint_u": "0",
        "c_mediumint": "0", "c_mediumint_u": "0", "c_int": "0", "c_int_u": "0", "c_bigint": "0", "c_bigint_u": "0",
        "c_decimal": "0", "c_decimal_wide": "-0.0", "c_decimal_int": "0", "c_float": "0", "c_float_full": "-0e0",
        "c_double": "-0e0", "c_double_full": "0", "c_bit1": "b'0'", "c_bit10": "0", "c_bit64": "0",
        "c_date": "'0000-00-00'", "c_datetime": "'0000-00-00 00:00:00'",
        "c_datetime6": "'0000-00-00 00:00:00.000000'", "c_timestamp3": "'0000-00-00 00:00:00.000'",
        "c_time": "'00:00:00'", "c_time6": "'00:00:00.000000'", "c_time_wide": "'-00:00:01'",
        "c_time6_wide": "'-00:00:00.000001'", "c_year": "0", "c_char": "'0'", "c_varchar": "'0'",
        "c_varchar_latin1": "'0'", "c_binary": "X'00'", "c_varbinary": "X'00'", "c_tinyblob": "X'00'",
        "c_blob": "X'00'", "c_mediumblob": "X'00'", "c_longblob": "X'00'", "c_tinytext": "'0'", "c_text": "'0'",
        "c_mediumtext": "'0'", "c_longtext": "'0'", "c_enum": "'b'", "c_set": "'x'", "c_json": "'0'",
        "c_inet6": "'::1'", "c_uuid": "'00000000-0000-0000-0000-000000000001'",
        "c_geometry": "ST_GeomFromText('LINESTRING(0 0,1 1)')", "c_point": "POINT(-0e0, 0)",
    }),  # fmt: skip
    "fraction": (4, {
        "c_tinyint": "-1", "c_tinyint_u": "1", "c_bool": "1", "c_smallint": "-1", "c_smallint_u": "1",
        "c_mediumint": "-1", "c_mediumint_u": "1", "c_int": "-1", "c_int_u": "1", "c_bigint": "-1",
        "c_bigint_u": "9223372036854775808", "c_decimal": "-0.01", "c_decimal_wide": "0." + "0" * 29 + "1",
        "c_decimal_int": "-1", "c_float": "1.1", "c_float_full": "16777217", "c_double": "0.1",
        "c_double_full": "0.30000000000000004", "c_bit1": "b'1'", "c_bit10": "b'1000000000'",
        "c_bit64": "X'0000000000000001'", "c_date": "'2024-02-29'", "c_datetime": "'2024-02-29 23:59:58'",
        "c_datetime6": "'2024-02-29 23:59:58.000001'", "c_timestamp3": "'2024-02-29 12:00:00.5'",
        "c_time": "'12:34:56'", "c_time6": "'00:00:00.000001'", "c_time_wide": "'-26:00:05'",
        "c_time6_wide": "'100:00:00.123456'", "c_year": "2024", "c_char": "'a'", "c_varchar": "REPEAT('y', 251)",
        "c_varchar_latin1": "'Ø'", "c_binary": "X'00FF'", "c_varbinary": "X'00FF00'", "c_tinyblob": "X'00'",
        "c_blob": "REPEAT(X'00', 251)", "c_mediumblob": "X'FF'", "c_longblob": "X'00FF'",
        "c_tinytext": "REPEAT('a', 250)", "c_text": "'tab\\there\\nnew\\\\line \\'quote\\' \"dq\" %s ?'",
        "c_mediumtext": "'?'", "c_longtext": "'%s'", "c_enum": "'ü'", "c_set": "'y,z'",
        "c_json": "'\"a string with \\\\\" quote\"'", "c_inet6": "'2001:db8::ff00:42:8329'",
        "c_uuid": "'123e4567-e89b-12d3-a456-426655440000'", "c_geometry": "ST_GeomFromText('MULTIPOINT(1 1,2 2)')",
        "c_point": "POINT(0.1, 0.2)",
    }),  # fmt: skip
    "unicode": (5, {
        "c_int": "42", "c_char": "'中文🎉'", "c_varchar": "'𝄞 emoji 🎉, CJK 中文字, Zoë'",
        "c_varchar_latin1": "'naïve café'", "c_binary": "X'F09F8E89'", "c_varbinary": "X'C3'",
        "c_tinyblob": "X'F09F'", "c_blob": "X'00F09F8E8900'", "c_tinytext": "'🎉'", "c_text": "'中文'",
        "c_mediumtext": "'Ü'", "c_longtext": "'𝄞'", "c_enum": "'🎉'", "c_json": "'{\"ü\": \"🎉\", \"中\": [1]}'",
    }),  # fmt: skip
    "null": (6, {}),
}
FILLER = range(100, 140)  # plain rows for results of several rows (a DATETIME(6) with microseconds: see DRAWN)
BIG_KEY = 7

# -- what differs today ------------------------------------------------------------------------------
#
# Each entry is one case's strict xfail: the difference, as seen. The relayed bytes are MariaDB's; where the
# decoded path re-encodes a value otherwise, the two differ, and a case that starts to pass (the decoded path
# fixed, or the relay no longer applied) fails until its entry goes.


def _each(reason: str, rows: tuple[str, ...], labels: tuple[str, ...]) -> dict[tuple[str, str], str]:
    return {(row, label): reason for row in rows for label in labels}


_VALUED = ("min", "max", "zero", "fraction")  # the edge rows with a value in every column
_BINARY_STRINGS = ("BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB")

_FLOAT_FROM_TEXT = ("the decoded path reads a FLOAT from MariaDB's text (6 significant digits: 3.40282e38, "
                    "1.67772e7) and sends that number: 3.402820018375656e+38 where MariaDB sends the stored "
                    "3.4028234663852886e+38, 16777200.0 where it sends 16777216.0")  # fmt: skip
_NULL_BINARY = ("a binary string column whose value is NULL: the decoded path announces it with character set 255 "
                "(utf8mb4; it takes the character set from the first non-NULL value), the relay with MariaDB's 63 "
                "(binary) (docs/proxy.md#relayed-results)")  # fmt: skip


def _on(proxy: str, known: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    return {(f"{proxy}:{row}", label): why for (row, label), why in known.items()}


_DECODED_BINARY = _each(_FLOAT_FROM_TEXT, ("min", "max", "fraction"), ("FLOAT_7digits",))
#: (proxy:row, column label) -> how that proxy's answer differs from MariaDB's in value.
#: BIT and GEOMETRY columns were announced utf8mb4 by both paths (PyMySQL got a str, or failed on 0xFF): now binary.
TEXT_VALUES_DIFFER: dict[tuple[str, str], str] = {}
BINARY_VALUES_DIFFER = _on("decoded", _DECODED_BINARY)
#: (row, column label) -> how the relayed answer's bytes differ from the decoded one's.
TEXT_BYTES_DIFFER = {
    **_each(_NULL_BINARY, ("null",), _BINARY_STRINGS), **_each(_NULL_BINARY, ("unicode",), ("MEDIUMBLOB", "LONGBLOB")),
}  # fmt: skip
BINARY_BYTES_DIFFER = dict(_DECODED_BINARY)


# -- the wire -----------------------------------------------------------------------------------------


@dataclass
class Answer:
    """One answer as the client got it: every packet with its header, and its parts."""

    frames: list[bytes] = field(default_factory=list)  # as sent: 3-byte length, sequence id, payload
    columns: list[bytes] = field(default_factory=list)  # column-definition payloads
    rows: list[bytes] = field(default_factory=list)  # row payloads (a chain of packets joined)
    end: bytes = b""  # OK / ERR without a result set, else the closing EOF / OK

    @property
    def error(self) -> tuple[int, str] | None:
        """(code, SQLSTATE + message) of an ERR answer."""
        if self.end[:1] != b"\xff" or self.columns:
            return None
        return int.from_bytes(self.end[1:3], "little"), self.end[3:].decode(errors="replace")


class Wire:
    """A raw-socket client (tests/raw_mysql.py) that keeps every byte of every answer."""

    def __init__(self, port: int, user: str, password: str, database: str, *, deprecate_eof: bool = False) -> None:
        self.client = RawClient(port, timeout=60.0)
        self.deprecate_eof = deprecate_eof
        self.statements: dict[str, tuple[int, Answer]] = {}
        ok = self.client.login(user, password, database=database,
                               capabilities=TRANSACTIONS | (DEPRECATE_EOF if deprecate_eof else 0))  # fmt: skip
        assert ok[:1] == b"\x00", ok

    def close(self) -> None:
        self.client.close()

    def _read(self, answer: Answer) -> bytes:
        """The next payload (a chain of packets joined), its packets kept in ``answer.frames``.

        Each packet's sequence id must follow the last one's (the first answers the command, 0). An
        error packet that breaks the count is kept (the client reads it); any other packet that does
        puts the stream out of step — its header is likely the middle of a longer packet — and fails.
        """
        parts = []
        while True:
            header = self.client._exactly(4)
            size = int.from_bytes(header[:3], "little")
            expected = (len(answer.frames) + 1) % 256
            payload = self.client._exactly(min(size, 1))
            if header[3] != expected and payload != b"\xff":
                raise AssertionError(f"packet {len(answer.frames)} of the answer has sequence id {header[3]}, not "
                                     f"{expected} (header {header.hex(' ')}): the stream is out of step; the "
                                     f"packet before it was {len(answer.frames[-1]) - 4 if answer.frames else 0} "
                                     "bytes long")  # fmt: skip
            payload += self.client._exactly(size - len(payload))
            answer.frames.append(header + payload)
            parts.append(payload)
            if size < MAX_PAYLOAD:
                return b"".join(parts)

    def _result(self) -> Answer:
        answer = Answer()
        first = self._read(answer)
        if first[:1] in (b"\x00", b"\xff"):
            answer.end = first
            return answer
        answer.columns = [self._read(answer) for _ in range(_lenenc(first, 0)[0])]
        if not self.deprecate_eof:
            self._read(answer)  # the EOF after the definitions
        while True:
            payload = self._read(answer)
            if payload[:1] == b"\xff" or (payload[:1] == b"\xfe" and len(payload) < MAX_PAYLOAD):
                answer.end = payload
                return answer
            answer.rows.append(payload)

    def query(self, sql: str) -> Answer:
        self.client.command(COM_QUERY, sql.encode())
        return self._result()

    def prepare(self, sql: str) -> tuple[int, Answer]:
        """The statement id and the answer of a COM_STMT_PREPARE (once per text on this connection)."""
        known = self.statements.get(sql)
        if known is not None:
            return known
        self.client.command(COM_STMT_PREPARE, sql.encode())
        answer = Answer()
        first = self._read(answer)
        assert first[:1] == b"\x00", (sql, first)
        stmt_id, columns, params = struct.unpack_from("<IHH", first, 1)
        for count, keep in ((params, False), (columns, True)):
            definitions = [self._read(answer) for _ in range(count)]
            if keep:
                answer.columns = definitions
            if count and not self.deprecate_eof:
                self._read(answer)
        self.statements[sql] = stmt_id, answer
        return stmt_id, answer

    def execute(self, sql: str, params: list[int], *, with_types: bool) -> Answer:
        """COM_STMT_EXECUTE of ``sql`` (prepared once), integer parameters; their types sent or not."""
        stmt_id, _ = self.prepare(sql)
        body = struct.pack("<IBI", stmt_id, 0, 1) + bytes((len(params) + 7) // 8)
        body += (b"\x01" + bytes([LONGLONG, 0]) * len(params)) if with_types else b"\x00"
        body += b"".join(struct.pack("<q", p) for p in params)
        self.client.command(COM_STMT_EXECUTE, body)
        return self._result()


def _differs(label: str, want: list[bytes], got: list[bytes]) -> str | None:
    """``None`` when the packets are equal, else where they first differ, in hex."""
    if got == want:
        return None
    lines = [f"{label}: the relay proxy sent {len(got)} packet(s), the decoded proxy {len(want)}"]
    for i, (a, b) in enumerate(itertools.zip_longest(want, got, fillvalue=b"")):
        if a == b:
            continue
        at = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        start = max(at - 16, 0)
        lines += [f"packet {i} (4 header bytes included) first differs at byte {at} of {len(a)} / {len(b)}:",
                  f"  decoded: {a[start:at + 48].hex(' ')}", f"  relay:   {b[start:at + 48].hex(' ')}"]  # fmt: skip
        if len(lines) > 10:
            break
    return "\n".join(lines)


def _same_bytes(label: str, decoded: list[Answer], relayed: list[Answer]) -> None:
    """Run by run, the relay proxy's packets are the decoded proxy's."""
    for run, (want, got) in enumerate(zip(decoded, relayed, strict=True), start=1):
        problem = _differs(f"{label}, run {run}", want.frames, got.frames)
        if problem is not None:
            pytest.fail(problem, pytrace=False)


# -- values, decoded as a client decodes them ----------------------------------------------------------


def _fields(answer: Answer) -> list[Any]:
    return [pymysql_protocol.FieldDescriptorPacket(p, "utf8") for p in answer.columns]


def _client_value(raw: bytes, column: Any, *, binary: bool, charset: str = "utf8") -> Any:
    """A string-encoded value as PyMySQL hands it over (``_get_descriptions``'s encodings and decoders)."""
    code = column.type_code
    if code == JSON_TYPE or code in pymysql_connections.TEXT_TYPES:
        encoding = None if code != JSON_TYPE and column.charsetnr == BINARY_CHARSET else charset
    else:
        encoding = "ascii"
    try:
        value: Any = raw.decode(encoding) if encoding else raw
    except UnicodeDecodeError as exc:
        return f"<not {encoding} text, as the column's character set {column.charsetnr} says: {exc}>"
    if binary:  # the binary protocol's strings: DECIMAL is the only one a converter reads
        return Decimal(value) if code in (0x00, 0xF6) else value
    converter = pymysql_converters.decoders.get(code)
    return value if converter in (None, pymysql_converters.through) else converter(value)


def _text_rows(answer: Answer, charset: str = "utf8") -> list[tuple[Any, ...]]:
    fields = _fields(answer)
    rows = []
    for payload in answer.rows:
        at, row = 0, list[Any]()
        for column in fields:
            if payload[at] == 0xFB:
                row.append(None)
                at += 1
                continue
            size, at = _lenenc(payload, at)
            row.append(_client_value(payload[at : at + size], column, binary=False, charset=charset))
            at += size
        rows.append(tuple(row))
    return rows


_INTEGER_SIZES = {0x01: 1, 0x02: 2, 0x0D: 2, 0x03: 4, 0x09: 4, 0x08: 8}


def _binary_temporal(payload: bytes, at: int, code: int) -> tuple[Any, int]:
    size = payload[at]
    part = payload[at + 1 : at + 1 + size].ljust(12, b"\x00")
    end = at + 1 + size
    if code == 0x0B:  # TIME: sign, days, hours, minutes, seconds, microseconds
        negative, days, h, m, s, us = struct.unpack("<BIBBBI", part[:12])
        span = dt.timedelta(days=days, hours=h, minutes=m, seconds=s, microseconds=us)
        return (-span if negative else span), end
    y, mo, d, h, m, s, us = struct.unpack("<HBBBBBI", part[:11])
    try:
        return (dt.date(y, mo, d) if code == 0x0A else dt.datetime(y, mo, d, h, m, s, us)), end
    except ValueError:  # a zero date, or one with zero parts: its fields as they came
        return f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{m:02d}:{s:02d}.{us:06d} (type {code})", end


def _binary_rows(answer: Answer) -> list[tuple[Any, ...]]:
    fields = _fields(answer)
    rows = []
    for payload in answer.rows:
        nulls = payload[1 : 1 + (len(fields) + 9) // 8]
        at, row = 1 + len(nulls), []
        for i, column in enumerate(fields):
            code = column.type_code
            value: Any
            if nulls[(i + 2) // 8] >> ((i + 2) % 8) & 1:
                value = None
            elif code in _INTEGER_SIZES:
                size = _INTEGER_SIZES[code]
                value = int.from_bytes(payload[at : at + size], "little", signed=not column.flags & UNSIGNED_FLAG)
                at += size
            elif code in (0x04, 0x05):
                value, = struct.unpack_from("<f" if code == 0x04 else "<d", payload, at)
                at += 4 if code == 0x04 else 8
            elif code in (0x07, 0x0A, 0x0B, 0x0C, 0x0E):
                value, at = _binary_temporal(payload, at, code)
            else:
                size, at = _lenenc(payload, at)
                value = _client_value(payload[at : at + size], column, binary=True)
                at += size
            row.append(value)
        rows.append(tuple(row))
    return rows


def _typed(rows: list[tuple[Any, ...]]) -> list[tuple[tuple[str, Any], ...]]:
    """Values with their Python types; floats and decimals by their repr (-0.0, scale)."""
    return [tuple((type(v).__name__, repr(v) if isinstance(v, (float, Decimal)) else v) for v in row) for row in rows]


def _values(answer: Answer, decode: Callable[[Answer], list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    """``answer``'s rows decoded; an answer that ended in an error packet fails the test with it."""
    if answer.end[:1] == b"\xff":
        pytest.fail(f"the answer ended with error {int.from_bytes(answer.end[1:3], 'little')}: "
                    f"{answer.end[3:].decode(errors='replace')} after {len(answer.columns)} column definition(s) "
                    f"and {len(answer.rows)} row(s)", pytrace=False)  # fmt: skip
    return decode(answer)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 400 else f"{text[:300]} ... ({len(text)} characters)"


def _check_values(label: str, got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> None:
    if _typed(got) != _typed(want):
        shown = [f"  the proxy's: {_short(g)}\n  MariaDB's:   {_short(w)}" for g, w in zip(_typed(got), _typed(want)) if g != w]
        pytest.fail(f"{label}: values differ from MariaDB's\n" + "\n".join(shown[:5])
                    + ("" if len(got) == len(want) else f"\n  {len(got)} row(s), MariaDB {len(want)}"),
                    pytrace=False)  # fmt: skip


# -- the two proxies -----------------------------------------------------------------------------------


@dataclass
class Setup:
    relay: Wire  # proxy.relay: true
    decoded: Wire  # proxy.relay: false
    relay_eof: Wire  # the same, clients with CLIENT_DEPRECATE_EOF
    decoded_eof: Wire
    ports: tuple[int, int]
    database_of: Callable[..., str]  # (key, table): the database of its data source (the table has the logic name)
    direct: dict[str, Wire]  # per database: a raw client straight to MariaDB
    filler: dict[str, list[int]]  # per database: the keys of its FILLER rows
    big: bytes
    memo: dict[Any, Any] = field(default_factory=dict)

    def __repr__(self) -> str:  # hypothesis shows a failing case's arguments: not the answers kept
        return f"Setup(ports={self.ports})"

    def runs(self, key: Any, ask: Callable[[Wire, int], Answer], *, eof: bool = False
             ) -> tuple[list[Answer], list[Answer]]:  # fmt: skip
        """``ask(client, run)`` of each proxy :data:`RUNS` times, interleaved (once per ``key``):
        (the decoded proxy's answers, the relay proxy's)."""
        if key not in self.memo:
            relay, decoded = (self.relay_eof, self.decoded_eof) if eof else (self.relay, self.decoded)
            pairs = [(ask(decoded, run), ask(relay, run)) for run in range(RUNS)]
            self.memo[key] = [d for d, _ in pairs], [r for _, r in pairs]
        answers: tuple[list[Answer], list[Answer]] = self.memo[key]
        return answers

    def text(self, sql: str, *, eof: bool = False) -> tuple[list[Answer], list[Answer]]:
        return self.runs(("text", sql, eof), lambda wire, _: wire.query(sql), eof=eof)

    def binary(self, sql: str, params: list[int], *, eof: bool = False) -> tuple[list[Answer], list[Answer]]:
        """Executes with the parameter types, without them (new-params-bound 0), with them again."""
        return self.runs(("binary", sql, tuple(params), eof),
                         lambda wire, run: wire.execute(sql, params, with_types=run != 1), eof=eof)  # fmt: skip


def _table_ddl(name: str) -> str:
    columns = ", ".join(f"{c.name} {c.ddl}" for c in COLUMNS)
    return f"CREATE TABLE {name} (id BIGINT NOT NULL PRIMARY KEY, {columns}) DEFAULT CHARSET utf8mb4"


DML_DDL = ("CREATE TABLE t_dml (id BIGINT NOT NULL, n INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v TINYINT NOT NULL, "
           "s VARCHAR(4), UNIQUE KEY uk_id (id))")  # fmt: skip
BIG_DDL = "CREATE TABLE t_big (id BIGINT NOT NULL PRIMARY KEY, payload LONGBLOB)"


@pytest.fixture(scope="module")
def max_allowed_packet() -> Iterator[int]:
    """MariaDB's ``max_allowed_packet``, raised for a row over 16 MiB (and put back afterwards)."""
    conn = mariadb_connect()
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.max_allowed_packet")
        (before,) = cur.fetchone()
    raised = before < MAX_ALLOWED_PACKET
    try:
        if raised:  # new connections get it: the proxies' pools open theirs after this
            with conn.cursor() as cur:
                cur.execute(f"SET GLOBAL max_allowed_packet = {MAX_ALLOWED_PACKET}")
        yield max(before, MAX_ALLOWED_PACKET)
    finally:
        if raised:
            with conn.cursor() as cur:
                cur.execute(f"SET GLOBAL max_allowed_packet = {before}")
        conn.close()


@pytest.fixture(scope="module")
def setup(max_allowed_packet: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases, maxAllowedPacket=max_allowed_packet)
        template = next(t for t in config["tables"] if t["logicTable"] == "t_small")
        config["tables"] = [dict(copy.deepcopy(template), logicTable=name, shardKey="id", tableKey="id")
                            for name in ("t_types", "t_dml", "t_big")]  # fmt: skip
        for unused in ("broadcastTables", "singleTables"):
            config.pop(unused)
        names = {f"ds_{i}": db for i, db in enumerate(databases)}
        router = Router(load_config(config))

        def database_of(key: int, table: str = "t_types") -> str:
            (unit,) = router.route(f"SELECT id FROM {table} WHERE id = %s", (key,)).units
            assert unit.tables == ((table, table),), unit  # one table per data source: the logic name
            return names[unit.data_source]

        located = {key: database_of(key) for key in [*range(1, 10), *FILLER]}
        big = bytes(range(256)) * (BIG // 256) + b"\xff" * (BIG % 256)
        for db in databases:
            conn = mariadb_connect(database=db, max_allowed_packet=max_allowed_packet)
            with conn.cursor() as cur:
                for ddl in (_table_ddl("t_types"), DML_DDL, BIG_DDL):
                    cur.execute(ddl)
                for name, (key, values) in EDGE_ROWS.items():
                    if located[key] == db:
                        cur.execute(f"INSERT INTO t_types ({', '.join(['id', *values])}) "
                                    f"VALUES ({', '.join([str(key), *values.values()])})")  # fmt: skip
                for key in FILLER:
                    if located[key] == db:
                        cur.execute("INSERT INTO t_types (id, c_int, c_varchar, c_double, c_datetime6) "
                                    "VALUES (%s, %s, %s, %s, %s)",
                                    (key, key * 7, f"row {key}", key / 8, dt.datetime(2026, 1, 1, 0, 0, key % 60, key)))  # fmt: skip
                if located[BIG_KEY] == db:
                    cur.execute("INSERT INTO t_big (id, payload) VALUES (%s, %s)", (BIG_KEY, big))
            conn.close()
        path = tmp_path_factory.mktemp("relay")
        relay_config, decoded_config = copy.deepcopy(config), copy.deepcopy(config)
        relay_config["proxy"]["relay"] = True
        decoded_config["proxy"]["relay"] = False
        proxies = [ProxyProcess(write_config(relay_config, path / "relay.yaml")).start()]
        wires: list[Wire] = []
        memo: dict[Any, Any] = {}
        try:
            proxies.append(ProxyProcess(write_config(decoded_config, path / "decoded.yaml")).start())
            relay_port, decoded_port = proxies[0].port, proxies[1].port
            for port, eof in ((relay_port, False), (decoded_port, False), (relay_port, True), (decoded_port, True)):
                wires.append(Wire(port, USER, PASSWORD, "logic_db", deprecate_eof=eof))
            direct = {db: Wire(3306, "root", "", db) for db in databases}
            wires.extend(direct.values())
            filler = {db: [k for k in FILLER if located[k] == db] for db in databases}
            yield Setup(wires[0], wires[1], wires[2], wires[3], ports=(relay_port, decoded_port),
                        database_of=functools.lru_cache(database_of), direct=direct, filler=filler, big=big,
                        memo=memo)  # fmt: skip
        finally:
            for wire in wires:
                wire.close()
            for key, conn in memo.items():
                if key[0] == "pymysql":
                    conn.close()
            for proxy in proxies:
                proxy.stop()


def _pymysql(setup: Setup, database: str, charset: str = "utf8mb4") -> Any:
    """A PyMySQL connection straight to MariaDB (one per database and character set, closed with the module)."""
    conn = setup.memo.get(("pymysql", database, charset))
    if conn is None:
        conn = setup.memo["pymysql", database, charset] = mariadb_connect(database=database, charset=charset)
    return conn


def _mariadb_text(setup: Setup, database: str, sql: str, charset: str = "utf8mb4") -> list[tuple[Any, ...]]:
    """PyMySQL's rows of ``sql`` straight from MariaDB."""
    with _pymysql(setup, database, charset).cursor() as cur:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]


CASES = [(row, col) for row in EDGE_ROWS for col in COLUMNS]
PROXIES = ("relay", "decoded")


def _cases(known: dict[tuple[str, str], str], proxies: tuple[str, ...] = ("",)) -> list[Any]:
    """(proxy,) row, column: each case an ``xfail(strict=True)`` where ``known`` names a difference for it
    (keyed (row, column label), the proxy's name first where ``proxies`` are given)."""
    out = []
    for proxy in proxies:
        for row, col in CASES:
            reason = known.get((f"{proxy}:{row}" if proxy else row, col.label))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            args = (proxy, row, col) if proxy else (row, col)
            out.append(pytest.param(*args, marks=marks, id="-".join([*([proxy] if proxy else []), col.label, row])))
    return out


def _select(col: Col, key: int | str) -> str:
    return f"SELECT {col.name} FROM t_types WHERE id = {key}"


# -- one column of every type, row by row ----------------------------------------------------------------


@pytest.mark.parametrize(("row", "col"), _cases(TEXT_BYTES_DIFFER))
def test_text_results_are_the_same_bytes(setup: Setup, row: str, col: Col) -> None:
    decoded, relayed = setup.text(_select(col, EDGE_ROWS[row][0]))
    _same_bytes(f"COM_QUERY {col.label}, row {row!r}", decoded, relayed)


@pytest.mark.parametrize(("row", "col"), _cases(BINARY_BYTES_DIFFER))
def test_binary_results_are_the_same_bytes(setup: Setup, row: str, col: Col) -> None:
    sql = _select(col, "?")
    decoded, relayed = setup.binary(sql, [EDGE_ROWS[row][0]])
    _same_bytes(f"COM_STMT_EXECUTE {col.label}, row {row!r}", decoded, relayed)
    problem = _differs(f"COM_STMT_PREPARE {col.label}", setup.decoded.prepare(sql)[1].frames,
                       setup.relay.prepare(sql)[1].frames)  # fmt: skip
    assert problem is None, problem


def _last(answers: tuple[list[Answer], list[Answer]], proxy: str) -> Answer:
    """The last run's answer of ``proxy`` (the relay proxy's is relayed, where the relay applies)."""
    return answers[PROXIES.index(proxy) ^ 1][-1]


@pytest.mark.parametrize(("proxy", "row", "col"), _cases(TEXT_VALUES_DIFFER, PROXIES))
def test_text_values_are_mariadbs(setup: Setup, proxy: str, row: str, col: Col) -> None:
    key = EDGE_ROWS[row][0]
    got = _last(setup.text(_select(col, key)), proxy)
    want = _mariadb_text(setup, setup.database_of(key), _select(col, key))
    _check_values(f"COM_QUERY {col.label}, row {row!r}, {proxy} proxy", _values(got, _text_rows), want)


@pytest.mark.parametrize(("proxy", "row", "col"), _cases(BINARY_VALUES_DIFFER, PROXIES))
def test_binary_values_are_mariadbs(setup: Setup, proxy: str, row: str, col: Col) -> None:
    key = EDGE_ROWS[row][0]
    sql = _select(col, "?")
    got = _last(setup.binary(sql, [key]), proxy)
    want = setup.direct[setup.database_of(key)].execute(sql, [key], with_types=True)
    _check_values(f"COM_STMT_EXECUTE {col.label}, row {row!r}, {proxy} proxy", _values(got, _binary_rows),
                  _values(want, _binary_rows))  # fmt: skip


# -- every column at once; results of several rows, of none, of more than a batch --------------------------


def _star_cases() -> list[Any]:
    """Rows × protocol × EOF form; a row with a column whose bytes differ (its own case) is an xfail naming them."""
    out = []
    for row in EDGE_ROWS:
        for binary, known in ((False, TEXT_BYTES_DIFFER), (True, BINARY_BYTES_DIFFER)):
            labels = [label for r, label in known if r == row]
            reason = f"the bytes of {', '.join(labels)} differ (their own cases)" if labels else None
            for eof in (False, True):
                out.append(pytest.param(row, binary, eof, marks=[pytest.mark.xfail(strict=True, reason=reason)] if reason else [],
                                        id=f"{row}-{'COM_STMT_EXECUTE' if binary else 'COM_QUERY'}-{'deprecate_eof' if eof else 'eof'}"))  # fmt: skip
    return out


@pytest.mark.parametrize(("row", "binary", "eof"), _star_cases())
def test_select_star_is_the_same_bytes(setup: Setup, row: str, binary: bool, eof: bool) -> None:
    key = EDGE_ROWS[row][0]
    if binary:
        decoded, relayed = setup.binary("SELECT * FROM t_types WHERE id = ?", [key], eof=eof)
    else:
        decoded, relayed = setup.text(f"SELECT * FROM t_types WHERE id = {key}", eof=eof)
    _same_bytes(f"SELECT *, row {row!r}", decoded, relayed)


#: One unit's results of other shapes: name, statement ({keys}: the keys, literal or ?), how many keys.
SHAPES = [
    ("three_rows", "SELECT id, c_int, c_varchar, c_double, c_datetime6 FROM t_types WHERE id IN ({keys}) "
     "ORDER BY id DESC", 3),
    ("more_than_a_batch", "SELECT id, c_varchar FROM t_types WHERE id IN ({keys}) ORDER BY id", 9),  # > batchRows
    ("every_column_batched", "SELECT * FROM t_types WHERE id IN ({keys}) ORDER BY id", 9),
    ("no_rows", "SELECT id, c_int FROM t_types WHERE id = {keys} AND c_int < 0", 1),
    ("aggregates", "SELECT COUNT(*), SUM(c_int), AVG(c_double), MAX(c_varchar), MIN(c_datetime6) FROM t_types "
     "WHERE id IN ({keys})", 3),
    ("expressions", "SELECT id + 1 AS next_id, CONCAT(c_varchar, '!') AS shout, NULL AS nothing, 1.5 AS num, "
     "'lit' AS s, c_int * 2 FROM t_types WHERE id = {keys}", 1),
    ("no_index_used", "SELECT id, c_int FROM t_types IGNORE INDEX (PRIMARY) WHERE id = {keys}", 1),
    ("grouped", "SELECT c_int % 2 AS parity, COUNT(*) AS n FROM t_types WHERE id IN ({keys}) GROUP BY parity "
     "ORDER BY parity", 9),
]  # fmt: skip


@pytest.mark.parametrize("eof", [False, True], ids=["eof", "deprecate_eof"])
@pytest.mark.parametrize("binary", [False, True], ids=["COM_QUERY", "COM_STMT_EXECUTE"])
@pytest.mark.parametrize(("template", "count"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_result_shapes_are_the_same_bytes_and_mariadbs_values(setup: Setup, template: str, count: int, binary: bool,
                                                              eof: bool) -> None:  # fmt: skip
    database, keys = max(setup.filler.items(), key=lambda item: len(item[1]))
    keys = keys[:count]
    assert len(keys) == count, "too few FILLER rows on one data source"
    if binary:
        sql = template.format(keys=", ".join("?" * count))
        decoded, relayed = setup.binary(sql, keys, eof=eof)
        want = _values(setup.direct[database].execute(sql, keys, with_types=True), _binary_rows)
    else:
        sql = template.format(keys=", ".join(map(str, keys)))
        decoded, relayed = setup.text(sql, eof=eof)
        want = _mariadb_text(setup, database, sql)
    _same_bytes(sql, decoded, relayed)
    for proxy, answers in (("relay", relayed), ("decoded", decoded)):
        _check_values(f"{sql}, {proxy} proxy", _values(answers[-1], _binary_rows if binary else _text_rows), want)


@pytest.mark.parametrize("row", ["max", "fraction", "unicode"])
def test_results_after_set_names_latin1_are_the_same_bytes(setup: Setup, row: str) -> None:
    key = EDGE_ROWS[row][0]
    sql = f"SELECT c_varchar_latin1, c_char, c_text, c_enum FROM t_types WHERE id = {key}"
    relay, decoded = (Wire(port, USER, PASSWORD, "logic_db") for port in setup.ports)
    try:
        answers = [(decoded.query("SET NAMES latin1"), relay.query("SET NAMES latin1"))]
        answers += [(decoded.query(sql), relay.query(sql)) for _ in range(RUNS)]
    finally:
        relay.close()
        decoded.close()
    _same_bytes(f"SET NAMES latin1, then {sql}", [d for d, _ in answers], [r for _, r in answers])
    want = _mariadb_text(setup, setup.database_of(key), sql, charset="latin1")
    _check_values(f"{sql} in latin1", _values(answers[-1][1], lambda a: _text_rows(a, "latin1")), want)


def _column_name(definition: bytes) -> bytes:
    """A column definition's name, as sent (after catalog, schema, table and org_table)."""
    at = 0
    for _ in range(4):
        size, at = _lenenc(definition, at)
        at += size
    size, at = _lenenc(definition, at)
    return definition[at : at + size]


def test_column_names_follow_set_names_mid_session(setup: Setup) -> None:
    """The connection keeps the session's character sets between statements until its variables change: a
    ``SET NAMES`` between the runs of a hot statement changes how the next ones' text is read and how their
    column names are sent, as on MariaDB (``Ø`` is one byte in latin1, two in UTF-8), and so does setting
    it back."""
    key = 1
    sql = f"SELECT c_int AS `Ø` FROM t_types WHERE id = {key}"
    proxy, direct = Wire(setup.ports[0], USER, PASSWORD, "logic_db"), Wire(3306, "root", "", setup.database_of(key))

    def names(wire: Wire, codec: str) -> list[bytes]:
        wire.client.command(COM_QUERY, sql.encode(codec))  # the text in the session's client character set
        return [_column_name(c) for c in wire._result().columns]

    try:
        seen = []
        for charset, codec in (("utf8mb4", "utf-8"), ("latin1", "latin-1"), ("utf8mb4", "utf-8"), ("latin1", "latin-1")):
            for wire in (proxy, direct):
                answer = wire.query(f"SET NAMES {charset}")
                assert answer.end[:1] == b"\x00", (wire is proxy, answer.error)
            (want,) = names(direct, codec)
            for run in range(RUNS):  # from the second run on, the hot path answers
                assert names(proxy, codec) == [want], (charset, run)
            seen.append(want)
        assert seen == ["Ø".encode(), "Ø".encode("latin-1")] * 2
    finally:
        proxy.close()
        direct.close()


# -- a row longer than a packet ----------------------------------------------------------------------------


def _big_answer(port: int, sql: str, binary: bool) -> Answer | str:
    """The answer of a connection of its own (a stream out of step ends with it), or why it could not be read."""
    wire = Wire(port, USER, PASSWORD, "logic_db")
    try:
        return wire.execute(sql, [BIG_KEY], with_types=True) if binary else wire.query(sql)
    except AssertionError as exc:
        return str(exc)
    finally:
        wire.close()


@pytest.mark.parametrize("binary", [False, True], ids=["COM_QUERY", "COM_STMT_EXECUTE"])
def test_a_row_over_16_mib_is_the_same_bytes_and_the_value_inserted(setup: Setup, binary: bool) -> None:
    sql = f"SELECT id, payload FROM t_big WHERE id = {'?' if binary else BIG_KEY}"
    relay_port, decoded_port = setup.ports
    problems = []
    for run in range(1, RUNS + 1):  # the answers are not kept: 16 MiB each
        answers = {"decoded": _big_answer(decoded_port, sql, binary), "relay": _big_answer(relay_port, sql, binary)}
        for name, answer in answers.items():
            if isinstance(answer, str):
                problems.append(f"run {run}, {name} proxy: {answer}")
                continue
            rows = _values(answer, _binary_rows if binary else _text_rows)
            if rows != [(BIG_KEY, setup.big)]:
                got = [(r[0], len(r[1]) if isinstance(r[1], bytes) else r[1]) for r in rows]
                problems.append(f"run {run}, {name} proxy: (id, payload length) {got}, not {(BIG_KEY, len(setup.big))}")
            elif max(len(f) for f in answer.frames) != MAX_PAYLOAD + 4:
                problems.append(f"run {run}, {name} proxy: the row came in no packet of 16 MiB - 1")
        decoded, relayed = answers["decoded"], answers["relay"]
        if isinstance(decoded, Answer) and isinstance(relayed, Answer):
            problems.append(_differs(f"run {run}", decoded.frames, relayed.frames) or "")
    problems = [p for p in problems if p]
    if problems:
        pytest.fail(f"{sql}:\n" + "\n".join(problems), pytrace=False)


# -- OK and error packets ----------------------------------------------------------------------------------

DML_KEY = 8
#: (kind, statement, parameters before the key, the error MariaDB answers or 0): kind "text" is COM_QUERY
#: ({k}: the key), "types" / "no-types" COM_STMT_EXECUTE with the parameters' types or new-params-bound 0.
DML_STEPS = [
    ("text", "INSERT INTO t_dml (id, v, s) VALUES ({k}, 1, 'a')", (), 0),
    ("text", "INSERT INTO t_dml (id, v, s) VALUES ({k}, 2, 'b')", (), 1062),  # duplicate entry
    ("text", "INSERT INTO t_dml (id, v, s) VALUES ({k}, 300, 'c')", (), 1264),  # out of range (strict mode)
    ("text", "INSERT INTO t_dml (id, v, s) VALUES ({k}, 1, 'toolong')", (), 1406),  # data too long
    ("text", "INSERT INTO t_dml (id, v, s) VALUES ({k}, NULL, 'x')", (), 1048),  # cannot be null
    ("text", "UPDATE t_dml SET v = 5 WHERE id = {k}", (), 0),
    ("text", "UPDATE t_dml SET v = 5 WHERE id = {k}", (), 0),  # matched, not changed: 0 affected
    ("text", "UPDATE t_dml SET v = 500 WHERE id = {k}", (), 1264),
    ("types", "UPDATE t_dml SET v = ? WHERE id = ?", (7,), 0),
    ("no-types", "UPDATE t_dml SET v = ? WHERE id = ?", (8,), 0),
    ("no-types", "UPDATE t_dml SET v = ? WHERE id = ?", (1000,), 1264),
    ("text", "INSERT INTO t_dml (id, v, s) VALUES ({k}, 1, 'a') ON DUPLICATE KEY UPDATE v = v + 1", (), 0),  # 2 rows
    ("text", "SELECT nope FROM t_dml WHERE id = {k}", (), 1054),  # unknown column
    ("types", "DELETE FROM t_dml WHERE id = ?", (), 0),
    ("text", "DELETE FROM t_dml WHERE id = {k}", (), 0),  # nothing left: 0 affected
    ("text", "INSERT INTO t_dml (id, v, s) VALUES ({k}, 3, 'd')", (), 0),  # the next AUTO_INCREMENT value
    ("text", "DELETE FROM t_dml WHERE id = {k}", (), 0),
]  # fmt: skip


def _step(wire: Wire, kind: str, sql: str, params: tuple[int, ...], _error: int) -> Answer:
    if kind == "text":
        return wire.query(sql.format(k=DML_KEY))
    return wire.execute(sql, [*params, DML_KEY], with_types=kind == "types")


def _outcome(answer: Answer) -> tuple[Any, ...]:
    """What a client reads of an answer without rows: OK (affected rows, last insert id, warnings), or the
    error's code and SQLSTATE (its message is checked apart)."""
    if answer.end[:1] == b"\x00" and not answer.columns:
        affected, at = _lenenc(answer.end, 1)
        insert_id, at = _lenenc(answer.end, at)
        return "OK", affected, insert_id, int.from_bytes(answer.end[at + 2 : at + 4], "little")
    if answer.error is not None:
        code, text = answer.error
        return "ERR", code, text[:6]
    return "rows", len(answer.rows)


def _dml_rounds(setup: Setup) -> tuple[list[list[Answer]], list[list[Answer]], list[Answer]]:
    """The steps, :data:`RUNS` rounds of them on each proxy, then once straight on MariaDB:
    (decoded rounds, relayed rounds, MariaDB's answers). Once per module."""
    if "dml" not in setup.memo:
        database = setup.database_of(DML_KEY, "t_dml")

        def run(wire: Wire) -> list[Answer]:
            answers = [_step(wire, *step) for step in DML_STEPS]
            with _pymysql(setup, database).cursor() as cur:  # the same AUTO_INCREMENT values for the next client
                cur.execute("ALTER TABLE t_dml AUTO_INCREMENT = 1")
            return answers

        rounds = [(run(setup.decoded), run(setup.relay)) for _ in range(RUNS)]
        setup.memo["dml"] = [d for d, _ in rounds], [r for _, r in rounds], run(setup.direct[database])
    made: tuple[list[list[Answer]], list[list[Answer]], list[Answer]] = setup.memo["dml"]
    return made


def _step_id(step: tuple[str, str, tuple[int, ...], int]) -> str:
    return f"{step[0]}:{step[1].format(k='k')}:{','.join(map(str, step[2]))}"


def test_ok_and_error_packets_are_the_same_bytes(setup: Setup) -> None:
    decoded, relayed, _ = _dml_rounds(setup)
    for i, step in enumerate(DML_STEPS):
        _same_bytes(_step_id(step), [answers[i] for answers in decoded], [answers[i] for answers in relayed])


@pytest.mark.parametrize("index", range(len(DML_STEPS)), ids=[_step_id(step) for step in DML_STEPS])
def test_ok_and_error_packets_are_mariadbs(setup: Setup, index: int) -> None:
    _, relayed, mariadb = _dml_rounds(setup)
    got, want = relayed[-1][index], mariadb[index]
    assert (want.error or (0,))[0] == DML_STEPS[index][3], want.error  # the step does what it says
    assert _outcome(got) == _outcome(want)
    if want.error is not None:  # the proxy names the data source and the statement around MariaDB's message
        assert got.error is not None and want.error[1][6:] in got.error[1], (got.error, want.error)


# -- rows drawn by hypothesis ------------------------------------------------------------------------------

#: Columns, and values the two paths write alike today: what they write otherwise is an edge-row case with
#: its xfail (TEXT_BYTES_DIFFER). So binary strings are not NULL (the decoded path's character set); a FLOAT's
#: values are those of its six digits (a binary row sends the FLOAT read back from them: _FLOAT_FROM_TEXT).
DRAWN = {
    "c_tinyint": st.integers(-(2**7), 2**7 - 1), "c_tinyint_u": st.integers(0, 2**8 - 1),
    "c_smallint": st.integers(-(2**15), 2**15 - 1), "c_mediumint_u": st.integers(0, 2**24 - 1),
    "c_int": st.integers(-(2**31), 2**31 - 1), "c_int_u": st.integers(0, 2**32 - 1),
    "c_bigint": st.integers(-(2**63), 2**63 - 1), "c_bigint_u": st.integers(0, 2**64 - 1),
    "c_decimal": st.decimals(Decimal("-99999999.99"), Decimal("99999999.99"), places=2),
    "c_decimal_wide": st.integers(-(10**65) + 1, 10**65 - 1).map(
        lambda n: Decimal(f"{n}E-30")),  # from its digits: Decimal's arithmetic would round them to 28
    "c_float": st.floats(-1e30, 1e30).map(lambda f: float(f"{f:.5e}")),
    "c_double": st.floats(allow_nan=False, allow_infinity=False),
    "c_date": st.dates(dt.date(1000, 1, 1)),
    "c_datetime6": st.datetimes(dt.datetime(1000, 1, 1)),
    "c_timestamp3": st.datetimes(dt.datetime(1970, 1, 2), dt.datetime(2038, 1, 18)).map(
        lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)),
    "c_time6": st.timedeltas(dt.timedelta(hours=-838), dt.timedelta(hours=838)),
    "c_year": st.sampled_from([0, *range(1901, 2156)]),
    "c_char": st.text(st.characters(codec="utf-8"), max_size=10),
    "c_varchar": st.text(st.characters(codec="utf-8"), max_size=300),
    "c_varbinary": st.binary(max_size=300),
    "c_blob": st.binary(max_size=3000),
    "c_mediumtext": st.text(st.characters(codec="utf-8"), max_size=500),
    "c_enum": st.sampled_from(["a", "b", "ü", "🎉"]),
    "c_set": st.sets(st.sampled_from("xyz")).map(",".join),
    "c_json": st.dictionaries(st.text(max_size=5), st.none() | st.integers() | st.text(max_size=8)).map(
        lambda d: json.dumps(d, ensure_ascii=False)),
    "c_inet6": st.ip_addresses(v=6).map(str),
    "c_uuid": st.uuids(version=4).map(str),  # MariaDB refuses some others (1292)
}  # fmt: skip
NOT_NULL = ("c_varbinary", "c_blob")
_KEYS = itertools.count(10_000)


def test_drawn_rows_are_the_same_bytes_and_mariadbs_values(setup: Setup) -> None:
    columns = ", ".join(DRAWN)
    prepared = f"SELECT id, {columns} FROM t_types WHERE id = ?"

    @settings(derandomize=True, max_examples=25, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
    @given(row=st.fixed_dictionaries({name: values if name in NOT_NULL else st.none() | values
                                      for name, values in DRAWN.items()}))  # fmt: skip
    def check(row: dict[str, Any]) -> None:
        key = next(_KEYS)
        database = setup.database_of(key)
        with _pymysql(setup, database).cursor() as cur:
            cur.execute(f"INSERT INTO t_types (id, {', '.join(row)}) VALUES (%s{', %s' * len(row)})",
                        (key, *row.values()))  # fmt: skip
        text = f"SELECT id, {columns} FROM t_types WHERE id = {key}"
        decode_text: Callable[[Answer], list[tuple[Any, ...]]] = _text_rows
        checks = [("COM_QUERY", setup.text(text), decode_text, _mariadb_text(setup, database, text))]
        want = setup.direct[database].execute(prepared, [key], with_types=True)
        checks.append(("COM_STMT_EXECUTE", setup.binary(prepared, [key]), _binary_rows, _values(want, _binary_rows)))
        for command, (decoded, relayed), decode, rows in checks:
            _same_bytes(f"{command} of a drawn row", decoded, relayed)
            for proxy, answers in (("relay", relayed), ("decoded", decoded)):
                _check_values(f"{command} of a drawn row, {proxy} proxy", _values(answers[-1], decode), rows)

    check()
