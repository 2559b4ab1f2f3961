"""Driver adapters: one small class per DB-API driver, so nothing above cares which.

Each :class:`Driver` knows how to open a connection for an
:class:`~ddm_core.metadata.model.Endpoint`, turn a routed unit's SQL into the
driver's paramstyle, open a buffered or streaming cursor, run ``BEGIN`` /
``COMMIT`` / ``ROLLBACK``, tell whether a connection is inside a transaction
(without a round trip), ping it, cancel the statement it is running from
another thread without waiting on its server, and reset its session before
a pinned connection goes back to the pool (:mod:`ddm_core.execute.session_state`).
Parameter values the driver would bind wrongly are converted per connection or
per cursor, never in a process-wide registry (:mod:`ddm_core.execute.params`). Facts about the backend (default port, paramstyle, the
statement that cancels a query) are its :class:`~ddm_core.dialects.Dialect`'s
answers; the dialect's ``driver_module`` picks the adapter.

============  ==========  ============================================================
dialect       driver      notes
============  ==========  ============================================================
mysql,        PyMySQL     opened by :func:`~ddm_core.execute.mysql_connect.open_mysql`
mariadb                   (utf8mb4, autocommit, TLS off unless configured, connect /
                          read / write timeouts always set); ``BEGIN`` opens a
                          transaction; streaming via ``SSCursor``; cancel = socket shut
                          down at once + ``KILL QUERY <id>`` from a background thread
                          (:mod:`~ddm_core.execute.mysql_cancel`); reset =
                          ``COM_RESET_CONNECTION``; ``memoryview`` bound as bytes.
sqlite        sqlite3     ``check_same_thread=False`` (pooled connections move between
                          threads), ``isolation_level=None`` + explicit ``BEGIN``;
                          cancel = ``connection.interrupt()``; cursors convert
                          ``Decimal`` / ``datetime`` params; reset = drop temp objects.
postgresql    psycopg 3   optional: a :class:`~ddm_core.errors.MissingExtraError` naming
                          the ``postgresql`` extra when it is not installed; always buffered; cancel =
                          ``connection.cancel()``.
============  ==========  ============================================================

Unit SQL arrives in the caller's paramstyle family (router contract): ``%s``
templates — a Python %-format string from end to end, literal ``%`` doubled —
or ``?`` when the caller wrote ``?``. :func:`format_to_qmark` and
:func:`~ddm_core.route.text.placeholders.to_paramstyle` convert between them.
"""

from __future__ import annotations

import importlib
import io
from abc import ABC, abstractmethod
import logging
import re
from functools import lru_cache
from typing import Any, Callable, Mapping

