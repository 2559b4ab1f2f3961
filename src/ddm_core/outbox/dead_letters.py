"""Dead letters: listing the messages that failed their last attempt, and sending them again."""

from __future__ import annotations

import time
from typing import Sequence

from ddm_core.execute.executor import Executor
from ddm_core.outbox.message import DeadLetter
from ddm_core.outbox.schema import MESSAGE_TABLE
from ddm_core.route.text.sql_hint import on_data_source

__all__ = ["dead_letters", "requeue"]

_LIST = (
    f"SELECT seq, message_id, topic, msg_key, attempts, created_ms, last_error FROM {MESSAGE_TABLE} "
    "WHERE state = 'dead' ORDER BY seq LIMIT %s"
)
_REQUEUE_ALL = f"UPDATE {MESSAGE_TABLE} SET state = 'pending', attempts = 0, next_attempt_ms = %s WHERE state = 'dead'"
_REQUEUE_ONE = _REQUEUE_ALL + " AND message_id = %s"


def _sources(executor: Executor, data_sources: Sequence[str] | None) -> list[str]:
    return list(data_sources) if data_sources is not None else list(executor.config.data_sources)


def dead_letters(
    executor: Executor, *, data_sources: Sequence[str] | None = None, limit: int = 100
) -> list[DeadLetter]:
    """Up to ``limit`` dead messages per data source, oldest first."""
    out: list[DeadLetter] = []
    for ds in _sources(executor, data_sources):
        with executor.execute(on_data_source(ds, _LIST), (limit,)) as result:
            for seq, mid, topic, key, attempts, created, error in result.fetchall():
                out.append(DeadLetter(ds, int(seq), str(mid), str(topic), key, int(attempts), int(created), error))
    return out


def requeue(
    executor: Executor,
    message_ids: Sequence[str] | None = None,
    *,
    data_sources: Sequence[str] | None = None,
    now_ms: int | None = None,
) -> int:
    """Make dead messages pending again with a fresh attempt count; all of them when ``message_ids`` is ``None``.

    Returns:
        How many messages were requeued.
    """
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    total = 0
    for ds in _sources(executor, data_sources):
        if message_ids is None:
            with executor.execute(on_data_source(ds, _REQUEUE_ALL), (now,)) as result:
                total += max(result.rowcount, 0)
            continue
        for mid in message_ids:
            with executor.execute(on_data_source(ds, _REQUEUE_ONE), (now, mid)) as result:
                total += max(result.rowcount, 0)
    return total
