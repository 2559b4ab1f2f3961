"""PostgreSQL through psycopg 3 (optional): statements run, DDL is not written for it.

Merged results keep MySQL's typing (the base class defaults): PostgreSQL's own
``numeric`` scale for ``AVG`` and ``bigint`` ``SUM`` of ``int`` are not modelled.
"""

from __future__ import annotations

from typing import Any, Sequence

from ddm_core.dialects.base import Dialect

__all__ = ["PostgreSQL"]

#: SQLSTATE unique_violation.
UNIQUE_VIOLATION = "23505"
#: SQLSTATEs of a connection that is gone: connection_exception, connection_does_not_exist,
#: connection_failure, admin_shutdown.
CONNECTION_LOST = frozenset({"08000", "08003", "08006", "57P01"})


class PostgreSQL(Dialect):
    """PostgreSQL."""

    name = "postgresql"
    title = "PostgreSQL"
    sqlglot_name = "postgres"
    schemes = ("postgresql", "postgres")
    default_port = 5432
    driver_module = "psycopg"
    error_modules = ("psycopg",)
    paramstyle = "format"
    #: The wire protocol counts bind parameters in 16 bits.
    max_statement_params = 65535

    def supports_skip_locked(self, version: str | None) -> bool:
        """Every release ddm-core's driver (psycopg 3) connects to has it (since 9.5)."""
        return True

    def index_name(self, table: str, index: str) -> str:
        """Index names are per schema: prefixed with the physical table."""
        return f"{table}_{index}"

    def analyze_statement(self, tables: Sequence[str]) -> str:
        return "ANALYZE " + ", ".join(self.identifier(t) for t in tables)

    def table_columns_query(self, table: str) -> tuple[str, tuple[Any, ...]]:
        """``information_schema.columns`` of the current schema, primary-key positions joined in."""
        return (
            "SELECT c.column_name, c.data_type, COALESCE(k.ordinal_position, 0) "
            "FROM information_schema.columns c "
            "LEFT JOIN information_schema.table_constraints t ON t.table_schema = c.table_schema "
            "AND t.table_name = c.table_name AND t.constraint_type = 'PRIMARY KEY' "
            "LEFT JOIN information_schema.key_column_usage k ON k.constraint_schema = t.constraint_schema "
            "AND k.constraint_name = t.constraint_name AND k.column_name = c.column_name "
            "WHERE c.table_schema = current_schema() AND c.table_name = %s ORDER BY c.ordinal_position",
            (table,),
        )

    def exact_literal(self, text: str) -> bool:
        """PostgreSQL reads ``1.5`` and ``1.5e3`` alike as ``numeric``."""
        return True

    def is_duplicate_key(self, exc: BaseException, code: Any) -> bool:
        return bool(code == UNIQUE_VIOLATION)

    def is_disconnect(self, exc: BaseException, code: Any) -> bool:
        lost = code is None or code in CONNECTION_LOST
        return bool(type(exc).__name__ in ("OperationalError", "InterfaceError") and lost)
