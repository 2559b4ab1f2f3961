"""A read in an open transaction sent on the connection it pinned, its answer relayed from a reader callback.

Pure-Python twin of ``hotpin.pyx`` (same class, same behaviour; tests/test_hot_front.py runs both behind a
real proxy). The gate's front (``hotfront``) takes a one-unit ``SELECT`` of a local transaction whose data
source is pinned already (docs/proxy.md#the-front) and hands it to :class:`PinRead`, which does what the
session's hot path does for it through ``Executor.send_single`` and ``HotRelay`` — the statement's deadline
kept on the loop's shared timer (``Deadlines``, whose passing has the pin's guard cancel it, as the
watchdog would), the execute written on the pin, its socket watched, each chunk of the answer re-framed to
the client, and at the end the pin's status kept, the statement observed and counted — without their frames.

Only that common course is here. Anything else — a send that fails, a lost or closed connection, an error
packet or an OK in place of rows, a deadline's cancel that fired, an answer not begun by its bound, a slow
client, a bug — goes to :meth:`PinRead.rare`, which the proxy's subclass (``proxy/hotpath.py``
``PinStatement``) implements with the executor's and ``HotRelay``'s own code from where this left off: a
failure is mapped, the pin discarded or kept and the transaction failed or not exactly as on that path.

The objects it works with (runtime, session, transaction, pin, event loop) are the proxy's, passed in: this
unit imports none of them.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Callable

from ddm_core._fast.relay_py import DONE, FIRST, ROWS

__all__ = ["PinRead", "PinWatches", "UNSENT", "LOST", "CLOSED", "PAUSED", "ENDED", "FIRED", "EXPIRED", "BROKE", "OPENING", "READ_SIZE"]

#: Bytes asked of the data source's socket per read (proxy/relay.py's READ_SIZE).
READ_SIZE = 256 * 1024
#: Bytes waiting for a slow client past which the data source's socket is no longer read (HotRelay's).
HIGH_WATER = 1 << 20

#: A parameter block this long goes as the driver sends it (a packet of 16 MiB or more is split).
_LONGEST_VALUES = 0xFFFFFF - 10
#: A parked watch woken: bytes (or an end) on its socket, or none left (a reader took them in the same poll).
_PEEK = socket.MSG_PEEK | socket.MSG_DONTWAIT


def _execute_packet(stmt_id: int, values: bytes) -> bytes:
    """A COM_STMT_EXECUTE of ``stmt_id`` (no cursor, one iteration) with ``values``, framed with sequence id 0."""
    payload = b"\x17" + stmt_id.to_bytes(4, "little") + b"\x00\x01\x00\x00\x00" + values
    return len(payload).to_bytes(3, "little") + b"\x00" + payload


#: What :meth:`PinRead.rare` is told: the send failed (``arg``: the exception; ``None``: the deadline passed
#: before it); reading the socket failed (``arg``: the exception); the data source closed the connection; the
#: client reads slowly; the answer ended otherwise than with rows (``arg``: the relay's state); the deadline's
#: cancel fired; no answer began by the bound; a bug (``arg``: the exception); the transaction's opening the read
#: went behind failed.
UNSENT, LOST, CLOSED, PAUSED, ENDED, FIRED, EXPIRED, BROKE, OPENING = range(9)


class _Watch:
    """One pin's socket watched by the event loop through a duplicate of its descriptor (:class:`PinWatches`)."""

    __slots__ = ("loop", "sock", "dup", "target")

    def __init__(self, loop: Any, sock: Any, fd: int) -> None:
        self.loop = loop
        self.sock = sock  # the pin's socket object: a new connection's has another, whatever its number
        self.target: Callable[[], None] | None = None
        self.dup = os.dup(fd)
        try:
            loop.add_reader(self.dup, self._ready)
            os.set_blocking(self.dup, True)  # uvloop made the socket non-blocking; its readers read it blocking
        except BaseException:
            os.close(self.dup)
            self.dup = -1
            raise

    def _ready(self) -> None:
        target = self.target
        if target is None:
            if not self._emptied():  # bytes, or an end, nobody on the loop awaits: given up
                self.close()
            return
        target()

    def _emptied(self) -> bool:
        """Nothing waits on the socket: the bytes that woke the watch were taken in the same turn of the loop (its
        poll saw them first), so it stays."""
        try:
            self.sock.recv(1, _PEEK)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        return False

    def close(self) -> None:
        dup, self.dup = self.dup, -1
        self.target = None
        if dup >= 0:
            try:
                self.loop.remove_reader(dup)
            finally:
                os.close(dup)


