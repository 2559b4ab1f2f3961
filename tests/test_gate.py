"""The ``gate`` unit (both twins): a client's commands taken on the hot path or handed to mimic's stream, in order.

``CommandGate`` runs as the protocol of a real socket's transport, in front of a real
``StreamReaderProtocol``: what the hot path declines, and everything after it, must reach the stream
reader byte for byte and in order; a packet with a sequence id other than 0, a 16 MB chain or a
length over the limit goes to the stream whole. ``execute_params`` must read a COM_STMT_EXECUTE's
values exactly as the proxy's mimic-based reader does (``proxy/prepared.py``), over generated packets.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mysql_mimic.charset import CharacterSet
from mysql_mimic.prepared import PreparedStatement
from mysql_mimic.types import Capabilities

from ddm_core._fast import load
from ddm_core.proxy.prepared import read_execute

TWINS = [load("python").gate]
try:
    TWINS.append(load("cython").gate)
except ImportError:  # not built: the pure twin alone (the compiled pass requires it)
    pass

CAPS = Capabilities.CLIENT_PROTOCOL_41


def _packet(payload: bytes, seq: int = 0) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


# -- execute_params -----------------------------------------------------------------------------------

INT_TYPES = [(0x01, 1), (0x02, 2), (0x0D, 2), (0x03, 4), (0x09, 4), (0x08, 8)]


@st.composite
def parameters(draw: Any) -> list[tuple[int, int, bytes, Any]]:
    """(type, unsigned flag, value bytes, None-or-marker) per parameter."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        choice = draw(st.sampled_from(["int", "float", "double", "str", "null", "nulltype"]))
        if choice == "int":
            kind, size = draw(st.sampled_from(INT_TYPES))
            unsigned = draw(st.booleans())
            bits = 8 * size
            value = draw(st.integers(0, (1 << bits) - 1) if unsigned else st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1))
            out.append((kind, 0x80 if unsigned else 0, value.to_bytes(size, "little", signed=not unsigned), value))
        elif choice == "float":
            value = draw(st.floats(width=32, allow_nan=False))
            out.append((0x04, 0, struct.pack("<f", value), value))
        elif choice == "double":
            value = draw(st.floats(allow_nan=False))
            out.append((0x05, 0, struct.pack("<d", value), value))
        elif choice == "str":
            text = draw(st.text(max_size=300))
            data = text.encode()
            kind = draw(st.sampled_from([0x0F, 0xFD, 0xFE, 0xFC]))
            head = bytes([len(data)]) if len(data) < 0xFB else b"\xfc" + len(data).to_bytes(2, "little")
            out.append((kind, 0, head + data, text))
        elif choice == "null":
            out.append((0xFD, 0, b"", None))  # NULL by the bitmap: no value bytes
        else:
            out.append((0x06, 0, b"", None))  # a NULL-typed parameter
    return out


