"""Router, table-driven: INSERT forms that need table metadata, INSERT ... SET, INSERT ... SELECT per
node, and typed comparison (a string compared with an integer shard column routes as the integer).

Expected nodes come from the documented formulas in ``router_cases`` (``n_node``, ``s_node``,
``r_log_node``), never from the router; expected unit SQL is the statement with the physical
table named and, for an INSERT without a column list, the schema's columns written in.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddm_core.errors import DdmError, RoutingError, ShardKeyUpdateError, ShardValueError, UnsupportedSQLError
from ddm_core.hashing import slot_of
from ddm_core.ids import gene_of
from ddm_core.metadata import load_config
from ddm_core.route import RouteKind, Router, hint
from ddm_core.route.table_schema import Column, TableSchema, declared_schema

from router_cases import Case, Node, check, comment, config, gene_id, n_node, nodes, norm, r_log_node, router, s_node

SINGLE, MULTI = RouteKind.SINGLE, RouteKind.MULTI
N_SOURCES = ["ds_0", "ds_1", "ds_2", "ds_3"]

ORDER_COLUMNS = "(order_id, user_id, amount, note)"
SCHEMAS: dict[str, dict[str, TableSchema]] = {
    "N": {
        "t_order": TableSchema.of(
            "t_order", [("order_id", "bigint"), ("user_id", "bigint(20)"), ("amount", "decimal(10,2)"),
                        ("note", "varchar(40)")], ("order_id",), "ds_0.t_order_0_0"),
        "t_order_item": TableSchema.of(
            "t_order_item", [("item_id", "bigint"), ("order_id", "bigint"), ("user_id", "bigint"), ("qty", "int")],
            ("item_id",), "ds_0.t_order_item_0_0"),
    },
    "S": {
        "t_order": TableSchema.of("t_order", [("order_id", "BIGINT"), ("user_id", "INT UNSIGNED"), ("status", "INT")]),
        "t_order_item": TableSchema.of("t_order_item", [("item_id", "BIGINT"), ("order_id", "BIGINT"),
                                                        ("user_id", "INT"), ("status", "INT")]),
    },
    "R": {
        "t_log": TableSchema.of("t_log", [("id", "bigint"), ("user_id", "int"), ("msg", "text")]),
    },
}


def schema_router(name: str) -> Router:
    """A fresh router over one of the suite's configs, given the schemas above."""
    r = router(name)
    r.set_schemas(SCHEMAS[name])
    return r


def rows_case(id: str, name: str, head: str, rows: Sequence[Sequence[Any]], key_at: int,
              node_of: Callable[[Any], Node], row_text: str, unit_head: str | None = None, tail: str = "",
              tail_params: Sequence[Any] = (), literal: bool = False, table: str = "t_order", **kw: Any) -> Case:
    """A multi-row INSERT whose units hold each node's rows in their order.

    ``head`` is what the caller writes before the rows (``{t}`` for the table), ``unit_head``
    what every unit starts with (default ``head``); ``row_text`` is one row (``{0}``... fields
    when ``literal``).
    """
    by_node: dict[Node, list[Sequence[Any]]] = {}
    for row in rows:
        by_node.setdefault(node_of(row[key_at]), []).append(row)

    def text(selected: Sequence[Sequence[Any]], start: str, table_text: str) -> str:
        body = ", ".join(row_text.format(*r) if literal else row_text for r in selected)
        return start.replace("{t}", table_text) + body + tail

    def unit_params(node: Node) -> tuple[Any, ...]:
        return (() if literal else tuple(v for r in by_node[node] for v in r)) + tuple(tail_params)

    params = None if literal else [v for r in rows for v in r] + list(tail_params)
    return Case(id, name, text(rows, head, table), params, nodes=sorted(by_node),
                unit_sql=lambda node: text(by_node[node], unit_head or head, "{" + table + "}"),  # type: ignore[arg-type]
                unit_params=unit_params, statement="insert", is_write=True, **kw)


def gid(seq: int, user_id: int) -> int:
    return gene_id(seq, user_id)


# -- INSERT without a column list: the schema's columns, written into every unit ----------------

