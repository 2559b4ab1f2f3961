"""The collations of a merged result's string columns, which MySQL's result columns do not say.

A MySQL or MariaDB result announces every text column in the connection's
result character set — ``utf8mb4_general_ci`` (45) for a ``utf8mb4_unicode_ci``
or ``latin1_swedish_ci`` column alike — so the rows alone cannot tell the merge
how the data source compares a column. Without that conversion
(``character_set_results = NULL``) the server names each column's own
collation, and a prepared statement (``COM_STMT_PREPARE``) announces its
columns without running anything. So the first time a statement's merge
compares a string column (sort or group key, ``MIN`` / ``MAX``, ``DISTINCT``),
the first unit's SQL is prepared that way on a pooled connection of its data
source — the connection's result character set is put back before it returns
to the pool, and a connection in doubt is discarded — and the column
collations are kept per data source and SQL text (at most :data:`LIMIT`; a DDL
statement through the executor forgets them all).

Merges that compare only numbers, dates or binary strings, and SQLite or
PostgreSQL data sources, never ask.
"""

from __future__ import annotations

import contextlib
import struct
import threading
from typing import Any, Callable, Sequence

from ddm_core.errors import MergeError
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.drivers import format_to_qmark
from ddm_core.execute.mysql_connect import CHARSET, pymysql_module
from ddm_core.execute.pools import EndpointPool
from ddm_core.merge.collation import Collation, collation_for
from ddm_core.merge.keys import compared_columns
from ddm_core.merge.spec import MergeSpec, memoized

__all__ = ["ResultCollations", "LIMIT", "TEXT_TYPES"]

#: SQL texts whose column collations are kept (the oldest are forgotten first).
LIMIT = 2048

#: MySQL field types whose values are strings in a collation (VARCHAR ... STRING, JSON, ENUM, SET, the BLOBs).
TEXT_TYPES = frozenset({15, 245, 247, 248, 249, 250, 251, 252, 253, 254})

_COM_STMT_PREPARE = 0x16
_COM_STMT_CLOSE = 0x19
_PREPARE_OK = struct.Struct("<xIHH")  # status, statement id, columns, parameters


