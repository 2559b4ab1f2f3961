"""Time values for the time-based algorithms (INTERVAL, AUTO_INTERVAL, TIME_RANGE).

Every value becomes a *naive wall-clock* ``datetime`` in the algorithm's
``time-zone`` (default ``UTC``) before it is compared with the configured
boundaries, which are wall-clock times in that zone too:

* ``datetime``: naive ones are taken as they are; aware ones are converted to
  the zone.
* ``date``: midnight.
* ``str``: the algorithm's ``datetime-pattern`` (a Java ``DateTimeFormatter``
  pattern such as ``yyyy-MM-dd HH:mm:ss``) matching the whole text, else ISO
  8601 (``2024-01-15``, ``2024-01-15T10:00:00+08:00``), else the pattern
  matching the *start* of the text (the rest is cut, like ShardingSphere
  does), else a decimal epoch.
* ``int`` / ``float`` / ``Decimal`` (not ``bool``): Unix epoch. ``epoch-unit``
  says ``s`` or ``ms``; the default ``auto`` reads ``|v| >= 10**11`` as
  milliseconds (10**11 s is the year 5138; 10**11 ms is 1973-03-03, so epoch
  milliseconds before March 1973 need ``epoch-unit: ms``).
* ``numpy.datetime64``: naive wall-clock.

``None`` and anything else raise :class:`~ddm_core.errors.ShardValueError`.

Java patterns supported: ``y``/``u`` (year), ``M``/``MM`` (month number),
``d``, ``H``, ``m``, ``s``, ``S`` (fraction), quoted literals (``'T'``,
``''``) and punctuation. Text months, weekdays, AM/PM and zones are refused
with a ConfigError rather than misread.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any, Callable

import numpy as np

from ddm_core.errors import ShardValueError
from ddm_core.algorithms._props import Props, parse_int_text
from ddm_core.algorithms._values import null_error

__all__ = ["JavaPattern", "TimeCoercer", "PatternError", "add_units", "UNITS"]

_EPOCH = datetime(1970, 1, 1)
_AUTO_MS_THRESHOLD = 10**11


class PatternError(ValueError):
    """A Java date-time pattern ddm-core does not support."""


_FIELDS = {"y": "year", "u": "year", "M": "month", "d": "day", "H": "hour", "m": "minute", "s": "second", "S": "fraction"}


class JavaPattern:
    """A Java ``DateTimeFormatter`` pattern: format datetimes, parse text.

    Raises:
        PatternError: unsupported letters or a pattern without a year.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.tokens: list[tuple[str, int] | str] = []  # (field, width) or literal text
        i, n = 0, len(pattern)
        while i < n:
            ch = pattern[i]
            if ch == "'":
                if i + 1 < n and pattern[i + 1] == "'":  # '' is a literal quote
                    self.tokens.append("'")
                    i += 2
                    continue
                j, buf = i + 1, []
                while True:
                    k = pattern.find("'", j)
                    if k < 0:
                        raise PatternError(f"unterminated quote in date-time pattern {pattern!r}")
                    buf.append(pattern[j:k])
                    if k + 1 < n and pattern[k + 1] == "'":  # '' inside quotes
                        buf.append("'")
                        j = k + 2
                        continue
                    i = k + 1
                    break
                self.tokens.append("".join(buf))
                continue
            if ch.isalpha():
                j = i
                while j < n and pattern[j] == ch:
                    j += 1
                width = j - i
                field = _FIELDS.get(ch)
                if field is None or (field == "month" and width > 2):
                    raise PatternError(
                        f"date-time pattern {pattern!r}: {pattern[i:j]!r} is not supported "
                        "(use y, M/MM, d, H, m, s, S and literals)"
                    )
                if field == "fraction" and width > 9:
                    raise PatternError(f"date-time pattern {pattern!r}: at most 9 fraction digits")
                self.tokens.append((field, width))
                i = j
                continue
            self.tokens.append(ch)
            i += 1
        fields = {t[0] for t in self.tokens if isinstance(t, tuple)}
        if "year" not in fields:
            raise PatternError(f"date-time pattern {pattern!r} has no year (y); cannot place it in time")
        self.fields = fields
        regex = []
        for t in self.tokens:
            if isinstance(t, str):
                regex.append(re.escape(t))
            else:
                field, width = t
                if field == "year":
                    regex.append(r"([0-9]{2})" if width == 2 else r"([0-9]{%d,})" % max(width, 1))
                elif field == "fraction":
                    regex.append(r"([0-9]{%d})" % width)
                else:
                    regex.append(r"([0-9]{1,2})" if width == 1 else r"([0-9]{%d})" % width)
        self._regex = re.compile("".join(regex))
        self._groups = [t for t in self.tokens if isinstance(t, tuple)]

    def format(self, dt: datetime) -> str:
        """The text of ``dt`` under this pattern."""
        out = []
        for t in self.tokens:
            if isinstance(t, str):
                out.append(t)
                continue
            field, width = t
            if field == "year":
                out.append(f"{dt.year % 100:02d}" if width == 2 else str(dt.year).zfill(width))
            elif field == "fraction":
                out.append(f"{dt.microsecond:06d}000"[:width])
            else:
                out.append(str(getattr(dt, field)).zfill(width))
        return "".join(out)

    def parse(self, text: str, *, prefix: bool = True) -> datetime | None:
        """The datetime at the start of ``text`` (the whole text unless ``prefix``), else ``None``."""
        m = self._regex.match(text) if prefix else self._regex.fullmatch(text)
        if m is None:
            return None
        parts: dict[str, int] = {"year": 1970, "month": 1, "day": 1, "hour": 0, "minute": 0, "second": 0, "microsecond": 0}
        for (field, width), group in zip(self._groups, m.groups()):
            if field == "fraction":
                parts["microsecond"] = int(group.ljust(6, "0")[:6])
            elif field == "year" and width == 2:
                parts["year"] = 2000 + int(group)  # Java's two-digit base year 2000
            else:
                parts[field] = int(group)
        try:
            return datetime(
                parts["year"], parts["month"], parts["day"],
                parts["hour"], parts["minute"], parts["second"], parts["microsecond"],
            )
        except ValueError:
            return None

    def __repr__(self) -> str:
        return f"JavaPattern({self.pattern!r})"


