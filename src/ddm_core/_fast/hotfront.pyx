# cython: language_level=3
"""Compiled twin of ``hotfront_py.py``: a client's hot statement taken from the gate in one call.

Same class and behaviour as the pure twin (its docstring has the contract; tests/test_hot_front.py runs
both behind a real proxy). Compiled, the commonest statement goes from the client's packet to the
execute on an idle link (in a transaction, on its pin) without an interpreted frame of the proxy's own;
the runtime's count of running commands (:class:`Commands`) and the link stack (``hotlink.LinkStack``) it
uses are compiled too.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.long cimport PyLong_FromVoidPtr
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8, PyUnicode_Decode
from ddm_core._fast._dicts cimport _get

from functools import partial

from ddm_core._fast.gate import execute_params
from ddm_core._fast.relay import ResultRelay

__all__ = ["HotFront", "Commands", "COM_QUERY", "COM_STMT_EXECUTE"]

COM_QUERY = 0x03
COM_STMT_EXECUTE = 0x17
DEF ON_PINS = 256
DEF EXECUTES = 256  # the client's prepared statements whose fields the front keeps
DEF C_QUERY = 0x03
DEF C_EXECUTE = 0x17


#: Each client character set's Python codec, read once: mimic's ``CharacterSet.decode`` asks its enum's
#: ``name`` for it every time (~2.8 k instructions a statement)
cdef dict _CODECS = {}


cdef str _codec(charset):
    codec = _get(_CODECS, charset)
    if codec is None:
        codec = _CODECS[charset] = charset.codec
    return <str> codec


@cython.final
@cython.auto_pickle(False)  # one connection's: never pickled
cdef class HotFront:
    cdef public object session, conn, runtime, done_with
    cdef public Py_ssize_t taken
    cdef object _parameterize, _execute_values, _statement, _plain, _single, _utf8, _router, _endpoints
    cdef dict _pools
    cdef object _pools_config
    cdef object _stmts, _too_long, _announced, _param_types, _cid, _client, _backends, _clock, _enter, _hot_end
    cdef Commands _commands  # the runtime's, when this module's (entered without a method call), else None
    cdef object _pin_statement, _local, _check_pinned
    cdef dict _on_pins
    cdef object _shapes  # the runtime's Shapes last seen (a reload replaces it) and its dict
    cdef dict _seen
    cdef dict _executes  # per client statement id: (mimic's statement, its id, parameters, text), read once
    cdef object _follows_sql
    cdef bint _query_attributes, _client_eof
    cdef Py_ssize_t _text_limit

    def __init__(self, session, conn, runtime, tuple terms):
        self.session = session
        self.conn = conn
        self.runtime = runtime
        (self._parameterize, self._execute_values, self._statement, self._plain, self._single, self._text_limit,
         self._utf8, self._pin_statement, self._local, self._check_pinned) = terms
        executor = runtime.executor
        self._router = executor.engine.router
        self._endpoints = executor.endpoints
        self._pools = {}
        self._pools_config = None
        self._stmts, self._too_long = conn.prepared_stmts, conn._too_long
        self._announced, self._param_types = conn._announced, conn._param_types
        self._query_attributes, self._client_eof = conn._query_attributes, conn.client_eof
        self._cid, self._client = conn.connection_id, conn.gate_transport
        self._backends, self._clock, self._enter = runtime.backends, runtime.clock, runtime._enter
        commands = runtime.commands  # the pure twin's when the session's runtime is (a test pairs them)
        self._commands = <Commands> commands if type(commands) is Commands else None
        self._hot_end = session._hot_end
        self._on_pins = {}
        self._shapes = None
        self._seen = None
        self._executes = {}
        self._follows_sql = None
        self.done_with = None
        self.taken = 0

    def hot(self, int command, bytes payload):
        cdef object read, ready
        if command != C_EXECUTE and command != C_QUERY:
            return self.session.hot(command, payload, None)
        try:
            read = self._read_execute(payload) if command == C_EXECUTE else self._read_query(payload)
        except Exception:  # undecodable text, a malformed execute: mimic's path answers it
            return False
        if read is None:
            return self.session.hot(command, payload, None)
        try:
            ready = self._ready(command, <tuple> read)
        except Exception:  # an object unlike what the front expects: the session's path decides
            ready = None
        if ready is None:
            return self.session.hot(command, payload, read)
        self._send(command, payload, <tuple> read, <tuple> ready)
        return True

    def read_query(self, bytes payload):
        return self._read_query(payload)

    def read_execute(self, bytes payload):
        return self._read_execute(payload)

    cdef object _read_query(self, bytes payload):
        if self._query_attributes:  # mimic's reader takes them off the text
            return None
        cdef tuple charsets = self._charsets()
        if charsets[1] not in self._utf8:  # results converted to another character set: decoded, not relayed
            return None
        # payload[1:].decode(codec) without the slice's copy and the method's lookup
        cdef str sql = PyUnicode_Decode(<char*> PyBytes_AS_STRING(payload) + 1, PyBytes_GET_SIZE(payload) - 1,
                                        <char*> PyUnicode_AsUTF8(_codec(charsets[0])), NULL)
        if len(sql) > self._text_limit:
            return None
        parameterized = self._parameterize(sql)
        if parameterized is None:
            return (sql, sql, None, None, None)
        return (sql, parameterized[0], parameterized[1], None, None)

    cdef object _read_execute(self, bytes payload):
        if PyBytes_GET_SIZE(payload) < 5:
            return None
        cdef const unsigned char* p = <const unsigned char*> PyBytes_AS_STRING(payload)
        cdef unsigned long sid = p[1] | (p[2] << 8) | (p[3] << 16) | (<unsigned long> p[4] << 24)
        stmt = _get(self._stmts, sid)
        if stmt is None:
            return None
        cdef tuple fields = <tuple> _get(self._executes, sid)  # the statement's own fields, read once
        if fields is None or fields[0] is not stmt:
            if len(self._executes) >= EXECUTES:  # a client that prepares and closes statements: kept bounded
                self._executes.clear()
            fields = self._executes[sid] = (stmt, stmt.stmt_id, stmt.num_params, stmt.sql)
        stmt_id = fields[1]
        if stmt.param_buffers or stmt_id in self._too_long or self._query_attributes:
            return None
        announced = _get(self._announced, stmt_id)
        if announced is None:
            return None
        cdef tuple charsets = self._charsets()
        if charsets[0] not in self._utf8 or charsets[1] not in self._utf8:
            return None
        param_types = self._param_types
        known = _get(param_types, stmt_id)
        read = execute_params(payload, fields[2], known)
        if read is None:
            return None
        values, block, types = <tuple> read
        if types is not known:
            param_types[stmt_id] = types  # as mimic's read_execute remembers them
        sql = fields[3]
        return (sql, sql, values, announced, block)

    cdef tuple _charsets(self):
        conn = self.conn
        cdef tuple known = conn._known_charsets
        variables = self.session.variables
        if known[0] is variables and known[1] == variables.changes:
            return <tuple> known[2]
        return <tuple> conn._charsets()

    cdef object _ready(self, int command, tuple read):
        """``(plan, style, pool, driver, values, link, tx)`` when the front takes the statement; ``None``: nothing
        done, the session's path decides."""
        session, runtime = self.session, self.runtime
        tx = session._tx
        if tx is None:
            if not session._autocommit:  # its first statement opens a transaction: the session's path
                return None
        elif type(tx) is not self._local or not tx.active:  # reads on pins only in a local, live transaction
            return None
        if not runtime.front and (not runtime.inline or not runtime.relay or runtime.limiter is not None
                                  or (runtime.masker is not None and not session.may_unmask)):
            return None
        sql, text, params, announced, block = read
        cdef bint text_result = command == C_QUERY
        shapes = runtime.shapes
        if shapes is not self._shapes:
            self._shapes, self._seen = shapes, shapes.seen
        shape = _get(self._seen, text)
        if shape is None or not shape.inline or shape.needs is not self._plain:
            return None
        style = shape.style
        if style is None or (not text_result and style != "qmark"):
            return None
        router = self._router
        try:
            plan = router.point_route(text, params)  # a cached point statement in one compiled call, else routed
            if plan is None:
                plan = router.route(text, params)
        except Exception:  # a refusal: the session's path routes it again and answers it
            return None
        units = plan.units
        if (len(units) != 1 or plan.kind is not self._single or plan.dual or plan.statement != "select"
                or not plan.merge.is_trivial):
            return None
        unit = units[0]
        if tx is not None:
            return self._on_pin(tx, plan, unit, style, text_result, params, block)
        config = router.routed_config
        data_source = unit.data_source
        if config is not self._pools_config:  # plain_primary's answers are the same for one version
            self._pools = {}
            self._pools_config = config
        cdef tuple known = <tuple> _get(self._pools, data_source)  # (pool, driver), or () when it cannot relay
        if known is None:
            pool = self._endpoints.plain_primary(data_source, config)
            if pool is None:
                return None
            known = self._pools[data_source] = (pool, pool.driver) if pool.driver.can_relay else ()
        if not known:
            return None
        pool, driver = known
        values = None
        if not text_result:  # the client's own parameter block when the unit binds the same values in order
            unit_params = unit.params
            values = block if block is not None and list(unit_params) == params else self._execute_values(unit_params)
            if values is None:
                return None
        link = self._backends.take(data_source, pool, config)
        if link is None:
            return None
        return (plan, style, pool, driver, values, link, None)

    cdef object _on_pin(self, tx, plan, unit, style, bint text_result, params, block):
        """``_ready``'s answer for a read in ``tx``: on the data source's pin, or behind the transaction's opening
        (the pure twin's ``_on_pin``)."""
        if plan.is_write or plan.cross_node is not None:
            return None
        sql = unit.sql
        plain = _get(self._on_pins, sql)
        if plain is None:
            try:
                plain = not self._check_pinned(plan)  # True: the pin would need a reset after it
            except Exception:  # refused on a pin: the session's path says why
                plain = False
            if len(self._on_pins) >= ON_PINS:
                self._on_pins.clear()
            self._on_pins[sql] = plain
        executor = self.runtime.executor
        if not plain or executor.runner.closed or executor.engine.stream is True:
            return None
        values = None
        if not text_result:
            unit_params = unit.params
            values = block if block is not None and list(unit_params) == params else self._execute_values(unit_params)
            if values is None:
                return None
        pin = tx.pinned(unit.data_source)
        opening = None
        if pin is None:
            self._follows_sql = None if text_result else sql
            opening = tx.send_opening(unit.data_source, self._follows)
            if opening is None:
                return None
            pin = opening.pinned
        driver = pin.pool.driver
        raw = pin.raw
        sock = driver.relay_socket(raw) if driver.can_relay and driver.can_pipeline else None
        stmt_id = None if text_result or sock is None else driver.prepared_id(raw, sql)
        if sock is None or (stmt_id is None and not text_result):
            if opening is not None:  # (never: _follows asked) not pinned: its connection goes, the transaction stays
                opening.pinned.release(discard=True)
            return None
        return (plan, style, pin.pool, driver, values, (pin, sock, stmt_id, opening), tx)

    def _follows(self, borrowed):
        driver = borrowed.pool.driver
        return bool(driver.can_relay and driver.follows_opening(borrowed.raw, self._follows_sql)
                    and driver.relay_socket(borrowed.raw) is not None)

    cdef void _send(self, int command, bytes payload, tuple read, tuple ready) except *:
        """The statement taken: the session's state for it, counted as running, sent on its link."""
        session, runtime = self.session, self.runtime
        sql, _, _, announced, _ = read
        plan, style, pool, driver, values, link, tx = ready
        cdef bint text_result = command == C_QUERY
        # the command's kind for the session's other paths: written only when it changed (a write costs more)
        if session._text is not text_result:
            session._text = text_result
        if session._announced is not announced:
            session._announced = announced
        if session._interrupted is not False:
            session._interrupted = False
        started = self._clock()
        relay = ResultRelay(1, self._client_eof, driver.relay_eof, text_result)
        cid = self._cid
        if self._commands is not None:  # counted as running, as mimic's path counts every command
            self._commands._entered(cid)
        else:
            self._enter(cid)
        on_end = partial(self._hot_end, sql, plan, started, cid, relay, pool, payload)
        aggregates = plan.merge.aggregates
        header_for = None
        memos = session._hot_headers  # _hot_header's memo read here; a miss (a new kind of result) asks it
        if memos is not None:
            header_for = _get(memos, (aggregates, PyLong_FromVoidPtr(<void*> announced)))  # id(announced)
        if header_for is None or header_for.announced is not announced:
            header_for = session._hot_header(aggregates, announced)
        self.taken += 1
        if tx is not None:  # on the transaction's pin (KILL QUERY leaves a pinned read be: not the session's _sent)
            pin, sock, stmt_id, opening = <tuple> link
            loop = session._hot_loop
            if loop is None:
                loop = session._loop()
            read_on_pin = self._pin_statement(runtime, session, plan, started, relay, header_for, self._client, on_end,
                                              self.done_with, cid, tx, pin, loop)
            session._pinned_hot = read_on_pin
            runtime.hot_on_pins += 1
            read_on_pin.start(style, values, stmt_id, sock, opening)
            return
        statement = self._statement(runtime, link, plan, started, relay, header_for, self._client, on_end,
                                    self.done_with, cid)
        session._sent = statement
        try:
            statement.start(style, values)
        except Exception as exc:  # the link's state is unknown: closed; the client hears why
            session._hot_unsent(statement, on_end, exc)


