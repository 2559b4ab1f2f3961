# cython: language_level=3
"""Compiled twin of ``hotmany_py.py``: a multi-unit read's answers read off their sockets by reader callbacks.

Same classes and behaviour as the pure twin (its docstring has the contract; tests/test_proxy_many_loop.py
runs both behind a real proxy). Compiled, a multi-unit read's common course — its sockets read, each chunk
through the relay or into its whole answer, the waits on the loop's reader callbacks — runs without an
interpreted frame of the proxy's own; what is unusual is the task's path's.
"""

cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.set cimport PySet_Add, PySet_Discard
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from ddm_core._fast._packets cimport _lenenc

import logging
import os
import socket

from ddm_core._fast.relay import DONE as _DONE_STATE, FIRST as _FIRST_STATE, HEADER as _HEADER_STATE
from ddm_core._fast.relay import ROWS as _ROWS_STATE

__all__ = ["ConcatenatedAnswers", "WholeAnswers", "AnswerEnd", "TAKE_LIMIT", "READ_SIZE"]

READ_SIZE = 256 * 1024
TAKE_LIMIT = 1 << 20

DEF C_READ_SIZE = 256 * 1024
DEF C_TAKE_LIMIT = 1 << 20
DEF MAX_PAYLOAD = 0xFFFFFF
DEF MORE_RESULTS = 0x0008
DEF F_COLUMNS = -2
DEF F_COLUMNS_EOF = -3

cdef int S_FIRST = _FIRST_STATE
cdef int S_ROWS = _ROWS_STATE
cdef int S_HEADER = _HEADER_STATE
cdef int S_DONE = _DONE_STATE
cdef object _DONTWAIT = socket.MSG_DONTWAIT
cdef object _set_blocking = os.set_blocking
cdef object _log = logging.getLogger("ddm_core.proxy")  # what it logs is the proxy's


cdef inline double _monotonic() noexcept:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


@cython.auto_pickle(False)  # one answer's state: never pickled
cdef class AnswerEnd:
    """Where a data source's answer of rows ends in the bytes fed so far (the pure twin's ``AnswerEnd``)."""

    cdef public bint backend_eof, continued
    cdef public bytearray buf
    cdef public Py_ssize_t at, end
    cdef public int seq, state
    cdef public long long count, defs, status

    def __init__(self, bint backend_eof):
        self.backend_eof = backend_eof
        self.buf = bytearray()
        self.at = 0
        self.seq = 1
        self.state = S_FIRST
        self.count = self.defs = 0
        self.continued = False
        self.status = 0
        self.end = -1

    cpdef int feed(self, bytes data) except -9:
        cdef bytearray buf = self.buf
        buf += data
        cdef const unsigned char* p = <const unsigned char*> PyByteArray_AS_STRING(buf)
        cdef Py_ssize_t size = PyByteArray_GET_SIZE(buf), at = self.at, start, length, after
        cdef int head
        cdef long long count
        while size - at >= 4:
            length = p[at] | p[at + 1] << 8 | p[at + 2] << 16
            if size - at - 4 < length:
                break
            if p[at + 3] != self.seq:
                return -1
            self.seq = (self.seq + 1) & 0xFF
            start = at + 4
            at = start + length
            self.at = at
            head = p[start] if length else -1
            if self.state == S_ROWS:
                if self.continued:
                    self.continued = length == MAX_PAYLOAD
                elif head == 0xFF:
                    return -1
                elif head == 0xFE and length < 9:
                    return self._closed(p + start, length)
                else:
                    self.continued = length == MAX_PAYLOAD
            elif self.state == S_FIRST:
                if head == 0x00 or head == 0xFF or head == 0xFB or head < 0:
                    return -1  # an OK, an error, LOCAL INFILE, an empty packet
                after = start
                count = _lenenc(p, at, &after)
                if count <= 0 or after != at:
                    return -1
                self.count, self.defs, self.state = count, 0, F_COLUMNS
            elif self.state == F_COLUMNS:
                self.defs += 1
                if self.defs == self.count:
                    self.state = F_COLUMNS_EOF if self.backend_eof else S_ROWS
            elif head == 0xFE and length < 9:  # the EOF after the definitions
                self.state = S_ROWS
            else:
                return -1
        return S_FIRST if self.state != S_ROWS else S_ROWS

    cdef int _closed(self, const unsigned char* payload, Py_ssize_t length):
        cdef long long status = -1
        cdef Py_ssize_t at = 1
        if self.backend_eof:
            if length >= 5:
                status = payload[3] | payload[4] << 8
        elif _lenenc(payload, length, &at) >= 0 and _lenenc(payload, length, &at) >= 0 and at + 4 <= length:
            status = payload[at] | payload[at + 1] << 8
        if status < 0 or status & MORE_RESULTS:
            return -1
        self.status, self.end, self.state = status, self.at, S_DONE
        return S_DONE


