"""A multi-node plan's units made once per statement and nodes picked (route/query/unit_shapes.py), and the pick
made once per statement when no value can change it (``TableRouter.value_blind``).

Every plan a router that routed the statement before gives must be the plan a fresh router gives (nothing
cached), whatever values came before: other values route to other units, a narrower route after a wider one
gets its own units, a hint routes as it chose, and a reload or a schema change builds the units anew.
"""

from __future__ import annotations

from typing import Any

import pytest

from ddm_core import Router, load_config
from ddm_core.metadata import ConfigHolder, StaticSource
from ddm_core.metadata.dump import to_native
from ddm_core.route import hint
from ddm_core.route.plan import RoutePlan
from ddm_core.route.shards.conditions import Eq, Param, Range
from ddm_core.route.shards.targets import TableRouter
from ddm_core.route.table_schema import Column, TableSchema

COLUMNS = {"id": "int(11)", "k": "int(11)", "c": "char(120)"}
SHAPES = [
    "SELECT SUM(k) FROM {t} WHERE id BETWEEN %s AND %s",
    "SELECT c FROM {t} WHERE id BETWEEN %s AND %s",
    "SELECT c FROM {t} WHERE id BETWEEN %s AND %s ORDER BY c",
    "SELECT DISTINCT c FROM {t} WHERE id BETWEEN %s AND %s ORDER BY c",
    "SELECT c FROM {t} WHERE id BETWEEN %s AND %s ORDER BY c LIMIT %s",
    "SELECT c FROM {t} WHERE id IN (%s, %s)",
    "SELECT c FROM {t} WHERE id BETWEEN %s AND %s OR id = %s",
    "SELECT c FROM {t} WHERE id BETWEEN ? AND ? ORDER BY k",
]
#: Wide, narrow, wide again, another narrow one: (low, high) and a third value where a shape takes one.
VALUES = [(1, 100, 7), (4, 4, 3), (4, 5, 2), (6, 6, 9), (1, 100, 7), (5, 5, 1), (3, 3, 8), (8, 8, 8), (2, 40, 5)]


def config(**runtime: Any) -> dict[str, Any]:
    return {
        "dataSources": {"ds_0": "mariadb://127.0.0.1:3306/a", "ds_1": "mariadb://127.0.0.1:3306/b"},
        "tables": [
            # SLOTS over 2 x 2 tables: a range reaches every table whatever its bounds (the pick is made once)
            {"logicTable": "sbtest1", "shardKey": "id", "algorithm": "slots", "slotCount": 1024, "shardCount": 2,
             "tablePerShard": 2, "databases": ["ds_0", "ds_1"], "tableKey": "id"},
            # MOD databases: a range of fewer ids than data sources reaches one of them (the values pick)
            {"logicTable": "t_mod", "shardKey": "id", "algorithm": "mod", "shardCount": 2, "tablePerShard": 2,
             "databases": ["ds_0", "ds_1"], "tableKey": "id"},
        ],
        "runtime": {"fullRouteThreshold": 64, **runtime},
    }


def with_schemas(r: Router, **types: str) -> Router:
    columns = tuple(Column(n, types.get(n, t)) for n, t in COLUMNS.items())
    r.set_schemas({t: TableSchema(t, columns, ("id",)) for t in ("sbtest1", "t_mod")})
    return r


def fresh(**runtime: Any) -> Router:
    return with_schemas(Router(load_config(config(**runtime))))


def params(sql: str, values: tuple[int, int, int]) -> tuple[int, ...]:
    return values[: sql.count("%s") + sql.count("?")]


def same(got: RoutePlan, want: RoutePlan) -> None:
    assert got.units == want.units
    assert (got.kind, got.tables, got.merge, got.statement, got.is_write, got.force_primary) == (
        want.kind, want.tables, want.merge, want.statement, want.is_write, want.force_primary)  # fmt: skip


@pytest.mark.parametrize("table", ["sbtest1", "t_mod"])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_route_is_a_fresh_routers(table: str, shape: str) -> None:
    sql = shape.format(t=table)
    r = fresh()
    for values in VALUES + VALUES[::-1]:
        same(r.route(sql, params(sql, values)), fresh().route(sql, params(sql, values)))


