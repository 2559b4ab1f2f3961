"""ShardingSphere-JDBC 5.x YAML, loaded unchanged: a 2 × 16 order layout and the documentation sample of each rule kind."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ddm_core.errors import ConfigError
from ddm_core.metadata import (
    ConfigValidationError,
    DataNode,
    ShardingConfig,
    StrategyKind,
    TableKind,
    dump_native,
    load_config,
)

CONFIGS = Path(__file__).parent / "configs"
#: A ShardingSphere 5.0 file kept as such files circulate, quirks included (docs/notes.md#the-2--16-shardingsphere-fixture).
ORDER_DB = CONFIGS / "ss_order_db_2x16.yaml"


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDM_TEST_DB_PASSWORD", "pw")


def _round_trip(config: ShardingConfig) -> None:
    again = load_config(dump_native(config, secrets="keep"))
    assert again == config
    assert again.origin.format == "native"


# -- the 2 × 16 order layout ------------------------------------------------------------------------


def test_order_db_fixture_keeps_its_circulated_form() -> None:
    # The tests below rely on these quirks; a "tidied" fixture would stop testing them.
    text = ORDER_DB.read_text(encoding="utf-8")
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(text)  # `password: ***` is not YAML
    assert text.count("password: ***") == 2
    assert "      - t_order, t_order_item\n" in text  # one comma-separated item, not a list
    assert "      - t_dict_region, t_dict_status\n" in text
    assert "algorithm-expression: ds${user_id % 32 / 16}\n" in text  # Groovy would divide to a decimal
    # t_order_item reuses the t_order table algorithm, which names t_order_* tables
    assert text.count("shardingAlgorithmName: tbl-inline") == 2
    assert "algorithm-expression: t_order_item" not in text


def test_order_db_loads_as_is() -> None:
    c = load_config(ORDER_DB)
    assert c.origin.format == "shardingsphere"
    assert c.name == "order_db"  # schemaName
    ds0 = c.data_sources["ds0"].primary
    assert (ds0.dialect, ds0.host, ds0.port, ds0.database) == ("mysql", "10.0.1.10", 3306, "order_0")
    assert ds0.options["useSSL"] == "false" and ds0.username == "order"
    assert ds0.props["dataSourceClassName"] == "com.zaxxer.hikari.HikariDataSource"
    assert c.data_sources["ds0"].pool.max_size == 50  # maximumPoolSize under props:
    t = c.table("t_order")
    assert t.shard_count == 32 and t.data_sources == ("ds0", "ds1")
    assert t.tables_by_source["ds1"] == tuple(f"t_order_{i}" for i in range(16))
    assert t.database_strategy.algorithm.name == "db-inline"
    assert t.table_strategy.algorithm.props["algorithm-expression"] == "t_order_${user_id % 16}"
    assert c.binding_group_of("t_order_item").tables == ("t_order", "t_order_item")
    assert c.broadcast_tables == ("t_dict_region", "t_dict_status")
    assert c.kind_of("t_dict_status") is TableKind.BROADCAST


def test_order_db_routes_user_882341_to_ds0_t_order_5() -> None:
    # computed, not copied (docs/notes.md#compute-expected-routes): 882341 % 32 = 5 < 16, 882341 % 16 = 5
    t = load_config(ORDER_DB).table("t_order")
    assert t.database_strategy.sharder.precise(t.data_sources, {"user_id": 882341}) == ["ds0"]
    assert t.table_strategy.sharder.precise(t.tables_by_source["ds0"], {"user_id": 882341}) == ["t_order_5"]
    # `user_id % 32 / 16` is integer division: 16..31 go to ds1
    assert t.database_strategy.sharder.precise(t.data_sources, {"user_id": 21}) == ["ds1"]


def test_order_db_warnings() -> None:
    c = load_config(ORDER_DB)
    text = "\n".join(c.warnings)
    assert "password '***' looks redacted" in text  # `password: ***` is read as the string
    # tbl-inline is shared by t_order_item but names t_order_* tables
    assert "rules[0].tables.t_order_item.tableStrategy" in text and "t_order_0" in text


def test_order_db_round_trip() -> None:
    _round_trip(load_config(ORDER_DB))


# -- documentation samples, one per rule kind -------------------------------------------------------


def test_doc_sharding_sample() -> None:
    c = load_config(CONFIGS / "ss_doc_sharding.yaml")
    order, item, account = c.table("t_order"), c.table("t_order_item"), c.table("t_account")
    # defaultDatabaseStrategy applies to every table
    for t in (order, item, account):
        assert t.database_strategy.algorithm.name == "database_inline"
        assert t.database_strategy.columns == ("user_id",)
    assert account.table_strategy.columns == ("account_id",)  # defaultShardingColumn
    # keyGenerateStrategies (5.5)
    assert order.key_generation.column == "order_id" and order.key_generation.generator.type == "SNOWFLAKE"
    assert item.key_generation.column == "order_item_id"
    assert account.key_generation.column == "account_id"
    assert c.binding_groups[0].tables == ("t_order", "t_order_item")
    assert c.broadcast_tables == ("t_address",)  # !BROADCAST
    assert c.props["sql-show"] is False
    assert c.data_sources["ds_1"].primary.url.startswith(
        "mysql://localhost:3306/demo_ds_1?serverTimezone=UTC"
    )
    assert c.data_sources["ds_0"].primary.password is None  # `password:` left empty
    # auditStrategy is enforced (ShardingSphere semantics): t_order's auditor, none on the others
    assert order.auditors == ("sharding_key_required_auditor",) and item.auditors == account.auditors == ()
    assert not any("audit" in w for w in c.warnings)
    _round_trip(c)


def test_sharding_50_spelling_complex_hint_defaults() -> None:
    c = load_config(CONFIGS / "ss_sharding_50.yaml")
    assert c.name == "sharding_db" and c.props["mode"]["type"] == "Standalone"
    tag = c.table("t_user_tag")
    assert tag.database_strategy.kind is StrategyKind.COMPLEX
    assert tag.database_strategy.columns == ("user_id", "tag_id")
    assert tag.table_strategy.kind is StrategyKind.NONE
    assert tag.database_strategy.sharder.precise(tag.data_sources, {"user_id": 1, "tag_id": 2}) == ["ds_1"]
    audit = c.table("t_audit_log")
    assert audit.database_strategy.kind is StrategyKind.HINT and audit.database_strategy.columns == ()
    # a table with no rule body: every data source, default strategies, default key generation
    region = c.table("t_region_user")
    assert region.data_nodes == (DataNode("ds_0", "t_region_user"), DataNode("ds_1", "t_region_user"))
    assert region.database_strategy.algorithm.name == "database_inline"
    assert region.key_generation.column == "id"  # defaultKeyGenerateStrategy
    assert c.table("t_order").key_generation.generator.worker_id == 123
    assert c.broadcast_tables == ("t_address",)  # broadcastTables inside !SHARDING
    pool = c.data_sources["ds_0"].pool
    assert (pool.max_size, pool.min_idle, pool.acquire_timeout_ms, pool.idle_timeout_ms) == (
        50,
        1,
        30000,
        60000,
    )
    assert c.data_sources["ds_0"].primary.password.env == "DDM_TEST_DB_PASSWORD"  # ${ENV:...}
    assert c.data_sources["ds_1"].primary.password.reveal() == "pw"  # passwordEnv
    _round_trip(c)


def test_auto_tables() -> None:
    c = load_config(CONFIGS / "ss_auto_tables.yaml")
    t = c.table("t_order_auto")
    assert t.auto and t.database_strategy.kind is StrategyKind.NONE
    # 4 tables (sharding-count) spread round-robin over the data sources
    assert [str(n) for n in t.data_nodes] == [
        "ds_0.t_order_auto_0", "ds_1.t_order_auto_1", "ds_0.t_order_auto_2", "ds_1.t_order_auto_3",
    ]  # fmt: skip
    (table,) = t.table_strategy.sharder.precise(t.all_tables, {"order_id": 7})
    assert table == "t_order_auto_3" and t.node_of_table[table].data_source == "ds_1"
    log = c.table("t_log_auto")
    assert log.shard_count == 4  # 3 boundaries → 4 partitions
    _round_trip(c)


def test_doc_readwrite_splitting_sample() -> None:
    c = load_config(CONFIGS / "ss_doc_readwrite.yaml")
    assert list(c.data_sources) == ["readwrite_ds"]  # members became its endpoints
    rw = c.data_sources["readwrite_ds"]
    assert rw.primary.name == "write_ds" and rw.primary.host == "10.0.0.1"
    assert [r.name for r in rw.replicas] == ["read_ds_0", "read_ds_1"]
    assert (rw.load_balancer, rw.transactional_reads) == ("random", "primary")
    assert c.default_data_source == "readwrite_ds"
    _round_trip(c)


def test_readwrite_51_static_strategy_weights_and_sharding_on_top() -> None:
    c = load_config(CONFIGS / "ss_readwrite_51.yaml")
    assert list(c.data_sources) == ["replica_ds_0", "replica_ds_1"]
    ds0 = c.data_sources["replica_ds_0"]
    assert [(r.name, r.weight) for r in ds0.replicas] == [("replica_ds_0_0", 1), ("replica_ds_0_1", 3)]
    assert ds0.load_balancer == "weight"
    assert c.data_sources["replica_ds_1"].load_balancer == "round_robin"
    assert c.table("t_order").data_sources == ("replica_ds_0", "replica_ds_1")
    _round_trip(c)


def test_readwrite_51_type_static_props() -> None:
    c = load_config("""
