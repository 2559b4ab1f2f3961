"""The transactional outbox: messages written with the business rows, relayed at least once, consumed once.

* :func:`publish` — a message row in the caller's local transaction, on the
  data source it writes to (so both commit or neither does);
* :class:`Relay` — claims due messages with ``FOR UPDATE SKIP LOCKED``, hands
  them to a sink (:class:`RedisStreamSink`, or any callable), marks them sent,
  retries failures after 30 s, dead-letters after 16 attempts, purges sent
  messages after 7 days; ``ddm relay`` runs one as a process;
* :func:`consume_once` — the consumer's side: the message id recorded in the
  same local transaction as the handler's writes;
* :func:`outbox_ddl` — the two tables for every data source (``ddm ddl --outbox``).

docs/outbox.md explains the guarantees and the figures.
"""

from ddm_core.outbox.consumer import consume_once
from ddm_core.outbox.dead_letters import dead_letters, requeue
from ddm_core.outbox.locking import lock_clause
from ddm_core.outbox.message import DeadLetter, Message, MessageState
from ddm_core.outbox.publish import publish
from ddm_core.outbox.relay import Relay, RelayPass
from ddm_core.outbox.schema import CONSUME_LOG_TABLE, MESSAGE_TABLE, outbox_ddl, table_ddl
from ddm_core.outbox.settings import RelaySettings
from ddm_core.outbox.sinks import BatchSink, RedisStreamSink, Sink, StdoutSink, deliver_batch, sink_from_spec

__all__ = [
    "publish",
    "Relay",
    "RelayPass",
    "RelaySettings",
    "consume_once",
    "dead_letters",
    "requeue",
    "Message",
    "MessageState",
    "DeadLetter",
    "Sink",
    "BatchSink",
    "RedisStreamSink",
    "StdoutSink",
    "deliver_batch",
    "sink_from_spec",
    "lock_clause",
    "outbox_ddl",
    "table_ddl",
    "MESSAGE_TABLE",
    "CONSUME_LOG_TABLE",
]
