# A dict read without a method call: shared by the compiled units of the proxy's hot path (inlined into each
# module that cimports it: no run-time dependency between the units).

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject


cdef inline object _get(object mapping, object key):
    """``mapping.get(key)``, a dict read without a call."""
    cdef PyObject* found
    if type(mapping) is dict:
        found = PyDict_GetItem(mapping, key)
        return None if found is NULL else <object> found
    return mapping.get(key)
