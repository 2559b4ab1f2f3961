"""Connections to the data sources owned by the event loop, for the hot path (docs/proxy.md#the-hot-path).

The executor's pools lend PyMySQL connections to threads and to the loop alike, so a statement
sent from the loop must add a reader on its socket and remove it again (six ``epoll_ctl`` and two
``ioctl`` a statement) and go through the pool's locks and bookkeeping. A :class:`Link` is a
connection opened by the same recipe (the endpoint's driver, on a worker thread, through the
endpoint's circuit breaker) whose socket is then handed to the event loop as a transport: the loop
reads it for as long as it lives and calls :meth:`Link.data_received` with each chunk, which the
relay unit re-frames for the client.

:class:`LoopBackends` keeps the idle links per endpoint — a data source's primary, or one of its
replicas when the read/write splitter chose it for a read: at most as many as that endpoint's
pool may open (``pool.maxSize``), opened one at a time in the background when a statement found none
(that statement takes the pooled path meanwhile), closed after ``proxy.linkIdleMs`` idle (an idle
proxy holds no connections beyond its pools' own), when
the configuration changes or when the proxy stops; a link that failed or answered out of step, or
whose statement was cancelled, is never reused.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from ddm_core.proxy.relay import LinkProtocol, LinkStack, frame, hotlink as _hotlink

__all__ = ["Link", "LoopBackends"]

log = logging.getLogger("ddm_core.proxy")

#: A relay state of its own: the connection was lost (or aborted) before the answer ended.
LOST: int = _hotlink.LOST
#: Statements one link keeps prepared (MariaDB's max_prepared_stmt_count is per server).
PREPARED_PER_LINK = 128


class Link(LinkProtocol, asyncio.Protocol):
    """One data-source connection read by the event loop: one command at a time.

    Its per-statement part — ``send``, ``data_received`` relaying the answer to the client — is the
    compiled ``hotlink`` unit's :class:`LinkProtocol`; here the rest: prepares, losses, closing.
    ``raw`` is the driver's connection object without its socket (its escaping, character set and
    thread id serve), ``pool`` the executor's pool of the endpoint it was opened to (its ``driver`` and
    ``endpoint``); ``prepared`` maps the statements prepared on it to their ids.
    """

    def __init__(self, data_source: str, raw: Any, on_lost: Callable[[Link], None], pool: Any) -> None:
        super().__init__()
        self.loop = asyncio.get_running_loop()  # made by create_connection, on the loop
        self.data_source = data_source
        self.raw = raw
        self.pool = pool
        self.driver = pool.driver
        self.endpoint = pool.endpoint
        self.key = (data_source, pool.endpoint.name)  # LoopBackends' key of its endpoint
        #: How long an answer may take to begin without a statement deadline (the endpoint's socket timeout).
        self.read_bound: float | None = pool.driver.socket_timeout(pool.endpoint)
        self.prepared: dict[str, int] = {}
        self.idle_since = 0.0  # the loop's time it was last given back
        self.config: Any = None  # the configuration version it was opened under
        self._on_lost = on_lost
        self._preparing: tuple[Callable[[int | None, bytes], None], bytearray] | None = None

    # -- commands --------------------------------------------------------------------------------------

    def prepare(self, sql: str, on_prepared: Callable[[int | None, bytes], None]) -> None:
        """COM_STMT_PREPARE ``sql``: ``on_prepared(statement id, b"")``, or ``(None, error packet)``."""
        if len(self.prepared) >= PREPARED_PER_LINK:  # the oldest go: COM_STMT_CLOSE has no answer
            for old in list(self.prepared)[: PREPARED_PER_LINK // 2]:
                self.transport.write(frame(b"\x19" + self.prepared.pop(old).to_bytes(4, "little")))
        self._preparing = (on_prepared, bytearray())
        self.transport.write(frame(b"\x16" + sql.encode(self.raw.encoding)))

    def abort(self) -> None:
        """Close at once (an answer out of bounds, a statement in doubt): never reused."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # -- the protocol (the per-statement part is LinkProtocol's) ---------------------------------------------

    def unasked(self, data: bytes) -> None:
        """Bytes with no statement's answer awaited: a prepare's answer, else out of step (closed)."""
        if self._preparing is not None:
            self._prepare_data(data)
            return
        log.warning("data source %s sent %d bytes nobody asked for: its connection is closed", self.data_source,
                    len(data))  # fmt: skip
        self.abort()

    def _prepare_data(self, data: bytes) -> None:
        assert self._preparing is not None
        on_prepared, buffer = self._preparing
        buffer += data
        packets: list[bytes] = []
        at = 0
        while len(buffer) - at >= 4:
            length = int.from_bytes(buffer[at : at + 3], "little")
            if len(buffer) - at - 4 < length:
                break
            packets.append(bytes(buffer[at + 4 : at + 4 + length]))
            at += 4 + length
        if not packets:
            return
        first = packets[0]
        if first[:1] == b"\xff":
            self._preparing = None
            on_prepared(None, first)
            return
        columns, params = int.from_bytes(first[5:7], "little"), int.from_bytes(first[7:9], "little")
        eof = 0 if self.raw.client_flag & (1 << 24) else 1  # CLIENT_DEPRECATE_EOF
        expected = 1 + params + (eof if params else 0) + columns + (eof if columns else 0)
        if len(packets) < expected:
            return  # the definitions are still coming (the whole answer is parsed again: a prepare is rare)
        if len(packets) > expected or at != len(buffer):
            self._preparing = None
            self.abort()
            on_prepared(None, b"")
            return
        self._preparing = None
        on_prepared(int.from_bytes(first[1:5], "little"), b"")

    def eof_received(self) -> bool | None:
        return False  # the transport closes; connection_lost follows

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed = True
        if self.answering:
            self.end(LOST)
        if self._preparing is not None:
            on_prepared, _ = self._preparing
            self._preparing = None
            on_prepared(None, b"")
        self._on_lost(self)


