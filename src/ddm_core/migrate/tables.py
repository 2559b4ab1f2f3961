"""Facts about physical tables a migration reads: existence, primary key, size, DDL, rows in key order.

Everything here is one query (or one chunk of a keyset scan) on one data
source's primary through :class:`~ddm_core.migrate.connections.Connections`;
identifiers are quoted with the data source's dialect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from ddm_core.errors import MigrationError
from ddm_core.migrate.connections import Connections

__all__ = [
    "TableStats",
    "quote",
    "table_exists",
    "primary_key",
    "table_columns",
    "table_stats",
    "show_create_table",
    "keyset_chunks",
    "keys_in",
    "KEYS_PER_IN",
]


@dataclass(frozen=True, slots=True)
class TableStats:
    """``information_schema.tables`` estimates for one physical table (InnoDB's, refreshed by ANALYZE)."""

    rows: int
    data_bytes: int
    index_bytes: int

    @property
    def bytes_per_row(self) -> float:
        return self.data_bytes / self.rows if self.rows else 0.0


def quote(conns: Connections, data_source: str, name: str) -> str:
    """``name`` as an identifier of ``data_source``'s dialect."""
    return conns.dialect(data_source).identifier(name)


def table_exists(conns: Connections, data_source: str, table: str) -> bool:
    rows = conns.query(
        data_source,
        "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = %s",
        (table,),
    )
    return bool(rows)


def primary_key(conns: Connections, data_source: str, table: str) -> tuple[str, ...]:
    """The primary-key columns in key order.

    Raises:
        MigrationError: the table has no primary key (rows could not be copied in key order).
    """
    rows = conns.query(
        data_source,
        "SELECT column_name FROM information_schema.statistics WHERE table_schema = DATABASE() "
        "AND table_name = %s AND index_name = 'PRIMARY' ORDER BY seq_in_index",
        (table,),
    )
    if not rows:
        raise MigrationError(
            f"table {table!r} on data source {data_source!r} has no primary key: a migration copies and "
            "compares rows in primary-key order",
            table=table,
            data_source=data_source,
        )
    return tuple(str(r[0]) for r in rows)


def table_columns(conns: Connections, data_source: str, table: str) -> list[str]:
    """Column names in table order."""
    rows = conns.query(
        data_source,
        "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = %s "
        "ORDER BY ordinal_position",
        (table,),
    )
    return [str(r[0]) for r in rows]


def table_stats(conns: Connections, data_source: str, table: str) -> TableStats:
    rows = conns.query(
        data_source,
        "SELECT table_rows, data_length, index_length FROM information_schema.tables "
        "WHERE table_schema = DATABASE() AND table_name = %s",
        (table,),
    )
    if not rows:
        raise MigrationError(f"table {table!r} does not exist on data source {data_source!r}",
                             table=table, data_source=data_source)
    n, data, index = rows[0]
    return TableStats(int(n or 0), int(data or 0), int(index or 0))


def show_create_table(conns: Connections, data_source: str, table: str) -> str:
    """``SHOW CREATE TABLE`` text as the server writes it."""
    rows = conns.query(data_source, f"SHOW CREATE TABLE {quote(conns, data_source, table)}")
    return str(rows[0][1])


def keyset_chunks(
    conns: Connections,
    data_source: str,
    table: str,
    columns: Sequence[str],
    key: Sequence[str],
    batch: int,
    *,
    after: Sequence[Any] | None = None,
    upto: Sequence[Any] | None = None,
    extra: Sequence[str] = (),
) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of ``table`` in primary-key order, ``batch`` at a time (keyset pagination).

    Each chunk is its own short query (``WHERE (key) > (last key) ORDER BY key
    LIMIT batch``), so no statement holds the table for long. The key columns
    come first in every row, then ``columns``, then ``extra``.

    Args:
        after: Start after this key (exclusive).
        upto: Stop at this key (inclusive).
        extra: SQL expressions read after the columns (e.g. a row's INSERT literal).
    """
    def q(name: str) -> str:
        return quote(conns, data_source, name)

    keys = ", ".join(q(k) for k in key)
    select = ", ".join([*(q(k) for k in key), *(q(c) for c in columns), *extra])
    tuple_of = f"({keys})" if len(key) > 1 else keys
    marks = "(" + ", ".join(["%s"] * len(key)) + ")" if len(key) > 1 else "%s"
    last: Sequence[Any] | None = after
    while True:
        where: list[str] = []
        params: list[Any] = []
        if last is not None:
            where.append(f"{tuple_of} > {marks}")
            params.extend(last)
        if upto is not None:
            where.append(f"{tuple_of} <= {marks}")
            params.extend(upto)
        sql = f"SELECT {select} FROM {q(table)}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {keys} LIMIT {int(batch)}"
        rows = conns.query(data_source, sql, params or None)
        if not rows:
            return
        yield rows
        if len(rows) < batch:
            return
        last = rows[-1][: len(key)]


#: Keys per ``IN`` list sent as parameters, and (times 10) spelled at once.
KEYS_PER_IN = 2000


def keys_in(conns: Connections, data_source: str, key: Sequence[str], keys: Sequence[Sequence[Any]],
            most: int | None = None) -> Iterator[tuple[str, list[Any] | None]]:
    """``(key) IN (...)`` conditions covering ``keys``, with their parameters.

    Single integer keys are spelled into the SQL at once, ``10 * KEYS_PER_IN``
    a list (escaping each was slow, docs/migration.md#backfill-throughput);
    other keys go as parameters, :data:`KEYS_PER_IN` a list. ``most``: keys per
    list either way (whole rows read back, whose size is unknown).
    """
    names = [quote(conns, data_source, k) for k in key]
    if len(names) == 1 and all(type(k[0]) is int for k in keys):
        step = most or 10 * KEYS_PER_IN
        for i in range(0, len(keys), step):
            yield f"{names[0]} IN (" + ",".join([str(k[0]) for k in keys[i : i + step]]) + ")", None
        return
    tup = f"({', '.join(names)})" if len(names) > 1 else names[0]
    mark = f"({', '.join(['%s'] * len(names))})" if len(names) > 1 else "%s"
    step = most or KEYS_PER_IN
    for i in range(0, len(keys), step):
        part = keys[i : i + step]
        yield f"{tup} IN ({', '.join([mark] * len(part))})", [v for k in part for v in k]
