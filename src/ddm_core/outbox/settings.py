"""The relay's figures, each with its checked range (defaults: docs/outbox.md#figures)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ddm_core.errors import ConfigError

__all__ = ["RelaySettings"]

_DAY = 86_400.0

#: field → (low, high): every figure is bounded, like the configuration's numeric fields.
_RANGES: dict[str, tuple[float, float]] = {
    "batch_size": (1, 10_000),
    "retry_after": (0.001, _DAY),
    "max_attempts": (1, 1_000),
    "purge_after": (1.0, 3_650 * _DAY),
    "purge_batch": (1, 100_000),
    "purge_every": (0.0, _DAY),
    "poll_interval": (0.001, 3_600.0),
}
_INTS = {"batch_size", "max_attempts", "purge_batch"}


@dataclass(frozen=True, slots=True)
class RelaySettings:
    """What a relay does per pass and how it treats failures.

    Attributes:
        batch_size: Messages claimed per data source per transaction.
        retry_after: Seconds before a failed delivery is tried again.
        max_attempts: Failed deliveries after which a message is dead-lettered.
        purge_after: Seconds a sent message is kept before it is purged (7 days).
        purge_batch: Rows deleted per purge statement.
        purge_every: Seconds between purges (0: every pass).
        poll_interval: Seconds a relay waits after a pass that found nothing to do.
    """

    batch_size: int = 100
    retry_after: float = 30.0
    max_attempts: int = 16
    purge_after: float = 7 * _DAY
    purge_batch: int = 1_000
    purge_every: float = 60.0
    poll_interval: float = 0.5

    def __post_init__(self) -> None:
        for f in fields(self):
            value: Any = getattr(self, f.name)
            low, high = _RANGES[f.name]
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if f.name in _INTS:
                number = number and isinstance(value, int)
            if not number or not low <= value <= high:
                kind = "an int" if f.name in _INTS else "a number"
                raise ConfigError(
                    f"relay {f.name} must be {kind} from {low:g} to {high:g}, not {value!r}",
                    field=f.name,
                    value=value,
                )
