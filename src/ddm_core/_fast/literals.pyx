# cython: language_level=3
"""Compiled twin of ``literals_py.py``: a statement's text split at its literals in one pass.

Same function and results as the pure twin, whose regular expression is the contract (its docstring;
tests/test_literal_split.py compares the two on generated text). Where the expression tries its
alternatives at each position, this reads each character once: a quote, a comment mark, a ``.`` or a
digit starts a token, anything else is text. The expression's backtracking is kept where it shows: an
unterminated quoted token ends at the first quote of its last doubled pair (or is no token), and a number
touching a word character, ``.`` or ``$`` on either side is none. Digits and word characters are Unicode's,
as ``\\d`` and ``\\w`` are for ``str`` patterns.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from cpython.unicode cimport Py_UNICODE_ISALNUM, Py_UNICODE_ISDECIMAL, PyUnicode_DATA, PyUnicode_KIND, PyUnicode_READ
from libc.string cimport memcpy


cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    object PyUnicode_DecodeLatin1(const char* s, Py_ssize_t size, const char* errors)
    bint PyUnicode_IS_ASCII(object o)

__all__ = ["split", "fill", "string_value", "Parameterizer", "filled_text", "STRING", "NUMBER", "NEGATIVE"]

from decimal import Decimal

STRING, NUMBER, NEGATIVE = 0, 1, 2  # the pure twin's

DEF C_STRING = 0
DEF C_NEGATIVE = 2
DEF MATCHES = 16  # a statement's tokens held without an allocation

#: A literal's mark in a skeleton's key (the pure twin's; written as bytes by ``_key``): no text between literals
#: holds a NUL
cdef str _STRING_MARK = u"\0'"
cdef str _NUMBER_MARK = u"\0#"


cdef inline bint _decimal(Py_UCS4 c):
    """``\\d``: Unicode's decimal digits, ASCII's without a call (nearly every character of a statement)."""
    if c < 128:
        return u'0' <= c <= u'9'
    return Py_UNICODE_ISDECIMAL(c)


cdef inline bint _touches(Py_UCS4 c):
    """``[\\w.$]``: what may not touch a number."""
    if c < 128:
        return ((u'a' <= c <= u'z') or (u'A' <= c <= u'Z') or (u'0' <= c <= u'9') or c == u'_' or c == u'.'
                or c == u'$')
    return Py_UNICODE_ISALNUM(c)


cdef Py_ssize_t _quoted(int kind, void* sql, Py_ssize_t start, Py_ssize_t n, Py_UCS4 quote, bint backslash):
    """The end of the quoted token opening at ``start`` (doubled quotes inside, and ``\\x`` escapes when
    ``backslash``); -1: none. ``kind`` and ``sql``: the statement's characters (``PyUnicode_KIND``, ``_DATA``)."""
    cdef Py_ssize_t j = start + 1, pair = -1
    cdef Py_UCS4 c
    while j < n:
        c = PyUnicode_READ(kind, sql, j)
        if backslash and c == u'\\':
            if j + 1 >= n:
                break
            j += 2
            continue
        if c == quote:
            if j + 1 < n and PyUnicode_READ(kind, sql, j + 1) == quote:
                pair = j
                j += 2
                continue
            return j + 1
        j += 1
    return pair + 1 if pair >= 0 else -1  # unterminated: the expression backtracks to its last doubled quote


cdef Py_ssize_t _number(int kind, void* sql, Py_ssize_t start, Py_ssize_t n):
    """The end of the number at ``start`` (``\\d+\\.\\d*``, ``\\.\\d+`` or ``\\d+``, touching no ``[\\w.$]``); -1: none."""
    cdef Py_ssize_t j = start, k
    if start > 0 and _touches(PyUnicode_READ(kind, sql, start - 1)):
        return -1
    if PyUnicode_READ(kind, sql, start) == u'.':
        j = start + 1
        while j < n and _decimal(PyUnicode_READ(kind, sql, j)):
            j += 1
        if j == start + 1 or (j < n and _touches(PyUnicode_READ(kind, sql, j))):
            return -1
        return j
    while j < n and _decimal(PyUnicode_READ(kind, sql, j)):
        j += 1
    if j < n and PyUnicode_READ(kind, sql, j) == u'.':
        k = j + 1
        while k < n and _decimal(PyUnicode_READ(kind, sql, k)):
            k += 1
        return k if k >= n or not _touches(PyUnicode_READ(kind, sql, k)) else -1
    return j if j >= n or not _touches(PyUnicode_READ(kind, sql, j)) else -1


