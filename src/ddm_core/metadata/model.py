"""The configuration model: immutable, validated, shaped for the router.

Everything here is frozen (``dataclass(frozen=True, slots=True)``, tuples,
:class:`~types.MappingProxyType`), so a :class:`ShardingConfig` can be shared by
every thread and swapped atomically on reload. Both input formats (ddm-core's
own YAML and ShardingSphere 5.x YAML) load into this one model.

What the router reads, cheaply:

* ``config.table(name)`` → :class:`ShardedTable` (case-insensitive), with its
  ordered ``data_nodes``, ``tables_by_source[ds]`` (physical tables of one data
  source, in order), ``database_strategy`` / ``table_strategy`` (kind, columns,
  algorithm object) and ``key_generation``;
* ``config.binding_group_of(name)``, ``config.is_broadcast(name)``,
  ``config.single_table(name)``, ``config.kind_of(name)``;
* ``config.data_sources[name]`` → :class:`DataSource` (primary, weighted
  replicas, pool settings) and ``config.default_data_source``;
* ``config.runtime`` → :class:`RuntimeSettings`;
* ``config.migration`` / ``config.cutover`` → :class:`MigrationRouting` /
  :class:`CutoverRouting`, the blocks a version published during a migration or
  a gray cut-over carries. They are defined here because a configuration holds
  them (and they hold configurations); :mod:`ddm_core.metadata.migration` and
  :mod:`ddm_core.metadata.cutover` read and build them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Mapping

from ddm_core.metadata.buckets import BucketState
from ddm_core.metadata.urls import Secret, format_url

__all__ = [
    "EMPTY",
    "freeze",
    "thaw",
    "Endpoint",
    "PoolSettings",
    "DataSource",
    "DataNode",
    "AlgorithmSpec",
    "StrategyKind",
    "Strategy",
    "NO_SHARDING",
    "KeyGeneratorSpec",
    "is_leased_worker",
    "KeyGeneration",
    "ShardedTable",
    "BindingGroup",
    "SingleTable",
    "RuntimeSettings",
    "ReadWriteSettings",
    "XaSettings",
    "ProxyUser",
    "PROXY_PRIVILEGES",
    "MaskRule",
    "MASK_KINDS",
    "ProxySettings",
    "ProxyTls",
    "CLIENT_CERT_MODES",
    "MetadataCenter",
    "TableKind",
    "ConfigOrigin",
    "ShardingConfig",
    "MigrationRouting",
    "CutoverRouting",
]

EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Any:
    # MappingProxyType is unhashable, so dataclasses refuse it as a plain default.
    return field(default_factory=lambda: EMPTY)


def freeze(value: Any) -> Any:
    """A deep read-only copy: dicts → MappingProxyType, lists/sets → tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, (set, frozenset)):
        items = [freeze(v) for v in value]
        try:
            return tuple(sorted(items))
        except TypeError:  # a YAML !!set of mixed types: any fixed order will do
            return tuple(sorted(items, key=lambda v: (type(v).__name__, repr(v))))
    return value


def thaw(value: Any) -> Any:
    """The inverse of :func:`freeze`: plain dicts and lists (for algorithm factories, dumps)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


# -- data sources -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One database server (a primary or a replica).

    Attributes:
        name: ``"ds_0"`` for a primary, ``"ds_0.replica[1]"`` for a native
            replica, or the ShardingSphere data-source name of a member.
        dialect: ``"mysql"``, ``"mariadb"``, ``"postgresql"`` or ``"sqlite"``.
        host, port: Network address (``None`` for SQLite).
        database: Schema name, or the SQLite file path (``":memory:"`` allowed).
        username: Login name (may have come from an environment variable).
        password: A :class:`Secret`; ``password.reveal()`` gives the value.
        options: URL query options (``useSSL=false``...), as written.
        weight: Read weight among the replicas of one data source (0 = no reads).
        props: Other connection properties from the source (pool class, driver).
    """

    name: str
    dialect: str
    host: str | None
    port: int | None
    database: str | None
    username: str | None = None
    password: Secret | None = None
    options: Mapping[str, str] = _empty()
    weight: int = 1
    props: Mapping[str, Any] = _empty()

    @property
    def url(self) -> str:
        """Normalized URL without credentials (reads back to the same endpoint)."""
        return format_url(self.dialect, self.host, self.port, self.database, self.options)


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """Connection pool sizing: max 20, min idle 5, acquire timeout 3 s (see docs/operations.md#connection-pools)."""

    max_size: int = 20
    min_idle: int = 5
    acquire_timeout_ms: int = 3000
    idle_timeout_ms: int = 600_000
    max_lifetime_ms: int = 1_800_000
    #: A connection idle longer than this is pinged before it is lent (HikariCP's ``aliveBypassWindowMs``).
    alive_bypass_window_ms: int = 500


