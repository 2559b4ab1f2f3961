# cython: language_level=3
"""Compiled twin of ``relay_py.py``: a data source's answer to one command, re-framed for a client.

Same class, states and bytes as the pure twin (its docstring has the contract;
tests/test_relay.py runs both over the same byte streams). Packets are read
from the input buffer's memory and copied to the output with one header
write each, no slice objects per packet.
"""

cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from libc.string cimport memcpy

__all__ = [
    "ResultRelay", "ok_fields", "FIRST", "OK", "ERROR", "HEADER", "ROWS", "DONE", "UNEXPECTED", "MISMATCH",
]

FIRST = 0
OK = 1
ERROR = 2
HEADER = 3
ROWS = 4
DONE = 5
UNEXPECTED = 6
MISMATCH = 7

DEF S_FIRST = 0
DEF S_OK = 1
DEF S_ERROR = 2
DEF S_HEADER = 3
DEF S_ROWS = 4
DEF S_DONE = 5
DEF S_UNEXPECTED = 6
DEF S_MISMATCH = 7
DEF S_COLUMNS = 8
DEF S_COLUMNS_EOF = 9
DEF MAX_PAYLOAD = 0xFFFFFF
DEF MORE_RESULTS = 0x0008


cdef inline long long _lenenc(const unsigned char* p, Py_ssize_t size, Py_ssize_t* at):
    """A length-encoded integer at ``at[0]`` (moved past it); -1 if it runs past ``size``."""
    cdef Py_ssize_t i = at[0]
    cdef int width, k
    cdef long long value = 0
    if i >= size:
        return -1
    if p[i] < 0xFB:
        at[0] = i + 1
        return p[i]
    if p[i] == 0xFC:
        width = 2
    elif p[i] == 0xFD:
        width = 3
    elif p[i] == 0xFE:
        width = 8
    else:
        return -1
    if i + 1 + width > size:
        return -1
    for k in range(width):
        value |= (<long long> p[i + 1 + k]) << (8 * k)
    at[0] = i + 1 + width
    return value


cdef bytes _encode_lenenc(long long value):
    if value < 0xFB:
        return bytes((value,))
    if value < (1 << 16):
        return b"\xfc" + (<object> value).to_bytes(2, "little")
    if value < (1 << 24):
        return b"\xfd" + (<object> value).to_bytes(3, "little")
    return b"\xfe" + (<object> value).to_bytes(8, "little")


def ok_fields(bytes payload):
    """An OK packet's (affected rows, last insert id, status flags, warnings); (-1, -1, -1, -1) if malformed."""
    cdef const unsigned char* p = <const unsigned char*> (<char*> payload)
    cdef Py_ssize_t size = len(payload)
    cdef Py_ssize_t at = 1
    cdef long long affected = _lenenc(p, size, &at)
    cdef long long insert_id = _lenenc(p, size, &at) if affected >= 0 else -1
    if affected < 0 or insert_id < 0 or at + 4 > size:
        return -1, -1, -1, -1
    return affected, insert_id, p[at] | (p[at + 1] << 8), p[at + 2] | (p[at + 3] << 8)


