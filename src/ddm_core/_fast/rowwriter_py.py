"""Result rows of Python values framed as MySQL packets, text or binary protocol (pure-Python twin).

A proxy writes the rows it merged (ORDER BY, DISTINCT, aggregates over several shards) to its client:
:func:`text_rows` for COM_QUERY results, :func:`binary_rows` for COM_STMT_EXECUTE ones. Each row is
one packet appended to ``buffer`` (split into 16 MiB - 1 pieces, as the protocol asks, when it is
longer), with sequence ids from ``seq``; both return the next sequence id. A value that cannot be
encoded raises its encoder's error, with the rows before it in ``buffer`` and nothing of its own.

Each column has a *kind*, how its values are encoded, and an *encoder*, the column's own function
(``value -> bytes``: for text the value's bytes, for binary the whole field) that is called for
whatever the kind does not cover itself: the caller picks both (ddm_core/proxy/row_writer.py, from
mysql-mimic's columns) so that the bytes are the ones the column's encoder alone would give. The
kinds only spare the calls for the common values.
"""

from __future__ import annotations

import struct
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, Callable, Iterable, Sequence

__all__ = [
    "text_rows", "binary_rows", "STRING", "BYTES", "TINY_TEXT", "ENCODER", "INT8", "UINT8", "INT16",
    "UINT16", "INT32", "UINT32", "INT64", "UINT64", "FLOAT", "DOUBLE", "DATETIME", "TIME", "TIME_TEXT",
    "MAX_PAYLOAD",
]  # fmt: skip

#: A string in UTF-8: ``str`` encoded, ``bytes`` as they are, anything else as its ``str()`` (both protocols).
STRING = 0
#: ``bytes`` as they are, anything else by the encoder (a column whose character set is not UTF-8).
BYTES = 1
#: Text protocol: the decimal digits of ``int(value)`` (mimic's TINYINT).
TINY_TEXT = 2
#: The column's encoder, for every value.
ENCODER = 3
#: Binary protocol: ``int(value)`` packed little-endian in the column's size and sign.
INT8, UINT8, INT16, UINT16, INT32, UINT32, INT64, UINT64 = range(4, 12)
#: Binary protocol: IEEE 754 single and double.
FLOAT, DOUBLE = 12, 13
#: Binary protocol: a ``datetime`` or ``date`` (DATE, DATETIME, TIMESTAMP), other values by the encoder.
DATETIME = 14
#: Binary protocol: a ``timedelta`` (TIME), other values by the encoder.
TIME = 15
#: Text protocol: a ``timedelta`` (TIME) as MariaDB writes it, other values as a STRING's (a ``Decimal`` in plain notation).
TIME_TEXT = 16

#: The longest packet payload; a longer one goes on in the next packet(s).
MAX_PAYLOAD = 0xFFFFFF

_INTEGERS = {kind: struct.Struct("<" + code).pack for kind, code in zip(range(INT8, UINT64 + 1), "bBhHiIqQ")}
_FLOAT = struct.Struct("<f").pack
_DOUBLE = struct.Struct("<d").pack
_HEADER = struct.Struct("<I")
_DATE = struct.Struct("<BHBB")
_DATETIME = struct.Struct("<BHBBBBB")
_DATETIME_US = struct.Struct("<BHBBBBBI")
_TIME = struct.Struct("<BBIBBB")
_TIME_US = struct.Struct("<BBIBBBI")

Row = Sequence[Any]
Encoder = Callable[[Any], bytes]


def text_rows(buffer: bytearray, seq: int, rows: Iterable[Row], kinds: Sequence[int], encoders: Sequence[Encoder]) -> int:
    """Append one text-protocol row packet per row: each value a length-encoded string, NULL as 0xFB."""
    return _write(buffer, seq, rows, _text_row, kinds, encoders)


def binary_rows(buffer: bytearray, seq: int, rows: Iterable[Row], kinds: Sequence[int], encoders: Sequence[Encoder]) -> int:
    """Append one binary-protocol row packet per row (COM_STMT_EXECUTE's): 0x00, the NULL bitmap
    (offset 2), then each non-NULL value's field."""
    return _write(buffer, seq, rows, _binary_row, kinds, encoders)


def _write(buffer: bytearray, seq: int, rows: Iterable[Row], write_row: Callable[..., None], kinds: Sequence[int],
           encoders: Sequence[Encoder]) -> int:  # fmt: skip
    """Each row's packet, framed (split when too long); a row that fails is taken back whole."""
    start = len(buffer)
    try:
        for row in rows:
            write_row(buffer, start, row, kinds, encoders)
            seq = _close(buffer, start, seq)
            start = len(buffer)
    except BaseException:  # the rows before it stand, as mimic's did
        del buffer[start:]
        raise
    return seq


def _text_row(buffer: bytearray, start: int, row: Row, kinds: Sequence[int], encoders: Sequence[Encoder]) -> None:
    buffer += b"\x00\x00\x00\x00"  # the header, filled in by _close
    for i, kind in enumerate(kinds):
        value = row[i]
        if value is None:
            buffer.append(0xFB)
            continue
        if kind == STRING:
            data = _utf8(value)
        elif kind == BYTES and isinstance(value, bytes):
            data = value
        elif kind == TINY_TEXT:
            data = str(int(value)).encode()
        elif kind == TIME_TEXT:  # an interval as MariaDB spells it; anything else as a STRING value's text
            data = _time_text(value) if type(value) is timedelta else _utf8(value)
        else:
            data = encoders[i](value)
        _length(buffer, len(data))
        buffer += data


