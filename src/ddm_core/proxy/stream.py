"""What a client may send, bounded: the reader under mysql-mimic's packet stream.

mimic's ``MysqlStream.read`` takes a packet's header with ``reader.read(4)``
(which may return fewer bytes) and joins the packets of a multi-packet chain
with no limit, so one client could make the proxy hold any amount of memory.
``MysqlStream`` is compiled and cannot be subclassed; the proxy hands it a
:class:`BoundedReader` instead of the socket's reader. Each header is read
whole, and a packet or chain longer than ``proxy.maxAllowedPacket`` is refused
before its payload is read (:class:`PacketTooLarge`: error 1153 and the
connection closed, as MySQL does).

A client may wait before a command up to its ``wait_timeout`` (proxy/idle.py), but once a packet
has begun, the rest of it must keep coming: a wait of ``proxy.netReadTimeoutMs`` for
more of it (MariaDB's ``net_read_timeout``) drops the client as one that went away (its
session closed, its transaction rolled back). The command gate hands a packet
it has only part of to this reader (``_fast/gate``), so the bound holds on the
hot path too.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

__all__ = ["BoundedReader", "PacketTooLarge", "PACKET_TOO_LARGE"]

log = logging.getLogger("ddm_core.proxy")

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
        read_timeout: ``proxy.netReadTimeoutMs`` in seconds: how long the rest of a begun packet may take.
    """

    def __init__(self, inner: asyncio.StreamReader, limit: int, read_timeout: float = 30.0) -> None:
        self.inner = inner
        self.limit = limit
        self.read_timeout = read_timeout
        self._buffered: bytearray = inner._buffer  # type: ignore[attr-defined]  # what arrived, not read yet
        self._chain = 0  # bytes announced so far by the packets of the chain being read
        self._gate: Any = None  # the connection's CommandGate, once installed
        self._seq: Any = None  # mimic's sequence counter: 0 when it reads a new command
        self._waiting: Callable[[], None] | None = None

    def watch(self, seq: Any, gate: Any, waiting: Callable[[], None]) -> None:
        """From the login on, whenever mimic starts to wait for a new command: ``waiting()`` is called (the
        session is active, proxy/idle.py) and ``gate`` (``None``: no hot path) is told (proxy/hotpath.py)."""
        self._seq, self._gate, self._waiting = seq, gate, waiting

    async def read(self, n: int) -> bytes:
        """A packet header (``MysqlStream`` reads nothing else with ``read``); ``b""``: the client is gone."""
        if self._waiting is not None and not self._chain and not self._seq.value:
            self._waiting()
            if self._gate is not None:
                self._gate.command_awaited()
        inner, buffered = self.inner, self._buffered
        try:
            if not buffered and not self._chain:  # before a command: the client may take as long as it likes
                await inner._wait_for_data("read")  # type: ignore[attr-defined]  # readexactly's own wait
            if len(buffered) >= n:  # the header is all there (a command as it usually comes)
                header = await inner.readexactly(n)
            else:  # begun: the rest of it is waited for bounded
                header = await self.readexactly(n)
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
        """The rest of a begun packet (a payload after its header): each wait for more of it bounded by
        :attr:`read_timeout`, as ``net_read_timeout`` bounds each read (a large packet may take longer whole);
        ``IncompleteReadError`` (the client gone, as the caller takes it) when nothing more comes in time."""
        if len(self._buffered) >= n:
            return await self.inner.readexactly(n)
        got = bytearray()
        while len(got) < n:
            try:
                async with asyncio.timeout(self.read_timeout):
                    chunk = await self.inner.read(n - len(got))
            except TimeoutError:
                log.info("a client sent part of a packet and then nothing for %.3g s (proxy.netReadTimeoutMs): "
                         "dropped", self.read_timeout)  # fmt: skip
                raise asyncio.IncompleteReadError(bytes(got), n) from None
            if not chunk:
                raise asyncio.IncompleteReadError(bytes(got), n)
            got += chunk
        return bytes(got)
