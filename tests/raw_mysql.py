"""A MySQL client written with raw sockets, for tests that talk to ``ddm proxy`` as a hostile client would.

No client library: every byte sent is the test's, so malformed, truncated and
out-of-order packets can be sent on purpose. Only what the tests need:
the handshake (``mysql_native_password`` and ``caching_sha2_password``
scrambles), COM_QUERY with a text result read back, and any command byte.
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
COM_STMT_SEND_LONG_DATA, COM_STMT_CLOSE, COM_RESET_CONNECTION = 0x18, 0x19, 0x1F
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
            self.sock.sendall(len(chunk).to_bytes(3, "little") + bytes([seq]) + chunk)
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

    def login(self, user: str, password: str, plugin: str = "mysql_native_password", database: str | None = None) -> bytes:
        """Greeting, handshake response, answers until OK or ERR: the last answer."""
        hello = self.greeting()
        scramble = (sha2_scramble if plugin == "caching_sha2_password" else native_scramble)(password, hello.nonce)
        caps = CAPABILITIES | (CONNECT_WITH_DB if database is not None else 0)
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
        first = self.packet()
        if first[:1] == b"\xff":
            raise ServerError(error_code(first) or 0, first[9:].decode(errors="replace"))
        if first[:1] == b"\x00":
            return _lenenc(first, 1)[0]
        columns = _lenenc(first, 0)[0]
        for _ in range(columns):
            self.packet()
        rows: list[tuple[str | None, ...]] = []
        packet = self.packet()
        if packet[:1] == b"\xfe" and len(packet) < 9:  # the EOF after the column definitions
            packet = self.packet()
        while not (packet[:1] == b"\xfe" and len(packet) < 9):
            if packet[:1] == b"\xff":
                raise ServerError(error_code(packet) or 0, packet[9:].decode(errors="replace"))
            rows.append(_text_row(packet, columns))
            packet = self.packet()
        return rows


class ServerError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def _lenenc(data: bytes, at: int) -> tuple[int, int]:
    first = data[at]
    if first < 0xFB:
        return first, at + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
    return int.from_bytes(data[at + 1 : at + 1 + width], "little"), at + 1 + width


def _text_row(packet: bytes, columns: int) -> tuple[str | None, ...]:
    values: list[str | None] = []
    at = 0
    for _ in range(columns):
        if packet[at] == 0xFB:
            values.append(None)
            at += 1
            continue
        length, at = _lenenc(packet, at)
        values.append(packet[at : at + length].decode())
        at += length
    return tuple(values)
