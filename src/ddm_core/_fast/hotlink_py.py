"""A hot statement on one of the event loop's own data-source connections: its send, its answer, its end.

Pure-Python twin of ``hotlink.pyx`` (same classes, same behaviour; tests/test_hotlink.py runs both).
The proxy's hot path (docs/proxy.md#the-hot-path) sends a repeated one-unit SELECT on a connection
the loop reads as a transport; these are the parts of it that run for every statement, compiled:

* :class:`LinkProtocol` — the connection's protocol: ``send`` writes one framed command, and each
  chunk the data source sends (``data_received``) is re-framed by the statement's relay and written to
  the client; at the answer's end the statement hears its state. ``proxy/backends.py``'s ``Link``
  subclasses it with what is not per statement (prepares, losses, closing).
* :class:`HeaderMemo` — a session's client column header for relayed results of one kind, asked of
  the connection again only when the data source's column definitions or the session's variables
  (its character sets) changed.
* :class:`HotStatement` — one statement on such a link: its deadline and answer bound registered with
  the loop's shared timer (``runtime.deadlines``), the execute (or text) sent, and at its end the link
  given back, the statement observed and the session's common end done here (the counters, the
  running-command count, the gate told to go on). ``proxy/hotpath.py``'s ``LinkStatement`` subclasses
  it with the rare parts: the first prepare on a link and the mapping of an error.
* :class:`LinkStack` — the idle links per endpoint: ``take`` one for a statement, ``give`` it back after.
  ``proxy/backends.py``'s ``LoopBackends`` subclasses it with the rest (opening links, the idle sweep,
  a configuration's change, losses).

The objects it works with (runtime, engine, link pool, gate) are the proxy's, passed in: this unit
imports none of them.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from ddm_core._fast.relay_py import DONE, FIRST, OK, ROWS

__all__ = ["HeaderMemo", "LinkProtocol", "HotStatement", "LinkStack", "LOST", "frame"]

#: A relay state of its own: the connection was lost (or aborted) before the answer ended.
LOST = -1
#: Bytes waiting for a slow client before its data source is no longer read; read again below _LOW_WATER.
HIGH_WATER = 1 << 20
LOW_WATER = 1 << 18
DRAIN_POLL = 0.002
#: Column headers one HeaderMemo keeps (kinds of definitions: physical tables, usually).
MEMO_LIMIT = 64
#: Definitions a ``HeaderMemo`` compares before it hashes them (the tables one statement reads, usually).
RECENT = 8


def _surely_quick(slow: Any, started: float) -> bool:
    """``SlowSqlLog.surely_quick(started)``, from the two figures it keeps."""
    now = time.monotonic()
    return bool(now - started < slow.threshold_s and now < slow.refresh_at)


def frame(payload: bytes, seq: int = 0) -> bytes:
    """``payload`` as one MySQL packet with sequence id ``seq``."""
    return len(payload).to_bytes(3, "little") + bytes((seq,)) + payload


class HeaderMemo:
    """``header_for(definitions) -> (header payloads, status flags)`` of a relayed result, remembered.

    ``header_for`` is the connection's (``ProxyConnection.relay_header``: the data source's definitions
    turned into the client's for one kind of result — its aggregates, the prepared statement's announced
    columns); its payloads depend on those definitions and on the session's character set of results
    only, so they are kept per definitions (up to ``MEMO_LIMIT``) while the session's variables are the
    same object with the same count of changes (``CountedVariables.changes``: every SET counts; variables
    that count nothing are never remembered). The status flags are the connection's now, every time. The
    last ``RECENT`` definitions answered are compared first (a statement's name one of a few physical tables:
    compared, not hashed).
    ``announced``: the announced columns it was made for (its owner checks it is the same object).
    """

    __slots__ = ("header_for", "session", "conn", "announced", "_known", "_variables", "_changes", "_recent")

    def __init__(self, header_for: Callable[[list[bytes]], tuple[list[bytes], int]], session: Any, conn: Any,
                 announced: Any) -> None:  # fmt: skip
        self.header_for = header_for
        self.session = session
        self.conn = conn
        self.announced = announced
        self._known: dict[tuple[bytes, ...], list[bytes]] = {}
        self._variables: Any = None
        self._changes: Any = None
        #: the last definitions answered (copies: the caller's lists are its own) and their payloads, oldest first
        self._recent: list[tuple[list[bytes], list[bytes]]] = []

    def __call__(self, definitions: list[bytes]) -> tuple[list[bytes], int]:
        variables = self.session.variables
        changes = getattr(variables, "changes", None)
        if changes is None:  # variables that count nothing: asked every time
            return self.header_for(definitions)
        known = self._known
        if variables is not self._variables or changes != self._changes:  # a SET since: all asked again
            known.clear()
            self._variables, self._changes = variables, changes
            self._recent.clear()
        else:
            for recent, payloads in self._recent:
                if definitions == recent:
                    return payloads, int(self.conn.status_flags)
        key = tuple(definitions)  # the definitions name the physical table: one entry per table
        remembered = known.get(key)
        if remembered is not None:
            payloads, status = remembered, int(self.conn.status_flags)
        else:
            payloads, status = self.header_for(definitions)
            if len(known) >= MEMO_LIMIT:
                known.clear()
            known[key] = payloads
        if len(self._recent) >= RECENT:
            del self._recent[0]
        self._recent.append((list(definitions), payloads))
        return payloads, status


class LinkProtocol:
    """A data-source connection's protocol on the loop: one command at a time (module docstring).

    ``loop`` is set by the subclass (the loop it was made on), ``transport`` by ``connection_made``; so are the
    fields a :class:`HotStatement` and a :class:`LinkStack` read of it: ``read_bound`` (how long an answer may
    take to begin without a deadline), ``prepared`` (statement text → id on this connection), ``config`` (the
    configuration version it was opened under), ``key`` (its endpoint's key in the stack) and ``idle_since``.
    """

    __slots__ = ("transport", "loop", "closed", "read_bound", "prepared", "config", "key", "idle_since", "_relay",
                 "_client", "_header_for", "_on_end")  # fmt: skip

    def __init__(self) -> None:
        self.transport: Any = None
        self.loop: Any = None
        self.closed = False
        self.read_bound: float | None = None
        self.prepared: Any = None
        self.config: Any = None
        self.key: Any = None
        self.idle_since = 0.0
        self._relay: Any = None
        self._client: Any = None
        self._header_for: Any = None
        self._on_end: Any = None

    @property
    def answering(self) -> bool:
        """A command's answer is awaited."""
        return self._relay is not None

    def send(self, payload: bytes, relay: Any, client: Any, header_for: Any, on_end: Any) -> None:
        """Send one command whose answer ``relay`` re-frames for the ``client`` transport; ``on_end(link,
        state)`` once it is over (a relay state, or :data:`LOST`)."""
        self._relay, self._client, self._header_for, self._on_end = relay, client, header_for, on_end
        self.transport.write(len(payload).to_bytes(3, "little") + b"\x00" + payload)

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        relay = self._relay
        if relay is None:
            self.unasked(data)
            return
        state = relay.pump(data, self._client, self._header_for)  # framed bytes written to the client
        if state == FIRST or state == ROWS:
            client = self._client
            if client.get_write_buffer_size() > HIGH_WATER and not client.is_closing():
                self.transport.pause_reading()  # a slow client: its answer waits in the data source meanwhile
                self.loop.call_later(DRAIN_POLL, self._drained)
            return
        self.end(state)

    def end(self, state: int) -> None:
        """The command is over in ``state``: its ``on_end`` hears it (once)."""
        on_end = self._on_end
        self._relay = self._client = self._header_for = self._on_end = None
        if on_end is not None:
            on_end(self, state)

    def unasked(self, data: bytes) -> None:
        """Bytes with no command's answer awaited (the subclass: a prepare's answer, or out of step)."""
        raise NotImplementedError

    def _drained(self) -> None:
        client = self._client
        if client is None or client.is_closing() or client.get_write_buffer_size() <= LOW_WATER:
            if not self.closed:
                self.transport.resume_reading()
        else:
            self.loop.call_later(DRAIN_POLL, self._drained)


class HotStatement:
    """One hot statement on a :class:`LinkProtocol` (module docstring).

    ``runtime``: the proxy's (its ``executor.engine``, ``backends``, ``deadlines``, counters and running
    commands); ``on_end(rows, error)``: the session's end of anything but the common one; ``done_with``:
    the client's gate's ``done`` (``None``: ``on_end`` ends every outcome); ``cid``: the client connection's
    id, counted running while the statement runs.
    """

    __slots__ = ("runtime", "link", "plan", "started", "relay", "header_for", "client", "on_end", "done_with", "cid",
                 "fired", "bounded", "done", "cancel_at", "abort_at")  # fmt: skip

    def __init__(self, runtime: Any, link: Any, plan: Any, started: float, relay: Any, header_for: Any, client: Any,
                 on_end: Any, done_with: Any = None, cid: int | None = None) -> None:  # fmt: skip
        self.runtime = runtime
        self.link = link
        self.plan = plan  # the statement's one-unit plan
        self.started = started  # its start (the clock of the slow-SQL log and the observer)
        self.relay = relay
        self.header_for = header_for
        self.client = client
        self.on_end = on_end
        self.done_with = done_with
        self.cid = cid
        self.fired = False  # the deadline's cancel went out
        self.bounded = False  # the answer bound passed: the link was aborted
        self.done = False  # ended (answered, or abandoned): a late callback changes nothing
        self.cancel_at: float | None = None  # the loop's time its deadline cancels it on the data source
        self.abort_at: float | None = None  # the loop's time its link is aborted (the answer bound)

    def start(self, style: str, values: bytes | None) -> None:
        """Send the unit (a text statement, or an execute of ``values``; one not yet prepared on the link
        goes to :meth:`prepare_first`) and register the deadline and the answer bound."""
        link = self.link
        unit = self.plan.units[0]
        runtime = self.runtime
        engine = runtime.executor.engine
        loop = link.loop
        seconds = engine.timeout
        if seconds:
            now = loop.time()
            self.cancel_at = now + seconds
            self.abort_at = now + seconds + engine.cancel_grace
        elif link.read_bound is not None:
            self.abort_at = loop.time() + link.read_bound
        if self.abort_at is not None:  # the cancel comes before the abort
            deadlines = runtime.deadlines
            deadlines.running.add(self)
            first = self.cancel_at if self.cancel_at is not None else self.abort_at
            if first < deadlines.at:
                deadlines.arm(first, loop)
        if values is None:
            sql = engine.unit_sql(link.driver, unit, style)
            params = unit.params
            if params is not None:
                escape = link.raw.escape
                # as PyMySQL's cursor formats it; an int's escape is its str() (PyMySQL's escape_int), done here
                sql = sql % tuple([str(p) if type(p) is int else escape(p) for p in params])
            link.send(b"\x03" + sql.encode(link.raw.encoding), self.relay, self.client, self.header_for, self.ended)
            return
        stmt_id = link.prepared.get(unit.sql)
        if stmt_id is None:
            self.prepare_first(values)
            return
        self.execute(stmt_id, values)

    def execute(self, stmt_id: int, values: bytes) -> None:
        """COM_STMT_EXECUTE of the statement prepared as ``stmt_id`` with the parameter block ``values``."""
        payload = b"\x17" + stmt_id.to_bytes(4, "little") + b"\x00\x01\x00\x00\x00" + values
        self.link.send(payload, self.relay, self.client, self.header_for, self.ended)

    def prepare_first(self, values: bytes) -> None:
        """The unit's statement is not prepared on the link yet (the subclass prepares it, then executes)."""
        raise NotImplementedError

    def abandon(self) -> None:
        """Sending failed half-way: the link is closed and nothing of this statement runs any more."""
        self.done = True
        self.runtime.deadlines.running.discard(self)
        self.link.abort()

    def check(self, now: float) -> None:
        """The shared timer fired at ``now``: past its deadline it is cancelled on the data source (the
        driver's ``cancel``, which never waits on the server); past the answer bound its link is aborted
        (``connection_lost`` ends the statement)."""
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

    def ended(self, link: Any, state: int) -> None:
        """The link's answer is over in ``state``: the link back, the statement observed and ended."""
        if self.done:
            return
        self.done = True
        runtime = self.runtime
        runtime.deadlines.running.discard(self)
        if (state != DONE and state != OK) or self.fired:
            self.failed(link, state)
            return
        runtime.backends.give(link)
        rows = self.relay.rows if state == DONE else -1
        engine = runtime.executor.engine
        # Engine.observed_rows's first test, here: a read under the slow-SQL threshold with no observer is not observed
        if engine.observer is not None or self.plan.statement == "ddl" or not _surely_quick(engine.slow_sql, self.started):
            engine.observed_rows(self.plan, self.started, max(rows, 0))
        done_with = self.done_with
        if rows < 0 or done_with is None or runtime.audit is not None:
            self.on_end(rows, None)
            return
        # the session's common end (ProxySession._hot_end's first branch), without its frames
        try:
            runtime.commands.exit_relayed(self.cid)  # counted as run on the loop and relayed, and done
        finally:
            done_with()

    def failed(self, link: Any, state: int) -> None:
        """The answer ended in an error, a loss or after a cancel (the subclass maps it and ends)."""
        raise NotImplementedError


class LinkStack:
    """The idle links of the loop's own per endpoint, ``(data source, endpoint name)``: the most recently given
    back on top (a link idle longest is at the bottom, where the sweep closes it first).

    The subclass provides ``_reset(config)`` (a configuration version other than the links' own: every idle
    link closed), ``_grow(key, pool)`` (none idle: one opened in the background, when the endpoint may open
    more) and ``_sweep()`` (the idle links past :attr:`idle_seconds` closed), and sets ``_config`` (the version
    its links were opened under).
    """

    def __init__(self) -> None:
        self._idle: dict[tuple[str, str], list[Any]] = {}
        self._config: Any = None
        self._sweeper: Any = None  # the sweep's timer handle while one is armed
        self.closed = False
        self.idle_seconds = 2.0  # proxy.linkIdleMs, set by the runtime

    def take(self, data_source: str, pool: Any, config: Any) -> Any:
        """An idle link to ``pool``'s endpoint (the choice for a statement on ``data_source`` routed under
        ``config``), or ``None`` (one is then opened for later statements)."""
        if config is not self._config:
            self._reset(config)
        key = (data_source, pool.endpoint.name)
        idle = self._idle.get(key)
        if idle:
            return idle.pop()
        self._grow(key, pool)
        return None

    def give(self, link: Any) -> None:
        """A link whose answer ended in step: idle again (closed instead if its configuration went)."""
        if link.closed or self.closed or link.config is not self._config:
            link.abort()
            return
        loop = link.loop  # not get_running_loop(): it asks getpid() (a system call) every time
        link.idle_since = loop.time()
        self._idle.setdefault(link.key, []).append(link)
        if self._sweeper is None:
            self._sweeper = loop.call_later(self.idle_seconds, self._sweep)

    def _reset(self, config: Any) -> None:
        raise NotImplementedError

    def _grow(self, key: tuple[str, str], pool: Any) -> None:
        raise NotImplementedError

    def _sweep(self) -> None:
        raise NotImplementedError
