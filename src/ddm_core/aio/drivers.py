"""asyncio driver adapters: what :class:`~ddm_core.execute.drivers.Driver` does, awaited.

Each :class:`AsyncDriver` opens a connection for an
:class:`~ddm_core.metadata.model.Endpoint`, runs one buffered statement
(:meth:`AsyncDriver.execute` → :class:`UnitAnswer`) or streams one
(:meth:`AsyncDriver.open_stream` → :class:`AsyncStream`), runs ``BEGIN`` /
``COMMIT`` / ``ROLLBACK``, tells whether a connection is inside a transaction
without a round trip, pings, resets a session, closes a connection at once
without waiting on anything (:meth:`AsyncDriver.close_now`), and cancels the
statement a connection runs. Every adapter keeps its thread twin
(:func:`~ddm_core.execute.drivers.driver_for` of the same dialect) as
:attr:`AsyncDriver.sync` and reuses what does not wait: the paramstyle
conversion (:meth:`AsyncDriver.sql_for`), and for SQLite every call, run in
aiosqlite's thread.

============  ===========  ============================================================
dialect       driver       notes
============  ===========  ============================================================
mysql,        asyncmy      the ``aio`` extra; the recipe of
mariadb                    :func:`~ddm_core.execute.mysql_connect.open_mysql` (utf8mb4,
                           autocommit, URL ``connectTimeout`` / ``socketTimeout`` /
                           ``sslMode`` / ``useSSL``, PyMySQL's client flags: no
                           multi-statements); parameters escaped by PyMySQL's own code,
                           so both runners send the same text; streaming via asyncmy's
                           ``SSCursor``; cancel = ``KILL QUERY <id>`` on a short-lived
                           connection; reset = ``COM_RESET_CONNECTION``.
sqlite        aiosqlite    the ``aio`` extra; the thread driver's calls
                           (:class:`~ddm_core.execute.drivers.SQLiteDriver`) run in
                           aiosqlite's thread, one hop per statement; cancel =
                           ``connection.interrupt()``.
postgresql    psycopg 3    the ``postgresql`` extra; ``AsyncConnection``; always
                           buffered (:attr:`AsyncDriver.can_stream` is ``False``);
                           cancel = ``cancel_safe()``.
============  ===========  ============================================================

Rows and descriptions are what the thread runner returns for the same query,
value types included (tests/test_aio_drivers.py reads a table of every MySQL
column type both ways). Driver exceptions are raised as the driver raised them;
callers map them with :func:`~ddm_core.execute.driver_errors.map_driver_error`,
which reads asyncmy's as PyMySQL's.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import sqlite3
import ssl
import weakref
from abc import ABC, abstractmethod
from functools import partial
from typing import Any, Callable, Coroutine, NoReturn

from ddm_core._extras import require_extra
from ddm_core.aio.asyncmy_answers import answer_of, unsigned_lengths
from ddm_core.aio.result import UnitAnswer
from ddm_core.dialects import Dialect, find_dialect
from ddm_core.errors import ConfigError, ExecutionError
from ddm_core.execute.drivers import _COM_RESET_CONNECTION, Driver, driver_for
from ddm_core.execute.mysql_cancel import _UNKNOWN_THREAD, KILL_TIMEOUT, MAX_KILLS_IN_FLIGHT
from ddm_core.execute.mysql_connect import (
    CHARSET,
    client_flags,
    connect_timeout_of,
    pymysql_module,
    socket_timeout_of,
    tls_arguments,
)
from ddm_core.execute.params import teach_pymysql
from ddm_core.metadata.model import Endpoint

__all__ = [
    "AsyncDriver",
    "AsyncStream",
    "UnitAnswer",
    "async_driver_for",
    "AsyncMySQLDriver",
    "AsyncSQLiteDriver",
    "AsyncPostgresDriver",
]

log = logging.getLogger("ddm_core.aio")

Row = tuple[Any, ...]

#: The rows of :meth:`AsyncStream.close`'s drain read at a time.
_DRAIN_BATCH = 1000


class AsyncStream(ABC):
    """An unbuffered result being read (:meth:`AsyncDriver.open_stream`); it holds its connection.

    Attributes:
        description: As :attr:`UnitAnswer.description`.
    """

    description: Any

    @abstractmethod
    async def fetchmany(self, size: int) -> list[Row]:
        """The next rows, at most ``size``; fewer only at the end (then empty)."""

    @abstractmethod
    async def close(self, drain_limit: int) -> bool:
        """Finish the result: ``True`` when the connection can run another statement.

        Reads (and drops) at most ``drain_limit`` rows of what is left; a
        result with more left is cheaper to drop with its connection
        (``False``: close the connection with :meth:`AsyncDriver.close_now`).
        """


class AsyncDriver(ABC):
    """What an asyncio runner needs from one driver (see the module table).

    Args:
        dialect: The backend it serves; facts about the backend are the dialect's answers.

    Attributes:
        dialect: That backend.
        paramstyle: The paramstyle family of the SQL :meth:`sql_for` returns.
        native_style: The caller's paramstyle family (``format`` or ``qmark``) whose SQL :meth:`sql_for` returns
            unchanged.
        sync: The thread driver of the same dialect (its pure parts are reused).
    """

    #: Whether :meth:`open_stream` reads rows from the server as they are fetched.
    can_stream = True

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.paramstyle = dialect.paramstyle
        self.sync: Driver = driver_for(dialect.name)
        self.native_style = self.sync.native_style

    def sql_for(self, sql: str, caller_style: str) -> str:
        """The unit's SQL in this driver's paramstyle (``caller_style``: ``qmark`` or other)."""
        return self.sync.sql_for(sql, caller_style)

    @abstractmethod
    async def connect(self, endpoint: Endpoint, connect_timeout: float) -> Any:
        """A new connection to ``endpoint`` in autocommit mode; ``connect_timeout`` bounds the handshake."""

    @abstractmethod
    def execute(self, raw: Any, sql: str, params: Any) -> Coroutine[Any, Any, UnitAnswer]:
        """Run one statement (``sql`` in :attr:`paramstyle`) and read its whole answer: an ``async def``, or a
        function returning the coroutine that does (whatever it raises comes out where that is awaited)."""

    @abstractmethod
    async def open_stream(self, raw: Any, sql: str, params: Any) -> AsyncStream:
        """Run one statement and read its rows as they are fetched (buffered where :attr:`can_stream` is false)."""

    @abstractmethod
    async def begin(self, raw: Any, isolation: str | None = None) -> None:
        """Open a transaction, at ``isolation`` when given (as :meth:`Driver.begin <ddm_core.execute.drivers.Driver.begin>`)."""

    @abstractmethod
    async def commit(self, raw: Any) -> None:
        """Commit the open transaction (nothing when none is open)."""

    @abstractmethod
    async def rollback(self, raw: Any) -> None:
        """Roll the open transaction back (nothing when none is open)."""

    def in_transaction(self, raw: Any) -> bool:
        """Inside an open transaction? Answered from client state, no round trip."""
        return False

    async def ping(self, raw: Any) -> None:
        """Raise if the connection is dead; waits no longer than the connection's connect timeout."""

    async def reset_session(self, raw: Any, endpoint: Endpoint) -> bool:
        """Give ``raw`` a fresh session in place (see :meth:`Driver.reset_session`); ``False``: discard it instead."""
        return False

    @abstractmethod
    def close_now(self, raw: Any) -> None:
        """Close ``raw`` at once, waiting on nothing (its state may be unknown); never raises."""

    async def close(self, raw: Any) -> None:
        """Close ``raw`` and wait until it is closed; never raises."""
        self.close_now(raw)

    def thread_id(self, raw: Any) -> int | None:
        """The server's id of the connection's session (MySQL ``CONNECTION_ID()``), or ``None``."""
        return None

    def read_bound(self, raw: Any) -> float | None:
        """Seconds a statement on ``raw`` may wait for its server when it has no deadline (``None``: unbounded)."""
        return None

    async def cancel(self, endpoint: Endpoint, raw: Any) -> bool:
        """Stop the statement ``raw`` is running (from another task); never raises.

        Returns:
            ``True`` when the stop was delivered (the statement then ends with an
            error, or early — a MySQL ``SLEEP()`` returns 1), ``False`` when it
            could not be (logged).
        """
        return False


