"""A migration's dual writes inside a transaction, written once for both runners (docs/migration.md#dual-write).

:class:`Shadows` never does I/O: its ``*_steps`` methods are generators of :mod:`ddm_core.execute.steps`
(run a dual unit on a pinned connection, borrow a shadow participant, ``COMMIT`` / ``ROLLBACK`` one,
reset its session), and the thread (:class:`~ddm_core.execute.transaction.Transaction`) and asyncio
(:class:`~ddm_core.aio.transaction.AsyncTransaction`) transactions answer them. What it decides:

* a dual unit on a data source the transaction pinned runs on that pin. A statement error there (a
  duplicate key) is counted and the transaction goes on; one that ends or endangers the shared
  transaction (a deadlock, a lock-wait timeout, a deadline's cancel, a lost connection) is returned
  for the transaction to fail with. Past the statement's deadline it is not sent (counted);
* elsewhere a *shadow participant*, a connection of its own with a plain ``BEGIN`` that no
  cross-shard check counts, runs them. Its failure is counted, the shadow rolled back (the units it
  had run counted as lost with it) and its later dual units in the transaction skipped (counted);
* when the transaction's own statements reach a shadow's data source, the shadow is adopted as an
  ordinary participant (local mode) or rolled back first (XA mode: a plain transaction cannot
  become a branch);
* commit: after the real participants, the read-only pins carrying dual writes (:meth:`late`) and
  the shadows commit best effort: a failed ``COMMIT`` is counted per unit it lost, never raised;
  rollback: every shadow is rolled back. A failed dual unit never fails the statement.

A cancel (any exception that is not an ``Exception``, raised at a ``yield``) while a shadow's step
runs discards that shadow's connection before it goes on out: nothing the protocol borrowed stays
borrowed. Giving a connection back (``release(discard=...)``) is synchronous and never raises on
both runners, so the protocol does it itself.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Generic, Iterable, Mapping, MutableMapping, Protocol, TypeVar

from ddm_core.errors import DataSourceUnavailableError, DdmError, QueryTimeoutError, TransactionError
from ddm_core.execute.pools import discard_on
from ddm_core.execute.steps import Borrow, Control, Reset, RunUnit, TxSteps
from ddm_core.route.plan import RoutePlan, RouteUnit

__all__ = ["Shadows", "ends_transaction"]

log = logging.getLogger("ddm_core.execute")

#: Server errors that roll back (or doom) a whole transaction, not just the statement:
#: deadlock, lock-wait timeout, and the XA branch rollbacks (XA_RBROLLBACK, XA_RBTIMEOUT, XA_RBDEADLOCK).
_ENDS_TRANSACTION = frozenset({1213, 1205, 1402, 1613, 1614})


class _Pinned(Protocol):
    def release(self, *, discard: bool = False) -> None: ...


B = TypeVar("B", bound=_Pinned)


def ends_transaction(exc: BaseException) -> bool:
    """Does ``exc``, raised by a statement on a transaction's connection, end or endanger that transaction?"""
    code = exc.context.get("code") if isinstance(exc, DdmError) else None
    return isinstance(exc, (QueryTimeoutError, DataSourceUnavailableError)) or code in _ENDS_TRANSACTION


