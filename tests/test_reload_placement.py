"""A hot reload never changes where data lives; a migration step may, through publish().

Every kind of placement change is refused with a PlacementChangeError naming
the table and what moved while the serving version stays; runtime, pool,
replica and weight changes and new tables go through. Truncated files (cut
at every line, and mid-line) and reordered files never make the holder serve
a version that places data differently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ddm_core import load_config
from ddm_core.errors import ConfigError, ConfigValidationError, PlacementChangeError
from ddm_core.metadata import ConfigHolder, StaticSource
from ddm_core.metadata.placement import placement_changes
from placement_checks import NATIVE_CONFIGS, ROOT, assert_same_placement

ORDERS = (ROOT / "examples" / "orders.yaml").read_text()
_ITEM = (
    "  - logicTable: t_order_item\n"
    "    bindTo: t_order              # same nodes as t_order: joins on user_id stay on one node pair\n"
    "    keyGenerator: {column: item_id, type: snowflake}\n"
)


def edited(text: str, *pairs: tuple[str, str]) -> str:
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new)
    return text


def holder_of(text: str) -> tuple[ConfigHolder, StaticSource]:
    source = StaticSource(text, name="orders.yaml")
    return ConfigHolder(source, check_env=False), source


# (what moves, edits, words the error must contain)
MOVES = [
    ("slot map", [('ds_0: "0-255"\n      ds_1: "256-511"', 'ds_0: "256-511"\n      ds_1: "0-255"')],
     ["table 't_order'", "database algorithm slots", "ds_0: 0-255", "ds_0: 256-511"]),
    ("tables per shard", [("tablePerShard: 4", "tablePerShard: 2")],
     ["table 't_order'", "data nodes", "(16) ->", "table algorithm sharding-count: 4 -> 2"]),
    ("sharding column", [("tableKey: user_id", "tableKey: order_id")],
     ["table 't_order'", "table sharding columns: [user_id] -> [order_id]"]),
    ("gene key", [("type: gene, shardColumn: user_id", "type: snowflake")],
     ["table 't_order'", "gene key: order_id carries 10 slot bits of user_id -> (not set)"]),
    ("bound table removed", [(_ITEM, "")], ["table 't_order_item'", "kind: sharded -> (not configured)"]),
    ("sharded table made broadcast", [(_ITEM, ""), ("[t_dict_region]", "[t_dict_region, t_order_item]")],
     ["table 't_order_item'", "kind: sharded -> broadcast"]),
    ("broadcast table removed", [("broadcastTables: [t_dict_region]", "broadcastTables: []")],
     ["table 't_dict_region'", "kind: broadcast -> (not configured)"]),
    ("data source added under a broadcast table",
     [("  ds_3: sqlite:///data/ds_3.db\n", "  ds_3: sqlite:///data/ds_3.db\n  ds_4: sqlite:///data/ds_4.db\n")],
     ["table 't_dict_region'", "data sources: [ds_0, ds_1, ds_2, ds_3] -> [ds_0, ds_1, ds_2, ds_3, ds_4]"]),
    ("single table moved", [("{t_config: ds_0}", "{t_config: ds_1}")],
     ["table 't_config'", "data source: ds_0 -> ds_1"]),
    ("default data source", [("defaultDataSource: ds_0", "defaultDataSource: ds_1")],
     ["default data source: ds_0 -> ds_1"]),
    ("data source pointed at other data", [("ds_1: sqlite:///data/ds_1.db", "ds_1: sqlite:///data/ds_9.db")],
     ["data source 'ds_1'", "database: sqlite data/ds_1.db -> sqlite data/ds_9.db"]),
]

# Things a hot reload may change.
RETUNES = [
    ("runtime", [("maxOffset: 10000", "maxOffset: 500"), ("sqlComment: true", "sqlComment: false")]),
    ("pool", [("maxSize: 20", "maxSize: 50")]),
    ("replica with weight", [(
        "ds_0: sqlite:///data/ds_0.db          # relative to this file",
        'ds_0: {url: "sqlite:///data/ds_0.db", replicas: [{url: "sqlite:///data/ds_0r.db", weight: 2}]}',
    )]),
    ("application name", [("appName: order-service", "appName: order-service-canary")]),
    ("new single table", [("{t_config: ds_0}", "{t_config: ds_0, t_audit: ds_2}")]),
    ("new sharded table", [(
        "broadcastTables:", "  - logicTable: t_pay\n    shardKey: user_id\n    databases: [ds_0, ds_1]\n\nbroadcastTables:"
    )]),
]


@pytest.mark.parametrize("what, edits, words", MOVES, ids=[m[0] for m in MOVES])
def test_a_reload_that_moves_data_is_refused(what: str, edits: list[tuple[str, str]], words: list[str]) -> None:
    holder, source = holder_of(ORDERS)
    serving = holder.current
    source.set(edited(ORDERS, *edits))
    result = holder.reload()
    assert result.status == "rejected" and holder.current is serving
    error = result.error
    assert isinstance(error, PlacementChangeError) and isinstance(error, ConfigError)
    assert holder.last_error is error
    message = str(error)
    for word in words:
        assert word in message, (word, message)
    assert "orders.yaml" in message and "allow_placement_change=True" in message
    expected_table = words[0].split("'")[1] if words[0].startswith("table") else None
    assert error.table == expected_table
    assert error.changes and all(str(c) in message for c in error.changes)
    assert holder.reload().status == "rejected" and holder.current is serving  # still refused


@pytest.mark.parametrize("what, edits", RETUNES, ids=[r[0] for r in RETUNES])
def test_a_reload_may_retune_and_add(what: str, edits: list[tuple[str, str]]) -> None:
    holder, source = holder_of(ORDERS)
    source.set(edited(ORDERS, *edits))
    result = holder.reload()
    assert result.updated and holder.version == 2, result.error
    assert_same_placement(load_config(ORDERS, check_env=False), holder.config)


def test_a_host_can_move_but_not_the_database() -> None:
    """Failover to another server keeps the data source's data; another schema does not."""
    text = (ROOT / "tests" / "configs" / "native_orders.yaml").read_text()
    holder, source = holder_of(text)
    source.set(edited(text, ("url: mysql://10.0.1.11:3306/order_1", "url: mysql://10.0.9.99:3306/order_1")))
    assert holder.reload().updated
    source.set(edited(text, ("url: mysql://10.0.1.11:3306/order_1", "url: mysql://10.0.1.11:3306/order_2")))
    result = holder.reload()
    assert isinstance(result.error, PlacementChangeError)
    assert "data source 'ds_1': database: mysql order_1 -> mysql order_2" in str(result.error)


