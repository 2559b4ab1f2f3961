"""Joins never lose rows: they route only where their conditions prove the rows they pair share a node.

Table-driven over the suite's own configuration (:func:`join_config`); every
expected node comes from the configured formulas, never from the router:

* ``t_order``, ``t_order_item`` (bound), by ``user_id``; ``t_account`` by ``account_id``:
  data source ``ds_{key % 2}``, table ``<name>_{key % 4}`` (nodes listed ds_0: 0, 2; ds_1: 1, 3);
* ``t_local``: two tables on ``ds_0`` only, ``t_local_{user_id % 2}``;
* ``t_one``: a sharded table with one data node, ``ds_0.t_one``;
* ``t_dict`` broadcast, ``t_cfg`` a single table on ``ds_0``.

The property tests at the end run random two-table joins on random rows through
:class:`ddm_core.execute.Executor` over SQLite files and MariaDB, against the
same join on one unsharded copy: a join is either refused or returns exactly the
rows (and Python types) the unsharded copy returns.
"""

from __future__ import annotations

from collections import Counter
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ddm_core import load_config
from ddm_core.errors import FullRouteError, ShardKeyUpdateError, UnsupportedSQLError
from ddm_core.execute import Executor
from ddm_core.route import RouteKind, Router
from test_execute_support import assert_no_leaks
from test_oracle import Backend, Query, SQLiteBackend, check, mariadb_oracle, reference_runner

SOURCES = ("ds_0", "ds_1")
#: ``key % 4`` of t_order / t_order_item / t_account nodes, in the order the configuration lists them.
NODE_ORDER = (0, 2, 1, 3)
KEYED = ("t_order", "t_order_item", "t_account")


def join_config(urls: dict[str, Any], cross_node: bool = True) -> dict[str, Any]:
    """The configuration the module routes against (see the module docstring).

    ``cross_node=False``: SELECTs whose rows need not share a node are refused, as the
    co-location proof decides, instead of being answered by copying their parts.
    """

    def inline(expr: str) -> dict[str, Any]:
        # Ranges go to every target (INLINE cannot narrow them) instead of being refused.
        return {"type": "INLINE", "props": {"algorithm-expression": expr, "allow-range-query-with-inline-sharding": True}}

    def keyed(name: str, column: str) -> dict[str, Any]:
        return {
            "logicTable": name,
            "dataNodes": [f"ds_0.{name}_0", f"ds_0.{name}_2", f"ds_1.{name}_1", f"ds_1.{name}_3"],
            "databaseStrategy": {"kind": "standard", "columns": [column], "algorithm": f"db_{column}"},
            "tableStrategy": {"kind": "standard", "columns": [column], "algorithm": f"{name}_tables"},
        }

    return {
        "dataSources": urls,
        "pool": {"maxSize": 8, "minIdle": 1, "acquireTimeoutMs": 3000},
        "algorithms": {
            "db_user_id": inline("ds_${user_id % 2}"),
            "db_account_id": inline("ds_${account_id % 2}"),
            "t_order_tables": inline("t_order_${user_id % 4}"),
            "t_order_item_tables": inline("t_order_item_${user_id % 4}"),
            "t_account_tables": inline("t_account_${account_id % 4}"),
            "t_local_tables": inline("t_local_${user_id % 2}"),
        },
        "tables": [
            keyed("t_order", "user_id"),
            keyed("t_order_item", "user_id"),
            keyed("t_account", "account_id"),
            {"logicTable": "t_one", "dataNodes": ["ds_0.t_one"]},
            {"logicTable": "t_local", "dataNodes": ["ds_0.t_local_0", "ds_0.t_local_1"],
             "tableStrategy": {"kind": "standard", "columns": ["user_id"], "algorithm": "t_local_tables"}},
        ],
        "bindingTables": [["t_order", "t_order_item"]],
        "broadcastTables": ["t_dict"],
        "singleTables": {"t_cfg": "ds_0"},
        "defaultDataSource": "ds_0",
        "runtime": {"allowFullRoute": True, "allowDmlFullRoute": True, "fullRouteThreshold": 64,
                    "maxOffset": 100_000, "sqlComment": False, "crossNodeQueries": cross_node},
    }


# -- expectations from the formulas ------------------------------------------------------------

Unit = tuple[str, dict[str, str]]


def node_of(table: str, key: int) -> tuple[str, str]:
    """(data source, physical table) of ``table``'s row with shard key ``key``, by the formulas."""
    if table in KEYED:
        return f"ds_{key % 2}", f"{table}_{key % 4}"
    if table == "t_local":
        return "ds_0", f"t_local_{key % 2}"
    assert table == "t_one"
    return "ds_0", "t_one"