@cython.auto_pickle(False)  # one command's state on one connection: never pickled
cdef class ResultRelay:
    """One command's answer from a data source, re-framed for the client (``relay_py.ResultRelay``)."""

    cdef public int seq
    cdef int _state
    cdef public list columns
    cdef public bytes first
    cdef public long long rows
    cdef public int status
    cdef public int unit
    cdef public list statuses
    cdef bint _client_eof, _backend_eof, _count_rows, _continued
    cdef int _client_status, _backend_seq
    cdef long long _count, _defs
    cdef int _left
    cdef bytearray _in, _out

    def __init__(self, int seq, bint client_eof, bint backend_eof, bint count_rows):
        self.seq = seq & 0xFF
        self._state = S_FIRST
        self.columns = []
        self.first = b""
        self.rows = 0
        self.status = 0
        self._client_eof = client_eof
        self._backend_eof = backend_eof
        self._count_rows = count_rows
        self._client_status = 0
        self._backend_seq = 1
        self._count = 0
        self._defs = 0
        self.unit = 0
        self._left = 0
        self.statuses = []
        self._continued = False
        self._in = bytearray()
        self._out = bytearray()

    @property
    def state(self):
        return S_FIRST if self._state >= S_COLUMNS else self._state

    def concatenate(self, int units):
        """Before the first byte: the answer is ``units`` answers, relayed as one (the pure twin's docstring)."""
        if self._state != S_FIRST or self.unit or PyByteArray_GET_SIZE(self._in):
            raise ValueError("concatenate() after the answer began")
        self._left = units - 1 if units > 1 else 0

    def rest(self):
        """The bytes fed but not read (the next answer's on that connection); forgotten."""
        cdef bytes rest = bytes(self._in)
        del self._in[:]
        return rest

    def take(self):
        """The client's bytes framed so far (and forget them)."""
        cdef bytes out = bytes(self._out)
        del self._out[:]
        return out

    def feed(self, bytes data):
        """Take bytes the data source sent; the state after them."""
        if data:
            self._in += data
        if self._state == S_FIRST or self._state == S_COLUMNS or self._state == S_COLUMNS_EOF or self._state == S_ROWS:
            self._run()
        return S_FIRST if self._state >= S_COLUMNS else self._state

    def header(self, list payloads, int status):
        """At HEADER: frame the client's column count and definitions, the EOF after them if the client
        reads one, and go on with the rows already received."""
        if self._state != S_HEADER:
            raise ValueError(f"header() at state {self._state}, not HEADER")
        self._header(payloads, status)
        return S_FIRST if self._state >= S_COLUMNS else self._state

    cdef void _header(self, list payloads, int status) except *:
        cdef bytes payload
        self._client_status = status
        for payload in payloads:
            self._frame(<const unsigned char*> (<char*> payload), len(payload))
        if self._client_eof:
            self._frame_eof()
        self._state = S_ROWS
        self._run()

    def pump(self, bytes data, client, header_for):
        """feed, header and take in one call (docs in the pure twin); the state after them."""
        if data:
            self._in += data
        if self._state == S_FIRST or self._state == S_COLUMNS or self._state == S_COLUMNS_EOF or self._state == S_ROWS:
            self._run()
        if self._state == S_HEADER:
            payloads, status = header_for(self.columns)
            self._header(payloads, status)  # header()'s, without a method call
        cdef bytes out
        if PyByteArray_GET_SIZE(self._out):
            out = bytes(self._out)
            del self._out[:]
            if not client.is_closing():
                client.write(out)
        return S_FIRST if self._state >= S_COLUMNS else self._state

    # -- internals -----------------------------------------------------------------------------------

    cdef void _frame(self, const unsigned char* payload, Py_ssize_t length):
        cdef bytearray out = self._out
        cdef Py_ssize_t start = PyByteArray_GET_SIZE(out)
        PyByteArray_Resize(out, start + 4 + length)  # grown once; header and payload written in place
        cdef unsigned char* dst = <unsigned char*> PyByteArray_AS_STRING(out) + start
        dst[0] = length & 0xFF
        dst[1] = (length >> 8) & 0xFF
        dst[2] = (length >> 16) & 0xFF
        dst[3] = self.seq
        if length:
            memcpy(dst + 4, payload, length)
        self.seq = (self.seq + 1) & 0xFF

    cdef void _frame_eof(self):
        cdef unsigned char eof[5]
        eof[0] = 0xFE
        eof[1] = 0
        eof[2] = 0
        eof[3] = self._client_status & 0xFF
        eof[4] = (self._client_status >> 8) & 0xFF
        self._frame(eof, 5)

    cdef void _run(self):
        cdef bytearray data = self._in
        cdef Py_ssize_t size = PyByteArray_GET_SIZE(data)
        cdef Py_ssize_t at = 0
        cdef Py_ssize_t length
        cdef const unsigned char* p
        while size - at >= 4:
            p = <const unsigned char*> PyByteArray_AS_STRING(data)
            length = p[at] | (p[at + 1] << 8) | (p[at + 2] << 16)
            if size - at - 4 < length:
                break
            if p[at + 3] != self._backend_seq:
                self._state = S_UNEXPECTED
                break
            self._backend_seq = (self._backend_seq + 1) & 0xFF
            self._packet(p + at + 4, length)
            at += 4 + length
            if not (self._state == S_FIRST or self._state == S_COLUMNS or self._state == S_COLUMNS_EOF
                    or self._state == S_ROWS):
                break
        if at:
            del data[:at]

    cdef void _packet(self, const unsigned char* payload, Py_ssize_t length):
        cdef int state = self._state
        cdef Py_ssize_t end = 0
        cdef long long count
        if state == S_ROWS:
            if self._continued:
                self._frame(payload, length)
                self._continued = length == MAX_PAYLOAD
            elif length and payload[0] == 0xFF:
                self.first = (<char*> payload)[:length]
                self._state = S_ERROR
            elif length and payload[0] == 0xFE and length < 9:
                self._close(payload, length)
            else:
                self._frame(payload, length)
                self.rows += 1
                self._continued = length == MAX_PAYLOAD
            return
        if state == S_FIRST:
            if length == 0 or payload[0] == 0xFB:
                self._state = S_UNEXPECTED
            elif payload[0] == 0x00:
                self.first = (<char*> payload)[:length]
                self._state = S_OK
            elif payload[0] == 0xFF:
                self.first = (<char*> payload)[:length]
                self._state = S_ERROR
            else:
                count = _lenenc(payload, length, &end)
                if count <= 0 or end != length:
                    self._state = S_UNEXPECTED
                elif self.unit and count != self._count:
                    self._state = S_MISMATCH
                else:
                    self._count = count
                    self._defs = 0
                    self._state = S_COLUMNS
            return
        if state == S_COLUMNS:
            if not self.unit:  # a later answer's definitions are not passed on: the first one's were
                self.columns.append((<char*> payload)[:length])
            self._defs += 1
            if self._defs == self._count:
                self._state = S_COLUMNS_EOF if self._backend_eof else (S_ROWS if self.unit else S_HEADER)
            return
        # S_COLUMNS_EOF
        if length and payload[0] == 0xFE and length < 9:
            self._state = S_ROWS if self.unit else S_HEADER
        else:
            self._state = S_UNEXPECTED

    cdef void _close(self, const unsigned char* payload, Py_ssize_t length):
        cdef long status
        cdef bytes tail
        if self._backend_eof:
            if length < 5:
                self._state = S_UNEXPECTED
                return
            status = payload[3] | (payload[4] << 8)
        else:
            status = ok_fields((<char*> payload)[:length])[2]
        if status < 0 or status & MORE_RESULTS:
            self._state = S_UNEXPECTED
            return
        self.status = status
        if self._left or self.unit:
            self.statuses.append(status)
        if self._left:  # the next answer follows: its rows go on under the same header
            self._left -= 1
            self.unit += 1
            self._backend_seq = 1
            self._state = S_FIRST
            return
        if self._client_eof:
            self._frame_eof()
        else:
            tail = (b"\xfe" + _encode_lenenc(self.rows if self._count_rows else 0) + b"\x00"
                    + bytes((self._client_status & 0xFF, (self._client_status >> 8) & 0xFF)) + b"\x00\x00")
            self._frame(<const unsigned char*> (<char*> tail), len(tail))
        self._state = S_DONE
