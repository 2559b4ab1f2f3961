"""Router properties (hypothesis): random configs and random conditions against brute force.

For a random native config (1–4 databases × 1–4 tables, each level sharded by MOD,
HASH_MOD, SLOTS, BOUNDARY_RANGE or VOLUME_RANGE over column ``a`` or ``b``) and a random
WHERE built from ``=``, ``IN``, ``BETWEEN``, ``<``/``<=``/``>``/``>=``, AND, OR, NOT and a
condition on a non-shard column:

* the routed nodes are a **superset** of the nodes holding matching rows, found by
  evaluating the condition on every row of a small universe and placing each row with
  the algorithms' documented formulas (computed here, not by the router);
* for precise conditions (only ``=`` / ``IN`` on every shard column in every OR branch)
  they are **equal** to them;
* a lone range on a range-capable algorithm (MOD narrower than its count,
  BOUNDARY_RANGE, VOLUME_RANGE) routes to exactly the shards the range's integers live on.

Also: the point fast path and the general path agree, and INSERT's batch row routing
agrees with the point route of each row.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Any, Callable

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ddm_core.hashing import hash64, slot_of
from ddm_core.metadata import load_config
from ddm_core.route import Router, hint

from router_cases import gene_id, n_node, router, s_node

DOMAIN = range(-10, 41)  # row values of a and b in the brute-force universe
OTHER = (0, 1)  # values of the non-shard column c
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- random configurations -----------------------------------------------------------------


@dataclass(frozen=True)
class Level:
    """One sharding level: ``count`` targets chosen by ``algorithm`` over ``column``."""

    count: int
    algorithm: str  # "" = not sharded (count 1)
    column: str
    props: tuple[tuple[str, Any], ...] = ()

    def index(self, value: int) -> int:
        """The target index of ``value`` — the documented formula of each algorithm."""
        p = dict(self.props)
        if not self.algorithm:
            return 0
        if self.algorithm == "MOD":
            return value % self.count  # floored modulo (ShardingSphere BigInteger.mod)
        if self.algorithm == "HASH_MOD":
            return hash64(value) % self.count
        if self.algorithm == "SLOTS":
            bits = p.get("slot-bits", 10)
            return slot_of(value, bits) * self.count // (1 << bits)  # even layout
        if self.algorithm == "BOUNDARY_RANGE":
            bounds = sorted(int(x) for x in p["sharding-ranges"].split(","))
            return bisect.bisect_right(bounds, value)
        if self.algorithm == "VOLUME_RANGE":
            lower, upper, volume = p["range-lower"], p["range-upper"], p["sharding-volume"]
            if value < lower:
                return 0
            if value >= upper:
                return 1 + -(-(upper - lower) // volume)
            return 1 + (value - lower) // volume
        raise AssertionError(self.algorithm)

    @property
    def narrows_ranges(self) -> bool:
        return self.algorithm in ("MOD", "BOUNDARY_RANGE", "VOLUME_RANGE")


@st.composite
def levels(draw: Any, column: str) -> Level:
    count = draw(st.integers(1, 4))
    choices = ["MOD", "HASH_MOD", "SLOTS"] + (["BOUNDARY_RANGE"] if count >= 2 else []) + (
        ["VOLUME_RANGE"] if count >= 3 else [])
    algorithm = draw(st.sampled_from(choices + ([""] if count == 1 else [])))
    props: dict[str, Any] = {}
    if algorithm == "SLOTS":
        props["slot-bits"] = draw(st.sampled_from([4, 10]))
    elif algorithm == "BOUNDARY_RANGE":
        bounds = draw(st.lists(st.integers(-5, 35), min_size=count - 1, max_size=count - 1, unique=True))
        props["sharding-ranges"] = ",".join(map(str, bounds))
    elif algorithm == "VOLUME_RANGE":
        lower = draw(st.integers(-5, 20))
        volume = draw(st.integers(1, 8))
        props.update({"range-lower": lower, "range-upper": lower + volume * (count - 2), "sharding-volume": volume})
    return Level(count, algorithm, column, tuple(sorted(props.items())))


@st.composite
def configs(draw: Any) -> tuple[Level, Level]:
    db = draw(levels("a"))
    tb = draw(levels(draw(st.sampled_from(["a", "b"]))))
    if tb.count == 1:  # one table per database is named t_h, without a number to pick
        tb = Level(1, "", tb.column)
    return db, tb


def build(db: Level, tb: Level) -> Router:
    sources = [f"ds_{i}" for i in range(db.count)]
    table: dict[str, Any] = {"logicTable": "t_h", "databases": sources, "tablePerShard": tb.count}
    if db.algorithm:
        table.update(shardKey=db.column, algorithm=db.algorithm, algorithmProps=dict(db.props))
    else:
        table["shardKey"] = db.column
    if tb.algorithm:
        table.update(tableKey=tb.column, tableAlgorithm=tb.algorithm, tableAlgorithmProps=dict(tb.props))
    doc = {
        "name": "hypothesis",
        "dataSources": {ds: {"url": f"mysql://127.0.0.1:3306/{ds}", "username": "u"} for ds in sources},
        "tables": [table],
        "runtime": {"allowFullRoute": True},
    }
    return Router(load_config(doc))


def physical(db: Level, tb: Level, a: int, b: int) -> tuple[str, str]:
    d = db.index(a if db.column == "a" else b)
    t = tb.index(a if tb.column == "a" else b)
    return f"ds_{d}", f"t_h_{d}_{t}" if tb.count > 1 else "t_h"


# -- random conditions ------------------------------------------------------------------------


@dataclass
class Cond:
    sql: str
    params: list[Any]
    test: Callable[[dict[str, int]], bool]
    precise: bool  # only = / IN on shard columns (AND-ed with anything): routes exactly


def _value(draw: Any, params: list[Any]) -> str:
    v = draw(st.sampled_from(list(DOMAIN)))
    if draw(st.booleans()):
        params.append(v)
        return "%s"
    return str(v)


@st.composite
def atoms(draw: Any, columns: tuple[str, ...], params: list[Any], precise_only: bool) -> Cond:
    col = draw(st.sampled_from(columns))
    kinds = ["eq", "in"] if precise_only else ["eq", "in", "between", "lt", "le", "gt", "ge", "other", "not", "neq"]
    kind = draw(st.sampled_from(kinds))
    mark = len(params)
    if kind == "eq":
        text = _value(draw, params)
        v = params[-1] if text == "%s" else int(text)
        if draw(st.booleans()):
            return Cond(f"{v if text != '%s' else text} = {col}", params, lambda r, c=col, v=v: r[c] == v, True)
        return Cond(f"{col} = {text}", params, lambda r, c=col, v=v: r[c] == v, True)
    if kind == "in":
        n = draw(st.integers(1, 4))
        texts = [_value(draw, params) for _ in range(n)]
        pit = iter(params[mark:])
        values = [next(pit) if t == "%s" else int(t) for t in texts]
        return Cond(f"{col} IN ({', '.join(texts)})", params, lambda r, c=col, vs=tuple(values): r[c] in vs, True)
    if kind == "between":
        lo_t, hi_t = _value(draw, params), _value(draw, params)
        pit = iter(params[mark:])
        lo = next(pit) if lo_t == "%s" else int(lo_t)
        hi = next(pit) if hi_t == "%s" else int(hi_t)
        return Cond(f"{col} BETWEEN {lo_t} AND {hi_t}", params, lambda r, c=col, lo=lo, hi=hi: lo <= r[c] <= hi, False)
    if kind in ("lt", "le", "gt", "ge"):
        text = _value(draw, params)
        v = params[-1] if text == "%s" else int(text)
        op = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}[kind]
        fn = {"lt": lambda x, y: x < y, "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}[kind]
        if draw(st.booleans()):  # written the other way round: v op' col
            flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
            return Cond(f"{text} {flipped} {col}", params, lambda r, c=col, v=v, fn=fn: fn(r[c], v), False)
        return Cond(f"{col} {op} {text}", params, lambda r, c=col, v=v, fn=fn: fn(r[c], v), False)
    if kind == "neq":
        text = _value(draw, params)
        v = params[-1] if text == "%s" else int(text)
        return Cond(f"{col} <> {text}", params, lambda r, c=col, v=v: r[c] != v, False)
    if kind == "not":
        inner = draw(atoms(columns, params, True))
        return Cond(f"NOT ({inner.sql})", params, lambda r, f=inner.test: not f(r), False)
    v = draw(st.sampled_from(OTHER))
    return Cond(f"c = {v}", params, lambda r, v=v: r["c"] == v, False)


@st.composite
def conditions(draw: Any, columns: tuple[str, ...], params: list[Any], depth: int, precise_only: bool) -> Cond:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(atoms(columns, params, precise_only))
    left = draw(conditions(columns, params, depth - 1, precise_only))
    right = draw(conditions(columns, params, depth - 1, precise_only))
    if draw(st.booleans()):
        return Cond(f"({left.sql} AND {right.sql})", params, lambda r, f=left.test, g=right.test: f(r) and g(r),
                    left.precise or right.precise)
    return Cond(f"({left.sql} OR {right.sql})", params, lambda r, f=left.test, g=right.test: f(r) or g(r),
                left.precise and right.precise)


def routed(r: Router, cond: Cond) -> set[tuple[str, str]]:
    plan = r.route(f"SELECT * FROM t_h WHERE {cond.sql}", list(cond.params))
    return {(u.data_source, t) for u in plan.units for _, t in u.tables}


def holding(db: Level, tb: Level, cond: Cond) -> set[tuple[str, str]]:
    """Brute force: the nodes of every universe row the condition matches."""
    out = set()
    b_values = DOMAIN if "b" in (db.column, tb.column) else (0,)
    for a, b, c in itertools.product(DOMAIN, b_values, OTHER):
        if cond.test({"a": a, "b": b, "c": c}):
            out.add(physical(db, tb, a, b))
    return out


def shard_columns(db: Level, tb: Level) -> tuple[str, ...]:
    return tuple(dict.fromkeys(lv.column for lv in (db, tb) if lv.algorithm)) or ("a",)


@SETTINGS
@given(data=st.data(), cfg=configs())
def test_targets_are_a_superset_of_matching_rows(data: Any, cfg: tuple[Level, Level]) -> None:
    db, tb = cfg
    params: list[Any] = []
    cond = data.draw(conditions(("a", "b"), params, 3, False))
    got = routed(build(db, tb), cond)
    want = holding(db, tb, cond)
    assert want <= got, (cond.sql, cond.params, sorted(want - got))


@SETTINGS
@given(data=st.data(), cfg=configs())
def test_precise_conditions_route_exactly(data: Any, cfg: tuple[Level, Level]) -> None:
    db, tb = cfg
    columns = shard_columns(db, tb)
    params: list[Any] = []
    # OR of branches, each AND-ing = / IN atoms on every shard column (plus maybe c = v)
    branches = []
    for _ in range(data.draw(st.integers(1, 3))):
        parts = [data.draw(atoms((col,), params, True)) for col in columns]
        if data.draw(st.booleans()):
            parts.append(data.draw(atoms((columns[0],), params, True)))
        if data.draw(st.booleans()):
            v = data.draw(st.sampled_from(OTHER))
            parts.append(Cond(f"c = {v}", params, lambda r, v=v: r["c"] == v, False))
        sql = " AND ".join(p.sql for p in parts)
        branches.append(Cond(f"({sql})", params, lambda r, ps=tuple(parts): all(p.test(r) for p in ps), True))
    cond = Cond(" OR ".join(b.sql for b in branches), params, lambda r, bs=tuple(branches): any(b.test(r) for b in bs), True)
    got = routed(build(db, tb), cond)
    want = holding(db, tb, cond)
    if want:
        assert got == want, (cond.sql, cond.params, sorted(got ^ want))
    else:  # nothing can match: one node still answers with the right columns
        assert len(got) == 1, (cond.sql, cond.params, got)


@SETTINGS
@given(data=st.data(), db=levels("a").filter(lambda lv: lv.narrows_ranges))
def test_ranges_narrow_to_the_shards_of_their_values(data: Any, db: Level) -> None:
    lo = data.draw(st.integers(-60, 160))
    hi = data.draw(st.integers(lo - 2, lo + 40))
    lo_closed, hi_closed = data.draw(st.booleans()), data.draw(st.booleans())
    sql = f"a {'>=' if lo_closed else '>'} {lo} AND a {'<=' if hi_closed else '<'} {hi}"
    values = range(lo if lo_closed else lo + 1, (hi + 1) if hi_closed else hi)
    want = {f"ds_{db.index(v)}" for v in values}
    plan = build(db, Level(1, "", "a")).route(f"SELECT * FROM t_h WHERE {sql}")
    got = {u.data_source for u in plan.units}
    if want:
        assert got == want, (db, sql, got, want)
    else:
        assert len(got) == 1


# -- differential: fast path vs general path, batch vs point -------------------------------------

keys = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-50, 5000), st.text(max_size=12))


@settings(max_examples=150, deadline=None)
@given(user=keys)
def test_point_fast_path_agrees_with_general_path(user: Any) -> None:
    """A hint (even one that changes nothing) takes the general path; both must agree."""
    r = router("N")
    sql = "SELECT * FROM t_order WHERE user_id = %s"
    assert r.compile(sql).fast_path is not None  # type: ignore[attr-defined]
    fast = r.route(sql, [user])
    assert r.cache_info().fast_path_misses == 0  # the fast path answered, not the general one behind it
    with hint(force_primary=True):
        general = r.route(sql, [user])
    assert fast.units == general.units and fast.kind == general.kind and fast.tables == general.tables
    node = n_node(user)
    assert [(u.data_source, u.tables) for u in fast.units] == [(node.ds, (("t_order", node.table("t_order")),))]


@settings(max_examples=60, deadline=None)
@given(users=st.lists(st.integers(0, 10**6), min_size=1, max_size=12))
def test_insert_batch_agrees_with_point_routes(users: list[int]) -> None:
    for name, node_of in (("N", n_node), ("S", s_node)):
        r = router(name)
        sql = "INSERT INTO t_order (order_id, user_id) VALUES " + ", ".join(["(%s, %s)"] * len(users))
        ids = [gene_id(i, u) if name == "N" else i for i, u in enumerate(users)]  # N: ids carry their gene
        plan = r.route(sql, [v for i, u in zip(ids, users) for v in (i, u)])
        placed = {}
        for unit in plan.units:
            (_, table), = unit.tables
            for i in unit.params[0::2]:
                placed[ids.index(i)] = (unit.data_source, table)
        for i, u in enumerate(users):
            point = r.route("SELECT * FROM t_order WHERE user_id = %s", [u]).units[0]
            assert placed[i] == (point.data_source, point.tables[0][1]) == (node_of(u).ds, node_of(u).table("t_order"))
