# cython: language_level=3
"""Compiled twin of ``relay_py.py``: a data source's answer to one command, re-framed for a client.

Same class, states and bytes as the pure twin (its docstring has the contract;
tests/test_relay.py runs both over the same byte streams). Packets are read
from the input buffer's memory and copied to the output with one header
write each, no slice objects per packet; text rows sent on as binary ones
(:meth:`ResultRelay.convert`) are parsed and written in place, value by value.
"""

cimport cython
from cpython.bytearray cimport (PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE,
                                PyByteArray_Resize)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.ref cimport PyObject
from libc.string cimport memcpy, memset

from ddm_core._fast._packets cimport _lenenc

cdef extern from "Python.h":
    double PyOS_string_to_double(const char* s, char** endptr, PyObject* overflow_exception) except? -1.0
    int PyFloat_Pack4(double x, char* p, int le) except -1
    int PyFloat_Pack8(double x, char* p, int le) except -1

__all__ = [
    "ResultRelay", "ok_fields", "FIRST", "OK", "ERROR", "HEADER", "ROWS", "DONE", "UNEXPECTED", "MISMATCH",
    "AS_STRING", "AS_DECIMAL", "AS_INT8", "AS_UINT8", "AS_INT16", "AS_UINT16", "AS_INT32", "AS_UINT32", "AS_INT64",
    "AS_UINT64", "AS_FLOAT", "AS_DOUBLE", "AS_DATETIME", "AS_TIME", "AS_NULL", "datetime_field",
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
DEF MIN_BUFFER = 512  # the client's bytes' buffer: its first size, and the size past which take() frees it
DEF KEPT_BUFFER = 1 << 20

# How a text row's value is written as a binary row's (the pure twin's docstring has each one's bytes)
AS_STRING = 0
AS_DECIMAL = 1
AS_INT8 = 2
AS_UINT8 = 3
AS_INT16 = 4
AS_UINT16 = 5
AS_INT32 = 6
AS_UINT32 = 7
AS_INT64 = 8
AS_UINT64 = 9
AS_FLOAT = 10
AS_DOUBLE = 11
AS_DATETIME = 12
AS_TIME = 13
AS_NULL = 14

DEF K_STRING = 0
DEF K_DECIMAL = 1
DEF K_INT8 = 2
DEF K_UINT64 = 9
DEF K_FLOAT = 10
DEF K_DOUBLE = 11
DEF K_DATETIME = 12
DEF K_TIME = 13
DEF K_NULL = 14
#: Bytes a value's binary form may take beyond its text's (an integer of 1 digit written in 8 bytes, say)
DEF VALUE_SLACK = 13
#: The longest DECIMAL / FLOAT / DOUBLE text converted (MariaDB's are at most 67 characters)
DEF NUMBER_TEXT = 96


cdef bytes _encode_lenenc(long long value):
    if value < 0xFB:
        return bytes((value,))
    if value < (1 << 16):
        return b"\xfc" + (<object> value).to_bytes(2, "little")
    if value < (1 << 24):
        return b"\xfd" + (<object> value).to_bytes(3, "little")
    return b"\xfe" + (<object> value).to_bytes(8, "little")


cdef inline unsigned char* _put_lenenc(unsigned char* dst, Py_ssize_t n) noexcept:
    """``n`` as a length-encoded integer at ``dst`` (the shortest form); the byte after it."""
    cdef int width, k
    if n < 0xFB:
        dst[0] = <unsigned char> n
        return dst + 1
    if n < 0x10000:
        dst[0], width = 0xFC, 2
    elif n < 0x1000000:
        dst[0], width = 0xFD, 3
    else:
        dst[0], width = 0xFE, 8
    for k in range(width):
        dst[1 + k] = (<unsigned long long> n >> (8 * k)) & 0xFF
    return dst + 1 + width


cdef inline Py_ssize_t _int_value(const unsigned char* v, Py_ssize_t n, int kind, unsigned char* dst) noexcept:
    """``int(text)`` packed little-endian in the kind's width and sign (struct's ``bBhHiIqQ``); -1: not an
    integer of that range (the decoded path fails on it too)."""
    cdef Py_ssize_t i = 1 if n and v[0] == 45 else 0  # '-'
    cdef bint negative = i == 1
    cdef unsigned long long magnitude = 0, limit, c
    cdef int width = 1 << ((kind - K_INT8) >> 1)
    cdef bint unsigned = (kind - K_INT8) & 1
    cdef int k
    if i >= n:
        return -1
    while i < n:
        c = <unsigned long long> v[i] - 48
        if c > 9 or magnitude > (0xFFFFFFFFFFFFFFFF - c) // 10:
            return -1
        magnitude = magnitude * 10 + c
        i += 1
    if unsigned:
        limit = 0 if negative else (0xFFFFFFFFFFFFFFFF >> (64 - 8 * width))
    else:
        limit = (1ULL << (8 * width - 1)) - (0 if negative else 1)
    if magnitude > limit:
        return -1
    if negative:
        magnitude = (~magnitude) + 1
    for k in range(width):
        dst[k] = (magnitude >> (8 * k)) & 0xFF
    return width


cdef inline Py_ssize_t _float_value(const unsigned char* v, Py_ssize_t n, bint single, unsigned char* dst) except -2:
    """``float(text)`` packed as IEEE 754 single (``struct.pack("<f")``, overflow refused) or double; -1: not a
    number's text."""
    cdef char text[NUMBER_TEXT + 1]
    cdef char* end
    cdef double value
    cdef Py_ssize_t i
    if n == 0 or n > NUMBER_TEXT:
        return -1
    for i in range(n):  # what MariaDB writes; float() would take more ("inf", "1_0", spaces)
        if not (48 <= v[i] <= 57 or v[i] == 43 or v[i] == 45 or v[i] == 46 or v[i] == 101 or v[i] == 69):
            return -1
        text[i] = <char> v[i]
    text[n] = 0
    try:
        value = PyOS_string_to_double(text, &end, NULL)
    except ValueError:
        return -1
    if end != text + n:
        return -1
    try:
        if single:
            PyFloat_Pack4(value, <char*> dst, 1)
            return 4
        PyFloat_Pack8(value, <char*> dst, 1)
        return 8
    except OverflowError:
        return -1


cdef inline Py_ssize_t _decimal_value(const unsigned char* v, Py_ssize_t n, unsigned char* dst) noexcept:
    """``Decimal(text)`` in plain notation as a length-encoded string (the decoded path's: ``12.50`` for a ZEROFILL
    ``00012.50``); -1: not a decimal's text."""
    cdef unsigned char digits[NUMBER_TEXT]
    cdef unsigned char out[NUMBER_TEXT + 16]
    cdef Py_ssize_t i = 1 if n and v[0] == 45 else 0
    cdef Py_ssize_t count = 0, fraction = -1, w = 0, k
    cdef Py_ssize_t left, dot
    cdef bint seen = False
    if n > NUMBER_TEXT:
        return -1
    if i:
        out[w] = 45
        w += 1
    while i < n:  # the coefficient's digits, without leading zeros; fraction: the digits after the point
        if v[i] == 46 and fraction < 0:
            fraction = 0
        elif 48 <= v[i] <= 57:
            seen = True
            if fraction >= 0:
                fraction += 1
            if count or v[i] != 48:
                digits[count] = v[i]
                count += 1
        else:
            return -1
        i += 1
    if not seen:
        return -1
    if count == 0:
        digits[0] = 48
        count = 1
    if fraction < 0:
        fraction = 0
    left = count - fraction  # the digits before the point (its exponent is -fraction)
    dot = left  # plain notation, as format(Decimal, "f") writes it (str() switches to 1E-7 from left <= -6)
    if dot <= 0:
        out[w] = 48
        out[w + 1] = 46
        w += 2
        for k in range(-dot):
            out[w] = 48
            w += 1
        memcpy(out + w, digits, count)
        w += count
    elif dot >= count:  # no fraction (dot == count)
        memcpy(out + w, digits, count)
        w += count
    else:
        memcpy(out + w, digits, dot)
        w += dot
        out[w] = 46
        w += 1
        memcpy(out + w, digits + dot, count - dot)
        w += count - dot
    k = _put_lenenc(dst, w) - dst
    memcpy(dst + k, out, w)
    return k + w


cdef inline int _number(const unsigned char* v, Py_ssize_t n, Py_ssize_t* at, Py_ssize_t width) noexcept:
    """The ``width`` decimal digits at ``at[0]`` (moved past them); -1 if they are not all digits."""
    cdef int value = 0
    cdef Py_ssize_t i
    if at[0] + width > n:
        return -1
    for i in range(at[0], at[0] + width):
        if not 48 <= v[i] <= 57:
            return -1
        value = value * 10 + v[i] - 48
    at[0] += width
    return value


cdef inline long _micro(const unsigned char* v, Py_ssize_t n, Py_ssize_t at) noexcept:
    """A fraction of a second ``.d{1,6}`` at ``at`` to the end, in microseconds (0: none); -1 if malformed."""
    cdef long value = 0
    cdef Py_ssize_t i
    if at == n:
        return 0
    if v[at] != 46 or n - at - 1 < 1 or n - at - 1 > 6:
        return -1
    for i in range(at + 1, at + 7):
        if i < n:
            if not 48 <= v[i] <= 57:
                return -1
            value = value * 10 + v[i] - 48
        else:
            value *= 10
    return value


cdef inline bint _clock(const unsigned char* v, Py_ssize_t n, Py_ssize_t at, int* minute, int* second,
                        long* micro) noexcept:
    """``:mm:ss[.f]`` from ``at`` to the end (after the hours of a time of day or a TIME); False if malformed."""
    if at >= n or v[at] != 58:
        return False
    at += 1
    minute[0] = _number(v, n, &at, 2)
    if minute[0] < 0 or at >= n or v[at] != 58:
        return False
    at += 1
    second[0] = _number(v, n, &at, 2)
    micro[0] = _micro(v, n, at) if second[0] >= 0 else -1
    return micro[0] >= 0


cdef inline Py_ssize_t _datetime_value(const unsigned char* v, Py_ssize_t n, unsigned char* dst) noexcept:
    """``YYYY-MM-DD[ hh:mm:ss[.f]]`` in the binary form: 11 bytes with microseconds, else 7 with a time, else 4,
    else (a zero date) 0 — the row writer's for a valid date, MariaDB's for the rest; -1: malformed."""
    cdef Py_ssize_t at = 0
    cdef int year, month, day, hour = 0, minute = 0, second = 0
    cdef long micro = 0
    year = _number(v, n, &at, 4)
    if year < 0 or at >= n or v[at] != 45:
        return -1
    at += 1
    month = _number(v, n, &at, 2)
    if month < 0 or at >= n or v[at] != 45:
        return -1
    at += 1
    day = _number(v, n, &at, 2)
    if day < 0:
        return -1
    if at < n:
        if v[at] != 32:
            return -1
        at += 1
        hour = _number(v, n, &at, 2)
        if hour < 0 or not _clock(v, n, at, &minute, &second, &micro):
            return -1
    dst[1] = year & 0xFF
    dst[2] = year >> 8
    dst[3] = month
    dst[4] = day
    dst[5] = hour
    dst[6] = minute
    dst[7] = second
    dst[8] = micro & 0xFF
    dst[9] = (micro >> 8) & 0xFF
    dst[10] = (micro >> 16) & 0xFF
    dst[11] = 0
    dst[0] = 11 if micro else 7 if hour or minute or second else 4 if year or month or day else 0
    return dst[0] + 1


def datetime_field(bytes text):
    """A date's text as its binary-protocol field (the pure twin's); ``None``: not a date's text."""
    cdef unsigned char field[12]
    cdef Py_ssize_t n = _datetime_value(<const unsigned char*> PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text),
                                        field)
    return None if n < 0 else PyBytes_FromStringAndSize(<char*> field, n)