NO_COLUMN_LIST = [
    rows_case("values-one-row", "N", "INSERT INTO {t} VALUES ", [(gid(1, 5), 5, 9.5, "a")], 1, n_node,
              "(%s, %s, %s, %s)", f"INSERT INTO {{t}} {ORDER_COLUMNS} VALUES ", kind=SINGLE),
    rows_case("values-split", "N", "INSERT INTO {t} VALUES ",
              [(gid(2, 1), 1, 1, "a"), (gid(3, 2), 2, 2, "b"), (gid(4, 1), 1, 3, "c"), (gid(5, 10086), 10086, 4, "d")],
              1, n_node, "(%s, %s, %s, %s)", f"INSERT INTO {{t}} {ORDER_COLUMNS} VALUES ", kind=MULTI),
    rows_case("values-literals", "N", "INSERT INTO {t} VALUES ",
              [(gid(6, 7), 7, "1.5", "'x, (y)'"), (gid(7, 8), 8, "2", "'z'")], 1, n_node, "({0}, {1}, {2}, {3})",
              f"INSERT INTO {{t}} {ORDER_COLUMNS} VALUES ", literal=True),
    rows_case("values-qmark", "N", "INSERT INTO {t} VALUES ", [(gid(8, 4), 4, 1, None), (gid(9, 10), 10, 2, None)],
              1, n_node, "(?, ?, ?, ?)", f"INSERT INTO {{t}} {ORDER_COLUMNS} VALUES "),
    rows_case("replace-values", "N", "REPLACE INTO {t} VALUES ", [(gid(10, 3), 3, 1, "r"), (gid(11, 9), 9, 2, "s")],
              1, n_node, "(%s, %s, %s, %s)", f"REPLACE INTO {{t}} {ORDER_COLUMNS} VALUES "),
    rows_case("values-on-duplicate", "N", "INSERT INTO {t} VALUES ", [(gid(12, 6), 6, 1, "x"), (gid(13, 2), 2, 1, "y")],
              1, n_node, "(%s, %s, %s, %s)", f"INSERT INTO {{t}} {ORDER_COLUMNS} VALUES ",
              tail=" ON DUPLICATE KEY UPDATE amount = amount + %s, note = VALUES(note)", tail_params=[5]),
    rows_case("values-binding-table", "N", "INSERT INTO {t} VALUES ", [(77, gid(14, 5), 5, 2), (78, gid(15, 6), 6, 1)],
              2, n_node, "(%s, %s, %s, %s)", "INSERT INTO {t} (item_id, order_id, user_id, qty) VALUES ",
              table="t_order_item"),
    rows_case("s-values-split", "S", "INSERT INTO {t} VALUES ", [(1, 882341, 0), (2, 5, 1), (3, 21, 0), (4, 37, 2)],
              1, s_node, "(%s, %s, %s)", "INSERT INTO {t} (order_id, user_id, status) VALUES "),
    rows_case("r-values-log", "R", "INSERT INTO {t} VALUES ", [(1, 999, "a"), (2, 1000, "b"), (3, 1003, "c")],
              1, r_log_node, "(%s, %s, %s)", "INSERT INTO {t} (id, user_id, msg) VALUES ", table="t_log"),
    Case("values-width", "N", "INSERT INTO t_order VALUES (1, 2)",
         error=(UnsupportedSQLError, ("'t_order'", "2 values", "has 4", "ds_0.t_order_0_0"))),
    Case("values-shard-key-expression", "N", "INSERT INTO t_order VALUES (1, 2 + 3, 1, 'a')",
         error=(UnsupportedSQLError, ("'user_id'", "expression"))),
    Case("values-on-duplicate-shard-key", "N", "INSERT INTO t_order VALUES (1, 2, 3, 'a') ON DUPLICATE KEY UPDATE "
         "user_id = 4", error=(ShardKeyUpdateError, ("'user_id'", "'t_order'"))),
]

# -- INSERT ... SET / REPLACE ... SET: the column-list form ---------------------------------------

