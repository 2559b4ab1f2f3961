# cython: language_level=3
"""Compiled twin of ``hotpin_py.py``: a read in an open transaction sent on its pin and relayed, in C.

Same class and behaviour as the pure twin (its docstring has the contract; tests/test_hot_front.py runs
both behind a real proxy). Compiled, a transaction's commonest read — sysbench's point selects between
its ``BEGIN`` and ``COMMIT``, an ORM session's reads with autocommit off — runs from the gate's front to
its relayed end without an interpreted frame of the proxy's own; what is rare is the subclass's.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.set cimport PySet_Add, PySet_Discard
from libc.string cimport memcpy
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

import os
import socket

from ddm_core._fast.relay import DONE as _DONE, FIRST as _FIRST, ROWS as _ROWS

__all__ = ["PinRead", "PinWatches", "UNSENT", "LOST", "CLOSED", "PAUSED", "ENDED", "FIRED", "EXPIRED", "BROKE", "OPENING", "READ_SIZE"]

READ_SIZE = 256 * 1024
HIGH_WATER = 1 << 20
UNSENT, LOST, CLOSED, PAUSED, ENDED, FIRED, EXPIRED, BROKE, OPENING = range(9)

DEF C_READ_SIZE = 256 * 1024
DEF HIGH = 1 << 20
DEF LONGEST_VALUES = 0xFFFFFF - 10
DEF R_UNSENT = 0
DEF R_LOST = 1
DEF R_CLOSED = 2
DEF R_PAUSED = 3
DEF R_ENDED = 4
DEF R_FIRED = 5
DEF R_EXPIRED = 6
DEF R_BROKE = 7
DEF R_OPENING = 8

cdef object _dup = os.dup
cdef object _close = os.close
cdef int S_FIRST = _FIRST
cdef int S_ROWS = _ROWS
cdef int S_DONE = _DONE
cdef object _set_blocking = os.set_blocking
cdef object _PEEK = socket.MSG_PEEK | socket.MSG_DONTWAIT  # a parked watch's wake: bytes there, or taken already


cdef bytes _execute_packet(unsigned int stmt_id, bytes values):
    """A COM_STMT_EXECUTE of ``stmt_id`` (no cursor, one iteration) with ``values``, framed with sequence id 0,
    in one allocation."""
    cdef Py_ssize_t size = 10 + PyBytes_GET_SIZE(values)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 4 + size)
    cdef unsigned char* p = <unsigned char*> PyBytes_AS_STRING(out)
    p[0] = size & 0xFF
    p[1] = (size >> 8) & 0xFF
    p[2] = (size >> 16) & 0xFF
    p[3] = 0
    p[4] = 0x17
    p[5] = stmt_id & 0xFF
    p[6] = (stmt_id >> 8) & 0xFF
    p[7] = (stmt_id >> 16) & 0xFF
    p[8] = (stmt_id >> 24) & 0xFF
    p[9] = 0  # no cursor
    p[10] = 1  # one iteration
    p[11] = 0
    p[12] = 0
    p[13] = 0
    memcpy(p + 14, PyBytes_AS_STRING(values), PyBytes_GET_SIZE(values))
    return out


cdef inline double _monotonic():
    """``time.monotonic()``: ``CLOCK_MONOTONIC``'s seconds."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


@cython.final
@cython.auto_pickle(False)  # one session's: never pickled
cdef class _Watch:
    """One pin's socket watched through a duplicate of its descriptor (``hotpin_py._Watch``)."""

    cdef public object loop, sock, target
    cdef public int dup

    def __init__(self, loop, sock, int fd):
        self.loop = loop
        self.sock = sock
        self.target = None
        self.dup = _dup(fd)
        try:
            loop.add_reader(self.dup, self._ready)
            _set_blocking(self.dup, True)  # uvloop made the socket non-blocking; its readers read it blocking
        except BaseException:
            _close(self.dup)
            self.dup = -1
            raise

    def _ready(self):
        target = self.target
        if target is None:
            if not self._emptied():  # bytes, or an end, nobody on the loop awaits: given up
                self.close()
            return
        target()

    def _emptied(self):
        """Nothing waits on the socket: the bytes that woke the watch were taken in the same turn of the loop (its
        poll saw them first), so it stays."""
        try:
            self.sock.recv(1, _PEEK)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        return False

    def close(self):
        cdef int dup = self.dup
        self.dup = -1
        self.target = None
        if dup >= 0:
            try:
                self.loop.remove_reader(dup)
            finally:
                _close(dup)


