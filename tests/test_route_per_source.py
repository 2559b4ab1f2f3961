"""One unit per data source (route/query/per_source.py): the SQL each data source gets, and where it is not used.

``sbtest1`` as sysbench shards it here: by ``id`` over 2 data sources x 2 tables, each 100-id range on all
four tables. The results themselves are proven in tests/test_oracle.py (sharded vs unsharded, both settings).
"""

from __future__ import annotations

from typing import Any

import pytest

from ddm_core import Router, load_config
from ddm_core.errors import ConfigError
from ddm_core.execute import Executor
from ddm_core.metadata.dump import to_native
from ddm_core.route import hint
from ddm_core.route.table_schema import Column, TableSchema
from services import fresh_mariadb_databases

COLUMNS = {"id": "int(11)", "k": "int(11)", "c": "char(120)", "pad": "char(60)", "flag": "tinyint(1)",
           "mood": "enum('b','a')", "note": "text", "amount": "decimal(10,2)", "at": "datetime(3)",
           "tiny": "tinyint(4)", "big": "bigint(20) unsigned", "z": "int(5) unsigned zerofill"}
RANGE = "SELECT c FROM sbtest1 WHERE id BETWEEN %s AND %s"


def config(dialect: str = "mysql", **runtime: Any) -> dict[str, Any]:
    url = {"mysql": "mysql://127.0.0.1:3306/{}", "mariadb": "mariadb://127.0.0.1:3306/{}", "sqlite": "sqlite:///{}.db"}[dialect]
    return {
        "dataSources": {"ds_0": url.format("a"), "ds_1": url.format("b")},
        "tables": [{"logicTable": "sbtest1", "shardKey": "id", "algorithm": "slots", "slotCount": 1024, "shardCount": 2,
                    "tablePerShard": 2, "databases": ["ds_0", "ds_1"], "tableKey": "id"},
                   {"logicTable": "sbtest2", "bindTo": "sbtest1"}],
        "broadcastTables": ["dict"],
        "runtime": {"fullRouteThreshold": 64, **runtime},
    }


def router(dialect: str = "mysql", schema: bool = True, **runtime: Any) -> Router:
    r = Router(load_config(config(dialect, **runtime)))
    if schema:
        columns = tuple(Column(n, t) for n, t in COLUMNS.items())
        r.set_schemas({t: TableSchema(t, columns, ("id",)) for t in ("sbtest1", "sbtest2")})
    return r


def sqls(r: Router, sql: str, params: Any = (1, 100)) -> list[tuple[str, str]]:
    return [(u.data_source, u.sql) for u in r.route(sql, params).units]


def test_a_plain_range_reads_each_data_source_once() -> None:
    plan = router().route(RANGE, (1, 100))
    assert [(u.data_source, u.sql, u.params, u.tables) for u in plan.units] == [
        ("ds_0", "(SELECT c FROM sbtest1_0_0 WHERE id BETWEEN %s AND %s) UNION ALL "
                 "(SELECT c FROM sbtest1_0_1 WHERE id BETWEEN %s AND %s)",
         (1, 100, 1, 100), (("sbtest1", "sbtest1_0_0"), ("sbtest1", "sbtest1_0_1"))),
        ("ds_1", "(SELECT c FROM sbtest1_1_0 WHERE id BETWEEN %s AND %s) UNION ALL "
                 "(SELECT c FROM sbtest1_1_1 WHERE id BETWEEN %s AND %s)",
         (1, 100, 1, 100), (("sbtest1", "sbtest1_1_0"), ("sbtest1", "sbtest1_1_1"))),
    ]
    # The plan still names all four physical tables, and the merge did not change.
    assert plan.tables[0].nodes == ("ds_0.sbtest1_0_0", "ds_0.sbtest1_0_1", "ds_1.sbtest1_1_0", "ds_1.sbtest1_1_1")
    assert plan.merge.is_trivial


