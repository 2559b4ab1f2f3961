"""Time sharding: INTERVAL, AUTO_INTERVAL (ShardingSphere) and TIME_RANGE (ddm-native).

Time-ordered data (orders, logs) sharded by a modulo of the
time piles each second's writes onto one shard; sharding by time *ranges*
sends new data to the newest shard, lets old shards be archived, and makes
"the last three months" hit three shards instead of all
(docs/architecture.md#several-columns-and-time). Every algorithm here
precomputes its boundaries once and finds a value's interval by binary search
(``bisect``); range conditions route to exactly the intervals they overlap.
Values: see :mod:`ddm_core.algorithms.temporal`.

INTERVAL (ShardingSphere props)
    Intervals start at ``datetime-lower`` and step by
    ``datetime-interval-amount`` × ``datetime-interval-unit`` (a Java
    ``ChronoUnit`` name, default ``DAYS``; months clamp the day like Java's
    ``plusMonths``) while the start is not after ``datetime-upper`` (default:
    now, when the config is loaded — as in ShardingSphere). The target of an
    interval is the one whose name ends with the interval start formatted by
    ``sharding-suffix-pattern`` (``yyyyMM`` → ``t_order_202401``). A value
    before the first interval or after the last one raises RoutingError.

AUTO_INTERVAL (ShardingSphere props)
    ``datetime-lower`` / ``datetime-upper`` (``yyyy-MM-dd HH:mm:ss``) and
    ``sharding-seconds``; shard number ``k`` (trailing-number match). The
    arithmetic reproduces ShardingSphere's exactly, quirks included, so data
    it laid out is found: whole seconds since the lower bound (truncated), the
    quotient by ``sharding-seconds`` rounded *to two decimals* (half-even)
    before the ceiling, clamped to ``0 .. upper_seconds // sharding-seconds +
    1``. Consequence: shard 0 holds everything up to the lower bound, shard
    ``k`` the seconds in ``(lower + (k-1)·s, lower + k·s]`` — except the
    first 0.5 % of each span, which the rounding keeps on the previous shard.

TIME_RANGE (ddm-native)
    An explicit list of ``[start, end)`` intervals, each naming its target::

        ranges:
          - {start: "2024-01-01", end: "2024-04-01", target: ds_q1_2024}
          - {start: "2024-04-01", end: "2024-07-01", target: ds_q2_2024}

    (or ``[start, end, target]`` triples). Validated at load: an interval
    whose end is not after its start, two intervals that overlap (a mistyped
    range must be refused, not leave routing to pick one) and — unless ``allow-gaps: true`` — a gap between consecutive
    intervals are ConfigErrors naming the pair.
"""

from __future__ import annotations

import bisect
import math
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ddm_core.errors import ConfigError, RoutingError
from ddm_core.algorithms._numbered import NumberedAlgorithm
from ddm_core.algorithms._props import Props
from ddm_core.algorithms._targets import (
    AMBIGUOUS,
    NONE,
    TargetSet,
    missing_targets_error,
    show_targets,
    target_set,
)
from ddm_core.algorithms.base import ShardingAlgorithm, ValueRange
from ddm_core.algorithms.registry import register
from ddm_core.algorithms.temporal import UNITS, JavaPattern, PatternError, TimeCoercer, add_units

__all__ = ["IntervalAlgorithm", "AutoIntervalAlgorithm", "TimeRangeAlgorithm"]

_MAX_INTERVALS = 100_000


def _span(
    starts: list[datetime], ends: list[datetime], r: ValueRange, lo: datetime | None, hi: datetime | None
) -> range:
    """Indices of the ``[start, end)`` intervals (sorted, disjoint) that meet the range."""
    first = 0 if lo is None else bisect.bisect_right(ends, lo)
    if hi is None:
        last = len(starts) - 1
    elif r.upper_closed:
        last = bisect.bisect_right(starts, hi) - 1
    else:
        last = bisect.bisect_left(starts, hi) - 1
    return range(first, last + 1)