@dataclass(frozen=True, slots=True)
class ReadWriteSettings:
    """Read/write splitting of a data source with replicas (docs/readwrite.md).

    Attributes:
        read_your_writes: ``"window"`` (reads after a write in the same context go
            to the primary for ``write_window_ms``), ``"gtid"`` (they go to a
            replica that has applied the write's GTID, else to the primary) or ``"off"``.
        write_window_ms: The ``window`` mode's window.
        gtid_wait_ms: How long a read in ``gtid`` mode waits for a replica to
            apply the write (``MASTER_GTID_WAIT``; 0: only checks) before it takes the primary.
        primary_read_cap_percent: Share of the primary's pool that reads forced
            there (read-your-writes, every replica out) may use; beyond it they
            degrade to a replica.
        max_lag_ms: Replica lag above which its read weight drops to 0.
        lag_check_interval_ms: How often the monitor checks each replica.
        recovery_step_percent: Weight a healthy-again replica regains per step.
        recovery_interval_ms: Time between two recovery steps.
        breaker_failures: Consecutive connection failures that open an endpoint's circuit breaker.
        breaker_reset_ms: Longest wait of an open breaker before its next probe (the backoff's cap).
        breaker_probe_ms: Wait from opening to the first probe; doubles after each failed probe,
            up to ``breaker_reset_ms``.
    """

    read_your_writes: str = "window"
    write_window_ms: int = 1000
    gtid_wait_ms: int = 0
    primary_read_cap_percent: int = 30
    max_lag_ms: int = 3000
    lag_check_interval_ms: int = 1000
    recovery_step_percent: int = 10
    recovery_interval_ms: int = 30_000
    breaker_failures: int = 5
    breaker_reset_ms: int = 10_000
    breaker_probe_ms: int = 250


@dataclass(frozen=True, slots=True)
class DataSource:
    """A logical data source: one primary and zero or more weighted replicas.

    Attributes:
        name: The name data nodes use (``ds_0``; a ShardingSphere read/write
            group name such as ``readwrite_ds``).
        primary: Where writes (and forced reads) go.
        replicas: Where reads go, each with its ``weight``.
        pool: Pool settings applied to each endpoint.
        load_balancer: ``"weight"``, ``"round_robin"`` or ``"random"`` — how reads
            pick a replica.
        transactional_reads: ``"primary"`` (default), ``"fixed"`` or ``"dynamic"``:
            where reads inside a transaction go.
        read_write: Read-your-writes, lag and breaker settings (used when there are replicas).
    """

    name: str
    primary: Endpoint
    replicas: tuple[Endpoint, ...] = ()
    pool: PoolSettings = PoolSettings()
    load_balancer: str = "weight"
    transactional_reads: str = "primary"
    read_write: ReadWriteSettings = ReadWriteSettings()

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        return (self.primary, *self.replicas)


# -- sharding ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class DataNode:
    """One physical table: ``data_source.table``."""

    data_source: str
    table: str

    def __str__(self) -> str:
        return f"{self.data_source}.{self.table}"


@dataclass(frozen=True, slots=True)
class AlgorithmSpec:
    """A named sharding algorithm: its type, its properties and the live object.

    Attributes:
        name: The name strategies refer to (ShardingSphere ``shardingAlgorithms``
            key, or a generated ``<table>.database`` / ``<table>.table``).
        type: Registry type (``"SLOTS"``, ``"INLINE"``, ``"HASH_MOD"``...).
        props: Read-only properties as configured.
        algorithm: The object from :func:`ddm_core.algorithms.create` (has
            ``precise(targets, values)``, ``range(...)``, ``supports_range``).
            Not part of equality: two equal specs build equal algorithms.
    """

    name: str
    type: str
    props: Mapping[str, Any] = _empty()
    algorithm: Any = field(default=None, compare=False, repr=False)


class StrategyKind(str, Enum):
    """How a strategy gets its sharding values (ShardingSphere's four kinds)."""

    STANDARD = "standard"  # one column
    COMPLEX = "complex"  # several columns, one algorithm
    HINT = "hint"  # values come from a hint, not from the SQL
    NONE = "none"  # no sharding at this level