dataSources:
  w: {jdbcUrl: "jdbc:mysql://w/x"}
  r: {jdbcUrl: "jdbc:mysql://r/x"}
rules:
- !READWRITE_SPLITTING
  dataSources:
    pr_ds:
      type: Static
      props:
        write-data-source-name: w
        read-data-source-names: r
""")
    assert c.data_sources["pr_ds"].replicas[0].name == "r"


def test_doc_broadcast_sample() -> None:
    c = load_config(CONFIGS / "ss_doc_broadcast.yaml")
    assert c.broadcast_tables == ("t_address",) and c.tables == {}
    _round_trip(c)


def test_doc_single_sample() -> None:
    c = load_config(CONFIGS / "ss_doc_single.yaml")
    assert c.single_table("t_single").data_source == "ds_0"
    assert c.single_patterns == ("ds_1.*", "*.*")
    assert c.default_data_source == "ds_0"
    _round_trip(c)


def test_doc_mixed_sample_names_the_unsupported_encrypt_rule() -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config(CONFIGS / "ss_doc_mixed_encrypt.yaml")
    problems = {p.path: p.message for p in info.value.problems}
    assert "!ENCRYPT" in problems["rules[1]"]
    assert "dataSources" in problems  # the sample has none


def test_spring_placeholder_syntax_and_comma_lists() -> None:
    c = load_config("""
