"""COM_STMT_EXECUTE read into the statement and its parameter *values*.

mysql-mimic 3.0.5 answers COM_STMT_EXECUTE by pasting the parameters into the
SQL text, quoting strings without escaping them (``'{value}'``): a string
parameter holding a quote would become SQL. It also refuses an execute that
does not resend the parameter types, which libmariadb / libmysqlclient omit
after the first execute of a statement (sysbench fails on it). Here the
packet is read with mimic's own parameter reader, the types of the first
execute are remembered per statement and put back when a later execute
leaves them out, and the values go to the router as parameters of the ``?``
text — so they are never SQL, and one statement is parsed once, whatever its
values (docs/proxy.md#prepared-statements). Mimic's reader knows integers,
floats and strings only; a DATE / DATETIME / TIMESTAMP / TIME parameter (what
mysql-connector sends for a ``datetime``) or a DECIMAL one is read here.
"""

from __future__ import annotations

import datetime
import decimal
import io
import struct
from typing import Any, Callable, NamedTuple

from mysql_mimic import packets
from mysql_mimic.charset import CharacterSet
from mysql_mimic.errors import MysqlError
from mysql_mimic.results import NullBitmap
from mysql_mimic.types import Capabilities, ColumnType, read_str_len, read_uint_1, read_uint_4, read_uint_len

__all__ = ["Execute", "read_execute"]

MALFORMED_PACKET = 1835  # ER_MALFORMED_PACKET


class Execute(NamedTuple):
    stmt: Any  # mimic's PreparedStatement
    use_cursor: bool
    params: list[Any]


def _lenenc_end(data: bytes, pos: int) -> int:
    """Where a length-encoded string starting at ``pos`` ends."""
    first = data[pos]
    if first < 0xFB:
        return pos + 1 + first
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
    length = int.from_bytes(data[pos + 1 : pos + 1 + width], "little")
    return pos + 1 + width + length


_QUERY_ATTRIBUTES = int(Capabilities.CLIENT_QUERY_ATTRIBUTES)


def read_execute(
    data: bytes,
    capabilities: Capabilities,
    charset: CharacterSet,
    get_stmt: Callable[[int], Any],
    types: dict[int, bytes],
) -> Execute:
    """The statement, cursor flag and parameter values of one COM_STMT_EXECUTE payload.

    ``types`` maps statement id → the parameter-type bytes of its last execute
    that sent them (updated here).

    Raises:
        MysqlError: an execute without types for a statement never executed with them.
    """
    reader = _Exact(data)
    stmt = get_stmt(read_uint_4(reader))
    use_cursor, count_available = packets._read_cursor_flags(reader)
    read_uint_4(reader)  # iteration count, always 1
    attributes = bool(int(capabilities) & _QUERY_ATTRIBUTES)  # not Flag's `in`: ~25 interpreted opcodes
    count = stmt.num_params
    if stmt.num_params > 0 or (attributes and count_available):
        if attributes:
            count = read_uint_len(reader)  # the statement's parameters, then the query attributes
            if count < stmt.num_params:
                raise MysqlError(f"malformed COM_STMT_EXECUTE: {count} parameter(s) sent, the statement has "
                                 f"{stmt.num_params}", code=MALFORMED_PACKET)  # fmt: skip
    if count == 0:
        return Execute(stmt, use_cursor, [])
    start = reader.tell()
    flag_at = start + (count + 7) // 8  # after the NULL bitmap
    if flag_at >= len(data):
        raise MysqlError("malformed COM_STMT_EXECUTE: the packet ends in its NULL bitmap", code=MALFORMED_PACKET)
    sent: bytes | None = None
    if data[flag_at] == 0:
        remembered = types.get(stmt.stmt_id)
        if remembered is None:
            raise MysqlError("the first execute of a prepared statement must send its parameter types", code=1210)
        data = data[:flag_at] + b"\x01" + remembered + data[flag_at + 1 :]
    else:
        end = flag_at + 1
        for _ in range(count):
            end += 2  # type and unsigned flag
            if attributes:
                end = _lenenc_end(data, end)  # the (empty) name of a statement parameter
        sent = data[flag_at + 1 : end]
    reader = _Exact(data)
    reader.seek(start)
    try:
        values = _read_params(attributes, charset, reader, count, stmt.param_buffers)
    # a type byte MySQL does not have, a cut-short packet, a date or decimal that is none
    except (IndexError, ValueError, struct.error, decimal.InvalidOperation) as exc:
        raise MysqlError(f"malformed COM_STMT_EXECUTE: {exc}", code=MALFORMED_PACKET) from exc
    if reader.tell() != len(data):
        raise MysqlError("malformed COM_STMT_EXECUTE: bytes after its last parameter", code=MALFORMED_PACKET)
    if sent is not None:  # remembered only once the execute was read whole: a malformed one changes nothing
        types[stmt.stmt_id] = sent
    return Execute(stmt, use_cursor, values[: stmt.num_params])


