"""A buffered asyncmy answer read straight from the connection's receive buffer, each column shape decoded once.

asyncmy reads a result through a chain of coroutines (``query`` → ``_read_query_result`` →
``MySQLResult.read`` → one ``read_packet`` per packet) and decodes every column-definition
packet of every result (a ``FieldDescriptorPacket`` each, converter and encoding lookups):
for a three-column point select about half of what asyncmy runs per statement. A service
sends the same few statement shapes over and over, so the server sends the same column
packets over and over; as the thread runner's reader (``execute/pymysql_results.py``), the
decoded shape is kept per connection, keyed by the packets' bytes.

:func:`answer_of` sends the statement as asyncmy does (``_execute_command``), waits for
the first bytes of the answer as asyncmy does (``_fill_buffer``), then looks at what is
buffered. Only a *complete* text result set whose column packets were seen before on this
connection, with no result after it, on a connection that ends results with an OK packet
(``CLIENT_DEPRECATE_EOF``: MariaDB and MySQL 5.7+), is taken here: its rows are decoded by asyncmy's own
``parse_rows_from_buffer`` with the converters asyncmy chose for that shape, and the
connection is left as asyncmy leaves it (position, sequence id, affected rows, server
status). Anything else — an OK or error packet, a shape not seen yet, an answer still
arriving, a packet that does not parse — is read by asyncmy's own ``_read_query_result``
from the untouched buffer, so it raises and behaves exactly as stock asyncmy; a new shape
is remembered from what asyncmy decoded. tests/test_aio_drivers.py compares every MySQL
column type both ways.
"""

from __future__ import annotations

import struct
from typing import Any

from ddm_core.aio.result import UnitAnswer

__all__ = ["answer_of", "unsigned_lengths", "CACHE_SHAPES"]

#: Result shapes remembered per connection; past this the cache starts over.
CACHE_SHAPES = 256

_COM_QUERY = 0x03
_MORE_RESULTS = 8  # SERVER_STATUS.SERVER_MORE_RESULTS_EXISTS
_HEADER = b"\x01\x00\x00\x01"  # a one-byte payload, sequence 1
_CLOSING = struct.Struct("<IBBBH")  # length and sequence, 0xFE, affected rows, insert id, status

_READERS: tuple[Any, Any] | None = None
#: Does the installed asyncmy have the internals this module reads (checked on first use)? Without
#: them every answer is read by asyncmy's own ``query``, as before this module existed.
_SUPPORTED: bool | None = None
_CONNECTION_INTERNALS = ("_execute_command", "_fill_buffer", "_read_query_result")


def _asyncmy_readers() -> tuple[Any, Any]:
    """asyncmy's compiled packet walkers (imported on first use: asyncmy is an extra)."""
    global _READERS
    from asyncmy import protocol

    _READERS = protocol.parse_rows_from_buffer, protocol.skip_packets_from_buffer
    return _READERS


def _supported(raw: Any) -> bool:
    """The asyncmy internals read here are all present (asyncmy 0.2.18 has them; another version may not)."""
    global _SUPPORTED
    if _SUPPORTED is None:
        try:
            _asyncmy_readers()
            proto = raw._proto
            _SUPPORTED = all(hasattr(raw, name) for name in (*_CONNECTION_INTERNALS, "_deprecate_eof", "_next_seq_id")) \
                and all(hasattr(proto, name) for name in ("buffer", "pos", "length"))
        except (ImportError, AttributeError):
            _SUPPORTED = False
    return _SUPPORTED


