# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``rowwriter_py.py``: result rows of Python values framed as MySQL packets.

Same functions, kinds and bytes as the pure twin (its docstring has the contract;
tests/test_rowwriter.py compares both with mysql-mimic's encoders). Values are
written straight into the buffer: integers and floats formatted in C, ``str``
taken as its UTF-8 bytes without a ``bytes`` object, no packet-header object.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE
from cpython.datetime cimport (
    PyDate_CheckExact, PyDateTime_CheckExact, PyDateTime_DATE_GET_HOUR, PyDateTime_DATE_GET_MICROSECOND,
    PyDateTime_DATE_GET_MINUTE, PyDateTime_DATE_GET_SECOND, PyDateTime_DELTA_GET_DAYS,
    PyDateTime_DELTA_GET_MICROSECONDS, PyDateTime_DELTA_GET_SECONDS, PyDateTime_GET_DAY, PyDateTime_GET_MONTH,
    PyDateTime_GET_YEAR, PyDelta_CheckExact, import_datetime,
)
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free
from cpython.object cimport PyObject_Str
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_Check
from libc.stdio cimport snprintf
from libc.string cimport memcpy, memset, strlen

cdef extern from "Python.h":
    bint PyLong_CheckExact(object o)
    bint PyFloat_CheckExact(object o)
    char* PyOS_double_to_string(double val, char format_code, int precision, int flags, int* ptype) except NULL
    int PyFloat_Pack4(double x, char* p, int le) except -1
    int PyFloat_Pack8(double x, char* p, int le) except -1

import_datetime()

from decimal import Decimal as _Decimal

__all__ = [
    "text_rows", "binary_rows", "STRING", "BYTES", "TINY_TEXT", "ENCODER", "INT8", "UINT8", "INT16",
    "UINT16", "INT32", "UINT32", "INT64", "UINT64", "FLOAT", "DOUBLE", "DATETIME", "TIME", "TIME_TEXT",
    "MAX_PAYLOAD",
]

DEF C_STRING = 0
DEF C_BYTES = 1
DEF C_TINY_TEXT = 2
DEF C_ENCODER = 3
DEF C_INT8 = 4
DEF C_UINT64 = 11
DEF C_FLOAT = 12
DEF C_DOUBLE = 13
DEF C_DATETIME = 14
DEF C_TIME = 15
DEF C_TIME_TEXT = 16
DEF C_MAX_PAYLOAD = 0xFFFFFF
DEF DTSF_ADD_DOT_0 = 0x02

STRING, BYTES, TINY_TEXT, ENCODER = C_STRING, C_BYTES, C_TINY_TEXT, C_ENCODER
INT8, UINT8, INT16, UINT16, INT32, UINT32, INT64, UINT64 = range(4, 12)
FLOAT, DOUBLE, DATETIME, TIME, TIME_TEXT = C_FLOAT, C_DOUBLE, C_DATETIME, C_TIME, C_TIME_TEXT
MAX_PAYLOAD = C_MAX_PAYLOAD

# INT8 .. UINT64: the byte size, and the range int(value) must be in (else the encoder raises struct's error)
cdef int _SIZES[8]
cdef long long _LOW[8]
cdef unsigned long long _HIGH[8]
_SIZES[:] = [1, 1, 2, 2, 4, 4, 8, 8]
_LOW[:] = [-128, 0, -32768, 0, -2147483648, 0, -9223372036854775807 - 1, 0]
_HIGH[:] = [127, 255, 32767, 65535, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615ULL]


cdef inline char* _grow(bytearray buffer, Py_ssize_t extra) except NULL:
    """Make room for ``extra`` more bytes at the end; where they go (CPython over-allocates: amortized)."""
    cdef Py_ssize_t size = PyByteArray_GET_SIZE(buffer)
    PyByteArray_Resize(buffer, size + extra)
    return PyByteArray_AS_STRING(buffer) + size


cdef inline int _length_size(Py_ssize_t n) noexcept:
    if n < 251:
        return 1
    if n < 0x10000:
        return 3
    if n < 0x1000000:
        return 4
    return 9


cdef inline char* _put_length(char* p, Py_ssize_t n) noexcept:
    """A length-encoded integer at ``p`` (mimic's ``uint_len``); the byte after it."""
    cdef int i
    if n < 251:
        p[0] = <char> n
        return p + 1
    if n < 0x10000:
        p[0] = <char> 0xFC
        p[1] = <char> (n & 0xFF)
        p[2] = <char> ((n >> 8) & 0xFF)
        return p + 3
    if n < 0x1000000:
        p[0] = <char> 0xFD
        p[1] = <char> (n & 0xFF)
        p[2] = <char> ((n >> 8) & 0xFF)
        p[3] = <char> ((n >> 16) & 0xFF)
        return p + 4
    p[0] = <char> 0xFE
    for i in range(8):
        p[1 + i] = <char> ((<unsigned long long> n >> (8 * i)) & 0xFF)
    return p + 9


cdef inline int _string(bytearray buffer, const char* data, Py_ssize_t n) except -1:
    """``data`` as a length-encoded string."""
    cdef char* p = _grow(buffer, _length_size(n) + n)
    p = _put_length(p, n)
    memcpy(p, data, n)
    return 0


cdef inline int _bytes(bytearray buffer, object data, bint prefixed) except -1:
    """A ``bytes`` value (an encoder's result), length-encoded or as it is."""
    cdef Py_ssize_t n
    if not PyBytes_Check(data):  # a bytearray or the like from an encoder: what ``buffer +=`` takes
        data = bytes(data)
    if prefixed:
        return _string(buffer, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    n = PyBytes_GET_SIZE(data)
    memcpy(_grow(buffer, n), PyBytes_AS_STRING(data), n)
    return 0


cdef inline Py_ssize_t _digits(char* out, long long v) noexcept:
    """``str(v)`` into ``out`` (at least 20 bytes); its length."""
    cdef char tmp[24]
    cdef Py_ssize_t n = 0, i
    cdef unsigned long long u = <unsigned long long> v
    if v < 0:
        u = (~u) + 1
    while True:
        tmp[n] = <char> (48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    i = 0
    if v < 0:
        out[0] = 45  # '-'
        i = 1
    while n > 0:
        n -= 1
        out[i] = tmp[n]
        i += 1
    return i


cdef int _utf8(bytearray buffer, object value) except -1:
    """``value`` as the text protocol's length-encoded UTF-8 string (``str`` encoded, a ``Decimal`` in plain
    notation, anything else its ``str()``)."""
    cdef Py_ssize_t n
    cdef const char* data
    cdef char digits[24]
    cdef char* text
    cdef int overflow
    cdef long long v
    if PyUnicode_Check(value):
        data = PyUnicode_AsUTF8AndSize(value, &n)
        return _string(buffer, data, n)
    if PyBytes_Check(value):
        return _string(buffer, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
    if PyLong_CheckExact(value):
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if not overflow:
            return _string(buffer, digits, _digits(digits, v))
    elif PyFloat_CheckExact(value):  # str(float) is repr: the shortest digits that read back, "inf", "nan"
        text = PyOS_double_to_string(PyFloat_AS_DOUBLE(value), b'r', 0, DTSF_ADD_DOT_0, NULL)
        try:
            return _string(buffer, text, strlen(text))
        finally:
            PyMem_Free(text)
    # a Decimal in plain notation, as MariaDB spells one (str() writes 0E-30); anything else its str()
    value = format(value, "f") if type(value) is _Decimal else PyObject_Str(value)  # kept while copied
    data = PyUnicode_AsUTF8AndSize(value, &n)
    return _string(buffer, data, n)


cdef inline int _stringlike(bytearray buffer, int kind, object value) except -1:
    """Write ``value`` as a length-encoded string when its kind says so (STRING; BYTES and ``bytes``): 1, else 0."""
    if kind == C_STRING:
        _utf8(buffer, value)
        return 1
    if kind == C_BYTES and PyBytes_Check(value):
        _string(buffer, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
        return 1
    return 0


cdef Py_ssize_t _close(bytearray buffer, Py_ssize_t start, Py_ssize_t seq) except -1:
    """Fill in the header of the payload after ``start``, split when too long; the next seq."""
    cdef Py_ssize_t length = PyByteArray_GET_SIZE(buffer) - start - 4
    cdef unsigned char* h
    cdef Py_ssize_t offset, piece
    cdef bytes payload
    if length < C_MAX_PAYLOAD:
        h = <unsigned char*> PyByteArray_AS_STRING(buffer) + start
        h[0] = length & 0xFF
        h[1] = (length >> 8) & 0xFF
        h[2] = (length >> 16) & 0xFF
        h[3] = seq
        return (seq + 1) & 0xFF
    payload = bytes(buffer[start + 4:])
    PyByteArray_Resize(buffer, start)
    offset = 0
    while True:  # pieces of MAX_PAYLOAD bytes, then a shorter one (empty when the length is a multiple)
        piece = min(length - offset, C_MAX_PAYLOAD)
        h = <unsigned char*> _grow(buffer, 4 + piece)
        h[0] = piece & 0xFF
        h[1] = (piece >> 8) & 0xFF
        h[2] = (piece >> 16) & 0xFF
        h[3] = seq
        memcpy(h + 4, PyBytes_AS_STRING(payload) + offset, piece)
        seq = (seq + 1) & 0xFF
        offset += piece
        if piece < C_MAX_PAYLOAD:
            return seq


cdef bytes _kinds(object kinds):
    """The kinds as one byte each (read as C ints in the loops)."""
    return bytes(kinds)


def text_rows(bytearray buffer, int seq, object rows, object kinds, object encoders):
    """Append one text-protocol row packet per row; the next sequence id (see the pure twin)."""
    return _write(buffer, seq, rows, kinds, encoders, False)


def binary_rows(bytearray buffer, int seq, object rows, object kinds, object encoders):
    """Append one binary-protocol row packet per row; the next sequence id (see the pure twin)."""
    return _write(buffer, seq, rows, kinds, encoders, True)


cdef Py_ssize_t _write(bytearray buffer, int seq, object rows, object kinds, object encoders, bint binary) except -1:
    """Each row's packet, framed (split when too long); a row that fails is taken back whole."""
    cdef bytes kind_bytes = _kinds(kinds)
    cdef const unsigned char* kind_list = kind_bytes
    cdef Py_ssize_t count = len(kind_bytes)
    cdef Py_ssize_t s = seq & 0xFF
    cdef Py_ssize_t start = PyByteArray_GET_SIZE(buffer)
    cdef object row
    try:
        for row in rows:
            if binary:
                _binary_row(buffer, start, row, kind_list, count, encoders)
            else:
                _text_row(buffer, row, kind_list, count, encoders)
            s = _close(buffer, start, s)
            start = PyByteArray_GET_SIZE(buffer)
    except BaseException:  # the rows before it stand, as mimic's did
        PyByteArray_Resize(buffer, start)
        raise
    return s


cdef int _text_row(bytearray buffer, object row, const unsigned char* kinds, Py_ssize_t count,
                   object encoders) except -1:
    """The header's room, then each value a length-encoded string, NULL as 0xFB."""
    cdef Py_ssize_t i
    cdef int kind
    cdef object value
    _grow(buffer, 4)
    for i in range(count):
        value = row[i]
        if value is None:
            _grow(buffer, 1)[0] = <char> 0xFB
            continue
        kind = kinds[i]
        if _stringlike(buffer, kind, value):
            continue
        if kind == C_TINY_TEXT:  # str(int(value)): _utf8 writes an exact int's digits
            _utf8(buffer, value if PyLong_CheckExact(value) else int(value))
        elif kind == C_TIME_TEXT:  # an interval as MariaDB spells it; anything else as a STRING value's text
            if PyDelta_CheckExact(value):
                _time_text(buffer, value)
            else:
                _utf8(buffer, value)
        else:
            _bytes(buffer, encoders[i](value), True)
    return 0


cdef int _integer(bytearray buffer, int kind, object value) except -1:
    """``int(value)`` little-endian in the kind's size, when an exact int in range; else 1 (the encoder's turn)."""
    cdef int overflow, size, b
    cdef long long v
    cdef unsigned long long u
    cdef char* p
    cdef int k = kind - C_INT8
    if not PyLong_CheckExact(value):
        return 1
    v = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow > 0 and k == 7:  # UINT64 above 2**63 - 1
        if value > 18446744073709551615:
            return 1
        u = <unsigned long long> value
    elif overflow:
        return 1
    else:
        if v < _LOW[k] or (v >= 0 and <unsigned long long> v > _HIGH[k]):
            return 1
        u = <unsigned long long> v
    size = _SIZES[k]
    p = _grow(buffer, size)
    for b in range(size):
        p[b] = <char> ((u >> (8 * b)) & 0xFF)
    return 0


cdef int _datetime(bytearray buffer, object value) except -1:
    """mimic's binary DATE / DATETIME: 4, 7 or 11 bytes after the length, as precise as the value."""
    cdef int year = PyDateTime_GET_YEAR(value)
    cdef int hour = 0, minute = 0, second = 0, micro = 0
    cdef char* p
    if PyDateTime_CheckExact(value):
        hour = PyDateTime_DATE_GET_HOUR(value)
        minute = PyDateTime_DATE_GET_MINUTE(value)
        second = PyDateTime_DATE_GET_SECOND(value)
        micro = PyDateTime_DATE_GET_MICROSECOND(value)
    cdef int size = 11 if micro else 7 if (hour or minute or second) else 4
    p = _grow(buffer, size + 1)
    p[0] = <char> size
    p[1] = <char> (year & 0xFF)
    p[2] = <char> (year >> 8)
    p[3] = <char> PyDateTime_GET_MONTH(value)
    p[4] = <char> PyDateTime_GET_DAY(value)
    if size > 4:
        p[5] = <char> hour
        p[6] = <char> minute
        p[7] = <char> second
    if size > 7:
        p[8] = <char> (micro & 0xFF)
        p[9] = <char> ((micro >> 8) & 0xFF)
        p[10] = <char> ((micro >> 16) & 0xFF)
        p[11] = <char> ((micro >> 24) & 0xFF)
    return 0


cdef struct Magnitude:
    bint negative
    long long days
    int seconds
    int micro


cdef inline Magnitude _magnitude(object value) noexcept:
    """The sign, then the days, seconds and microseconds of ``abs(value)`` (see the pure twin)."""
    cdef Magnitude m
    m.days = PyDateTime_DELTA_GET_DAYS(value)
    m.seconds = PyDateTime_DELTA_GET_SECONDS(value)
    m.micro = PyDateTime_DELTA_GET_MICROSECONDS(value)
    m.negative = m.days < 0
    if m.negative:
        m.days = -m.days
        if m.micro:
            m.micro = 1000000 - m.micro
            m.seconds += 1
        if m.seconds:
            m.seconds = 86400 - m.seconds
            m.days -= 1
    return m


cdef int _time(bytearray buffer, object value) except -1:
    """Binary TIME: 0, 8 or 12 bytes after the length (sign, days, hours, minutes, seconds, microseconds)."""
    cdef Magnitude m = _magnitude(value)
    cdef unsigned int d = <unsigned int> m.days
    cdef int size = 12 if m.micro else 8 if (d or m.seconds) else 0
    cdef char* p = _grow(buffer, size + 1)
    p[0] = <char> size
    if size == 0:
        return 0
    p[1] = 1 if m.negative else 0
    p[2] = <char> (d & 0xFF)
    p[3] = <char> ((d >> 8) & 0xFF)
    p[4] = <char> ((d >> 16) & 0xFF)
    p[5] = <char> ((d >> 24) & 0xFF)
    p[6] = <char> (m.seconds // 3600)
    p[7] = <char> ((m.seconds % 3600) // 60)
    p[8] = <char> (m.seconds % 60)
    if size == 12:
        p[9] = <char> (m.micro & 0xFF)
        p[10] = <char> ((m.micro >> 8) & 0xFF)
        p[11] = <char> ((m.micro >> 16) & 0xFF)
        p[12] = <char> ((m.micro >> 24) & 0xFF)
    return 0


cdef int _time_text(bytearray buffer, object value) except -1:
    """Text TIME: ``str(value)`` under a day, else MariaDB's ``[-]HHH:MM:SS[.ffffff]`` (see the pure twin)."""
    cdef char text[64]
    cdef int n
    cdef Magnitude m
    if PyDateTime_DELTA_GET_DAYS(value) == 0:
        return _utf8(buffer, value)
    m = _magnitude(value)
    n = snprintf(text, sizeof(text), "%s%02lld:%02d:%02d", b"-" if m.negative else b"",
                 m.days * 24 + m.seconds // 3600, (m.seconds % 3600) // 60, m.seconds % 60)
    if m.micro:
        n += snprintf(text + n, sizeof(text) - n, ".%06d", m.micro)
    return _string(buffer, text, n)


cdef int _binary_row(bytearray buffer, Py_ssize_t start, object row, const unsigned char* kinds, Py_ssize_t count,
                     object encoders) except -1:
    """The header's room, 0x00, the NULL bitmap (offset 2), then each non-NULL value's field."""
    cdef Py_ssize_t bitmap = (count + 9) // 8, i
    cdef int kind
    cdef object value
    cdef char* p = _grow(buffer, 5 + bitmap)
    memset(p, 0, 5 + bitmap)
    for i in range(count):
        value = row[i]
        if value is None:
            p = PyByteArray_AS_STRING(buffer) + start + 5 + (i + 2) // 8
            p[0] = p[0] | <char> (1 << ((i + 2) % 8))
            continue
        kind = kinds[i]
        if _stringlike(buffer, kind, value):
            continue
        if C_INT8 <= kind <= C_UINT64 and _integer(buffer, kind, value) == 0:
            continue  # written; an int out of the kind's range goes to the encoder below
        if kind == C_DOUBLE and PyFloat_CheckExact(value):
            PyFloat_Pack8(PyFloat_AS_DOUBLE(value), _grow(buffer, 8), 1)
        elif kind == C_FLOAT and PyFloat_CheckExact(value):
            _float4(buffer, PyFloat_AS_DOUBLE(value))
        elif kind == C_DATETIME and (PyDateTime_CheckExact(value) or PyDate_CheckExact(value)):
            _datetime(buffer, value)
        elif kind == C_TIME and PyDelta_CheckExact(value):
            _time(buffer, value)
        else:
            _bytes(buffer, encoders[i](value), False)
    return 0


cdef int _float4(bytearray buffer, double x) except -1:
    """IEEE single, or struct's OverflowError for a finite value out of its range (nothing written then)."""
    cdef char packed[4]
    PyFloat_Pack4(x, packed, 1)
    memcpy(_grow(buffer, 4), packed, 4)
    return 0
