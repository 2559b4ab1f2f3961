"""Transaction isolation levels: the four SQL names, in the spelling every server accepts.

A transaction may ask for a level (a DB-API connection's ``SET SESSION TRANSACTION ISOLATION
LEVEL``, SQLAlchemy's ``isolation_level=``); each pinned connection then opens its transaction
at that level (:meth:`Driver.begin <ddm_core.execute.drivers.Driver.begin>`): MySQL and MariaDB
with ``SET TRANSACTION ISOLATION LEVEL`` for the next transaction only, PostgreSQL with
``BEGIN ISOLATION LEVEL``; SQLite's transactions are always serializable and take no level
(docs/sqlalchemy.md#isolation-levels). Nothing outlives the transaction on a pooled connection.
"""

from __future__ import annotations

from ddm_core.errors import TransactionCharacteristicsError, TransactionError

__all__ = ["ISOLATION_LEVELS", "isolation_level", "characteristics", "refuse_characteristics", "SNAPSHOT", "READ_ONLY", "READ_WRITE"]

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


#: ``START TRANSACTION``'s characteristics (MySQL's and MariaDB's), in the order they are written back.
SNAPSHOT, READ_ONLY, READ_WRITE = "WITH CONSISTENT SNAPSHOT", "READ ONLY", "READ WRITE"


def characteristics(text: str) -> str:
    """``START TRANSACTION``'s characteristic list (``"read only"``, ``"WITH CONSISTENT SNAPSHOT, READ ONLY"``)
    in one spelling: each once, the snapshot first; ``""`` for none.

    Raises:
        TransactionCharacteristicsError: an unknown characteristic, or both READ ONLY and READ WRITE (MariaDB
            refuses that too).
    """
    given = {" ".join(part.upper().split()) for part in text.split(",")} - {""}
    unknown = given - {SNAPSHOT, READ_ONLY, READ_WRITE}
    if unknown:
        raise TransactionCharacteristicsError(
            f"START TRANSACTION {text}: unknown characteristic {', '.join(sorted(unknown))} "
            f"(one or more of {SNAPSHOT}, {READ_ONLY}, {READ_WRITE})", characteristics=text,
        )  # fmt: skip
    if {READ_ONLY, READ_WRITE} <= given:
        raise TransactionCharacteristicsError(
            f"START TRANSACTION {text}: a transaction is READ ONLY or READ WRITE, not both", characteristics=text
        )
    return ", ".join(c for c in (SNAPSHOT, READ_ONLY, READ_WRITE) if c in given)


def refuse_characteristics(dialect: str, characteristics: str) -> None:
    """A driver that cannot open a transaction with ``characteristics`` (when any): say so before sending anything.

    Raises:
        TransactionCharacteristicsError: naming the characteristics and the dialect.
    """
    if characteristics:
        raise TransactionCharacteristicsError(
            f"START TRANSACTION {characteristics} is not supported on {dialect} data sources", characteristics=characteristics
        )  # fmt: skip
