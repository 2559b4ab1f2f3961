"""Per-table figures from the recorder's shapes: statements by kind, route distribution, the two alarms.

Worked out at read time (docs/observability.md#route-distribution):

* **hot shard** — among a sharded table's single- and multi-node statements,
  one data node received more than ``hot_share`` (30 %) of them, and more than
  twice its fair share (with 4 nodes a uniform load is already 25 %, so 30 %
  would fire on noise);
* **full-route ratio** — statements that went to every node of the table
  (kind ``full``) over all its statements; the alarm is above ``full_ratio``
  (0.5 %).

Both need ``min_statements`` (100) statements on the table first: three
statements are no distribution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ddm_core.observe.statements import LATENCY_BUCKETS, NO_TABLE, Shape

__all__ = ["Thresholds", "TableFigures", "table_figures"]

_DISTRIBUTED = ("single", "multi")


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When the two route alarms fire."""

    hot_share: float = 0.30
    full_ratio: float = 0.005
    min_statements: int = 100


@dataclass(slots=True)
class TableFigures:
    """Everything counted for one logic table."""

    table: str
    by_kind: dict[str, int] = field(default_factory=dict)
    by_source: dict[tuple[str, str], int] = field(default_factory=dict)  # (data source, kind) -> statements
    nodes: dict[str, int] = field(default_factory=dict)  # data node -> single/multi statements reaching it
    rows: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # kind -> latency sum
    buckets: dict[str, list[int]] = field(default_factory=dict)  # kind -> per-bucket counts (not cumulative)
    node_count: int = 0  # data nodes of a sharded table (0: not sharded)
    hot_node: str | None = None
    top_share: float = 0.0
    full_ratio: float = 0.0
    full_alarm: bool = False

    @property
    def statements(self) -> int:
        return sum(self.by_kind.values())


def table_figures(
    shapes: tuple[Shape, ...], node_counts: Mapping[str, int], thresholds: Thresholds = Thresholds()
) -> dict[str, TableFigures]:
    """Per logic table (as the plans name it), its figures and alarms.

    Args:
        shapes: From :meth:`StatementRecorder.snapshot`.
        node_counts: Sharded logic table (lower case) → its number of data nodes.
    """
    out: dict[str, TableFigures] = {}
    for shape in shapes:
        entries = shape.tables or ((NO_TABLE, ()),)
        for name, nodes in entries:
            fig = out.get(name)
            if fig is None:
                fig = out[name] = TableFigures(name, node_count=node_counts.get(name.lower(), 0))
            fig.by_kind[shape.kind] = fig.by_kind.get(shape.kind, 0) + shape.count
            for source in shape.sources:
                key = (source, shape.kind)
                fig.by_source[key] = fig.by_source.get(key, 0) + shape.count
            fig.rows += shape.rows
            fig.seconds[shape.kind] = fig.seconds.get(shape.kind, 0.0) + shape.seconds
            buckets = fig.buckets.setdefault(shape.kind, [0] * (len(LATENCY_BUCKETS) + 1))
            for i, n in enumerate(shape.buckets):
                buckets[i] += n
            if shape.kind in _DISTRIBUTED:
                for node in nodes:
                    fig.nodes[node] = fig.nodes.get(node, 0) + shape.count
    for fig in out.values():
        _alarms(fig, thresholds)
    return out


def _alarms(fig: TableFigures, thresholds: Thresholds) -> None:
    if fig.node_count == 0:
        return  # broadcast, single or unknown tables have no distribution to watch
    total = fig.statements
    fig.full_ratio = fig.by_kind.get("full", 0) / total if total else 0.0
    fig.full_alarm = total >= thresholds.min_statements and fig.full_ratio > thresholds.full_ratio
    routed = sum(fig.by_kind.get(k, 0) for k in _DISTRIBUTED)
    if not fig.nodes or routed == 0:
        return
    node, top = max(fig.nodes.items(), key=lambda item: (item[1], item[0]))
    fig.top_share = top / routed
    fair = 1.0 / fig.node_count
    if routed >= thresholds.min_statements and fig.top_share > max(thresholds.hot_share, 2 * fair):
        fig.hot_node = node
