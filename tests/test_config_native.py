"""ddm-core's own YAML format (docs/configuration.md#own-format): loading, the model it gives, round trips."""

from __future__ import annotations

import copy

import dataclasses
from pathlib import Path

import pytest
import yaml

from ddm_core.errors import ConfigError
from ddm_core.hashing import slot_of
from ddm_core.metadata import (
    ConfigValidationError,
    DataNode,
    ShardingConfig,
    StrategyKind,
    TableKind,
    detect_format,
    dump_native,
    load_config,
    to_native,
)

CONFIGS = Path(__file__).parent / "configs"
README_EXAMPLE = CONFIGS / "native_orders.yaml"


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDM_ORDER_PASSWORD", "s3cret")


@pytest.fixture()
def orders() -> ShardingConfig:
    return load_config(README_EXAMPLE)


def test_readme_example_shape(orders: ShardingConfig) -> None:
    assert orders.origin is not None and orders.origin.format == "native"
    assert orders.name == "order-service"
    assert list(orders.data_sources) == ["ds_0", "ds_1", "ds_2", "ds_3"]
    t = orders.table("t_order")
    assert t is not None
    # t_order_${dbIndex}_${tableIndex}, 4 databases x 4 tables
    assert t.shard_count == 16
    assert t.data_sources == ("ds_0", "ds_1", "ds_2", "ds_3")
    assert t.tables_by_source["ds_2"] == ("t_order_2_0", "t_order_2_1", "t_order_2_2", "t_order_2_3")
    assert t.data_nodes[0] == DataNode("ds_0", "t_order_0_0")
    assert str(t.data_nodes[-1]) == "ds_3.t_order_3_3"
    db, tb = t.database_strategy, t.table_strategy
    assert (db.kind, db.columns, db.algorithm.type) == (StrategyKind.STANDARD, ("user_id",), "SLOTS")
    assert dict(db.algorithm.props)["slot-bits"] == 10
    assert (tb.kind, tb.column, tb.algorithm.type) == (StrategyKind.STANDARD, "user_id", "HASH_MOD")
    assert tb.algorithm.props["sharding-count"] == 4
    assert t.sharding_columns == ("user_id",)
    kg = t.key_generation
    assert kg is not None and kg.column == "order_id"
    assert (kg.generator.type, kg.generator.gene_bits, kg.generator.shard_column) == ("GENE", 10, "user_id")


def test_readme_example_routes_with_its_slot_map(orders: ShardingConfig) -> None:
    t = orders.table("t_order")
    for user_id in (0, 1, 10086, 882341, 2**40 + 7):
        (ds,) = t.database_strategy.sharder.precise(t.data_sources, {"user_id": user_id})
        assert ds == f"ds_{slot_of(user_id, 10) // 256}"  # explicit map: 256 slots per database
        (table,) = t.table_strategy.sharder.precise(t.tables_by_source[ds], {"user_id": user_id})
        assert table in t.tables_by_source[ds]


def test_readme_example_binding_broadcast_single(orders: ShardingConfig) -> None:
    item = orders.table("t_order_item")
    assert item is not None
    assert item.tables_by_source["ds_1"] == tuple(f"t_order_item_1_{i}" for i in range(4))
    group = orders.binding_group_of("T_ORDER_ITEM")
    assert group is not None and group.tables == ("t_order", "t_order_item")
    assert orders.binding_group_of("t_order") is group and "t_order" in group
    assert orders.is_broadcast("t_dict_region") and orders.kind_of("t_dict_region") is TableKind.BROADCAST
    assert orders.single_table("t_config").data_source == "ds_0"
    assert orders.kind_of("t_order") is TableKind.SHARDED
    assert orders.kind_of("t_config") is TableKind.SINGLE
    assert orders.kind_of("nope") is None
    assert orders.default_data_source == "ds_0"
    assert item.key_generation.generator.type == "SNOWFLAKE"


def test_readme_example_data_sources_and_runtime(orders: ShardingConfig) -> None:
    ds0 = orders.data_sources["ds_0"]
    assert ds0.primary.url == "mysql://10.0.1.10:3306/order_0"
    assert (ds0.primary.host, ds0.primary.port, ds0.primary.database) == ("10.0.1.10", 3306, "order_0")
    assert [(r.host, r.weight) for r in ds0.replicas] == [("10.0.2.10", 1), ("10.0.3.10", 1)]
    assert ds0.replicas[0].username == "order"  # inherited from the primary
    assert ds0.primary.password.env == "DDM_ORDER_PASSWORD"
    assert ds0.primary.password.reveal() == "s3cret"
    assert "s3cret" not in repr(orders)
    assert orders.data_sources["ds_1"].primary.password.env == "DDM_ORDER_PASSWORD"  # ${ENV:...} form
    assert ds0.pool.max_size == 20 and ds0.pool.min_idle == 5 and ds0.pool.acquire_timeout_ms == 3000
    rt = orders.runtime
    assert (rt.allow_full_route, rt.full_route_threshold, rt.max_offset, rt.slow_sql_ms, rt.sql_comment) == (
        False, 8, 10000, 200, True,
    )  # fmt: skip