def at(**keys: int) -> Unit:
    """One unit holding each table's node for its key (they must share a data source)."""
    found = {table: node_of(table, key) for table, key in keys.items()}
    sources = {ds for ds, _ in found.values()}
    assert len(sources) == 1, f"expectation error: {found} spans {sources}"
    return sources.pop(), {table: physical for table, (_, physical) in found.items()}


def spread(table: str, keys: Sequence[int], *bound: str, **fixed: int) -> list[Unit]:
    """One unit per distinct node of ``table`` reached by ``keys``, in configuration order.

    ``bound`` tables follow ``table``'s node; ``fixed`` tables sit on their key's node in every unit.
    """
    def position(key: int) -> tuple[int, int]:
        return (NODE_ORDER.index(key % 4), 0) if table in KEYED else (key % 2, 0)

    units: list[Unit] = []
    seen: set[tuple[str, str]] = set()
    for key in sorted(keys, key=position):
        if node_of(table, key) in seen:
            continue
        seen.add(node_of(table, key))
        ds, tables = at(**{table: key}, **fixed)
        tables.update({t: f"{t}_{key % 4}" for t in bound})
        units.append((ds, tables))
    return units


EVERY = (0, 2, 1, 3)  # one key per node of the keyed tables


@dataclass
class Case:
    """One statement: the units it must route to, or the error it must raise."""

    id: str
    sql: str
    params: Sequence[Any] | None = None
    units: list[Unit] | None = None
    error: tuple[type[Exception], tuple[str, ...]] | None = None
    sql_of_first: str | None = None  # the first unit's SQL, when the case pins it down


def routed(id: str, sql: str, units: list[Unit], params: Sequence[Any] | None = None, **kw: Any) -> Case:
    return Case(id, sql, params, units=units, **kw)


def refused(id: str, sql: str, *fragments: str, params: Sequence[Any] | None = None,
            error: type[Exception] = UnsupportedSQLError) -> Case:
    return Case(id, sql, params, error=(error, fragments))


# Two keys that share a node (1 % 4 == 5 % 4) and two on different tables of one data source.
assert node_of("t_order", 1) == node_of("t_order", 5) and node_of("t_order", 1)[0] == node_of("t_order", 3)[0]

SELF_JOINS = [
    routed("self-on-key", "SELECT * FROM t_order a JOIN t_order b ON a.user_id = b.user_id WHERE a.user_id IN (1, 2)",
           spread("t_order", [1, 2])),
    routed("self-key-in-where", "SELECT * FROM t_order a, t_order b WHERE a.user_id = b.user_id AND b.user_id = %s",
           [at(t_order=6)], [6]),
    routed("self-both-pinned-one-node", "SELECT * FROM t_order a JOIN t_order b ON a.k = b.k "
           "WHERE a.user_id = 1 AND b.user_id = 5", [at(t_order=1)],
           sql_of_first="SELECT * FROM t_order_1 a JOIN t_order_1 b ON a.k = b.k WHERE a.user_id = 1 AND b.user_id = 5"),
    routed("self-left-on-key", "SELECT * FROM t_order a LEFT JOIN t_order b ON a.user_id = b.user_id AND b.k = 1",
           spread("t_order", EVERY)),
    refused("self-ranges", "SELECT * FROM t_order a JOIN t_order b ON a.k = b.k WHERE a.user_id >= 289 "
            "AND b.user_id >= 99", "join of t_order a and t_order b", "a.user_id = b.user_id"),
    refused("self-non-key", "SELECT a.id, b.id FROM t_order a JOIN t_order b ON a.v = b.v", "a.user_id = b.user_id"),
    refused("self-pinned-to-two-tables", "SELECT * FROM t_order a JOIN t_order b ON a.k = b.k "
            "WHERE a.user_id = 1 AND b.user_id = 3", "t_order a", "t_order b"),
    refused("self-left-non-key", "SELECT * FROM t_order a LEFT JOIN t_order b ON a.k = b.k WHERE a.user_id = 2",
            "t_order b", "a.user_id = b.user_id"),
]