# -- MySQL / MariaDB: asyncmy -------------------------------------------------------------------

#: The parameter types of a statement whose parameters are all plain ints (bool is not one).
_INT_ONLY = {int}

#: Length 1, sequence 0, COM_QUIT: a connection closed with it is not an aborted one for the server.
_QUIT_PACKET = b"\x01\x00\x00\x00\x01"


async def _raise(exc: Exception) -> NoReturn:
    raise exc


def _escaping_class(pymysql: Any) -> type[Any]:
    """PyMySQL's own parameter escaping, as an object of its own (see :class:`AsyncMySQLDriver`)."""
    connection = pymysql.connections.Connection
    encoding = pymysql.charset.charset_by_name(CHARSET).encoding  # what PyMySQL's Connection.encoding is

    class PyMySQLEscaping:
        """What PyMySQL's ``Connection.escape`` and ``Cursor._mogrify`` read, over one asyncmy connection.

        The functions are PyMySQL's (so a value is escaped to the very text the
        thread runner sends); ``server_status`` is the asyncmy connection's, for
        ``NO_BACKSLASH_ESCAPES``.
        """

        __slots__ = ("_raw", "encoders", "__weakref__")
        escape = connection.escape
        _escape_string = connection._escape_string
        _mogrify = pymysql.cursors.Cursor._mogrify

        def __init__(self, raw: Any) -> None:
            self._raw = weakref.ref(raw)  # the connection holds this object: no cycle back
            self.encoders = {k: v for k, v in pymysql.converters.conversions.items() if type(k) is not int}

        @property
        def encoding(self) -> str:
            return str(encoding)

        @property
        def server_status(self) -> int:
            raw = self._raw()
            return int(raw.server_status) if raw is not None else 0

        def _get_db(self) -> Any:
            return self

    return PyMySQLEscaping