def _interval_of(starts: list[datetime], ends: list[datetime], t: datetime) -> int:
    """Index of the ``[start, end)`` interval (sorted, disjoint) holding ``t``, else -1."""
    k = bisect.bisect_right(starts, t) - 1
    return k if k >= 0 and t < ends[k] else -1


class _TimeAlgorithm(ShardingAlgorithm):
    """Shared value handling of the time algorithms."""

    supports_range = True
    coercer: TimeCoercer

    def _time(self, value: Any, column: str) -> datetime:
        return self.coercer.to_datetime(value, self.label, self.name, column)

    def _bounds(self, column: str, r: ValueRange) -> tuple[datetime | None, datetime | None]:
        lo = None if r.lower is None else self._time(r.lower, column)
        hi = None if r.upper is None else self._time(r.upper, column)
        return lo, hi


@register
class IntervalAlgorithm(_TimeAlgorithm):
    """``INTERVAL``: fixed steps from a lower bound, targets named by a time suffix."""

    type_name = "INTERVAL"
    PROPS = {
        "datetime-pattern": "Java pattern of the bounds and of text values, e.g. yyyy-MM-dd HH:mm:ss (required)",
        "datetime-lower": "start of the first interval (required)",
        "datetime-upper": "last interval start allowed (default: now at load)",
        "sharding-suffix-pattern": "Java pattern of the target suffix, e.g. yyyyMM (required)",
        "datetime-interval-amount": "units per interval (default 1)",
        "datetime-interval-unit": f"Java ChronoUnit: {', '.join(UNITS)} (default DAYS)",
        **TimeCoercer.PROPS,
    }

    def _configure(self, props: Props) -> None:
        pattern_text = props.text("datetime-pattern")
        try:
            pattern = JavaPattern(pattern_text)
        except PatternError as exc:
            props.fail("datetime-pattern", pattern_text, str(exc))
        suffix_text = props.text("sharding-suffix-pattern")
        try:
            self.suffix_pattern = JavaPattern(suffix_text)
        except PatternError as exc:
            props.fail("sharding-suffix-pattern", suffix_text, str(exc))
        self.coercer = TimeCoercer(props, pattern)
        self.lower = self.coercer.parse_config(props.raw("datetime-lower"), props, "datetime-lower")
        upper_raw = props.raw("datetime-upper", None)
        self.upper = (
            self.coercer.now()
            if upper_raw is None
            else self.coercer.parse_config(upper_raw, props, "datetime-upper")
        )
        if self.upper < self.lower:
            props.fail("datetime-upper", upper_raw, f"is before datetime-lower {self.lower}")
        self.amount = props.integer("datetime-interval-amount", 1, min=1)
        self.unit = props.text("datetime-interval-unit", "DAYS").strip().upper()
        if self.unit not in UNITS:
            props.fail("datetime-interval-unit", self.unit, f"must be one of {', '.join(UNITS)}")
        starts = [self.lower]
        cursor = self.lower
        while True:
            try:
                cursor = add_units(cursor, self.amount, self.unit)
            except (OverflowError, ValueError):
                break  # past datetime.max: the last interval is open-ended
            if cursor > self.upper:
                break
            starts.append(cursor)
            if len(starts) > _MAX_INTERVALS:
                props.fail(
                    "datetime-interval-amount",
                    self.amount,
                    f"makes more than {_MAX_INTERVALS} intervals between {self.lower} and {self.upper}",
                )
        self.starts = starts
        self.ends = starts[1:] + [cursor if cursor > starts[-1] else datetime.max]
        self.suffixes = [self.suffix_pattern.format(s) for s in starts]

    def _target_index(self, ts: TargetSet, k: int, value: Any, row: int | None = None) -> int:
        i = ts.index_of_suffix(self.suffixes[k])
        if i < 0:
            where = f"row {row}: " if row is not None else ""
            if i == AMBIGUOUS:
                why = f"several targets end with {self.suffixes[k]!r}: {ts.names_with_suffix(self.suffixes[k])}"
            else:
                why = f"no target ends with {self.suffixes[k]!r} among {show_targets(ts.names)}"
            raise RoutingError(
                f"{self.label}: {where}value {value!r} falls in the interval starting {self.starts[k]}, but {why}",
                algorithm=self.name,
                value=value,
                suffix=self.suffixes[k],
                targets=ts.names,
            )
        return i

    def _outside(self, value: Any, t: datetime, row: int | None = None) -> RoutingError:
        where = f"row {row}: " if row is not None else ""
        return RoutingError(
            f"{self.label}: {where}value {value!r} ({t}) is outside the configured intervals "
            f"[{self.starts[0]}, {self.ends[-1]})",
            algorithm=self.name,
            value=value,
        )

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        column, value = self._single(values)
        t = self._time(value, column)
        k = _interval_of(self.starts, self.ends, t)
        if k < 0:
            raise self._outside(value, t)
        ts = target_set(targets)
        return [ts.names[self._target_index(ts, k, value)]]

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        ts = target_set(targets)
        starts, ends, suffixes = self.starts, self.ends, self.suffixes
        to_datetime, label, name = self.coercer.to_datetime, self.label, self.name
        slow = super().scalar(targets, column)

        def index(value: Any) -> int:
            k = _interval_of(starts, ends, to_datetime(value, label, name, column))
            i = ts.index_of_suffix(suffixes[k]) if k >= 0 else NONE  # cached per suffix
            return i if i >= 0 else slow(value)

        return index

    def range(self, targets: Sequence[str], ranges: Mapping[str, ValueRange]) -> list[str]:
        column, r = self._single(ranges)
        lo, hi = self._bounds(column, r)
        ts = target_set(targets)
        wanted: set[int] = set()
        for k in _span(self.starts, self.ends, r, lo, hi):
            suffix = self.suffixes[k]
            i = ts.index_of_suffix(suffix)
            if i >= 0:
                wanted.add(i)
            elif i == AMBIGUOUS:
                wanted.update(ts.position[n] for n in ts.names_with_suffix(suffix))
        return [ts.names[i] for i in sorted(wanted)]

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        column, arr = self._single_array(columns)
        ts = target_set(targets)
        values = arr.tolist() if arr.dtype.kind != "M" else list(arr)
        out = np.empty(len(values), dtype=np.intp)
        for row, value in enumerate(values):
            t = self._time(value, column)
            k = _interval_of(self.starts, self.ends, t)
            if k < 0:
                raise self._outside(value, t, row)
            out[row] = self._target_index(ts, k, value, row)
        return out

    def check_targets(self, targets: Sequence[str]) -> None:
        ts = target_set(targets)
        bad = [s for s in self.suffixes if ts.index_of_suffix(s) < 0]
        if bad:
            raise ConfigError(
                f"sharding algorithm {self.label}: {len(bad)} interval(s) have no single target, "
                f"first suffix {bad[0]!r}, among {show_targets(ts.names)}",
                algorithm=self.name,
                missing=bad,
            )

    def describe(self) -> str:
        return (
            f"INTERVAL({self.lower:%Y-%m-%d %H:%M:%S}..{self.upper:%Y-%m-%d %H:%M:%S}, "
            f"step={self.amount} {self.unit}, suffix={self.suffix_pattern.pattern}; {len(self.starts)} intervals)"
        )


