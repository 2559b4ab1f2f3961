"""The prepare phase and the schema consistency check, on real MariaDB databases."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from ddm_core.errors import SchemaMismatchError
from ddm_core.execute import Executor
from ddm_core.migrate import Connections, connector
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import plan_migration
from ddm_core.migrate.prepare import prepare
from ddm_core.route.ddl.logic_ddl import logic_ddl
from ddm_core.migrate.schema_check import PhysicalTable, check_table, compare_schemas, parse_create_table
from ddm_core.migrate.state import MigrationLog
from migrate_support import ORDER_DDL, reshard_configs
from services import fresh_mariadb_databases, mariadb_connect


@pytest.fixture()
def eight() -> Iterator[list[str]]:
    with fresh_mariadb_databases(8) as names:
        yield names


def sql(database: str, statement: str) -> list[Any]:
    conn = mariadb_connect(database=database)
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
            return list(cur.fetchall())
    finally:
        conn.close()


def _create_old_tables(config: Any) -> None:
    with Executor(config, timeout=10.0, load_schema=False) as ex:
        ex.execute(ORDER_DDL).close()
        ex.execute("CREATE TABLE t_dict (id INT NOT NULL PRIMARY KEY, name VARCHAR(40))").close()
        ex.execute("CREATE TABLE t_config (id INT NOT NULL PRIMARY KEY, name VARCHAR(40))").close()
        ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 1, 5), (2, 2, 6)").close()


def _run_prepare(old: Any, new: Any, name: str = "grow") -> tuple[Any, MigrationLog]:
    log = MigrationLog(connector(old, "ds_0"), name)
    log.create_table()
    with Connections(old, new) as conns:
        plan = plan_migration(old, new, conns=conns, count="estimate", rate=1000.0)
        try:
            return prepare(old, new, plan, conns, log), log
        except BaseException:
            log.close()
            raise


def test_prepare_creates_the_target_tables_and_finds_them_consistent(eight: list[str]) -> None:
    old, new = reshard_configs(eight)
    _create_old_tables(old)
    result, log = _run_prepare(old, new)
    with log:
        created = {(t.data_source, t.table) for t in result.tables}
        assert created == {(f"ds_{d}", f"t_order_{d}_{t}") for d in range(4, 8) for t in range(2)} | {
            (f"ds_{d}", "t_dict") for d in range(4, 8)
        }
        for d in range(4, 8):  # really there, with the index of the template
            text = sql(eight[d], f"SHOW CREATE TABLE t_order_{d}_1")[0][1]
            assert "KEY `by_user` (`user_id`)" in text
        assert all(r.consistent for r in result.reports)
        (orders,) = [r for r in result.reports if r.table == "t_order"]
        assert len(orders.checked) == 16
        state = log.state()
        assert state.phase is Phase.PREPARE and state.completed
        assert state.plan["tables"][0]["table"] == "t_order" and len(state.plan["tables"][0]["moves"]) == 512
    again, log = _run_prepare(old, new)  # resuming a completed prepare does nothing
    with log:
        assert again.created == () and log.state().seq == state.seq


def test_a_schema_difference_stops_prepare_until_it_is_fixed(eight: list[str]) -> None:
    old, new = reshard_configs(eight)
    _create_old_tables(old)
    sql(eight[2], "ALTER TABLE t_order_2_1 MODIFY note VARCHAR(50)")
    sql(eight[5], "CREATE TABLE t_order_5_0 (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, "
                  "amount INT NOT NULL DEFAULT 0, note VARCHAR(40), slow INT NOT NULL DEFAULT 0) "
                  "COLLATE utf8mb4_bin")  # made by hand before the migration, without the index
    with pytest.raises(SchemaMismatchError) as info:
        _run_prepare(old, new)
    message = str(info.value)
    assert "ds_2.t_order_2_1: column 'note': varchar(50) DEFAULT NULL (in ds_0.t_order_0_0: varchar(40) DEFAULT NULL)" in message
    assert "ds_5.t_order_5_0: index KEY `by_user`: (missing)" in message
    assert "ds_5.t_order_5_0: table option COLLATE: utf8mb4_bin" in message
    assert {d.table for d in info.value.differences} == {"ds_2.t_order_2_1", "ds_5.t_order_5_0"}
    with MigrationLog(connector(old, "ds_0"), "grow") as log:
        state = log.state()
        assert state.phase is Phase.PREPARE and not state.completed
        assert {d["table"] for d in state.stopped["schema"][0]["differences"]} == {
            "ds_2.t_order_2_1", "ds_5.t_order_5_0",
        }
    sql(eight[2], "ALTER TABLE t_order_2_1 MODIFY note VARCHAR(40)")
    sql(eight[5], "DROP TABLE t_order_5_0")
    result, log = _run_prepare(old, new)  # fixed: run it again and it completes
    with log:
        assert log.state().completed and all(r.consistent for r in result.reports)
        assert PhysicalTable("ds_5", "t_order_5_0") in result.tables


def test_the_checker_names_each_kind_of_difference(eight: list[str]) -> None:
    base = ("CREATE TABLE {name} (id BIGINT NOT NULL, a INT NOT NULL DEFAULT 0, b VARCHAR(20), "
            "PRIMARY KEY (id), KEY ka (a)) {options}")
    sql(eight[0], base.format(name="t_x", options="ENGINE=InnoDB"))
    variants = {
        "default": ("t_x", base.replace("DEFAULT 0", "DEFAULT 1"), "column 'a'"),
        "type": ("t_x", base.replace("b VARCHAR(20)", "b VARCHAR(20) CHARACTER SET latin1"), "column 'b'"),
        "index": ("t_x", base.replace("KEY ka (a)", "KEY ka (a, b)"), "index KEY `ka`"),
        "order": ("t_x", "CREATE TABLE {name} (id BIGINT NOT NULL, b VARCHAR(20), a INT NOT NULL DEFAULT 0, "
                         "PRIMARY KEY (id), KEY ka (a)) {options}", "column order"),
        "charset": ("t_x", base.replace("{options}", "ENGINE=InnoDB DEFAULT CHARSET=latin1 {options}"),
                    "table option CHARSET"),
    }
    ref = parse_create_table(sql(eight[0], "SHOW CREATE TABLE t_x")[0][1])
    for i, (kind, (name, ddl, aspect)) in enumerate(variants.items(), start=1):
        sql(eight[i], ddl.format(name=name, options=""))
        other = parse_create_table(sql(eight[i], f"SHOW CREATE TABLE {name}")[0][1])
        found = compare_schemas("ref", ref, kind, other)
        assert [d.aspect for d in found if d.aspect == aspect] == [aspect], (kind, found)
        if kind in ("default", "index", "order"):
            assert len(found) == 1, (kind, found)
    same = parse_create_table(sql(eight[0], "SHOW CREATE TABLE t_x")[0][1].replace("`t_x`", "`t_x_3_1`"))
    assert compare_schemas("a", ref, "b", same) == []


def test_constraint_names_are_compared_without_their_table_suffix() -> None:
    a = ("CREATE TABLE `t_order_0_1` (\n  `id` bigint(20) NOT NULL,\n  PRIMARY KEY (`id`),\n"
         "  CONSTRAINT `fk_u_t_order_0_1` FOREIGN KEY (`id`) REFERENCES `t_user_0_1` (`id`)\n) ENGINE=InnoDB")
    b = a.replace("_0_1", "_3_0")
    sa, sb = parse_create_table(a, logic_table="t_order"), parse_create_table(b, logic_table="t_order")
    assert dict(sa.constraints) == {"fk_u": "FOREIGN KEY (`id`) REFERENCES `t_user` (`id`)"}
    assert compare_schemas("a", sa, "b", sb) == []
    assert "CONSTRAINT `fk_u` FOREIGN KEY" in logic_ddl(a, "t_order_0_1", "t_order")
    assert logic_ddl(a, "t_order_0_1", "t_order").startswith("CREATE TABLE `t_order` (")


def test_check_table_reports_missing_physical_tables(eight: list[str]) -> None:
    old, new = reshard_configs(eight)
    _create_old_tables(old)
    with Connections(old, new) as conns:
        report = check_table(conns, "t_order", [old, new])
    assert not report.consistent and report.reference == PhysicalTable("ds_0", "t_order_0_0")
    assert set(report.missing) == {PhysicalTable(f"ds_{d}", f"t_order_{d}_{t}") for d in range(4, 8) for t in range(2)}
    with pytest.raises(SchemaMismatchError, match="ds_7.t_order_7_1: does not exist"):
        report.raise_if_inconsistent()
