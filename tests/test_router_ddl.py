"""Router, table-driven: DDL, SHOW / DESCRIBE / EXPLAIN, other statements, unknown tables."""

from __future__ import annotations

import pytest

from ddm_core.errors import RoutingError, UnsupportedSQLError
from ddm_core.route import RouteKind

from router_cases import Case, all_nodes, check, ids, n_node, nodes, s_node

BROADCAST, SINGLE, MULTI = RouteKind.BROADCAST, RouteKind.SINGLE, RouteKind.MULTI
N_ALL, S_ALL = all_nodes("N"), all_nodes("S")
N_SOURCES = ["ds_0", "ds_1", "ds_2", "ds_3"]


def ddl(id: str, name: str, sql: str, **kw) -> Case:
    kw.setdefault("statement", "ddl")
    kw.setdefault("is_write", True)
    return Case(id, name, sql, **kw)


CASES = [
    # DDL on a sharded table → every physical table
    ddl("create-table", "N", "CREATE TABLE t_order (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, amount DECIMAL(10, 2))",
        nodes=N_ALL, kind=BROADCAST),
    ddl("create-if-not-exists", "N", "CREATE TABLE IF NOT EXISTS t_order (id BIGINT, user_id BIGINT, PRIMARY KEY (id))",
        nodes=N_ALL),
    ddl("alter-add-column", "N", "ALTER TABLE t_order ADD COLUMN note VARCHAR(64)", nodes=N_ALL),
    ddl("drop-table", "N", "DROP TABLE t_order", nodes=N_ALL),
    ddl("drop-if-exists", "N", "DROP TABLE IF EXISTS t_order_item", nodes=N_ALL),
    ddl("truncate", "N", "TRUNCATE TABLE t_order", nodes=N_ALL),
    ddl("create-index", "N", "CREATE INDEX idx_status ON t_order (status)", nodes=N_ALL),
    ddl("create-index-binding", "N", "CREATE INDEX idx_sku ON t_order_item (sku)", nodes=N_ALL),
    ddl("drop-index", "N", "DROP INDEX idx_status ON t_order", nodes=N_ALL),
    ddl("drop-two-bound-tables", "N", "DROP TABLE t_order, t_order_item", nodes=N_ALL),
    ddl("s-create-32", "S", "CREATE TABLE t_order (order_id BIGINT, user_id BIGINT)", nodes=S_ALL, kind=BROADCAST),
    ddl("s-alter-item", "S", "ALTER TABLE t_order_item ADD INDEX idx_o (order_id)", nodes=S_ALL),
    ddl("r-create-account", "R", "CREATE TABLE t_account (account_id BIGINT)", nodes=all_nodes("R", "t_account")),
    ddl("r-create-log", "R", "CREATE TABLE t_log (id BIGINT, user_id BIGINT)", nodes=all_nodes("R")),
    # broadcast DDL → every data source; single → its own; unknown → default (or refused)
    ddl("broadcast-create", "N", "CREATE TABLE t_dict_region (id INT, name VARCHAR(20))", sources=N_SOURCES, kind=BROADCAST),
    ddl("broadcast-alter", "N", "ALTER TABLE t_dict_region ADD COLUMN x INT", sources=N_SOURCES),
    ddl("s-broadcast-drop", "S", "DROP TABLE t_dict_status", sources=["ds0", "ds1"]),
    ddl("r-broadcast-truncate", "R", "TRUNCATE TABLE t_country", sources=N_SOURCES),
    ddl("single-truncate", "N", "TRUNCATE t_config", sources=["ds_0"], kind=SINGLE),
    ddl("r-single-alter", "R", "ALTER TABLE t_setting ADD COLUMN y INT", sources=["ds_3"]),
    ddl("unknown-default", "N", "DROP TABLE IF EXISTS t_misc", sources=["ds_0"]),
    Case("r-unknown-refused", "R", "CREATE TABLE t_new (id INT)", error=(RoutingError, ("'t_new'", "default data source"))),
    Case("create-like-sharded", "N", "CREATE TABLE t_order_copy LIKE t_order",
         error=(UnsupportedSQLError, ("'t_order_copy'", "'t_order'"))),
    Case("create-view-over-sharded", "N", "CREATE VIEW v_orders AS SELECT * FROM t_order",
         error=(UnsupportedSQLError, ("'v_orders'",))),
    # SHOW / DESCRIBE → the first node (its physical tables are alike)
    Case("describe", "N", "DESCRIBE t_order", nodes=N_ALL[:1], statement="show", kind=SINGLE, is_write=False),
    Case("desc", "N", "DESC t_order_item", nodes=N_ALL[:1], statement="show"),
    Case("s-describe", "S", "DESCRIBE t_order", nodes=S_ALL[:1]),
    Case("show-create-table", "N", "SHOW CREATE TABLE t_order", nodes=N_ALL[:1], statement="show"),
    Case("show-columns", "N", "SHOW COLUMNS FROM t_order", nodes=N_ALL[:1]),
    Case("show-full-columns", "S", "SHOW FULL COLUMNS FROM t_order_item", nodes=S_ALL[:1]),
    Case("show-index", "R", "SHOW INDEX FROM t_log", nodes=all_nodes("R")[:1]),
    Case("show-create-broadcast", "N", "SHOW CREATE TABLE t_dict_region", sources=["ds_0"], statement="show"),
    Case("describe-single", "R", "DESCRIBE t_setting", sources=["ds_3"]),
    # SHOW TABLES answers with logic table names: tests/test_router_shardingsphere.py
    Case("show-unparsable-form-refused", "N", "SHOW INDEXES IN t_order", error=(UnsupportedSQLError, ("'t_order'", "SHOW"))),
    Case("rename-refused", "N", "RENAME TABLE t_order TO t_order_old", error=(UnsupportedSQLError, ("'t_order'", "RENAME"))),
    Case("lock-refused", "S", "LOCK TABLES t_order WRITE", error=(UnsupportedSQLError, ("'t_order'",))),
    # AUTO_INCREMENT on a sharded table: each physical table would count on its own (ddm ddl refuses it too)
    Case("auto-increment-refused", "N", "CREATE TABLE t_order (order_id BIGINT AUTO_INCREMENT PRIMARY KEY)",
         error=(UnsupportedSQLError, ("column 'order_id'", "'t_order'", "AUTO_INCREMENT", "key generator"))),
    Case("auto-increment-alter-refused", "N", "ALTER TABLE t_order MODIFY order_id BIGINT AUTO_INCREMENT",
         error=(UnsupportedSQLError, ("column 'order_id'", "AUTO_INCREMENT"))),
    Case("auto-increment-single", "R", "CREATE TABLE t_setting (id INT AUTO_INCREMENT PRIMARY KEY)",
         sources=["ds_3"], statement="ddl"),
    # EXPLAIN <query>: the nodes the query itself runs on
    Case("explain-point", "N", "EXPLAIN SELECT * FROM t_order WHERE user_id = 10086", nodes=nodes(n_node, 10086),
         statement="show"),
    Case("explain-multi", "S", "EXPLAIN SELECT * FROM t_order WHERE user_id IN (1, 17)", nodes=nodes(s_node, 1, 17),
         kind=MULTI),
    # other statements without a table → the default (else first) data source
    Case("set-names", "N", "SET NAMES utf8mb4", sources=["ds_0"], statement="other"),
    Case("s-set-first-source", "S", "SET autocommit = 1", sources=["ds0"]),
    Case("select-no-table", "R", "SELECT 1", sources=["ds_0"]),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_ddl_and_others(case: Case) -> None:
    check(case)


def test_ddl_units_cover_each_physical_table_once() -> None:
    plan = check(CASES[0])
    tables = [t for u in plan.units for _, t in u.tables]
    assert len(tables) == len(set(tables)) == 16
    assert plan.tables[0].nodes == tuple(f"{n.ds}.t_order{n.suffix}" for n in N_ALL)
