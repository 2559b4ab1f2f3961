"""What a client may send, bounded: the reader under mysql-mimic's packet stream.

mimic's ``MysqlStream.read`` takes a packet's header with ``reader.read(4)``
(which may return fewer bytes) and joins the packets of a multi-packet chain
with no limit, so one client could make the proxy hold any amount of memory.
``MysqlStream`` is compiled and cannot be subclassed; the proxy hands it a
:class:`BoundedReader` instead of the socket's reader. Each header is read
whole, and a packet or chain longer than ``proxy.maxAllowedPacket`` is refused
before its payload is read (:class:`PacketTooLarge`: error 1153 and the
connection closed, as MySQL does).
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["BoundedReader", "PacketTooLarge", "PACKET_TOO_LARGE"]

PACKET_TOO_LARGE = 1153  # ER_NET_PACKET_TOO_LARGE
_MAX_PAYLOAD = 0xFFFFFF  # a payload this long continues in the next packet


class PacketTooLarge(Exception):
    """A client sent more than ``proxy.maxAllowedPacket`` bytes in one packet (chain)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"Got a packet bigger than 'max_allowed_packet' bytes ({size} > {limit}; proxy.maxAllowedPacket)")


class BoundedReader:
    """The socket's reader as ``MysqlStream`` reads it: headers whole, each packet chain at most ``limit`` bytes.

    Args:
        inner: The connection's ``asyncio.StreamReader``.
        limit: ``proxy.maxAllowedPacket``.
    """

    def __init__(self, inner: asyncio.StreamReader, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self._chain = 0  # bytes announced so far by the packets of the chain being read
        self._gate: Any = None  # the connection's CommandGate, once installed
        self._seq: Any = None  # mimic's sequence counter: 0 when it reads a new command

    def watch(self, gate: Any, seq: Any) -> None:
        """Tell ``gate`` whenever mimic starts to wait for a new command (proxy/hotpath.py)."""
        self._gate, self._seq = gate, seq

    async def read(self, n: int) -> bytes:
        """A packet header (``MysqlStream`` reads nothing else with ``read``); ``b""``: the client is gone."""
        if self._gate is not None and not self._chain and not self._seq.value:
            self._gate.command_awaited()
        try:
            header = await self.inner.readexactly(n)
        except asyncio.IncompleteReadError:
            return b""  # MysqlStream: the connection closed
        length = int.from_bytes(header[:3], "little")
        self._chain += length
        if self._chain > self.limit:
            size, self._chain = self._chain, 0
            raise PacketTooLarge(size, self.limit)
        if length < _MAX_PAYLOAD:
            self._chain = 0  # the chain's last packet
        return header

    async def readexactly(self, n: int) -> bytes:
        return await self.inner.readexactly(n)
