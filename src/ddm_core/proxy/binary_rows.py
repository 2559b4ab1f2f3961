"""How a multi-unit read's text rows reach a prepared statement's client: each column's binary form.

A multi-unit read's units go to the data sources as text (COM_QUERY), so they answer with text rows; a
prepared statement's client (COM_STMT_EXECUTE) reads binary rows. The decoded path reads each text value
into a Python value (PyMySQL's converters) and the row writer encodes it for the column the client was
announced (:func:`~ddm_core.proxy.row_writer.binary_plan`). The relay converts the text itself
(``ResultRelay.convert``, docs/proxy.md#multi-unit-reads-on-the-loop) where that gives the same bytes:
:func:`conversions` picks each column's kind from the data source's definition of it and the client's
column, or says the rows must be decoded (``None``) when one column's would differ:

* a column whose client announcement encodes otherwise than its text is read (an integer announced
  UNSIGNED but signed on the data source, a string announced binary whose values PyMySQL reads as text,
  a type announced other than the one answered): the row writer's bytes depend on the Python value;
* an ENUM / SET or another type MariaDB does not answer with (PyMySQL reads them as ASCII).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from mysql_mimic import ColumnType

from ddm_core._fast import SELECTED
from ddm_core.proxy.columns import BINARY, Column
from ddm_core.proxy.row_writer import binary_plan

if TYPE_CHECKING:
    from ddm_core._fast import relay, rowwriter
else:
    relay, rowwriter = SELECTED.relay, SELECTED.rowwriter

__all__ = ["conversions"]

_UNSIGNED = 0x20
#: Integer types by their signed row-writer kind (the unsigned one is the next), as Column.wire packs them
_INTEGERS = {ColumnType.TINY: rowwriter.INT8, ColumnType.SHORT: rowwriter.INT16, ColumnType.YEAR: rowwriter.INT16,
             ColumnType.INT24: rowwriter.INT32, ColumnType.LONG: rowwriter.INT32,
             ColumnType.LONGLONG: rowwriter.INT64}  # fmt: skip
#: Types whose text PyMySQL hands over as it is (``bytes`` when the character set is binary, else the
#: connection's utf8mb4 decoded: the row writer writes either back as the same bytes)
_STRINGS = frozenset({ColumnType.BIT, ColumnType.BLOB, ColumnType.LONG_BLOB, ColumnType.MEDIUM_BLOB, ColumnType.STRING,
                      ColumnType.TINY_BLOB, ColumnType.VAR_STRING, ColumnType.VARCHAR,
                      ColumnType.GEOMETRY})  # fmt: skip
#: (data source type, the row writer's kind for the client's column) -> the relay's conversion
_OTHERS = {
    (ColumnType.DECIMAL, rowwriter.STRING): relay.AS_DECIMAL,
    (ColumnType.NEWDECIMAL, rowwriter.STRING): relay.AS_DECIMAL,
    (ColumnType.FLOAT, rowwriter.FLOAT): relay.AS_FLOAT,
    (ColumnType.DOUBLE, rowwriter.DOUBLE): relay.AS_DOUBLE,
    (ColumnType.DATE, rowwriter.DATETIME): relay.AS_DATETIME,
    (ColumnType.DATETIME, rowwriter.DATETIME): relay.AS_DATETIME,
    (ColumnType.TIMESTAMP, rowwriter.DATETIME): relay.AS_DATETIME,
    (ColumnType.TIME, rowwriter.TIME): relay.AS_TIME,
    (ColumnType.JSON, rowwriter.STRING): relay.AS_STRING,  # MySQL's (MariaDB answers a LONGTEXT): always text
}


def conversions(definitions: Sequence[bytes], columns: Sequence[Column]) -> bytes | None:
    """One ``AS_*`` kind per column (``ResultRelay.convert``'s) for rows answered with ``definitions`` and
    announced to the client as ``columns``; ``None``: some column's values are decoded (module docstring)."""
    if len(definitions) != len(columns):
        return None
    kinds = bytearray()
    for definition, column, written in zip(definitions, columns, binary_plan(columns).kinds):
        kind = _conversion(definition, column, written)
        if kind is None:
            return None
        kinds.append(kind)
    return bytes(kinds)


def _conversion(definition: bytes, column: Column, written: int) -> int | None:
    """The conversion of one column's text to the bytes the row writer writes (kind ``written``) for it."""
    # a result's column definition ends in its fixed fields: 0x0C, character set (2), length (4), type,
    # flags (2), decimals, filler (2)
    if len(definition) < 13 or definition[-13] != 0x0C:
        return None
    charset = definition[-12] | definition[-11] << 8
    code = definition[-6]
    flags = definition[-5] | definition[-4] << 8
    integer = _INTEGERS.get(code)  # a byte: the IntEnum keys hash as ints
    if integer is not None:
        packed = integer + (1 if flags & _UNSIGNED else 0)
        return relay.AS_INT8 + packed - rowwriter.INT8 if written == packed else None
    if code in _STRINGS:
        # STRING writes str encoded and bytes as they are; BYTES takes bytes only (a binary character set)
        if written == rowwriter.STRING or (written == rowwriter.BYTES and charset == BINARY):
            return relay.AS_STRING
        return None
    if code == ColumnType.NULL:
        return relay.AS_NULL if column.type == ColumnType.NULL else None
    return _OTHERS.get((code, written))
