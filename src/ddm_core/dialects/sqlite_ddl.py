"""MySQL DDL → SQLite DDL: what :meth:`SQLite.ddl_statements <ddm_core.dialects.sqlite.SQLite.ddl_statements>` runs.

SQLite accepts most MySQL column types as written and gives them an affinity;
what it lacks is translated or refused:

* column comments, character sets, collations, ``ON UPDATE`` and table
  options (``ENGINE``, ``CHARSET``, ``COMMENT``) are dropped; ``ENUM`` / ``SET``
  become ``TEXT``;
* inline ``KEY`` / named ``UNIQUE KEY`` definitions and ``ALTER TABLE ... ADD
  INDEX`` become ``CREATE [UNIQUE] INDEX <physical table>_<index>``
  (:func:`sqlite_index_name`): SQLite index names are per database, not per
  table, so the physical tables of one logic table need distinct names;
* ``TRUNCATE`` becomes ``DELETE FROM``;
* ``AUTO_INCREMENT``, ``FULLTEXT`` / ``SPATIAL`` indexes and ``ALTER TABLE``
  other than ADD / DROP COLUMN and indexes are refused.
"""

from __future__ import annotations

from typing import Iterable

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ddm_core._text import first_line, shorten_sql
from ddm_core.dialects.base import INPUT
from ddm_core.errors import UnsupportedSQLError

__all__ = ["to_sqlite", "sqlite_index_name", "SQLGLOT_NAME"]

#: sqlglot's name for the SQLite dialect the statements are generated in.
SQLGLOT_NAME = "sqlite"


def sqlite_index_name(table: str, index: str) -> str:
    """The SQLite name of MySQL index ``index`` of ``table`` (SQLite index names are per database)."""
    return f"{table}_{index}"


def _index_sql(table: str, index: str) -> str:
    """The physical index name as SQL (quoted only when it has to be)."""
    return exp.to_identifier(sqlite_index_name(table, index)).sql(SQLGLOT_NAME)


_DROP_COLUMN_CONSTRAINTS = (
    exp.CommentColumnConstraint,
    exp.OnUpdateColumnConstraint,
    exp.CharacterSetColumnConstraint,
    exp.CollateColumnConstraint,
)


def to_sqlite(sql: str) -> list[str]:
    """One routed MySQL DDL statement (physical table names) → SQLite statements.

    Column types are kept as written (SQLite accepts ``BIGINT UNSIGNED``,
    ``DECIMAL(18, 2)``, ``DATETIME(3)`` and gives them their affinity;
    ``ENUM`` / ``SET`` become ``TEXT``); column comments, character sets,
    collations, ``ON UPDATE`` and table options are dropped; inline and
    ``ALTER TABLE ... ADD`` indexes become ``CREATE [UNIQUE] INDEX`` named by
    :func:`sqlite_index_name`; ``TRUNCATE`` becomes ``DELETE FROM``.

    Raises:
        UnsupportedSQLError: a construct SQLite has no equivalent for
            (``MODIFY COLUMN``, ``FULLTEXT``, ``AUTO_INCREMENT``...).
    """
    try:
        tree = sqlglot.parse_one(sql, read=INPUT)
    except SqlglotError as exc:
        raise UnsupportedSQLError(f"cannot parse {shorten_sql(sql)!r}: {first_line(exc)}", sql=sql) from exc
    if isinstance(tree, exp.Create):
        kind = (tree.args.get("kind") or "").upper()
        if kind == "TABLE" and isinstance(tree.this, exp.Schema) and tree.expression is None:
            return _sqlite_create_table(tree)
        if kind == "INDEX" and isinstance(tree.this, exp.Index):
            return [_sqlite_create_index(tree)]
        if kind == "TABLE":
            tree.set("properties", None)
            return [tree.sql(SQLGLOT_NAME)]
    elif isinstance(tree, exp.Drop):
        kind = (tree.args.get("kind") or "").upper()
        if kind == "TABLE":
            return [tree.sql(SQLGLOT_NAME)]
        on = tree.args.get("cluster")  # DROP INDEX i ON t
        if kind == "INDEX" and isinstance(on, exp.OnProperty) and isinstance(on.this, exp.Table):
            exists = "IF EXISTS " if tree.args.get("exists") else ""
            return [
                f"DROP INDEX {exists}{_index_sql(on.this.name, i.name)}" for i in tree.args.get("tables") or []
            ]
    elif isinstance(tree, exp.TruncateTable):
        return [f"DELETE FROM {t.sql(SQLGLOT_NAME)}" for t in tree.expressions]
    elif isinstance(tree, exp.Alter) and isinstance(tree.this, exp.Table):
        return _sqlite_alter(tree)
    raise UnsupportedSQLError(f"{shorten_sql(sql)!r} has no SQLite translation", sql=sql, construct=tree.key.upper())


