# cython: language_level=3
"""Compiled twin of ``merge_py``: k-way streaming merge of sorted row sources.

A binary heap of source indices over per-source key values decoded once per
row: int64, double and str keys compare in C; anything else (Decimal,
datetime, big ints, mixed int/float) falls back to Python's ``<``.

A single sort key whose held values are all int64 (the common ``ORDER BY``
an integer column) is merged by a loser tree instead: its nodes hold the key
and the source index inline, so a pull replays log2(k) compares without a
call or a branch. As soon as a held key is anything else (NULL, float, big
int, ...) the heap is rebuilt in O(k) and takes over; once every held key is
an int64 again (and at least k rows have been merged since) the tree is
rebuilt, so the switches cost O(1) per row amortised.
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport Py_LT, PyObject, PyObject_RichCompareBool
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF, Py_XINCREF
cimport cython

from ddm_core.errors import MergeError
from ddm_core._fast.merge_py import _key_value, check_merge_args

__all__ = ["heap_merge", "HeapMerge", "check_merge_args"]

cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
    bint PyLong_CheckExact(PyObject* o)
    bint PyFloat_CheckExact(PyObject* o)
    bint PyUnicode_CheckExact(PyObject* o)
    bint PyTuple_CheckExact(object o)
    double PyFloat_AS_DOUBLE(PyObject* o)
    PyObject* PyTuple_GET_ITEM(object t, Py_ssize_t i)
    Py_ssize_t PyTuple_GET_SIZE(object t)
    PyObject* PyIter_Next(object o)
    PyObject** PySequence_Fast_ITEMS(object o)
    Py_ssize_t PySequence_Fast_GET_SIZE(object o)
    bint PyTuple_CheckExact_RAW "PyTuple_CheckExact"(PyObject* o)
    Py_ssize_t PyTuple_GET_SIZE_RAW "PyTuple_GET_SIZE"(PyObject* o)
    PyObject* PyTuple_GET_ITEM_RAW "PyTuple_GET_ITEM"(PyObject* t, Py_ssize_t i)
    PyObject* PyErr_Occurred()
    int PyUnicode_Compare(PyObject* a, PyObject* b) except? -1
    PyObject* PyList_GET_ITEM_RAW "PyList_GET_ITEM"(object o, Py_ssize_t i)
    PyObject** PySequence_Fast_ITEMS_RAW "PySequence_Fast_ITEMS"(PyObject* o)
    Py_ssize_t PySequence_Fast_GET_SIZE_RAW "PySequence_Fast_GET_SIZE"(PyObject* o)
    long long PyLong_AsLongLongAndOverflow_RAW "PyLong_AsLongLongAndOverflow"(PyObject* o, int* overflow)

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define ddm_prefetch(p) __builtin_prefetch((const void*)(p))
    #else
    #define ddm_prefetch(p) ((void)0)
    #endif
    """
    void ddm_prefetch(const void* p) nogil

# Merging is bound by cache misses on row tuples and key objects (measured with
# perf: ~95 % of _pull's samples on the first load of a key), not by comparisons.
# Rows of list / tuple sources are read by index, so the rows PREFETCH ahead and
# their first key can be prefetched while the heap works.
cdef enum:
    PREFETCH = 4
    ITEMS_AHEAD = 32  # items (8 bytes each) four cache lines past the next read

cdef enum Kind:
    K_NULL, K_INT, K_FLOAT, K_STR, K_OBJ