SET_FORM = [
    Case("set-params", "N", "INSERT INTO t_order SET order_id = %s, user_id = %s, note = 'a=b, (c)'", [gid(20, 5), 5],
         nodes=nodes(n_node, 5), unit_sql="INSERT INTO {t_order} (order_id, user_id, note) VALUES (%s, %s, 'a=b, (c)')",
         kind=SINGLE, statement="insert", is_write=True),
    Case("replace-set", "N", "REPLACE INTO t_order SET user_id = 10086, order_id = %s", [gid(21, 10086)],
         nodes=nodes(n_node, 10086), unit_sql="REPLACE INTO {t_order} (user_id, order_id) VALUES (10086, %s)"),
    Case("set-on-duplicate", "N", "INSERT INTO t_order SET order_id = %s, user_id = %s, amount = amount_of(%s) "
         "ON DUPLICATE KEY UPDATE amount = VALUES(amount)", [gid(22, 3), 3, 9], nodes=nodes(n_node, 3),
         unit_sql="INSERT INTO {t_order} (order_id, user_id, amount) VALUES (%s, %s, amount_of(%s)) "
                  "ON DUPLICATE KEY UPDATE amount = VALUES(amount)"),
    Case("set-comparison-in-value", "N", "INSERT INTO t_order SET order_id = %s, user_id = %s, note = IF(1 <= 2, 'x', 'y');",
         [gid(23, 8), 8], nodes=nodes(n_node, 8),
         unit_sql="INSERT INTO {t_order} (order_id, user_id, note) VALUES (%s, %s, IF(1 <= 2, 'x', 'y'));"),
    Case("set-quoted-columns", "N", "INSERT INTO t_order SET `order_id` = %s, `user_id` = %s, `desc` = 'd'",
         [gid(24, 2), 2], nodes=nodes(n_node, 2),
         unit_sql="INSERT INTO {t_order} (order_id, user_id, `desc`) VALUES (%s, %s, 'd')"),
    Case("set-trailing-comment", "N", "INSERT INTO t_order SET order_id = %s, user_id = %s, note = '#' /* c */ ;",
         [gid(25, 4), 4], nodes=nodes(n_node, 4),
         unit_sql="INSERT INTO {t_order} (order_id, user_id, note) VALUES (%s, %s, '#') /* c */ ;"),
    Case("set-broadcast", "N", "INSERT INTO t_dict_region SET id = 1, name = 'x'", sources=N_SOURCES,
         unit_sql="INSERT INTO t_dict_region (id, name) VALUES (1, 'x')", kind=RouteKind.BROADCAST, is_write=True),
    Case("set-single", "N", "REPLACE INTO t_config SET k = %s, v = %s", ["a", "b"], sources=["ds_0"],
         unit_sql="REPLACE INTO t_config (k, v) VALUES (%s, %s)", is_write=True),
    Case("set-without-shard-key", "N", "INSERT INTO t_order SET order_id = 1, amount = 2",
         error=(UnsupportedSQLError, ("'user_id'", "'t_order'"))),
    Case("set-shard-key-expression", "N", "INSERT INTO t_order SET order_id = 1, user_id = 2 + 3",
         error=(UnsupportedSQLError, ("'user_id'", "expression"))),
    Case("set-on-duplicate-shard-key", "N", "INSERT INTO t_order SET order_id = 1, user_id = 2 "
         "ON DUPLICATE KEY UPDATE user_id = 3", error=(ShardKeyUpdateError, ("'user_id'",))),
]

# -- INSERT ... SELECT: one statement per node when each node copies into itself -----------------


def per_node(id: str, name: str, sql: str, params: Any, node_of: Callable[[Any], Node], keys: Sequence[Any],
             **kw: Any) -> Case:
    return Case(id, name, sql, params, nodes=nodes(node_of, *keys), statement="insert", is_write=True, **kw)


