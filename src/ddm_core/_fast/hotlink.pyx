# cython: language_level=3
"""Compiled twin of ``hotlink_py.py``: a hot statement on one of the event loop's own data-source connections.

Same classes and behaviour as the pure twin (its docstring has the contract; tests/test_hotlink.py runs
both). What runs for every hot statement — the send, each chunk of the answer, the end — runs here
without an interpreted frame; the rare parts are the Python subclasses' (``proxy/backends.py``
``Link``, ``proxy/hotpath.py`` ``LinkStatement``).
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.set cimport PySet_Add, PySet_Discard
from libc.string cimport memcmp, memcpy
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from ddm_core._fast._dicts cimport _get

from ddm_core._fast.literals import filled_text as _filled_text
from ddm_core._fast.relay import DONE as _DONE, FIRST as _FIRST, OK as _OK, ROWS as _ROWS

__all__ = ["HeaderMemo", "LinkProtocol", "HotStatement", "LinkStack", "LOST", "frame"]

LOST = -1
HIGH_WATER = 1 << 20
LOW_WATER = 1 << 18
DRAIN_POLL = 0.002
MEMO_LIMIT = 64
RECENT = 8
DEF C_RECENT = 8

cdef int S_FIRST = _FIRST
cdef int S_ROWS = _ROWS
cdef int S_DONE = _DONE
cdef int S_OK = _OK
DEF HIGH = 1 << 20
DEF LOW = 1 << 18


cdef bint _same(object definitions, list known):
    """``definitions == known``, both lists of bytes (a definition per column), compared with ``memcmp``."""
    if type(definitions) is not list:
        return definitions == known
    cdef list given = <list> definitions
    cdef Py_ssize_t n = len(given), i, size
    if n != len(known):
        return False
    for i in range(n):
        a, b = given[i], known[i]
        if type(a) is not bytes or type(b) is not bytes:
            return definitions == known  # (never: the relay's definitions are bytes) as Python compares them
        size = PyBytes_GET_SIZE(a)
        if size != PyBytes_GET_SIZE(b) or memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), size) != 0:
            return False
    return True


cdef inline bint _surely_quick(object slow, double started) except -1:
    """``SlowSqlLog.surely_quick(started)``: ``time.monotonic()`` is ``CLOCK_MONOTONIC``'s seconds."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    cdef double now = ts.tv_sec + ts.tv_nsec * 1e-9
    return now - started < <double> slow.threshold_s and now < <double> slow.refresh_at


cdef bytes _framed(bytes head, Py_ssize_t head_size, bytes payload):
    """One packet of sequence id 0: ``head`` (its first ``head_size`` bytes) then ``payload``, in one allocation."""
    cdef Py_ssize_t size = head_size + PyBytes_GET_SIZE(payload)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 4 + size)
    cdef unsigned char* p = <unsigned char*> PyBytes_AS_STRING(out)
    p[0] = size & 0xFF
    p[1] = (size >> 8) & 0xFF
    p[2] = (size >> 16) & 0xFF
    p[3] = 0
    if head_size:
        memcpy(p + 4, PyBytes_AS_STRING(head), head_size)
    memcpy(p + 4 + head_size, PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload))
    return out


def frame(bytes payload, int seq=0):
    """``payload`` as one MySQL packet with sequence id ``seq``."""
    cdef bytes out = _framed(b"", 0, payload)
    (<unsigned char*> PyBytes_AS_STRING(out))[3] = seq & 0xFF
    return out


@cython.auto_pickle(False)  # one session's: never pickled
cdef class HeaderMemo:
    """A relayed result's client header, remembered (``hotlink_py.HeaderMemo``)."""

    cdef public object header_for, session, conn, announced
    cdef dict _known
    cdef object _variables, _changes
    cdef list _recent

    def __init__(self, header_for, session, conn, announced):
        self.header_for = header_for
        self.session = session
        self.conn = conn
        self.announced = announced
        self._known = {}
        self._variables = self._changes = None
        self._recent = []

    def __call__(self, definitions):
        variables = self.session.variables
        # the variables remembered count their changes (checked when they were taken): read without a getattr()
        changes = variables.changes if variables is self._variables else getattr(variables, "changes", None)
        if changes is None:  # variables that count nothing: asked every time
            return self.header_for(definitions)
        known = self._known
        if variables is not self._variables or changes != self._changes:  # a SET since: all asked again
            known.clear()
            self._variables, self._changes = variables, changes
            del self._recent[:]
        else:
            for entry in self._recent:
                if _same(definitions, <list> (<tuple> entry)[0]):
                    return (<tuple> entry)[1], int(self.conn.status_flags)
        key = tuple(definitions)  # the definitions name the physical table: one entry per table
        payloads = known.get(key)
        if payloads is not None:
            status = int(self.conn.status_flags)
        else:
            payloads, status = self.header_for(definitions)
            if len(known) >= MEMO_LIMIT:
                known.clear()
            known[key] = payloads
        if len(self._recent) >= C_RECENT:
            del self._recent[0]
        self._recent.append((list(definitions), payloads))  # a copy: the caller's list is its own
        return payloads, status


