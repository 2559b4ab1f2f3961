# cython: language_level=3
"""Compiled twin of ``gate_py.py``: a logged-in client's commands, answered on the hot path or handed on.

Same class, modes and behaviour as the pure twin (its docstring has the contract;
tests/test_gate.py runs both). The transport calls ``data_received`` on it
directly, so a command reaches the session's hot path without an interpreted frame.
"""

cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memcpy

__all__ = ["CommandGate", "execute_params", "MIMIC", "IDLE", "HOT"]

MIMIC = 0
IDLE = 1
HOT = 2

DEF M_MIMIC = 0
DEF M_IDLE = 1
DEF M_HOT = 2
DEF MAX_PAYLOAD = 0xFFFFFF
DEF AHEAD = 1 << 20


cdef inline long long _int_at(const unsigned char* p, int size, bint unsigned_):
    cdef unsigned long long v = 0
    cdef int k
    for k in range(size):
        v |= (<unsigned long long> p[k]) << (8 * k)
    if unsigned_ or size == 8:
        return <long long> v
    if v & (1ULL << (8 * size - 1)):  # sign-extend
        return <long long> (v - (1ULL << (8 * size)))
    return <long long> v


def execute_params(bytes payload, Py_ssize_t count, remembered):
    """A COM_STMT_EXECUTE's parameter values, the block a data source's execute carries, and the types
    (``gate_py.execute_params``); ``None``: left to mimic's reader."""
    cdef const unsigned char* p = <const unsigned char*> (<char*> payload)
    cdef Py_ssize_t size = len(payload)
    cdef Py_ssize_t nulls, at, start, length, i
    cdef const unsigned char* t
    cdef bytes types
    cdef int kind, width, k
    cdef bint unsigned_
    cdef double d
    cdef float f
    cdef unsigned long long u
    cdef list values
    if size < 10 or p[5] != 0 or count <= 0:
        return None
    nulls = 10 + (count + 7) // 8
    if size <= nulls:
        return None
    if p[nulls]:
        if nulls + 1 + 2 * count > size:
            return None
        types = payload[nulls + 1:nulls + 1 + 2 * count]
        at = nulls + 1 + 2 * count
    elif remembered is not None and len(remembered) == 2 * count:
        types = remembered if type(remembered) is bytes else bytes(remembered)
        at = nulls + 1
    else:
        return None
    t = <const unsigned char*> (<char*> types)
    start = at
    values = []
    for i in range(count):
        kind = t[2 * i]
        unsigned_ = (t[2 * i + 1] & 0x80) != 0
        if p[10 + i // 8] & (1 << (i % 8)):
            values.append(None)
            continue
        if kind == 0x01 or kind == 0x02 or kind == 0x0D or kind == 0x03 or kind == 0x09 or kind == 0x08:
            width = 1 if kind == 0x01 else (2 if kind == 0x02 or kind == 0x0D else (4 if kind != 0x08 else 8))
            if at + width > size:
                return None
            if width == 8 and unsigned_:
                u = 0
                for k in range(8):
                    u |= (<unsigned long long> p[at + k]) << (8 * k)
                values.append(u)
            else:
                values.append(_int_at(p + at, width, unsigned_))
            at += width
        elif kind == 0x04:
            if at + 4 > size:
                return None
            memcpy(&f, p + at, 4)
            values.append(<double> f)
            at += 4
        elif kind == 0x05:
            if at + 8 > size:
                return None
            memcpy(&d, p + at, 8)
            values.append(d)
            at += 8
        elif kind == 0x0F or kind == 0xFD or kind == 0xFE or kind == 0xFC or kind == 0xF9 or kind == 0xFA or kind == 0xFB:
            if at >= size:
                return None
            if p[at] < 0xFB:
                length = p[at]
                at += 1
            else:
                width = 2 if p[at] == 0xFC else (3 if p[at] == 0xFD else (8 if p[at] == 0xFE else 0))
                if width == 0 or at + 1 + width > size:
                    return None
                length = <Py_ssize_t> _int_at(p + at + 1, width, True)
                at += 1 + width
            if length < 0 or at + length > size:
                return None
            try:
                values.append(PyUnicode_DecodeUTF8(<const char*> (p + at), length, NULL))
            except UnicodeDecodeError:
                return None
            at += length
        elif kind == 0x06:
            values.append(None)
        else:
            return None
    if at != size:
        return None
    if start == nulls + 1 + 2 * count and p[nulls] == 1:  # the types sent: the block is the payload from the bitmap on
        return values, payload[10:], types
    # the bitmap, the new-params-bound flag set, the remembered types, the values: one allocation
    cdef Py_ssize_t bitmap = nulls - 10, typed = 2 * count, rest = at - start
    cdef bytes block = PyBytes_FromStringAndSize(NULL, bitmap + 1 + typed + rest)
    cdef char* b = PyBytes_AS_STRING(block)
    memcpy(b, p + 10, bitmap)
    b[bitmap] = 1
    memcpy(b + bitmap + 1, t, typed)
    memcpy(b + bitmap + 1 + typed, p + start, rest)
    return values, block, types


@cython.auto_pickle(False)  # one client connection's state: never pickled
cdef class CommandGate:
    """The client transport's protocol after the login (``gate_py.CommandGate``)."""

    cdef public object inner, reader, hot, transport
    cdef public Py_ssize_t limit
    cdef int _mode
    cdef bytearray _buffer
    cdef bint _paused
    cdef bint _pumping

    def __init__(self, inner, reader, Py_ssize_t limit, hot):
        self.inner = inner
        self.reader = reader
        self.limit = limit
        self.hot = hot
        self._mode = M_MIMIC
        self.transport = None
        self._buffer = bytearray()
        self._paused = False
        self._pumping = False

    @property
    def mode(self):
        return self._mode

    # -- the protocol ------------------------------------------------------------------------------------

    def data_received(self, data):
        if self._mode == M_MIMIC:
            self.reader.feed_data(data)
            return
        if (self._mode == M_IDLE and not self._pumping and not PyByteArray_GET_SIZE(self._buffer)
                and type(data) is bytes and self._one_command(data)):
            self._take_one(data)  # the common case, one whole command a read: nothing buffered, nothing sliced
            return
        self._buffer += data
        if self._mode == M_IDLE:
            self._pump()
        elif PyByteArray_GET_SIZE(self._buffer) > AHEAD and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def eof_received(self):
        self._to_mimic()
        return bool(self.inner.eof_received())

    def connection_lost(self, exc):
        self._to_mimic()
        self.inner.connection_lost(exc)

    def pause_writing(self):
        self.inner.pause_writing()

    def resume_writing(self):
        self.inner.resume_writing()

    def connection_made(self, transport):
        self.transport = transport

    # -- control -------------------------------------------------------------------------------------

    def command_awaited(self):
        """mimic waits for its next command: with nothing left for it to read, the gate reads commands."""
        if self._mode == M_MIMIC and not self.reader._buffer:
            self._mode = M_IDLE
            self._pump()

    def done(self):
        """The hot command's answer is written: go on with what the client sent meanwhile."""
        if self._mode == M_HOT:
            self._mode = M_IDLE
            if self._paused:
                self._paused = False
                self.transport.resume_reading()
            self._pump()

    def handback(self, bytes payload):
        """The hot command (``payload``, from its command byte) could not be answered and nothing of an answer
        was written: mimic answers it after all, then what the client sent meanwhile, in order."""
        if self._mode == M_HOT:
            self.reader.feed_data(len(payload).to_bytes(3, "little") + b"\x00" + payload)
            self._to_mimic()

    # -- internals -----------------------------------------------------------------------------------

    cdef void _pump(self) except *:
        if self._pumping:  # done() from inside hot(): the loop below takes the next command (gate_py._pump)
            return
        self._pumping = True
        try:
            self._take_commands()
        finally:
            self._pumping = False

    cdef bint _one_command(self, bytes data):
        """``data`` is exactly one whole command packet, one the gate may take (as :meth:`_take_commands` reads)."""
        cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
        if size < 5:
            return False
        cdef const unsigned char* p = <const unsigned char*> PyBytes_AS_STRING(data)
        cdef Py_ssize_t length = p[0] | (p[1] << 8) | (p[2] << 16)
        return p[3] == 0 and length < MAX_PAYLOAD and length <= self.limit and 4 + length == size

    cdef void _take_one(self, bytes data) except *:
        """:meth:`_take_commands` for one command that is all of ``data`` (:meth:`_one_command`), with nothing
        buffered: the same course, its payload read straight from ``data``."""
        cdef bint taken
        cdef const unsigned char* p = <const unsigned char*> PyBytes_AS_STRING(data)
        payload = PyBytes_FromStringAndSize(<char*> p + 4, PyBytes_GET_SIZE(data) - 4)
        self._mode = M_HOT
        self._pumping = True  # done() from inside hot(): nothing more is buffered to take (as _pump's)
        try:
            taken = self.hot(<int> p[4], payload)
        finally:
            self._pumping = False
        if not taken:
            self.reader.feed_data(data)
            self._to_mimic()

    cdef void _take_commands(self) except *:
        cdef bytearray buffer = self._buffer
        cdef const unsigned char* p
        cdef Py_ssize_t length
        cdef bytes packet
        while self._mode == M_IDLE and PyByteArray_GET_SIZE(buffer):
            if PyByteArray_GET_SIZE(buffer) < 4:  # a packet cut short: mimic's reader waits for the rest, bounded
                self._to_mimic()
                return
            p = <const unsigned char*> PyByteArray_AS_STRING(buffer)
            length = p[0] | (p[1] << 8) | (p[2] << 16)
            if p[3] != 0 or length >= MAX_PAYLOAD or length > self.limit or length == 0:
                self._to_mimic()
                return
            if PyByteArray_GET_SIZE(buffer) < 4 + length:
                self._to_mimic()
                return
            packet = PyBytes_FromStringAndSize(<char*> p, 4 + length)
            del buffer[:4 + length]  # before hot(): it may finish at once and call done()
            self._mode = M_HOT
            if not self.hot(<int> (<const unsigned char*> (<char*> packet))[4],
                            PyBytes_FromStringAndSize(<char*> PyBytes_AS_STRING(packet) + 4, length)):
                self.reader.feed_data(packet)
                self._to_mimic()
                return

    cdef void _to_mimic(self) except *:
        self._mode = M_MIMIC
        if PyByteArray_GET_SIZE(self._buffer):
            data = bytes(self._buffer)
            del self._buffer[:]
            self.reader.feed_data(data)
        if self._paused:
            self._paused = False
            self.transport.resume_reading()