INSERT_SELECT = [
    per_node("select-bound-in", "N", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id FROM t_order_item "
             "WHERE user_id IN (1, 2, 10086)", None, n_node, [1, 2, 10086], kind=MULTI),
    per_node("select-bound-aliased", "N", "INSERT INTO t_order (order_id, user_id, amount) SELECT i.order_id, i.user_id AS u, "
             "i.qty FROM t_order_item i WHERE i.user_id = %s OR i.user_id = %s", [5, 6], n_node, [5, 6]),
    per_node("select-self-star", "N", "INSERT INTO t_order SELECT * FROM t_order WHERE user_id IN (%s, %s)", [3, 4],
             n_node, [3, 4]),
    per_node("select-no-list-schema", "N", "INSERT INTO t_order SELECT i.order_id, i.user_id, i.qty, NULL "
             "FROM t_order_item i WHERE i.user_id IN (7, 8)", None, n_node, [7, 8]),
    per_node("select-group-by-key", "N", "INSERT INTO t_order (order_id, user_id, amount) SELECT order_id, user_id, "
             "SUM(qty) FROM t_order_item WHERE user_id IN (1, 3) GROUP BY user_id, order_id", None, n_node, [1, 3]),
    # the shards cannot fill the key generator's column: refused node by node (answered across nodes)
    Case("select-key-generated", "N", "INSERT INTO t_order (user_id, amount) SELECT user_id, SUM(qty) FROM t_order_item "
         "WHERE user_id IN (1, 3) GROUP BY user_id", error=(UnsupportedSQLError, ("'order_id'", "key generator"))),
    per_node("select-distinct", "N", "INSERT INTO t_order (order_id, user_id) SELECT DISTINCT order_id, user_id "
             "FROM t_order_item WHERE user_id IN (2, 4)", None, n_node, [2, 4]),
    per_node("select-join-broadcast-qualified", "N", "INSERT INTO t_order (order_id, user_id, note) SELECT i.order_id, "
             "i.user_id, d.name FROM t_order_item i JOIN t_dict_region d ON d.id = i.qty WHERE i.user_id IN (1, 2)",
             None, n_node, [1, 2]),
    per_node("s-select-bound-in", "S", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id FROM t_order_item "
             "WHERE user_id IN (1, 2)", None, s_node, [1, 2]),
    per_node("select-one-shard-aggregate", "N", "INSERT INTO t_order (order_id, user_id, amount) SELECT order_id, "
             "user_id, SUM(qty) FROM t_order_item WHERE user_id = 9 GROUP BY order_id, user_id", None, n_node, [9]),
    per_node("select-union-one-shard", "N", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id "
             "FROM t_order_item WHERE user_id = 1 UNION ALL SELECT order_id, user_id FROM t_order WHERE user_id = 1",
             None, n_node, [1]),
    Case("select-union-constant", "N", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id FROM t_order_item "
         "WHERE user_id = 1 UNION SELECT 1, 2", error=(UnsupportedSQLError, ("'user_id'", "'2'"))),
    Case("select-union-multi", "N", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id FROM t_order_item "
         "WHERE user_id IN (1, 2) UNION SELECT order_id, user_id FROM t_order WHERE user_id IN (1, 2)",
         error=(UnsupportedSQLError, ("INSERT ... SELECT",))),
    # refused: per-node results would differ from one table's, so only one shard may run it
    Case("select-aggregate-multi", "N", "INSERT INTO t_order (order_id, user_id, amount) SELECT order_id, "
         "MIN(user_id), SUM(qty) FROM t_order_item WHERE user_id IN (1, 2)",
         error=(UnsupportedSQLError, ("'user_id'", "MIN(user_id)"))),
    Case("select-count-multi", "N", "INSERT INTO t_order (order_id, user_id, amount) SELECT order_id, user_id, "
         "COUNT(*) FROM t_order_item WHERE user_id IN (1, 2)", error=(UnsupportedSQLError, ("INSERT ... SELECT", "2 shards"))),
    Case("select-group-other-multi", "N", "INSERT INTO t_order (user_id, amount) SELECT user_id, SUM(qty) FROM t_order_item "
         "WHERE user_id IN (1, 2) GROUP BY qty", error=(UnsupportedSQLError, ("INSERT ... SELECT",))),
    Case("select-limit-multi", "N", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id FROM t_order_item "
         "WHERE user_id IN (1, 2) LIMIT 5", error=(UnsupportedSQLError, ("INSERT ... SELECT",))),
    Case("select-unqualified-with-broadcast-multi", "N", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id "
         "FROM t_order_item i JOIN t_dict_region d ON d.id = i.qty WHERE i.user_id IN (1, 2)",
         error=(UnsupportedSQLError, ("INSERT ... SELECT",))),
    # refused outright: a row could land on another shard
    Case("select-broadcast-column-as-key", "N", "INSERT INTO t_order (order_id, user_id) SELECT i.order_id, d.user_id "
         "FROM t_order_item i JOIN t_dict_region d ON d.id = i.qty WHERE i.user_id = 1",
         error=(UnsupportedSQLError, ("'user_id'", "d.user_id"))),
    Case("select-swapped-columns", "N", "INSERT INTO t_order (user_id, order_id) SELECT order_id, user_id FROM t_order_item "
         "WHERE user_id = 1", error=(UnsupportedSQLError, ("'user_id'", "'order_id'"))),
    Case("select-constant-key", "N", "INSERT INTO t_order (order_id, user_id) SELECT order_id, 5 FROM t_order_item "
         "WHERE user_id = 5", error=(UnsupportedSQLError, ("'user_id'", "'5'"))),
    Case("select-expression-key", "N", "INSERT INTO t_order (order_id, user_id) SELECT order_id, user_id + 1 FROM t_order_item "
         "WHERE user_id IN (1, 2)", error=(UnsupportedSQLError, ("'user_id'", "user_id + 1"))),
    Case("select-without-key", "N", "INSERT INTO t_order (order_id, amount) SELECT order_id, qty FROM t_order_item "
         "WHERE user_id = 1", error=(UnsupportedSQLError, ("does not set its shard column 'user_id'",))),
    Case("select-star-wrong-position", "N", "INSERT INTO t_order SELECT * FROM t_order_item WHERE user_id = 1",
         error=(UnsupportedSQLError, ("'user_id'", "order_id"))),
]

