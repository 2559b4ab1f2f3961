"""Read-your-writes by GTID with the server questions left to the runner.

The splitter decides a ``gtid`` read once, for both runners: which replicas have reached the
write's GTID, which one to wait on, what to ask, and what an answer changes (the write's
position, the replica's known position, the counters). It does no I/O: where it needs a value
from a server it yields an :class:`Ask`, and the runner answers it on its own connections —
the thread runner blocking (:func:`answer_blocking`), the asyncio runner awaiting on its
asyncio pools (``AsyncRunner``). An answer is the query's one value, or ``None`` when it could
not be had (no connection, a failed query, not MariaDB): the decision then falls back to the
window rule or the primary, never fails the read. See docs/readwrite.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Generator

from ddm_core.readwrite.ports import run_query

__all__ = ["Ask", "GtidCheck", "answer_blocking", "LAST_GTID_SQL", "POSITION_SQL", "WAIT_SQL"]

log = logging.getLogger("ddm_core.readwrite")

#: The write's own GTID, asked on its connection right after it (MariaDB).
LAST_GTID_SQL = "SELECT @@last_gtid"
#: The primary's position now: at least as far as any write it acknowledged.
POSITION_SQL = "SELECT @@gtid_binlog_pos"
#: 0 once the replica applied the position, -1 after the timeout (seconds).
WAIT_SQL = "SELECT MASTER_GTID_WAIT(%s, %s)"


@dataclass(frozen=True, slots=True)
class Ask:
    """One value the decision needs from a server.

    Attributes:
        pool: The endpoint pool to ask on (a connection borrowed for it, given back after).
        sql: The query (``%s`` placeholders).
        params: Its parameters.
        wait: Seconds the server holds the answer by design (``MASTER_GTID_WAIT``'s timeout; 0: none).
    """

    pool: Any
    sql: str
    params: tuple[Any, ...] | None = None
    wait: float = 0.0


class GtidCheck:
    """A ``gtid`` read's pool, decided once its questions are answered.

    ``ask = check.next()`` gives the first question; ``check.next(answer)`` the one after it;
    ``None`` means decided, and :attr:`pool` is the read's pool. Nothing runs until the first
    ``next()``: a check never started has changed nothing.
    """

    __slots__ = ("_steps", "pool")

    def __init__(self, steps: Generator[Ask, Any, Any]) -> None:
        self._steps = steps
        self.pool: Any = None

    def next(self, answer: Any = None) -> Ask | None:
        try:
            return self._steps.send(answer)
        except StopIteration as done:
            self.pool = done.value
            return None

    def run(self, answer: Callable[[Ask], Any]) -> Any:
        """Decide, each question answered by ``answer`` on the calling thread; the read's pool."""
        ask = self.next()
        while ask is not None:
            ask = self.next(answer(ask))
        return self.pool


def answer_blocking(ask: Ask) -> Any:
    """The thread runner's answer: a connection of ``ask.pool`` borrowed, the value read; ``None`` on any failure."""
    pool = ask.pool
    try:
        borrowed = pool.borrow()
    except Exception as exc:
        log.debug("%s on %s: no connection: %s", ask.sql, pool.endpoint.name, exc)
        return None
    discard = True
    try:
        rows = run_query(borrowed, ask.sql, ask.params)
        discard = False
        return rows[0][0] if rows else None
    except Exception as exc:
        log.debug("%s on %s failed: %s", ask.sql, pool.endpoint.name, exc)
        return None
    finally:
        borrowed.release(discard=discard)
