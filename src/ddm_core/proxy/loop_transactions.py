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

from typing import Any, Callable

from ddm_core.errors import DataSourceUnavailableError, DdmError
from ddm_core.execute import Executor, Transaction
from ddm_core.execute.pools import Borrowed
from ddm_core.execute.sent import SentUnit
from ddm_core.execute.session_state import check_pinned
from ddm_core.route.plan import RouteKind, RoutePlan, RouteUnit

__all__ = ["reads_on_pins", "on_pin", "pins_for", "send_on_pin", "ends_quietly", "PinnedLoan"]


def ends_quietly(tx: Transaction) -> bool:
    """Does ending ``tx`` send nothing — a local transaction, active, that pinned no connection yet? (BEGIN,
    COMMIT and ROLLBACK are then answered on the loop.)"""
    return reads_on_pins(tx) and not tx.data_sources and not tx.shadow_data_sources


def reads_on_pins(tx: Transaction) -> bool:
    """May reads of ``tx`` go from the loop at all — a local transaction that has not failed?"""
    return type(tx) is Transaction and tx.active


def on_pin(tx: Transaction, plan: RoutePlan) -> bool:
    """May ``plan`` go from the loop on ``tx``'s pin — a plain one-unit read on a data source it pinned already?"""
    return len(plan.units) == 1 and plan.kind is RouteKind.SINGLE and _read_on_pins(tx, plan)


def pins_for(tx: Transaction, plan: RoutePlan) -> dict[str, Borrowed] | None:
    """The pins a multi-unit read goes on from the loop (``Executor.send_many``'s ``on``), one loan per data
    source; ``None``: the worker path runs it — it is not a plain read, or one of its data sources is not
    pinned yet (docs/proxy.md#multi-unit-reads-on-the-loop)."""
    if len(plan.units) < 2 or not _read_on_pins(tx, plan):
        return None
    return {source: PinnedLoan(tx.connection(source), tx) for source in plan.data_sources}


def _read_on_pins(tx: Transaction, plan: RoutePlan) -> bool:
    """A plain read, in a transaction that may read from the loop, on data sources it pinned already?"""
    if (not reads_on_pins(tx) or plan.statement != "select" or plan.is_write or plan.dual
            or plan.cross_node is not None):  # fmt: skip
        return False
    pinned = tx.data_sources
    if any(unit.data_source not in pinned for unit in plan.units):
        return False  # its first statement there opens the transaction on it: the worker path
    try:
        return not check_pinned(plan)
    except DdmError:
        return False  # refused: the worker path says why, in its words


def send_on_pin(executor: Executor, tx: Transaction, plan: RoutePlan, style: str,
                send: Callable[[Any, RouteUnit], None] | None) -> SentUnit | None:  # fmt: skip
    """``plan`` (:func:`on_pin` said yes) sent on ``tx``'s pin; ``None``: not sent, the worker path runs it."""
    pin = tx.connection(plan.units[0].data_source)  # pinned already (on_pin): no round trip
    return executor.send_single(plan, caller_style=style, send=send, on=PinnedLoan(pin, tx))


class PinnedLoan(Borrowed):
    """A transaction's pin lent to one statement sent from the loop.

    Given back, the connection stays pinned (the transaction's end returns it). Discarded — a deadline's
    cancel fired, the connection was lost, the client went away mid-answer — its state is unknown, so the
    transaction fails as ``execute_plan`` fails it then: nothing more runs in it, and its end discards the pin.
    """

    __slots__ = ("_pin", "_tx", "_back")

    def __init__(self, pin: Borrowed, tx: Transaction) -> None:  # not Borrowed's: the connection stays the pin's
        self.pool = pin.pool
        self.raw = pin.raw
        self.guard = pin.guard
        self._conn = None
        self._pin = pin
        self._tx = tx
        self._back = False  # given back by the statement (its answer read, or its error's mapping)

    @property
    def released(self) -> bool:
        """Given back: a relay that failed then abandons nothing (an error packet leaves the transaction usable)."""
        return self._back or self._pin.released

    def release(self, *, discard: bool = False) -> None:
        if self._back:
            return  # once, as Borrowed.release
        self._back = True
        if discard:
            pool = self.pool
            self._tx.fail(DataSourceUnavailableError(
                f"ddm: the transaction's connection to {pool.data_source} ({pool.endpoint.name}) was cut off "
                "mid-statement (a deadline, a lost connection or a client gone)", data_source=pool.data_source,
            ))  # fmt: skip

    def __repr__(self) -> str:
        return f"<PinnedLoan of {self._pin!r}>"
