"""A client's hot statement taken from the gate in one call: read, routed, sent on an idle link.

Pure-Python twin of ``hotfront.pyx`` (same class, same behaviour; tests/test_hot_front.py runs both
behind a real proxy). The gate (``gate.pyx``) hands each command of a logged-in client to
:meth:`HotFront.hot`. The commonest statement of all — a COM_STMT_EXECUTE or COM_QUERY of a one-unit
SELECT seen before, in autocommit, on a data source without replicas, with an idle link of the loop's
own to it (docs/proxy.md#the-front) — is taken here from its packet to the execute written on the
link; the answer is relayed and the statement ended by ``hotlink``'s ``HotStatement``. So is such a read
in a local transaction, on the connection the transaction pinned (or right behind its opening, when it is
its first read there), relayed and ended by ``hotpin``'s ``PinRead``. Anything else,
or anything this finds unusual, goes to the session's hot path (``ProxySession.hot``) with what was
read of the command, and that path decides as before: the front only ever takes statements the session's
path would have sent the same way, with the same bytes.

Nothing is changed before the front knows it takes the statement, so a statement it leaves is the
session's exactly as it arrived. The exceptions are idempotent: the parameter types a COM_STMT_EXECUTE
carries are remembered as soon as they are read (the session's path remembers the same), and a link
asked for and not found starts one opening (which the session's path would start too).

:class:`Commands` is the proxy's count of client commands running, in all (a shutdown waits for none)
and per connection (a removed user's session ends between commands; the idle sweeper skips a connection
running one), which every statement enters and exits: compiled, with the front and ``hotlink``'s end, a
statement counts itself without an interpreted frame.

The objects it works with (session, connection, runtime, the link statement class, the literal
parameterizer) are the proxy's, passed in: this unit imports none of them.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

from ddm_core._fast.gate_py import execute_params
from ddm_core._fast.relay_py import ResultRelay

__all__ = ["HotFront", "Commands", "COM_QUERY", "COM_STMT_EXECUTE"]

COM_QUERY = 0x03
COM_STMT_EXECUTE = 0x17
#: Unit texts whose pin rule is kept per connection, at most (forgotten all at once past it).
_ON_PINS = 256


#: Each client character set's Python codec, read once: mimic's ``CharacterSet.decode`` asks its enum's
#: ``name`` for it every time (~2.8 k instructions a statement)
_CODECS: dict[Any, str] = {}


def _codec(charset: Any) -> str:
    codec = _CODECS.get(charset)
    if codec is None:
        codec = _CODECS[charset] = charset.codec
    return codec


class HotFront:
    """One client connection's front: :meth:`hot` is the gate's callable.

    Args:
        session: The connection's ``ProxySession`` (its ``hot`` takes what the front leaves).
        conn: The ``ProxyConnection`` (prepared statements, character sets, the client's transport).
        runtime: The ``ProxyRuntime`` (shapes, router, pools, links, counters).
        terms: ``(parameterize, execute_values, statement_class, plain, single, text_limit, utf8, pin_class,
            local, check_pinned)``: the proxy's literal parameterizer, parameter-block encoder,
            ``LinkStatement``, the privileges no statement needs beyond a login (``PLAIN``),
            ``RouteKind.SINGLE``, the longest text taken, the character sets whose text is the client's as it
            is, ``PinStatement`` (a read on a transaction's pin), the local ``Transaction`` class and
            ``check_pinned`` (may a plan run on a pin without a reset after it).
    """

    def __init__(self, session: Any, conn: Any, runtime: Any, terms: tuple[Any, ...]) -> None:
        self.session = session
        self.conn = conn
        self.runtime = runtime
        (self._parameterize, self._execute_values, self._statement, self._plain, self._single, self._text_limit,
         self._utf8, self._pin_statement, self._local, self._check_pinned) = terms  # fmt: skip
        executor = runtime.executor
        self._router = executor.engine.router
        self._endpoints = executor.endpoints
        # What never changes for a connection once its gate is made, read once: its prepared statements' tables
        # (emptied in place by a reset, never replaced), the handshake's capabilities, its id and transport; the
        # runtime's link stack, clock and count of commands running; the session's end of a hot statement.
        self._stmts, self._too_long = conn.prepared_stmts, conn._too_long
        self._announced, self._param_types = conn._announced, conn._param_types
        self._query_attributes, self._client_eof = conn._query_attributes, conn.client_eof
        self._cid, self._client = conn.connection_id, conn.gate_transport
        self._backends, self._clock, self._enter = runtime.backends, runtime.clock, runtime._enter
        self._hot_end = session._hot_end
        #: The primaries' pools of data sources without replicas (``Endpoints.plain_primary``), for one version
        self._pools: dict[str, Any] = {}
        self._pools_config: Any = None
        #: Per unit text: may a read of it run on a transaction's pin as it is (``check_pinned``'s answer, kept)
        self._on_pins: dict[str, bool] = {}
        self._follows_sql: str | None = None  # the statement a read behind an opening executes (_follows asks)
        #: The gate's ``done``, set once the gate is made (it is made with :meth:`hot`).
        self.done_with: Callable[[], None] | None = None
        #: Statements the front took.
        self.taken = 0

    def hot(self, command: int, payload: bytes) -> bool:
        """The gate's hot path for ``payload`` (command byte ``command``); ``False``: mimic's path answers it.
        The session's path gets a COM_QUERY or COM_STMT_EXECUTE as read here (``None``: not one the hot path
        takes as a statement), any other command unread."""
        if command != COM_STMT_EXECUTE and command != COM_QUERY:
            return self.session.hot(command, payload, None)  # type: ignore[no-any-return]
        read: tuple[Any, ...] | None
        try:
            read = self.read_execute(payload) if command == COM_STMT_EXECUTE else self.read_query(payload)
        except Exception:  # noqa: BLE001  # undecodable text, a malformed execute: mimic's path answers it
            return False
        if read is None:
            return self.session.hot(command, payload, None)  # type: ignore[no-any-return]
        try:
            ready = self._ready(command, read)
        except Exception:  # noqa: BLE001  # an object unlike what the front expects: the session's path decides
            ready = None
        if ready is None:
            return self.session.hot(command, payload, read)  # type: ignore[no-any-return]
        self._send(command, payload, read, ready)
        return True

    def read_query(self, payload: bytes) -> tuple[str, str, list[Any] | None, None, None] | None:
        """A COM_QUERY's ``(text as sent, text with its literals as %s, their values, None, None)``; ``None``: the
        hot path does not take it (query attributes before the text, results in a character set other than UTF-8,
        a text longer than it takes)."""
        if self._query_attributes:  # mimic's reader takes them off the text
            return None
        client, results = self._charsets()
        if results not in self._utf8:  # results converted to another character set: decoded, not relayed
            return None
        sql = payload[1:].decode(_codec(client))
        if len(sql) > self._text_limit:
            return None
        parameterized = self._parameterize(sql)
        if parameterized is None:
            return sql, sql, None, None, None
        return sql, parameterized[0], parameterized[1], None, None

    def read_execute(self, payload: bytes) -> tuple[str, str, list[Any], Any, bytes] | None:
        """A COM_STMT_EXECUTE's ``(text, text, parameter values, announced columns, parameter block)``; ``None``:
        mimic's path answers it (into a cursor, long data, query attributes, a client or results character
        set other than UTF-8, a type the compiled reader leaves to mimic's, malformed, unknown)."""
        stmt = self._stmts.get(int.from_bytes(payload[1:5], "little"))
        if stmt is None or stmt.param_buffers or stmt.stmt_id in self._too_long or self._query_attributes:
            return None
        announced = self._announced.get(stmt.stmt_id)
        if announced is None:
            return None
        client, results = self._charsets()
        if client not in self._utf8 or results not in self._utf8:
            return None
        param_types = self._param_types
        known = param_types.get(stmt.stmt_id)
        read = execute_params(payload, stmt.num_params, known)
        if read is None:
            return None
        values, block, types = read
        if types is not known:
            param_types[stmt.stmt_id] = types  # as mimic's read_execute remembers them
        sql = stmt.sql
        return sql, sql, values, announced, block

    def _charsets(self) -> tuple[Any, Any]:
        """The client's ``(character_set_client, character_set_results)`` (``ProxyConnection._charsets``, its
        cache read here)."""
        conn = self.conn
        known, variables = conn._known_charsets, self.session.variables
        if known[0] is variables and known[1] == variables.changes:
            return known[2]  # type: ignore[no-any-return]
        return conn._charsets()  # type: ignore[no-any-return]

    def _ready(self, command: int, read: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """``(plan, style, pool, driver, values, link, tx)`` when the front takes the statement — in a transaction, its
        pin in place of the link —; ``None``: nothing done, the session's path decides."""
        session, runtime = self.session, self.runtime
        tx = session._tx
        if tx is None:
            if not session._autocommit:  # its first statement opens a transaction: the session's path
                return None
        elif type(tx) is not self._local or not tx.active:  # reads on pins only in a local, live transaction
            return None
        if not runtime.front and (not runtime.inline or not runtime.relay or runtime.limiter is not None
                                  or (runtime.masker is not None and not session.may_unmask)):
            return None  # fmt: skip
        sql, text, params, announced, block = read
        text_result = command == COM_QUERY
        shape = runtime.shapes.get(text)
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
        except Exception:  # noqa: BLE001  # a refusal: the session's path routes it again and answers it
            return None
        units = plan.units
        if (len(units) != 1 or plan.kind is not self._single or plan.dual or plan.statement != "select"
                or not plan.merge.is_trivial):
            return None  # fmt: skip
        unit = units[0]
        if tx is not None:
            return self._on_pin(tx, plan, unit, style, text_result, params, block)
        config = router.routed_config
        data_source = unit.data_source
        if config is not self._pools_config:  # plain_primary's answers are the same for one version
            self._pools, self._pools_config = {}, config
        known = self._pools.get(data_source)  # (pool, driver), or () when it cannot relay
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
            values = block if block is not None and list(unit.params) == params else self._execute_values(unit.params)
            if values is None:
                return None
        link = self._backends.take(data_source, pool, config)
        if link is None:
            return None
        return plan, style, pool, driver, values, link, None

    def _on_pin(self, tx: Any, plan: Any, unit: Any, style: str, text_result: bool, params: Any, block: Any
                ) -> tuple[Any, ...] | None:  # fmt: skip
        """:meth:`_ready`'s answer for a read in ``tx``, with the rules of the session's path
        (``loop_transactions.pin_for`` / ``opening_for``, ``Executor.send_single``): on the data source's pin, or
        — its first read there — right behind the transaction's opening, sent now on an idle connection that
        becomes the pin (last: it goes); a binary execute only where its statement is prepared on that
        connection already (else the session's path prepares it there first)."""
        if plan.is_write or plan.cross_node is not None:
            return None
        sql = unit.sql
        plain = self._on_pins.get(sql)
        if plain is None:
            try:
                plain = not self._check_pinned(plan)  # True: the pin would need a reset after it
            except Exception:  # noqa: BLE001  # refused on a pin: the session's path says why
                plain = False
            if len(self._on_pins) >= _ON_PINS:
                self._on_pins.clear()
            self._on_pins[sql] = plain
        executor = self.runtime.executor
        if not plain or executor.runner.closed or executor.engine.stream is True:
            return None
        values = None
        if not text_result:
            values = block if block is not None and list(unit.params) == params else self._execute_values(unit.params)
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
        return plan, style, pin.pool, driver, values, (pin, sock, stmt_id, opening), tx

    def _follows(self, borrowed: Any) -> bool:
        """May the read go right behind the opening on ``borrowed`` (``Transaction.send_opening``'s ``follows``):
        its answer relayed off the socket, a binary execute's statement prepared there already?"""
        driver = borrowed.pool.driver
        return bool(driver.can_relay and driver.follows_opening(borrowed.raw, self._follows_sql)
                    and driver.relay_socket(borrowed.raw) is not None)  # fmt: skip


    def _send(self, command: int, payload: bytes, read: tuple[Any, ...], ready: tuple[Any, ...]) -> None:
        """The statement taken: the session's state for it, counted as running, sent on its link."""
        session, runtime = self.session, self.runtime
        sql, _, _, announced, _ = read
        plan, style, pool, driver, values, link, tx = ready
        text_result = command == COM_QUERY
        session._text, session._announced, session._interrupted = text_result, announced, False
        started = self._clock()
        relay = ResultRelay(1, self._client_eof, driver.relay_eof, text_result)
        cid = self._cid
        self._enter(cid)  # counted as running, as mimic's path counts every command
        on_end = partial(self._hot_end, sql, plan, started, cid, relay, pool, payload)
        header_for = session._hot_header(plan.merge.aggregates, announced)
        self.taken += 1
        if tx is not None:  # on the transaction's pin (KILL QUERY leaves a pinned read be: not the session's _sent)
            pin, sock, stmt_id, opening = link
            loop = session._hot_loop
            if loop is None:
                loop = session._loop()
            read_on_pin = session._pinned_hot = self._pin_statement(runtime, session, plan, started, relay, header_for,
                                                                    self._client, on_end, self.done_with, cid, tx, pin,
                                                                    loop)  # fmt: skip
            runtime.hot_on_pins += 1
            read_on_pin.start(style, values, stmt_id, sock, opening)
            return
        statement = session._sent = self._statement(runtime, link, plan, started, relay, header_for, self._client,
                                                    on_end, self.done_with, cid)  # fmt: skip
        try:
            statement.start(style, values)
        except Exception as exc:  # noqa: BLE001  # the link's state is unknown: closed; the client hears why
            session._hot_unsent(statement, on_end, exc)


class Commands:
    """Client commands running: :attr:`running` in all, and per connection id.

    ``enter`` and ``exit`` run on the event loop only, the one writer of the counts: no lock to count. A
    waiter (``ProxyRuntime.wait_idle``, on a thread) counts itself in :attr:`waiting` before it reads
    :attr:`running`, under ``idle``'s lock; ``exit`` reads :attr:`waiting` after it counted down, so either the
    waiter sees the zero or ``exit`` sees the waiter and notifies it under the lock.

    Args:
        idle: The condition a waiter for no command running waits on.
    """

    def __init__(self, idle: Any) -> None:
        self.idle = idle
        self.running = 0
        self.waiting = 0  # threads waiting on ``idle`` (under its lock)
        #: The idle sweeper's clock (proxy/idle.py): its ticks so far, and per connection id the tick at which its
        #: last command ended or mimic's reader began to wait for the next one.
        self.ticks = 0
        self.quiet_since: dict[int, int] = {}
        #: Statements run on the event loop (without the thread hop), and of those the ones whose result was relayed
        self.inlined = 0
        self.relayed = 0
        self._commands: dict[int, int] = {}
        self._revoked: dict[int, Callable[[], None]] = {}

    def enter(self, cid: int | None) -> None:
        """One command of connection ``cid`` (``None``: of no connection) runs from now."""
        if cid is not None:
            self._commands[cid] = self._commands.get(cid, 0) + 1
        self.running += 1

    def exit(self, cid: int | None) -> None:
        """One command of connection ``cid`` is done; the connection's revocation runs once it runs none."""
        self.running -= 1
        if self.running == 0 and self.waiting:  # a Condition's notify is Python code: only for a waiter
            with self.idle:
                self.idle.notify_all()
        if cid is not None:
            self.quiet_since[cid] = self.ticks
            left = self._commands.pop(cid, 1) - 1
            if left:
                self._commands[cid] = left
            else:
                end = self._revoked.pop(cid, None)
                if end is not None:
                    end()

    def exit_relayed(self, cid: int | None) -> None:
        """A statement run on the loop whose result was relayed is done: counted, then :meth:`exit`."""
        self.inlined += 1
        self.relayed += 1
        self.exit(cid)

    def quiet(self, cid: int) -> None:
        """Connection ``cid`` waits for its next command from now."""
        self.quiet_since[cid] = self.ticks

    def running_on(self, cid: int) -> bool:
        """Connection ``cid`` runs a command now."""
        return bool(self._commands.get(cid))

    def revoke(self, cid: int, end: Callable[[], None]) -> None:
        """Call ``end`` now if connection ``cid`` runs no command, else when its last one is done."""
        if self._commands.get(cid):
            self._revoked[cid] = end
        else:
            end()
