"""Rows read as the SQL text that writes them: the backfill's INSERTs are spelled by the source server.

Escaping every value in Python (PyMySQL's ``executemany``) was most of the
backfill's CPU (docs/migration.md#backfill-throughput). Instead the keyset read
asks the source server for one more column per row, the row's ``VALUES``
tuple ready to send — ``(12,_utf8mb4 X'6E6F7465',X'00FF',NULL,'2024-01-01 10:00:00.000001')``
— and the writer only joins the tuples of a target into multi-row INSERTs of
up to ``max_allowed_packet`` bytes. Each column is spelled so that the
target parses back the very value the source holds:

* integers, DECIMAL, FLOAT / DOUBLE, YEAR: the server's own decimal text
  (the text protocol sends the same text, so nothing is lost that the
  PyMySQL path kept);
* temporal types: ``QUOTE`` of the value at the column's precision (digits and
  separators only: nothing to escape);
* text (CHAR ... LONGTEXT, ENUM, SET, JSON): the value converted to utf8mb4 as a
  hex literal with its character set, ``_utf8mb4 X'..'`` (the target converts it
  back to the column's). Not ``QUOTE``: its backslash escapes would be read as
  two characters by a target session in ``NO_BACKSLASH_ESCAPES`` mode, which a
  hex literal does not depend on;
* binary strings and BLOBs: a hex literal (``X'..'``), so no byte passes
  through a character set;
* BIT: its unsigned integer value;
* NULL: ``NULL`` (``QUOTE(NULL)`` is the word itself).

A column of any other type (spatial, MariaDB's INET6 / UUID, ...) has no
literal here: :func:`row_literal_sql` returns ``None`` and the copier sends
that table's rows through PyMySQL as before.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from ddm_core.migrate.checker import ColumnInfo
from ddm_core.migrate.connections import Connections
from ddm_core.migrate.tables import quote

__all__ = ["row_literal_sql", "literal_sql", "insert_statements", "statement_limit", "STATEMENT_CAP"]

#: The largest INSERT sent, whatever ``max_allowed_packet`` allows (the server parses it whole).
STATEMENT_CAP = 16 << 20
#: Bytes kept free below ``max_allowed_packet`` for the packet header and rounding.
_HEADROOM = 4096

_PLAIN = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric", "float", "double",
          "real", "year"}
_QUOTED = {"date", "datetime", "timestamp", "time"}
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}


def literal_sql(conns: Connections, data_source: str, column: ColumnInfo) -> str | None:
    """The SQL expression spelling ``column``'s value as a literal (utf8mb4 text), ``None``: no exact one."""
    c = quote(conns, data_source, column.name)
    kind = column.data_type
    if kind in _PLAIN:
        value = c
    elif kind in _QUOTED:
        return f"QUOTE({c})"
    elif kind in _TEXT:
        value = f"CONCAT('_utf8mb4 X''', HEX(CONVERT({c} USING utf8mb4)), '''')"
    elif kind in _BINARY:
        value = f"CONCAT('X''', HEX({c}), '''')"
    elif kind == "bit":
        value = f"CAST({c} AS UNSIGNED)"
    else:
        return None
    return f"IFNULL(CONVERT({value} USING utf8mb4), 'NULL')"


def row_literal_sql(conns: Connections, data_source: str, columns: Sequence[ColumnInfo]) -> str | None:
    """The SQL expression of a row's ``VALUES`` tuple over ``columns`` (bytes on the wire), ``None``: a column
    has no literal (:func:`literal_sql`)."""
    parts = [literal_sql(conns, data_source, c) for c in columns]
    if any(p is None for p in parts):
        return None
    # CONCAT, not CONCAT_WS: a part that were NULL must void the row (checked), not drop a column.
    return "CAST(CONCAT('(', " + ", ',', ".join(p for p in parts if p is not None) + ", ')') AS BINARY)"


def statement_limit(conns: Connections, data_source: str) -> int:
    """Bytes one INSERT to ``data_source`` may take: its ``max_allowed_packet`` less headroom, at most
    :data:`STATEMENT_CAP`."""
    allowed = int(conns.query(data_source, "SELECT @@max_allowed_packet")[0][0])
    return max(1024, min(STATEMENT_CAP, allowed - _HEADROOM))


def insert_statements(head: bytes, tail: bytes, values: Sequence[bytes], limit: int) -> Iterator[bytes]:
    """``head`` + as many ``values`` tuples (comma-joined) as fit in ``limit`` bytes + ``tail``, until all are sent.

    A tuple too long for ``limit`` on its own goes alone (the server names it if it exceeds its packet size).
    """
    room = limit - len(head) - len(tail)
    start, size = 0, -1  # size: the bytes of values[start:i + 1] comma-joined
    for i, v in enumerate(values):
        size += len(v) + 1
        if size > room and i > start:
            yield head + b",".join(values[start:i]) + tail
            start, size = i, len(v)
    if start < len(values):
        yield head + b",".join(values[start:]) + tail
