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
import logging
import ssl
from asyncio import sslproto
from typing import Any

from ddm_core.errors import ProxyError
from ddm_core.metadata.model import ProxyTls
from ddm_core.proxy.stream import BoundedReader

__all__ = ["tls_context", "start_tls", "peer_certificate"]

log = logging.getLogger("ddm_core.proxy")


def tls_context(tls: ProxyTls) -> ssl.SSLContext:
    """The server-side TLS context of ``proxy.tls`` (TLS 1.2 or later; the files are read now).

    With ``clientCert`` ``optional`` or ``required`` the handshake asks for a client
    certificate, and one sent must verify against ``clientCa`` alone (the system's CA store is
    not loaded: it would let any publicly signed certificate in).
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)  # a server context: it trusts no CA yet
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.client_cert != "none" and tls.client_ca is not None:
        try:
            context.load_verify_locations(cafile=tls.client_ca)
        except FileNotFoundError as exc:
            raise ProxyError(f"proxy.tls.clientCa: cannot read {tls.client_ca!r}") from exc
        except (ssl.SSLError, OSError) as exc:
            raise ProxyError(f"proxy.tls.clientCa: {tls.client_ca!r} is not a PEM CA bundle ({exc})") from exc
        context.verify_mode = ssl.CERT_REQUIRED if tls.client_cert == "required" else ssl.CERT_OPTIONAL
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
    reader: Any = stream.reader.inner if isinstance(stream.reader, BoundedReader) else stream.reader
    early = bytes(reader._buffer)  # the ClientHello, when it came with the SSLRequest
    reader._buffer.clear()
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
    except BaseException as exc:
        if isinstance(exc, ssl.SSLError):  # e.g. no client certificate, or one of another CA: the client sees 2013
            peer = transport.get_extra_info("peername")
            log.info("ddm proxy: TLS handshake with %s failed: %s", f"{peer[0]}:{peer[1]}" if peer else "a client",
                     exc.reason or exc)  # fmt: skip
        transport.close()
        raise
    tls_transport = protocol._app_transport
    stream.writer._transport = tls_transport  # as mimic does: reader and writer go on over TLS
    reader._transport = tls_transport


def peer_certificate(writer: Any) -> dict[str, Any] | None:
    """The client's verified certificate on a connection (``getpeercert()``); ``None``: no TLS or none sent."""
    ssl_object = writer.get_extra_info("ssl_object")
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    return cert or None  # {} when the context did not ask for one


def _feed(protocol: sslproto.SSLProtocol, data: bytes) -> None:
    view = protocol.get_buffer(len(data))
    n = min(len(data), len(view))
    view[:n] = data[:n]
    protocol.buffer_updated(n)
    if n < len(data):  # more than one buffer's worth: not a handshake, but keep the order
        _feed(protocol, data[n:])