@cython.final
@cython.auto_pickle(False)  # one session's: never pickled
cdef class PinWatches:
    """The transaction pins a session's reads wait on, watched from one read to the next (``hotpin_py.PinWatches``)."""

    cdef dict _by_fd

    def __cinit__(self):
        self._by_fd = {}

    def watch(self, loop, sock, int fd, callback):
        self._watch(loop, sock, fd, callback)

    cdef void _watch(self, loop, sock, int fd, callback) except *:
        cdef PyObject* found = PyDict_GetItem(self._by_fd, fd)
        cdef _Watch watch = None if found is NULL else <_Watch> found
        if watch is None or watch.sock is not sock or watch.dup < 0:
            if watch is not None:
                watch.close()
            watch = _Watch(loop, sock, fd)
            self._by_fd[fd] = watch
        watch.target = callback

    def park(self, int fd):
        self._park(fd)

    cdef inline void _park(self, int fd) except *:
        cdef PyObject* found = PyDict_GetItem(self._by_fd, fd)
        if found is not NULL:
            (<_Watch> found).target = None

    def drop(self):
        cdef _Watch watch
        if self._by_fd:
            watches = list(self._by_fd.values())
            self._by_fd.clear()
            for watch in watches:
                watch.close()

    def __len__(self):
        cdef _Watch watch
        cdef Py_ssize_t n = 0
        for watch in self._by_fd.values():
            if watch.dup >= 0:
                n += 1
        return n


