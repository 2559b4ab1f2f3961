"""ddm-core on asyncio: connections, pools and statements awaited on one event loop (docs/asyncio.md).

The connection layer: :mod:`ddm_core.aio.drivers` (asyncmy for MySQL and
MariaDB, aiosqlite for SQLite, psycopg's ``AsyncConnection`` for PostgreSQL;
rows and errors as the thread executor gives them) and :mod:`ddm_core.aio.pools`
(the thread pool's sizing and behaviour, without threads). The drivers come
with the ``aio`` extra (``postgresql`` for psycopg); importing this package
needs neither, asking for a driver without its extra raises
:class:`~ddm_core.errors.MissingExtraError` naming it. On top of them,
:class:`AsyncExecutor` runs statements (:class:`AsyncResult`), and
:func:`connect` opens an aiomysql-shaped DB-API connection over one
(:mod:`ddm_core.aio.dbapi`: :class:`AsyncConnection`, :class:`AsyncCursor`).
"""

from __future__ import annotations

from ddm_core.aio.drivers import AsyncDriver, AsyncStream, UnitAnswer, async_driver_for
from ddm_core.aio.pools import AsyncBorrowed, AsyncEndpointPool, AsyncPoolRegistry
from ddm_core.aio.executor import AsyncExecutor
from ddm_core.aio.result import AsyncResult
from ddm_core.aio.dbapi import AsyncConnection, AsyncCursor, Connecting, connect

__all__ = [
    "AsyncDriver",
    "AsyncStream",
    "UnitAnswer",
    "async_driver_for",
    "AsyncEndpointPool",
    "AsyncBorrowed",
    "AsyncPoolRegistry",
    "AsyncExecutor",
    "AsyncResult",
    "connect",
    "Connecting",
    "AsyncConnection",
    "AsyncCursor",
]
