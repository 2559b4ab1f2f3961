"""What the relay hands a sink, and the states a message goes through."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["MessageState", "Message", "DeadLetter"]


class MessageState(str, enum.Enum):
    """The ``state`` column of ``ddm_outbox``.

    ``pending`` → ``sent`` when a sink took it; ``pending`` → ``pending`` with
    one more attempt and a later ``next_attempt_ms`` when delivery failed;
    ``pending`` → ``dead`` on the last allowed failure; ``dead`` → ``pending``
    only by :func:`~ddm_core.outbox.requeue`. ``sent`` rows are purged after the
    retention time.
    """

    PENDING = "pending"
    SENT = "sent"
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class Message:
    """One message as delivered (at least once: a consumer must tolerate repeats).

    Attributes:
        message_id: Globally unique id (32 hex digits unless the publisher chose one).
        topic: Where it goes (the Redis sink's stream name is built from it).
        key: The publisher's partition key, or ``None``.
        payload: The body, as published.
        data_source: The data source whose message table holds it.
        attempts: Failed deliveries before this one.
        created_ms: When it was published (publisher's clock, ms since the epoch).
    """

    message_id: str
    topic: str
    key: str | None
    payload: bytes
    data_source: str
    attempts: int
    created_ms: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message that failed its last allowed delivery (``ddm relay dead-letters``)."""

    data_source: str
    seq: int
    message_id: str
    topic: str
    key: str | None
    attempts: int
    created_ms: int
    last_error: str | None