# -- typed comparison: strings compared with integer shard columns route as the integers -------

TYPED = [
    Case("typed-literal", "N", "SELECT * FROM t_order WHERE user_id = '10086'", nodes=nodes(n_node, 10086), kind=SINGLE),
    Case("typed-param", "N", "SELECT * FROM t_order WHERE user_id = %s AND status = %s", ["10086", "1"],
         nodes=nodes(n_node, 10086), unit_params=(10086, "1")),
    Case("typed-spaces-sign-zeros", "N", "SELECT * FROM t_order WHERE user_id IN (' 10086 ', '+5', %s)", ["007"],
         nodes=nodes(n_node, 10086, 5, 7), unit_params=(7,)),
    Case("typed-item-via-primary", "N", "SELECT * FROM t_order_item WHERE user_id = %s", ["5"], nodes=nodes(n_node, 5),
         unit_params=(5,)),
    Case("typed-update-set-same", "N", "UPDATE t_order SET user_id = '7', amount = 1 WHERE user_id = %s", ["7"],
         nodes=nodes(n_node, 7), unit_params=(7,)),
    Case("typed-delete", "N", "DELETE FROM t_order WHERE user_id = %s", ["3"], nodes=nodes(n_node, 3), unit_params=(3,)),
    Case("typed-insert-param", "N", "INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", [gid(30, 10086), "10086"],
         nodes=nodes(n_node, 10086), unit_params=(gid(30, 10086), 10086)),
    Case("typed-insert-literal", "N", f"INSERT INTO t_order (order_id, user_id) VALUES ({gid(31, 10086)}, '10086')",
         nodes=nodes(n_node, 10086)),
    Case("typed-gene-id-string", "N", "INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", [str(gid(32, 4)), 4],
         nodes=nodes(n_node, 4), unit_params=(gid(32, 4), 4)),
    Case("s-typed-inline", "S", "SELECT * FROM t_order WHERE user_id = %s", ["37"], nodes=nodes(s_node, 37),
         unit_params=(37,)),
    Case("r-typed-between", "R", "SELECT * FROM t_log WHERE user_id BETWEEN '1001' AND %s", ["1002"],
         nodes=nodes(r_log_node, 1001, 1002), unit_params=(1002,)),
    Case("typed-big-param", "N", "SELECT * FROM t_order WHERE user_id = %s", [str(2**60 + 1)],
         nodes=nodes(n_node, 2**60 + 1), unit_params=(2**60 + 1,)),
    Case("typed-junk-suffix", "N", "SELECT * FROM t_order WHERE user_id = %s", ["10086abc"],
         error=(ShardValueError, ("'10086abc'", "'user_id'", "'t_order'"))),
    Case("typed-exponent", "N", "SELECT * FROM t_order WHERE user_id = '1e3'", error=(ShardValueError, ("'1e3'",))),
    Case("typed-fraction", "N", "SELECT * FROM t_order WHERE user_id IN (1, '2.0')", error=(ShardValueError, ("'2.0'",))),
    Case("typed-empty", "N", "DELETE FROM t_order WHERE user_id = %s", [""], error=(ShardValueError, ("''", "'user_id'"))),
    Case("typed-insert-junk", "N", "INSERT INTO t_order (order_id, user_id) VALUES (1, %s)", ["5x"],
         error=(ShardValueError, ("'5x'",))),
    Case("typed-big-literal", "N", f"SELECT * FROM t_order WHERE user_id = '{2**53}'",
         error=(ShardValueError, ("too large", "parameter"))),
]

CASES = NO_COLUMN_LIST + SET_FORM + INSERT_SELECT + TYPED


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_with_schemas(case: Case) -> None:
    check(case, schema_router(case.config))