@dataclass(frozen=True, slots=True)
class Strategy:
    """A database or table sharding strategy.

    Attributes:
        kind: See :class:`StrategyKind`.
        columns: Sharding columns (one for ``standard``, several for ``complex``,
            none for ``hint``/``none``).
        algorithm: The algorithm, ``None`` only for kind ``none``.
    """

    kind: StrategyKind = StrategyKind.NONE
    columns: tuple[str, ...] = ()
    algorithm: AlgorithmSpec | None = None

    @property
    def column(self) -> str | None:
        """The single sharding column of a standard strategy (else the first, or ``None``)."""
        return self.columns[0] if self.columns else None

    @property
    def sharder(self) -> Any:
        """The algorithm object (``None`` for kind ``none``)."""
        return self.algorithm.algorithm if self.algorithm is not None else None

    @property
    def is_sharded(self) -> bool:
        return self.kind is not StrategyKind.NONE


NO_SHARDING = Strategy()


@dataclass(frozen=True, slots=True)
class KeyGeneratorSpec:
    """A key generator definition.

    Attributes:
        name: Its name (ShardingSphere ``keyGenerators`` key, or generated).
        type: ``"SNOWFLAKE"``, ``"GENE"`` or ``"UUID"``.
        props: As configured (``worker-id``, ``gene-bits``, ``shard-column``...).
        worker_id: Fixed worker id, if configured (``None``: worker 0, or a lease when ``leased``).
        gene_bits: GENE only: bits of the shard key's slot carried in each id.
        shard_column: GENE only: the column whose slot the id carries.
    """

    name: str
    type: str
    props: Mapping[str, Any] = _empty()
    worker_id: int | None = None
    gene_bits: int | None = None
    shard_column: str | None = None

    @property
    def leased(self) -> bool:
        """``workerId: lease``: the process leases its worker id from the configuration's store
        (docs/worker-leases.md#workerid-lease-in-a-configuration)."""
        return is_leased_worker(self.props.get("worker-id"))


def is_leased_worker(value: Any) -> bool:
    """``workerId: lease`` (prop ``worker-id: lease``): the worker id is leased, not configured."""
    return isinstance(value, str) and value.strip().lower() == "lease"


@dataclass(frozen=True, slots=True)
class KeyGeneration:
    """Which column of a table gets generated keys, and by what."""

    column: str
    generator: KeyGeneratorSpec


@dataclass(frozen=True, slots=True)
class ShardedTable:
    """A sharded logic table.

    Attributes:
        name: Logic table name as configured.
        data_nodes: Every physical table, in configuration order.
        database_strategy: Picks data sources among ``data_sources``.
        table_strategy: Picks tables among ``tables_by_source[ds]`` of each
            chosen data source.
        key_generation: Generated key column, if any.
        auto: A ShardingSphere auto table: its ``table_strategy`` picks among
            ``all_tables`` (every physical table, in order) and the data source
            follows from ``node_of_table``; ``database_strategy`` is ``none``.
        columns: Column definitions from the native format (informational).
        auditors: ShardingSphere semantics for statements without a shard
            condition: the ``DML_SHARDING_CONDITIONS`` auditors of the table's
            ``auditStrategy`` (or the rule's ``defaultAuditStrategy``) refuse
            them, ``()`` (no auditor) lets them reach every shard. ``None``
            (the own format): the ``runtime`` switches decide.
        data_sources: Data sources holding nodes, in first-seen order (derived).
        tables_by_source: Data source → its physical tables, in order (derived).
        all_tables: Every physical table name, in node order (derived).
        node_of_table: Physical table name → node, for names unique across
            data sources (derived; what auto tables route through).
        sharding_columns: Database then table columns, without repeats (derived).
    """

    name: str
    data_nodes: tuple[DataNode, ...]
    database_strategy: Strategy = NO_SHARDING
    table_strategy: Strategy = NO_SHARDING
    key_generation: KeyGeneration | None = None
    auto: bool = False
    columns: Mapping[str, Any] = _empty()
    # Governance, not placement: left out of equality so a ShardingSphere file still equals its own-format dump.
    auditors: tuple[str, ...] | None = field(default=None, compare=False)
    data_sources: tuple[str, ...] = field(init=False, compare=False)
    tables_by_source: Mapping[str, tuple[str, ...]] = field(init=False, compare=False, repr=False)
    all_tables: tuple[str, ...] = field(init=False, compare=False, repr=False)
    node_of_table: Mapping[str, DataNode] = field(init=False, compare=False, repr=False)
    sharding_columns: tuple[str, ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "data_nodes", tuple(self.data_nodes))
        if not isinstance(self.columns, MappingProxyType):
            setattr_(self, "columns", freeze(self.columns))
        by_source: dict[str, list[str]] = {}
        counts: dict[str, int] = {}
        for node in self.data_nodes:
            by_source.setdefault(node.data_source, []).append(node.table)
            counts[node.table] = counts.get(node.table, 0) + 1
        cols: list[str] = []
        for col in (*self.database_strategy.columns, *self.table_strategy.columns):
            if col not in cols:
                cols.append(col)
        setattr_(self, "data_sources", tuple(by_source))
        setattr_(self, "tables_by_source", MappingProxyType({k: tuple(v) for k, v in by_source.items()}))
        setattr_(self, "all_tables", tuple(n.table for n in self.data_nodes))
        setattr_(
            self,
            "node_of_table",
            MappingProxyType({n.table: n for n in self.data_nodes if counts[n.table] == 1}),
        )
        setattr_(self, "sharding_columns", tuple(cols))

    @property
    def shard_count(self) -> int:
        """Number of physical tables."""
        return len(self.data_nodes)


