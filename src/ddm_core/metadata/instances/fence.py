"""Waiting until every registered instance serves a version: the fence that counts instances.

A workflow step that needs every writer on a new version (a migration's
cutover, a cut-over's bucket moves) publishes it, then calls
:func:`await_version`: it reads the live records until none is behind, or
raises :class:`~ddm_core.errors.InstanceFenceTimeoutError` naming the
instances still behind. An instance that died stops counting once its record
expires (its lease's TTL), so a dead instance delays the step by at most its TTL.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

from ddm_core.errors import InstanceFenceTimeoutError
from ddm_core.metadata.instances.record import InstanceRecord, InstanceStore

__all__ = ["FenceProgress", "await_version", "behind"]


def behind(records: Sequence[InstanceRecord], version: int) -> list[InstanceRecord]:
    """The records serving a version lower than ``version`` (or none they can name)."""
    return [r for r in records if r.version is None or r.version < version]


@dataclass(frozen=True, slots=True)
class FenceProgress:
    """One look at the registry while waiting.

    Attributes:
        version: The version waited for.
        live: Every live record.
        laggards: Those still behind.
        waited_s: Seconds waited so far.
    """

    version: int
    live: tuple[InstanceRecord, ...]
    laggards: tuple[InstanceRecord, ...]
    waited_s: float

    @property
    def took(self) -> int:
        return len(self.live) - len(self.laggards)


def _named(record: InstanceRecord) -> str:
    serving = "an unknown version" if record.version is None else f"version {record.version}"
    return f"{record.where} ({serving}, heartbeat {record.heartbeat_age_s:.1f} s ago, id {record.instance_id[:8]})"


def await_version(store: InstanceStore, version: int, *, timeout: float, interval: float = 0.2,
                  on_progress: Callable[[FenceProgress], None] | None = None,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> list[InstanceRecord]:  # fmt: skip
    """Wait until every live record serves ``version`` or later; the live records then.

    Raises:
        InstanceFenceTimeoutError: some instance is still behind after ``timeout`` seconds (each is named).
        SourceUnavailableError: the store cannot be read.
    """
    started = clock()
    while True:
        live = store.live()
        laggards = behind(live, version)
        waited = clock() - started
        if on_progress is not None:
            on_progress(FenceProgress(version, tuple(live), tuple(laggards), waited))
        if not laggards:
            return live
        if waited >= timeout:
            names = [_named(r) for r in laggards]
            raise InstanceFenceTimeoutError(
                f"{len(laggards)} of {len(live)} registered instances did not take configuration version {version} "
                f"within {timeout:g} s ({store.where}): " + "; ".join(names)
                + ". Make them take it (are they following the configuration center?) or stop them: a stopped "
                "instance's record expires with its lease; then run the step again",
                version=version, laggards=names,
            )  # fmt: skip
        sleep(min(interval, max(0.0, timeout - waited)))
