# cython: language_level=3
"""Compiled twin of ``ordered_py.py``: a multi-unit read's text answers merged in order without decoding.

Same function, key kinds and bytes as the pure twin (its docstring has the contract; tests/test_ordered.py
runs both over the same answers). Each row's key is written into one reused buffer straight from the
answer's memory; the rows are sorted by their keys with the interpreter's (stable) sort, and the answer
out is written with one copy per row.
"""

cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.string cimport memcmp, memcpy

from ddm_core._fast._packets cimport _lenenc

__all__ = [
    "merge_ordered", "text_rows", "KEY_BYTES", "KEY_ASCII", "KEY_ASCII_FOLD", "KEY_PAD", "KEY_PAD_FOLD", "KEY_SIGNED",
    "KEY_UNSIGNED",
]

KEY_BYTES = 0
KEY_ASCII = 1
KEY_ASCII_FOLD = 2
KEY_PAD = 3
KEY_PAD_FOLD = 4
KEY_SIGNED = 5
KEY_UNSIGNED = 6

DEF K_BYTES = 0
DEF K_ASCII = 1
DEF K_ASCII_FOLD = 2
DEF K_PAD = 3
DEF K_PAD_FOLD = 4
DEF K_SIGNED = 5
DEF K_UNSIGNED = 6
DEF MAX_PAYLOAD = 0xFFFFFF
DEF NULL_FIELD = 0xFB
DEF MAX_KEYS = 64


cdef class _Answer:
    """One answer's layout: its column count, where its header ends, its closing packet's and its rows' spans
    (``spans[2 * r]``, ``spans[2 * r + 1]``: row ``r``'s payload start and end)."""
    cdef bytes data
    cdef long long count
    cdef Py_ssize_t header_end, closing_start, closing_end, rows, capacity
    cdef Py_ssize_t* spans

    def __dealloc__(self):
        PyMem_Free(self.spans)

    cdef int push(self, Py_ssize_t start, Py_ssize_t end) except -1:
        cdef Py_ssize_t* grown
        if self.rows == self.capacity:
            self.capacity = self.capacity * 2 if self.capacity else 64
            grown = <Py_ssize_t*> PyMem_Realloc(self.spans, 2 * self.capacity * sizeof(Py_ssize_t))
            if grown == NULL:
                raise MemoryError()
            self.spans = grown
        self.spans[2 * self.rows] = start
        self.spans[2 * self.rows + 1] = end
        self.rows += 1
        return 0


cdef inline bint _closing(const unsigned char* p, Py_ssize_t start, Py_ssize_t end) noexcept:
    return end > start and p[start] == 0xFE and end - start < 9


cdef _Answer _split(bytes answer, bint backend_eof):
    """The layout, or ``None``: not a result set this merges (the pure twin's ``_split``)."""
    cdef const unsigned char* p = <const unsigned char*> PyBytes_AS_STRING(answer)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(answer), at = 0, length, start, end, after
    cdef Py_ssize_t n = 0, rows_from = 0
    cdef long long count = -1
    cdef _Answer out = _Answer()
    out.data = answer
    out.header_end = -1
    while at < size:
        if size - at < 4:
            return None
        length = p[at] | p[at + 1] << 8 | p[at + 2] << 16
        if length == MAX_PAYLOAD or at + 4 + length > size:
            return None
        start, end = at + 4, at + 4 + length
        at = end
        if n == 0:
            if end == start or p[start] == 0x00 or p[start] == 0xFF or p[start] == NULL_FIELD:
                return None
            after = start
            count = _lenenc(p, end, &after)
            if count <= 0 or after != end:
                return None
            rows_from = 1 + count + (1 if backend_eof else 0)
        elif n < rows_from:
            if backend_eof and n == rows_from - 1 and not _closing(p, start, end):
                return None
        else:
            out.push(start, end)
        if n == rows_from - 1:
            out.header_end = end
        n += 1
    if n < rows_from + 1 or out.header_end < 0:
        return None
    out.rows -= 1  # the last packet closes the answer
    start, end = out.spans[2 * out.rows], out.spans[2 * out.rows + 1]
    if not _closing(p, start, end):
        return None
    for n in range(out.rows):  # a closing or an error packet among the rows
        at, after = out.spans[2 * n], out.spans[2 * n + 1]
        if _closing(p, at, after) or (after > at and p[at] == 0xFF):
            return None
    out.closing_start, out.closing_end, out.count = start, end, count
    return out


# SWAR masks: C constants (a DEF this wide would be a Python int, and every use a Python operation)
cdef unsigned long long HIGH_BITS = 0x8080808080808080ULL
cdef unsigned long long SPACES = 0x2020202020202020ULL
cdef unsigned long long LOWER_FROM = 0x1F1F1F1F1F1F1F1FULL
cdef unsigned long long LOWER_PAST = 0x0505050505050505ULL

