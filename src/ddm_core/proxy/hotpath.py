"""The hot path: a repeated one-unit SELECT answered from the client's packet to the data source's answer
without a task, a stream read or mimic's dispatch (docs/proxy.md#the-hot-path).

The connection's :class:`~ddm_core._fast.gate.CommandGate` hands a complete ``COM_QUERY`` or
``COM_STMT_EXECUTE`` to :meth:`ProxySession.hot <ddm_core.proxy.session.ProxySession.hot>`, which routes
it and sends it in one of two ways:

* :class:`LinkStatement`: on one of the event loop's own connections (``proxy/backends.py``), whose
  transport hands each chunk of the answer to the relay unit as it arrives;
* :class:`HotRelay`: when none is idle yet, on a pooled connection (``Executor.send_single``) whose
  socket is watched with a reader callback for as long as the answer takes.

Each chunk is re-framed and written to the client; at the end the statement is finished (connection
back, observer, audit) and the gate told to go on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, Callable

from ddm_core.errors import DdmError, ExecutionError
from ddm_core.execute.pools import discard_on
from ddm_core.execute.sent import SentUnit
from ddm_core.execute.statement import unit_error
from ddm_core.proxy.backends import LOST as _LOST
from ddm_core.proxy.relay import RELAY_STATES, ResultRelay, advance, conclude, is_waiting, socket_of, timed_out

__all__ = ["Deadlines", "HotRelay", "LinkStatement"]

log = logging.getLogger("ddm_core.proxy")

_DONE, _OK, _ERROR = RELAY_STATES.DONE, RELAY_STATES.OK, RELAY_STATES.ERROR

#: ``on_end(rows, error)``: the rows relayed (-1: an OK answer, in ``relay.first``) or the error; the
#: client's next packet (an error's, an OK's) takes the sequence id ``relay.seq``.
OnEnd = Callable[[int, "DdmError | None"], None]


class HotRelay:
    """One relayed answer driven by the event loop's reader callback (no task, no future)."""

    __slots__ = ("sent", "relay", "transport", "header_for", "on_end", "_sock", "_fd", "_loop", "_timer", "_paused")

    def __init__(self, sent: SentUnit, relay: ResultRelay, transport: Any,
                 header_for: Callable[[list[bytes]], tuple[list[bytes], int]], on_end: OnEnd) -> None:  # fmt: skip
        self.sent = sent
        self.relay = relay
        self.transport = transport
        self.header_for = header_for
        self.on_end = on_end
        self._sock: Any = None
        self._fd = sent.fileno
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._paused = False

    def start(self) -> None:
        """Watch the data source's socket; past the answer bound, a frozen data source fails the statement."""
        try:
            self._sock = socket_of(self.sent)
        except DdmError as exc:
            self._end(0, exc)
            return
        self._loop.add_reader(self._fd, self._readable)
        answer_by = self.sent.answer_by
        if answer_by is not None:
            self._timer = self._loop.call_later(max(0.0, answer_by - time.monotonic()), self._expired)

    def _readable(self) -> None:
        # Unwatched before anything can give the connection back (or close it): its descriptor is
        # blocking again for the driver, and a closed one is never watched.
        self._unwatch()
        try:
            state = advance(self.sent, self._sock, self.relay, self.transport, self.header_for)
            if is_waiting(state):
                if self.transport.get_write_buffer_size() > _HIGH_WATER:
                    self._paused = True  # a slow client: its data source is read again once its socket drains
                    self._loop.call_later(_DRAIN_POLL, self._drained)
                else:
                    self._loop.add_reader(self._fd, self._readable)
                return
            rows = conclude(self.sent, self.relay, state)
        except DdmError as exc:
            self._end(0, exc)
            return
        except Exception as exc:  # noqa: BLE001  # a bug must not leave the client waiting for ever
            log.exception("relaying an answer failed")
            if not self.sent.borrowed.released:
                self.sent.abandon()
            self._end(0, ExecutionError(f"ddm: relaying the answer failed: {exc}"))
            return
        self._end(rows, None)

    def _unwatch(self) -> None:
        self._loop.remove_reader(self._fd)
        os.set_blocking(self._fd, True)  # uvloop made it non-blocking to watch it (proxy/relay.py)

    def _drained(self) -> None:
        if self.transport.is_closing() or self.transport.get_write_buffer_size() <= _LOW_WATER:
            self._paused = False
            self._loop.add_reader(self._fd, self._readable)
        else:
            self._loop.call_later(_DRAIN_POLL, self._drained)

    def _expired(self) -> None:
        self._timer = None
        if self._paused:  # waiting for the client, not for the data source
            return
        self._unwatch()
        try:
            timed_out(self.sent)
        except DdmError as exc:
            self._end(0, exc)

    def _end(self, rows: int, error: DdmError | None) -> None:
        self._sock = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.on_end(rows, error)


