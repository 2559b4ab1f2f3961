"""The XA coordinator: ``executor.transaction(mode="xa")`` writes to several data sources atomically.

It is the local :class:`~ddm_core.execute.transaction.Transaction` (one pinned
connection per data source, the same session rules) with three differences:

* each pinned connection is an XA branch: ``XA START`` instead of ``BEGIN``;
* writes may reach any number of data sources;
* ``commit()`` is two-phase (docs/xa.md#commit):

  1. ``XA END`` on every branch;
  2. one branch: ``XA COMMIT ... ONE PHASE`` (no log, no PREPARE);
  3. several: log ``PREPARING`` with the participants, ``XA PREPARE`` each
     branch, log the COMMIT decision (a compare-and-set: if recovery rolled the
     transaction back meanwhile, a late PREPARE never commits), ``XA COMMIT``
     each branch, log ``COMMITTED``.

A failure before the decision rolls every branch back. After the decision the
transaction *is* committed: a branch whose ``XA COMMIT`` failed stays prepared
on its server and recovery commits it (:class:`~ddm_core.errors.XaInDoubtError`
says so, with ``committed=True``).

A deadlock or lock-wait timeout in any branch rolls back every branch at once
(:class:`~ddm_core.errors.XaBranchAbortedError`). Each transaction must decide
within ``xa.timeoutMs`` of its first statement (its statements' deadlines are
cut to what is left), and an executor has at most ``xa.maxConcurrent`` XA
transactions open: 2PC holds its connections and locks longer than a local
commit, and must not be able to take a whole pool.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import weakref
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable

from ddm_core.errors import (
    DdmError,
    ExecutionError,
    QueryTimeoutError,
    TransactionError,
    XaBranchAbortedError,
    XaCapacityError,
    XaError,
    XaInDoubtError,
    XaTimeoutError,
)
from ddm_core.execute.pools import Borrowed, discard_on
from ddm_core.execute.shared import DEFAULT
from ddm_core.execute.transaction import Transaction
from ddm_core.route.plan import RoutePlan
from ddm_core.xa import branches as xa
from ddm_core.xa.log import GlobalState, TransactionLog, log_data_source
from ddm_core.xa.xid import Xid, new_gtrid

if TYPE_CHECKING:
    from ddm_core.execute.executor import Executor
    from ddm_core.execute.result import Result

__all__ = ["XaTransaction", "XaRuntime", "BranchPhase", "runtime_of"]

log = logging.getLogger("ddm_core.xa")

#: ``hook(step, data_source)`` at each step of a commit: ``logged``, ``prepared``, ``decided``,
#: ``committed``, ``finished`` (tests stop a coordinator process there).
StepHook = Callable[[str, "str | None"], None]


class XaRuntime:
    """What one executor's XA transactions share: the log, the concurrency cap, the clock.

    Attributes:
        log: The transaction log.
        max_concurrent: ``xa.maxConcurrent`` when it was made.
        timeout: ``xa.timeoutMs`` in seconds.
        clock: Monotonic seconds (injectable for tests).
        step_hook: Called at each commit step (``None``: nothing).
        coordinator: ``host:pid``, written to the log.
    """

    def __init__(self, executor: Executor) -> None:
        settings = executor.config.xa
        self.log = TransactionLog(executor, log_data_source(executor))
        self.max_concurrent = settings.max_concurrent
        self.timeout = settings.timeout_ms / 1000.0
        self._slots = threading.BoundedSemaphore(settings.max_concurrent)
        self.clock: Callable[[], float] = time.monotonic
        self.step_hook: StepHook | None = None
        self.coordinator = f"{socket.gethostname()}:{os.getpid()}"

    def acquire(self, wait: float) -> None:
        if not self._slots.acquire(timeout=wait):
            raise XaCapacityError(
                f"all {self.max_concurrent} XA transaction slots of this executor stayed taken for {wait:g} s "
                "(xa.maxConcurrent); commit or roll back open XA transactions, or raise the cap",
                max_concurrent=self.max_concurrent,
                timeout=wait,
            )

    def release(self) -> None:
        self._slots.release()


_RUNTIMES: weakref.WeakKeyDictionary[Executor, XaRuntime] = weakref.WeakKeyDictionary()
_RUNTIMES_LOCK = threading.Lock()


def runtime_of(executor: Executor) -> XaRuntime:
    """The executor's :class:`XaRuntime` (made on first use; ``xa`` settings are read then)."""
    rt = _RUNTIMES.get(executor)
    if rt is None:
        with _RUNTIMES_LOCK:
            rt = _RUNTIMES.get(executor)
            if rt is None:
                rt = _RUNTIMES[executor] = XaRuntime(executor)
    return rt


