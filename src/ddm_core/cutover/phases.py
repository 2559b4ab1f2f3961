"""The phases of a gray cut-over and which may follow which (docs/cutover.md#phases).

A cut-over's buckets change state one transition at a time while it is
``live``; the phases around that are the one-time work before (prepare, the
full copy, the replay of what changed during the copy) and the two ways it
ends (finished: every bucket on the shards; rolled back: every bucket on the
legacy table).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

__all__ = ["CutoverPhase", "may_enter"]


class CutoverPhase(str, Enum):
    """Where a cut-over is."""

    #: The shard tables created from the legacy table's DDL; every schema compared.
    PREPARE = "prepare"
    #: Every legacy row copied to its shard, in primary-key order, batch by checked batch.
    COPY = "copy"
    #: The legacy binlog since the copy started replayed; the gate is a pass under 1 s.
    REPLAY = "replay"
    #: Buckets advance and roll back; forward and reverse sync keep both sides current.
    LIVE = "live"
    #: Every bucket on the shards; the plain sharded configuration published.
    FINISHED = "finished"
    #: Every bucket back on the legacy table; the cut-over is over.
    ROLLED_BACK = "rolled_back"

    def __str__(self) -> str:
        return self.value


_FORWARD = (CutoverPhase.PREPARE, CutoverPhase.COPY, CutoverPhase.REPLAY, CutoverPhase.LIVE, CutoverPhase.FINISHED)
_TERMINAL = frozenset({CutoverPhase.FINISHED, CutoverPhase.ROLLED_BACK})


def may_enter(current: Any, completed: bool, target: Any) -> str | None:
    """Why ``target`` cannot be entered from ``current`` (``None``: it can).

    Finishing needs every bucket on the shards and rolling back every bucket on
    the legacy table: the caller checks the buckets, this only the phases.
    """
    if current is None:
        return None if target is CutoverPhase.PREPARE else f"a cut-over starts with {CutoverPhase.PREPARE}"
    if current in _TERMINAL:
        return f"the cut-over is over ({current})"
    if target is CutoverPhase.ROLLED_BACK:
        return None
    if target is current:
        return None if not completed else f"{current} is already completed"
    at = _FORWARD.index(current)
    if _FORWARD[at + 1] is not target:
        return f"{target} does not follow {current} (next is {_FORWARD[at + 1]})"
    if not completed and current is not CutoverPhase.LIVE:
        return f"{current} is not completed yet"
    return None
