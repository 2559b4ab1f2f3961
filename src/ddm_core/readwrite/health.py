"""One replica's health: its state, its read weight now, and how it comes back.

An explicit state machine (``TRANSITIONS``): each monitor check, or a read
that lost the replica, is an :class:`Observation`; the table says which state
follows. Out states (lagging, stopped, unreachable) have weight 0. A replica
that is healthy again does not get its whole weight back at once: it starts at
``recovery_step_percent`` and gains that much every ``recovery_interval_ms``
(10 % every 30 s by default: a replica that just caught up, with cold caches,
is not handed a full share at once; docs/readwrite.md#lag-and-health).
Nothing but a successful check moves a replica out of an out state.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import Enum
from typing import Mapping

from ddm_core.metadata.model import ReadWriteSettings
from ddm_core.readwrite.gtid import Position, merged

__all__ = ["ReplicaState", "Observation", "TRANSITIONS", "ReplicaHealth", "Check"]


class ReplicaState(str, Enum):
    UNKNOWN = "unknown"  # not checked yet (or not checkable): its configured weight
    HEALTHY = "healthy"
    RECOVERING = "recovering"  # healthy again, weight coming back step by step
    LAGGING = "lagging"  # lag above max_lag_ms
    STOPPED = "stopped"  # replication not running, or its lag unknown (NULL)
    UNREACHABLE = "unreachable"  # a check failed or timed out, or a read lost the connection

    @property
    def out(self) -> bool:
        return self in _OUT


_OUT = frozenset({ReplicaState.LAGGING, ReplicaState.STOPPED, ReplicaState.UNREACHABLE})


class Observation(str, Enum):
    CAUGHT_UP = "caught up"  # replicating, lag at most max_lag_ms
    LAGGING = "lagging"
    STOPPED = "stopped"
    FAILED = "failed"  # check failed / timed out, or a read on it lost its connection


S, O = ReplicaState, Observation
#: (state, observation) → next state. RECOVERING + CAUGHT_UP stays RECOVERING until the weight is whole.
TRANSITIONS: Mapping[tuple[ReplicaState, Observation], ReplicaState] = {
    **{(s, O.LAGGING): S.LAGGING for s in S},
    **{(s, O.STOPPED): S.STOPPED for s in S},
    **{(s, O.FAILED): S.UNREACHABLE for s in S},
    (S.UNKNOWN, O.CAUGHT_UP): S.HEALTHY,
    (S.HEALTHY, O.CAUGHT_UP): S.HEALTHY,
    (S.RECOVERING, O.CAUGHT_UP): S.RECOVERING,
    (S.LAGGING, O.CAUGHT_UP): S.RECOVERING,
    (S.STOPPED, O.CAUGHT_UP): S.RECOVERING,
    (S.UNREACHABLE, O.CAUGHT_UP): S.RECOVERING,
}
del S, O


@dataclass(frozen=True, slots=True)
class Check:
    """What one look at a replica found."""

    observation: Observation
    lag_ms: float | None = None
    error: str | None = None
    position: Position | None = None
    replicating: bool = False  # SHOW SLAVE STATUS showed a replication set up (running or not)


class ReplicaHealth:
    """The monitor's view of one replica; the balancer reads :attr:`percent`."""

    def __init__(self, data_source: str, endpoint: str) -> None:
        self.data_source = data_source
        self.endpoint = endpoint
        self.state = ReplicaState.UNKNOWN
        self.percent = 100  # share of the configured weight in use now
        self.lag_ms: float | None = None
        self.last_error: str | None = None
        self.checked_at: float | None = None
        self.position: Position | None = None  # GTIDs known applied (monitor, or a successful wait)
        self._step_at = 0.0
        self._lock = threading.Lock()

    def observe(self, check: Check, now: float, settings: ReadWriteSettings) -> ReplicaState:
        """Apply one observation at ``now`` (the monitor's clock); returns the state before it."""
        with self._lock:
            before = self.state
            after = TRANSITIONS[(before, check.observation)]
            self.state = after
            self.checked_at = now
            if check.lag_ms is not None or check.observation is not Observation.FAILED:
                self.lag_ms = check.lag_ms
            if check.error is not None:
                self.last_error = check.error
            if check.position is not None:
                self.position = merged(self.position, check.position)
            if after.out:
                self.percent = 0
            elif after is ReplicaState.HEALTHY:
                self.percent = 100
            elif before.out:  # just came back: the first step
                self._start_recovery(now, settings)
            else:
                self._step(now, settings)
            return before

    def applied(self, position: Position) -> None:
        """A wait on the replica returned: it has applied ``position``."""
        with self._lock:
            self.position = merged(self.position, position)

    def _start_recovery(self, now: float, settings: ReadWriteSettings) -> None:
        self._step_at = now
        self.percent = min(100, settings.recovery_step_percent) if settings.recovery_interval_ms else 100
        if self.percent >= 100:
            self.state = ReplicaState.HEALTHY

    def _step(self, now: float, settings: ReadWriteSettings) -> None:
        interval = settings.recovery_interval_ms / 1000.0
        if interval <= 0:
            steps = 100
        else:
            steps = int((now - self._step_at) // interval)
        if steps > 0:
            self._step_at += steps * interval
            self.percent = min(100, self.percent + steps * settings.recovery_step_percent)
        if self.percent >= 100:
            self.percent = 100
            self.state = ReplicaState.HEALTHY
