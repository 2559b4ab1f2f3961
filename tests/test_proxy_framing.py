"""The proxy's one-go text result (ProxyConnection._write_rows): the bytes mimic's own write_text_resultset sends.

Two connections over socket pairs, one written by mimic's ``write_text_resultset``,
one by the proxy's fast path, the same rows and columns: every value type the
executor returns, NULLs, a long value (length-encoded over 250 bytes), with and
without ``CLIENT_DEPRECATE_EOF``, in two character sets and with the status
flags of autocommit and of an open transaction; twice each (the second from
the cached header). TIME values are under a day here: longer and negative ones
are written as MariaDB writes them, not as mimic did (tests/test_rowwriter.py). The
values mimic gets are spelled as the proxy spells them, as MariaDB does (a DOUBLE's
``1e300``, a TIME's ``00:00:00``: tests/test_mariadb_text.py checks those spellings
against MariaDB): what is compared here is the framing. The OK packets the proxy writes itself for a protocol 4.1
client are compared with mimic's too.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services import require_module

require_module("mysql_mimic", "ddm proxy")

from mysql_mimic import ColumnType  # noqa: E402
from mysql_mimic.charset import CharacterSet  # noqa: E402
from mysql_mimic.connection import Connection  # noqa: E402
from mysql_mimic.packets import make_ok  # noqa: E402
from mysql_mimic.results import ResultSet  # noqa: E402
from mysql_mimic.stream import MysqlStream  # noqa: E402
from mysql_mimic.types import Capabilities, ServerStatus  # noqa: E402
from mysql_mimic.variables import GlobalVariables, SessionVariables  # noqa: E402

from ddm_core.metadata.model import ProxySettings  # noqa: E402
from ddm_core.proxy.admission import Admission  # noqa: E402
from ddm_core.proxy.columns import BINARY, Column, in_results_charset, wire_columns  # noqa: E402
from ddm_core.proxy.connection import ProxyConnection, ok_packet  # noqa: E402
from ddm_core.proxy.mariadb_text import encoder_for  # noqa: E402
from ddm_core.proxy.session import Outcome  # noqa: E402

UTF8MB4 = 45
COLUMNS = [
    Column("id", ColumnType.LONGLONG), Column("amount", ColumnType.NEWDECIMAL), Column("ratio", ColumnType.DOUBLE),
    Column("at", ColumnType.DATETIME), Column("day", ColumnType.DATE), Column("span", ColumnType.TIME),
    Column("blob", ColumnType.BLOB, BINARY), Column("name", ColumnType.VAR_STRING, UTF8MB4),
    Column("flag", ColumnType.TINY), Column("nothing", ColumnType.VAR_STRING, UTF8MB4),
]  # fmt: skip
ROWS = [
    (1, Decimal("12.50"), 0.1, dt.datetime(2024, 2, 29, 23, 59, 58, 123456), dt.date(2024, 1, 1),
     dt.timedelta(hours=23, seconds=5), b"\x00\xff", "Zoë ✓", True, None),
    (-(2**63), Decimal("-0.000"), 1e300, dt.datetime(1970, 1, 1), dt.date(9999, 12, 31),
     dt.timedelta(0), b"", "", False, "x" * 300),
    (None, None, None, None, None, None, None, None, None, None),
]  # fmt: skip
CLIENT = Capabilities.CLIENT_PROTOCOL_41 | Capabilities.CLIENT_TRANSACTIONS


def _spelled(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``rows``, each value the proxy spells as MariaDB does given as that text (mimic writes a ``str`` as it is)."""
    spellers = [encoder_for(c.type, c.decimals, lambda v: str(v).encode()) for c in COLUMNS]
    out = []
    for row in rows:
        values: list[Any] = []
        for value, speller in zip(row, spellers):
            if value is not None and type(value) is Decimal:
                value = format(value, "f")
            elif value is not None and speller is not None:
                value = speller(value).decode()
            values.append(value)
        out.append(tuple(values))
    return out


class _Session:
    def __init__(self, results_charset: str) -> None:
        self.variables = SessionVariables(GlobalVariables())
        self.variables.set("character_set_results", results_charset)


