"""The phases of a resharding migration, in order, and which step may follow which.

The order is the issue's (docs/migration.md#phases): prepare, dual write,
backfill, catch-up, then the verification that gates the read shift, the
read shift itself, cutover and finish. Rollback returns every read and write
to the old location and is possible until cutover completes: while a cutover
runs, writes to the moving slots are paused and the old location is still
complete (the migrator also checks that the new placement was not published
yet); after it, writes go to the new location only and the old rows fall behind.

Each phase is *entered* (its work starts) and later *completed* (its work is
done and its gate passed); only a completed phase may be left forwards. Both
are rows of the state table (:mod:`ddm_core.migrate.state`), so a migrator
killed in the middle of a phase finds it entered and not completed, and
resumes it.

The :class:`Phase` enum itself lives in :mod:`ddm_core.metadata.phases`, below
the router that follows published phases; it is re-exported here.
"""

from __future__ import annotations

from ddm_core.metadata.phases import Phase

__all__ = ["Phase", "FORWARD", "ROLLBACK_FROM", "TERMINAL", "next_phase", "may_enter"]


#: The forward order.
FORWARD: tuple[Phase, ...] = (
    Phase.PREPARE,
    Phase.DUAL_WRITE,
    Phase.BACKFILL,
    Phase.CATCH_UP,
    Phase.VERIFY,
    Phase.SHIFT_READS,
    Phase.CUTOVER,
    Phase.FINISH,
)

#: Phases a rollback may start from: every one before cutover.
ROLLBACK_FROM = frozenset(FORWARD[: FORWARD.index(Phase.CUTOVER)])

#: Phases after which nothing follows.
TERMINAL = frozenset({Phase.FINISH, Phase.ROLLED_BACK})

# A verification that finds differences sends the migration back to catch-up to repair them.
_BACK = {Phase.VERIFY: Phase.CATCH_UP}


def next_phase(phase: Phase) -> Phase | None:
    """The phase after ``phase`` going forwards (``None`` for a terminal one)."""
    if phase in TERMINAL:
        return None
    return FORWARD[FORWARD.index(phase) + 1]


def may_enter(current: Phase | None, completed: bool, target: Phase) -> str | None:
    """Why ``target`` cannot be entered from ``current`` (``None``: it can).

    Args:
        current: The phase the migration is in (``None``: it has not started).
        completed: Whether ``current``'s work is done and its gate passed.
        target: The phase to enter.
    """
    if current is None:
        return None if target is Phase.PREPARE else f"a migration starts with {Phase.PREPARE}, not {target}"
    if current in TERMINAL:
        return f"the migration is over ({current})"
    if target is Phase.ROLLED_BACK:
        if current in ROLLBACK_FROM or (current is Phase.CUTOVER and not completed):
            return None
        return f"rollback is possible until {Phase.CUTOVER} completes; from {current} the old location has fallen behind"
    if _BACK.get(current) is target:
        return None
    if target is current:
        return None if not completed else f"{current} is already completed"
    if next_phase(current) is not target:
        expected = next_phase(current)
        return f"{target} does not follow {current} (next is {expected})"
    if not completed:
        return f"{current} is not completed yet"
    return None