BINDING = [
    routed("binding-on-key-aliases", "SELECT * FROM t_order_item i JOIN t_order o ON i.user_id = o.user_id "
           "WHERE o.user_id = 7", [at(t_order_item=7, t_order=7)]),
    routed("binding-using", "SELECT * FROM t_order o JOIN t_order_item i USING (user_id) WHERE i.user_id IN (2, 3)",
           spread("t_order", [2, 3], "t_order_item")),
    routed("binding-key-in-where", "SELECT * FROM t_order o, t_order_item i WHERE o.user_id = i.user_id",
           spread("t_order", EVERY, "t_order_item")),
    routed("binding-right-on-key", "SELECT * FROM t_order o RIGHT JOIN t_order_item i ON o.user_id = i.user_id "
           "WHERE i.user_id = 4", [at(t_order=4, t_order_item=4)]),
    routed("binding-pinned-apart-one-source", "SELECT * FROM t_order o JOIN t_order_item i ON o.k = i.k "
           "WHERE o.user_id = 1 AND i.user_id = 3", [at(t_order=1, t_order_item=3)]),
    routed("binding-left-pinned-in-on", "SELECT * FROM t_order o LEFT JOIN t_order_item i ON o.k = i.k "
           "AND i.user_id = 5 WHERE o.user_id = 1", [at(t_order=1, t_order_item=5)]),
    refused("binding-non-key", "SELECT * FROM t_order o JOIN t_order_item i ON o.k = i.k",
            "join of t_order o and t_order_item i", "o.user_id = i.user_id"),
    refused("binding-id-only-one-side-pinned", "SELECT * FROM t_order o JOIN t_order_item i ON o.id = i.id "
            "WHERE o.user_id = 1", "t_order_item i", "o.user_id = i.user_id"),
    refused("binding-left-non-key", "SELECT * FROM t_order o LEFT JOIN t_order_item i ON o.k = i.k "
            "WHERE o.user_id = 1", "o.user_id = i.user_id"),
    refused("binding-key-under-or", "SELECT * FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id "
            "OR o.k = i.k WHERE o.user_id = 1", "o.user_id = i.user_id"),
    refused("binding-pinned-to-two-sources", "SELECT * FROM t_order o JOIN t_order_item i ON o.k = i.k "
            "WHERE o.user_id = %s AND i.user_id = %s", "t_order_item i", params=[1, 2]),
]

OTHER_TABLES = [
    routed("groups-pinned-one-source", "SELECT * FROM t_order o JOIN t_account a ON o.k = a.k "
           "WHERE o.user_id = %s AND a.account_id = %s", [at(t_order=1, t_account=3)], [1, 3]),
    routed("group-pinned-driver-in-its-source", "SELECT * FROM t_order o JOIN t_account a ON o.k = a.k "
           "WHERE o.user_id IN (1, 3) AND a.account_id = 5", spread("t_order", [1, 3], t_account=5)),
    routed("outer-group-pinned-in-on", "SELECT * FROM t_order o LEFT JOIN t_account a ON o.k = a.k "
           "AND a.account_id = 7 WHERE o.user_id IN (1, 3)", spread("t_order", [1, 3], t_account=7)),
    routed("broadcast", "SELECT * FROM t_order o JOIN t_dict d ON o.k = d.k", spread("t_order", EVERY)),
    routed("broadcast-preserved-pinned", "SELECT * FROM t_dict d LEFT JOIN t_order o ON d.k = o.k AND o.user_id = 2",
           [at(t_order=2)]),
    routed("broadcast-preserved-where-rejects-null", "SELECT * FROM t_dict d LEFT JOIN t_order o ON d.k = o.k "
           "WHERE o.user_id IN (1, 2)", spread("t_order", [1, 2])),
    routed("single-same-source", "SELECT * FROM t_order o JOIN t_cfg c ON o.k = c.k WHERE o.user_id IN (0, 2)",
           spread("t_order", [0, 2])),
    routed("one-node-table", "SELECT * FROM t_order o JOIN t_one x ON o.k = x.k WHERE o.user_id IN (0, 2)",
           spread("t_order", [0, 2], t_one=0)),
    routed("one-node-table-first", "SELECT * FROM t_one x JOIN t_local l ON l.k = x.k",
           spread("t_local", [0, 1], t_one=0)),
    refused("groups-pinned-two-sources", "SELECT * FROM t_order o JOIN t_account a ON o.k = a.k "
            "WHERE o.user_id = %s AND a.account_id = %s", "'t_order' and 't_account' are not bound", params=[1, 2]),
    refused("groups-unpinned", "SELECT * FROM t_order o JOIN t_account a ON o.user_id = a.account_id "
            "WHERE o.user_id = 1", "join of t_order o and t_account a", "not bound"),
    refused("one-node-table-other-source", "SELECT * FROM t_order o JOIN t_one x ON o.k = x.k",
            "t_one x", "ds_0.t_one"),
    refused("broadcast-preserved-spread", "SELECT * FROM t_dict d LEFT JOIN t_order o ON d.k = o.k",
            "t_order o is on the optional side of an outer join"),
    refused("single-preserved-spread", "SELECT * FROM t_cfg c LEFT JOIN t_order o ON c.k = o.k AND o.user_id IN (0, 2)",
            "optional side", "2 nodes"),
]

