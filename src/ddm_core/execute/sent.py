"""A one-unit statement sent without waiting: the answer is read once its socket is readable.

:meth:`Executor.send_single` borrows an idle connection, arms the deadline and
sends; an event loop waits for :attr:`SentUnit.fileno` to become readable and
calls :meth:`SentUnit.finish`, which reads the answer and returns the same
:class:`Result` ``execute_plan`` would (docs/proxy.md#how-it-is-built). No
thread waits for the data source meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:
    from ddm_core.execute.pools import Borrowed, EndpointPool
    from ddm_core.execute.result import Result
    from ddm_core.execute.statement import Statement
    from ddm_core.execute.watchdog import Guard
    from ddm_core.route.plan import RoutePlan, RouteUnit

__all__ = ["SentUnit", "Finisher"]


class Finisher(Protocol):
    """What reads a sent unit's answer (the thread runner)."""

    def finish_sent(self, sent: SentUnit) -> Result: ...

    def finish_relayed(self, sent: SentUnit, rows: int, status: int) -> None: ...

    def fail_relayed(self, sent: SentUnit, error: BaseException) -> NoReturn: ...


@dataclass(slots=True, eq=False)
class SentUnit:
    """A sent unit whose answer is not read yet; :meth:`finish` or :meth:`abandon` it exactly once."""

    runner: Finisher
    statement: Statement
    unit: RouteUnit
    pool: EndpointPool
    borrowed: Borrowed
    cursor: Any
    guard: Guard | None
    sql: str
    fileno: int
    #: ``time.monotonic()`` by which the answer must have begun (``None``: no bound): an event loop
    #: waiting for ``fileno`` calls :meth:`finish` by then anyway, which fails in time.
    answer_by: float | None

    @property
    def plan(self) -> RoutePlan:
        return self.statement.plan

    @property
    def started(self) -> float:
        return self.statement.started

    @property
    def deadline(self) -> float | None:
        return self.statement.deadline

    def finish(self) -> Result:
        """Read the answer (blocking only until its last packet is in) and give the connection back."""
        return self.runner.finish_sent(self)

    def relayed(self, rows: int, status: int) -> None:
        """The answer was passed on raw (docs/proxy.md#relayed-results): ``rows`` rows, ending with the
        server's ``status`` flags. The connection goes back and the statement is observed as if read.

        Raises:
            QueryTimeoutError: the deadline's cancel fired meanwhile (the rows may have been cut short).
        """
        self.runner.finish_relayed(self, rows, status)

    def relay_failed(self, error: BaseException) -> NoReturn:
        """A relayed answer ended in ``error`` (the driver's exception for its error packet, or a lost
        connection): mapped and raised as :meth:`finish` would, the connection given back or discarded."""
        self.runner.fail_relayed(self, error)

    def abandon(self) -> None:
        """The caller gave up (a client gone, a shutdown): the connection, in an unknown state, is discarded."""
        if self.guard is not None:
            self.guard.disarm()
        self.borrowed.release(discard=True)
