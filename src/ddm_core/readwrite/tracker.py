"""Read-your-writes: what this context wrote where, and which mode applies.

The context is a :class:`contextvars.ContextVar` per executor: a thread, an
asyncio task or a request handler that copies the context sees its own
writes, and nobody else's. Marks are replaced, never changed in place, so a
context copied before a write (a task started earlier) does not see it. A
caller whose sessions hop between threads and the event loop (the proxy)
carries each session's marks itself and puts them in place around each of its
statements (:meth:`WriteTracker.swap`).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Iterator, Mapping

from ddm_core.errors import ConfigError
from ddm_core.readwrite.gtid import Position

__all__ = ["Mode", "WriteMark", "WriteTracker", "Marks", "read_your_writes", "mode_override"]


class Mode(str, Enum):
    """How a read after a write in the same context is kept from a stale replica."""

    WINDOW = "window"  # the primary for write_window_ms after the write
    GTID = "gtid"  # a replica that applied the write's GTID, else the primary
    OFF = "off"  # no guarantee: reads are balanced as if nothing was written


_OVERRIDE: ContextVar[Mode | None] = ContextVar("ddm_read_your_writes_mode", default=None)


def mode_override() -> Mode | None:
    """The mode a ``with read_your_writes(...)`` block chose in this context, if any."""
    return _OVERRIDE.get()


def as_mode(value: str | Mode, what: str = "read_your_writes") -> Mode:
    try:
        return Mode(value.lower() if isinstance(value, str) else value)
    except ValueError:
        raise ConfigError(f"{what} must be window, gtid or off, not {value!r}", field=what, value=value) from None


@contextmanager
def read_your_writes(mode: str | Mode) -> Iterator[Mode]:
    """Use ``mode`` for the statements of this block (this context only), whatever the executor says.

    ``with read_your_writes("gtid"): ex.execute(...)``
    """
    token = _OVERRIDE.set(as_mode(mode))
    try:
        yield _OVERRIDE.get()  # type: ignore[misc]
    finally:
        _OVERRIDE.reset(token)


@dataclass(frozen=True, slots=True)
class WriteMark:
    """The last write of a context to one data source.

    Attributes:
        at: When it completed (the tracker's clock).
        gtid: Its GTID position on the primary; ``None`` when not read yet (a
            write in a transaction or over several units): the first read that
            needs it reads the primary's ``@@gtid_binlog_pos``, which is at least as far.
        text: The position as the server wrote it (what ``MASTER_GTID_WAIT`` is given).
    """

    at: float
    gtid: Position | None = None
    text: str | None = None


#: One context's last writes: data source → :class:`WriteMark` (``None``: none yet).
Marks = Mapping[str, WriteMark] | None


class WriteTracker:
    """Per context: data source → :class:`WriteMark`."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._marks: ContextVar[Mapping[str, WriteMark] | None] = ContextVar("ddm_writes", default=None)

    def wrote(self, data_source: str, gtid: Position | None = None, text: str | None = None) -> None:
        marks = dict(self._marks.get() or {})
        marks[data_source] = WriteMark(self._clock(), gtid, text)
        self._marks.set(marks)

    def resolved(self, data_source: str, mark: WriteMark, gtid: Position, text: str) -> WriteMark:
        """``mark`` with its position filled in (kept if it is still this context's last write there)."""
        done = WriteMark(mark.at, gtid, text)
        marks = dict(self._marks.get() or {})
        if marks.get(data_source) is mark:
            marks[data_source] = done
            self._marks.set(marks)
        return done

    def mark(self, data_source: str) -> WriteMark | None:
        marks = self._marks.get()
        return None if marks is None else marks.get(data_source)

    def swap(self, marks: Marks) -> Marks:
        """Make ``marks`` this context's and return the ones it had: a session that runs its statements on
        whichever thread is free puts its own in place before one and takes them back after it."""
        had = self._marks.get()
        self._marks.set(marks)
        return had

    def within(self, mark: WriteMark, window_s: float) -> bool:
        return self._clock() - mark.at < window_s
