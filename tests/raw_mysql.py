"""A MySQL client written with raw sockets, for tests that talk to ``ddm proxy`` as a hostile client would.

No client library: every byte sent is the test's, so malformed, truncated and
out-of-order packets can be sent on purpose. Only what the tests need:
the handshake (``mysql_native_password`` and ``caching_sha2_password``
scrambles), COM_QUERY with a text result read back, prepared statements
(COM_STMT_PREPARE, COM_STMT_EXECUTE payloads built field by field, binary
rows of string columns read back), any command byte, and a command's whole
answer with the sequence id of each packet.
"""

from __future__ import annotations

import hashlib
import socket
import struct
from typing import NamedTuple

PROTOCOL_41 = 0x200
CONNECT_WITH_DB = 0x8
SECURE_CONNECTION = 0x8000
PLUGIN_AUTH = 0x80000
CAPABILITIES = PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH
UTF8MB4 = 45
MAX_PAYLOAD = 0xFFFFFF  # a longer payload continues in the next packet

COM_QUIT, COM_INIT_DB, COM_QUERY, COM_FIELD_LIST, COM_PING, COM_CHANGE_USER = 0x01, 0x02, 0x03, 0x04, 0x0E, 0x11
COM_STMT_PREPARE, COM_STMT_EXECUTE, COM_STMT_SEND_LONG_DATA, COM_STMT_CLOSE = 0x16, 0x17, 0x18, 0x19
COM_STMT_RESET, COM_STMT_FETCH, COM_RESET_CONNECTION = 0x1A, 0x1C, 0x1F
#: The capability that puts a parameter count in COM_STMT_EXECUTE (and query attributes in COM_QUERY).
QUERY_ATTRIBUTES = 1 << 27
#: Parameter types of COM_STMT_EXECUTE used here.
LONGLONG, VAR_STRING = 0x08, 0xFD
#: Commands MySQL answers with nothing (the client sends the next command at once).
UNANSWERED = frozenset({COM_QUIT, COM_STMT_SEND_LONG_DATA, COM_STMT_CLOSE})


class Closed(Exception):
    """The server closed the connection."""


class Greeting(NamedTuple):
    connection_id: int
    nonce: bytes
    plugin: str


def native_scramble(password: str, nonce: bytes) -> bytes:
    """``mysql_native_password``: SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw)))."""
    if not password:
        return b""
    p1 = hashlib.sha1(password.encode()).digest()
    p3 = hashlib.sha1(nonce + hashlib.sha1(p1).digest()).digest()
    return bytes(a ^ b for a, b in zip(p1, p3))


def sha2_scramble(password: str, nonce: bytes) -> bytes:
    """``caching_sha2_password``: XOR(SHA256(pw), SHA256(SHA256(SHA256(pw)) + nonce))."""
    if not password:
        return b""
    p1 = hashlib.sha256(password.encode()).digest()
    p3 = hashlib.sha256(hashlib.sha256(p1).digest() + nonce).digest()
    return bytes(a ^ b for a, b in zip(p1, p3))


def error_code(packet: bytes) -> int | None:
    """The error code of an ERR packet, ``None`` for anything else."""
    return int.from_bytes(packet[1:3], "little") if packet[:1] == b"\xff" else None


