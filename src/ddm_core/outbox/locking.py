"""How the relay locks the rows it claims, per server: ``FOR UPDATE SKIP LOCKED`` where there is one.

``SKIP LOCKED`` (MariaDB 10.6+, MySQL 8.0.1+) lets several relays scan one
message table at once, each taking rows the others have not locked. An older
server gets ``FOR UPDATE``: still correct, the relays then take turns. SQLite
has no row locks (one writer per file): no clause.
"""

from __future__ import annotations

import re

__all__ = ["SKIP_LOCKED", "FOR_UPDATE", "lock_clause"]

SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"
FOR_UPDATE = " FOR UPDATE"
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def lock_clause(dialect: str, version: str | None) -> str:
    """The locking clause for a server of ``dialect`` reporting ``VERSION()`` = ``version``."""
    if dialect == "sqlite":
        return ""
    found = _VERSION.search(version or "")
    if found is None:
        return FOR_UPDATE  # unknown: the clause every MySQL-family server has
    release = tuple(int(part) for part in found.groups())
    if "mariadb" in (version or "").lower():
        return SKIP_LOCKED if release >= (10, 6, 0) else FOR_UPDATE
    return SKIP_LOCKED if release >= (8, 0, 1) else FOR_UPDATE