def test_sysbench_ranges() -> None:
    r = router()
    assert sqls(r, "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN %s AND %s")[0][1] == (
        "(SELECT SUM(k) FROM sbtest1_0_0 WHERE id BETWEEN %s AND %s) UNION ALL "
        "(SELECT SUM(k) FROM sbtest1_0_1 WHERE id BETWEEN %s AND %s)")
    assert sqls(r, RANGE + " ORDER BY c")[1][1] == (
        "(SELECT c FROM sbtest1_1_0 WHERE id BETWEEN %s AND %s ORDER BY c) UNION ALL "
        "(SELECT c FROM sbtest1_1_1 WHERE id BETWEEN %s AND %s ORDER BY c) ORDER BY 1")
    assert sqls(r, "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN %s AND %s ORDER BY c")[0][1] == (
        "(SELECT DISTINCT c FROM sbtest1_0_0 WHERE id BETWEEN %s AND %s ORDER BY c) UNION ALL "
        "(SELECT DISTINCT c FROM sbtest1_0_1 WHERE id BETWEEN %s AND %s ORDER BY c) ORDER BY 1")


def test_order_by_positions_cover_hidden_sort_columns_and_limits() -> None:
    """The union's ORDER BY names the merge's columns by position (an added sort column included);
    each branch and the union keep LIMIT offset+count (a data source's first rows are all the merge
    can use of it), the merge cuts the page."""
    plan = router().route("SELECT c AS name, k FROM sbtest1 WHERE id > %s ORDER BY k DESC, amount LIMIT %s, %s", (0, 5, 10))
    assert plan.merge.order_by == ((1, True), (2, False)) and (plan.merge.offset, plan.merge.limit) == (5, 10)
    unit = plan.units[0]
    assert unit.sql == (
        "(SELECT c AS name, k, amount AS __ddm_o0 FROM sbtest1_0_0 WHERE id > %s ORDER BY k DESC, amount LIMIT %s) "
        "UNION ALL (SELECT c AS name, k, amount AS __ddm_o0 FROM sbtest1_0_1 WHERE id > %s ORDER BY k DESC, amount "
        "LIMIT %s) ORDER BY 2 DESC, 3 LIMIT %s")
    assert unit.params == (0, 15, 0, 15, 15)
    literal = router().route("SELECT c FROM sbtest1 WHERE id > %s ORDER BY c LIMIT 20 OFFSET 5", (0,)).units[0]
    assert literal.sql.endswith(" LIMIT 25) ORDER BY 1 LIMIT 25") and literal.params == (0, 0)
    qmark = router().route("SELECT c FROM sbtest1 WHERE id > ? ORDER BY c LIMIT ?", (0, 7)).units[0]
    assert qmark.sql.endswith(" LIMIT ?) ORDER BY 1 LIMIT ?") and qmark.params == (0, 7, 0, 7, 7)
    # DISTINCT: each branch is distinct, the union is not; its repeats must not take the LIMIT
    distinct = router().route("SELECT DISTINCT c FROM sbtest1 WHERE id > %s ORDER BY c LIMIT 2", (0,)).units[0]
    assert distinct.sql.endswith(" LIMIT 2) ORDER BY 1") and distinct.params == (0, 0)
    # DISTINCT over a hidden sort column, and GROUP BY, need every row: no LIMIT on the branches or the union
    for sql in ("SELECT DISTINCT c FROM sbtest1 WHERE id > %s ORDER BY k LIMIT 3",
                "SELECT c, COUNT(*) FROM sbtest1 WHERE id > %s GROUP BY c ORDER BY c LIMIT 3"):
        assert "LIMIT" not in router().route(sql, (0,)).units[0].sql


def test_grouped_aggregates_arrive_sorted_by_their_keys() -> None:
    plan = router().route("SELECT k, COUNT(*), AVG(amount), MAX(c) FROM sbtest1 GROUP BY k", ())
    assert plan.units[0].sql.endswith(") ORDER BY 1") and plan.units[0].sql.count("UNION ALL") == 1
    assert plan.merge.group_by == (0,)


