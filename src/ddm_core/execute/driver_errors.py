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

The mapped error names the data source (and endpoint) and the statement, keeps
the driver's code as ``code`` and is raised ``from`` the original exception.
"""

from __future__ import annotations

from typing import Any

from ddm_core.errors import DataSourceUnavailableError, DdmError, DuplicateKeyError, ExecutionError

__all__ = ["map_driver_error", "is_disconnect", "sql_sample"]

#: PyMySQL / MySQL client and server codes meaning "the connection is gone or never came".
MYSQL_DISCONNECT = frozenset({1053, 1927, 2002, 2003, 2006, 2013, 2055})
MYSQL_DUPLICATE = 1062
PG_UNIQUE_VIOLATION = "23505"
SQLITE_UNIQUE = frozenset({"SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"})
SQLITE_CANTOPEN = frozenset({"SQLITE_CANTOPEN", "SQLITE_NOTADB"})
_SAMPLE = 200


def sql_sample(sql: str) -> str:
    """The first 200 characters of a statement, for messages."""
    return sql if len(sql) <= _SAMPLE else sql[:_SAMPLE] + "..."


def _code(exc: BaseException) -> Any:
    """The driver's error code: MySQL number, SQLSTATE (PostgreSQL), or SQLite error name."""
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], int):  # PyMySQL: (errno, message); it also sets .sqlstate
        return args[0]
    name = getattr(exc, "sqlite_errorname", None)  # sqlite3 (Python >= 3.11)
    if name:
        return name
    return getattr(exc, "sqlstate", None)  # psycopg


def _module(exc: BaseException) -> str:
    return type(exc).__module__.split(".", 1)[0]


def is_disconnect(exc: BaseException) -> bool:
    """Does ``exc`` mean the connection is gone (or never came up)?"""
    if isinstance(exc, DataSourceUnavailableError):
        return True
    if isinstance(exc, (ConnectionError, TimeoutError)):  # raw socket errors
        return True
    module = _module(exc)
    name = type(exc).__name__
    code = _code(exc)
    if module == "pymysql":
        if name == "InterfaceError":  # "(0, '')": the connection was already closed
            return True
        return bool(name == "OperationalError" and code in MYSQL_DISCONNECT)
    if module in ("sqlite3", "_sqlite3"):
        if code in SQLITE_CANTOPEN:
            return True
        return bool(code is None and "unable to open database file" in str(exc))
    if module == "psycopg":
        return bool(name in ("OperationalError", "InterfaceError") and code in (None, "08000", "08003", "08006", "57P01"))
    return False


def _is_duplicate(exc: BaseException) -> bool:
    code = _code(exc)
    module = _module(exc)
    if module == "pymysql":
        return bool(code == MYSQL_DUPLICATE)
    if module == "psycopg":
        return bool(code == PG_UNIQUE_VIOLATION)
    if module in ("sqlite3", "_sqlite3"):
        if code in SQLITE_UNIQUE:
            return True
        return bool(code is None and "UNIQUE constraint failed" in str(exc))
    return False


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
    stmt = f" running {sql_sample(sql)!r}" if sql is not None else ""
    return ExecutionError(f"{type(exc).__name__} on {where}{stmt}: {exc}", **context)