#: The ASCII characters a token may start at (``/ - # ` " ' .`` and the digits): a one-byte text's scan skips the
#: others (nearly all of a statement) by one lookup each
cdef bint _STARTS[128]
for _c in u"/-#`\"'.0123456789":
    _STARTS[ord(_c)] = True


cdef Py_ssize_t _token(str sql, int kind, void* chars, Py_ssize_t i, Py_ssize_t n, Py_ssize_t* end, int* group):
    """The next token at or after ``i``: its start (``n``: none), its end and its group (1 other, 2 string,
    3 number) in ``end`` and ``group``; the scan :func:`split` and :class:`Parameterizer` share."""
    cdef Py_UCS4 c, d
    cdef Py_ssize_t j, stop
    cdef const unsigned char* ascii = <const unsigned char*> chars
    while i < n:
        if kind == 1:
            while i < n and (ascii[i] < 128 and not _STARTS[ascii[i]]):
                i += 1
            if i == n:
                break
        c = PyUnicode_READ(kind, chars, i)
        stop = -1
        group[0] = 1
        if c == u'/':
            if i + 1 < n and PyUnicode_READ(kind, chars, i + 1) == u'*':
                j = sql.find(u"*/", i + 2)
                if j >= 0:
                    stop = j + 2
        elif c == u'-':
            if i + 1 < n and PyUnicode_READ(kind, chars, i + 1) == u'-':
                if i + 2 >= n:
                    stop = n
                else:
                    d = PyUnicode_READ(kind, chars, i + 2)
                    if d == u' ' or d == u'\t':
                        j = sql.find(u"\n", i + 2)
                        stop = n if j < 0 else j
                    elif d == u'\n':
                        stop = i + 2
        elif c == u'#':
            j = sql.find(u"\n", i + 1)
            stop = n if j < 0 else j
        elif c == u'`':
            stop = _quoted(kind, chars, i, n, c, False)
        elif c == u'"':
            stop = _quoted(kind, chars, i, n, c, True)
        elif c == u"'":
            stop = _quoted(kind, chars, i, n, c, True)
            group[0] = 2
        elif c == u'.' or _decimal(c):
            stop = _number(kind, chars, i, n)
            group[0] = 3
        if stop >= 0:
            end[0] = stop
            return i
        i += 1
    return n


@cython.boundscheck(False)
@cython.wraparound(False)
def split(str sql):
    cdef Py_ssize_t n = len(sql), i = 0, last = 0, end = 0
    cdef int group = 0
    cdef list out = []
    cdef int kind = PyUnicode_KIND(sql)
    cdef void* chars = PyUnicode_DATA(sql)
    while True:
        i = _token(sql, kind, chars, last, n, &end, &group)
        if i >= n:
            break
        token = sql[i:end]
        out.append(sql[last:i])
        out.append(token if group == 1 else None)
        out.append(token if group == 2 else None)
        out.append(token if group == 3 else None)
        last = end
    out.append(sql[last:])
    return out


def fill(list parts, tuple choice):
    cdef list params = []
    cdef Py_ssize_t index
    cdef long read
    cdef str text
    for pair in choice:
        index = (<tuple> pair)[0]
        read = (<tuple> pair)[1]
        text = parts[index]
        params.append(_value(text, read))
        if read == C_NEGATIVE:  # its '-' ends the text before the match (index - 3: 4 parts a match)
            parts[index - 3] = (<str> parts[index - 3])[:-1]
        parts[index] = u"%s"
    return u"".join([p for p in parts if p]), params


cdef object _value(str token, long read):
    """A taken literal's value, read as ``read`` says (a string, a number, a number with the ``-`` before it)."""
    if read == C_STRING:
        return string_value(token)
    value = Decimal(token) if u"." in token else _integer(token)
    return -value if read == C_NEGATIVE else value


cdef object _integer(str text):
    """``int(text)`` of a number token: up to 18 ASCII digits read here, anything else by ``int``."""
    cdef Py_ssize_t n = len(text), i
    cdef int kind = PyUnicode_KIND(text)
    cdef void* chars = PyUnicode_DATA(text)
    cdef long long value = 0
    cdef Py_UCS4 c
    if n == 0 or n > 18:
        return int(text)
    for i in range(n):
        c = PyUnicode_READ(kind, chars, i)
        if c < u'0' or c > u'9':
            return int(text)  # a digit of another script: Python's reading
        value = value * 10 + (<long long> c - 48)
    return value