# -- without metadata: column-less INSERTs refused, strings route as given --------------------------------------


def test_no_column_list_without_schema_says_how_to_provide_the_columns() -> None:
    with pytest.raises(UnsupportedSQLError) as info:
        router("N").route("INSERT INTO t_order VALUES (1, 2, 3, 'a')")
    message = str(info.value)
    for fragment in ("'t_order'", "column list", "columns:", "load_schema=True"):
        assert fragment in message, message


def test_insert_select_star_without_schemas_stays_on_one_shard() -> None:
    """Without the tables' columns, ``SELECT *`` from another table cannot be checked position by position."""
    r = router("N")
    sql = "INSERT INTO t_order SELECT * FROM t_order_item WHERE user_id IN (%s, %s)"
    with pytest.raises(UnsupportedSQLError, match="INSERT ... SELECT"):
        r.route(sql, [1, 2])
    plan = r.route(sql, [1, 1])
    assert [u.data_source for u in plan.units] == [n_node(1).ds]


def test_strings_route_as_given_when_the_type_is_unknown() -> None:
    """Without a schema the router cannot know user_id is an integer: '10086' is hashed as the string."""
    plan = router("N").route("SELECT * FROM t_order WHERE user_id = %s", ["10086"])
    assert [u.data_source for u in plan.units] == [n_node("10086").ds] and plan.units[0].params == ("10086",)
    varchar = {"t_order": replace(SCHEMAS["N"]["t_order"], columns=(Column("order_id", "bigint"), Column("user_id", "varchar(20)")))}
    r = router("N")
    r.set_schemas(varchar)
    plan = r.route("SELECT * FROM t_order WHERE user_id = %s", ["10086"])
    assert plan.units[0].params == ("10086",) and plan.units[0].data_source == n_node("10086").ds


# -- generated keys with every column given -----------------------------------------------------------


def test_null_keys_get_generated_keys_in_place() -> None:
    r = schema_router("N")
    sql = "INSERT INTO t_order VALUES (NULL, %s, 1, 'a'), (%s, %s, 2, 'b'), (%s, %s, 3, 'c'), (DEFAULT, 10086, 4, 'd')"
    given = gid(40, 1)
    plan = r.route(sql, [5, None, 10086, given, 1])
    first, second, fourth = plan.generated_keys
    users = {first: 5, second: 10086, fourth: 10086}
    assert len(set(users)) == 3 and all(gene_of(k, 10) == slot_of(u, 10) for k, u in users.items())
    expected = {
        n_node(5): [("(%s, %s, 1, 'a')", (first, 5))],
        n_node(10086): [("(%s, %s, 2, 'b')", (second, 10086)), ("(%s, 10086, 4, 'd')", (fourth,))],
        n_node(1): [("(%s, %s, 3, 'c')", (given, 1))],
    }
    got = {(u.data_source, norm(u.sql), u.params) for u in plan.units}
    want = set()
    for node, rows in expected.items():
        head = comment("N", node.ds) + f"INSERT INTO {node.table('t_order')} {ORDER_COLUMNS} VALUES "
        want.add((node.ds, norm(head + ", ".join(t for t, _ in rows)), tuple(v for _, p in rows for v in p)))
    assert got == want


def test_one_row_null_key_takes_the_fast_path() -> None:
    r = schema_router("N")
    for sql, params in [("INSERT INTO t_order VALUES (%s, %s, %s, %s)", [None, 882341, 1, "x"]),
                        ("INSERT INTO t_order VALUES (NULL, %s, 1, 'x')", [882341]),
                        ("INSERT INTO t_order VALUES (?, ?, 1, 'x')", [None, "882341"])]:
        assert r.compile(sql).fast_path is not None  # type: ignore[attr-defined]
        plan = r.route(sql, params)
        (key,) = plan.generated_keys
        (unit,) = plan.units
        node = n_node(882341)
        assert unit.data_source == node.ds and unit.tables == (("t_order", node.table("t_order")),)
        assert key in unit.params and gene_of(key, 10) == slot_of(882341, 10)
        with hint(force_primary=True):  # the general path, for the same statement
            slow = r.route(sql, params)
        assert norm(slow.units[0].sql) == norm(unit.sql) and len(slow.generated_keys) == 1
    assert r.cache_info().fast_path_misses == 0