# -- units -------------------------------------------------------------------

def _add_months(dt: datetime, months: int) -> datetime:
    total = dt.year * 12 + (dt.month - 1) + months
    year, month = divmod(total, 12)
    month += 1
    # Java's plusMonths clamps the day to the month's length.
    if month == 12:
        last = 31
    else:
        last = (datetime(year, month + 1, 1) - timedelta(days=1)).day
    return dt.replace(year=year, month=month, day=min(dt.day, last))


_FIXED = {
    "MILLIS": timedelta(milliseconds=1),
    "SECONDS": timedelta(seconds=1),
    "MINUTES": timedelta(minutes=1),
    "HOURS": timedelta(hours=1),
    "HALF_DAYS": timedelta(hours=12),
    "DAYS": timedelta(days=1),
    "WEEKS": timedelta(weeks=1),
}
_MONTHLY = {"MONTHS": 1, "YEARS": 12, "DECADES": 120, "CENTURIES": 1200}
#: Java ``ChronoUnit`` names accepted by ``datetime-interval-unit``.
UNITS = tuple(_FIXED) + tuple(_MONTHLY)


def add_units(dt: datetime, amount: int, unit: str) -> datetime:
    """``dt.plus(amount, ChronoUnit.<unit>)`` as Java computes it."""
    if unit in _FIXED:
        return dt + _FIXED[unit] * amount
    return _add_months(dt, amount * _MONTHLY[unit])


# -- coercion ----------------------------------------------------------------

