"""The compiled point path (``_fast/point``) routes exactly as the general router does, or leaves the call to it.

``Router.route`` answers a cached point statement with one compiled call
(``route/query/point_path.py``). Every test runs over both twins (the compiled
``point`` unit and ``point_py``): random configurations — each built-in
algorithm at the database and table level, a binding table, a broadcast table,
integer shard columns known from a schema — and random values (integers of
any sign and size, big ones as Decimal and text, strings, None, bytes, dates,
bools, floats) must give the same plan (units with SQL text and parameters,
parameter types, tables and reasons) or the same error as a router whose
compiled path is switched off.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddm_core._fast import Implementation
from ddm_core.metadata import load_config
from ddm_core.route import Router, hint
from ddm_core.route import router as router_module
from ddm_core.route.query import point_path as point_path_module
from ddm_core.route.table_schema import TableSchema

ALGORITHMS: dict[str, Any] = {
    "MOD": {"algorithm": "MOD", "props": {"sharding-count": 4}},
    "HASH_MOD": {"algorithm": "HASH_MOD", "props": {"sharding-count": 4}},
    "HASH_MOD str": {"algorithm": "HASH_MOD", "props": {"sharding-count": 4, "key-type": "str"}},
    "SLOTS": {"algorithm": "SLOTS", "props": {"slot-bits": 6}},
    "INLINE": {"algorithm": "INLINE", "props": {"algorithm-expression": "{prefix}${{k % 8 / 2}}"}},
    "INLINE floorMod": {"algorithm": "INLINE", "props": {"algorithm-expression": "{prefix}${{Math.floorMod(k, 4)}}"}},
    "INLINE not periodic": {"algorithm": "INLINE", "props": {"algorithm-expression": "{prefix}${{k.abs() % 4}}"}},
    "CONSISTENT_HASH": {"algorithm": "CONSISTENT_HASH", "props": {"virtual-nodes": 20}},
}
LEVELS = [None, *ALGORITHMS]

BIG = 2**64 + 5
VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 7, 2**31, 2**63 - 1, 2**63, -(2**63), BIG]),
    st.integers(min_value=2**63, max_value=2**80).flatmap(lambda n: st.sampled_from([Decimal(n), str(n)])),
    st.text(max_size=8),
    st.sampled_from(["abc", "ABC", "abc ", " 42", "42", "0042", "-7", "Straße", "STRASSE", "ß", "é", "e\u0301"]),
    st.none(),
    st.binary(max_size=6),
    st.dates(min_value=dt.date(2000, 1, 1), max_value=dt.date(2030, 1, 1)),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.decimals(allow_nan=False, allow_infinity=False, places=2),
)

STATEMENTS = [
    ("SELECT id, status FROM t_fp WHERE k = %s", "format"),
    ("SELECT id FROM t_fp WHERE k = ? AND status = ? ORDER BY id LIMIT 5", "qmark"),
    ("SELECT id FROM t_fp WHERE status = %(s)s AND k = %(k)s", "pyformat"),
    ("SELECT f.id, i.note FROM t_fp f JOIN t_fp_item i ON f.k = i.k WHERE f.k = %s", "format"),
    ("SELECT f.id, d.name FROM t_fp f JOIN t_dict d ON d.id = f.status WHERE f.k = %s", "format"),
    ("UPDATE t_fp SET status = %s WHERE k = %s", "format"),
    ("DELETE FROM t_fp WHERE k = %s", "format"),
    ("SELECT id FROM t_fp WHERE k = %s FOR UPDATE", "format"),
]


def _params(sql: str, style: str, value: Any) -> Any:
    if style == "pyformat":
        return {"s": "paid", "k": value, "unused": 1}
    if sql.startswith("UPDATE"):
        return ["paid", value]
    if style == "qmark":
        return (value, "paid")
    return (value,)


def _strategy(name: str | None, prefix: str) -> dict[str, Any]:
    if name is None:
        return {"kind": "none"}
    spec = ALGORITHMS[name]
    props = dict(spec["props"])
    if "algorithm-expression" in props:
        props["algorithm-expression"] = props["algorithm-expression"].format(prefix=prefix)
    return {"kind": "standard", "columns": "k", "algorithm": spec["algorithm"], "props": props}


def _config(db: str | None, tb: str | None) -> Any:
    sources = 1 if db is None else 4
    nodes = f"ds_${{0..{sources - 1}}}.TABLE" + ("_${0..3}" if tb is not None else "")
    tables = []
    for table in ("t_fp", "t_fp_item"):
        tables.append({
            "logicTable": table,
            "dataNodes": nodes.replace("TABLE", table),
            "databaseStrategy": _strategy(db, "ds_"),
            "tableStrategy": _strategy(tb, f"{table}_"),
        })
    return load_config({
        "name": "point-path",
        "dataSources": {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/pp_{i}", "username": "u"} for i in range(sources)},
        "tables": tables,
        "bindingTables": [["t_fp", "t_fp_item"]],
        "broadcastTables": ["t_dict"],
    })


@pytest.fixture
def twin(impl: Implementation, monkeypatch: pytest.MonkeyPatch) -> Iterator[Implementation]:
    """Routers built meanwhile use ``impl``'s ``point`` unit."""
    monkeypatch.setattr(point_path_module, "PointPath", impl.point.PointPath)
    monkeypatch.setattr(router_module, "PointFront", impl.point.PointFront)
    yield impl


