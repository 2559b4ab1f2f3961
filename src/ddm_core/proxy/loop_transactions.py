"""A read in the session's open transaction, sent from the event loop on the connection the transaction
pinned (docs/proxy.md#transactions-on-the-loop).

On the worker path such a read is ``Transaction.execute_plan`` on a worker thread, blocking on the pinned
connection: two thread hops and the rows decoded and framed again. A one-unit ``SELECT`` on a data source
the transaction has pinned already needs one round trip on that connection and nothing else, so it is sent
as an autocommit statement is (``Executor.send_single``, on the pin) and its answer relayed or read on the
loop. What may need more than that round trip stays on the worker path: the first statement on a data
source (its ``BEGIN`` and the savepoints set so far), writes (the single-writer rule, read-your-writes,
dual writes), statements that change the session, cross-node reads, and every statement of an XA
transaction (its deadline and its branch failures are handled around each statement). A read of several
units whose data sources are all pinned goes from the loop too, each data source's units one after another
on its pin (:func:`pins_for`, proxy/relay_many.py).

``BEGIN`` opens a transaction without sending anything (the first statement on each data source opens it
there): on the loop too, for a local transaction, as is the ``COMMIT`` or ``ROLLBACK`` of one that pinned no
connection. One that did sends a ``COMMIT`` per pin: a worker does.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from ddm_core.errors import DataSourceUnavailableError, DdmError
from ddm_core.execute import Executor, Transaction
from ddm_core.execute.pools import Borrowed
from ddm_core.execute.sent import SentControl, SentUnit
from ddm_core.execute.session_state import check_pinned
from ddm_core.proxy.relay import readable
from ddm_core.route.plan import RouteKind, RoutePlan, RouteUnit

_SINGLE = RouteKind.SINGLE

__all__ = [
    "reads_on_pins", "pin_for", "read_from_loop", "pins_for", "send_on_pin", "ends_quietly", "PinnedLoan", "open_on_loop", "end_on_loop",
    "receive_all", "opening_for", "opened_under", "bound_opening", "settle_opening", "drop_opening",
]  # fmt: skip


def ends_quietly(tx: Transaction) -> bool:
    """Does ending ``tx`` send nothing — a local transaction, active, that pinned no connection yet? (BEGIN,
    COMMIT and ROLLBACK are then answered on the loop.)"""
    return reads_on_pins(tx) and not tx.data_sources and not tx.shadow_data_sources


def reads_on_pins(tx: Transaction) -> bool:
    """May reads of ``tx`` go from the loop at all — a local transaction that has not failed?"""
    return type(tx) is Transaction and tx.active


def pin_for(tx: Transaction, plan: RoutePlan) -> Borrowed | None:
    """The pin ``plan`` goes on from the loop — a plain one-unit read on a data source ``tx`` pinned already —
    or ``None``: not there (the hot path asks for every read of a transaction, so the pin is looked up once)."""
    units = plan.units
    if len(units) != 1 or plan.kind is not _SINGLE or type(tx) is not Transaction:
        return None
    pin = tx.pinned(units[0].data_source)  # None unless active: reads_on_pins's check too
    return pin if pin is not None and _plain(plan) else None


def read_from_loop(tx: Transaction, plan: RoutePlan) -> bool:
    """May ``plan`` go from the loop in ``tx`` — a plain one-unit read, on its pin or on one :func:`open_on_loop`
    opens first?"""
    return len(plan.units) == 1 and plan.kind is RouteKind.SINGLE and _plain_read(tx, plan)


def pins_for(tx: Transaction, plan: RoutePlan) -> dict[str, Borrowed] | None:
    """The pins a multi-unit read goes on from the loop (``Executor.send_many``'s ``on``), one loan per data
    source; ``None``: the worker path runs it — it is not a plain read, or one of its data sources is not
    pinned yet (docs/proxy.md#multi-unit-reads-on-the-loop)."""
    if (len(plan.units) < 2 and plan.kind is _SINGLE) or type(tx) is not Transaction or not _plain(plan):
        return None
    loans: dict[str, Borrowed] = {}
    for source in plan.data_sources:
        pin = tx.pinned(source)  # None unless active: reads_on_pins's check too
        if pin is None:
            return None
        loans[source] = PinnedLoan(pin, tx)
    return loans


def _plain_read(tx: Transaction, plan: RoutePlan) -> bool:
    """A plain read (nothing written, no session changed, no cross-node step) in a transaction that may read
    from the loop?"""
    return reads_on_pins(tx) and _plain(plan)


def _plain(plan: RoutePlan) -> bool:
    """A plain read: nothing written, no session changed, no cross-node step?"""
    if plan.statement != "select" or plan.is_write or plan.dual or plan.cross_node is not None:
        return False
    try:
        return not check_pinned(plan)
    except DdmError:
        return False  # refused: the worker path says why, in its words


async def open_on_loop(tx: Transaction, plan: RoutePlan) -> int:
    """Before a plain read of ``tx`` is sent from the loop: its opening sent on an idle connection to each of
    ``plan``'s data sources not pinned yet, all at once, and those connections pinned once their OKs are in
    (``Transaction.send_opening``). The number opened; a data source left unpinned (no idle connection, a
    savepoint to set) leaves the read to the worker path, which opens it there.

    Raises:
        DdmError: an opening failed (its connection discarded; the others opened stay pinned).
    """
    if not _plain_read(tx, plan):
        return 0
    sent: list[SentControl] = []
    for source in plan.data_sources:
        if source not in tx.data_sources:
            opening = tx.send_opening(source)
            if opening is None:
                break
            sent.append(opening)
    try:
        await receive_all(sent)
    except BaseException:  # cancelled (the client went away): nothing was pinned, every connection in doubt
        for opening in sent:
            opening.pinned.release(discard=True)
        raise
    failure: DdmError | None = None
    for opening in sent:
        try:
            tx.opened(opening)
        except DdmError as exc:
            failure = failure or exc
    if failure is not None:
        raise failure
    return len(sent)


async def end_on_loop(tx: Transaction, command: str) -> None:
    """``COMMIT`` or ``ROLLBACK`` of ``tx`` (``Transaction.ends_on_loop`` said yes) sent on every pin at once
    from the loop, the OKs read, the pins returned.

    Raises:
        DdmError: what ``Transaction.commit`` raises for a failed ``COMMIT``.
    """
    sent = tx.send_end(command)
    try:
        await receive_all(sent)
    except BaseException:  # cancelled (the client went away): the pins not answered yet are in doubt
        for end in sent:
            if end.error is None and not end.received:
                end.timed_out("before the client went away")
        with contextlib.suppress(DdmError):
            tx.ended(command, sent)
        raise
    tx.ended(command, sent)


async def receive_all(sent: list[SentControl]) -> None:
    """Each one's OKs read once its socket is readable (they were sent together: the waits overlap)."""
    for control in sent:
        if control.error is not None:
            continue
        if await readable(control.fileno, control.answer_by):
            control.receive()
        else:
            control.timed_out()


def opening_for(tx: Transaction, plan: RoutePlan, sql: str | None) -> SentControl | None:
    """A plain one-unit read's data source not pinned yet (:func:`read_from_loop` said yes): its opening sent on
    an idle connection, for the read to go right behind it (:func:`send_on_pin` with it, then
    :func:`opened_under`). ``None``: nothing sent — pinned already, or the read cannot follow the opening there
    (``sql``, a binary execute's statement, not prepared on it; TLS) or the loop cannot open it
    (:meth:`Transaction.send_opening`): :func:`open_on_loop` opens it first, or the worker path."""
    source = plan.units[0].data_source
    if source in tx.data_sources:
        return None
    return tx.send_opening(source, lambda b: b.pool.driver.follows_opening(b.raw, sql))


def send_on_pin(executor: Executor, tx: Transaction, plan: RoutePlan, style: str,
                send: Callable[[Any, RouteUnit], None] | None, opening: SentControl | None = None,
                pin: Borrowed | None = None) -> SentUnit | None:  # fmt: skip
    """``plan`` sent on ``tx``'s pin (``pin``, :func:`pin_for`'s), or behind ``opening`` (:func:`opening_for`) on
    the connection that becomes it; ``None``: not sent, the worker path runs it (after :func:`opened_under`)."""
    if opening is not None:
        return executor.send_single(plan, caller_style=style, send=send, on=PinnedLoan(opening.pinned, tx, opening))
    if pin is None:
        pin = tx.connection(plan.units[0].data_source)  # pinned already: no round trip
    return executor.send_single(plan, caller_style=style, send=send, on=PinnedLoan(pin, tx))


async def opened_under(tx: Transaction, opening: SentControl, sent: SentUnit | None) -> None:
    """``opening``'s OKs read — to their last byte, ``sent``'s answer behind them left on the socket — and its
    connection made ``tx``'s pin; then ``sent``'s answer is read as any on a pin.

    Raises:
        DdmError: the opening failed (its error, as the worker path's ``BEGIN`` gives it): ``sent``'s answer is
            never read, the connection discarded, the transaction going on as after a failed ``BEGIN``.
    """
    bound_opening(opening, sent)
    try:
        await receive_all([opening])
    except BaseException:  # cancelled (the client went away, KILL): neither answer read, the connection goes
        drop_opening(opening, sent, "before the client went away")
        raise
    settle_opening(tx, opening, sent)


def bound_opening(opening: SentControl, sent: SentUnit | None) -> None:
    """The statement ``sent`` behind ``opening`` bounds the wait for its OKs too (its deadline)."""
    if sent is not None and sent.answer_by is not None:
        opening.answer_by = sent.answer_by if opening.answer_by is None else min(opening.answer_by, sent.answer_by)


def settle_opening(tx: Transaction, opening: SentControl, sent: SentUnit | None) -> None:
    """``opening``'s OKs read (or given up, its error set): its connection made ``tx``'s pin, and ``sent``'s loan
    the pin's; ``sent``'s answer is read next, as any on a pin.

    Raises:
        DdmError: the opening failed (:func:`drop_opening`'s error; ``sent`` abandoned, the connection discarded).
    """
    if opening.error is not None:
        raise drop_opening(opening, sent, "")
    tx.opened(opening)
    if sent is not None and isinstance(sent.borrowed, PinnedLoan):
        sent.borrowed.opened()  # the transaction's pin from now on: a cut-off answer fails the transaction


def drop_opening(opening: SentControl, sent: SentUnit | None, when: str) -> BaseException:
    """``opening`` given up — it failed, its statement failed to send, or a cancel came ``when`` — with the
    statement sent behind it (abandoned unread) and its connection (discarded, never pinned; the transaction
    goes on as after a failed ``BEGIN``); the opening's error."""
    if sent is not None:
        sent.abandon()  # its guard disarmed; its loan, not pinned yet, fails the opening, not the transaction
    opening.timed_out(when or "before the statement sent behind it failed")  # an error of its own stands
    opening.pinned.release(discard=True)
    assert opening.error is not None
    return opening.error


class PinnedLoan(Borrowed):
    """A transaction's pin lent to one statement sent from the loop.

    Given back, the connection stays pinned (the transaction's end returns it). Discarded — a deadline's
    cancel fired, the connection was lost, the client went away mid-answer — its state is unknown, so the
    transaction fails as ``execute_plan`` fails it then: nothing more runs in it, and its end discards the pin.
    """

    __slots__ = ("_pin", "_tx", "_back", "_opening")

    def __init__(self, pin: Borrowed, tx: Transaction, opening: SentControl | None = None) -> None:
        # not Borrowed's: the connection stays the pin's
        self.pool = pin.pool
        self.raw = pin.raw
        self.guard = pin.guard
        self._conn = None
        self._pin = pin
        self._tx = tx
        self._back = False  # given back by the statement (its answer read, or its error's mapping)
        #: The opening sent before the statement, its OKs not read yet: the connection is not the transaction's
        #: pin until :meth:`opened` (opened_under).
        self._opening = opening

    def opened(self) -> None:
        """The opening's OKs were read: the connection is the transaction's pin."""
        self._opening = None

    @property
    def released(self) -> bool:
        """Given back: a relay that failed then abandons nothing (an error packet leaves the transaction usable)."""
        return self._back or self._pin.released

    def release(self, *, discard: bool = False) -> None:
        if self._back:
            return  # once, as Borrowed.release
        self._back = True
        if discard and self._opening is not None:  # not pinned yet: the opening fails (drop_opening), not the transaction
            self._opening.timed_out("before the statement sent behind it was cut off")
        elif discard:
            pool = self.pool
            self._tx.fail(DataSourceUnavailableError(
                f"ddm: the transaction's connection to {pool.data_source} ({pool.endpoint.name}) was cut off "
                "mid-statement (a deadline, a lost connection or a client gone)", data_source=pool.data_source,
            ))  # fmt: skip

    def __repr__(self) -> str:
        return f"<PinnedLoan of {self._pin!r}>"
