"""Multi-unit reads answered on the event loop: every unit's answer read off its socket without a thread.

``Executor.send_many`` sent the units (docs/proxy.md#multi-unit-reads-on-the-loop); here the loop reads
their answers, part after part, as each socket becomes readable:

* :func:`relay_many` — a read whose rows need no merge (a plain concatenation): the answers pass to the
  client undecoded, as one result (the compiled relay's :meth:`ResultRelay.concatenate`): the first
  answer's column definitions, every answer's rows, one closing packet. A prepared statement's client
  reads binary rows: the relay converts the text rows (:meth:`ResultRelay.convert`, proxy/binary_rows.py)
  to the bytes the decoded path writes, or, when a column's could differ, hands the read to
  :func:`read_many` before anything reached the client;
* :func:`read_many` — anything the merge engine must see (ORDER BY, DISTINCT, aggregates, LIMIT): each
  answer is taken off its socket whole, then read into rows by the driver as if it had read the socket
  itself (the compiled ``wire`` reader), and the :class:`SentMany` merges them as the worker path does.

After a failed answer the rest are still read to their ends (a connection whose answer is not read whole
cannot be reused, and a transaction's pin must not be lost to a statement's error), unless the failure
left the connection in doubt; every connection goes back through :class:`SentMany`, which raises what the
worker path raises. A caller that gives up (a client gone) abandons them all.
"""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from ddm_core.execute.result import UnitResult
from ddm_core.proxy.relay import (
    HIGH_WATER, READ_SIZE, RELAY_STATES, ResultRelay, closed_mid_answer, no_answer, read_failed, readable, unrelayable,
)  # fmt: skip

if TYPE_CHECKING:
    from ddm_core.execute.sent_many import SentMany, SentPart

__all__ = ["relay_many", "relay_many_on", "read_many", "take_many", "decoded", "taken_whole", "Taken"]

_FIRST, _ROWS, _HEADER, _DONE, _ERROR = (RELAY_STATES.FIRST, RELAY_STATES.ROWS, RELAY_STATES.HEADER,
                                         RELAY_STATES.DONE, RELAY_STATES.ERROR)  # fmt: skip
#: The states of an answer not read to its end yet.
_UNENDED = frozenset((_FIRST, _ROWS, _HEADER))
#: Not a relay state: the part's socket failed, closed, or stayed silent past the bound.
_LOST = -1
_DONTWAIT = socket.MSG_DONTWAIT
#: Bytes read without waiting after which the loop serves its other clients once.
_YIELD_AFTER = 1 << 20


class _Reading:
    """What the loop knows of a sent read's parts while it reads them."""

    __slots__ = ("sent", "socks", "errors", "statuses", "lost", "carry", "reading", "unwaited")

    def __init__(self, sent: SentMany, carried: dict[int, bytes] | None = None) -> None:
        self.sent = sent
        parts = sent.parts
        self.socks: list[Any] | None = None  # per part, its socket (Driver.relay_socket), once one is read
        self.errors: list[BaseException | None] = [None] * len(parts)
        self.statuses = [0] * len(parts)
        self.lost: set[int] = set()  # lanes whose connection is in doubt
        #: per lane: bytes read and not relayed yet — past an answer (the next one's), or read by reader callbacks
        #: before this took over (the hotmany unit)
        self.carry: dict[int, bytes] = {} if carried is None else carried
        self.reading: dict[int, int] = {}  # per lane: the part whose answer is read now
        self.unwaited = 0  # bytes taken since the loop last ran anything else

    async def receive(self, i: int) -> bytes | None:
        """The next bytes of part ``i``'s socket (``None``: it failed; recorded, its lane lost)."""
        socks = self.socks
        if socks is None:
            socks = self.socks = [p.pool.driver.relay_socket(p.borrowed.raw) for p in self.sent.parts]
        part, sock = self.sent.parts[i], socks[i]
        if self.reading.setdefault(part.lane, i) != i:  # the lane's next answer: past its deadline, cancel it too
            self.reading[part.lane] = i
            self.sent.cancel_again(part.lane)
        if sock is None:
            self._fail(i, unrelayable())
            return None
        if self.carry:
            carried = self.carry.pop(part.lane, None)
            if carried:
                return carried
        waited = False
        while True:
            # What has arrived is taken at once (the units were all sent together: by the time one answer is
            # read, the next has usually come); only an empty socket is waited for.
            if waited and not await readable(part.fileno, self.sent.answer_by):
                self._fail(i, no_answer(part.sql))
                return None
            try:
                data: bytes = sock.recv(READ_SIZE, _DONTWAIT)
            except (BlockingIOError, InterruptedError):
                waited = True
                continue
            except OSError as exc:
                self._fail(i, read_failed(exc))
                return None
            if not data:
                self._fail(i, closed_mid_answer())
                return None
            if waited:
                self.unwaited = 0
            else:
                self.unwaited += len(data)
                if self.unwaited > _YIELD_AFTER:  # answers that keep coming must not hold the loop
                    self.unwaited = 0
                    await asyncio.sleep(0)
            return data

    def _fail(self, i: int, error: BaseException) -> None:
        self.errors[i] = error
        self.lost.add(self.sent.parts[i].lane)

    def ended(self, i: int, relay: ResultRelay, state: int) -> None:
        """Part ``i``'s answer ended in ``state`` (not DONE): its error recorded, its lane lost unless the
        answer ended cleanly (an error packet: the bytes after it are the lane's next answer's)."""
        part = self.sent.parts[i]
        if state == _ERROR:
            self.errors[i] = part.pool.driver.relay_error(part.borrowed.raw, relay.first)
            self.carry[part.lane] = relay.rest()
        elif state == RELAY_STATES.MISMATCH:
            self._fail(i, ConnectionError(
                "the units of a multi-unit read answered with different numbers of columns (tables that differ "
                "between shards?)"))  # fmt: skip
        elif state != _LOST:  # an OK packet or what no relay passes on: the connection is in doubt
            self._fail(i, ConnectionError("the data source's answer could not be relayed (an unexpected packet)"))

    async def take(self, i: int) -> bytes | None:
        """Part ``i``'s whole answer off its socket (its closing flags recorded), ``None``: it failed (recorded)."""
        part = self.sent.parts[i]
        lane = part.lane
        if lane in self.lost:
            return None  # the worker path stops a lane at its first failure: nothing more is read of it
        relay = ResultRelay(1, True, part.pool.driver.relay_eof, True)  # finds the answer's end
        carried = self.carry.pop(lane, None)
        chunks = [carried] if carried else []
        state = relay.feed(carried) if carried else _FIRST
        while state in _UNENDED:
            if state == _HEADER:
                state = relay.header([], 0)
                continue
            relay.take()
            data = await self.receive(i)
            if data is None:
                return None
            chunks.append(data)
            state = relay.feed(data)
        if state != _DONE:
            self.ended(i, relay, state)
            return None
        taken = chunks[0] if len(chunks) == 1 else b"".join(chunks)  # an answer usually comes in one read
        rest = relay.rest()
        if rest:
            self.carry[lane] = rest
            taken = taken[: len(taken) - len(rest)]
        self.statuses[i] = relay.status
        return taken


