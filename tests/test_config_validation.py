"""Fail-fast validation (docs/configuration.md#checks-at-load): every error names the file, the field path and the value.

Each case loads a small broken configuration and checks that one of the
reported problems sits at the expected field path and quotes the offending
value; a file with several mistakes reports all of them at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ddm_core.metadata import ConfigValidationError, Problem, load_config

NATIVE_DS = """
dataSources:
  ds_0: sqlite:///a.db
  ds_1: sqlite:///b.db
"""

SS_DS = """
dataSources:
  ds_0: {jdbcUrl: "jdbc:mysql://h0:3306/x"}
  ds_1: {jdbcUrl: "jdbc:mysql://h1:3306/x"}
"""


def _problems(source: str, **kwargs: object) -> ConfigValidationError:
    with pytest.raises(ConfigValidationError) as info:
        load_config(source, **kwargs)  # type: ignore[arg-type]
    return info.value


def _expect(source: str, path: str, *fragments: str) -> Problem:
    err = _problems(source)
    at_path = [p for p in err.problems if p.path == path]
    assert at_path, f"no problem at {path!r}; got:\n{err}"
    for p in at_path:
        if all(f in p.message for f in fragments):
            assert f"{path}: " in str(err)  # the aggregate message names the field too
            return p
    raise AssertionError(f"problem at {path!r} lacks {fragments}; got:\n{err}")


# -- unknown names and types --------------------------------------------------------------------------


def test_unknown_algorithm_type_native() -> None:
    p = _expect(NATIVE_DS + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0, ds_1], algorithm: fancy_hash}\n",
                "tables[0].algorithm", "unknown sharding algorithm type 'fancy_hash'", "SLOTS")  # fmt: skip
    assert p.value == "fancy_hash"


def test_unknown_algorithm_type_shardingsphere() -> None:
    _expect(
        SS_DS
        + "rules:\n- !SHARDING\n  shardingAlgorithms:\n    x: {type: CLASS_BASED, props: {strategy: STANDARD}}\n",
        "rules[0].shardingAlgorithms.x.type",
        "'CLASS_BASED'",
    )


def test_unknown_rule_type() -> None:
    _expect(SS_DS + "rules:\n- !SHADOW\n  dataSources: {}\n", "rules[0]", "!SHADOW", "!SHARDING")


def test_untagged_rule() -> None:
    _expect(SS_DS + "rules:\n- tables: {}\n", "rules[0]", "must be tagged")


def test_unknown_key_generator_type() -> None:
    _expect(
        SS_DS + "rules:\n- !SHARDING\n  keyGenerators:\n    k: {type: COSID_SNOWFLAKE}\n",
        "rules[0].keyGenerators.k.type",
        "'COSID_SNOWFLAKE'",
    )


def test_unknown_algorithm_name_reference() -> None:
    _expect(
        SS_DS + """rules:
- !SHARDING
  tables:
    t: {actualDataNodes: "ds_${0..1}.t", databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: nope}}}
""",
        "rules[0].tables.t.databaseStrategy.standard.shardingAlgorithmName",
        "'nope'",
    )


def test_unknown_load_balancer_type() -> None:
    _expect(
        SS_DS
        + "rules:\n- !READWRITE_SPLITTING\n  dataSourceGroups: {}\n  loadBalancers:\n    lb: {type: LEAST_CONN}\n",
        "rules[0].loadBalancers.lb.type",
        "'LEAST_CONN'",
    )


def test_unknown_field_with_suggestion() -> None:
    _expect(
        NATIVE_DS + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0, ds_1], tablePerShrad: 4}\n",
        "tables[0].tablePerShrad",
        "unknown field 'tablePerShrad'",
        "did you mean 'tablePerShard'",
    )


def test_unknown_shardingsphere_table_field() -> None:
    _expect(SS_DS + "rules:\n- !SHARDING\n  tables:\n    t: {actualDataNode: ds_0.t}\n",
            "rules[0].tables.t.actualDataNode", "did you mean 'actualDataNodes'")  # fmt: skip


# -- data nodes and counts ------------------------------------------------------------------------------


def test_data_node_in_unknown_data_source() -> None:
    p = _expect(
        SS_DS + "rules:\n- !SHARDING\n  tables:\n    t_order: {actualDataNodes: 'ds_${0..2}.t_order'}\n",
        "rules[0].tables.t_order.actualDataNodes",
        "ds_2.t_order",
        "unknown data source 'ds_2'",
    )
    assert p.value == "ds_2"


def test_data_node_in_a_readwrite_member_names_the_group() -> None:
    _expect(
        SS_DS + """rules:
- !READWRITE_SPLITTING
  dataSourceGroups: {rw: {writeDataSourceName: ds_0, readDataSourceNames: [ds_1]}}
- !SHARDING
  tables: {t: {actualDataNodes: ds_1.t}}
""",
        "rules[1].tables.t.actualDataNodes",
        "'ds_1'",
        "member of read/write group 'rw'",
    )


def test_shard_count_differs_from_database_list() -> None:
    # a common slip: shardCount 16 but fewer databases listed
    _expect(
        NATIVE_DS
        + "tables:\n  - {logicTable: t_order, shardKey: user_id, shardCount: 16, tablePerShard: 4, databases: [ds_0, ds_1]}\n",
        "tables[0].shardCount",
        "shardCount is 16",
        "2 data source(s)",
    )


def test_physical_table_count_differs_from_shards_times_tables() -> None:
    _expect(
        NATIVE_DS + """tables:
  - logicTable: t_order
    shardKey: user_id
    databases: [ds_0, ds_1]
    tablePerShard: 4
    dataNodes: "ds_${0..1}.t_order_${0..2}"
""",
        "tables[0].dataNodes",
        "lists 6 physical tables",
        "2 × 4 = 8",
    )


def test_mod_sharding_count_differs_from_tables() -> None:
    _expect(
        SS_DS + """rules:
- !SHARDING
  tables:
    t: {actualDataNodes: "ds_${0..1}.t_${0..1}", tableStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: m}}}
  shardingAlgorithms:
    m: {type: MOD, props: {sharding-count: 4}}
""",
        "rules[0].tables.t.tableStrategy",
        "MOD 'm'",
        "no target for shard number(s) 2, 3",
    )


def test_malformed_inline_expression_in_data_nodes() -> None:
    _expect(SS_DS + "rules:\n- !SHARDING\n  tables:\n    t: {actualDataNodes: 'ds_${0..1.t'}\n",
            "rules[0].tables.t.actualDataNodes", "cannot expand 'ds_${0..1.t'")  # fmt: skip


def test_data_node_without_a_dot() -> None:
    _expect(SS_DS + "rules:\n- !SHARDING\n  tables:\n    t: {actualDataNodes: t_order}\n",
            "rules[0].tables.t.actualDataNodes", "'t_order'", "data_source.table")  # fmt: skip


# -- ranges and slot maps ---------------------------------------------------------------------------------

_TIME_RANGES = """rules:
- !SHARDING
  tables:
    t_log: {actualDataNodes: "ds_${0..1}.t_log", databaseStrategy: {standard: {shardingColumn: ts, shardingAlgorithmName: q}}}
  shardingAlgorithms:
    q:
      type: TIME_RANGE
      props:
        ranges:
          - {start: "2024-01-01", end: "2024-04-01", target: ds_0}
          - {start: "%s", end: "%s", target: ds_1}