def string_value(str token):
    """A ``'...'`` literal's value: its body when nothing in it is escaped, else the pure twin's reading."""
    if u"\\" in token or token.find(u"''", 1, len(token) - 1) >= 0:
        from ddm_core._fast.literals_py import string_value as read  # rare: not imported with the unit
        return read(token)
    return token[1:-1]


cdef struct _Match:
    Py_ssize_t start, end
    int group


cdef struct _Cut:
    Py_ssize_t start, end  # a span of the text
    char mark[2]  # the two ASCII characters written in its place


cdef _Cut* _new_cuts(Py_ssize_t count) except NULL:
    cdef _Cut* cuts = <_Cut*> PyMem_Malloc((count + 1) * sizeof(_Cut))
    if cuts is NULL:
        raise MemoryError()
    return cuts


@cython.final
@cython.auto_pickle(False)  # one process's memo: never pickled
cdef class Parameterizer:
    """``proxy/literals.parameterize`` (the pure twin's ``Parameterizer``: its docstring has the contract)."""

    cdef dict _choices
    cdef Py_ssize_t _text_limit, _entries
    cdef object _first

    def __init__(self, Py_ssize_t text_limit, Py_ssize_t entries, first):
        self._choices = {}
        self._text_limit = text_limit
        self._entries = entries
        self._first = first

    def __call__(self, str sql):
        if u"%" in sql or u"?" in sql:
            return None
        cdef Py_ssize_t n = len(sql)
        if n > self._text_limit or u"\0" in sql:
            return self._first(sql, None, None)
        cdef _Match stack[MATCHES]
        cdef _Match* matches = stack
        cdef Py_ssize_t count = 0, capacity = MATCHES, last = 0, end = 0, start
        cdef int group = 0
        cdef int kind = PyUnicode_KIND(sql)
        cdef void* chars = PyUnicode_DATA(sql)
        cdef _Match* grown
        try:
            while True:
                start = _token(sql, kind, chars, last, n, &end, &group)
                if start >= n:
                    break
                if count == capacity:
                    grown = <_Match*> PyMem_Malloc(2 * capacity * sizeof(_Match)) if matches is stack else \
                        <_Match*> PyMem_Realloc(matches, 2 * capacity * sizeof(_Match))
                    if grown is NULL:
                        raise MemoryError()
                    if matches is stack:
                        memcpy(grown, stack, count * sizeof(_Match))
                    matches, capacity = grown, 2 * capacity
                matches[count].start, matches[count].end, matches[count].group = start, end, group
                count += 1
                last = end
            key = self._key(sql, matches, count)
            found = PyDict_GetItem(self._choices, key)
            if found is NULL:
                return self._first(sql, split(sql), key)
            if <object> found is None:
                return None
            return _taken(sql, matches, <tuple> <object> found)
        finally:
            if matches is not stack:
                PyMem_Free(matches)

    cdef str _key(self, str sql, _Match* matches, Py_ssize_t count):
        """The skeleton's key (``key_of(split(sql))``): the text with every literal a mark."""
        cdef Py_ssize_t k, literals = 0, length = len(sql)
        cdef _Cut* cuts = _new_cuts(count)
        try:
            for k in range(count):
                if matches[k].group != 1:
                    cuts[literals].start, cuts[literals].end = matches[k].start, matches[k].end
                    cuts[literals].mark[0] = 0  # \0' or \0#
                    cuts[literals].mark[1] = 39 if matches[k].group == 2 else 35
                    length += 2 - (matches[k].end - matches[k].start)
                    literals += 1
            return _marked(sql, cuts, literals, length)
        finally:
            PyMem_Free(cuts)

    def key_of(self, list parts):
        cdef Py_ssize_t k, n = len(parts)
        pieces = []
        for k in range(0, n - 1, 4):
            pieces.append(parts[k])
            other = parts[k + 1]
            pieces.append(other if other is not None else _STRING_MARK if parts[k + 2] is not None else _NUMBER_MARK)
        pieces.append(parts[n - 1])
        return u"".join(pieces)

    def key(self, str sql):
        """The key :meth:`__call__` looks ``sql``'s skeleton up by (``None``: it looks up none)."""
        if u"%" in sql or u"?" in sql or len(sql) > self._text_limit or u"\0" in sql:
            return None
        parts = split(sql)
        return self.key_of(parts)

    def remember(self, str key, choice):
        if len(self._choices) >= self._entries:
            self._choices.clear()
        self._choices[key] = choice

    def __len__(self):
        return len(self._choices)


