"""A multi-unit read sent without waiting: its answers are read off the sockets by an event loop.

:meth:`Executor.send_many` sends every unit of a read at once — in autocommit each on an idle pooled
connection of its own, in a transaction the units of a data source one after another on its pinned
connection (a server answers its commands in order) — arms the deadline and returns a :class:`SentMany`.
The caller (the proxy's loop, proxy/relay_many.py) reads each :class:`SentPart`'s answer when its socket
is readable, then settles the statement here: :meth:`SentMany.relayed` (the rows were passed on raw),
:meth:`SentMany.read` (decoded rows, merged by the engine) or :meth:`SentMany.abandon`. Guards disarmed,
connections given back (discarded when in doubt), errors mapped and ranked as the worker path maps and
ranks them (docs/proxy.md#multi-unit-reads-on-the-loop).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any, Callable, Collection, Sequence, cast

from ddm_core.execute.pools import discard_on
from ddm_core.execute.result import Result, UnitResult
from ddm_core.execute.statement import timeout_error, unit_error

if TYPE_CHECKING:
    from ddm_core.execute.engine import Engine
    from ddm_core.execute.pools import Borrowed, EndpointPool
    from ddm_core.execute.shared import Slots
    from ddm_core.execute.statement import Statement
    from ddm_core.execute.watchdog import Guard
    from ddm_core.route.plan import RoutePlan, RouteUnit

__all__ = ["SentPart", "SentMany"]

_INDEX = attrgetter("index")
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
_READ = frozenset({UnitResult})


def _all_read(answers: Sequence[object]) -> bool:
    """Every unit answered with rows (the usual), checked at C speed: no frame per answer."""
    return _READ.issuperset(map(type, answers))


@dataclass(slots=True, eq=False)
class SentPart:
    """One sent unit of a :class:`SentMany`: its answer comes on ``borrowed``'s socket ``fileno``."""

    index: int  # the unit's place in the plan (the merge's order)
    lane: int  # the connection it went on: parts of one lane share it and are answered in turn
    unit: RouteUnit
    pool: EndpointPool
    borrowed: Borrowed
    sql: str
    fileno: int