@register
class AutoIntervalAlgorithm(NumberedAlgorithm, _TimeAlgorithm):
    """``AUTO_INTERVAL``: numbered shards of ``sharding-seconds`` each, ShardingSphere-exact."""

    type_name = "AUTO_INTERVAL"
    PROPS = {
        "datetime-lower": "yyyy-MM-dd HH:mm:ss (required)",
        "datetime-upper": "yyyy-MM-dd HH:mm:ss (required)",
        "sharding-seconds": "seconds per shard, > 0 (required)",
        **TimeCoercer.PROPS,
    }

    def _configure(self, props: Props) -> None:
        self.coercer = TimeCoercer(props, JavaPattern("yyyy-MM-dd HH:mm:ss"))
        self.lower = self.coercer.parse_config(props.raw("datetime-lower"), props, "datetime-lower")
        upper_raw = props.raw("datetime-upper")
        self.upper = self.coercer.parse_config(upper_raw, props, "datetime-upper")
        self.seconds = props.integer("sharding-seconds", min=1)
        if self.upper <= self.lower:
            props.fail("datetime-upper", upper_raw, f"must be after datetime-lower {self.lower}")
        # (int) (Math.ceil((double) (upperSeconds / shardingSeconds)) + 2): long division first.
        self.result_count = self._seconds_since_lower(self.upper) // self.seconds + 2

    def _seconds_since_lower(self, t: datetime) -> int:
        # Duration.between(lower, t).toMillis() / 1000: floor to ms, then truncate toward zero.
        d = t - self.lower  # normalised: only the days may be negative
        millis = d.days * 86_400_000 + d.seconds * 1000 + d.microseconds // 1000
        return millis // 1000 if millis >= 0 else -((-millis) // 1000)

    def partition(self, t: datetime) -> int:
        """The shard number of a (naive, wall-clock) datetime."""
        position = self._seconds_since_lower(t) / self.seconds  # a Java double
        # DecimalFormat("0.00") of that double's exact value (half-even), then the ceiling,
        # in integers: 100 * position = hundredths + rest / den with 0 <= rest < den.
        num, den = position.as_integer_ratio()
        hundredths, rest = divmod(num * 100, den)
        if 2 * rest > den or (2 * rest == den and hundredths & 1):
            hundredths += 1
        return min(max(0, -(-hundredths // 100)), self.result_count - 1)

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        column, value = self._single(values)
        return [self._target(target_set(targets), self.partition(self._time(value, column)), value)]

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        numbers, partition, slow = target_set(targets).numbers, self.partition, super().scalar(targets, column)
        to_datetime, label, name = self.coercer.to_datetime, self.label, self.name

        def index(value: Any) -> int:
            i = numbers.get(partition(to_datetime(value, label, name, column)), NONE)
            return i if i >= 0 else slow(value)

        return index

    def range(self, targets: Sequence[str], ranges: Mapping[str, ValueRange]) -> list[str]:
        column, r = self._single(ranges)
        lo, hi = self._bounds(column, r)
        return self._targets_of_partitions(targets, lo, hi, self.partition)

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        column, arr = self._single_array(columns)
        values = arr.tolist() if arr.dtype.kind != "M" else list(arr)
        numbers = np.array([self.partition(self._time(v, column)) for v in values], dtype=np.int64)
        return self._indices(target_set(targets), numbers, arr)

    def describe(self) -> str:
        return (
            f"AUTO_INTERVAL({self.lower:%Y-%m-%d %H:%M:%S}..{self.upper:%Y-%m-%d %H:%M:%S}, "
            f"seconds={self.seconds}; {self.result_count} shards)"
        )


@register
class TimeRangeAlgorithm(_TimeAlgorithm):
    """``TIME_RANGE``: explicit ``[start, end)`` intervals → target, validated."""

    type_name = "TIME_RANGE"
    PROPS = {
        "ranges": "list of {start, end, target} or [start, end, target]; [start, end) (required)",
        "allow-gaps": "true to allow uncovered time between intervals (default false)",
        "datetime-pattern": "optional Java pattern for the bounds and text values",
        **TimeCoercer.PROPS,
    }

    def _configure(self, props: Props) -> None:
        pattern_text = props.raw("datetime-pattern", None)
        pattern = None
        if pattern_text is not None:
            try:
                pattern = JavaPattern(props.text("datetime-pattern"))
            except PatternError as exc:
                props.fail("datetime-pattern", pattern_text, str(exc))
        self.coercer = TimeCoercer(props, pattern)
        self.allow_gaps = props.boolean("allow-gaps", False)
        raw = props.raw("ranges")
        if not isinstance(raw, (list, tuple)) or not raw:
            props.fail("ranges", raw, "must be a non-empty list of {start, end, target}")
        entries = []
        for pos, item in enumerate(raw):
            if isinstance(item, Mapping):
                extra = sorted(set(item) - {"start", "end", "target"})
                if extra or not {"start", "end", "target"} <= set(item):
                    props.fail("ranges", item, f"entry {pos} needs exactly start, end and target")
                start, end, target = item["start"], item["end"], item["target"]
            elif isinstance(item, (list, tuple)) and len(item) == 3:
                start, end, target = item
            else:
                props.fail("ranges", item, f"entry {pos} must be {{start, end, target}} or [start, end, target]")
            if not isinstance(target, str) or not target:
                props.fail("ranges", item, f"entry {pos}: target must be a non-empty name")
            s = self.coercer.parse_config(start, props, f"ranges[{pos}].start")
            e = self.coercer.parse_config(end, props, f"ranges[{pos}].end")
            if not s < e:
                props.fail("ranges", item, f"entry {pos}: end {e} is not after start {s}")
            entries.append((s, e, target, pos))
        entries.sort(key=lambda x: (x[0], x[1]))
        for (s1, e1, t1, p1), (s2, e2, t2, p2) in zip(entries, entries[1:]):
            if s2 < e1:
                props.fail(
                    "ranges",
                    raw,
                    f"entries {p1} [{s1}, {e1}) → {t1} and {p2} [{s2}, {e2}) → {t2} overlap "
                    f"(a value in [{s2}, {min(e1, e2)}) would have two targets)",
                )
            if s2 > e1 and not self.allow_gaps:
                props.fail(
                    "ranges",
                    raw,
                    f"gap [{e1}, {s2}) between entries {p1} (→ {t1}) and {p2} (→ {t2}); "
                    "set allow-gaps: true if no row can fall there",
                )
        self.starts = [x[0] for x in entries]
        self.ends = [x[1] for x in entries]
        self.range_targets = [x[2] for x in entries]

    def _pick(self, ts: TargetSet, value: Any, column: str, row: int | None = None) -> int:
        t = self._time(value, column)
        k = _interval_of(self.starts, self.ends, t)
        where = f"row {row}: " if row is not None else ""
        if k < 0:
            raise RoutingError(
                f"{self.label}: {where}value {value!r} ({t}) is in no configured time range "
                f"(they cover [{self.starts[0]}, {self.ends[-1]})"
                + (" with gaps)" if self.allow_gaps else ")"),
                algorithm=self.name,
                value=value,
            )
        i = ts.position.get(self.range_targets[k], NONE)
        if i < 0:
            raise RoutingError(
                f"{self.label}: {where}value {value!r} belongs to target {self.range_targets[k]!r}, "
                f"which is not among the available targets {show_targets(ts.names)}",
                algorithm=self.name,
                value=value,
                target=self.range_targets[k],
            )
        return i

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        column, value = self._single(values)
        ts = target_set(targets)
        return [ts.names[self._pick(ts, value, column)]]

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        ts, pick = target_set(targets), self._pick
        return lambda value: pick(ts, value, column)

    def range(self, targets: Sequence[str], ranges: Mapping[str, ValueRange]) -> list[str]:
        column, r = self._single(ranges)
        lo, hi = self._bounds(column, r)
        ts = target_set(targets)
        wanted = {ts.position[self.range_targets[k]] for k in _span(self.starts, self.ends, r, lo, hi)
                  if self.range_targets[k] in ts.position}
        return [ts.names[i] for i in sorted(wanted)]

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        column, arr = self._single_array(columns)
        ts = target_set(targets)
        values = arr.tolist() if arr.dtype.kind != "M" else list(arr)
        return np.fromiter(
            (self._pick(ts, v, column, row) for row, v in enumerate(values)), dtype=np.intp, count=len(values)
        )

    def check_targets(self, targets: Sequence[str]) -> None:
        ts = target_set(targets)
        missing = sorted({t for t in self.range_targets if t not in ts.position})
        if missing:
            raise missing_targets_error(self.label, self.name, "time ranges name", missing, ts)

    def describe(self) -> str:
        return (
            f"TIME_RANGE({len(self.starts)} ranges, {self.starts[0]:%Y-%m-%d}..{self.ends[-1]:%Y-%m-%d}"
            + (", gaps allowed)" if self.allow_gaps else ")")
        )