class _Held:
    """A prepared statement's relayed result (binary rows) held back until every answer is read, or until it
    grows past :data:`HIGH_WATER` (from then on it streams): a failed unit is then answered with the error
    alone, the decoded path's answer. A client must not get rows before such an error: mysql-connector's
    binary row reader takes an error packet after a row for another copy of that row and waits on for ever."""

    __slots__ = ("transport", "chunks", "size", "passed")

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.chunks: list[bytes] = []
        self.size = 0
        self.passed = False  # released: what comes is written at once

    def is_closing(self) -> bool:
        return bool(self.transport.is_closing())

    def write(self, data: bytes) -> None:
        if self.passed:
            self.transport.write(data)
            return
        self.chunks.append(data)
        self.size += len(data)
        if self.size > HIGH_WATER:
            self.release()

    def release(self) -> None:
        """What is held, to the client; what comes after it is written at once."""
        if self.chunks and not self.transport.is_closing():
            self.transport.write(self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks))
        self.chunks = []
        self.passed = True


async def relay_many(sent: SentMany, relay: ResultRelay, writer: Any,
                     header_for: Callable[[list[bytes]], tuple[list[bytes], int]],
                     conversions_for: Callable[[list[bytes]], bytes | None] | None = None,
                     carried: dict[int, bytes] | None = None) -> int | bytes:  # fmt: skip
    """Pass ``sent``'s answers to the client behind ``writer`` as one result; the rows relayed.

    ``conversions_for``: the client reads binary rows (a prepared statement's): the first answer's column
    definitions → how its text rows are converted (:meth:`ResultRelay.convert`); where it says ``None``,
    nothing is relayed and what was read of the first answer is returned (``bytes``): the read goes on
    with :func:`read_many` ``(sent, begun=..., carried=...)``. ``carried``: per lane, bytes read off its socket
    already (the hotmany unit), relayed before anything more is read there.

    Raises:
        DdmError: what the worker path raises for the units' outcomes (``relay.seq`` is where the client's
            error packet goes).
    """
    reading = _Reading(sent, carried)
    parts = sent.parts
    relay.concatenate(len(parts))
    transport = writer.transport
    held = None if conversions_for is None else _Held(transport)
    client = transport if held is None else held
    first_seq = relay.seq
    try:
        state = _FIRST
        if conversions_for is not None:  # the first answer's definitions are read before anything is relayed
            begun: list[bytes] = []
            while state == _FIRST:
                data = await reading.receive(0)
                if data is None:
                    state = _LOST
                    break
                begun.append(data)
                state = relay.feed(data)
            if state == _HEADER:
                conversions = conversions_for(relay.columns)
                if conversions is None:
                    return b"".join(begun)
                relay.convert(conversions)
                state = relay.pump(b"", client, header_for)
    except BaseException:  # cancelled (a client gone, a shutdown): the answers are not read whole
        sent.abandon()
        raise
    return await _relayed_on(reading, relay, writer, header_for, held, state, first_seq)


