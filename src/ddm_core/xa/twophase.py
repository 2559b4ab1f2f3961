"""The XA protocol of one global transaction, written once for both runners (docs/xa.md#commit).

:class:`TwoPhase` never does I/O: its ``*_steps`` methods are generators of
:mod:`ddm_core.execute.steps` (a statement on a branch's connection, one on the transaction log's
data source, the end of the transaction), and the thread
(:class:`~ddm_core.xa.coordinator.XaTransaction`) and asyncio
(:class:`~ddm_core.aio.xa.AsyncXaTransaction`) transactions answer them. What it decides:

* a branch per data source, ``XA START`` on its pinned connection;
* a statement failure that ends the global transaction (a deadlock or lock-wait timeout in any
  branch, the transaction's own deadline passed): every branch rolled back, the error to raise;
* ``commit``: ``XA END`` on every branch; one branch: ``XA COMMIT ... ONE PHASE`` (no log, no
  PREPARE); several: log ``PREPARING`` with the participants, ``XA PREPARE`` each branch, log the
  COMMIT decision (a compare-and-set: if recovery rolled the transaction back meanwhile, a late
  PREPARE never commits), ``XA COMMIT`` each branch, log ``COMMITTED``.

A failure before the decision rolls every branch back. After the decision the transaction *is*
committed: a branch whose ``XA COMMIT`` failed stays prepared on its server and recovery commits
it (:class:`~ddm_core.errors.XaInDoubtError` says so, with ``committed=True``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Iterable

from ddm_core.errors import (
    DdmError,
    ExecutionError,
    QueryTimeoutError,
    TransactionError,
    XaBranchAbortedError,
    XaError,
    XaInDoubtError,
    XaTimeoutError,
)
from ddm_core.execute.pools import discard_on
from ddm_core.execute.shared import DEFAULT
from ddm_core.execute.steps import Finish, Outcome, Round, Sql, Steps, together
from ddm_core.execute.transaction import check_usable
from ddm_core.xa import branches as xa
from ddm_core.xa.log import GlobalState
from ddm_core.xa.xid import Xid, new_gtrid

if TYPE_CHECKING:
    from ddm_core.xa.runtime import XaRuntime

__all__ = ["TwoPhase", "TwoPhaseView", "Branch", "BranchPhase"]

log = logging.getLogger("ddm_core.xa")


class BranchPhase(str, Enum):
    """Where one branch is (XA's branch states, plus ``LOST``: its connection failed mid-command)."""

    ACTIVE = "active"
    IDLE = "idle"
    PREPARED = "prepared"
    COMMITTED = "committed"
    ROLLED_BACK = "rolled back"
    LOST = "lost"


@dataclass(slots=True)
class Branch:
    """One data source's part: its xid, its pinned connection (either runner's) and its phase."""

    data_source: str
    xid: Xid
    pinned: Any
    phase: BranchPhase = BranchPhase.ACTIVE


class TwoPhase:
    """The state and decisions of one XA transaction (see the module docstring).

    Attributes:
        gtrid: Its global transaction id (``ddm-...``).
        branches: Data source → its branch, in first-use order.
        wrote: Every data source written, in first-write order.
        deadline: ``clock()`` time by which it must decide (set by :meth:`started`).
    """

    def __init__(self, rt: XaRuntime) -> None:
        self.rt = rt
        self.gtrid = new_gtrid(rt.log.namespace)
        self.branches: dict[str, Branch] = {}
        self.wrote: list[str] = []
        self.deadline: float | None = None
        self._logged = False

    # -- statements ------------------------------------------------------------------------------

    def started(self) -> None:
        """The first branch is about to start: the transaction's ``xa.timeoutMs`` runs from now."""
        self.deadline = self.rt.clock() + self.rt.timeout

    def wrote_to(self, sources: Iterable[str]) -> None:
        """A write reaches ``sources`` (XA: any number of data sources may be written)."""
        for ds in sources:
            if ds not in self.wrote:
                self.wrote.append(ds)

    def statement_timeout(self, timeout: Any, default: float | None) -> Any:
        """A statement's deadline in seconds, cut to what the transaction has left (``default``: the executor's)."""
        if self.deadline is None:
            return timeout
        left = max(0.001, self.deadline - self.rt.clock())
        own = default if timeout is None or timeout is DEFAULT else timeout
        return left if own is None else min(own, left)

    def start_steps(self, data_source: str, pinned: Any, isolation: str | None = None) -> Steps[None]:
        """``XA START`` a branch on ``data_source``'s newly pinned connection (at ``isolation``, when given)."""
        xid = Xid.branch(self.gtrid, data_source)
        if isolation is not None:  # for the next transaction only, as a local transaction's BEGIN
            yield Sql(pinned, f"SET TRANSACTION ISOLATION LEVEL {isolation}")
        yield Sql(pinned, xa.statement("START", xid))
        self.branches[data_source] = Branch(data_source, xid, pinned)

    def check_deadline_steps(self, during: str) -> Steps[None]:
        """Past the transaction's deadline: roll every branch back and raise :class:`XaTimeoutError`."""
        if self.deadline is not None and self.rt.clock() >= self.deadline:
            yield from self.abort_steps(None)
            raise self._timeout_error(during)

    def failed_statement_steps(self, exc: BaseException) -> Steps[BaseException | None]:
        """A statement failed with ``exc``: if that ends the global transaction, roll every branch back and
        return the error to raise instead (``None``: raise ``exc``; the transaction goes on)."""
        if isinstance(exc, QueryTimeoutError):
            if self.deadline is not None and self.rt.clock() >= self.deadline:
                yield from self.abort_steps(exc)
                return self._timeout_error("a statement")
            return None
        if isinstance(exc, ExecutionError) and xa.code_of(exc) in xa.ABORTING_CODES:
            yield from self.abort_steps(exc)
            return XaBranchAbortedError(
                f"{exc.message} — XA transaction {self.gtrid}: every branch "
                f"({', '.join(self.branches) or 'none'}) was rolled back; retry the whole transaction",
                gtrid=self.gtrid,
                data_source=exc.context.get("data_source"),
                code=xa.code_of(exc),
                sql=exc.context.get("sql"),
            )
        return None

    def _timeout_error(self, during: str) -> XaTimeoutError:
        return XaTimeoutError(
            f"XA transaction {self.gtrid} ran past its {self.rt.timeout:g} s timeout (xa.timeoutMs) before "
            f"{during}; every branch ({', '.join(self.branches) or 'none'}) was rolled back",
            gtrid=self.gtrid,
            timeout=self.rt.timeout,
        )

    def _hook(self, step: str, data_source: str | None = None) -> None:
        hook = self.rt.step_hook
        if hook is not None:
            hook(step, data_source)

    # -- commit ------------------------------------------------------------------------------------

    def commit_steps(self, state: str, failure: BaseException | None) -> Steps[None]:
        """Commit every branch: one phase for one data source, else two-phase through the log.

        ``state`` / ``failure``: the transaction's.

        Raises:
            TransactionError: the transaction failed (it is rolled back) or is over.
            XaTimeoutError: past ``xa.timeoutMs`` before the decision (rolled back).
            XaBranchAbortedError / XaError: a branch could not end or prepare (rolled back), or
                recovery had rolled the transaction back first.
            XaInDoubtError: decided but not applied everywhere (``committed``: ``True``,
                recovery finishes it) or the decision's fate is unknown (``None``).
        """
        if state == "failed":
            yield from self.abort_steps(None)
            raise TransactionError(
                f"the XA transaction failed ({failure}) and was rolled back, not committed",
                state="failed",
                gtrid=self.gtrid,
            )
        check_usable(state, failure)
        if not self.branches:
            yield Finish("committed")
            return
        yield from self.check_deadline_steps("its commit")
        if len(self.branches) == 1:
            b = next(iter(self.branches.values()))
            yield from self._advance_steps(b, "END", BranchPhase.IDLE)
            yield from self._one_phase_steps(b)
        else:
            yield from self._two_phase_steps()

    def _advance_steps(self, b: Branch, command: str, phase: BranchPhase) -> Steps[None]:
        """``XA <command>`` on branch ``b``, then it is in ``phase``; a failure rolls every branch back and raises."""
        exc = yield from self._branch_steps(b, command, phase)
        if exc is not None:
            yield from self.abort_steps(exc)
            raise self._aborted(f"XA {command}", b, exc) from exc

    def _branch_steps(self, b: Branch, command: str, phase: BranchPhase) -> Steps[DdmError | None]:
        """``XA <command>`` on branch ``b`` alone: then it is in ``phase`` (the step hook told); its error, if any."""
        try:
            yield Sql(b.pinned, xa.statement(command, b.xid))
        except DdmError as exc:
            self._lose_if_gone(b, exc)
            return exc
        b.phase = phase
        if phase is BranchPhase.PREPARED:
            self._hook("prepared", b.data_source)
        return None

    def _prepare_steps(self, others: list[Branch], last: Branch | None) -> Steps[None]:
        """One round (docs/xa.md#commit): ``XA END`` then ``XA PREPARE`` on each of ``others``, sent back to back
        on its connection; on the last resource, its decision row then ``XA END``; with none, the ``PREPARING``
        row beside them. Any failure rolls every branch back and raises — a branch's first, in branch order
        (as :meth:`_advance_steps`), else the row's."""
        rt = self.rt
        queues = [[Sql(b.pinned, xa.statement("END", b.xid)), Sql(b.pinned, xa.statement("PREPARE", b.xid))]
                  for b in others]
        participants = list(self.branches)
        if last is None:
            queues.append([rt.log.row(self.gtrid, participants, rt.coordinator)])
        else:
            queues.append([rt.log.row(self.gtrid, participants, rt.coordinator, state=GlobalState.COMMITTING,
                                      on=last.pinned), Sql(last.pinned, xa.statement("END", last.xid))])
        answers = yield Round(tuple(sql for queue in queues for sql in queue))
        flat = iter(answers)
        outcomes = [[next(flat) for _ in queue] for queue in queues]
        failed: tuple[Branch, str, BaseException] | None = None
        for b, (ended, prepared) in zip(others, outcomes):
            for command, phase, outcome in (("END", BranchPhase.IDLE, ended), ("PREPARE", BranchPhase.PREPARED, prepared)):
                if outcome.error is not None:
                    self._lose(b, outcome.error)
                    failed = failed or (b, command, outcome.error)
                    break
                b.phase = phase
                if phase is BranchPhase.PREPARED:
                    self._hook("prepared", b.data_source)
        row = outcomes[-1][0]
        if last is not None:
            if row.error is not None:
                self._lose(last, row.error)
            if outcomes[-1][1].error is None:
                last.phase = BranchPhase.IDLE
            elif failed is None and row.error is None:
                self._lose(last, outcomes[-1][1].error)
                failed = (last, "END", outcomes[-1][1].error)
        elif row.error is None:
            self._logged = True  # the PREPARING row is there: a rollback is logged too
        if failed is not None:
            b, command, exc = failed
            yield from self.abort_steps(exc)
            if isinstance(exc, DdmError):
                raise self._aborted(f"XA {command}", b, exc) from exc
            raise exc
        if row.error is not None:
            yield from self.abort_steps(row.error)
            refusal = rt.log.refused(self.gtrid, row.error)
            if refusal is not row.error:  # a tombstone was there first
                raise refusal from row.error
            raise XaError(
                f"XA transaction {self.gtrid}: the transaction log on {rt.log.data_source!r} could not be written "
                f"({row.error}); every branch was rolled back",
                gtrid=self.gtrid,
                data_source=rt.log.data_source,
            ) from row.error

    def _lose(self, b: Branch, exc: BaseException) -> None:
        if isinstance(exc, DdmError):
            self._lose_if_gone(b, exc)

    def _one_phase_steps(self, b: Branch) -> Steps[None]:
        try:
            yield from xa.commit_steps(b.pinned, b.xid, one_phase=True)
        except DdmError as exc:
            # A branch that never prepared is rolled back by its server if it did not commit.
            self._lose_if_gone(b, exc)
            yield from self.abort_steps(exc)
            raise
        b.phase = BranchPhase.COMMITTED
        self._hook("committed", b.data_source)
        yield Finish("committed")

    def _two_phase_steps(self) -> Steps[None]:
        """Two-phase commit, each phase on every branch at once (docs/xa.md#commit). When the log's data source
        has a branch, that branch is the *last resource*: it never prepares, the decision row is written
        inside it, and its one-phase commit is the durable decision. Rounds:

        1. ``XA END`` on every other branch; the last resource's decision row (``COMMITTING``, uncommitted);
        2. ``XA PREPARE`` on every other branch; ``XA END`` of the last resource — or, with none, the
           ``PREPARING`` row alongside the PREPAREs; any failure rolls every branch back;
        3. once every PREPARE succeeded, the decision: ``XA COMMIT ... ONE PHASE`` of the last resource, or
           the compare-and-set ``PREPARING`` → ``COMMITTING``; durable before 4;
        4. ``XA COMMIT`` on every other branch (with earlier commits' deferred ``COMMITTED`` marks alongside).
        """
        rt = self.rt
        yield from rt.log.ensure_steps()  # never inside a branch: DDL would end it
        last = self.branches.get(rt.log.data_source)
        others = [b for b in self.branches.values() if b is not last]
        self._hook("logged")
        yield from self.check_deadline_steps("the PREPAREs")  # never once recovery may act
        yield from self._prepare_steps(others, last)
        if last is None:
            yield from self._decide_commit_steps()
        else:
            yield from self._last_resource_steps(last)
        self._hook("decided")
        pending: list[str] = []
        due = rt.marks_due()
        outcomes = yield from together(
            [*(xa.commit_steps(b.pinned, b.xid) for b in others),  # False: recovery did it
             *([rt.log.mark_committed_steps(due)] if due else [])]
        )
        if due and outcomes[-1].error is not None:  # recovery marks them later; their data is committed
            log.warning("marking %d XA transactions COMMITTED in the log failed: %s", len(due), outcomes[-1].error)
        for b, outcome in zip(others, outcomes):
            if outcome.error is not None:
                log.warning("XA COMMIT of %s on %s failed (%s); recovery will commit it", self.gtrid, b.data_source,
                            outcome.error)
                b.phase = BranchPhase.LOST  # still prepared on its server: recovery commits it
                pending.append(b.data_source)
                continue
            b.phase = BranchPhase.COMMITTED
            self._hook("committed", b.data_source)
        if pending:
            yield Finish("committed")
            raise XaInDoubtError(
                f"XA transaction {self.gtrid} is committed (the decision is logged) but the XA COMMIT on "
                f"{', '.join(pending)} failed: those branches stay prepared until recovery commits them "
                "(executor.recover_xa() / ddm xa recover); do not retry the transaction",
                gtrid=self.gtrid,
                committed=True,
                pending=tuple(pending),
            )
        rt.committed(self.gtrid)  # COMMITTED: marked by a later commit's round 4, or by recovery
        self._hook("finished")
        yield Finish("committed")

    def _last_resource_steps(self, last: Branch) -> Steps[None]:
        """The decision as the last resource's one-phase commit (its branch holds the ``COMMITTING`` row).

        If the commit's answer is lost with its connection, whether it committed is read from the log: a
        tombstone for the gtrid waits on the row's key while the branch is still in flight, so it either finds
        the row (committed) or goes in (never committed); if even that fails the others stay prepared.
        """
        try:
            yield from xa.commit_steps(last.pinned, last.xid, one_phase=True)
        except DdmError as exc:
            self._lose_if_gone(last, exc)
            if last.phase is not BranchPhase.LOST:  # answered: it did not commit, and will not
                yield from self.abort_steps(exc)
                raise self._aborted("XA COMMIT ONE PHASE", last, exc) from exc
            try:
                state = yield from self.rt.log.tombstone_steps(self.gtrid)
            except DdmError:
                self._logged = True  # the row may be committed with the branch: in doubt, not rolled back
                yield from self.abandon_steps()
                raise XaInDoubtError(
                    f"XA transaction {self.gtrid}: the one-phase commit on {last.data_source!r}, which carries the "
                    f"decision, lost its connection ({exc}) and the log could not be read; every other branch is "
                    "prepared and recovery will commit or roll it back",
                    gtrid=self.gtrid,
                    committed=None,
                ) from exc
            if not state.commits:
                self._logged = True  # the tombstone: the rollback is logged on it
                yield from self.abort_steps(exc, decided=True)
                raise self._aborted("XA COMMIT ONE PHASE", last, exc) from exc
        last.phase = BranchPhase.COMMITTED
        self._hook("committed", last.data_source)

    def _decide_commit_steps(self) -> Steps[None]:
        """Write the COMMIT decision (compare-and-set from PREPARING), or roll back if recovery decided first."""
        rt = self.rt
        try:
            decided = yield from rt.log.decide_steps(self.gtrid, GlobalState.COMMITTING)
        except DdmError as exc:
            # Written or not? Read it back once; if that fails too, the branches stay prepared for recovery.
            try:
                row = (yield from rt.log.read_steps([self.gtrid])).get(self.gtrid)
            except DdmError:
                row = None
            if row is None:
                yield from self.abandon_steps()
                raise XaInDoubtError(
                    f"XA transaction {self.gtrid}: writing the COMMIT decision to the log on "
                    f"{rt.log.data_source!r} failed ({exc}) and its outcome is unknown; every branch is "
                    "prepared and recovery will commit or roll it back",
                    gtrid=self.gtrid,
                    committed=None,
                ) from exc
            decided = row.state.commits
            if not decided and row.state is GlobalState.PREPARING:
                yield from self.abort_steps(exc)
                raise XaError(
                    f"XA transaction {self.gtrid}: the COMMIT decision could not be written ({exc}); "
                    "every branch was rolled back",
                    gtrid=self.gtrid,
                ) from exc
        if not decided:
            yield from self.abort_steps(None, decided=True)
            raise XaError(
                f"XA transaction {self.gtrid} was rolled back by recovery while it was preparing (its log row "
                "left PREPARING): its late PREPARE was refused and every branch rolled back; retry the "
                "transaction",
                gtrid=self.gtrid,
            )

    # -- rollback ----------------------------------------------------------------------------------

    def rollback_steps(self, state: str) -> Steps[None]:
        """Roll back every branch (a no-op once over; an empty rollback of a branch that never prepared succeeds)."""
        if state not in ("committed", "rolled back", "in doubt"):
            yield from self.abort_steps(None)

    def abort_steps(self, cause: BaseException | None, *, decided: bool = False) -> Steps[None]:
        """Roll every branch back; with a log row, record the decision first and the end after."""
        rt = self.rt
        if self._logged and not decided:
            try:
                yield from rt.log.decide_steps(self.gtrid, GlobalState.ROLLING_BACK)  # False: recovery decided it
            except DdmError as exc:
                log.warning("logging the ROLLBACK of %s failed: %s", self.gtrid, exc)
        clean = True
        for b in self.branches.values():
            if b.phase in (BranchPhase.COMMITTED, BranchPhase.ROLLED_BACK):
                continue
            if b.phase is BranchPhase.LOST:
                clean = False  # its server rolls back an unprepared branch; recovery a prepared one
                continue
            try:
                yield from xa.rollback_steps(b.pinned, b.xid, active=b.phase is BranchPhase.ACTIVE)
                b.phase = BranchPhase.ROLLED_BACK
            except DdmError as exc:
                log.warning("XA ROLLBACK of %s on %s failed: %s", self.gtrid, b.data_source, exc)
                b.phase = BranchPhase.LOST
                clean = False
        if self._logged and clean:
            try:
                yield from rt.log.decide_steps(self.gtrid, GlobalState.ROLLED_BACK, expect=GlobalState.ROLLING_BACK)
            except DdmError as exc:
                log.warning("marking %s ROLLED_BACK in the XA log failed: %s", self.gtrid, exc)
        yield Finish("rolled back")

    def abandon_steps(self) -> Steps[None]:
        """Leave every branch as it is on its server (connections dropped) for the server or recovery to decide."""
        self.abandon()
        yield Finish("in doubt" if self._logged else "rolled back")

    def abandon(self) -> None:
        """Mark every unfinished branch lost: its connection is discarded; the server rolls back an unprepared
        branch when it goes, recovery decides a prepared one by the log (a cancel mid-commit ends here)."""
        for b in self.branches.values():
            if b.phase not in (BranchPhase.COMMITTED, BranchPhase.ROLLED_BACK):
                b.phase = BranchPhase.LOST

    @property
    def lost(self) -> list[str]:
        """Data sources whose branch is lost (their connections must be discarded, not reused)."""
        return [ds for ds, b in self.branches.items() if b.phase is BranchPhase.LOST]

    @staticmethod
    def _lose_if_gone(b: Branch, exc: DdmError) -> None:
        if discard_on(exc.__cause__ or exc) or isinstance(exc, QueryTimeoutError):
            b.phase = BranchPhase.LOST

    def _aborted(self, command: str, b: Branch, exc: DdmError) -> XaError:
        cls = XaBranchAbortedError if xa.code_of(exc) in xa.ABORTING_CODES else XaError
        return cls(
            f"XA transaction {self.gtrid}: {command} failed on data source {b.data_source!r} ({exc}); every "
            "branch was rolled back",
            gtrid=self.gtrid,
            data_source=b.data_source,
            code=xa.code_of(exc),
        )


class TwoPhaseView:
    """What an XA transaction of either runner shows of its protocol (``_xa``) and state (``_state``)."""

    _xa: TwoPhase
    _state: str

    @property
    def gtrid(self) -> str:
        """Its global transaction id (``ddm-...``)."""
        return self._xa.gtrid

    @property
    def written_data_sources(self) -> tuple[str, ...]:
        """Every data source this transaction wrote to, in first-write order."""
        return tuple(self._xa.wrote)

    def branch_phases(self) -> dict[str, BranchPhase]:
        """Data source → the phase of its branch."""
        return {ds: b.phase for ds, b in self._xa.branches.items()}

    def __repr__(self) -> str:
        phases = {ds: b.phase.value for ds, b in self._xa.branches.items()}
        return f"<{type(self).__name__} {self.gtrid} {self._state} branches={phases}>"
