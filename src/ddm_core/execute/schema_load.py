"""Table metadata loaded from the data sources when an executor starts, as ShardingSphere loads it.

For every sharded logic table, the columns of its first data node — names in
order, declared types, primary key — become the router's
:class:`~ddm_core.route.table_schema.TableSchema` of the table
(:meth:`ddm_core.Router.set_schemas`). The dialect of the data source says how
to ask (``information_schema`` on MySQL / MariaDB / PostgreSQL,
``PRAGMA table_info`` on SQLite).

Each data source is asked over one short-lived connection of its own, not a
pooled one: starting an executor borrows nothing and warms no pool. A data
source that cannot be reached (or a table that does not exist yet) is logged
and skipped; its tables route all the same, except that INSERTs without a column
list into them are refused until their columns are known. After DDL that
changes a table's columns, load again:
``executor.router.set_schemas(load_schemas(executor.config))``.
"""

from __future__ import annotations

import logging
from typing import Any

from ddm_core.dialects import dialect_for
from ddm_core.execute.drivers import driver_for
from ddm_core.metadata.model import DataNode, DataSource, ShardedTable, ShardingConfig
from ddm_core.route.table_schema import Column, TableSchema

__all__ = ["load_schemas"]

log = logging.getLogger("ddm_core.execute")


def load_schemas(config: ShardingConfig) -> dict[str, TableSchema]:
    """The schema of every sharded logic table whose first data node can be read.

    Args:
        config: The configuration whose tables and data sources to read.

    Returns:
        Logic table name (lower case) → its schema; tables that could not be
        read are missing (each reason is logged on ``ddm_core.execute``).
    """
    by_source: dict[str, list[tuple[ShardedTable, DataNode]]] = {}
    for table in config.tables.values():
        if table.data_nodes:
            node = table.data_nodes[0]
            by_source.setdefault(node.data_source, []).append((table, node))
    out: dict[str, TableSchema] = {}
    for name, items in by_source.items():
        ds = config.data_sources.get(name)
        if ds is not None:
            out.update(_load_from(ds, items))
    return out


def _load_from(ds: DataSource, items: list[tuple[ShardedTable, DataNode]]) -> dict[str, TableSchema]:
    endpoint = ds.primary
    names = ", ".join(repr(t.name) for t, _ in items)
    try:
        dialect = dialect_for(endpoint.dialect)
        raw = driver_for(endpoint.dialect).connect(endpoint, ds.pool.acquire_timeout_ms / 1000.0)
    except Exception as exc:  # noqa: BLE001 - a data source that is down must not stop the start
        log.warning(
            "table metadata not loaded from data source %r (%s): %s; INSERTs without a column list into "
            "%s are refused until it is",
            ds.name, endpoint.name, exc, names,
        )
        return {}
    out: dict[str, TableSchema] = {}
    try:
        for table, node in items:
            schema = _read_table(raw, dialect.table_columns_query(node.table), table, node)
            if schema is not None:
                out[table.name.lower()] = schema
    finally:
        try:
            raw.close()
        except Exception:  # noqa: S110 - closing a connection we are done with
            pass
    return out


def _read_table(raw: Any, query: tuple[str, tuple[Any, ...]], table: ShardedTable, node: DataNode) -> TableSchema | None:
    sql, params = query
    try:
        cursor = raw.cursor()
        try:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        finally:
            cursor.close()
    except Exception as exc:  # noqa: BLE001 - one table's failure leaves the others loaded
        log.warning("table metadata of %r not loaded from %s: %s", table.name, node, exc)
        return None
    if not rows:
        log.info("table metadata of %r not loaded: %s does not exist (yet)", table.name, node)
        return None
    columns = tuple(Column(_text(name), _text(kind)) for name, kind, _ in rows)
    key = tuple(_text(name) for name, _, pos in sorted((r for r in rows if r[2]), key=lambda r: int(r[2])))
    return TableSchema(table.name, columns, key, str(node))


def _text(value: Any) -> str:
    """A name or type as text (some drivers return information_schema text as bytes)."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)
