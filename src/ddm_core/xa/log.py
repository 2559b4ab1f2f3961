"""The durable XA transaction log: one row per global transaction, keyed by its gtrid, with its state.

The table ``ddm_xa_log`` lives on one configured data source (``xa.logDataSource``;
default: the default data source, else the first). Every write is its own
autocommitted statement on a pooled connection of that data source — never on
a branch's connection — so it is durable before the coordinator goes on:

=================  ===============================================================
state              written
=================  ===============================================================
``PREPARING``      with the participant list, before the first ``XA PREPARE``
``COMMITTING``     the COMMIT decision, before the first ``XA COMMIT``; a
                   compare-and-set from ``PREPARING``, so it cannot overtake a
                   rollback decided by recovery
``COMMITTED``      after every branch committed (recovery also sets it)
``ROLLING_BACK``   the ROLLBACK decision (coordinator after a failed PREPARE, or
                   recovery of an abandoned transaction; a row inserted by
                   recovery for a branch with no row is a tombstone)
``ROLLED_BACK``    after every branch rolled back
=================  ===============================================================

Times are the log server's clock (``UTC_TIMESTAMP(6)``), so ages do not depend
on the coordinator's or the recovering process's clocks.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ddm_core.dialects import titles
from ddm_core.errors import DuplicateKeyError, XaError
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.pools import discard_on
from ddm_core.xa.xid import namespace_of

if TYPE_CHECKING:
    from ddm_core.execute.executor import Executor

__all__ = ["TABLE", "DDL", "GlobalState", "LogRow", "TransactionLog", "log_data_source"]

#: The log table's name on the log data source.
TABLE = "ddm_xa_log"

DDL = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} ("
    "gtrid VARCHAR(64) CHARACTER SET ascii NOT NULL PRIMARY KEY, "
    "state VARCHAR(16) CHARACTER SET ascii NOT NULL, "
    "participants TEXT NOT NULL, "  # JSON list of data source names, in prepare order
    "coordinator VARCHAR(255) NOT NULL, "  # host:pid of the process that wrote the row
    "created_at DATETIME(6) NOT NULL, "
    "updated_at DATETIME(6) NOT NULL, "
    "KEY idx_state_updated (state, updated_at)"
    ") ENGINE=InnoDB"
)


class GlobalState(str, Enum):
    """The phases of one global transaction, as the log records them (module table)."""

    PREPARING = "PREPARING"
    COMMITTING = "COMMITTING"
    COMMITTED = "COMMITTED"
    ROLLING_BACK = "ROLLING_BACK"
    ROLLED_BACK = "ROLLED_BACK"

    @property
    def commits(self) -> bool:
        """The decision is COMMIT."""
        return self in (GlobalState.COMMITTING, GlobalState.COMMITTED)

    @property
    def final(self) -> bool:
        return self in (GlobalState.COMMITTED, GlobalState.ROLLED_BACK)


@dataclass(frozen=True, slots=True)
class LogRow:
    """One global transaction as the log has it.

    Attributes:
        gtrid: Its id.
        state: Its phase.
        participants: Data sources with a branch (empty for a recovery tombstone).
        coordinator: ``host:pid`` of the writer.
        age_ms: Milliseconds since the row was written, on the log server's clock.
    """

    gtrid: str
    state: GlobalState
    participants: tuple[str, ...]
    coordinator: str
    age_ms: int


def log_data_source(executor: Executor) -> str:
    """The data source holding the log: ``xa.logDataSource``, the default data source, or the first."""
    config = executor.config
    name = config.xa.log_data_source or config.default_data_source or next(iter(config.data_sources))
    return name


class TransactionLog:
    """The log table of one executor's XA transactions (see the module docstring).

    Args:
        executor: Whose pools carry the writes.
        data_source: The data source holding ``ddm_xa_log``.
    """

    def __init__(self, executor: Executor, data_source: str) -> None:
        self.executor = executor
        self.data_source = data_source
        pool = executor.primary_pool(data_source)
        dialect = pool.driver.dialect
        if not dialect.supports_xa:
            raise XaError(
                f"the XA transaction log needs a {titles(lambda d: d.supports_xa)} data source; xa.logDataSource "
                f"{data_source!r} is {dialect.name}",
                data_source=data_source,
                dialect=dialect.name,
            )
        ep = pool.endpoint
        #: ``host:port/database/table``: what the namespace of this log's gtrids is made from.
        self.location = f"{ep.host or '127.0.0.1'}:{ep.port or 3306}/{ep.database or ''}/{TABLE}"
        self.namespace = namespace_of(self.location)
        self._ready = False
        self._lock = threading.Lock()

    # -- statements ------------------------------------------------------------------------

    def _execute(self, sql: str, params: Sequence[Any] = (), *, fetch: bool = False) -> Any:
        """One autocommitted statement on a pooled connection of the log data source."""
        pool = self.executor.primary_pool(self.data_source)
        borrowed = pool.borrow()
        try:
            cursor = borrowed.raw.cursor()
            try:
                cursor.execute(sql, tuple(params) or None)
                out = cursor.fetchall() if fetch else cursor.rowcount
            finally:
                cursor.close()
        except BaseException as exc:
            borrowed.release(discard=discard_on(exc))
            if isinstance(exc, Exception):
                raise map_driver_error(exc, data_source=self.data_source, endpoint=pool.endpoint.name, sql=sql) from exc
            raise
        borrowed.release()
        return out

    def ensure(self) -> None:
        """Create the table if it is missing (once per log object)."""
        if self._ready:
            return
        with self._lock:
            if not self._ready:
                self._execute(DDL)
                self._ready = True

    # -- the coordinator's writes ---------------------------------------------------------

    def begin(self, gtrid: str, participants: Sequence[str], coordinator: str) -> None:
        """Record ``PREPARING`` with the participants (before the first PREPARE).

        Raises:
            XaError: a row for ``gtrid`` exists already (recovery wrote a rollback tombstone).
        """
        self.ensure()
        try:
            self._execute(
                f"INSERT INTO {TABLE} (gtrid, state, participants, coordinator, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
                (gtrid, GlobalState.PREPARING.value, json.dumps(list(participants)), coordinator[:255]),
            )
        except DuplicateKeyError as exc:
            raise XaError(
                f"global transaction {gtrid} already has a log row (recovery rolled it back): not preparing it",
                gtrid=gtrid,
            ) from exc

    def decide(self, gtrid: str, state: GlobalState, *, expect: GlobalState = GlobalState.PREPARING) -> bool:
        """Move ``gtrid`` from ``expect`` to ``state``; ``False`` if it was not in ``expect`` (someone decided first)."""
        changed = self._execute(
            f"UPDATE {TABLE} SET state = %s, updated_at = UTC_TIMESTAMP(6) WHERE gtrid = %s AND state = %s",
            (state.value, gtrid, expect.value),
        )
        return bool(changed)

    def tombstone(self, gtrid: str) -> GlobalState:
        """For a prepared branch with no row: insert ``ROLLING_BACK`` unless a row appeared; the row's state."""
        self._execute(
            f"INSERT IGNORE INTO {TABLE} (gtrid, state, participants, coordinator, created_at, updated_at) "
            "VALUES (%s, %s, '[]', 'recovery', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
            (gtrid, GlobalState.ROLLING_BACK.value),
        )
        row = self.read([gtrid]).get(gtrid)
        return row.state if row is not None else GlobalState.ROLLING_BACK

    # -- reading -------------------------------------------------------------------------------

    _COLUMNS = "gtrid, state, participants, coordinator, TIMESTAMPDIFF(MICROSECOND, created_at, UTC_TIMESTAMP(6)) DIV 1000"

    @staticmethod
    def _row(raw: Any) -> LogRow:
        gtrid, state, participants, coordinator, age = raw
        return LogRow(str(gtrid), GlobalState(state), tuple(json.loads(participants)), str(coordinator), int(age))

    def read(self, gtrids: Iterable[str]) -> dict[str, LogRow]:
        """The rows of ``gtrids`` that exist."""
        wanted = sorted(set(gtrids))
        if not wanted:
            return {}
        self.ensure()
        out: dict[str, LogRow] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ", ".join(["%s"] * len(chunk))
            for raw in self._execute(f"SELECT {self._COLUMNS} FROM {TABLE} WHERE gtrid IN ({marks})", chunk, fetch=True):
                row = self._row(raw)
                out[row.gtrid] = row
        return out

    def unfinished(self) -> list[LogRow]:
        """Every row not yet ``COMMITTED`` / ``ROLLED_BACK``."""
        self.ensure()
        rows = self._execute(
            f"SELECT {self._COLUMNS} FROM {TABLE} WHERE state IN (%s, %s, %s) ORDER BY created_at",
            (GlobalState.PREPARING.value, GlobalState.COMMITTING.value, GlobalState.ROLLING_BACK.value),
            fetch=True,
        )
        return [self._row(r) for r in rows]

    def purge(self, older_than_ms: int, batch: int = 1000) -> int:
        """Delete finished rows older than ``older_than_ms`` (in batches); how many went."""
        self.ensure()
        total = 0
        while True:
            n = self._execute(
                f"DELETE FROM {TABLE} WHERE state IN (%s, %s) "
                "AND updated_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND LIMIT %s",
                (GlobalState.COMMITTED.value, GlobalState.ROLLED_BACK.value, older_than_ms * 1000, batch),
            )
            total += int(n)
            if n < batch:
                return total

    def now_ms(self) -> int:
        """The log server's clock, epoch milliseconds."""
        rows = self._execute("SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 AS SIGNED)", fetch=True)
        return int(rows[0][0])