_BOUND = """
dataSources: {ds_0: "sqlite://:memory:", ds_1: "sqlite://:memory:"}
tables:
  - {logicTable: t_a, shardKey: user_id, algorithm: MOD, databases: [ds_0, ds_1]}
  - {logicTable: t_b, shardKey: user_id, algorithm: MOD, databases: [ds_0, ds_1]}
"""


@pytest.mark.parametrize("after, words", [
    ("bindingTables: [[t_b, t_a]]", ["table 't_b'", "routed through: t_a -> (not set)",
                                      "table 't_a'", "routed through: (not set) -> t_b"]),
    ("", ["table 't_b'", "routed through: t_a -> (not set)"]),
])
def test_the_table_a_bound_table_routes_through_is_placement(after: str, words: list[str]) -> None:
    holder, source = holder_of(_BOUND + "bindingTables: [[t_a, t_b]]\n")
    source.set(_BOUND + after + "\n")
    error = holder.reload().error
    assert isinstance(error, PlacementChangeError)
    assert all(word in str(error) for word in words), str(error)
    # A table joining the group moves nothing that was placed before.
    grown = _BOUND + "  - {logicTable: t_c, shardKey: user_id, algorithm: MOD, databases: [ds_0, ds_1]}\n"
    source.set(grown + "bindingTables: [[t_a, t_b, t_c]]\n")
    assert holder.reload().updated


