"""Local transactions over sharded data: one pinned connection per data source, one writer.

``with executor.transaction() as tx:`` (and the PEP 249 connection's implicit
transaction) works like this:

* Every data source a statement of the transaction uses gets **one pinned
  connection** to its primary, opened with ``BEGIN`` the first time; all units
  on that data source run on it, one after another (units on different data
  sources still run in parallel). Reads inside a transaction never go to
  replicas.
* **At most one data source may be written.** A write (``plan.is_write``)
  whose units would reach a second data source raises
  :class:`~ddm_core.errors.CrossShardTransactionError` *before anything of
  that statement is sent anywhere (no XA unless switched on explicitly:
  ``transaction(mode="xa")``, docs/xa.md). A transaction on one data source is a plain
  local transaction.
* **Reads across shards are allowed.** On the written data source they see the
  transaction's own writes; on the others they read committed data (each
  through its own pinned connection, so InnoDB's REPEATABLE READ gives one
  snapshot per data source, taken at its first read — not one snapshot across
  shards).
* ``commit()`` commits the read-only pins first and the written one last, then
  returns every pinned connection; ``rollback()`` rolls all back and returns
  them. Either way the transaction is over; a statement that timed out or lost
  its connection leaves the transaction *failed*: only ``rollback()`` (or
  leaving the ``with`` block) is accepted after that.

* **Session state is the transaction's.** Statements that change a session
  (``SET @x``, ``SET SESSION ...``, ``GET_LOCK()``, temporary tables, ``PREPARE``)
  run on the pinned connection and last until the transaction ends; each such
  pin is reset before it goes back to the pool (discarded if that fails). What
  even a pinned session must not run (``SET autocommit``, ``USE``, ``SET
  NAMES``, ``LOCK TABLES``, ``COMMIT`` as SQL) is refused before anything is
  sent: :mod:`ddm_core.execute.session_state`.

* **A migration's dual writes** (``plan.dual``, docs/migration.md#dual-write) run after
  the statement's own units, inside the transaction, by a protocol both runners drive
  (:class:`~ddm_core.execute.shadows.Shadows`). On a data source the
  transaction already has a pin they share it (and its commit: a dual write on the
  written data source commits atomically with it); elsewhere they run on a
  *shadow participant*, a pinned connection of its own with ``BEGIN`` that no
  cross-shard check counts. A failed dual unit never fails the statement: it is
  logged and counted (``Executor.dual_write_failures()``), a shadow that failed is
  rolled back and its later dual units in the transaction skipped. ``commit()``
  commits the real participants as before, then best effort (logged and counted,
  never raised) the shadows and read-only pins that carry dual writes; ``rollback()``
  rolls back everything. Only a dual unit that ends or endangers a shared pin's
  transaction (a deadlock, a lock-wait timeout, a cancel, a lost connection) leaves
  the transaction *failed*, as the same error of any statement would.

* **Savepoints** (``tx.savepoint(name)``, ``rollback_to_savepoint``, ``release_savepoint``; the
  facades' ``SAVEPOINT`` statements) mark the whole transaction: every pinned connection, and each
  one pinned later right after its ``BEGIN`` (:mod:`ddm_core.execute.savepoints`).

A transaction is not thread-safe: use it from one thread at a time.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Callable, Collection, Generic, Iterable, Protocol, TypeVar

from ddm_core._text import shorten_sql
from ddm_core.errors import (
    ConfigError,
    CrossShardTransactionError,
    DataSourceUnavailableError,
    QueryTimeoutError,
    TransactionCharacteristicsError,
    TransactionError,
)
from ddm_core.execute.cross_node import run_cross_node
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.isolation import READ_WRITE, SNAPSHOT
from ddm_core.execute.isolation import characteristics as isolation_characteristics
from ddm_core.execute.pools import Borrowed
from ddm_core.execute.session_state import check_pinned, reset_or_discard
from ddm_core.execute.pools import EndpointPool
from ddm_core.execute.sent import SentControl, send_control
from ddm_core.execute.savepoints import RELEASE, ROLLBACK_TO, SAVEPOINT, Savepoints, savepoint_name, statement
from ddm_core.execute.shadows import Shadows
from ddm_core.execute.shared import DEFAULT, Lane, style_of
from ddm_core.execute.steps import Borrow, Reset, RunUnit, TxStep, drive
from ddm_core.route.plan import RoutePlan, RouteUnit
from ddm_core.route.router import Router

if TYPE_CHECKING:
    from ddm_core.execute.result import Result

__all__ = [
    "Transaction", "TransactionState", "TransactionHost", "CURRENT_TX", "register_mode", "transaction_modes", "check_mode",
    "begin_transaction", "recover_mode", "close_modes", "refuse_second_writer", "check_usable", "commit_order",
]  # fmt: skip


class TransactionHost(Protocol):
    """What a transaction runs on: the executor's router, pools and runner (``Executor`` is one)."""

    @property
    def router(self) -> Router: ...

    def primary_pool(self, data_source: str) -> EndpointPool: ...

    def deadline_of(self, timeout: Any, started: float) -> float | None: ...

    def run_pinned(self, plan: RoutePlan, lanes: list[Lane], *, style: str, timeout: Any) -> Result: ...

    def run_dual_unit(self, unit: RouteUnit, pinned: Borrowed | None, style: str, deadline: float | None) -> None: ...

    def dual_write_done(self, plan: RoutePlan, unit: RouteUnit) -> None: ...

    def dual_write_failed(self, plan: RoutePlan, unit: RouteUnit, error: BaseException, what: str = "") -> None: ...


