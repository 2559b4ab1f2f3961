"""The result columns of a prepared statement, known before it runs.

A COM_STMT_PREPARE response announces the columns every execute will return
(libmariadb clients such as sysbench take a statement announced without
columns for one without rows, never read its result and fail the next
statement with 2014). The proxy cannot know them from the text (``SELECT *``,
expressions, aggregates), so it asks a data source:

1. the statement is routed with ``0`` for every parameter (the shape of the
   result does not depend on the values, and every unit of a plan returns the
   same shape: they differ only in their table names). When ``0`` is a value
   its algorithm has no shard for (a TIME_RANGE or INTERVAL column, an INLINE
   expression naming no node), the statement is routed again with each data
   source forced in turn (a routing hint: no algorithm runs) until one holds
   its tables — the columns are the same on every node. Refusals that hold
   for every value (a full route, an unsupported construct) still fail the
   prepare. Executes route with their own values, always
   (docs/proxy.md#prepared-statements);
2. the first unit's physical SQL is prepared on its data source
   (``COM_STMT_PREPARE`` over a pooled connection, closed at once): MariaDB
   answers with the column definitions without running anything, as
   https://mariadb.com/kb/en/com_stmt_prepare/ describes;
3. the columns are those the client sees: physical table and database names
   become the logic ones, and a merged plan's columns go through
   :func:`ddm_core.proxy.columns.merged` (derived columns dropped, aggregates
   typed as merged).

The columns are kept per statement text and configuration (:class:`ResultShapes`)
until a DDL statement through the proxy clears them. A statement that cannot be
routed (a refusal) or prepared (the data source's error) fails the prepare with
that error rather than announcing columns it may not return.
"""

from __future__ import annotations

import contextlib
import struct
import threading
import time
from typing import Any, Sequence

from mysql_mimic import ColumnType

from ddm_core.dialects import titles
from ddm_core.errors import ExecutionError, RoutingError, ShardValueError
from ddm_core.execute import Executor
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.mysql_connect import pymysql_module
from ddm_core.execute.pools import discard_on
from ddm_core.proxy.columns import Column, merged
from ddm_core.route.hints import hint
from ddm_core.route.plan import RoutePlan

__all__ = ["ResultShapes", "Described", "describe", "PLACEHOLDER"]

#: A statement's result columns and the logic tables it reads (their masks apply per user).
Described = tuple[list[Column], tuple[str, ...]]

#: The value every parameter is routed with at prepare time.
PLACEHOLDER = 0

_COM_STMT_PREPARE = 0x16
_COM_STMT_CLOSE = 0x19
_PREPARE_OK = struct.Struct("<xIHH")


class ResultShapes:
    """Result columns by statement text, for one configuration at a time (bounded, the oldest go first)."""

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._config: object = None
        self._shapes: dict[str, Described] = {}
        self._lock = threading.Lock()

    def get(self, text: str, config: object) -> Described | None:
        with self._lock:
            if config is not self._config:  # a reloaded configuration routes differently
                self._config, self._shapes = config, {}
            return self._shapes.get(text)

    def put(self, text: str, config: object, shape: Described) -> None:
        with self._lock:
            if config is not self._config:
                self._config, self._shapes = config, {}
            if len(self._shapes) >= self._limit:
                with contextlib.suppress(StopIteration):
                    del self._shapes[next(iter(self._shapes))]
            self._shapes[text] = shape

    def clear(self) -> None:
        """Forget every shape (a DDL statement may have changed a table's columns)."""
        with self._lock:
            self._shapes = {}

    def __len__(self) -> int:
        return len(self._shapes)


def describe(executor: Executor, text: str, params: int, schema: str) -> Described:
    """The columns ``text`` (``params`` ``?`` marks) returns, as its client sees them, and its logic tables.

    Nothing runs: the data source only prepares the statement.

    Raises:
        DdmError: the router refused the statement, or its data source could not prepare it.
    """
    plan = _placeholder_plan(executor, text, params)
    tables = tuple(t.logic_table for t in plan.tables)
    if not plan.units:
        return [], tables
    unit = plan.units[0]
    fields = _prepare_on(executor, unit.data_source, unit.sql)
    return merged(_logic_names(fields, plan, schema), plan.merge), tables


