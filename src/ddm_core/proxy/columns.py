"""Result columns on the wire: what a column-definition packet says, and how values are encoded.

A :class:`Column` is one column-definition packet: name, MySQL type, character
set, display length, flags, decimals and the table it comes from. Two sources:

* a data source's own definition, read by :mod:`ddm_core.proxy.described` at
  prepare time (``COM_STMT_PREPARE`` on the backend): everything MariaDB would
  have announced, flags (``UNSIGNED``, ``BINARY``, ``NOT NULL``) included;
* a DB-API description, as every executed result has one. A MySQL or MariaDB
  data source's carries the server's field type (PyMySQL's ``type_code`` is the
  protocol's number), display length, scale and (its items are
  :class:`~ddm_core.execute.pymysql_results.ColumnDescription`) the UNSIGNED flag, so
  they are passed on: an unsigned integer is announced and encoded unsigned. SQLite
  and PostgreSQL codes mean nothing in MySQL's protocol: there the type is taken
  from the first non-NULL value of the first batch, as mimic would. ``bytes``
  values get the binary character set, so clients hand them back as bytes.

Merged results (:func:`merged`) keep a unit's columns except where merging
changes the value: a count across shards is a ``BIGINT``, ``SUM(DISTINCT
int)`` a ``DECIMAL``, ``AVG`` the sum's ``DECIMAL`` with 4 more decimals — the
types of the values the merge engine produces (``merge/aggregate.py``), which are
also what one MariaDB would have announced.

Integers are encoded for the binary protocol by their size and sign (mimic's
own encoder sends a ``TINYINT`` as a bool and every integer signed).

Text goes to a client in its ``character_set_results``, as MariaDB converts it: the data sources
send UTF-8 (the pools read their results as utf8mb4), which a UTF-8 client reads as it is (and a
relay passes on); for a client of another character set (latin1, ...) :func:`in_results_charset`
announces the text columns in that set and their values are encoded in it, a character it lacks
written as ``?`` (docs/proxy.md#character-sets).
"""

from __future__ import annotations

import functools
import importlib
import struct
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Callable, Sequence

from mysql_mimic import ColumnType, ResultColumn
from mysql_mimic.charset import CharacterSet, Collation
from mysql_mimic.results import infer_type
from mysql_mimic.types import ColumnDefinition, str_len, uint_1, uint_2, uint_4, uint_len

from ddm_core import dialects
from ddm_core.execute.pymysql_results import ColumnDescription
from ddm_core.merge.spec import Aggregate, MergeSpec

__all__ = ["Column", "result_columns", "text_columns", "merged", "described_columns", "relayed_columns", "wire_columns",
           "in_results_charset", "in_charset", "AS_SENT", "UTF8_CHARSETS"]

BINARY = int(CharacterSet.binary)  # 63
_NOT_NULL = int(ColumnDefinition.NOT_NULL_FLAG)
_UNSIGNED = int(ColumnDefinition.UNSIGNED_FLAG)
_BINARY_FLAG = int(ColumnDefinition.BINARY_FLAG)

_WIRE_TYPES = frozenset(int(t) for t in ColumnType)
#: Types mimic has no text encoder for: sent as the nearest type that has one.
_STAND_INS = {
    ColumnType.TIMESTAMP2: ColumnType.TIMESTAMP,
    ColumnType.DATETIME2: ColumnType.DATETIME,
    ColumnType.TIME2: ColumnType.TIME,
    ColumnType.TYPED_ARRAY: ColumnType.BLOB,
    ColumnType.INVALID: ColumnType.VAR_STRING,
}
_INTEGERS = {ColumnType.TINY: "b", ColumnType.SHORT: "h", ColumnType.YEAR: "h", ColumnType.INT24: "i",
             ColumnType.LONG: "i", ColumnType.LONGLONG: "q"}  # fmt: skip
_EXACT = frozenset({ColumnType.DECIMAL, ColumnType.NEWDECIMAL})
#: Types whose values are text in a character set (the rest are numbers, times and bytes: ``binary``).
_TEXTUAL = frozenset({ColumnType.VARCHAR, ColumnType.VAR_STRING, ColumnType.STRING, ColumnType.TINY_BLOB,
                      ColumnType.MEDIUM_BLOB, ColumnType.LONG_BLOB, ColumnType.BLOB, ColumnType.JSON,
                      ColumnType.ENUM, ColumnType.SET})  # fmt: skip