@dataclass(frozen=True, slots=True)
class BindingGroup:
    """Logic tables sharded alike, so a join between them stays on one node pair.

    ``tables`` keeps the configured order; the first one is the primary table
    whose route the others follow (by node index).
    """

    tables: tuple[str, ...]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in (t.lower() for t in self.tables)


@dataclass(frozen=True, slots=True)
class SingleTable:
    """An unsharded table living in exactly one data source."""

    name: str
    data_source: str


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    """Runtime switches: what may go to every shard, how deep pages may go (docs/architecture.md#boundaries).

    Attributes:
        allow_full_route: May a statement without a shard key go to every shard?
        allow_dml_full_route: May an UPDATE / DELETE without a shard key change
            every shard? Off by default: such a statement is usually a bug.
        full_route_threshold: A table with more shards than this needs a shard key
            when ``allow_full_route`` is false.
        max_offset: Deepest OFFSET accepted across shards (use a cursor beyond).
        slow_sql_ms: Statements at least this slow are logged as slow (0: off, as ``proxy.slowSqlMs``).
        sql_comment: Prefix rewritten SQL with ``/* app=...,shard=... */``, so a
            shard's slow-query log names the application (docs/operations.md#sql-comments).
        app_name: The application in that comment and in metrics (``appName``).
        merge_memory_warn_mb: A merge that held more than this many megabytes at
            once is logged as a warning (docs/observability.md#merge-memory).
        cross_node_queries: Answer a SELECT whose joined or compared rows need not share a
            node by reading its parts and joining them on one node, instead of refusing it
            (docs/cross-node-queries.md).
        max_join_rows: The most rows such a statement may read from its parts; past it
            it fails, naming the part.
        max_join_memory_mb: The most megabytes of rows such a statement may move.
        insert_select_autocommit: An INSERT ... SELECT whose rows go to other shards may run
            batch by batch without XA when the caller has no transaction and the data sources
            have no XA (each batch committed on its own: docs/cross-node-queries.md#insert-select).
        one_unit_per_data_source: A SELECT reaching several tables of one data source reads them
            with one ``UNION ALL`` statement there, where the merged answer is provably the same
            (docs/architecture.md#one-unit-per-data-source); off: one statement per physical table.
    """

    allow_full_route: bool = True
    allow_dml_full_route: bool = False
    full_route_threshold: int = 8
    max_offset: int = 10_000
    slow_sql_ms: int = 200
    sql_comment: bool = False
    app_name: str | None = None
    merge_memory_warn_mb: int = 200
    cross_node_queries: bool = True
    max_join_rows: int = 1_000_000
    max_join_memory_mb: int = 512
    insert_select_autocommit: bool = False
    one_unit_per_data_source: bool = True


@dataclass(frozen=True, slots=True)
class XaSettings:
    """XA two-phase commit (``transaction_mode="xa"``; docs/xa.md).

    Attributes:
        log_data_source: Where the transaction log table ``ddm_xa_log`` lives
            (``None``: the default data source, else the first one).
        timeout_ms: Longest an XA transaction may run, first statement to commit decision.
        abandon_after_ms: Age after which recovery rolls back a prepared branch
            with no COMMIT decision; longer than ``timeout_ms``.
        max_concurrent: XA transactions one executor may have open at once.
        recover_on_start: Run recovery when an executor starts.
    """

    log_data_source: str | None = None
    timeout_ms: int = 10_000
    abandon_after_ms: int = 60_000
    max_concurrent: int = 8
    recover_on_start: bool = False


