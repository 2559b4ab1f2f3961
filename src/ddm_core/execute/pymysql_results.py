"""PyMySQL connections that decode each result shape's column descriptions once.

PyMySQL decodes every column-definition packet of every result (six
length-coded strings, character-set and converter lookups): for a three-column
point select that is about 124 k of the ~290 k instructions PyMySQL runs per
statement (docs/notes.md, "Column descriptions, and counting instructions").
A service sends the same few statement shapes over and over, so the server
sends the same column packets over and over. :class:`ColumnCachingConnection`
keys the decoded columns by the packets' bytes (and the connection's
encoding): the packets are still read from the socket — the protocol needs
that — but decoded only the first time.

The decoding itself stays PyMySQL's: on a miss its own ``_get_descriptions``
runs over the packets just read, so converters, encodings and the
``description`` 7-tuples are exactly what stock PyMySQL produces
(tests/test_mysql_connect.py compares them for every column type).
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["connection_class", "CACHE_SHAPES"]

#: Result shapes remembered per connection; past this the cache starts over.
CACHE_SHAPES = 256

_CLASS: type[Any] | None = None


def connection_class(pymysql: Any) -> type[Any]:
    """``pymysql.connections.Connection`` with cached column descriptions (built once, lazily)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _build(pymysql)
    return _CLASS


def _build(pymysql: Any) -> type[Any]:
    connections = pymysql.connections
    needed = ("MySQLResult", "MysqlPacket", "Connection")
    if not all(hasattr(connections, n) for n in needed) or not all(
        hasattr(connections.MySQLResult, m) for m in ("_get_descriptions", "read", "init_unbuffered_query")
    ):
        return connections.Connection  # type: ignore[no-any-return]  # a PyMySQL without these internals: stock
    base_result: Any = connections.MySQLResult
    packet_class: Any = connections.MysqlPacket

    class ColumnCachingResult(base_result):  # type: ignore[misc]
        def _get_descriptions(self) -> None:
            conn = self.connection
            read = conn._read_packet
            columns = tuple(read().get_all_data() for _ in range(self.field_count))
            eof = read()
            if not eof.is_eof_packet():
                raise connections.err.InternalError("Protocol error, expecting EOF after the column definitions")
            key = (conn.encoding, columns)
            cache: dict[Any, Any] = conn.ddm_columns
            hit = cache.get(key)
            if hit is None:
                hit = _decode(self, conn, columns, eof.get_all_data())
                if len(cache) >= CACHE_SHAPES:
                    cache.clear()
                cache[key] = hit
            fields, converters, self.description = hit
            self.fields = list(fields)
            self.converters = list(converters)

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
        return tuple(result.fields), tuple(result.converters), result.description

    class ColumnCachingConnection(connections.Connection):  # type: ignore[misc, name-defined]
        """A PyMySQL connection whose results decode each column list shape once."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.ddm_columns: dict[Any, Any] = {}
            super().__init__(*args, **kwargs)

        def _read_query_result(self, unbuffered: bool = False) -> Any:
            # PyMySQL's own method, with the result class swapped.
            self._result = None
            result = ColumnCachingResult(self)
            if unbuffered:
                result.init_unbuffered_query()
            else:
                result.read()
            self._result = result
            if result.server_status is not None:
                self.server_status = result.server_status
            return result.affected_rows

    return ColumnCachingConnection