class LoopBackends(LinkStack):
    """The idle :class:`Link` s per data source, for the hot path (module docstring).

    Taking one and giving it back, per statement, is the compiled ``hotlink`` unit's :class:`LinkStack`; here
    the rest: opening links in the background, the idle sweep, a configuration's change, losses.

    Args:
        executor: The proxy's executor: its configuration, its drivers and pool sizes.
        workers: Where connections are opened (a blocking handshake never runs on the loop).
    """

    def __init__(self, executor: Any, workers: Any) -> None:
        super().__init__()  # the idle links per endpoint, (data source, endpoint name); proxy.linkIdleMs
        self.executor = executor
        self.workers = workers
        self._open: dict[tuple[str, str], int] = {}  # links open (idle or lent)
        self._opening: set[tuple[str, str]] = set()
        self._never: set[tuple[str, str]] = set()  # endpoints reached over TLS: the pooled path serves them

    def _sweep(self) -> None:
        """Close the links idle for ``idle_seconds`` (the oldest are at the bottom of each stack)."""
        self._sweeper = None
        loop = asyncio.get_running_loop()
        cutoff = loop.time() - self.idle_seconds
        left = False
        for idle in self._idle.values():
            while idle and idle[0].idle_since <= cutoff:
                idle.pop(0).abort()  # connection_lost counts it out
            left = left or bool(idle)
        if left and not self.closed:
            self._sweeper = loop.call_later(self.idle_seconds / 2, self._sweep)

    def close(self) -> None:
        """Close every idle link; lent ones close when they are given back."""
        self.closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        self._reset(None)

    # -- internals ------------------------------------------------------------------------------------

    def _reset(self, config: Any) -> None:
        for links in self._idle.values():
            for link in links:
                link.abort()
        self._idle.clear()
        self._open.clear()
        self._config = config

    def _lost(self, link: Link) -> None:
        key = link.key
        idle = self._idle.get(key)
        if idle and link in idle:
            idle.remove(link)
        if link.config is self._config and key in self._open:  # not one of a replaced version
            self._open[key] = max(0, self._open[key] - 1)

    def _grow(self, key: tuple[str, str], pool: Any) -> None:
        if self.closed or key in self._opening or key in self._never:
            return
        if self._open.get(key, 0) >= pool.max_size or not pool.driver.can_relay:
            return
        self._opening.add(key)
        self._open[key] = self._open.get(key, 0) + 1
        loop = asyncio.get_running_loop()
        config = self._config
        breaker = pool.breaker  # an endpoint that keeps refusing connections opens it, as the pool's do

        def open_one() -> None:  # on a worker thread: the handshake blocks
            try:
                if breaker is None:
                    raw = pool.driver.connect(pool.endpoint, pool.acquire_timeout)
                else:
                    raw = breaker.call(pool.driver.connect, pool.endpoint, pool.acquire_timeout)
            except Exception as exc:  # noqa: BLE001  # the pooled path reports a data source that is down
                loop.call_soon_threadsafe(self._failed, key, exc)
                return
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._opened(key, raw, config, pool)))

        try:
            self.workers.submit(open_one)
        except RuntimeError as exc:  # the workers are shut down: the proxy is stopping
            self._failed(key, exc)

    def _failed(self, key: tuple[str, str], exc: BaseException) -> None:
        self._opening.discard(key)
        if key in self._open:
            self._open[key] = max(0, self._open[key] - 1)
        log.debug("opening a loop connection to %s (%s) failed: %s", key[0], key[1], exc)

    async def _opened(self, key: tuple[str, str], raw: Any, config: Any, pool: Any) -> None:
        if getattr(raw, "_secure", False):  # TLS to the data source: its socket's bytes are not MySQL's packets
            self._never.add(key)
            raw.close()
            self._failed(key, RuntimeError("TLS connections stay with the pools"))
            return
        sock = raw._sock
        raw._sock = raw._rfile = None  # the loop reads it from now on; the object keeps escaping and thread id
        try:
            if self.closed or config is not self._config:
                sock.close()
                self._failed(key, RuntimeError("the configuration changed meanwhile"))
                return
            loop = asyncio.get_running_loop()
            _, link = await loop.create_connection(lambda: Link(key[0], raw, self._lost, pool), sock=sock)
        except Exception as exc:  # noqa: BLE001
            sock.close()
            self._failed(key, exc)
            return
        self._opening.discard(key)
        link.config = config
        self.give(link)
