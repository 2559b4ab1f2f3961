"""Publishing a workflow's configuration versions once each, and waiting until they are effective.

A migration and a cut-over both publish versions every application instance
must follow, to the configuration table the instances watch. Each step's
version is published at most once across crashes, with marks in the
workflow's own state table (docs/migration.md#the-migration-api):

* ``config:<step>`` (the version and the wall time it was committed) is
  recorded after the commit; a step with that mark is not published again, and
  a step whose text is already the newest row of the configuration table (the
  process died between the commit and the mark) is recorded, not published;
* ``effective:<step>`` is recorded once every instance registered next to the
  configuration table (``ddm_instances``, docs/operations.md#instance-registry)
  serves the version — an instance that died counts until its record expires;
  one still behind after ``fence_timeout_s`` fails the step, named. With no
  instance registered it is recorded ``fence_after_s`` + ``poll_s`` after the
  commit: by then every instance polling every ``poll_s`` seconds has taken the
  version, or has not confirmed its version for ``fence_after_s`` and refuses
  the writes the version governs (the router's fence).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from ddm_core.errors import SourceUnavailableError
from ddm_core.metadata.instances.fence import FenceProgress, await_version
from ddm_core.metadata.instances.stores import store_for
from ddm_core.metadata.sources.table import TableSource, checksum_of
from ddm_core.migrate.state import ScanProgress, WorkflowLog

__all__ = ["Publisher", "CONFIG_MARK", "EFFECTIVE_MARK"]

CONFIG_MARK, EFFECTIVE_MARK = "config:", "effective:"


class Publisher:
    """Publishes a workflow's versions to ``source``, with marks in ``log`` (in its current phase).

    Args:
        log: The workflow's state; marks are scan rows of its current phase.
        source: The configuration table the instances watch.
        fence_after_s / poll_s: The fence the versions carry and how often instances poll.
        echo: Called with a line of text per version published and per wait.
        fence_timeout_s: How long a step waits for registered instances to take its version.
        on_fence: Called with each look at the registry while waiting (progress).
    """

    def __init__(self, log: WorkflowLog[Any], source: TableSource, *, fence_after_s: float, poll_s: float,
                 echo: Callable[[str], None], sleep: Callable[[float], None] = time.sleep,
                 wall: Callable[[], float] = time.time, fence_timeout_s: float = 60.0,
                 on_fence: Callable[[FenceProgress], None] | None = None) -> None:  # fmt: skip
        self.log, self.source = log, source
        self.fence_after_s, self.poll_s = fence_after_s, poll_s
        self.echo, self.sleep, self.wall = echo, sleep, wall
        self.fence_timeout_s, self.on_fence = fence_timeout_s, on_fence
        self.instances = store_for(source)  # the instance registry next to the configuration table

    def mark(self, key: str) -> ScanProgress | None:
        return self.log.scans().get(key)

    def record(self, key: str, values: Sequence[Any], *, checksum: str = "") -> None:
        phase = self.log.state().phase
        assert phase is not None
        self.log.record_scan(key, values, 0, checksum, done=True, phase=phase)

    def newest(self) -> tuple[int, str | None]:
        """The newest version in the configuration table and its text (``0, None``: empty)."""
        try:
            fetched = self.source.fetch()
        except SourceUnavailableError:
            version = self.source.latest_version()  # unreachable raises again; an empty table is 0
            if version:
                raise
            return 0, None
        content = fetched.content if isinstance(fetched.content, str) else None
        return int(fetched.revision.split(":", 1)[0]), content

    def publish(self, step: str, text: str) -> int:
        """Publish ``text`` for ``step`` once; its version."""
        mark = self.mark(CONFIG_MARK + step)
        if mark is not None and mark.high_water:
            return int(mark.high_water[0])
        self.source.create_table()
        newest, body = self.newest()
        if body == text:  # published before a crash, not yet recorded
            version = newest
        else:
            version = self.source.publish(text, expect_version=newest)
        self.record(CONFIG_MARK + step, (version, self.wall()), checksum=checksum_of(text)[:32])
        self.echo(f"published version {version} ({step}) to {self.source.where}")
        return version

    def effective(self, step: str) -> None:
        """Wait until every registered instance took ``step``'s version (none registered: until every
        watcher took it or fences itself); record it.

        Raises:
            InstanceFenceTimeoutError: a registered instance is still behind after ``fence_timeout_s``.
        """
        if self.mark(EFFECTIVE_MARK + step) is not None:
            return
        mark = self.mark(CONFIG_MARK + step)
        assert mark is not None and mark.high_water is not None
        version = int(mark.high_water[0])
        live = self.instances.live() if self.instances is not None else []
        if self.instances is not None and live:
            self.echo(f"waiting until the {len(live)} registered instances took version {version} "
                      f"(at most {self.fence_timeout_s:g} s)")  # fmt: skip
            took = await_version(self.instances, version, timeout=self.fence_timeout_s, on_progress=self.on_fence,
                                 sleep=self.sleep)  # fmt: skip
            self.echo(f"every registered instance ({len(took)}) took version {version}")
        else:
            wait = float(mark.high_water[1]) + self.fence_after_s + self.poll_s - self.wall()
            if wait > 0:
                self.echo(f"waiting {wait:.1f} s until every instance took version {version} (none registered)")
                self.sleep(wait)
        self.record(EFFECTIVE_MARK + step, (version, self.wall()))

    def close(self) -> None:
        """Release the registry's connection."""
        if self.instances is not None:
            self.instances.close()

    def published_at(self, step: str) -> float | None:
        """The wall time ``step``'s version was committed (``None``: not published)."""
        mark = self.mark(CONFIG_MARK + step)
        return float(mark.high_water[1]) if mark is not None and mark.high_water else None
