"""Read-your-writes by GTID on the event loop: a :class:`~ddm_core.readwrite.gtid_check.GtidCheck`'s
questions answered on the asyncio pools.

The splitter decides (:mod:`ddm_core.readwrite.gtid_check`); this module only asks. Each question
borrows a connection of its pool and awaits the one value, within the statement's deadline
(none: the socket timeout plus the time the server holds the answer by design, as
``MASTER_GTID_WAIT``'s ``gtid_wait_ms``), so a wait never blocks the loop and never outlives the
statement. A question that fails or runs out of time answers ``None`` and the decision falls back
(the window rule, the primary); its connection is closed, and a server that may still be
waiting gets ``KILL QUERY``. A cancel does the same and is re-raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from ddm_core.aio.pools import AsyncBorrowed, AsyncEndpointPool
from ddm_core.readwrite.gtid_check import Ask, GtidCheck

__all__ = ["answered", "value_on"]

log = logging.getLogger("ddm_core.aio")

#: ``kill(pool, raw)``: stop what a connection runs on the server, later (``AsyncRunner.kill_later``).
Kill = Callable[[AsyncEndpointPool, Any], None]


async def answered(check: GtidCheck, deadline: float | None, kill: Kill) -> AsyncEndpointPool:
    """``check`` decided, each question awaited in turn; the read's pool."""
    ask = check.next()
    while ask is not None:
        ask = check.next(await _answer(ask, deadline, kill))
    pool: AsyncEndpointPool = check.pool
    return pool


async def _answer(ask: Ask, deadline: float | None, kill: Kill) -> Any:
    pool: AsyncEndpointPool = ask.pool
    try:
        borrowed = pool.lend_idle() or await pool.borrow(deadline)
    except Exception as exc:  # no connection (pool busy past the deadline, replica down, breaker open)
        log.debug("%s on %s: no connection: %s", ask.sql, pool.endpoint.name, exc)
        return None
    return await value_on(pool, borrowed, ask.sql, ask.params, deadline, kill, wait=ask.wait)


async def value_on(
    pool: AsyncEndpointPool, borrowed: AsyncBorrowed, sql: str, params: Any, deadline: float | None, kill: Kill,
    *, wait: float = 0.0,
) -> Any:
    """``sql``'s one value on ``borrowed`` (given back here); ``None`` when it failed or ran out of time.

    Bounded by ``deadline``; without one by the connection's socket timeout plus ``wait``.

    Raises:
        asyncio.CancelledError: the caller was cancelled (the connection closed, half-read).
    """
    driver = pool.driver
    if deadline is not None:
        bound: float | None = deadline - time.monotonic()
    else:
        silence = driver.read_bound(borrowed.raw)
        bound = None if silence is None else silence + wait
    try:
        if bound is None:
            answer = await driver.execute(borrowed.raw, sql, params)
        else:
            async with asyncio.timeout(bound):
                answer = await driver.execute(borrowed.raw, sql, params)
    except (asyncio.CancelledError, TimeoutError) as exc:  # cut mid-answer: the server may still be waiting
        kill(pool, borrowed.raw)
        borrowed.release(discard=True)
        if isinstance(exc, asyncio.CancelledError):
            raise
        log.debug("%s on %s: no answer within %s s", sql, pool.endpoint.name, bound)
        return None
    except Exception as exc:  # not MariaDB, a lost server: the decision falls back
        borrowed.release(discard=True)
        log.debug("%s on %s failed: %s", sql, pool.endpoint.name, exc)
        return None
    borrowed.release()
    return answer.rows[0][0] if answer.rows else None
