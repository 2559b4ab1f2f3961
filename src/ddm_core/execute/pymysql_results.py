"""PyMySQL connections that read buffered results in one loop and decode each column shape once.

Two costs of stock PyMySQL on a short result, both paid on the hot path
(docs/notes.md, "Reading results"):

* **Column descriptions.** PyMySQL decodes every column-definition packet of
  every result (six length-coded strings, character-set and converter
  lookups): for a three-column point select about 124 k of the ~290 k
  instructions it runs per statement. A service sends the same few statement
  shapes over and over, so the server sends the same column packets over and
  over. The decoded columns are keyed by the packets' bytes (and the
  connection's encoding): the packets are still read from the socket — the
  protocol needs that — but decoded only the first time. The decoding itself
  stays PyMySQL's: on a miss its own ``_get_descriptions`` runs over the
  packets just read, so converters, encodings and the ``description``
  7-tuples are exactly what stock PyMySQL produces.
* **Packets.** PyMySQL reads each packet through three method calls and a
  packet object. The column and row packets of a buffered result are read by
  the ``wire`` unit (compiled, with a pure twin) in one loop that decodes each
  row's values as PyMySQL's ``_read_row_from_packet`` does. Anything unusual —
  an error packet, a wrong sequence number, a lost connection — comes back to
  this module, which raises what PyMySQL raises for it.

Unbuffered results (``SSCursor``) are read a ``fetchmany`` at a time by the
same ``wire`` loop: it is handed the stream through :class:`_Batch`, which
answers a made-up EOF packet in place of the header after the batch's last
row, so the loop stops there and the rest stays in the stream for the next
batch (PyMySQL's own reader spends ~360 interpreted opcodes per row on
packet objects; the proxy streams every multi-unit read in autocommit).
tests/test_mysql_connect.py, tests/test_wire.py and
tests/test_pymysql_stream_batches.py compare both ways, types included.
"""

from __future__ import annotations

import io
import struct
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ddm_core._fast import SELECTED

if TYPE_CHECKING:
    from ddm_core._fast import wire
else:
    wire = SELECTED.wire

__all__ = ["connection_class", "CACHE_SHAPES", "ColumnDescription"]

class ColumnDescription(tuple[Any, ...]):
    """A column's DB-API 7-tuple that also keeps the flags of the server's column definition (``flags``:
    UNSIGNED, BINARY, NOT NULL...), which the 7 items leave out: without them an unsigned integer column
    cannot be told from a signed one (the proxy announces the sign, proxy/columns.py). It compares,
    hashes and unpacks as the plain 7-tuple; the MySQL driver's descriptions are made of these
    (execute/pymysql_results.py), other drivers' are plain tuples."""

    flags: int

    def __new__(cls, items: Sequence[Any], flags: int) -> ColumnDescription:
        self = super().__new__(cls, items)
        self.flags = flags
        return self

    def __reduce__(self) -> Any:
        return ColumnDescription, (tuple(self), self.flags)


#: Result shapes remembered per connection; past this the cache starts over.
CACHE_SHAPES = 256

_CLASS: type[Any] | None = None
_EOF_FIELDS = struct.Struct("<xhh")  # an EOF packet: 0xFE, warnings, server status
_MAX_PAYLOAD = 0xFFFFFF  # a packet this long continues in the next one
_MADE_UP_EOF = b"\xfe\x00\x00\x00\x00"
_ONE_BYTE_FIRST = b"\x01\x00\x00\x01"  # a 1-byte packet numbered 1: a result set's column count


class _Batch:
    """A stream's ``read`` for ``wire.read_rows`` (:attr:`read`) that ends a batch after ``rows`` row packets.

    The reader alternates header and body reads. Once the batch is full, the next header asked for is a
    made-up EOF packet's, numbered as the real next one would be, so the compiled loop returns there; the
    real packets after it stay unread for the next batch. ``made_up`` says which EOF ended the batch. The
    reader is a closure over its counters (two calls a row: a method reading slots cost twice as much).
    """

    __slots__ = ("read", "made_up")

    def __init__(self, read: Callable[[int], bytes], rows: int, seq: int) -> None:
        self.made_up = False
        left = rows
        header = True
        last = (seq - 1) & 0xFF  # the last header's number
        ended = False

        def batch_read(n: int) -> bytes:
            nonlocal left, header, last, ended
            if header:
                header = False
                if left > 0:
                    data = read(n)
                    if len(data) == 4:
                        last = data[3]
                    return data
                ended = self.made_up = True
                return bytes((5, 0, 0, (last + 1) & 0xFF))
            header = True
            if ended:
                return _MADE_UP_EOF
            if n < _MAX_PAYLOAD:  # a row's last (or only) packet
                left -= 1
            return read(n)

        self.read = batch_read