def _connection_class(connection_module: Any, client: Any, errors: Any, ssl_error: int) -> type[Any]:
    """asyncmy's connection with PyMySQL's client flags and TLS modes (built once, lazily)."""

    class DdmConnection(connection_module.Connection):  # type: ignore[misc]
        """An asyncmy connection that asks for what PyMySQL asks for (see ``AsyncMySQLDriver.connect``)."""

        #: ``sslMode=REQUIRED``: refuse a server without TLS (else TLS only where it is offered).
        ddm_tls_required = False
        # asyncmy's own state (set in its __init__ and connect()), named here for the type checker.
        _ssl_context: ssl.SSLContext | None
        _client_flag: int
        server_capabilities: int

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            # asyncmy always asks for multi-statements; PyMySQL never does, and a routed unit is one
            # statement: "SELECT 1; DROP TABLE t" must fail as a syntax error on both runners.
            self._client_flag &= ~client.MULTI_STATEMENTS

        async def _request_authentication(self) -> None:
            # asyncmy starts TLS whenever it has a context; PyMySQL's PREFERRED mode (useSSL=true,
            # sslMode=PREFERRED) only when the server offers it, and REQUIRED fails as PyMySQL does.
            if self._ssl_context is not None and not self.server_capabilities & client.SSL:
                if self.ddm_tls_required:
                    raise errors.OperationalError(ssl_error, "SSL is required but the server doesn't support it")
                self._ssl_context = None
                self._client_flag &= ~client.SSL
            await super()._request_authentication()

    return DdmConnection


class _MySQLStream(AsyncStream):
    """An asyncmy ``SSCursor`` being read."""

    __slots__ = ("description", "_cursor", "_done")

    def __init__(self, cursor: Any, description: Any) -> None:
        self._cursor = cursor
        self.description = description
        self._done = False

    async def fetchmany(self, size: int) -> list[Row]:
        rows: list[Row] = await self._cursor.fetchmany(size)
        if len(rows) < size:  # an SSCursor's batch is short only at the end of the result
            self._done = True
        return rows

    async def close(self, drain_limit: int) -> bool:
        # An unbuffered result must be read to its end before the connection runs anything else;
        # as the thread driver: drain a bounded number of rows, past that the connection is cheaper
        # to drop than to drain.
        cursor = self._cursor
        try:
            left = drain_limit
            while not self._done and left > 0:
                rows = await cursor.fetchmany(min(left, _DRAIN_BATCH))
                if not rows:
                    self._done = True
                left -= len(rows)
            if not self._done:
                return False
            await cursor.close()
        except Exception as exc:
            log.debug("closing a stream failed: %s", exc)
            return False
        return True


