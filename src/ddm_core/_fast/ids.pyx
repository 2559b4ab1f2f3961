# cython: language_level=3
"""Compiled twin of ``ids_py``: snowflake and gene id generators (same clock rules, checked on every reading)."""

cimport cython
from libc.stdint cimport int64_t, uint64_t

import numpy as np

from ddm_core.errors import ClockMovedBackwardsError
from ddm_core._fast._hash cimport hash_object
from ddm_core._fast.hashing import slots_of  # the compiled sibling
from ddm_core._fast.id_layout import (
    DEFAULT_EPOCH_MS,
    TIME_BITS,
    IdLayout,
    IdParts,
    check_count,
    check_gene_bits,
    clock_range_error,
    gene_of,
    make_layout,
    read_clock,
)

__all__ = ["Snowflake", "GeneIdGenerator", "IdParts", "IdLayout", "gene_of", "DEFAULT_EPOCH_MS"]

cdef extern from *:
    """
    #include <time.h>
    static inline int64_t ddm_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    }
    static inline void ddm_sleep_ms(int64_t ms) {
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    """
    int64_t ddm_now_ms() nogil
    void ddm_sleep_ms(int64_t ms) nogil


cdef class _Sequencer:
    """Time + worker + sequence; subclasses add the low (gene) bits."""

    cdef cython.pymutex _lock
    cdef object _layout
    cdef object _clock
    cdef int64_t _last, _seq, _seq_mask, _worker_part, _epoch, _max_back, _time_end
    cdef int _time_shift, _gene_bits

    cdef _setup(self, layout, clock):
        self._layout = layout
        self._clock = clock
        self._last = -1
        self._seq = 0
        self._seq_mask = (1 << layout.sequence_bits) - 1
        self._worker_part = layout.worker_id << layout.worker_shift
        self._epoch = layout.epoch_ms
        self._max_back = layout.max_backward_ms
        self._time_end = 1LL << TIME_BITS
        self._time_shift = layout.time_shift
        self._gene_bits = layout.gene_bits

    @property
    def layout(self):
        return self._layout

    @property
    def worker_id(self):
        return self._layout.worker_id

    def decode(self, id):
        return self._layout.decode(id)

    cdef int64_t _now(self) except? -1:
        if self._clock is None:
            return ddm_now_ms()
        # Checked in Python, once for both twins: a clock that raises is a
        # ClockReadError, a reading that is no number an IdTypeError, one beyond
        # int64 (or negative) an IdGenerationError; int64 arithmetic stays exact.
        return read_clock(self._clock, self._epoch)

    cdef int64_t _wait_until(self, int64_t target) except? -1:
        """The first reading >= target; raises once a reading falls further back than allowed."""
        cdef int64_t now
        cdef int64_t floor = self._last - self._max_back  # below it: a jump back, never waited out
        if self._clock is None:
            with nogil:
                now = ddm_now_ms()
                while floor <= now < target:
                    if target - now > 1:
                        ddm_sleep_ms(target - now - 1)  # at most max_backward_ms + 1
                    now = ddm_now_ms()
        else:
            now = self._now()
            while floor <= now < target:
                now = self._now()
        if now < floor:
            raise ClockMovedBackwardsError(self._last - now, self._max_back)
        return now

    cdef int64_t _next_base(self) except -1:
        """The id without its gene bits; the caller holds the lock."""
        cdef int64_t now = self._now()
        cdef int64_t back, elapsed, seq
        if now < self._last:
            back = self._last - now
            if back > self._max_back:
                raise ClockMovedBackwardsError(back, self._max_back)
            now = self._wait_until(self._last)
        if now == self._last:
            seq = (self._seq + 1) & self._seq_mask
            if seq == 0:  # this millisecond is used up
                now = self._wait_until(self._last + 1)  # may raise: the state is changed only after it
            self._seq = seq
        else:
            self._seq = 0
        self._last = now
        elapsed = now - self._epoch
        if elapsed < 0 or elapsed >= self._time_end:
            raise clock_range_error(now, self._epoch)
        return (elapsed << self._time_shift) | self._worker_part | (self._seq << self._gene_bits)

    cdef object _next_bases(self, Py_ssize_t n):
        result = np.empty(n, dtype=np.int64)
        cdef int64_t[::1] out = result
        cdef Py_ssize_t i
        with self._lock:
            for i in range(n):
                out[i] = self._next_base()
        return result


cdef class Snowflake(_Sequencer):
    """41-bit ms time, 10-bit worker, 12-bit sequence (4096 ids per ms)."""

    def __init__(self, worker_id, *, epoch_ms=DEFAULT_EPOCH_MS, max_backward_ms=5, clock=None):
        layout = make_layout(
            worker_id, worker_bits=10, gene_bits=0, epoch_ms=epoch_ms, max_backward_ms=max_backward_ms
        )
        self._setup(layout, clock)

    def next_id(self):
        cdef int64_t id
        with self._lock:
            id = self._next_base()
        return id

    def next_ids(self, n):
        return self._next_bases(check_count(n))


cdef class GeneIdGenerator(_Sequencer):
    """Snowflake whose low ``gene_bits`` bits are the slot of a shard key (docs/architecture.md#gene-ids)."""

    cdef int _gene_shift

    def __init__(
        self,
        worker_id,
        gene_bits=10,
        *,
        worker_bits=6,
        epoch_ms=DEFAULT_EPOCH_MS,
        max_backward_ms=5,
        clock=None,
    ):
        layout = make_layout(
            worker_id,
            worker_bits=worker_bits,
            gene_bits=check_gene_bits(gene_bits),
            epoch_ms=epoch_ms,
            max_backward_ms=max_backward_ms,
        )
        self._setup(layout, clock)
        self._gene_shift = 64 - layout.gene_bits

    @property
    def gene_bits(self):
        return self._gene_bits

    def next_id(self, shard_key):
        # The key is hashed first: a bad key fails before a sequence number is used.
        cdef int64_t gene = <int64_t>(hash_object(shard_key) >> self._gene_shift)
        cdef int64_t base
        with self._lock:
            base = self._next_base()
        return base | gene

    def next_ids(self, shard_keys):
        genes = slots_of(shard_keys, self._gene_bits).astype(np.int64)
        return self._next_bases(len(genes)) | genes

    def gene_of(self, id):
        return gene_of(id, self._gene_bits)
