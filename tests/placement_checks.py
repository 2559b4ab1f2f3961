"""Checks that two configuration versions place data alike, independent of ddm_core.metadata.placement.

The reload tests use these to judge what the holder accepted: on the model
(nodes, strategies, bindings, broadcast / single tables, default data source)
and by routing sample keys through both versions.
"""

from __future__ import annotations

from pathlib import Path

from ddm_core import Router
from ddm_core.errors import DdmError
from ddm_core.metadata import ShardingConfig

ROOT = Path(__file__).resolve().parents[1]
# The native-format configurations whose truncations and rewrites the reload tests replay.
NATIVE_CONFIGS = [
    ROOT / "examples" / "orders.yaml",
    ROOT / "tests" / "configs" / "native_orders.yaml",
    ROOT / "tests" / "configs" / "native_app_block.yaml",
    ROOT / "tests" / "configs" / "router_ranges.yaml",
]


def _bound_to(config: ShardingConfig, name: str) -> str:
    group = config.binding_group_of(name)
    return (group.tables[0] if group is not None else name).lower()


def _route(router: Router, sql: str, key: int, n: int) -> object:
    try:
        return router.route(sql, [key] * n).tables
    except DdmError as exc:
        return type(exc)


def assert_same_placement(original: ShardingConfig, candidate: ShardingConfig, keys: range = range(64)) -> None:
    """Every table ``original`` places lives in ``candidate`` exactly where it did."""
    for name, table in original.tables.items():
        other = candidate.table(name)
        assert other is not None, f"sharded table {name!r} is gone"
        assert other.data_nodes == table.data_nodes, f"{name}: data nodes moved"
        assert other.database_strategy == table.database_strategy, f"{name}: database strategy changed"
        assert other.table_strategy == table.table_strategy, f"{name}: table strategy changed"
        gene = table.key_generation
        if gene is not None and gene.generator.type.upper() == "GENE":  # gene ids carry the slot
            assert other.key_generation == gene, f"{name}: gene key changed"
        assert _bound_to(candidate, name) == _bound_to(original, name), f"{name}: binding changed"
    for name in original.broadcast_tables:
        assert candidate.is_broadcast(name), f"broadcast table {name!r} is gone"
    if original.broadcast_tables:
        assert set(candidate.data_sources) == set(original.data_sources), "broadcast copies moved"
    for name, single in original.single_tables.items():
        other_single = candidate.single_table(name)
        assert other_single is not None and other_single.data_source == single.data_source, name
    assert candidate.default_data_source == original.default_data_source
    for name, ds in original.data_sources.items():
        if name in candidate.data_sources:
            assert candidate.data_sources[name].primary.database == ds.primary.database, name
    # And by behaviour: the same keys reach the same nodes (or fail alike).
    before, after = Router(original), Router(candidate)
    for name, table in original.tables.items():
        columns = table.sharding_columns
        if not columns:
            continue
        sql = f"SELECT * FROM {name} WHERE " + " AND ".join(f"{c} = %s" for c in columns)
        for key in keys:
            assert _route(after, sql, key, len(columns)) == _route(before, sql, key, len(columns)), (
                f"{name}: {columns} = {key} routes elsewhere"
            )
