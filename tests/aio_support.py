"""Shared helpers of the asyncio connection-layer tests (no tests here).

pytest-asyncio is not a dependency: each test runs its coroutine with :func:`run`
(``asyncio.run``: a fresh loop per test, closed afterwards). Endpoints come from a
loaded configuration, as the executor builds them.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any, Coroutine, TypeVar

from ddm_core import load_config
from ddm_core.metadata.model import Endpoint

__all__ = ["run", "mysql_endpoint", "sqlite_endpoint", "pg_endpoint", "SilentServer", "closed_port"]

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a new event loop (closed afterwards, with every task it left)."""
    return asyncio.run(coro)


def _endpoint(source: Any) -> Endpoint:
    config = load_config({"dataSources": {"ds_0": source}, "singleTables": {"t_any": "ds_0"}})
    return config.data_sources["ds_0"].primary


def mysql_endpoint(database: str, *, port: int = 3306, options: str = "") -> Endpoint:
    """The endpoint of ``mysql://127.0.0.1:<port>/<database>[?options]`` as root."""
    query = f"?{options}" if options else ""
    return _endpoint({"url": f"mysql://127.0.0.1:{port}/{database}{query}", "username": "root", "password": ""})


def sqlite_endpoint(path: str) -> Endpoint:
    """The endpoint of ``sqlite:///<path>`` (``:memory:`` allowed)."""
    return _endpoint(f"sqlite:///{path}")


def pg_endpoint(database: str = "test") -> Endpoint:
    """The local PostgreSQL's ``database`` as ``postgres`` (trust authentication)."""
    return _endpoint({"url": f"postgresql://127.0.0.1:5432/{database}", "username": "postgres"})


def closed_port() -> int:
    """A local TCP port nothing listens on (connects to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SilentServer:
    """A TCP server that accepts connections and never says a word (a stopped database server).

    Attributes:
        port: Where it listens.
        accepted: Connections accepted so far.
        closed: Of those, the ones whose client closed its end (read returned EOF).
    """

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = int(self._sock.getsockname()[1])
        self.accepted = 0
        self.closed = 0
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._serve, name="silent-server", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        with conn:
            try:
                while conn.recv(4096):
                    pass
            except OSError:
                pass
            with self._lock:
                self.closed += 1

    def close(self) -> None:
        self._stop = True
        self._sock.close()