def test_a_migration_step_publishes_a_new_placement(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    source = StaticSource(ORDERS, name="orders.yaml")
    holder = ConfigHolder(source, snapshot=snap, check_env=False)
    seen: list[tuple[int, int]] = []
    holder.subscribe(lambda new, old: seen.append((old.number, new.number)))
    moved_text = edited(ORDERS, ('ds_0: "0-255"\n      ds_1: "256-511"', 'ds_0: "256-511"\n      ds_1: "0-255"'))
    moved = load_config(moved_text, check_env=False)

    with pytest.raises(PlacementChangeError, match="database algorithm slots") as refused:
        holder.publish(moved)  # not declared as a migration step: held to the hot-reload rule
    assert refused.value.table == "t_order" and holder.version == 1 and not seen

    result = holder.publish(moved, allow_placement_change=True, origin="reshard step 3")
    assert result.updated and holder.config == moved and holder.current.origin == "reshard step 3"
    assert seen == [(1, 2)] and json.loads(snap.read_text())["version"] == 2
    assert holder.publish(moved, allow_placement_change=True).status == "unchanged"

    # The source still holds the old placement: reloading it now would move data back.
    source.set(edited(ORDERS, ("maxOffset: 10000", "maxOffset: 500")))
    assert isinstance(holder.reload().error, PlacementChangeError) and holder.config == moved
    source.set(edited(moved_text, ("maxOffset: 10000", "maxOffset: 500")))  # the source catches up
    assert holder.reload().updated and holder.config.runtime.max_offset == 500

    # A restart with the source down serves the published placement from the snapshot.
    source.available = False
    restarted = ConfigHolder(source, snapshot=snap, check_env=False)
    assert restarted.current.from_snapshot and not placement_changes(moved, restarted.config)


def test_publish_validates_text_and_holds_it_to_the_rule() -> None:
    holder, _ = holder_of(ORDERS)
    with pytest.raises(ConfigValidationError, match="ds_9"):
        holder.publish(edited(ORDERS, ("singleTables: {t_config: ds_0}", "singleTables: {t_config: ds_9}")))
    with pytest.raises(PlacementChangeError, match="t_config"):
        holder.publish(edited(ORDERS, ("{t_config: ds_0}", "{t_config: ds_1}")))
    assert holder.version == 1
    assert holder.publish(edited(ORDERS, ("maxOffset: 10000", "maxOffset: 77"))).updated
    assert holder.config.runtime.max_offset == 77


def test_a_refused_source_version_is_taken_as_a_migration_step() -> None:
    holder, source = holder_of(ORDERS)
    source.set(edited(ORDERS, ("{t_config: ds_0}", "{t_config: ds_1}")))
    assert holder.reload().status == "rejected"
    result = holder.reload(allow_placement_change=True)  # the source did not change since
    assert result.updated and holder.config.single_table("t_config").data_source == "ds_1"  # type: ignore[union-attr]
    assert holder.last_error is None


def _cuts(text: str) -> list[str]:
    """The text cut after every line, and in the middle of every line."""
    lines = text.splitlines(keepends=True)
    out = []
    for i in range(len(lines)):
        head = "".join(lines[:i])
        out.append(head)
        out.append(head + lines[i][: len(lines[i]) // 2])
    return out


@pytest.mark.parametrize("path", NATIVE_CONFIGS, ids=[p.name for p in NATIVE_CONFIGS])
def test_truncated_files_never_serve_another_placement(path: Path) -> None:
    text = path.read_text()
    original = load_config(text, check_env=False)
    refused = 0
    for cut in _cuts(text):
        holder, source = holder_of(text)
        serving = holder.current
        source.set(cut)
        result = holder.reload()
        if result.status == "rejected":
            assert holder.current is serving
            refused += isinstance(result.error, PlacementChangeError)
        else:
            assert result.status in ("updated", "unchanged"), result
            assert_same_placement(original, holder.config, keys=range(16))
    assert refused > 0


def test_a_file_cut_before_slots_is_refused() -> None:
    """Cut there, the file validates with an even slot layout; serving it would misroute."""
    cut = ORDERS[: ORDERS.index("    slots:")]
    load_config(cut, check_env=False)  # valid on its own
    holder, source = holder_of(ORDERS)
    source.set(cut)
    error = holder.reload().error
    assert isinstance(error, PlacementChangeError) and error.table == "t_order"
    assert "database algorithm slots: {ds_0: 0-255, ds_1: 256-511, ds_2: 512-767, ds_3: 768-1023} -> (not set)" in str(error)


def _reordered(value: object) -> object:
    """Every mapping's keys in reverse order (lists keep theirs: their order means something)."""
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


@pytest.mark.parametrize("path", NATIVE_CONFIGS, ids=[p.name for p in NATIVE_CONFIGS])
def test_reordered_files_are_taken(path: Path) -> None:
    text = path.read_text()
    shuffled = yaml.safe_dump(_reordered(yaml.safe_load(text)), sort_keys=False)
    assert shuffled != text
    holder, source = holder_of(text)
    source.set(shuffled)
    result = holder.reload()
    assert result.updated, result.error
    assert_same_placement(load_config(text, check_env=False), holder.config)
