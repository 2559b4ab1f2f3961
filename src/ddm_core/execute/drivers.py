"""Driver adapters: one small class per DB-API driver, so nothing above cares which.

Each :class:`Driver` knows how to open a connection for an
:class:`~ddm_core.metadata.model.Endpoint`, turn a routed unit's SQL into the
driver's paramstyle, open a buffered or streaming cursor, run ``BEGIN`` /
``COMMIT`` / ``ROLLBACK``, tell whether a connection is inside a transaction
(without a round trip), ping it, and cancel the statement it is running from
another thread. Facts about the backend (default port, paramstyle, the
statement that cancels a query) are its :class:`~ddm_core.dialects.Dialect`'s
answers; the dialect's ``driver_module`` picks the adapter.

============  ==========  ============================================================
dialect       driver      notes
============  ==========  ============================================================
mysql,        PyMySQL     ``ssl_disabled=True`` (connect ~1 ms instead of ~20 ms,
mariadb                   docs/notes.md); autocommit on, ``BEGIN`` opens a transaction;
                          streaming via ``SSCursor``; cancel = ``KILL QUERY <id>`` from
                          a separate connection (socket shut down if that fails).
sqlite        sqlite3     ``check_same_thread=False`` (pooled connections move between
                          threads), ``isolation_level=None`` + explicit ``BEGIN``;
                          cancel = ``connection.interrupt()``.
postgresql    psycopg 3   optional: a clear :class:`~ddm_core.errors.ExecutionError`
                          when it is not installed; always buffered; cancel =
                          ``connection.cancel()``.
============  ==========  ============================================================

Unit SQL arrives in the caller's paramstyle family (router contract): ``%s``
templates — a Python %-format string from end to end, literal ``%`` doubled —
or ``?`` when the caller wrote ``?``. :func:`format_to_qmark` and
:func:`~ddm_core.route.placeholders.to_paramstyle` convert between them.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
import logging
import re
import socket
from functools import lru_cache
from typing import Any, Callable

from ddm_core.dialects import Dialect, find_dialect
from ddm_core.errors import ExecutionError
from ddm_core.metadata.model import Endpoint
from ddm_core.route.placeholders import to_paramstyle

__all__ = ["Driver", "driver_for", "format_to_qmark", "MySQLDriver", "SQLiteDriver", "PostgresDriver"]

log = logging.getLogger("ddm_core.execute")

_FORMAT_TOKEN = re.compile(r"%[%s]")


@lru_cache(maxsize=4096)
def format_to_qmark(sql: str) -> str:
    """A ``%s`` unit template → ``?`` SQL (``%s`` → ``?``, ``%%`` → ``%``), for sqlite3.

    A format unit is one %-format string from end to end (the router doubles
    every literal ``%``, inside quotes too, even in a statement without
    parameters), so the conversion is exactly Python's ``%`` operator with
    ``?`` for every argument — no quote scanning needed (``translate(sql).sql``
    gives the same text, scanning quotes and comments to get there).
    """
    if "%" not in sql:
        return sql
    return _FORMAT_TOKEN.sub(lambda m: "?" if m.group() == "%s" else "%", sql)


class Driver(ABC):
    """What the executor needs from one DB-API driver (see the module table).

    Args:
        dialect: The backend it serves; facts about the backend (default port,
            paramstyle, cancel statement) are the dialect's answers.
    """

    #: Whether :meth:`cursor` can stream (rows read from the server as fetched).
    can_stream = True

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        #: The paramstyle family of the SQL :meth:`sql_for` returns.
        self.paramstyle = dialect.paramstyle

    @abstractmethod
    def connect(self, endpoint: Endpoint, connect_timeout: float) -> Any:
        """A new DB-API connection to ``endpoint``, in autocommit mode."""

    def sql_for(self, sql: str, caller_style: str) -> str:
        """The unit's SQL in this driver's paramstyle (``caller_style``: ``qmark`` or other)."""
        if self.paramstyle == "format":
            return to_paramstyle(sql, "format") if caller_style == "qmark" else sql
        return sql if caller_style == "qmark" else format_to_qmark(sql)

    def cursor(self, raw: Any, stream: bool) -> Any:
        return raw.cursor()

    def begin(self, raw: Any) -> None:
        raw.cursor().execute("BEGIN")

    def commit(self, raw: Any) -> None:
        raw.commit()

    def rollback(self, raw: Any) -> None:
        raw.rollback()

    def in_transaction(self, raw: Any) -> bool:
        """Inside an open transaction? Answered from client state, no round trip."""
        return False

    def ping(self, raw: Any) -> None:
        """Raise if the connection is dead (one round trip at most)."""

    def cancel(self, endpoint: Endpoint, raw: Any) -> None:
        """Stop the statement ``raw`` is running; called from another thread."""

    def close_stream(self, cursor: Any, drain_limit: int) -> bool:
        """Finish a half-read streaming cursor. ``True``: the connection is reusable."""
        try:
            cursor.close()
        except Exception:
            return False
        return True

    def forget_stream(self, cursor: Any) -> None:
        """A streaming cursor's connection is being discarded: stop it from reading on."""


