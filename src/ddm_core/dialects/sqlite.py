"""SQLite: embedded files reached through :mod:`sqlite3`; DDL is translated from MySQL."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable, Sequence

from ddm_core.dialects.base import Dialect

__all__ = ["SQLite"]

#: Extended result codes (``sqlite_errorname``) of a violated UNIQUE / PRIMARY KEY.
UNIQUE_CODES = frozenset({"SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"})
#: The file cannot be opened, or is not a database: the data source is unavailable.
CANTOPEN_CODES = frozenset({"SQLITE_CANTOPEN", "SQLITE_NOTADB"})
_MEMORY = ":memory:"


class SQLite(Dialect):
    """SQLite (a ``sqlite:///path`` data source is one database file)."""

    def narrows_by(self, values: Iterable[Any]) -> bool:
        # A list takes the column's affinity, a joined column compares numerically: a TEXT '1.0' is
        # not IN (1) but equals an INTEGER 1. Text values compare alike both ways.
        return all(isinstance(v, str) for v in values)

    name = "sqlite"
    title = "SQLite"
    sqlglot_name = "sqlite"  # sqlite_ddl.SQLGLOT_NAME; that module loads sqlglot, so only on use
    schemes = ("sqlite",)
    default_port = None
    driver_module = "sqlite3"
    error_modules = ("sqlite3", "_sqlite3")
    paramstyle = "qmark"
    writes_ddl = True
    #: SQLite's ``sum()`` of integers is an integer.
    sum_of_integers_is_decimal = False
    #: One writer per database file: nothing to lock row by row, ``FOR UPDATE`` is a syntax error.
    locks_rows = False
    #: ``SQLITE_MAX_VARIABLE_NUMBER`` of the builds Python ships (999 before SQLite 3.32).
    max_statement_params = 32766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999

    def index_name(self, table: str, index: str) -> str:
        """SQLite index names are per database: prefixed with the physical table."""
        from ddm_core.dialects.sqlite_ddl import sqlite_index_name

        return sqlite_index_name(table, index)

    def ddl_statements(self, sql: str) -> list[str]:
        """See :mod:`ddm_core.dialects.sqlite_ddl` (inline indexes split out, options dropped...)."""
        from ddm_core.dialects.sqlite_ddl import to_sqlite

        return to_sqlite(sql)

    def analyze_statement(self, tables: Sequence[str]) -> str:
        return "ANALYZE"  # refreshes every table of the database file

    def table_columns_query(self, table: str) -> tuple[str, tuple[Any, ...]]:
        """``PRAGMA table_info`` as a table-valued function (its ``pk`` is the key position)."""
        return "SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid", (table,)

    def exact_literal(self, text: str) -> bool:
        """SQLite reads every literal with a fraction or exponent as REAL."""
        return False

    def string_literal(self, text: str) -> str:
        """A backslash is an ordinary character in SQLite strings."""
        return "'" + text.replace("'", "''") + "'"

    def listed_tables(self) -> tuple[str, str, str]:
        """``sqlite_master``, without SQLite's own tables (``sqlite_sequence``, ``sqlite_stat1``...)."""
        return (
            "name",
            "CASE type WHEN 'view' THEN 'VIEW' ELSE 'BASE TABLE' END",
            "FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite^_%' ESCAPE '^'",
        )

    def binary_order(self, expr: str) -> str:
        return f"CAST({expr} AS BLOB)"

    def exact_average(self, total: Decimal, count: Any) -> Decimal | float:
        """SQLite's ``avg()`` is always REAL, so the merged AVG is a float too."""
        average: float = float(total) / count
        return average

    def connections_share_data(self, database: str | None) -> bool:
        """Every connection to ``:memory:`` opens its own empty database."""
        return (database or _MEMORY) != _MEMORY

    def prepare_storage(self, database: str | None) -> None:
        """Create the database file's directory (the file itself comes with the first connection)."""
        if database and database != _MEMORY:
            Path(database).parent.mkdir(parents=True, exist_ok=True)

    def is_duplicate_key(self, exc: BaseException, code: Any) -> bool:
        if code in UNIQUE_CODES:
            return True
        # Without an extended code (Python < 3.11) only the message tells.
        return bool(code is None and "UNIQUE constraint failed" in str(exc))

    def is_disconnect(self, exc: BaseException, code: Any) -> bool:
        if code in CANTOPEN_CODES:
            return True
        return bool(code is None and "unable to open database file" in str(exc))
