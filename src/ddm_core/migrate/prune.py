"""``ddm migrate prune`` / ``ddm cutover prune``: delete (or archive) the rows a checkpoint covers.

A workflow's state is its last checkpoint and the rows after it
(:mod:`ddm_core.migrate.checkpoint`), so the rows before that checkpoint are
history only. Pruning removes them, in batches of consecutive steps, each
batch copied to the archive table (when asked) and deleted in one transaction.
Every batch ends just before a checkpoint, so a prune killed between batches
leaves a log that still starts at a checkpoint (checkable like any other),
every row either still in the table or in the archive, and running it again
goes on.

It refuses while it would drop state: without a checkpoint, and when the
checkpoint and the rows after it do not fold to what all the rows fold to.
It never writes a step unless asked (``checkpoint=True``), so it can run next
to a running ``sync`` or ``catch-up``, which goes on appending after the
checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ddm_core.errors import MigrationError
from ddm_core.migrate.checkpoint import CHECKPOINT
from ddm_core.migrate.state import WorkflowLog, create_table_sql

__all__ = ["PruneReport", "prune", "PRUNE_BATCH"]

#: Steps deleted (and archived) per transaction.
PRUNE_BATCH = 10_000


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What a prune did: ``deleted`` rows before step ``checkpoint`` (``archived`` of them copied first)."""

    workflow: str
    checkpoint: int
    deleted: int
    archived: int
    kept: int

    def to_json(self) -> dict[str, Any]:
        return {"workflow": self.workflow, "checkpoint": self.checkpoint, "deleted": self.deleted,
                "archived": self.archived, "kept": self.kept}


def prune(log: WorkflowLog[Any], *, archive: str | None = None, checkpoint: bool = False,
          batch: int = PRUNE_BATCH, progress: Callable[[int], None] | None = None) -> PruneReport:
    """Delete the rows before ``log``'s last checkpoint (copied to ``archive`` first, if named).

    Args:
        checkpoint: Write a checkpoint covering every row first (only while no
            process runs the workflow: a running one would find its next step taken).
        progress: Called with the rows removed so far after each batch.

    Raises:
        MigrationError: No checkpoint, or the checkpoint would not reproduce the state.
    """
    what = f"{log.kind} {log.name!r} in table {log.table!r}"
    log.upgrade()
    if checkpoint:
        log.checkpoint()
    tail = log.tail()
    if not tail:
        raise MigrationError(f"{what} has no rows to prune", migration=log.name, table=log.table)
    if tail[0].event != CHECKPOINT:
        raise MigrationError(f"{what} has no checkpoint yet, so pruning would drop its state; a running step writes "
                             f"one every few dozen steps, or prune with --checkpoint while nothing runs it",
                             migration=log.name, table=log.table)
    at, last = tail[0].seq, tail[-1].seq
    _check_reproduces(log, what, tail, last)
    if archive is not None:
        create_table_sql(archive)  # checks the name
        log.transact("create the archive table",
                     lambda cur: cur.execute(f"CREATE TABLE IF NOT EXISTS `{archive}` LIKE `{log.table}`"))
    deleted = archived = 0
    while True:
        moved = log.transact("prune old steps", lambda cur: _prune_batch(cur, log, archive, at, batch))
        if moved is None:
            break
        deleted += moved[0]
        archived += moved[1]
        if progress is not None:
            progress(deleted)
    return PruneReport(log.name, at, deleted, archived, len(tail))


def _check_reproduces(log: WorkflowLog[Any], what: str, tail: list[Any], last: int) -> None:
    """Refuse unless the checkpoint and the rows after it fold as every row up to ``last`` does."""
    everything = log.events(upto=last)
    if everything and everything[0].seq != 1 and everything[0].event != CHECKPOINT:
        raise MigrationError(f"{what} starts at step {everything[0].seq} without a checkpoint: steps were deleted "
                             "by hand, so the state cannot be checked before pruning", migration=log.name,
                             table=log.table)
    whole, kept = log.fold(log.expanded(everything)), log.fold(log.expanded(tail))
    if whole != kept:
        raise MigrationError(f"{what}: the checkpoint at step {tail[0].seq} does not reproduce the state of all "
                             "rows; nothing pruned (report this: the checkpoint misses rows the state needs)",
                             migration=log.name, table=log.table)


def _prune_batch(cur: Any, log: WorkflowLog[Any], archive: str | None, before: int, batch: int
                 ) -> tuple[int, int] | None:
    """Archive and delete the next steps before ``before`` (``None``: none left).

    The batch runs from the first step up to (not including) the last checkpoint
    within ``batch`` steps of it, or the next checkpoint when none is that near:
    what stays always starts at a checkpoint.
    """
    cur.execute(f"SELECT MIN(seq) FROM `{log.table}` WHERE migration = %s AND seq < %s", (log.name, before))
    found = cur.fetchone()
    if not found or found[0] is None:
        return None
    low = int(found[0])
    high = _checkpoint_between(cur, log, low, min(low + batch, before), last=True) or \
        _checkpoint_between(cur, log, low, before, last=False) or before
    copied = 0
    if archive is not None:
        cur.execute(f"INSERT IGNORE INTO `{archive}` SELECT * FROM `{log.table}` "
                    "WHERE migration = %s AND seq >= %s AND seq < %s", (log.name, low, high))
        copied = int(cur.rowcount)
    cur.execute(f"DELETE FROM `{log.table}` WHERE migration = %s AND seq >= %s AND seq < %s", (log.name, low, high))
    return int(cur.rowcount), copied


def _checkpoint_between(cur: Any, log: WorkflowLog[Any], low: int, high: int, *, last: bool) -> int | None:
    """The last (or first) checkpoint's step in ``(low, high]``, if any."""
    cur.execute(f"SELECT seq FROM `{log.table}` WHERE migration = %s AND event = %s AND seq > %s AND seq <= %s "
                f"ORDER BY seq {'DESC' if last else 'ASC'} LIMIT 1", (log.name, CHECKPOINT, low, high))
    found = cur.fetchone()
    return int(found[0]) if found else None