SUBQUERIES = [
    routed("nested-pinned", "SELECT * FROM t_order WHERE user_id = %s AND id IN "
           "(SELECT id FROM t_order_item WHERE user_id = %s)", [at(t_order=5, t_order_item=5)], [5, 5]),
    routed("nested-pinned-same-node-other-key", "SELECT * FROM t_order WHERE user_id = %s AND id IN "
           "(SELECT id FROM t_order_item WHERE user_id = %s)", [at(t_order=5, t_order_item=1)], [5, 1]),
    routed("exists-correlated", "SELECT * FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i "
           "WHERE i.user_id = o.user_id AND i.k = 1)", spread("t_order", EVERY, "t_order_item")),
    routed("not-exists-correlated", "SELECT * FROM t_order o WHERE o.user_id IN (2, 3) AND NOT EXISTS "
           "(SELECT 1 FROM t_order_item i WHERE i.user_id = o.user_id)", spread("t_order", [2, 3], "t_order_item")),
    routed("in-on-key", "SELECT * FROM t_order o WHERE o.user_id IN (SELECT i.user_id FROM t_order_item i "
           "WHERE i.k = 2)", spread("t_order", EVERY, "t_order_item")),
    routed("scalar-correlated", "SELECT o.id FROM t_order o WHERE o.user_id IN (1, 2) AND o.v < "
           "(SELECT COUNT(*) FROM t_order_item i WHERE i.user_id = o.user_id)", spread("t_order", [1, 2], "t_order_item")),
    routed("three-levels-pinned", "SELECT * FROM t_order o WHERE o.user_id = 1 AND o.k IN (SELECT i.k FROM "
           "t_order_item i WHERE i.user_id = 3 AND i.k IN (SELECT a.k FROM t_account a WHERE a.account_id = 5))",
           [at(t_order=1, t_order_item=3, t_account=5)]),
    routed("derived-pinned-driver-spread", "SELECT * FROM t_order o JOIN (SELECT * FROM t_order_item "
           "WHERE user_id = 2) i ON o.k = i.k WHERE o.user_id IN (0, 2)", spread("t_order", [0, 2], t_order_item=2)),
    refused("unpinned", "SELECT * FROM t_order WHERE user_id = 1 AND id IN (SELECT id FROM t_order_item)",
            "subquery on sharded table(s) t_order_item"),
    refused("correlated-non-key", "SELECT * FROM t_order o WHERE o.user_id = 1 AND EXISTS "
            "(SELECT 1 FROM t_order_item i WHERE i.k = o.k)", "subquery", "i.user_id = o.user_id"),
    refused("correlated-under-or", "SELECT * FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i "
            "WHERE i.user_id = o.user_id OR i.k = 1)", "subquery", "t_order_item"),
    refused("not-in-on-key", "SELECT * FROM t_order o WHERE o.user_id = 1 AND o.user_id NOT IN "
            "(SELECT i.user_id FROM t_order_item i)", "subquery", "t_order_item"),
    refused("derived-spread", "SELECT * FROM (SELECT * FROM t_order WHERE user_id IN (1, 2)) t",
            "subquery on sharded table(s) t_order", "2 nodes"),
]

SET_OPERATIONS_AND_DML = [
    routed("union-distinct-broadcast-branch", "SELECT id FROM t_order WHERE user_id IN (1, 2) UNION "
           "SELECT id FROM t_dict", spread("t_order", [1, 2])),
    refused("union-all-broadcast-branch", "SELECT id FROM t_order WHERE user_id IN (1, 2) UNION ALL "
            "SELECT id FROM t_dict", "UNION ALL", "once per node"),
    refused("intersect-spread", "SELECT id FROM t_order WHERE user_id = 1 INTERSECT "
            "SELECT id FROM t_order_item WHERE user_id = 2", "INTERSECT"),
    routed("update-groups-pinned", "UPDATE t_order o JOIN t_account a ON o.k = a.k SET o.v = a.v "
           "WHERE o.user_id = 1 AND a.account_id = 3", [at(t_order=1, t_account=3)]),
    routed("delete-binding-on-key", "DELETE o FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id "
           "WHERE o.user_id = 6 AND i.k = 1", [at(t_order=6, t_order_item=6)]),
    refused("update-binding-non-key", "UPDATE t_order o JOIN t_order_item i ON o.k = i.k SET o.v = i.v "
            "WHERE o.user_id = 6", "o.user_id = i.user_id"),
    refused("update-sets-other-groups-key", "UPDATE t_order o JOIN t_account a ON o.k = a.k SET a.account_id = 9 "
            "WHERE o.user_id = 1 AND a.account_id = 3", "'account_id'", "'t_account'", error=ShardKeyUpdateError),
]