@cython.auto_pickle(False)  # one session's: never pickled
cdef class PinRead:
    """One read on a transaction's pin (``hotpin_py.PinRead``)."""

    cdef public object runtime, session, plan, relay, header_for, client, on_end, done_with, cid, tx, pin, loop
    cdef public object pool, driver, raw, sock, cursor, sql, style, deadline, answer_by, cancel_at, abort_at, opening
    cdef public double started
    cdef public int fd
    cdef public bint fired, watched, done
    cdef public object watches

    def __init__(self, runtime, session, plan, double started, relay, header_for, client, on_end, done_with, cid,
                 tx, pin, loop):
        self.runtime = runtime
        self.session = session
        self.plan = plan
        self.started = started
        self.relay = relay
        self.header_for = header_for
        self.client = client
        self.on_end = on_end
        self.done_with = done_with
        self.cid = cid
        self.tx = tx
        self.pin = pin
        self.loop = loop
        self.pool = pin.pool
        self.driver = self.pool.driver
        self.raw = pin.raw
        self.sock = None
        self.fd = -1
        self.cursor = None
        self.sql = None
        self.style = None
        self.deadline = None
        self.answer_by = None
        self.cancel_at = None
        self.abort_at = None
        self.fired = False
        self.opening = None
        self.watched = False
        self.watches = session._pin_watches
        self.done = False

    def start(self, str style, bytes values, stmt_id, sock, opening):
        self.opening = opening
        engine = self.runtime.executor.engine
        driver = self.driver
        unit = self.plan.units[0]
        raw = self.raw
        self.style = style
        try:
            seconds = engine.timeout
            if seconds:
                self.deadline = self.started + seconds
                self.answer_by = self.deadline + engine.cancel_grace
            else:
                bound = driver.socket_timeout(self.pool.endpoint)
                self.answer_by = None if bound is None else self.started + bound
            if values is None:
                self.sql = engine.unit_sql(driver, unit, style)
                self.cursor = driver.send(raw, self.sql, unit.params)
            elif stmt_id is None or PyBytes_GET_SIZE(values) >= LONGEST_VALUES:
                driver.send_execute(raw, unit.sql, len(unit.params), values)
            else:
                driver.send_packet(raw, _execute_packet(stmt_id, values))
            self.sock = sock
            self.fd = sock.fileno()
        except Exception as exc:  # sent or not, it failed: rare() maps it as the executor does
            self.rare(R_UNSENT, exc)
            return
        self._watch()
        loop = self.loop
        deadlines = self.runtime.deadlines
        cdef double now = loop.time()
        cdef double mono = _monotonic()
        if self.deadline is not None:  # the pin's guard cancels it then (check())
            self.cancel_at = now + max(0.0, <double> self.deadline - mono)
        answer_by = self.answer_by
        if opening is not None and answer_by is not None:  # its OKs are bounded by the read's deadline too
            opening.answer_by = answer_by if opening.answer_by is None else min(opening.answer_by, answer_by)
        if opening is not None:
            answer_by = opening.answer_by
        if answer_by is not None:
            self.abort_at = now + max(0.0, <double> answer_by - mono)
        first = self.cancel_at if self.cancel_at is not None else self.abort_at
        if first is not None:
            PySet_Add(deadlines.running, self)
            if <double> first < <double> deadlines.at:
                deadlines.arm(first, loop)

    def _watch(self):
        self.watched = True
        # the pin, or the connection its opening went on (whatever may close it calls rare(), which drops them)
        watches = self.watches
        if type(watches) is PinWatches:
            (<PinWatches> watches)._watch(self.loop, self.sock, self.fd, self._readable)
        else:  # the pure twin's (the session's may be, whatever this unit is)
            watches.watch(self.loop, self.sock, self.fd, self._readable)

    def _unwatch(self):
        self.watched = False
        watches = self.watches
        if type(watches) is PinWatches:
            (<PinWatches> watches)._park(self.fd)
        else:
            watches.park(self.fd)

    def _readable(self):
        self._unwatch()
        if self.opening is not None:
            try:
                self._opened()
            except Exception as exc:  # a bug must not leave the client waiting for ever
                self.rare(R_BROKE, exc)
            return
        try:
            data = self.sock.recv(C_READ_SIZE)
        except (BlockingIOError, InterruptedError):
            self._watch()
            return
        except OSError as exc:
            self.rare(R_LOST, exc)
            return
        if not data:
            self.rare(R_CLOSED, None)
            return
        client = self.client
        cdef int state
        try:
            state = self.relay.pump(data, client, self.header_for)
        except Exception as exc:  # a bug must not leave the client waiting for ever
            self.rare(R_BROKE, exc)
            return
        if state == S_FIRST or state == S_ROWS:
            if client.get_write_buffer_size() > HIGH:
                self.rare(R_PAUSED, None)
            else:
                self._watch()
            return
        if state != S_DONE:
            self.rare(R_ENDED, state)
            return
        self._relayed()

    cdef void _opened(self) except *:
        opening = self.opening
        opening.receive()  # blocking only until the OKs are in (the socket is readable): its errors kept
        if opening.error is not None:
            self.rare(R_OPENING, None)
            return
        self.tx.opened(opening)
        self.opening = None
        runtime = self.runtime
        runtime.opened_on_loop += 1
        runtime.opened_with_first += 1
        if self.abort_at is not None and self.answer_by is not None:  # now the read's own bound
            self.abort_at = <double> self.loop.time() + max(0.0, <double> self.answer_by - _monotonic())
        self._watch()

    cdef void _relayed(self) except *:
        self.done = True
        self._unbound()
        if self.fired:  # the cancel may have cut the rows short
            self.rare(R_FIRED, None)
            return
        runtime = self.runtime
        relay = self.relay
        plan = self.plan
        self.driver.relayed(self.raw, relay.status)
        rows = relay.rows
        engine = runtime.executor.engine
        slow = engine.slow_sql
        cdef double now = _monotonic()
        if (engine.observer is not None or plan.statement == "ddl" or now - self.started >= <double> slow.threshold_s
                or now >= <double> slow.refresh_at):  # Engine.observed_rows's first test, as hotlink's
            engine.observed_rows(plan, self.started, rows)
        self.session._pinned_hot = None
        done_with = self.done_with
        if done_with is None or runtime.audit is not None:
            self.on_end(rows, None)
            return
        try:
            runtime.commands.exit_relayed(self.cid)  # counted as run on the loop and relayed, and done
        finally:
            done_with()

    def check(self, double now):
        if self.done:
            return
        if self.cancel_at is not None and <double> self.cancel_at <= now:
            self.cancel_at = None
            self.fired = True
            guard = self.pin.guard
            guard.arm(self.deadline)
            guard.fire()
        if self.abort_at is None or <double> self.abort_at > now:
            return
        self.abort_at = None
        self.done = True
        PySet_Discard(self.runtime.deadlines.running, self)
        if self.watched:
            self._unwatch()
        self.rare(R_EXPIRED, None)

    cdef inline void _unbound(self) except *:
        self.cancel_at = None
        self.abort_at = None
        PySet_Discard(self.runtime.deadlines.running, self)

    def leave(self):
        self.done = True
        self._unbound()
        if self.watched:
            self._unwatch()

    def rare(self, int what, arg):
        raise NotImplementedError

    def abandon(self):
        raise NotImplementedError