async def relay_many_on(sent: SentMany, relay: ResultRelay, writer: Any,
                        header_for: Callable[[list[bytes]], tuple[list[bytes], int]], state: int, framed: bytes,
                        binary: bool, carried: dict[int, bytes] | None = None) -> int:  # fmt: skip
    """:func:`relay_many` from where reader callbacks left it (the hotmany unit): ``relay`` (its first packet at
    sequence id 1) in ``state`` with the client's column header framed, ``framed`` the client's bytes so far (not
    written yet), a prepared statement's result when ``binary`` (held back as :func:`relay_many` holds it);
    ``carried``, per lane, bytes they read ahead of their part's turn (read first)."""
    transport = writer.transport
    held = _Held(transport) if binary else None
    if framed:
        (transport if held is None else held).write(framed)
    return await _relayed_on(_Reading(sent, carried), relay, writer, header_for, held, state, 1)


async def _relayed_on(reading: _Reading, relay: ResultRelay, writer: Any,
                      header_for: Callable[[list[bytes]], tuple[list[bytes], int]], held: _Held | None, state: int,
                      first_seq: int) -> int:  # fmt: skip
    """:func:`relay_many`'s reading on, from ``state``, and its settling."""
    sent = reading.sent
    parts = sent.parts
    transport = writer.transport
    client = transport if held is None else held
    try:
        while state in (_FIRST, _ROWS):
            data = await reading.receive(relay.unit)
            if data is None:
                state = _LOST
                break
            state = relay.pump(data, client, header_for)  # a client gone: the answers are read all the same
            if transport.get_write_buffer_size() > HIGH_WATER and not transport.is_closing():
                await writer.drain()
        done = relay.unit if state != _DONE else len(parts)
        reading.statuses[:done] = relay.statuses[:done]
        if state != _DONE:
            reading.ended(done, relay, state)
            for i in range(done + 1, len(parts)):  # read to their ends: the connections are kept
                await reading.take(i)
    except BaseException:  # cancelled (a client gone, a shutdown): the answers are not read whole
        sent.abandon()
        raise
    try:
        sent.relayed(int(relay.rows), reading.statuses, reading.errors, reading.lost)
    except BaseException:
        if held is not None and not held.passed:
            relay.seq = first_seq  # nothing reached the client: the error is all of its answer
        raise
    if held is not None:
        held.release()
    return int(relay.rows)


async def read_many(sent: SentMany, begun: bytes = b"", carried: dict[int, bytes] | None = None
                    ) -> tuple[list[UnitResult | BaseException | None], set[int]]:  # fmt: skip
    """Every answer of ``sent`` taken off its socket and read into rows by its driver: per part its
    :class:`UnitResult`, its error, or ``None`` (not read: its lane failed before it); and the lanes whose
    connection is in doubt. The caller settles ``sent`` with them (:meth:`SentMany.read`). ``begun``: the
    first answer's bytes :func:`relay_many` read already; ``carried``: as :func:`relay_many`'s."""
    return decoded(await take_many(sent, begun, carried))


async def take_many(sent: SentMany, begun: bytes = b"", carried: dict[int, bytes] | None = None) -> Taken:
    """Every answer of ``sent`` taken off its socket whole, undecoded (``begun``, ``carried`` as
    :func:`read_many`'s)."""
    reading = _Reading(sent, carried)
    if begun:
        reading.carry[sent.parts[0].lane] = begun
    answers: list[bytes | None] = []
    try:
        for i in range(len(sent.parts)):
            answers.append(await reading.take(i))
    except BaseException:
        sent.abandon()
        raise
    return Taken(reading, answers)


class Taken(NamedTuple):
    """A multi-unit read's answers taken whole: per part its bytes, ``None`` where it failed (the error in
    ``reading.errors``); the closing flags and lost lanes in ``reading``."""

    reading: _Reading
    answers: list[bytes | None]


def decoded(taken: Taken) -> tuple[list[UnitResult | BaseException | None], set[int]]:
    """:func:`read_many`'s answer for answers taken whole."""
    reading = taken.reading
    parts = reading.sent.parts
    answers = [reading.errors[i] if answer is None else _decoded(parts[i], answer) for i, answer in enumerate(taken.answers)]
    return answers, reading.lost


def _decoded(part: SentPart, answer: bytes) -> UnitResult | BaseException:
    """A whole answer read by the driver as from its socket: the rows, or the driver's error for it."""
    try:
        description, rows = part.pool.driver.read_answer(part.borrowed.raw, answer)
    except Exception as exc:  # noqa: BLE001  # the driver's error for an error packet: mapped when settled
        return exc
    return UnitResult(part.unit.data_source, description, rows, len(rows), sql=part.sql)


def taken_whole(sent: SentMany, answers: list[bytes], statuses: list[int]) -> Taken:
    """``sent``'s answers, each taken whole and ended with rows (the hotmany unit), as :func:`take_many` gives them."""
    reading = _Reading(sent)
    reading.statuses = statuses
    return Taken(reading, list(answers))