def _general(config: Any, schemas: dict[str, TableSchema]) -> Router:
    """A router whose compiled path never answers: the general router's plans."""
    router = Router(config)
    router.set_schemas(schemas)
    router.point_route = lambda sql, params: None
    return router


def _outcome(router: Router, sql: str, params: Any) -> Any:
    try:
        plan = router.route(sql, params)
    except Exception as exc:  # noqa: BLE001 - compared: the same error both ways
        return ("error", type(exc), str(exc))
    types = [[type(p) for p in unit.params] for unit in plan.units]
    return ("plan", tuple(plan), types)


def _schemas(integer: bool) -> dict[str, TableSchema]:
    if not integer:
        return {}
    return {t: TableSchema.of(t, [("id", "bigint"), ("k", "bigint"), ("status", "varchar(8)")])
            for t in ("t_fp", "t_fp_item")}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    db=st.sampled_from(LEVELS),
    tb=st.sampled_from(LEVELS),
    statement=st.sampled_from(STATEMENTS),
    integer=st.booleans(),
    values=st.lists(VALUES, min_size=1, max_size=12),
)
def test_compiled_path_routes_as_the_general_router(
    twin: Implementation, db: str | None, tb: str | None, statement: tuple[str, str], integer: bool, values: list[Any]
) -> None:
    config = _config(db, tb)
    schemas = _schemas(integer)
    router = Router(config)
    router.set_schemas(schemas)
    reference = _general(config, schemas)
    sql, style = statement
    for value in [*values, *values]:  # each value twice: the first fills its node's parts
        params = _params(sql, style, value)
        expected = _outcome(reference, sql, params)
        assert _outcome(router, sql, params) == expected, (db, tb, sql, value)
        with hint(force_primary=False):  # a hint: the compiled path steps aside, the route stays
            hinted = _outcome(router, sql, params)
        assert hinted[0] == expected[0] and (hinted[0] == "error" or hinted[1][0] == expected[1][0]), value


@pytest.mark.parametrize("db, tb", [("SLOTS", "HASH_MOD"), ("MOD", "INLINE"), (None, "INLINE floorMod"),
                                    ("HASH_MOD", None), ("CONSISTENT_HASH", "MOD")])
@pytest.mark.parametrize("sql, style", STATEMENTS, ids=[s[:24] for s, _ in STATEMENTS])
def test_the_compiled_path_answers_repeated_point_statements(
    twin: Implementation, db: str | None, tb: str | None, sql: str, style: str
) -> None:
    router = Router(_config(db, tb))
    reference = _general(_config(db, tb), {})
    keys = [*range(-20, 40), 2**63 + 9, 2**70, -(2**65)]
    for key in [*keys, *keys]:
        params = _params(sql, style, key)
        assert _outcome(router, sql, params) == _outcome(reference, sql, params), key
    # Every key's second route, and more, came from the compiled path (nothing was left to the general one).
    assert router._front.hits >= len(keys), router._front.hits
    assert router.cache_info().hits >= 2 * len(keys) - 1
    assert router.cache_info().fast_path_misses == 0


def test_what_the_compiled_path_leaves_to_the_general_router(twin: Implementation) -> None:
    config = _config("SLOTS", "MOD")
    router = Router(config)
    router.set_schemas(_schemas(True))
    sql = "SELECT id FROM t_fp WHERE k = %s"
    for _ in range(3):
        router.route(sql, (5,))
    hits = router._front.hits
    assert hits == 2
    router.route(sql, ("5",))  # a string for an integer column: the general path reads it as 5
    router.route(sql, [5, 6][:1])
    assert router._front.hits == hits + 1  # the list was answered, the string was not
    with hint(force_primary=True):
        assert router.route(sql, (5,)).force_primary
    router.route(sql, range(5, 6))  # a sequence the compiled path does not read
    assert router._front.hits == hits + 1
    with pytest.raises(Exception, match="parameter"):
        router.route(sql, (5, 6))  # the general path's error, not a guess
    literal = "SELECT id FROM t_fp WHERE k = 5"  # no params: the general path (the text is read as sent)
    assert router.route(literal).units[0].data_source == router.route(sql, (5,)).units[0].data_source
    assert router._front.hits == hits + 2


def test_a_new_configuration_version_is_never_answered_from_the_old_one(twin: Implementation) -> None:
    router = Router(_config("MOD", "MOD"))
    sql = "SELECT id FROM t_fp WHERE k = %s"
    for _ in range(3):
        router.route(sql, (6,))
    before = router.route(sql, (6,))
    hits = router.cache_info().hits
    router.use_config(_config("HASH_MOD", "MOD"))
    after = router.route(sql, (6,))
    assert after == Router(_config("HASH_MOD", "MOD")).route(sql, (6,))
    assert before.units[0].data_source == "ds_2" and router.cache_info().hits >= hits  # hits carried over
