"""The error hierarchy of ddm-core.

One root, :class:`DdmError`, and one group per layer. Classes mix in the stdlib
type a caller would naturally catch (``ConfigError`` is a ``ValueError``,
``QueryTimeoutError`` a ``TimeoutError``), so code that predates ddm-core keeps
working. Every error carries the facts that explain it as attributes (``table``,
``column``, ``data_source``, ``field``...) and names them in its message.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = [
    "DdmError",
    # config
    "ConfigError",
    "InlineExpressionError",
    "ConfigValidationError",
    "SourceUnavailableError",
    "PlacementChangeError",
    "ConfigRowError",
    "ConfigPublishConflictError",
    "MigrationConfigError",
    "CutoverConfigError",
    "InstanceFenceTimeoutError",
    # routing
    "RoutingError",
    "ShardValueError",
    "ParameterError",
    "UnsupportedSQLError",
    "SessionStateError",
    "DeepPaginationError",
    "FullRouteError",
    "ShardKeyNotFoundError",
    "ShardKeyUpdateError",
    # execution
    "ExecutionError",
    "DataSourceUnavailableError",
    "PoolTimeoutError",
    "QueryTimeoutError",
    "DuplicateKeyError",
    "JoinLimitError",
    "MergeError",
    "CollationError",
    # transaction
    "TransactionError",
    "TransactionCharacteristicsError",
    "CrossShardTransactionError",
    "NoSuchSavepointError",
    "XaError",
    "XaBranchAbortedError",
    "XaTimeoutError",
    "XaCapacityError",
    "XaInDoubtError",
    "XaRecoveryError",
    # migration
    "MigrationError",
    "MigrationFencedError",
    "MigrationStateError",
    "SchemaMismatchError",
    "ConsistencyCheckError",
    "CatchUpTimeoutError",
    "BackfillMismatchError",
    # gray cut-over
    "CutoverError",
    "CutoverFencedError",
    # id generation
    "IdGenerationError",
    "WorkerIdError",
    "ClockMovedBackwardsError",
    "IdCountError",
    "IdTypeError",
    "ClockReadError",
    "WorkerLeaseError",
    "NoFreeWorkerIdError",
    "WorkerLeaseLostError",
    # outbox
    "OutboxError",
    # proxy
    "ProxyError",
    "RateLimitedError",
    "ProxyAccessDeniedError",
    "UnknownSessionError",
    "StatementInterruptedError",
    # observability
    "ObserveError",
    # etcd
    "EtcdError",
    "EtcdUnavailableError",
    "EtcdCompactedError",
    # installation
    "MissingExtraError",
]


class DdmError(Exception):
    """Root of every error ddm-core raises on purpose.

    Args:
        message: What went wrong, naming the table, column, field or statement.
        **context: The facts behind the message; each becomes an attribute and
            the whole mapping stays available as :attr:`context`.

    ``log_level`` grades the error for whoever logs it: a caller's bug or an
    unavailable data source is ``ERROR``, a configuration problem ``WARNING``
    (docs/readwrite.md#graded-errors).
    """

    log_level: int = logging.ERROR

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = context
        for key, value in context.items():
            setattr(self, key, value)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep the context across pickling (multiprocessing, worker pools).
        return (_rebuild, (type(self), self.message, self.context))


def _rebuild(cls: type[DdmError], message: str, context: dict[str, Any]) -> DdmError:
    err = cls.__new__(cls)
    DdmError.__init__(err, message, **context)
    return err


# -- config ------------------------------------------------------------------


class ConfigError(DdmError, ValueError):
    """A configuration is invalid: the message names the file, field path and value."""

    log_level = logging.WARNING  # fix the configuration; the caller did nothing wrong


class InlineExpressionError(ConfigError):
    """An inline expression (``ds${user_id % 2}``) is malformed or uses unsupported syntax.

    Attributes:
        expression: The whole expression text.
        position: 0-based offset of the offending fragment in ``expression``.
    """


class ConfigValidationError(ConfigError):
    """A configuration failed validation; :attr:`problems` lists every problem found.

    The message names the origin (file path, ``<string>`` or ``<dict>``) and, one
    per line, each field path with what is wrong with its value.

    Attributes:
        origin: Where the configuration came from.
        problems: Every ``Problem`` (``.path`` + message), in document order.
        field: The field path of the first problem (for callers that show one).
    """

    @classmethod
    def from_problems(
        cls, origin: str, problems: "list[Any] | tuple[Any, ...]"
    ) -> "ConfigValidationError":
        items = tuple(problems)
        noun = "problem" if len(items) == 1 else "problems"
        lines = [f"invalid configuration {origin}: {len(items)} {noun}"]
        lines += [f"  - {origin}: {p}" for p in items]
        return cls(
            "\n".join(lines),
            origin=origin,
            problems=items,
            field=items[0].path if items else None,
        )


class SourceUnavailableError(ConfigError, ConnectionError):
    """The configuration source cannot be reached (file missing, config center down)."""


class ConfigRowError(SourceUnavailableError):
    """The newest row of a configuration table is corrupt or unreadable (its checksum does not
    match its body, its version went backwards); the serving version stays.

    Attributes:
        table: The configuration table.
        version: The row's version.
    """

    # Set from the context by DdmError.__init__; declared for type checkers.
    table: str
    version: int


class ConfigPublishConflictError(ConfigError):
    """Another publisher wrote that configuration version first; re-read and publish again.

    Attributes:
        table: The configuration table.
        version: The version both publishers tried to write.
    """

    # Set from the context by DdmError.__init__; declared for type checkers.
    table: str
    version: int


class PlacementChangeError(ConfigError):
    """A new configuration version would move data, and it did not come as a migration step.

    A hot reload may change runtime settings, pools, replicas and weights, never
    where data lives; the serving version stays in force.

    Attributes:
        origin: Where the refused version came from.
        changes: Every :class:`~ddm_core.metadata.placement.PlacementChange`
            (what moved, old and new).
        table: The first logic table that would move (``None`` when only
            data-source level placement changed).
    """

    # Set from the context by DdmError.__init__; declared for type checkers.
    origin: str
    changes: tuple[Any, ...]
    table: str | None


class MigrationConfigError(ConfigError):
    """A ``migration:`` block is invalid; the message names the field (``migration.readShiftPercent``)."""


class InstanceFenceTimeoutError(ConfigError, TimeoutError):
    """Registered instances did not take a configuration version in time (docs/operations.md#instance-registry).

    Attributes:
        version: The version waited for.
        laggards: ``"<role> on <host> pid <pid> (version N)"`` of each instance still behind.
    """


class CutoverConfigError(ConfigError):
    """A ``cutover:`` block is invalid; the message names the field (``cutover.gray``)."""


# -- routing -----------------------------------------------------------------


class RoutingError(DdmError):
    """A statement or value cannot be routed correctly."""


class ShardValueError(RoutingError, ValueError):
    """A shard-key value (or slot) has a type or range the hash does not define.

    Raised instead of guessing an encoding (a float, ``None``, an int beyond
    64 bits): two processes must never disagree on where a key lives.
    """


class ParameterError(RoutingError, TypeError):
    """Placeholders and parameters do not fit together.

    Raised for a malformed or mixed placeholder style in the SQL text, and for
    params of the wrong container type, count or keys. The message names the
    style(s), the fragment and its 0-based ``position`` in the SQL, or the
    expected and given parameter counts / missing keys.
    """


class UnsupportedSQLError(RoutingError):
    """The statement uses a construct ddm-core cannot route correctly."""


class SessionStateError(UnsupportedSQLError):
    """A statement would change a pooled connection's session state (docs/operations.md#session-state).

    Attributes:
        kind: What it changes (``"user variable"``, ``"database"``, ``"autocommit"``...).
        statement: The statement, as routed.
        data_sources: Where it was routed.
    """


class DeepPaginationError(RoutingError):
    """An OFFSET deeper than ``max_offset`` across shards: page with a cursor instead (docs/operations.md#pagination)."""


class FullRouteError(RoutingError):
    """A statement would hit every shard and the configuration forbids that."""


class ShardKeyNotFoundError(RoutingError, LookupError):
    """A shard key needed for routing was not found (never a silent default)."""


class ShardKeyUpdateError(RoutingError):
    """An UPDATE would change a shard-key column and so move the row."""


# -- execution ---------------------------------------------------------------


class ExecutionError(DdmError):
    """Running a routed statement failed."""


class DataSourceUnavailableError(ExecutionError, ConnectionError):
    """A data source refused or lost the connection."""


class PoolTimeoutError(ExecutionError, TimeoutError):
    """No pooled connection became free within the acquire timeout."""


class QueryTimeoutError(ExecutionError, TimeoutError):
    """A statement exceeded its time budget."""


class DuplicateKeyError(ExecutionError):
    """A unique key was violated (MySQL 1062, PostgreSQL 23505, SQLite UNIQUE)."""


class JoinLimitError(ExecutionError):
    """A cross-node statement read more rows or bytes from its parts than ``runtime.maxJoinRows`` /
    ``runtime.maxJoinMemoryMb`` allow (docs/cross-node-queries.md#bounds).

    Attributes:
        table: The part's table (as the statement names it).
        rows: Rows read from the parts so far.
        megabytes: Megabytes of rows read so far.
        setting: The setting exceeded.
        limit: Its value.
    """


class MergeError(ExecutionError, TypeError):
    """Shard results cannot be merged (for example incomparable sort keys)."""


class CollationError(MergeError):
    """A merge would compare strings of a collation ddm-core cannot reproduce; the message names it."""


# -- transaction ---------------------------------------------------------------


class TransactionError(DdmError):
    """A transaction was used in a way ddm-core cannot make safe."""


class CrossShardTransactionError(TransactionError):
    """A write inside one local transaction would touch a second data source."""


class TransactionCharacteristicsError(TransactionError):
    """``START TRANSACTION`` characteristics that conflict, or that this transaction mode or driver cannot honour."""


class NoSuchSavepointError(TransactionError):
    """``ROLLBACK TO`` / ``RELEASE`` of a savepoint the transaction has not set (or dropped)."""


class XaError(TransactionError):
    """An XA (two-phase) transaction failed; the message says what became of each branch."""


class XaBranchAbortedError(XaError):
    """A deadlock or lock-wait timeout in one branch: every branch was rolled back (retry the whole transaction)."""


class XaTimeoutError(XaError, TimeoutError):
    """The XA transaction ran past its per-transaction timeout (``xa.timeoutMs``) and was rolled back."""


class XaCapacityError(XaError):
    """No XA slot became free in time: ``xa.maxConcurrent`` transactions were open on this executor."""


class XaInDoubtError(XaError):
    """The outcome is decided (``committed``: ``True``) or unknown (``None``) but not applied everywhere.

    Recovery (``executor.recover_xa()`` / ``ddm xa recover``) finishes it; do not retry blindly.
    """


class XaRecoveryError(XaError):
    """XA recovery could not run: the transaction log's data source is unreachable or unusable."""


class OutboxError(TransactionError):
    """A message could not be published, relayed or consumed as asked (docs/outbox.md).

    Attributes:
        data_source: The data source whose message table is concerned, when one is.
    """


# -- observability ---------------------------------------------------------------


class ObserveError(DdmError):
    """A health baseline, lint run or shadow route cannot be done as asked (docs/observability.md)."""


# -- etcd --------------------------------------------------------------------------


class EtcdError(DdmError):
    """etcd refused or could not answer a request as asked (docs/configuration.md#etcd-config-center).

    Attributes:
        endpoint: The etcd URL.
    """


class EtcdUnavailableError(EtcdError, ConnectionError):
    """etcd cannot be reached, or did not answer in time (down, frozen, network)."""


class EtcdCompactedError(EtcdError):
    """A watch asked for revisions etcd has compacted away; read the current state and watch again.

    Attributes:
        compact_revision: The oldest revision etcd still keeps.
    """


# -- proxy -------------------------------------------------------------------------


class ProxyError(DdmError):
    """The MySQL-protocol proxy (``ddm proxy``) cannot start or answer as asked (docs/proxy.md)."""


class RateLimitedError(ProxyError):
    """A proxy user or logic table is over its statements-per-second limit (docs/proxy.md#rate-limits).

    Attributes:
        user: The user refused (when the user's limit decided).
        table: The logic table refused (when a table's limit decided).
        limit: The limit, statements per second.
    """


class ProxyAccessDeniedError(ProxyError):
    """A proxy user may not run a statement, or end a session (docs/proxy.md#privileges).

    Attributes:
        user: The proxy user refused.
        privilege: What would allow it (a ``proxy.users[].allow`` value); ``None`` for another user's session.
        scope: What was refused: ``operation``, ``table``, ``routine``, ``database`` or ``session``
            (each has its MySQL error code, proxy/mysql_errors.py).
        target: The table, routine, database, session id or operation refused.
        sql: The statement.
    """


class UnknownSessionError(ProxyError):
    """``KILL`` names no session of this proxy process (docs/proxy.md#kill).

    Attributes:
        session_id: The id asked for.
    """


class StatementInterruptedError(ProxyError):
    """A statement was ended by ``KILL QUERY`` (or its session's ``KILL``) while it ran (docs/proxy.md#kill).

    Attributes:
        sql: The statement.
    """


# -- migration ---------------------------------------------------------------------


class MigrationError(DdmError):
    """A resharding migration cannot go on as asked (docs/migration.md)."""


class MigrationFencedError(MigrationError):
    """A write to slots a migration is moving is paused (its cutover, or a config source this
    instance could not confirm recently); retryable: send it again in a few seconds.

    Attributes:
        table: The logic table written.
        migration: The migration's name.
    """

    log_level = logging.INFO  # a pause the caller is told to retry, not a bug


class MigrationStateError(MigrationError):
    """A migration step does not follow from its recorded state (wrong phase, another migrator).

    Attributes:
        migration: The migration's name.
        phase: The phase it is in.
    """


class SchemaMismatchError(MigrationError):
    """The physical tables of a logic table differ in schema; :attr:`differences` lists each.

    Attributes:
        table: The logic table.
        differences: Every ``SchemaDifference`` (physical table, aspect, expected, found).
    """


class ConsistencyCheckError(MigrationError):
    """Two row sources cannot be compared as asked (different primary keys, no common column).

    Attributes:
        table: The physical table concerned.
        data_source: Its data source.
    """


class CatchUpTimeoutError(MigrationError):
    """A catch-up pass did not reach the end of a source server's binlog before its deadline.

    Attributes:
        server: ``host:port`` of the server.
    """


class BackfillMismatchError(MigrationError):
    """A backfill batch's count or checksum differs between source and target after it was written.

    Attributes:
        table: The logic table.
        scan: The source physical table being copied (``ds.table``).
        high_water: The primary key the batch started after.
    """


# -- gray cut-over ----------------------------------------------------------------


class CutoverError(DdmError):
    """A statement cannot run as asked during a gray cut-over from a legacy database (docs/cutover.md#routing).

    Attributes:
        table: The logic table being cut over.
        cutover: The cut-over's name.
    """


class CutoverFencedError(CutoverError):
    """A write to a bucket whose transition is draining (paused), or sent by an instance whose config
    source was not confirmed recently; retryable: send it again in a few seconds.

    Attributes:
        table: The logic table written.
        cutover: The cut-over's name.
    """

    log_level = logging.INFO  # a pause the caller is told to retry, not a bug


# -- id generation -------------------------------------------------------------


class IdGenerationError(DdmError):
    """A global id could not be generated without risking a duplicate."""


class WorkerIdError(IdGenerationError, ValueError):
    """A worker id or bit layout is out of range."""


class IdCountError(IdGenerationError, ValueError):
    """``next_ids(n)`` was asked for a negative number of ids."""


class IdTypeError(IdGenerationError, TypeError):
    """An id generator got a value of the wrong type: a count that is no int, a clock reading that is no number."""


class ClockReadError(IdGenerationError):
    """An id generator's injected clock raised instead of returning milliseconds (the cause is chained).

    Attributes:
        clock: The clock, by name.
    """


class WorkerLeaseError(IdGenerationError):
    """A worker-id lease could not be taken or kept (docs/worker-leases.md).

    Attributes:
        namespace: The lease namespace.
    """


class NoFreeWorkerIdError(WorkerLeaseError):
    """Every worker id of a lease namespace is held by a live lease; start-up must stop."""


class WorkerLeaseLostError(WorkerLeaseError):
    """A leased worker id could not be renewed before it expired: its generator stops issuing ids.

    Attributes:
        worker_id: The worker id that was leased.
    """


class ClockMovedBackwardsError(IdGenerationError):
    """The clock moved back further than the generator is allowed to wait.

    Attributes:
        backward_ms: How far the clock went back.
        max_backward_ms: The largest step back the generator waits out.
    """

    # Set from the context by DdmError.__init__; declared for type checkers.
    backward_ms: int
    max_backward_ms: int

    def __init__(self, backward_ms: int, max_backward_ms: int) -> None:
        super().__init__(
            f"clock moved backwards by {backward_ms} ms, more than the "
            f"{max_backward_ms} ms the id generator waits out; refusing to "
            "generate ids that could repeat",
            backward_ms=backward_ms,
            max_backward_ms=max_backward_ms,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.backward_ms, self.max_backward_ms))


# -- installation ------------------------------------------------------------------


class MissingExtraError(DdmError, ImportError):
    """A feature's optional dependencies are not installed (pyproject.toml's extras).

    An ``ImportError`` too, so ``except ImportError`` around an optional import still works.

    Attributes:
        extra: The extra that installs them: ``pip install 'ddm-core[<extra>]'``.
        needed_by: What needs them, as the user called it (``ddm proxy``, ``ddm_core.metrics.install``).
        module: The module that could not be imported.
    """

    # Set from the context by DdmError.__init__; declared for type checkers.
    extra: str
    needed_by: str
    module: str

    def __init__(self, extra: str, needed_by: str, module: str) -> None:
        super().__init__(
            f"{needed_by} needs the {extra!r} extra: pip install 'ddm-core[{extra}]'",
            extra=extra,
            needed_by=needed_by,
            module=module,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.extra, self.needed_by, self.module))