@dataclass(frozen=True, slots=True)
class ProxyUser:
    """One account of the MySQL-protocol proxy (``ddm proxy``; docs/proxy.md).

    Attributes:
        name: The user name clients log in with.
        password_hash: The ``mysql_native_password`` hash, ``*`` + 40 upper-case hex digits
            (``SELECT PASSWORD('...')`` on MySQL / MariaDB); never the password. ``None``: the
            user cannot log in with that plugin.
        rate_limit: Statements per second (0: no limit).
        unmask: Sees masked columns as they are.
        sha2_hash: The ``caching_sha2_password`` form, 64 lower-case hex digits of
            SHA256(SHA256(password)); ``None``: the user cannot log in with that plugin. At
            least one of the two hashes is set.
        require_cert_subject: The subject the user's client certificate must have, as written
            (``CN=app,O=Acme``; MySQL's ``REQUIRE SUBJECT``), checked besides the password;
            ``None``: no certificate asked of this user (docs/proxy.md#client-certificates).
        allow: What the user may run beyond reading and writing the logic database's tables, from
            :data:`PROXY_PRIVILEGES`, sorted (docs/proxy.md#privileges).
    """

    name: str
    password_hash: str | None = field(default=None, repr=False)
    rate_limit: int = 0
    unmask: bool = False
    sha2_hash: str | None = field(default=None, repr=False)
    require_cert_subject: str | None = None
    allow: tuple[str, ...] = ()


#: ``proxy.users[].allow`` values (docs/proxy.md#privileges): file functions and statements, other
#: sessions and server internals, server administration, tables outside the logic database.
PROXY_PRIVILEGES = ("file", "process", "admin", "schemas")


#: Mask kinds of ``proxy.masks`` (docs/proxy.md#masking).
MASK_KINDS = ("phone", "email", "full")


@dataclass(frozen=True, slots=True)
class MaskRule:
    """A result column shown masked to users without ``unmask`` (``ddm proxy``; docs/proxy.md#masking).

    Attributes:
        column: The result column name it applies to (case-insensitive).
        mask: ``phone`` (``138****1234``), ``email`` (``a***@example.com``) or ``full`` (``****``).
        table: Only in statements on this logic table (``None``: any statement).
    """

    column: str
    mask: str
    table: str | None = None


@dataclass(frozen=True, slots=True)
class ProxyTls:
    """TLS for the proxy's clients (``proxy.tls``; docs/proxy.md#tls).

    Attributes:
        cert: PEM certificate (chain) file the proxy presents.
        key: PEM private key file of ``cert``.
        required: Refuse clients that do not switch to TLS (else TLS is offered, not demanded).
        client_ca: PEM CA bundle that signs client certificates (``None``: none are asked for).
        client_cert: ``none``, ``optional`` (a certificate is asked for; one sent must verify against
            ``client_ca``) or ``required`` (a client without one fails the TLS handshake).
    """

    cert: str
    key: str
    required: bool = False
    client_ca: str | None = None
    client_cert: str = "none"


