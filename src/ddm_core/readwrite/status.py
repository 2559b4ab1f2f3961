"""What :meth:`ddm_core.execute.Executor.replica_status` reports."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ReplicaStatus", "ReadStatus", "ReadCounters"]


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """One replica as the balancer sees it now.

    Attributes:
        endpoint: The replica's endpoint name.
        state: ``unknown``, ``healthy``, ``recovering``, ``lagging``, ``stopped`` or ``unreachable``.
        weight: Its configured read weight.
        weight_now: The weight reads use now (0 while out, a share while recovering).
        percent: ``weight_now`` as a share of ``weight`` (0–100).
        lag_ms: Lag at the last check (``None``: unknown).
        last_error: Why it was last taken out (kept after it recovers).
        breaker: Its circuit breaker: ``closed``, ``open`` or ``half-open``.
        gtid: The GTID position known applied there (``domain-sequence``), if known.
    """

    endpoint: str
    state: str
    weight: int
    weight_now: float
    percent: int
    lag_ms: float | None
    last_error: str | None
    breaker: str
    gtid: str | None = None


@dataclass(frozen=True, slots=True)
class ReadCounters:
    """Reads so far of one data source, by where they went and why.

    Attributes:
        replica_reads: Sent to a replica by the balancer.
        forced_primary: Sent to the primary by read-your-writes or because every replica was out.
        degraded: Forced to the primary but over the primary cap, so sent to a replica instead.
        over_cap: Over the cap with no replica to take them: the primary after all (never an error).
        retried: Failed because a replica went away and were run again elsewhere.
        gtid_waits: ``MASTER_GTID_WAIT`` calls made for read-your-writes.
    """

    replica_reads: int = 0
    forced_primary: int = 0
    degraded: int = 0
    over_cap: int = 0
    retried: int = 0
    gtid_waits: int = 0


@dataclass(frozen=True, slots=True)
class ReadStatus:
    """One data source with replicas.

    Attributes:
        data_source: Its name.
        primary: The primary's endpoint name and its breaker state.
        replicas: One :class:`ReplicaStatus` each.
        all_out: No replica can take reads: they go to the primary (subject to the cap).
        counters: Where its reads went so far.
    """

    data_source: str
    primary: str
    primary_breaker: str
    replicas: tuple[ReplicaStatus, ...]
    all_out: bool
    counters: ReadCounters