def test_given_key_is_kept_and_gene_checked() -> None:
    r = schema_router("N")
    plan = r.route("INSERT INTO t_order VALUES (%s, %s, 1, 'x')", [gid(41, 6), 6])
    assert plan.generated_keys == () and plan.units[0].params == (gid(41, 6), 6)
    with pytest.raises(ShardValueError, match="order_id=13"):
        r.route("INSERT INTO t_order VALUES (%s, %s, 1, 'x')", [13, 6])


OWN_FORMAT = {
    "dataSources": {"ds_0": "sqlite:///:memory:", "ds_1": "sqlite:///:memory:"},
    "tables": [
        {"logicTable": "t_account", "shardKey": "account_id", "algorithm": "MOD", "databases": ["ds_0", "ds_1"],
         "columns": {"account_id": {"type": "bigint", "primaryKey": True}, "name": "varchar(20)",
                     "balance": {"type": "decimal(12,2)"}}},
        {"logicTable": "t_event", "shardKey": "id", "algorithm": "MOD", "databases": ["ds_0", "ds_1"],
         "keyGenerator": {"column": "id", "type": "snowflake"}, "columns": {"id": "bigint", "payload": None}},
    ],
}


def test_columns_declared_in_the_configuration() -> None:
    cfg = load_config(OWN_FORMAT)
    declared = declared_schema(cfg.table("t_account"))  # type: ignore[arg-type]
    assert declared == TableSchema.of("t_account", [("account_id", "bigint"), ("name", "varchar(20)"),
                                                    ("balance", "decimal(12,2)")], ("account_id",), "the configuration")
    r = Router(cfg)
    plan = r.route("INSERT INTO t_account VALUES (%s, %s, %s), (%s, 'b', 2)", ["7", "a", 1, 8])
    assert [(u.data_source, u.sql, u.params) for u in plan.units] == [
        ("ds_0", "INSERT INTO t_account (account_id, name, balance) VALUES (%s, 'b', 2)", (8,)),
        ("ds_1", "INSERT INTO t_account (account_id, name, balance) VALUES (%s, %s, %s)", (7, "a", 1)),
    ]
    assert [u.data_source for u in r.route("SELECT * FROM t_account WHERE account_id = '9'").units] == ["ds_1"]
    # A loaded schema wins over the declaration.
    r.set_schemas({"t_account": TableSchema.of("t_account", [("name", "text"), ("account_id", "bigint")])})
    plan = r.route("INSERT INTO t_account VALUES ('n', 4)")
    assert [(u.data_source, u.sql) for u in plan.units] == [("ds_0", "INSERT INTO t_account (name, account_id) VALUES ('n', 4)")]


def test_null_key_that_is_the_shard_column_is_generated_before_routing() -> None:
    r = Router(load_config(OWN_FORMAT))
    plan = r.route("INSERT INTO t_event VALUES (NULL, 'x'), (%s, 'y'), (NULL, 'z')", [None])
    keys = plan.generated_keys
    assert len(keys) == 3 and len(set(keys)) == 3
    by_source: dict[str, list[Any]] = {}
    for key, payload in zip(keys, "xyz"):
        by_source.setdefault(f"ds_{key % 2}", []).append((key, payload))
    assert {u.data_source: u.params for u in plan.units} == {
        ds: tuple(k for k, _ in rows) for ds, rows in by_source.items()}
    plan = r.route("INSERT INTO t_event SET payload = %s", ["p"])  # the key left out: appended
    (key,) = plan.generated_keys
    assert plan.units[0].data_source == f"ds_{key % 2}" and plan.units[0].params == ("p", key)
    assert plan.units[0].sql == "INSERT INTO t_event (payload, id) VALUES (%s, %s)"


# -- the cache follows schema changes ---------------------------------------------------------------


