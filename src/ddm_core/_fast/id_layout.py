"""Bit layouts of snowflake and gene ids, shared by both id twins (nothing here is hot but ``read_clock``).

Every id is a positive signed 64-bit integer (bit 63 is always 0)::

    | 41 bits: ms since epoch | worker_bits | sequence_bits | gene_bits |

* Snowflake: worker 10, sequence 12, gene 0 — 1024 workers, 4096 ids per ms
  per worker (4.096 M/s), time until epoch + 69.7 years.
* Gene ids: the low ``gene_bits`` bits hold the shard key's slot
  (``slot_of(key, gene_bits)``), so an id routes to the slot of its key. With the
  defaults (gene 10, worker 6) the sequence gets 6 bits: 64 workers × 64 ids per
  ms each (64 000 ids/s per worker). Widen the sequence by narrowing the worker
  field: ``worker_bits + sequence_bits + gene_bits`` is always 22.

Why gene ids, and the clock rules: docs/operations.md#global-ids.
"""

from __future__ import annotations

import numbers
import operator
from typing import Any, Callable, NamedTuple

from ddm_core.errors import ClockReadError, DdmError, IdCountError, IdGenerationError, IdTypeError, WorkerIdError

__all__ = [
    "TIME_BITS",
    "LOW_BITS",
    "DEFAULT_EPOCH_MS",
    "IdLayout",
    "IdParts",
    "make_layout",
    "check_gene_bits",
    "gene_of",
    "read_clock",
    "clock_range_error",
    "check_count",
]

TIME_BITS = 41
LOW_BITS = 63 - TIME_BITS  # worker + sequence + gene
#: 2020-01-01T00:00:00Z; ids stay positive until 2089-09-06.
DEFAULT_EPOCH_MS = 1_577_836_800_000
#: An injected clock's readings must lie in ``[0, CLOCK_END)`` (epochs are at most
#: ``2**62`` too), so the generators' int64 arithmetic on them cannot overflow.
CLOCK_END = 1 << 62


class IdParts(NamedTuple):
    """A decoded id."""

    timestamp_ms: int  # unix ms (epoch already added)
    worker_id: int
    sequence: int
    gene: int  # 0 for plain snowflake ids


class IdLayout(NamedTuple):
    """Field widths and the fixed worker field of one generator."""

    worker_id: int
    worker_bits: int
    sequence_bits: int
    gene_bits: int
    epoch_ms: int
    max_backward_ms: int

    @property
    def time_shift(self) -> int:
        return self.worker_bits + self.sequence_bits + self.gene_bits

    @property
    def worker_shift(self) -> int:
        return self.sequence_bits + self.gene_bits

    @property
    def per_ms(self) -> int:
        """Ids one worker can issue per millisecond."""
        return 1 << self.sequence_bits

    def decode(self, id: int) -> IdParts:
        """Split an id of this layout into its fields."""
        id = _check_id(id)
        return IdParts(
            timestamp_ms=(id >> self.time_shift) + self.epoch_ms,
            worker_id=(id >> self.worker_shift) & ((1 << self.worker_bits) - 1),
            sequence=(id >> self.gene_bits) & ((1 << self.sequence_bits) - 1),
            gene=id & ((1 << self.gene_bits) - 1),
        )


