# cython: language_level=3
"""Compiled twin of ``point_py.py``: the router's hit path for point statements, in one call.

Same classes and results as the pure twin (its docstring has the contract;
tests/test_point_path.py runs both against the general router). Compiled, a
cached point statement's route costs no interpreted frame at all.
"""

cimport cython
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.ref cimport Py_INCREF

__all__ = ["PointPath", "PointFront", "MEMO_LIMIT"]

MEMO_LIMIT = 1 << 16
DEF C_MEMO_LIMIT = 1 << 16

cdef extern from "Python.h":
    ctypedef struct _TupleType "PyTypeObject":
        object (*tp_alloc)(_TupleType*, Py_ssize_t)


cdef inline object _alloc(object cls, Py_ssize_t n):
    """An empty instance of the tuple subclass ``cls`` (a NamedTuple) with ``n`` items to set: what
    ``tuple.__new__(cls, items)`` allocates, without the call and the copy of ``items``."""
    return (<_TupleType*> cls).tp_alloc(<_TupleType*> cls, n)


cdef inline void _put(object t, Py_ssize_t i, object item):
    Py_INCREF(item)
    PyTuple_SET_ITEM(t, i, item)


@cython.final
@cython.auto_pickle(False)  # a level of one cached plan: never pickled
cdef class _Level:
    cdef tuple sources
    cdef bint as_tuple
    cdef object scalar
    cdef long period
    cdef bint floor
    cdef object hasher
    cdef dict memo
    cdef Py_ssize_t index
    cdef object constant

    def __init__(self, spec):
        sources, as_tuple, scalar, period, floor, hasher = spec
        self.sources = tuple([(int(i), c) for i, c in sources])
        if not self.sources:
            raise ValueError("a level reads at least one value")
        self.as_tuple = bool(as_tuple)
        self.scalar = scalar
        self.floor = bool(floor)
        self.hasher = hasher
        self.index = self.sources[0][0]
        self.constant = self.sources[0][1]
        self.period = period if 0 < period <= C_MEMO_LIMIT and not self.as_tuple else 0
        self.memo = {}

    cdef object pick(self, object bound):
        cdef object value, key, found
        cdef Py_ssize_t i
        if self.as_tuple:
            return self.scalar(tuple([bound[i] if i >= 0 else c for i, c in self.sources]))
        value = bound[self.index] if self.index >= 0 else self.constant
        if not self.period:
            return self.scalar(value)
        if self.hasher is not None:
            key = self.hasher(value) % self.period
        elif type(value) is int:
            if self.floor or value >= 0:
                key = value % self.period
            else:
                key = -((-value) % self.period)
        else:
            return self.scalar(value)
        found = self.memo.get(key)
        if found is None:
            found = self.scalar(value)
            self.memo[key] = found
        return found


@cython.final
@cython.auto_pickle(False)  # holds one configuration version's scalars: never pickled
cdef class PointPath:
    cdef tuple names
    cdef Py_ssize_t count
    cdef tuple normalized
    cdef _Level db
    cdef list tb
    cdef list lut
    cdef dict nodes
    cdef tuple params
    cdef object unit_type
    cdef object plan_type
    cdef object head
    cdef tuple tail

    def __init__(self, names, count, normalized, db, tb, lut, nodes, params, unit_type, plan_type, head, tail):
        self.names = None if names is None else tuple(names)
        self.count = count
        self.normalized = tuple(normalized)
        self.db = None if db is None else _Level(db)
        self.tb = [None if spec is None else _Level(spec) for spec in tb]
        self.lut = [list(row) for row in lut]
        self.nodes = nodes
        self.params = None if params is None else tuple(params)
        if not (isinstance(unit_type, type) and issubclass(unit_type, tuple) and isinstance(plan_type, type)
                and issubclass(plan_type, tuple)):
            raise TypeError("a point path makes tuples: its unit and plan types are tuple subclasses")
        self.unit_type = unit_type
        self.plan_type = plan_type
        self.head = head
        self.tail = tuple(tail)
        if len(self.tb) != len(self.lut):
            raise ValueError("one table level per database")
        width = count if names is None else len(self.names or ())
        read = [*self.normalized, *(self.params or ())]
        for level in [self.db, *self.tb]:
            read += [i for i, _ in (<_Level>level).sources] if level is not None else []
        if any(i >= width for i in read) or any(i < 0 for i in [*self.normalized, *(self.params or ())]):
            raise ValueError(f"a parameter index is outside the statement's {width} parameters")

    def route(self, params):
        return self.route_c(params)

    cdef object route_c(self, object params):
        cdef object bound, value, ds, node, tb, parts, values, unit, plan, item
        cdef PyObject* found
        cdef Py_ssize_t i, n
        kind = type(params)
        if self.names is not None:
            if kind is not dict:
                return None
            try:
                bound = [params[k] for k in self.names]
            except KeyError:
                return None
        elif kind is tuple or kind is list:
            if len(params) != self.count:
                return None
            bound = params
        else:
            return None
        for i in self.normalized:
            value = bound[i]
            if type(value) is str or type(value) is bytes:
                return None
        try:
            ds = 0 if self.db is None else self.db.pick(bound)
            tb = self.tb[ds]
            node = self.lut[ds][0 if tb is None else (<_Level>tb).pick(bound)]
        except Exception:
            return None
        found = PyDict_GetItem(self.nodes, node)
        if found is NULL:
            return None
        parts = <object>found
        if self.params is None:
            values = tuple(bound)
        else:
            n = len(self.params)
            values = PyTuple_New(n)
            for i in range(n):
                item = bound[self.params[i]]
                Py_INCREF(item)
                PyTuple_SET_ITEM(values, i, item)
        unit = _alloc(self.unit_type, 4)
        _put(unit, 0, parts[0])
        _put(unit, 1, parts[1])
        _put(unit, 2, values)
        _put(unit, 3, parts[2])
        n = len(self.tail)
        plan = _alloc(self.plan_type, 3 + n)
        _put(plan, 0, (unit,))
        _put(plan, 1, self.head)
        _put(plan, 2, parts[3])
        for i in range(n):
            _put(plan, 3 + i, self.tail[i])
        return plan


@cython.final
@cython.auto_pickle(False)  # one router's plan cache: never pickled
cdef class PointFront:
    cdef object cache  # the plan cache: a dict subclass (OrderedDict), read with PyDict_GetItem
    cdef object holder
    cdef object config
    cdef object hint
    cdef bint enabled
    cdef public Py_ssize_t hits

    def __init__(self, cache, holder, config, hint, enabled):
        self.cache = cache
        self.holder = holder
        self.config = config
        self.hint = hint
        self.enabled = bool(enabled)
        self.hits = 0

    def route(self, sql, params):
        cdef PyObject* found
        cdef object path, plan
        if params is None or not self.enabled or type(sql) is not str:
            return None
        if self.holder is not None and self.holder.config is not self.config:
            return None
        if self.hint() is not None:
            return None
        found = PyDict_GetItem(self.cache, sql)
        if found is NULL:
            return None
        path = (<object>found).point
        if type(path) is not PointPath:
            return None
        plan = (<PointPath>path).route_c(params)
        if plan is not None:
            self.hits += 1
            try:
                self.cache.move_to_end(sql)
            except KeyError:
                pass
        return plan