async def _connection(cls: type[Connection], capabilities: Capabilities, charset: str,
                      status: ServerStatus) -> tuple[Connection, socket.socket]:  # fmt: skip
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    kwargs: dict[str, Any] = (
        {"runtime": None, "admission": Admission(ProxySettings()), "host": "127.0.0.1"} if cls is ProxyConnection else {}
    )
    conn = cls(stream=MysqlStream(reader, writer), session=_Session(charset), control=None, identity_provider=None,
               **kwargs)  # fmt: skip
    conn.capabilities = capabilities
    conn.status_flags = status
    theirs.setblocking(False)
    return conn, theirs


def _received(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = sock.recv(1 << 16)
        except BlockingIOError:
            return out
        out += chunk


@pytest.mark.parametrize("deprecate_eof", [False, True])
@pytest.mark.parametrize("charset", ["utf8mb4", "latin1"])
@pytest.mark.parametrize("status", [ServerStatus.SERVER_STATUS_AUTOCOMMIT, ServerStatus.SERVER_STATUS_IN_TRANS])
def test_the_one_go_result_is_byte_for_byte_mimics(deprecate_eof: bool, charset: str, status: ServerStatus) -> None:
    capabilities = CLIENT | Capabilities.CLIENT_DEPRECATE_EOF if deprecate_eof else CLIENT

    async def run() -> None:
        mimic, mimic_peer = await _connection(Connection, capabilities, charset, status)
        proxy, proxy_peer = await _connection(ProxyConnection, capabilities, charset, status)
        assert proxy._fast_frames()
        for rows in (ROWS, ROWS[:1], [], ROWS):  # the last from the cached header
            mimic.stream.seq.value = proxy.stream.seq.value = 1  # the answer to a command (seq 0)
            # mimic's writer given the columns in the results' character set (the proxy converts a latin1 client's)
            converted = in_results_charset(COLUMNS, CharacterSet[charset])
            await mimic.write_text_resultset(ResultSet(rows=_spelled(rows), columns=wire_columns(converted)))
            proxy._write_rows(COLUMNS, list(rows))
            await proxy.stream.drain()
            await asyncio.sleep(0.01)
            expected, got = _received(mimic_peer), _received(proxy_peer)
            assert expected and got == expected
            assert proxy.stream.seq.value == mimic.stream.seq.value
        for conn in (mimic, proxy):
            conn.stream.writer.close()
        mimic_peer.close()
        proxy_peer.close()

    asyncio.run(run())


def test_a_changed_character_set_gets_its_own_header() -> None:
    async def run() -> None:
        proxy, peer = await _connection(ProxyConnection, CLIENT, "utf8mb4", ServerStatus.SERVER_STATUS_AUTOCOMMIT)
        mimic, mimic_peer = await _connection(Connection, CLIENT, "latin1", ServerStatus.SERVER_STATUS_AUTOCOMMIT)
        columns = [Column("naïve", ColumnType.VAR_STRING, UTF8MB4)]
        proxy.stream.seq.value = 1
        proxy._write_rows(columns, [("é",)])
        proxy.session.variables.set("character_set_results", "latin1")  # SET NAMES latin1
        await proxy.stream.drain()
        _received(peer)
        for conn in (proxy, mimic):
            conn.stream.seq.value = 1
        proxy._write_rows(columns, [("é",)])
        await proxy.stream.drain()
        latin1 = in_results_charset(columns, CharacterSet.latin1)
        await mimic.write_text_resultset(ResultSet(rows=[("é",)], columns=wire_columns(latin1)))
        await asyncio.sleep(0.01)
        got = _received(peer)
        assert got == _received(mimic_peer) and "naïve".encode("latin1") in got and b"\x08\x00" in got
        for conn in (mimic, proxy):
            conn.stream.writer.close()
        peer.close()
        mimic_peer.close()

    asyncio.run(run())


async def _rows_one_by_one(rows: list[tuple[Any, ...]]) -> Any:
    for row in rows:
        yield row


@pytest.mark.parametrize("deprecate_eof", [False, True])
def test_the_one_go_binary_result_is_byte_for_byte_the_streamed_one(deprecate_eof: bool) -> None:
    # Prepared statements' results: a whole list in one go, an async iterator (a streamed result) row by row.
    capabilities = CLIENT | Capabilities.CLIENT_DEPRECATE_EOF if deprecate_eof else CLIENT
    rows = [r for r in ROWS if r[9] is None or len(r[9]) < 250] + [ROWS[1][:9] + ("y" * 300,)]

    async def run() -> None:
        status = ServerStatus.SERVER_STATUS_AUTOCOMMIT
        one_go, one_go_peer = await _connection(ProxyConnection, capabilities, "utf8mb4", status)
        streamed, streamed_peer = await _connection(ProxyConnection, capabilities, "utf8mb4", status)
        for batch in (rows, rows[:1], [], rows):  # the last from the cached header
            one_go.stream.seq.value = streamed.stream.seq.value = 1
            await one_go._write_binary_resultset(COLUMNS, list(batch), None, False)
            await streamed._write_binary_resultset(COLUMNS, _rows_one_by_one(list(batch)), None, False)
            await asyncio.sleep(0.01)
            expected, got = _received(streamed_peer), _received(one_go_peer)
            assert expected and got == expected
            assert one_go.stream.seq.value == streamed.stream.seq.value
        for conn in (one_go, streamed):
            conn.stream.writer.close()
        one_go_peer.close()
        streamed_peer.close()

    asyncio.run(run())


@settings(max_examples=300, deadline=None)
@given(affected=st.integers(0, 2**64 - 1), insert_id=st.integers(0, 2**64 - 1), warnings=st.integers(0, 0xFFFF),
       status=st.sampled_from([ServerStatus(0), ServerStatus.SERVER_STATUS_AUTOCOMMIT, ServerStatus.SERVER_STATUS_IN_TRANS,
                               ServerStatus.SERVER_STATUS_AUTOCOMMIT | ServerStatus.SERVER_STATUS_IN_TRANS]))  # fmt: skip
def test_an_ok_packet_is_byte_for_byte_mimics(affected: int, insert_id: int, warnings: int, status: ServerStatus) -> None:
    # The proxy writes a protocol 4.1 client's OK itself (every BEGIN, COMMIT and COM_STMT_RESET of the hot path)
    assert ok_packet(affected, insert_id, int(status), warnings) == make_ok(
        CLIENT, status, affected_rows=affected, last_insert_id=insert_id, warnings=warnings)


@pytest.mark.parametrize("capabilities", [CLIENT, CLIENT | Capabilities.CLIENT_DEPRECATE_EOF, Capabilities.CLIENT_TRANSACTIONS])
def test_the_connections_ok_is_mimics(capabilities: Capabilities) -> None:
    # With an outcome reported, plain, with warnings, and the kinds it leaves to mimic (an OK closing a result)
    async def run() -> None:
        status = ServerStatus.SERVER_STATUS_AUTOCOMMIT | ServerStatus.SERVER_STATUS_IN_TRANS
        mimic, mimic_peer = await _connection(Connection, capabilities, "utf8mb4", status)
        proxy, proxy_peer = await _connection(ProxyConnection, capabilities, "utf8mb4", status)
        assert proxy.ok() == mimic.ok()
        assert proxy.ok(warnings=3) == mimic.ok(warnings=3)
        assert proxy.ok(eof=True, affected_rows=300) == mimic.ok(eof=True, affected_rows=300)
        assert proxy.ok(flags=ServerStatus.SERVER_MORE_RESULTS_EXISTS) == mimic.ok(flags=ServerStatus.SERVER_MORE_RESULTS_EXISTS)
        assert proxy.ok_of(Outcome(70_000, 2**40)) == mimic.ok(affected_rows=70_000, last_insert_id=2**40)
        for conn in (mimic, proxy):
            conn.stream.writer.close()
        mimic_peer.close()
        proxy_peer.close()

    asyncio.run(run())