@dataclass(slots=True, eq=False)
class SentMany:
    """A sent multi-unit read whose answers are not read yet; settle it exactly once (module docstring).

    ``parts`` are in lane order, a lane's in the order sent: the order their answers are read, and the
    order the worker path ranks the lanes' errors in.
    """

    engine: Engine
    describe: Callable[[str], Any]  # a data source's pool, asked for column collations (the merge's)
    statement: Statement
    parts: list[SentPart]
    guards: list[Guard | None]  # per lane, armed with the deadline (None: no deadline)
    #: ``time.monotonic()`` by which each answer must have begun (``None``: no bound).
    answer_by: float | None
    #: The full-route slot a FULL-kind read holds until it is settled (``None``: none).
    slot: Slots | None = None
    #: Lanes whose deadline's cancel fired on an earlier answer than the one read now (:meth:`cancel_again`).
    fired: set[int] = field(default_factory=set)

    @property
    def plan(self) -> RoutePlan:
        return self.statement.plan

    def relayed(self, rows: int, statuses: Sequence[int], errors: Sequence[BaseException | None],
                lost: Collection[int] = ()) -> None:  # fmt: skip
        """The answers were passed on raw: ``rows`` rows, ``statuses[i]`` the closing flags of part ``i`` when
        it ended well, ``errors[i]`` what part ``i`` failed with (``None``: nothing), ``lost`` the lanes whose
        connection is in doubt (an answer not read to its end). Connections go back; the statement is
        observed as a read of ``rows`` rows.

        Raises:
            DdmError: the error the worker path would raise for these outcomes (a deadline's cancel included).
        """
        if lost or any(errors) or not self._settled_quietly(statuses):
            self._statuses(statuses, errors)
            self._settle(errors, lost)
        stmt = self.statement
        self.engine.observed_rows(stmt.plan, stmt.started, rows)  # a Result only for someone who hears of it

    def read(self, answers: Sequence[UnitResult | BaseException | None], lost: Collection[int] = ()) -> Result:
        """The answers were read into rows (``None``: not read, its lane failed before it; ``lost`` as
        :meth:`relayed`'s): connections back, the :class:`Result` the worker path gives — rows concatenated or
        merged by the engine with the columns' collations.

        Raises:
            DdmError: as :meth:`relayed`.
        """
        every = _all_read(answers)
        if lost or not every or not self._settled_quietly(None):
            self._settle([None] * len(answers) if every else [a if isinstance(a, BaseException) else None
                                                              for a in answers], lost)  # fmt: skip
        engine, plan = self.engine, self.plan
        # in plan order (the merge's ties): the parts' indexes sorted at C speed, no frame per part
        by_index = sorted(zip(map(_INDEX, self.parts), answers), key=_FIRST)
        ordered = list(map(_SECOND, by_index)) if every else [a for _, a in by_index if isinstance(a, UnitResult)]
        try:
            result = engine.rows_result(plan, ordered, True, self.describe)
        except BaseException as exc:
            engine.failed(plan, self.statement.started, exc)
            raise
        return engine.observed(plan, self.statement.started, result)

    def collations_pending(self, answers: Sequence[UnitResult | BaseException | None]) -> bool:
        """Would :meth:`read` ask a data source for column collations (I/O an event loop leaves to a worker)?"""
        read = cast("list[UnitResult]", list(answers)) if _all_read(answers) else [
            a for a in answers if isinstance(a, UnitResult)]  # fmt: skip
        return self.engine.collations_pending(self.plan, read)

    def cancel_again(self, lane: int) -> None:
        """Before reading the next answer of ``lane``: if its deadline's cancel fired (on an earlier answer), the
        unit now running there — sent behind it, begun when the cancelled one ended — is cancelled too (the
        worker path would not have sent it past the deadline)."""
        guard = self.guards[lane]
        if guard is not None and guard.fired:
            self.fired.add(lane)
            guard.arm(time.monotonic())  # due at once: the watchdog cancels what the connection runs now

    def abandon(self) -> None:
        """The caller gave up mid-answer (a client gone, a shutdown): every connection, in an unknown state, is
        discarded (a transaction's pin fails its transaction, as a cut-off statement does on one unit)."""
        for guard in self.guards:
            if guard is not None:
                guard.disarm()
        for part in self._lane_heads():
            part.borrowed.release(discard=True)
        self._free_slot()

    def _free_slot(self) -> None:
        slot, self.slot = self.slot, None
        if slot is not None:
            slot.give()

    # -- settling ------------------------------------------------------------------------------

    def _statuses(self, statuses: Sequence[int], errors: Sequence[BaseException | None]) -> None:
        """Each connection knows its state again: the closing flags of its lane's last answer."""
        for part, status, error in zip(self.parts, statuses, errors):
            if error is None:
                part.pool.driver.relayed(part.borrowed.raw, status)

    def _settled_quietly(self, statuses: Sequence[int] | None) -> bool:
        """Every answer taken whole and no cancel fired (the usual): guards disarmed, each connection's state
        its lane's last closing flags (``statuses``, relayed answers; ``None``: the driver read them), every
        connection back as it is, the slot free. ``False``: a cancel fired, nothing given back (the guards stay
        disarmed: :meth:`_settle` disarms again and hears the same). :meth:`_statuses` and :meth:`_settle`'s
        quiet branch together."""
        quiet = not self.fired
        for guard in self.guards:
            if guard is not None and guard.disarm():
                quiet = False
        if not quiet:
            return False
        if statuses is not None:
            for part, status in zip(self.parts, statuses):
                part.pool.driver.relayed(part.borrowed.raw, status)
        for part in self._lane_heads():
            part.borrowed.release()
        self._free_slot()
        return True

    def _lane_heads(self) -> list[SentPart]:
        if len(self.parts) == len(self.guards):  # one part a lane (every lane has one at least): each is a head
            return self.parts
        heads: dict[int, SentPart] = {}
        for part in self.parts:
            heads.setdefault(part.lane, part)
        return list(heads.values())

    def _settle(self, errors: Sequence[BaseException | None], lost: Collection[int]) -> None:
        """Disarm, give every connection back, raise what the worker path raises for these outcomes."""
        fired = [(guard.disarm() if guard is not None else False) or lane in self.fired
                 for lane, guard in enumerate(self.guards)]  # fmt: skip
        if not (lost or any(fired) or any(errors)):  # all went well (the usual): every connection back as it is
            for part in self._lane_heads():
                part.borrowed.release()
            self._free_slot()
            return
        discard = [f or lane in lost for lane, f in enumerate(fired)]
        lane_errors: list[BaseException | None] = [None] * len(self.guards)
        for part, error in zip(self.parts, errors):
            lane = part.lane
            if error is not None and discard_on(error):
                discard[lane] = True
            if lane_errors[lane] is not None:
                continue  # the worker path stops a lane at its first error
            endpoint = part.pool.endpoint.name
            if error is not None:
                mapped = unit_error(error, part.unit, endpoint, fired[lane], part.sql)
                if mapped is not error:
                    mapped.__cause__ = error
                lane_errors[lane] = mapped
            elif fired[lane]:  # the cancel may have cut its rows short (a killed SLEEP even "succeeds")
                lane_errors[lane] = timeout_error(part.unit, endpoint)
        for part in self._lane_heads():
            part.borrowed.release(discard=discard[part.lane])
        self._free_slot()
        stmt = self.statement
        error, _ = self.engine.failure(stmt, lane_errors)
        if error is not None:
            self.engine.failed(stmt.plan, stmt.started, error)
            raise error

