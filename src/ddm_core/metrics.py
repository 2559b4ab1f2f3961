"""Prometheus metrics for ddm-core (``pip install 'ddm-core[metrics]'``; docs/observability.md#metrics).

Nothing is registered when this module is imported, and prometheus-client is
imported only by :func:`install`::

    from ddm_core import metrics
    m = metrics.install(executor=executor)     # the default registry
    metrics.serve(m, port=9108)                # optional: /metrics over HTTP

Statement counters cost one hook call per statement; everything else is read
from counters the executor and router keep anyway, when ``/metrics`` is scraped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ddm_core._extras import require_extra
from ddm_core.observe.routes import Thresholds
from ddm_core.observe.statements import StatementRecorder

if TYPE_CHECKING:
    from ddm_core.execute.executor import Executor
    from ddm_core.observe.collector import DdmCollector

__all__ = ["Metrics", "install", "serve", "Thresholds"]


class Metrics:
    """One installed collector: the executors it watches and the registry it is registered in."""

    def __init__(self, collector: DdmCollector, registry: Any) -> None:
        self.collector = collector
        self.registry = registry

    @property
    def recorder(self) -> StatementRecorder:
        return self.collector.recorder

    def watch(self, executor: Executor) -> None:
        """Count ``executor``'s statements and report its pools, caches and replicas."""
        self.collector.watch(executor)
        executor.set_observer(self.collector.recorder)

    def unwatch(self, executor: Executor) -> None:
        executor.set_observer(None)
        self.collector.unwatch(executor)

    def uninstall(self) -> None:
        """Stop watching every executor and unregister the collector."""
        for executor in self.collector.executors:
            self.unwatch(executor)
        self.registry.unregister(self.collector)

    def text(self) -> str:
        """The registry in the Prometheus text format (what ``/metrics`` serves)."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode("utf-8")


def install(
    registry: Any = None, *, executor: Executor | None = None, thresholds: Thresholds | None = None
) -> Metrics:
    """Register ddm-core's collector in ``registry`` (default: prometheus-client's global one).

    Args:
        registry: A ``prometheus_client.CollectorRegistry``, or ``None`` for ``REGISTRY``.
        executor: An executor to watch now (more with :meth:`Metrics.watch`).
        thresholds: When the hot-shard and full-route alarms fire.

    Raises:
        MissingExtraError: prometheus-client is not installed (the ``metrics`` extra).
    """
    require_extra("metrics", needed_by="ddm_core.metrics.install")
    import prometheus_client

    from ddm_core.observe.collector import DdmCollector

    target = prometheus_client.REGISTRY if registry is None else registry
    collector = DdmCollector(StatementRecorder(), thresholds or Thresholds())
    target.register(collector)
    metrics = Metrics(collector, target)
    if executor is not None:
        metrics.watch(executor)
    return metrics


def serve(metrics: Metrics, *, port: int, addr: str = "127.0.0.1") -> Any:
    """Serve ``metrics.registry`` on ``http://addr:port/metrics`` from a daemon thread; returns the server.

    Call ``server.shutdown()`` to stop it.
    """
    from prometheus_client import start_http_server

    server, _thread = start_http_server(port, addr=addr, registry=metrics.registry)
    return server