#: ``proxy.tls.clientCert`` values (docs/proxy.md#client-certificates).
CLIENT_CERT_MODES = ("none", "optional", "required")


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """The MySQL-protocol proxy (``ddm proxy``; docs/proxy.md).

    Attributes:
        users: Accounts allowed to log in (none: nobody can).
        workers: Threads running client statements at once (blocking driver calls).
        batch_rows: Rows read from a result and sent to the client per batch.
        shutdown_grace_ms: How long SIGTERM waits for running statements.
        table_rate_limits: Logic table → statements per second (all users together).
        masks: Result columns masked for users without ``unmask``.
        slow_sql_ms: Statements at least this slow go to the audit log (0: off, as ``runtime.slowSqlMs``).
        audit_log: The audit log file (JSON lines); ``None``: no audit log.
        audit_all: Every statement goes to the audit log, however fast (``auditAll``).
        inline_statements: Run a statement that goes to one data source on the event loop, without
            the hop to a worker thread (docs/proxy.md#how-it-is-built).
        relay: Pass such a statement's result from the data source to the client packet by packet,
            without decoding its rows (docs/proxy.md#relayed-results); ``False``: decoded and framed again.
        link_idle_ms: How long a connection of the event loop's own (the hot path's) may stay idle
            before it is closed (docs/proxy.md#the-hot-path).
        statement_timeout_ms: A client statement's deadline across all its units (0: none); past it
            its units are cancelled on their data sources and the client gets error 3024, as
            from MariaDB's ``max_statement_time`` (docs/proxy.md#limits-and-timeouts).
        tls: TLS for clients (``None``: plain connections only).
        transaction_mode: What a client's ``BEGIN`` opens: ``local`` or ``xa`` (docs/proxy.md#xa-transactions);
            a session changes its own with ``SET transaction_type``.
        max_connections: Client connections at once; one more is refused with error 1040.
        max_user_connections: Connections of one user at once (0: no limit of its own); error 1203.
        connect_timeout_ms: A client must have logged in this long after connecting, else it is dropped.
        net_read_timeout_ms: A client that has begun a packet and sends nothing more of it for this long
            is dropped, its session's transaction rolled back (MariaDB's ``net_read_timeout``).
        wait_timeout_ms: A logged-in client that sends no command for this long is dropped, its
            session's transaction rolled back (MariaDB's ``wait_timeout``; whole seconds: a session reads it
            as ``@@wait_timeout`` and may change its own with ``SET wait_timeout``).
        back_log: Connections the kernel queues before the proxy accepts them (``None``: 80 +
            ``max_connections`` / 5, as MySQL's ``back_log``).
        max_allowed_packet: The largest statement or packet a client may send, in bytes (error 1153).
        max_connect_errors: Handshakes in a row from one host that fail (malformed, timed out,
            dropped) before the host is blocked (error 1129); a login resets the count.
        host_block_ms: How long a blocked host stays blocked.
        failed_logins_before_delay: Failed logins in a row from one host before its next attempts
            are answered late (0: never delayed).
        failed_login_delay_max_ms: The longest such delay (it starts at one second and doubles).
    """

    users: tuple[ProxyUser, ...] = ()
    workers: int = 16
    batch_rows: int = 500
    shutdown_grace_ms: int = 10_000
    table_rate_limits: Mapping[str, int] = _empty()
    masks: tuple[MaskRule, ...] = ()
    slow_sql_ms: int = 200
    audit_log: str | None = None
    audit_all: bool = False
    inline_statements: bool = True
    relay: bool = True
    link_idle_ms: int = 2_000
    statement_timeout_ms: int = 3_000
    tls: ProxyTls | None = None
    transaction_mode: str = "local"
    max_connections: int = 151
    max_user_connections: int = 0
    connect_timeout_ms: int = 10_000
    net_read_timeout_ms: int = 30_000
    wait_timeout_ms: int = 28_800_000
    back_log: int | None = None
    max_allowed_packet: int = 16 * 1024 * 1024
    max_connect_errors: int = 100
    host_block_ms: int = 300_000
    failed_logins_before_delay: int = 3
    failed_login_delay_max_ms: int = 30_000

    @property
    def audit_threshold_ms(self) -> float:
        """Statements at least this slow are audited: ``0.0`` with ``audit_all``, ``inf`` (none) when
        ``slow_sql_ms`` is 0, which means off here as it does for ``runtime.slowSqlMs``."""
        if self.audit_all:
            return 0.0
        return float(self.slow_sql_ms) if self.slow_sql_ms > 0 else math.inf


@dataclass(frozen=True, slots=True)
class MetadataCenter:
    """Where the configuration is published and snapshotted (docs/configuration.md#metadata).

    Attributes:
        server: Config-center address (``config-center:8848``; ShardingSphere
            cluster mode's ``server-lists``).
        namespace: Namespace / environment in the config center.
        failover_snapshot: Local snapshot file a
            :class:`~ddm_core.metadata.reload.ConfigHolder` writes when it was
            given none.
    """

    server: str | None = None
    namespace: str | None = None
    failover_snapshot: str | None = None


class TableKind(str, Enum):
    """What a logic table name refers to."""

    SHARDED = "sharded"
    BROADCAST = "broadcast"
    SINGLE = "single"


@dataclass(frozen=True, slots=True)
class ConfigOrigin:
    """Where a configuration came from.

    Attributes:
        format: ``"native"`` or ``"shardingsphere"``.
        location: File path, ``"<string>"`` or ``"<dict>"``.
        digest: SHA-256 of the source text (of its JSON form for a dict).
    """

    format: str
    location: str
    digest: str


