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
values (docs/proxy.md#prepared-statements).
"""

from __future__ import annotations

import io
import struct
from typing import Any, Callable, NamedTuple

from mysql_mimic import packets
from mysql_mimic.charset import CharacterSet
from mysql_mimic.errors import MysqlError
from mysql_mimic.types import Capabilities, read_uint_4, read_uint_len

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
    attributes = Capabilities.CLIENT_QUERY_ATTRIBUTES in capabilities
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
        values = packets._read_params(capabilities, charset, reader, count, stmt.param_buffers)
    except (IndexError, ValueError, struct.error) as exc:  # a type byte MySQL does not have, a cut-short packet
        raise MysqlError(f"malformed COM_STMT_EXECUTE: {exc}", code=MALFORMED_PACKET) from exc
    if reader.tell() != len(data):
        raise MysqlError("malformed COM_STMT_EXECUTE: bytes after its last parameter", code=MALFORMED_PACKET)
    if sent is not None:  # remembered only once the execute was read whole: a malformed one changes nothing
        types[stmt.stmt_id] = sent
    return Execute(stmt, use_cursor, [value for _, value in values[: stmt.num_params]])


class _Exact(io.BytesIO):
    """A packet reader for which running out of bytes is an error, not a shorter read (mimic's readers take
    what is there: a string announcing 100 bytes with 3 left would be read as those 3)."""

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        if size is not None and size >= 0 and len(data) < size:
            raise MysqlError("malformed COM_STMT_EXECUTE: the packet ends inside a value", code=MALFORMED_PACKET)
        return data