_FLOATS = frozenset({ColumnType.FLOAT, ColumnType.DOUBLE})
#: Types that are not text but whose values are byte strings, announced ``binary`` as MariaDB does.
_BYTES_VALUES = frozenset({ColumnType.BIT, ColumnType.GEOMETRY})
#: The UTF-8 character sets: a client's text in one is the data sources' as it is.
UTF8_CHARSETS = (CharacterSet.utf8mb4, CharacterSet.utf8)
#: Results character sets a client reads the data sources' text in as it is sent: the UTF-8 ones, and
#: ``binary`` (no conversion, as ``NULL`` asks: the session keeps its default for that).
AS_SENT = (*UTF8_CHARSETS, CharacterSet.binary)
#: Digits MariaDB adds to a SUM's precision (DECIMAL_LONGLONG_DIGITS) and the DECIMAL limits.
_SUM_DIGITS = 22
_MAX_PRECISION = 65
_MYSQL = dialects.dialect_for("mysql")


@dataclass(frozen=True, slots=True)
class Column:
    """One result column, as its column-definition packet describes it (immutable: lists of them are shared)."""

    name: str
    type: ColumnType
    charset: int = BINARY
    length: int = 0
    flags: int = 0
    decimals: int = 0
    table: str = ""
    org_table: str = ""
    org_name: str = ""
    schema: str = ""
    _wire: ResultColumn | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, wire: ResultColumn) -> Column:
        """The column of one of mimic's (a name, a type and a character set)."""
        textual = wire.type in _TEXTUAL or wire.type is ColumnType.VAR_STRING
        charset = int(wire.character_set) if textual else BINARY
        return cls(wire.name, wire.type, charset, flags=0 if textual else _BINARY_FLAG)

    @property
    def unsigned(self) -> bool:
        return bool(self.flags & _UNSIGNED)

    def as_unsigned(self) -> Column:
        """This column with the UNSIGNED flag (its integers are packed unsigned)."""
        return replace(self, flags=self.flags | _UNSIGNED, _wire=None)

    def named_as(self, other: Column) -> Column:
        """This column under ``other``'s names (name, table, original name, schema)."""
        if (self.name, self.table, self.org_table, self.org_name, self.schema) == (
                other.name, other.table, other.org_table, other.org_name, other.schema):  # fmt: skip
            return self
        return replace(self, name=other.name, table=other.table, org_table=other.org_table, org_name=other.org_name,
                       schema=other.schema, _wire=None)  # fmt: skip

    def packet(self, server_charset: CharacterSet) -> bytes:
        """The column-definition packet (protocol 4.1)."""
        enc = functools.partial(in_charset, server_charset)
        return b"".join([
            str_len(b"def"), str_len(enc(self.schema)), str_len(enc(self.table)), str_len(enc(self.org_table)),
            str_len(enc(self.name)), str_len(enc(self.org_name)), uint_len(0x0C), uint_2(self.charset),
            uint_4(self.length), uint_1(int(self.type)), uint_2(self.flags & 0xFFFF), uint_1(self.decimals), uint_2(0),
        ])  # fmt: skip

    def wire(self) -> ResultColumn:
        """mimic's column (its text encoders), with integers encoded by size and sign for the binary protocol."""
        if self._wire is None:
            object.__setattr__(self, "_wire", self._make_wire())  # made once: the column is immutable
        assert self._wire is not None
        return self._wire

    def _make_wire(self) -> ResultColumn:
        # mimic encodes text with the column's codec (binary has none) and announces a text result's columns in
        # this character set: byte strings and BIT values (big-endian bytes, rarely UTF-8) are binary to it
        binary = self.charset == BINARY and (self.type in _TEXTUAL or self.type in _BYTES_VALUES)
        charset = CharacterSet.binary if binary else (
            _converted_to(self.charset) if self.type in _TEXTUAL else CharacterSet.utf8mb4)
        if charset is not CharacterSet.utf8mb4 and not binary:  # a client's own set: what it lacks becomes "?"
            return ResultColumn(name=self.name, type=self.type, character_set=charset,
                                text_encoder=_text_in_charset, binary_encoder=_binary_in_charset)  # fmt: skip
        code = _INTEGERS.get(self.type)
        encoder = None if code is None else _integer_encoder(code.upper() if self.unsigned else code)
        return ResultColumn(name=self.name, type=self.type, character_set=charset, binary_encoder=encoder)


def in_results_charset(columns: list[Column], charset: CharacterSet) -> list[Column]:
    """``columns`` as a client whose ``character_set_results`` is ``charset`` is told of them: the text columns
    in that set's default collation (their values then encoded in it, :meth:`Column.wire`); the same list
    for a set the data sources' UTF-8 is sent in as it is (:data:`AS_SENT`)."""
    if charset in AS_SENT:
        return columns
    collation = int(charset.default_collation)
    return [replace(c, charset=collation, _wire=None) if c.charset != BINARY and c.type in _TEXTUAL else c
            for c in columns]  # fmt: skip


