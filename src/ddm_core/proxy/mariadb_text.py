"""A decoded value written as MariaDB writes it in a text result, from its column's type and decimals.

The relayed path passes MariaDB's own bytes; a result the proxy decodes (a merge, an aggregate folded in
Python) is written again from Python values, and must read the same to a client that compares strings
(docs/proxy.md#relayed-results). Python's own spellings differ: ``repr`` of a float (``3.40282e+38``,
``0.0``), ``str`` of a datetime (no fraction at 0 µs, else six digits), of a time under a day (``0:00:00``),
of a year (``0``). (A ``Decimal``, ``0E-30`` to ``str``, is the row writer's own: its strings' kind writes
it in plain notation, in both protocols.) Each writer here takes the value the column's decoder gives and
hands anything else (a zero date PyMySQL leaves as a string, bytes) to the column's own encoder.

Floating point: MariaDB writes a ``DOUBLE`` with the shortest digits that read back the same (Python's
``repr`` digits) and a ``FLOAT`` with six significant ones; in plain notation when the decimal point falls
within 14 places before the first digit to 15 after it (or inside the digits), else as ``d.ddde±x`` with no
``+`` and no leading zeros in the exponent; a column with fixed decimals (``FLOAT(7,4)``) with exactly those.
Found and checked against MariaDB 10.11 on 16 000 random values of each type; tests/test_mariadb_text.py
checks it on 6 000 more every run.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Callable

from mysql_mimic import ColumnType

__all__ = ["encoder_for", "float_text", "NOT_FIXED"]

#: A column's decimals when it has none fixed (MariaDB's ``NOT_FIXED_DEC``): floating point written as it comes.
NOT_FIXED = 31
#: Where the plain notation ends: the decimal point at most this many places past the first digit, or at least
#: this many before it (negative).
_PLAIN_LAST, _PLAIN_FIRST = 15, -14

Encoder = Callable[[Any], bytes]


def _digits(value: float, single: bool) -> tuple[bool, str, int]:
    """``(negative, digits, point)``: ``value`` = 0.DIGITS × 10^point, no trailing zeros in DIGITS; ``single``: a
    FLOAT's six significant digits, else a DOUBLE's shortest."""
    text = f"{value:.5e}" if single else repr(value)
    negative = text[0] == "-"
    if negative:
        text = text[1:]
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    return negative, stripped.rstrip("0") or "0", point


def float_text(value: float, single: bool) -> str:
    """MariaDB's text of a ``FLOAT`` (``single``) or ``DOUBLE`` with no fixed decimals (module docstring)."""
    if value == 0:
        return "0"  # a negative zero too
    if 1e-4 <= abs(value) < 1e6:  # the usual: Python's plain notation is MariaDB's, less a trailing ".0"
        text = f"{value:.6g}" if single else repr(value)
        if "e" not in text:  # (six digits may round up to 1e+06)
            return text[:-2] if text.endswith(".0") else text
    if value != value or value in (float("inf"), float("-inf")):
        return repr(value)  # MariaDB stores neither; a computed one is written as Python does
    negative, digits, point = _digits(value, single)
    count = len(digits)
    if _PLAIN_FIRST <= point <= _PLAIN_LAST or 0 < point < count:
        if point <= 0:
            text = "0." + "0" * -point + digits
        elif point < count:
            text = digits[:point] + "." + digits[point:]
        else:
            text = digits + "0" * (point - count)
    else:
        text = digits[0] + ("." + digits[1:] if count > 1 else "") + "e" + str(point - 1)
    return "-" + text if negative else text


def _fraction(micro: int, decimals: int) -> str:
    """The column's ``decimals`` digits of ``micro`` (MariaDB's); all six when fewer would drop some (a value the
    proxy made for a column it described without them: nothing is lost)."""
    digits = min(max(decimals, 0), 6)
    if micro % 10 ** (6 - digits):
        digits = 6
    return "" if digits == 0 else "." + f"{micro:06d}"[:digits]


def _datetime_text(value: datetime, decimals: int) -> str:
    if value.tzinfo is not None:  # never from a data source; written as it was before
        return str(value)
    return value.isoformat(" ", "seconds") + _fraction(value.microsecond, decimals)


def _time_text(value: timedelta, decimals: int) -> str:
    negative = value < timedelta(0)
    magnitude = -value if negative else value
    seconds = magnitude.days * 86400 + magnitude.seconds
    hours, rest = divmod(seconds, 3600)
    text = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}{_fraction(magnitude.microseconds, decimals)}"
    return "-" + text if negative else text


def _guarded(write: Callable[[Any], str], kinds: tuple[type, ...], fallback: Encoder) -> Encoder:
    """``write(value)`` encoded for values of ``kinds`` (exactly: a ``bool`` is no year); else ``fallback``."""

    def encode(value: Any) -> bytes:
        if type(value) in kinds:
            return write(value).encode()
        return fallback(value)

    return encode


def encoder_for(column_type: Any, decimals: int, fallback: Encoder) -> Encoder | None:
    """The text encoder MariaDB's spelling asks for a column of ``column_type`` with ``decimals``; ``None``: the
    column's own (``fallback``) already writes what MariaDB writes."""
    fixed = 0 < decimals < NOT_FIXED
    if column_type in (ColumnType.FLOAT, ColumnType.DOUBLE):
        if fixed:
            return _guarded(lambda v: f"{v:.{decimals}f}", (float,), fallback)
        single = column_type == ColumnType.FLOAT
        return _guarded(lambda v: float_text(v, single), (float,), fallback)
    if column_type in (ColumnType.DATETIME, ColumnType.TIMESTAMP):
        return _guarded(lambda v: _datetime_text(v, decimals), (datetime,), fallback)
    if column_type == ColumnType.TIME:
        return _guarded(lambda v: _time_text(v, decimals), (timedelta,), fallback)
    if column_type == ColumnType.YEAR:
        return _guarded(lambda v: f"{v:04d}", (int,), fallback)
    return None