#: Per string kind, each byte's weight in a key; INVALID: the kind cannot key a value holding it
DEF INVALID = 0x100
cdef unsigned short _WEIGHTS[5][256]


cdef void _fill_weights() noexcept:
    cdef int kind, c, w
    for kind in range(K_PAD_FOLD + 1):
        for c in range(256):
            w = c
            if kind != K_BYTES and (c >= 0x80 or ((kind == K_PAD or kind == K_PAD_FOLD) and c < 0x20)):
                w = INVALID
            elif (kind == K_ASCII_FOLD or kind == K_PAD_FOLD) and 97 <= c <= 122:
                w = c - 32
            _WEIGHTS[kind][c] = w


_fill_weights()


cdef inline unsigned char* _room(bytearray buf, Py_ssize_t need) except NULL:
    """``buf``'s memory, grown to ``need`` bytes at least (it never shrinks: one buffer serves every key)."""
    if PyByteArray_GET_SIZE(buf) < need:
        if PyByteArray_Resize(buf, need * 2) < 0:
            raise MemoryError()
    return <unsigned char*> PyByteArray_AS_STRING(buf)


cdef Py_ssize_t _put_part(bytearray buf, Py_ssize_t used, const unsigned char* v, Py_ssize_t n, int kind,
                          bint descending) except -2:
    """A non-NULL value's key part written at ``used``; the length after it, -1: the kind cannot key it."""
    cdef Py_ssize_t i, j, begin = used
    cdef unsigned char* dst = _room(buf, used + 2 * n + 11)
    cdef unsigned short* weights
    cdef unsigned short w
    cdef unsigned char c
    cdef unsigned long long magnitude = 0, number, word
    cdef bint negative
    dst[used] = 1
    used += 1
    if kind == K_SIGNED or kind == K_UNSIGNED:
        negative = n > 0 and v[0] == 45  # '-'
        i = 1 if negative else 0
        if i == n or n - i > 20:
            return -1
        while i < n:
            c = v[i]
            if c < 48 or c > 57:
                return -1
            if magnitude > (0xFFFFFFFFFFFFFFFF - (c - 48)) // 10:
                return -1
            magnitude = magnitude * 10 + (c - 48)
            i += 1
        if kind == K_SIGNED:
            if negative:
                if magnitude > 0x8000000000000000:
                    return -1
                number = 0x8000000000000000 - magnitude
            else:
                if magnitude > 0x7FFFFFFFFFFFFFFF:
                    return -1
                number = 0x8000000000000000 + magnitude
        else:
            if negative and magnitude:
                return -1
            number = magnitude
        for j in range(8):
            dst[used + j] = (number >> (8 * (7 - j))) & 0xFF
        used += 8
    else:
        if kind == K_PAD or kind == K_PAD_FOLD:
            while n and v[n - 1] == 32:  # trailing spaces: PAD SPACE ignores them
                n -= 1
        i = 0
        if kind == K_PAD or kind == K_PAD_FOLD:  # no 0x00 to escape: eight bytes at a time (SWAR)
            while i + 8 <= n:
                memcpy(&word, v + i, 8)
                # outside ASCII, or a byte below the space ((x - 0x20..) & ~x & 0x80.. flags b < 0x20)
                if word & HIGH_BITS or (word - SPACES) & ~word & HIGH_BITS:
                    return -1
                if kind == K_PAD_FOLD:  # a..z: b + 0x1F reaches 0x80 from 'a', b + 0x05 from '{'
                    word -= ((word + LOWER_FROM) & ~(word + LOWER_PAST) & HIGH_BITS) >> 2
                memcpy(dst + used, &word, 8)
                used += 8
                i += 8
        weights = _WEIGHTS[kind]
        while i < n:
            w = weights[v[i]]
            i += 1
            if w == 0:
                dst[used] = 0
                dst[used + 1] = 0xFF
                used += 2
                continue
            if w == INVALID:
                return -1
            dst[used] = <unsigned char> w
            used += 1
        dst[used] = 0
        dst[used + 1] = 0
        used += 2
    if descending:
        for i in range(begin, used):
            dst[i] = 0xFF - dst[i]
    return used