class AsyncMySQLDriver(AsyncDriver):
    """asyncmy for ``mysql`` and ``mariadb`` endpoints (the ``aio`` extra).

    Statements go out as text (``COM_QUERY``), their parameters escaped by
    PyMySQL's own functions over this connection's server status, so the thread
    and asyncio runners send the same bytes: asyncmy's escaping differs for
    ``bytes`` (``_binary'...'``), ``bytearray``, ``memoryview`` and sequences.
    Buffered statements are read with ``Connection.query``, not a cursor: an
    asyncmy cursor runs ``SHOW WARNINGS`` after every statement with warnings
    (a round trip, and it clears what the session's next ``SHOW WARNINGS``
    would read), PyMySQL does not.
    """

    def __init__(self, dialect: Dialect) -> None:
        require_extra("aio", needed_by=f"the asyncio driver of {dialect.title} data sources (asyncmy)")
        super().__init__(dialect)
        pymysql = pymysql_module()
        constants = importlib.import_module("pymysql.constants")
        connection_module = importlib.import_module("asyncmy.connection")
        self._errors: Any = importlib.import_module("asyncmy.errors")
        self._sscursor: Any = importlib.import_module("asyncmy.cursors").SSCursor
        self._in_trans: int = constants.SERVER_STATUS.SERVER_STATUS_IN_TRANS
        self._connection: Any = _connection_class(
            connection_module, constants.CLIENT, self._errors, constants.CR.CR_SSL_CONNECTION_ERROR
        )
        self._escaping: Any = _escaping_class(pymysql)
        self._unverified_tls: ssl.SSLContext | None = None
        self._kills: dict[tuple[str, str | None], int] = {}

    async def connect(self, endpoint: Endpoint, connect_timeout: float) -> Any:
        """A connection by :func:`~ddm_core.execute.mysql_connect.open_mysql`'s recipe.

        ``connect_timeout`` (the pool's acquire timeout; URL ``connectTimeout`` if
        shorter) bounds the TCP connect and the handshake (past it: error 2003).
        The URL's ``socketTimeout`` is not asyncmy's: :meth:`read_bound` hands it
        to the runner, which bounds each statement without a deadline by it.

        Raises:
            ConfigError: a URL option the endpoint names cannot be honoured.
        """
        where = f"endpoint {endpoint.name!r} ({endpoint.url})"
        options = endpoint.options
        return await self._open(
            endpoint, connect_timeout_of(options, connect_timeout, where), socket_timeout_of(options, where), where
        )

    async def _open(self, endpoint: Endpoint, connect_timeout: float, socket_timeout: float, where: str) -> Any:
        context, required = self._tls(endpoint.options, where)
        bound = max(0.05, float(connect_timeout))
        raw = self._connection(
            host=endpoint.host or "127.0.0.1",
            port=endpoint.port or self.dialect.default_port or 3306,
            user=endpoint.username or "root",
            password=endpoint.password.reveal() if endpoint.password is not None else "",
            database=endpoint.database or None,
            charset=CHARSET,
            autocommit=True,
            connect_timeout=bound,
            read_timeout=None,
            ssl=context,
            client_flag=client_flags(endpoint.options, where),
        )
        # asyncmy wraps a connect and every read in asyncio.wait_for when it has a timeout: a task per
        # read (+~100 µs a statement) and, before Python 3.12, a cancel that lands as the awaited read
        # completes is lost (the statement, or a transaction's BEGIN, goes on as if never cancelled:
        # tests/test_aio_cancel.py found it). So asyncmy gets no timeout at all: the connect is bounded
        # here, a statement by the runner (read_bound()).
        raw._connect_timeout = None
        raw.ddm_tls_required = required
        raw.ddm_connect_bound = bound
        raw.ddm_read_bound = socket_timeout
        try:
            async with asyncio.timeout(bound):
                await raw.connect()  # closes the connection itself on any error or cancellation
        except TimeoutError:
            raise self._errors.OperationalError(
                2003, f"Can't connect to MySQL server on {endpoint.host or '127.0.0.1'!r} (no answer within {bound:g} s)"
            ) from None
        escaping = self._escaping(raw)
        teach_pymysql(escaping)  # memoryview / bytearray params bound as bytes, as on the thread runner
        raw.ddm_escaping = escaping
        raw.ddm_shapes = {}  # result shapes seen on this connection (aio/asyncmy_answers.py)
        return raw

    def _tls(self, options: Any, where: str) -> tuple[ssl.SSLContext | None, bool]:
        """``(context, required)`` for the URL's TLS options, read as the thread driver reads them."""
        arguments = tls_arguments(options, where)
        if arguments == {"ssl_disabled": True}:
            return None, False
        if arguments == {"ssl_disabled": False}:  # PREFERRED: TLS when the server offers it
            return self._unverified(), False
        if arguments == {"ssl": {"check_hostname": False, "verify_mode": "none"}}:  # REQUIRED
            return self._unverified(), True
        raise ConfigError(
            f"{where}: URL TLS options asking for {arguments} cannot be honoured by the asyncio driver (asyncmy)",
            option="sslMode",
        )

    def _unverified(self) -> ssl.SSLContext:
        """Encrypted, certificate not checked: what PyMySQL's PREFERRED and ddm-core's REQUIRED give."""
        context = self._unverified_tls
        if context is None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA bundle loaded: nothing is verified
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            self._unverified_tls = context
        return context

    def execute(self, raw: Any, sql: str, params: Any) -> Coroutine[Any, Any, UnitAnswer]:
        # A plain function handing back asyncmy_answers' coroutine: one coroutine a statement, not two.
        try:
            if params is None:
                query = sql
            elif type(params) is tuple and (not params or {*map(type, params)} == _INT_ONLY):  # no generator a statement
                try:
                    query = sql % tuple(map(str, params))  # PyMySQL's escape_int is str(): the same text, without its dispatch
                except TypeError:  # the parameters do not fit: PyMySQL's own error for it
                    query = raw.ddm_escaping._mogrify(sql, params)
            else:
                query = raw.ddm_escaping._mogrify(sql, params)  # as PyMySQL's Cursor.execute
        except Exception as exc:  # raised where the caller awaits, as by a coroutine
            return _raise(exc)
        return answer_of(raw, query)  # a result set of a known shape: read without asyncmy's result object

    async def open_stream(self, raw: Any, sql: str, params: Any) -> AsyncStream:
        query = sql if params is None else raw.ddm_escaping._mogrify(sql, params)
        cursor = raw.cursor(self._sscursor)
        await cursor.execute(query)  # no args: the text is sent as it is
        description = cursor.description
        return _MySQLStream(cursor, None if description is None else unsigned_lengths(description))

    async def begin(self, raw: Any, isolation: str | None = None) -> None:
        if isolation is not None:  # for the next transaction only: nothing stays on the pooled connection
            async with raw.cursor() as cursor:
                await cursor.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
        await raw.begin()

    async def commit(self, raw: Any) -> None:
        await raw.commit()

    async def rollback(self, raw: Any) -> None:
        await raw.rollback()

    def in_transaction(self, raw: Any) -> bool:
        return bool(raw.server_status & self._in_trans)

    async def ping(self, raw: Any) -> None:
        if not raw.connected:  # asyncmy's own "Already closed" carries no error number
            raise self._errors.InterfaceError(0, "Not connected")
        # A checkout waits no longer for a ping than for a new connection: a stopped server
        # must fail the ping within the connect timeout, not the socket timeout.
        async with asyncio.timeout(raw.ddm_connect_bound):
            await raw.ping(reconnect=False)

    async def reset_session(self, raw: Any, endpoint: Endpoint) -> bool:
        await raw._execute_command(_COM_RESET_CONNECTION, b"")
        await raw._read_ok_packet()  # an error packet (a server without the command) raises: discard
        # The reset gave the session the server's defaults; put back what the recipe set.
        await raw.query(f"SET NAMES {CHARSET}")  # asyncmy 0.2.18's set_charset() fails (AttributeError)
        if endpoint.database:
            await raw.select_db(endpoint.database)
        await raw.autocommit(True)
        return True

    def close_now(self, raw: Any) -> None:
        try:
            transport = raw._transport
            if transport is not None and not transport.is_closing():
                if transport.get_write_buffer_size():  # a server not reading: nothing more will get through
                    transport.abort()
                elif raw.connected:
                    transport.write(_QUIT_PACKET)  # handed to the kernel at once; the close waits for nothing
            raw.close()
        except Exception as exc:  # already broken: nothing left to free
            log.debug("closing a connection failed: %s", exc)

    def read_bound(self, raw: Any) -> float | None:
        return raw.ddm_read_bound  # type: ignore[no-any-return]  # the URL's socketTimeout (see _open)

    def thread_id(self, raw: Any) -> int | None:
        try:
            return int(raw.thread_id())
        except Exception:  # no handshake yet
            return None

    async def cancel(self, endpoint: Endpoint, raw: Any) -> bool:
        """``KILL QUERY <id>`` (the dialect's cancel statement) on a short-lived connection.

        Its connect and its answer each wait at most
        :data:`~ddm_core.execute.mysql_cancel.KILL_TIMEOUT`; at most
        :data:`~ddm_core.execute.mysql_cancel.MAX_KILLS_IN_FLIGHT` run at once
        per endpoint. The statement's connection stays usable: the server ends
        the statement (with error 1317, or early for ``SLEEP()``) and keeps the session.
        """
        thread_id = self.thread_id(raw)
        statement = self.dialect.cancel_statement(thread_id) if thread_id is not None else None
        if statement is None:
            return False
        key = (endpoint.url, endpoint.username)
        running = self._kills.get(key, 0)
        if running >= MAX_KILLS_IN_FLIGHT:
            log.warning("%s: %d KILL QUERY already waiting on a server that does not answer; not sending %s",
                        endpoint.name, running, statement)  # fmt: skip
            return False
        self._kills[key] = running + 1
        where = f"endpoint {endpoint.name!r} ({endpoint.url})"
        try:
            killer = await self._open(endpoint, KILL_TIMEOUT, KILL_TIMEOUT, where)
            try:
                async with asyncio.timeout(KILL_TIMEOUT):  # asyncmy reads without a timeout of its own (see _open)
                    await killer.query(statement)
            finally:
                self.close_now(killer)
        except Exception as exc:
            args = getattr(exc, "args", ())
            if args and args[0] == _UNKNOWN_THREAD:
                log.debug("%s on %s: the connection had already ended", statement, endpoint.name)
            else:
                log.warning("%s on %s failed: %s", statement, endpoint.name, exc)
            return False
        finally:
            left = self._kills.get(key, 1) - 1
            if left > 0:
                self._kills[key] = left
            else:
                self._kills.pop(key, None)
        return True