class RawClient:
    """One connection; every method reads and writes whole packets with the test's bytes."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.seq = 0
        self.nonce = b""  # the handshake's, once read (COM_CHANGE_USER scrambles it again)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise Closed()
            data += chunk
        return data

    def packet(self) -> bytes:
        """The next packet's payload (``Closed`` when the server closed the connection)."""
        header = self._exactly(4)
        self.seq = (header[3] + 1) % 256
        return self._exactly(int.from_bytes(header[:3], "little"))

    def send(self, payload: bytes, seq: int | None = None) -> None:
        """One packet (sequence number ``seq``, else the next one); a chain of them past 16 MiB - 1."""
        seq = self.seq if seq is None else seq
        while True:
            chunk, payload = payload[:MAX_PAYLOAD], payload[MAX_PAYLOAD:]
            self.sock.sendall(frame(chunk, seq))
            seq = (seq + 1) % 256
            if len(chunk) < MAX_PAYLOAD:
                break
        self.seq = seq

    def command(self, command: int, body: bytes = b"") -> None:
        """A command packet (sequence 0)."""
        self.send(bytes([command]) + body, seq=0)

    def is_closed(self, wait: float = 5.0) -> bool:
        """The server closed the connection within ``wait`` seconds (anything it sent first is read)."""
        self.sock.settimeout(wait)
        try:
            while self.sock.recv(65536):
                pass
            return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except (socket.timeout, TimeoutError):
            return False

    def greeting(self) -> Greeting:
        hello = self.packet()
        if hello[:1] == b"\xff":
            raise AssertionError(f"refused before the handshake: {error_code(hello)} {hello[9:]!r}")
        assert hello[0] == 10, hello
        at = hello.index(b"\x00", 1) + 1
        connection_id = int.from_bytes(hello[at : at + 4], "little")
        at += 4
        nonce = hello[at : at + 8]
        at += 8 + 1 + 2 + 1 + 2 + 2  # filler, capabilities, charset, status, capabilities
        data_len = hello[at]
        at += 1 + 10
        part2 = hello[at : at + max(13, data_len - 8)]
        plugin = hello[at + len(part2) :].split(b"\x00")[0].decode()
        self.nonce = nonce + part2.rstrip(b"\x00")
        return Greeting(connection_id, self.nonce, plugin)

    def login(self, user: str, password: str, plugin: str = "mysql_native_password", database: str | None = None,
              capabilities: int = 0) -> bytes:  # fmt: skip
        """Greeting, handshake response (``capabilities``: flags beyond the usual), answers until OK or ERR: the
        last answer."""
        hello = self.greeting()
        scramble = (sha2_scramble if plugin == "caching_sha2_password" else native_scramble)(password, hello.nonce)
        caps = CAPABILITIES | capabilities | (CONNECT_WITH_DB if database is not None else 0)
        body = (struct.pack("<IIB", caps, 1 << 24, UTF8MB4) + b"\x00" * 23 + user.encode() + b"\x00"
                + bytes([len(scramble)]) + scramble
                + ((database.encode() + b"\x00") if database is not None else b"")
                + plugin.encode() + b"\x00")  # fmt: skip
        self.send(body, seq=1)
        while True:
            answer = self.packet()
            if answer[:1] == b"\xfe":  # auth switch: plugin name, then the nonce
                name, _, data = answer[1:].partition(b"\x00")
                nonce = data.rstrip(b"\x00")
                switch = sha2_scramble if name == b"caching_sha2_password" else native_scramble
                self.send(switch(password, nonce))
                continue
            if answer[:1] in (b"\x00", b"\xff"):
                return answer

    def query(self, sql: str) -> list[tuple[str | None, ...]] | int:
        """COM_QUERY: the rows of a text result (as text), the affected rows of an OK, or raise for an ERR."""
        self.command(COM_QUERY, sql.encode())
        return self.result()

    def result(self) -> list[tuple[str | None, ...]] | int:
        """The answer to the COM_QUERY sent last (see :meth:`query`)."""
        return decoded([payload for _, payload in self.response()])

    def response(self) -> list[tuple[int, bytes]]:
        """One command's whole answer, each packet with its sequence id: an OK, an ERR, or a result set (text or
        binary; with its EOF packets, which a client that does not ask for CLIENT_DEPRECATE_EOF gets)."""
        answer = [self.numbered()]
        first = answer[0][1]
        if first[:1] in (b"\x00", b"\xff"):
            return answer
        for _ in range(_lenenc(first, 0)[0]):  # the column definitions
            answer.append(self.numbered())
        while True:  # the EOF after the definitions, the rows, the EOF (or an ERR) that ends them
            answer.append(self.numbered())
            packet = answer[-1][1]
            if packet[:1] == b"\xff" or (_is_eof(packet) and len(answer) > 2 + _lenenc(first, 0)[0]):
                return answer

    def numbered(self) -> tuple[int, bytes]:
        """The next packet's sequence id and payload."""
        payload = self.packet()
        return (self.seq - 1) % 256, payload

    def prepare(self, sql: str) -> int:
        """COM_STMT_PREPARE: the statement id (its parameter and column definitions read), or raise for an ERR."""
        self.command(COM_STMT_PREPARE, sql.encode())
        ok = self.packet()
        raise_error(ok)
        stmt_id, columns, params = struct.unpack("<IHH", ok[1:9])
        for count in (params, columns):
            for _ in range(count + (1 if count else 0)):  # the definitions, then their EOF
                self.packet()
        return int(stmt_id)