DDL = [
    routed("fk-bound", "ALTER TABLE t_order ADD CONSTRAINT fk FOREIGN KEY (k) REFERENCES t_order_item (k)",
           spread("t_order", EVERY, "t_order_item")),
    routed("fk-one-node", "ALTER TABLE t_local ADD CONSTRAINT fk FOREIGN KEY (k) REFERENCES t_one (k)",
           spread("t_local", [0, 1], t_one=0)),
    routed("fk-single", "ALTER TABLE t_local ADD CONSTRAINT fk FOREIGN KEY (k) REFERENCES t_cfg (k)",
           spread("t_local", [0, 1])),
    routed("fk-broadcast", "ALTER TABLE t_order ADD CONSTRAINT fk FOREIGN KEY (k) REFERENCES t_dict (k)",
           spread("t_order", EVERY)),
    routed("create-fk-one-node", "CREATE TABLE t_local (id BIGINT, user_id BIGINT, k INT, "
           "FOREIGN KEY (k) REFERENCES t_one (k))", spread("t_local", [0, 1], t_one=0)),
    routed("analyze-one-node-table", "ANALYZE TABLE t_local, t_one", spread("t_local", [0, 1], t_one=0)),
    routed("analyze-bound", "ANALYZE TABLE t_order, t_order_item", spread("t_order", EVERY, "t_order_item")),
    routed("analyze-one-node-and-single", "ANALYZE TABLE t_one, t_cfg", [at(t_one=0)]),
    refused("fk-unbound-spread", "ALTER TABLE t_order ADD CONSTRAINT fk FOREIGN KEY (k) REFERENCES t_account (k)",
            "'t_order' and 't_account'", "not bound"),
    refused("fk-one-node-to-spread", "ALTER TABLE t_one ADD CONSTRAINT fk FOREIGN KEY (k) REFERENCES t_local (k)",
            "'t_one' has one physical table", "'t_local'"),
    refused("fk-one-node-other-source", "ALTER TABLE t_order ADD CONSTRAINT fk FOREIGN KEY (k) REFERENCES t_one (k)",
            "'t_one' lives only on ds_0.t_one", "'ds_1'"),
    refused("analyze-unbound-spread", "ANALYZE TABLE t_order, t_account", "'t_order' and 't_account'"),
    refused("drop-spread-with-one-node", "DROP TABLE t_local, t_one", "dropped once per node"),
]

CASES = SELF_JOINS + BINDING + OTHER_TABLES + SUBQUERIES + SET_OPERATIONS_AND_DML + DDL


@pytest.fixture(scope="module")
def router() -> Router:
    """Refuses what the co-location proof cannot show (the proof's own cases)."""
    return Router(load_config(join_config({ds: f"sqlite:///unused_{ds}.db" for ds in SOURCES}, cross_node=False)))


@pytest.fixture(scope="module")
def cross_router() -> Router:
    return Router(load_config(join_config({ds: f"sqlite:///unused_{ds}.db" for ds in SOURCES})))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_join_routes(router: Router, case: Case) -> None:
    if case.error is not None:
        cls, fragments = case.error
        with pytest.raises(cls) as info:
            router.route(case.sql, case.params)
        for fragment in fragments:
            assert fragment in str(info.value), (case.id, fragment, str(info.value))
        return
    plan = router.route(case.sql, case.params)
    assert [(u.data_source, dict(u.tables)) for u in plan.units] == case.units, case.id
    for unit in plan.units:  # the SQL names exactly the unit's physical tables
        for logic, physical in unit.tables:
            assert physical in unit.sql, (case.id, physical, unit.sql)
    if case.sql_of_first is not None:
        assert " ".join(plan.units[0].sql.split()) == case.sql_of_first
    if len(plan.units) == 1:
        assert plan.kind is RouteKind.SINGLE, case.id


@pytest.mark.parametrize("case", [c for c in CASES if c.error is not None and c.sql.lstrip().upper().startswith(
    ("SELECT", "(SELECT", "WITH"))], ids=lambda c: c.id)
def test_refused_selects_run_across_nodes(router: Router, cross_router: Router, case: Case) -> None:
    """A SELECT refused because its rows need not share a node is cut into parts instead; the plan
    keeps the proof's reason. Refusals for other reasons stay refusals."""
    with pytest.raises(UnsupportedSQLError) as info:
        router.route(case.sql, case.params)
    if not getattr(info.value, "across_nodes", False):
        with pytest.raises(UnsupportedSQLError):
            cross_router.route(case.sql, case.params)
        return
    plan = cross_router.route(case.sql, case.params)
    assert plan.kind is RouteKind.CROSS_NODE and not plan.units, case.id
    assert plan.cross_node.statement.reason in str(info.value)
    cross = plan.cross_node
    copied = [k for k in range(len(cross.statement.parts)) if k != cross.driver]
    assert copied and sorted(cross.order) == copied  # every part but a broadcast copy's driver is read
    for unit in cross.final.units:  # the statement runs where the copies are, and names every copy
        assert unit.data_source in cross.targets
        assert all(f"ddm_x{k}" in unit.sql for k in copied), unit.sql
    if cross.driver is None:
        assert [u.data_source for u in cross.final.units] == [cross.statement.gather]


def test_refusal_names_the_missing_condition(router: Router) -> None:
    """The message names both tables as written and the equality that would make the join provable."""
    with pytest.raises(UnsupportedSQLError) as info:
        router.route("SELECT * FROM t_order o JOIN t_order_item i ON o.k = i.k WHERE o.user_id = 1")
    message = str(info.value)
    assert "join of t_order o and t_order_item i does not prove their rows share a node" in message
    assert "add o.user_id = i.user_id" in message
    assert info.value.context["tables"] == ("t_order", "t_order_item")  # type: ignore[attr-defined]


