"""XA recovery: finish what crashed coordinators left prepared, as the transaction log decides.

``executor.recover_xa()`` / ``ddm xa recover --config ...`` (also at executor
start with ``xa.recoverOnStart``):

1. ``XA RECOVER`` on every MySQL / MariaDB data source; only this log's
   branches count (their gtrids carry its namespace, :mod:`ddm_core.xa.xid`).
   A data source that cannot be reached is reported and left alone.
2. Each global transaction seen there or unfinished in the log is settled by
   its log row:

   * ``COMMITTING`` / ``COMMITTED`` — commit its prepared branches;
   * ``ROLLING_BACK`` / ``ROLLED_BACK`` — roll them back;
   * ``PREPARING`` (no decision) — once the row is older than the abandon age
     (``xa.abandonAfterMs``), decide ROLLBACK by a compare-and-set (a
     coordinator that decides COMMIT first wins, and is then followed), roll
     back; younger ones are kept: their coordinator may still be running;
   * no row — a branch can only be prepared after its row was written, so the
     row was purged or the coordinator's log write failed: past the abandon age
     (by the time in its gtrid) a ``ROLLING_BACK`` tombstone is written and the
     branch rolled back. The tombstone also refuses a coordinator that comes
     back late.

3. A transaction none of whose participants still has a prepared branch (and
   whose participants were all reachable) gets its final state; finished rows
   older than a day are purged.

A prepared branch still attached to a live session cannot be ended from
another connection (the server answers ``XAER_NOTA``): it is reported as kept,
and its own coordinator — which the log decision now binds — ends it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from ddm_core.errors import DdmError, XaRecoveryError
from ddm_core.xa import branches as xa
from ddm_core.xa.runtime import runtime_of
from ddm_core.xa.log import GlobalState, LogRow, TransactionLog, XaHost
from ddm_core.xa.xid import Xid, gtrid_started_ms

__all__ = ["RecoveryReport", "recover", "PURGE_AFTER_MS"]

log = logging.getLogger("ddm_core.xa")

#: Finished log rows older than this are deleted by recovery (a day: far beyond any coordinator's timeout).
PURGE_AFTER_MS = 86_400_000


@dataclass
class RecoveryReport:
    """What one recovery pass did. Branches are ``gtrid/data_source``.

    Attributes:
        committed: Prepared branches committed.
        rolled_back: Prepared branches rolled back.
        kept: Branches left alone: undecided and younger than the abandon age,
            or attached to a live session.
        finished: Global transactions whose log row got its final state.
        unreachable: Data sources that could not be asked (their branches wait for the next pass).
        purged: Finished log rows deleted.
    """

    committed: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    purged: int = 0

    def summary(self) -> str:
        return (
            f"{len(self.committed)} branch(es) committed, {len(self.rolled_back)} rolled back, "
            f"{len(self.kept)} kept, {len(self.finished)} transaction(s) finished"
            + (f", unreachable: {', '.join(self.unreachable)}" if self.unreachable else "")
        )


def recover(executor: XaHost, *, abandon_after_ms: int | None = None, purge_after_ms: int = PURGE_AFTER_MS) -> RecoveryReport:
    """One recovery pass over every data source of ``executor`` (see the module docstring).

    Args:
        abandon_after_ms: Override ``xa.abandonAfterMs`` (``0``: roll back every undecided one now).
        purge_after_ms: Age of finished log rows to delete.

    Raises:
        XaRecoveryError: the log's data source cannot be used.
    """
    rt = runtime_of(executor)
    txlog = rt.log
    abandon = executor.config.xa.abandon_after_ms if abandon_after_ms is None else abandon_after_ms
    try:
        txlog.ensure()
        rt.flush_marks()  # this executor's own committed transactions: one write, not one per row below
        now_ms = txlog.now_ms()
    except DdmError as exc:
        raise XaRecoveryError(
            f"XA recovery needs the transaction log on data source {txlog.data_source!r}: {exc}",
            data_source=txlog.data_source,
        ) from exc
    report = RecoveryReport()
    prepared = _prepared_branches(executor, txlog.namespace, report)
    try:
        rows = txlog.read(prepared)
        for row in txlog.unfinished():
            rows.setdefault(row.gtrid, row)
    except DdmError as exc:
        raise XaRecoveryError(f"reading the XA log on {txlog.data_source!r} failed: {exc}") from exc
    for gtrid in sorted(set(prepared) | set(rows)):
        try:
            _settle(executor, txlog, gtrid, rows.get(gtrid), prepared.get(gtrid, {}), now_ms, abandon, report)
        except DdmError as exc:  # one transaction's trouble must not stop the others
            log.warning("XA recovery of %s stopped: %s", gtrid, exc)
            report.kept.extend(f"{gtrid}/{ds}" for ds in prepared.get(gtrid, {}))
    try:
        report.purged = txlog.purge(purge_after_ms)
    except DdmError as exc:
        log.warning("purging the XA log failed: %s", exc)
    if report.committed or report.rolled_back or report.unreachable:
        log.info("XA recovery: %s", report.summary())
    return report


def _prepared_branches(executor: XaHost, namespace: str, report: RecoveryReport) -> dict[str, dict[str, Xid]]:
    """gtrid → data source → xid of every prepared branch of this log, over every data source."""
    config = executor.config
    owner_of = {Xid.branch("", ds).bqual: ds for ds in config.data_sources}
    found: dict[str, dict[str, Xid]] = defaultdict(dict)
    for ds in config.data_sources:
        pool = executor.primary_pool(ds)
        if not pool.driver.dialect.supports_xa:
            continue  # never a participant
        try:
            pinned = pool.borrow()
        except DdmError as exc:
            log.warning("XA recovery cannot reach %s: %s", ds, exc)
            report.unreachable.append(ds)
            continue
        try:
            xids = xa.recover(pinned, namespace)
        except DdmError as exc:
            pinned.release(discard=True)
            log.warning("XA RECOVER on %s failed: %s", ds, exc)
            report.unreachable.append(ds)
            continue
        pinned.release()
        for xid in xids:  # a server shared by several data sources lists all their branches
            found[xid.gtrid][owner_of.get(xid.bqual, ds)] = xid
    return found


def _settle(
    executor: XaHost,
    txlog: TransactionLog,
    gtrid: str,
    row: LogRow | None,
    branches: dict[str, Xid],
    now_ms: int,
    abandon_ms: int,
    report: RecoveryReport,
) -> None:
    names = [f"{gtrid}/{ds}" for ds in branches]
    if row is None:
        started = gtrid_started_ms(gtrid)
        if started is not None and now_ms - started < abandon_ms:
            report.kept.extend(names)
            return
        state = txlog.tombstone(gtrid)  # a row that appeared meanwhile wins
    elif row.state is GlobalState.PREPARING:
        if row.age_ms < abandon_ms:
            report.kept.extend(names)
            return
        if txlog.decide(gtrid, GlobalState.ROLLING_BACK):
            state = GlobalState.ROLLING_BACK
        else:  # its coordinator decided meanwhile: follow that
            fresh = txlog.read([gtrid]).get(gtrid)
            state = fresh.state if fresh is not None else GlobalState.ROLLING_BACK
    else:
        state = row.state
    if state is GlobalState.PREPARING:
        report.kept.extend(names)
        return
    commit = state.commits
    settled = True
    for ds, xid in branches.items():
        if ds in report.unreachable or ds not in executor.config.data_sources:
            settled = False
            continue
        pinned = executor.primary_pool(ds).borrow()
        try:
            ended = xa.commit(pinned, xid) if commit else xa.rollback(pinned, xid)
        except DdmError:
            pinned.release(discard=True)
            raise
        pinned.release()
        if ended:
            (report.committed if commit else report.rolled_back).append(f"{gtrid}/{ds}")
        else:  # attached to a live session (or ended meanwhile): the next pass sees
            report.kept.append(f"{gtrid}/{ds}")
            settled = False
    participants = row.participants if row is not None else tuple(branches)
    if settled and not state.final and not any(p in report.unreachable for p in participants):
        final = GlobalState.COMMITTED if commit else GlobalState.ROLLED_BACK
        if txlog.decide(gtrid, final, expect=state):
            report.finished.append(gtrid)
