# Shared C-level hashing for the compiled units (inlined into each module that
# cimports it, so the units have no run-time dependency on one another).
# The canonical encoding is defined once, in hashing_py.canonical_bytes; the
# fast paths below are the common cases of that same definition.

from libc.stdint cimport int32_t, int64_t, uint64_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow

cdef extern from "Python.h":
    bint PyLong_CheckExact(object o)
    bint PyUnicode_CheckExact(object o)
    bint PyBytes_CheckExact(object o)
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t* size) except NULL

cdef extern from *:
    """
    #define XXH_INLINE_ALL
    #include "xxhash.h"

    /* xxh3_64 of the 8 little-endian bytes of v, on any host byte order. */
    static inline uint64_t ddm_hash_u64(uint64_t v) {
        unsigned char b[8];
        for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
        return XXH3_64bits(b, 8);
    }
    """
    uint64_t XXH3_64bits(const void* data, size_t length) nogil
    uint64_t ddm_hash_u64(uint64_t v) nogil


cdef inline uint64_t hash_object(object value) except? 0:
    """xxh3_64 of the canonical bytes of ``value`` (see hashing_py)."""
    cdef int overflow = 0
    cdef long long v
    cdef Py_ssize_t size
    cdef const char* data
    if PyLong_CheckExact(value):
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if overflow == 0:
            return ddm_hash_u64(<uint64_t>v)
    elif PyUnicode_CheckExact(value):
        try:
            data = PyUnicode_AsUTF8AndSize(value, &size)
        except UnicodeEncodeError:
            pass  # canonical_bytes raises the ShardValueError
        else:
            return XXH3_64bits(data, <size_t>size)
    elif PyBytes_CheckExact(value):
        return XXH3_64bits(PyBytes_AS_STRING(value), <size_t>PyBytes_GET_SIZE(value))
    # Rare types and all errors: the one definition of the encoding.
    from ddm_core._fast.hashing_py import canonical_bytes
    cdef bytes encoded = canonical_bytes(value)
    return XXH3_64bits(PyBytes_AS_STRING(encoded), <size_t>PyBytes_GET_SIZE(encoded))


cdef inline object u64_keys(object values):
    """An integer ndarray as contiguous uint64 bits (int64 values reinterpreted)."""
    import numpy as np
    dtype = np.uint64 if values.dtype.kind == "u" else np.int64
    return np.ascontiguousarray(values, dtype=dtype).view(np.uint64)


cdef inline object batch_slots(object values, int shift, const int32_t* table):
    """An ``int32`` array of ``table[slot(v)]`` for each value, or of the slots
    themselves when ``table`` is NULL: the one batch loop of ``slots_of`` and
    ``SlotMap.route_many``."""
    import numpy as np
    from ddm_core._fast.hashing_py import key_sequence
    cdef Py_ssize_t i, n
    cdef uint64_t slot
    cdef const uint64_t[::1] keys
    cdef int32_t[::1] out
    # The common batches skip the shared key_sequence call (~250 ns); it decides
    # the same for them, and handles (or refuses) everything else. A list is
    # snapshotted: hashing a key may run code that mutates it, and items[i]
    # below is not bounds-checked.
    if type(values) is tuple or (
        type(values) is np.ndarray and values.ndim == 1 and values.dtype.kind in "iu"
    ):
        items = values
    elif type(values) is list:
        items = tuple(values)
    else:
        items = key_sequence(values)  # shape checks and array -> list, shared with the twin
    if isinstance(items, np.ndarray):  # 1-D integer array: hash the raw bits
        keys = u64_keys(items)
        n = keys.shape[0]
        result = np.empty(n, dtype=np.int32)
        out = result
        with nogil:
            if table == NULL:
                for i in range(n):
                    out[i] = <int32_t>(ddm_hash_u64(keys[i]) >> shift)
            else:
                for i in range(n):
                    out[i] = table[ddm_hash_u64(keys[i]) >> shift]
        return result
    n = len(items)
    result = np.empty(n, dtype=np.int32)
    out = result
    for i in range(n):
        slot = hash_object(items[i]) >> shift
        out[i] = <int32_t>slot if table == NULL else table[slot]
    return result