def test_model_is_frozen(orders: ShardingConfig) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        orders.default_data_source = "ds_1"  # type: ignore[misc]
    with pytest.raises(TypeError):
        orders.tables["t_x"] = orders.tables["t_order"]  # type: ignore[index]
    with pytest.raises(TypeError):
        orders.table("t_order").tables_by_source["ds_9"] = ()  # type: ignore[index]
    with pytest.raises(TypeError):
        orders.algorithms["t_order.database"].props["slot-bits"] = 4  # type: ignore[index]
    assert isinstance(orders.table("t_order").data_nodes, tuple)


def test_runtime_defaults() -> None:
    c = load_config({"dataSources": {"ds_0": "sqlite:///a.db"}})
    rt = c.runtime
    assert (rt.allow_full_route, rt.full_route_threshold, rt.max_offset, rt.slow_sql_ms, rt.sql_comment) == (
        True, 8, 10000, 200, False,
    )  # fmt: skip
    assert c.tables == {} and c.default_data_source is None


def test_sources_path_text_dict_bytes(tmp_path: Path) -> None:
    text = README_EXAMPLE.read_text()
    from_path = load_config(README_EXAMPLE)
    assert load_config(str(README_EXAMPLE)) == from_path
    assert load_config(text) == from_path
    assert load_config(text.encode()) == from_path
    assert load_config(yaml.safe_load(text)) == from_path
    assert load_config(str(README_EXAMPLE)).origin.location == str(README_EXAMPLE)
    assert load_config(text).origin.location == "<string>"
    assert load_config(yaml.safe_load(text)).origin.location == "<dict>"


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(Exception) as info:
        load_config(tmp_path / "nope.yaml")
    assert "nope.yaml" in str(info.value)


def test_even_slots_default_names_and_one_table_per_shard() -> None:
    c = load_config("""
dataSources: {ds_0: "sqlite:///a.db", ds_1: "sqlite:///b.db"}
tables:
  - logicTable: t_user
    shardKey: user_id
    databases: "ds_${0..1}"
""")
    t = c.table("t_user")
    assert t.data_nodes == (DataNode("ds_0", "t_user"), DataNode("ds_1", "t_user"))
    assert t.table_strategy.kind is StrategyKind.NONE
    assert t.database_strategy.algorithm.type == "SLOTS"
    assert "slots" not in t.database_strategy.algorithm.props  # even over the databases
    hits = {t.database_strategy.sharder.precise(t.data_sources, {"user_id": u})[0] for u in range(200)}
    assert hits == {"ds_0", "ds_1"}


def test_table_key_differs_from_shard_key() -> None:
    # independent strategies: hash(user_id) picks the database, order_no the table inside it
    c = load_config("""
dataSources: {ds_0: "sqlite:///a.db", ds_1: "sqlite:///b.db"}
tables:
  - logicTable: t_order
    shardKey: user_id
    databases: [ds_0, ds_1]
    tablePerShard: 4
    tableKey: order_no
    tableAlgorithm: mod
""")
    t = c.table("t_order")
    assert t.database_strategy.columns == ("user_id",)
    assert t.table_strategy.columns == ("order_no",) and t.table_strategy.algorithm.type == "MOD"
    assert t.sharding_columns == ("user_id", "order_no")
    assert t.table_strategy.sharder.precise(t.tables_by_source["ds_1"], {"order_no": 7}) == ["t_order_1_3"]


def test_other_database_algorithms_and_props() -> None:
    c = load_config("""
dataSources: {ds_0: "sqlite:///a.db", ds_1: "sqlite:///b.db"}
tables:
  - logicTable: t_mod
    shardKey: id
    algorithm: mod
    databases: [ds_0, ds_1]
  - logicTable: t_salted
    shardKey: id
    algorithm: SALTED_MOD
    algorithmProps: {salt: 1000000007}
    databases: [ds_0, ds_1]
""")
    assert c.table("t_mod").database_strategy.algorithm.props["sharding-count"] == 2
    assert c.table("t_mod").database_strategy.sharder.precise(("ds_0", "ds_1"), {"id": 5}) == ["ds_1"]
    salted = c.table("t_salted").database_strategy.algorithm
    assert salted.type == "SALTED_MOD" and salted.props["salt"] == 1000000007


