"""Protocol logic written once, run by either runner: generators that yield the I/O they need.

A multi-step protocol (an XA commit, a transaction log write, a transaction's dual writes) is a
generator that ``yield``\\ s one step at a time and receives the step's answer back from ``yield``
(or, if the step failed, its exception raised at that ``yield``, where the protocol's own
``try``/``except`` reads it). It never does I/O. :func:`drive` answers the steps with blocking calls
(the thread runner), :func:`drive_async` with awaited ones (the asyncio runner): the decisions are
made once, in the generator, and each runner only says how to do one step
(docs/architecture.md#the-statement-engine-and-its-runners).

The XA protocol yields :class:`Sql`, :class:`Round` (several connections' statements at once:
:func:`together` drives sub-protocols in lockstep, a round of steps at a time) and :class:`Finish`;
a transaction's dual writes
(:mod:`ddm_core.execute.shadows`) yield :class:`RunUnit`, :class:`Borrow`, :class:`Control` and
:class:`Reset`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Generator, TypeVar, Union, cast

if TYPE_CHECKING:
    from ddm_core.route.plan import RouteUnit

__all__ = [
    "Sql", "Finish", "Round", "Outcome", "together", "Step", "Steps", "RunUnit", "Borrow", "Control", "Reset",
    "TxStep", "TxSteps", "drive",
    "drive_async",
]  # fmt: skip

T = TypeVar("T")
S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Sql:
    """Run ``sql`` on ``on`` and answer its row count, or its rows when ``fetch``.

    Attributes:
        on: Where it runs: a pinned connection (either runner's borrowed connection), or an object
            the runner knows how to reach (the XA transaction log: a pooled autocommit connection of
            its data source).
    """

    on: Any
    sql: str
    params: tuple[Any, ...] = ()
    fetch: bool = False


@dataclass(frozen=True, slots=True)
class Finish:
    """End the transaction as ``state`` (``committed``, ``rolled back``, ``in doubt``): its connections go back."""

    state: str


@dataclass(frozen=True, slots=True)
class Round:
    """Run every step of ``steps`` at once; answers one :class:`Outcome` per step, in order, once every one
    has its answer (a failure is an outcome, never raised). Steps on one connection run in their order on
    it (sent back to back where the runner can pipeline, docs/xa.md#commit); the others overlap them."""

    steps: tuple[Sql, ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one step of a :class:`Round`, or one protocol of :func:`together`, came to: a value or an error."""

    value: Any = None
    error: BaseException | None = None


Step = Union[Sql, Finish, Round]
#: A protocol: yields steps, is sent each step's answer, returns ``T``.
Steps = Generator[Step, Any, T]


def together(protocols: list[Generator[Step, Any, Any]]) -> Generator[Round, Any, list[Outcome]]:
    """Run ``protocols`` side by side: each one's next statement goes into one :class:`Round` with the others',
    so their round trips overlap; one :class:`Outcome` per protocol (its return value, or what it raised).

    A protocol that raised or returned is out of the later rounds; the others go on.
    """
    results = [Outcome() for _ in protocols]
    feed: dict[int, Outcome] = {i: Outcome() for i in range(len(protocols))}
    while feed:
        asked: dict[int, Sql] = {}
        for i, answer in feed.items():
            try:
                step = protocols[i].send(answer.value) if answer.error is None else protocols[i].throw(answer.error)
            except StopIteration as stop:
                results[i] = Outcome(stop.value)
            except Exception as exc:  # noqa: BLE001 - the caller reads each protocol's failure
                results[i] = Outcome(error=exc)
            else:
                if not isinstance(step, Sql):  # a round is one statement per connection, nothing else
                    raise TypeError(f"together() runs statements only, not {step!r}")
                asked[i] = step
        if not asked:
            break
        answers = yield Round(tuple(asked.values()))
        feed = dict(zip(asked, answers))
    return results


@dataclass(frozen=True, slots=True)
class RunUnit:
    """Run ``unit`` on the pinned connection ``on`` within ``deadline``, as a statement's unit runs there;
    answers nothing. Its failure is raised at the ``yield`` as the unit's error (a deadline that went off:
    :class:`~ddm_core.errors.QueryTimeoutError`; a cancel: the cancel itself)."""

    on: Any
    unit: RouteUnit
    style: str
    deadline: float | None


@dataclass(frozen=True, slots=True)
class Borrow:
    """Borrow a connection of ``data_source``'s primary (waiting until ``deadline`` at the most) and open a
    plain ``BEGIN`` on it; answers the borrowed connection. If the ``BEGIN`` fails (or is cancelled) the
    connection is discarded before the error is raised at the ``yield``."""

    data_source: str
    deadline: float | None


@dataclass(frozen=True, slots=True)
class Control:
    """``COMMIT`` or ``ROLLBACK`` (``command``) the transaction on the pinned connection ``on``, through its
    driver (each driver ends a transaction its own way); answers nothing, a failure is raised mapped."""

    on: Any
    command: str


@dataclass(frozen=True, slots=True)
class Reset:
    """Reset the session of the pinned connection ``on`` before it goes back; answers whether it may be
    reused (``False``, logged, when the reset failed or the driver cannot reset in place)."""

    on: Any


TxStep = Union[RunUnit, Borrow, Control, Reset]
#: A protocol over a transaction's connections: yields :data:`TxStep`, returns ``T``.
TxSteps = Generator[TxStep, Any, T]


def drive(steps: Generator[S, Any, T], answer: Callable[[S], Any]) -> T:
    """Run ``steps`` to its end with blocking ``answer(step)`` calls; its return value.

    An exception from ``answer`` is raised inside the protocol at its ``yield``; what the protocol
    does not catch leaves here.
    """
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as stop:
            return cast(T, stop.value)
        try:
            value, error = answer(step), None
        except BaseException as exc:  # noqa: B036 - delivered to the protocol, which decides
            value, error = None, exc


async def drive_async(steps: Generator[S, Any, T], answer: Callable[[S], Awaitable[Any]]) -> T:
    """:func:`drive` with awaited answers (a cancel while one is awaited is raised in the protocol too)."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as stop:
            return cast(T, stop.value)
        try:
            value, error = await answer(step), None
        except BaseException as exc:  # noqa: B036 - delivered to the protocol, which decides
            value, error = None, exc
