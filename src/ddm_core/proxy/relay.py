"""Relayed results: a one-unit statement's answer passed from its data source to the client as it arrives.

A statement sent from the event loop (``Executor.send_single``) whose result needs
no merge is not decoded: its packets are read off the data source's socket when
it becomes readable and written to the client with the proxy's sequence ids,
column definitions and status flags (the compiled ``relay`` unit frames them;
docs/proxy.md#relayed-results). The rows' bytes are the data source's own.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Sequence

from ddm_core._fast import SELECTED
from ddm_core.execute.sent import SentUnit

if TYPE_CHECKING:
    from ddm_core._fast import hotlink, hotpin
    from ddm_core._fast.gate import CommandGate, execute_params
    from ddm_core._fast.hotfront import Commands, HotFront
    from ddm_core._fast.hotpin import PinRead
    from ddm_core._fast.hotlink import HeaderMemo, HotStatement, LinkProtocol, LinkStack, frame
    from ddm_core._fast.relay import ResultRelay
else:
    ResultRelay = SELECTED.relay.ResultRelay
    CommandGate = SELECTED.gate.CommandGate
    execute_params = SELECTED.gate.execute_params
    hotlink = SELECTED.hotlink
    HeaderMemo, HotStatement, LinkProtocol = hotlink.HeaderMemo, hotlink.HotStatement, hotlink.LinkProtocol
    LinkStack = hotlink.LinkStack
    frame = hotlink.frame
    HotFront, Commands = SELECTED.hotfront.HotFront, SELECTED.hotfront.Commands
    hotpin = SELECTED.hotpin
    PinRead = hotpin.PinRead

__all__ = [
    "relay_answer", "readable", "execute_values", "socket_of", "timed_out", "advance", "conclude", "is_waiting",
    "ResultRelay", "CommandGate", "execute_params", "lenenc_string", "RELAY_STATES", "HeaderMemo", "HotStatement", "LinkProtocol", "LinkStack", "frame",
    "hotlink", "hotpin", "HotFront", "Commands", "PinRead", "READ_SIZE", "HIGH_WATER", "unrelayable", "no_answer", "read_failed", "closed_mid_answer",
]  # fmt: skip

_relay = SELECTED.relay
_WAITING = (_relay.FIRST, _relay.ROWS)
_HEADER, _DONE, _OK, _ERROR = _relay.HEADER, _relay.DONE, _relay.OK, _relay.ERROR
RELAY_STATES = _relay
#: Bytes taken from the data source's socket per read.
READ_SIZE = 256 * 1024
#: Bytes waiting for a slow client before the relay stops reading its data source until they are sent.
HIGH_WATER = 1 << 20


_LONGLONG, _DOUBLE, _NULL, _TINY = 0x08, 0x05, 0x06, 0x01
_NEWDECIMAL, _BLOB, _VAR_STRING = 0xF6, 0xFC, 0xFD
_UNSIGNED = 0x80
_PACK_Q, _PACK_q, _PACK_d = struct.Struct("<Q").pack, struct.Struct("<q").pack, struct.Struct("<d").pack


def lenenc_string(data: bytes) -> bytes:
    """``data`` as the protocol's length-encoded string (its length first)."""
    n = len(data)
    if n < 0xFB:
        return bytes((n,)) + data
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little") + data
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little") + data
    return b"\xfe" + n.to_bytes(8, "little") + data