def test_explicit_form_named_algorithms_and_mapping_tables() -> None:
    c = load_config("""
dataSources: {ds_0: "sqlite:///a.db", ds_1: "sqlite:///b.db"}
algorithms:
  by-user: {type: INLINE, props: {algorithm-expression: "ds_${user_id % 2}"}}
keyGenerators:
  snow: {type: SNOWFLAKE, props: {worker-id: 7}}
tables:
  t_log:
    dataNodes: "ds_${0..1}.t_log_${0..1}"
    databaseStrategy: {kind: standard, column: user_id, algorithm: by-user}
    tableStrategy: {kind: standard, columns: [log_id], algorithm: MOD, props: {sharding-count: 2}}
    keyGenerator: {column: log_id, generator: snow}
""")
    t = c.table("t_log")
    assert t.database_strategy.algorithm is c.algorithms["by-user"]
    assert t.table_strategy.algorithm.name == "t_log.table"
    assert t.key_generation.generator.worker_id == 7
    assert [str(n) for n in t.data_nodes] == ["ds_0.t_log_0", "ds_0.t_log_1", "ds_1.t_log_0", "ds_1.t_log_1"]


def test_loose_field_names() -> None:
    base = "dataSources: {ds_0: 'sqlite:///a.db', ds_1: 'sqlite:///b.db'}\ntables:\n  - logic_table: t\n"
    a = load_config(base + "    shard_key: k\n    databases: [ds_0, ds_1]\n    table_per_shard: 2\n")
    b = load_config(base + "    shard-key: k\n    databases: [ds_0, ds_1]\n    table-per-shard: 2\n")
    assert a == b and a.table("t").shard_count == 4


def test_database_urls(tmp_path: Path) -> None:
    cfg = tmp_path / "conf" / "c.yaml"
    cfg.parent.mkdir()
    cfg.write_text("""
dataSources:
  lite: sqlite:///data/ds0.db
  abs: sqlite:////var/lib/ds1.db
  mem: "sqlite::memory:"
  maria: jdbc:mariadb://db.local/shop?useSSL=false
  pg: postgresql://app@pg.local:6432/shop
  my: mysql+pymysql://u:pw@my.local/shop
""")
    c = load_config(cfg)
    lite = c.data_sources["lite"].primary
    assert lite.dialect == "sqlite" and lite.database == str(cfg.parent / "data" / "ds0.db")
    assert c.data_sources["abs"].primary.database == "/var/lib/ds1.db"
    assert c.data_sources["abs"].primary.url == "sqlite:////var/lib/ds1.db"
    assert c.data_sources["mem"].primary.database == ":memory:"
    maria = c.data_sources["maria"].primary
    assert (maria.dialect, maria.port, maria.options["useSSL"]) == ("mariadb", 3306, "false")
    pg = c.data_sources["pg"].primary
    assert (pg.dialect, pg.host, pg.port, pg.database, pg.username) == (
        "postgresql",
        "pg.local",
        6432,
        "shop",
        "app",
    )
    my = c.data_sources["my"].primary
    assert (my.username, my.password.reveal(), my.url) == ("u", "pw", "mysql://my.local:3306/shop")


def test_env_reference_inside_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDM_TEST_HOST", "10.9.8.7")
    c = load_config({"dataSources": {"ds": {"url": "mysql://${ENV:DDM_TEST_HOST}:3307/x"}}})
    assert c.data_sources["ds"].primary.host == "10.9.8.7"


def test_secret_is_lazy(monkeypatch: pytest.MonkeyPatch) -> None:
    c = load_config({"dataSources": {"ds": {"url": "mysql://h/x", "passwordEnv": "DDM_ORDER_PASSWORD"}}})
    secret = c.data_sources["ds"].primary.password
    monkeypatch.setenv("DDM_ORDER_PASSWORD", "rotated")
    assert secret.reveal() == "rotated"
    monkeypatch.delenv("DDM_ORDER_PASSWORD")
    with pytest.raises(Exception, match="DDM_ORDER_PASSWORD"):
        secret.reveal()
    assert "rotated" not in repr(secret)


