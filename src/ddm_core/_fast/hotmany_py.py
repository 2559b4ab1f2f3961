"""A multi-unit read's answers read off their sockets by reader callbacks: no task, no future, no coroutine.

Pure-Python twin of ``hotmany.pyx`` (same classes, same behaviour; tests/test_proxy_many_loop.py runs both
behind a real proxy). The gate hands the session a known multi-unit read (``ProxySession._hot_many``); the
session sends its units (``Executor.send_many``) and reads their answers here, part after part as the task's
path reads them (proxy/relay_many.py's ``relay_many``, ``take_many``): whatever a socket has is taken at once,
and only an empty socket is watched, by a reader callback (docs/proxy.md#answers-read-by-reader-callbacks).

* :class:`ConcatenatedAnswers` — rows that need no merge: each answer's bytes go through the concatenating
  relay as they come; the client's result is written in one piece once the last answer ended.
* :class:`WholeAnswers` — rows merged undecoded (in order, or aggregates folded): each answer taken whole, then
  merged by the session.

Only the common course is here. Anything else — a socket that cannot be read off, fails or closes, an error
packet or anything but rows, more than :data:`TAKE_LIMIT` bytes, the answer bound passing, a bug — stops the
reading where it is and hands it to the task's path, which reads on as if it had read those bytes itself: from
the start with the bytes read so far per connection (:meth:`carried`), or, once the client's column header is
framed, with the relay as it is (``relay_many_on``).

The objects it works with (the sent read, the event loop, the shared timer, the relay and the session's
callbacks) are the proxy's, passed in: this unit imports none of them.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from functools import partial
from typing import Any, Callable

from ddm_core._fast.relay_py import DONE, FIRST, HEADER, ROWS, _lenenc, ok_fields

__all__ = ["ConcatenatedAnswers", "WholeAnswers", "AnswerEnd", "TAKE_LIMIT", "READ_SIZE"]

log = logging.getLogger("ddm_core.proxy")  # what it logs is the proxy's

#: Bytes asked of a data source's socket per read (proxy/relay.py's READ_SIZE).
READ_SIZE = 256 * 1024
#: Bytes read past which the task's path reads on instead (it streams them: memory stays bounded, and the loop
#: serves other clients between chunks).
TAKE_LIMIT = 1 << 20

_DONTWAIT = socket.MSG_DONTWAIT
_FIRST, _ROWS, _HEADER, _DONE = FIRST, ROWS, HEADER, DONE
_COLUMNS, _COLUMNS_EOF = -2, -3  # AnswerEnd's states while it reads the definitions, then the EOF after them
_MAX_PAYLOAD = 0xFFFFFF
_MORE_RESULTS = 0x0008  # SERVER_MORE_RESULTS_EXISTS


class AnswerEnd:
    """Where a data source's answer of rows ends in the bytes fed so far, found by reading its packets' headers
    (nothing framed, nothing copied but the bytes kept): the relay's reading of an answer (``ResultRelay``),
    without its output. :meth:`feed` says :data:`FIRST` or :data:`ROWS` (more bytes needed), :data:`DONE` (the
    answer is ``buf[:end]``, its closing flags ``status``), or -1: anything but rows the relay passes on — an
    error or OK packet, a packet out of sequence, ``LOCAL INFILE``, more result sets.

    Args:
        backend_eof: The data source sends EOF packets (its connection did not negotiate ``CLIENT_DEPRECATE_EOF``).
    """

    __slots__ = ("backend_eof", "buf", "at", "seq", "state", "count", "defs", "continued", "status", "end")

    def __init__(self, backend_eof: bool) -> None:
        self.backend_eof = backend_eof
        self.buf = bytearray()
        self.at = 0  # where the next packet begins
        self.seq = 1  # the sequence id it must have (the answer to a command begins at 1)
        self.state = FIRST
        self.count = self.defs = 0
        self.continued = False  # the last row packet was 16 MiB - 1 long: the row goes on in the next one
        self.status = 0
        self.end = -1

    def feed(self, data: bytes) -> int:
        buf = self.buf
        buf += data
        size, at = len(buf), self.at
        while size - at >= 4:
            length = buf[at] | buf[at + 1] << 8 | buf[at + 2] << 16
            if size - at - 4 < length:
                break
            if buf[at + 3] != self.seq:
                return -1
            self.seq = (self.seq + 1) & 0xFF
            start, at = at + 4, at + 4 + length
            self.at = at
            head = buf[start] if length else -1
            state = self.state
            if state == ROWS:
                if self.continued:
                    self.continued = length == _MAX_PAYLOAD
                elif head == 0xFF:
                    return -1
                elif head == 0xFE and length < 9:
                    return self._closed(bytes(buf[start:at]))
                else:
                    self.continued = length == _MAX_PAYLOAD
            elif state == FIRST:
                if head in (0x00, 0xFF, 0xFB) or head < 0:
                    return -1  # an OK, an error, LOCAL INFILE, an empty packet
                count, after = _lenenc(buf, start)
                if count <= 0 or after != at:
                    return -1
                self.count, self.defs, self.state = count, 0, _COLUMNS
            elif state == _COLUMNS:
                self.defs += 1
                if self.defs == self.count:
                    self.state = _COLUMNS_EOF if self.backend_eof else ROWS
            elif head == 0xFE and length < 9:  # the EOF after the definitions
                self.state = ROWS
            else:
                return -1
        return FIRST if self.state != ROWS else ROWS

    def _closed(self, payload: bytes) -> int:
        if self.backend_eof:
            status = payload[3] | payload[4] << 8 if len(payload) >= 5 else -1
        else:
            status = ok_fields(payload)[2]
        if status < 0 or status & _MORE_RESULTS:
            return -1
        self.status, self.end, self.state = status, self.at, DONE
        return DONE


class _PartsReader:
    """The parts of ``sent`` read in order, each socket read without waiting while it has bytes and watched
    by a reader callback when it has none; the answer bound kept on the loop's shared timer (``Deadlines``).
    Parts on one connection (a transaction's pin) are answered in turn on its socket. ``watches``: set when the
    parts are on a transaction's pins, the session's ``PinWatches`` (hotpin), which keep the pins watched from
    one read to the next; ``None``: each socket watched with a reader of its own.

    On pins, while it waits for one part, the later parts' sockets are read ahead as their bytes come (kept per
    lane, taken in when their part's turn comes): a pin's watch woken with nobody reading it would be given up,
    and made again at the next read (docs/proxy.md#the-pins-watched)."""

    __slots__ = ("sent", "loop", "deadlines", "socks", "lanes", "part", "watched", "size", "cancel_at", "abort_at",
                 "done", "watches", "ahead", "ahead_fds")  # fmt: skip

    def __init__(self, sent: Any, loop: Any, deadlines: Any) -> None:
        self.sent = sent
        self.loop = loop
        self.deadlines = deadlines
        self.socks: list[Any] = []
        #: per lane, every byte read off its connection so far (what the task's path reads from, if it takes over)
        self.lanes: dict[int, list[bytes]] = {}
        self.part = 0  # the part whose answer is read now
        self.watched = -1  # the socket watched (-1: none)
        self.size = 0  # bytes read so far
        #: Read by ``Deadlines``: the cancel at the deadline is the lanes' guards' (armed by ``send_many``)
        self.cancel_at: float | None = None
        self.abort_at: float | None = None  # the loop's time of the answer bound (``SentMany.answer_by``)
        self.done = False
        self.watches: Any = None
        #: per lane, bytes read ahead of its part's turn (in ``lanes`` too), not taken in yet
        self.ahead: dict[int, list[bytes]] = {}
        self.ahead_fds: list[int] | None = None  # the later parts' sockets read ahead (``None``: not begun)

    def start(self) -> None:
        """Read what has come and watch for the rest; handed over at once when a part cannot be read off its
        socket."""
        for part in self.sent.parts:
            sock = part.pool.driver.relay_socket(part.borrowed.raw)
            if sock is None:
                self._hand_over()
                return
            self.socks.append(sock)
            self.lanes[part.lane] = []
        answer_by = self.sent.answer_by
        if answer_by is not None:
            loop, deadlines = self.loop, self.deadlines
            self.abort_at = loop.time() + max(0.0, answer_by - time.monotonic())
            deadlines.running.add(self)
            if self.abort_at < deadlines.at:
                deadlines.arm(self.abort_at, loop)
        self._advance_safely()

    def _advance(self) -> None:
        parts = self.sent.parts
        while True:
            i = self.part
            part = parts[i]
            early = self.ahead.pop(part.lane, None) if self.ahead else None
            if early:
                data = early[0] if len(early) == 1 else b"".join(early)
            else:
                try:
                    data = self.socks[i].recv(READ_SIZE, _DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    if self.watched != part.fileno:
                        if self.watched >= 0:
                            self._unwatch()
                        self.watched = part.fileno
                        if self.watches is not None:
                            self.watches.watch(self.loop, self.socks[i], part.fileno, self._advance_now)
                            if self.ahead_fds is None:
                                self._read_ahead(i)
                        else:
                            self.loop.add_reader(part.fileno, self._advance_now)
                    return
                except OSError:
                    self._hand_over()  # the task's path reads the socket again and names its failure
                    return
                if not data:
                    self._hand_over()
                    return
                self.lanes[part.lane].append(data)
                self.size += len(data)
            try:
                following = self._consume(i, data)
            except Exception:  # noqa: BLE001  # a bug must not leave the client waiting: the task's path reads on
                log.exception("reading a multi-unit read's answer from a reader callback failed")
                following = -1
            if following == i and self.size <= TAKE_LIMIT:
                continue
            if following <= i:  # unusual, or a long answer: the task's path reads on
                self._hand_over()
                return
            self.part = following
            if following == len(parts):
                self._end()
                self._finish()
                return

    def _advance_now(self) -> None:
        if not self.done:
            self._advance_safely()

    def _read_ahead(self, i: int) -> None:
        """Part ``i`` waited for: the pins of the parts after it, on other connections, watched and read as their
        bytes come."""
        parts = self.sent.parts
        fds: list[int] = []
        self.ahead_fds = fds
        seen = {parts[i].lane}
        for j in range(i + 1, len(parts)):
            part = parts[j]
            if part.lane not in seen:
                seen.add(part.lane)
                fds.append(part.fileno)
                self.watches.watch(self.loop, self.socks[j], part.fileno, partial(self._take_ahead, j))

    def _take_ahead(self, j: int) -> None:
        """Part ``j``'s connection readable: its bytes kept for its turn, or read now when its lane's turn came."""
        if self.done:
            return
        part = self.sent.parts[j]
        if self.sent.parts[self.part].lane == part.lane:
            self._advance_safely()
            return
        try:
            data: bytes = self.socks[j].recv(READ_SIZE, _DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self.ahead.setdefault(part.lane, []).append(data)
            self.lanes[part.lane].append(data)
            self.size += len(data)
        if not data or self.size > TAKE_LIMIT:  # an end, a failure, a long answer: met in its turn, not read ahead
            self.watches.park(part.fileno)

    def _advance_safely(self) -> None:
        try:
            self._advance()
        except Exception:  # noqa: BLE001  # a socket or a loop that fails unlike a socket: the task's path says why
            log.exception("reading a multi-unit read's answers from a reader callback failed")
            if not self.done:
                self._hand_over()

    def check(self, now: float) -> None:
        """The loop's shared timer: past the answer bound the task's path takes over (and finds it passed)."""
        if not self.done and self.abort_at is not None and self.abort_at <= now:
            self._hand_over()

    def abandon(self) -> None:
        """Given up before the answers are in (the client went away): every connection discarded."""
        if self.done:
            return
        self._end()
        self.sent.abandon()

    def _hand_over(self) -> None:
        self._end()
        try:
            self._over()
        except Exception:  # noqa: BLE001  # a callback's bug: logged, as the loop would log it
            log.exception("handing a multi-unit read to the task's path failed")

    def carried(self) -> dict[int, bytes]:
        """Per lane, the bytes read off its connection (the task's path reads them first)."""
        return {lane: b"".join(chunks) for lane, chunks in self.lanes.items() if chunks}

    def _end(self) -> None:
        self.done = True
        self.abort_at = None
        self.deadlines.running.discard(self)
        if self.watched >= 0:
            self._unwatch()
        if self.ahead_fds:
            for fd in self.ahead_fds:
                self.watches.park(fd)

    def _unwatch(self) -> None:
        fd, self.watched = self.watched, -1
        if self.watches is not None:
            self.watches.park(fd)
            return
        self.loop.remove_reader(fd)
        os.set_blocking(fd, True)  # uvloop made it non-blocking to watch it; the driver reads it blocking

    # -- what a kind of read does with the bytes: each subclass's (ConcatenatedAnswers, WholeAnswers); the base
    # -- is never made on its own ----------------------------------------------------------------------

    def _consume(self, i: int, data: bytes) -> int:
        """Part ``i``'s next bytes taken in: the part read next (``i``: more of this one; past the last: all
        are in), or -1: the task's path takes over."""
        raise NotImplementedError

    def _finish(self) -> None:
        raise NotImplementedError

    def _over(self) -> None:
        raise NotImplementedError


class ConcatenatedAnswers(_PartsReader):
    """A read whose rows need no merge: every answer through ``relay`` (concatenating) as it comes.

    Args:
        sent, loop, deadlines: As :class:`_PartsReader`'s.
        relay: The client's relay (its first packet at sequence id 1).
        header_for: The client's column header for the data sources' definitions (``relay_header``).
        conversions_for: A prepared statement's conversions of text rows to binary ones (``relay_conversions``);
            ``None``: a text result.
        relayed: ``relayed(out)``: every answer ended with rows; ``out`` is the client's whole result.
        framed_over: ``framed_over(state, out, ahead)``: the task's path reads on with the relay in ``state``,
            ``out`` framed for the client so far, ``ahead`` per lane the bytes read ahead of their part's turn.
        fresh_over: ``fresh_over(carried)``: the task's path reads from the start, ``carried`` the bytes read per
            lane (``relay`` not used again).
    """

    __slots__ = ("relay", "header_for", "conversions_for", "relayed", "framed_over", "fresh_over", "out",
                 "pending", "state")  # fmt: skip

    def __init__(self, sent: Any, loop: Any, deadlines: Any, relay: Any,
                 header_for: Callable[[list[bytes]], tuple[list[bytes], int]],
                 conversions_for: Callable[[list[bytes]], bytes | None] | None, relayed: Callable[[bytes], None],
                 framed_over: Callable[[int, bytes, dict[int, bytes]], None],
                 fresh_over: Callable[[dict[int, bytes]], None]) -> None:  # fmt: skip
        super().__init__(sent, loop, deadlines)
        self.relay = relay
        self.header_for = header_for
        self.conversions_for = conversions_for
        self.relayed = relayed
        self.framed_over = framed_over
        self.fresh_over = fresh_over
        self.out: list[bytes] = []  # the client's bytes (a relay's "client": written in one piece at the end)
        #: The first answer's header not framed yet, and rows to be converted (a prepared statement's: the header
        #: decides how): it is read before anything is relayed
        self.pending = conversions_for is not None
        self.state = _FIRST
        relay.concatenate(len(sent.parts))

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def _consume(self, i: int, data: bytes) -> int:
        relay = self.relay
        if not self.pending:
            state = relay.pump(data, self, self.header_for)
        else:  # as relay_many: the first answer's definitions read before anything is relayed
            state = relay.feed(data)
            if state == _FIRST:
                return i
            if state != _HEADER:
                return -1
            conversions = self.conversions_for(relay.columns)  # type: ignore[misc]
            if conversions is None:
                return -1  # decoded: the task's path finds the same and reads them into rows
            relay.convert(conversions)
            self.pending = False
            state = relay.pump(b"", self, self.header_for)
        self.state = state
        if state == _FIRST or state == _ROWS:
            return int(relay.unit)  # bytes past an answer are the next one's on that connection: the relay has them
        return len(self.sent.parts) if state == _DONE else -1

    def _finish(self) -> None:
        out = self.out
        try:
            self.relayed(out[0] if len(out) == 1 else b"".join(out))
        except Exception:  # noqa: BLE001  # a callback's bug: logged, as the loop would log it
            log.exception("answering a multi-unit read from its relayed answers failed")

    def _over(self) -> None:
        if not self.pending:  # the header is framed: on from where the relay is, with the bytes read ahead
            ahead = {lane: b"".join(chunks) for lane, chunks in self.ahead.items() if chunks}
            self.framed_over(self.state, b"".join(self.out), ahead)
        else:
            self.fresh_over(self.carried())


class WholeAnswers(_PartsReader):
    """A read whose rows are merged undecoded: every answer taken whole (its end found by :class:`AnswerEnd`), as
    :func:`take_many` takes them.

    Args:
        sent, loop, deadlines: As :class:`_PartsReader`'s.
        taken: ``taken(answers, statuses)``: every answer, whole, and its closing flags, in part order.
        fresh_over: As :class:`ConcatenatedAnswers`'s.
    """

    __slots__ = ("taken", "fresh_over", "finder", "answers", "statuses")

    def __init__(self, sent: Any, loop: Any, deadlines: Any, taken: Callable[[list[bytes], list[int]], None],
                 fresh_over: Callable[[dict[int, bytes]], None]) -> None:  # fmt: skip
        super().__init__(sent, loop, deadlines)
        self.taken = taken
        self.fresh_over = fresh_over
        self.finder: AnswerEnd | None = None
        self.answers: list[bytes] = []
        self.statuses: list[int] = []

    def _consume(self, i: int, data: bytes) -> int:
        parts = self.sent.parts
        while True:
            finder = self.finder
            if finder is None:
                finder = self.finder = AnswerEnd(parts[i].pool.driver.relay_eof)
            state = finder.feed(data)
            if state == _FIRST or state == _ROWS:
                return i
            if state != _DONE:  # an error packet, an OK: the task's path settles it
                return -1
            buf, end = finder.buf, finder.end
            self.answers.append(bytes(buf[:end]))
            self.statuses.append(finder.status)
            self.finder = None
            i += 1
            if end == len(buf):
                return i
            if i == len(parts) or parts[i].lane != parts[i - 1].lane:  # bytes past an answer nobody asked for
                return -1
            data = bytes(buf[end:])  # the next answer on that connection

    def _finish(self) -> None:
        try:
            self.taken(self.answers, self.statuses)
        except Exception:  # noqa: BLE001  # a callback's bug: logged, as the loop would log it
            log.exception("answering a multi-unit read from its answers failed")

    def _over(self) -> None:
        self.fresh_over(self.carried())
