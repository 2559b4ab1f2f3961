"""Protocol logic written once, run by either runner: generators that yield the I/O they need.

A multi-step protocol (an XA commit, a transaction log write) is a generator that ``yield``\\ s one
:class:`Sql` or :class:`Finish` step at a time and receives the step's answer back from ``yield``
(or, if the step failed, its exception raised at that ``yield``, where the protocol's own
``try``/``except`` reads it). It never does I/O. :func:`drive` answers the steps with blocking calls
(the thread runner), :func:`drive_async` with awaited ones (the asyncio runner): the decisions are
made once, in the generator, and each runner only says how to send one statement
(docs/architecture.md#the-statement-engine-and-its-runners).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generator, TypeVar, Union, cast

__all__ = ["Sql", "Finish", "Step", "Steps", "drive", "drive_async"]

T = TypeVar("T")


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


Step = Union[Sql, Finish]
#: A protocol: yields steps, is sent each step's answer, returns ``T``.
Steps = Generator[Step, Any, T]


def drive(steps: Steps[T], answer: Callable[[Step], Any]) -> T:
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


async def drive_async(steps: Steps[T], answer: Callable[[Step], Awaitable[Any]]) -> T:
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