def test_preview_rows_show_one_statement_per_data_source() -> None:
    rows = router().route(RANGE + " ORDER BY c", (1, 100)).explain()
    assert [(ds, params) for ds, _, params, _ in rows] == [("ds_0", "[1, 100, 1, 100]"), ("ds_1", "[1, 100, 1, 100]")]
    assert all(sql.count("UNION ALL") == 1 for _, sql, _, _ in rows)


def test_the_sql_comment_comes_once_per_statement() -> None:
    unit = router(sqlComment=True).route(RANGE, (1, 100)).units[0]
    assert unit.sql.startswith("/* app=ddm,shard=ds_0 */ (SELECT c FROM sbtest1_0_0") and unit.sql.count("/*") == 1


def test_qmark_statements_keep_their_placeholders() -> None:
    unit = router().route("SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?", (1, 100)).units[0]
    assert unit.sql.count("?") == 4 and unit.params == (1, 100, 1, 100)


@pytest.mark.parametrize("sql", [
    RANGE + " FOR UPDATE",  # a locking read
    RANGE + " LOCK IN SHARE MODE",
    "SELECT * FROM sbtest1 WHERE id BETWEEN %s AND %s",  # column count known only at run time
    "SELECT s1.c FROM sbtest1 s1 JOIN sbtest2 s2 ON s1.id = s2.id WHERE s1.id BETWEEN %s AND %s",
    "SELECT c FROM sbtest1 WHERE id BETWEEN %s AND %s AND k IN (SELECT k FROM sbtest2)",
    "SELECT c, (SELECT name FROM dict LIMIT 1) FROM sbtest1 WHERE id BETWEEN %s AND %s",
    "SELECT SQL_CALC_FOUND_ROWS c FROM sbtest1 WHERE id BETWEEN %s AND %s",
    "SELECT flag FROM sbtest1 WHERE id BETWEEN %s AND %s",  # TINYINT(1): a union answers TINYINT(4)
    "SELECT c FROM sbtest1 WHERE id BETWEEN %s AND %s ORDER BY mood",  # ENUM sorts by member number
    "SELECT MAX(note) FROM sbtest1 WHERE id BETWEEN %s AND %s",  # TEXT: a union answers MEDIUMTEXT
    "SELECT z FROM sbtest1 WHERE id BETWEEN %s AND %s",  # ZEROFILL
    "SELECT CONCAT(c, 'x') FROM sbtest1 WHERE id BETWEEN %s AND %s",  # an expression: type not proven
    "SELECT c FROM sbtest1 WHERE id BETWEEN %s AND %s UNION ALL SELECT c FROM sbtest1 WHERE id BETWEEN %s AND %s",
])
def test_left_one_unit_per_table(sql: str) -> None:
    plan = router().route(sql, (1, 100) * sql.count("BETWEEN"))
    # four units (a subquery over another sharded table is a cross-node plan: no units of its own)
    assert len(plan.units) in (0, 4) and not any(u.sql.count("UNION") > sql.count("UNION") for u in plan.units)


def test_kept_types_combine() -> None:
    plan = router().route("SELECT tiny, big, amount, at, MIN(c), COUNT(note), SUM(flag) FROM sbtest1 "
                          "WHERE id BETWEEN %s AND %s GROUP BY tiny, big, amount, at", (1, 100))
    assert len(plan.units) == 2


def test_hint_keeps_the_units_it_forces() -> None:
    r = router()
    with hint(database="ds_0"):
        plan = r.route(RANGE, (1, 100))
    assert [u.sql for u in plan.units] == [RANGE.replace("sbtest1", f"sbtest1_0_{t}") for t in (0, 1)]
    plan = r.route("/* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds_1 */ " + RANGE, (1, 100))
    assert [u.sql for u in plan.units] == [RANGE.replace("sbtest1", f"sbtest1_1_{t}") for t in (0, 1)]