cdef object _key(bytearray buf, const unsigned char* p, Py_ssize_t start, Py_ssize_t end, int wanted,
                 int* columns, int* kinds, bint* descending, int nkeys, Py_ssize_t row):
    """A row's key (``bytes``) followed by the row's number (4 bytes, big-endian: equal keys sort in the rows'
    order, and the number says which row), or ``None``: a value its kind cannot key, or a row shorter than
    ``wanted``."""
    cdef Py_ssize_t at = start, used = 0, size
    cdef Py_ssize_t value_at[MAX_KEYS]
    cdef Py_ssize_t value_len[MAX_KEYS]
    cdef int i, k
    cdef long long n
    cdef unsigned char* dst
    for i in range(wanted):
        if at >= end:
            return None
        if p[at] == NULL_FIELD:
            value_len[i] = -1
            at += 1
            continue
        n = _lenenc(p, end, &at)
        if n < 0 or at + n > end:
            return None
        value_at[i] = at
        value_len[i] = n
        at += n
    for k in range(nkeys):
        i = columns[k]
        if value_len[i] < 0:
            dst = _room(buf, used + 1)
            dst[used] = 0xFF if descending[k] else 0
            used += 1
        else:
            used = _put_part(buf, used, p + value_at[i], value_len[i], kinds[k], descending[k])
            if used < 0:
                return None
    dst = _room(buf, used + 4)
    for k in range(4):
        dst[used + k] = (row >> (8 * (3 - k))) & 0xFF
    return PyBytes_FromStringAndSize(PyByteArray_AS_STRING(buf), used + 4)


cdef inline void _put_header(unsigned char* dst, Py_ssize_t length, int seq) noexcept:
    dst[0] = length & 0xFF
    dst[1] = (length >> 8) & 0xFF
    dst[2] = (length >> 16) & 0xFF
    dst[3] = seq & 0xFF


def merge_ordered(list answers, bint backend_eof, list keys, bint distinct, Py_ssize_t offset, Py_ssize_t limit,
                  Py_ssize_t visible=-1):
    """The rows of ``answers`` in ``keys``' order, as one answer; ``None``: they cannot be merged so (the pure
    twin has the contract)."""
    cdef int columns[MAX_KEYS]
    cdef int kinds[MAX_KEYS]
    cdef bint descending[MAX_KEYS]
    cdef int nkeys = len(keys), wanted = 0, k, seq
    cdef _Answer first, each
    cdef list layouts = [], keyed = []
    cdef bytearray buf = bytearray()
    cdef const unsigned char* p
    cdef const unsigned char* last = NULL
    cdef Py_ssize_t r, i, n, rows = 0, total, length, kept = 0, taken = 0, last_size = 0, size
    cdef Py_ssize_t* row_start = NULL
    cdef Py_ssize_t* row_length = NULL
    cdef const char** row_data = NULL
    cdef object key
    cdef bytes data, out, header
    cdef unsigned char* dst
    if not answers or nkeys == 0 or nkeys > MAX_KEYS:
        return None
    for k in range(nkeys):
        column, kind, desc = keys[k]
        columns[k], kinds[k], descending[k] = column, kind, desc
        if columns[k] < 0 or kinds[k] < K_BYTES or kinds[k] > K_UNSIGNED:
            return None
        if columns[k] + 1 > wanted:
            wanted = columns[k] + 1
    if wanted > MAX_KEYS:
        return None
    for data in answers:
        each = _split(data, backend_eof)
        if each is None:
            return None
        layouts.append(each)
        rows += each.rows
    first = <_Answer> layouts[0]
    if wanted > first.count or visible > first.count or visible == 0 or rows >= 1 << 32:
        return None
    if visible == first.count:
        visible = -1
    row_start = <Py_ssize_t*> PyMem_Malloc((rows + 1) * sizeof(Py_ssize_t))
    row_length = <Py_ssize_t*> PyMem_Malloc((rows + 1) * sizeof(Py_ssize_t))
    row_data = <const char**> PyMem_Malloc((rows + 1) * sizeof(char*))
    try:
        if row_start == NULL or row_length == NULL or row_data == NULL:
            raise MemoryError()
        n = 0
        for each in layouts:
            if each.count != first.count:
                return None
            p = <const unsigned char*> PyBytes_AS_STRING(each.data)
            for r in range(each.rows):
                key = _key(buf, p, each.spans[2 * r], each.spans[2 * r + 1], wanted, columns, kinds, descending,
                           nkeys, n)
                if key is None:
                    return None
                keyed.append(key)
                row_data[n] = <const char*> p
                row_start[n] = each.spans[2 * r]
                length = each.spans[2 * r + 1] - each.spans[2 * r]
                if visible >= 0:
                    length = _cut(p, each.spans[2 * r], each.spans[2 * r + 1], visible)
                    if length < 0:
                        return None
                row_length[n] = length
                n += 1
        keyed.sort()  # the row numbers at the keys' ends keep equal keys in the rows' order
        header = first.data[:first.header_end] if visible < 0 else _visible_header(first, visible, backend_eof)
        total = len(header) + 4 + (first.closing_end - first.closing_start)
        order = []
        for key in keyed:
            p = <const unsigned char*> PyBytes_AS_STRING(key)
            size = PyBytes_GET_SIZE(key) - 4
            if distinct and last != NULL and size == last_size and memcmp(p, last, size) == 0:
                continue  # DISTINCT: the first of a run of equal keys
            last, last_size = p, size
            taken += 1
            if taken <= offset:
                continue
            if limit >= 0 and kept == limit:
                break
            i = (<Py_ssize_t> p[size]) << 24 | (<Py_ssize_t> p[size + 1]) << 16 | p[size + 2] << 8 | p[size + 3]
            order.append(i)
            kept += 1
            total += 4 + row_length[i]
        out = PyBytes_FromStringAndSize(NULL, total)
        dst = <unsigned char*> PyBytes_AS_STRING(out)
        memcpy(dst, PyBytes_AS_STRING(header), len(header))
        n = len(header)
        seq = 2 + (first.count if visible < 0 else visible) + (1 if backend_eof else 0)  # after count, definitions, EOF
        for i in order:
            length = row_length[i]
            _put_header(dst + n, length, seq)
            memcpy(dst + n + 4, row_data[i] + row_start[i], length)
            n += 4 + length
            seq += 1
        length = first.closing_end - first.closing_start
        _put_header(dst + n, length, seq)
        memcpy(dst + n + 4, PyBytes_AS_STRING(first.data) + first.closing_start, length)
        return out
    finally:
        PyMem_Free(row_start)
        PyMem_Free(row_length)
        PyMem_Free(row_data)


