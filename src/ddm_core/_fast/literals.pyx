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
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport Py_UNICODE_ISALNUM, Py_UNICODE_ISDECIMAL, PyUnicode_DATA, PyUnicode_KIND, PyUnicode_READ

__all__ = ["split", "skeleton", "fill", "string_value", "STRING", "NUMBER", "NEGATIVE"]

from decimal import Decimal

STRING, NUMBER, NEGATIVE = 0, 1, 2  # the pure twin's

DEF C_STRING = 0
DEF C_NEGATIVE = 2


cdef inline void _put(tuple t, Py_ssize_t i, object item):
    Py_INCREF(item)
    PyTuple_SET_ITEM(t, i, item)


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


@cython.boundscheck(False)
@cython.wraparound(False)
def split(str sql):
    cdef Py_ssize_t n = len(sql), i = 0, last = 0, end, j
    cdef Py_UCS4 c, d
    cdef int group
    cdef list out = []
    cdef int kind = PyUnicode_KIND(sql)
    cdef void* chars = PyUnicode_DATA(sql)
    while i < n:
        c = PyUnicode_READ(kind, chars, i)
        end = -1
        group = 1
        if c == u'/':
            if i + 1 < n and PyUnicode_READ(kind, chars, i + 1) == u'*':
                j = sql.find(u"*/", i + 2)
                if j >= 0:
                    end = j + 2
        elif c == u'-':
            if i + 1 < n and PyUnicode_READ(kind, chars, i + 1) == u'-':
                if i + 2 >= n:
                    end = n
                else:
                    d = PyUnicode_READ(kind, chars, i + 2)
                    if d == u' ' or d == u'\t':
                        j = sql.find(u"\n", i + 2)
                        end = n if j < 0 else j
                    elif d == u'\n':
                        end = i + 2
        elif c == u'#':
            j = sql.find(u"\n", i + 1)
            end = n if j < 0 else j
        elif c == u'`':
            end = _quoted(kind, chars, i, n, c, False)
        elif c == u'"':
            end = _quoted(kind, chars, i, n, c, True)
        elif c == u"'":
            end = _quoted(kind, chars, i, n, c, True)
            group = 2
        elif c == u'.' or _decimal(c):
            end = _number(kind, chars, i, n)
            group = 3
        if end < 0:
            i += 1
            continue
        token = sql[i:end]
        out.append(sql[last:i])
        out.append(token if group == 1 else None)
        out.append(token if group == 2 else None)
        out.append(token if group == 3 else None)
        last = i = end
    out.append(sql[last:])
    return out


def skeleton(list parts):
    cdef Py_ssize_t n = len(parts), matches = n // 4, k
    cdef tuple texts = PyTuple_New(matches + 1), others = PyTuple_New(matches), strings = PyTuple_New(matches)
    for k in range(matches + 1):
        _put(texts, k, parts[4 * k])
    for k in range(matches):
        _put(others, k, parts[4 * k + 1])
        _put(strings, k, True if parts[4 * k + 2] is not None and parts[4 * k + 2] else False)
    return texts, others, strings


def fill(list parts, tuple choice):
    cdef list params = []
    cdef Py_ssize_t index
    cdef long read
    cdef str text
    for pair in choice:
        index = (<tuple> pair)[0]
        read = (<tuple> pair)[1]
        text = parts[index]
        if read == C_STRING:
            params.append(string_value(text))
        else:
            value = Decimal(text) if u"." in text else _integer(text)
            if read == C_NEGATIVE:
                value = -value
                parts[index - 3] = (<str> parts[index - 3])[:-1]
            params.append(value)
        parts[index] = u"%s"
    return u"".join([p for p in parts if p]), params


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