# -- SQLite: aiosqlite --------------------------------------------------------------------------


class _SQLiteStream(AsyncStream):
    """A sqlite3 cursor read in aiosqlite's thread."""

    __slots__ = ("description", "_raw", "_cursor", "_sync")

    def __init__(self, raw: Any, cursor: Any, sync: Driver) -> None:
        self._raw = raw
        self._cursor = cursor
        self._sync = sync
        self.description = cursor.description

    async def fetchmany(self, size: int) -> list[Row]:
        rows: list[Row] = await _in_thread(self._raw, self._cursor.fetchmany, size)
        return rows

    async def close(self, drain_limit: int) -> bool:
        try:
            done: bool = await _in_thread(self._raw, self._sync.close_stream, self._cursor, drain_limit)
        except Exception:
            return False
        return done


async def _in_thread(raw: Any, call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)`` in the aiosqlite connection's own thread (one hop, one future)."""
    if raw._connection is None or not raw._running:
        # aiosqlite's own refusal is a ValueError; sqlite3's, which the thread runner meets, is this.
        raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
    return await raw._execute(call, *args)


class AsyncSQLiteDriver(AsyncDriver):
    """aiosqlite for ``sqlite:///path`` endpoints (the ``aio`` extra).

    Every call is the thread driver's (:class:`~ddm_core.execute.drivers.SQLiteDriver`:
    its connection recipe, its parameter-converting cursor, its commit and
    session reset), run in aiosqlite's thread through ``Connection._execute``:
    one hop per statement where aiosqlite's public calls take three (execute,
    fetch, close).
    """

    def __init__(self, dialect: Dialect) -> None:
        require_extra("aio", needed_by=f"the asyncio driver of {dialect.title} data sources (aiosqlite)")
        super().__init__(dialect)
        self._aiosqlite: Any = importlib.import_module("aiosqlite")

    async def connect(self, endpoint: Endpoint, connect_timeout: float) -> Any:
        raw = self._aiosqlite.Connection(partial(self.sync.connect, endpoint, connect_timeout), 64)
        # As a thread runner's sqlite3 connection, one never closed must not keep the process from exiting.
        raw._thread.daemon = True
        return await raw  # starts its thread; stops it again on any error or cancellation

    def _run(self, conn: Any, sql: str, params: Any) -> UnitAnswer:
        """In aiosqlite's thread: one statement, as the thread runner reads it."""
        cursor = self.sync.cursor(conn, False)
        try:
            cursor.execute(sql, () if params is None else params)
            description = cursor.description
            if description is None:
                return UnitAnswer(None, [], cursor.rowcount, cursor.lastrowid or None)
            rows = cursor.fetchall()
            return UnitAnswer(description, rows, len(rows))
        finally:
            cursor.close()

    def _start(self, conn: Any, sql: str, params: Any) -> Any:
        cursor = self.sync.cursor(conn, True)
        cursor.execute(sql, () if params is None else params)
        return cursor

    async def execute(self, raw: Any, sql: str, params: Any) -> UnitAnswer:
        answer: UnitAnswer = await _in_thread(raw, self._run, raw._connection, sql, params)
        return answer

    async def open_stream(self, raw: Any, sql: str, params: Any) -> AsyncStream:
        cursor = await _in_thread(raw, self._start, raw._connection, sql, params)
        return _SQLiteStream(raw, cursor, self.sync)

    async def begin(self, raw: Any, isolation: str | None = None) -> None:
        await _in_thread(raw, self.sync.begin, raw._connection, isolation)

    async def commit(self, raw: Any) -> None:
        await _in_thread(raw, self.sync.commit, raw._connection)

    async def rollback(self, raw: Any) -> None:
        await _in_thread(raw, self.sync.rollback, raw._connection)

    def in_transaction(self, raw: Any) -> bool:
        conn = raw._connection
        return conn is not None and self.sync.in_transaction(conn)

    async def ping(self, raw: Any) -> None:
        # A file needs no round trip: the connection is alive while its thread is.
        if raw._connection is None or not raw._running or not raw._thread.is_alive():
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")

    async def reset_session(self, raw: Any, endpoint: Endpoint) -> bool:
        done: bool = await _in_thread(raw, self.sync.reset_session, raw._connection, endpoint)
        return done

    def close_now(self, raw: Any) -> None:
        try:
            conn = raw._connection
            if conn is not None:
                conn.interrupt()  # a statement under way in the thread ends now
            if raw._running:
                raw.stop()  # the thread closes the connection, then ends
        except Exception as exc:
            log.debug("closing a SQLite connection failed: %s", exc)

    async def close(self, raw: Any) -> None:
        try:
            conn = raw._connection
            if conn is not None:
                conn.interrupt()
            await raw.close()
        except Exception as exc:
            log.debug("closing a SQLite connection failed: %s", exc)
            self.close_now(raw)

    async def cancel(self, endpoint: Endpoint, raw: Any) -> bool:
        conn = raw._connection
        if conn is None:
            return False
        self.sync.cancel(endpoint, conn)  # sqlite3's interrupt(), safe from any thread
        return True