def execute_values(params: Sequence[Any]) -> bytes | None:
    """``params`` as a COM_STMT_EXECUTE carries them after its iteration count: null bitmap, "types
    follow", the types, the values; ``None`` when one has a type the relay does not encode (a date,
    say: the statement is then run and decoded as before). Strings go as utf8mb4, the connections'
    character set; integers as BIGINT (unsigned above its range), floats as DOUBLE, decimals as text."""
    nulls = bytearray((len(params) + 7) // 8)
    types = bytearray()
    values = bytearray()
    for i, value in enumerate(params):
        kind = type(value)
        if value is None:
            nulls[i // 8] |= 1 << (i % 8)
            types += bytes((_NULL, 0))
        elif kind is int:
            if -(1 << 63) <= value < 1 << 63:
                types += bytes((_LONGLONG, 0))
                values += _PACK_q(value)
            elif 0 <= value < 1 << 64:
                types += bytes((_LONGLONG, _UNSIGNED))
                values += _PACK_Q(value)
            else:
                return None
        elif kind is str:
            types += bytes((_VAR_STRING, 0))
            values += lenenc_string(value.encode("utf8", "surrogateescape"))
        elif kind is bool:
            types += bytes((_TINY, 0))
            values.append(int(value))
        elif kind is float:
            types += bytes((_DOUBLE, 0))
            values += _PACK_d(value)
        elif kind is Decimal and value.is_finite():
            types += bytes((_NEWDECIMAL, 0))
            values += lenenc_string(format(value, "f").encode())
        elif kind is bytes or kind is bytearray:
            types += bytes((_BLOB, 0))
            values += lenenc_string(bytes(value))
        else:
            return None
    return bytes(nulls) + b"\x01" + bytes(types) + bytes(values)


async def readable(fd: int, until: float | None) -> bool:
    """Wait until ``fd`` has something to read (a data source's answer arriving): ``True``; ``False`` when
    ``until`` (monotonic) passed first (a frozen data source answers neither the statement nor its cancel)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[bool] = loop.create_future()

    def on_ready(value: bool) -> None:  # may run again before the awaiting task resumes
        if not ready.done():
            ready.set_result(value)

    loop.add_reader(fd, on_ready, True)
    timer = None if until is None else loop.call_later(max(0.0, until - time.monotonic()), on_ready, False)
    try:
        return await ready
    finally:
        loop.remove_reader(fd)
        # uvloop (libuv) made the socket non-blocking to watch it; the driver reads it blocking,
        # bounded by the kernel's receive timeout, and would take "nothing yet" for that timeout.
        os.set_blocking(fd, True)
        if timer is not None:
            timer.cancel()


async def relay_answer(
    sent: SentUnit, relay: ResultRelay, writer: Any, header_for: Callable[[list[bytes]], tuple[list[bytes], int]]
) -> int:
    """Pass ``sent``'s answer to the client behind ``writer``, re-framed by ``relay``; the rows relayed.

    ``header_for(definitions)``: the client's column count and definition payloads for the backend's
    definitions, and the session's status flags. An OK answer (a SELECT … INTO) returns -1 with
    ``relay.first`` holding it. A client that reads slowly makes the relay wait (``writer.drain``).

    Raises:
        DdmError: the data source's error, mapped as a decoded read maps it (``relay.seq`` is where the
            client's error packet goes), a timeout, or an answer the relay cannot pass on.
    """
    sock = socket_of(sent)
    transport = writer.transport
    try:
        while True:
            if not await readable(sent.fileno, sent.answer_by):
                timed_out(sent)
            state = advance(sent, sock, relay, transport, header_for)
            if state in _WAITING:
                if transport.get_write_buffer_size() > HIGH_WATER:
                    await writer.drain()
                continue
            return conclude(sent, relay, state)
    except BaseException:  # cancelled (a client gone, a shutdown) or a failure: the answer is not read whole
        if not sent.borrowed.released:
            sent.abandon()
        raise


# What a relayed answer fails with, the same on every relay path (one unit, several, the hot path).

def unrelayable() -> ConnectionError:
    return ConnectionError("the data source's connection cannot be relayed (closed meanwhile)")


def no_answer(sql: str) -> TimeoutError:
    return TimeoutError(f"no answer from the data source by the statement's deadline ({sql})")


def read_failed(exc: OSError) -> ConnectionError:
    return ConnectionError(f"reading the data source's answer failed: {exc}")


def closed_mid_answer() -> ConnectionError:
    return ConnectionError("the data source closed the connection mid-answer")


def socket_of(sent: SentUnit) -> Any:
    """The socket ``sent``'s answer is read from (raises, the connection discarded, if it has none)."""
    sock = sent.pool.driver.relay_socket(sent.borrowed.raw)
    if sock is None:
        sent.relay_failed(unrelayable())
    return sock


def timed_out(sent: SentUnit) -> NoReturn:
    """No answer by the bound (a frozen data source): the statement fails, the connection is discarded."""
    sent.relay_failed(no_answer(sent.sql))


def advance(sent: SentUnit, sock: Any, relay: ResultRelay, transport: Any,
            header_for: Callable[[list[bytes]], tuple[list[bytes], int]]) -> int:  # fmt: skip
    """Read what the socket has, re-frame it and write it to the client; the relay's state after it.

    Raises:
        DdmError: the data source's connection failed or closed (the connection is discarded).
    """
    try:
        data = sock.recv(READ_SIZE)
    except (BlockingIOError, InterruptedError):
        return int(relay.state)
    except OSError as exc:
        sent.relay_failed(read_failed(exc))
    if not data:
        sent.relay_failed(closed_mid_answer())
    state = relay.feed(data)
    if state == _HEADER:
        payloads, status = header_for(relay.columns)
        state = relay.header(payloads, status)
    out = relay.take()
    if out and not transport.is_closing():  # a client gone: its answer is read to the end all the same
        transport.write(out)
    return int(state)


def conclude(sent: SentUnit, relay: ResultRelay, state: int) -> int:
    """The answer is over (``state`` is not a waiting one): the rows relayed, or -1 for an OK answer.

    Raises:
        DdmError: its error packet, mapped; or what the relay could not pass on.
    """
    if state == _DONE:
        sent.relayed(relay.rows, relay.status)
        return int(relay.rows)
    if state == _OK:
        sent.relayed(0, _relay.ok_fields(relay.first)[2])
        return -1
    if state == _ERROR:
        sent.relay_failed(sent.pool.driver.relay_error(sent.borrowed.raw, relay.first))
    sent.relay_failed(ConnectionError("the data source's answer could not be relayed (an unexpected packet)"))


def is_waiting(state: int) -> bool:
    """More bytes are needed from the data source."""
    return state in _WAITING
