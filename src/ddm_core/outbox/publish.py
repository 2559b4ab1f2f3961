"""``publish(tx, topic, payload)``: a message row written in the caller's local transaction.

The row goes to the outbox table of the data source the transaction writes
to, so the business write and the message commit together or not at all; the
relay delivers it afterwards (docs/outbox.md).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ddm_core.errors import OutboxError
from ddm_core.execute.transaction import Transaction
from ddm_core.outbox.schema import MESSAGE_TABLE
from ddm_core.route.text.sql_hint import on_data_source

__all__ = ["publish"]

_INSERT = (
    f"INSERT INTO {MESSAGE_TABLE} (message_id, topic, msg_key, payload, state, attempts, next_attempt_ms, created_ms) "
    "VALUES (%s, %s, %s, %s, 'pending', 0, %s, %s)"
)
_MAX_NAME = 255  # VARCHAR(255) of topic and msg_key
_MAX_ID = 64


def publish(
    tx: Transaction,
    topic: str,
    payload: bytes | str,
    *,
    key: str | int | None = None,
    data_source: str | None = None,
    message_id: str | None = None,
) -> str:
    """Insert one message into the outbox of the data source ``tx`` writes to.

    Args:
        tx: An active local transaction (``executor.transaction()``).
        topic: Non-empty, at most 255 characters.
        payload: The body; ``str`` is stored as UTF-8.
        key: A partition key passed on to the sink (an int is stored as its digits).
        data_source: Where the message goes when the transaction has not
            written yet; once it has, only that data source is accepted (the
            transaction refuses a second one).
        message_id: Your own unique id (at most 64 characters); default a random
            32-hex-digit id.

    Returns:
        The message id: what the consumer passes to :func:`consume_once`.

    Raises:
        OutboxError: nothing to tie the message to (no write yet and no
            ``data_source``), or a topic / key / payload / id that cannot be stored.
        CrossShardTransactionError: ``data_source`` is not the one the transaction wrote to.
    """
    target = data_source or tx.written
    if target is None:
        raise OutboxError(
            f"publish({topic!r}) in a transaction that has written nothing yet: write the business rows "
            "first (the message goes to their data source) or pass data_source=...",
            topic=topic,
        )
    mid = uuid.uuid4().hex if message_id is None else _text("message_id", message_id, _MAX_ID)
    now = time.time_ns() // 1_000_000
    # next_attempt_ms = now: the relay scans in due-time order, so retries are never starved by new messages.
    params = (mid, _text("topic", topic, _MAX_NAME), _key(key), _body(payload, topic), now, now)
    tx.execute(on_data_source(target, _INSERT), params).close()
    return mid


def _text(name: str, value: Any, limit: int) -> str:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise OutboxError(
            f"outbox {name} must be a non-empty str of at most {limit} characters, not {value!r}", field=name
        )
    return value


def _key(key: str | int | None) -> str | None:
    if key is None:
        return None
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise OutboxError(f"outbox key must be a str, an int or None, not {type(key).__name__} {key!r}", field="key")
    return _text("key", str(key), _MAX_NAME)


def _body(payload: Any, topic: str) -> bytes:
    if isinstance(payload, str):
        return payload.encode("utf-8")
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    raise OutboxError(
        f"the payload of a message on {topic!r} must be bytes or str, not {type(payload).__name__}: "
        "serialize it first (json.dumps, ...)",
        topic=topic,
    )
