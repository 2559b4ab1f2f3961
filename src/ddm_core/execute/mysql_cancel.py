"""Cancelling a MySQL / MariaDB statement past its deadline without waiting on its server.

The watchdog calls :meth:`QueryKiller.cancel` from its one thread, for every data
source. Opening a connection to send ``KILL QUERY`` there made a stopped server
(SIGSTOP: it accepts TCP connections and never answers) hold the watchdog until
the server resumed — firing that statement's deadline late and every other data
source's deadlines after it. So the cancel never waits:

1. it shuts the statement's socket down at once: the blocked read returns, the
   statement's thread raises and the executor reports the timeout on time (the
   connection is discarded, as any connection whose deadline fired is);
2. it sends ``KILL QUERY <id>`` from a short-lived thread with its own bounded
   connection, so the server stops working on the statement too (a healthy
   server gets it within a millisecond or two; a stopped one costs that thread
   at most :data:`KILL_TIMEOUT` per wait). At most :data:`MAX_KILLS_IN_FLIGHT`
   such threads run per endpoint; past that the socket shutdown alone stands.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any, Callable

from ddm_core.metadata.model import Endpoint

__all__ = ["QueryKiller", "shutdown_socket", "KILL_TIMEOUT", "MAX_KILLS_IN_FLIGHT"]

log = logging.getLogger("ddm_core.execute")

#: Seconds the ``KILL QUERY`` connection may take to connect, and then to get its answer.
KILL_TIMEOUT = 1.0

#: ``KILL QUERY`` threads running at once for one endpoint.
MAX_KILLS_IN_FLIGHT = 4

#: ER_NO_SUCH_THREAD: the connection was gone before the KILL arrived.
_UNKNOWN_THREAD = 1094


def shutdown_socket(raw: Any) -> None:
    """Shut a PyMySQL connection's socket down: a read blocked on it returns now."""
    sock = getattr(raw, "_sock", None)
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed or reset: nothing left to unblock
        pass


class QueryKiller:
    """Cuts a statement's socket and sends ``KILL QUERY`` in the background (see the module docstring).

    Args:
        open_connection: ``open_connection(endpoint, timeout)`` → a new
            connection whose connect and later reads wait at most ``timeout``.
        kill_statement: ``kill_statement(thread_id)`` → the SQL that stops the
            statement running on that server thread, or ``None``.
    """

    def __init__(
        self,
        open_connection: Callable[[Endpoint, float], Any],
        kill_statement: Callable[[int], str | None],
    ) -> None:
        self._open = open_connection
        self._statement = kill_statement
        self._lock = threading.Lock()
        self._in_flight: dict[tuple[str, str | None], int] = {}

    def cancel(self, endpoint: Endpoint, raw: Any) -> None:
        """Stop the statement ``raw`` is running; returns at once (called from the watchdog)."""
        try:
            thread_id = int(raw.thread_id())
        except Exception:  # no handshake yet, or already closed: the socket is all there is
            thread_id = None
        shutdown_socket(raw)
        statement = self._statement(thread_id) if thread_id is not None else None
        if statement is not None:
            self._kill_later(endpoint, statement)

    def in_flight(self) -> int:
        """``KILL QUERY`` threads still running, over every endpoint."""
        with self._lock:
            return sum(self._in_flight.values())

    def _kill_later(self, endpoint: Endpoint, statement: str) -> None:
        key = (endpoint.url, endpoint.username)
        with self._lock:
            running = self._in_flight.get(key, 0)
            if running >= MAX_KILLS_IN_FLIGHT:
                log.warning("%s: %d KILL QUERY already waiting on a server that does not answer; "
                            "relying on the closed socket for %s", endpoint.name, running, statement)
                return
            self._in_flight[key] = running + 1
        thread = threading.Thread(
            target=self._kill, args=(endpoint, statement, key), name=f"ddm-kill-{endpoint.name}", daemon=True
        )
        try:
            thread.start()
        except RuntimeError as exc:  # interpreter shutting down, or no threads left
            self._done(key)
            log.warning("could not start a thread for %s on %s: %s", statement, endpoint.name, exc)

    def _kill(self, endpoint: Endpoint, statement: str, key: tuple[str, str | None]) -> None:
        try:
            killer = self._open(endpoint, KILL_TIMEOUT)
            try:
                with killer.cursor() as cur:
                    cur.execute(statement)
            finally:
                killer.close()
        except Exception as exc:  # the server may be down or stopped: the socket is already shut
            args = getattr(exc, "args", ())
            if args and args[0] == _UNKNOWN_THREAD:  # the server dropped it on seeing the socket close
                log.debug("%s on %s: the statement had already ended", statement, endpoint.name)
            else:
                log.warning("%s on %s failed (%s); the statement's socket was shut down", statement, endpoint.name, exc)
        finally:
            self._done(key)

    def _done(self, key: tuple[str, str | None]) -> None:
        with self._lock:
            left = self._in_flight.get(key, 1) - 1
            if left > 0:
                self._in_flight[key] = left
            else:
                self._in_flight.pop(key, None)
