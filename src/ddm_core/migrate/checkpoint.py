"""Checkpoint rows of a workflow's state table: the rows that still matter, so reading never folds them all.

A workflow's state is the fold of its rows (:mod:`ddm_core.migrate.state`), and
``sync`` / ``catch-up`` add rows for as long as they run. A *checkpoint* row
(event ``checkpoint``) carries, in its ``detail``, the rows before it that the
fold still needs — every phase row, the last row of each scan and slot, the
transitions, the last findings — with their original numbers. The fold of
those rows, the checkpoint row and the rows after it is the fold of every row,
so a reader reads the last checkpoint and what follows it: a bounded number of
rows however long the workflow has run (docs/migration.md#checkpoints).

A checkpoint is one ``INSERT`` numbered like any other row, after the rows it
covers: a crash leaves it written whole or not at all, and a second writer of
its number fails as for any step.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Hashable, Iterable, Sequence

from ddm_core.migrate.event import Event

__all__ = ["CHECKPOINT", "CHECKPOINT_EVERY", "PHASE_ROWS", "encode", "decode", "expand", "last_of"]

#: The event of a checkpoint row.
CHECKPOINT = "checkpoint"
#: A writer adds a checkpoint once this many rows follow the last one: a read is at most this many rows
#: plus the checkpoint's own.
CHECKPOINT_EVERY = 64
#: The rows of every workflow's phase history, all kept.
PHASE_ROWS = frozenset({"enter", "complete", "stop"})


def encode(events: Iterable[Event]) -> dict[str, Any]:
    """A checkpoint row's ``detail``: ``events`` as JSON-able dicts (their numbers kept)."""
    return {"version": 1, "events": [_encode(ev) for ev in events]}


def decode(detail: Any, phases: Any) -> list[Event]:
    """The rows a checkpoint row's ``detail`` carries (``phases``: the workflow's phase enum)."""
    if not isinstance(detail, dict) or detail.get("version") != 1:
        raise ValueError(f"a checkpoint row of an unknown layout: {str(detail)[:80]}")
    return [_decode(raw, phases) for raw in detail["events"]]


def expand(rows: Sequence[Event], phases: Any) -> list[Event]:
    """The rows to fold: a leading checkpoint row replaced by the rows it carries, then itself, then the rest.

    The checkpoint row stays in place: it carries the phase (and read shift) in
    force and its number, which the folds take from the last row.
    """
    if rows and rows[0].event == CHECKPOINT:
        return decode(rows[0].detail, phases) + list(rows)
    return list(rows)


def last_of(events: Sequence[Event], key: Callable[[Event], Hashable | None]) -> list[Event]:
    """The last row for each ``key`` (rows whose key is ``None`` are not wanted), in their order."""
    last: dict[Hashable, Event] = {}
    for ev in events:
        k = key(ev)
        if k is not None:
            last.pop(k, None)
            last[k] = ev
    return list(last.values())


def _encode(ev: Event) -> dict[str, Any]:
    created = ev.created.isoformat() if isinstance(ev.created, datetime) else ev.created
    return {"seq": ev.seq, "event": ev.event, "phase": ev.phase.value, "slot": ev.slot,
            "high_water": list(ev.high_water) if ev.high_water is not None else None,
            "rows_copied": ev.rows_copied, "checksum": ev.checksum, "read_shift_pct": ev.read_shift_pct,
            "detail": ev.detail, "created": created}


def _decode(raw: dict[str, Any], phases: Any) -> Event:
    created = raw.get("created")
    return Event(int(raw["seq"]), str(raw["event"]), phases(raw["phase"]), raw.get("slot"),
                 tuple(raw["high_water"]) if raw.get("high_water") is not None else None, raw.get("rows_copied"),
                 raw.get("checksum"), float(raw.get("read_shift_pct") or 0.0), raw.get("detail"),
                 datetime.fromisoformat(created) if isinstance(created, str) else created)