cdef inline Py_ssize_t _time_value(const unsigned char* v, Py_ssize_t n, unsigned char* dst) noexcept:
    """``[-]h{1,3}:mm:ss[.f]`` in the binary form: 12 bytes with microseconds, else 8 unless it is zero (0),
    the magnitude's days, hours, minutes and seconds; -1: malformed."""
    cdef Py_ssize_t at = 1 if n and v[0] == 45 else 0
    cdef bint negative = at == 1
    cdef int hours = 0, minutes, seconds, width = 0
    cdef long micro, total
    while at < n and 48 <= v[at] <= 57 and width < 3:
        hours = hours * 10 + v[at] - 48
        at += 1
        width += 1
    if width == 0 or not _clock(v, n, at, &minutes, &seconds, &micro):
        return -1
    total = hours * 3600L + minutes * 60L + seconds
    if not total and not micro:
        dst[0] = 0
        return 1
    dst[0] = 12 if micro else 8
    dst[1] = negative
    dst[2] = total // 86400
    dst[3] = dst[4] = dst[5] = 0
    dst[6] = total % 86400 // 3600
    dst[7] = total % 3600 // 60
    dst[8] = total % 60
    dst[9] = micro & 0xFF
    dst[10] = (micro >> 8) & 0xFF
    dst[11] = (micro >> 16) & 0xFF
    dst[12] = 0
    return dst[0] + 1


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
    # _out is the client's bytes' buffer, of which the first _outlen are framed: it grows by doubling and is
    # not shrunk by take(), so framing a packet reallocates nothing (bytearray grows to the exact size asked)
    cdef Py_ssize_t _outlen
    cdef bytes _kinds  # convert()'s: each column's AS_* (None: rows pass as they are)
    cdef bytearray _long  # a converted row of 16 MiB or more: its packets so far

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
        self._in = PyByteArray_FromStringAndSize(NULL, 0)
        self._out = PyByteArray_FromStringAndSize(NULL, 0)
        self._outlen = 0
        self._kinds = None
        self._long = PyByteArray_FromStringAndSize(NULL, 0)

    @property
    def state(self):
        return S_FIRST if self._state >= S_COLUMNS else self._state

    def concatenate(self, int units):
        """Before the first byte: the answer is ``units`` answers, relayed as one (the pure twin's docstring)."""
        if self._state != S_FIRST or self.unit or PyByteArray_GET_SIZE(self._in):
            raise ValueError("concatenate() after the answer began")
        self._left = units - 1 if units > 1 else 0

    def convert(self, bytes kinds):
        """At HEADER: the rows are text-protocol rows sent on as binary-protocol ones, each column's value as
        ``kinds`` says (one ``AS_*`` a column; the pure twin's docstring)."""
        if self._state != S_HEADER:
            raise ValueError(f"convert() at state {self._state}, not HEADER")
        if len(kinds) != self._count or any(k > K_NULL for k in kinds):
            raise ValueError(f"convert() takes one kind of 0..{K_NULL} for each of the {self._count} columns")
        self._kinds = kinds

    def rest(self):
        """The bytes fed but not read (the next answer's on that connection); forgotten."""
        cdef bytes rest = bytes(self._in)
        del self._in[:]
        return rest

    def take(self):
        """The client's bytes framed so far (and forget them)."""
        return self._taken()

    def feed(self, bytes data):
        """Take bytes the data source sent; the state after them."""
        self._feed(data)
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
        self._feed(data)
        if self._state == S_HEADER:
            payloads, status = header_for(self.columns)
            self._header(payloads, status)  # header()'s, without a method call
        cdef bytes out
        if self._outlen:
            out = self._taken()
            if not client.is_closing():
                client.write(out)
        return S_FIRST if self._state >= S_COLUMNS else self._state

    # -- internals -----------------------------------------------------------------------------------

    cdef bytes _taken(self):
        """The bytes framed so far, forgotten (the buffer kept, unless a long answer made it large)."""
        cdef bytes out = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(self._out), self._outlen)
        self._outlen = 0
        if PyByteArray_GET_SIZE(self._out) > KEPT_BUFFER:
            PyByteArray_Resize(self._out, 0)
        return out

    cdef unsigned char* _reserve(self, Py_ssize_t extra) except NULL:
        """Room for ``extra`` more bytes after the ones framed; where they go (valid until the next reserve)."""
        cdef Py_ssize_t capacity = PyByteArray_GET_SIZE(self._out)
        cdef Py_ssize_t needed = self._outlen + extra
        if needed > capacity:
            capacity = capacity * 2 if capacity * 2 > needed else needed
            if capacity < MIN_BUFFER:
                capacity = MIN_BUFFER
            if PyByteArray_Resize(self._out, capacity) < 0:
                return NULL
        return <unsigned char*> PyByteArray_AS_STRING(self._out) + self._outlen

    cdef void _feed(self, bytes data) except *:
        """``data`` read as far as the state goes: straight from ``data`` when nothing is held back (no copy), the
        rest kept for the next call."""
        cdef Py_ssize_t size = PyBytes_GET_SIZE(data), at
        cdef bint running = (self._state == S_FIRST or self._state == S_COLUMNS or self._state == S_COLUMNS_EOF
                             or self._state == S_ROWS)
        if size and running and not PyByteArray_GET_SIZE(self._in):
            at = self._run_on(<const unsigned char*> PyBytes_AS_STRING(data), size)
            if at < size:
                self._in += data[at:]
            return
        if size:
            self._in += data
        if running:
            self._run()

    cdef void _frame(self, const unsigned char* payload, Py_ssize_t length):
        cdef unsigned char* dst = self._reserve(4 + length)
        if dst is NULL:  # no memory: as a bytearray that could not grow (an exception is set)
            return
        self._outlen += 4 + length
        dst[0] = length & 0xFF
        dst[1] = (length >> 8) & 0xFF
        dst[2] = (length >> 16) & 0xFF
        dst[3] = self.seq
        if length:
            memcpy(dst + 4, payload, length)
        self.seq = (self.seq + 1) & 0xFF

    cdef void _text_row(self, const unsigned char* payload, Py_ssize_t length):
        """A packet at ROWS of an answer whose rows are converted (``_packet``'s, for them)."""
        if self._continued:  # the next packet of a long row: the row is converted once it is whole
            self._long += (<char*> payload)[:length]
            if length == MAX_PAYLOAD:
                return
            self._continued = False
            payload = <const unsigned char*> PyByteArray_AS_STRING(self._long)
            length = PyByteArray_GET_SIZE(self._long)
        elif length and payload[0] == 0xFF:
            self.first = (<char*> payload)[:length]
            self._state = S_ERROR
            return
        elif length and payload[0] == 0xFE and length < 9:
            self._close(payload, length)
            return
        else:
            self.rows += 1
            if length == MAX_PAYLOAD:
                self._long = bytearray((<char*> payload)[:length])
                self._continued = True
                return
        if not self._binary_row(payload, length):
            self._state = S_UNEXPECTED  # not the text of its column's type: nothing of it was framed
        if PyByteArray_GET_SIZE(self._long):
            self._long = PyByteArray_FromStringAndSize(NULL, 0)

    cdef bint _binary_row(self, const unsigned char* row, Py_ssize_t length) except -1:
        """The text row ``row`` framed as a binary one (0x00, the NULL bitmap at offset 2, the values); False:
        a value is not its column's text (nothing framed)."""
        cdef const unsigned char* kinds = <const unsigned char*> (<char*> self._kinds)
        cdef Py_ssize_t columns = len(self._kinds)
        cdef Py_ssize_t nulls = (columns + 9) // 8
        cdef Py_ssize_t start = self._outlen
        cdef Py_ssize_t at = 0, w = 1 + nulls, i, n, written
        cdef long long size
        cdef int kind
        cdef unsigned char* dst
        cdef const unsigned char* v
        dst = self._reserve(4 + 1 + nulls + length + columns * VALUE_SLACK) + 4  # nothing framed until it is whole
        memset(dst, 0, 1 + nulls)
        for i in range(columns):
            if at < length and row[at] == 0xFB:  # NULL
                dst[1 + (i + 2) // 8] |= 1 << ((i + 2) % 8)
                at += 1
                continue
            size = _lenenc(row, length, &at)
            if size < 0 or size > length - at:
                return False
            n = <Py_ssize_t> size
            v = row + at
            at += n
            kind = kinds[i]
            if kind == K_STRING:
                written = _put_lenenc(dst + w, n) - (dst + w)
                memcpy(dst + w + written, v, n)
                written += n
            elif kind == K_DECIMAL:
                written = _decimal_value(v, n, dst + w)
            elif kind <= K_UINT64:
                written = _int_value(v, n, kind, dst + w)
            elif kind <= K_DOUBLE:
                written = _float_value(v, n, kind == K_FLOAT, dst + w)
            elif kind == K_DATETIME:
                written = _datetime_value(v, n, dst + w)
            elif kind == K_TIME:
                written = _time_value(v, n, dst + w)
            else:  # K_NULL: a column of NULLs only
                written = -1
            if written < 0:
                return False
            w += written
        if at != length:
            return False
        if w < MAX_PAYLOAD:
            self._outlen = start + 4 + w
            dst -= 4
            dst[0] = w & 0xFF
            dst[1] = (w >> 8) & 0xFF
            dst[2] = (w >> 16) & 0xFF
            dst[3] = self.seq
            self.seq = (self.seq + 1) & 0xFF
            return True
        cdef bytes whole = PyBytes_FromStringAndSize(<char*> dst, w)  # a row of 16 MiB or more
        at = 0
        while True:  # split as the protocol asks: pieces of 16 MiB - 1, the last one shorter (maybe empty)
            n = min(w - at, MAX_PAYLOAD)
            self._frame(<const unsigned char*> (<char*> whole) + at, n)
            at += n
            if n < MAX_PAYLOAD:
                return True

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
        cdef Py_ssize_t at = self._run_on(<const unsigned char*> PyByteArray_AS_STRING(data), PyByteArray_GET_SIZE(data))
        if at:
            del data[:at]

    cdef Py_ssize_t _run_on(self, const unsigned char* p, Py_ssize_t size):
        """The packets whole in ``p[:size]`` read, as far as the state goes; the bytes read."""
        cdef Py_ssize_t at = 0
        cdef Py_ssize_t length
        while size - at >= 4:
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
        return at

    cdef void _packet(self, const unsigned char* payload, Py_ssize_t length):
        cdef int state = self._state
        cdef Py_ssize_t end = 0
        cdef long long count
        if state == S_ROWS:
            if self._kinds is not None:
                self._text_row(payload, length)
            elif self._continued:
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