# -- PostgreSQL: psycopg 3 ----------------------------------------------------------------------


class _BufferedStream(AsyncStream):
    """Rows already read, handed out in batches (a driver that cannot stream)."""

    __slots__ = ("description", "_rows", "_at")

    def __init__(self, description: Any, rows: list[Row]) -> None:
        self.description = description
        self._rows = rows
        self._at = 0

    async def fetchmany(self, size: int) -> list[Row]:
        at = self._at
        self._at = at + size
        return self._rows[at : at + size]

    async def close(self, drain_limit: int) -> bool:
        self._rows = []
        return True


class AsyncPostgresDriver(AsyncDriver):
    """psycopg 3's ``AsyncConnection`` for ``postgresql`` endpoints (the ``postgresql`` extra)."""

    can_stream = False

    def __init__(self, dialect: Dialect) -> None:
        super().__init__(dialect)  # the thread driver refuses first, naming the postgresql extra
        self._psycopg: Any = importlib.import_module("psycopg")

    async def connect(self, endpoint: Endpoint, connect_timeout: float) -> Any:
        password = endpoint.password.reveal() if endpoint.password is not None else None
        return await self._psycopg.AsyncConnection.connect(
            host=endpoint.host or "127.0.0.1",
            port=endpoint.port or self.dialect.default_port,
            user=endpoint.username or None,
            password=password or None,
            dbname=endpoint.database or None,
            autocommit=True,
            connect_timeout=max(1, int(round(connect_timeout))),
        )

    async def execute(self, raw: Any, sql: str, params: Any) -> UnitAnswer:
        cursor = raw.cursor()
        try:
            await cursor.execute(sql, params)
            description = cursor.description
            if description is None:
                return UnitAnswer(None, [], cursor.rowcount, getattr(cursor, "lastrowid", None) or None)
            rows = await cursor.fetchall()
            return UnitAnswer(description, rows, len(rows))
        finally:
            await cursor.close()

    async def open_stream(self, raw: Any, sql: str, params: Any) -> AsyncStream:
        answer = await self.execute(raw, sql, params)
        return _BufferedStream(answer.description, answer.rows)

    async def begin(self, raw: Any, isolation: str | None = None) -> None:
        await raw.execute("BEGIN" if isolation is None else f"BEGIN ISOLATION LEVEL {isolation}")

    async def commit(self, raw: Any) -> None:
        await raw.execute("COMMIT")

    async def rollback(self, raw: Any) -> None:
        await raw.execute("ROLLBACK")

    def in_transaction(self, raw: Any) -> bool:
        return self.sync.in_transaction(raw)

    async def ping(self, raw: Any) -> None:
        # psycopg has no read timeout: bound the round trip by the connection's connect timeout.
        timeout = float(raw.info.get_parameters().get("connect_timeout") or KILL_TIMEOUT)
        async with asyncio.timeout(timeout):
            await raw.execute("SELECT 1")

    def close_now(self, raw: Any) -> None:
        try:
            raw.pgconn.finish()  # what AsyncConnection.close() does, without its await
        except Exception as exc:
            log.debug("closing a PostgreSQL connection failed: %s", exc)

    async def close(self, raw: Any) -> None:
        try:
            await raw.close()
        except Exception as exc:
            log.debug("closing a PostgreSQL connection failed: %s", exc)
            self.close_now(raw)

    def thread_id(self, raw: Any) -> int | None:
        try:
            return int(raw.info.backend_pid)
        except Exception:
            return None

    async def cancel(self, endpoint: Endpoint, raw: Any) -> bool:
        try:
            await raw.cancel_safe(timeout=KILL_TIMEOUT)
        except Exception as exc:
            log.warning("cancelling the statement on %s failed: %s", endpoint.name, exc)
            return False
        return True


#: Adapters by the DB-API module a dialect names (:attr:`Dialect.driver_module`).
_FACTORIES: dict[str, Callable[[Dialect], AsyncDriver]] = {
    "pymysql": AsyncMySQLDriver,
    "sqlite3": AsyncSQLiteDriver,
    "psycopg": AsyncPostgresDriver,
}
_DRIVERS: dict[str, AsyncDriver] = {}


def async_driver_for(dialect: str) -> AsyncDriver:
    """The (shared) asyncio driver adapter for a dialect.

    Raises:
        ExecutionError: unknown dialect.
        MissingExtraError: its driver is not installed (the extra that brings it is named:
            ``aio`` for MySQL, MariaDB and SQLite, ``postgresql`` for PostgreSQL).
    """
    driver = _DRIVERS.get(dialect)
    if driver is None:
        backend = find_dialect(dialect)
        factory = _FACTORIES.get(backend.driver_module) if backend is not None else None
        if backend is None or factory is None:
            raise ExecutionError(f"no asyncio driver for dialect {dialect!r}", dialect=dialect)
        driver = _DRIVERS[dialect] = factory(backend)
    return driver
