"""Pure-Python twin of ``gate.pyx``: a logged-in client's commands, answered on the hot path or handed on.

The proxy's client connections are read by mysql-mimic through an asyncio stream
(``StreamReader``, mimic's packet reader, its command dispatch): hundreds of
interpreted instructions before a command reaches the session. After the login,
:class:`CommandGate` becomes the transport's protocol, in front of the stream's own:
it frames the client's commands itself and offers each complete one to ``hot``
(the session's hot path, docs/proxy.md#the-hot-path), which answers it directly or
declines. Whatever is declined, and everything after it until mimic waits for its
next command again, goes to the stream as it came, so mimic reads exactly the bytes
the client sent, in order.

Modes: *mimic* (bytes go to the stream reader), *idle* (the gate reads commands; it
enters it when mimic waits for a command with nothing left to read —
:meth:`CommandGate.command_awaited`), *hot* (a command taken by ``hot`` is running;
what arrives meanwhile waits in the gate until :meth:`CommandGate.done`). A packet the
gate does not take whole — a sequence id other than 0, a chain of 16 MB packets, a
length over ``limit``, a packet not all there yet — goes to mimic, whose reader answers it
as before (and drops a client that leaves a packet unfinished for ``proxy.netReadTimeoutMs``,
proxy/stream.py).
"""

from __future__ import annotations

import struct
from typing import Any, Callable

__all__ = ["CommandGate", "execute_params", "MIMIC", "IDLE", "HOT"]

MIMIC = 0
IDLE = 1
HOT = 2

_MAX_PAYLOAD = 0xFFFFFF
#: Bytes a client may send ahead while a hot command runs before the gate stops reading it.
_AHEAD = 1 << 20


#: Parameter types :func:`execute_params` reads: integers (TINY, SHORT, YEAR, LONG, INT24, LONGLONG) by
#: size, floats (FLOAT, DOUBLE) by their struct, strings (VARCHAR, VAR_STRING, STRING, the BLOBs), NULL.
_INTEGERS = {0x01: 1, 0x02: 2, 0x0D: 2, 0x03: 4, 0x09: 4, 0x08: 8}
_FLOATS = {0x04: struct.Struct("<f"), 0x05: struct.Struct("<d")}
_STRINGS = frozenset({0x0F, 0xFD, 0xFE, 0xFC, 0xF9, 0xFA, 0xFB})  # VARCHAR, VAR_STRING, STRING, the BLOBs
_NULL = 0x06
_WIDTHS = {0xFC: 2, 0xFD: 3, 0xFE: 8}


