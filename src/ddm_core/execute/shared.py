"""What the executor and its transactions share: per-call defaults, lanes, the bound transaction.

One home for the pieces both :mod:`ddm_core.execute.executor` and
:mod:`ddm_core.execute.transaction` use, so neither imports the other's
private names.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from typing import Any, Callable, Hashable, NamedTuple

from ddm_core.errors import DdmError, ExecutionError
from ddm_core.execute.pools import Borrowed, EndpointPool
from ddm_core.route.plan import RouteKind, RouteUnit
from ddm_core.route.text.placeholders import translate

__all__ = ["DEFAULT", "Lane", "style_of", "DualWriteKey", "dual_table", "Throttle", "Slots"]


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


#: "Use the executor's setting" for per-call options.
DEFAULT: Any = _Default()


@dataclass(slots=True)
class Lane:
    """Units that run one after another on one connection (one unit outside transactions).

    Attributes:
        pool: Where the connection comes from.
        items: ``(unit index in the plan, unit)`` pairs, in order.
        pinned: A transaction's connection to run them on (``None``: borrow per unit).
    """

    pool: EndpointPool
    items: list[tuple[int, RouteUnit]]
    pinned: Borrowed | None = None


def one_pinned_unit(plan: Any, lanes: list[Any]) -> bool:
    """A transaction's statement is one unit on one pinned lane (not a FULL route): it runs as a single
    unit does outside transactions, without lanes' fan-out and assembly (both runners)."""
    return len(lanes) == 1 and len(lanes[0].items) == 1 and plan.kind is not RouteKind.FULL


def style_of(sql: str) -> str:
    """The paramstyle family the caller wrote ``sql`` in: ``"qmark"`` for ``?``, else ``"format"``."""
    if "?" not in sql:
        return "format"  # no ``?`` at all: nothing to translate (and no refusal to raise and catch)
    try:
        return translate(sql).style  # cached: the router translated the same text
    except DdmError:
        return "format"


class DualWriteKey(NamedTuple):
    """What a migration's dual writes are counted under (``Executor.dual_writes()``)."""

    data_source: str  # where the unit wrote: the new location
    table: str  # the logic table


def dual_table(plan: Any, unit: RouteUnit) -> str:
    """The logic table a dual-write unit is counted under: its own first, else the plan's."""
    if unit.tables:
        return unit.tables[0][0]
    return plan.tables[0].logic_table if plan.tables else "(none)"


class Slots:
    """A counting semaphore of ``size`` slots whose take and give are single C calls.

    ``threading.BoundedSemaphore`` is pure Python: a take and a give cost ~130 interpreted opcodes
    (its condition, its lock, its notify), which every full-route read sent from the proxy's event
    loop paid. Here the free slots are tokens in a :class:`queue.SimpleQueue` (C, thread-safe): a
    take pops one (waiting at most ``timeout``), a give pushes one back. A give beyond ``size``
    raises, as a bounded semaphore's does.
    """

    __slots__ = ("size", "_free")

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: SimpleQueue[None] = SimpleQueue()
        for _ in range(size):
            self._free.put(None)

    def try_take(self) -> bool:
        """Take a slot if one is free now (never waits)."""
        try:
            self._free.get_nowait()
        except Empty:
            return False
        return True

    def take(self, timeout: float | None) -> bool:
        """Take a slot, waiting at most ``timeout`` seconds (``None``: as long as it takes); ``False``: none came free."""
        try:
            self._free.get(True, None if timeout is None else max(0.0, timeout))
        except Empty:
            return False
        return True

    def give(self) -> None:
        """Give a taken slot back.

        Raises:
            ExecutionError: every slot is free already (given back more often than taken).
        """
        free = self._free
        if free.qsize() >= self.size:
            raise ExecutionError(f"a slot was given back more often than taken (all {self.size} free)")
        free.put(None)

    def free(self) -> int:
        """Slots free right now."""
        return self._free.qsize()


class Throttle:
    """Lets one message per key through every ``interval`` seconds, counting the ones held back.

    For warnings that a sick data source would otherwise repeat on every
    statement (a dual write to a server that is down).
    """

    def __init__(self, interval: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._held: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def allow(self, key: Hashable) -> int | None:
        """``None``: hold this one back; else how many were held back since the last one let through."""
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                self._held[key] = self._held.get(key, 0) + 1
                return None
            self._last[key] = now
            return self._held.pop(key, 0)