"""


def test_overlapping_time_ranges() -> None:
    _expect(SS_DS + _TIME_RANGES % ("2024-03-01", "2024-07-01"), "rules[0].shardingAlgorithms.q.props.ranges[1]",
            "overlaps", "2024-03-01")  # fmt: skip


def test_gapped_time_ranges() -> None:
    _expect(SS_DS + _TIME_RANGES % ("2024-05-01", "2024-07-01"), "rules[0].shardingAlgorithms.q.props.ranges[1]",
            "gap", "2024-04-01", "2024-05-01")  # fmt: skip


def test_every_overlap_and_gap_is_listed() -> None:
    text = (
        SS_DS
        + _TIME_RANGES % ("2024-03-01", "2024-07-01")
        + ('          - {start: "2024-09-01", end: "2024-10-01", target: ds_0}\n')
    )
    err = _problems(text)
    messages = [p.message for p in err.problems]
    assert any("overlaps" in m for m in messages) and any("gap" in m for m in messages)


def test_boundary_range_repeated_boundary() -> None:
    _expect(
        SS_DS + """rules:
- !SHARDING
  autoTables:
    t: {shardingStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: b}}}
  shardingAlgorithms:
    b: {type: BOUNDARY_RANGE, props: {sharding-ranges: "10,20,20"}}
""",
        "rules[0].shardingAlgorithms.b.props.sharding-ranges",
        "20",
    )


_SLOTS = NATIVE_DS + """tables:
  - logicTable: t_order
    shardKey: user_id
    databases: [ds_0, ds_1]
    slots: {%s}
"""


def test_slot_map_not_covering_every_slot() -> None:
    p = _expect(_SLOTS % "ds_0: '0-255', ds_1: '512-1023'", "tables[0].slots", "256 of 1024 slots", "256-511")
    assert p.value == "256-511"


def test_slot_map_overlap() -> None:
    _expect(_SLOTS % "ds_0: '0-600', ds_1: '512-1023'", "tables[0].slots", "512-600", "'ds_0'", "'ds_1'")


def test_slot_map_unknown_target() -> None:
    _expect(_SLOTS % "ds_0: '0-511', ds_9: '512-1023'", "tables[0].slots", "ds_9")


def test_slot_map_malformed_range() -> None:
    _expect(_SLOTS % "ds_0: '0-511', ds_1: '512-2000'", "tables[0].slots.ds_1", "512-2000")


def test_slot_count_not_a_power_of_two() -> None:
    _expect(NATIVE_DS + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0, ds_1], slotCount: 1000}\n",
            "tables[0].slotCount", "1000")  # fmt: skip


# -- binding groups ----------------------------------------------------------------------------------------


def test_binding_tables_with_different_table_counts() -> None:
    _expect(
        NATIVE_DS + """tables:
  - {logicTable: t_order, shardKey: user_id, databases: [ds_0, ds_1], tablePerShard: 4}
  - {logicTable: t_order_item, shardKey: user_id, databases: [ds_0, ds_1], tablePerShard: 2}
bindingTables:
  - [t_order, t_order_item]
""",
        "bindingTables[0]",
        "'t_order' and 't_order_item' are sharded differently",
    )


def test_binding_tables_with_different_algorithms() -> None:
    _expect(
        SS_DS + """rules:
- !SHARDING
  tables:
    t_a: {actualDataNodes: "ds_${0..1}.t_a_${0..1}", tableStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: mod}}}
    t_b: {actualDataNodes: "ds_${0..1}.t_b_${0..1}", tableStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: hash}}}
  bindingTables: ["t_a, t_b"]
  shardingAlgorithms:
    mod: {type: MOD, props: {sharding-count: 2}}
    hash: {type: HASH_MOD, props: {sharding-count: 2}}
""",
        "rules[0].bindingTables[0]",
        "table algorithms 'mod' and 'hash' differ",
    )


def test_binding_tables_with_different_data_sources() -> None:
    _expect(
        NATIVE_DS + """tables:
  - {logicTable: t_a, shardKey: k, databases: [ds_0, ds_1]}
  - {logicTable: t_b, shardKey: k, databases: [ds_1, ds_0]}