dataSources:
  ds0: {url: "jdbc:mysql://a/x"}
  ds1: {url: "jdbc:mysql://b/x"}
rules:
- !SHARDING
  tables:
    t_a:
      actualDataNodes: ds0.t_a_$->{0..1},ds1.t_a_$->{2..3}
""")
    assert [str(n) for n in c.table("t_a").data_nodes] == ["ds0.t_a_0", "ds0.t_a_1", "ds1.t_a_2", "ds1.t_a_3"]


def test_dict_source_with_rule_keys() -> None:
    c = load_config(
        {
            "dataSources": {"ds": {"jdbcUrl": "jdbc:mysql://h/x"}},
            "rules": [{"!BROADCAST": {"tables": ["t_dict"]}}],
        }
    )
    assert c.broadcast_tables == ("t_dict",)


def test_java_class_tags_of_data_sources_are_read() -> None:
    c = load_config("""
dataSources:
  ds: !!com.zaxxer.hikari.HikariDataSource
    jdbcUrl: jdbc:mysql://h/x
rules: []
""")
    assert c.data_sources["ds"].primary.props["dataSourceClassName"] == "com.zaxxer.hikari.HikariDataSource"


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        load_config("rules:\n- !SHADOW {}\ndataSources: {ds: {jdbcUrl: 'jdbc:mysql://h/x'}}\n")
    assert issubclass(ConfigValidationError, ConfigError)


# -- ddm-core extensions inside ShardingSphere YAML -----------------------------------------------------------

EXTENDED = """
dataSources:
  ds_0: {jdbcUrl: "jdbc:mysql://h0:3306/x"}
  ds_1: {jdbcUrl: "jdbc:mysql://h1:3306/x"}