class MySQLDriver(Driver):
    """PyMySQL for ``mysql`` and ``mariadb`` endpoints."""

    def __init__(self, dialect: Dialect) -> None:
        super().__init__(dialect)
        # Drivers are optional and untyped: imported as modules, used as Any.
        try:
            self._pymysql = importlib.import_module("pymysql")
        except ImportError as exc:
            raise ExecutionError(
                "mysql / mariadb data sources need PyMySQL (pip install 'ddm-core[mysql]'), which is not installed",
                dialect="mysql",
            ) from exc
        self._sscursor = importlib.import_module("pymysql.cursors").SSCursor
        self._in_trans = importlib.import_module("pymysql.constants.SERVER_STATUS").SERVER_STATUS_IN_TRANS

    def connect(self, endpoint: Endpoint, connect_timeout: float) -> Any:
        password = endpoint.password.reveal() if endpoint.password is not None else ""
        return self._pymysql.connect(
            host=endpoint.host or "127.0.0.1",
            port=endpoint.port or self.dialect.default_port,
            user=endpoint.username or "root",
            password=password,
            database=endpoint.database or None,
            autocommit=True,
            ssl_disabled=True,  # ~1 ms instead of ~20 ms per connect: docs/notes.md#pymysql-connect-cost
            connect_timeout=max(1, int(round(connect_timeout))),
            charset="utf8mb4",
        )

    def cursor(self, raw: Any, stream: bool) -> Any:
        return raw.cursor(self._sscursor) if stream else raw.cursor()

    def begin(self, raw: Any) -> None:
        raw.begin()

    def in_transaction(self, raw: Any) -> bool:
        return bool(raw.server_status & self._in_trans)

    def ping(self, raw: Any) -> None:
        raw.ping(reconnect=False)

    def cancel(self, endpoint: Endpoint, raw: Any) -> None:
        thread_id = raw.thread_id()
        try:
            statement = self.dialect.cancel_statement(int(thread_id))  # KILL QUERY <id>
            if statement is not None:
                killer = self.connect(endpoint, 1.0)
                try:
                    with killer.cursor() as cur:
                        cur.execute(statement)
                finally:
                    killer.close()
                return
        except Exception as exc:  # the server may be unreachable: cut the socket instead
            log.warning("cancelling connection %s on %s failed (%s); shutting the socket down",
                        thread_id, endpoint.name, exc)
        sock = getattr(raw, "_sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close_stream(self, cursor: Any, drain_limit: int) -> bool:
        # An unbuffered result must be read to its end before the connection can
        # run anything else. Drain a bounded number of rows (a LIMIT-ed unit
        # that the merger stopped reading has at most a page left); past that,
        # the connection is cheaper to drop than to drain.
        try:
            left = drain_limit
            while left > 0:
                rows = cursor.fetchmany(min(left, 1000))
                if not rows:
                    cursor.close()
                    return True
                left -= len(rows)
        except Exception:
            return False
        return False

    def forget_stream(self, cursor: Any) -> None:
        # PyMySQL's MySQLResult.__del__ would otherwise try to read the rest of an
        # unbuffered result from the closed socket (an "exception ignored" at GC).
        for result in (getattr(cursor, "_result", None), getattr(getattr(cursor, "connection", None), "_result", None)):
            if result is not None:
                result.unbuffered_active = False


class SQLiteDriver(Driver):
    """sqlite3 for ``sqlite:///path`` endpoints."""

    def __init__(self, dialect: Dialect, busy_timeout: float = 5.0) -> None:
        super().__init__(dialect)
        import datetime
        import decimal
        import sqlite3

        self._sqlite3: Any = sqlite3
        self._busy_timeout = busy_timeout
        # What PyMySQL accepts as parameters, SQLite stores as text (as MySQL prints them):
        # code written for pymysql passes Decimal and datetime values unchanged.
        sqlite3.register_adapter(decimal.Decimal, str)
        sqlite3.register_adapter(datetime.datetime, lambda v: v.isoformat(" "))
        sqlite3.register_adapter(datetime.date, lambda v: v.isoformat())

    def connect(self, endpoint: Endpoint, connect_timeout: float) -> Any:
        path = endpoint.database or ":memory:"
        return self._sqlite3.connect(
            path,
            timeout=self._busy_timeout,
            isolation_level=None,  # autocommit; transactions are explicit BEGINs
            check_same_thread=False,  # pooled connections move between threads
        )

    def commit(self, raw: Any) -> None:
        if raw.in_transaction:
            raw.execute("COMMIT")

    def rollback(self, raw: Any) -> None:
        if raw.in_transaction:
            raw.execute("ROLLBACK")

    def in_transaction(self, raw: Any) -> bool:
        return bool(raw.in_transaction)

    def cancel(self, endpoint: Endpoint, raw: Any) -> None:
        raw.interrupt()


class PostgresDriver(Driver):
    """psycopg 3 for ``postgresql`` endpoints (optional dependency)."""

    can_stream = False

    def __init__(self, dialect: Dialect) -> None:
        super().__init__(dialect)
        try:
            psycopg = importlib.import_module("psycopg")
        except ImportError as exc:
            raise ExecutionError(
                "postgresql data sources need psycopg 3 (pip install 'psycopg[binary]'), which is not installed",
                dialect="postgresql",
            ) from exc
        self._psycopg = psycopg

    def connect(self, endpoint: Endpoint, connect_timeout: float) -> Any:
        password = endpoint.password.reveal() if endpoint.password is not None else None
        return self._psycopg.connect(
            host=endpoint.host or "127.0.0.1",
            port=endpoint.port or self.dialect.default_port,
            user=endpoint.username or None,
            password=password or None,
            dbname=endpoint.database or None,
            autocommit=True,
            connect_timeout=max(1, int(round(connect_timeout))),
        )

    def begin(self, raw: Any) -> None:
        raw.execute("BEGIN")

    def commit(self, raw: Any) -> None:
        raw.execute("COMMIT")

    def rollback(self, raw: Any) -> None:
        raw.execute("ROLLBACK")

    def in_transaction(self, raw: Any) -> bool:
        return bool(raw.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE)

    def ping(self, raw: Any) -> None:
        raw.execute("SELECT 1")

    def cancel(self, endpoint: Endpoint, raw: Any) -> None:
        cancel = getattr(raw, "cancel_safe", None) or raw.cancel  # cancel_safe: psycopg >= 3.2
        cancel()


#: Adapters by the DB-API module a dialect names (:attr:`Dialect.driver_module`).
_FACTORIES: dict[str, Callable[[Dialect], Driver]] = {
    "pymysql": MySQLDriver,
    "sqlite3": SQLiteDriver,
    "psycopg": PostgresDriver,
}
_DRIVERS: dict[str, Driver] = {}


def driver_for(dialect: str) -> Driver:
    """The (shared) driver adapter for a dialect.

    Raises:
        ExecutionError: unknown dialect, or its driver is not installed.
    """
    driver = _DRIVERS.get(dialect)
    if driver is None:
        backend = find_dialect(dialect)
        factory = _FACTORIES.get(backend.driver_module) if backend is not None else None
        if backend is None or factory is None:
            raise ExecutionError(f"no driver for dialect {dialect!r}", dialect=dialect)
        driver = _DRIVERS[dialect] = factory(backend)
    return driver
