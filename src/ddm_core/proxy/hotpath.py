"""The hot path: a repeated one-unit SELECT answered from the client's packet to the data source's answer
without a task, a stream read or mimic's dispatch (docs/proxy.md#the-hot-path).

The connection's :class:`~ddm_core._fast.gate.CommandGate` hands a complete ``COM_QUERY`` or
``COM_STMT_EXECUTE`` to :meth:`ProxySession.hot <ddm_core.proxy.session.ProxySession.hot>`, which routes
it and sends it in one of two ways:

* :class:`LinkStatement`: on one of the event loop's own connections (``proxy/backends.py``), whose
  transport hands each chunk of the answer to the relay unit as it arrives;
* :class:`HotRelay`: when none is idle yet, on a pooled connection (``Executor.send_single``) whose
  socket is watched with a reader callback for as long as the answer takes; in a transaction, on its pin.

Most of a transaction's one-unit reads — on a data source it pinned already, or its first there, right behind
its opening — are taken by the gate's front itself and sent by :class:`PinStatement` (the compiled ``hotpin``
unit's common course), which hands anything rare to the executor's and :class:`HotRelay`'s code.

Each chunk is re-framed and written to the client; at the end the statement is finished (connection
back, observer, audit) and the gate told to go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from abc import ABC, abstractmethod
from functools import partial
from typing import Any, Callable

from ddm_core.errors import DdmError, ExecutionError
from ddm_core.execute import Transaction
from ddm_core.execute.pools import discard_on
from ddm_core.execute.sent import SentControl, SentUnit
from ddm_core.execute.shared import DEFAULT
from ddm_core.execute.statement import unit_error
from ddm_core.proxy.backends import LOST as _LOST
from ddm_core.proxy.loop_transactions import PinnedLoan, bound_opening, drop_opening
from ddm_core.proxy.relay import (
    RELAY_STATES, HotStatement, PinRead, ResultRelay, advance, closed_mid_answer, conclude, hotpin, is_waiting, no_answer,
    read_failed, socket_of, timed_out,
)  # fmt: skip

__all__ = ["Deadlines", "HotEnd", "HotRelay", "LinkStatement", "PinStatement"]

log = logging.getLogger("ddm_core.proxy")

_ERROR = RELAY_STATES.ERROR
_DONE = RELAY_STATES.DONE

#: ``on_end(rows, error)``: the rows relayed (-1: an OK answer, in ``relay.first``) or the error; the
#: client's next packet (an error's, an OK's) takes the sequence id ``relay.seq``.
OnEnd = Callable[[int, "DdmError | None"], None]


class _Bounded(ABC):
    """A wait on a data source's socket bounded on the loop's shared timer (:class:`Deadlines`): a timer of its
    own per statement cost about as much as the rest of a relay on a pin. A subclass says what its bound's
    passing does (:meth:`_expired`)."""

    __slots__ = ("_loop", "_deadlines", "cancel_at", "abort_at")

    def __init__(self, loop: asyncio.AbstractEventLoop, deadlines: Deadlines) -> None:
        self._loop = loop
        self._deadlines = deadlines
        self.cancel_at: float | None = None  # Deadlines reads it: the watchdog's guard cancels at the deadline
        self.abort_at: float | None = None  # the loop's time past which the answer has not begun in time

    def _bound(self, answer_by: float | None) -> None:
        """Past ``answer_by`` (monotonic; ``None``: no bound) :meth:`_expired` runs."""
        if answer_by is not None:
            loop, deadlines = self._loop, self._deadlines
            self.abort_at = when = loop.time() + max(0.0, answer_by - time.monotonic())
            deadlines.running.add(self)
            if when < deadlines.at:
                deadlines.arm(when, loop)

    def _unbound(self) -> None:
        self.abort_at = None
        self._deadlines.running.discard(self)

    def check(self, now: float) -> None:
        """:class:`Deadlines`' call (``now``: the loop's time): past the answer bound, :meth:`_expired`."""
        if self.abort_at is not None and self.abort_at <= now:
            self._unbound()
            self._expired()

    @abstractmethod
    def _expired(self) -> None:
        """The answer has not begun by its bound."""


def _unwatch(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    loop.remove_reader(fd)
    os.set_blocking(fd, True)  # uvloop made it non-blocking to watch it (proxy/relay.py)


class HotRelay(_Bounded):
    """One relayed answer driven by the event loop's reader callback (no task, no future)."""

    __slots__ = ("sent", "relay", "transport", "header_for", "on_end", "_sock", "_fd", "_paused", "_watched", "_opening",
                 "_opened")

    def __init__(self, sent: SentUnit, relay: ResultRelay, transport: Any,
                 header_for: Callable[[list[bytes]], tuple[list[bytes], int]], on_end: OnEnd,
                 deadlines: Deadlines, loop: asyncio.AbstractEventLoop | None = None,
                 opening: SentControl | None = None, opened: Callable[[SentControl], None] | None = None) -> None:  # fmt: skip
        """``deadlines``: the loop's shared timer its answer bound goes on (``runtime.deadlines``). ``opening``: a
        transaction's opening sent before the statement on the same connection (its OKs come first: read, then
        ``opened(opening)`` makes the connection the pin or raises the opening's error)."""
        self.sent = sent
        self.relay = relay
        self.transport = transport
        self.header_for = header_for
        self.on_end = on_end
        self._sock: Any = None
        self._fd = sent.fileno
        # the caller's loop if it keeps it: get_running_loop() asks getpid() (a system call) every time
        super().__init__(asyncio.get_running_loop() if loop is None else loop, deadlines)
        self._paused = False
        self._watched = False  # the loop reads the data source's socket for it
        self._opening = opening
        self._opened = opened

    def start(self) -> None:
        """Watch the data source's socket; past the answer bound, a frozen data source fails the statement."""
        try:
            self._sock = socket_of(self.sent)
        except DdmError as exc:
            opening, self._opening = self._opening, None
            if opening is not None:  # not pinned yet: the connection goes with the opening, the transaction stays
                drop_opening(opening, self.sent, "")
            self._end(0, exc)
            return
        self._watch()
        answer_by = self.sent.answer_by
        opening = self._opening
        if opening is not None:  # its OKs come first, bounded by the statement's deadline too
            bound_opening(opening, self.sent)
            answer_by = opening.answer_by
        self._bound(answer_by)

    def _readable(self) -> None:
        # Unwatched before anything can give the connection back (or close it): its descriptor is
        # blocking again for the driver, and a closed one is never watched.
        self._unwatch()
        if self._opening is not None:
            self._open(False)
            return
        self.finish(self._advanced)

    def _advanced(self) -> int | None:
        """What the socket has, relayed: the rows once the answer is over (``None``: more is to come, waited for)."""
        state = advance(self.sent, self._sock, self.relay, self.transport, self.header_for)
        if not is_waiting(state):
            return conclude(self.sent, self.relay, state)
        if self.transport.get_write_buffer_size() > _HIGH_WATER:
            self._paused = True  # a slow client: its data source is read again once its socket drains
            self._loop.call_later(_DRAIN_POLL, self._drained)
        else:
            self._watch()
        return None

    def finish(self, ending: Callable[[], int | None]) -> None:
        """End with what ``ending()`` gives: the rows relayed (``None``: not over yet), or the error it raises; a
        bug ends the statement too."""
        try:
            rows = ending()
        except DdmError as exc:
            self._end(0, exc)
            return
        except Exception as exc:  # noqa: BLE001  # a bug must not leave the client waiting for ever
            self._broke(exc, "relaying the answer")
            return
        if rows is not None:
            self._end(rows, None)

    def _broke(self, exc: Exception, what: str, opening: SentControl | None = None) -> None:
        """A bug in ``what``: logged, the connection discarded (with ``opening``, never pinned), the client told."""
        log.exception("%s failed", what)
        if opening is not None:
            drop_opening(opening, self.sent, "")
        elif not self.sent.borrowed.released:
            self.sent.abandon()
        self._end(0, ExecutionError(f"ddm: {what} failed: {exc}"))

    def _open(self, expired: bool) -> None:
        """The opening's OKs arrived (read them to their last byte) or did not in time (``expired``): the
        connection becomes the transaction's pin and the statement's answer is waited for next, or the opening's
        error ends the statement (its answer never read, the connection discarded)."""
        opening, opened, self._opening = self._opening, self._opened, None
        assert opening is not None and opened is not None
        self._unbound()
        if expired:
            opening.timed_out()
        else:
            opening.receive()  # blocking only until the OKs are in (the socket is readable): its errors kept
        try:
            opened(opening)
        except DdmError as exc:
            self._end(0, exc)
            return
        except Exception as exc:  # noqa: BLE001  # a bug must not leave the client waiting for ever
            self._broke(exc, "opening the transaction", opening)
            return
        self._watch()
        self._bound(self.sent.answer_by)

    def abandon(self) -> None:
        """Given up before its end — its client went away while it answers on a transaction's pin, which the
        rollback then discards: nothing more is read or relayed, the connection is discarded, ``on_end`` is not
        called."""
        if self._watched:
            self._unwatch()
        self._paused = False
        self._sock = None  # also tells a pending _drained that it is over
        self._unbound()
        opening, self._opening = self._opening, None
        if opening is not None:  # not pinned yet: the connection goes with the opening, the transaction stays
            drop_opening(opening, self.sent, "before the client went away")
        else:
            self.sent.abandon()

    def _watch(self) -> None:
        self._watched = True
        self._loop.add_reader(self._fd, self._readable)

    def _unwatch(self) -> None:
        self._watched = False
        _unwatch(self._loop, self._fd)

    def _drained(self) -> None:
        if self._sock is None:  # abandoned, or ended, meanwhile
            return
        if self.transport.is_closing() or self.transport.get_write_buffer_size() <= _LOW_WATER:
            self._paused = False
            self._watch()
        else:
            self._loop.call_later(_DRAIN_POLL, self._drained)

    def _expired(self) -> None:
        if self._paused:  # waiting for the client, not for the data source
            return
        self._unwatch()
        if self._opening is not None:  # no OK by the bound: the opening failed (its error), not the transaction
            self._open(True)
            return
        try:
            timed_out(self.sent)
        except DdmError as exc:
            self._end(0, exc)

    def _end(self, rows: int, error: DdmError | None) -> None:
        self._sock = None
        self._unbound()
        self.on_end(rows, error)


