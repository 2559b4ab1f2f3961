"""Rows the proxy decoded (merged results, answers of its own) framed for the client by the compiled row writer.

``_fast/rowwriter`` encodes by *kinds*; this module reads the kinds off mysql-mimic's columns
(:class:`RowPlan`, made once per column list) so that the bytes are exactly those mimic's encoders
give: ``MysqlStream.write_text_rows`` for text results, ``make_binary_resultrow`` for a prepared
statement's. Whatever a kind does not cover (a value of an unusual type, an integer out of its
column's range, a type mimic cannot encode) goes to the column's own encoder, errors included.
Where mimic's bytes were wrong for a client, or not MariaDB's, the writer differs:

* a row longer than 16 MiB is split over several packets, as the protocol asks (mimic's fast writers
  put its whole length in the 3-byte length field);
* a TIME value of a day or more, or negative, is written as MariaDB writes it: ``-25:30:00`` in text
  (mimic wrote ``str(timedelta)``, ``-2 days, 22:30:00``, which clients hand back as a string) and
  with the magnitude's days, hours, ... in binary (mimic wrote ``-25:30`` as ``-70:30``);
* given the proxy's columns (their types and decimals), a text result's floating point numbers, dates and times
  with a fraction, times and years are spelled as MariaDB spells them (proxy/mariadb_text.py), and a ``Decimal``
  is written in plain notation in both protocols (``str`` writes ``1E-30``);
* a zero or invalid date, which PyMySQL hands over as its text (``0000-00-00``), goes in a binary row in
  MariaDB's binary form (the relay's reading of that text), where mimic's encoder failed on a ``str``.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from mysql_mimic import ColumnType, ResultColumn
from mysql_mimic import results as mimic_results

from ddm_core._fast import SELECTED
from ddm_core.proxy.columns import Column
from ddm_core.proxy.mariadb_text import encoder_for

if TYPE_CHECKING:
    from ddm_core._fast import relay
    from ddm_core._fast import rowwriter as writer
else:
    relay, writer = SELECTED.relay, SELECTED.rowwriter

__all__ = ["RowPlan", "text_plan", "binary_plan", "write_text", "write_binary"]


@dataclass(frozen=True, slots=True)
class RowPlan:
    """How each column's values are written: the writer's kind, and the column's encoder for the rest."""

    kinds: bytes
    encoders: tuple[Callable[[Any], bytes], ...]


#: mimic's binary encoders the writer does itself (its integers are the proxy's own: by size and sign).
_BINARY_KINDS: dict[Any, int] = {
    mimic_results._binary_encode_date: writer.DATETIME,
    mimic_results._binary_encode_timedelta: writer.TIME,
    mimic_results._binary_encode_float: writer.FLOAT,
    mimic_results._binary_encode_double: writer.DOUBLE,
}
_STRING_ENCODERS = (mimic_results._binary_encode_str,)
#: The integer kinds by MySQL type (signed; the unsigned kind is the next one), as Column.wire packs them.
_INTEGER_KINDS = {ColumnType.TINY: writer.INT8, ColumnType.SHORT: writer.INT16, ColumnType.YEAR: writer.INT16,
                  ColumnType.INT24: writer.INT32, ColumnType.LONG: writer.INT32, ColumnType.LONGLONG: writer.INT64}  # fmt: skip
_UTF8: dict[str, bool] = {}


def _is_utf8(codec: str) -> bool:
    """The codec is UTF-8 (mimic's ``utf8``); ``binary`` is no codec at all (its strings fail to encode)."""
    known = _UTF8.get(codec)
    if known is None:
        try:
            known = codecs.lookup(codec).name == "utf-8"
        except LookupError:
            known = False
        _UTF8[codec] = known
    return known


def _tiny_text(codec: str) -> Callable[[Any], bytes]:
    return lambda value: str(int(value)).encode(codec)


def text_plan(wire: Sequence[ResultColumn], columns: Sequence[Column] | None = None) -> RowPlan:
    """The plan for mimic's ``write_text_rows`` over columns ``wire``; with the proxy's ``columns`` (their types
    and decimals), numbers, dates and times are spelled as MariaDB spells them (proxy/mariadb_text.py)."""
    kinds: list[int] = []
    encoders: list[Callable[[Any], bytes]] = []
    for i, col in enumerate(wire):
        utf8 = _is_utf8(col.codec)
        encoder = col.text_encode
        spelled = None if columns is None or not utf8 else encoder_for(columns[i].type, columns[i].decimals, encoder)
        if spelled is not None:
            kind, encoder = writer.ENCODER, spelled
        elif col.use_default_text_encoder and col.type == ColumnType.TIME and utf8:
            kind = writer.TIME_TEXT
        elif col.use_default_text_encoder:
            kind = writer.STRING if utf8 else writer.BYTES
        elif col.type == ColumnType.TINY:  # write_text_rows' own rule for TINYINT, whatever the encoder
            kind = writer.TINY_TEXT if utf8 else writer.ENCODER
            encoder = _tiny_text(col.codec)
        else:
            kind = writer.ENCODER
        kinds.append(kind)
        encoders.append(encoder)
    return RowPlan(bytes(kinds), tuple(encoders))


def binary_plan(columns: Sequence[Column]) -> RowPlan:
    """The plan for ``make_binary_resultrow`` over the columns' wire columns (``Column.wire``)."""
    kinds: list[int] = []
    encoders: list[Callable[[Any], bytes]] = []
    for column in columns:
        col = column.wire()
        integer = _INTEGER_KINDS.get(column.type)
        if integer is not None:  # Column.wire packs int(value) in the type's size and sign
            kind = integer + 1 if column.unsigned else integer
        elif col.binary_encoder in _STRING_ENCODERS:
            kind = writer.STRING if _is_utf8(col.codec) else writer.BYTES
        else:
            kind = _BINARY_KINDS.get(col.binary_encoder, writer.ENCODER)
        kinds.append(kind)
        encoders.append(_dates_as_text(col.binary_encode) if kind == writer.DATETIME else col.binary_encode)
    return RowPlan(bytes(kinds), tuple(encoders))


def _dates_as_text(fallback: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    """A date column's encoder for what the writer leaves to it: a zero or invalid date, which PyMySQL hands over
    as its text (``0000-00-00``), in MariaDB's binary form (a zero-length date; mimic's encoder fails on a str)."""

    def encode(value: Any) -> bytes:
        if type(value) is str:
            field = relay.datetime_field(value.encode("ascii", "replace"))
            if field is not None:
                return field
        return fallback(value)

    return encode


def write_text(buffer: bytearray, seq: int, rows: Iterable[Sequence[Any]], plan: RowPlan) -> int:
    """Append the text-protocol packets of ``rows`` from sequence id ``seq``; the next one."""
    return writer.text_rows(buffer, seq, rows, plan.kinds, plan.encoders)


def write_binary(buffer: bytearray, seq: int, rows: Iterable[Sequence[Any]], plan: RowPlan) -> int:
    """Append the binary-protocol packets of ``rows`` from sequence id ``seq``; the next one."""
    return writer.binary_rows(buffer, seq, rows, plan.kinds, plan.encoders)