def test_one_cached_statement_routes_or_refuses_by_its_values(router: Router) -> None:
    """Whether both sides are pinned to one data source is decided per call, on the bound values."""
    sql = "SELECT * FROM t_order o JOIN t_account a ON o.k = a.k WHERE o.user_id = %s AND a.account_id = %s"
    for user, account in [(1, 3), (1, 2), (4, 6), (4, 7), (1, 3)]:
        if node_of("t_order", user)[0] == node_of("t_account", account)[0]:
            plan = router.route(sql, [user, account])
            assert [(u.data_source, dict(u.tables)) for u in plan.units] == [at(t_order=user, t_account=account)]
        else:
            with pytest.raises(UnsupportedSQLError, match="not bound"):
                router.route(sql, [user, account])


def test_proven_binding_join_keeps_the_fast_path(router: Router) -> None:
    """A binding join on the shard key with a point condition routes like one table: the fast path takes it."""
    sql = "SELECT * FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id WHERE o.user_id = %s"
    assert router.compile(sql).fast_path is not None  # type: ignore[attr-defined]
    plan = router.route(sql, [6])
    assert [(u.data_source, dict(u.tables)) for u in plan.units] == [at(t_order=6, t_order_item=6)]
    # A self-join pinned twice is placed side by side: no fast path, and still one unit.
    pinned = "SELECT * FROM t_order a JOIN t_order b ON a.k = b.k WHERE a.user_id = %s AND b.user_id = %s"
    assert router.compile(pinned).fast_path is None  # type: ignore[attr-defined]
    assert [(u.data_source, dict(u.tables)) for u in router.route(pinned, [2, 6]).units] == [at(t_order=2)]


# -- the property: a routed join returns the unsharded join's rows ----------------------------------

#: Each table's shard (or stand-in) column; every table has ``id, <key>, k, v``.
KEY = {"t_order": "user_id", "t_order_item": "user_id", "t_account": "account_id", "t_local": "user_id",
       "t_one": "user_id", "t_cfg": "user_id", "t_dict": "user_id"}
TABLES = tuple(KEY)
PAIRS = (
    ("t_order", "t_order"), ("t_order", "t_order_item"), ("t_order_item", "t_order"),
    ("t_order", "t_dict"), ("t_dict", "t_order"), ("t_order", "t_cfg"), ("t_cfg", "t_order"),
    ("t_order", "t_account"), ("t_order", "t_one"), ("t_one", "t_order"), ("t_local", "t_one"),
)
BINDING_KEYS = {frozenset({"t_order"}), frozenset({"t_order", "t_order_item"})}


def _ddl(table: str) -> str:
    return f"CREATE TABLE {table} (id BIGINT NOT NULL PRIMARY KEY, {KEY[table]} BIGINT NOT NULL, k INT NULL, v INT NULL)"


@dataclass
class JoinQuery:
    query: Query
    must_route: bool  # the conditions prove co-location in a way any correct router sees