# The loser tree's nodes, and its replay in C: written so that the compiler
# emits no branch (the outcome of each compare is a coin toss; mispredicted
# branches cost more than the rest of the replay).
cdef extern from *:
    """
    #include <limits.h>
    typedef struct { long long key; Py_ssize_t src; } ddm_node;

    /* (ak, as) < (bk, bs), without a branch. */
    static inline int ddm_pair_lt(long long ak, Py_ssize_t as, long long bk, Py_ssize_t bs) {
    #if defined(__SIZEOF_INT128__)
        /* src is >= 0: (key, src) orders as the 128-bit integer key * 2**64 + src
           (shifted unsigned: a negative key shifted signed is undefined in C) */
        __int128 x = (__int128)(((unsigned __int128)(unsigned long long)ak << 64) | (unsigned long long)as);
        __int128 y = (__int128)(((unsigned __int128)(unsigned long long)bk << 64) | (unsigned long long)bs);
        return x < y;
    #else
        return (ak < bk) | ((ak == bk) & (as < bs));
    #endif
    }

    static inline int ddm_node_lt(ddm_node a, ddm_node b) {
        return ddm_pair_lt(a.key, a.src, b.key, b.src);
    }

    /* Replay cur's path from tree[pos] to the root: each node keeps the loser, the
       winner goes up. Returns the overall winner. */
    static inline ddm_node ddm_replay(ddm_node *tree, Py_ssize_t pos, ddm_node cur) {
        /* Scalars, not the struct: the loop-carried chain stays in general registers
           (compare, then masks). */
        long long ck = cur.key;
        Py_ssize_t cs = cur.src;
        while (pos) {
            long long tk = tree[pos].key;
            Py_ssize_t ts = tree[pos].src;
    #if defined(__GNUC__)
            /* Keep the pairs out of vector registers (gcc's SLP would move them there
               and back at every level: a longer chain). Emits no instruction. */
            __asm__("" : "+r"(ck), "+r"(cs), "+r"(tk), "+r"(ts));
    #endif
            int w = ddm_pair_lt(tk, ts, ck, cs);
            /* t wins (m all ones): it goes up, cur stays here as the loser */
            long long m = -(long long)w;
            long long xk = (tk ^ ck) & m;
            Py_ssize_t xs = (ts ^ cs) & (Py_ssize_t)m;
            tree[pos].key = tk ^ xk;
            tree[pos].src = ts ^ xs;
            ck ^= xk;
            cs ^= xs;
            pos >>= 1;
        }
        cur.key = ck;
        cur.src = cs;
        return cur;
    }
    """
    ctypedef struct Node "ddm_node":
        long long key  # the int64 key; ~key descending, so the tree always orders ascending
        Py_ssize_t src  # ties by source index; an exhausted source: past every real one
    # Greater than (key, src) of every live source: key LLONG_MAX, src >= the leaf count.
    const long long LLONG_MAX
    bint _node_lt "ddm_node_lt"(Node a, Node b) noexcept nogil
    Node _replay_path "ddm_replay"(Node* tree, Py_ssize_t pos, Node cur) noexcept nogil


cdef struct KeyVal:
    Kind kind
    long long i
    double d
    PyObject* o  # borrowed from the source's held key owner


cdef int _generic(PyObject* a, PyObject* b, Py_ssize_t col) except -2:
    try:
        if PyObject_RichCompareBool(<object>a, <object>b, Py_LT):
            return -1
        if PyObject_RichCompareBool(<object>b, <object>a, Py_LT):
            return 1
    except (TypeError, ArithmeticError):  # ArithmeticError: NaN against a Decimal
        raise MergeError(
            f"sort key column {col} holds values that cannot be compared: "
            f"{type(<object>a).__name__} and {type(<object>b).__name__}",
            column=col,
        ) from None
    return 0


cdef inline int _compare(KeyVal* a, KeyVal* b, Py_ssize_t col) except -2:
    if a.kind == K_NULL:
        return 0 if b.kind == K_NULL else -1
    if b.kind == K_NULL:
        return 1
    if a.kind == b.kind:
        if a.kind == K_INT:
            return (a.i > b.i) - (a.i < b.i)
        if a.kind == K_FLOAT:
            return (a.d > b.d) - (a.d < b.d)
        if a.kind == K_STR:
            return PyUnicode_Compare(a.o, b.o)
    return _generic(a.o, b.o, col)


