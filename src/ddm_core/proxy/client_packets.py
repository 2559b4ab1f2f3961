"""The packets a client sends around authentication, read strictly.

mysql-mimic reads a NUL-terminated string by asking for one byte at a time
until it gets a NUL; past the end of the packet it gets ``b""`` forever, so a
handshake response whose user name lacks its NUL (36 bytes, no credentials
needed) kept the event loop spinning and froze every client of the proxy.
Here every field is read against the packet's length: a field that runs past
the end is a :class:`MalformedPacket`, answered with an error and the
connection closed (docs/proxy.md#security-model).

The results are mimic's own packet classes, so the rest of its connection
code reads them unchanged.
"""

from __future__ import annotations

from mysql_mimic.charset import CharacterSet, Collation
from mysql_mimic.packets import ComChangeUser, ComFieldList, HandshakeResponse41, SSLRequest
from mysql_mimic.types import Capabilities

__all__ = ["MalformedPacket", "handshake_response", "change_user", "field_list"]


class MalformedPacket(ValueError):
    """A client packet whose fields do not fit in it (the message names the field)."""


class _Reader:
    """Fields of one packet, each checked to lie within it."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._pos = 0
        self._what = what

    @property
    def at_end(self) -> bool:
        return self._pos >= len(self._data)

    def _take(self, n: int, field: str) -> bytes:
        end = self._pos + n
        if end > len(self._data):
            raise MalformedPacket(f"{self._what}: {field} runs past the end of the packet")
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def uint(self, width: int, field: str) -> int:
        return int.from_bytes(self._take(width, field), "little")

    def lenenc_int(self, field: str) -> int:
        first = self.uint(1, field)
        if first < 0xFB:
            return first
        width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
        if width is None:
            raise MalformedPacket(f"{self._what}: {field} has no valid length (first byte {first:#04x})")
        return self.uint(width, field)

    def fixed(self, n: int, field: str) -> bytes:
        return self._take(n, field)

    def lenenc(self, field: str) -> bytes:
        return self._take(self.lenenc_int(field), field)

    def null_terminated(self, field: str) -> bytes:
        end = self._data.find(b"\x00", self._pos)
        if end < 0:
            raise MalformedPacket(f"{self._what}: {field} is not NUL-terminated")
        chunk = self._data[self._pos : end]
        self._pos = end + 1
        return chunk

    def rest(self) -> bytes:
        chunk = self._data[self._pos :]
        self._pos = len(self._data)
        return chunk


def _charset(collation_id: int, what: str) -> CharacterSet:
    try:
        return Collation(collation_id).charset
    except ValueError:
        raise MalformedPacket(f"{what}: unknown collation id {collation_id}") from None


def _decode(charset: CharacterSet, raw: bytes, what: str, field: str) -> str:
    try:
        return str(charset.decode(raw))
    except UnicodeDecodeError:
        raise MalformedPacket(f"{what}: {field} is not valid {charset.name}") from None


def _connect_attrs(r: _Reader, charset: CharacterSet, what: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    block = _Reader(r.lenenc("connection attributes"), what)
    while not block.at_end:
        key = _decode(charset, block.lenenc("a connection attribute name"), what, "a connection attribute name")
        attrs[key] = _decode(charset, block.lenenc("a connection attribute value"), what, "a connection attribute value")
    return attrs


def handshake_response(server: Capabilities, data: bytes) -> HandshakeResponse41 | SSLRequest:
    """The client's answer to the handshake: its login, or a request to switch to TLS first."""
    what = "handshake response"
    r = _Reader(data, what)
    client = Capabilities(r.uint(4, "capability flags"))
    if Capabilities.CLIENT_PROTOCOL_41 not in client:
        raise MalformedPacket(f"{what}: the client does not speak protocol 4.1")
    capabilities = server & client
    max_packet_size = r.uint(4, "max packet size")
    charset = _charset(r.uint(1, "character set"), what)
    r.fixed(23, "filler")
    if r.at_end:
        return SSLRequest(max_packet_size=max_packet_size, capabilities=capabilities, client_charset=charset)
    username = _decode(charset, r.null_terminated("user name"), what, "user name")
    if Capabilities.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA in capabilities:
        auth_response = r.lenenc("auth response")
    else:
        auth_response = r.fixed(r.uint(1, "auth response length"), "auth response")
    response = HandshakeResponse41(max_packet_size=max_packet_size, capabilities=capabilities,
                                   client_charset=charset, username=username, auth_response=auth_response)  # fmt: skip
    if Capabilities.CLIENT_CONNECT_WITH_DB in capabilities:
        response.database = _decode(charset, r.null_terminated("database"), what, "database")
    if Capabilities.CLIENT_PLUGIN_AUTH in capabilities and not r.at_end:
        response.client_plugin = _decode(charset, r.null_terminated("auth plugin name"), what, "auth plugin name")
    if Capabilities.CLIENT_CONNECT_ATTRS in capabilities and not r.at_end:
        response.connect_attrs = _connect_attrs(r, charset, what)
    if Capabilities.CLIENT_ZSTD_COMPRESSION_ALGORITHM in capabilities and not r.at_end:
        response.zstd_compression_level = r.uint(1, "zstd compression level")
    return response


def change_user(capabilities: Capabilities, charset: CharacterSet, data: bytes) -> ComChangeUser:
    """COM_CHANGE_USER's fields (after the command byte)."""
    what = "COM_CHANGE_USER"
    r = _Reader(data, what)
    username = _decode(charset, r.null_terminated("user name"), what, "user name")
    if Capabilities.CLIENT_SECURE_CONNECTION in capabilities:
        auth_response = r.fixed(r.uint(1, "auth response length"), "auth response")
    else:
        auth_response = r.null_terminated("auth response")
    database = _decode(charset, r.null_terminated("database"), what, "database")
    response = ComChangeUser(username=username, auth_response=auth_response, database=database)
    if not r.at_end:
        if Capabilities.CLIENT_PROTOCOL_41 in capabilities:
            charset = _charset(r.uint(2, "character set"), what)
            response.client_charset = charset
        if Capabilities.CLIENT_PLUGIN_AUTH in capabilities and not r.at_end:
            response.client_plugin = _decode(charset, r.null_terminated("auth plugin name"), what, "auth plugin name")
        if Capabilities.CLIENT_CONNECT_ATTRS in capabilities and not r.at_end:
            response.connect_attrs = _connect_attrs(r, charset, what)
    return response


def field_list(charset: CharacterSet, data: bytes) -> ComFieldList:
    """COM_FIELD_LIST's table and wildcard (after the command byte)."""
    what = "COM_FIELD_LIST"
    r = _Reader(data, what)
    table = _decode(charset, r.null_terminated("table name"), what, "table name")
    return ComFieldList(table=table, wildcard=_decode(charset, r.rest(), what, "wildcard"))