rules:
- !SHARDING
  tables:
    t_order:
      actualDataNodes: ds_${0..1}.t_order
      databaseStrategy:
        complex: {shardingColumns: "order_id, user_id", shardingAlgorithmName: by-gene}
      keyGenerateStrategy: {column: order_id, keyGeneratorName: gene}
    t_user:
      actualDataNodes: ds_${0..1}.t_user
      databaseStrategy:
        standard: {shardingColumn: user_id, shardingAlgorithmName: slots}
    t_event:
      actualDataNodes: ds_${0..1}.t_event
      databaseStrategy:
        standard: {shardingColumn: created_at, shardingAlgorithmName: quarters}
  shardingAlgorithms:
    slots:
      type: SLOTS
      props: {slot-bits: 10, slots: {ds_0: "0-511", ds_1: "512-1023"}}
    by-gene:
      type: GENE
      props: {gene-bits: 10, key-columns: user_id, slots: {ds_0: "0-511", ds_1: "512-1023"}}
    quarters:
      type: TIME_RANGE
      props:
        ranges:
          - {start: "2024-01-01", end: "2024-04-01", target: ds_0}
          - {start: "2024-04-01", end: "2024-07-01", target: ds_1}
  keyGenerators:
    gene: {type: GENE, props: {gene-bits: 10, shard-column: user_id, worker-id: 3}}
"""


def test_slots_gene_and_time_ranges_in_shardingsphere_yaml() -> None:
    from ddm_core.ids import GeneIdGenerator

    c = load_config(EXTENDED)
    order, user = c.table("t_order"), c.table("t_user")
    gen = order.key_generation.generator
    assert (gen.type, gen.gene_bits, gen.shard_column, gen.worker_id) == ("GENE", 10, "user_id", 3)
    ids = GeneIdGenerator(worker_id=gen.worker_id, gene_bits=gen.gene_bits)
    for user_id in (1, 42, 882341):
        order_id = ids.next_id(user_id)
        by_user = user.database_strategy.sharder.precise(user.data_sources, {"user_id": user_id})
        by_order = order.database_strategy.sharder.precise(order.data_sources, {"order_id": order_id})
        assert by_order == by_user  # the gene method: the id routes like its user
    event = c.table("t_event")
    assert event.database_strategy.algorithm.type == "TIME_RANGE"
    _round_trip(c)


def test_16_shards_over_4_databases_is_refused_for_its_shard_count() -> None:
    # a common short-form slip: 16 shards × 4 tables over 4 databases cannot hold.
    with pytest.raises(ConfigValidationError) as info:
        load_config("""
dataSources: {ds_0: "sqlite:///0.db", ds_1: "sqlite:///1.db", ds_2: "sqlite:///2.db", ds_3: "sqlite:///3.db"}
tables:
  - logicTable: t_order
    shardKey: user_id
    algorithm: hash_mod
    shardCount: 16
    tablePerShard: 4
    databases: [ds_0, ds_1, ds_2, ds_3]
    columns:
      order_no: { type: varchar, length: 32 }
      user_id: { type: bigint }
      amount: { type: decimal, precision: 18, scale: 2 }
""")
    assert [p.path for p in info.value.problems] == ["tables[0].shardCount"]


def test_cluster_mode_registry_is_the_metadata_center() -> None:
    c = load_config("""
mode:
  type: Cluster
  repository:
    type: ZooKeeper
    props: {namespace: governance_ds, server-lists: "localhost:2181"}
dataSources: {ds: {jdbcUrl: "jdbc:mysql://h/x"}}
rules: []
""")
    assert (c.metadata.server, c.metadata.namespace) == ("localhost:2181", "governance_ds")
    assert c.props["mode"]["repository"]["type"] == "ZooKeeper"
