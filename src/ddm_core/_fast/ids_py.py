"""Pure-Python twin of ``ids.pyx``: snowflake and gene id generators.

Clock rules (both generators): ids are built from a millisecond clock; when
the sequence of one millisecond is used up the generator waits for the next
one (never a duplicate, never None); when the clock steps back by at most
``max_backward_ms`` it waits until the clock catches up, further back it
raises :class:`ClockMovedBackwardsError` saying by how much. The rule is
checked on every clock reading, waits included: a jump back that happens while
the generator already waits (at sequence rollover, or catching up a small step)
raises instead of being waited out with the lock held. An injected clock that
raises fails the call with :class:`ClockReadError` naming the clock (its own
``DdmError``, such as a lost worker lease, passes unchanged); one that returns
no number (``None``, text such as ``"1700000000000"``) with ``IdTypeError``
(``read_clock`` in :mod:`ddm_core._fast.id_layout`). Bit layouts are
documented in :mod:`ddm_core._fast.id_layout`.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from ddm_core.errors import ClockMovedBackwardsError
from ddm_core._fast.hashing_py import slot_of, slots_of
from ddm_core._fast.id_layout import (
    DEFAULT_EPOCH_MS,
    TIME_BITS,
    IdLayout,
    IdParts,
    check_count,
    check_gene_bits,
    clock_range_error,
    gene_of,
    make_layout,
    read_clock,
)

__all__ = ["Snowflake", "GeneIdGenerator", "IdParts", "IdLayout", "gene_of", "DEFAULT_EPOCH_MS"]

Clock = Callable[[], int]


def _system_ms() -> int:
    return time.time_ns() // 1_000_000


class _Sequencer:
    """Time + worker + sequence; subclasses add the low (gene) bits."""

    __slots__ = ("_layout", "_clock", "_lock", "_last", "_seq", "_seq_mask", "_worker_part")

    def __init__(self, layout: IdLayout, clock: Clock | None) -> None:
        self._layout = layout
        self._clock = clock
        self._lock = threading.Lock()
        self._last = -1
        self._seq = 0
        self._seq_mask = (1 << layout.sequence_bits) - 1
        self._worker_part = layout.worker_id << layout.worker_shift

    @property
    def layout(self) -> IdLayout:
        return self._layout

    @property
    def worker_id(self) -> int:
        return self._layout.worker_id

    def decode(self, id: int) -> IdParts:
        return self._layout.decode(id)

    def _now(self) -> int:
        return _system_ms() if self._clock is None else read_clock(self._clock, self._layout.epoch_ms)

    def _wait_until(self, target: int) -> int:
        """The first reading ``>= target``; raises once a reading falls further back than allowed."""
        floor = self._last - self._layout.max_backward_ms  # below it: a jump back, never waited out
        now = self._now()
        while floor <= now < target:
            if self._clock is None and target - now > 1:
                time.sleep((target - now - 1) / 1000)  # at most max_backward_ms + 1
            now = self._now()
        if now < floor:
            raise ClockMovedBackwardsError(self._last - now, self._layout.max_backward_ms)
        return now

    def _next_base(self) -> int:
        """The id without its gene bits; the caller holds the lock."""
        layout = self._layout
        now = self._now()
        if now < self._last:
            back = self._last - now
            if back > layout.max_backward_ms:
                raise ClockMovedBackwardsError(back, layout.max_backward_ms)
            now = self._wait_until(self._last)
        if now == self._last:
            seq = (self._seq + 1) & self._seq_mask
            if seq == 0:  # this millisecond is used up
                now = self._wait_until(self._last + 1)  # may raise: the state is changed only after it
            self._seq = seq
        else:
            self._seq = 0
        self._last = now
        elapsed = now - layout.epoch_ms
        if not 0 <= elapsed < 1 << TIME_BITS:
            raise clock_range_error(now, layout.epoch_ms)
        return (elapsed << layout.time_shift) | self._worker_part | (self._seq << layout.gene_bits)


class Snowflake(_Sequencer):
    """41-bit ms time, 10-bit worker, 12-bit sequence (4096 ids per ms)."""

    __slots__ = ()

    def __init__(
        self,
        worker_id: int,
        *,
        epoch_ms: int = DEFAULT_EPOCH_MS,
        max_backward_ms: int = 5,
        clock: Clock | None = None,
    ) -> None:
        layout = make_layout(
            worker_id, worker_bits=10, gene_bits=0, epoch_ms=epoch_ms, max_backward_ms=max_backward_ms
        )
        super().__init__(layout, clock)

    def next_id(self) -> int:
        with self._lock:
            return self._next_base()

    def next_ids(self, n: int) -> NDArray[np.int64]:
        n = check_count(n)
        with self._lock:
            return np.array([self._next_base() for _ in range(n)], dtype=np.int64)


class GeneIdGenerator(_Sequencer):
    """Snowflake whose low ``gene_bits`` bits are the slot of a shard key (docs/architecture.md#gene-ids)."""

    __slots__ = ()

    def __init__(
        self,
        worker_id: int,
        gene_bits: int = 10,
        *,
        worker_bits: int = 6,
        epoch_ms: int = DEFAULT_EPOCH_MS,
        max_backward_ms: int = 5,
        clock: Clock | None = None,
    ) -> None:
        layout = make_layout(
            worker_id,
            worker_bits=worker_bits,
            gene_bits=check_gene_bits(gene_bits),
            epoch_ms=epoch_ms,
            max_backward_ms=max_backward_ms,
        )
        super().__init__(layout, clock)

    @property
    def gene_bits(self) -> int:
        return self._layout.gene_bits

    def next_id(self, shard_key: Any) -> int:
        gene = slot_of(shard_key, self._layout.gene_bits)  # a bad key fails before a sequence is used
        with self._lock:
            return self._next_base() | gene

    def next_ids(self, shard_keys: Any) -> NDArray[np.int64]:
        genes = slots_of(shard_keys, self._layout.gene_bits).astype(np.int64)
        with self._lock:
            bases = np.array([self._next_base() for _ in range(len(genes))], dtype=np.int64)
        return bases | genes

    def gene_of(self, id: int) -> int:
        return gene_of(id, self._layout.gene_bits)
