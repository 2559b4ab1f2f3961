"""``ddm+asyncmy://``: SQLAlchemy's asyncio extension over :mod:`ddm_core.aio`.

::

    engine = create_async_engine("ddm+asyncmy:///?config=examples/orders.yaml")
    engine = create_async_engine("ddm+asyncmy://", connect_args={"executor": async_executor})

The statements run on an :class:`~ddm_core.aio.AsyncExecutor` (asyncmy connections to MySQL
and MariaDB, aiosqlite to SQLite: the ``aio`` extra); SQLAlchemy drives the asyncio facade,
:mod:`ddm_core.aio.dbapi`, through its own adapters, as it drives asyncmy. The SQL, the answers
to session questions and the rules are those of ``ddm+pymysql`` (docs/sqlalchemy.md).

An executor the dialect builds from the URL (with ``transaction_mode`` from its query) is not
closed by ``await engine.dispose()``: its idle connections go when the process ends. Where the
application needs an orderly shutdown, it builds the executor, passes it in ``connect_args``
and closes it itself (``await executor.close()``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.connectors.asyncio import AsyncAdapt_dbapi_connection, AsyncAdapt_dbapi_module, AsyncAdapt_terminate
from sqlalchemy.dialects.mysql.asyncmy import MySQLDialect_asyncmy
from sqlalchemy.util.concurrency import await_

from ddm_core import dbapi, dbapi_types
from ddm_core._extras import require_extra
from ddm_core.sqlalchemy.base import DdmDialectMixin

__all__ = ["DdmDialect_asyncmy", "dialect"]

_ERRORS = (
    "Warning", "Error", "InterfaceError", "DatabaseError", "DataError", "OperationalError", "IntegrityError",
    "InternalError", "ProgrammingError", "NotSupportedError",
)  # fmt: skip


class AsyncAdaptDdmConnection(AsyncAdapt_terminate, AsyncAdapt_dbapi_connection):
    """An :class:`~ddm_core.aio.dbapi.AsyncConnection` as SQLAlchemy's synchronous-looking DB-API connection."""

    __slots__ = ()

    @property
    def executor(self) -> Any:
        return self._connection.executor

    def ping(self, reconnect: bool = False) -> None:
        await_(self._connection.ping())

    def character_set_name(self) -> str:
        return self._connection.character_set_name()  # type: ignore[no-any-return]

    def autocommit(self, value: Any) -> None:
        await_(self._connection.autocommit(value))

    def get_autocommit(self) -> bool:
        return self._connection.get_autocommit()  # type: ignore[no-any-return]

    def close(self) -> None:
        await_(self._connection.ensure_closed())

    async def _terminate_graceful_close(self) -> None:
        await self._connection.ensure_closed()

    def _terminate_force_close(self) -> None:
        self._connection.close()


class AsyncAdaptDdmDbapi(AsyncAdapt_dbapi_module):
    """:mod:`ddm_core.aio.dbapi` as the module SQLAlchemy's dialect calls (PEP 249's classes, type objects and
    constructors are the thread facade's)."""

    paramstyle = "format"

    def __init__(self) -> None:
        from ddm_core.aio import dbapi as aio_dbapi

        super().__init__(aio_dbapi, dbapi_module=dbapi)
        for name in (*_ERRORS, *dbapi_types.__all__):  # PEP 249's classes, type objects and constructors
            setattr(self, name, getattr(dbapi, name))

    def connect(self, executor: Any) -> AsyncAdaptDdmConnection:
        from ddm_core.aio import dbapi as aio_dbapi

        return await_(AsyncAdaptDdmConnection.create(self, aio_dbapi.connect(executor=executor)))  # type: ignore[arg-type]


class DdmDialect_asyncmy(DdmDialectMixin, MySQLDialect_asyncmy):  # noqa: N801 - SQLAlchemy's naming
    """The asyncio ``ddm+asyncmy`` dialect."""

    supports_statement_cache = True  # set on the class itself: SQLAlchemy does not trust an inherited one
    supports_server_side_cursors = False
    is_async = True

    @classmethod
    def import_dbapi(cls) -> Any:
        require_extra("aio", needed_by="the ddm+asyncmy SQLAlchemy dialect")
        return AsyncAdaptDdmDbapi()

    def connect(self, *cargs: Any, **cparams: Any) -> Any:
        from ddm_core.aio import AsyncExecutor

        executor = cparams.get("executor") or self.shared_executor(
            cparams,
            lambda config: AsyncExecutor(
                config, transaction_mode=cparams.get("transaction_mode", "local"), matched_rows=True
            ),
        )
        connection = self.loaded_dbapi.connect(executor)
        self._learn_config(connection)
        return connection


dialect = DdmDialect_asyncmy
