"""TLS for the proxy's clients (``proxy.tls``; docs/proxy.md#tls).

mysql-mimic switches a connection to TLS when the client's handshake response
is an SSLRequest, with asyncio's ``loop.start_tls``. A client that sends its
TLS ClientHello right behind the SSLRequest (libmariadb does; PyMySQL sometimes)
has those bytes read into the plain stream's buffer already, where the TLS layer
never sees them, and the handshake waits for its 60 s timeout.
:func:`start_tls` hands them to the TLS layer first (mimic's stream is compiled,
so the proxy's connection calls it in its own copy of the connection phase).
"""

from __future__ import annotations

import asyncio
import ssl
from asyncio import sslproto
from typing import Any

from ddm_core.errors import ProxyError
from ddm_core.metadata.model import ProxyTls

__all__ = ["tls_context", "start_tls"]


def tls_context(tls: ProxyTls) -> ssl.SSLContext:
    """The server-side TLS context of ``proxy.tls`` (TLS 1.2 or later; the files are read now)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.cert, tls.key)
    except FileNotFoundError as exc:
        raise ProxyError(f"proxy.tls: cannot read {exc.filename!r} (cert {tls.cert!r}, key {tls.key!r})") from exc
    except (ssl.SSLError, OSError) as exc:
        raise ProxyError(f"proxy.tls: cert {tls.cert!r} and key {tls.key!r} are not a PEM certificate and its "
                         f"private key ({exc})") from exc  # fmt: skip
    return context


async def start_tls(stream: Any, context: ssl.SSLContext) -> None:
    """Switch mimic's ``stream`` to TLS (server side), keeping the bytes the client sent early."""
    loop = asyncio.get_running_loop()
    transport: Any = stream.writer.transport
    early = bytes(stream.reader._buffer)  # the ClientHello, when it came with the SSLRequest
    stream.reader._buffer.clear()
    waiter = loop.create_future()
    # What loop.start_tls does, with the early bytes fed to the TLS layer before any new ones.
    protocol = sslproto.SSLProtocol(loop, transport.get_protocol(), context, waiter, server_side=True,
                                    call_connection_made=False)  # fmt: skip
    transport.pause_reading()
    transport.set_protocol(protocol)
    loop.call_soon(protocol.connection_made, transport)
    if early:
        loop.call_soon(_feed, protocol, early)
    loop.call_soon(transport.resume_reading)
    try:
        await waiter
    except BaseException:
        transport.close()
        raise
    tls_transport = protocol._app_transport
    stream.writer._transport = tls_transport  # as mimic does: reader and writer go on over TLS
    stream.reader._transport = tls_transport


def _feed(protocol: sslproto.SSLProtocol, data: bytes) -> None:
    view = protocol.get_buffer(len(data))
    n = min(len(data), len(view))
    view[:n] = data[:n]
    protocol.buffer_updated(n)
    if n < len(data):  # more than one buffer's worth: not a handshake, but keep the order
        _feed(protocol, data[n:])