cdef tuple _taken(str sql, _Match* matches, tuple choice):
    """``fill(split(sql), choice)`` from the scan's matches: the taken literals as ``%s``, their values."""
    cdef list params = []
    cdef Py_ssize_t index, m, cut, length = len(sql), k, taken = len(choice)
    cdef long read
    cdef _Cut* cuts = _new_cuts(taken)
    try:
        for k in range(taken):
            pair = <tuple> choice[k]
            index = pair[0]
            read = pair[1]
            m = (index - 2) >> 2  # 4 parts a match: a string at 4m + 2, a number at 4m + 3
            params.append(_value(sql[matches[m].start:matches[m].end], read))
            cut = matches[m].start - 1 if read == C_NEGATIVE else matches[m].start  # its '-' ends the text before it
            cuts[k].start, cuts[k].end = cut, matches[m].end
            cuts[k].mark[0] = 37  # %s
            cuts[k].mark[1] = 115
            length += 2 - (matches[m].end - cut)
        return _marked(sql, cuts, taken, length), params
    finally:
        PyMem_Free(cuts)


cdef str _marked(str sql, _Cut* cuts, Py_ssize_t count, Py_ssize_t length):
    """``sql`` with each of ``cuts``' spans (in order) replaced by its two characters; ``length``: the result's.
    An ASCII text's is written straight into its string."""
    cdef Py_ssize_t k, last = 0, piece, at = 0
    cdef char* out
    cdef const char* text
    if not PyUnicode_IS_ASCII(sql):
        pieces = []
        for k in range(count):
            pieces.append(sql[last:cuts[k].start])
            pieces.append(PyUnicode_DecodeLatin1(cuts[k].mark, 2, NULL))
            last = cuts[k].end
        pieces.append(sql[last:])
        return u"".join(pieces)
    result = PyUnicode_New(length, 127)
    out = <char*> PyUnicode_DATA(result)
    text = <const char*> PyUnicode_DATA(sql)
    for k in range(count):
        piece = cuts[k].start - last
        memcpy(out + at, text + last, piece)
        at += piece
        out[at], out[at + 1] = cuts[k].mark[0], cuts[k].mark[1]
        at += 2
        last = cuts[k].end
    memcpy(out + at, text + last, len(sql) - last)
    return <str> result


DEF INT_DIGITS = 20  # a long long's decimal digits and its sign


@cython.boundscheck(False)
@cython.wraparound(False)
def filled_text(str sql, params):
    cdef Py_ssize_t n = len(sql), i, count, k = 0, size = 0, at = 0, digits
    cdef int overflow = 0
    cdef long long value
    cdef unsigned long long magnitude
    cdef char number[INT_DIGITS]
    cdef const char* text
    cdef char* out
    if not PyUnicode_IS_ASCII(sql) or (type(params) is not tuple and type(params) is not list):
        return None
    text = <const char*> PyUnicode_DATA(sql)
    count = len(params)
    i = 0
    while i < n:  # the marks: %s a value's place, %% a %, anything else not ours to read
        if text[i] == 37:
            if i + 1 >= n:
                return None
            if text[i + 1] == 115:
                if k == count:
                    return None
                p = params[k]
                if not PyLong_CheckExact(p):
                    return None
                value = PyLong_AsLongLongAndOverflow(p, &overflow)
                if overflow:
                    return None
                size += _int_length(value)
                k += 1
            elif text[i + 1] != 37:
                return None
            else:
                size += 1
            i += 2
        else:
            size += 1
            i += 1
    if k != count:
        return None
    result = PyBytes_FromStringAndSize(NULL, size)
    out = PyBytes_AS_STRING(result)
    i = k = 0
    while i < n:
        if text[i] != 37:
            out[at] = text[i]
            at += 1
            i += 1
            continue
        if text[i + 1] == 37:
            out[at] = 37
            at += 1
        else:
            value = PyLong_AsLongLongAndOverflow(params[k], &overflow)
            k += 1
            magnitude = <unsigned long long> (-(value + 1)) + 1 if value < 0 else <unsigned long long> value
            digits = 0
            while True:
                number[digits] = 48 + magnitude % 10
                magnitude //= 10
                digits += 1
                if magnitude == 0:
                    break
            if value < 0:
                out[at] = 45  # -
                at += 1
            while digits:
                digits -= 1
                out[at] = number[digits]
                at += 1
        i += 2
    return result


cdef inline Py_ssize_t _int_length(long long value):
    """The characters of ``str(value)``."""
    cdef unsigned long long magnitude = <unsigned long long> (-(value + 1)) + 1 if value < 0 else <unsigned long long> value
    cdef Py_ssize_t length = 1 if value < 0 else 0
    while True:
        length += 1
        magnitude //= 10
        if magnitude == 0:
            return length