def connection_class(pymysql: Any) -> type[Any]:
    """``pymysql.connections.Connection`` reading results as described above (built once, lazily)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _build(pymysql)
    return _CLASS


def _build(pymysql: Any) -> type[Any]:
    connections = pymysql.connections
    needed = ("MySQLResult", "MysqlPacket", "Connection")
    if not all(hasattr(connections, n) for n in needed) or not all(
        hasattr(connections.MySQLResult, m)
        for m in ("_get_descriptions", "_read_rowdata_packet", "read", "init_unbuffered_query")
    ):
        return connections.Connection  # type: ignore[no-any-return]  # a PyMySQL without these internals: stock
    base_result: Any = connections.MySQLResult
    packet_class: Any = connections.MysqlPacket
    err = connections.err
    lost = connections.CR.CR_SERVER_LOST
    more_results = pymysql.constants.SERVER_STATUS.SERVER_MORE_RESULTS_EXISTS
    stock_sscursor = pymysql.cursors.SSCursor

    def read_with(conn: Any, reader: Callable[..., tuple[Any, int, bytes, int]], arg: Any) -> tuple[Any, bytes]:
        """Run a ``wire`` reader on the connection's stream; raise for every outcome but EOF."""
        try:
            got, conn._next_seq_id, last, outcome = reader(conn._rfile.read, conn._next_seq_id, arg)
        except OSError as exc:  # as PyMySQL's _read_bytes: the stream is unusable
            conn._force_close()
            raise err.OperationalError(lost, f"Lost connection to MySQL server during query ({exc})") from exc
        except BaseException:  # a converter failed mid-result: the rest of it is still unread
            conn._force_close()
            raise
        if outcome == wire.EOF:
            return got, last
        if outcome == wire.ERROR:
            packet_class(last, conn.encoding).raise_for_error()
        conn._force_close()
        if outcome == wire.OUT_OF_SEQUENCE:
            if last[3] == 0:  # MariaDB sends an error packet numbered 0 when it shuts down
                raise err.OperationalError(lost, "Lost connection to MySQL server during query")
            raise err.InternalError(f"Packet sequence number wrong - got {last[3]} expected {conn._next_seq_id}")
        if outcome == wire.LOST:
            raise err.OperationalError(lost, "Lost connection to MySQL server during query")
        raise err.InternalError("Protocol error, expecting EOF after the column definitions")

    class FastResult(base_result):  # type: ignore[misc]
        connection: Any  # PyMySQL's: the connection while the result is read, then None
        unbuffered_active: bool
        rows: Any

        def _get_descriptions(self) -> None:
            conn = self.connection
            columns, eof = read_with(conn, wire.read_columns, self.field_count)
            fields, converters, self.description = _described(self, conn, columns, eof)
            self.fields = list(fields)
            self.converters = list(converters)

        def _read_rowdata_packet(self) -> None:
            rows, eof = read_with(self.connection, wire.read_rows, self.converters)
            self.warning_count, status = _EOF_FIELDS.unpack_from(eof)
            self.has_next = status & more_results
            self.connection = None  # as PyMySQL: no cycle through the connection
            self.affected_rows = len(rows)
            self.rows = tuple(rows)

        def read_batch(self, size: int) -> list[Any]:
            """Up to ``size`` more rows of an unbuffered result (``[]``: none left); its end read as PyMySQL's
            ``_read_rowdata_packet_unbuffered`` reads it."""
            if not self.unbuffered_active or size <= 0:
                return []
            conn = self.connection
            batch = _Batch(conn._rfile.read, size, conn._next_seq_id)

            def read_rows(read: Any, seq: int, converters: Any) -> tuple[Any, int, bytes, int]:
                return wire.read_rows(batch.read, seq, converters)

            try:
                rows, eof = read_with(conn, read_rows, self.converters)
            except BaseException:
                self.unbuffered_active = False  # as PyMySQL after an error packet: nothing more is read
                raise
            if batch.made_up:
                conn._next_seq_id = (conn._next_seq_id - 1) & 0xFF  # the made-up packet took no number
            else:
                self.warning_count, status = _EOF_FIELDS.unpack_from(eof)
                self.has_next = status & more_results
                self.unbuffered_active = False
                self.connection = None
                self.rows = None
            if rows:
                self.affected_rows = 1
                if batch.made_up:
                    self.rows = (rows[-1],)  # as PyMySQL's: the last row read
            return rows  # type: ignore[no-any-return]

    class FastSSCursor(pymysql.cursors.SSCursor):  # type: ignore[misc]
        """PyMySQL's ``SSCursor`` whose ``fetchmany`` reads its rows in one compiled loop (:class:`_Batch`)."""

        def fetchmany(self, size: int | None = None) -> Any:
            self._check_executed()
            result = self._result
            if type(result) is not FastResult:
                return super().fetchmany(size)
            wanted = self.arraysize if size is None else size
            rows = result.read_batch(wanted)
            self.rownumber += len(rows)
            if not result.unbuffered_active or len(rows) < wanted:
                self.warning_count = result.warning_count
            return rows or ()  # as PyMySQL: () at the end

    def _described(result: Any, conn: Any, columns: tuple[bytes, ...], eof: bytes) -> tuple[Any, ...]:
        """(fields, converters, description) of these column packets: decoded once per shape and encoding.
        ``result``: the result being read (``None``: a whole answer read by ``ddm_read_answer``)."""
        key = (conn.encoding, columns)
        cache: dict[Any, Any] = conn.ddm_columns
        hit: tuple[Any, ...] | None = cache.get(key)
        if hit is None:
            if result is None:
                result = FastResult(conn)
                result.field_count = len(columns)
            hit = _decode(result, conn, columns, eof)
            if len(cache) >= CACHE_SHAPES:
                cache.clear()
            cache[key] = hit
        return hit

    def _decode(result: Any, conn: Any, columns: tuple[bytes, ...], eof: bytes) -> tuple[Any, ...]:
        """PyMySQL's own decoding, fed the packets already read."""
        replay = iter((*columns, eof))
        encoding = conn.encoding

        def read_again(packet_type: Callable[..., Any] = packet_class) -> Any:
            return packet_type(next(replay), encoding)

        conn._read_packet = read_again  # shadows the method for this one call
        try:
            base_result._get_descriptions(result)
        finally:
            del conn._read_packet
        # the 7-tuples with each field's flags (an UNSIGNED column is otherwise told from a signed one nowhere)
        description = tuple(ColumnDescription(d, f.flags) for d, f in zip(result.description, result.fields))
        result.description = description
        return tuple(result.fields), tuple(result.converters), description

    class FastResultConnection(connections.Connection):  # type: ignore[misc, name-defined]
        """A PyMySQL connection whose results are read as this module describes."""

        _result: Any  # PyMySQL's: the last result read

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.ddm_columns: dict[Any, Any] = {}
            super().__init__(*args, **kwargs)

        def cursor(self, cursor: Any = None) -> Any:
            # the executor's streamed cursors (drivers.py asks for PyMySQL's SSCursor) read in batches
            return super().cursor(FastSSCursor if cursor is stock_sscursor else cursor)

        def ddm_read_answer(self, answer: bytes) -> tuple[Any, list[Any]] | None:
            """``(description, rows)`` of ``answer``, the bytes of a whole result set an event loop took off the
            socket (its packets numbered from 1), read as :meth:`_read_query_result` and a buffered cursor's
            ``fetchall`` read them, with no result or cursor object (docs/proxy.md#multi-unit-reads-on-the-loop).
            ``None``: anything else — an error or OK packet, more results to come, a column count past 250,
            a converter that failed —, left untouched for PyMySQL's own reader, which raises what it raises."""
            if len(answer) < 5 or answer[:4] != _ONE_BYTE_FIRST:
                return None
            count = answer[4]
            if count == 0 or count >= 0xFB:  # an OK packet; a length-coded count (0xFB: LOCAL INFILE)
                return None
            read = io.BytesIO(answer).read
            read(5)
            try:
                columns, seq, eof, outcome = wire.read_columns(read, 2, count)
                if outcome != wire.EOF:
                    return None
                hit = _described(None, self, columns, eof)
                rows, seq, last, outcome = wire.read_rows(read, seq, hit[1])
            except Exception:  # noqa: BLE001  # a converter failed: PyMySQL's reader raises it
                return None
            if outcome != wire.EOF or _EOF_FIELDS.unpack_from(last)[1] & more_results or read(1):
                return None
            # What PyMySQL's read leaves (the server status too: a result set's EOF does not change it there).
            self._result = None  # read whole: nothing for the next command to finish
            self._next_seq_id = seq
            self._affected_rows = len(rows)
            return hit[2], rows

        def _read_query_result(self, unbuffered: bool = False) -> Any:
            # PyMySQL's own method, with the result class swapped.
            self._result = None
            result = FastResult(self)
            if unbuffered:
                result.init_unbuffered_query()
            else:
                result.read()
            self._result = result
            if result.server_status is not None:
                self.server_status = result.server_status
            return result.affected_rows

    return FastResultConnection
