"""What the long-running commands share on screen: a console, a spinner on stderr, sizes and durations."""

from __future__ import annotations

from typing import Any

from rich.console import Console

__all__ = ["console", "spinner", "size", "duration"]


def console() -> Console:
    return Console(highlight=False, soft_wrap=False, width=120)


def spinner(console: Console, enabled: bool) -> Any:
    """A spinner on stderr for steps slower than a second (``--no-progress``: nothing)."""

    class Spinner:
        def __init__(self) -> None:
            self._status: Any = None

        def __enter__(self) -> "Spinner":
            if enabled:
                self._status = Console(stderr=True).status("starting")
                self._status.start()
            return self

        def update(self, text: str) -> None:
            if self._status is not None:
                self._status.update(text)

        def __exit__(self, *exc: object) -> None:
            if self._status is not None:
                self._status.stop()

    return Spinner()


def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{n} B"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown (no rows counted or no rate)"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