@st.composite
def join_queries(draw: Callable[..., Any]) -> JoinQuery:
    left, right = draw(st.sampled_from(PAIRS))
    ka, kb = KEY[left], KEY[right]
    params: list[Any] = []

    def val(v: int) -> str:
        if draw(st.booleans()):
            params.append(v)
            return "%s"
        return str(v)

    on_key = draw(st.booleans())
    terms = []
    if on_key:
        terms.append(f"a.{ka} = b.{kb}")
    terms += draw(st.lists(st.sampled_from(["a.k = b.k", "a.v = b.v", "a.k = b.v"]), max_size=2, unique=True))
    if not terms:
        terms.append("a.k = b.k")
    side = draw(st.sampled_from(["", "LEFT ", "RIGHT "]))
    if draw(st.integers(0, 3)) == 0:  # a condition on the joined side in the ON (an outer join keeps the rest)
        terms.append(f"b.{kb} = {val(draw(st.integers(0, 7)))}")
    where = []
    for alias, key in (("a", ka), ("b", kb)):
        kind = draw(st.sampled_from(["none", "eq", "in", "range", "value", "null"]))
        if kind == "eq":
            where.append(f"{alias}.{key} = {val(draw(st.integers(0, 7)))}")
        elif kind == "in":
            values = draw(st.lists(st.integers(0, 7), min_size=1, max_size=3))
            where.append(f"{alias}.{key} IN ({', '.join(val(v) for v in values)})")
        elif kind == "range":
            where.append(f"{alias}.{key} >= {val(draw(st.integers(0, 7)))}")
        elif kind == "value":
            where.append(f"{alias}.v > {val(draw(st.integers(0, 3)))}")
        elif kind == "null":
            where.append(f"{alias}.k IS NULL")
    subquery = draw(st.integers(0, 3)) == 0
    if subquery:  # correlated on the shard key (follows the outer row), on another column, or pinned
        x = draw(st.sampled_from([alias for alias, t in (("a", left), ("b", right)) if KEY[t] == "user_id"] or ["a"]))
        form = draw(st.integers(0, 5))
        if form == 0:
            where.append(f"EXISTS (SELECT 1 FROM t_order_item s WHERE s.user_id = {x}.user_id AND s.k = "
                         f"{val(draw(st.integers(0, 2)))})")
        elif form == 1:
            where.append(f"NOT EXISTS (SELECT 1 FROM t_order_item s WHERE s.user_id = {x}.user_id)")
        elif form == 2:
            where.append(f"{x}.user_id IN (SELECT s.user_id FROM t_order_item s WHERE s.v > {val(draw(st.integers(0, 3)))})")
        elif form == 3:
            where.append(f"{x}.k IN (SELECT s.k FROM t_order_item s WHERE s.user_id = {val(draw(st.integers(0, 7)))})")
        elif form == 4:
            where.append(f"{x}.k IN (SELECT s.k FROM t_order_item s)")
        else:
            where.append(f"EXISTS (SELECT 1 FROM t_order s WHERE s.k = {x}.k AND s.user_id = {val(draw(st.integers(0, 7)))})")
    columns = ", ".join(f"{x}.{c}" for x, t in (("a", left), ("b", right)) for c in ("id", KEY[t], "k", "v"))
    sql = f"SELECT {columns} FROM {left} a {side}JOIN {right} b ON {' AND '.join(terms)}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    pair = frozenset({left, right})
    # Proven by the join alone: bound tables (or one table) equated on the shard key, or a broadcast
    # table the sharded side keeps (inner join, or the sharded side preserved). A subquery may be refused.
    must = not subquery and ((pair in BINDING_KEYS and on_key) or (
        "t_dict" in pair and (side == "" or (side == "LEFT " and left != "t_dict") or (side == "RIGHT " and right != "t_dict"))
    ))
    return JoinQuery(Query(sql, params, "multiset"), must)


@st.composite
def table_rows(draw: Callable[..., Any]) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for table in TABLES:
        rows = draw(st.lists(st.fixed_dictionaries({
            "id": st.integers(1, 10**9),
            KEY[table]: st.integers(0, 7),
            "k": st.one_of(st.none(), st.integers(0, 2)),
            "v": st.one_of(st.none(), st.integers(0, 3)),
        }), max_size=8, unique_by=lambda r: r["id"]))
        out[table] = rows
    return out


def _refill(backend: Backend, rows: dict[str, list[dict[str, Any]]]) -> None:
    for table in TABLES:
        backend.executor.execute(f"DELETE FROM {table}").close()
        backend.ref_many(f"DELETE FROM {table}", [()])
        columns = ("id", KEY[table], "k", "v")
        if table == "t_dict":  # a broadcast INSERT counts every copy: loaded without the per-row count check
            marks = ", ".join([backend.placeholder] * len(columns))
            sql = f"INSERT INTO t_dict ({', '.join(columns)}) VALUES ({marks})"
            for row in rows[table]:
                backend.executor.execute(sql, [row[c] for c in columns]).close()
            if rows[table]:
                backend.ref_many(sql, [[r[c] for c in columns] for r in rows[table]])
        else:
            backend.load(table, columns, rows[table])


#: How the fuzzed queries went (plan kind, or refused and why): printed at the end of the module.
OUTCOMES: Counter[str] = Counter()


def _run(backend: Backend, rows: dict[str, list[dict[str, Any]]], queries: list[JoinQuery], streams: list[Any]) -> None:
    """Each query returns the unsharded join's rows (``check``), or is refused — never when it is provable."""
    _refill(backend, rows)
    for jq, stream in zip(queries, streams):
        try:
            plan = backend.executor.router.route(jq.query.sql, jq.query.params)
            kind = f"cross-node: {plan.cross_node.strategy}" if plan.cross_node is not None else plan.kind.value
            check(backend, jq.query, stream)
        except (UnsupportedSQLError, FullRouteError) as err:
            assert not jq.must_route, f"{backend.name}: refused a provable join: {jq.query.sql} {jq.query.params}: {err}"
            OUTCOMES[f"refused: {getattr(err, 'construct', None) or type(err).__name__}"] += 1
            if os.environ.get("DDM_SHOW_REFUSED"):
                print("REFUSED", jq.query.sql, err)
            continue
        OUTCOMES[kind] += 1
        event(f"plan: {kind}")


def _create(backend: Backend, raw_ref: Callable[[str], None]) -> None:
    for table in TABLES:
        backend.executor.execute(_ddl(table)).close()
        raw_ref(_ddl(table))


