"""Router, table-driven: ShardingSphere parity for names, DDL, governance and SQL hints.

Four categories, each a table of statements with expectations derived from the
configurations' formulas (``router_cases``) and from ShardingSphere's rules:

* schema-qualified names: the logical schema (``config.name``: ``order_db`` in
  the 2 × 16 ShardingSphere fixture, ``order-service`` in the own-format one)
  is dropped, never taken for a table; ``SHOW TABLES`` answers with logic names;
* constraint names on sharded tables become ``<name>_<physical table>``
  (ShardingSphere's ``ConstraintToken``); index names stay as written (MySQL
  scopes them to their table);
* a ShardingSphere YAML keeps ShardingSphere's audit semantics
  (``tests/configs/ss_audit.yaml``);
* ``/* SHARDINGSPHERE_HINT: ... */`` keys that map onto ddm-core's hint.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ddm_core.errors import ConfigValidationError, FullRouteError, RoutingError, UnsupportedSQLError
from ddm_core.metadata import dump_native, load_config
from ddm_core.route import RouteKind, Router, hint

from router_cases import Case, Node, all_nodes, check, config, ids, n_node, nodes, r_log_node, router, s_node

SINGLE, MULTI, FULL, BROADCAST = RouteKind.SINGLE, RouteKind.MULTI, RouteKind.FULL, RouteKind.BROADCAST
N_ALL, S_ALL, R_ALL = all_nodes("N"), all_nodes("S"), all_nodes("R")
N_SOURCES, S_SOURCES = ["ds_0", "ds_1", "ds_2", "ds_3"], ["ds0", "ds1"]
CONFIGS = Path(__file__).parent / "configs"


def on(ds: str, every: list[Node]) -> list[Node]:
    return [n for n in every if n.ds == ds]


# -- 1. schema-qualified names ---------------------------------------------------------------------

SCHEMA_CASES = [
    # a sharded table: the logical schema goes with the table name (as for any qualifier)
    Case("select-qualified", "S", "SELECT * FROM order_db.t_order WHERE user_id = %s", [5], nodes=nodes(s_node, 5),
         unit_sql="SELECT * FROM {t_order} WHERE user_id = %s"),
    Case("select-backticked", "S", "SELECT * FROM `order_db`.`t_order` WHERE user_id = 21", nodes=nodes(s_node, 21),
         unit_sql="SELECT * FROM {t_order} WHERE user_id = 21"),
    Case("n-hyphenated-schema", "N", "SELECT o.id FROM `order-service`.t_order o WHERE o.user_id = 7",
         nodes=nodes(n_node, 7), unit_sql="SELECT o.id FROM {t_order} o WHERE o.user_id = 7"),
    # broadcast and single tables: the unit runs in the data source's own database
    Case("broadcast-qualified", "S", "SELECT * FROM order_db.t_dict_region WHERE id = 1", sources=["ds0"],
         unit_sql="SELECT * FROM t_dict_region WHERE id = 1"),
    Case("broadcast-column-qualified", "S", "SELECT order_db.t_dict_region.name FROM order_db.t_dict_region",
         sources=["ds0"], unit_sql="SELECT t_dict_region.name FROM t_dict_region"),
    Case("broadcast-update-qualified", "S", "UPDATE order_db.t_dict_region SET name = 'x' WHERE id = 1",
         sources=S_SOURCES, kind=BROADCAST, unit_sql="UPDATE t_dict_region SET name = 'x' WHERE id = 1"),
    Case("broadcast-insert-qualified", "S", "INSERT INTO order_db.t_dict_region (id, name) VALUES (1, 'a')",
         sources=S_SOURCES, unit_sql="INSERT INTO t_dict_region (id, name) VALUES (1, 'a')"),
    Case("single-qualified", "N", "SELECT * FROM `order-service`.t_config WHERE k = 'a'", sources=["ds_0"],
         unit_sql="SELECT * FROM t_config WHERE k = 'a'"),
    Case("join-qualified-broadcast", "S", "SELECT o.id, r.name FROM order_db.t_order o JOIN order_db.t_dict_region r "
         "ON o.region = r.id WHERE o.user_id = 3", nodes=nodes(s_node, 3),
         unit_sql="SELECT o.id, r.name FROM {t_order} o JOIN t_dict_region r ON o.region = r.id WHERE o.user_id = 3"),
    # a table the configuration does not know: only the logical schema is dropped
    Case("unknown-logical-schema", "N", "SELECT * FROM `order-service`.t_misc", sources=["ds_0"],
         unit_sql="SELECT * FROM t_misc"),
    Case("unknown-other-schema-kept", "N", "SELECT * FROM information_schema.tables", sources=["ds_0"],
         unit_sql="SELECT * FROM information_schema.tables"),
    # SHOW / DESCRIBE forms: schema before the table, or FROM / IN after it
    Case("show-columns-from-schema", "S", "SHOW COLUMNS FROM t_order FROM order_db", nodes=S_ALL[:1],
         statement="show", unit_sql="SHOW COLUMNS FROM {t_order}"),
    Case("show-columns-in-schema", "S", "SHOW COLUMNS FROM t_order IN `order_db`", nodes=S_ALL[:1],
         unit_sql="SHOW COLUMNS FROM {t_order}"),
    Case("show-full-columns-qualified", "S", "SHOW FULL COLUMNS FROM order_db.t_order_item", nodes=S_ALL[:1],
         unit_sql="SHOW FULL COLUMNS FROM {t_order_item}"),
    Case("show-index-qualified", "S", "SHOW INDEX FROM order_db.t_order", nodes=S_ALL[:1],
         unit_sql="SHOW INDEX FROM {t_order}"),
    Case("show-index-from-schema", "N", "SHOW INDEX FROM t_order FROM `order-service`", nodes=N_ALL[:1],
         unit_sql="SHOW INDEX FROM {t_order}"),
    Case("show-create-qualified", "S", "SHOW CREATE TABLE order_db.t_order", nodes=S_ALL[:1], statement="show",
         unit_sql="SHOW CREATE TABLE {t_order}"),
    Case("show-create-backticked", "S", "SHOW CREATE TABLE `order_db`.`t_order`", nodes=S_ALL[:1],
         unit_sql="SHOW CREATE TABLE {t_order}"),
    Case("show-create-broadcast-qualified", "S", "SHOW CREATE TABLE order_db.t_dict_region", sources=["ds0"],
         unit_sql="SHOW CREATE TABLE t_dict_region"),
    Case("describe-qualified", "S", "DESCRIBE order_db.t_order", nodes=S_ALL[:1], unit_sql="DESCRIBE {t_order}"),
    Case("show-columns-unknown-logical", "N", "SHOW COLUMNS FROM t_misc FROM `order-service`", sources=["ds_0"],
         unit_sql="SHOW COLUMNS FROM t_misc"),
    Case("show-columns-unknown-other-kept", "N", "SHOW COLUMNS FROM t_misc FROM other_db", sources=["ds_0"],
         unit_sql="SHOW COLUMNS FROM t_misc FROM other_db"),
    Case("show-table-status-schema", "S", "SHOW TABLE STATUS FROM order_db LIKE 't_dict%'", sources=["ds0"],
         unit_sql="SHOW TABLE STATUS LIKE 't_dict%%'"),  # units are %-formatted by the driver
    Case("show-tables-other-schema-kept", "S", "SHOW TABLES FROM information_schema", sources=["ds0"],
         unit_sql="SHOW TABLES FROM information_schema"),
    # DDL
    Case("alter-qualified", "S", "ALTER TABLE order_db.t_order ADD COLUMN note VARCHAR(20)", nodes=S_ALL,
         statement="ddl", unit_sql="ALTER TABLE {t_order} ADD COLUMN note VARCHAR(20)"),
    Case("create-broadcast-qualified", "S", "CREATE TABLE order_db.t_dict_region (id INT)", sources=S_SOURCES,
         unit_sql="CREATE TABLE t_dict_region (id INT)"),
    Case("drop-unknown-logical", "N", "DROP TABLE IF EXISTS `order-service`.t_misc", sources=["ds_0"],
         unit_sql="DROP TABLE IF EXISTS t_misc"),
]


@pytest.mark.parametrize("case", SCHEMA_CASES, ids=ids(SCHEMA_CASES))
def test_schema_qualified_names(case: Case) -> None:
    check(case)


# SHOW TABLES: one unit per data source that holds a table a statement can name, each mapping its
# physical tables to logic names; the merger drops repeats and sorts (the units sort the same way).
S_LOGIC = {"t_order": [f"t_order_{t}" for t in range(16)], "t_order_item": [f"t_order_item_{t}" for t in range(16)]}


def _in_list(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


SHOW_TABLES = [
    # (id, config, sql, data sources, column, filter fragment)
    ("plain", "S", "SHOW TABLES", S_SOURCES, "Tables_in_order_db", ""),
    ("of-logical-schema", "S", "SHOW TABLES FROM order_db", S_SOURCES, "Tables_in_order_db", ""),
    ("like", "S", "SHOW TABLES LIKE 't\\_order%'", S_SOURCES, "Tables_in_order_db (t\\_order%)",
     "WHERE `Tables_in_order_db` LIKE 't\\_order%'"),
    ("like-param", "S", "SHOW TABLES LIKE %s", S_SOURCES, "Tables_in_order_db", "WHERE `Tables_in_order_db` LIKE %s"),
    ("full-where", "S", "SHOW FULL TABLES IN order_db WHERE Table_type = 'BASE TABLE'", S_SOURCES,
     "Tables_in_order_db", "WHERE Table_type = 'BASE TABLE'"),
    ("n-default-source-lists-all", "N", "SHOW TABLES", N_SOURCES, "Tables_in_order-service", ""),
    ("r-no-default-source", "R", "SHOW TABLES", N_SOURCES, "Tables_in_router-ranges", ""),
]


@pytest.mark.parametrize("case", SHOW_TABLES, ids=[c[0] for c in SHOW_TABLES])
def test_show_tables_answers_with_logic_names(case: tuple[Any, ...]) -> None:
    _, name, sql, sources, column, where = case
    plan = router(name).route(sql, ["t%"] if "%s" in sql else None)
    assert [u.data_source for u in plan.units] == sources
    assert plan.statement == "show" and not plan.is_write and plan.kind is BROADCAST
    assert plan.merge.distinct and plan.merge.order_by == ((0, False),)
    assert plan.merge.visible == (2 if "FULL" in sql else 1)
    cfg = config(name)
    for unit in plan.units:
        sql_text = unit.sql.replace("%%", "%") if "%s" not in sql else unit.sql
        assert f"`{column}`" in sql_text and "ORDER BY CAST(" in sql_text
        assert where in sql_text
        # every sharded table's physical tables on this data source map to its logic name
        for logic, table in cfg.tables.items():
            physical = [n.table for n in table.data_nodes if n.data_source == unit.data_source]
            if name == "S":
                assert physical == S_LOGIC[logic]  # the formula, not the router, says which
            if any(p != logic for p in physical):
                assert f"WHEN table_name IN ({_in_list(physical)}) THEN '{logic}'" in sql_text
        # tables the configuration does not name live in the default data source only
        lists_everything = unit.data_source == cfg.default_data_source
        assert ("AND table_name IN (" not in sql_text) is lists_everything
    assert plan.units[0].params == (("t%",) if "%s" in sql else ())


def test_show_tables_of_another_schema_is_not_rewritten() -> None:
    plan = router("N").route("SHOW TABLES FROM mysql")
    assert [(u.data_source, u.sql.split("*/ ")[-1]) for u in plan.units] == [("ds_0", "SHOW TABLES FROM mysql")]


def test_show_tables_honours_a_forced_data_source() -> None:
    with hint(database="ds1"):
        plan = router("S").route("SHOW TABLES")
    assert [u.data_source for u in plan.units] == ["ds1"]
    with hint(database="nowhere"), pytest.raises(RoutingError, match="'nowhere'"):
        router("S").route("SHOW TABLES")


# -- 2. constraint names ------------------------------------------------------------------------------


def ddl(id: str, name: str, sql: str, unit_sql: str | None = None, **kw: Any) -> Case:
    kw.setdefault("statement", "ddl")
    kw.setdefault("is_write", True)
    if "sources" not in kw:
        kw.setdefault("nodes", {"N": N_ALL, "S": S_ALL, "R": R_ALL}[name])
    return Case(id, name, sql, unit_sql=unit_sql, **kw)


CONSTRAINT_CASES = [
    # CREATE TABLE: table and column constraints take the physical table's name as suffix
    ddl("create-fk", "N", "CREATE TABLE t_order_item (item_id BIGINT, user_id BIGINT, "
        "CONSTRAINT fk_user FOREIGN KEY (user_id) REFERENCES t_order (user_id))",
        "CREATE TABLE {t_order_item} (item_id BIGINT, user_id BIGINT, "
        "CONSTRAINT fk_user_{t_order_item} FOREIGN KEY (user_id) REFERENCES {t_order} (user_id))", kind=BROADCAST),
    ddl("create-several", "S", "CREATE TABLE t_order (id INT, qty INT CONSTRAINT chk_qty CHECK (qty > 0), "
        "CONSTRAINT pk_order PRIMARY KEY (id), CONSTRAINT uk_id UNIQUE (id), UNIQUE KEY uk_qty (qty), "
        "KEY idx_qty (qty))",
        "CREATE TABLE {t_order} (id INT, qty INT CONSTRAINT chk_qty_{t_order} CHECK (qty > 0), "
        "CONSTRAINT pk_order_{t_order} PRIMARY KEY (id), CONSTRAINT uk_id_{t_order} UNIQUE (id), "
        "UNIQUE KEY uk_qty (qty), KEY idx_qty (qty))"),
    ddl("create-quoted-name", "S", "CREATE TABLE `t_order` (id INT, CONSTRAINT `fk a` FOREIGN KEY (id) "
        "REFERENCES `t_order_item` (id))",
        "CREATE TABLE {t_order} (id INT, CONSTRAINT `fk a_{t_order}` FOREIGN KEY (id) REFERENCES {t_order_item} (id))"),
    ddl("create-qualified", "S", "CREATE TABLE order_db.t_order (id INT, CONSTRAINT fk FOREIGN KEY (id) "
        "REFERENCES order_db.t_order_item (id))",
        "CREATE TABLE {t_order} (id INT, CONSTRAINT fk_{t_order} FOREIGN KEY (id) REFERENCES {t_order_item} (id))"),
    ddl("create-unnamed-fk-kept", "S", "CREATE TABLE t_order (id INT, FOREIGN KEY (id) REFERENCES t_order_item (id))"),
    # ALTER TABLE: ADD CONSTRAINT, and every DROP of a constraint by name, so what was created can be dropped
    ddl("alter-add-fk", "S", "ALTER TABLE t_order ADD CONSTRAINT t_order_fk FOREIGN KEY (order_id) "
        "REFERENCES t_order_item (order_id)",
        "ALTER TABLE {t_order} ADD CONSTRAINT t_order_fk_{t_order} FOREIGN KEY (order_id) "
        "REFERENCES {t_order_item} (order_id)"),
    ddl("alter-add-two", "N", "ALTER TABLE t_order ADD CONSTRAINT fk1 FOREIGN KEY (a) REFERENCES t_order_item (a), "
        "ADD CONSTRAINT chk2 CHECK (a > 1)",
        "ALTER TABLE {t_order} ADD CONSTRAINT fk1_{t_order} FOREIGN KEY (a) REFERENCES {t_order_item} (a), "
        "ADD CONSTRAINT chk2_{t_order} CHECK (a > 1)"),
    ddl("alter-add-unique", "S", "ALTER TABLE t_order ADD CONSTRAINT uk_no UNIQUE KEY (order_no)",
        "ALTER TABLE {t_order} ADD CONSTRAINT uk_no_{t_order} UNIQUE KEY (order_no)"),
    ddl("alter-drop-foreign-key", "S", "ALTER TABLE t_order DROP FOREIGN KEY t_order_fk",
        "ALTER TABLE {t_order} DROP FOREIGN KEY t_order_fk_{t_order}"),
    ddl("alter-drop-constraint", "N", "ALTER TABLE t_order DROP CONSTRAINT `fk1`",
        "ALTER TABLE {t_order} DROP CONSTRAINT `fk1_{t_order}`"),
    ddl("alter-drop-check", "R", "ALTER TABLE t_log DROP CHECK chk2", "ALTER TABLE {t_log} DROP CHECK chk2_{t_log}"),
    ddl("r-single-node-per-db", "R", "ALTER TABLE t_account ADD CONSTRAINT fk_acc FOREIGN KEY (a) REFERENCES t_country (a)",
        "ALTER TABLE {t_account} ADD CONSTRAINT fk_acc_{t_account} FOREIGN KEY (a) REFERENCES t_country (a)",
        nodes=all_nodes("R", "t_account")),
    # index names are per table in MySQL / MariaDB: kept as written (ShardingSphere 5.5 does the same)
    ddl("create-index-kept", "N", "CREATE INDEX idx_status ON t_order (status)"),
    ddl("alter-add-index-kept", "S", "ALTER TABLE t_order ADD INDEX idx_s (status), ADD UNIQUE KEY uk_s (sn)"),
    ddl("alter-drop-index-kept", "S", "ALTER TABLE t_order DROP INDEX idx_s"),
    ddl("drop-index-kept", "N", "DROP INDEX idx_status ON t_order"),
    ddl("fk-index-name-kept", "S", "ALTER TABLE t_order ADD FOREIGN KEY fk_idx (a) REFERENCES t_order_item (a)"),
    # broadcast, single and unknown tables: one physical table per database, names unchanged
    ddl("broadcast-kept", "S", "ALTER TABLE t_dict_region ADD CONSTRAINT fk_r FOREIGN KEY (a) REFERENCES t_dict_status (a)",
        sources=S_SOURCES),
    ddl("single-kept", "R", "ALTER TABLE t_setting ADD CONSTRAINT chk_s CHECK (a > 0)", sources=["ds_3"]),
    ddl("unknown-kept", "N", "CREATE TABLE t_misc (a INT, CONSTRAINT chk_m CHECK (a > 0))", sources=["ds_0"]),
    # too long once suffixed: refused with the name, the result and MySQL's limit
    Case("name-too-long", "N", "ALTER TABLE t_order ADD CONSTRAINT " + "f" * 60 + " CHECK (a > 0)",
         error=(UnsupportedSQLError, ("f" * 60 + "_t_order_0_0", "64", "'t_order'", "at most 52"))),
]


@pytest.mark.parametrize("case", CONSTRAINT_CASES, ids=ids(CONSTRAINT_CASES))
def test_constraint_names(case: Case) -> None:
    check(case)


def test_every_suffixed_constraint_name_is_unique_per_data_source() -> None:
    plan = router("S").route("ALTER TABLE t_order ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES t_order_item (a)")
    names: dict[str, list[str]] = {}
    for unit in plan.units:
        found = re.search(r"CONSTRAINT (\S+)", unit.sql)
        assert found is not None
        names.setdefault(unit.data_source, []).append(found.group(1))
    assert {ds: len(set(n)) for ds, n in names.items()} == {"ds0": 16, "ds1": 16}


def test_suffix_is_backticked_when_the_name_needs_it() -> None:
    plan = router("S").route("ALTER TABLE t_order ADD CONSTRAINT `a``b` CHECK (x > 0)")
    assert "CONSTRAINT `a``b_t_order_0` CHECK" in plan.units[0].sql


def test_constraint_name_with_percent_survives_pymysql_formatting() -> None:
    plan = router("S").route("ALTER TABLE t_order ADD CONSTRAINT `c%%1` CHECK (x > %s)", [0])
    assert "CONSTRAINT `c%%1_t_order_0` CHECK (x > %s)" in plan.units[0].sql  # PyMySQL makes it c%1_t_order_0


# -- 3. ShardingSphere audit strategies -------------------------------------------------------------------


def audit_router() -> Router:
    return Router(load_config(CONFIGS / "ss_audit.yaml"))


def a_node(user_id: int, order_id: int | None, table: str) -> tuple[str, str]:
    """ss_audit.yaml: ds_${user_id % 2}; t_order / t_order_item by order_id % 2; t_user / t_log one per db."""
    suffix = f"_{order_id % 2}" if order_id is not None else ""
    return f"ds_{user_id % 2}", table + suffix


def a_every(table: str, per_db: int) -> list[tuple[str, str]]:
    return [(f"ds_{d}", table + (f"_{t}" if per_db > 1 else "")) for d in range(2) for t in range(per_db)]


AUDITED = "sharding_key_required_auditor"
AUDIT_CASES = [
    # (id, sql, expected (data source, physical table) per unit, or the error fragments)
    ("audited-point", "SELECT * FROM t_order WHERE user_id = 3 AND order_id = 8", [a_node(3, 8, "t_order")]),
    ("audited-database-key-only", "SELECT * FROM t_order WHERE user_id = 3",
     [a_node(3, 0, "t_order"), a_node(3, 1, "t_order")]),
    ("audited-select-refused", "SELECT * FROM t_order", ("'t_order'", f"'{AUDITED}'", "DML_SHARDING_CONDITIONS")),
    ("audited-update-refused", "UPDATE t_order SET status = 1 WHERE status = 0", ("'t_order'", f"'{AUDITED}'")),
    ("audited-delete-refused", "DELETE FROM t_order", ("'t_order'", "user_id")),
    ("default-strategy-refused", "UPDATE t_user SET name = 'x'", ("'t_user'", f"'{AUDITED}'")),
    ("default-strategy-keyed", "UPDATE t_user SET name = 'x' WHERE user_id = 5", [a_node(5, None, "t_user")]),
    # no auditor: every shard, as ShardingSphere routes it (the own format would refuse the UPDATE)
    ("no-auditor-update", "UPDATE t_log SET level = 1", a_every("t_log", 1)),
    ("no-auditor-delete", "DELETE FROM t_order_item WHERE qty = 0", a_every("t_order_item", 2)),
    ("no-auditor-select", "SELECT * FROM t_order_item", a_every("t_order_item", 2)),
    # every sharded table of the statement is audited, not only the one that routes it
    ("bound-table-audited", "SELECT * FROM t_order_item i JOIN t_order o ON i.order_id = o.order_id",
     ("'t_order'", f"'{AUDITED}'")),
]


@pytest.mark.parametrize("case", AUDIT_CASES, ids=[c[0] for c in AUDIT_CASES])
def test_shardingsphere_audit_strategy(case: tuple[str, str, Any]) -> None:
    _, sql, expected = case
    r = audit_router()
    if isinstance(expected, tuple):
        with pytest.raises(FullRouteError) as info:
            r.route(sql)
        for fragment in expected:
            assert fragment in str(info.value)
        assert sql in str(info.value)
        return
    plan = r.route(sql)
    assert [(u.data_source, t) for u in plan.units for _, t in u.tables[:1]] == expected


def test_auditors_are_recorded_and_not_carried_into_the_own_format() -> None:
    cfg = load_config(CONFIGS / "ss_audit.yaml")
    assert {t.name: t.auditors for t in cfg.tables.values()} == {
        "t_order_item": (), "t_order": (AUDITED,), "t_user": (AUDITED,), "t_log": ()}
    assert not cfg.warnings
    own = load_config(dump_native(cfg, secrets="keep"))
    assert own == cfg and all(t.auditors is None for t in own.tables.values())
    with pytest.raises(FullRouteError, match="allowDmlFullRoute"):  # the own format's safer default
        Router(own).route("UPDATE t_log SET level = 1")


def test_own_format_keeps_its_default() -> None:
    with pytest.raises(FullRouteError, match="allowDmlFullRoute"):
        router("N").route("DELETE FROM t_order")
    assert all(t.auditors is None for t in config("N").tables.values())


@pytest.mark.parametrize("strategy, fragment", [
    ("{auditorNames: [missing_auditor]}", "auditor 'missing_auditor' is not declared under auditors"),
    ("{auditorNames: [sharding_key_required_auditor], allowHintDisable: maybe}", "true or false"),
    ("{auditorNames: [sharding_key_required_auditor], extra: 1}", "unknown field 'extra'"),
])
def test_audit_strategy_problems_name_the_field(strategy: str, fragment: str) -> None:
    text = (CONFIGS / "ss_audit.yaml").read_text().replace(
        "{auditorNames: [sharding_key_required_auditor], allowHintDisable: true}", strategy)
    with pytest.raises(ConfigValidationError) as info:
        load_config(text)
    assert fragment in str(info.value) and "tables.t_order.auditStrategy" in str(info.value)


# -- 4. SHARDINGSPHERE_HINT comments ------------------------------------------------------------------------

HINT = "/* SHARDINGSPHERE_HINT: {} */ "

HINT_CASES = [
    # DATA_SOURCE_NAME = hint(database=...): every node of that data source; the comment is not sent on
    Case("data-source", "S", HINT.format("DATA_SOURCE_NAME=ds1") + "SELECT * FROM t_order WHERE status = 1",
         nodes=on("ds1", S_ALL), unit_sql="SELECT * FROM {t_order} WHERE status = 1"),
    Case("data-source-alias", "S", "/* ShardingSphere hint: dataSourceName=ds0 */ SELECT * FROM t_order",
         nodes=on("ds0", S_ALL), unit_sql="SELECT * FROM {t_order}"),
    Case("data-source-broadcast-read", "S", HINT.format("DATA_SOURCE_NAME=ds1") + "SELECT * FROM t_dict_region",
         sources=["ds1"], unit_sql="SELECT * FROM t_dict_region"),
    # hint-strategy values (t_audit: ds_${value % 4})
    Case("database-value", "R", HINT.format("SHARDING_DATABASE_VALUE=6") + "SELECT * FROM t_audit WHERE id = %s",
         [1], nodes=[Node((2,), "ds_2", "")], unit_sql="SELECT * FROM t_audit WHERE id = %s"),
    Case("table-prefixed-value", "R", HINT.format("t_audit.SHARDING_DATABASE_VALUE=7") + "DELETE FROM t_audit",
         nodes=[Node((3,), "ds_3", "")], unit_sql="DELETE FROM t_audit", is_write=True),
    Case("values-agree", "R", HINT.format("t_audit.SHARDING_DATABASE_VALUE=5, SHARDING_DATABASE_VALUE=5")
         + "SELECT * FROM t_audit", nodes=[Node((1,), "ds_1", "")], unit_sql="SELECT * FROM t_audit"),
    # WRITE_ROUTE_ONLY: the shard key still routes
    Case("write-route-only", "S", HINT.format("WRITE_ROUTE_ONLY=true") + "SELECT * FROM t_order WHERE user_id = %s",
         [40], nodes=nodes(s_node, 40), unit_sql="SELECT * FROM {t_order} WHERE user_id = %s"),
    # SKIP_SQL_REWRITE with DATA_SOURCE_NAME: the statement as written, on that data source
    Case("skip-rewrite", "S", HINT.format("DATA_SOURCE_NAME=ds1, SKIP_SQL_REWRITE=true")
         + "SELECT * FROM t_order_3 WHERE user_id = %s", [19], sources=["ds1"],
         unit_sql="SELECT * FROM t_order_3 WHERE user_id = %s", statement="select", is_write=False),
    Case("skip-rewrite-write", "S", HINT.format("skipSQLRewrite=TRUE, dataSourceName=ds0")
         + "UPDATE t_order_7 SET a = 1", sources=["ds0"], unit_sql="UPDATE t_order_7 SET a = 1",
         statement="update", is_write=True),
    Case("skip-rewrite-false", "S", HINT.format("SKIP_SQL_REWRITE=false") + "SELECT * FROM t_order WHERE user_id = 2",
         nodes=nodes(s_node, 2), unit_sql="SELECT * FROM {t_order} WHERE user_id = 2"),
    # refused, naming the key
    Case("unknown-key", "S", HINT.format("DATASOURCE=ds0") + "SELECT 1",
         error=(UnsupportedSQLError, ("'DATASOURCE'", "DATA_SOURCE_NAME"))),
    Case("not-implemented-key", "S", HINT.format("DISABLE_AUDIT_NAMES=a1") + "SELECT * FROM t_order",
         error=(UnsupportedSQLError, ("'DISABLE_AUDIT_NAMES'", "not supported", "auditStrategy"))),
    Case("shadow-key", "S", HINT.format("SHADOW=true") + "SELECT 1", error=(UnsupportedSQLError, ("'SHADOW'",))),
    Case("unknown-data-source", "S", HINT.format("DATA_SOURCE_NAME=ds9") + "SELECT 1",
         error=(UnsupportedSQLError, ("'ds9'", "ds0, ds1"))),
    Case("skip-rewrite-needs-data-source", "S", HINT.format("SKIP_SQL_REWRITE=true") + "SELECT 1",
         error=(UnsupportedSQLError, ("SKIP_SQL_REWRITE", "DATA_SOURCE_NAME"))),
    Case("skip-rewrite-with-values", "R", HINT.format("DATA_SOURCE_NAME=ds_0,SKIP_SQL_REWRITE=true,"
         "SHARDING_DATABASE_VALUE=1") + "SELECT 1", error=(UnsupportedSQLError, ("SHARDING_DATABASE_VALUE",))),
    Case("bad-boolean", "S", HINT.format("WRITE_ROUTE_ONLY=yes") + "SELECT 1",
         error=(UnsupportedSQLError, ("WRITE_ROUTE_ONLY", "'yes'", "true or false"))),
    Case("malformed-item", "S", HINT.format("DATA_SOURCE_NAME") + "SELECT 1",
         error=(UnsupportedSQLError, ("'DATA_SOURCE_NAME'", "key=value"))),
    Case("unknown-table-prefix", "R", HINT.format("t_nope.SHARDING_TABLE_VALUE=1") + "SELECT 1",
         error=(UnsupportedSQLError, ("'t_nope'",))),
    Case("conflicting-values", "R", HINT.format("t_audit.SHARDING_DATABASE_VALUE=1, t_log.SHARDING_DATABASE_VALUE=2")
         + "SELECT 1", error=(UnsupportedSQLError, ("one value per statement",))),
    Case("prefix-on-plain-key", "S", HINT.format("t_order.DATA_SOURCE_NAME=ds0") + "SELECT 1",
         error=(UnsupportedSQLError, ("no table prefix",))),
    Case("not-at-start", "S", "SELECT * FROM t_order /* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds1 */ WHERE user_id = 1",
         error=(UnsupportedSQLError, ("must open the statement",))),
    Case("after-another-comment", "S", "/* app */ " + HINT.format("DATA_SOURCE_NAME=ds1") + "SELECT 1",
         error=(UnsupportedSQLError, ("must open the statement",))),
    Case("optimizer-hint-form", "S", "SELECT /*+ SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds1 */ * FROM t_order",
         error=(UnsupportedSQLError, ("must open the statement",))),
    # an executable comment is statement text, never a hint (its content is parsed as SQL)
    Case("executable-comment-is-not-a-hint", "S", "/*! SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds1 */ SELECT 1",
         error=(UnsupportedSQLError, ("cannot parse",))),
]


@pytest.mark.parametrize("case", HINT_CASES, ids=ids(HINT_CASES))
def test_shardingsphere_sql_hint(case: Case) -> None:
    check(case)


def test_sql_hint_matches_the_context_hint() -> None:
    sql = "SELECT * FROM t_order WHERE status = 1"
    with hint(database="ds1"):
        by_context = router("S").route(sql)
    by_comment = router("S").route(HINT.format("DATA_SOURCE_NAME=ds1") + sql)
    assert by_comment.units == by_context.units


def test_sql_hint_overrides_only_what_it_sets() -> None:
    sql = HINT.format("DATA_SOURCE_NAME=ds0") + "SELECT * FROM t_order"
    with hint(database="ds1", force_primary=True):
        plan = router("S").route(sql)
    assert {u.data_source for u in plan.units} == {"ds0"} and plan.force_primary


def test_write_route_only_keeps_the_fast_path_and_forces_the_primary() -> None:
    r = router("S")
    plan = r.route(HINT.format("WRITE_ROUTE_ONLY=true") + "SELECT * FROM t_order WHERE user_id = %s", [40])
    assert plan.force_primary and plan.kind is SINGLE
    compiled = r.compile(HINT.format("WRITE_ROUTE_ONLY=true") + "SELECT * FROM t_order WHERE user_id = %s")
    assert compiled.fast_path is not None  # type: ignore[attr-defined]
    assert not r.route("SELECT * FROM t_order WHERE user_id = %s", [40]).force_primary


def test_parse_error_positions_count_the_hint_comment() -> None:
    sql = HINT.format("WRITE_ROUTE_ONLY=true") + "SELECT * FORM t_order"
    with pytest.raises(UnsupportedSQLError) as info:
        router("S").route(sql)
    position = info.value.context.get("position")
    assert position is not None and sql[position:].startswith(("FORM", "t_order"))


def test_r_log_hint_values_reach_hint_strategies_only() -> None:
    """A database value changes nothing for a table sharded by its column (ShardingSphere ignores it too)."""
    plan = router("R").route(HINT.format("SHARDING_DATABASE_VALUE=3") + "SELECT * FROM t_log WHERE user_id = 1002")
    assert [(u.data_source, t) for u in plan.units for _, t in u.tables[:1]] == [
        (r_log_node(1002).ds, r_log_node(1002).table("t_log"))]


def test_logic_db_is_the_logical_schema_of_a_configuration_without_a_name() -> None:
    """``SHOW TABLES`` answers ``Tables_in_logic_db`` then; qualifying with ``logic_db`` must route alike."""
    from ddm_core import Router, load_config

    config = load_config({
        "dataSources": {"ds_0": "sqlite:///:memory:", "ds_1": "sqlite:///:memory:"},
        "tables": [{"logicTable": "t_order", "shardKey": "user_id", "algorithm": "mod", "shardCount": 2,
                    "databases": ["ds_0", "ds_1"]}],
    })
    assert config.name is None
    router = Router(config)
    plain = router.route("SELECT * FROM t_order WHERE user_id = %s", (5,))
    qualified = router.route("SELECT * FROM logic_db.t_order WHERE user_id = %s", (5,))
    backticked = router.route("SELECT * FROM `LOGIC_DB`.`t_order` WHERE user_id = %s", (5,))
    assert [(u.data_source, u.sql) for u in qualified.units] == [(u.data_source, u.sql) for u in plain.units]
    assert [u.data_source for u in backticked.units] == [u.data_source for u in plain.units]
    assert "logic_db" not in qualified.units[0].sql.lower()