def _int_field(name: str, value: Any, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise WorkerIdError(f"{name} must be an int from {low} to {high}, not {value!r}", value=value)
    return value


def make_layout(
    worker_id: int,
    *,
    worker_bits: int,
    gene_bits: int,
    epoch_ms: int,
    max_backward_ms: int,
) -> IdLayout:
    """Validate a generator's settings; the sequence gets the bits left over."""
    _int_field("gene_bits", gene_bits, 0, 16)
    _int_field("worker_bits", worker_bits, 0, LOW_BITS - gene_bits - 1)
    sequence_bits = LOW_BITS - worker_bits - gene_bits
    _int_field("worker_id", worker_id, 0, (1 << worker_bits) - 1)
    _int_field("epoch_ms", epoch_ms, 0, 1 << 62)
    _int_field("max_backward_ms", max_backward_ms, 0, 60_000)
    return IdLayout(worker_id, worker_bits, sequence_bits, gene_bits, epoch_ms, max_backward_ms)


def check_gene_bits(gene_bits: int) -> int:
    """``gene_bits`` if it is an int from 1 to 16 (a gene is a slot number)."""
    return _int_field("gene_bits", gene_bits, 1, 16)


def _check_id(id: Any) -> int:
    # operator.index, not int(): a float id has lost its low bits, a str is no id.
    try:
        value = operator.index(id)
    except TypeError:
        raise WorkerIdError(f"id {id!r} is not an int", value=id) from None
    if not 0 <= value < 1 << 63:
        raise WorkerIdError(f"id {id} is not a positive 63-bit id", value=id)
    return value


def gene_of(id: int, gene_bits: int) -> int:
    """The gene (the shard key's slot) carried in the low ``gene_bits`` bits of ``id``."""
    # Lenient like int() on purpose: the router passes raw SQL values here.
    return int(id) & ((1 << check_gene_bits(gene_bits)) - 1)


def clock_range_error(now: int, epoch_ms: int) -> IdGenerationError:
    """The error for a clock reading no id of this epoch can hold."""
    return IdGenerationError(
        f"clock {now} ms is outside the {TIME_BITS}-bit range of epoch {epoch_ms}", now_ms=now
    )


def read_clock(clock: Callable[[], Any], epoch_ms: int) -> int:
    """One reading of an injected clock, as an int in ``[0, CLOCK_END)``.

    Raises:
        ClockReadError: the clock raised (its own ``DdmError``, such as a lost worker
            lease, passes unchanged: it already says what happened).
        IdTypeError: it returned something that is no number (``None``, the text ``"1700000000000"``).
        IdGenerationError: the reading is outside ``[0, CLOCK_END)``.
    """
    try:
        reading = clock()
    except DdmError:
        raise
    except Exception as exc:
        raise ClockReadError(
            f"the id generator's clock {_clock_name(clock)} raised {type(exc).__name__}: {exc}",
            clock=_clock_name(clock),
        ) from exc
    if type(reading) is int and 0 <= reading < CLOCK_END:  # the hot path: one type check, one range check
        return reading
    return _milliseconds(clock, reading, epoch_ms)


def _milliseconds(clock: Callable[[], Any], reading: Any, epoch_ms: int) -> int:
    """``read_clock``'s slow path: a reading that is not a plain in-range int.

    A number is truncated (``time.time() * 1000``); text is refused even when it
    spells one, and so is a bool.
    """
    now: int | None = None
    if _is_number(reading):
        try:
            now = int(reading)
        except (TypeError, ValueError, OverflowError):  # complex, NaN, inf: no millisecond
            pass
    if now is None:
        raise IdTypeError(
            f"the id generator's clock {_clock_name(clock)} returned {type(reading).__name__} {reading!r}, "
            "not a number of milliseconds",
            reading=reading,
        )
    if not 0 <= now < CLOCK_END:
        raise clock_range_error(now, epoch_ms)
    return now


def _is_number(value: Any) -> bool:
    """A number, as a clock reading: not a bool, nor text, even text that spells a number."""
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _clock_name(clock: Callable[[], Any]) -> str:
    """How errors name an injected clock: its qualified name (``WorkerLease.clock``), else its repr."""
    name = getattr(clock, "__qualname__", None)
    return name if isinstance(name, str) else repr(clock)


def check_count(n: Any) -> int:
    """``n`` for ``next_ids(n)``: an int ``>= 0``."""
    try:
        count = operator.index(n)
    except TypeError:  # 2.0, "3": a count is a whole number, never rounded
        raise IdTypeError(f"next_ids(n) takes an int count, not {type(n).__name__} {n!r}", count=n) from None
    if count < 0:
        raise IdCountError(f"next_ids(n) cannot generate {count} ids; n must be >= 0", count=count)
    return count
