"""``AUTO_INCREMENT`` on a sharded table is refused: its physical tables would each count on their own.

Every path that sends DDL checks it here: the router (DDL through the executor, the DB-API facade,
SQLAlchemy's ``create_all``, the proxy) and ``ddm ddl``. A column a key generator fills needs no
``AUTO_INCREMENT``; any other column needs one configured (docs/architecture.md#keys-come-from-the-id-generator).
"""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp

from ddm_core.errors import UnsupportedSQLError
from ddm_core.metadata.model import ShardingConfig, TableKind

__all__ = ["refuse_auto_increment", "main_table"]


def main_table(tree: exp.Expression) -> str | None:
    """The table a ``CREATE`` / ``ALTER`` defines or changes (``CREATE INDEX``: its table)."""
    target: Any = tree.this if isinstance(tree, (exp.Create, exp.Alter)) else None
    if isinstance(target, exp.Schema):
        target = target.this
    if isinstance(target, exp.Index):
        target = target.args.get("table")
    return target.name if isinstance(target, exp.Table) else None


def refuse_auto_increment(config: ShardingConfig, tree: exp.Expression, where: str) -> None:
    """Raise when ``tree`` gives a sharded table an ``AUTO_INCREMENT`` / ``SERIAL`` column or table option.

    Args:
        where: What the statement is, for the message (``"schema.sql statement 3"``).

    Raises:
        UnsupportedSQLError: naming the table, the column and the key generator to use.
    """
    main = main_table(tree)
    if main is None or config.kind_of(main) is not TableKind.SHARDED:
        return
    column = _auto_increment_column(tree)
    if column is None:
        return
    table = config.table(main)
    assert table is not None
    raise UnsupportedSQLError(
        f"{where}: {column} on sharded table {table.name!r} uses AUTO_INCREMENT: each of its "
        f"{table.shard_count} physical tables would count on its own and hand out the same ids "
        f"across shards. Drop AUTO_INCREMENT; {_key_generator_hint(table, column)}",
        table=table.name,
        column=column,
        construct="AUTO_INCREMENT",
    )


def _auto_increment_column(tree: exp.Expression) -> str | None:
    """``"column 'id'"`` for the first AUTO_INCREMENT / SERIAL column, ``"the table"`` for the option."""
    for constraint in tree.find_all(exp.AutoIncrementColumnConstraint):
        col = constraint.find_ancestor(exp.ColumnDef)
        return f"column {col.name!r}" if col is not None else "a column"
    for dtype in tree.find_all(exp.DataType):
        if dtype.this in (exp.DataType.Type.SERIAL, exp.DataType.Type.BIGSERIAL, exp.DataType.Type.SMALLSERIAL):
            col = dtype.find_ancestor(exp.ColumnDef)
            return f"column {col.name!r} (SERIAL)" if col is not None else "a SERIAL column"
    if any(True for _ in tree.find_all(exp.AutoIncrementProperty)):
        return "the table option"
    return None


def _key_generator_hint(table: Any, column: str) -> str:
    kg = table.key_generation
    if kg is not None:
        return (
            f"the router fills {kg.column!r} from key generator {kg.generator.name!r} "
            f"({kg.generator.type}) on every INSERT"
        )
    name = re.search(r"'([^']+)'", column)
    col = name.group(1) if name else "id"
    return (
        f"no key generator is configured for {table.name!r}: add one for {col!r} "
        f"(keyGenerator: {{column: {col}, type: snowflake}} in ddm-core's format, "
        "keyGenerateStrategy in ShardingSphere's) so the router fills it on INSERT"
    )