@cython.final
cdef class HeapMerge:
    """Iterator returned by :func:`heap_merge`."""

    cdef list _iters      # source iterators, by source index
    # Owned references (C arrays: list item stores cost more than the rest of a pull).
    cdef PyObject** _rowp  # the row held for each source
    cdef PyObject** _ownp  # what owns the key objects of that row
    cdef Py_ssize_t _k, _nkeys, _size, _offset, _limit
    cdef bint _started
    cdef Py_ssize_t* _cols
    cdef bint* _desc
    cdef KeyVal* _vals    # _k rows × _nkeys keys
    cdef Py_ssize_t* _heap
    cdef Py_ssize_t* _pos  # next index of a list / tuple source; -1: an iterator
    # The int64 loser tree (one key only): _tree[1.._leaves) hold the losers,
    # _win the winner; _wins is scratch (2 × _leaves nodes) to build it.
    cdef bint _can_tree   # one sort key: the tree may be used
    cdef bint _use_tree   # the tree, not the heap, orders the live sources
    cdef long long _flip  # 0 ascending, -1 descending (key ^ -1 == ~key)
    cdef Py_ssize_t _leaves, _nonint, _since
    cdef Node* _tree
    cdef Node* _wins
    cdef Node _win

    def __cinit__(self):
        self._cols = NULL
        self._desc = NULL
        self._vals = NULL
        self._heap = NULL
        self._pos = NULL
        self._rowp = NULL
        self._ownp = NULL
        self._tree = NULL
        self._wins = NULL

    def __dealloc__(self):
        self._release()
        PyMem_Free(self._rowp)
        PyMem_Free(self._ownp)
        PyMem_Free(self._cols)
        PyMem_Free(self._desc)
        PyMem_Free(self._vals)
        PyMem_Free(self._heap)
        PyMem_Free(self._pos)
        PyMem_Free(self._tree)
        PyMem_Free(self._wins)

    cdef int _init(self, list iters, tuple cols, tuple descs, object offset, object limit) except -1:
        cdef Py_ssize_t j
        self._iters = iters
        self._k = len(iters)
        self._nkeys = len(cols)
        # Python ints of any size are valid (see check_merge_args); no stream yields
        # more than PY_SSIZE_T_MAX rows, so clamping changes no result.
        self._offset = min(offset, PY_SSIZE_T_MAX)
        self._limit = -1 if limit is None or limit > PY_SSIZE_T_MAX else limit
        self._cols = <Py_ssize_t*>PyMem_Malloc((self._nkeys + 1) * sizeof(Py_ssize_t))
        self._desc = <bint*>PyMem_Malloc((self._nkeys + 1) * sizeof(bint))
        self._vals = <KeyVal*>PyMem_Malloc((self._k * self._nkeys + 1) * sizeof(KeyVal))
        self._heap = <Py_ssize_t*>PyMem_Malloc((self._k + 1) * sizeof(Py_ssize_t))
        self._pos = <Py_ssize_t*>PyMem_Malloc((self._k + 1) * sizeof(Py_ssize_t))
        self._rowp = <PyObject**>PyMem_Malloc((self._k + 1) * sizeof(PyObject*))
        self._ownp = <PyObject**>PyMem_Malloc((self._k + 1) * sizeof(PyObject*))
        if not (self._cols and self._desc and self._vals and self._heap and self._pos and self._rowp and self._ownp):
            raise MemoryError()
        for j in range(self._k):
            self._rowp[j] = NULL
            self._ownp[j] = NULL
        for j in range(self._k):
            source = iters[j]
            if type(source) is list or type(source) is tuple:
                self._pos[j] = 0  # read by index (a list iterator reads live too)
            else:
                self._pos[j] = -1
                iters[j] = iter(source)
        for j in range(self._nkeys):
            self._cols[j] = cols[j]
            self._desc[j] = descs[j]
        self._size = 0
        self._started = False
        self._use_tree = False
        self._nonint = 0
        self._since = 0
        self._can_tree = self._nkeys == 1 and self._k > 0
        if self._can_tree:
            self._flip = -1 if self._desc[0] else 0
            self._leaves = 1
            while self._leaves < self._k:
                self._leaves *= 2
            self._tree = <Node*>PyMem_Malloc(self._leaves * sizeof(Node))
            self._wins = <Node*>PyMem_Malloc(2 * self._leaves * sizeof(Node))
            if not (self._tree and self._wins):
                raise MemoryError()
        return 0

    cdef int _prime(self) except -1:
        cdef Py_ssize_t s
        self._started = True
        if self._limit == 0:
            self._finish()
            return 0
        for s in range(self._k):
            if self._pull(s):
                self._heap[self._size] = s
                self._size += 1
                if self._can_tree and self._vals[s].kind != K_INT:
                    self._nonint += 1
        if self._can_tree and self._nonint == 0:
            self._build_tree()
        else:
            self._build_heap()
        return 0

    cdef int _build_heap(self) except -1:
        """Order the live sources (those holding a row) by the heap."""
        cdef Py_ssize_t s
        self._use_tree = False
        self._since = 0
        self._size = 0
        for s in range(self._k):
            if self._rowp[s] != NULL:
                self._heap[self._size] = s
                self._size += 1
        for s in range(self._size // 2 - 1, -1, -1):
            self._sift_down(s)
        return 0

    cdef void _build_tree(self):
        """Order the live sources, whose keys are all int64, by the loser tree."""
        cdef Py_ssize_t s, pos, P = self._leaves
        cdef Node* w = self._wins
        cdef Node a, b
        self._use_tree = True
        for s in range(P):
            if s < self._k and self._rowp[s] != NULL:
                w[P + s].key = self._vals[s].i ^ self._flip
                w[P + s].src = s
            else:
                w[P + s].key = LLONG_MAX
                w[P + s].src = P + s
        for pos in range(P - 1, 0, -1):
            a = w[2 * pos]
            b = w[2 * pos + 1]
            if _node_lt(a, b):
                w[pos] = a
                self._tree[pos] = b
            else:
                w[pos] = b
                self._tree[pos] = a
        self._win = w[1]

    cdef int _pull(self, Py_ssize_t s) except -1:
        """Load the next row of source ``s``; 1 if there was one, 0 at its end."""
        cdef PyObject* p = NULL
        cdef PyObject** items
        cdef PyObject* ahead
        cdef Py_ssize_t i = self._pos[s], n
        cdef object row, owner
        cdef Py_ssize_t j, col, width
        cdef KeyVal* kv
        cdef PyObject* v
        cdef int overflow
        if i >= 0:
            source = self._iters[s]
            n = PySequence_Fast_GET_SIZE(source)
            if i < n:
                items = PySequence_Fast_ITEMS(source)
                p = items[i]
                Py_INCREF(<object>p)
                self._pos[s] = i + 1
                if i + ITEMS_AHEAD < n:
                    ddm_prefetch(&items[i + ITEMS_AHEAD])
                if i + 2 * PREFETCH < n:
                    ddm_prefetch(items[i + 2 * PREFETCH])
                if i + PREFETCH < n and self._nkeys:
                    ahead = items[i + PREFETCH]  # prefetched PREFETCH pulls ago
                    if PyTuple_CheckExact_RAW(ahead) and self._cols[0] < PyTuple_GET_SIZE_RAW(ahead):
                        ddm_prefetch(PyTuple_GET_ITEM_RAW(ahead, self._cols[0]))
        else:
            p = PyIter_Next(self._iters[s])
        if p == NULL:
            if PyErr_Occurred() != NULL:
                return -1
            self._hold(s, NULL, NULL)
            return 0
        row = <object>p
        Py_DECREF(row)
        if PyTuple_CheckExact(row):
            owner = row
            width = PyTuple_GET_SIZE(row)
            for j in range(self._nkeys):
                if self._cols[j] >= width:
                    raise MergeError(
                        f"sort key column {self._cols[j]} is outside a row of {width} columns",
                        column=self._cols[j],
                    )
        else:
            # Other sequences: take the key values out once, into a tuple we own.
            # Through the twin's checked getter: this module is compiled with
            # boundscheck=False, and an unchecked list index reads past the row.
            owner = tuple([_key_value(row, self._cols[j]) for j in range(self._nkeys)])
        # A tuple row owns its keys: nothing more to hold (the tree's refill relies on it).
        self._hold(s, <PyObject*>row, NULL if owner is row else <PyObject*>owner)
        for j in range(self._nkeys):
            col = self._cols[j] if owner is row else j
            v = PyTuple_GET_ITEM(owner, col)
            kv = &self._vals[s * self._nkeys + j]
            kv.o = v
            if v == <PyObject*>None:
                kv.kind = K_NULL
            elif PyLong_CheckExact(v):
                overflow = 0
                kv.i = PyLong_AsLongLongAndOverflow(<object>v, &overflow)
                kv.kind = K_OBJ if overflow else K_INT
            elif PyFloat_CheckExact(v):
                kv.d = PyFloat_AS_DOUBLE(v)
                kv.kind = K_FLOAT
            elif PyUnicode_CheckExact(v):
                kv.kind = K_STR
            else:
                kv.kind = K_OBJ
        return 1

    cdef inline void _hold(self, Py_ssize_t s, PyObject* row, PyObject* owner):
        """Hold ``row`` (and its key owner) for source ``s``, releasing the previous ones."""
        cdef PyObject* old_row = self._rowp[s]
        cdef PyObject* old_owner = self._ownp[s]
        Py_XINCREF(row)
        Py_XINCREF(owner)
        self._rowp[s] = row
        self._ownp[s] = owner
        Py_XDECREF(old_row)  # last: a finalizer may run, and the state is consistent
        Py_XDECREF(old_owner)

    cdef void _release(self):
        cdef Py_ssize_t s
        if self._rowp == NULL or self._ownp == NULL:
            return
        for s in range(self._k):
            self._hold(s, NULL, NULL)

    cdef inline int _less(self, Py_ssize_t a, Py_ssize_t b) except -1:
        cdef Py_ssize_t j
        cdef int c
        cdef KeyVal* va = &self._vals[a * self._nkeys]
        cdef KeyVal* vb = &self._vals[b * self._nkeys]
        if self._nkeys and va.kind == K_INT and vb.kind == K_INT:
            # The common first key, compared without a call.
            if va.i != vb.i:
                return (va.i > vb.i) if self._desc[0] else (va.i < vb.i)
            if self._nkeys == 1:
                return a < b
        for j in range(self._nkeys):
            c = _compare(&va[j], &vb[j], self._cols[j])
            if c:
                return (c > 0) if self._desc[j] else (c < 0)
        return a < b

    cdef int _sift_down(self, Py_ssize_t pos) except -1:
        cdef Py_ssize_t child, size = self._size
        cdef Py_ssize_t* heap = self._heap
        cdef Py_ssize_t item = heap[pos]
        while True:
            child = 2 * pos + 1
            if child >= size:
                break
            if child + 1 < size and self._less(heap[child + 1], heap[child]):
                child += 1
            if not self._less(heap[child], item):
                break
            heap[pos] = heap[child]
            pos = child
        heap[pos] = item
        return 0

    cdef object _pop(self):
        """The smallest held row; refills its source and restores the heap."""
        cdef Py_ssize_t s
        cdef bint was_int
        if self._use_tree:
            return self._pop_tree()
        s = self._heap[0]
        row = <object>self._rowp[s]
        was_int = self._vals[s].kind == K_INT
        if not self._pull(s):
            self._size -= 1
            self._heap[0] = self._heap[self._size]
            if self._can_tree and not was_int:
                self._nonint -= 1
        elif self._can_tree:
            self._nonint += was_int - (self._vals[s].kind == K_INT)
        if self._size:
            self._sift_down(0)
            if self._can_tree:
                self._since += 1
                # Back to the tree: the k pops since the heap took over pay for it.
                if self._nonint == 0 and self._since >= self._k:
                    self._build_tree()
        return row

    cdef inline void _replay(self, Node cur) noexcept:
        """Put source ``cur.src``'s new node in: replay its path to the root."""
        # Leaf _leaves + s (a power of two plus s < it), whether src is s or, exhausted, _leaves + s.
        self._win = _replay_path(self._tree, (cur.src | self._leaves) >> 1, cur)

    cdef inline PyObject* _tree_next(self) noexcept:
        """The winner's row (a new reference) when its list / tuple source refills
        with a tuple row and an int64 key or ends, with no Python code run; else
        NULL, and nothing has changed (``_pop_tree`` takes the general way)."""
        cdef Py_ssize_t s = self._win.src, i = self._pos[s], n, col = self._cols[0]
        cdef PyObject* source
        cdef PyObject** items
        cdef PyObject* p
        cdef PyObject* v
        cdef PyObject* ahead
        cdef PyObject* old
        cdef KeyVal* kv
        cdef int overflow = 0
        cdef long long key
        cdef Node cur
        if i < 0 or self._ownp[s] != NULL:  # an iterator, or a row that is not a tuple
            return NULL
        source = PyList_GET_ITEM_RAW(self._iters, s)
        n = PySequence_Fast_GET_SIZE_RAW(source)
        if i < n:
            items = PySequence_Fast_ITEMS_RAW(source)
            p = items[i]
            if not PyTuple_CheckExact_RAW(p) or col >= PyTuple_GET_SIZE_RAW(p):
                return NULL
            v = PyTuple_GET_ITEM_RAW(p, col)
            if not PyLong_CheckExact(v):
                return NULL
            key = PyLong_AsLongLongAndOverflow_RAW(v, &overflow)
            if overflow:
                return NULL
            self._pos[s] = i + 1
            if i + ITEMS_AHEAD < n:
                ddm_prefetch(&items[i + ITEMS_AHEAD])  # the source's item array, a few lines on
            if i + 2 * PREFETCH < n:
                ddm_prefetch(items[i + 2 * PREFETCH])
            if i + PREFETCH < n:
                ahead = items[i + PREFETCH]  # prefetched PREFETCH pulls ago
                if PyTuple_CheckExact_RAW(ahead) and col < PyTuple_GET_SIZE_RAW(ahead):
                    ddm_prefetch(PyTuple_GET_ITEM_RAW(ahead, col))
            Py_INCREF(<object>p)
            kv = &self._vals[s]
            kv.kind = K_INT
            kv.i = key
            kv.o = v
            cur.key = key ^ self._flip
            cur.src = s
        else:
            p = NULL
            self._size -= 1
            cur.key = LLONG_MAX
            cur.src = self._leaves + s
        old = self._rowp[s]
        self._rowp[s] = p  # the old row's reference goes to the caller
        self._replay(cur)
        return old

    cdef object _pop_tree(self):
        """``_pop`` by the loser tree."""
        cdef Node cur
        cdef Py_ssize_t s = self._win.src
        cdef PyObject* r = self._tree_next()
        if r != NULL:
            row = <object>r
            Py_DECREF(row)  # the reference _tree_next handed over
            return row
        row = <object>self._rowp[s]
        if self._pull(s):
            if self._vals[s].kind != K_INT:
                self._nonint = 1
                self._build_heap()
                return row
            cur.key = self._vals[s].i ^ self._flip
            cur.src = s
        else:
            self._size -= 1
            cur.key = LLONG_MAX
            cur.src = self._leaves + s
        self._replay(cur)
        return row

    cdef int _finish(self) except -1:
        self._size = 0
        self._use_tree = False
        self._started = True
        iters, self._iters = self._iters, []
        self._release()
        for it in iters:
            close = getattr(it, "close", None)
            if close is not None:
                close()
        return 0

    def __iter__(self):
        return self

    def __next__(self):
        cdef PyObject* r
        if self._use_tree and self._size and not self._offset and self._limit < 0:
            # The common case, with no Python code to run: no try needed.
            r = self._tree_next()
            if r != NULL:
                row = <object>r
                Py_DECREF(row)  # the reference _tree_next handed over
                return row
        try:
            if not self._started:
                self._prime()
            while self._size:
                row = self._pop()
                if self._offset:
                    self._offset -= 1
                    continue
                if self._limit > 0:
                    self._limit -= 1
                    if self._limit == 0:
                        self._finish()
                return row
        except BaseException:
            self._finish()
            raise
        self._finish()
        raise StopIteration

    def close(self):
        """Stop early: drop the held rows and close the sources that can be closed."""
        self._finish()


def heap_merge(sources, keys, *, offset=0, limit=None):
    """Merge already-sorted row sources into one sorted stream (see ``merge_py``)."""
    cols, descs = check_merge_args(keys, offset, limit)
    merger = HeapMerge()
    merger._init(list(sources), cols, descs, offset, limit)
    return merger
