"""Observability: statement counters, route alarms, trace ids, shadow routing, health, lint (docs/observability.md).

Importing this package registers nothing and needs no prometheus-client;
:func:`ddm_core.metrics.install` builds the Prometheus collector.
"""

from __future__ import annotations

from ddm_core.observe.routes import TableFigures, Thresholds, table_figures
from ddm_core.observe.shadow import ShadowMismatch, ShadowRouter
from ddm_core.observe.statements import LATENCY_BUCKETS, StatementRecorder
from ddm_core.observe.trace import current_trace_id, trace

__all__ = [
    "LATENCY_BUCKETS",
    "StatementRecorder",
    "TableFigures",
    "Thresholds",
    "table_figures",
    "trace",
    "ShadowRouter",
    "ShadowMismatch",
    "current_trace_id",
]