def _binary_row(buffer: bytearray, start: int, row: Row, kinds: Sequence[int], encoders: Sequence[Encoder]) -> None:
    buffer += bytes(5 + (len(kinds) + 9) // 8)  # the header, the 0x00 and the NULL bitmap, filled in below
    for i, kind in enumerate(kinds):
        value = row[i]
        if value is None:
            buffer[start + 5 + (i + 2) // 8] |= 1 << ((i + 2) % 8)
            continue
        if kind == STRING or (kind == BYTES and isinstance(value, bytes)):
            data = _utf8(value)
            _length(buffer, len(data))
            buffer += data
        elif INT8 <= kind <= UINT64:
            buffer += _INTEGERS[kind](int(value))
        elif kind == DOUBLE and type(value) is float:
            buffer += _DOUBLE(value)
        elif kind == FLOAT and type(value) is float:
            buffer += _FLOAT(value)
        elif kind == DATETIME and type(value) in (datetime, date):
            buffer += _datetime(value)
        elif kind == TIME and type(value) is timedelta:
            buffer += _time(value)
        else:
            buffer += encoders[i](value)


def _utf8(value: Any) -> bytes:
    """A STRING value's bytes: ``str`` encoded, ``bytes`` as they are, a ``Decimal`` in plain notation (as MariaDB
    spells one: ``str()`` writes ``0E-30``), anything else its ``str()`` encoded."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes):
        return value
    return (format(value, "f") if type(value) is Decimal else str(value)).encode()


def _length(buffer: bytearray, n: int) -> None:
    """A length-encoded integer (mimic's ``uint_len``)."""
    if n < 251:
        buffer.append(n)
    elif n < 0x10000:
        buffer += b"\xfc" + n.to_bytes(2, "little")
    elif n < 0x1000000:
        buffer += b"\xfd" + n.to_bytes(3, "little")
    else:
        buffer += b"\xfe" + n.to_bytes(8, "little")


def _close(buffer: bytearray, start: int, seq: int) -> int:
    """Fill in the header of the payload after ``start`` (reserved there), split when too long; the next seq."""
    length = len(buffer) - start - 4
    if length < MAX_PAYLOAD:
        _HEADER.pack_into(buffer, start, length | (seq << 24))
        return (seq + 1) & 0xFF
    payload = bytes(buffer[start + 4 :])
    del buffer[start:]
    for offset in range(0, length + 1, MAX_PAYLOAD):  # a last piece, empty when the length is a multiple
        piece = payload[offset : offset + MAX_PAYLOAD]
        buffer += _HEADER.pack(len(piece) | (seq << 24))
        buffer += piece
        seq = (seq + 1) & 0xFF
    return seq


def _datetime(value: date) -> bytes:
    """mimic's binary DATE / DATETIME: 4, 7 or 11 bytes after the length, as precise as the value."""
    if type(value) is not datetime:
        return _DATE.pack(4, value.year, value.month, value.day)
    if value.microsecond:
        return _DATETIME_US.pack(11, value.year, value.month, value.day, value.hour, value.minute, value.second,
                                 value.microsecond)  # fmt: skip
    if value.hour or value.minute or value.second:
        return _DATETIME.pack(7, value.year, value.month, value.day, value.hour, value.minute, value.second)
    return _DATE.pack(4, value.year, value.month, value.day)


def _magnitude(value: timedelta) -> tuple[bool, int, int, int]:
    """The sign, then the days, seconds and microseconds of ``abs(value)``.

    A negative ``timedelta`` keeps negative days and positive seconds (-1 s is -1 day + 86 399 s):
    mimic wrote those parts as they are (-25:30 reached a client as -70:30 in binary, as the text
    "-2 days, 22:30:00" in text); MariaDB sends the sign and the magnitude.
    """
    days, seconds, micro = value.days, value.seconds, value.microseconds
    if days >= 0:
        return False, days, seconds, micro
    days = -days
    if micro:
        micro, seconds = 1_000_000 - micro, seconds + 1
    if seconds:
        seconds, days = 86_400 - seconds, days - 1
    return True, days, seconds, micro


def _time(value: timedelta) -> bytes:
    """Binary TIME: 0, 8 or 12 bytes after the length (sign, days, hours, minutes, seconds, microseconds)."""
    negative, days, rest, micro = _magnitude(value)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if micro:
        return _TIME_US.pack(12, negative, days, hours, minutes, seconds, micro)
    if days or hours or minutes or seconds:
        return _TIME.pack(8, negative, days, hours, minutes, seconds)
    return b"\x00"


def _time_text(value: timedelta) -> bytes:
    """Text TIME: ``str(value)`` under a day (mimic's, which clients read), else MariaDB's ``[-]HHH:MM:SS[.ffffff]``."""
    if value.days == 0:
        return str(value).encode()
    negative, days, rest, micro = _magnitude(value)
    hours, rest = divmod(rest, 3600)
    text = f"{'-' if negative else ''}{days * 24 + hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return (text + f".{micro:06d}" if micro else text).encode()
