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
"""

from __future__ import annotations

from typing import Any, Sequence

from mysql_mimic import packets
from mysql_mimic.connection import Connection
from mysql_mimic.errors import MysqlError
from mysql_mimic.packets import SSLRequest
from mysql_mimic.prepared import REGEX_PARAM, PreparedStatement
from mysql_mimic.results import ResultSet, ensure_result_set
from mysql_mimic.types import Capabilities, ServerStatus, str_fixed, uint_1, uint_2, uint_4, uint_len
from mysql_mimic.utils import aiterate

from ddm_core.errors import DdmError
from ddm_core.proxy.columns import Column, wire_columns
from ddm_core.proxy.mysql_errors import INSECURE_TRANSPORT, UNKNOWN_ERROR, error_info, sqlstate_of
from ddm_core.proxy.prepared import read_execute
from ddm_core.proxy.runtime import ProxyRuntime
from ddm_core.proxy.session import Batched, Outcome, Rows, flatten
from ddm_core.proxy.tls import start_tls

__all__ = ["ProxyConnection"]

_NO_ROWS = ResultSet(rows=[], columns=[])
INSECURE_TRANSPORT_MESSAGE = "Connections using insecure transport are prohibited: this ddm proxy requires TLS (proxy.tls.required)"


class ProxyConnection(Connection):  # type: ignore[misc]  # mimic ships no types
    """One client connection (protocol state); its :class:`~ddm_core.proxy.session.ProxySession` holds the rest."""

    def __init__(self, *args: Any, runtime: ProxyRuntime, tls_required: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runtime = runtime
        self.tls_required = tls_required
        # A session starts in autocommit, as on MySQL; the handshake says so, and PyMySQL
        # (autocommit off by default) then sends SET AUTOCOMMIT = 0.
        self.status_flags = ServerStatus.SERVER_STATUS_AUTOCOMMIT
        self._outcome: Outcome | None = None
        self._batched: Batched | None = None
        self._param_types: dict[int, bytes] = {}  # prepared statement id -> its parameter types
        self._announced: dict[int, list[Column]] = {}  # prepared statement id -> the columns its prepare announced

    async def connection_phase(self) -> None:
        # mimic's, but the switch to TLS keeps a ClientHello sent right behind the SSLRequest (proxy/tls.py).
        plugin = self.identity_provider.get_default_plugin()
        auth_data, auth_state = await plugin.start()
        self.handshake_auth_data = auth_data
        self.handshake_auth_plugin = plugin.name
        await self.stream.write(packets.make_handshake_v10(
            capabilities=self.server_capabilities, server_charset=self.server_charset,
            server_version=str(self.session.variables.get("version")), connection_id=self.connection_id,
            auth_data=auth_data, status_flags=self.status_flags, auth_plugin_name=plugin.name,
        ))  # fmt: skip
        response = packets.parse_handshake_response(capabilities=self.server_capabilities, data=await self.stream.read())
        if isinstance(response, SSLRequest):
            await start_tls(self.stream, self.ssl)
            response = packets.parse_handshake_response_41(capabilities=self.server_capabilities,
                                                           data=await self.stream.read())  # fmt: skip
        self.capabilities = response.capabilities
        self.max_packet_size = response.max_packet_size
        self.session.variables.set("character_set_client", response.client_charset.name)
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

    async def authenticate(self, *args: Any, **kwargs: Any) -> None:
        # proxy.tls.required: a client that did not switch to TLS is refused before its credentials are looked at.
        if self.tls_required and self.stream.writer.get_extra_info("ssl_object") is None:
            await self.stream.write(self.error(msg=INSECURE_TRANSPORT_MESSAGE, code=INSECURE_TRANSPORT))
            raise ConnectionAbortedError("a client without TLS refused (proxy.tls.required)")
        await super().authenticate(*args, **kwargs)

    async def handle_query(self, data: bytes) -> None:
        with self.runtime.statement():
            await super().handle_query(data)

    async def handle_stmt_execute(self, data: bytes) -> None:
        # Not mimic's: it pastes parameter values into the SQL unescaped (proxy/prepared.py).
        with self.runtime.statement():
            execute = read_execute(data, self.capabilities, self.client_charset, self.get_stmt, self._param_types)
            execute.stmt.param_buffers = None
            result = await self.session.handle_prepared(execute.stmt.sql, execute.params)
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
            columns = _as_announced(self._announced.get(execute.stmt.stmt_id), columns)
            await self._write_binary_resultset(columns, rows, execute.stmt, execute.use_cursor)

    async def _write_binary_resultset(self, columns: list[Column], rows: Any, stmt: Any, use_cursor: bool) -> None:
        # The binary-protocol result set, as mimic writes it, with the columns' full definitions.
        self.stream.write_many([uint_len(len(columns)), *(c.packet(self.server_charset) for c in columns)])
        wire = wire_columns(columns)

        async def binary_rows() -> Any:
            async for row in aiterate(rows):
                yield packets.make_binary_resultrow(row, wire)

        encoded = binary_rows()
        if use_cursor:
            stmt.cursor = encoded
            await self.stream.write(self.ok_or_eof(flags=ServerStatus.SERVER_STATUS_CURSOR_EXISTS))
            return
        if not self.deprecate_eof():
            await self.stream.write(self.eof())
        async for row in encoded:
            await self.stream.write(row, drain=False)
        await self.stream.write(self.ok_or_eof())

    async def handle_stmt_prepare(self, data: bytes) -> None:
        # mimic's announces no result columns, and libmariadb clients (sysbench) then take a SELECT for a
        # statement without rows, never read its result, and fail the next statement with 2014 (commands
        # out of sync). Here the columns are asked of a data source (proxy/described.py); a statement
        # whose columns cannot be known gets an error packet (MysqlError) and no statement id.
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
            out.extend(c.packet(self.server_charset) for c in columns)
            out.extend(eof)
        self.stream.write_many(out)
        await self.stream.drain()

    async def handle_stmt_close(self, data: bytes) -> None:
        await super().handle_stmt_close(data)
        stmt_id = int.from_bytes(data[:4], "little")
        self._param_types.pop(stmt_id, None)
        self._announced.pop(stmt_id, None)

    async def query(self, sql: str, query_attrs: dict[str, str]) -> ResultSet:
        result = await self.session.handle_query(sql, query_attrs)
        if isinstance(result, Outcome):
            self._outcome = result  # the next ok() reports it
            return _NO_ROWS
        self._outcome = None
        if isinstance(result, Batched):
            self._batched = result  # write_text_resultset writes it batch by batch
            return ResultSet(rows=flatten(result.batches), columns=wire_columns(result.columns))
        self._batched = None
        if isinstance(result, Rows):
            return ResultSet(rows=result.rows, columns=wire_columns(result.columns))
        return await ensure_result_set(result)

    def ok(self, **kwargs: Any) -> bytes:
        outcome, self._outcome = self._outcome, None
        if outcome is not None:
            kwargs.setdefault("affected_rows", outcome.affected_rows)
            kwargs.setdefault("last_insert_id", outcome.last_insert_id)
        return bytes(super().ok(**kwargs))

    def error(self, msg: Any = "", code: int = UNKNOWN_ERROR, **_: Any) -> bytes:
        parts = [uint_1(0xFF), uint_2(int(code))]
        if Capabilities.CLIENT_PROTOCOL_41 in self.capabilities:
            parts.append(str_fixed(1, b"#"))
            parts.append(str_fixed(5, sqlstate_of(int(code)).encode()))
        parts.append(self.server_charset.encode(str(msg)))
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
        sent = 0
        try:
            async for batch in batched.batches:
                self.stream.write_text_rows(batch, result_set.columns)
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


def _as_announced(announced: Sequence[Column] | None, sent: list[Column]) -> list[Column]:
    """The prepare's column where the result's has its type (it also has the flags, lengths, tables), else the result's.

    A result may differ from the announcement: a table altered behind the proxy's back, or an
    expression whose type MariaDB fixes only once it sees the values (``SELECT ? + 1``).
    """
    if announced is None or len(announced) != len(sent):
        return sent
    return [a if a.type == b.type else b for a, b in zip(announced, sent)]