class HotEnd(_Bounded):
    """A local transaction's ``COMMIT`` or ``ROLLBACK`` sent on all its pins at once from the gate (what
    ``loop_transactions.end_on_loop`` does in a task, here on reader callbacks: no task, no future): each pin's
    OK read once its socket is readable, in commit order, then the transaction settled (``Transaction.ended``)
    and ``on_end`` told its error (``None``: it went through). ``watches``: the session's ``PinWatches``, which
    watch the pins its reads kept watched (given up before the pins go back)."""

    __slots__ = ("_tx", "_command", "_on_end", "_sent", "_next", "_fd", "_done", "_watches", "_kept")

    def __init__(self, tx: Transaction, command: str, loop: asyncio.AbstractEventLoop, deadlines: Deadlines,
                 on_end: Callable[[DdmError | None], None], watches: Any = None) -> None:  # fmt: skip
        super().__init__(loop, deadlines)
        self._tx, self._command, self._on_end = tx, command, on_end
        self._watches = watches
        self._kept = False  # the pin waited on is watched through watches
        self._sent: list[SentControl] = []
        self._next = 0  # the pin whose OK is read next
        self._fd = -1  # the socket watched (-1: none)
        self._done = False

    def start(self) -> None:
        """Send the command on every pin (``Transaction.send_end``, which ``ends_on_loop`` allowed) and wait."""
        self._sent = self._tx.send_end(self._command)
        self._wait()

    def _wait(self) -> None:
        """Watch the next pin whose OK is due; with none left, settle the transaction."""
        sent = self._sent
        while self._next < len(sent):
            control = sent[self._next]
            if control.error is None:  # else its send failed: nothing to wait for
                self._fd = control.fileno
                pinned = control.pinned
                sock = None if self._watches is None else pinned.pool.driver.relay_socket(pinned.raw)
                self._kept = sock is not None
                if self._kept:
                    self._watches.watch(self._loop, sock, control.fileno, self._readable)
                else:
                    self._loop.add_reader(control.fileno, self._readable)
                self._bound(control.answer_by)
                return
            self._next += 1
        self._done = True
        self._drop_watches()  # before the pins go back
        try:
            self._tx.ended(self._command, self._sent)
        except DdmError as exc:
            self._on_end(exc)
            return
        except Exception as exc:  # noqa: BLE001  # a bug must not leave the client waiting for ever
            log.exception("ending a transaction on its pins failed")
            self._on_end(ExecutionError(f"ddm: ending the transaction failed: {exc}"))
            return
        self._on_end(None)

    def _stop_waiting(self) -> None:
        self._unbound()
        fd, self._fd = self._fd, -1
        if fd >= 0 and self._kept:
            self._watches.park(fd)
        elif fd >= 0:
            _unwatch(self._loop, fd)

    def _drop_watches(self) -> None:
        if self._watches is not None:
            self._watches.drop()

    def _readable(self) -> None:
        self._stop_waiting()
        self._sent[self._next].receive()  # blocking only until its OK is in; a failure kept in its error
        self._next += 1
        self._wait()

    def _expired(self) -> None:
        self._stop_waiting()
        self._sent[self._next].timed_out()
        self._next += 1
        self._wait()

    def abandon(self) -> None:
        """Given up before its end — its client went away: the pins not answered yet are in doubt (discarded), the
        transaction settled as ``end_on_loop`` settles it then; ``on_end`` is not called."""
        self._stop_waiting()
        self._drop_watches()
        if self._done:
            return
        self._done = True
        for end in self._sent:
            if end.error is None and not end.received:
                end.timed_out("before the client went away")
        with contextlib.suppress(DdmError):
            self._tx.ended(self._command, self._sent)


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
        #: The statements whose deadlines are watched: a LinkStatement (a HotRelay) adds itself as it starts and
        #: leaves as it ends (set.add / set.discard: no frame a statement).
        self.running: set[LinkStatement | _Bounded] = set()
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


