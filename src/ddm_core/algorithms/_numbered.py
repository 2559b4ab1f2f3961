"""Shared machinery of the algorithms whose result is a shard *number*.

MOD, HASH_MOD, SALTED_MOD, COMPLEX_HASH_MOD, VOLUME_RANGE, BOUNDARY_RANGE and
AUTO_INTERVAL compute a number ``0 <= k < result_count`` and pick the target
whose trailing digit run equals ``k`` (see :mod:`ddm_core.algorithms._targets`).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ddm_core.algorithms._targets import (
    NONE,
    TargetSet,
    check_numbers,
    number_error,
    target_set,
)
from ddm_core.algorithms.base import ShardingAlgorithm

__all__ = ["NumberedAlgorithm"]


class NumberedAlgorithm(ShardingAlgorithm):
    """Base of the numeric-result algorithms; subclasses set ``result_count``."""

    result_count: int

    def _target(self, ts: TargetSet, number: int, value: Any) -> str:
        i = ts.numbers.get(number, NONE)
        if i < 0:
            raise number_error(self.label, self.name, value, number, ts, i)
        return ts.names[i]

    def _indices(self, ts: TargetSet, numbers: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Target index per row for ``numbers`` (each in ``0..result_count-1``)."""
        lut = ts.number_lut(self.result_count)
        idx: np.ndarray
        if lut is not None:
            idx = lut[numbers]
        else:
            table = ts.numbers
            idx = np.fromiter(
                (table.get(n, NONE) for n in numbers.tolist()), dtype=np.intp, count=numbers.shape[0]
            )
        if idx.size and idx.min() < 0:
            row = int(np.flatnonzero(idx < 0)[0])
            raise number_error(
                self.label, self.name, _py(values[row]), int(numbers[row]), ts, int(idx[row]), row=row
            )
        return idx

    def _targets_of_numbers(self, ts: TargetSet, numbers: Iterable[int]) -> list[str]:
        """Targets (configured order) answering to any of ``numbers``; unanswered numbers are skipped.

        A number without a target cannot hold rows written through ddm-core
        (its precise route raises), so a range may skip it.
        """
        wanted = set()
        table = ts.numbers
        for n in numbers:
            i = table.get(n, NONE)
            if i >= 0:
                wanted.add(i)
            elif i != NONE:  # ambiguous: every candidate
                wanted.update(ts.position[name] for name in ts.names_of_number(n))
        return [ts.names[i] for i in sorted(wanted)]

    def _targets_of_partitions(
        self, targets: Sequence[str], lo: Any, hi: Any, partition: Callable[[Any], int]
    ) -> list[str]:
        """Targets of the partitions ``partition(lo)..partition(hi)`` (range algorithms).

        ``lo`` and ``hi`` are inclusive bounds; ``None`` is unbounded (the
        first / last partition). ``lo > hi`` matches nothing.
        """
        if lo is not None and hi is not None and lo > hi:
            return []
        first = 0 if lo is None else partition(lo)
        last = self.result_count - 1 if hi is None else partition(hi)
        return self._targets_of_numbers(target_set(targets), range(first, last + 1))

    def check_targets(self, targets: Sequence[str]) -> None:
        check_numbers(self.label, self.name, target_set(targets), range(self.result_count))


def _py(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
