"""A one-unit statement sent without waiting: the answer is read once its socket is readable.

:meth:`Executor.send_single` borrows an idle connection, arms the deadline and
sends; an event loop waits for :attr:`SentUnit.fileno` to become readable and
calls :meth:`SentUnit.finish`, which reads the answer and returns the same
:class:`Result` ``execute_plan`` would (docs/proxy.md#how-it-is-built). No
thread waits for the data source meanwhile.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from ddm_core.errors import DataSourceUnavailableError
from ddm_core.execute.driver_errors import map_driver_error

if TYPE_CHECKING:
    from ddm_core.execute.pools import Borrowed, EndpointPool
    from ddm_core.execute.result import Result
    from ddm_core.execute.statement import Statement
    from ddm_core.execute.watchdog import Guard
    from ddm_core.route.plan import RoutePlan, RouteUnit

__all__ = ["SentUnit", "Finisher", "SentControl", "send_control"]


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


@dataclass(slots=True, eq=False)
class SentControl:
    """Transaction control sent on a connection without waiting for its OKs (a transaction's opening, its
    ``COMMIT`` or ``ROLLBACK``, from an event loop: docs/proxy.md#transactions-on-the-loop). Once ``fileno`` is
    readable, :meth:`receive` reads the OKs; :attr:`error` is then what the blocking call would have raised."""

    data_source: str
    pinned: Borrowed
    count: int  # OKs to read
    sql: str  # what an error names: BEGIN, COMMIT or ROLLBACK, as the worker path names it
    fileno: int
    #: ``time.monotonic()`` by which the OKs must have begun (``None``: no bound).
    answer_by: float | None
    #: The mapped error of the send or of an OK (``None``: all went well).
    error: BaseException | None = None
    received: bool = False  # its OKs were read (or their read failed)
    #: A statement was sent behind the OKs (docs/proxy.md#transactions-on-the-loop): they are read to their
    #: last byte and no further (``Driver.receive_oks``'s ``exact``), its answer left on the socket.
    followed: bool = False

    def receive(self) -> None:
        """Read the OKs (blocking only until they are in); a failure is kept in :attr:`error`."""
        if self.error is not None:
            return
        self.received = True
        try:
            self.pinned.pool.driver.receive_oks(self.pinned.raw, self.count, self.followed)
        except Exception as exc:  # noqa: BLE001  # kept, mapped, for the caller to raise in turn
            self.error = self._mapped(exc)

    def timed_out(self, when: str = "in time") -> None:
        """No answer began by :attr:`answer_by` (or ``when`` says by when): the connection is in doubt (the
        blocking read's timeout). The first failure stands."""
        if self.error is not None:
            return
        pool = self.pinned.pool
        self.error = DataSourceUnavailableError(
            f"ddm: {pool.data_source} ({pool.endpoint.name}) did not answer {self.sql} {when}",
            data_source=pool.data_source, endpoint=pool.endpoint.name, sql=self.sql,
        )  # fmt: skip

    def _mapped(self, exc: Exception) -> BaseException:
        pool = self.pinned.pool
        mapped = map_driver_error(exc, data_source=pool.data_source, endpoint=pool.endpoint.name, sql=self.sql)
        if mapped is not exc:
            mapped.__cause__ = exc
        return mapped


def send_control(data_source: str, pinned: Borrowed, commands: list[str]) -> SentControl:
    """``commands`` sent on ``pinned`` one after another without waiting (a send that fails is kept in
    :attr:`SentControl.error`: nothing to wait for then)."""
    driver = pinned.pool.driver
    bound = driver.socket_timeout(pinned.pool.endpoint)
    sent = SentControl(data_source, pinned, len(commands), commands[-1], -1,
                       None if bound is None else time.monotonic() + bound)  # fmt: skip
    try:
        driver.send_commands(pinned.raw, commands)
        sent.fileno = driver.fileno(pinned.raw)
    except Exception as exc:  # noqa: BLE001  # as a blocking call's failure: mapped, raised by the caller
        sent.error = sent._mapped(exc)
    return sent