_DATES = {ColumnType.DATE, ColumnType.DATETIME, ColumnType.TIMESTAMP}
_DECIMALS = {ColumnType.DECIMAL, ColumnType.NEWDECIMAL}


def _read_params(attributes: bool, charset: CharacterSet, reader: io.BytesIO, count: int,
                 buffers: dict[int, bytearray] | None) -> list[Any]:  # fmt: skip
    """The values of an execute's parameter block (NULL bitmap, types, values), as mimic's ``_read_params``
    reads them, with the temporal and decimal types it refuses."""
    nulls = NullBitmap.from_buffer(reader, count)
    read_uint_1(reader)  # new-params-bound: 1 here (read_execute put the remembered types back)
    types = []
    for _ in range(count):
        types.append(packets._read_param_type(reader))
        if attributes:
            read_str_len(reader)  # a statement parameter's name: empty
    out: list[Any] = []
    for i, (kind, unsigned) in enumerate(types):
        if nulls.is_flipped(i):
            out.append(None)
        elif buffers and i in buffers:  # sent as long data
            out.append(charset.decode(buffers[i]))
        elif kind in _DATES:
            out.append(_date_value(reader, kind))
        elif kind is ColumnType.TIME:
            out.append(_time_value(reader))
        elif kind in _DECIMALS:
            out.append(decimal.Decimal(charset.decode(read_str_len(reader))))
        else:
            out.append(packets._read_param_value(charset, reader, kind, unsigned))
    return out


def _date_value(reader: io.BytesIO, kind: ColumnType) -> Any:
    """A binary DATE / DATETIME / TIMESTAMP: a length (0, 4, 7 or 11), then year, month, day, [h, m, s, [µs]]."""
    size = read_uint_1(reader)
    if size not in (0, 4, 7, 11):
        raise ValueError(f"a date parameter of {size} bytes")
    raw = reader.read(size)
    if size == 0 or raw[:4] == b"\0\0\0\0":  # MySQL's zero date, which Python has no value for
        return "0000-00-00" if kind is ColumnType.DATE else "0000-00-00 00:00:00"
    year, month, day = struct.unpack_from("<HBB", raw)
    if kind is ColumnType.DATE:
        return datetime.date(year, month, day)
    hour, minute, second = raw[4:7] if size >= 7 else (0, 0, 0)
    micro = struct.unpack_from("<I", raw, 7)[0] if size == 11 else 0
    return datetime.datetime(year, month, day, hour, minute, second, micro)


def _time_value(reader: io.BytesIO) -> datetime.timedelta:
    """A binary TIME: a length (0, 8 or 12), then negative, days, h, m, s, [µs]."""
    size = read_uint_1(reader)
    if size not in (0, 8, 12):
        raise ValueError(f"a time parameter of {size} bytes")
    if size == 0:
        return datetime.timedelta(0)
    raw = reader.read(size)
    negative, days, hour, minute, second = struct.unpack_from("<BIBBB", raw)
    micro = struct.unpack_from("<I", raw, 8)[0] if size == 12 else 0
    value = datetime.timedelta(days=days, hours=hour, minutes=minute, seconds=second, microseconds=micro)
    return -value if negative else value


_read_bytes = io.BytesIO.read  # called straight: an execute's fields are a dozen reads or more


class _Exact(io.BytesIO):
    """A packet reader for which running out of bytes is an error, not a shorter read (mimic's readers take
    what is there: a string announcing 100 bytes with 3 left would be read as those 3)."""

    def read(self, size: int | None = -1) -> bytes:
        data = _read_bytes(self, size)
        if size is not None and len(data) < size:  # a negative size (all) reads no fewer than it asks
            raise MysqlError("malformed COM_STMT_EXECUTE: the packet ends inside a value", code=MALFORMED_PACKET)
        return data
