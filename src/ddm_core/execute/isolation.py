"""Transaction isolation levels: the four SQL names, in the spelling every server accepts.

A transaction may ask for a level (a DB-API connection's ``SET SESSION TRANSACTION ISOLATION
LEVEL``, SQLAlchemy's ``isolation_level=``); each pinned connection then opens its transaction
at that level (:meth:`Driver.begin <ddm_core.execute.drivers.Driver.begin>`): MySQL and MariaDB
with ``SET TRANSACTION ISOLATION LEVEL`` for the next transaction only, PostgreSQL with
``BEGIN ISOLATION LEVEL``; SQLite's transactions are always serializable and take no level
(docs/sqlalchemy.md#isolation-levels). Nothing outlives the transaction on a pooled connection.
"""

from __future__ import annotations

from ddm_core.errors import TransactionError

__all__ = ["ISOLATION_LEVELS", "isolation_level"]

#: The levels, as ``SET TRANSACTION ISOLATION LEVEL`` spells them.
ISOLATION_LEVELS = ("READ UNCOMMITTED", "READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE")


def isolation_level(name: str) -> str:
    """``name`` (``"repeatable read"``, ``"REPEATABLE-READ"``, ``"READ_COMMITTED"``) as one of :data:`ISOLATION_LEVELS`.

    Raises:
        TransactionError: ``name`` is not an isolation level.
    """
    level = " ".join(name.replace("-", " ").replace("_", " ").upper().split())
    if level not in ISOLATION_LEVELS:
        raise TransactionError(
            f"unknown transaction isolation level {name!r} (one of {', '.join(ISOLATION_LEVELS)})", level=name
        )
    return level