#: The transaction bound by ``with executor.transaction():`` in this context.
CURRENT_TX: ContextVar[Transaction | None] = ContextVar("ddm_transaction", default=None)

log = logging.getLogger("ddm_core.execute")


B = TypeVar("B")


class TransactionState(Generic[B]):
    """What every local transaction tracks, on either runner: its pins, the one data source it wrote,
    whether it is active, failed or over, its dual writes (``B``: the runner's borrowed-connection type)."""

    #: A shadow participant may become a real one (its plain ``BEGIN`` is what a local pin opens with);
    #: the XA mode's may not (docs/migration.md#dual-write).
    _adopts_shadows = True
    #: The level each pinned connection opens its transaction at (``None``: the server's default);
    #: set before the first statement (:func:`~ddm_core.execute.isolation.isolation_level` spells it).
    isolation: str | None = None
    #: ``START TRANSACTION``'s characteristics each pinned connection opens with (``""``: a plain ``BEGIN``);
    #: :meth:`Transaction.start` sets them (:func:`~ddm_core.execute.isolation.characteristics` spells them).
    characteristics: str = ""

    def __init__(self, dual: Shadows[Any]) -> None:
        self._dual = dual  # a migration's dual writes in this transaction
        self._pins: dict[str, B] = {}
        self._dirty: set[str] = set()  # pins whose session a statement changed: reset before release
        self._written: str | None = None
        self._state = "active"  # active | failed | committed | rolled back
        self._failure: BaseException | None = None
        self._token: Token[Any] | None = None
        self._savepoints = Savepoints()

    @property
    def savepoints(self) -> tuple[str, ...]:
        """The names of the savepoints set and not yet released or rolled back past, oldest first."""
        return tuple(self._savepoints.names)

    def _check_savepoint(self, command: str, name: str) -> None:
        """Before a savepoint command runs on any pin: the state, the name, dual writes."""
        check_usable(self._state, self._failure)
        self._savepoints.check(command, savepoint_name(name))
        if command == ROLLBACK_TO and self._dual.carried:
            error = TransactionError(
                f"ROLLBACK TO SAVEPOINT {name}: a migration's dual writes ran in this transaction and cannot be "
                "rolled back to a savepoint; the transaction is rolled back instead", savepoint=name,
            )  # fmt: skip
            self._state, self._failure = "failed", error
            raise error

    def _savepoint_failed(self, exc: BaseException) -> None:
        """A savepoint command failed on one pin after others ran it: the pins disagree, nothing can commit."""
        self._state, self._failure = "failed", exc

    def fail(self, error: BaseException) -> None:
        """A statement sent on a pin outside ``execute_plan`` (the proxy's loop) lost or cancelled it, as
        ``execute_plan`` fails on a timeout or a lost connection: nothing more runs; the end discards the pins."""
        if self._state == "active":
            self._state, self._failure = "failed", error

    @property
    def active(self) -> bool:
        """Statements may still run (not committed, rolled back or failed)."""
        return self._state == "active"

    @property
    def state(self) -> str:
        """``active``, ``failed``, ``committed`` or ``rolled back``."""
        return self._state

    @property
    def data_sources(self) -> tuple[str, ...]:
        """Data sources with a pinned connection, in first-use order."""
        return tuple(self._pins)

    @property
    def written(self) -> str | None:
        """The one data source this transaction wrote to, if any."""
        return self._written

    @property
    def shadow_data_sources(self) -> tuple[str, ...]:
        """Data sources only dual writes reached (shadow participants), in first-use order."""
        return tuple(self._dual.shadows)


