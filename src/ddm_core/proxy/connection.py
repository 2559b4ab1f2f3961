"""mysql-mimic's connection, with what a sharding proxy needs on the wire.

* OK packets carry the statement's affected rows and last insert id (mimic's
  always say 0; PyMySQL's ``rowcount`` / ``lastrowid`` and SQLAlchemy read them).
* Error packets carry the SQLSTATE of their code (1146 → ``42S02``, 1062 →
  ``23000``; :func:`~ddm_core.proxy.mysql_errors.sqlstate_of`).
* Rows of a :class:`~ddm_core.proxy.session.Batched` result are framed a
  batch at a time and the socket drained after each, so a large result is
  never buffered whole in the proxy.
* COM_STMT_PREPARE announces the result columns the executes will return,
  asked of a data source (:mod:`ddm_core.proxy.described`); COM_STMT_EXECUTE
  passes the parameter values to the router as values
  (:mod:`ddm_core.proxy.prepared`), never pasted into the SQL, and sends the
  announced column definitions (flags, lengths and all) when the result's
  types are the announced ones.
* Each command counts as running for the shutdown's grace period.
* A whole result shorter than one batch (:class:`~ddm_core.proxy.session.Rows`,
  every point select) is written in one go, text or binary: its column-count
  and column-definition packets framed once per column list and connection and
  reused, the rows by the compiled row writer (:mod:`ddm_core.proxy.row_writer`),
  the closing OK / EOF packet built here — the same bytes as mimic's
  ``write_text_resultset`` (and as the row-by-row binary write), without its
  per-packet Python (sequence counter, capability flags, charset lookups). The
  row writer also frames the batches of a streamed result and every binary row.
* COM_STMT_RESET resets the statement only; mimic's also reset the session,
  which rolled back an open transaction before every execute of a
  mysql-connector prepared cursor.
* The login (docs/proxy.md#security-model): the client's packets are read
  strictly (:mod:`ddm_core.proxy.client_packets`) within
  ``proxy.connectTimeoutMs``; a refused login gets its error and the
  connection is closed, so nothing runs for a client that has not logged in.
  COM_CHANGE_USER is a login too: refused, the connection is closed (as
  MariaDB does); accepted, the session is reset. COM_RESET_CONNECTION rolls
  back the open transaction and resets the session, as on MySQL.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from functools import partial
from typing import Any, Callable, Sequence

from mysql_mimic import context, packets
from mysql_mimic.charset import CharacterSet
from mysql_mimic.connection import Connection
from mysql_mimic.constants import KillKind
from mysql_mimic.errors import ErrorCode, MysqlError
from mysql_mimic.packets import SSLRequest
from mysql_mimic.stream import ConnectionClosed
from mysql_mimic.prepared import REGEX_PARAM, PreparedStatement
from mysql_mimic.results import ResultColumn, ResultSet, ensure_result_set
from mysql_mimic.types import Capabilities, ServerStatus, str_fixed, uint_1, uint_2, uint_4, uint_len
from mysql_mimic.utils import aiterate

from ddm_core.errors import DdmError
from ddm_core.proxy.admission import Admission, Refusal
from ddm_core.proxy.auth import exchange
from ddm_core.proxy.binary_rows import conversions
from ddm_core.proxy.client_packets import MalformedPacket, change_user, field_list, handshake_response
from ddm_core.proxy.columns import AS_SENT, Column, in_charset, in_results_charset, relayed_columns, wire_columns
from ddm_core.proxy.mysql_errors import ACCESS_DENIED, INSECURE_TRANSPORT, UNKNOWN_ERROR, error_info, sqlstate_of
from ddm_core.proxy.prepared import read_execute
from ddm_core.proxy.runtime import ProxyRuntime
from ddm_core.proxy.relay import CommandGate, HotFront, ResultRelay
from ddm_core.proxy.row_writer import RowPlan, binary_plan, text_plan, write_binary, write_text
from ddm_core.proxy.session import FRONT_TERMS, RELAYED, Batched, Outcome, Rows, flatten
from ddm_core.proxy.stream import PACKET_TOO_LARGE, BoundedReader, PacketTooLarge
from ddm_core.proxy.tls import start_tls

__all__ = ["ProxyConnection", "ok_packet"]

log = logging.getLogger("ddm_core.proxy")

_NO_ROWS = ResultSet(rows=[], columns=[])
_HEADER = struct.Struct("<I")
_STATUS_WARNINGS = struct.Struct("<HH")
#: Framed result headers kept per connection (one per column list seen); cleared when full.
_HEADERS_LIMIT = 256
INSECURE_TRANSPORT_MESSAGE = "Connections using insecure transport are prohibited: this ddm proxy requires TLS (proxy.tls.required)"
#: Prepared statements one connection may hold (MySQL's max_prepared_stmt_count is per server: 16 382).
MAX_PREPARED_STATEMENTS = 1_024
PREPARED_STATEMENTS_LIMIT = 1461  # ER_MAX_PREPARED_STMT_COUNT_REACHED


class _Refused(BaseException):
    """The client was answered with an error during a login: the connection ends.

    A BaseException, as CancelledError is: mimic's command loop answers every Exception a
    command raises with an error packet and reads the next command, and this one must end it.
    """


class ProxyConnection(Connection):  # type: ignore[misc]  # mimic ships no types
    """One client connection (protocol state); its :class:`~ddm_core.proxy.session.ProxySession` holds the rest."""

    _kill: KillKind | None  # mimic's: what a kill asked for

    def __init__(self, *args: Any, runtime: ProxyRuntime, admission: Admission, host: str, tls_required: bool = False,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.runtime = runtime
        self.admission = admission
        self.host = host
        self.tls_required = tls_required
        self.logged_in_as: str | None = None  # counted by the admission under this name
        self._too_long: set[int] = set()  # prepared statements whose long data passed proxy.maxAllowedPacket
        # A session starts in autocommit, as on MySQL; the handshake says so, and PyMySQL
        # (autocommit off by default) then sends SET AUTOCOMMIT = 0.
        self.status_flags = ServerStatus.SERVER_STATUS_AUTOCOMMIT
        self._outcome: Outcome | None = None
        self._batched: Batched | None = None
        self._param_types: dict[int, bytes] = {}  # prepared statement id -> its parameter types
        self._announced: dict[int, list[Column]] = {}  # prepared statement id -> the columns its prepare announced
        # (columns, charset, seq, binary) -> (columns, framed column count + definitions, the rows' plan, next seq)
        self._headers: dict[Any, tuple[list[Column], bytes, RowPlan, int]] = {}
        # (backend definitions, charset, aggregates, announced) -> (announced, client header payloads)
        self._relay_headers: dict[Any, tuple[list[Column] | None, list[bytes]]] = {}
        self._relay_conversions: dict[Any, tuple[list[Column], bytes | None]] = {}
        self._protocol_41: bool | None = None  # the client's capabilities, read once (they do not change)
        self._query_attributes: bool | None = None
        self._gate: CommandGate | None = None  # reads commands after the login (proxy/hotpath.py)
        self.gate_transport: Any = None  # the client's transport, once the gate reads it
        self.front: HotFront | None = None  # the gate's front: the commonest statement in one call (_fast/hotfront)
        self._known_charsets: tuple[Any, int, tuple[CharacterSet, CharacterSet]] = (None, 0, _NO_CHARSETS)
        self.client_eof = True
        self._deprecate_eof = False
        self.ended_as: Refusal | None = None  # what the client hears when the proxy ends its session (else 1927)

    @property
    def server_charset(self) -> CharacterSet:
        known, variables = self._known_charsets, self.session.variables
        if known[0] is variables and known[1] == variables.changes:  # read every statement: no call
            return known[2][1]
        return self._charsets()[1]

    @property
    def client_charset(self) -> CharacterSet:
        known, variables = self._known_charsets, self.session.variables
        if known[0] is variables and known[1] == variables.changes:
            return known[2][0]
        return self._charsets()[0]

    def _charsets(self) -> tuple[CharacterSet, CharacterSet]:
        """(character_set_client, character_set_results), read again only once the session's variables
        changed (proxy/variables.py CountedVariables: a SET, a reset) or were replaced; kept only for
        variables that count their changes."""
        variables = self.session.variables
        known = self._known_charsets
        if known[0] is variables and known[1] == variables.changes:
            return known[2]
        pair = (_charset(variables, "character_set_client"), _charset(variables, "character_set_results"))
        changes = getattr(variables, "changes", None)
        if changes is not None:  # mimic's own SessionVariables (a session other than ProxySession's) count nothing
            self._known_charsets = (variables, changes, pair)
        return pair

    def _set_charsets(self, charset: CharacterSet) -> None:
        """The handshake's (or a change of user's) character set, as MariaDB takes it: the client's, the
        connection's and the results' (docs/proxy.md#character-sets)."""
        for name in ("character_set_client", "character_set_connection", "character_set_results"):
            self.session.variables.set(name, charset.name)

    @property
    def results_as_sent(self) -> bool:
        """The client reads results in the data sources' UTF-8 as they are sent (a relay may pass them on);
        ``False``: its ``character_set_results`` is another, and results are decoded and encoded in it."""
        return self.server_charset in AS_SENT

    # -- login -----------------------------------------------------------------------------------

    async def _start(self) -> None:
        # mimic's, with the login bounded and a refused one ending the connection.
        context.connection_id.set(self.connection_id)
        delay = self.admission.login_delay(self.host)
        if delay:  # this host failed to log in often in a row: it waits before its greeting
            await asyncio.sleep(delay)
        if not await self._log_in():
            return
        try:
            await self.session.init(self)
        except MysqlError as exc:  # e.g. the database the client named does not exist
            await self.stream.write(self.error(msg=exc.msg, code=exc.code))
            return
        self._install_gate()
        reader = self.stream.reader
        if isinstance(reader, BoundedReader):  # its waits for a command mark the session active (proxy/idle.py)
            reader.watch(self.stream.seq, self._gate, partial(self.runtime.quiet, self.connection_id))
        try:
            await self.command_phase()
        except asyncio.CancelledError:
            if self._kill is not KillKind.CONNECTION:
                raise
            ended = self.ended_as or Refusal(ErrorCode.SESSION_WAS_KILLED, "Session was killed")
            await self.stream.write(self.error(msg=ended.message, code=ended.code))
            self._kill = None
        finally:
            if self.front is not None:
                self.runtime.fronted += self.front.taken
            await self.session.close()

    async def _log_in(self) -> bool:
        """The handshake and login, within ``proxy.connectTimeoutMs``; ``False``: refused (answered) or failed."""
        try:
            async with asyncio.timeout(self.admission.connect_timeout):
                await self.connection_phase()
            return True
        except _Refused:
            return False
        except TimeoutError:
            reason = "it did not log in within proxy.connectTimeoutMs"
        except PacketTooLarge as exc:
            await self._answer_and_end(Refusal(PACKET_TOO_LARGE, str(exc)))
            reason = str(exc)
        except (ConnectionClosed, ConnectionError, asyncio.IncompleteReadError) as exc:
            reason = f"the client went away ({type(exc).__name__})"
        except Exception as exc:  # noqa: BLE001  # anything else read from the client is a bad handshake
            await self._answer_and_end(Refusal(ErrorCode.HANDSHAKE_ERROR, "Bad handshake"))
            reason = str(exc) if isinstance(exc, (MalformedPacket, MysqlError)) else f"{type(exc).__name__}: {exc}"
        self.admission.handshake_failed(self.host)
        log.info("ddm proxy: connection %s from %s: handshake failed: %s", self.connection_id, self.host, reason)
        return False

    async def _answer_and_end(self, refusal: Refusal) -> None:
        """Write ``refusal``'s error packet if the client is still there (the connection ends after)."""
        try:
            await self.stream.write(self.error(msg=refusal.message, code=refusal.code))
        except (ConnectionError, RuntimeError):
            pass

    async def connection_phase(self) -> None:
        # mimic's, with the client's packets read strictly (client_packets.py), and the switch to TLS
        # keeping a ClientHello sent right behind the SSLRequest (proxy/tls.py).
        plugin = self.identity_provider.get_default_plugin()
        auth_data, auth_state = await plugin.start()
        self.handshake_auth_data = auth_data
        self.handshake_auth_plugin = plugin.name
        await self.stream.write(packets.make_handshake_v10(
            capabilities=self.server_capabilities, server_charset=self.server_charset,
            server_version=str(self.session.variables.get("version")), connection_id=self.connection_id,
            auth_data=auth_data, status_flags=self.status_flags, auth_plugin_name=plugin.name,
        ))  # fmt: skip
        response = handshake_response(self.server_capabilities, await self.stream.read())
        if isinstance(response, SSLRequest):
            if self.ssl is None:
                raise MalformedPacket("the client asked for TLS, which this proxy does not offer")
            await start_tls(self.stream, self.ssl)
            response = handshake_response(self.server_capabilities, await self.stream.read())
            if isinstance(response, SSLRequest):
                raise MalformedPacket("the client asked for TLS twice")
        self.capabilities = response.capabilities
        self.max_packet_size = response.max_packet_size
        self._set_charsets(response.client_charset)
        self.session.database = response.database
        self.client_plugin_name = response.client_plugin
        self.client_connect_attrs = response.connect_attrs
        self.zstd_compression_level = response.zstd_compression_level
        self.session.variables.set("external_user", response.username, force=True)
        await self.authenticate(
            auth_state=auth_state, server_plugin=plugin, username=response.username,
            client_plugin_name=response.client_plugin, auth_response=response.auth_response,
            connect_attrs=response.connect_attrs,
        )  # fmt: skip
        self.stream.reset_seq()

    async def authenticate(self, username: str, *args: Any, **kwargs: Any) -> None:
        """Log ``username`` in (the handshake's or a COM_CHANGE_USER's): OK, or its error and :class:`_Refused`."""
        # proxy.tls.required: a client that did not switch to TLS is refused before its credentials are looked at.
        if self.tls_required and self.stream.writer.get_extra_info("ssl_object") is None:
            await self.stream.write(self.error(msg=INSECURE_TRANSPORT_MESSAGE, code=INSECURE_TRANSPORT))
            raise _Refused()
        previous = self.logged_in_as
        self.session.username = None  # nothing runs as anyone until this login is decided
        name = await exchange(self, username, *args, **kwargs)
        if name is None:
            self.admission.login_failed(self.host)
            log.info("ddm proxy: connection %s from %s: access denied for user %r", self.connection_id, self.host,
                     username)  # fmt: skip
            await self.stream.write(self.error(msg=f"Access denied for user '{username}'@'{self.host}' "
                                                   "(using password: YES)", code=ACCESS_DENIED))  # fmt: skip
            raise _Refused()
        refusal = None
        if self.session.database:  # the one the client named must be one this proxy serves
            try:
                await self.session.use(self.session.database)
            except MysqlError as exc:  # answered in place of the OK, as MySQL does
                refusal = Refusal(exc.code, exc.msg)
        if refusal is None:
            refusal = self.admission.logged_in(self.host, name, previous)
        if refusal is not None:
            await self.stream.write(self.error(msg=refusal.message, code=refusal.code))
            raise _Refused()
        self.logged_in_as = name
        self.session.username = name
        await self.stream.write(self.ok())

    # -- commands that change the session ---------------------------------------------------------

    async def command_phase(self) -> None:
        try:
            await super().command_phase()
        except _Refused:  # a COM_CHANGE_USER that failed: answered, and the connection ends
            return
        except PacketTooLarge as exc:  # its payload was not read: the stream is out of step, so it ends
            await self._answer_and_end(Refusal(PACKET_TOO_LARGE, str(exc)))

    async def handle_change_user(self, data: bytes) -> None:
        try:
            request = change_user(self.capabilities, self.client_charset, data)
        except MalformedPacket as exc:
            await self.stream.write(self.error(msg=str(exc), code=ErrorCode.MALFORMED_PACKET))
            raise _Refused() from exc
        await self.session.reset()  # the old user's transaction never carries over
        self._forget_statements()
        self.session.database = None
        if request.database:  # a database this proxy serves, or the change of user fails (as a login would)
            try:
                await self.session.use(request.database)
            except MysqlError as exc:
                await self.stream.write(self.error(msg=exc.msg, code=exc.code))
                raise _Refused() from exc
        self.session.variables.set("external_user", request.username, force=True)
        if request.client_charset:
            self._set_charsets(request.client_charset)
        if request.connect_attrs:
            self.client_connect_attrs = request.connect_attrs
        await self.authenticate(request.username, auth_response=request.auth_response,
                                client_plugin_name=request.client_plugin, connect_attrs=request.connect_attrs)  # fmt: skip

    async def handle_reset_connection(self, data: bytes) -> None:
        # mimic's answers OK and keeps everything: an open transaction then went on, and a COMMIT
        # after the reset committed it. MySQL rolls it back and resets the session.
        await self.session.reset()
        self._forget_statements()
        await self.stream.write(self.ok())

    def _forget_statements(self) -> None:
        """Deallocate the connection's prepared statements (as a reset or change of user does on MySQL)."""
        self.prepared_stmts.clear()
        self._param_types.clear()
        self._announced.clear()
        self._too_long.clear()

    async def handle_field_list(self, data: bytes) -> None:
        try:
            field_list(self.client_charset, data)  # mimic's reader loops for ever on a table name without NUL
        except MalformedPacket as exc:
            raise MysqlError(str(exc), ErrorCode.MALFORMED_PACKET) from exc
        await super().handle_field_list(data)

    async def handle_stmt_send_long_data(self, data: bytes) -> None:
        # Never answered, as on MariaDB, not even for an unknown statement or a short packet: an answer
        # would be read as the next command's. Bounded as one packet is: the long data of one
        # statement's parameters together.
        stmt = self.prepared_stmts.get(int.from_bytes(data[:4], "little")) if len(data) >= 6 else None
        if stmt is None:
            log.debug("COM_STMT_SEND_LONG_DATA for no prepared statement of this connection: ignored")
            return
        await super().handle_stmt_send_long_data(data)
        held = sum(len(b) for b in (stmt.param_buffers or {}).values())
        if held > self.stream.reader.limit:
            stmt.param_buffers = None
            self._too_long.add(stmt.stmt_id)

    async def handle_query(self, data: bytes) -> None:
        # mimic's, with a one-go write of a whole short result (_write_rows)
        with self.runtime.statement():
            com_query = packets.parse_com_query(capabilities=self.capabilities, client_charset=self.client_charset,
                                                data=data)  # fmt: skip
            result = await self.session.handle_query(com_query.sql, com_query.query_attrs)
            await self.write_queried(result)

    async def write_queried(self, result: Any) -> None:
        """A COM_QUERY's answer ``result`` (the session's) written to the client."""
        if result is RELAYED:  # already written, packet by packet (docs/proxy.md#relayed-results)
            self._outcome = self._batched = None
            return
        if isinstance(result, Rows) and result.columns and self._fast_frames():
            self._outcome = self._batched = None
            self._write_rows(result.columns, result.rows)
            await self.stream.drain()
            return
        result_set = await self._result_set(result)
        if not result_set:
            await self.stream.write(self.ok())
            return
        await self.write_text_resultset(result_set)

    def _fast_frames(self) -> bool:
        """The client speaks protocol 4.1 (every client since MySQL 4.1): _write_rows builds its packets itself."""
        if self._protocol_41 is None:
            self._protocol_41 = Capabilities.CLIENT_PROTOCOL_41 in self.capabilities
            self._deprecate_eof = bool(self.deprecate_eof())
        return self._protocol_41

    def _write_rows(self, columns: list[Column], rows: list[tuple[Any, ...]]) -> None:
        """Buffer a whole text result set: the bytes mimic's ``write_text_resultset`` writes."""
        stream = self.stream
        plan, seq = self._start_result(columns, self.server_charset, binary=False)
        seq = write_text(stream._buffer, seq, rows, plan)
        stream.seq.value = _frame(stream._buffer, seq, self._end_of_result(len(rows)))

    def _start_result(self, columns: list[Column], charset: Any, binary: bool) -> tuple[RowPlan, int]:
        """Buffer a result's header (cached), and the EOF after it unless deprecated: the rows' plan, next seq."""
        stream = self.stream
        # By the list's identity: a statement shape's columns are one list (columns.described_columns,
        # a prepare's announcement), kept alive by the entry itself, so its id is not reused meanwhile.
        key = (id(columns), charset, stream.seq.value, binary)
        known = self._headers.get(key)
        if known is None or known[0] is not columns:
            known = (columns, *self._frame_header(columns, charset, binary))
            if len(self._headers) >= _HEADERS_LIMIT:
                self._headers.clear()
            self._headers[key] = known
        _, header, plan, seq = known
        buffer = stream._buffer
        buffer += header
        if not self._deprecate_eof:  # the EOF after the definitions carries the status: framed per statement
            seq = _frame(buffer, seq, b"\xfe" + _STATUS_WARNINGS.pack(0, int(self.status_flags)))
        return plan, seq

    def _end_of_result(self, affected_rows: int) -> bytes:
        """mimic's ``ok_or_eof(affected_rows=...)`` for a protocol 4.1 client."""
        status = int(self.status_flags)
        if self._deprecate_eof:  # the OK packet that ends a result: 0xFE, affected rows, last insert id 0
            return ok_packet(affected_rows, 0, status, 0, b"\xfe")
        return b"\xfe" + _STATUS_WARNINGS.pack(0, status)  # EOF: warnings, then status

    def _frame_header(self, columns: list[Column], charset: Any, binary: bool) -> tuple[bytes, RowPlan, int]:
        """The framed column count and definitions, the rows' plan, next seq."""
        columns = in_results_charset(columns, charset)
        wire, payloads = self._header_payloads(columns, charset, binary)
        framed = bytearray()
        seq = self.stream.seq.value
        for payload in payloads:
            seq = _frame(framed, seq, payload)
        return bytes(framed), binary_plan(columns) if binary else text_plan(wire, columns), seq

    def _header_payloads(self, columns: list[Column], charset: Any, binary: bool) -> tuple[list[Any], list[bytes]]:
        """mimic's columns and the column count and definition payloads a result starts with.

        Text results: mimic's definitions (name, type, character set); binary ones (prepared
        statements): the columns' full definitions, as ``_write_binary_resultset`` writes them.
        """
        wire = wire_columns(columns)
        payloads: list[bytes]
        if binary:
            payloads = [uint_len(len(columns)), *(c.packet(charset) for c in columns)]
        else:
            payloads = [packets.make_column_count(capabilities=self.capabilities, column_count=len(wire))]
            payloads.extend(
                packets.make_column_definition_41(
                    server_charset=charset, name=c.name, column_type=c.type, character_set=c.character_set
                )
                for c in wire
            )
        return wire, payloads

    def relay_for(self, backend_eof: bool, binary: bool, seq: int | None = None) -> ResultRelay | None:
        """A relay for a result to this client, text or ``binary`` (docs/proxy.md#relayed-results), its first
        packet at ``seq`` (default: the stream's next); ``None``: it must be decoded (a client older than
        protocol 4.1, a client reading results in a character set other than UTF-8)."""
        if not self._fast_frames() or not self.results_as_sent:
            return None
        first = self.stream.seq.value if seq is None else seq
        return ResultRelay(first, not self._deprecate_eof, backend_eof, not binary)

    # -- the hot path (proxy/hotpath.py) ---------------------------------------------------------------

    def _install_gate(self) -> None:
        """After the login: the gate reads this client's commands in front of mimic's stream
        (docs/proxy.md#the-hot-path). Not over TLS (the TLS transport keeps the stream's protocol)."""
        transport = self.stream.writer.transport
        reader = self.stream.reader
        if not (self.runtime.inline and self.runtime.relay) or not isinstance(reader, BoundedReader):
            return
        if transport.get_extra_info("sslcontext") is not None or not self._fast_frames():
            return
        self.gate_transport = transport  # the client's, for the hot path (the stream writer's, read once)
        self.client_eof = not self._deprecate_eof  # the client reads EOF packets (a relay's client_eof)
        self._query_attributes = Capabilities.CLIENT_QUERY_ATTRIBUTES in self.capabilities
        front = HotFront(self.session, self, self.runtime, FRONT_TERMS)  # reads the three above once
        gate = CommandGate(transport.get_protocol(), reader.inner, reader.limit, front.hot)
        front.done_with = gate.done
        self.front = front
        gate.transport = transport
        transport.set_protocol(gate)
        self._gate = gate

    @property
    def query_attributes(self) -> bool:
        """The client sends query attributes before each COM_QUERY's text (read once: the capabilities are
        the handshake's; ``in`` on an enum flag is Python code)."""
        known = self._query_attributes
        if known is None:
            known = self._query_attributes = Capabilities.CLIENT_QUERY_ATTRIBUTES in self.capabilities
        return known

    def hot_control(self, payload: bytes) -> str | None:
        """The text of a COM_STMT_EXECUTE without parameters, not into a cursor (the hot path answers a ``BEGIN`` or
        ``COMMIT`` of it itself: ``ProxySession._control_of``); ``None``: not one (mimic's path reads it)."""
        stmt = self.prepared_stmts.get(int.from_bytes(payload[1:5], "little"))
        if stmt is None or stmt.num_params or len(payload) < 10 or payload[5] or self._query_attributes:
            return None
        return str(stmt.sql)

    def reset_statement(self, payload: bytes) -> bool:
        """A COM_STMT_RESET's work as :meth:`handle_stmt_reset` does it — the statement's long data and cursor
        dropped — for the gate, which answers it (mysql-connector sends one before every execute of a prepared
        cursor); ``False``: nothing done, mimic's path answers it (an unknown statement, a malformed packet)."""
        stmt = self.prepared_stmts.get(int.from_bytes(payload[1:5], "little")) if len(payload) == 5 else None
        if stmt is None:
            return False
        stmt.param_buffers = None
        stmt.cursor = None
        return True

    def write_hot(self, payload: bytes, seq: int) -> None:
        """A hot statement's closing packet (an OK, an error) at sequence id ``seq``."""
        framed = bytearray()
        _frame(framed, seq, payload)
        self.stream.writer.transport.write(bytes(framed))

    def ok_of(self, outcome: Outcome) -> bytes:
        """The OK packet reporting ``outcome``."""
        self._outcome = outcome
        return self.ok()

    def gate_done(self) -> None:
        if self._gate is not None:
            self._gate.done()

    def gate_handback(self, payload: bytes) -> None:
        """The hot command ``payload`` goes to mimic's path after all (nothing of an answer was written)."""
        if self._gate is not None:
            self._gate.handback(payload)

    def relay_header(self, aggregates: Any, announced: list[Column] | None
                     ) -> Callable[[list[bytes]], tuple[list[bytes], int]]:  # fmt: skip
        """For a relayed result: the data source's column definitions → the client's, as the decoded path
        announces the same columns (kept per definitions), with the session's status flags.
        ``announced``: a prepared statement's columns (a binary result), ``None`` for a text result."""

        def header_for(definitions: list[bytes]) -> tuple[list[bytes], int]:
            charset = self.server_charset
            key = (tuple(definitions), charset, aggregates, None if announced is None else id(announced))
            known = self._relay_headers.get(key)
            if known is None or known[0] is not announced:
                columns = _relay_columns(definitions, aggregates, announced)
                known = (announced, self._header_payloads(columns, charset, binary=announced is not None)[1])
                if len(self._relay_headers) >= _HEADERS_LIMIT:
                    self._relay_headers.clear()
                self._relay_headers[key] = known
            return known[1], int(self.status_flags)

        return header_for

    def relay_conversions(self, aggregates: Any, announced: list[Column]) -> Callable[[list[bytes]], bytes | None]:
        """For a multi-unit read relayed to a prepared statement's client: the data source's column definitions
        → how each column's text rows become the binary rows the decoded path writes for the columns
        ``relay_header`` announces (proxy/binary_rows.py), kept per definitions; ``None``: decode them."""

        def conversions_for(definitions: list[bytes]) -> bytes | None:
            key = (tuple(definitions), aggregates, id(announced))
            known = self._relay_conversions.get(key)
            if known is None or known[0] is not announced:
                known = (announced, conversions(definitions, _relay_columns(definitions, aggregates, announced)))
                if len(self._relay_conversions) >= _HEADERS_LIMIT:
                    self._relay_conversions.clear()
                self._relay_conversions[key] = known
            return known[1]

        return conversions_for

    async def handle_stmt_execute(self, data: bytes) -> None:
        # Not mimic's: it pastes parameter values into the SQL unescaped (proxy/prepared.py).
        with self.runtime.statement():
            execute = read_execute(data, self.capabilities, self.client_charset, self.get_stmt, self._param_types)
            execute.stmt.param_buffers = None
            if execute.stmt.stmt_id in self._too_long:
                self._too_long.discard(execute.stmt.stmt_id)
                raise MysqlError("Parameter of prepared statement which is set through mysql_send_long_data() is "
                                 "longer than 'max_allowed_packet' bytes (proxy.maxAllowedPacket)",
                                 code=PACKET_TOO_LARGE)  # fmt: skip
            announced = None if execute.use_cursor else self._announced.get(execute.stmt.stmt_id)
            result = await self.session.handle_prepared(execute.stmt.sql, execute.params, announced)
            await self.write_executed(result, self._announced.get(execute.stmt.stmt_id), execute.stmt,
                                      execute.use_cursor)  # fmt: skip

    async def write_executed(self, result: Any, announced: list[Column] | None, stmt: Any, use_cursor: bool) -> None:
        """A COM_STMT_EXECUTE's answer ``result`` (the session's) written to the client: ``announced``, the columns
        its prepare announced; ``stmt``, the statement a cursor is kept on (``use_cursor``)."""
        if result is RELAYED:  # already written, packet by packet (docs/proxy.md#relayed-results)
            self._outcome = None
            return
        if isinstance(result, Outcome):
            self._outcome = result
            await self.stream.write(self.ok())
            return
        rows: Any
        if isinstance(result, Batched):
            rows, columns = flatten(result.batches), result.columns
        elif isinstance(result, Rows):
            rows, columns = result.rows, result.columns
        else:
            result_set = await ensure_result_set(result)
            rows, columns = result_set.rows, [Column.of(c) for c in result_set.columns]
        if not columns:
            await self.stream.write(self.ok())
            return
        await self._write_binary_resultset(_as_announced(announced, columns), rows, stmt, use_cursor)

    async def _write_binary_resultset(self, columns: list[Column], rows: Any, stmt: Any, use_cursor: bool) -> None:
        # The binary-protocol result set, as mimic writes it, with the columns' full definitions.
        stream = self.stream
        if not use_cursor and isinstance(rows, list) and self._fast_frames():  # a whole short result: in one go
            plan, seq = self._start_result(columns, self.server_charset, binary=True)
            seq = write_binary(stream._buffer, seq, rows, plan)
            stream.seq.value = _frame(stream._buffer, seq, self._end_of_result(0))
            await stream.drain()
            return
        columns = in_results_charset(columns, self.server_charset)
        stream.write_many([uint_len(len(columns)), *(c.packet(self.server_charset) for c in columns)])
        if use_cursor:  # COM_STMT_FETCH frames the rows: mimic's row payloads, made as they are fetched
            wire = wire_columns(columns)

            async def binary_rows() -> Any:
                async for row in aiterate(rows):
                    yield packets.make_binary_resultrow(row, wire)

            stmt.cursor = binary_rows()
            await stream.write(self.ok_or_eof(flags=ServerStatus.SERVER_STATUS_CURSOR_EXISTS))
            return
        if not self.deprecate_eof():
            await stream.write(self.eof())
        plan = binary_plan(columns)
        async for row in aiterate(rows):  # a streamed result: sent whenever a buffer's worth is framed
            stream.seq.value = write_binary(stream._buffer, stream.seq.value, (row,), plan)
            if len(stream._buffer) >= stream._buffer_size:
                await stream.drain()
        await stream.write(self.ok_or_eof())

    async def handle_stmt_prepare(self, data: bytes) -> None:
        # mimic's announces no result columns, and libmariadb clients (sysbench) then take a SELECT for a
        # statement without rows, never read its result, and fail the next statement with 2014 (commands
        # out of sync). Here the columns are asked of a data source (proxy/described.py); a statement
        # whose columns cannot be known gets an error packet (MysqlError) and no statement id.
        if len(self.prepared_stmts) >= MAX_PREPARED_STATEMENTS:
            raise MysqlError(f"Can't create more than max_prepared_stmt_count statements (current value: "
                             f"{MAX_PREPARED_STATEMENTS}; on one connection of this proxy)",
                             code=PREPARED_STATEMENTS_LIMIT)  # fmt: skip
        sql = self.client_charset.decode(data)
        count = len(REGEX_PARAM.findall(sql))
        with self.runtime.statement():
            columns = await self.session.handle_prepare(sql, count)
        stmt = PreparedStatement(stmt_id=next(self.prepared_stmt_seq), sql=sql, num_params=count)
        self.prepared_stmts[stmt.stmt_id] = stmt
        self._announced[stmt.stmt_id] = columns
        out = [b"".join([uint_1(0), uint_4(stmt.stmt_id), uint_2(len(columns)), uint_2(count), uint_1(0), uint_2(0)])]
        eof = [] if self.deprecate_eof() else [self.eof()]  # libmysqlclient asks for no EOF, libmariadb reads one
        if count:
            out.extend(packets.make_column_definition_41(server_charset=self.server_charset, name="?")
                       for _ in range(count))  # fmt: skip
            out.extend(eof)
        if columns:
            out.extend(c.packet(self.server_charset) for c in in_results_charset(columns, self.server_charset))
            out.extend(eof)
        self.stream.write_many(out)
        await self.stream.drain()

    async def handle_stmt_reset(self, data: bytes) -> None:
        # mimic's also calls session.reset(), which here rolls back the open transaction: but
        # COM_STMT_RESET resets one prepared statement (its long data, its cursor), nothing of the
        # session's. mysql-connector sends it before every execute of a prepared cursor.
        stmt = self.get_stmt(packets.parse_com_stmt_reset(data).stmt_id)
        stmt.param_buffers = None
        stmt.cursor = None
        await self.stream.write(self.ok())

    async def handle_stmt_close(self, data: bytes) -> None:
        await super().handle_stmt_close(data)
        stmt_id = int.from_bytes(data[:4], "little")
        self._param_types.pop(stmt_id, None)
        self._announced.pop(stmt_id, None)
        self._too_long.discard(stmt_id)

    async def query(self, sql: str, query_attrs: dict[str, str]) -> ResultSet:
        return await self._result_set(await self.session.handle_query(sql, query_attrs))

    async def _result_set(self, result: Any) -> ResultSet:
        if isinstance(result, Outcome):
            self._outcome = result  # the next ok() reports it
            return _NO_ROWS
        self._outcome = None
        if isinstance(result, Batched):
            self._batched = result  # write_text_resultset writes it batch by batch
            return ResultSet(rows=flatten(result.batches), columns=self._wire_columns(result.columns))
        self._batched = None
        if isinstance(result, Rows):
            return ResultSet(rows=result.rows, columns=self._wire_columns(result.columns))
        return await ensure_result_set(result)

    def _wire_columns(self, columns: list[Column]) -> list[ResultColumn]:
        return wire_columns(in_results_charset(columns, self.server_charset))

    def ok(self, **kwargs: Any) -> bytes:
        outcome, self._outcome = self._outcome, None
        if outcome is not None:
            kwargs.setdefault("affected_rows", outcome.affected_rows)
            kwargs.setdefault("last_insert_id", outcome.last_insert_id)
        if kwargs.keys() <= _OK_FIELDS and self._fast_frames():
            # mimic's make_ok for a protocol 4.1 client, without its flag arithmetic (~4 µs an OK, every BEGIN,
            # COMMIT and COM_STMT_RESET of the hot path)
            return ok_packet(kwargs.get("affected_rows", 0), kwargs.get("last_insert_id", 0), int(self.status_flags),
                             kwargs.get("warnings", 0))  # fmt: skip
        return bytes(super().ok(**kwargs))

    def error(self, msg: Any = "", code: int = UNKNOWN_ERROR, **_: Any) -> bytes:
        parts = [uint_1(0xFF), uint_2(int(code))]
        if Capabilities.CLIENT_PROTOCOL_41 in self.capabilities:
            parts.append(str_fixed(1, b"#"))
            parts.append(str_fixed(5, sqlstate_of(int(code)).encode()))
        parts.append(in_charset(self.server_charset, str(msg)))
        return b"".join(parts)

    async def write_text_resultset(self, result_set: ResultSet) -> None:
        batched, self._batched = self._batched, None
        if batched is None:
            await super().write_text_resultset(result_set)
            return
        header = [packets.make_column_count(capabilities=self.capabilities, column_count=len(result_set.columns))]
        header.extend(
            packets.make_column_definition_41(
                server_charset=self.server_charset, name=c.name, column_type=c.type, character_set=c.character_set
            )
            for c in result_set.columns
        )
        if not self.deprecate_eof():
            header.append(self.eof())
        self.stream.write_many(header)
        plan = text_plan(result_set.columns)
        stream = self.stream
        sent = 0
        try:
            async for batch in batched.batches:
                stream.seq.value = write_text(stream._buffer, stream.seq.value, batch, plan)
                sent += len(batch)
                await self.stream.drain()  # one batch in flight: memory stays bounded
        except DdmError as exc:  # a shard failed mid-result: the client gets an error packet, not a cut stream
            info = error_info(exc)
            raise MysqlError(info.message, code=info.code) from exc
        finally:
            # Now, not at garbage collection: a client gone mid-result returns the units' connections.
            await batched.batches.aclose()
        await self.stream.write(self.ok_or_eof(affected_rows=sent), drain=False)
        await self.stream.drain()


def _charset(variables: Any, name: str) -> CharacterSet:
    """mimic's ``CharacterSet[str(variables.get(name))]``, without its Python on every statement.

    mimic 3.0.5's variables keep the values set in ``_values`` (else the schema's default), and
    ``CharacterSet[...]`` is an enum lookup in Python: both read twice a statement.
    """
    value = variables._values.get(name)
    if value is None:  # not set in the session: the schema's default (what get_variable returns), without its calls
        value = variables.global_variables.schema[name][1]
    charset = _CHARSETS.get(value)
    if charset is None:
        charset = CharacterSet[str(value)]
        _CHARSETS[value] = charset
    return charset


_CHARSETS: dict[Any, CharacterSet] = {}
_NO_CHARSETS = (CharacterSet.utf8mb4, CharacterSet.utf8mb4)  # never returned: no variables are None's


#: What :func:`ok_packet` writes of an OK; an OK with anything else (``eof``, ``flags``) is mimic's.
_OK_FIELDS = frozenset({"affected_rows", "last_insert_id", "warnings"})


def ok_packet(affected_rows: int, last_insert_id: int, status: int, warnings: int, head: bytes = b"\x00") -> bytes:
    """The OK packet's payload for a protocol 4.1 client, as mimic's ``make_ok`` writes it; ``head`` 0xFE for the OK
    that ends a result under CLIENT_DEPRECATE_EOF."""
    return b"".join([head, uint_len(affected_rows), uint_len(last_insert_id), _STATUS_WARNINGS.pack(status, warnings)])


def _frame(buffer: bytearray, seq: int, payload: bytes) -> int:
    """Append one packet (``payload`` shorter than 16 MiB) with sequence number ``seq``; the next one's."""
    buffer += _HEADER.pack(len(payload) | (seq << 24))
    buffer += payload
    return (seq + 1) % 256


def _relay_columns(definitions: list[bytes], aggregates: Any, announced: list[Column] | None) -> list[Column]:
    """The columns a relayed result announces for the data source's ``definitions``, as the decoded path's."""
    columns = relayed_columns(definitions, aggregates)
    return columns if announced is None else _as_announced(announced, columns)


def _as_announced(announced: Sequence[Column] | None, sent: list[Column]) -> list[Column]:
    """The prepare's column where the result's has its type (it also has the flags, lengths, tables), else the
    result's under the prepare's name (the statement's text: ``big + ?``, where the data source ran ``big + 0``).

    A result may differ from the announcement: a table altered behind the proxy's back, or an
    expression whose type MariaDB fixes only once it sees the values (``SELECT ? + 1``).
    """
    if announced is None or len(announced) != len(sent):
        return sent
    if all(_announces(a, b) for a, b in zip(announced, sent)):
        return announced if isinstance(announced, list) else list(announced)  # the same list: its header is cached
    return [a if _announces(a, b) else a.as_unsigned() if a.type == b.type else b.named_as(a)
            for a, b in zip(announced, sent)]  # fmt: skip


def _announces(announced: Column, sent: Column) -> bool:
    """The announced column stands for the sent one: the same type, and unsigned if the values are (``SELECT
    ? + 1`` is signed at prepare, unsigned when an execute binds an unsigned value: the client must read
    the integer so, and the column is then announced with the flag)."""
    return announced.type == sent.type and (announced.unsigned or not sent.unsigned)