def test_values_that_route_elsewhere_get_their_own_units() -> None:
    r = fresh()
    sql = SHAPES[0].format(t="t_mod")
    wide = r.route(sql, (1, 100))
    assert [u.data_source for u in wide.units] == ["ds_0", "ds_1"] and wide.units[0].params == (1, 100, 1, 100)
    narrow = r.route(sql, (4, 4))  # ds_0's two tables only, after a route to all four
    assert [(u.data_source, u.params) for u in narrow.units] == [("ds_0", (4, 4, 4, 4))]
    assert narrow.tables[0].nodes == ("ds_0.t_mod_0_0", "ds_0.t_mod_0_1")
    other = r.route(sql, (5, 5))
    assert [(u.data_source, u.params) for u in other.units] == [("ds_1", (5, 5, 5, 5))]
    assert other.units[0].sql == fresh().route(sql, (5, 5)).units[0].sql != narrow.units[0].sql
    again = r.route(sql, (4, 4))
    assert again.units == narrow.units and r.route(sql, (2, 80)).units[1].params == (2, 80, 2, 80)


def test_a_hint_routes_as_it_chose_between_cached_routes() -> None:
    r = fresh()
    sql = SHAPES[1].format(t="sbtest1")
    plain = r.route(sql, (1, 100))
    with hint(database="ds_1"):
        hinted = r.route(sql, (1, 100))
    # the hint's units stay as it chose them: one per table of ds_1, not the cached union of both data sources
    assert [(u.data_source, u.sql.count("UNION ALL")) for u in hinted.units] == [("ds_1", 0), ("ds_1", 0)]
    assert "forced by hint" in hinted.tables[0].reason
    with hint(force_primary=True):  # any hint: routed without the cache, as a fresh router routes it
        primary = r.route(sql, (1, 100))
        assert primary.force_primary
        same(primary, fresh().route(sql, (1, 100)))
    assert r.route(sql, (1, 100)) == plain
    same(r.route(sql, (2, 50)), fresh().route(sql, (2, 50)))


@pytest.mark.parametrize("via", ["use_config", "holder"])
def test_a_reload_builds_the_units_anew(via: str) -> None:
    sql = SHAPES[2].format(t="sbtest1")
    on, off = load_config(config()), load_config(config(oneUnitPerDataSource=False))
    if via == "holder":
        holder = ConfigHolder(StaticSource(to_native(on)))
        r = with_schemas(Router(holder))

        def switch(version: Any) -> None:
            holder.publish(version)
    else:
        r = with_schemas(Router(on))
        switch = r.use_config
    assert len(r.route(sql, (1, 100)).units) == 2  # one UNION ALL per data source
    switch(off)
    per_table = r.route(sql, (1, 100))
    assert len(per_table.units) == 4 and not any("UNION" in u.sql for u in per_table.units)
    same(per_table, fresh(oneUnitPerDataSource=False).route(sql, (1, 100)))
    switch(on)
    assert len(r.route(sql, (3, 30)).units) == 2


def test_a_schema_change_builds_the_units_anew() -> None:
    r = fresh()
    sql = SHAPES[1].format(t="sbtest1")
    assert len(r.route(sql, (1, 100)).units) == 2
    with_schemas(r, c="text")  # a union answers TEXT with another length: one unit per table again
    assert len(r.route(sql, (1, 100)).units) == 4


def test_many_node_sets_of_one_statement_stay_right() -> None:
    """More node sets than a statement keeps (route/query/unit_shapes.py MAX_SHAPES): it starts again, right."""
    r = fresh()
    sql = "SELECT c FROM t_mod WHERE id IN (%s, %s) OR id BETWEEN %s AND %s"
    for i in range(200):
        values = (i % 7, (i * 3) % 11, i % 5, i % 5 + i % 3)
        same(r.route(sql, values), fresh().route(sql, values))


def test_which_picks_the_values_cannot_change() -> None:
    cfg = load_config(config())
    slots, mod = TableRouter(cfg.table("sbtest1")), TableRouter(cfg.table("t_mod"))  # type: ignore[arg-type]
    between = [{"id": (Range("id", Param(0), Param(1)),)}]
    assert slots.value_blind(between) and slots.value_blind(None) and slots.value_blind([{}])
    assert slots.value_blind([{"k": (Eq("k", Param(0)),)}])  # not a routing column
    assert not slots.value_blind([{"id": (Eq("id", Param(0)),)}])  # an exact value picks a table
    assert not slots.value_blind([*between, {"id": (Eq("id", Param(2)),)}])
    assert not mod.value_blind(between)  # MOD narrows a short range to one data source
    picked = [slots.route(between, (low, low + 9), None) for low in (1, 500, 9000)]
    assert picked[0] == picked[1] == picked[2] and picked[0].full and len(picked[0].nodes) == 4