class LinkStatement(HotStatement):
    """One hot statement on a :class:`~ddm_core.proxy.backends.Link` of the event loop's own.

    What the executor does for a sent unit is done here in its terms: the statement's deadline cancels
    it on the data source (the driver's ``cancel``: ``KILL QUERY`` on a connection of its own) and a
    cancelled link is never reused; past the answer bound a frozen data source's link is aborted; the
    data source's error is mapped as a unit's (``unit_error``); the slow-SQL log and the observer hear
    of it (``Engine.observed`` / ``failed``). Its per-statement part (the send, the deadlines'
    registration, the common end) is the compiled ``hotlink`` unit's :class:`HotStatement`; here the
    first prepare on a link and the mapping of what failed.
    """

    __slots__ = ()

    def prepare_first(self, values: bytes) -> None:
        link = self.link
        sql = self.plan.units[0].sql

        def prepared(stmt_id: int | None, error: bytes) -> None:
            if stmt_id is None:
                self.relay.first = error
                self.ended(link, _ERROR if error else _LOST)
                return
            link.prepared[sql] = stmt_id
            self.execute(stmt_id, values)

        link.prepare(sql, prepared)

    def failed(self, link: Any, state: int) -> None:
        relay, plan = self.relay, self.plan
        engine = self.runtime.executor.engine
        unit = plan.units[0]
        if state == _ERROR and relay.first:
            exc: BaseException = link.driver.relay_error(link.raw, relay.first)
        elif self.bounded:
            exc = no_answer(unit.sql)
        else:
            exc = ConnectionError("the data source's connection was lost, or answered out of step")
        if self.fired or state != _ERROR or discard_on(exc):
            link.abort()  # a cancel may still be on its way to it, or its state is unknown
        else:
            self.runtime.backends.give(link)
        error = unit_error(exc, unit, link.endpoint.name, self.fired, unit.sql)
        if not isinstance(error, DdmError):
            error = ExecutionError(f"ddm: {error}")
        engine.failed(plan, self.started, error)
        self.on_end(0, error)