@functools.cache
def _converted_to(collation: int) -> CharacterSet:
    """The character set a text column of ``collation`` is encoded in: utf8mb4 (the data sources' own text,
    whatever UTF-8 collation they announce it in), else the set :func:`in_results_charset` converted it to."""
    try:
        charset = Collation(collation).charset
    except (ValueError, KeyError):  # a collation mimic does not know (MariaDB's UCA 14 ones): the sources' UTF-8
        return CharacterSet.utf8mb4
    return CharacterSet.utf8mb4 if charset in AS_SENT else charset


def in_charset(charset: CharacterSet, text: str) -> bytes:
    """``text`` for a client whose results are in ``charset`` (names, messages): UTF-8 for a set of
    :data:`AS_SENT` (``binary`` has no codec), each character another set lacks written as ``?``."""
    return text.encode("utf8" if charset in AS_SENT else charset.codec, "replace")


def _text_in_charset(column: ResultColumn, value: Any) -> bytes:
    """A value in a client's character set, each character it lacks written as ``?`` (as MariaDB converts); spelled
    as the row writer spells a UTF-8 column's (a ``Decimal`` in plain notation)."""
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    return (format(value, "f") if type(value) is Decimal else str(value)).encode(column.codec, "replace")


def _binary_in_charset(column: ResultColumn, value: Any) -> bytes:
    return bytes(str_len(_text_in_charset(column, value)))


_ENCODERS: dict[str, Callable[[ResultColumn, Any], bytes]] = {}


def _integer_encoder(code: str) -> Callable[[ResultColumn, Any], bytes]:
    encoder = _ENCODERS.get(code)
    if encoder is None:
        pack = struct.Struct("<" + code).pack
        encoder = _ENCODERS[code] = lambda _column, value: pack(int(value))
    return encoder


def _first_value(rows: Sequence[Sequence[Any]], index: int) -> Any:
    for row in rows:
        if row[index] is not None:
            return row[index]
    return None


def _from_description(desc: Sequence[Any], sample: Any, any_rows: bool) -> Column:
    code = desc[1]
    if isinstance(code, int) and not isinstance(code, bool) and code in _WIRE_TYPES:
        wire = ColumnType(code)
        wire = _STAND_INS.get(wire, wire)
        if wire is ColumnType.NULL and sample is not None:
            wire = infer_type(sample)
    elif sample is not None:
        wire = infer_type(sample)
    else:
        wire = ColumnType.VAR_STRING if any_rows else ColumnType.NULL
    text = wire in _TEXTUAL and not isinstance(sample, bytes | bytearray)
    charset = int(CharacterSet.utf8mb4) if text else BINARY
    length = desc[3] if len(desc) > 3 and isinstance(desc[3], int) else 0
    decimals = desc[5] if len(desc) > 5 and isinstance(desc[5], int) else 0
    flags = (_NOT_NULL if len(desc) > 6 and desc[6] is False else 0) | (_BINARY_FLAG if charset == BINARY else 0)
    if wire not in _TEXTUAL:  # the server's UNSIGNED, where the description kept its flags (ColumnDescription)
        flags |= getattr(desc, "flags", 0) & _UNSIGNED
    return Column(str(desc[0]), wire, charset, max(length, 0), flags, max(decimals, 0), org_name=str(desc[0]))


def described_columns(
    description: Sequence[Sequence[Any]], first_rows: Sequence[Sequence[Any]], aggregates: Sequence[Aggregate] = ()
) -> list[Column]:
    """Columns of an executed result (``first_rows``, possibly empty, settle types and character sets).

    ``aggregates``: the merge spec's, when the result was merged (the visible columns come first, so
    their indexes hold for the description too).
    """
    samples = [_first_value(first_rows, i) for i in range(len(description))]
    try:  # one statement shape, one description: its columns are made once (a few µs a statement)
        key: Any = (tuple(description), tuple(map(type, samples)), bool(first_rows), tuple(aggregates),
                    tuple([getattr(d, "flags", 0) & _UNSIGNED for d in description]))  # equal 7-tuples, either sign
        known = _DESCRIBED.get(key)
    except TypeError:  # an unhashable description (not a DB-API driver's tuples)
        key, known = None, None
    if known is not None:
        return known
    columns = [_from_description(d, samples[i], bool(first_rows)) for i, d in enumerate(description)]
    if aggregates:
        columns = _with_aggregates(columns, aggregates)
    if key is not None:
        if len(_DESCRIBED) >= _DESCRIBED_LIMIT:
            _DESCRIBED.clear()
        _DESCRIBED[key] = columns
    return columns


_DESCRIBED: dict[Any, list[Column]] = {}
_DESCRIBED_LIMIT = 4096


#: Types PyMySQL hands over as ``bytes`` when their character set is ``binary`` (its ``TEXT_TYPES``).
_BYTES_WHEN_BINARY = frozenset({ColumnType.BIT, ColumnType.BLOB, ColumnType.LONG_BLOB, ColumnType.MEDIUM_BLOB,
                                ColumnType.STRING, ColumnType.TINY_BLOB, ColumnType.VAR_STRING, ColumnType.VARCHAR,
                                ColumnType.GEOMETRY})  # fmt: skip


