"""A byte pipe on uvloop: the least any proxy written over this event loop can do for a statement.

Each client connection gets its own connection to the server, and bytes are copied both ways as they
arrive: no packet is read, no statement routed, nothing kept. ``test_bench_proxy.py`` runs sysbench
through it beside ``ddm proxy`` and straight to MariaDB, so the three ratios come from one run: the
pipe's ratio to direct is the ceiling a second network hop leaves on this machine (the extra reads,
writes, wake-ups and event-loop callbacks), whatever the proxy does with the bytes
(docs/proxy.md#measured-costs).

Usage::

    python benchmarks/byte_pipe.py LISTEN_PORT [SERVER_PORT]   # prints "listening on PORT", serves until killed
"""

from __future__ import annotations

import asyncio
import sys
from typing import cast

import uvloop


class _End(asyncio.Protocol):
    """One side of a pipe: what arrives is written to the other side (held until that side is connected)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _End | None = None
        self.held: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's classes

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:
            self.held.append(data)
        else:
            peer.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


class _Front(_End):
    """The client's side: opens the server's side when the client connects."""

    server_port = 3306

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        asyncio.get_running_loop().create_task(self._open())

    async def _open(self) -> None:
        assert self.transport is not None
        try:
            back_transport, back = await asyncio.get_running_loop().create_connection(_End, "127.0.0.1",
                                                                                     self.server_port)  # fmt: skip
        except OSError:
            self.transport.close()
            return
        back.peer, self.peer = self, back
        for data in back.held:
            self.transport.write(data)
        for data in self.held:
            back_transport.write(data)
        back.held.clear()
        self.held.clear()


async def _serve(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(_Front, "127.0.0.1", port)
    print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) > 2:
        _Front.server_port = int(sys.argv[2])
    uvloop.run(_serve(int(sys.argv[1])))