class PinWatches:
    """The transaction pins a session's reads wait on, watched by its event loop from one read to the next.

    A reader callback set and removed for each read costs uvloop a poll handle made and closed each time: nine
    system calls beyond the read's own (six ``epoll_ctl``, two ``ioctl``, one ``io_uring_enter``). A pin read
    again and again between ``BEGIN`` and ``COMMIT`` keeps one registration instead, parked between its reads
    (:meth:`park`: nobody awaits it). What is registered is a duplicate of the pin's descriptor: a number of the
    loop's own, which no other thread closes and reuses while it is registered. The session calls :meth:`drop`
    before anything else may read or close its pins (a worker, the transaction's end) and as it ends; a parked
    watch that wakes for bytes or an end nobody on the loop awaits gives itself up, one woken for bytes a reader
    took in the same turn of the loop stays (docs/proxy.md#the-pins-watched).
    """

    __slots__ = ("_by_fd",)

    def __init__(self) -> None:
        self._by_fd: dict[int, _Watch] = {}

    def watch(self, loop: Any, sock: Any, fd: int, callback: Callable[[], None]) -> None:
        """``callback()`` once ``sock`` (descriptor ``fd``, a transaction's pin) is readable."""
        watch = self._by_fd.get(fd)
        if watch is None or watch.sock is not sock or watch.dup < 0:
            if watch is not None:
                watch.close()
            watch = self._by_fd[fd] = _Watch(loop, sock, fd)
        watch.target = callback

    def park(self, fd: int) -> None:
        """Nobody awaits descriptor ``fd`` now: it stays registered for the next read."""
        watch = self._by_fd.get(fd)
        if watch is not None:
            watch.target = None

    def drop(self) -> None:
        """Every watch given up (their registrations removed, the duplicates closed)."""
        if self._by_fd:
            watches = list(self._by_fd.values())
            self._by_fd.clear()
            for watch in watches:
                watch.close()

    def __len__(self) -> int:
        return sum(1 for watch in self._by_fd.values() if watch.dup >= 0)