bindingTables: ["t_a, t_b"]
""",
        "bindingTables[0]",
        "data sources",
    )


def test_binding_table_unknown() -> None:
    _expect(NATIVE_DS + "tables:\n  - {logicTable: t_a, shardKey: k, databases: [ds_0, ds_1]}\nbindingTables: [[t_a, t_zz]]\n",
            "bindingTables[0]", "'t_zz'")  # fmt: skip


def test_bind_to_unknown_table() -> None:
    _expect(NATIVE_DS + "tables:\n  - {logicTable: t_a, bindTo: t_nope}\n", "tables[0].bindTo", "'t_nope'")


# -- gene key generators -------------------------------------------------------------------------------------

_GENE = NATIVE_DS + """tables:
  - logicTable: t_order
    shardKey: user_id
    databases: [ds_0, ds_1]
    keyGenerator: {%s}
"""


def test_gene_without_shard_column() -> None:
    _expect(
        _GENE % "column: order_id, type: gene", "tables[0].keyGenerator.props.shard-column", "shard column"
    )


def test_gene_shard_column_differs_from_table_shard_column() -> None:
    _expect(_GENE % "column: order_id, type: gene, shardColumn: order_no", "tables[0].keyGenerator",
            "'order_no'", "sharded by 'user_id'")  # fmt: skip


def test_gene_bits_differ_from_slot_bits() -> None:
    _expect(_GENE % "column: order_id, type: gene, shardColumn: user_id, geneBits: 8", "tables[0].keyGenerator",
            "gene-bits 8", "10 slot bits")  # fmt: skip


def test_gene_needs_a_slots_strategy() -> None:
    _expect(
        SS_DS + """rules:
- !SHARDING
  tables:
    t: {actualDataNodes: "ds_${0..1}.t", keyGenerateStrategy: {column: id, keyGeneratorName: g}}
  defaultDatabaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db}}
  shardingAlgorithms:
    db: {type: INLINE, props: {algorithm-expression: "ds_${user_id % 2}"}}
  keyGenerators:
    g: {type: GENE, props: {gene-bits: 10, shard-column: user_id}}
""",
        "rules[0].tables.t.keyGenerateStrategy",
        "needs a SLOTS (or GENE) sharding strategy",
    )


# -- names ------------------------------------------------------------------------------------------------------


def test_duplicate_logic_table_native() -> None:
    _expect(NATIVE_DS + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0]}\n  - {logicTable: T, shardKey: k, databases: [ds_1]}\n",
            "tables[1]", "duplicate logic table 'T'")  # fmt: skip


def test_duplicate_yaml_key() -> None:
    _expect(
        SS_DS
        + "rules:\n- !SHARDING\n  tables:\n    t_order: {actualDataNodes: ds_0.t_order}\n    t_order: {actualDataNodes: ds_1.t_order}\n",
        "rules[0].tables.t_order",
        "duplicate key 't_order'",
        "line",
    )


def test_data_node_claimed_by_two_tables() -> None:
    _expect(
        SS_DS
        + "rules:\n- !SHARDING\n  tables:\n    t_a: {actualDataNodes: ds_0.t_x}\n    t_b: {actualDataNodes: 'ds_0.t_x, ds_1.t_x'}\n",
        "rules[0].tables.t_b.actualDataNodes",
        "ds_0.t_x already belongs to logic table 't_a'",
    )


def test_data_node_listed_twice() -> None:
    _expect(SS_DS + "rules:\n- !SHARDING\n  tables:\n    t: {actualDataNodes: 'ds_0.t_1, ds_0.t_1'}\n",
            "rules[0].tables.t.actualDataNodes", "ds_0.t_1 is listed twice")  # fmt: skip


def test_sharded_and_broadcast() -> None:
    _expect(NATIVE_DS + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0, ds_1]}\nbroadcastTables: [t]\n",
            "broadcastTables", "'t' is both sharded and broadcast")  # fmt: skip


def test_single_table_in_unknown_data_source() -> None:
    _expect(NATIVE_DS + "singleTables: {t_cfg: ds_7}\n", "singleTables.t_cfg", "'ds_7'")


def test_unknown_default_data_source() -> None:
    _expect(SS_DS + "rules:\n- !SINGLE\n  defaultDataSource: ds_7\n", "rules[0].defaultDataSource", "'ds_7'")


def test_readwrite_group_with_unknown_member() -> None:
    _expect(SS_DS + "rules:\n- !READWRITE_SPLITTING\n  dataSourceGroups: {rw: {writeDataSourceName: ds_0, readDataSourceNames: [ds_5]}}\n",
            "rules[0].dataSourceGroups.rw", "ds_5")  # fmt: skip


def test_dynamic_readwrite_splitting_refused() -> None:
    _expect(SS_DS + "rules:\n- !READWRITE_SPLITTING\n  dataSources: {rw: {dynamicStrategy: {autoAwareDataSourceName: x}}}\n",
            "rules[0].dataSources.rw.dynamicStrategy", "not supported")  # fmt: skip


# -- strategies -------------------------------------------------------------------------------------------------


def test_inline_expression_uses_another_column() -> None:
    _expect(
        SS_DS + """rules:
- !SHARDING
  tables:
    t: {actualDataNodes: "ds_${0..1}.t", databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db}}}
  shardingAlgorithms:
    db: {type: INLINE, props: {algorithm-expression: "ds_${order_id % 2}"}}
""",
        "rules[0].shardingAlgorithms.db.props.algorithm-expression",
        "['order_id']",
        "['user_id']",
    )


def test_strategy_kind_does_not_fit_the_algorithm() -> None:
    _expect(
        SS_DS + """rules:
- !SHARDING
  tables:
    t: {actualDataNodes: "ds_${0..1}.t", databaseStrategy: {standard: {shardingColumn: a, shardingAlgorithmName: c}}}
  shardingAlgorithms:
    c: {type: COMPLEX_INLINE, props: {sharding-columns: "a,b", algorithm-expression: "ds_${(a + b) % 2}"}}
""",
        "rules[0].tables.t.databaseStrategy",
        "needs a complex strategy",
    )


def test_standard_strategy_without_column() -> None:
    _expect(
        SS_DS
        + "rules:\n- !SHARDING\n  tables:\n    t: {actualDataNodes: ds_0.t, tableStrategy: {standard: {shardingAlgorithmName: x}}}\n  shardingAlgorithms: {x: {type: MOD, props: {sharding-count: 1}}}\n",
        "rules[0].tables.t.tableStrategy.standard.shardingColumn",
        "defaultShardingColumn",
    )


def test_bad_algorithm_prop_names_the_prop() -> None:
    _expect(SS_DS + "rules:\n- !SHARDING\n  shardingAlgorithms:\n    m: {type: MOD, props: {sharding-count: many}}\n",
            "rules[0].shardingAlgorithms.m.props.sharding-count", "'many'")  # fmt: skip


# -- data sources, runtime, documents -----------------------------------------------------------------------------


def test_missing_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DDM_NOT_SET_ANYWHERE", raising=False)
    _expect("dataSources:\n  ds: {url: 'mysql://h/x', passwordEnv: DDM_NOT_SET_ANYWHERE}\n",
            "dataSources.ds.passwordEnv", "DDM_NOT_SET_ANYWHERE")  # fmt: skip
    _expect(SS_DS.replace('x"}', 'x", password: "${ENV:DDM_NOT_SET_ANYWHERE}"}', 1) + "rules: []\n",
            "dataSources.ds_0.password", "DDM_NOT_SET_ANYWHERE")  # fmt: skip


def test_unsupported_url_scheme() -> None:
    _expect(SS_DS.replace("jdbc:mysql://h1:3306/x", "jdbc:oracle:thin:@h1:1521/x") + "rules: []\n",
            "dataSources.ds_1.jdbcUrl", "unsupported database URL", "oracle")  # fmt: skip


def test_missing_url() -> None:
    _expect("dataSources:\n  ds: {username: u}\nrules: []\n", "dataSources.ds.jdbcUrl", "no jdbcUrl")


def test_runtime_switch_types() -> None:
    _expect(
        NATIVE_DS + "runtime: {allowFullRoute: maybe, maxOffset: -1}\n", "runtime.allowFullRoute", "'maybe'"
    )
    _expect(NATIVE_DS + "runtime: {maxOffset: -1}\n", "runtime.maxOffset", "-1")


def test_yaml_syntax_error_names_the_line() -> None:
    err = _problems("dataSources:\n  ds: [unclosed\n")
    assert err.problems[0].path.startswith("<line ")
    assert "YAML syntax error" in err.problems[0].message


def test_shardingsphere_4x_is_refused_by_name() -> None:
    _expect("dataSources: {}\nshardingRule:\n  tables: {}\n", "shardingRule", "4.x")


def test_empty_document() -> None:
    _expect("", "<document>", "empty")


# -- the aggregate -------------------------------------------------------------------------------------------------


def test_all_problems_of_a_file_are_reported_with_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(SS_DS + """rules:
- !SHARDING
  tables:
    t_a: {actualDataNodes: "ds_${0..3}.t_a"}
  shardingAlgorithms:
    x: {type: NO_SUCH_TYPE}
  keyGenerators:
    k: {type: NO_SUCH_GENERATOR}