def relayed_columns(definitions: Sequence[bytes], aggregates: Sequence[Aggregate] = ()) -> list[Column]:
    """The columns a relayed result announces: what :func:`described_columns` makes of the description
    PyMySQL reads from the same column-definition packets (proxy/relay.py), so relayed and decoded
    results announce alike. A column's value type is known from its definition (``bytes`` for a binary
    string), where the decoded path looks at the first row's value."""
    read = importlib.import_module("pymysql.protocol").FieldDescriptorPacket  # untyped; the MySQL driver
    description: list[tuple[Any, ...]] = []
    samples: list[Any] = []
    for payload in definitions:
        field = read(payload, "utf8")
        description.append(ColumnDescription(field.description(), field.flags))
        code = field.type_code
        if code == ColumnType.NULL:
            samples.append(None)
        else:
            samples.append(b"" if code in _BYTES_WHEN_BINARY and field.charsetnr == BINARY else "")
    return described_columns(description, [tuple(samples)], aggregates)


def wire_columns(columns: Sequence[Column]) -> list[ResultColumn]:
    return [c.wire() for c in columns]


def result_columns(description: Sequence[Sequence[Any]], first_rows: Sequence[Sequence[Any]]) -> list[ResultColumn]:
    """mimic's columns for ``description``; ``first_rows`` (possibly empty) settle types and character sets."""
    return wire_columns(described_columns(description, first_rows))


def text_columns(names: Sequence[str]) -> list[ResultColumn]:
    """String columns, for the answers the proxy makes itself (probes, SHOW, PREVIEW)."""
    return [ResultColumn(name=n, type=ColumnType.VAR_STRING) for n in names]


# -- merged results --------------------------------------------------------------------------------------


def merged(units: Sequence[Column], spec: MergeSpec) -> list[Column]:
    """The columns a client gets from units with columns ``units`` merged by ``spec``.

    The visible columns only (derived sort keys and AVG counts are dropped), named as the statement
    wrote them (``AVG(amount)`` where the units ran ``SUM(amount)``), aggregates typed as merged.
    """
    visible = spec.visible if spec.visible is not None else max(len(units) - spec.derived, 0)
    out = list(units[:visible])
    for i, name in enumerate(spec.column_names[:visible]):
        if name is not None and i < len(out):
            out[i] = replace(out[i], name=name, _wire=None)
    return _with_aggregates(out, spec.aggregates)


def _with_aggregates(columns: list[Column], aggregates: Sequence[Aggregate]) -> list[Column]:
    out = list(columns)
    for agg in aggregates:
        i = agg.column
        if 0 <= i < len(out):
            out[i] = _merged_aggregate(out[i], agg)
    return out


def _precision(col: Column) -> int:
    """The digits of a number column (its display length without sign and point)."""
    sign = 0 if col.unsigned else 1
    return max(col.length - sign - (1 if col.decimals and col.type in _EXACT else 0), 1)


def _decimal(name: str, precision: int, decimals: int) -> Column:
    precision = min(precision, _MAX_PRECISION)
    length = precision + 1 + (1 if decimals else 0)
    return Column(name, ColumnType.NEWDECIMAL, BINARY, length, _BINARY_FLAG, decimals)


def _merged_aggregate(col: Column, agg: Aggregate) -> Column:
    """The column of ``agg`` merged across units, from the unit's column ``col`` at its place."""
    func = agg.func.upper()
    if func == "COUNT":  # a sum of counts; COUNT(DISTINCT x) units carry the raw x values
        return Column(col.name, ColumnType.LONGLONG, BINARY, 21, _NOT_NULL | _BINARY_FLAG)
    if func == "SUM" and agg.distinct:  # the units carry raw x: typed as MariaDB types SUM(x)
        if col.type in _INTEGERS:
            return _decimal(col.name, _precision(col) + _SUM_DIGITS, 0)
        if col.type in _EXACT:
            return _decimal(col.name, _precision(col) + _SUM_DIGITS, col.decimals)
        if col.type in _FLOATS:
            return Column(col.name, ColumnType.DOUBLE, BINARY, 23, _BINARY_FLAG, 31)
        return col
    if func == "AVG" and col.type in _EXACT:  # the units ran SUM(x): x's precision, 4 more decimals
        decimals = min(col.decimals + _MYSQL.avg_scale_increment, _MYSQL.decimal_max_scale)
        digits = _precision(col) - _SUM_DIGITS if _precision(col) > _SUM_DIGITS else _precision(col)
        return _decimal(col.name, digits + _MYSQL.avg_scale_increment, decimals)
    return col