from ddm_core._extras import require_extra
from ddm_core.dialects import Dialect, find_dialect
from ddm_core.errors import ConfigError, ExecutionError
from ddm_core.execute.mysql_cancel import QueryKiller
from ddm_core.execute.isolation import SNAPSHOT, refuse_characteristics
from ddm_core.execute.mysql_oks import read_oks
from ddm_core.execute.mysql_query import MAX_QUERY as _MAX_QUERY
from ddm_core.execute.mysql_query import QUERY_HEAD as _QUERY_HEAD
from ddm_core.execute.mysql_query import query_bytes
from ddm_core.execute.mysql_connect import (
    CHARSET,
    connect_timeout_of,
    open_mysql,
    pymysql_module,
    socket_timeout_of,
)
from ddm_core.execute.params import SQLiteCursor
from ddm_core.metadata.model import Endpoint
from ddm_core.route.text.placeholders import to_paramstyle

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
    #: Whether :meth:`send` / :meth:`receive` split a statement in two (several units, one thread).
    can_pipeline = False
    #: Whether a buffered cursor is closed once its statement succeeded and its rows were taken.
    closes_buffered = True

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        #: The paramstyle family of the SQL :meth:`sql_for` returns.
        self.paramstyle = dialect.paramstyle
        #: The caller's paramstyle family whose SQL :meth:`sql_for` returns unchanged.
        self.native_style = "format" if dialect.paramstyle == "format" else "qmark"

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

    def send(self, raw: Any, sql: str, params: Any) -> Any:
        """Send ``sql`` without waiting for the answer; returns the cursor :meth:`receive` reads it into."""
        raise ExecutionError(f"the {self.dialect.name} driver cannot pipeline statements (can_pipeline is False)")

    def receive(self, raw: Any, cursor: Any, wait: float | None) -> None:
        """Read the answer to what :meth:`send` sent into ``cursor`` (as ``cursor.execute`` would).

        ``wait``: seconds to wait for it at most (``None``: the connection's socket timeout).
        """
        raise ExecutionError(f"the {self.dialect.name} driver cannot pipeline statements (can_pipeline is False)")

    def fileno(self, raw: Any) -> int:
        """The socket :meth:`receive` reads from: readable once the answer to :meth:`send` arrives."""
        raise ExecutionError(f"the {self.dialect.name} driver cannot pipeline statements (can_pipeline is False)")

    def send_read(self, raw: Any, sql: str, params: Any) -> None:
        """As :meth:`send`, for a read whose answer is taken off the socket by its caller (relayed, or read by
        :meth:`read_answer`): no cursor (docs/proxy.md#multi-unit-reads-on-the-loop)."""
        raise ExecutionError(f"the {self.dialect.name} driver cannot read answers taken off its socket")

    def read_answer(self, raw: Any, answer: bytes) -> tuple[Any, Any]:
        """The ``(description, rows)`` of ``answer``: the bytes of a whole answer to :meth:`send_read`, already
        taken off the socket (an event loop read them), read as :meth:`receive` would read them.

        Raises:
            Exception: what :meth:`receive` would raise for that answer (the driver's error for an error packet).
        """
        raise ExecutionError(f"the {self.dialect.name} driver cannot read answers taken off its socket")

    def socket_timeout(self, endpoint: Endpoint) -> float | None:
        """Seconds a read from ``endpoint`` may wait for the server (``None``: unbounded)."""
        return None

    #: Whether a proxy may relay answers read off this driver's sockets (docs/proxy.md#relayed-results).
    can_relay = False
    #: Whether the server sends EOF packets on its connections (they did not ask for ``CLIENT_DEPRECATE_EOF``).
    relay_eof = True

    def relay_socket(self, raw: Any) -> Any | None:
        """The socket whose raw answer packets a proxy passes on instead of :meth:`receive`; ``None``: it
        cannot (the connection is gone, or speaks otherwise than :attr:`relay_eof` says)."""
        return None

    def relayed(self, raw: Any, status: int) -> None:
        """A relayed answer ended with the server's ``status`` flags: the connection knows its state again."""

    def relay_error(self, raw: Any, payload: bytes) -> BaseException:
        """The driver's exception for an error packet a relay read (what :meth:`receive` would have raised)."""
        raise ExecutionError(f"the {self.dialect.name} driver cannot relay answers")

    def send_execute(self, raw: Any, sql: str, count: int, values: bytes) -> None:
        """Send a binary-protocol execute of ``sql`` (``?`` marks, ``count`` of them) with ``values`` (its null
        bitmap, types and values, as a COM_STMT_EXECUTE carries them), preparing ``sql`` on ``raw`` first
        if it is not yet (one round trip, then kept on the connection); the answer is relayed."""
        raise ExecutionError(f"the {self.dialect.name} driver cannot relay answers")

    def prepared_id(self, raw: Any, sql: str) -> int | None:
        """The id of ``sql``'s statement prepared on ``raw`` by :meth:`send_execute` (``None``: not prepared there
        yet, its first execute prepares it: one round trip)."""
        return None

    def send_packet(self, raw: Any, packet: bytes) -> None:
        """Write one whole command packet (framed, sequence id 0) on ``raw`` as :meth:`send_execute` writes its
        own — a binary execute of a statement :meth:`prepared_id` knows, framed by the caller; the answer is
        relayed."""
        raise ExecutionError(f"the {self.dialect.name} driver cannot relay answers")

    def send_commands(self, raw: Any, commands: list[str]) -> None:
        """Send ``commands`` (statements answered by an OK: ``BEGIN``, ``COMMIT``…) one after another without
        waiting; :meth:`receive_oks` reads their answers once :meth:`fileno` is readable."""
        raise ExecutionError(f"the {self.dialect.name} driver cannot pipeline statements (can_pipeline is False)")

    def receive_oks(self, raw: Any, count: int, exact: bool = False) -> None:
        """Read the OKs of the ``count`` commands :meth:`send_commands` sent (blocking until they are in);
        an error answer raises what the driver raises for it. ``exact``: a statement was sent behind them
        (:meth:`follows_opening`): read no byte of its answer."""
        raise ExecutionError(f"the {self.dialect.name} driver cannot pipeline statements (can_pipeline is False)")

    def follows_opening(self, raw: Any, sql: str | None) -> bool:
        """May a statement be sent on ``raw`` right behind a transaction's opening, before its OKs are read
        (``sql``: a binary execute's statement; ``None``: a text one)? Its answer is then read after
        :meth:`receive_oks` with ``exact`` (docs/proxy.md#transactions-on-the-loop)."""
        return False

    def begin_commands(self, isolation: str | None, characteristics: str = "") -> list[str]:
        """The statements :meth:`begin` runs, in order (sent from an event loop by :meth:`send_commands`)."""
        refuse_characteristics(self.dialect.name, characteristics)
        return ["BEGIN"]

    def begin(self, raw: Any, isolation: str | None = None, characteristics: str = "") -> None:
        """Open a transaction, at ``isolation`` (one of ``ISOLATION_LEVELS``) when given, with ``START
        TRANSACTION``'s ``characteristics`` (:func:`~ddm_core.execute.isolation.characteristics`) when given.

        The base opens it with ``BEGIN`` and takes no level: SQLite's transactions are
        always serializable (docs/sqlalchemy.md#isolation-levels). It takes no characteristics either.

        Raises:
            TransactionCharacteristicsError: characteristics this driver cannot open a transaction with.
        """
        refuse_characteristics(self.dialect.name, characteristics)
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
        """Stop the statement ``raw`` is running; called from another thread, must not block on the server."""

    def reset_session(self, raw: Any, endpoint: Endpoint) -> bool:
        """Give ``raw`` a fresh session (variables, locks, temporary objects) in place.

        Called on a pinned connection that ran a session-changing statement,
        outside any transaction, before it goes back to the pool.

        Returns:
            ``True`` when reset; ``False`` when this driver cannot reset in
            place (the connection is then discarded, which resets as well).
        """
        return False

    def close_stream(self, cursor: Any, drain_limit: int) -> bool:
        """Finish a half-read streaming cursor. ``True``: the connection is reusable."""
        try:
            cursor.close()
        except Exception:
            return False
        return True

    def forget_stream(self, cursor: Any) -> None:
        """A streaming cursor's connection is being discarded: stop it from reading on."""