class Transaction(TransactionState[Borrowed]):
    """A local transaction of an :class:`~ddm_core.execute.Executor` (see the module docstring).

    Attributes:
        executor: The executor it runs on.
    """

    _dual: Shadows[Borrowed]

    def __init__(self, executor: TransactionHost) -> None:
        super().__init__(Shadows(executor.dual_write_done, executor.dual_write_failed))
        self.executor = executor

    def start(self, characteristics: str, data_sources: Iterable[str] = ()) -> None:
        """``START TRANSACTION characteristics`` (before the first statement): each pin opens with them. ``WITH
        CONSISTENT SNAPSHOT`` opens a pin on each of ``data_sources`` now (blocking), so each one's snapshot is
        taken at ``START TRANSACTION``, not at the transaction's first statement there (one snapshot per data
        source: they are not taken at one instant across them).

        Raises:
            TransactionCharacteristicsError: they conflict, or this mode (XA) or a driver cannot open with them.
            DdmError: a pin could not be opened (the transaction is rolled back).
        """
        spelled = isolation_characteristics(characteristics)
        if spelled and spelled != READ_WRITE and type(self)._begin is not Transaction._begin:
            raise TransactionCharacteristicsError(
                f"START TRANSACTION {spelled} is not supported in a {type(self).__name__} (an XA transaction opens "
                "its branches with XA START); use a local transaction", characteristics=spelled,
            )  # fmt: skip
        if self._pins or self._dual.shadows:
            raise TransactionCharacteristicsError(
                f"START TRANSACTION {spelled}: the transaction has run statements already", characteristics=spelled
            )
        self.characteristics = spelled
        if SNAPSHOT in spelled:
            try:
                for source in data_sources:
                    self._pin(source)
            except BaseException:
                self.rollback()
                raise

    # -- statements ---------------------------------------------------------------------

    def execute(self, sql: str, params: Any = None, *, timeout: float | None = None) -> Result:
        """Route and run one statement in this transaction (see :meth:`Executor.execute`).

        Args:
            timeout: Seconds for this statement; default: the executor's.
        """
        plan = self.executor.router.route(sql, params)
        return self.execute_plan(plan, caller_style=style_of(sql), timeout=DEFAULT if timeout is None else timeout)

    def execute_plan(self, plan: RoutePlan, *, caller_style: str = "format", timeout: Any = None) -> Result:
        """Run an already routed plan in this transaction.

        Raises:
            CrossShardTransactionError: a write would reach a second data source
                (nothing of the statement was sent).
            TransactionError: the transaction is over, or failed.
        """
        self._check_usable()
        if plan.cross_node is not None:
            result: Result = run_cross_node("threads", self.executor, plan, self, timeout)
            return result
        started = time.monotonic() if plan.dual else 0.0
        changes_session = check_pinned(plan)  # refuses what even a pinned session must not run
        sources = plan.data_sources
        if plan.is_write:
            self._check_write(plan, sources)
        lanes: dict[str, Lane] = {}
        for i, unit in enumerate(plan.units):
            lane = lanes.get(unit.data_source)
            if lane is None:
                pinned = self._pin(unit.data_source)
                lane = lanes[unit.data_source] = Lane(pinned.pool, [], pinned)
            lane.items.append((i, unit))
        if changes_session:
            self._dirty.update(lanes)  # before running: a failed statement may have changed it too
        try:
            result = self.executor.run_pinned(
                plan, list(lanes.values()), style=caller_style, timeout=DEFAULT if timeout is None else timeout
            )
        except (QueryTimeoutError, DataSourceUnavailableError) as exc:
            # The pinned connection was cancelled or lost: the transaction cannot go on.
            self._state = "failed"
            self._failure = exc
            raise
        if plan.is_write and sources:
            self._written = sources[0]
        if plan.dual:
            deadline = self.executor.deadline_of(DEFAULT if timeout is None else timeout, started)
            self._run_dual(plan, caller_style, deadline)
        return result

    # -- dual writes: the protocol's steps, answered with blocking calls -----------------------

    def _run_dual(self, plan: RoutePlan, style: str, deadline: float | None) -> None:
        """Run ``plan.dual`` after its units succeeded: on a shared pin or a shadow participant, never raising."""
        failure = drive(self._dual.run_steps(plan, self._pins, style, deadline), self._dual_step)
        if failure is not None:  # it ended a shared pin's transaction: committing would lose the statement's writes
            self._state = "failed"
            self._failure = failure

    def _dual_step(self, step: TxStep) -> Any:
        if isinstance(step, RunUnit):
            return self.executor.run_dual_unit(step.unit, step.on, step.style, step.deadline)
        if isinstance(step, Borrow):  # a shadow participant: a plain BEGIN, never an XA branch
            return self._borrow_begun(step.data_source, lambda b: b.pool.driver.begin(b.raw, self.isolation), step.deadline)
        if isinstance(step, Reset):
            return reset_or_discard(step.on)
        return self._control(step.on, step.command)

    @staticmethod
    def _control(pinned: Borrowed, command: str) -> None:
        """``COMMIT``, ``ROLLBACK`` or a savepoint statement on a pinned connection; its failure mapped."""
        driver, pool = pinned.pool.driver, pinned.pool
        try:
            if command == "COMMIT":
                driver.commit(pinned.raw)
            elif command == "ROLLBACK":
                driver.rollback(pinned.raw)
            else:
                driver.cursor(pinned.raw, False).execute(command)
        except Exception as exc:
            raise map_driver_error(exc, data_source=pool.data_source, endpoint=pool.endpoint.name, sql=command) from exc

    def _borrow_begun(self, data_source: str, begin: Callable[[Borrowed], None], deadline: float | None = None
                      ) -> Borrowed:  # fmt: skip
        """A connection to ``data_source``'s primary with ``begin`` run on it (discarded if that fails)."""
        pool = self.executor.primary_pool(data_source)
        borrowed = pool.borrow(deadline)
        try:
            begin(borrowed)
        except BaseException as exc:
            borrowed.release(discard=True)
            if isinstance(exc, Exception):
                raise map_driver_error(exc, data_source=data_source, endpoint=pool.endpoint.name, sql="BEGIN") from exc
            raise
        return borrowed

    # -- savepoints (execute/savepoints.py) -----------------------------------------------------

    def savepoint(self, name: str) -> None:
        """``SAVEPOINT name`` on every pinned connection (and on each one pinned later, after its BEGIN)."""
        self.run_savepoint(SAVEPOINT, name)

    def rollback_to_savepoint(self, name: str) -> None:
        """``ROLLBACK TO SAVEPOINT name`` on every pinned connection; later savepoints are dropped."""
        self.run_savepoint(ROLLBACK_TO, name)

    def release_savepoint(self, name: str) -> None:
        """``RELEASE SAVEPOINT name`` on every pinned connection; it and later savepoints are dropped."""
        self.run_savepoint(RELEASE, name)

    def run_savepoint(self, command: str, name: str) -> None:
        """``command`` (``SAVEPOINT``, ``ROLLBACK TO SAVEPOINT``, ``RELEASE SAVEPOINT``) on ``name``."""
        self._check_savepoint(command, name)
        try:
            for pinned in self._pins.values():
                self._control(pinned, statement(command, name, pinned.pool.driver.dialect.name))
        except BaseException as exc:
            self._savepoint_failed(exc)
            raise
        self._savepoints.apply(command, name)

    def _check_write(self, plan: RoutePlan, sources: tuple[str, ...]) -> None:
        """Refuse a write that would reach a second data source (the XA mode overrides this)."""
        refuse_second_writer(plan, sources, self._written)

    def _check_usable(self) -> None:
        check_usable(self._state, self._failure)

    def connection(self, data_source: str) -> Borrowed:
        """This transaction's connection to ``data_source``'s primary, begun on first use (for a
        cross-node statement's temporary copies: docs/cross-node-queries.md)."""
        self._check_usable()
        return self._pin(data_source)

    def pinned(self, data_source: str) -> Borrowed | None:
        """This transaction's connection to ``data_source`` when it pinned one already and may run statements
        still; ``None`` otherwise (nothing opened, nothing raised: the caller leaves the statement to
        :meth:`connection`'s path)."""
        return self._pins.get(data_source) if self._state == "active" else None

    def mark_dirty(self, data_source: str) -> None:
        """The session of ``data_source``'s connection changed: reset (or discard) it when this ends."""
        self._dirty.add(data_source)

    def _pin(self, data_source: str) -> Borrowed:
        pinned = self._pins.get(data_source)
        if pinned is not None:
            return pinned
        if data_source in self._dual.shadows:  # adopted, or rolled back first (the XA mode)
            shadow = drive(self._dual.adopt_steps(data_source, self._adopts_shadows), self._dual_step)
            if shadow is not None:
                self._pins[data_source] = shadow
                return shadow
        borrowed = self._borrow_begun(data_source, lambda b: self._begin_marked(data_source, b))
        self._pins[data_source] = borrowed
        return borrowed

    def _begin_marked(self, data_source: str, pinned: Borrowed) -> None:
        """Open the transaction on a newly pinned connection and set the savepoints set so far."""
        self._begin(data_source, pinned)
        for sql in self._savepoints.replay(pinned.pool.driver.dialect.name):
            self._control(pinned, sql)

    def _begin(self, data_source: str, pinned: Borrowed) -> None:
        """Open the transaction on a newly pinned connection (the XA mode starts a branch instead)."""
        pinned.pool.driver.begin(pinned.raw, self.isolation, self.characteristics)

    # -- opened and ended from an event loop (docs/proxy.md#transactions-on-the-loop) -------------

    def send_opening(self, data_source: str, follows: Callable[[Borrowed], bool] | None = None) -> SentControl | None:
        """The transaction's opening (:meth:`_begin`'s statements) sent without waiting on an idle connection to
        ``data_source``'s primary; :meth:`opened` makes it the pin once its OKs are read. ``None`` (nothing sent):
        the worker path opens it — pinned already, a shadow participant there, savepoints to set, no idle
        connection, a driver that cannot split a statement.

        ``follows``: a statement goes right behind the opening, before its OKs are read, if ``follows(connection)``
        says it may (its OKs are then read to their last byte: :attr:`SentControl.followed`); ``None`` when not.
        """
        if (self._state != "active" or data_source in self._pins or data_source in self._dual.shadows
                or self.savepoints or type(self)._begin is not Transaction._begin):  # fmt: skip
            return None  # (a mode that opens otherwise: XA starts a branch)
        pool = self.executor.primary_pool(data_source)
        if not pool.driver.can_pipeline:
            return None
        borrowed = pool.lend_idle()
        if borrowed is None:
            return None
        if follows is not None and not follows(borrowed):
            borrowed.release()  # idle as lent: nothing was sent on it
            return None
        sent = send_control(data_source, borrowed, pool.driver.begin_commands(self.isolation, self.characteristics))
        sent.followed = follows is not None
        return sent

    def opened(self, sent: SentControl) -> None:
        """``sent``'s OKs were read (:meth:`SentControl.receive`): its connection is the data source's pin, as
        :meth:`_pin` makes it one.

        Raises:
            DdmError: the opening failed (the connection is discarded; the transaction goes on, as after a
                failed ``BEGIN`` on the worker path).
        """
        if sent.error is not None:
            sent.pinned.release(discard=True)
            raise sent.error
        self._pins[sent.data_source] = sent.pinned

    def ends_on_loop(self) -> bool:
        """May :meth:`send_end` end this — active, nothing written (the written pin commits last, after the
        others succeeded), no dual writes, no session to reset, every pin's driver able to split a statement?"""
        return (self._state == "active" and self._written is None and not self._dirty and not self._dual.carried
                and type(self).commit is Transaction.commit  # a mode that ends otherwise (XA's two phases): not here
                and all(pinned.pool.driver.can_pipeline for pinned in self._pins.values()))  # fmt: skip

    def send_end(self, command: str) -> list[SentControl]:
        """``COMMIT`` or ``ROLLBACK`` sent on every pin at once (:meth:`ends_on_loop` said yes), in commit order;
        :meth:`ended` settles them once their OKs are read."""
        return [send_control(ds, self._pins[ds], [command]) for ds in commit_order(self._pins, None)]

    def ended(self, command: str, sent: list[SentControl]) -> None:
        """The end's OKs were read: the transaction is over and its pins back (discarded where it failed).

        Every pin only read, so a pin whose ``COMMIT`` went through is where the worker path's ``ROLLBACK``
        after a failed one leaves it: the outcome and the state (``rolled back``) are :meth:`commit`'s.

        Raises:
            DdmError: the first failed ``COMMIT``'s error in commit order, as :meth:`commit` raises it
                (a failed ``ROLLBACK`` is logged, as :meth:`rollback` logs it).
        """
        self._pins, self._dirty = {}, set()
        failure = next((s.error for s in sent if s.error is not None), None)
        self._state = "committed" if command == "COMMIT" and failure is None else "rolled back"
        for s in sent:
            if s.error is not None and command != "COMMIT":
                log.warning("%s on %s failed: %s", command, s.data_source, s.error)
            s.pinned.release(discard=s.error is not None)
        if command == "COMMIT" and failure is not None:
            raise failure

    # -- ending -----------------------------------------------------------------------------

    def commit(self) -> None:
        """Commit on every pinned connection (the written one last), then return them.

        Raises:
            TransactionError: the transaction failed (it is rolled back instead)
                or is already over.
            ExecutionError / DataSourceUnavailableError: a COMMIT failed; the
                remaining pins are rolled back.
        """
        if self._state == "failed":
            self.rollback()
            raise TransactionError(
                f"the transaction failed ({self._failure}) and was rolled back, not committed",
                state="failed",
            )
        self._check_usable()
        late = self._dual.late(self._pins, self._written)  # read-only pins carrying dual writes: after, best effort
        order = commit_order(self._pins, self._written, late)
        try:
            for ds in order:
                self._control(self._pins[ds], "COMMIT")
        except BaseException:
            self._end("rolled back", rollback=True)
            raise
        if late:
            drive(self._dual.commit_late_steps(late, self._pins, self._dirty), self._dual_step)
        self._end("committed", rollback=False)

    def rollback(self) -> None:
        """Roll back on every pinned connection and return them (a no-op once over)."""
        if self._state in ("committed", "rolled back"):
            return
        self._end("rolled back", rollback=True)

    def _end(self, state: str, rollback: bool) -> None:
        pins, self._pins = self._pins, {}
        dirty, self._dirty = self._dirty, set()
        failed = self._state == "failed"
        self._state = state
        if self._dual.carried:  # a migration's dual writes ran: after the real participants' commit
            drive(self._dual.finish_steps(commit=state == "committed"), self._dual_step)
        for ds, pinned in pins.items():
            discard = failed
            if rollback and not discard:
                try:
                    pinned.pool.driver.rollback(pinned.raw)
                except Exception as exc:
                    log.warning("ROLLBACK on %s failed: %s", ds, exc)
                    discard = True
            if ds in dirty and not discard:
                discard = not reset_or_discard(pinned)  # the next borrower gets a fresh session
            pinned.release(discard=discard)

    # -- context manager --------------------------------------------------------------------

    def __enter__(self) -> Transaction:
        current = CURRENT_TX.get()
        if current is not None and current.executor is self.executor and current.active:
            raise TransactionError("a transaction is already open on this executor in this context (no nesting)")
        self._token = CURRENT_TX.set(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None and self._state in ("active", "failed"):
                self.commit()
            else:
                self.rollback()
        finally:
            if self._token is not None:
                CURRENT_TX.reset(self._token)
                self._token = None

    def __del__(self) -> None:
        if getattr(self, "_pins", None) or getattr(getattr(self, "_dual", None), "shadows", None):
            try:
                self._end("rolled back", rollback=True)
            except Exception:  # noqa: S110
                pass

    def __repr__(self) -> str:
        return f"<Transaction {self._state} pinned={list(self._pins)} written={self._written!r}>"


# -- transaction modes --------------------------------------------------------------------------
# ``local`` lives here; ``xa`` is a package above the execute layer (ddm_core.xa) that registers
# itself when ddm_core is imported, so this layer never imports it (docs/xa.md#modes).

# Factories take the executor (a TransactionHost); the XA mode's needs more of it than the protocol names.
_MODES: dict[str, Callable[[Any], Transaction]] = {"local": Transaction}
_RECOVERY: dict[str, Callable[[Any], Any]] = {}
_CLOSING: dict[str, Callable[[Any], None]] = {}


def register_mode(
    name: str, factory: Callable[[Any], Transaction], recover: Callable[[Any], Any] | None = None,
    closing: Callable[[Any], None] | None = None,
) -> None:  # fmt: skip
    """Make ``transaction(mode=name)`` build ``factory(executor)``; ``recover``: its crash recovery;
    ``closing(host)``: what the mode deferred for an executor that is closing (blocking, never raises)."""
    _MODES[name] = factory
    if recover is not None:
        _RECOVERY[name] = recover
    if closing is not None:
        _CLOSING[name] = closing


def close_modes(host: Any) -> None:
    """An executor is closing: each mode finishes what it deferred for ``host`` (XA's ``COMMITTED`` marks)."""
    for closing in _CLOSING.values():
        closing(host)


def transaction_modes() -> tuple[str, ...]:
    """The registered transaction modes (``local``, ``xa``)."""
    return tuple(_MODES)


def check_mode(mode: str) -> str:
    """``mode`` if registered.

    Raises:
        ConfigError: an unknown mode, naming the known ones.
    """
    if mode not in _MODES:
        raise ConfigError(
            f"transaction_mode {mode!r} is not one of {', '.join(_MODES)}", transaction_mode=mode
        )
    return mode


def begin_transaction(executor: TransactionHost, mode: str) -> Transaction:
    """A new transaction of ``mode`` on ``executor`` (nothing is sent until its first statement)."""
    return _MODES[check_mode(mode)](executor)


def recover_mode(executor: TransactionHost, mode: str) -> Any:
    """Run ``mode``'s crash recovery on ``executor``; its report.

    Raises:
        ConfigError: the mode has no recovery.
    """
    recover = _RECOVERY.get(check_mode(mode))
    if recover is None:
        raise ConfigError(f"transaction_mode {mode!r} has no recovery", transaction_mode=mode)
    return recover(executor)


# -- the rules every local transaction keeps (threads and asyncio) -------------------------------


def refuse_second_writer(plan: RoutePlan, sources: tuple[str, ...], written: str | None) -> None:
    """Refuse a write that would reach a data source other than the one already written.

    Raises:
        CrossShardTransactionError: naming the data sources and the ways out (nothing was sent).
    """
    targets = set(sources)
    if written is not None:
        targets.add(written)
    if len(targets) > 1:
        raise CrossShardTransactionError(
            f"a {plan.statement.upper()} inside a transaction would write to data sources "
            f"{', '.join(sorted(targets))}; a local transaction writes to one data source "
            f"(nothing was sent): {shorten_sql(plan.units[0].sql) if plan.units else ''}. "
            "Run it with autocommit=True (connect(..., autocommit=True), or outside "
            "executor.transaction()), split it into one transaction per data source, or use "
            "the XA transaction mode: executor.transaction(mode='xa') / "
            "connect(..., transaction_mode='xa') / Executor(..., transaction_mode='xa') (docs/xa.md)",
            data_sources=tuple(sorted(targets)),
            written=written,
            statement=plan.statement,
        )


def check_usable(state: str, failure: BaseException | None) -> None:
    """Refuse a statement in a transaction that is over or failed.

    Raises:
        TransactionError: naming the state (and the failure to roll back after).
    """
    if state == "active":
        return
    if state == "failed":
        raise TransactionError(
            f"the transaction failed ({failure}); roll it back before running more statements", state=state
        )
    raise TransactionError(f"the transaction is {state}; start a new one", state=state)


def commit_order(pins: Collection[str], written: str | None, late: Iterable[str] = ()) -> list[str]:
    """The data sources to COMMIT, in order: read-only pins first, the written one last (``late``: after it)."""
    held = set(late)
    order = [ds for ds in pins if ds != written and ds not in held]
    if written is not None and written in pins:
        order.append(written)
    return order