#: The refusals of a placeholder value, not of the statement: its algorithm has no shard for ``0``.
_VALUE_REFUSALS = (RoutingError, ShardValueError)


def _placeholder_plan(executor: Executor, text: str, params: int) -> RoutePlan:
    """A plan of ``text`` whose first unit holds its tables, whatever its parameters' values."""
    bound = [PLACEHOLDER] * params if params else None
    try:
        return executor.router.route(text, bound)
    except RoutingError as exc:
        if type(exc) not in _VALUE_REFUSALS or not params:
            raise  # a full route, an unsupported construct...: refused for every value
        refused = exc
    for data_source in executor.config.data_sources:
        try:
            with hint(database=data_source):
                return executor.router.route(text, bound)
        except RoutingError:
            continue  # no node of one of its tables there
    raise refused


def _prepare_on(executor: Executor, data_source: str, sql: str) -> list[Column]:
    pool = executor.primary_pool(data_source)
    if not pool.driver.dialect.describes_prepared_columns:
        raise ExecutionError(
            f"data source {data_source!r} is {pool.driver.dialect.name}: only a "
            f"{titles(lambda d: d.describes_prepared_columns)} data source describes a prepared statement's "
            "result columns", data_source=data_source,
        )  # fmt: skip
    seconds = executor.timeout or 3.0
    borrowed = pool.borrow(time.monotonic() + seconds)
    try:
        columns = _server_prepare(borrowed.raw, sql)
    except Exception as exc:
        borrowed.release(discard=discard_on(exc))
        raise map_driver_error(exc, data_source=data_source, endpoint=pool.endpoint.name, sql=sql) from exc
    borrowed.release()
    return columns


def _server_prepare(conn: Any, sql: str) -> list[Column]:
    """COM_STMT_PREPARE ``sql`` on a PyMySQL connection and read its result columns; then COM_STMT_CLOSE."""
    field_packet = pymysql_module().protocol.FieldDescriptorPacket
    conn._execute_command(_COM_STMT_PREPARE, sql)
    first = conn._read_packet()  # an error packet raises the server's error here
    stmt_id, count, params = _PREPARE_OK.unpack(first.get_all_data()[: _PREPARE_OK.size])
    try:
        for _ in range(params):
            conn._read_packet(field_packet)
        if params:
            conn._read_packet()  # EOF (PyMySQL does not ask for CLIENT_DEPRECATE_EOF)
        fields = [conn._read_packet(field_packet) for _ in range(count)]
        if count:
            conn._read_packet()
    finally:
        conn._execute_command(_COM_STMT_CLOSE, struct.pack("<I", stmt_id))  # no answer
    return [
        Column(
            name=f.name, type=_wire_type(f.type_code), charset=f.charsetnr, length=f.length, flags=f.flags,
            decimals=f.scale, table=f.table_name, org_table=f.org_table, org_name=f.org_name,
            schema=f.db.decode() if isinstance(f.db, bytes) else str(f.db or ""),
        )  # fmt: skip
        for f in fields
    ]


def _wire_type(code: int) -> ColumnType:
    try:
        return ColumnType(code)
    except ValueError:  # a type this protocol version does not name: its values are sent as text
        return ColumnType.VAR_STRING


def _logic_names(columns: Sequence[Column], plan: RoutePlan, schema: str) -> list[Column]:
    """Physical table and database names → the logic table's and the logic database's."""
    logic: dict[str, str] = {}
    for table in plan.tables:
        for node in table.nodes:
            logic[node.rsplit(".", 1)[-1]] = table.logic_table
    out = []
    for c in columns:
        if not (c.table or c.org_table or c.schema):
            out.append(c)  # an expression
            continue
        org = logic.get(c.org_table, c.org_table)
        shown = logic.get(c.table, c.table)
        out.append(Column(c.name, c.type, c.charset, c.length, c.flags, c.decimals, shown, org, c.org_name,
                          schema if c.schema and c.schema != "information_schema" else c.schema))  # fmt: skip
    return out