#: Bytes waiting for a slow client before its data source is no longer read; read again below _LOW_WATER.
_HIGH_WATER = 1 << 20
_LOW_WATER = 1 << 18
_DRAIN_POLL = 0.002


class Deadlines:
    """The deadlines of the statements running on links, on one loop timer (not two timers a statement).

    A link runs one statement at a time, and a statement's deadline (its ``cancel_at``, its ``abort_at``)
    is almost never reached: arming and cancelling a timer for each was a tenth of the hot path's
    machine instructions. The one timer is armed for no later than the earliest deadline of the
    statements running; when it fires it ends those whose deadline passed and is armed again for the
    earliest left, so each deadline is met at its time, as by a timer of its own. A statement that
    ended leaves the timer armed (it fires once for nothing).
    """

    __slots__ = ("running", "_timer", "at")

    def __init__(self) -> None:
        #: The statements whose deadlines are watched: a LinkStatement adds itself as it starts and leaves as it
        #: ends (set.add / set.discard: no frame a statement).
        self.running: set[LinkStatement] = set()
        self._timer: asyncio.TimerHandle | None = None
        self.at = float("inf")  # when the timer fires (inf: not armed)

    def arm(self, when: float, loop: asyncio.AbstractEventLoop) -> None:
        """Fire at ``when`` (earlier than :attr:`at`): a statement in :attr:`running` has its first deadline then."""
        if self._timer is not None:
            self._timer.cancel()
        self.at = when
        self._timer = loop.call_at(when, self._fire, loop)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self.at = None, float("inf")
        now = loop.time()
        for statement in list(self.running):
            try:
                statement.check(now)
            except Exception:  # as a timer's callback: logged, and the other statements' deadlines still kept
                log.exception("a hot statement's deadline failed")
        due = [when for st in self.running for when in (st.cancel_at, st.abort_at) if when is not None]
        if due:
            self.arm(min(due), loop)