def test_schema_change_drops_exactly_the_affected_plans() -> None:
    r = router("N")
    sql = "INSERT INTO t_order VALUES (%s, %s, %s)"
    with pytest.raises(UnsupportedSQLError):
        r.route(sql, [gid(50, 1), 1, 2])
    r.route("SELECT * FROM t_dict_region WHERE id = 1")
    r.route("SELECT * FROM t_order_item WHERE user_id = %s", ["5"])
    assert r.cache_info().size == 2
    three = TableSchema.of("t_order", [("order_id", "bigint"), ("user_id", "bigint"), ("amount", "int")])
    r.set_schemas({"t_order": three})
    # t_order_item routes through t_order, so its plan went; the broadcast table's stayed.
    assert r.cache_info().size == 1
    plan = r.route(sql, [gid(50, 1), 1, 2])
    assert "(order_id, user_id, amount)" in plan.units[0].sql
    assert r.route("SELECT * FROM t_order_item WHERE user_id = %s", ["5"]).units[0].params == (5,)
    r.set_schemas({"t_order": three})  # the same schema again: nothing dropped
    assert r.cache_info().size == 3
    reordered = TableSchema.of("t_order", [("user_id", "bigint"), ("order_id", "bigint"), ("amount", "int")])
    r.set_schemas({"t_order": reordered})
    plan = r.route(sql, [5, gid(51, 5), 2])
    assert "(user_id, order_id, amount)" in plan.units[0].sql and plan.units[0].data_source == n_node(5).ds
    r.set_schemas({"t_order": None})
    assert "t_order" not in r.schemas
    with pytest.raises(UnsupportedSQLError, match="without a column list"):
        r.route(sql, [gid(50, 1), 1, 2])


def test_reload_keeps_the_schemas() -> None:
    r = schema_router("N")
    r.use_config(config("N"))
    assert r.schemas["t_order"] == SCHEMAS["N"]["t_order"]
    assert r.route("SELECT * FROM t_order WHERE user_id = '5'").units[0].data_source == n_node(5).ds


def test_typed_comparison_takes_the_fast_path() -> None:
    r = schema_router("N")
    workload: list[tuple[str, list[Any]]] = [("SELECT * FROM t_order WHERE user_id = %s", ["10086"]),
                        ("UPDATE t_order SET amount = 1 WHERE user_id = %s", ["42"]),
                        ("INSERT INTO t_order (user_id, amount) VALUES (%s, %s)", ["77", 1])]
    for sql, params in workload:
        assert r.compile(sql).fast_path is not None  # type: ignore[attr-defined]
        for _ in range(3):
            plan = r.route(sql, params)
        user = int(params[0])
        assert plan.units[0].data_source == n_node(user).ds and plan.units[0].params[0] == user
    assert r.cache_info().fast_path_misses == 0


def test_schema_values() -> None:
    schema = TableSchema.of("t", [("ID", "BIGINT(20) UNSIGNED"), ("n", "integer"), ("p", "point"), ("s", "int8"),
                                  ("v", "interval"), ("x", "")])
    assert [c.is_integer for c in schema.columns] == [True, True, False, True, False, False]
    assert schema.column("id") is schema.columns[0] and schema.column("nope") is None
    assert schema.describe() == "t (ID, n, p, s, v, x)"
    with pytest.raises(DdmError):
        router("N").route("INSERT INTO t_order VALUES (1)")
    with pytest.raises(RoutingError):  # every refusal here is a routing error naming the table
        schema_router("N").route("INSERT INTO t_order VALUES (1)")


# -- hostile variants of these statements end in a plan or a DdmError ------------------------------

_TOKEN = re.compile(r"'[^']*'|\w+|\s+|.", re.S)
_PIECES = ["SET", "VALUES", "(", ")", ",", "=", "NULL", "DEFAULT", "'", "`", ";", "--", "/*", "*/", "ON DUPLICATE KEY UPDATE",
           "SELECT", "UNION", "%s", "?", "*", "1e3", "'10086'", "INSERT INTO t_order", "t_order_item", "GROUP BY"]


@st.composite
def _mutated(draw: Any) -> tuple[str, str, Any]:
    case = draw(st.sampled_from(CASES))
    tokens = _TOKEN.findall(case.sql)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(tokens)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if op == "delete" and tokens:
            del tokens[min(at, len(tokens) - 1)]
        elif op == "insert":
            tokens.insert(at, draw(st.sampled_from(_PIECES)))
        elif tokens:
            tokens.insert(at, tokens[min(at, len(tokens) - 1)])
    sql = "".join(tokens)
    count = sql.count("%s") + sql.count("?")
    params = draw(st.sampled_from([None, case.params, [None] * count, ["7"] * count, list(range(1, count + 1))]))
    return case.config, sql, params


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(example=_mutated())
def test_mutated_insert_forms_route_or_raise_ddm_errors(example: tuple[str, str, Any]) -> None:
    name, sql, params = example
    try:
        plan = schema_router(name).route(sql, params)
    except DdmError:
        return
    assert plan.units