class PinStatement(PinRead):
    """A transaction's read on its pin taken by the gate's front (docs/proxy.md#the-front).

    The compiled ``hotpin`` unit's :class:`PinRead` runs its common course: sent, relayed, ended. Here what is
    rare, with the code the session's hot path runs for such a read (``Executor.send_single`` on a
    :class:`~ddm_core.proxy.loop_transactions.PinnedLoan`, then :class:`HotRelay`): the executor's record of it
    (a :class:`SentUnit`) is made only now, and a :class:`HotRelay` takes the answer over where the common course
    left it, so a failure is mapped, the pin kept or discarded and the transaction failed exactly as there.
    """

    __slots__ = ()

    def _sent(self, guarded: bool = False) -> SentUnit:
        """The executor's record of this read, as ``ThreadRunner.send_single`` makes it; ``guarded``: its answer is
        still to come, so from now on the pin's guard cancels it at its deadline (the watchdog's, as for any
        statement the executor sent), not the loop's timer."""
        executor = self.runtime.executor
        engine = executor.engine
        statement = engine.begin(self.plan, self.style, DEFAULT, None, self.started)
        guard = self.pin.guard if self.fired or (guarded and self.deadline is not None) else None
        if guard is not None and not self.fired:
            guard.arm(self.deadline)
        unit = self.plan.units[0]
        sql = engine.unit_sql(self.driver, unit, self.style) if self.sql is None else self.sql
        loan = PinnedLoan(self.pin, self.tx, self.opening)  # with an opening: not the transaction's pin yet
        return SentUnit(executor.runner, statement, unit, self.pool, loan, self.cursor, guard, sql, self.fd,
                        self.answer_by)  # fmt: skip

    def rare(self, what: int, arg: Any) -> None:
        self.leave()
        self.session._pin_watches.drop()  # what follows may discard the pin, or the opening's connection
        sent = self._sent(guarded=what == hotpin.PAUSED)
        opening, self.opening = self.opening, None
        if what == hotpin.UNSENT:  # mapped as the executor maps a failed send (the pin discarded if in doubt)
            self.session._pinned_hot = None
            try:
                sent.relay_failed(arg)
            except Exception as exc:  # noqa: BLE001  # always: relay_failed raises the mapped error
                if opening is not None:  # never pinned: its connection goes, the transaction stays
                    drop_opening(opening, None, "")
                error = exc if isinstance(exc, DdmError) else ExecutionError(f"ddm: sending the statement failed: {exc}")
                self.on_end(0, error)
            return
        if opening is not None:  # its OKs failed, or none came by the bound: the read behind it is never read
            if what == hotpin.EXPIRED:
                opening.timed_out()
            self.session._pinned_hot = None
            failed = drop_opening(opening, sent, "")  # the connection discarded; the transaction goes on
            self.on_end(0, failed if isinstance(failed, DdmError) else ExecutionError(f"ddm: {failed}"))
            return
        hot = HotRelay(sent, self.relay, self.client, self.header_for, self.on_end, self.runtime.deadlines, self.loop)
        hot._sock = self.sock
        self.session._pinned_hot = hot  # abandoned by the session's close from now on
        if what == hotpin.PAUSED:  # a slow client: its data source is read again once its socket drains
            hot._paused = True
            hot._bound(sent.answer_by)
            self.loop.call_later(_DRAIN_POLL, hot._drained)
            return
        if what == hotpin.BROKE:
            hot._broke(arg, "relaying the answer")
            return
        hot.finish(partial(self._ended, sent, what, arg))

    def _ended(self, sent: SentUnit, what: int, arg: Any) -> int:
        """How the read ended (:meth:`rare`'s ``what``): the rows of an OK answer (-1), or its error raised."""
        if what == hotpin.LOST:
            sent.relay_failed(read_failed(arg))
        elif what == hotpin.CLOSED:
            sent.relay_failed(closed_mid_answer())
        elif what == hotpin.EXPIRED:
            timed_out(sent)
        # ENDED: an error packet or an OK; FIRED: the cancel cut the rows short (the guard says so again)
        return conclude(sent, self.relay, _DONE if what == hotpin.FIRED else arg)

    def abandon(self) -> None:
        """Given up before its end (its client went away): the pin discarded, the transaction failed, as
        :meth:`HotRelay.abandon` does (behind an opening not read yet: the connection discarded, never pinned)."""
        self.leave()
        self.session._pin_watches.drop()
        self.session._pinned_hot = None
        sent = self._sent()
        opening, self.opening = self.opening, None
        if opening is not None:
            drop_opening(opening, sent, "before the client went away")
        else:
            sent.abandon()
