# The MySQL protocol's length-encoded integer, read in place: shared by the compiled units that parse
# packets (inlined into each module that cimports it: no run-time dependency between the units).

cdef inline long long _lenenc(const unsigned char* p, Py_ssize_t size, Py_ssize_t* at):
    """A length-encoded integer at ``at[0]`` (moved past it); -1 if it runs past ``size``."""
    cdef Py_ssize_t i = at[0]
    cdef int width, k
    cdef long long value = 0
    if i >= size:
        return -1
    if p[i] < 0xFB:
        at[0] = i + 1
        return p[i]
    if p[i] == 0xFC:
        width = 2
    elif p[i] == 0xFD:
        width = 3
    elif p[i] == 0xFE:
        width = 8
    else:
        return -1
    if i + 1 + width > size:
        return -1
    for k in range(width):
        value |= (<long long> p[i + 1 + k]) << (8 * k)
    at[0] = i + 1 + width
    return value