async def answer_of(raw: Any, query: str) -> UnitAnswer:
    """Send ``query`` and read its whole answer, as asyncmy's ``query`` reads it (see the module docstring).

    Raises what asyncmy's ``query`` raises.
    """
    if not (_SUPPORTED or _supported(raw)):
        await raw.query(query)
        return _read_by_asyncmy(raw)
    result = raw._result
    if not raw._deprecate_eof or (result is not None and (result.unbuffered_active or result.has_next)):
        await raw.query(query)  # classic EOF packets (older servers), or a previous result to finish first
        return _read_by_asyncmy(raw)
    await raw._execute_command(_COM_QUERY, query.encode(raw._encoding, "surrogateescape"))
    proto = raw._proto
    if proto.length - proto.pos < 4:
        await raw._fill_buffer(4)
    shapes: dict[Any, Any] = raw.ddm_shapes
    taken = _take(raw, proto, shapes)
    if type(taken) is UnitAnswer:
        return taken
    await raw._read_query_result()
    result = raw._result
    if taken is not None and result.description is not None and not result.has_next:
        if len(shapes) >= CACHE_SHAPES:
            shapes.clear()
        shapes[taken] = (unsigned_lengths(result.description), tuple(result.converters))
    return _read_by_asyncmy(raw)


def _read_by_asyncmy(raw: Any) -> UnitAnswer:
    """The answer asyncmy's own read left in ``raw._result``."""
    result = raw._result
    description = result.description
    if description is None:
        return UnitAnswer(None, [], result.affected_rows, result.insert_id or None)
    rows = list(result.rows)
    return UnitAnswer(unsigned_lengths(description), rows, len(rows))


def unsigned_lengths(description: tuple[tuple[Any, ...], ...]) -> tuple[tuple[Any, ...], ...]:
    """A description with PyMySQL's column lengths.

    asyncmy keeps a column's length in a C ``int``, so 4294967295 (LONGTEXT,
    LONGBLOB, JSON) reads as -1; PyMySQL reports the unsigned value. Nothing is
    copied when no length wrapped.
    """
    for column in description:
        if column[3] < 0:
            break
    else:
        return description
    return tuple(
        column if column[3] >= 0 else (*column[:3], column[3] & 0xFFFFFFFF, column[4] & 0xFFFFFFFF, *column[5:])
        for column in description
    )


def _take(raw: Any, proto: Any, shapes: dict[Any, Any]) -> Any:
    """The buffered answer if it can be taken here; else the shape key to remember (bytes) or ``None``.

    Nothing is consumed unless a tuple is returned.
    """
    buf: bytearray = proto.buffer
    pos = proto.pos
    end = proto.length
    # The result-set header, packet 1 of the answer: a one-byte column count (0: OK, 0xFB: LOCAL INFILE,
    # 0xFF: error; 251 columns and more: asyncmy reads those).
    if end - pos < 5 or buf[pos : pos + 4] != _HEADER or raw._next_seq_id != 1:
        return None
    count = buf[pos + 4]
    if count == 0 or count >= 0xFB:
        return None
    parse_rows, skip_packets = _READERS or _asyncmy_readers()
    start = pos + 5
    after, seq, skipped = skip_packets(buf, start, end, 2, count)
    if skipped != count:
        return None
    key = bytes(buf[start:after])
    shape = shapes.get(key)
    if shape is None:
        return key
    rows: list[tuple[Any, ...]] = []
    try:
        at, seq = parse_rows(buf, after, end, shape[1], seq, rows, True)
    except Exception:  # a converter refused a value: asyncmy's own read raises it, from the same state
        return None
    # The packet that ends the rows, complete: an OK packet with a 0xFE header, affected rows and insert
    # id (one byte each after a result set, else asyncmy reads it), status, warnings.
    if end - at < 11:
        return None
    head, first, affected, insert_id, status = _CLOSING.unpack_from(buf, at)
    size = head & 0xFFFFFF
    if head >> 24 != seq or first != 0xFE or end - at - 4 < size or size < 7 or affected >= 0xFB or insert_id >= 0xFB:
        return None
    if status & _MORE_RESULTS:
        return None
    # What asyncmy's read leaves behind: position, sequence, affected rows, status.
    proto.pos = at + 4 + size
    raw._next_seq_id = (seq + 1) & 0xFF
    raw._result = None
    raw._affected_rows = len(rows)
    if status:
        raw.server_status = status
    return UnitAnswer(shape[0], rows, len(rows))