@cython.final
@cython.auto_pickle(False)  # one proxy's: never pickled
cdef class Commands:
    cdef public object idle
    cdef public Py_ssize_t running, waiting, ticks, inlined, relayed
    cdef public dict quiet_since
    cdef dict _commands, _revoked

    def __init__(self, idle):
        self.idle = idle
        self.running = 0
        self.waiting = 0
        self.ticks = 0
        self.inlined = 0
        self.relayed = 0
        self.quiet_since = {}
        self._commands = {}
        self._revoked = {}

    def enter(self, cid):
        self._entered(cid)

    cdef void _entered(self, object cid) except *:
        cdef PyObject* found
        if cid is not None:
            found = PyDict_GetItem(self._commands, cid)
            self._commands[cid] = 1 if found is NULL else <object> found + 1
        self.running += 1

    def exit(self, cid):
        cdef PyObject* found
        self.running -= 1
        if self.running == 0 and self.waiting:
            with self.idle:
                self.idle.notify_all()
        if cid is not None:
            self.quiet_since[cid] = self.ticks
            found = PyDict_GetItem(self._commands, cid)
            left = 0 if found is NULL else <object> found - 1
            if left:
                self._commands[cid] = left
            else:
                if found is not NULL:
                    del self._commands[cid]
                end = self._revoked.pop(cid, None)
                if end is not None:
                    end()

    def exit_relayed(self, cid):
        self.inlined += 1
        self.relayed += 1
        self.exit(cid)

    def quiet(self, cid):
        self.quiet_since[cid] = self.ticks

    def running_on(self, cid):
        cdef PyObject* found = PyDict_GetItem(self._commands, cid)
        return found is not NULL and bool(<object> found)

    def revoke(self, cid, end):
        if self.running_on(cid):
            self._revoked[cid] = end
        else:
            end()