- !ENCRYPT {}
""")
    with pytest.raises(ConfigValidationError) as info:
        load_config(path)
    err = info.value
    paths = {p.path for p in err.problems}
    assert {
        "rules[0].tables.t_a.actualDataNodes",
        "rules[0].shardingAlgorithms.x.type",
        "rules[0].keyGenerators.k.type",
        "rules[1]",
    } <= paths
    assert len(err.problems) >= 4
    message = str(err)
    assert message.startswith(f"invalid configuration {path}: ")
    assert all(f"{path}: {p.path}: " in message for p in err.problems)
    assert err.origin == str(path) and err.field == err.problems[0].path


def test_validation_error_pickles() -> None:
    import pickle

    err = _problems(NATIVE_DS + "broadcastTables: 7\n")
    again = pickle.loads(pickle.dumps(err))
    assert again.problems == err.problems and str(again) == str(err)


def test_mod_count_leaving_data_sources_unused() -> None:
    _expect(
        SS_DS + """rules:
- !SHARDING
  tables:
    t: {actualDataNodes: "ds_${0..1}.t", databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: m}}}
  shardingAlgorithms:
    m: {type: MOD, props: {sharding-count: 1}}
""",
        "rules[0].tables.t.databaseStrategy",
        "sharding-count 1",
        "2 data source(s)",
    )


def test_short_form_field_in_explicit_table() -> None:
    _expect(NATIVE_DS + "tables:\n  - {logicTable: t, dataNodes: 'ds_0.t_${0..1}', tablePerShard: 2}\n",
            "tables[0].tablePerShard", "short form")  # fmt: skip


def test_table_sharding_without_any_key() -> None:
    _expect(NATIVE_DS + "tables:\n  - {logicTable: t, databases: [ds_0], tablePerShard: 2}\n",
            "tables[0].tableKey", "no tableKey or shardKey")  # fmt: skip


def test_broadcast_table_listed_twice() -> None:
    _expect(NATIVE_DS + "broadcastTables: [t_dict, T_DICT]\n", "broadcastTables", "'T_DICT' is listed twice")
    _expect(SS_DS + "rules:\n- !BROADCAST\n  tables: [t_dict, t_dict]\n", "rules[0].tables[1]", "listed twice")
