"""Table metadata the router can use: a logic table's columns in order, their types, its primary key.

Two sources, the first found wins per logic table:

* **loaded** — read from the first data node of each logic table when an
  :class:`~ddm_core.execute.Executor` starts (``load_schema=True``, as
  ShardingSphere loads its metadata), or given with
  :meth:`ddm_core.Router.set_schemas`;
* **declared** — the native configuration's per-table ``columns:`` mapping
  (docs/configuration.md#table-metadata), in declaration order.

The router uses it for an INSERT without a column list (the column order) and
for typed comparison (a string compared with an integer shard column routes as
the integer: :mod:`ddm_core.route.shards.coerce`). Without it, column-less INSERTs
into sharded tables are refused and values route as given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ddm_core.metadata.model import ShardedTable

__all__ = ["Column", "TableSchema", "declared_schema", "statement_tables", "column_kind"]

#: Integer types of MySQL / MariaDB (``BIGINT(20) UNSIGNED``, ``INT``...), PostgreSQL
#: (``integer``, ``int8``, ``bigserial``) and SQLite's usual declarations (``INTEGER``).
_INTEGER_TYPE = re.compile(r"\s*(?:(?:tiny|small|medium|big)?int(?:eger)?|int[248]|(?:small|big)?serial)\b", re.I)


#: Kinds of declared types whose values compare alike among themselves (the first match wins; integers first),
#: named as ``Dialect.key_kind`` names the kinds of a result's type codes.
_KINDS = tuple((kind, re.compile(pattern, re.I)) for kind, pattern in (
    ("decimal", r"\s*(?:decimal|numeric|dec|fixed)\b"),
    ("float", r"\s*(?:float|double|real)\b"),
    ("string", r"\s*(?:(?:tiny|medium|long)?(?:text|blob)|(?:national\s+)?(?:var)?char(?:acter)?|n?varchar|"
               r"(?:var)?binary|enum|set|json|uuid|inet[46])\b"),
    ("temporal", r"\s*(?:datetime|timestamp|date|time|year)\b"),
))


def column_kind(schema: TableSchema | None, name: str) -> str | None:
    """The kind of column ``name``'s declared type — ``integer``, ``decimal``, ``float``, ``string``, ``temporal``,
    else the type's first word (``bit``); ``None``: no schema, no such column or no declared type."""
    column = schema.column(name) if schema is not None else None
    if column is None or not column.type:
        return None
    if column.is_integer:
        return "integer"
    for kind, pattern in _KINDS:
        if pattern.match(column.type):
            return kind
    return column.type.split("(")[0].split()[0].lower()


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its name as the database spells it and its declared type (``""``: unknown)."""

    name: str
    type: str = ""

    @property
    def is_integer(self) -> bool:
        """Is the declared type an integer type (so MySQL compares a string with it as a number)?"""
        return bool(_INTEGER_TYPE.match(self.type))


@dataclass(frozen=True, slots=True)
class TableSchema:
    """The columns of one logic table, in table order.

    Attributes:
        table: The logic table.
        columns: Every column, in the order ``INSERT INTO t VALUES (...)`` fills them.
        primary_key: Primary-key column names, in key order (may be empty).
        origin: Where it came from, for messages: ``"ds_0.t_order_0"`` (loaded
            from that data node) or ``"the configuration"``.
    """

    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    origin: str = ""

    @classmethod
    def of(
        cls,
        table: str,
        columns: Iterable[tuple[str, str] | str],
        primary_key: Sequence[str] = (),
        origin: str = "",
    ) -> TableSchema:
        """A schema from plain values: ``TableSchema.of("t_order", [("order_id", "bigint"), "note"])``."""
        cols = tuple(Column(c) if isinstance(c, str) else Column(c[0], c[1] or "") for c in columns)
        return cls(table, cols, tuple(primary_key), origin)

    @property
    def names(self) -> tuple[str, ...]:
        """Column names in table order."""
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column | None:
        """The column called ``name`` (case-insensitive, as MySQL column names are), or ``None``."""
        lc = name.lower()
        for c in self.columns:
            if c.name.lower() == lc:
                return c
        return None

    def describe(self) -> str:
        """``t_order (order_id, user_id, amount) from ds_0.t_order_0`` — for messages."""
        where = f" from {self.origin}" if self.origin else ""
        return f"{self.table} ({', '.join(self.names)}){where}"


def declared_schema(table: ShardedTable) -> TableSchema | None:
    """The schema a native configuration declares for ``table`` (``columns:``), or ``None``.

    Each entry is ``name: {type: bigint, primaryKey: true}``, ``name: bigint``
    or ``name:`` (type unknown); the mapping's order is the column order.
    """
    if not table.columns:
        return None
    columns = []
    key = []
    for name, spec in table.columns.items():
        kind = ""
        if isinstance(spec, str):
            kind = spec
        elif isinstance(spec, Mapping):
            kind = str(spec.get("type") or "")
            if spec.get("primaryKey") is True:
                key.append(str(name))
        columns.append(Column(str(name), kind))
    return TableSchema(table.name, tuple(columns), tuple(key), "the configuration")


def statement_tables(statement: Any) -> frozenset[str] | None:
    """Logic tables (lower case) a compiled statement's plan depends on, or ``None`` when unknown.

    A schema change drops the cached plans of exactly these statements.
    """
    analysis = getattr(statement, "analysis", None)
    slots = getattr(analysis, "slots", None)
    if slots is None:
        return None
    names = set(slots)
    primary = getattr(analysis, "primary", None)
    if primary is not None:  # a binding table routes through its group's first table
        names.add(primary.name.lower())
    return frozenset(names)