class ResultCollations:
    """Column collations per (data source, SQL text), asked of the data source once."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._known: dict[tuple[str, str], tuple[int, ...]] = {}
        self._lock = threading.Lock()

    def for_merge(
        self,
        spec: MergeSpec,
        description: Sequence[Sequence[Any]],
        data_source: str,
        sql: str,
        pool_of: Callable[[str], EndpointPool],
        deadline: float | None,
    ) -> list[Collation | None] | None:
        """Each unit-row column's collation, or ``None`` when the merge compares no string column.

        Args:
            spec: The plan's merge spec.
            description: A unit's DB-API description (type codes say which columns hold text).
            data_source: Where the first unit ran.
            sql: The SQL it ran, in the driver's ``%s`` style.
            pool_of: The pool to borrow a connection of ``data_source`` from.
            deadline: The statement's ``time.monotonic()`` deadline (None: the pool's wait).

        Raises:
            CollationError: a compared column's collation is one ddm-core cannot reproduce.
            ExecutionError: the data source could not describe the statement.
        """
        width = len(description)
        text = _compared_text(spec, description)
        if not text:
            return None
        with self._lock:
            ids = self._known.get((data_source, sql))
        if ids is None:
            pool = pool_of(data_source)
            if not pool.driver.dialect.describes_prepared_columns:
                return None  # no collation to be had (SQLite, PostgreSQL): compared as Python does (binary order)
            ids = self._ids(data_source, sql, pool, deadline)
        if len(ids) != width:
            raise MergeError(
                f"data source {data_source!r} describes {len(ids)} columns for a result of {width}: "
                "did a table change while the statement ran?", data_source=data_source,
            )  # fmt: skip
        out: list[Collation | None] = [None] * width
        for i in text:
            out[i] = collation_for(ids[i], str(description[i][0]))
        return out

    def pending(self, spec: MergeSpec, description: Sequence[Sequence[Any]], data_source: str, sql: str) -> bool:
        """Would :meth:`for_merge` have to ask the data source (a compared string column, not asked yet)?

        An event loop asks this first and runs :meth:`for_merge` off the loop only when it would block.
        """
        if not _compared_text(spec, description):
            return False
        with self._lock:
            return (data_source, sql) not in self._known

    def learn(self, data_source: str, sql: str, borrowed: Any) -> None:
        """Describe ``sql`` on a connection the caller holds, when it names tables only that connection
        sees (a cross-node statement's temporary copies: docs/cross-node-queries.md)."""
        if not borrowed.pool.driver.dialect.describes_prepared_columns:
            return
        with self._lock:
            if (data_source, sql) in self._known:
                return
        try:
            ids = _prepared_collations(borrowed.raw, format_to_qmark(sql))
        except Exception as exc:
            pool = borrowed.pool
            raise map_driver_error(exc, data_source=data_source, endpoint=pool.endpoint.name, sql=sql) from exc
        with self._lock:
            if len(self._known) >= self._limit:
                with contextlib.suppress(StopIteration):
                    del self._known[next(iter(self._known))]
            self._known[(data_source, sql)] = ids

    def clear(self) -> None:
        """Forget every statement's collations (a table's columns may have changed)."""
        with self._lock:
            self._known = {}

    def _ids(self, data_source: str, sql: str, pool: EndpointPool, deadline: float | None) -> tuple[int, ...]:
        key = (data_source, sql)
        with self._lock:
            ids = self._known.get(key)
        if ids is not None:
            return ids
        ids = _describe(pool, data_source, format_to_qmark(sql), deadline)
        with self._lock:
            if len(self._known) >= self._limit:
                with contextlib.suppress(StopIteration):
                    del self._known[next(iter(self._known))]
            self._known[key] = ids
        return ids


def _describe(pool: EndpointPool, data_source: str, sql: str, deadline: float | None) -> tuple[int, ...]:
    """The collation id of each result column of ``sql`` (``?`` placeholders), prepared on ``pool``."""
    borrowed = pool.borrow(deadline)
    try:
        ids = _prepared_collations(borrowed.raw, sql)
    except Exception as exc:
        borrowed.release(discard=True)  # its result character set may not be back
        raise map_driver_error(exc, data_source=data_source, endpoint=pool.endpoint.name, sql=sql) from exc
    except BaseException:
        borrowed.release(discard=True)
        raise
    borrowed.release()
    return ids


def _prepared_collations(conn: Any, sql: str) -> tuple[int, ...]:
    """On a PyMySQL connection: prepare ``sql`` without result conversion; its columns' collation ids."""
    conn.query("SET character_set_results = NULL")
    ids = _prepare_columns(conn, sql)
    conn.query(f"SET character_set_results = {CHARSET}")
    return ids


def _prepare_columns(conn: Any, sql: str) -> tuple[int, ...]:
    field = pymysql_module().protocol.FieldDescriptorPacket
    conn._execute_command(_COM_STMT_PREPARE, sql)
    answer = conn._read_packet()  # an error packet raises the server's error here
    statement, columns, params = _PREPARE_OK.unpack(answer.get_all_data()[: _PREPARE_OK.size])
    try:
        for _ in range(params + (1 if params else 0)):  # parameter definitions, then EOF
            conn._read_packet()
        ids = tuple(conn._read_packet(field).charsetnr for _ in range(columns))
        if columns:
            conn._read_packet()  # EOF
    finally:
        conn._execute_command(_COM_STMT_CLOSE, struct.pack("<I", statement))  # no answer
    return ids


def _compared_text(spec: MergeSpec, description: Sequence[Sequence[Any]]) -> tuple[int, ...]:
    """The columns the merge of ``spec`` compares that hold text (by their type codes), in order: worked out
    once per spec and description (the spec's memo; the next statement of the shape is described alike)."""
    return memoized(spec.memo, ("compared text", description), lambda: _text_of(spec, description))


def _text_of(spec: MergeSpec, description: Sequence[Sequence[Any]]) -> tuple[int, ...]:
    return tuple(i for i in sorted(compared_columns(spec, len(description))) if description[i][1] in TEXT_TYPES)
