"""The Prometheus collector: reads counters when scraped, never on the statement path.

What it reads (docs/observability.md#metrics): the :class:`StatementRecorder`
the executors feed, and what the executors and routers keep anyway —
``Router.cache_info()``, ``Executor.pool_stats()``, ``Executor.slow_statements``,
``Executor.replica_status()``. Several executors may be watched: their figures
are summed per label set.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Iterable, Iterator

from ddm_core._extras import require_extra
from ddm_core.errors import ConfigRowError, SourceUnavailableError

require_extra("metrics", needed_by=__name__)  # before the imports below: one line naming the extra

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ddm_core.observe.routes import TableFigures, Thresholds, table_figures
from ddm_core.observe.shadow import ShadowRouter
from ddm_core.observe.statements import LATENCY_BUCKETS, MergeHighWater, StatementRecorder

if TYPE_CHECKING:
    from ddm_core.execute.executor import Executor

__all__ = ["DdmCollector"]

_BREAKER_STATES = ("closed", "open", "half-open")
_REPLICA_STATES = ("unknown", "healthy", "recovering", "lagging", "stopped", "unreachable")


class DdmCollector(Collector):
    """Every ``ddm_*`` metric, computed per scrape."""

    def __init__(self, recorder: StatementRecorder, thresholds: Thresholds = Thresholds()) -> None:
        self.recorder = recorder
        self.thresholds = thresholds
        self._executors: list[Executor] = []
        self._lock = threading.Lock()

    def watch(self, executor: Executor) -> None:
        with self._lock:
            if executor not in self._executors:
                self._executors.append(executor)

    def unwatch(self, executor: Executor) -> None:
        with self._lock:
            if executor in self._executors:
                self._executors.remove(executor)

    @property
    def executors(self) -> tuple[Executor, ...]:
        with self._lock:
            return tuple(self._executors)

    def describe(self) -> Iterable[Metric]:
        return []  # families depend on the traffic: no up-front description (and no collect at register)

    def collect(self) -> Iterator[Metric]:
        executors = self.executors
        node_counts: dict[str, int] = {}
        for ex in executors:
            for name, table in ex.config.tables.items():
                node_counts[name.lower()] = len(table.data_nodes)
        snapshot = self.recorder.snapshot()
        figures = table_figures(snapshot.shapes, node_counts, self.thresholds)
        yield from _statement_families(figures)
        errors = CounterMetricFamily("ddm_errors", "Statements that failed, by exception class",
                                     labels=["table", "data_source", "error"])  # fmt: skip
        for key, n in sorted(snapshot.errors.items(), key=lambda kv: (kv[0].table, kv[0].data_source, kv[0].error)):
            errors.add_metric([key.table, key.data_source, key.error], n)
        yield errors
        for name, doc, counts in (
            ("ddm_dual_writes", "A migration's dual-write units that ran at the new location", snapshot.dual_writes),
            ("ddm_dual_write_failures", "Dual-write units that failed or were skipped (catch-up repairs them)",
             snapshot.dual_write_failures),
        ):  # fmt: skip
            family = CounterMetricFamily(name, doc, labels=["table", "data_source"])
            for dual, n in sorted(counts.items(), key=lambda kv: (kv[0].table, kv[0].data_source)):
                family.add_metric([dual.table, dual.data_source], n)
            yield family
        yield from _merge_families(snapshot.merge_memory)
        yield from _route_families(figures)
        yield from _cache_families(executors)
        yield from _pool_families(executors)
        slow = CounterMetricFamily("ddm_slow_statements", "Statements at or above runtime.slowSqlMs")
        slow.add_metric([], sum(ex.slow_statements for ex in executors))
        yield slow
        yield from _replica_families(executors)
        yield from _shadow_families(executors)
        yield from _instance_families(executors)
        yield from _config_families(executors)


def _merge_families(marks: dict[str, MergeHighWater]) -> Iterator[Metric]:
    high = GaugeMetricFamily("ddm_merge_memory_high_water_bytes",
                             "Most bytes (estimated) one merge over the table held at once", labels=["table"])  # fmt: skip
    rows = GaugeMetricFamily("ddm_merge_memory_high_water_rows", "Rows held by that merge", labels=["table"])
    merges = CounterMetricFamily("ddm_merges", "Merged multi-unit results closed", labels=["table"])
    warned = CounterMetricFamily("ddm_merge_memory_warnings",
                                 "Merges that held more than runtime.mergeMemoryWarnMb", labels=["table"])  # fmt: skip
    for name, mark in sorted(marks.items()):
        high.add_metric([name], mark.bytes)
        rows.add_metric([name], mark.rows)
        merges.add_metric([name], mark.merges)
        warned.add_metric([name], mark.warnings)
    yield from (high, rows, merges, warned)


def _statement_families(figures: dict[str, TableFigures]) -> Iterator[Metric]:
    statements = CounterMetricFamily("ddm_statements", "Statements run, by logic table and route kind",
                                     labels=["table", "kind"])  # fmt: skip
    per_source = CounterMetricFamily("ddm_data_source_statements",
                                     "Statements that reached a data source, by logic table and route kind",
                                     labels=["table", "data_source", "kind"])  # fmt: skip
    latency = HistogramMetricFamily("ddm_statement_seconds", "Statement latency (execute to result)",
                                    labels=["table", "kind"])  # fmt: skip
    rows = CounterMetricFamily("ddm_rows_returned", "Rows returned, where known when execute returned",
                               labels=["table"])  # fmt: skip
    for name in sorted(figures):
        fig = figures[name]
        for kind in sorted(fig.by_kind):
            statements.add_metric([name, kind], fig.by_kind[kind])
            cumulative, buckets = 0, []
            for bound, n in zip((*LATENCY_BUCKETS, float("inf")), fig.buckets[kind]):
                cumulative += n
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), float(cumulative)))
            latency.add_metric([name, kind], buckets, fig.seconds[kind])
        for (source, kind), n in sorted(fig.by_source.items()):
            per_source.add_metric([name, source, kind], n)
        rows.add_metric([name], fig.rows)
    yield statements
    yield per_source
    yield latency
    yield rows


def _route_families(figures: dict[str, TableFigures]) -> Iterator[Metric]:
    nodes = CounterMetricFamily("ddm_route_node_statements",
                                "Single- and multi-node statements that reached each data node",
                                labels=["table", "node"])  # fmt: skip
    top = GaugeMetricFamily("ddm_route_top_share", "Share of the table's routed statements its busiest node got",
                            labels=["table", "node"])  # fmt: skip
    hot = GaugeMetricFamily("ddm_route_hot_shard", "1 when one node gets more than the hot-shard share",
                            labels=["table"])  # fmt: skip
    ratio = GaugeMetricFamily("ddm_full_route_ratio", "Full-route statements over all statements of the table",
                              labels=["table"])  # fmt: skip
    alarm = GaugeMetricFamily("ddm_full_route_alarm", "1 when the full-route ratio is above its threshold",
                              labels=["table"])  # fmt: skip
    for name in sorted(figures):
        fig = figures[name]
        if fig.node_count == 0:
            continue
        for node, n in sorted(fig.nodes.items()):
            nodes.add_metric([name, node], n)
        if fig.nodes:
            busiest = max(fig.nodes.items(), key=lambda item: (item[1], item[0]))[0]
            top.add_metric([name, busiest], fig.top_share)
        hot.add_metric([name], 1.0 if fig.hot_node is not None else 0.0)
        ratio.add_metric([name], fig.full_ratio)
        alarm.add_metric([name], 1.0 if fig.full_alarm else 0.0)
    yield from (nodes, top, hot, ratio, alarm)


def _cache_families(executors: tuple[Executor, ...]) -> Iterator[Metric]:
    routers = list({id(ex.router): ex.router for ex in executors}.values())  # executors may share one
    infos = [r.cache_info() for r in routers]
    for name, doc, value in (
        ("ddm_plan_cache_hits", "Plan cache hits", sum(i.hits for i in infos)),
        ("ddm_plan_cache_misses", "Plan cache misses (statements compiled)", sum(i.misses for i in infos)),
        ("ddm_fast_path_misses", "Point statements the general path answered", sum(i.fast_path_misses for i in infos)),
    ):
        family = CounterMetricFamily(name, doc)
        family.add_metric([], value)
        yield family
    size = GaugeMetricFamily("ddm_plan_cache_size", "Compiled statements in the plan cache")
    size.add_metric([], sum(i.size for i in infos))
    yield size
    maxsize = GaugeMetricFamily("ddm_plan_cache_maxsize", "Most compiled statements the plan cache keeps")
    maxsize.add_metric([], sum(i.maxsize for i in infos))
    yield maxsize


def _pool_families(executors: tuple[Executor, ...]) -> Iterator[Metric]:
    sums: dict[str, list[int]] = {}
    for ex in executors:
        for source, st in ex.pool_stats().items():
            acc = sums.setdefault(source, [0] * 7)
            for i, value in enumerate((st.idle, st.borrowed, st.open, st.max_size, st.borrows, st.timeouts, st.discards)):
                acc[i] += value
    gauges = [("ddm_pool_idle", "Idle pooled connections"), ("ddm_pool_borrowed", "Connections borrowed now"),
              ("ddm_pool_open", "Connections the pools hold"), ("ddm_pool_max_size", "Most connections the pools may hold")]  # fmt: skip
    counters = [("ddm_pool_borrows", "Connection checkouts"), ("ddm_pool_timeouts", "Connection acquire timeouts"),
                ("ddm_pool_discards", "Connections closed instead of reused")]  # fmt: skip
    families: list[GaugeMetricFamily | CounterMetricFamily] = [
        *(GaugeMetricFamily(n, d, labels=["data_source"]) for n, d in gauges),
        *(CounterMetricFamily(n, d, labels=["data_source"]) for n, d in counters),
    ]
    for source in sorted(sums):
        for family, value in zip(families, sums[source]):
            family.add_metric([source], value)
    yield from families


def _replica_families(executors: tuple[Executor, ...]) -> Iterator[Metric]:
    lag = GaugeMetricFamily("ddm_replica_lag_seconds", "Replica lag at the last check",
                            labels=["data_source", "endpoint"])  # fmt: skip
    state = GaugeMetricFamily("ddm_replica_state", "1 for the replica's current health state",
                              labels=["data_source", "endpoint", "state"])  # fmt: skip
    weight = GaugeMetricFamily("ddm_replica_weight_percent", "Share of its configured read weight a replica gets now",
                               labels=["data_source", "endpoint"])  # fmt: skip
    breaker = GaugeMetricFamily("ddm_breaker_state", "1 for the endpoint's current circuit-breaker state",
                                labels=["data_source", "endpoint", "state"])  # fmt: skip
    for ex in executors:
        for source, status in sorted(ex.replica_status().items()):
            for s in _BREAKER_STATES:
                breaker.add_metric([source, status.primary, s], 1.0 if status.primary_breaker == s else 0.0)
            for replica in status.replicas:
                if replica.lag_ms is not None:
                    lag.add_metric([source, replica.endpoint], replica.lag_ms / 1000.0)
                for s in _REPLICA_STATES:
                    state.add_metric([source, replica.endpoint, s], 1.0 if replica.state == s else 0.0)
                weight.add_metric([source, replica.endpoint], float(replica.percent))
                for s in _BREAKER_STATES:
                    breaker.add_metric([source, replica.endpoint, s], 1.0 if replica.breaker == s else 0.0)
    yield from (lag, state, weight, breaker)


def _shadow_families(executors: tuple[Executor, ...]) -> Iterator[Metric]:
    compared = CounterMetricFamily("ddm_shadow_compared", "Statements whose route was also computed on the shadow",
                                   labels=["table"])  # fmt: skip
    mismatches = CounterMetricFamily("ddm_shadow_mismatches", "Statements the shadow routed elsewhere or refused",
                                     labels=["table", "kind"])  # fmt: skip
    routers = {id(ex.router): ex.router for ex in executors if isinstance(ex.router, ShadowRouter)}
    totals: dict[str, int] = {}
    wrong: dict[tuple[str, str], int] = {}
    for router in routers.values():
        assert isinstance(router, ShadowRouter)
        counts = router.counts()
        for table, n in counts.compared.items():
            totals[table] = totals.get(table, 0) + n
        for key, n in counts.mismatches.items():
            wrong[key] = wrong.get(key, 0) + n
    for table in sorted(totals):
        compared.add_metric([table], totals[table])
    for (table, kind) in sorted(wrong):
        mismatches.add_metric([table, kind], wrong[table, kind])
    yield compared
    yield mismatches


def _instance_families(executors: tuple[Executor, ...]) -> Iterator[Metric]:
    """Each registered executor's standing in its configuration center's instance registry."""
    healthy = GaugeMetricFamily("ddm_instance_registered", "1 while the instance registry holds this instance's "
                                "record (0: the registry is unreachable)", labels=["instance_id", "role"])  # fmt: skip
    version = GaugeMetricFamily("ddm_instance_config_version", "The configuration center's version this instance "
                                "reports (-1: unknown)", labels=["instance_id", "role"])  # fmt: skip
    for ex in executors:
        if ex.instance is None:
            continue
        status = ex.instance.status
        labels = [status.record.instance_id, status.record.role]
        healthy.add_metric(labels, 1 if status.healthy else 0)
        version.add_metric(labels, -1 if status.record.version is None else status.record.version)
    yield healthy
    yield version


def _config_families(executors: tuple[Executor, ...]) -> Iterator[Metric]:
    """Each followed configuration: its version, whether its source answers, whether the snapshot serves."""
    labels = ["source"]
    version = GaugeMetricFamily("ddm_config_version", "The configuration version serving (the holder's number)",
                                labels=labels)  # fmt: skip
    reachable = GaugeMetricFamily("ddm_config_source_reachable", "1 while the last reload reached the configuration "
                                  "source (0: unreachable, the last version keeps serving)", labels=labels)  # fmt: skip
    snapshot = GaugeMetricFamily("ddm_config_from_snapshot", "1 while the version serving was read from the local "
                                 "snapshot (the source was unreachable at start)", labels=labels)  # fmt: skip
    age = GaugeMetricFamily("ddm_config_confirmed_age_seconds", "Seconds since the source last confirmed the "
                            "serving version (-1: never, e.g. started from the snapshot)", labels=labels)  # fmt: skip
    seen: set[int] = set()
    for ex in executors:
        holder = ex.router.holder
        if holder is None or id(holder) in seen:
            continue
        seen.add(id(holder))
        name = [str(getattr(holder.source, "name", None) or repr(holder.source))]
        error = holder.last_error
        unreachable = isinstance(error, SourceUnavailableError) and not isinstance(error, ConfigRowError)
        version.add_metric(name, holder.version)
        reachable.add_metric(name, 0 if unreachable else 1)
        snapshot.add_metric(name, 1 if holder.current.from_snapshot else 0)
        confirmed = holder.confirmed_at
        age.add_metric(name, -1 if confirmed == float("-inf") else round(time.monotonic() - confirmed, 3))
    yield from (version, reachable, snapshot, age)