class BranchPhase(str, Enum):
    """Where one branch is (XA's branch states, plus ``LOST``: its connection failed mid-command)."""

    ACTIVE = "active"
    IDLE = "idle"
    PREPARED = "prepared"
    COMMITTED = "committed"
    ROLLED_BACK = "rolled back"
    LOST = "lost"


@dataclass(slots=True)
class _Branch:
    data_source: str
    xid: Xid
    pinned: Borrowed
    phase: BranchPhase = BranchPhase.ACTIVE


class XaTransaction(Transaction):
    """An XA transaction of an :class:`~ddm_core.execute.Executor` (see the module docstring).

    Attributes:
        gtrid: Its global transaction id (``ddm-...``).
    """

    #: A dual write's shadow participant is a plain transaction, not a branch: never adopted
    #: (docs/migration.md#dual-write); it is rolled back when the transaction itself needs that data source.
    _adopts_shadows = False

    executor: Executor  # the whole executor, not just what a local transaction needs of it

    def __init__(self, executor: Executor) -> None:
        super().__init__(executor)
        self._rt = runtime_of(executor)
        self.gtrid = new_gtrid(self._rt.log.namespace)
        self._branches: dict[str, _Branch] = {}
        self._wrote: list[str] = []
        self._slot = False
        self._deadline: float | None = None
        self._logged = False

    # -- state -----------------------------------------------------------------------------

    @property
    def written_data_sources(self) -> tuple[str, ...]:
        """Every data source this transaction wrote to, in first-write order."""
        return tuple(self._wrote)

    def branch_phases(self) -> dict[str, BranchPhase]:
        """Data source → the phase of its branch."""
        return {ds: b.phase for ds, b in self._branches.items()}

    # -- statements ------------------------------------------------------------------------

    def execute_plan(self, plan: RoutePlan, *, caller_style: str = "format", timeout: Any = None) -> Result:
        """Run a routed plan in this XA transaction (writes may reach several data sources).

        Raises:
            XaBranchAbortedError: a deadlock / lock-wait timeout in a branch; every branch was rolled back.
            XaTimeoutError: past ``xa.timeoutMs``; every branch was rolled back.
        """
        self._check_usable()
        self._check_deadline("a statement")
        try:
            return super().execute_plan(plan, caller_style=caller_style, timeout=self._statement_timeout(timeout))
        except QueryTimeoutError as exc:
            if self._deadline is not None and self._rt.clock() >= self._deadline:
                self._rollback_all(exc)
                raise self._timeout_error("a statement") from exc
            raise
        except ExecutionError as exc:
            if xa.code_of(exc) in xa.ABORTING_CODES:
                self._rollback_all(exc)
                raise XaBranchAbortedError(
                    f"{exc.message} — XA transaction {self.gtrid}: every branch "
                    f"({', '.join(self._branches) or 'none'}) was rolled back; retry the whole transaction",
                    gtrid=self.gtrid,
                    data_source=exc.context.get("data_source"),
                    code=xa.code_of(exc),
                    sql=exc.context.get("sql"),
                ) from exc
            raise

    def _statement_timeout(self, timeout: Any) -> Any:
        """The statement's deadline, cut to what the transaction has left."""
        if self._deadline is None:
            return timeout
        left = max(0.001, self._deadline - self._rt.clock())
        own = self.executor.timeout if timeout is None or timeout is DEFAULT else timeout
        return left if own is None else min(own, left)

    def _check_write(self, plan: RoutePlan, sources: tuple[str, ...]) -> None:
        for ds in sources:  # XA: any number of data sources may be written
            if ds not in self._wrote:
                self._wrote.append(ds)

    def _begin(self, data_source: str, pinned: Borrowed) -> None:
        xa.require_xa(pinned)
        if not self._slot:
            self._rt.acquire(pinned.pool.acquire_timeout)
            self._slot = True
            self._deadline = self._rt.clock() + self._rt.timeout
        xid = Xid.branch(self.gtrid, data_source)
        xa.start(pinned, xid)
        self._branches[data_source] = _Branch(data_source, xid, pinned)

    # -- deadline ------------------------------------------------------------------------------

    def _timeout_error(self, during: str) -> XaTimeoutError:
        return XaTimeoutError(
            f"XA transaction {self.gtrid} ran past its {self._rt.timeout:g} s timeout (xa.timeoutMs) before "
            f"{during}; every branch ({', '.join(self._branches) or 'none'}) was rolled back",
            gtrid=self.gtrid,
            timeout=self._rt.timeout,
        )

    def _check_deadline(self, during: str) -> None:
        if self._deadline is not None and self._rt.clock() >= self._deadline:
            self._rollback_all(None)
            raise self._timeout_error(during)

    def _hook(self, step: str, data_source: str | None = None) -> None:
        hook = self._rt.step_hook
        if hook is not None:
            hook(step, data_source)

    # -- commit ------------------------------------------------------------------------------

    def commit(self) -> None:
        """Commit every branch: one phase for one data source, else two-phase through the log.

        Raises:
            TransactionError: the transaction failed or is over (a failed one is rolled back).
            XaTimeoutError: past ``xa.timeoutMs`` before the decision (rolled back).
            XaBranchAbortedError / XaError: a branch could not end or prepare (rolled back), or
                recovery had rolled the transaction back first.
            XaInDoubtError: decided but not applied everywhere (``committed``: ``True``,
                recovery finishes it) or the decision's fate is unknown (``None``).
        """
        if self._state == "failed":
            failure = self._failure
            self.rollback()
            raise TransactionError(
                f"the XA transaction failed ({failure}) and was rolled back, not committed",
                state="failed",
                gtrid=self.gtrid,
            )
        self._check_usable()
        if not self._branches:
            self._finish("committed")
            return
        self._check_deadline("its commit")
        for b in self._branches.values():
            try:
                xa.end(b.pinned, b.xid)
            except DdmError as exc:
                self._lose_if_gone(b, exc)
                self._rollback_all(exc)
                raise self._aborted("XA END", b, exc) from exc
            b.phase = BranchPhase.IDLE
        if len(self._branches) == 1:
            self._commit_one_phase(next(iter(self._branches.values())))
        else:
            self._commit_two_phase()

    def _commit_one_phase(self, b: _Branch) -> None:
        try:
            xa.commit(b.pinned, b.xid, one_phase=True)
        except DdmError as exc:
            # A branch that never prepared is rolled back by its server if it did not commit.
            self._lose_if_gone(b, exc)
            self._rollback_all(exc)
            raise
        b.phase = BranchPhase.COMMITTED
        self._hook("committed", b.data_source)
        self._finish("committed")

    def _commit_two_phase(self) -> None:
        rt = self._rt
        try:
            rt.log.begin(self.gtrid, list(self._branches), rt.coordinator)
        except DdmError as exc:
            self._rollback_all(exc)
            raise XaError(
                f"XA transaction {self.gtrid}: the transaction log on {rt.log.data_source!r} could not be "
                f"written ({exc}); every branch was rolled back",
                gtrid=self.gtrid,
                data_source=rt.log.data_source,
            ) from exc
        self._logged = True
        self._hook("logged")
        for b in self._branches.values():
            self._check_deadline(f"the PREPARE on {b.data_source!r}")  # never prepare once recovery may act
            try:
                xa.prepare(b.pinned, b.xid)
            except DdmError as exc:
                self._lose_if_gone(b, exc)
                self._rollback_all(exc)
                raise self._aborted("XA PREPARE", b, exc) from exc
            b.phase = BranchPhase.PREPARED
            self._hook("prepared", b.data_source)
        self._decide_commit()
        self._hook("decided")
        pending: list[str] = []
        for b in self._branches.values():
            try:
                xa.commit(b.pinned, b.xid)  # False: already committed by recovery
            except DdmError as exc:
                log.warning("XA COMMIT of %s on %s failed (%s); recovery will commit it", self.gtrid, b.data_source, exc)
                b.phase = BranchPhase.LOST  # still prepared on its server: recovery commits it
                pending.append(b.data_source)
                continue
            b.phase = BranchPhase.COMMITTED
            self._hook("committed", b.data_source)
        if pending:
            self._finish("committed")
            raise XaInDoubtError(
                f"XA transaction {self.gtrid} is committed (the decision is logged) but the XA COMMIT on "
                f"{', '.join(pending)} failed: those branches stay prepared until recovery commits them "
                "(executor.recover_xa() / ddm xa recover); do not retry the transaction",
                gtrid=self.gtrid,
                committed=True,
                pending=tuple(pending),
            )
        try:
            rt.log.decide(self.gtrid, GlobalState.COMMITTED, expect=GlobalState.COMMITTING)
        except DdmError as exc:  # recovery marks it later; the data is committed
            log.warning("marking %s COMMITTED in the XA log failed: %s", self.gtrid, exc)
        self._hook("finished")
        self._finish("committed")

    def _decide_commit(self) -> None:
        """Write the COMMIT decision (compare-and-set from PREPARING), or roll back if recovery decided first."""
        rt = self._rt
        try:
            decided = rt.log.decide(self.gtrid, GlobalState.COMMITTING)
        except DdmError as exc:
            # Written or not? Read it back once; if that fails too, the branches stay prepared for recovery.
            try:
                row = rt.log.read([self.gtrid]).get(self.gtrid)
            except DdmError:
                row = None
            if row is None:
                self._abandon_prepared()
                raise XaInDoubtError(
                    f"XA transaction {self.gtrid}: writing the COMMIT decision to the log on "
                    f"{rt.log.data_source!r} failed ({exc}) and its outcome is unknown; every branch is "
                    "prepared and recovery will commit or roll it back",
                    gtrid=self.gtrid,
                    committed=None,
                ) from exc
            decided = row.state.commits
            if not decided and row.state is GlobalState.PREPARING:
                self._rollback_all(exc)
                raise XaError(
                    f"XA transaction {self.gtrid}: the COMMIT decision could not be written ({exc}); "
                    "every branch was rolled back",
                    gtrid=self.gtrid,
                ) from exc
        if not decided:
            self._rollback_all(None, decided=True)
            raise XaError(
                f"XA transaction {self.gtrid} was rolled back by recovery while it was preparing (its log row "
                "left PREPARING): its late PREPARE was refused and every branch rolled back; retry the "
                "transaction",
                gtrid=self.gtrid,
            )

    # -- rollback ------------------------------------------------------------------------------

    def rollback(self) -> None:
        """Roll back every branch (an empty rollback of a branch that never prepared succeeds)."""
        if self._state in ("committed", "rolled back", "in doubt"):
            return
        self._rollback_all(None)

    def _rollback_all(self, cause: BaseException | None, *, decided: bool = False) -> None:
        """Roll every branch back; with a log row, record the decision first and the end after."""
        rt = self._rt
        if self._logged and not decided:
            try:
                rt.log.decide(self.gtrid, GlobalState.ROLLING_BACK)  # False: recovery decided it already
            except DdmError as exc:
                log.warning("logging the ROLLBACK of %s failed: %s", self.gtrid, exc)
        clean = True
        for b in self._branches.values():
            if b.phase in (BranchPhase.COMMITTED, BranchPhase.ROLLED_BACK):
                continue
            if b.phase is BranchPhase.LOST:
                clean = False  # its server rolls back an unprepared branch; recovery a prepared one
                continue
            try:
                xa.rollback(b.pinned, b.xid, active=b.phase is BranchPhase.ACTIVE)
                b.phase = BranchPhase.ROLLED_BACK
            except DdmError as exc:
                log.warning("XA ROLLBACK of %s on %s failed: %s", self.gtrid, b.data_source, exc)
                b.phase = BranchPhase.LOST
                clean = False
        if self._logged and clean:
            try:
                rt.log.decide(self.gtrid, GlobalState.ROLLED_BACK, expect=GlobalState.ROLLING_BACK)
            except DdmError as exc:
                log.warning("marking %s ROLLED_BACK in the XA log failed: %s", self.gtrid, exc)
        self._finish("rolled back")

    def _abandon_prepared(self) -> None:
        """Leave every branch prepared on its server (connections dropped) for recovery to decide."""
        for b in self._branches.values():
            b.phase = BranchPhase.LOST
        self._finish("in doubt")

    @staticmethod
    def _lose_if_gone(b: _Branch, exc: DdmError) -> None:
        if discard_on(exc.__cause__ or exc) or isinstance(exc, QueryTimeoutError):
            b.phase = BranchPhase.LOST

    def _aborted(self, command: str, b: _Branch, exc: DdmError) -> XaError:
        cls = XaBranchAbortedError if xa.code_of(exc) in xa.ABORTING_CODES else XaError
        return cls(
            f"XA transaction {self.gtrid}: {command} failed on data source {b.data_source!r} ({exc}); every "
            "branch was rolled back",
            gtrid=self.gtrid,
            data_source=b.data_source,
            code=xa.code_of(exc),
        )

    # -- ending -----------------------------------------------------------------------------------

    def _finish(self, state: str) -> None:
        """Return the pinned connections (lost branches' discarded) and the XA slot."""
        for ds, b in list(self._branches.items()):
            if b.phase is BranchPhase.LOST:
                pinned = self._pins.pop(ds, None)
                if pinned is not None:
                    pinned.release(discard=True)
        try:
            self._end(state, rollback=False)
        finally:
            if self._slot:
                self._slot = False
                self._rt.release()

    def __del__(self) -> None:
        if getattr(self, "_pins", None):
            try:
                self._finish("rolled back")  # unended branches: their connections are discarded on release
            except Exception:  # noqa: S110
                pass
        elif getattr(self, "_slot", False):
            self._slot = False
            self._rt.release()

    def __repr__(self) -> str:
        phases = {ds: b.phase.value for ds, b in self._branches.items()}
        return f"<XaTransaction {self.gtrid} {self._state} branches={phases}>"
