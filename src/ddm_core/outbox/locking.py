"""How the relay locks the rows it claims, per server: ``FOR UPDATE SKIP LOCKED`` where there is one.

``SKIP LOCKED`` (MariaDB 10.6+, MySQL 8.0.1+, PostgreSQL) lets several relays
scan one message table at once, each taking rows the others have not locked.
An older server gets ``FOR UPDATE``: still correct, the relays then take turns.
A backend without row locks (SQLite: one writer per file) gets no clause. The
dialect answers both (:attr:`~ddm_core.dialects.Dialect.locks_rows`,
:meth:`~ddm_core.dialects.Dialect.supports_skip_locked`).
"""

from __future__ import annotations

from ddm_core.dialects import dialect_for

__all__ = ["SKIP_LOCKED", "FOR_UPDATE", "lock_clause"]

SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"
FOR_UPDATE = " FOR UPDATE"


def lock_clause(dialect: str, version: str | None) -> str:
    """The locking clause for a server of ``dialect`` reporting ``VERSION()`` = ``version``."""
    backend = dialect_for(dialect)
    if not backend.locks_rows:
        return ""
    return SKIP_LOCKED if backend.supports_skip_locked(version) else FOR_UPDATE
