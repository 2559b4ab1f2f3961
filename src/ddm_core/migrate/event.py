"""One row of a workflow's state table (``ddm_migration``, ``ddm_cutover``), as the folds read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Event"]


@dataclass(frozen=True, slots=True)
class Event:
    """One row of the state table (``phase``: a member of the workflow's phase enum)."""

    seq: int
    event: str
    phase: Any
    slot: int | None = None
    high_water: tuple[Any, ...] | None = None
    rows_copied: int | None = None
    checksum: str | None = None
    read_shift_pct: float = 0.0
    detail: Any = None
    created: Any = None