@dataclass(frozen=True, slots=True)
class ShardingConfig:
    """A complete, validated configuration.

    Attributes:
        data_sources: Name → :class:`DataSource` (configuration order).
        tables: Logic table name → :class:`ShardedTable` (configuration order).
        binding_groups: Binding groups, in configuration order.
        broadcast_tables: Tables copied to every data source.
        single_tables: Name → :class:`SingleTable` for explicitly placed tables.
        single_patterns: ShardingSphere ``!SINGLE`` wildcards (``ds_1.*``,
            ``*.*``): tables found in those data sources at run time are single.
        default_data_source: Where new single tables go (``None`` = none chosen).
        runtime: Runtime switches.
        xa: XA two-phase commit settings.
        proxy: The MySQL-protocol proxy's users and limits (``ddm proxy``).
        metadata: Config-center location and snapshot file, when configured.
        algorithms: Every named sharding algorithm.
        key_generators: Every named key generator.
        name: Logical database name (``databaseName``/``schemaName``/``name``).
        props: Other top-level properties from the source (ShardingSphere ``props``).
        migration: The migration this version announces (its ``migration:``
            block; docs/migration.md#dual-write), ``None`` outside a migration.
        cutover: The gray cut-over from a legacy database this version announces
            (its ``cutover:`` block; docs/cutover.md#routing), ``None`` outside one.
        origin: Where it came from (not part of equality).
        warnings: Things that load but look wrong (not part of equality).
    """

    data_sources: Mapping[str, DataSource]
    tables: Mapping[str, ShardedTable] = _empty()
    binding_groups: tuple[BindingGroup, ...] = ()
    broadcast_tables: tuple[str, ...] = ()
    single_tables: Mapping[str, SingleTable] = _empty()
    single_patterns: tuple[str, ...] = ()
    default_data_source: str | None = None
    runtime: RuntimeSettings = RuntimeSettings()
    xa: XaSettings = XaSettings()
    metadata: MetadataCenter = MetadataCenter()
    proxy: ProxySettings = ProxySettings()
    algorithms: Mapping[str, AlgorithmSpec] = _empty()
    key_generators: Mapping[str, KeyGeneratorSpec] = _empty()
    name: str | None = None
    props: Mapping[str, Any] = _empty()
    migration: MigrationRouting | None = None
    cutover: CutoverRouting | None = None
    origin: ConfigOrigin | None = field(default=None, compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)
    _tables_lc: Mapping[str, ShardedTable] = field(init=False, compare=False, repr=False)
    _binding_lc: Mapping[str, BindingGroup] = field(init=False, compare=False, repr=False)
    _broadcast_lc: frozenset[str] = field(init=False, compare=False, repr=False)
    _single_lc: Mapping[str, SingleTable] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        # Callers may pass plain dicts and lists; the stored model is read-only.
        for name in ("data_sources", "tables", "single_tables", "algorithms", "key_generators"):
            value = getattr(self, name)
            if not isinstance(value, MappingProxyType):
                setattr_(self, name, MappingProxyType(dict(value)))
        if not isinstance(self.props, MappingProxyType):
            setattr_(self, "props", freeze(self.props))
        for name in ("binding_groups", "broadcast_tables", "single_patterns", "warnings"):
            setattr_(self, name, tuple(getattr(self, name)))
        setattr_(self, "_tables_lc", MappingProxyType({k.lower(): v for k, v in self.tables.items()}))
        setattr_(
            self,
            "_binding_lc",
            MappingProxyType({t.lower(): g for g in self.binding_groups for t in g.tables}),
        )
        setattr_(self, "_broadcast_lc", frozenset(t.lower() for t in self.broadcast_tables))
        setattr_(self, "_single_lc", MappingProxyType({k.lower(): v for k, v in self.single_tables.items()}))

    # -- lookups (case-insensitive, like MySQL identifiers on most setups) --------

    def table(self, name: str) -> ShardedTable | None:
        """The sharded table called ``name``, or ``None``."""
        return self._tables_lc.get(name.lower())

    def binding_group_of(self, name: str) -> BindingGroup | None:
        """The binding group ``name`` belongs to, or ``None``."""
        return self._binding_lc.get(name.lower())

    def is_broadcast(self, name: str) -> bool:
        return name.lower() in self._broadcast_lc

    def single_table(self, name: str) -> SingleTable | None:
        """An explicitly placed single table, or ``None``."""
        return self._single_lc.get(name.lower())

    def kind_of(self, name: str) -> TableKind | None:
        """Sharded, broadcast, single (explicit) or ``None`` (unknown to the config)."""
        lc = name.lower()
        if lc in self._tables_lc:
            return TableKind.SHARDED
        if lc in self._broadcast_lc:
            return TableKind.BROADCAST
        if lc in self._single_lc:
            return TableKind.SINGLE
        return None

    def data_source(self, name: str) -> DataSource:
        """The data source called ``name``.

        Raises:
            KeyError: no such data source.
        """
        return self.data_sources[name]