def execute_params(payload: bytes, count: int, remembered: bytes | None) -> tuple[list[Any], bytes, bytes] | None:
    """A COM_STMT_EXECUTE's parameter values (``payload`` from its command byte; ``count`` parameters;
    ``remembered``: the types of the statement's last execute that sent them), read as mysql-mimic reads
    them (``proxy/prepared.py``: integers by size and sign, floats, strings as UTF-8 text, NULLs), with the
    block a data source's execute of the same parameters carries (null bitmap, "types follow", types,
    values) and the types. ``None``: what this reader leaves to that one — a cursor, query attributes'
    parameter count, another type, a malformed packet, no types to go by."""
    if len(payload) < 10 or payload[5] != 0 or count <= 0:
        return None
    nulls = 10 + (count + 7) // 8
    if len(payload) <= nulls:
        return None
    bitmap = payload[10:nulls]
    if payload[nulls]:
        types = payload[nulls + 1 : nulls + 1 + 2 * count]
        at = nulls + 1 + 2 * count
    elif remembered is not None and len(remembered) == 2 * count:
        types, at = remembered, nulls + 1
    else:
        return None
    if len(types) != 2 * count:
        return None
    start = at
    values: list[Any] = []
    for i in range(count):
        kind, unsigned = types[2 * i], types[2 * i + 1] & 0x80
        if bitmap[i // 8] & (1 << (i % 8)):
            values.append(None)
            continue
        if kind in _INTEGERS:
            size = _INTEGERS[kind]
            if at + size > len(payload):
                return None
            values.append(int.from_bytes(payload[at : at + size], "little", signed=not unsigned))
            at += size
        elif kind in _FLOATS:
            unpack = _FLOATS[kind]
            if at + unpack.size > len(payload):
                return None
            values.append(unpack.unpack_from(payload, at)[0])
            at += unpack.size
        elif kind in _STRINGS:
            if at >= len(payload):
                return None
            first = payload[at]
            if first < 0xFB:
                length, at = first, at + 1
            elif first in _WIDTHS and at + 1 + _WIDTHS[first] <= len(payload):
                width = _WIDTHS[first]
                length, at = int.from_bytes(payload[at + 1 : at + 1 + width], "little"), at + 1 + width
            else:
                return None
            if at + length > len(payload):
                return None
            try:
                values.append(payload[at : at + length].decode("utf-8"))
            except UnicodeDecodeError:
                return None
            at += length
        elif kind == _NULL:
            values.append(None)
        else:
            return None
    if at != len(payload):
        return None
    return values, bytes(bitmap) + b"\x01" + bytes(types) + payload[start:at], bytes(types)


class CommandGate:
    """The client transport's protocol after the login (module docstring).

    Args:
        inner: The stream's protocol (``asyncio.StreamReaderProtocol``): it keeps the write side's flow
            control and hears of the connection's end.
        reader: The ``StreamReader`` mimic reads from.
        limit: ``proxy.maxAllowedPacket``: a longer packet is left to mimic's bounded reader.
        hot: ``hot(command, payload)``: ``True`` when it took the command (its answer will be written,
            then :meth:`done` called); ``False``: mimic answers it.
    """

    def __init__(self, inner: Any, reader: Any, limit: int, hot: Callable[[int, bytes], bool]) -> None:
        self.inner = inner
        self.reader = reader
        self.limit = limit
        self.hot = hot
        self.mode = MIMIC
        self.transport: Any = None  # set by the connection when it installs the gate
        self._buffer = bytearray()
        self._paused = False
        self._pumping = False  # _pump's loop runs (a command answered at once calls done() inside it)

    # -- the protocol ------------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.mode == MIMIC:
            self.reader.feed_data(data)
            return
        self._buffer += data
        if self.mode == IDLE:
            self._pump()
        elif len(self._buffer) > _AHEAD and not self._paused and self.transport is not None:
            self._paused = True  # a client far ahead of its answers waits, as the stream would make it
            self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        self._to_mimic()
        return bool(self.inner.eof_received())

    def connection_lost(self, exc: BaseException | None) -> None:
        self._to_mimic()
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_made(self, transport: Any) -> None:  # not called by set_protocol; kept for the API
        self.transport = transport

    # -- control -------------------------------------------------------------------------------------

    def command_awaited(self) -> None:
        """mimic waits for its next command: with nothing left for it to read, the gate reads commands."""
        if self.mode == MIMIC and not self.reader._buffer:
            self.mode = IDLE
            self._pump()

    def done(self) -> None:
        """The hot command's answer is written: go on with what the client sent meanwhile."""
        if self.mode == HOT:
            self.mode = IDLE
            if self._paused:
                self._paused = False
                self.transport.resume_reading()
            self._pump()

    def handback(self, payload: bytes) -> None:
        """The hot command (``payload``, from its command byte) could not be answered and nothing of an answer
        was written: mimic answers it after all, then what the client sent meanwhile, in order."""
        if self.mode == HOT:
            self.reader.feed_data(len(payload).to_bytes(3, "little") + b"\x00" + payload)
            self._to_mimic()

    # -- internals -----------------------------------------------------------------------------------

    def _pump(self) -> None:
        # A command hot() answers at once (a BEGIN, a COMMIT with nothing to send) calls done() before hot()
        # returns: the loop running here goes on to the next command instead of a nested one, or a client's
        # burst of such commands would nest a call per command until the interpreter's recursion limit.
        if self._pumping:
            return
        self._pumping = True
        try:
            self._take_commands()
        finally:
            self._pumping = False

    def _take_commands(self) -> None:
        buffer = self._buffer
        while self.mode == IDLE and buffer:
            if len(buffer) < 4:  # a packet cut short: mimic's reader waits for the rest, bounded (proxy/stream.py)
                self._to_mimic()
                return
            length = buffer[0] | buffer[1] << 8 | buffer[2] << 16
            if buffer[3] != 0 or length >= _MAX_PAYLOAD or length > self.limit or length == 0 or len(buffer) < 4 + length:
                self._to_mimic()
                return
            packet = bytes(buffer[: 4 + length])
            del buffer[: 4 + length]  # before hot(): it may finish at once and call done()
            self.mode = HOT
            if not self.hot(packet[4], packet[4:]):
                self.reader.feed_data(packet)
                self._to_mimic()
                return

    def _to_mimic(self) -> None:
        """Everything not taken goes to the stream, in order; mimic reads from there on."""
        self.mode = MIMIC
        if self._buffer:
            data = bytes(self._buffer)
            self._buffer.clear()
            self.reader.feed_data(data)
        if self._paused:
            self._paused = False
            self.transport.resume_reading()
