"""The text of a MySQL statement with its values in it, as PyMySQL's ``Cursor.execute`` sends it.

A unit sent without a cursor (:meth:`MySQLDriver.send_read
<ddm_core.execute.drivers.MySQLDriver.send_read>`, a multi-unit read sent from the proxy's loop) still
sends exactly PyMySQL's text: an ``int`` is written as its ``str()`` (what PyMySQL's ``escape_int`` returns,
without the three calls that reach it), every other value goes through the connection's own ``escape``,
which knows its character set, ``NO_BACKSLASH_ESCAPES`` (the server's status flags), the ``_binary``
prefix for bytes and the encoders this connection was taught (``memoryview``, ``bytearray``:
:func:`~ddm_core.execute.params.teach_pymysql`). A mapping or a lone value takes PyMySQL's own
``_mogrify``. tests/test_mysql_query.py compares the text with PyMySQL's and what the server reads back.
"""

from __future__ import annotations

import struct
from typing import Any

from ddm_core._fast import SELECTED

__all__ = ["query_text", "query_bytes", "QUERY_HEAD", "MAX_QUERY"]

#: A COM_QUERY packet's head: its 3-byte length, sequence id 0 and the command byte (``(length + 1, 3)``).
QUERY_HEAD = struct.Struct("<iB").pack
#: Statements this long (bytes) or longer span several packets: PyMySQL's ``_execute_command`` splits them.
MAX_QUERY = 0xFFFFFF - 1

_filled_text = SELECTED.literals.filled_text
_INT = {int}  # exactly int: a bool is written as PyMySQL writes it (1 / 0), by escape


def query_text(raw: Any, sql: str, params: Any) -> str:
    """``sql`` (``%s`` marks, literal ``%`` doubled) with ``params`` in it, escaped by PyMySQL connection ``raw``."""
    if params is None:
        return sql
    kind = type(params)
    if kind is tuple or kind is list:
        if set(map(type, params)) <= _INT:  # ints only (a range's bounds, ids): str() each, at C speed
            return sql % tuple(map(str, params))
        escape = raw.escape
        return sql % tuple([str(p) if type(p) is int else escape(p) for p in params])
    return raw.cursor()._mogrify(sql, params)  # type: ignore[no-any-return]  # PyMySQL's own, for the rare shapes


def query_bytes(raw: Any, sql: str, params: Any) -> bytes:
    """:func:`query_text` encoded as ``raw`` sends it; a text whose values are all integers (a range's bounds, ids:
    the usual) written by the compiled ``literals`` unit (``filled_text``) without a format or an encode."""
    if params is not None:
        filled: bytes | None = _filled_text(sql, params)
        if filled is not None:
            return filled
    return query_text(raw, sql, params).encode(raw.encoding)