class PinRead:
    """One read on a transaction's pin, from its send to its relayed end (see the module docstring).

    Args:
        runtime: The ``ProxyRuntime`` (executor, deadlines' timer, command counts, audit).
        session: The ``ProxySession`` (its ``_pinned_hot`` is this read while it answers; its ``_pin_watches``, a
            :class:`PinWatches`, watch the pin once the opening, if any, is read).
        plan: The read's one-unit plan.
        started: ``time.monotonic()`` at its start.
        relay: The ``ResultRelay`` that re-frames the answer for the client.
        header_for: The client header of its result (``HeaderMemo``).
        client: The client's transport.
        on_end: ``on_end(rows, error)``: the session's end of a hot statement (``_hot_end``), called unless the
            common end does its work itself (no audit log, the gate's ``done_with`` known).
        done_with: The gate's ``done``.
        cid: The client connection's id (the count of commands running).
        tx: The transaction.
        pin: Its pinned connection to the read's data source (a ``Borrowed``).
        loop: The event loop.
    """

    def __init__(self, runtime: Any, session: Any, plan: Any, started: float, relay: Any, header_for: Any,
                 client: Any, on_end: Callable[[int, Any], None], done_with: Callable[[], None] | None, cid: Any,
                 tx: Any, pin: Any, loop: Any) -> None:  # fmt: skip
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
        self.sock: Any = None
        self.fd = -1
        self.cursor: Any = None  # a text read's cursor (the driver's send returns one)
        self.sql: str | None = None  # a text read's unit as sent (what an error names; a binary one's is made then)
        self.style: str | None = None
        #: ``time.monotonic()`` past which the pin's guard cancels it (``None``: no timeout)
        self.deadline: float | None = None
        #: ``time.monotonic()`` by which its answer must have begun (``None``: no bound)
        self.answer_by: float | None = None
        self.cancel_at: float | None = None  # the loop's time of ``deadline`` while it runs (Deadlines reads it)
        self.abort_at: float | None = None  # the loop's time of ``answer_by`` while it is watched for
        self.fired = False  # the pin's guard cancelled it
        #: The transaction's opening sent on the connection just before the read (its first there), its OKs not
        #: read yet: the connection becomes the pin once they are (``None``: the pin was the transaction's already)
        self.opening: Any = None
        self.watched = False
        self.watches: PinWatches = session._pin_watches
        self.done = False

    def start(self, style: str, values: bytes | None, stmt_id: int | None, sock: Any, opening: Any) -> None:
        """Send the read on the pin — ``values``: a binary execute's parameter block for the statement ``stmt_id``
        prepared there (``Driver.prepared_id``); ``None``: a text read — and watch ``sock``, the pin's socket
        (``Driver.relay_socket``), for its answer; its deadline and its bound on the loop's shared timer.
        ``opening``: the transaction's opening sent on the connection just before (``Transaction.send_opening``,
        ``SentControl``), whose OKs are read first (``None``: none)."""
        self.opening = opening
        engine = self.runtime.executor.engine
        driver, unit, raw = self.driver, self.plan.units[0], self.raw
        self.style = style
        try:
            seconds = engine.timeout  # Engine.begin's deadline and ThreadRunner.send_single's bound
            if seconds:
                self.deadline = self.started + seconds
                self.answer_by = self.deadline + engine.cancel_grace
            else:
                bound = driver.socket_timeout(self.pool.endpoint)
                self.answer_by = None if bound is None else self.started + bound
            if values is None:
                self.sql = engine.unit_sql(driver, unit, style)
                self.cursor = driver.send(raw, self.sql, unit.params)
            elif stmt_id is None or len(values) >= _LONGEST_VALUES:
                driver.send_execute(raw, unit.sql, len(unit.params), values)
            else:
                driver.send_packet(raw, _execute_packet(stmt_id, values))
            self.sock = sock
            self.fd = sock.fileno()
        except Exception as exc:  # noqa: BLE001  # sent or not, it failed: rare() maps it as the executor does
            self.rare(UNSENT, exc)
            return
        self._watch()
        loop, deadlines = self.loop, self.runtime.deadlines
        now, mono = loop.time(), time.monotonic()
        if self.deadline is not None:  # the pin's guard cancels it then (check())
            self.cancel_at = now + max(0.0, self.deadline - mono)
        answer_by = self.answer_by
        if opening is not None and answer_by is not None:  # its OKs are bounded by the read's deadline too
            opening.answer_by = answer_by if opening.answer_by is None else min(opening.answer_by, answer_by)
        if opening is not None:
            answer_by = opening.answer_by
        if answer_by is not None:
            self.abort_at = now + max(0.0, answer_by - mono)
        first = self.cancel_at if self.cancel_at is not None else self.abort_at
        if first is not None:
            deadlines.running.add(self)
            if first < deadlines.at:
                deadlines.arm(first, loop)

    def _watch(self) -> None:
        self.watched = True
        # the pin, or the connection its opening went on (whatever may close it calls rare(), which drops them)
        self.watches.watch(self.loop, self.sock, self.fd, self._readable)

    def _unwatch(self) -> None:
        self.watched = False
        self.watches.park(self.fd)

    def _readable(self) -> None:
        self._unwatch()
        if self.opening is not None:
            try:
                self._opened()
            except Exception as exc:  # noqa: BLE001  # a bug must not leave the client waiting for ever
                self.rare(BROKE, exc)
            return
        try:
            data = self.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            self._watch()
            return
        except OSError as exc:
            self.rare(LOST, exc)
            return
        if not data:
            self.rare(CLOSED, None)
            return
        client = self.client
        try:
            state = self.relay.pump(data, client, self.header_for)
        except Exception as exc:  # noqa: BLE001  # a bug must not leave the client waiting for ever
            self.rare(BROKE, exc)
            return
        if state == FIRST or state == ROWS:
            if client.get_write_buffer_size() > HIGH_WATER:
                self.rare(PAUSED, None)
            else:
                self._watch()
            return
        if state != DONE:
            self.rare(ENDED, state)
            return
        self._relayed()

    def _opened(self) -> None:
        """The opening's OKs arrived: read (to their last byte, the answer behind them left on the socket), the
        connection made the transaction's pin (``Transaction.opened``), and the read's answer waited for next."""
        opening = self.opening
        opening.receive()  # blocking only until the OKs are in (the socket is readable): its errors kept
        if opening.error is not None:
            self.rare(OPENING, None)
            return
        self.tx.opened(opening)
        self.opening = None
        runtime = self.runtime
        runtime.opened_on_loop += 1
        runtime.opened_with_first += 1
        if self.abort_at is not None and self.answer_by is not None:  # now the read's own bound
            self.abort_at = self.loop.time() + max(0.0, self.answer_by - time.monotonic())
        self._watch()

    def _relayed(self) -> None:
        """The common end: the rows relayed; what ``ThreadRunner.finish_relayed`` and the session's ``_hot_end`` do
        then (the pin stays pinned: nothing goes back to the pool)."""
        self.done = True
        self._unbound()
        if self.fired:  # the cancel may have cut the rows short
            self.rare(FIRED, None)
            return
        runtime, relay, plan = self.runtime, self.relay, self.plan
        self.driver.relayed(self.raw, relay.status)
        rows = relay.rows
        engine = runtime.executor.engine
        slow = engine.slow_sql
        now = time.monotonic()
        if (engine.observer is not None or plan.statement == "ddl" or now - self.started >= slow.threshold_s
                or now >= slow.refresh_at):  # Engine.observed_rows's first test, as hotlink's
            engine.observed_rows(plan, self.started, rows)  # fmt: skip
        self.session._pinned_hot = None
        done_with = self.done_with
        if done_with is None or runtime.audit is not None:
            self.on_end(rows, None)
            return
        try:
            runtime.commands.exit_relayed(self.cid)  # counted as run on the loop and relayed, and done
        finally:
            done_with()

    def check(self, now: float) -> None:
        """The loop's shared timer (``Deadlines``): past the deadline the pin's guard cancels the read on its data
        source (``KILL QUERY`` from a thread of its own, as the watchdog's); past the bound with no answer begun,
        :meth:`rare`."""
        if self.done:
            return
        if self.cancel_at is not None and self.cancel_at <= now:
            self.cancel_at = None
            self.fired = True
            guard = self.pin.guard
            guard.arm(self.deadline)
            guard.fire()
        if self.abort_at is None or self.abort_at > now:
            return
        self.abort_at = None
        self.done = True
        self.runtime.deadlines.running.discard(self)
        if self.watched:
            self._unwatch()
        self.rare(EXPIRED, None)

    def _unbound(self) -> None:
        self.cancel_at = self.abort_at = None
        self.runtime.deadlines.running.discard(self)

    def leave(self) -> None:
        """Stop watching and bounding: :meth:`rare` takes the read over from here."""
        self.done = True
        self._unbound()
        if self.watched:
            self._unwatch()

    def rare(self, what: int, arg: Any) -> None:
        """Anything but the common course (``what``: one of the module's constants; ``arg``: its detail)."""
        raise NotImplementedError

    def abandon(self) -> None:
        """Given up before its end (its client went away): the subclass discards the pin."""
        raise NotImplementedError