class Shadows(Generic[B]):
    """The dual writes of one transaction: its shadow participants, the failed ones, what ran where.

    Args:
        done: Counts a dual unit that ran (``DualWrites.done``).
        failed: Counts a dual unit that failed, was skipped or was lost (``DualWrites.failed``).
        clock: Monotonic seconds, the clock of statement deadlines.

    Attributes:
        shadows: Data source → its shadow participant (``B``: the runner's borrowed connection), in
            first-use order.
    """

    def __init__(
        self,
        done: Callable[[RoutePlan, RouteUnit], None],
        failed: Callable[[RoutePlan, RouteUnit, BaseException, str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.shadows: dict[str, B] = {}
        self._broken: dict[str, BaseException] = {}
        self._units: dict[str, list[tuple[RoutePlan, RouteUnit]]] = {}  # what ran where (pins and shadows)
        self._done = done
        self._failed = failed
        self._clock = clock

    @property
    def carried(self) -> bool:
        """Did dual writes run (or fail) in this transaction? (what its end must see to)."""
        return bool(self.shadows or self._units or self._broken)

    # -- a statement's dual units --------------------------------------------------------------------

    def run_steps(
        self, plan: RoutePlan, pins: Mapping[str, B], style: str, deadline: float | None
    ) -> TxSteps[BaseException | None]:
        """Run ``plan.dual`` after the statement's units succeeded (``pins``: the transaction's).

        Returns the error that ended a shared pin's transaction (the transaction is failed with it;
        nothing more ran), else ``None``. Never raises a unit's error; a cancel goes on out.
        """
        for unit in plan.dual:
            ds = unit.data_source
            pinned = pins.get(ds)
            if pinned is not None:
                failure = yield from self._on_pin_steps(plan, unit, pinned, style, deadline)
                if failure is not None:
                    return failure  # the shared transaction failed: nothing more runs in it
                continue
            broken = self._broken.get(ds)
            if broken is not None:
                self._failed(plan, unit, TransactionError(
                    f"dual write skipped: this transaction's shadow participant {ds!r} failed earlier ({broken})",
                    data_source=ds), "skipped")  # fmt: skip
                continue
            try:
                shadow = self.shadows.get(ds)
                if shadow is None:
                    shadow = self.shadows[ds] = yield Borrow(ds, deadline)
                yield RunUnit(shadow, unit, style, deadline)
            except Exception as exc:
                self._failed(plan, unit, exc, f"the shadow participant {ds!r} is rolled back "
                             "and skips the transaction's later dual writes")  # fmt: skip
                yield from self._break_steps(ds, exc)  # counts the units it had run, after this one
                continue
            except BaseException:  # a cancel: the shadow's connection is in doubt
                cut = self.shadows.pop(ds, None)
                if cut is not None:
                    cut.release(discard=True)
                raise
            self._units.setdefault(ds, []).append((plan, unit))
            self._done(plan, unit)
        return None

    def _on_pin_steps(
        self, plan: RoutePlan, unit: RouteUnit, pinned: B, style: str, deadline: float | None
    ) -> TxSteps[BaseException | None]:
        """A dual unit on a data source the transaction pinned shares the pin; the error that ended it, if one did."""
        if deadline is not None and deadline <= self._clock():  # nothing sent: the pin is untouched
            self._failed(plan, unit, QueryTimeoutError(
                f"dual write not sent: the statement's deadline passed before it (data source {unit.data_source!r})",
                data_source=unit.data_source, sql=unit.sql), "")  # fmt: skip
            return None
        try:
            yield RunUnit(pinned, unit, style, deadline)
        except Exception as exc:
            if ends_transaction(exc):
                # The statement's own writes on this connection are gone or in doubt: committing would lose them.
                self._failed(plan, unit, exc, "it shared the transaction's connection, which failed with it")
                return exc
            self._failed(plan, unit, exc, "")  # the server undid only this statement
            return None
        self._units.setdefault(unit.data_source, []).append((plan, unit))
        self._done(plan, unit)
        return None

    def _break_steps(self, data_source: str, exc: BaseException) -> TxSteps[None]:
        """A shadow failed: roll it back, return its connection, skip its later dual units."""
        self._broken[data_source] = exc
        shadow = self.shadows.pop(data_source, None)
        lost = self._units.pop(data_source, [])
        try:
            if shadow is not None:
                doubtful = isinstance(exc, QueryTimeoutError) or discard_on(exc)
                yield from self.end_steps(data_source, shadow, commit=False, doubtful=doubtful)
        finally:  # cancelled meanwhile: the shadow is gone all the same (discarded)
            for plan, unit in lost:  # ran, but rolled back with the shadow
                self._failed(plan, unit, exc, "rolled back with its shadow participant")

    # -- the transaction's own statements -------------------------------------------------------------

    def adopt_steps(self, data_source: str, adopts: bool) -> TxSteps[B | None]:
        """The transaction's own statement reaches ``data_source``: its shadow, if any, to pin as a participant
        (``adopts``: the local mode, whose pins open with the same plain ``BEGIN``), or else rolled back."""
        if data_source not in self.shadows:
            return None
        if adopts:  # the statement joins the dual writes' transaction there
            return self.shadows.pop(data_source)
        yield from self._break_steps(data_source, TransactionError(
            f"the transaction's own statements reached {data_source!r}, which its dual writes used "
            "outside the transaction's branches", data_source=data_source))  # fmt: skip
        return None

    # -- the end -------------------------------------------------------------------------------------

    def late(self, pins: Iterable[str], written: str | None) -> list[str]:
        """The read-only pins carrying dual writes: committed after the written one, best effort (the new
        location must not keep rows whose old location's commit failed)."""
        if not self._units:
            return []
        pinned = set(pins)
        return [ds for ds in self._units if ds != written and ds in pinned]

    def commit_late_steps(self, late: Iterable[str], pins: MutableMapping[str, B], dirty: set[str]) -> TxSteps[None]:
        """The real participants committed: commit the ``late`` pins (taken out of ``pins``), best effort."""
        for ds in late:
            yield from self.end_steps(ds, pins.pop(ds), commit=True, dirty=ds in dirty)

    def finish_steps(self, commit: bool) -> TxSteps[None]:
        """The transaction ends (its real participants are done): commit (best effort) or roll back every shadow."""
        shadows, self.shadows = self.shadows, {}
        try:
            for ds, pinned in shadows.items():
                yield from self.end_steps(ds, pinned, commit=commit)
        except BaseException:  # cancelled: the rest are discarded (the server rolls them back)
            for pinned in shadows.values():
                pinned.release(discard=True)  # idempotent: the ones already given back stay so
            raise
        finally:
            self._units, self._broken = {}, {}

    def end_steps(
        self, data_source: str, pinned: B, *, commit: bool, doubtful: bool = False, dirty: bool = False
    ) -> TxSteps[None]:
        """Commit (best effort: a failure is counted per unit it loses) or roll back a pin carrying only dual
        writes, then give it back (``doubtful``: its connection is in doubt, not rolled back but discarded;
        ``dirty``: a statement changed its session, reset first)."""
        discard = doubtful
        try:
            try:
                if commit:
                    yield Control(pinned, "COMMIT")
                elif not doubtful:
                    yield Control(pinned, "ROLLBACK")
            except Exception as exc:
                discard = True
                if commit:
                    for plan, unit in self._units.get(data_source, ()):
                        self._failed(plan, unit, exc, "its COMMIT failed")
                else:
                    log.warning("ROLLBACK of the dual writes on %s failed: %s", data_source, exc)
            if dirty and not discard:
                discard = not (yield Reset(pinned))  # a read-only pin whose session a statement changed
        except BaseException:
            pinned.release(discard=True)
            raise
        pinned.release(discard=discard)

    def abandon(self) -> list[B]:
        """Forget every shadow without a round trip; their connections, for the caller to give back as it gives
        back its pins (a connection released inside a transaction is not reused as it is)."""
        shadows, self.shadows = self.shadows, {}
        self._units, self._broken = {}, {}
        return list(shadows.values())