class LinkStatement:
    """One hot statement on a :class:`~ddm_core.proxy.backends.Link` of the event loop's own.

    What the executor does for a sent unit is done here in its terms: the statement's deadline cancels
    it on the data source (the driver's ``cancel``: ``KILL QUERY`` on a connection of its own) and a
    cancelled link is never reused; past the answer bound a frozen data source's link is aborted; the
    data source's error is mapped as a unit's (``unit_error``); the slow-SQL log and the observer hear
    of it (``Engine.observed`` / ``failed``).
    """

    __slots__ = ("runtime", "link", "plan", "started", "relay", "header_for", "client", "on_end", "fired", "bounded",
                 "done", "cancel_at", "abort_at")  # fmt: skip

    def __init__(self, runtime: Any, link: Any, plan: Any, started: float, relay: ResultRelay,
                 header_for: Callable[[list[bytes]], tuple[list[bytes], int]], client: Any, on_end: OnEnd) -> None:  # fmt: skip
        self.runtime = runtime
        self.link = link
        self.plan = plan  # the statement's one-unit plan
        self.started = started  # its start (the clock of the slow-SQL log and the observer)
        self.relay = relay
        self.header_for = header_for
        self.client = client
        self.on_end = on_end
        self.fired = False  # the deadline's cancel went out
        self.bounded = False  # the answer bound passed: the link was aborted
        self.done = False  # ended (answered, or abandoned): a late callback changes nothing
        self.cancel_at: float | None = None  # the loop's time its deadline cancels it on the data source
        self.abort_at: float | None = None  # the loop's time its link is aborted (the answer bound)

    def start(self, style: str, values: bytes | None) -> None:
        """Send the unit (a text statement, or an execute of ``values``, prepared on the link first if it
        is not yet) and arm the deadline and the answer bound."""
        link = self.link
        unit = self.plan.units[0]
        engine = self.runtime.executor.engine
        loop = asyncio.get_running_loop()
        seconds = engine.timeout
        if seconds:
            now = loop.time()
            self.cancel_at = now + seconds
            self.abort_at = now + seconds + engine.cancel_grace
        elif link.read_bound is not None:
            self.abort_at = loop.time() + link.read_bound
        if self.abort_at is not None:  # Deadlines.add's, without its frame (the cancel comes before the abort)
            deadlines = self.runtime.deadlines
            deadlines.running.add(self)
            first = self.cancel_at if self.cancel_at is not None else self.abort_at
            if first < deadlines.at:
                deadlines.arm(first, loop)
        if values is not None:
            stmt_id = link.prepared.get(unit.sql)
            if stmt_id is not None:
                self._execute(stmt_id, values)
                return
        else:
            driver = link.driver
            sql = engine.unit_sql(driver, unit, style)
            if unit.params is not None:
                sql = sql % tuple(link.raw.escape(p) for p in unit.params)  # as PyMySQL's cursor formats it
            link.send(b"\x03" + sql.encode(link.raw.encoding), self.relay, self.client, self.header_for, self._ended)
            return

        def prepared(stmt_id: int | None, error: bytes) -> None:
            if stmt_id is None:
                self.relay.first = error
                self._ended(link, _ERROR if error else _LOST)
                return
            link.prepared[unit.sql] = stmt_id
            self._execute(stmt_id, values)

        link.prepare(unit.sql, prepared)

    def _execute(self, stmt_id: int, values: bytes) -> None:
        payload = b"\x17" + stmt_id.to_bytes(4, "little") + b"\x00\x01\x00\x00\x00" + values
        self.link.send(payload, self.relay, self.client, self.header_for, self._ended)

    def abandon(self) -> None:
        """Sending failed half-way: the link is closed and nothing of this statement runs any more."""
        self.done = True
        self.runtime.deadlines.running.discard(self)
        self.link.abort()

    def check(self, now: float) -> None:
        """:class:`Deadlines`: past its deadline it is cancelled on the data source (the driver's ``cancel``,
        which never waits on the server); past the answer bound its link is aborted (``connection_lost``
        ends the statement)."""
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

    def _ended(self, link: Any, state: int) -> None:
        if self.done:
            return
        self.done = True
        runtime = self.runtime
        runtime.deadlines.running.discard(self)
        relay, plan = self.relay, self.plan
        engine = runtime.executor.engine
        backends = runtime.backends
        if (state == _DONE or state == _OK) and not self.fired:
            backends.give(link)
            rows = int(relay.rows) if state == _DONE else -1
            engine.observed_rows(plan, self.started, max(rows, 0))
            self.on_end(rows, None)
            return
        unit = plan.units[0]
        if state == _ERROR and relay.first:
            exc: BaseException = link.driver.relay_error(link.raw, relay.first)
        elif self.bounded:
            exc = TimeoutError(f"no answer from the data source by the statement's deadline ({unit.sql})")
        else:
            exc = ConnectionError("the data source's connection was lost, or answered out of step")
        if self.fired or state != _ERROR or discard_on(exc):
            link.abort()  # a cancel may still be on its way to it, or its state is unknown
        else:
            backends.give(link)
        error = unit_error(exc, unit, link.endpoint.name, self.fired, unit.sql)
        if not isinstance(error, DdmError):
            error = ExecutionError(f"ddm: {error}")
        engine.failed(plan, self.started, error)
        self.on_end(0, error)