@cython.auto_pickle(False)  # a connection's protocol: never pickled
cdef class LinkProtocol:
    """A data-source connection's protocol on the loop (``hotlink_py.LinkProtocol``)."""

    cdef public object transport, loop
    cdef public bint closed
    cdef public object read_bound, prepared, config, key  # the subclass's (hotlink_py.LinkProtocol)
    cdef public double idle_since
    cdef object _relay, _client, _header_for, _on_end  # None, as transport and loop, until set

    @property
    def answering(self):
        return self._relay is not None

    def send(self, bytes payload, relay, client, header_for, on_end):
        self._relay, self._client, self._header_for, self._on_end = relay, client, header_for, on_end
        self.transport.write(_framed(b"", 0, payload))

    cdef inline void _send_framed(self, bytes packet, HotStatement statement) except *:
        self._relay, self._client, self._header_for, self._on_end = (
            statement.relay, statement.client, statement.header_for, statement.ended)
        self.transport.write(packet)

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        relay = self._relay
        if relay is None:
            self.unasked(data)
            return
        cdef int state = relay.pump(data, self._client, self._header_for)
        if state == S_FIRST or state == S_ROWS:
            client = self._client
            if client.get_write_buffer_size() > HIGH and not client.is_closing():
                self.transport.pause_reading()
                self.loop.call_later(DRAIN_POLL, self._drained)
            return
        self.end(state)

    def end(self, int state):
        on_end = self._on_end
        self._relay = self._client = self._header_for = self._on_end = None
        if on_end is not None:
            on_end(self, state)

    def unasked(self, data):
        raise NotImplementedError

    def _drained(self):
        client = self._client
        if client is None or client.is_closing() or client.get_write_buffer_size() <= LOW:
            if not self.closed:
                self.transport.resume_reading()
        else:
            self.loop.call_later(DRAIN_POLL, self._drained)


cdef bytes _EXECUTE_TAIL = b"\x00\x01\x00\x00\x00"


@cython.final
@cython.auto_pickle(False)
cdef class _Parts:
    """The parts of a runtime a hot statement uses that its constructor set once (its engine, deadlines,
    links and running commands), read from it once rather than at every statement."""
    cdef object runtime, engine, deadlines, backends, commands, slow_sql
    cdef set running


cdef _Parts _last_parts = None  # the last runtime's (a proxy process has one; held, so its id is not reused)


cdef _Parts _parts_of(object runtime):
    global _last_parts
    cdef _Parts parts = _last_parts
    if parts is not None and parts.runtime is runtime:
        return parts
    parts = _Parts.__new__(_Parts)
    parts.runtime = runtime
    parts.engine = runtime.executor.engine
    parts.deadlines = runtime.deadlines
    parts.running = parts.deadlines.running
    parts.backends = runtime.backends
    parts.commands = runtime.commands
    parts.slow_sql = parts.engine.slow_sql
    _last_parts = parts
    return parts


