"""The live table of a binlog step (``ddm cutover sync``, ``ddm migrate catch-up``): one row per direction and server.

Each row shows the changes applied per second, the lag — the seconds the
direction's last pass took to read its binlog to the end, the figure the
catch-up gate is about — the binlog position recorded last and the bytes
between it and the server's end; under the table, the last comparison and its
differences. The command hands in new figures as it goes (:meth:`LiveTable.show`);
rich redraws the table every second on stderr.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from rich.console import Console
from rich.live import Live
from rich.table import Table

from ddm_core.cli.display import size

__all__ = ["DirectionRow", "RateMeter", "LiveTable", "direction_table", "bytes_behind", "position_text",
           "check_text"]

#: Seconds between two redraws (and between two reads of the figures a command throttles to it).
REFRESH_S = 1.0


@dataclass(frozen=True, slots=True)
class DirectionRow:
    """One direction reading one server's binlog.

    Attributes:
        direction: ``forward``, ``reverse``, ``catch-up``.
        server: ``host:port`` of the binlog read.
        position: ``file:pos`` (or a GTID) recorded last (``None``: nothing yet).
        rate: Changes applied per second, over the last interval (``None``: not measured yet).
        lag_s: Seconds the direction's last pass took (``None``: no pass finished yet).
        behind: Binlog bytes between ``position`` and the server's end (``None``: unknown).
        applied: Changes applied by this process so far.
    """

    direction: str
    server: str
    position: str | None = None
    rate: float | None = None
    lag_s: float | None = None
    behind: int | None = None
    applied: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"direction": self.direction, "server": self.server, "position": self.position,
                "rows_per_s": self.rate, "lag_s": self.lag_s, "behind_bytes": self.behind, "applied": self.applied}


class RateMeter:
    """Changes per second from a running total, over the interval since the previous reading."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._last: tuple[float, int] | None = None
        self.rate: float | None = None

    def see(self, total: int) -> float | None:
        now = self.clock()
        if self._last is not None and now > self._last[0]:
            self.rate = max(0, total - self._last[1]) / (now - self._last[0])
        self._last = (now, total)
        return self.rate


def position_text(high_water: Sequence[Any] | None) -> str | None:
    """A recorded binlog position as ``file:pos`` (a GTID as it is)."""
    if not high_water:
        return None
    return f"{high_water[0]}:{high_water[1]}" if len(high_water) >= 2 else str(high_water[0])


def bytes_behind(recorded: Sequence[Any] | None, end: Sequence[Any] | None) -> int | None:
    """Bytes from ``recorded`` to ``end`` (``None``: either unknown, the server moved to another file, or the
    position was recorded on another server — a fail-over: ``(file, pos, gtid, server_id)`` positions)."""
    if not recorded or not end or str(recorded[0]) != str(end[0]):
        return None
    if len(recorded) >= 4 and len(end) >= 4 and recorded[3] != end[3]:  # same file name, another server's binlog
        return None
    return max(0, int(end[1]) - int(recorded[1]))


def check_text(finding: Mapping[str, Any] | None) -> str:
    """The last comparison in one line."""
    if not finding:
        return "last check: none yet"
    rows = finding.get("sampled", finding.get("rows", 0))
    line = f"last check: {int(rows):,} keys compared, {finding.get('differences', 0)} differ"
    if isinstance(finding.get("at"), (int, float)):
        line += f" ({time.strftime('%H:%M:%S', time.localtime(float(finding['at'])))})"
    return line


def direction_table(rows: Sequence[DirectionRow], check: Mapping[str, Any] | None, title: str) -> Table:
    """The table :class:`LiveTable` draws (also printed once when a step ends)."""
    table = Table(title=title, caption=check_text(check), caption_justify="left")
    for col, justify in (("direction", "left"), ("server", "left"), ("rows/s", "right"), ("lag s", "right"),
                         ("binlog position", "left"), ("behind", "right"), ("applied", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        table.add_row(r.direction, r.server, "-" if r.rate is None else f"{r.rate:,.0f}",
                      "-" if r.lag_s is None else f"{r.lag_s:.2f}", r.position or "-",
                      "-" if r.behind is None else size(r.behind), f"{r.applied:,}")
    return table


class LiveTable:
    """:func:`direction_table` of the latest figures, redrawn every second on ``console`` (stderr by default).

    ``enabled=False`` (``--no-progress``) shows nothing.
    """

    def __init__(self, title: str, *, enabled: bool = True, console: Console | None = None) -> None:
        self.title = title
        self.rows: tuple[DirectionRow, ...] = ()
        self.check: Mapping[str, Any] | None = None
        self._live = Live(get_renderable=self.render, console=console or Console(stderr=True),
                          refresh_per_second=1 / REFRESH_S, transient=False) if enabled else None

    def render(self) -> Table:
        return direction_table(self.rows, self.check, self.title)

    def show(self, rows: Sequence[DirectionRow], check: Mapping[str, Any] | None = None) -> None:
        """New figures (drawn at the next refresh)."""
        self.rows, self.check = tuple(rows), check

    def __enter__(self) -> "LiveTable":
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()  # draws the last figures once more
            self._live = None