@pytest.mark.parametrize(("dialect", "schema", "runtime"), [
    ("sqlite", True, {}),  # compound SELECT rules differ there: not combined
    ("mysql", False, {}),  # column types unknown: not proven
    ("mysql", True, {"oneUnitPerDataSource": False}),
])
def test_one_unit_per_table_when(dialect: str, schema: bool, runtime: dict[str, Any]) -> None:
    units = router(dialect, schema, **runtime).route(RANGE, (1, 100)).units
    assert [u.tables for u in units] == [(("sbtest1", f"sbtest1_{d}_{t}"),) for d in (0, 1) for t in (0, 1)]


def test_mariadb_combines_too() -> None:
    assert len(router("mariadb").route(RANGE, (1, 100)).units) == 2


def test_one_table_per_data_source_stays_as_it_was() -> None:
    """A range on one table of each data source: nothing to combine, the unit SQL unchanged."""
    plan = router().route("SELECT c FROM sbtest1 WHERE id IN (%s, %s)", (1, 2000))
    assert [u.sql for u in plan.units] == ["SELECT c FROM sbtest1_0_0 WHERE id IN (%s, %s)",
                                           "SELECT c FROM sbtest1_1_1 WHERE id IN (%s, %s)"]
    # two ids in one data source's two tables: one statement there
    assert len(router().route("SELECT c FROM sbtest1 WHERE id IN (%s, %s)", (1, 2)).units) == 1


def test_the_setting_is_read_checked_and_written_back() -> None:
    loaded = load_config(config(oneUnitPerDataSource=False))
    assert loaded.runtime.one_unit_per_data_source is False
    assert load_config(config()).runtime.one_unit_per_data_source is True
    assert to_native(loaded)["runtime"]["oneUnitPerDataSource"] is False
    with pytest.raises(ConfigError, match="runtime.oneUnitPerDataSource"):
        load_config(config(oneUnitPerDataSource="sometimes"))


def test_a_transaction_reads_its_own_writes_through_the_union() -> None:
    """On MariaDB, inside a transaction: the combined read runs on the transaction's connections and sees
    its uncommitted rows, on every table of each data source; a rollback leaves the committed ones."""
    with fresh_mariadb_databases(2) as names:
        cfg = config()
        cfg["dataSources"] = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
                              for i, db in enumerate(names)}
        cfg["tables"] = cfg["tables"][:1]
        with Executor(load_config(cfg), load_schema=False) as setup:
            setup.execute("CREATE TABLE sbtest1 (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, c CHAR(20) NOT NULL)").close()
            setup.execute("INSERT INTO sbtest1 (id, k, c) VALUES " + ", ".join(f"({i}, {i % 7}, 'c{i % 5}')" for i in range(1, 401))).close()
        with Executor(load_config(cfg)) as ex:
            order = "SELECT c, k FROM sbtest1 WHERE id BETWEEN %s AND %s ORDER BY c, k DESC"
            assert len(ex.router.route(order, (1, 400)).units) == 2
            with ex.transaction() as tx:
                tx.execute("INSERT INTO sbtest1 (id, k, c) VALUES (1000, 9, 'a'), (1001, 8, 'b'), (1002, 7, 'a')").close()
                with tx.execute("SELECT SUM(k), COUNT(*) FROM sbtest1 WHERE id BETWEEN %s AND %s", (1, 2000)) as r:
                    assert r.units == 2 and r.fetchall() == [(sum(i % 7 for i in range(1, 401)) + 24, 403)]
                with tx.execute(order, (1, 2000)) as r:
                    rows = r.fetchall()
                assert rows[:3] == [("a", 9), ("a", 7), ("b", 8)]
                assert rows == sorted(rows, key=lambda row: (row[0], -row[1])) and len(rows) == 403
                tx.rollback()
            with ex.execute("SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN %s AND %s ORDER BY c", (1, 2000)) as r:
                assert r.units == 2 and r.fetchall() == [(f"c{i}",) for i in range(5)]
