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

    def index_name(self, table: str, index: str) -> str:
        """Index names are per schema: prefixed with the physical table."""
        return f"{table}_{index}"

    def analyze_statement(self, tables: Sequence[str]) -> str:
        return "ANALYZE " + ", ".join(self.identifier(t) for t in tables)

    def exact_literal(self, text: str) -> bool:
        """PostgreSQL reads ``1.5`` and ``1.5e3`` alike as ``numeric``."""
        return True

    def is_duplicate_key(self, exc: BaseException, code: Any) -> bool:
        return bool(code == UNIQUE_VIOLATION)

    def is_disconnect(self, exc: BaseException, code: Any) -> bool:
        lost = code is None or code in CONNECTION_LOST
        return bool(type(exc).__name__ in ("OperationalError", "InterfaceError") and lost)
