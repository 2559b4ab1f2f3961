"""What the long-running commands share on screen: a console, a spinner on stderr, sizes and durations."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from ddm_core.metadata.instances.fence import FenceProgress

__all__ = ["console", "spinner", "size", "duration", "FenceBar"]


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



class FenceBar:
    """A rich bar on stderr while a step waits for registered instances: how many took the version, the
    laggards named; called with each look (``enabled=False``: nothing)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: Any = None
        self._task: Any = None

    def __call__(self, progress: FenceProgress) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("version {task.fields[version]}: instances"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[waiting]}"), TimeElapsedColumn(),
                                 console=Console(stderr=True))  # fmt: skip
            self._task = self._bar.add_task("fence", total=max(len(progress.live), 1), version=progress.version,
                                            waiting="")  # fmt: skip
            self._bar.start()
        self._bar.update(self._task, completed=progress.took, total=max(len(progress.live), 1),
                         version=progress.version, waiting=_waiting(progress))  # fmt: skip
        if not progress.laggards:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _waiting(progress: FenceProgress) -> str:
    named = ", ".join(f"{r.host} pid {r.pid} (version {r.version if r.version is not None else '?'})"
                      for r in progress.laggards[:3])  # fmt: skip
    more = f" and {len(progress.laggards) - 3} more" if len(progress.laggards) > 3 else ""
    return f"waiting for {named}{more}" if named else "all took it"
