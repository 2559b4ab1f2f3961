"""The durable XA transaction log: one row per global transaction, keyed by its gtrid, with its state.

The table ``ddm_xa_log`` lives on one configured data source (``xa.logDataSource``;
default: the default data source, else the first). When that data source has a branch
in the transaction, the decision row is written *inside* that branch and committed with
it in one phase (the last resource: its commit is the durable decision). Otherwise each
write is its own autocommitted statement on a pooled connection of that data source —
never on a branch's connection — so it is durable before the coordinator goes on:

=================  ===============================================================
state              written
=================  ===============================================================
``PREPARING``      (no last resource) with the participant list, alongside the
                   ``XA PREPARE`` s: a prepared branch without a row is aged by
                   its gtrid and refused by a tombstone (below)
``COMMITTING``     the COMMIT decision, before the first ``XA COMMIT``: a
                   compare-and-set from ``PREPARING``, so it cannot overtake a
                   rollback decided by recovery; or the last resource's row,
                   inserted in its branch (a tombstone's key refuses it)
``COMMITTED``      after every branch committed, deferred: marked in batches by
                   a later commit of the same executor, or by recovery
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
from typing import Any, Iterable, Protocol, Sequence, TypeVar

from ddm_core.dialects import titles
from ddm_core.errors import DuplicateKeyError, XaError
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.pools import EndpointPool, discard_on
from ddm_core.execute.steps import Sql, Step, Steps, drive
from ddm_core.metadata.model import ShardingConfig
from ddm_core.xa.xid import namespace_of

__all__ = ["TABLE", "DDL", "GlobalState", "LogRow", "TransactionLog", "XaHost", "log_data_source"]

T = TypeVar("T")


class XaHost(Protocol):
    """What the log and recovery need of an executor: its configuration and blocking primary pools.

    The thread :class:`~ddm_core.execute.Executor` is one; the asyncio executor has one of its own
    (``AsyncExecutor.xa_host``, pools off the loop) for recovery and tools.
    """

    @property
    def config(self) -> ShardingConfig: ...

    def primary_pool(self, data_source: str) -> EndpointPool: ...

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


def log_data_source(config: ShardingConfig) -> str:
    """The data source holding the log: ``xa.logDataSource``, the default data source, or the first."""
    name = config.xa.log_data_source or config.default_data_source or next(iter(config.data_sources))
    return name


class TransactionLog:
    """The log table of one executor's XA transactions (see the module docstring).

    Args:
        host: Whose blocking pools carry the writes of the blocking calls (the ``*_steps`` are answered
            by the runner that drives them).
        data_source: The data source holding ``ddm_xa_log``.
    """

    def __init__(self, host: XaHost, data_source: str) -> None:
        self.host = host
        self.data_source = data_source
        pool = host.primary_pool(data_source)
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
        pool = self.host.primary_pool(self.data_source)
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

    def _run(self, steps: Steps[T]) -> T:
        """Run the log's own steps with blocking statements."""
        return drive(steps, self.answer)

    def answer(self, step: Step) -> Any:
        """Answer one of this log's steps with a blocking statement."""
        assert isinstance(step, Sql) and step.on is self
        return self._execute(step.sql, step.params, fetch=step.fetch)

    def ensure(self) -> None:
        """Create the table if it is missing (once per log object)."""
        if self._ready:
            return
        with self._lock:
            self._run(self.ensure_steps())

    def begin(self, gtrid: str, participants: Sequence[str], coordinator: str) -> None:
        """Record ``PREPARING`` with the participants (see :meth:`begin_steps`)."""
        self._run(self.begin_steps(gtrid, participants, coordinator))

    def decide(self, gtrid: str, state: GlobalState, *, expect: GlobalState = GlobalState.PREPARING) -> bool:
        """Move ``gtrid`` from ``expect`` to ``state``; ``False`` if it was not in ``expect`` (someone decided first)."""
        return self._run(self.decide_steps(gtrid, state, expect=expect))

    def mark_committed(self, gtrids: Sequence[str]) -> int:
        """``COMMITTING`` → ``COMMITTED`` for ``gtrids`` (see :meth:`mark_committed_steps`)."""
        return self._run(self.mark_committed_steps(gtrids))

    def read(self, gtrids: Iterable[str]) -> dict[str, LogRow]:
        """The rows of ``gtrids`` that exist."""
        return self._run(self.read_steps(gtrids))

    # -- the coordinator's writes, as steps (either runner answers them: ddm_core.execute.steps) ----------
    # Each step is a Sql on this log object: an autocommitted statement on a pooled connection of its data
    # source, never on a branch's connection, so it is durable before the coordinator goes on.

    def ensure_steps(self) -> Steps[None]:
        """Create the table if it is missing (once per log object)."""
        if not self._ready:
            yield Sql(self, DDL)
            self._ready = True

    def begin_steps(self, gtrid: str, participants: Sequence[str], coordinator: str) -> Steps[None]:
        """Record ``PREPARING`` with the participants, autocommitted (see :meth:`row`).

        Raises:
            XaError: a row for ``gtrid`` exists already (recovery wrote a rollback tombstone).
        """
        yield from self.ensure_steps()
        try:
            yield self.row(gtrid, participants, coordinator)
        except DuplicateKeyError as exc:
            raise self.refused(gtrid, exc) from exc

    def row(
        self, gtrid: str, participants: Sequence[str], coordinator: str, *,
        state: GlobalState = GlobalState.PREPARING, on: Any = None,
    ) -> Sql:
        """The statement inserting ``gtrid``'s row in ``state`` with the participants.

        ``PREPARING`` (the default) on a pooled connection of the log data source, alongside the PREPAREs;
        or ``COMMITTING`` on ``on``, the log data source's own branch (the last resource, docs/xa.md#commit):
        uncommitted until that branch commits in one phase, and then it *is* the decision. The table must
        exist already (:meth:`ensure_steps`: DDL would end the branch). Its duplicate-key failure means
        :meth:`refused`.
        """
        return Sql(
            self if on is None else on,
            f"INSERT INTO {TABLE} (gtrid, state, participants, coordinator, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
            (gtrid, state.value, json.dumps(list(participants)), coordinator[:255]),
        )

    @staticmethod
    def refused(gtrid: str, exc: BaseException) -> BaseException:
        """What :meth:`row`'s failure ``exc`` means: a row was there first (a tombstone), or ``exc`` itself."""
        if not isinstance(exc, DuplicateKeyError):
            return exc
        return XaError(
            f"global transaction {gtrid} already has a log row (recovery rolled it back): not preparing it",
            gtrid=gtrid,
        )

    def decide_steps(self, gtrid: str, state: GlobalState, *, expect: GlobalState = GlobalState.PREPARING) -> Steps[bool]:
        """Move ``gtrid`` from ``expect`` to ``state`` (a compare-and-set); ``False`` if someone decided first."""
        changed = yield Sql(
            self,
            f"UPDATE {TABLE} SET state = %s, updated_at = UTC_TIMESTAMP(6) WHERE gtrid = %s AND state = %s",
            (state.value, gtrid, expect.value),
        )
        return bool(changed)

    def read_steps(self, gtrids: Iterable[str]) -> Steps[dict[str, LogRow]]:
        """The rows of ``gtrids`` that exist."""
        wanted = sorted(set(gtrids))
        out: dict[str, LogRow] = {}
        if not wanted:
            return out
        yield from self.ensure_steps()
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ", ".join(["%s"] * len(chunk))
            rows = yield Sql(self, f"SELECT {self._COLUMNS} FROM {TABLE} WHERE gtrid IN ({marks})", tuple(chunk), fetch=True)
            for raw in rows:
                row = self._row(raw)
                out[row.gtrid] = row
        return out

    # -- recovery's statements (blocking: recovery runs in a thread of its own) ----------------------------

    def tombstone(self, gtrid: str) -> GlobalState:
        """For a prepared branch with no row: insert ``ROLLING_BACK`` unless a row appeared; the row's state."""
        return self._run(self.tombstone_steps(gtrid))

    def tombstone_steps(self, gtrid: str) -> Steps[GlobalState]:
        """Insert a ``ROLLING_BACK`` tombstone for ``gtrid`` unless its row exists; the row's state then.

        The primary key arbitrates: while a last resource's uncommitted decision row holds the key, the
        ``INSERT IGNORE`` waits for that branch to commit (the row wins: ``COMMITTING``) or roll back (the
        tombstone goes in), so the decision is either made or refused, never both.
        """
        yield Sql(
            self,
            f"INSERT IGNORE INTO {TABLE} (gtrid, state, participants, coordinator, created_at, updated_at) "
            "VALUES (%s, %s, '[]', 'recovery', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
            (gtrid, GlobalState.ROLLING_BACK.value),
        )
        row = (yield from self.read_steps([gtrid])).get(gtrid)
        return row.state if row is not None else GlobalState.ROLLING_BACK

    def mark_committed_steps(self, gtrids: Sequence[str]) -> Steps[int]:
        """``COMMITTING`` → ``COMMITTED`` for ``gtrids`` (every branch of each committed); how many moved."""
        marks = ", ".join(["%s"] * len(gtrids))
        changed = yield Sql(
            self,
            f"UPDATE {TABLE} SET state = %s, updated_at = UTC_TIMESTAMP(6) WHERE state = %s AND gtrid IN ({marks})",
            (GlobalState.COMMITTED.value, GlobalState.COMMITTING.value, *gtrids),
        )
        return int(changed)

    # -- reading -------------------------------------------------------------------------------

    _COLUMNS = "gtrid, state, participants, coordinator, TIMESTAMPDIFF(MICROSECOND, created_at, UTC_TIMESTAMP(6)) DIV 1000"

    @staticmethod
    def _row(raw: Any) -> LogRow:
        gtrid, state, participants, coordinator, age = raw
        return LogRow(str(gtrid), GlobalState(state), tuple(json.loads(participants)), str(coordinator), int(age))

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