def test_check_env_can_be_deferred(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DDM_ORDER_PASSWORD")
    with pytest.raises(ConfigValidationError, match="DDM_ORDER_PASSWORD"):
        load_config(README_EXAMPLE)
    c = load_config(README_EXAMPLE, check_env=False)
    assert c.data_sources["ds_0"].primary.password.env == "DDM_ORDER_PASSWORD"


def test_format_detection() -> None:
    assert detect_format({"tables": [], "dataSources": {}}) == "native"
    assert detect_format({"rules": []}) == "shardingsphere"
    assert detect_format({"dataSources": {"ds": {"jdbcUrl": "jdbc:mysql://h/x"}}}) == "shardingsphere"
    assert detect_format({"format": "ddm-core", "dataSources": {"ds": {"jdbcUrl": "x"}}}) == "native"


def test_round_trip_readme_example(orders: ShardingConfig) -> None:
    text = dump_native(orders)
    again = load_config(text)
    assert again == orders
    assert (
        again.table("t_order").database_strategy.algorithm.props
        == orders.table("t_order").database_strategy.algorithm.props
    )
    assert load_config(to_native(orders)) == orders  # the dict form too


def test_dump_never_writes_literal_passwords_unless_asked() -> None:
    c = load_config({"dataSources": {"ds": {"url": "mysql://h/x", "username": "u", "password": "hunter2"}}})
    assert "hunter2" not in dump_native(c)
    assert "hunter2" in dump_native(c, secrets="keep")
    assert load_config(dump_native(c, secrets="keep")) == c


def test_dump_compacts_data_nodes(orders: ShardingConfig) -> None:
    native = to_native(orders)
    assert native["tables"][0]["dataNodes"] == [f"ds_{d}.t_order_{d}_${{0..3}}" for d in range(4)]


def test_a_long_auto_table_dumps_as_a_round_robin_and_loads_back() -> None:
    """65 536 auto-table nodes spread over two data sources: listed, the dump would not fit a document."""
    text = (CONFIGS / "ss_auto_tables.yaml").read_text().replace("sharding-count: 4", "sharding-count: 65536")
    c = load_config(text)
    assert len(c.table("t_order_auto").data_nodes) == 65536  # type: ignore[union-attr]
    native = to_native(c)
    auto = next(t for t in native["tables"] if t["logicTable"] == "t_order_auto")
    assert auto["dataNodes"] == {"roundRobin": ["ds_0", "ds_1"], "tables": "t_order_auto_${0..65535}"}
    dumped = dump_native(c, secrets="keep")
    assert len(dumped.encode()) < 1 << 20
    assert load_config(dumped) == c
    short = next(t for t in to_native(load_config(CONFIGS / "ss_auto_tables.yaml"))["tables"]
                 if t["logicTable"] == "t_order_auto")
    assert isinstance(short["dataNodes"], list)  # short lists stay lists


def test_round_robin_data_nodes_are_checked() -> None:
    base = {"dataSources": {"a": "sqlite:///a.db", "b": "sqlite:///b.db"},
            "tables": [{"logicTable": "t", "databaseStrategy": {"kind": "none"}}]}
    for nodes, why in (({"roundRobin": [], "tables": "t_${0..3}"}, "roundRobin: must be a list of data source"),
                       ({"roundRobin": ["a"], "tables": "x.t_${0..3}"}, r"dataNodes.tables: physical table name 'x.t_0' contains '.'")):
        doc = copy.deepcopy(base)
        doc["tables"][0]["dataNodes"] = nodes
        with pytest.raises(ConfigError, match=why):
            load_config(doc)
    doc = copy.deepcopy(base)
    doc["tables"][0]["dataNodes"] = {"roundRobin": ["a", "b"], "tables": "t_${0..2}"}
    assert [str(n) for n in load_config(doc).table("t").data_nodes] == ["a.t_0", "b.t_1", "a.t_2"]  # type: ignore[union-attr]


def test_ddm_application_block() -> None:
    c = load_config(CONFIGS / "native_app_block.yaml")
    assert c.runtime.app_name == "order-service"
    assert (c.runtime.allow_full_route, c.runtime.full_route_threshold, c.runtime.slow_sql_ms) == (
        False,
        8,
        200,
    )
    assert c.metadata.server == "config-center:8848" and c.metadata.namespace == "ddm-prod"
    assert c.metadata.failover_snapshot == "/data/ddm/snapshot.json"
    pool = c.data_sources["ds_2"].pool
    assert (pool.max_size, pool.min_idle, pool.acquire_timeout_ms, pool.idle_timeout_ms) == (
        20,
        5,
        3000,
        600000,
    )
    t = c.table("t_order")
    assert (
        t.database_strategy.algorithm.type == "HASH_MOD"
        and t.database_strategy.algorithm.props["sharding-count"] == 4
    )
    assert t.columns["amount"]["precision"] == 18
    assert load_config(dump_native(c)) == c


def test_application_settings_given_twice() -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config("ddm: {app-name: a, route: {slow-sql-ms: 1}}\nappName: b\nruntime: {maxOffset: 5}\n"
                    "dataSources: {ds: 'sqlite:///a.db'}\n")  # fmt: skip
    assert {p.path for p in info.value.problems} == {"appName", "runtime"}