# -- the blocks a version may carry (built by metadata/migration.py and metadata/cutover.py) ----------------


@dataclass(frozen=True)
class MigrationRouting:
    """A configuration version's migration block, with what the router derives from it.

    Attributes:
        name: The migration's name.
        phase: One of :data:`~ddm_core.metadata.migration.MIGRATION_PHASES`.
        read_shift_pct: Share of each moving table's moving slots whose reads go to the new owner.
        fence_after_s: Writes to moving slots are refused when the config source
            was not confirmed for this long (fail closed).
        target: The complete new configuration.
        reads: ``target`` with only the shifted slots at their new owners (derived).
        tables: Lower-case logic tables whose placement moves (slot tables and
            broadcast tables copied to new data sources; derived).
        shifted_slots: Per moving slot table (lower case), the shifted slots (derived).
        receiving: Per moving table (lower case), the data sources that receive
            rows (derived; the router refuses a write that would mix rows staying
            on such a data source with rows arriving there).
    """

    name: str
    phase: str
    read_shift_pct: float
    fence_after_s: float
    target: ShardingConfig
    reads: ShardingConfig = field(compare=False, repr=False)
    tables: frozenset[str] = field(compare=False)
    shifted_slots: Mapping[str, frozenset[int]] = field(compare=False, repr=False)
    receiving: Mapping[str, frozenset[str]] = field(default_factory=dict, compare=False, repr=False)

    def data_sources_with(self, base: ShardingConfig) -> Mapping[str, DataSource]:
        """``base``'s data sources plus those only the target has (built once per version)."""
        return _sources_with(self, base, self.target.data_sources)


@dataclass(frozen=True)
class CutoverRouting:
    """A configuration version's cut-over block, with what the router derives from it.

    Attributes:
        name: The cut-over's name.
        table: The logic table, as configured.
        legacy: The legacy data source (read like a ``dataSources`` entry).
        legacy_name: Its name in plans, metrics and errors.
        legacy_table: The legacy physical table.
        buckets: How many buckets the table's slots are grouped into.
        states: The state of each bucket.
        paused: Buckets whose writes are refused while a transition drains (reads follow the state).
        fence_after_s: Writes to the table are refused when the config source was
            not confirmed for this long (fail closed).
        slot_count: The table's slot count (derived).
        states_config: ``table`` placed on one node per state (``cut_<state>[_paused]``), never
            connected: routing a statement there names the states it touches (derived).
        legacy_config: ``table`` as one node ``legacy_name.legacy_table`` (derived).
        node_states: Data source of ``states_config`` → (state, paused) (derived).
    """

    name: str
    table: str
    legacy: DataSource
    legacy_name: str
    legacy_table: str
    buckets: int
    states: tuple[BucketState, ...] = field(repr=False)
    paused: frozenset[int]
    fence_after_s: float
    slot_count: int = field(compare=False)
    states_config: ShardingConfig = field(compare=False, repr=False)
    legacy_config: ShardingConfig = field(compare=False, repr=False)
    node_states: Mapping[str, tuple[BucketState, bool]] = field(compare=False, repr=False)

    def state_of(self, bucket: int) -> BucketState:
        return self.states[bucket]

    def buckets_in(self, state: BucketState) -> frozenset[int]:
        return frozenset(b for b, s in enumerate(self.states) if s is state)

    def data_sources_with(self, base: ShardingConfig) -> Mapping[str, DataSource]:
        """``base``'s data sources plus the legacy one (built once per version)."""
        return _sources_with(self, base, {self.legacy_name: self.legacy})


def _sources_with(owner: Any, base: ShardingConfig, extra: Mapping[str, DataSource]) -> Mapping[str, DataSource]:
    """``base``'s data sources plus those of ``extra`` it lacks, cached on ``owner`` (a frozen routing
    object of ``base``'s version) — built once per version, not per statement."""
    cached: tuple[ShardingConfig, Mapping[str, DataSource]] | None = owner.__dict__.get("_routing_sources")
    if cached is None or cached[0] is not base:
        cached = (base, _with_new_sources(base.data_sources, extra))
        object.__setattr__(owner, "_routing_sources", cached)  # a cache, not part of the value
    return cached[1]


def _with_new_sources(base: Mapping[str, DataSource], target: Mapping[str, DataSource]) -> Mapping[str, DataSource]:
    extra = {k: v for k, v in target.items() if k not in base}
    return {**base, **extra} if extra else base