@pytest.fixture(scope="module")
def sqlite_joins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    base = tmp_path_factory.mktemp("joins")
    urls = {ds: f"sqlite:///{base / f'{ds}.db'}" for ds in SOURCES}
    executor = Executor(load_config(join_config(urls)), timeout=20.0)
    backend = SQLiteBackend(executor, base / "ref.db")
    try:
        _create(backend, lambda sql: backend.conn.execute(sql))  # type: ignore[attr-defined]
        yield backend
        assert_no_leaks(executor)
    finally:
        executor.close()
        backend.conn.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def mariadb_joins() -> Iterator[Backend]:
    with mariadb_oracle("ddm_joins", SOURCES, join_config) as backend:
        _create(backend, reference_runner(backend))
        yield backend


#: ``DDM_JOIN_EXAMPLES=2000`` for a long hunt; MariaDB runs a fifth of them.
EXAMPLES = int(os.environ.get("DDM_JOIN_EXAMPLES", "150"))
PROPERTY = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(max_examples=EXAMPLES, **PROPERTY)  # type: ignore[arg-type]
@given(rows=table_rows(), queries=st.lists(join_queries(), min_size=1, max_size=5),
       streams=st.lists(st.sampled_from([None, True, False]), min_size=5, max_size=5))
def test_sqlite_joins_equal_unsharded(sqlite_joins: Backend, rows: dict[str, list[dict[str, Any]]],
                                      queries: list[JoinQuery], streams: list[Any]) -> None:
    _run(sqlite_joins, rows, queries, streams)


@settings(max_examples=max(10, EXAMPLES // 5), **PROPERTY)  # type: ignore[arg-type]
@given(rows=table_rows(), queries=st.lists(join_queries(), min_size=1, max_size=5),
       streams=st.lists(st.sampled_from([None, True, False]), min_size=5, max_size=5))
def test_mariadb_joins_equal_unsharded(mariadb_joins: Backend, rows: dict[str, list[dict[str, Any]]],
                                       queries: list[JoinQuery], streams: list[Any]) -> None:
    _run(mariadb_joins, rows, queries, streams)


@pytest.mark.parametrize("sql", [
    # the two shapes the fuzz found, on data where the pairs sit on different nodes
    "SELECT a.id, b.id FROM t_order a JOIN t_order b ON a.k = b.k WHERE a.user_id >= 1 AND b.user_id >= 0",
    "SELECT o.id, i.id FROM t_order o JOIN t_order_item i ON o.v = i.v",
])
def test_fuzz_shapes_are_answered_in_full(sqlite_joins: Backend, sql: str) -> None:
    rows = {t: [] for t in TABLES}
    rows["t_order"] = [{"id": 1, "user_id": 1, "k": 1, "v": 1}, {"id": 2, "user_id": 2, "k": 1, "v": 1}]
    rows["t_order_item"] = [{"id": 3, "user_id": 3, "k": 1, "v": 1}]
    _refill(sqlite_joins, rows)
    _, want = sqlite_joins.ref(sql, [])
    assert want, "the unsharded join has rows that pair different nodes"
    _, got = sqlite_joins.ddm(sql, [], None)
    assert sorted(got) == sorted(want)


@pytest.mark.parametrize(("name", "sql", "fragments"), [
    # The fuzz's self-join, on a range-capable algorithm (MOD databases, boundary-range tables).
    ("R", "SELECT * FROM t_log a JOIN t_log b ON a.status = b.status WHERE a.user_id >= 289 AND b.user_id >= 99",
     ("join of t_log a and t_log b", "add a.user_id = b.user_id")),
    # Binding tables joined on their order id only: the item's node follows its own user_id.
    ("N", "SELECT * FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.user_id = 10086",
     ("join of t_order o and t_order_item i", "add o.user_id = i.user_id")),
    ("N", "SELECT * FROM t_order o JOIN t_order_item i ON o.status = i.status WHERE o.user_id = 1 AND i.user_id = 3",
     ("t_order o", "t_order_item i")),
])
def test_suite_configs_refuse_the_fuzz_shapes(name: str, sql: str, fragments: tuple[str, ...]) -> None:
    """The router suite's configurations, with full routes allowed (else the unpinned side is refused as one)."""
    from dataclasses import replace

    from router_cases import config

    cfg = config(name)
    with pytest.raises(UnsupportedSQLError) as info:
        Router(replace(cfg, runtime=replace(cfg.runtime, allow_full_route=True, cross_node_queries=False))).route(sql)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_outcomes_report() -> None:
    """How the fuzzed joins went (run after the properties; ``-s`` prints it): the refused ones ran."""
    if OUTCOMES:
        print("\njoin fuzz outcomes:", dict(sorted(OUTCOMES.items())))
        assert sum(n for kind, n in OUTCOMES.items() if kind.startswith("cross-node")) > 0