def _execute(stmt_id: int, params: list[tuple[int, int, bytes, Any]], bound: bool) -> bytes:
    bitmap = bytearray((len(params) + 7) // 8)
    for i, (_, _, _, value) in enumerate(params):
        if value is None and params[i][0] != 0x06:
            bitmap[i // 8] |= 1 << (i % 8)
    types = b"".join(bytes([k, u]) for k, u, _, _ in params)
    values = b"".join(v for _, _, v, _ in params)
    return b"\x17" + stmt_id.to_bytes(4, "little") + b"\x00\x01\x00\x00\x00" + bytes(bitmap) + (b"\x01" + types if bound else b"\x00") + values


@settings(max_examples=400, deadline=None, derandomize=True)
@given(params=parameters(), bound=st.booleans())
def test_execute_params_reads_as_the_mimic_reader_does(params: list[tuple[int, int, bytes, Any]], bound: bool) -> None:
    stmt = PreparedStatement(stmt_id=7, sql="SELECT " + ", ".join("?" * len(params)), num_params=len(params))
    packet = _execute(7, params, bound)
    types = b"".join(bytes([k, u]) for k, u, _, _ in params)
    remembered = {7: types} if not bound else {}
    expected = read_execute(packet[1:], CAPS, CharacterSet.utf8mb4, lambda _: stmt, dict(remembered)).params
    for twin in TWINS:
        got = twin.execute_params(packet, len(params), remembered.get(7))
        assert got is not None
        values, block, read_types = got
        assert values == expected and [type(v) for v in values] == [type(v) for v in expected]
        assert read_types == types
        nulls = packet[10 : 10 + (len(params) + 7) // 8]
        assert block == nulls + b"\x01" + types + b"".join(v for _, _, v, _ in params)


@pytest.mark.parametrize("case", ["cursor", "count available", "no types", "short", "date", "bad utf8", "trailing"])
def test_execute_params_leaves_the_rest_to_mimic(case: str) -> None:
    one = [(0x08, 0, (5).to_bytes(8, "little"), 5)]
    packets = {
        "cursor": _execute(1, one, True)[:5] + b"\x01" + _execute(1, one, True)[6:],
        "count available": _execute(1, one, True)[:5] + b"\x08" + _execute(1, one, True)[6:],
        "no types": _execute(1, one, False),
        "short": _execute(1, one, True)[:-3],
        "date": _execute(1, [(0x0A, 0, b"\x04\xea\x07\x01\x02", None)], True),
        "bad utf8": _execute(1, [(0xFD, 0, b"\x02\xff\xfe", None)], True),
        "trailing": _execute(1, one, True) + b"\x00",
    }
    for twin in TWINS:
        assert twin.execute_params(packets[case], 1, None) is None


# -- CommandGate ----------------------------------------------------------------------------------------


async def _gate_session(twin: Any, hot: Any, limit: int = 1 << 20) -> tuple[Any, asyncio.StreamReader, socket.socket]:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    reader = asyncio.StreamReader(limit=1 << 26)
    transport, inner = await loop.connect_accepted_socket(lambda: asyncio.StreamReaderProtocol(reader), ours)
    gate = twin.CommandGate(inner, reader, limit, hot)
    gate.transport = transport
    transport.set_protocol(gate)
    theirs.setblocking(False)
    return gate, reader, theirs


async def _answering_at_once(twin: Any, prefix: bytes, taken: list[bytes]) -> tuple[Any, asyncio.StreamReader,
                                                                                     socket.socket]:  # fmt: skip
    """A gate whose hot path takes the commands starting with ``prefix`` (into ``taken``) and answers each before it
    returns (``done()`` inside ``hot()``, as a BEGIN is answered); it declines the others."""
    holder: list[Any] = []

    def hot(command: int, payload: bytes) -> bool:
        if not payload.startswith(prefix):
            return False
        taken.append(payload)
        holder[0].done()
        return True

    gate, reader, client = await _gate_session(twin, hot)
    holder.append(gate)
    return gate, reader, client


async def _send(sock: socket.socket, data: bytes) -> None:
    await asyncio.get_running_loop().sock_sendall(sock, data)
    await asyncio.sleep(0.01)


@pytest.mark.parametrize("twin", TWINS, ids=lambda t: t.__name__)
def test_commands_taken_declined_and_handed_on_in_order(twin: Any) -> None:
    async def main() -> None:
        taken: list[bytes] = []
        holder: list[Any] = []

        def hot(command: int, payload: bytes) -> bool:
            if payload.startswith(b"\x03HOT"):
                taken.append(payload)
                asyncio.get_running_loop().call_soon(holder[0].done)  # answered later, as a relay is
                return True
            return False

        gate, reader, client = await _gate_session(twin, hot)
        holder.append(gate)
        assert gate.mode == twin.MIMIC
        gate.command_awaited()  # mimic waits for a command, nothing buffered: the gate reads them
        assert gate.mode == twin.IDLE
        # Three pipelined commands: two taken, then one declined: it and all after it go to mimic.
        await _send(client, _packet(b"\x03HOT 1") + _packet(b"\x03HOT 2") + _packet(b"\x03SELECT 1") + _packet(b"\x03HOT 3"))
        await asyncio.sleep(0.05)
        assert taken == [b"\x03HOT 1", b"\x03HOT 2"]
        assert gate.mode == twin.MIMIC
        assert await reader.readexactly(4 + 9) == _packet(b"\x03SELECT 1")
        assert await reader.readexactly(4 + 6) == _packet(b"\x03HOT 3")  # after a declined one: mimic's
        gate.command_awaited()
        assert gate.mode == twin.IDLE
        # A packet arriving in pieces (half a header, then a payload cut short) goes to mimic, whose reader
        # bounds the wait for the rest (proxy.netReadTimeoutMs, proxy/stream.py).
        for cut in (3, 6):
            whole = _packet(b"\x03HOT 4")
            await _send(client, whole[:cut])
            await asyncio.sleep(0.02)
            assert gate.mode == twin.MIMIC
            await _send(client, whole[cut:])
            assert await reader.readexactly(len(whole)) == whole
            assert taken[-1] == b"\x03HOT 2"
            gate.command_awaited()
            assert gate.mode == twin.IDLE
        # A wrong sequence id, and a packet over the limit, go to mimic whole (its reader answers them).
        for bad in (_packet(b"\x03HOT 5", seq=1), b"\xff\xff\xff\x00" + b"x" * 10):
            gate.command_awaited()
            await _send(client, bad)
            assert gate.mode == twin.MIMIC
            assert await reader.readexactly(len(bad)) == bad
        client.close()
        await asyncio.sleep(0.02)
        assert reader.at_eof()  # the end of the connection reaches the stream

    asyncio.run(main())


@pytest.mark.parametrize("twin", TWINS, ids=lambda t: t.__name__)
def test_one_command_a_read_is_taken_or_handed_on_whole(twin: Any) -> None:
    # a request-and-answer client sends one whole command a read: the compiled gate reads it straight from the
    # read's bytes; what it declines reaches mimic whole, and the commands after it too
    async def main() -> None:
        taken: list[bytes] = []
        gate, reader, client = await _answering_at_once(twin, b"\x03HOT", taken)
        gate.command_awaited()
        for i in range(3):
            await _send(client, _packet(b"\x03HOT %d" % i))
            assert gate.mode == twin.IDLE and taken[-1] == b"\x03HOT %d" % i
        await _send(client, _packet(b"\x03SELECT 1"))
        assert gate.mode == twin.MIMIC and taken == [b"\x03HOT 0", b"\x03HOT 1", b"\x03HOT 2"]
        await _send(client, _packet(b"\x03HOT 3"))  # after a declined one: mimic's until it waits again
        assert await reader.readexactly(4 + 9 + 4 + 6) == _packet(b"\x03SELECT 1") + _packet(b"\x03HOT 3")
        gate.command_awaited()
        await _send(client, _packet(b"\x03HOT 4", seq=1))  # a wrong sequence id: mimic's reader answers it
        assert gate.mode == twin.MIMIC and await reader.readexactly(4 + 6) == _packet(b"\x03HOT 4", seq=1)
        assert taken[-1] == b"\x03HOT 2"
        client.close()

    asyncio.run(main())


@pytest.mark.parametrize("twin", TWINS, ids=lambda t: t.__name__)
def test_a_hot_command_running_holds_what_follows_until_done(twin: Any) -> None:
    async def main() -> None:
        taken: list[bytes] = []
        gate, reader, client = await _gate_session(twin, lambda c, p: taken.append(p) is None)
        gate.command_awaited()
        await _send(client, _packet(b"\x03A") + _packet(b"\x03B"))
        assert taken == [b"\x03A"]  # B waits: A's answer is not written yet
        gate.done()
        assert taken == [b"\x03A", b"\x03B"]
        gate.done()
        assert gate.mode == twin.IDLE and not reader._buffer
        client.close()

    asyncio.run(main())


@pytest.mark.parametrize("twin", TWINS, ids=lambda t: t.__name__)
def test_a_hot_command_handed_back_reaches_mimic_before_what_followed_it(twin: Any) -> None:
    async def main() -> None:
        taken: list[bytes] = []
        gate, reader, client = await _gate_session(twin, lambda c, p: taken.append(p) is None)
        gate.command_awaited()
        await _send(client, _packet(b"\x03A") + _packet(b"\x03B"))
        assert taken == [b"\x03A"]
        gate.handback(b"\x03A")  # A could not be answered on the hot path (its replica went away)
        assert gate.mode == twin.MIMIC and taken == [b"\x03A"]
        assert await reader.readexactly(2 * (4 + 2)) == _packet(b"\x03A") + _packet(b"\x03B")
        gate.handback(b"\x03C")  # nothing hot is running: no effect
        assert not reader._buffer
        client.close()

    asyncio.run(main())


@pytest.mark.parametrize("twin", TWINS, ids=lambda t: t.__name__)
def test_a_burst_of_commands_answered_at_once_is_taken_in_one_loop(twin: Any) -> None:
    # hot() answers each command before it returns (as a BEGIN is answered), so done() runs inside it: a
    # nested call per command would end in RecursionError a few hundred commands into the burst
    async def main() -> None:
        taken: list[bytes] = []
        gate, reader, client = await _answering_at_once(twin, b"\x03NOW", taken)
        gate.command_awaited()
        burst = [b"\x03NOW %d" % i for i in range(5000)]
        await _send(client, b"".join(_packet(p) for p in burst) + _packet(b"\x03SELECT 1"))
        await asyncio.sleep(0.05)
        assert taken == burst
        assert gate.mode == twin.MIMIC  # the declined one, after the burst, goes to mimic
        assert await reader.readexactly(4 + 9) == _packet(b"\x03SELECT 1")
        gate.command_awaited()
        await _send(client, _packet(b"\x03NOW again"))
        assert taken[-1] == b"\x03NOW again" and gate.mode == twin.IDLE
        client.close()

    asyncio.run(main())