class TimeCoercer:
    """Turns shard-key values into naive wall-clock datetimes (see the module docstring)."""

    PROPS = {
        "time-zone": "IANA zone of the wall-clock boundaries; aware values and epochs convert to it (default UTC)",
        "epoch-unit": "auto (default) | s | ms: how integer / float values are read",
    }

    def __init__(self, props: Props, pattern: JavaPattern | None) -> None:
        zone_name = props.text("time-zone", "UTC")
        self.zone: tzinfo
        if zone_name.upper() in ("UTC", "Z"):
            self.zone = timezone.utc
        else:
            try:
                from zoneinfo import ZoneInfo

                self.zone = ZoneInfo(zone_name)
            except Exception:  # ZoneInfoNotFoundError, ValueError on odd names
                props.fail("time-zone", zone_name, "is not a known IANA time zone")
        self.epoch_unit = props.text("epoch-unit", "auto", choices=("auto", "s", "ms"))
        self.pattern = pattern
        self.zone_name = zone_name

    def now(self) -> datetime:
        return datetime.now(self.zone).replace(tzinfo=None)

    def parse_config(self, text: Any, props: Props, prop: str) -> datetime:
        """A configured boundary (string in the pattern or ISO, or a datetime / date)."""
        if isinstance(text, datetime):
            return self._naive(text)
        if isinstance(text, date):
            return datetime(text.year, text.month, text.day)
        if isinstance(text, str):
            found = self._parse_text(text.strip())
            if found is not None:
                return found
        expected = f"the pattern {self.pattern.pattern!r} or ISO 8601" if self.pattern else "ISO 8601"
        props.fail(prop, text, f"is not a date-time in {expected}")

    def _naive(self, dt: datetime) -> datetime:
        if dt.tzinfo is None:
            return dt
        return dt.astimezone(self.zone).replace(tzinfo=None)

    def _parse_text(self, text: str) -> datetime | None:
        # Exact forms first; a pattern match on a prefix (ShardingSphere cuts
        # the text to the pattern) loses precision, so it comes last.
        if self.pattern is not None:
            found = self.pattern.parse(text, prefix=False)
            if found is not None:
                return found
        try:
            return self._naive(datetime.fromisoformat(text))
        except ValueError:
            pass
        return self.pattern.parse(text) if self.pattern is not None else None

    def _from_epoch(self, seconds: float | Decimal | int, raw: Any, fail: Callable[[], ShardValueError]) -> datetime:
        unit = self.epoch_unit
        if unit == "auto":
            unit = "ms" if abs(int(seconds)) >= _AUTO_MS_THRESHOLD else "s"
        try:
            if isinstance(seconds, int):
                micros = seconds * (1000 if unit == "ms" else 1_000_000)
            else:
                micros = int(Decimal(str(seconds)) * (1000 if unit == "ms" else 1_000_000))
            utc = _EPOCH + timedelta(microseconds=micros)
        except (OverflowError, ArithmeticError, ValueError):
            raise fail() from None
        return utc.replace(tzinfo=timezone.utc).astimezone(self.zone).replace(tzinfo=None)

    def to_datetime(self, value: Any, label: str, name: str, column: str) -> datetime:
        """``value`` as a naive wall-clock datetime in the zone, else ShardValueError."""

        def fail() -> ShardValueError:
            return ShardValueError(
                f"{label}: value {value!r} ({type(value).__name__}) of sharding column {column!r} "
                "is not a date-time (datetime, date, text in "
                + (f"{self.pattern.pattern!r} or " if self.pattern else "")
                + "ISO 8601, or an epoch)",
                algorithm=name,
                column=column,
                value=value,
            )

        if isinstance(value, datetime):
            return self._naive(value)
        if isinstance(value, date):
            return datetime(value.year, value.month, value.day)
        if value is None:
            raise null_error(label, name, column)
        if isinstance(value, str):
            text = value.strip()
            found = self._parse_text(text)
            if found is not None:
                return found
            n = parse_int_text(text)
            if n is not None:
                return self._from_epoch(n, value, fail)
            raise fail()
        if isinstance(value, bool):
            raise fail()
        if isinstance(value, np.datetime64):
            if np.isnat(value):
                raise null_error(label, name, column)
            micros = int(value.astype("datetime64[us]").astype(np.int64))
            return _EPOCH + timedelta(microseconds=micros)
        if isinstance(value, (int, np.integer)):
            return self._from_epoch(int(value), value, fail)
        if isinstance(value, (float, Decimal, np.floating)):
            try:
                finite = Decimal(str(value)).is_finite()
            except ArithmeticError:
                finite = False
            if not finite:
                raise fail()
            return self._from_epoch(value if isinstance(value, Decimal) else float(value), value, fail)
        raise fail()
