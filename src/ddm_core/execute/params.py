"""Parameter values a driver would bind wrongly or refuse, converted by that driver's adapter only.

Code written for PyMySQL passes ``bytes``-like values, ``Decimal`` and
``datetime`` parameters as they are; each backend gets them in the form it
stores, without touching any process-wide registry (another library in the same
process keeps the driver behaviour it expects):

* **PyMySQL** escapes ``bytes`` and ``bytearray`` as binary strings, but a type
  it has no encoder for falls back to ``str()`` — a ``memoryview`` went in as
  ``"<memory at 0x...>"``. :func:`teach_pymysql` adds encoders for
  ``memoryview`` (and ``bytearray`` inside sequences) to *one connection's own*
  encoder map, escaping them exactly as that connection escapes ``bytes``.
  Nothing runs per statement.
* **sqlite3** refuses ``Decimal``; the only way to teach it is
  ``sqlite3.register_adapter``, which changes every sqlite3 connection of the
  process. :class:`SQLiteCursor` converts instead: ``Decimal`` → its text,
  ``datetime`` → ``YYYY-MM-DD HH:MM:SS[.ffffff]``, ``date`` → ``YYYY-MM-DD``,
  ``time`` → ``HH:MM:SS[.ffffff]`` (as MySQL prints them), ``memoryview`` and
  ``bytearray`` → ``bytes`` (a BLOB, as sqlite3 binds ``bytes``).
"""

from __future__ import annotations

import datetime
import decimal
import sqlite3
import weakref
from typing import Any, Callable, Mapping

__all__ = ["teach_pymysql", "sqlite_params", "SQLiteCursor"]


def teach_pymysql(raw: Any) -> None:
    """Make one PyMySQL connection bind ``memoryview`` / ``bytearray`` as it binds ``bytes``."""
    ref = weakref.ref(raw)  # the connection holds the encoder: no reference cycle back to it

    def as_bytes(value: Any, mapping: Any = None) -> str:
        conn = ref()
        if conn is None:  # pragma: no cover - an encoder outliving its connection is never called
            raise ValueError("the connection this parameter was meant for is gone")
        return str(conn.escape(bytes(value), mapping))

    raw.encoders[memoryview] = as_bytes
    raw.encoders[bytearray] = as_bytes  # top-level bytearray is already bytes-like; this covers sequences


_SQLITE: dict[type, Callable[[Any], Any]] = {
    decimal.Decimal: str,
    datetime.datetime: lambda v: v.isoformat(" "),
    datetime.date: lambda v: v.isoformat(),
    datetime.time: lambda v: v.isoformat(),
    memoryview: bytes,
    bytearray: bytes,
}


def sqlite_params(params: Any) -> Any:
    """``params`` with every value sqlite3 would refuse or store differently converted (see the module)."""
    convert = _SQLITE
    if isinstance(params, Mapping):
        if not any(type(v) in convert for v in params.values()):
            return params
        return {k: convert[type(v)](v) if type(v) in convert else v for k, v in params.items()}
    for value in params:
        if type(value) in convert:
            break
    else:
        return params  # the common case: nothing to convert, nothing copied
    return tuple(convert[type(v)](v) if type(v) in convert else v for v in params)


class SQLiteCursor(sqlite3.Cursor):
    """A sqlite3 cursor that converts its parameters (``connection.cursor(SQLiteCursor)``)."""

    def execute(self, sql: str, parameters: Any = (), /) -> SQLiteCursor:
        super().execute(sql, sqlite_params(parameters))
        return self

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> SQLiteCursor:
        super().executemany(sql, (sqlite_params(p) for p in seq_of_parameters))
        return self
