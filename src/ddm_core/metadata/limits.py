"""Every limit a configuration is held to: document bounds, sizes and the range of each numeric field.

One table for code and documentation alike: the readers check each numeric
field against its :class:`IntRange` in :data:`RANGES`, the document guard
(:mod:`ddm_core.metadata.bounds`) checks the ``MAX_*`` document bounds, and
``docs/config-limits.md`` lists the same figures (a test keeps the two in step).

Why limits at all: a configuration can come from a file anyone may edit, a
config center or a generated dict. Without bounds, one wrong digit turns into
hours of expansion (``tablePerShard: 2147483648``), exhausted memory (an alias
bomb) or a value that loads and then breaks every connection with a driver
message naming no field (``acquireTimeoutMs: 1000000000000``). Each bound here
is far above anything a working deployment needs, and close enough that
checking a file stays a matter of milliseconds.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ddm_core._fast.id_layout import DEFAULT_EPOCH_MS
from ddm_core.metadata.int_range import MAX_INT_DIGITS, IntRange, show_int
from ddm_core.metadata.model import PoolSettings, ProxySettings, ReadWriteSettings, RuntimeSettings, XaSettings
from ddm_core.metadata.urls import PORTS

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_DEPTH",
    "MAX_ALIASES",
    "MAX_VALUES",
    "MAX_INT_DIGITS",
    "MAX_DATA_SOURCES",
    "MAX_LOGIC_TABLES",
    "MAX_SHARDS",
    "MAX_TABLE_NODES",
    "MAX_CONFIG_NAMES",
    "MAX_NAMES_SHOWN",
    "PROP_INT_MIN",
    "PROP_INT_MAX",
    "IntRange",
    "RANGES",
    "KEY_GENERATOR_RANGES",
    "PROXY_LIMIT_FIELDS",
    "show_int",
    "shown_names",
    "too_many",
]

# -- the document ----------------------------------------------------------------------------

#: Largest configuration text, in bytes of UTF-8 (a mapping source: its strings together).
MAX_DOCUMENT_BYTES = 1 << 20
#: Deepest nesting of mappings and lists (a real file needs about 10).
MAX_DEPTH = 64
#: Most alias uses (``*name``) in one document.
MAX_ALIASES = 1_000
#: Most values (scalars, mappings and lists) once every alias is expanded.
MAX_VALUES = 100_000
# MAX_INT_DIGITS, the most digits of an integer, is defined with IntRange (int_range.py), which shows
# a longer refused value by its length.

# -- what a configuration builds -------------------------------------------------------------

#: Most data sources a configuration defines.
MAX_DATA_SOURCES = 4_096
#: Most logic tables a configuration shards (``tables`` and ``autoTables`` together).
MAX_LOGIC_TABLES = 4_096
#: Most data sources (database shards) one logic table spreads over.
MAX_SHARDS = 1_024
#: Most physical tables of one logic table (one per slot at the largest slot count).
MAX_TABLE_NODES = 65_536
#: Most names inline expressions and lists may give in the whole configuration
#: (physical tables and data-source lists together, counted as they are expanded).
MAX_CONFIG_NAMES = 262_144
#: Names listed in one message before "+N more".
MAX_NAMES_SHOWN = 8

#: Every integer prop of a sharding algorithm fits a signed 64-bit integer, as
#: in ShardingSphere (each algorithm narrows its own props further).
PROP_INT_MIN = -(1 << 63)
PROP_INT_MAX = (1 << 63) - 1


_POOL = PoolSettings()
_RUNTIME = RuntimeSettings()
_XA = XaSettings()
_PROXY = ProxySettings()
_RW = ReadWriteSettings()
_GENE_WORKER_BITS = 6  # GeneIdGenerator's default
_MAX_BACKWARD_MS = 5  # the id generators' default
_DAY_MS = 86_400_000
#: ``runtime.slowSqlMs`` and ``proxy.slowSqlMs`` share one meaning of 0, off: the proxy audits every
#: statement with ``proxy.auditAll: true`` instead (docs/proxy.md#audit-log).
_SLOW_SQL_NOTE = "at most one hour; 0 is off in both sections"

#: Field → range, by the field's name in ddm-core's own format (ShardingSphere
#: spellings map to the same entries; see docs/config-limits.md).
RANGES: Mapping[str, IntRange] = {
    "pool.maxSize": IntRange(1, 1_000, _POOL.max_size, note="connections one endpoint's pool may hold"),
    "pool.minIdle": IntRange(0, 1_000, _POOL.min_idle, note="idle connections kept open; at most maxSize"),
    "pool.acquireTimeoutMs": IntRange(
        1, 600_000, _POOL.acquire_timeout_ms, unit="ms", note="longest wait for a free connection: 10 minutes"
    ),
    "pool.idleTimeoutMs": IntRange(
        1_000, _DAY_MS, _POOL.idle_timeout_ms, off=True, unit="ms", note="at most one day"
    ),
    "pool.maxLifetimeMs": IntRange(
        1_000, _DAY_MS, _POOL.max_lifetime_ms, off=True, unit="ms",
        note="connections are recycled in whole seconds, so below 1 s every checkout would reconnect",
    ),  # fmt: skip
    "pool.aliveBypassWindowMs": IntRange(
        0, 3_600_000, _POOL.alive_bypass_window_ms, unit="ms",
        note="a connection idle longer is pinged before it is lent; 0 pings every checkout",
    ),  # fmt: skip
    "weight": IntRange(0, 10_000, 1, note="read weight of an endpoint; 0 takes it out of reads"),
    "tables.shardCount": IntRange(
        1, MAX_SHARDS, None, note="must equal the number of databases; defaults to it"
    ),
    "tables.tablePerShard": IntRange(1, MAX_TABLE_NODES, 1, note="shardCount × tablePerShard is at most 65536"),
    "tables.slotCount": IntRange(2, 65_536, 1_024, note="a power of two (slot bits 1 to 16)"),
    "runtime.fullRouteThreshold": IntRange(
        0, MAX_TABLE_NODES, _RUNTIME.full_route_threshold, note="a shard count; no table has more shards"
    ),
    "runtime.maxOffset": IntRange(
        0, 10_000_000, _RUNTIME.max_offset, note="every shard returns OFFSET + LIMIT rows to the merge"
    ),
    "runtime.slowSqlMs": IntRange(1, 3_600_000, _RUNTIME.slow_sql_ms, off=True, unit="ms", note=_SLOW_SQL_NOTE),
    "runtime.mergeMemoryWarnMb": IntRange(1, 1_048_576, _RUNTIME.merge_memory_warn_mb,
                                          note="megabytes; at most 1 TiB"),  # fmt: skip
    "runtime.maxJoinRows": IntRange(1, 1_000_000_000, _RUNTIME.max_join_rows,
                                    note="rows a cross-node statement reads from its parts"),  # fmt: skip
    "runtime.maxJoinMemoryMb": IntRange(1, 1_048_576, _RUNTIME.max_join_memory_mb,
                                        note="megabytes of rows a cross-node statement moves"),  # fmt: skip
    "url.port": PORTS,
    "xa.timeoutMs": IntRange(100, 3_600_000, _XA.timeout_ms, unit="ms", note="at most one hour of held locks"),
    "xa.abandonAfterMs": IntRange(
        1_000, _DAY_MS, _XA.abandon_after_ms, unit="ms", note="at most one day; must exceed xa.timeoutMs"
    ),
    "xa.maxConcurrent": IntRange(1, 1_000, _XA.max_concurrent, note="open XA transactions per executor"),
    "proxy.workers": IntRange(1, 1_000, _PROXY.workers, note="threads running client statements at once"),
    "proxy.batchRows": IntRange(1, 100_000, _PROXY.batch_rows, note="rows sent to the client per batch"),
    "proxy.shutdownGraceMs": IntRange(
        0, 3_600_000, _PROXY.shutdown_grace_ms, unit="ms", note="SIGTERM waits this long for running statements"
    ),
    "proxy.linkIdleMs": IntRange(
        10, 3_600_000, _PROXY.link_idle_ms, unit="ms", note="an idle connection of the event loop's own is closed"
    ),
    "proxy.statementTimeoutMs": IntRange(
        1, _DAY_MS, _PROXY.statement_timeout_ms, off=True, unit="ms", note="a client statement's deadline (error 3024)"
    ),
    "proxy.users.rateLimit": IntRange(1, 1_000_000, 0, off=True, note="statements per second of one user"),
    "proxy.tableRateLimits": IntRange(1, 1_000_000, None, note="statements per second on one logic table"),
    "proxy.maxConnections": IntRange(1, 100_000, _PROXY.max_connections, note="client connections at once"),
    "proxy.maxUserConnections": IntRange(1, 100_000, 0, off=True, note="connections of one user at once"),
    "proxy.connectTimeoutMs": IntRange(
        100, 3_600_000, _PROXY.connect_timeout_ms, unit="ms", note="from connecting to being logged in"
    ),
    "proxy.netReadTimeoutMs": IntRange(
        100, 3_600_000, _PROXY.net_read_timeout_ms, unit="ms", note="a wait for more of a begun packet"
    ),
    "proxy.waitTimeoutMs": IntRange(
        1_000, 31_536_000_000, _PROXY.wait_timeout_ms, unit="ms", note="a logged-in client's wait between commands"
    ),
    "proxy.backLog": IntRange(1, 65_535, None, note="queued connections; default 80 + maxConnections / 5"),
    "proxy.maxAllowedPacket": IntRange(
        1_024, 1_073_741_824, _PROXY.max_allowed_packet, note="bytes; the largest statement a client may send"
    ),
    "proxy.maxConnectErrors": IntRange(1, 1_000_000, _PROXY.max_connect_errors,
                                       note="failed handshakes in a row before a host is blocked"),  # fmt: skip
    "proxy.hostBlockMs": IntRange(1_000, _DAY_MS, _PROXY.host_block_ms, unit="ms", note="how long a host stays blocked"),
    "proxy.failedLoginsBeforeDelay": IntRange(
        1, 1_000, _PROXY.failed_logins_before_delay, off=True, note="failed logins in a row before answers are delayed"
    ),
    "proxy.failedLoginDelayMaxMs": IntRange(
        1_000, 3_600_000, _PROXY.failed_login_delay_max_ms, unit="ms", note="the longest delay of a login answer"
    ),
    "proxy.slowSqlMs": IntRange(1, 3_600_000, _PROXY.slow_sql_ms, off=True, unit="ms", note=_SLOW_SQL_NOTE),
    "readWrite.writeWindowMs": IntRange(
        1, 600_000, _RW.write_window_ms, unit="ms", note="reads after a write stay on the primary this long"
    ),
    "readWrite.gtidWaitMs": IntRange(0, 10_000, _RW.gtid_wait_ms, unit="ms", note="a read waits at most this long"),
    "readWrite.primaryReadCapPercent": IntRange(
        0, 100, _RW.primary_read_cap_percent, note="share of the primary's pool forced reads may use"
    ),
    "readWrite.maxLagMs": IntRange(100, _DAY_MS, _RW.max_lag_ms, unit="ms", note="lag that takes a replica out"),
    "readWrite.lagCheckIntervalMs": IntRange(
        100, 600_000, _RW.lag_check_interval_ms, unit="ms", note="one check per replica per interval"
    ),
    "readWrite.recoveryStepPercent": IntRange(1, 100, _RW.recovery_step_percent, note="100: back at once"),
    "readWrite.recoveryIntervalMs": IntRange(
        0, _DAY_MS, _RW.recovery_interval_ms, unit="ms", note="time between two recovery steps"
    ),
    "readWrite.breakerFailures": IntRange(1, 1_000, _RW.breaker_failures, note="consecutive connection failures"),
    "readWrite.breakerResetMs": IntRange(
        100, _DAY_MS, _RW.breaker_reset_ms, unit="ms", note="longest wait between two probes"
    ),
    "readWrite.breakerProbeMs": IntRange(
        10, _DAY_MS, _RW.breaker_probe_ms, unit="ms", note="first wait before a probe; at most breakerResetMs"
    ),
}

#: The ``proxy:`` section's connection limits (docs/proxy.md#security-model): attribute → field. Their
#: ranges are ``RANGES["proxy.<field>"]``; the reader (``native/proxy.py``) and the writer (``dump.py``)
#: both go through this list.
PROXY_LIMIT_FIELDS: Mapping[str, str] = {
    "max_connections": "maxConnections", "max_user_connections": "maxUserConnections",
    "connect_timeout_ms": "connectTimeoutMs", "net_read_timeout_ms": "netReadTimeoutMs",
    "wait_timeout_ms": "waitTimeoutMs", "back_log": "backLog",
    "max_allowed_packet": "maxAllowedPacket",
    "max_connect_errors": "maxConnectErrors", "host_block_ms": "hostBlockMs",
    "failed_logins_before_delay": "failedLoginsBeforeDelay", "failed_login_delay_max_ms": "failedLoginDelayMaxMs",
}  # fmt: skip

#: Key generator prop → range (ddm-core's ``keyGenerator`` fields ``workerId``,
#: ``geneBits``... are these props). GENE ids also need
#: ``worker-id < 2 ** worker-bits`` and ``worker-bits + gene-bits <= 21``.
KEY_GENERATOR_RANGES: Mapping[str, IntRange] = {
    "worker-id": IntRange(0, 1_023, 0, note="SNOWFLAKE: 10 worker bits; GENE: below 2 ** worker-bits"),
    "gene-bits": IntRange(1, 16, None, note="GENE: the table's slot bits (its default)"),
    "worker-bits": IntRange(0, 20, _GENE_WORKER_BITS, note="GENE: worker-bits + gene-bits at most 21"),
    "max-backward-ms": IntRange(0, 60_000, _MAX_BACKWARD_MS, unit="ms", note="longest clock step back waited out"),
    "epoch-ms": IntRange(
        0, 4_102_444_800_000, DEFAULT_EPOCH_MS, unit="ms", note="Unix ms, before 2100-01-01"
    ),
    "max-vibration-offset": IntRange(0, 4_095, 0, note="ShardingSphere SNOWFLAKE: below the 4096 sequence values"),
    "max-tolerate-time-difference-milliseconds": IntRange(
        0, 60_000, 10, unit="ms", note="ShardingSphere SNOWFLAKE spelling of max-backward-ms"
    ),
}


def shown_names(names: Iterable[str], limit: int = MAX_NAMES_SHOWN) -> str:
    """``"a, b, c"``, or the first ``limit`` names and ``"(+N more)"``; ``"none"`` when empty."""
    items = list(names)
    if not items:
        return "none"
    text = ", ".join(items[:limit])
    return text + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def too_many(count: int, limit: int, what: str, path: str, problems: Any) -> bool:
    """Record a problem and return ``True`` when ``count`` exceeds ``limit`` (checked before building)."""
    if count <= limit:
        return False
    problems.add(path or "<root>", f"defines {count} {what}; a configuration has at most {limit}", count)
    return True