def _sqlite_column(col: exp.ColumnDef) -> None:
    for c in list(col.constraints):
        kind = c.args.get("kind")
        if isinstance(kind, exp.AutoIncrementColumnConstraint):
            raise UnsupportedSQLError(
                f"AUTO_INCREMENT on column {col.name!r} is not translated for SQLite; use a key generator",
                column=col.name,
                construct="AUTO_INCREMENT",
            )
        if isinstance(kind, _DROP_COLUMN_CONSTRAINTS):
            c.pop()
    dtype = col.args.get("kind")
    if isinstance(dtype, exp.DataType):
        if dtype.this in (exp.DataType.Type.ENUM, exp.DataType.Type.SET):
            text = "TEXT"
        else:
            text = dtype.sql(INPUT)
        col.set("kind", exp.DataType(this=exp.DataType.Type.USERDEFINED, kind=text))
    col.set("position", None)


def _index_columns(expressions: Iterable[exp.Expression]) -> str:
    cols = []
    for e in expressions:
        # name(10), a prefix (ColumnPrefix in a table, Anonymous in CREATE INDEX): SQLite indexes whole values
        inner = e.this if isinstance(e, exp.Ordered) else e
        if isinstance(inner, exp.ColumnPrefix) or (
            isinstance(inner, exp.Anonymous) and len(inner.expressions) == 1 and inner.expressions[0].is_int
        ):
            column = exp.column(inner.this.copy() if isinstance(inner, exp.ColumnPrefix) else inner.name)
            if isinstance(e, exp.Ordered):
                e = e.copy()
                e.set("this", column)
            else:
                e = column
        cols.append(e.sql(SQLGLOT_NAME))
    return ", ".join(cols)


def _index_from_constraint(table: exp.Table, node: exp.Expression, exists: bool = False) -> str | None:
    """``CREATE [UNIQUE] INDEX`` for an inline ``KEY`` / named ``UNIQUE KEY``; ``None`` to keep it inline."""
    if isinstance(node, exp.IndexColumnConstraint):
        kind = (node.args.get("kind") or "").upper()
        if kind in ("FULLTEXT", "SPATIAL"):
            raise UnsupportedSQLError(f"{kind} index {node.name!r} has no SQLite equivalent", construct=kind)
        name = node.name or "_".join(c.name for c in node.expressions)
        unique = "UNIQUE " if kind == "UNIQUE" else ""
        cols = _index_columns(node.expressions)
    elif isinstance(node, exp.UniqueColumnConstraint) and isinstance(node.this, exp.Schema) and node.this.this:
        name = node.this.this.name
        unique = "UNIQUE "
        cols = _index_columns(node.this.expressions)
    else:
        return None
    guard = "IF NOT EXISTS " if exists else ""
    return f"CREATE {unique}INDEX {guard}{_index_sql(table.name, name)} ON {table.sql(SQLGLOT_NAME)} ({cols})"


def _sqlite_create_table(tree: exp.Create) -> list[str]:
    schema = tree.this
    table = schema.this
    exists = bool(tree.args.get("exists"))
    indexes: list[str] = []
    for node in list(schema.expressions):
        if isinstance(node, exp.ColumnDef):
            _sqlite_column(node)
            continue
        index = _index_from_constraint(table, node, exists)
        if index is not None:
            indexes.append(index)
            node.pop()
    tree.set("properties", None)
    return [tree.sql(SQLGLOT_NAME, pretty=True), *indexes]


def _sqlite_create_index(tree: exp.Create) -> str:
    index = tree.this
    table = index.args.get("table")
    params = index.args.get("params")
    columns = params.args.get("columns") if params is not None else None
    if not isinstance(table, exp.Table) or not columns:
        raise UnsupportedSQLError(f"{tree.sql(INPUT)!r} has no SQLite translation", construct="CREATE INDEX")
    unique = "UNIQUE " if tree.args.get("unique") else ""
    exists = "IF NOT EXISTS " if tree.args.get("exists") else ""
    name = _index_sql(table.name, index.name)
    return f"CREATE {unique}INDEX {exists}{name} ON {table.sql(SQLGLOT_NAME)} ({_index_columns(columns)})"


def _sqlite_alter(tree: exp.Alter) -> list[str]:
    table = tree.this
    prefix = f"ALTER TABLE {table.sql(SQLGLOT_NAME)}"
    out: list[str] = []
    for action in tree.args.get("actions") or []:
        if isinstance(action, exp.ColumnDef):
            _sqlite_column(action)
            out.append(f"{prefix} ADD COLUMN {action.sql(SQLGLOT_NAME)}")
        elif isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "COLUMN":
            for col in action.args.get("tables") or []:
                out.append(f"{prefix} DROP COLUMN {col.sql(SQLGLOT_NAME)}")
        elif isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "INDEX":
            exists = "IF EXISTS " if action.args.get("exists") else ""
            for idx in action.args.get("tables") or []:
                out.append(f"DROP INDEX {exists}{_index_sql(table.name, idx.name)}")
        elif isinstance(action, exp.AddConstraint):
            for node in action.expressions:
                index = _index_from_constraint(table, node)
                if index is None:
                    raise UnsupportedSQLError(
                        f"ALTER TABLE {table.name} ADD {node.sql(INPUT)} has no SQLite translation",
                        construct="ALTER TABLE ADD CONSTRAINT",
                    )
                out.append(index)
        else:
            raise UnsupportedSQLError(
                f"ALTER TABLE {table.name} {action.sql(INPUT)} has no SQLite translation "
                "(SQLite alters only by ADD / DROP COLUMN and indexes)",
                construct=f"ALTER TABLE {action.key.upper()}",
            )
    return out
