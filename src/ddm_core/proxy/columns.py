"""DB-API column descriptions → mysql-mimic result columns (the wire types clients decode by).

A MySQL or MariaDB data source's description carries the server's field type
(PyMySQL's ``type_code`` is the protocol's number), so it is passed on as it
is. SQLite and PostgreSQL codes mean nothing in MySQL's protocol: there the
type is taken from the first non-NULL value of the first batch, as mimic
would. ``bytes`` values get the binary character set, so clients hand them
back as bytes.
"""

from __future__ import annotations

from typing import Any, Sequence

from mysql_mimic import ColumnType, ResultColumn
from mysql_mimic.charset import CharacterSet
from mysql_mimic.results import infer_type

__all__ = ["result_columns", "text_columns"]

_WIRE_TYPES = frozenset(int(t) for t in ColumnType)
#: Types mimic has no text encoder for: sent as the nearest type that has one.
_STAND_INS = {
    ColumnType.TIMESTAMP2: ColumnType.TIMESTAMP,
    ColumnType.DATETIME2: ColumnType.DATETIME,
    ColumnType.TIME2: ColumnType.TIME,
    ColumnType.TYPED_ARRAY: ColumnType.BLOB,
    ColumnType.INVALID: ColumnType.VAR_STRING,
}


def _first_value(rows: Sequence[Sequence[Any]], index: int) -> Any:
    for row in rows:
        if row[index] is not None:
            return row[index]
    return None


def result_columns(description: Sequence[Sequence[Any]], first_rows: Sequence[Sequence[Any]]) -> list[ResultColumn]:
    """Columns for ``description``; ``first_rows`` (possibly empty) settle types and character sets."""
    columns: list[ResultColumn] = []
    for i, desc in enumerate(description):
        name = str(desc[0])
        sample = _first_value(first_rows, i)
        code = desc[1]
        if isinstance(code, int) and not isinstance(code, bool) and code in _WIRE_TYPES:
            wire = ColumnType(code)
            wire = _STAND_INS.get(wire, wire)
            if wire is ColumnType.NULL and sample is not None:
                wire = infer_type(sample)
        elif sample is not None:
            wire = infer_type(sample)
        else:
            wire = ColumnType.VAR_STRING if first_rows else ColumnType.NULL
        charset = CharacterSet.binary if isinstance(sample, (bytes, bytearray)) else CharacterSet.utf8mb4
        columns.append(ResultColumn(name=name, type=wire, character_set=charset))
    return columns


def text_columns(names: Sequence[str]) -> list[ResultColumn]:
    """String columns, for the answers the proxy makes itself (probes, SHOW, PREVIEW)."""
    return [ResultColumn(name=n, type=ColumnType.VAR_STRING) for n in names]