@cython.auto_pickle(False)
cdef class HotStatement:
    """One hot statement on a :class:`LinkProtocol` (``hotlink_py.HotStatement``)."""

    cdef public object runtime, link, plan, relay, header_for, client, on_end, done_with, cid, cancel_at, abort_at
    cdef public double started
    cdef public bint fired, bounded, done

    def __init__(self, runtime, link, plan, double started, relay, header_for, client, on_end, done_with=None,
                 cid=None):
        self.runtime = runtime
        self.link = link
        self.plan = plan
        self.started = started
        self.relay = relay
        self.header_for = header_for
        self.client = client
        self.on_end = on_end
        self.done_with = done_with
        self.cid = cid
        self.fired = False
        self.bounded = False
        self.done = False
        self.cancel_at = None
        self.abort_at = None

    def start(self, str style, values):
        link = self.link
        unit = self.plan.units[0]
        cdef _Parts parts = _parts_of(self.runtime)
        engine = parts.engine
        cdef bint typed = isinstance(link, LinkProtocol)  # the loop's own link: its fields read without a lookup
        loop = (<LinkProtocol> link).loop if typed else link.loop
        seconds = engine.timeout
        cdef double now
        if seconds:
            now = loop.time()
            self.cancel_at = now + seconds
            self.abort_at = now + seconds + engine.cancel_grace
        else:
            bound = (<LinkProtocol> link).read_bound if typed else link.read_bound
            if bound is not None:
                self.abort_at = loop.time() + bound
        if self.abort_at is not None:
            deadlines = parts.deadlines
            PySet_Add(parts.running, self)
            first = self.cancel_at if self.cancel_at is not None else self.abort_at
            if first < deadlines.at:
                deadlines.arm(first, loop)
        if values is None:
            sql = engine.unit_sql(link.driver, unit, style)
            params = unit.params
            text = None if params is None else _filled_text(sql, params)  # integers written in C (the usual)
            if text is None:
                if params is not None:
                    escape = link.raw.escape
                    sql = sql % tuple([str(p) if type(p) is int else escape(p) for p in params])
                text = sql.encode(link.raw.encoding)
            link.send(b"\x03" + text, self.relay, self.client, self.header_for, self.ended)
            return
        prepared = (<LinkProtocol> link).prepared if typed else link.prepared
        stmt_id = _get(prepared, unit.sql)
        if stmt_id is None:
            self.prepare_first(values)
            return
        self._execute(stmt_id, values)

    def execute(self, stmt_id, bytes values):
        self._execute(stmt_id, values)

    cdef void _execute(self, object stmt_id, bytes values) except *:
        cdef unsigned int sid = stmt_id
        cdef bytes head = PyBytes_FromStringAndSize(NULL, 10)
        cdef unsigned char* h = <unsigned char*> PyBytes_AS_STRING(head)
        h[0] = 0x17
        h[1] = sid & 0xFF
        h[2] = (sid >> 8) & 0xFF
        h[3] = (sid >> 16) & 0xFF
        h[4] = (sid >> 24) & 0xFF
        memcpy(h + 5, PyBytes_AS_STRING(_EXECUTE_TAIL), 5)
        packet = _framed(head, 10, values)
        link = self.link
        if isinstance(link, LinkProtocol):  # framed once, here
            (<LinkProtocol> link)._send_framed(packet, self)
        else:  # any other link: its own send (the twin's contract)
            link.send(packet[4:], self.relay, self.client, self.header_for, self.ended)

    def prepare_first(self, values):
        raise NotImplementedError

    def abandon(self):
        self.done = True
        PySet_Discard(_parts_of(self.runtime).running, self)
        self.link.abort()

    def check(self, double now):
        if self.done:
            return
        if self.cancel_at is not None and self.cancel_at <= now:
            self.cancel_at = None
            self.fired = True
            link = self.link
            link.driver.cancel(link.endpoint, link.raw)
        if self.abort_at is not None and self.abort_at <= now:
            self.abort_at = None
            self.bounded = True
            self.link.abort()

    def ended(self, link, int state):
        if self.done:
            return
        self.done = True
        runtime = self.runtime
        cdef _Parts parts = _parts_of(runtime)
        PySet_Discard(parts.running, self)
        if (state != S_DONE and state != S_OK) or self.fired:
            self.failed(link, state)
            return
        parts.backends.give(link)
        cdef long long rows = self.relay.rows if state == S_DONE else -1
        engine = parts.engine
        # Engine.observed_rows's first test, here: a read under the slow-SQL threshold with no observer is not observed
        if engine.observer is not None or self.plan.statement == "ddl" or not _surely_quick(parts.slow_sql, self.started):
            engine.observed_rows(self.plan, self.started, rows if rows > 0 else 0)
        done_with = self.done_with
        if rows < 0 or done_with is None or runtime.audit is not None:
            self.on_end(rows, None)
            return
        try:
            parts.commands.exit_relayed(self.cid)  # counted as run on the loop and relayed, and done
        finally:
            done_with()

    def failed(self, link, int state):
        raise NotImplementedError


@cython.auto_pickle(False)  # one proxy's: never pickled
cdef class LinkStack:
    """The idle links of the loop's own per endpoint (``hotlink_py.LinkStack``)."""

    cdef public dict _idle
    cdef public object _config, _sweeper
    cdef public bint closed
    cdef public double idle_seconds

    def __cinit__(self, *args, **kwargs):  # set before any subclass's __init__ runs, whatever it is given
        self._idle = {}
        self._config = None
        self._sweeper = None
        self.closed = False
        self.idle_seconds = 2.0

    def take(self, data_source, pool, config):
        cdef PyObject* found
        if config is not self._config:
            self._reset(config)
        key = (data_source, pool.endpoint.name)
        found = PyDict_GetItem(self._idle, key)
        if found is not NULL and <list> found:
            return (<list> found).pop()
        self._grow(key, pool)
        return None

    def give(self, LinkProtocol link):  # typed: its fields read without a lookup
        cdef PyObject* found
        if link.closed or self.closed or link.config is not self._config:
            link.abort()
            return
        loop = link.loop
        link.idle_since = loop.time()
        key = link.key
        found = PyDict_GetItem(self._idle, key)
        if found is NULL:
            self._idle[key] = [link]
        else:
            (<list> found).append(link)
        if self._sweeper is None:
            self._sweeper = loop.call_later(self.idle_seconds, self._sweep)

    def _reset(self, config):
        raise NotImplementedError

    def _grow(self, key, pool):
        raise NotImplementedError

    def _sweep(self):
        raise NotImplementedError