#: MySQL's COM_RESET_CONNECTION command byte (MySQL >= 5.7.3, MariaDB >= 10.2.4); PyMySQL has no call for it.
_COM_RESET_CONNECTION = 0x1F
#: MySQL's COM_QUERY command byte (one text statement).
_COM_QUERY = 0x03
_DEPRECATE_EOF = 1 << 24  # CLIENT_DEPRECATE_EOF
_COM_STMT_PREPARE, _COM_STMT_EXECUTE, _COM_STMT_CLOSE = 0x16, 0x17, 0x19
_EXECUTE_ONCE = b"\x00\x01\x00\x00\x00"  # no cursor, one iteration
_EXECUTE_HEAD = bytes((_COM_STMT_EXECUTE,))
#: Statements send_execute keeps prepared on one connection (MariaDB's max_prepared_stmt_count is per server).
_PREPARED_PER_CONNECTION = 128


class MySQLDriver(Driver):
    """PyMySQL for ``mysql`` and ``mariadb`` endpoints."""

    def __init__(self, dialect: Dialect) -> None:
        super().__init__(dialect)
        pymysql_module()  # PyMySQL is untyped: its modules are used as Any
        self._sscursor = importlib.import_module("pymysql.cursors").SSCursor
        self._in_trans = importlib.import_module("pymysql.constants.SERVER_STATUS").SERVER_STATUS_IN_TRANS
        self._errors = importlib.import_module("pymysql.err")
        self._killer = QueryKiller(self._open_briefly, dialect.cancel_statement)
        # socket_timeout per endpoint's options (kept, so their id is not reused): parsing them costs ~100
        # interpreted opcodes, and the loop asks for every transaction it opens or ends
        self._socket_timeouts: dict[int, tuple[Mapping[str, str], float]] = {}

    def connect(self, endpoint: Endpoint, connect_timeout: float) -> Any:
        """A connection by the one recipe (:func:`~ddm_core.execute.mysql_connect.open_mysql`).

        ``connect_timeout`` (the pool's acquire timeout; URL ``connectTimeout``
        if shorter) bounds the TCP connect and the handshake; reads and writes
        afterwards wait at most the URL's ``socketTimeout``.
        """
        where = f"endpoint {endpoint.name!r} ({endpoint.url})"
        options = endpoint.options
        return self._open(
            endpoint, connect_timeout_of(options, connect_timeout, where), socket_timeout_of(options, where)
        )

    def _open(self, endpoint: Endpoint, connect_timeout: float, socket_timeout: float) -> Any:
        password = endpoint.password.reveal() if endpoint.password is not None else ""
        return open_mysql(
            host=endpoint.host or "127.0.0.1",
            port=endpoint.port or self.dialect.default_port or 3306,
            user=endpoint.username or "root",
            password=password,
            database=endpoint.database or None,
            connect_timeout=connect_timeout,
            socket_timeout=socket_timeout,
            options=endpoint.options,
            where=f"endpoint {endpoint.name!r} ({endpoint.url})",
        )

    def _open_briefly(self, endpoint: Endpoint, timeout: float) -> Any:
        """A connection for one quick command (``KILL QUERY``): every wait bounded by ``timeout``."""
        return self._open(endpoint, timeout, timeout)

    can_pipeline = True
    # A buffered PyMySQL cursor holds only its rows; closing it would just drain further result
    # sets, which the connection's next command drains itself (PyMySQL's _execute_command).
    # Not closing takes ~45 interpreted opcodes off every statement.
    closes_buffered = False

    def cursor(self, raw: Any, stream: bool) -> Any:
        return raw.cursor(self._sscursor) if stream else raw.cursor()


    # A statement is one COM_QUERY packet and one answer: several connections can each
    # have one in flight while a single thread reads the answers in turn
    # (docs/operations.md#multi-unit-statements). These are PyMySQL's Cursor.execute,
    # split where it waits (tests/test_execute.py compares both ways, types included).

    def send(self, raw: Any, sql: str, params: Any) -> Any:
        cursor = raw.cursor()
        query = cursor._mogrify(sql, params) if params is not None else sql
        cursor._clear_result()
        cursor._executed = query
        raw._execute_command(_COM_QUERY, query.encode(raw.encoding))
        return cursor

    def receive(self, raw: Any, cursor: Any, wait: float | None) -> None:
        if wait is None:
            raw._affected_rows = raw._read_query_result(unbuffered=False)
        else:  # a deadline: past it (plus the grace) the read gives up, as a fan-out gives up on a lane
            saved = raw._read_timeout
            raw._read_timeout = wait if saved is None else min(saved, wait)
            try:
                raw._affected_rows = raw._read_query_result(unbuffered=False)
            finally:
                raw._read_timeout = saved
        cursor._do_get_result()

    def fileno(self, raw: Any) -> int:
        return int(raw._sock.fileno())

    def send_read(self, raw: Any, sql: str, params: Any) -> None:
        # Cursor.execute's text and _execute_command's packet without the cursor, the mogrify and the
        # command's bookkeeping (~300 interpreted opcodes a unit); tests/test_mysql_query.py compares the
        # text with PyMySQL's. A connection with something pending or a statement of 16 MiB and more takes
        # PyMySQL's own path.
        payload = query_bytes(raw, sql, params)
        pending = raw._result
        if pending is not None:
            if pending.unbuffered_active or pending.has_next or raw._sock is None:
                raw._execute_command(_COM_QUERY, payload)
                return
            raw._result = None  # as _execute_command: the previous result is done with
        if raw._sock is None or len(payload) >= _MAX_QUERY:
            raw._execute_command(_COM_QUERY, payload)
            return
        raw._write_bytes(_QUERY_HEAD(len(payload) + 1, _COM_QUERY) + payload)
        raw._next_seq_id = 1

    def read_answer(self, raw: Any, answer: bytes) -> tuple[Any, Any]:
        read = getattr(raw, "ddm_read_answer", None)  # pymysql_results' connections read it in one go
        got: tuple[Any, Any] | None = read(answer) if read is not None else None
        if got is not None:
            return got
        # Anything else (an error packet, an OK, what the fast reader does not take) as PyMySQL reads it.
        cursor = raw.cursor()
        stream = raw._rfile
        raw._rfile = io.BytesIO(answer)  # PyMySQL's (and the wire reader's) reads come from the bytes
        raw._next_seq_id = 1
        try:
            raw._affected_rows = raw._read_query_result(unbuffered=False)
        finally:
            raw._rfile = stream
        cursor._do_get_result()
        rows = cursor._rows  # a buffered cursor's fetchall, but for the statement it never executed itself
        return cursor.description, [] if rows is None else rows

    can_relay = True

    def relay_socket(self, raw: Any) -> Any | None:
        # PyMySQL's buffered reader holds nothing here: the previous answer was read to its last
        # packet, and a server sends nothing before the next command.
        return None if raw._sock is None or raw.client_flag & _DEPRECATE_EOF else raw._sock

    def relayed(self, raw: Any, status: int) -> None:
        raw.server_status = status  # in_transaction() and the next statement read it

    def send_execute(self, raw: Any, sql: str, count: int, values: bytes) -> None:
        prepared: dict[str, int] | None = getattr(raw, "ddm_prepared", None)
        if prepared is None:
            prepared = raw.ddm_prepared = {}
        stmt_id = prepared.get(sql)
        if stmt_id is None:
            if len(prepared) >= _PREPARED_PER_CONNECTION:  # the oldest go (COM_STMT_CLOSE has no answer)
                for old in list(prepared)[: _PREPARED_PER_CONNECTION // 2]:
                    raw._execute_command(_COM_STMT_CLOSE, prepared.pop(old).to_bytes(4, "little"))
            stmt_id = prepared[sql] = self._prepare(raw, sql, count)
        # One packet, written as PyMySQL's _execute_command would (nothing of its is pending: the
        # connection came idle from the pool), without its per-command bookkeeping.
        payload = _EXECUTE_HEAD + stmt_id.to_bytes(4, "little") + _EXECUTE_ONCE + values
        if len(payload) >= 0xFFFFFF:
            raw._execute_command(_COM_STMT_EXECUTE, payload[1:])
            return
        self.send_packet(raw, len(payload).to_bytes(3, "little") + b"\x00" + payload)

    def _prepare(self, raw: Any, sql: str, count: int) -> int:
        """COM_STMT_PREPARE ``sql`` and read the whole answer (blocking: once per statement and connection)."""
        raw._execute_command(_COM_STMT_PREPARE, sql.encode(raw.encoding))
        first = raw._read_packet()  # an error packet raises PyMySQL's error
        data = first.get_all_data()
        stmt_id = int.from_bytes(data[1:5], "little")
        columns, params = int.from_bytes(data[5:7], "little"), int.from_bytes(data[7:9], "little")
        eof = 0 if raw.client_flag & _DEPRECATE_EOF else 1
        for _ in range(params + (eof if params else 0) + columns + (eof if columns else 0)):
            raw._read_packet()
        if params != count:
            raw._execute_command(_COM_STMT_CLOSE, stmt_id.to_bytes(4, "little"))
            raise ExecutionError(f"the data source prepared {params} parameters, not {count}, for: {sql}")
        return stmt_id

    def relay_error(self, raw: Any, payload: bytes) -> BaseException:
        try:
            self._errors.raise_mysql_exception(payload)
        except Exception as exc:  # noqa: BLE001  # what PyMySQL raises for this packet, to be mapped as usual
            return exc
        return ExecutionError("the data source's error packet could not be read")  # not an error packet

    def socket_timeout(self, endpoint: Endpoint) -> float | None:
        options = endpoint.options
        known = self._socket_timeouts.get(id(options))
        if known is not None and known[0] is options:
            return known[1]
        try:  # the endpoint's URL (formatted and quoted: ~100 interpreted opcodes) only for the error naming it
            seconds = socket_timeout_of(options)
        except ConfigError:
            return socket_timeout_of(options, f"endpoint {endpoint.name!r} ({endpoint.url})")
        if len(self._socket_timeouts) >= 256:  # endpoints of configurations reloaded many times over
            self._socket_timeouts.clear()
        self._socket_timeouts[id(options)] = (options, seconds)
        return seconds

    def begin_commands(self, isolation: str | None, characteristics: str = "") -> list[str]:
        # SET TRANSACTION: for the next transaction only, nothing stays on the pooled connection
        begin = f"START TRANSACTION {characteristics}" if characteristics else "BEGIN"
        return [begin] if isolation is None else [f"SET TRANSACTION ISOLATION LEVEL {isolation}", begin]

    def begin(self, raw: Any, isolation: str | None = None, characteristics: str = "") -> None:
        *before, begin = self.begin_commands(isolation, characteristics)
        for sql in before:
            with raw.cursor() as cursor:
                cursor.execute(sql)
        if characteristics:
            with raw.cursor() as cursor:
                cursor.execute(begin)
        else:
            raw.begin()

    def send_commands(self, raw: Any, commands: list[str]) -> None:
        for sql in commands:
            raw._execute_command(_COM_QUERY, sql.encode(raw.encoding))

    def receive_oks(self, raw: Any, count: int, exact: bool = False) -> None:
        if exact:  # off the socket, packet by packet: PyMySQL's buffered reader would take the answer behind
            read_oks(raw, count, self.relay_error)
            return
        for _ in range(count):
            raw._next_seq_id = 1  # each command's answer numbers its packets from 1
            raw._read_ok_packet()  # an error packet raises PyMySQL's error; the OK's status flags are kept

    def follows_opening(self, raw: Any, sql: str | None) -> bool:
        # Not over TLS (its layer reads whole records ahead of the OKs), nor before an execute whose
        # statement is not prepared on the connection yet (its prepare would read the opening's OK).
        if getattr(raw, "_secure", False) or raw._sock is None:
            return False
        return sql is None or self.prepared_id(raw, sql) is not None

    def prepared_id(self, raw: Any, sql: str) -> int | None:
        prepared: dict[str, int] | None = getattr(raw, "ddm_prepared", None)
        return None if prepared is None else prepared.get(sql)

    def send_packet(self, raw: Any, packet: bytes) -> None:
        raw._write_bytes(packet)
        raw._next_seq_id = 1

    def in_transaction(self, raw: Any) -> bool:
        return bool(raw.server_status & self._in_trans)

    def ping(self, raw: Any) -> None:
        # A checkout waits no longer for a ping than for a new connection: a stopped
        # server must fail the ping within the connect timeout, not the socket timeout.
        saved = raw._read_timeout
        raw._read_timeout = raw.connect_timeout
        try:
            raw.ping(reconnect=False)
        finally:
            raw._read_timeout = saved

    def cancel(self, endpoint: Endpoint, raw: Any) -> None:
        self._killer.cancel(endpoint, raw)  # never waits on the server: docs in mysql_cancel

    def reset_session(self, raw: Any, endpoint: Endpoint) -> bool:
        raw.ddm_prepared = None  # the reset deallocates the statements send_execute prepared
        raw._execute_command(_COM_RESET_CONNECTION, b"")
        raw._read_ok_packet()  # an error packet (a server without the command) raises: discard
        # The reset gave the session the server's defaults; put back what the recipe set.
        raw.set_character_set(CHARSET)
        if endpoint.database:
            raw.select_db(endpoint.database)
        raw.autocommit(True)
        return True

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
        import sqlite3

        self._sqlite3: Any = sqlite3
        self._busy_timeout = busy_timeout

    def connect(self, endpoint: Endpoint, connect_timeout: float) -> Any:
        path = endpoint.database or ":memory:"
        return self._sqlite3.connect(
            path,
            timeout=self._busy_timeout,
            isolation_level=None,  # autocommit; transactions are explicit BEGINs
            check_same_thread=False,  # pooled connections move between threads
        )

    def cursor(self, raw: Any, stream: bool) -> Any:
        # Code written for PyMySQL passes Decimal and datetime params; this cursor
        # converts them (sqlite3's own adapters are process-wide: not ours to change).
        return raw.cursor(SQLiteCursor)

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

    def reset_session(self, raw: Any, endpoint: Endpoint) -> bool:
        # A SQLite session's own state is its temporary schema (a :memory: database
        # lives in its one connection, so dropping the temporary objects beats reconnecting).
        found = raw.execute(
            "SELECT type, name FROM sqlite_temp_master WHERE type IN ('view', 'trigger', 'table') "
            "ORDER BY CASE type WHEN 'table' THEN 1 ELSE 0 END"
        ).fetchall()
        for kind, name in found:
            quoted = '"' + str(name).replace('"', '""') + '"'
            raw.execute(f"DROP {str(kind).upper()} IF EXISTS temp.{quoted}")
        return True


class PostgresDriver(Driver):
    """psycopg 3 for ``postgresql`` endpoints (optional dependency)."""

    can_stream = False

    def __init__(self, dialect: Dialect) -> None:
        super().__init__(dialect)
        require_extra("postgresql", needed_by="a postgresql data source")
        self._psycopg = importlib.import_module("psycopg")

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

    def begin(self, raw: Any, isolation: str | None = None, characteristics: str = "") -> None:
        modes = [] if isolation is None else [f"ISOLATION LEVEL {isolation}"]
        if characteristics:  # READ ONLY / READ WRITE as PostgreSQL writes them; its snapshot is the first statement's
            if SNAPSHOT in characteristics:
                refuse_characteristics(self.dialect.name, characteristics)
            modes.append(characteristics)
        raw.execute(" ".join(["BEGIN", ", ".join(modes)]).strip())

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
        ExecutionError: unknown dialect.
        MissingExtraError: its driver is not installed (the extra that brings it is named).
    """
    driver = _DRIVERS.get(dialect)
    if driver is None:
        backend = find_dialect(dialect)
        factory = _FACTORIES.get(backend.driver_module) if backend is not None else None
        if backend is None or factory is None:
            raise ExecutionError(f"no driver for dialect {dialect!r}", dialect=dialect)
        driver = _DRIVERS[dialect] = factory(backend)
    return driver
