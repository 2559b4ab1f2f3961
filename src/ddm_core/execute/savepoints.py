"""Savepoints of a transaction that spans several pinned connections.

A transaction pins one connection per data source as its statements reach them, so a savepoint
is a point in the whole transaction, not in one connection. ``SAVEPOINT`` runs on every
connection pinned so far; a connection pinned later sets every savepoint of the stack right
after its ``BEGIN`` (nothing of the transaction ran on it before, so each marks the same point
there as everywhere else). ``ROLLBACK TO SAVEPOINT`` and ``RELEASE SAVEPOINT`` then run on every
pinned connection, and the stack follows MySQL's rules: setting a name again moves it to the top,
rolling back to one keeps it and drops the later ones, releasing one drops it and the later ones
(docs/sqlalchemy.md#savepoints).

A migration's dual writes are not covered: rolling back to a savepoint after a dual write ran
would leave the copy ahead of the rows it copies, so it fails the transaction instead.
"""

from __future__ import annotations

import re

from ddm_core.errors import NoSuchSavepointError, TransactionError

__all__ = ["SAVEPOINT", "ROLLBACK_TO", "RELEASE", "Savepoints", "savepoint_name", "opens_transaction", "statement"]

SAVEPOINT, ROLLBACK_TO, RELEASE = "SAVEPOINT", "ROLLBACK TO SAVEPOINT", "RELEASE SAVEPOINT"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,63}\Z")


def savepoint_name(name: str) -> str:
    """``name`` when it is a plain identifier (no quote character: :func:`statement` quotes it safely).

    Raises:
        TransactionError: anything else.
    """
    if not isinstance(name, str) or _NAME.match(name) is None:
        raise TransactionError(
            f"savepoint name {name!r} is not a plain identifier (letters, digits, _ and $, at most 64)", savepoint=name
        )
    return name


class Savepoints:
    """The names of a transaction's savepoints, oldest first."""

    __slots__ = ("names",)

    def __init__(self) -> None:
        self.names: list[str] = []

    def check(self, command: str, name: str) -> None:
        """``command`` on ``name`` against the stack (nothing changes yet).

        Raises:
            NoSuchSavepointError: rolling back to or releasing a savepoint the transaction has not set.
        """
        if command != SAVEPOINT and name not in self.names:
            raise NoSuchSavepointError(f"SAVEPOINT {name} does not exist", savepoint=name)

    def apply(self, command: str, name: str) -> None:
        """The stack after ``command`` on ``name`` ran on every pinned connection."""
        if command == SAVEPOINT:
            if name in self.names:
                self.names.remove(name)
            self.names.append(name)
        else:
            at = self.names.index(name)
            del self.names[at + (1 if command == ROLLBACK_TO else 0) :]

    def replay(self, dialect: str) -> list[str]:
        """What a connection of ``dialect`` pinned now runs after its ``BEGIN``."""
        return [statement(SAVEPOINT, name, dialect) for name in self.names]


def statement(command: str, name: str, dialect: str) -> str:
    """``command`` on savepoint ``name`` as backend ``dialect`` reads it: the name always quoted, so a
    reserved word (``before``) is a name too (it holds no quote character: :func:`savepoint_name`)."""
    quote = '"' if dialect == "postgresql" else "`"
    return f"{command} {quote}{name}{quote}"


def opens_transaction(command: str, name: str, autocommit: bool) -> bool:
    """What a savepoint command does on a session with no transaction open, as on MySQL.

    Returns:
        ``True``: open the transaction first (``SAVEPOINT`` with autocommit off: the first statement
        opens it); ``False``: nothing to do (``SAVEPOINT`` in autocommit marks nothing).

    Raises:
        NoSuchSavepointError: ``ROLLBACK TO`` / ``RELEASE``: no such savepoint.
    """
    if command != SAVEPOINT:
        raise NoSuchSavepointError(f"SAVEPOINT {name} does not exist", savepoint=name)
    return not autocommit
