"""One DB-API connection kept between calls and reopened after any failure (thread-safe).

The configuration table source and the migration state table each talk to one
table over one connection of their own, polled for the life of a process: a
driver failure drops the connection, and the next call opens a new one.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from ddm_core.errors import DdmError

__all__ = ["KeptConnection"]


class KeptConnection:
    """``run(work, failure)``: ``work(cursor)`` on the kept connection, under one lock.

    Args:
        connect: Returns a new DB-API connection.
    """

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._conn: Any = None
        self._lock = threading.Lock()

    def run(self, work: Callable[[Any], Any], failure: Callable[[Exception], DdmError]) -> Any:
        """``work(cursor)``; a driver error drops the connection and raises ``failure(exc)`` from it."""
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = self._connect()
                cur = self._conn.cursor()
                try:
                    return work(cur)
                finally:
                    cur.close()
            except DdmError:
                raise
            except Exception as exc:  # driver errors have no common base
                self._drop()
                raise failure(exc) from exc

    def close(self) -> None:
        """Close the kept connection (the next call opens a new one)."""
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: S110 - already failing; closing must not hide why
                pass
