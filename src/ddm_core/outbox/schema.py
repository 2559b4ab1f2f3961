"""The outbox's two tables, one of each on every data source: messages and the consume log.

``ddm_outbox`` holds the messages a transaction published on that data source
(written in the same local transaction as the business rows, so both commit or
neither does); the relay moves them through their states. ``ddm_consume_log``
records the message ids a consumer has applied on that data source, in the
same local transaction as the consumer's own writes (docs/outbox.md).

Times are milliseconds since the Unix epoch as BIGINT, read from the
publisher's clock (``created_ms``) and the relay's clock (``next_attempt_ms``,
``sent_ms``): the relay's clock can be injected, the database's cannot.
"""

from __future__ import annotations

from ddm_core.dialects import dialect_for, titles
from ddm_core.errors import OutboxError
from ddm_core.metadata.model import ShardingConfig

__all__ = ["MESSAGE_TABLE", "CONSUME_LOG_TABLE", "table_ddl", "outbox_ddl"]

MESSAGE_TABLE = "ddm_outbox"
CONSUME_LOG_TABLE = "ddm_consume_log"

# The due index serves the relay's scan in its ORDER BY, so a locking read stops
# at LIMIT rows instead of locking every pending row before a sort.
_MYSQL = (
    f"""CREATE TABLE IF NOT EXISTS {MESSAGE_TABLE} (
  seq BIGINT NOT NULL AUTO_INCREMENT,
  message_id VARCHAR(64) NOT NULL,
  topic VARCHAR(255) NOT NULL,
  msg_key VARCHAR(255) NULL,
  payload LONGBLOB NOT NULL,
  state VARCHAR(8) NOT NULL DEFAULT 'pending',
  attempts INT NOT NULL DEFAULT 0,
  next_attempt_ms BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  sent_ms BIGINT NULL,
  last_error VARCHAR(1000) NULL,
  PRIMARY KEY (seq),
  UNIQUE KEY uk_{MESSAGE_TABLE}_message_id (message_id),
  KEY idx_{MESSAGE_TABLE}_due (state, next_attempt_ms, seq),
  KEY idx_{MESSAGE_TABLE}_sent (state, sent_ms)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    f"""CREATE TABLE IF NOT EXISTS {CONSUME_LOG_TABLE} (
  message_id VARCHAR(64) NOT NULL,
  consumed_ms BIGINT NOT NULL,
  PRIMARY KEY (message_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
)

# SQLite: one writer per file, so the relay reads without a lock clause (docs/outbox.md#sqlite).
_SQLITE = (
    f"""CREATE TABLE IF NOT EXISTS {MESSAGE_TABLE} (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id VARCHAR(64) NOT NULL UNIQUE,
  topic VARCHAR(255) NOT NULL,
  msg_key VARCHAR(255) NULL,
  payload BLOB NOT NULL,
  state VARCHAR(8) NOT NULL DEFAULT 'pending',
  attempts INT NOT NULL DEFAULT 0,
  next_attempt_ms BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  sent_ms BIGINT NULL,
  last_error VARCHAR(1000) NULL
)""",
    f"CREATE INDEX IF NOT EXISTS idx_{MESSAGE_TABLE}_due ON {MESSAGE_TABLE} (state, next_attempt_ms, seq)",
    f"CREATE INDEX IF NOT EXISTS idx_{MESSAGE_TABLE}_sent ON {MESSAGE_TABLE} (state, sent_ms)",
    f"""CREATE TABLE IF NOT EXISTS {CONSUME_LOG_TABLE} (
  message_id VARCHAR(64) NOT NULL PRIMARY KEY,
  consumed_ms BIGINT NOT NULL
)""",
)

#: The tables in each SQL dialect they are written in (``Dialect.sqlglot_name``): MariaDB's are MySQL's.
_TABLES = {"mysql": _MYSQL, "sqlite": _SQLITE}


def table_ddl(dialect: str) -> tuple[str, ...]:
    """The statements creating both tables (if missing) on one data source of ``dialect``.

    Raises:
        OutboxError: the backend has no outbox tables (PostgreSQL, for now).
    """
    backend = dialect_for(dialect)
    found = _TABLES.get(backend.sqlglot_name)
    if found is None:
        raise OutboxError(
            f"the outbox tables are written for {titles(lambda d: d.sqlglot_name in _TABLES, 'and')} data sources, "
            f"not {backend.name}",
            dialect=backend.name,
        )
    return found


def outbox_ddl(config: ShardingConfig, *, dialect: str | None = None) -> list[tuple[str, str]]:
    """``(data_source, sql)`` for both tables on every data source, in configuration order.

    Args:
        dialect: Write every statement in this dialect; default: each data source's own.
    """
    return [
        (name, sql)
        for name, ds in config.data_sources.items()
        for sql in table_ddl(dialect or ds.primary.dialect)
    ]