cdef Py_ssize_t _cut(const unsigned char* p, Py_ssize_t start, Py_ssize_t end, Py_ssize_t visible) noexcept:
    """The length of a text row's first ``visible`` values (the sort columns added after them dropped); -1:
    the row is shorter."""
    cdef Py_ssize_t at = start, i
    cdef long long n
    for i in range(visible):
        if at >= end:
            return -1
        if p[at] == NULL_FIELD:
            at += 1
        else:
            n = _lenenc(p, end, &at)
            if n < 0 or at + n > end:
                return -1
            at += n
    return at - start


cdef bytes _visible_header(_Answer first, Py_ssize_t visible, bint backend_eof):
    """The first answer's header for its ``visible`` leading columns alone (a rare shape: built in Python)."""
    cdef bytes data = first.data
    cdef list payloads = []
    cdef Py_ssize_t at = 0, length, i
    for i in range(1 + first.count + (1 if backend_eof else 0)):
        length = data[at] | data[at + 1] << 8 | data[at + 2] << 16
        payloads.append(data[at + 4:at + 4 + length])
        at += 4 + length
    kept = [_count_payload(visible)] + payloads[1:1 + visible] + (payloads[1 + first.count:] if backend_eof else [])
    return b"".join([len(p).to_bytes(3, "little") + bytes((seq & 0xFF,)) + p for seq, p in enumerate(kept, 1)])


cdef bytes _count_payload(Py_ssize_t n):
    if n < 0xFB:
        return bytes((n,))
    return b"\xfc" + n.to_bytes(2, "little")


def text_rows(list answers, bint backend_eof):
    """The text rows of ``answers``: definitions, header end, rows' values, closing payload; ``None``: one cannot be
    read so (the pure twin has the contract)."""
    cdef _Answer first, each
    cdef const unsigned char* p
    cdef Py_ssize_t r, c, at, start, end, n
    cdef long long length
    cdef list rows = [], row, definitions = []
    if not answers:
        return None
    first = _split(<bytes?> answers[0], backend_eof)
    if first is None:
        return None
    p = <const unsigned char*> PyBytes_AS_STRING(first.data)
    at = 0
    n = 0
    while n <= first.count:  # the column count's packet, then each definition's
        length = p[at] | p[at + 1] << 8 | p[at + 2] << 16
        if n > 0:
            definitions.append(PyBytes_FromStringAndSize(<const char*> p + at + 4, length))
        at += 4 + length
        n += 1
    for n in range(len(answers)):
        each = first if n == 0 else _split(<bytes?> answers[n], backend_eof)
        if each is None or each.count != first.count:
            return None
        p = <const unsigned char*> PyBytes_AS_STRING(each.data)
        for r in range(each.rows):
            start, end = each.spans[2 * r], each.spans[2 * r + 1]
            at = start
            row = []
            for c in range(each.count):
                if at >= end:
                    return None
                if p[at] == NULL_FIELD:
                    row.append(None)
                    at += 1
                    continue
                length = _lenenc(p, end, &at)
                if length < 0 or at + length > end:
                    return None
                row.append(PyBytes_FromStringAndSize(<const char*> p + at, <Py_ssize_t> length))
                at += <Py_ssize_t> length
            rows.append(row)
    return definitions, first.header_end, rows, PyBytes_FromStringAndSize(
        <const char*> PyBytes_AS_STRING(first.data) + first.closing_start, first.closing_end - first.closing_start)
