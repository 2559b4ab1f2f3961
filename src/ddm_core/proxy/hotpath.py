"""The hot path: a repeated one-unit SELECT answered from the client's packet to the data source's answer
without a task, a stream read or mimic's dispatch (docs/proxy.md#the-hot-path).

The connection's :class:`~ddm_core._fast.gate.CommandGate` hands a complete ``COM_QUERY`` or
``COM_STMT_EXECUTE`` to :meth:`ProxySession.hot <ddm_core.proxy.session.ProxySession.hot>`, which routes
it, sends it (``Executor.send_single``) and starts a :class:`HotRelay`: the data source's socket is
watched with a reader callback, each chunk re-framed by the relay unit and written to the client,
and at the end the statement is finished (connection back, observer, audit) and the gate told to go on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, Callable

from ddm_core.errors import DdmError, ExecutionError
from ddm_core.execute.sent import SentUnit
from ddm_core.proxy.relay import ResultRelay, advance, conclude, is_waiting, socket_of, timed_out

__all__ = ["HotRelay"]

log = logging.getLogger("ddm_core.proxy")

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
