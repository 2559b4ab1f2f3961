"""PEP 249's type objects and constructors, for the DB-API facades (:mod:`ddm_core.dbapi`).

Clients convert parameters with the module's constructors (SQLAlchemy's ``LargeBinary``
binds every value through ``dbapi.Binary``) and compare ``cursor.description`` type codes
with the type objects. The codes are MySQL's column types as PyMySQL reports them: the
facade passes the driver's description on and uses the same codes for the rows it
answers itself (:func:`ddm_core.session_facts.description_of`).
"""

from __future__ import annotations

import datetime
import time as _time
from typing import Any

__all__ = [
    "Date", "Time", "Timestamp", "DateFromTicks", "TimeFromTicks", "TimestampFromTicks", "Binary",
    "STRING", "BINARY", "NUMBER", "DATETIME", "ROWID",
]

Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime


def DateFromTicks(ticks: float) -> datetime.date:  # noqa: N802 - the name PEP 249 prescribes
    return datetime.date(*_time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> datetime.time:  # noqa: N802
    return datetime.time(*_time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> datetime.datetime:  # noqa: N802
    return datetime.datetime(*_time.localtime(ticks)[:6])


def Binary(value: Any) -> bytes:  # noqa: N802
    """``value`` as bytes: the drivers send bytes as a binary string."""
    return bytes(value)


class TypeSet(frozenset[int]):
    """A PEP 249 type object: equal to every column type code it stands for."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, frozenset):
            return frozenset.__eq__(self, other)
        return isinstance(other, int) and other in self

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return frozenset.__hash__(self)


# MySQL's column type codes (PyMySQL's FIELD_TYPE).
STRING = TypeSet({247, 253, 254})  # ENUM, VAR_STRING, STRING
BINARY = TypeSet({249, 250, 251, 252})  # the BLOB types
NUMBER = TypeSet({0, 1, 2, 3, 4, 5, 8, 9, 13, 16, 246})  # DECIMAL .. BIT, NEWDECIMAL
DATETIME = TypeSet({7, 10, 11, 12, 14})  # TIMESTAMP, DATE, TIME, DATETIME, NEWDATE
ROWID = TypeSet()
