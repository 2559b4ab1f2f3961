# cython: language_level=3
"""Compiled twin of ``wire_py.py``: the packets of a buffered MySQL text result.

Same functions, outcomes and results as the pure twin (its docstring has the
contract; tests/test_wire.py runs both over the same byte streams). Values
are decoded straight from the packet's buffer, without a slice per value.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_Decode

__all__ = ["read_columns", "read_rows", "EOF", "ERROR", "OUT_OF_SEQUENCE", "LOST", "UNEXPECTED"]

EOF = 0
ERROR = 1
OUT_OF_SEQUENCE = 2
LOST = 3
UNEXPECTED = 4

DEF MAX_PAYLOAD = 0xFFFFFF


cdef tuple _packet(object read, int seq):
    """(payload, next seq, -1) or (last, seq, outcome), as the pure twin's ``_packet``."""
    cdef list parts = None
    cdef bytes header, body
    cdef const unsigned char* h
    cdef Py_ssize_t length
    while True:
        header = read(4)
        if PyBytes_GET_SIZE(header) < 4:
            return b"", seq, LOST
        h = <const unsigned char*> PyBytes_AS_STRING(header)
        if h[3] != seq:
            return header, seq, OUT_OF_SEQUENCE
        seq = (seq + 1) & 0xFF
        length = h[0] | (h[1] << 8) | (h[2] << 16)
        body = read(length)
        if PyBytes_GET_SIZE(body) < length:
            return b"", seq, LOST
        if length < MAX_PAYLOAD and parts is None:
            return body, seq, -1
        if parts is None:
            parts = []
        parts.append(body)
        if length < MAX_PAYLOAD:
            return b"".join(parts), seq, -1


cdef inline int _first(bytes body):
    return (<const unsigned char*> PyBytes_AS_STRING(body))[0] if PyBytes_GET_SIZE(body) else -1


def read_columns(read, int seq, Py_ssize_t count):
    """``count`` column-definition payloads, then the EOF packet: (payloads, seq, last, outcome)."""
    cdef list columns = []
    cdef bytes body
    cdef int outcome, first
    cdef Py_ssize_t i
    for i in range(count):
        body, seq, outcome = _packet(read, seq)
        if outcome >= 0:
            return (), seq, body, outcome
        if _first(body) == 0xFF:
            return (), seq, body, ERROR
        columns.append(body)
    body, seq, outcome = _packet(read, seq)
    if outcome >= 0:
        return (), seq, body, outcome
    first = _first(body)
    if first == 0xFF:
        return (), seq, body, ERROR
    if first != 0xFE or PyBytes_GET_SIZE(body) >= 9:
        return (), seq, body, UNEXPECTED
    return tuple(columns), seq, body, EOF


def read_rows(read, int seq, converters):
    """Row packets up to the closing EOF: (rows, seq, last, outcome); rows decoded as PyMySQL does."""
    cdef list rows = []
    # PyUnicode_Decode takes the codec name as a C string: encode each name once per result
    cdef tuple pairs = tuple([(None if e is None else e.encode("ascii"), f) for e, f in converters])
    cdef bytes body
    cdef int outcome, first
    while True:
        body, seq, outcome = _packet(read, seq)
        if outcome >= 0:
            return rows, seq, body, outcome
        first = _first(body)
        if first == 0xFE and PyBytes_GET_SIZE(body) < 9:
            return rows, seq, body, EOF
        if first == 0xFF:
            return rows, seq, body, ERROR
        rows.append(_row(body, pairs))


cdef tuple _row(bytes data, tuple pairs):
    cdef const unsigned char* p = <const unsigned char*> PyBytes_AS_STRING(data)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pos = 0, n = len(pairs), filled = 0, length, k
    cdef unsigned long long wide
    cdef unsigned char c
    cdef int i
    cdef object encoding, converter, value
    cdef tuple row = PyTuple_New(n)
    for k in range(n):
        if pos >= size:
            break
        encoding, converter = pairs[k]
        c = p[pos]
        pos += 1
        if c < 0xFB:
            length = c
        elif c == 0xFC:
            if pos + 2 > size:
                raise ValueError(f"a row value's length runs past the end of its {size}-byte packet")
            length = p[pos] | (p[pos + 1] << 8)
            pos += 2
        elif c == 0xFD:
            if pos + 3 > size:
                raise ValueError(f"a row value's length runs past the end of its {size}-byte packet")
            length = p[pos] | (p[pos + 1] << 8) | (p[pos + 2] << 16)
            pos += 3
        elif c == 0xFE:
            if pos + 8 > size:
                raise ValueError(f"a row value's length runs past the end of its {size}-byte packet")
            wide = 0
            for i in range(7, -1, -1):
                wide = (wide << 8) | p[pos + i]
            pos += 8
            if wide > <unsigned long long> (size - pos):
                raise ValueError(f"a row value of {wide} bytes runs past the end of its {size}-byte packet")
            length = <Py_ssize_t> wide
        else:  # 0xFB is NULL (0xFF, never sent in a row, reads as NULL in PyMySQL too)
            Py_INCREF(None)
            PyTuple_SET_ITEM(row, k, None)
            filled += 1
            continue
        if pos + length > size:
            raise ValueError(f"a row value of {length} bytes runs past the end of its {size}-byte packet")
        if encoding is not None:
            value = PyUnicode_Decode(<const char*> p + pos, length, PyBytes_AS_STRING(encoding), NULL)
        else:
            value = PyBytes_FromStringAndSize(<const char*> p + pos, length)
        pos += length
        if converter is not None:
            value = converter(value)
        Py_INCREF(value)
        PyTuple_SET_ITEM(row, k, value)
        filled += 1
    if filled < n:
        return row[:filled]
    return row
