"""The XA coordinator: ``executor.transaction(mode="xa")`` writes to several data sources atomically.

:class:`XaTransaction` is the local :class:`~ddm_core.execute.transaction.Transaction` (one pinned
connection per data source, the same session rules) whose pins are XA branches, whose writes may
reach any number of data sources, and whose ``commit()`` is two-phase. The protocol itself —
branches, aborts, the commit and its log — is :class:`~ddm_core.xa.twophase.TwoPhase`, written
once for both runners; this module answers its steps with blocking calls, and
:mod:`ddm_core.aio.xa` with awaited ones (docs/xa.md#commit).

A deadlock or lock-wait timeout in any branch rolls back every branch at once
(:class:`~ddm_core.errors.XaBranchAbortedError`). Each transaction must decide
within ``xa.timeoutMs`` of its first statement (its statements' deadlines are
cut to what is left), and an executor has at most ``xa.maxConcurrent`` XA
transactions open: 2PC holds its connections and locks longer than a local
commit, and must not be able to take a whole pool.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from ddm_core.errors import DdmError
from ddm_core.execute.pools import Borrowed
from ddm_core.execute.steps import Finish, Outcome, Round, Step, Steps, drive
from ddm_core.execute.transaction import Transaction
from ddm_core.route.plan import RoutePlan
from ddm_core.xa import branches as xa
from ddm_core.xa.runtime import XaRuntime, runtime_of
from ddm_core.xa.twophase import BranchPhase, TwoPhase, TwoPhaseView

if TYPE_CHECKING:
    from ddm_core.execute.executor import Executor
    from ddm_core.execute.result import Result

__all__ = ["XaTransaction", "XaRuntime", "BranchPhase", "runtime_of"]

log = logging.getLogger("ddm_core.xa")


class XaTransaction(TwoPhaseView, Transaction):
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
        self._xa = TwoPhase(self._rt)
        self._slot = False

    # -- the protocol's steps, answered with blocking calls ---------------------------------------

    def _drive(self, steps: Steps[Any]) -> Any:
        return drive(steps, self._answer)

    def _answer(self, step: Step) -> Any:
        if isinstance(step, Finish):
            return self._finish(step.state)
        if isinstance(step, Round):
            return self._round(step)
        if step.on is self._rt.log:
            return self._rt.log.answer(step)
        return xa.run_step(step)

    def _round(self, step: Round) -> tuple[Outcome, ...]:
        """Every statement of ``step`` at once, on this thread: the branches' sent first (the driver's pipelining,
        as a multi-unit statement's units are sent; statements of one connection back to back, in order), the
        log's run meanwhile, then the branches' answers read in turn (docs/xa.md#how-a-round-runs). Every
        XA-capable driver pipelines; one that did not would run its statements in turn here, after the others
        were sent."""
        log_sql = self._rt.log
        outcomes: dict[int, Outcome] = {}
        sent: list[tuple[int, Any, bool]] = []  # index, cursor, queued behind another statement of its connection
        busy: set[int] = set()
        try:
            for i, sql in enumerate(step.steps):
                if sql.on is not log_sql and sql.on.pool.driver.can_pipeline:
                    try:
                        sent.append((i, xa.send(sql.on, sql.sql, sql.params), id(sql.on) in busy))
                        busy.add(id(sql.on))
                    except DdmError as exc:
                        outcomes[i] = Outcome(error=exc)
            waiting = {i for i, _, _ in sent}
            for i, sql in enumerate(step.steps):
                if sql.on is log_sql:
                    outcomes[i] = _outcome(log_sql.answer, sql)
                elif i not in outcomes and i not in waiting:
                    outcomes[i] = _outcome(xa.run_step, sql)
            for i, cursor, queued in sent:
                sql = step.steps[i]
                outcomes[i] = _outcome(xa.receive, sql.on, cursor, sql.sql, queued=queued)
        except BaseException:  # interrupted with answers unread: those connections cannot be reused
            self._xa.abandon()
            raise
        return tuple(outcomes[i] for i in range(len(step.steps)))

    # -- statements ------------------------------------------------------------------------

    def execute_plan(self, plan: RoutePlan, *, caller_style: str = "format", timeout: Any = None) -> Result:
        """Run a routed plan in this XA transaction (writes may reach several data sources).

        Raises:
            XaBranchAbortedError: a deadlock / lock-wait timeout in a branch; every branch was rolled back.
            XaTimeoutError: past ``xa.timeoutMs``; every branch was rolled back.
        """
        self._check_usable()
        self._drive(self._xa.check_deadline_steps("a statement"))
        try:
            timeout = self._xa.statement_timeout(timeout, self.executor.timeout)
            return super().execute_plan(plan, caller_style=caller_style, timeout=timeout)
        except DdmError as exc:
            instead = self._drive(self._xa.failed_statement_steps(exc))
            if instead is None:
                raise
            raise instead from exc

    def _check_write(self, plan: RoutePlan, sources: tuple[str, ...]) -> None:
        self._xa.wrote_to(sources)

    def _begin(self, data_source: str, pinned: Borrowed) -> None:
        xa.require_xa(pinned)
        if not self._slot:
            self._rt.acquire(pinned.pool.acquire_timeout)
            self._slot = True
            self._xa.started()
        self._drive(self._xa.start_steps(data_source, pinned, self.isolation))

    # -- ending ------------------------------------------------------------------------------

    def commit(self) -> None:
        """Commit every branch (see :meth:`~ddm_core.xa.twophase.TwoPhase.commit_steps` for what it raises)."""
        self._drive(self._xa.commit_steps(self._state, self._failure))

    def rollback(self) -> None:
        """Roll back every branch (an empty rollback of a branch that never prepared succeeds)."""
        self._drive(self._xa.rollback_steps(self._state))

    def _finish(self, state: str) -> None:
        """Return the pinned connections (lost branches' discarded) and the XA slot."""
        for ds in self._xa.lost:
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


def _outcome(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Outcome:
    """``call(*args, **kwargs)``'s value, or the error it raised."""
    try:
        return Outcome(call(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the protocol reads each statement's failure
        return Outcome(error=exc)
