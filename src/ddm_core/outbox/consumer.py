"""``consume_once(executor, message_id, handler)``: apply a message's effects exactly once.

The message id goes into ``ddm_consume_log`` of the data source the handler
writes to, in the handler's own local transaction: the effects and the record
commit together. A second delivery of the same id hits the primary key; the
duplicate-key error (any driver's code: :class:`~ddm_core.errors.DuplicateKeyError`)
rolls the repeat back and means "already processed".
"""

from __future__ import annotations

import time
from typing import Callable

from ddm_core.errors import DuplicateKeyError, OutboxError
from ddm_core.execute.executor import Executor
from ddm_core.execute.transaction import Transaction
from ddm_core.outbox.schema import CONSUME_LOG_TABLE
from ddm_core.route.text.sql_hint import on_data_source

__all__ = ["consume_once"]

_RECORD = f"INSERT INTO {CONSUME_LOG_TABLE} (message_id, consumed_ms) VALUES (%s, %s)"


class _AlreadyConsumed(Exception):
    """Raised inside the transaction so that leaving it rolls the repeat back."""


def consume_once(
    executor: Executor,
    message_id: str,
    handler: Callable[[Transaction], object],
    *,
    data_source: str | None = None,
) -> bool:
    """Run ``handler(tx)`` and record ``message_id`` in one local transaction, unless it was recorded before.

    Args:
        executor: Where the handler's writes and the consume log live.
        message_id: The delivered message's id.
        handler: Does the message's writes through ``tx`` (all on one data source).
        data_source: Record there *before* the handler runs, so a concurrent
            repeat waits instead of running the handler too; default: record
            after the handler, on the data source it wrote to (the default data
            source if it wrote nothing).

    Returns:
        ``True`` when the handler ran and committed; ``False`` when the id was
        already consumed (nothing of this call was kept).

    Raises:
        Whatever the handler raises (its writes are rolled back, the id is not
        recorded, so a later delivery tries again).
    """
    if not isinstance(message_id, str) or not message_id:
        raise OutboxError(f"consume_once needs a message id (str), not {message_id!r}", message_id=message_id)
    try:
        with executor.transaction() as tx:
            if data_source is not None:
                _record(tx, data_source, message_id)
            handler(tx)
            if data_source is None:
                _record(tx, tx.written or _default_source(executor), message_id)
    except _AlreadyConsumed:
        return False
    return True


def _record(tx: Transaction, data_source: str, message_id: str) -> None:
    try:
        tx.execute(on_data_source(data_source, _RECORD), (message_id, time.time_ns() // 1_000_000)).close()
    except DuplicateKeyError:
        raise _AlreadyConsumed() from None


def _default_source(executor: Executor) -> str:
    config = executor.config
    return config.default_data_source or next(iter(config.data_sources))