@cython.auto_pickle(False)  # one read's state: never pickled
cdef class _PartsReader:
    """The parts of ``sent`` read in order (the pure twin's ``_PartsReader``)."""

    cdef public object sent, loop, deadlines, cancel_at, abort_at, watches
    cdef list socks, parts, ahead_fds
    cdef dict lanes, ahead
    cdef public Py_ssize_t part
    cdef int watched
    cdef Py_ssize_t size
    cdef public bint done

    def __init__(self, sent, loop, deadlines):
        self.sent = sent
        self.loop = loop
        self.deadlines = deadlines
        self.parts = sent.parts
        self.socks = []
        self.lanes = {}
        self.part = 0
        self.watched = -1
        self.size = 0
        self.cancel_at = None
        self.abort_at = None
        self.done = False
        self.watches = None
        self.ahead = {}
        self.ahead_fds = None

    def start(self):
        """Read what has come and watch for the rest; handed over at once when a part cannot be read off its
        socket."""
        cdef double abort_at
        for part in self.parts:
            sock = part.pool.driver.relay_socket(part.borrowed.raw)
            if sock is None:
                self._hand_over()
                return
            self.socks.append(sock)
            self.lanes[part.lane] = []
        answer_by = self.sent.answer_by
        if answer_by is not None:
            loop, deadlines = self.loop, self.deadlines
            abort_at = loop.time() + max(0.0, <double> answer_by - _monotonic())
            self.abort_at = abort_at
            PySet_Add(deadlines.running, self)
            if abort_at < <double> deadlines.at:
                deadlines.arm(abort_at, loop)
        self._advance_safely()

    cdef int _advance(self) except -1:
        cdef Py_ssize_t i, following
        cdef int fileno
        cdef list chunks
        cdef object early
        while True:
            i = self.part
            part = self.parts[i]
            early = self.ahead.pop(part.lane, None) if self.ahead else None
            if early:
                data = (<list> early)[0] if len(<list> early) == 1 else b"".join(<list> early)
            else:
                try:
                    data = self.socks[i].recv(C_READ_SIZE, _DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    fileno = part.fileno
                    if self.watched != fileno:
                        if self.watched >= 0:
                            self._unwatch()
                        self.watched = fileno
                        if self.watches is not None:
                            self.watches.watch(self.loop, self.socks[i], fileno, self._advance_now)
                            if self.ahead_fds is None:
                                self._read_ahead(i)
                        else:
                            self.loop.add_reader(fileno, self._advance_now)
                    return 0
                except OSError:
                    self._hand_over()  # the task's path reads the socket again and names its failure
                    return 0
                if not data:
                    self._hand_over()
                    return 0
                chunks = self.lanes[part.lane]
                chunks.append(data)
                self.size += len(<bytes> data)
            try:
                following = self._consume(i, <bytes> data)
            except Exception:  # a bug must not leave the client waiting: the task's path reads on
                _log.exception("reading a multi-unit read's answer from a reader callback failed")
                following = -1
            if following == i and self.size <= C_TAKE_LIMIT:
                continue
            if following <= i:  # unusual, or a long answer: the task's path reads on
                self._hand_over()
                return 0
            self.part = following
            if following == len(self.parts):
                self._end()
                self._finish()
                return 0

    def _advance_now(self):
        if not self.done:
            self._advance_safely()

    cdef void _read_ahead(self, Py_ssize_t i) except *:
        cdef list parts = self.parts
        cdef list fds = []
        cdef Py_ssize_t j
        self.ahead_fds = fds
        seen = {parts[i].lane}
        for j in range(i + 1, len(parts)):
            part = parts[j]
            if part.lane not in seen:
                seen.add(part.lane)
                fds.append(part.fileno)
                self.watches.watch(self.loop, self.socks[j], part.fileno, _Ahead(self, j))

    cdef void _take_ahead(self, Py_ssize_t j) except *:
        """Part ``j``'s connection readable: its bytes kept for its turn, or read now when its lane's turn came
        (the pure twin's)."""
        if self.done:
            return
        part = self.parts[j]
        lane = part.lane
        if self.parts[self.part].lane == lane:
            self._advance_safely()
            return
        try:
            data = self.socks[j].recv(C_READ_SIZE, _DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            chunks = self.ahead.get(lane)
            if chunks is None:
                self.ahead[lane] = [data]
            else:
                (<list> chunks).append(data)
            (<list> self.lanes[lane]).append(data)
            self.size += len(<bytes> data)
        if not data or self.size > C_TAKE_LIMIT:  # an end, a failure, a long answer: met in its turn
            self.watches.park(part.fileno)

    cdef void _advance_safely(self):
        try:
            self._advance()
        except Exception:  # a socket or a loop that fails unlike a socket: the task's path reads on and says why
            _log.exception("reading a multi-unit read's answers from a reader callback failed")
            if not self.done:
                self._hand_over()

    def check(self, double now):
        """The loop's shared timer: past the answer bound the task's path takes over (and finds it passed)."""
        if not self.done and self.abort_at is not None and <double> self.abort_at <= now:
            self._hand_over()

    def abandon(self):
        """Given up before the answers are in (the client went away): every connection discarded."""
        if self.done:
            return
        self._end()
        self.sent.abandon()

    def carried(self):
        """Per lane, the bytes read off its connection (the task's path reads them first)."""
        return {lane: b"".join(chunks) for lane, chunks in self.lanes.items() if chunks}

    cdef void _hand_over(self):
        self._end()
        try:
            self._over()
        except Exception:  # a callback's bug: logged, as the loop would log it
            _log.exception("handing a multi-unit read to the task's path failed")

    cdef void _end(self):
        self.done = True
        self.abort_at = None
        PySet_Discard(self.deadlines.running, self)
        if self.watched >= 0:
            self._unwatch()
        if self.ahead_fds:
            for fd in self.ahead_fds:
                self.watches.park(fd)

    cdef void _unwatch(self):
        cdef int fd = self.watched
        self.watched = -1
        if self.watches is not None:
            self.watches.park(fd)
            return
        self.loop.remove_reader(fd)
        _set_blocking(fd, True)  # uvloop made it non-blocking to watch it; the driver reads it blocking

    # -- what a kind of read does with the bytes: each subclass's (ConcatenatedAnswers, WholeAnswers); the base
    # -- is never made on its own ----------------------------------------------------------------------

    cdef Py_ssize_t _consume(self, Py_ssize_t i, bytes data) except -2:
        """Part ``i``'s next bytes taken in: the part read next, or -1 (the pure twin's)."""
        raise NotImplementedError

    cdef void _finish(self):
        pass

    cdef void _over(self):
        pass


@cython.final
@cython.auto_pickle(False)  # one read's callback: never pickled
cdef class _Ahead:
    """A later part's pin readable while the reader waits for another: ``functools.partial(_take_ahead, j)``."""

    cdef _PartsReader reader
    cdef Py_ssize_t j

    def __cinit__(self, _PartsReader reader, Py_ssize_t j):
        self.reader = reader
        self.j = j

    def __call__(self):
        self.reader._take_ahead(self.j)


@cython.auto_pickle(False)
cdef class ConcatenatedAnswers(_PartsReader):
    """A read whose rows need no merge: every answer through ``relay`` (concatenating) as it comes (the pure
    twin's ``ConcatenatedAnswers``, its arguments)."""

    cdef public object relay, header_for, conversions_for, relayed, framed_over, fresh_over
    cdef list out
    cdef public bint pending
    cdef public int state

    def __init__(self, sent, loop, deadlines, relay, header_for, conversions_for, relayed, framed_over, fresh_over):
        _PartsReader.__init__(self, sent, loop, deadlines)
        self.relay = relay
        self.header_for = header_for
        self.conversions_for = conversions_for
        self.relayed = relayed
        self.framed_over = framed_over
        self.fresh_over = fresh_over
        self.out = []
        self.pending = conversions_for is not None
        self.state = S_FIRST
        relay.concatenate(len(self.parts))

    def is_closing(self):
        return False

    def write(self, data):
        self.out.append(data)

    cdef Py_ssize_t _consume(self, Py_ssize_t i, bytes data) except -2:
        cdef int state
        relay = self.relay
        if not self.pending:
            state = relay.pump(data, self, self.header_for)
        else:  # as relay_many: the first answer's definitions read before anything is relayed
            state = relay.feed(data)
            if state == S_FIRST:
                return i
            if state != S_HEADER:
                return -1
            conversions = self.conversions_for(relay.columns)
            if conversions is None:
                return -1  # decoded: the task's path finds the same and reads them into rows
            relay.convert(conversions)
            self.pending = False
            state = relay.pump(b"", self, self.header_for)
        self.state = state
        if state == S_FIRST or state == S_ROWS:
            return relay.unit  # bytes past an answer are the next one's on that connection: the relay has them
        return len(self.parts) if state == S_DONE else -1

    cdef void _finish(self):
        cdef list out = self.out
        try:
            self.relayed(out[0] if len(out) == 1 else b"".join(out))
        except Exception:  # a callback's bug: logged, as the loop would log it
            _log.exception("answering a multi-unit read from its relayed answers failed")

    cdef void _over(self):
        if not self.pending:  # the header is framed: on from where the relay is, with the bytes read ahead
            ahead = {lane: b"".join(chunks) for lane, chunks in self.ahead.items() if chunks}
            self.framed_over(self.state, b"".join(self.out), ahead)
        else:
            self.fresh_over(self.carried())


@cython.auto_pickle(False)
cdef class WholeAnswers(_PartsReader):
    """A read whose rows are merged undecoded: every answer taken whole (the pure twin's ``WholeAnswers``, its
    arguments)."""

    cdef public object taken, fresh_over
    cdef AnswerEnd finder
    cdef list answers, statuses

    def __init__(self, sent, loop, deadlines, taken, fresh_over):
        _PartsReader.__init__(self, sent, loop, deadlines)
        self.taken = taken
        self.fresh_over = fresh_over
        self.finder = None
        self.answers = []
        self.statuses = []

    cdef Py_ssize_t _consume(self, Py_ssize_t i, bytes data) except -2:
        cdef int state
        cdef list parts = self.parts
        cdef AnswerEnd finder
        cdef bytearray buf
        cdef Py_ssize_t end
        while True:
            finder = self.finder
            if finder is None:
                finder = self.finder = AnswerEnd(parts[i].pool.driver.relay_eof)
            state = finder.feed(data)
            if state == S_FIRST or state == S_ROWS:
                return i
            if state != S_DONE:  # an error packet, an OK: the task's path settles it
                return -1
            buf, end = finder.buf, finder.end
            self.answers.append(PyBytes_FromStringAndSize(PyByteArray_AS_STRING(buf), end))
            self.statuses.append(finder.status)
            self.finder = None
            i += 1
            if end == PyByteArray_GET_SIZE(buf):
                return i
            if i == len(parts) or parts[i].lane != parts[i - 1].lane:  # bytes past an answer nobody asked for
                return -1
            data = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(buf) + end, PyByteArray_GET_SIZE(buf) - end)

    cdef void _finish(self):
        try:
            self.taken(self.answers, self.statuses)
        except Exception:  # a callback's bug: logged, as the loop would log it
            _log.exception("answering a multi-unit read from its answers failed")

    cdef void _over(self):
        self.fresh_over(self.carried())