def frame(payload: bytes, seq: int = 0) -> bytes:
    """One packet: ``payload`` (shorter than 16 MiB) behind its header with sequence id ``seq``."""
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


def decoded(answer: list[bytes], *, binary: bool = False) -> list[tuple[str | None, ...]] | int:
    """An answer's rows as text, the affected rows of an OK, or raise for an ERR.

    ``binary``: COM_STMT_EXECUTE's answer (binary-protocol rows), whose columns must all have string types.
    """
    first = raise_error(answer[0])
    if first[:1] == b"\x00":
        return _lenenc(first, 1)[0]
    row = _binary_strings if binary else text_row
    return [row(packet, _lenenc(first, 0)[0]) for packet in rows_of(answer)]


def raise_error(packet: bytes) -> bytes:
    """Raise :class:`ServerError` for an ERR packet; any other is returned."""
    if packet[:1] == b"\xff":
        raise ServerError(error_code(packet) or 0, packet[9:].decode(errors="replace"))
    return packet


def rows_of(answer: list[bytes]) -> list[bytes]:
    """The row packets of a result set's payloads (see :meth:`RawClient.response`); raise for an ERR among them."""
    columns = _lenenc(answer[0], 0)[0]
    rows = answer[1 + columns :]
    if rows and _is_eof(rows[0]):
        rows = rows[1:]  # the EOF after the definitions
    for packet in rows:
        raise_error(packet)
    return [packet for packet in rows if not _is_eof(packet)]


def _binary_strings(packet: bytes, columns: int) -> tuple[str | None, ...]:
    """A binary-protocol row whose columns all have string types."""
    at = 1 + (columns + 9) // 8  # the 0x00 header, the NULL bitmap (its first two bits unused)
    values: list[str | None] = []
    for i in range(columns):
        if packet[1 + (i + 2) // 8] >> ((i + 2) % 8) & 1:
            values.append(None)
            continue
        value, at = _string_at(packet, at)
        values.append(value)
    return tuple(values)


def execute_payload(stmt_id: int, params: list[tuple[int, bytes]], *, types: bool = True,
                    count: int | None = None) -> bytes:  # fmt: skip
    """COM_STMT_EXECUTE's body (after the command byte): no cursor, the NULL bitmap, the types unless ``types``
    is false (new-params-bound 0, as libmariadb sends after a statement's first execute), the values.

    ``params``: (type, encoded value) pairs (:func:`longlong`, :func:`var_string`); ``count``: the parameter
    count a client with :data:`QUERY_ATTRIBUTES` sends first (each type then carries an empty name).
    """
    body = struct.pack("<IBI", stmt_id, 0, 1)
    if count is not None:
        body += bytes([count])
    if not params:
        return body
    body += bytes((len(params) + 7) // 8) + (b"\x01" if types else b"\x00")
    if types:
        body += b"".join(bytes([kind, 0]) + (b"\x00" if count is not None else b"") for kind, _ in params)
    return body + b"".join(value for _, value in params)


def longlong(value: int) -> tuple[int, bytes]:
    return LONGLONG, struct.pack("<q", value)


def var_string(value: bytes) -> tuple[int, bytes]:
    """A VAR_STRING parameter shorter than 251 bytes (its length in one byte)."""
    assert len(value) < 0xFB, "a longer value's length takes more bytes"
    return VAR_STRING, bytes([len(value)]) + value


def _is_eof(packet: bytes) -> bool:
    return packet[:1] == b"\xfe" and len(packet) < 9


class ServerError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def lenenc_bytes(n: int) -> bytes:
    """``n`` as a length-encoded integer."""
    if n < 0xFB:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def _lenenc(data: bytes, at: int) -> tuple[int, int]:
    first = data[at]
    if first < 0xFB:
        return first, at + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
    return int.from_bytes(data[at + 1 : at + 1 + width], "little"), at + 1 + width


def text_row(packet: bytes, columns: int) -> tuple[str | None, ...]:
    """A text-protocol row of ``columns`` values, as text (``None`` for NULL)."""
    values: list[str | None] = []
    at = 0
    for _ in range(columns):
        if packet[at] == 0xFB:
            values.append(None)
            at += 1
            continue
        value, at = _string_at(packet, at)
        values.append(value)
    return tuple(values)


def _string_at(packet: bytes, at: int) -> tuple[str, int]:
    """The length-encoded string at ``at`` (as text), and where it ends."""
    length, at = _lenenc(packet, at)
    return packet[at : at + length].decode(), at + length
