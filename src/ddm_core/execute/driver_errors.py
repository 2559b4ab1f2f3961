"""Driver exceptions → ddm-core errors, by error code, never by message text where a code exists.

==================================================  =====================================
driver error                                        ddm-core error
==================================================  =====================================
MySQL 1062 (ER_DUP_ENTRY), PostgreSQL 23505,        :class:`DuplicateKeyError`
SQLite ``SQLITE_CONSTRAINT_UNIQUE`` / ``_PRIMARYKEY``
PyMySQL 2003 / 2006 / 2013 / 2002 / 2055 / 1053,    :class:`DataSourceUnavailableError`
a closed connection (``InterfaceError``), socket
errors, SQLite ``SQLITE_CANTOPEN``, psycopg
``OperationalError``
anything else                                       :class:`ExecutionError`
==================================================  =====================================

Which codes mean what is each backend's answer (``is_duplicate_key`` /
``is_disconnect`` of its :class:`~ddm_core.dialects.Dialect`, found by the
module that raised). The mapped error names the data source (and endpoint)
and the statement, keeps the driver's code as ``code`` and is raised ``from``
the original exception.

The asyncio drivers (:mod:`ddm_core.aio.drivers`) raise what their thread twins
raise: asyncmy's exceptions carry PyMySQL's class names and ``(errno, message)``
args, so they are read as PyMySQL's (:data:`ASYNC_TWINS`); aiosqlite raises
sqlite3's own exceptions and psycopg's async connections psycopg's.
"""

from __future__ import annotations

from typing import Any

from ddm_core._text import shorten_sql
from ddm_core.dialects import DIALECTS, Dialect, dialect_of_error
from ddm_core.errors import DataSourceUnavailableError, DdmError, DuplicateKeyError, ExecutionError

__all__ = ["map_driver_error", "is_disconnect", "ends_connection", "ASYNC_TWINS"]

#: Async drivers whose exceptions read as a thread driver's (same class names, same error numbers).
ASYNC_TWINS: dict[str, str] = {"asyncmy": "pymysql"}


def _dialect(exc: BaseException) -> Dialect | None:
    """The backend whose driver (or its async twin) raised ``exc``."""
    found = dialect_of_error(exc)
    if found is None:
        twin = ASYNC_TWINS.get(type(exc).__module__.split(".", 1)[0])
        if twin is not None:
            found = next((d for d in DIALECTS if twin in d.error_modules), None)
    return found


def _code(exc: BaseException) -> Any:
    """The driver's error code: MySQL number, SQLSTATE (PostgreSQL), or SQLite error name."""
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], int):  # PyMySQL: (errno, message); it also sets .sqlstate
        return args[0]
    name = getattr(exc, "sqlite_errorname", None)  # sqlite3 (Python >= 3.11)
    if name:
        return name
    return getattr(exc, "sqlstate", None)  # psycopg


def is_disconnect(exc: BaseException) -> bool:
    """Does ``exc`` mean the connection is gone (or never came up)?"""
    if isinstance(exc, DataSourceUnavailableError):
        return True
    if isinstance(exc, (ConnectionError, TimeoutError)):  # raw socket errors
        return True
    dialect = _dialect(exc)  # which codes mean what is the backend's knowledge
    return dialect is not None and dialect.is_disconnect(exc, _code(exc))


def ends_connection(exc: BaseException) -> bool:
    """Does the server close the connection after ``exc``, although it is up (a packet too large)?"""
    dialect = _dialect(exc)
    return dialect is not None and dialect.ends_connection(exc, _code(exc))


def _is_duplicate(exc: BaseException) -> bool:
    dialect = _dialect(exc)
    return dialect is not None and dialect.is_duplicate_key(exc, _code(exc))


def map_driver_error(exc: BaseException, *, data_source: str, endpoint: str, sql: str | None) -> DdmError:
    """The ddm-core error for a driver exception (raise it ``from exc``).

    Args:
        exc: What the driver raised.
        data_source: The logical data source the statement went to.
        endpoint: The endpoint (primary or replica) name.
        sql: The statement as sent, or ``None`` for connect / transaction control.
    """
    if isinstance(exc, DdmError):
        return exc
    code = _code(exc)
    where = f"data source {data_source!r}" + (f" (endpoint {endpoint!r})" if endpoint != data_source else "")
    context: dict[str, Any] = {"data_source": data_source, "endpoint": endpoint, "code": code}
    if sql is not None:
        context["sql"] = sql
    if _is_duplicate(exc):
        return DuplicateKeyError(f"duplicate key on {where}: {exc}", **context)
    if is_disconnect(exc):
        return DataSourceUnavailableError(f"{where} is unavailable: {exc}", **context)
    stmt = f" running {shorten_sql(sql)!r}" if sql is not None else ""
    return ExecutionError(f"{type(exc).__name__} on {where}{stmt}: {exc}", **context)
