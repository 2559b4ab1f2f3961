"""Cross-node SELECTs answer exactly what one unsharded database answers (docs/cross-node-queries.md).

Schema (:func:`xnode_config`, two data sources): three sharded tables with
different layouts, so that no join between them is co-located —

* ``t_user`` by ``id``: data source ``ds_{id % 2}``, table ``t_user_{id % 4}``;
* ``t_order`` by ``user_id``: data source ``ds_{(user_id + 1) % 2}``, one table
  each (a user's orders never sit on the user's data source);
* ``t_item`` by ``order_id``: data source ``ds_{order_id % 2}``, table
  ``t_item_{order_id % 3}``;
* ``t_region``, a broadcast table.

Hypothesis draws small tables (NULLs, duplicates, strings that differ only in
case and trailing spaces, numbers stored as text next to integer and DECIMAL
columns) and SELECTs over them: INNER / LEFT (and some RIGHT) joins of two or
three tables on the shard keys, on strings (collations), on text against
integers and on DECIMAL against INT; conditions on either side, ORs across
sides, literals and parameters; ``IN`` / ``NOT IN`` / ``EXISTS`` / ``NOT
EXISTS`` subqueries over another sharded table, correlated or not (sometimes
shadowing the outer alias); scalar subqueries; GROUP BY with COUNT / SUM / MIN /
MAX / AVG; DISTINCT; ORDER BY a total order, by keys with ties, or none; LIMIT /
OFFSET. Each statement runs through the thread :class:`~ddm_core.execute.Executor`
(and some through ``ddm_core.connect``, in autocommit and inside a transaction)
and on one unsharded copy of the rows, on SQLite and on MariaDB
(``utf8mb4_general_ci``), compared with ``test_oracle.check`` (names, values,
Python types; strings by collation key on MariaDB). A refusal fails the test:
none of these statements is among docs/cross-node-queries.md's "What is not
covered yet". Shapes the oracle found wrong once are kept at the end as tests
of their own.
"""

from __future__ import annotations

import os
from collections import Counter
from decimal import Decimal
from typing import Any, Callable, Iterator, Sequence

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

import ddm_core
from ddm_core import load_config
from ddm_core.errors import UnsupportedSQLError
from ddm_core.execute import Executor
from ddm_core.route import RouteKind, RoutePlan, Router
from test_execute_support import assert_no_leaks
from test_oracle import (Backend, Builder, MariaDBBackend, Query, SQLiteBackend, _finish, check, mariadb_oracle,
                         reference_runner)

SOURCES = ("ds_0", "ds_1")


def xnode_config(urls: dict[str, Any], cross_node: bool = True) -> dict[str, Any]:
    """The module's configuration (see the module docstring)."""

    def inline(expr: str) -> dict[str, Any]:
        return {"type": "INLINE", "props": {"algorithm-expression": expr, "allow-range-query-with-inline-sharding": True}}

    def strategy(column: str, algorithm: str) -> dict[str, Any]:
        return {"kind": "standard", "columns": [column], "algorithm": algorithm}

    return {
        "dataSources": urls,
        "pool": {"maxSize": 8, "minIdle": 1, "acquireTimeoutMs": 3000},
        "algorithms": {
            "user_db": inline("ds_${id % 2}"), "user_tables": inline("t_user_${id % 4}"),
            "order_db": inline("ds_${(user_id + 1) % 2}"),
            "item_db": inline("ds_${order_id % 2}"), "item_tables": inline("t_item_${order_id % 3}"),
        },
        "tables": [
            {"logicTable": "t_user", "dataNodes": ["ds_0.t_user_0", "ds_0.t_user_2", "ds_1.t_user_1", "ds_1.t_user_3"],
             "databaseStrategy": strategy("id", "user_db"), "tableStrategy": strategy("id", "user_tables")},
            {"logicTable": "t_order", "dataNodes": ["ds_0.t_order", "ds_1.t_order"],
             "databaseStrategy": strategy("user_id", "order_db")},
            {"logicTable": "t_item", "dataNodes": [f"ds_{d}.t_item_{t}" for d in (0, 1) for t in (0, 1, 2)],
             "databaseStrategy": strategy("order_id", "item_db"), "tableStrategy": strategy("order_id", "item_tables")},
        ],
        "broadcastTables": ["t_region"],
        "defaultDataSource": "ds_0",
        "runtime": {"allowFullRoute": True, "allowDmlFullRoute": True, "fullRouteThreshold": 64,
                    "maxOffset": 100_000, "sqlComment": False, "crossNodeQueries": cross_node},
    }


def user_source(user_id: int) -> str:
    return f"ds_{user_id % 2}"


def order_source(user_id: int) -> str:
    """Where an order of ``user_id`` lives: never on that user's data source."""
    return f"ds_{(user_id + 1) % 2}"


# -- schema and data -------------------------------------------------------------------------------

COLUMNS = {
    "t_user": ("id", "name", "score", "tier"),
    "t_order": ("order_id", "user_id", "code", "ref", "qty", "amount"),
    "t_item": ("item_id", "order_id", "sku", "price"),
}
DDL = (
    "CREATE TABLE t_user (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(12) NULL, score DECIMAL(8,2) NULL, "
    "tier INT NULL)",
    "CREATE TABLE t_order (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, code VARCHAR(12) NULL, "
    "ref VARCHAR(8) NULL, qty INT NULL, amount DECIMAL(8,2) NULL)",
    "CREATE TABLE t_item (item_id BIGINT NOT NULL PRIMARY KEY, order_id BIGINT NOT NULL, sku INT NULL, "
    "price DECIMAL(8,2) NULL)",
    "CREATE TABLE t_region (region INT NOT NULL PRIMARY KEY, label VARCHAR(12) NOT NULL)",
)
REGIONS = ((0, "zero"), (1, "one"), (2, "Two "), (10, "ten"))

#: Equal under utf8mb4_general_ci in groups ('abc', 'ABC ', 'Abc'; 'b', 'B  '), all different on SQLite.
NAMES = ("abc", "ABC ", "Abc", "b", "B  ", "", "x")
#: Numbers as text: '1' = '1.0' = 1, ' 2' = 2, '1e1' = 10, 'x' = 0 when compared with a number on MariaDB.
REFS = ("1", "1.0", " 2", "x", "1e1", "2.5", "0", "", "10", "-0")
TIERS = (0, 1, 2, 10, -1)
SCORES = tuple(Decimal(s) for s in ("0.00", "1.00", "2.50", "2.00", "10.00", "-1.25"))
QTYS = (0, 1, 2, 3, 10, -1)
# Multiples of 0.25: SQLite stores DECIMAL as REAL, and such sums do not depend on the order of addition.
AMOUNTS = tuple(Decimal(s) for s in ("0.25", "1.50", "2.00", "9.75", "100.00"))
SKUS = (0, 1, 2, 10)


def _maybe(values: Sequence[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.sampled_from(values))


@st.composite
def table_rows(draw: Callable[..., Any], refs: Sequence[str] = REFS, max_rows: int = 8
               ) -> dict[str, list[dict[str, Any]]]:
    """A few rows per sharded table: keys that join and keys that do not, NULLs, equal-ish strings."""
    def rows(fields: dict[str, st.SearchStrategy[Any]], key: str) -> list[dict[str, Any]]:
        drawn: list[dict[str, Any]] = draw(st.lists(st.fixed_dictionaries(fields), max_size=max_rows,
                                                    unique_by=lambda r: r[key]))
        return drawn

    return {
        "t_user": rows({"id": st.integers(0, 11), "name": _maybe(NAMES), "score": _maybe(SCORES),
                        "tier": _maybe(TIERS)}, "id"),
        "t_order": rows({"order_id": st.integers(0, 15), "user_id": st.integers(0, 13), "code": _maybe(NAMES),
                         "ref": _maybe(refs), "qty": _maybe(QTYS), "amount": _maybe(AMOUNTS)}, "order_id"),
        "t_item": rows({"item_id": st.integers(0, 29), "order_id": st.integers(0, 17), "sku": _maybe(SKUS),
                        "price": _maybe(AMOUNTS)}, "item_id"),
    }


def _refill(backend: Backend, rows: dict[str, list[dict[str, Any]]]) -> None:
    """Replace every sharded table's rows, through ddm-core and in the reference."""
    for table, columns in COLUMNS.items():
        backend.executor.execute(f"DELETE FROM {table}").close()
        backend.ref_many(f"DELETE FROM {table}", [()])
        backend.load(table, columns, rows.get(table, []))


def _create(backend: Backend, raw_ref: Callable[[str], None]) -> None:
    for ddl in DDL:
        backend.executor.execute(ddl).close()
        raw_ref(ddl)
    insert = f"INSERT INTO t_region (region, label) VALUES ({backend.placeholder}, {backend.placeholder})"
    for row in REGIONS:  # a broadcast INSERT counts every copy: one row at a time, no count check
        backend.executor.execute(insert, list(row)).close()
    backend.ref_many(insert, REGIONS)


@pytest.fixture(scope="module")
def sqlite_xnode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    base = tmp_path_factory.mktemp("crossnode")
    urls = {ds: f"sqlite:///{base / f'{ds}.db'}" for ds in SOURCES}
    executor = Executor(load_config(xnode_config(urls)), timeout=20.0)
    backend = SQLiteBackend(executor, base / "ref.db")

    def raw(sql: str) -> None:
        backend.conn.execute(sql)

    try:
        _create(backend, raw)
        yield backend
        assert_no_leaks(executor)
    finally:
        executor.close()
        backend.conn.close()


@pytest.fixture(scope="module")
def mariadb_xnode() -> Iterator[MariaDBBackend]:
    with mariadb_oracle("ddm_xoracle", SOURCES, xnode_config) as backend:  # asserts no leak at the end
        _create(backend, reference_runner(backend))
        yield backend


class FacadeBackend(Backend):
    """The same executor and reference, queried through the DB-API facade (``ddm_core.connect``)."""

    def __init__(self, inner: Backend, autocommit: bool) -> None:
        super().__init__(inner.executor)
        self.inner = inner
        self.name = inner.name
        self.placeholder = inner.placeholder
        self.autocommit = autocommit
        self.runner = "dbapi, autocommit" if autocommit else "dbapi, in a transaction"

    def ref(self, sql: str, params: Sequence[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        return self.inner.ref(sql, params)

    def ddm(self, sql: str, params: Sequence[Any], stream: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
        conn = ddm_core.connect(executor=self.executor, autocommit=self.autocommit)
        try:
            cur = conn.cursor()
            cur.execute(sql, list(params))
            names = [d[0] for d in cur.description or ()]
            rows = [tuple(r) for r in cur.fetchall()]
            cur.close()
            if not self.autocommit:
                conn.commit()
        finally:
            conn.close()
        return names, rows


# -- statements ------------------------------------------------------------------------------------

TABLE = {"u": "t_user", "o": "t_order", "i": "t_item", "r": "t_region"}
LETTER = {t: a for a, t in TABLE.items()}
PK = {"u": "id", "o": "order_id", "i": "item_id", "r": "region"}
SHARD_KEY = {"u": "id", "o": "user_id", "i": "order_id"}
ALL_COLUMNS = {**{LETTER[t]: c for t, c in COLUMNS.items()}, "r": ("region", "label")}
#: Equalities between two sharded tables: shard keys, strings (collation), text vs INT, DECIMAL vs INT.
LINKS = (
    ("o", "user_id", "u", "id"), ("o", "code", "u", "name"), ("o", "ref", "u", "tier"), ("u", "score", "o", "qty"),
    ("i", "order_id", "o", "order_id"), ("i", "sku", "o", "qty"), ("i", "sku", "u", "tier"),
    ("i", "price", "u", "score"), ("o", "ref", "i", "sku"),
)


def _links(a: str, b: str) -> list[tuple[str, str, str, str]]:
    """The equalities between letters ``a`` and ``b`` (``a == b``: a column with itself)."""
    if a == b:
        return [(a, c, a, c) for c in ALL_COLUMNS[a][1:]]
    return [(x, cx, y, cy) for x, cx, y, cy in LINKS if {x, y} == {a, b}]


KEYS = tuple(range(14))
#: Conditions on one table: (column, operator, values to draw when not one the rows hold). Text against
#: numbers and numbers against text on purpose (MariaDB compares them as numbers).
ATOMS: dict[str, tuple[tuple[str, str, tuple[Any, ...]], ...]] = {
    "u": (("id", "=", KEYS), ("id", "IN", KEYS), ("id", ">=", KEYS), ("name", "=", NAMES), ("name", "IS NULL", ()),
          ("name", "IS NOT NULL", ()), ("tier", "=", TIERS + ("1.0", " 2", "x")), ("score", ">", SCORES),
          ("score", "<=", SCORES), ("tier", "IS NULL", ())),
    "o": (("user_id", "=", KEYS), ("user_id", "IN", KEYS), ("code", "=", NAMES), ("code", "IS NULL", ()),
          ("code", "IS NOT NULL", ()), ("ref", "=", REFS + (1, 2, 10)), ("qty", ">=", QTYS), ("amount", "<", AMOUNTS)),
    "i": (("order_id", "=", KEYS), ("order_id", "IN", KEYS), ("sku", "=", SKUS), ("sku", "IS NULL", ()),
          ("price", ">", AMOUNTS)),
    "r": (("label", "<>", tuple(label for _, label in REGIONS)),),
}


class Statement:
    """One generated SELECT under construction: its FROM, its qualifiers, its WHERE."""

    def __init__(self, draw: Callable[..., Any], backend: Backend, rows: dict[str, list[dict[str, Any]]]) -> None:
        self.draw = draw
        self.rows = rows
        self.b = Builder(draw, backend)
        self.letters: list[str] = []
        self.q: dict[str, str] = {}  # letter → qualifier (alias, or the table's name)
        self.subquery = False
        self.subqueries = 0
        #: columns out, conditions on one table, equalities between tables: the shape a client join answers
        self.plain = draw(st.integers(0, 3)) == 0

    def table(self, letter: str, aliased: bool) -> str:
        self.letters.append(letter)
        self.q[letter] = letter if aliased else TABLE[letter]
        return TABLE[letter] if not aliased else f"{TABLE[letter]} {letter}"

    def equality(self, link: tuple[str, str, str, str], qa: str, qb: str) -> str:
        _, cx, _, cy = link
        left, right = f"{qa}.{cx}", f"{qb}.{cy}"
        return f"{left} = {right}" if self.draw(st.booleans()) else f"{right} = {left}"

    def link(self, a: str, b: str, qa: str | None = None, qb: str | None = None) -> str:
        """An equality between letters ``a`` and ``b`` (qualified as ``qa`` / ``qb``)."""
        link = self.draw(st.sampled_from(_links(a, b)))
        qx = (qa or self.q[a]) if link[0] == a else (qb or self.q[b])
        qy = (qb or self.q[b]) if link[0] == a else (qa or self.q[a])
        return self.equality(link, qx, qy)

    # -- conditions on one table ------------------------------------------------------------

    def value(self, letter: str, column: str, fallback: Sequence[Any]) -> Any:
        """Mostly a value the drawn rows hold (so that conditions meet rows), else one of ``fallback``."""
        rows = self.rows.get(TABLE[letter], [])
        present = sorted({r[column] for r in rows if r.get(column) is not None}, key=repr)
        if present and self.draw(st.integers(0, 2)):
            return self.draw(st.sampled_from(present))
        return self.draw(st.sampled_from(fallback))

    def atom(self, letter: str, q: str | None = None) -> str:
        """A condition on one table (``q``: its qualifier when not the statement's)."""
        q = q or self.q[letter]
        column, op, values = self.draw(st.sampled_from(ATOMS[letter]))
        if not values:
            return f"{q}.{column} {op}"
        if op == "IN":
            n = self.draw(st.integers(1, 3))
            return f"{q}.{column} IN ({', '.join(self.b.val(self.value(letter, column, values)) for _ in range(n))})"
        return f"{q}.{column} {op} {self.b.val(self.value(letter, column, values))}"

    def condition(self) -> str:
        """A condition on one table, or an OR over two (which stays in the statement)."""
        if len(self.letters) > 1 and not self.plain and self.draw(st.integers(0, 4)) == 0:
            a, b = self.draw(st.lists(st.sampled_from(self.letters), min_size=2, max_size=2, unique=True))
            return f"({self.atom(a)} OR {self.atom(b)})"
        return self.atom(self.draw(st.sampled_from(self.letters)))

    # -- subqueries over another sharded table -----------------------------------------------

    def inner(self, outer: str) -> tuple[str, str, str]:
        """(letter, table reference, qualifier) of a subquery's table; its alias may shadow an outer one
        of the same table. (Two subqueries never share an alias over different tables: the parts' columns
        are then mixed up, see test_same_alias_in_two_subqueries.)"""
        letter = self.draw(st.sampled_from(["u", "o", "i"]))
        self.subqueries += 1
        alias = self.draw(st.sampled_from([f"s{self.subqueries}", letter]))
        return letter, f"{TABLE[letter]} {alias}", alias

    def subquery_condition(self) -> str:
        self.subquery = True
        d = self.draw
        outer = d(st.sampled_from([x for x in self.letters if x != "r"]))
        letter, ref, alias = self.inner(outer)
        form = d(st.sampled_from(["in", "not in", "exists", "not exists", "exists uncorrelated"]))
        if form in ("in", "not in"):
            x, cx, y, cy = d(st.sampled_from(_links(outer, letter)))
            if x != outer:
                cx, cy = cy, cx
            where = f" WHERE {self.atom(letter, alias)}" if d(st.booleans()) else ""
            return f"{self.q[outer]}.{cx} {form.upper()} (SELECT {alias}.{cy} FROM {ref}{where})"
        if form == "exists uncorrelated":
            return f"EXISTS (SELECT 1 FROM {ref} WHERE {self.atom(letter, alias)})"
        correlation = self.link(outer, letter, qb=alias) if outer != letter else self.equality(
            d(st.sampled_from(_links(outer, letter))), alias, self.q[outer])
        extra = f" AND {self.atom(letter, alias)}" if d(st.booleans()) else ""  # drawn in text order (params)
        return f"{form.upper()} (SELECT 1 FROM {ref} WHERE {correlation}{extra})"

    def scalar_item(self) -> str:
        """A correlated scalar subquery as a select item."""
        self.subquery = True
        outer = self.draw(st.sampled_from([x for x in self.letters if x != "r"]))
        letter, ref, alias = self.inner(outer)
        agg = self.draw(st.sampled_from(["COUNT(*)", f"MAX({alias}.{PK[letter]})"]))
        # Not on the shard key of the same table: that is co-located, and then refused (see
        # test_scalar_subquery_with_aggregate_per_node).
        unkeyed = [x for x in _links(outer, letter) if x[1] != SHARD_KEY[letter]]
        correlation = self.link(outer, letter, qb=alias) if outer != letter else self.equality(
            self.draw(st.sampled_from(unkeyed)), alias, self.q[outer])
        return f"(SELECT {agg} FROM {ref} WHERE {correlation}) AS sub"


def _from(s: Statement) -> tuple[str, list[str]]:
    """The FROM clause (two or three sharded tables joined, or one table) and WHERE terms it brings."""
    d = s.draw
    aliased = d(st.integers(0, 4)) > 0
    shape = d(st.sampled_from(["join2", "join2", "join3", "comma"] + ([] if s.plain else ["one"])))
    where: list[str] = []
    if shape == "one":
        sql = s.table(d(st.sampled_from(["u", "o", "i"])), aliased)
        where.append(s.subquery_condition())
        return sql, where
    order = d(st.permutations(["u", "o", "i"]))[: 3 if shape == "join3" else 2]
    sql = s.table(order[0], aliased)
    if shape == "comma":  # the equality sits in the WHERE
        sql += ", " + s.table(order[1], aliased)
        where.append(s.link(order[0], order[1]))
        return sql, where
    for letter in order[1:]:
        join = d(st.sampled_from(["JOIN", "JOIN", "LEFT JOIN", "LEFT JOIN", "RIGHT JOIN"]))
        other = d(st.sampled_from(s.letters))
        ref = s.table(letter, aliased)
        on = [s.link(other, letter)]
        extra = d(st.integers(0, 5))
        if extra == 0:
            on.append(s.link(other, letter))
        elif extra == 1:  # a condition on the joined table (an outer join's optional side: pushed into its part)
            on.append(s.atom(letter))
        elif extra == 2:  # a condition on a table already joined (stays in the ON)
            on.append(s.atom(other))
        sql += f" {join} {ref} ON {' AND '.join(on)}"
    if "u" in s.letters and d(st.integers(0, 4)) == 0:
        sql += f" {d(st.sampled_from(['JOIN', 'LEFT JOIN']))} {s.table('r', aliased)} ON {s.q['r']}.region = {s.q['u']}.tier"
    return sql, where


AGGREGATES = {
    "u": ("MIN({q}.score)", "MAX({q}.name)", "SUM({q}.tier)", "COUNT({q}.id)"),
    "o": ("SUM({q}.amount)", "SUM({q}.qty)", "MAX({q}.code)", "COUNT(DISTINCT {q}.user_id)", "AVG({q}.qty)",
          "MIN({q}.ref)"),
    "i": ("MAX({q}.price)", "COUNT({q}.item_id)", "SUM({q}.price)", "MIN({q}.sku)"),
    "r": ("MAX({q}.label)",),
}


def xnode_query(draw: Callable[..., Any], backend: Backend, rows: dict[str, list[dict[str, Any]]]) -> Query:
    s = Statement(draw, backend, rows)
    source, where = _from(s)
    if draw(st.integers(0, 2)) == 0:  # a point on a shard key: that part is read first, the others narrowed
        letter = draw(st.sampled_from([x for x in s.letters if x != "r"]))
        column = SHARD_KEY[letter]
        where.append(f"{s.q[letter]}.{column} = {s.b.val(s.value(letter, column, KEYS))}")
    for _ in range(draw(st.integers(0, 2))):
        where.append(s.condition())
    if draw(st.integers(0, 3)) == 0 and not s.subquery and not s.plain:
        where.append(s.subquery_condition())
    tail = f" FROM {source}" + (" WHERE " + " AND ".join(where) if where else "")
    columns = [f"{s.q[x]}.{c}" for x in s.letters for c in ALL_COLUMNS[x]]
    pks = [f"{s.q[x]}.{PK[x]}" for x in s.letters]  # unique together, outer joins' NULL rows included
    if s.plain:
        items = draw(st.lists(st.sampled_from(columns + [f"{s.q[x]}.*" for x in s.letters]), min_size=1, max_size=5,
                              unique=True))
        return Query(f"SELECT {', '.join(items)}" + tail, list(s.b.params), "multiset")
    kind = draw(st.sampled_from(["rows", "rows", "rows", "group", "group", "scalar", "distinct", "star"]))
    if kind in ("rows", "star"):
        if kind == "star":
            chosen = ["*"] if draw(st.booleans()) else [f"{s.q[s.letters[0]]}.*", pks[-1]]
        else:
            chosen = draw(st.lists(st.sampled_from(columns), min_size=1, max_size=5, unique=True))
            if draw(st.integers(0, 5)) == 0:
                chosen.append(s.scalar_item())
        head = f"SELECT {', '.join(chosen)}" + tail
        # unordered plain rows: the shape a client join answers (docs/cross-node-queries.md)
        how = draw(st.sampled_from(["total", "total", "runs", "none", "none", "none"])) if kind == "rows" else "total"
        if how == "total":
            keys = draw(st.lists(st.sampled_from(columns), max_size=2, unique=True))
            order = [(k, draw(st.booleans())) for k in keys] + [(k, draw(st.booleans())) for k in pks]
            return _finish(s.b, head, order, True, ())
        if how == "runs":
            plain = [c for c in chosen if c in columns]
            keys = draw(st.lists(st.sampled_from(plain), min_size=1, max_size=2, unique=True))
            return _finish(s.b, head, [(k, draw(st.booleans())) for k in keys], False,
                           tuple(chosen.index(k) for k in keys))
        return _finish(s.b, head, [], False, ())
    if kind == "distinct":
        chosen = draw(st.lists(st.sampled_from(columns), min_size=1, max_size=3, unique=True))
        return _finish(s.b, f"SELECT DISTINCT {', '.join(chosen)}" + tail, [], False, (), with_limit=False)
    aggregates = ["COUNT(*)"] + [a.format(q=s.q[x]) for x in s.letters for a in AGGREGATES[x]]
    aggs = draw(st.lists(st.sampled_from(aggregates), min_size=1, max_size=3, unique=True))
    items = [f"{a} AS a{n}" for n, a in enumerate(aggs)]
    if kind == "scalar":
        return Query(f"SELECT {', '.join(items)}" + tail, list(s.b.params), "total")
    keys = draw(st.lists(st.sampled_from([c for c in columns if c not in pks]), min_size=1, max_size=2, unique=True))
    head = f"SELECT {', '.join(keys + items)}" + tail + " GROUP BY " + ", ".join(keys)
    if draw(st.integers(0, 3)) == 0:
        head += f" HAVING COUNT(*) >= {s.b.val(draw(st.integers(1, 3)))}"
    how = draw(st.sampled_from(["none", "keys", "aggregate"]))
    if how == "none":
        return _finish(s.b, head, [], False, (), with_limit=False)
    order = [(f"a{draw(st.integers(0, len(aggs) - 1))}", draw(st.booleans()))] if how == "aggregate" else []
    return _finish(s.b, head, order + [(k, draw(st.booleans())) for k in keys], True, ())


# -- running and recording --------------------------------------------------------------------------

#: How the generated statements went (plan kind; for cross-node plans, the strategy): printed at the end.
OUTCOMES: Counter[str] = Counter()


def outcome(plan: RoutePlan) -> str:
    """``cross-node: <the plan's strategy>``, or the plan's kind."""
    if plan.kind is not RouteKind.CROSS_NODE:
        return str(plan.kind.value)
    cross = plan.cross_node
    rows = cross.explain()  # each part's read, then the statement over the copies
    assert len(rows) >= len(cross.order) + 1 and all(len(r) == 4 for r in rows), rows
    return f"cross-node: {cross.strategy}"


def run_checked(backend: Backend, query: Query, stream: Any, facade: str | None = None) -> str:
    """Route ``query`` (a refusal fails), check it against the reference, record how it went."""
    sql = query.text(backend.placeholder)
    try:
        plan = backend.executor.router.route(sql, query.params)
        label = outcome(plan)
        runner = backend if facade is None else FacadeBackend(backend, autocommit=facade == "autocommit")
        check(runner, query, stream)
    except Exception as exc:
        exc.add_note(f"{backend.name} ({facade or 'executor'}): {sql}\n  params: {query.params!r}")
        raise
    OUTCOMES[label] += 1
    if currently_in_test_context():  # a property test (the explicit ones count too, without events)
        event(f"plan: {label}")
    if facade is not None:
        OUTCOMES[f"via dbapi ({facade})"] += 1
    return label


def _run(backend: Backend, rows: dict[str, list[dict[str, Any]]], data: st.DataObject) -> None:
    _refill(backend, rows)
    for _ in range(3):
        query = xnode_query(data.draw, backend, rows)
        stream = data.draw(st.sampled_from([None, True, False]), label="stream")
        facade = data.draw(st.sampled_from([None, None, None, None, "autocommit", "transaction"]), label="facade")
        run_checked(backend, query, stream, facade)
    assert_no_leaks(backend.executor)  # every connection back in its pool, copies dropped with them


#: Examples per backend (three statements each); ``DDM_CROSSNODE_EXAMPLES=2000`` for a long hunt.
EXAMPLES = int(os.environ.get("DDM_CROSSNODE_EXAMPLES", "200"))
PROPERTY = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(max_examples=EXAMPLES, **PROPERTY)  # type: ignore[arg-type]
@given(rows=table_rows(REFS), data=st.data())
def test_sqlite_cross_node_equals_unsharded(sqlite_xnode: Backend, rows: dict[str, list[dict[str, Any]]],
                                            data: st.DataObject) -> None:
    _run(sqlite_xnode, rows, data)


@settings(max_examples=EXAMPLES, **PROPERTY)  # type: ignore[arg-type]
@given(rows=table_rows(), data=st.data())
def test_mariadb_cross_node_equals_unsharded(mariadb_xnode: Backend, rows: dict[str, list[dict[str, Any]]],
                                             data: st.DataObject) -> None:
    _run(mariadb_xnode, rows, data)


# -- MariaDB's comparison rules, across nodes ----------------------------------------------------------


def _explicit(backend: Backend, rows: dict[str, list[dict[str, Any]]], sql: str, params: Sequence[Any] = (),
              mode: str = "total") -> list[tuple[Any, ...]]:
    """Load ``rows``, check ``sql`` (which must be a cross-node plan) against the reference; the reference's rows."""
    _refill(backend, rows)
    label = run_checked(backend, Query(sql, list(params), mode), None)
    assert label.startswith("cross-node"), (label, sql)
    return backend.ref(sql, list(params))[1]


USERS: list[dict[str, Any]] = [  # users 1 (ds_1), 2 and 4 (ds_0), 3 (ds_1): an order of user k sits on the other data source than user k
    {"id": 1, "name": "abc", "score": Decimal("1.00"), "tier": 1},
    {"id": 2, "name": "B  ", "score": Decimal("2.50"), "tier": 2},
    {"id": 3, "name": None, "score": None, "tier": None},
    {"id": 4, "name": "zz", "score": Decimal("10.00"), "tier": 10},
]


def _order(order_id: int, user_id: int, code: str | None = None, ref: str | None = None, qty: int | None = None,
           amount: Decimal | None = None) -> dict[str, Any]:
    return {"order_id": order_id, "user_id": user_id, "code": code, "ref": ref, "qty": qty, "amount": amount}


#: Shapes of one join (the plan picks its strategy by them): SQL template, params, users kept, ordered.
VARIANTS: dict[str, tuple[str, list[Any], set[int] | None, bool]] = {
    "inner": ("SELECT u.id, o.order_id FROM t_user u JOIN t_order o ON {on}", [], None, False),
    "inner ordered": ("SELECT u.id, o.order_id FROM t_user u JOIN t_order o ON {on} ORDER BY u.id, o.order_id",
                      [], None, True),
    "users pinned": ("SELECT u.id, o.order_id FROM t_user u JOIN t_order o ON {on} WHERE u.id IN (%s, %s)",
                     [1, 2], {1, 2}, False),
    "orders left join": ("SELECT u.id, o.order_id FROM t_order o LEFT JOIN t_user u ON {on} WHERE u.id IS NOT NULL",
                         [], None, False),
    "comma ordered": ("SELECT u.id, o.order_id FROM t_user u, t_order o WHERE {on} ORDER BY o.order_id, u.id",
                      [], None, True),
}


def _join(backend: Backend, orders: list[dict[str, Any]], on: str, variant: str,
          expected: list[tuple[int, int]]) -> None:
    """``t_user u`` joined with ``t_order o`` ``on``: ddm-core returns the reference's pairs, which are
    ``expected`` (those of the kept users) and each span two data sources."""
    template, params, kept, ordered = VARIANTS[variant]
    sql = template.format(on=on)
    want = _explicit(backend, {"t_user": USERS, "t_order": orders}, sql, params, "total" if ordered else "multiset")
    assert sorted(want) == [p for p in expected if kept is None or p[0] in kept], (on, variant)
    user_of = {o["order_id"]: o["user_id"] for o in orders}
    assert all(order_source(user_of[o]) != user_source(u) for u, o in want), "pairs meant to span data sources"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_collation_and_trailing_spaces_join_across_nodes(mariadb_xnode: Backend, variant: str) -> None:
    """'abc' = 'ABC ' = 'Abc' and 'B  ' = 'b' under utf8mb4_general_ci; 'abd' and NULL match nothing."""
    orders = [_order(10, 3, code="ABC "), _order(11, 5, code="Abc"), _order(12, 6, code="abd"),
              _order(13, 0, code="b"), _order(14, 2, code=None)]
    _join(mariadb_xnode, orders, "o.code = u.name", variant, [(1, 10), (1, 11), (2, 13)])


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_numbers_compare_by_value_across_types(mariadb_xnode: Backend, variant: str) -> None:
    """1 = '1' = '1.0', 2 = ' 2', 10 = '1e1' (text against INT); 1.00 = 1, 10.00 = 10 (DECIMAL against INT)."""
    orders = [_order(20, 1, ref="1", qty=1), _order(21, 3, ref="1.0"), _order(22, 0, ref=" 2"),
              _order(23, 2, ref="1e1", qty=10), _order(24, 5, ref="x", qty=3)]
    _join(mariadb_xnode, orders, "o.ref = u.tier", variant, [(1, 20), (1, 21), (2, 22), (4, 23)])
    _join(mariadb_xnode, orders, "u.score = o.qty", variant, [(1, 20), (4, 23)])


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_null_keys_never_match(mariadb_xnode: Backend, variant: str) -> None:
    """User 3's NULL name / tier / score meet order 30's NULL code / ref / qty: no pair."""
    orders = [_order(30, 2, code=None, ref=None, qty=None), _order(31, 1, code="abc", ref="1", qty=1)]
    for on in ("o.code = u.name", "o.ref = u.tier", "u.score = o.qty", "o.code = u.name AND o.ref = u.tier"):
        _join(mariadb_xnode, orders, on, variant, [(1, 31)])


def test_left_join_fills_nulls(mariadb_xnode: Backend) -> None:
    """Users without a matching order keep one row, the order's columns NULL (the ON's condition included)."""
    orders = [_order(40, 1, qty=5, amount=Decimal("1.50")), _order(41, 1, qty=1), _order(42, 2, qty=7)]
    rows = {"t_user": USERS, "t_order": orders}
    sql = ("SELECT u.id, o.order_id, o.qty, o.amount FROM t_user u LEFT JOIN t_order o ON o.user_id = u.id "
           "AND o.qty > %s ORDER BY u.id, o.order_id")
    assert _explicit(mariadb_xnode, rows, sql, [2]) == [
        (1, 40, 5, Decimal("1.50")), (2, 42, 7, None), (3, None, None, None), (4, None, None, None)]
    grouped = ("SELECT u.id, COUNT(o.order_id) AS n, SUM(o.amount) AS s FROM t_user u LEFT JOIN t_order o "
               "ON o.user_id = u.id GROUP BY u.id ORDER BY u.id")
    assert _explicit(mariadb_xnode, rows, grouped) == [(1, 2, Decimal("1.50")), (2, 1, None), (3, 0, None),
                                                       (4, 0, None)]


def test_correlated_exists(mariadb_xnode: Backend) -> None:
    """EXISTS / NOT EXISTS correlated on a string (collation) and on the shard key, nested two deep."""
    orders = [_order(50, 1, code="ABC"), _order(51, 2, code="b "), _order(52, 4, code="y")]
    items: list[dict[str, Any]] = [{"item_id": 1, "order_id": 50, "sku": 1, "price": None}]
    rows = {"t_user": USERS, "t_order": orders, "t_item": items}
    exists = ("SELECT u.id FROM t_user u WHERE EXISTS (SELECT 1 FROM t_order o WHERE o.user_id = u.id "
              "AND o.code = u.name) ORDER BY u.id")
    assert _explicit(mariadb_xnode, rows, exists) == [(1,), (2,)]
    not_exists = exists.replace("WHERE EXISTS", "WHERE NOT EXISTS")
    assert _explicit(mariadb_xnode, rows, not_exists) == [(3,), (4,)]
    nested = ("SELECT u.id FROM t_user u WHERE EXISTS (SELECT 1 FROM t_order o WHERE o.user_id = u.id AND EXISTS "
              "(SELECT 1 FROM t_item i WHERE i.order_id = o.order_id AND i.sku = u.tier)) ORDER BY u.id")
    assert _explicit(mariadb_xnode, rows, nested) == [(1,)]


# -- shapes the oracle found wrong once (each now answered as one database would) --------------------------


def test_declared_types_and_type_codes_name_the_same_kinds() -> None:
    """What decides a copy's index: a column's kind from the table's declared type, or from the type code of
    the part as read, named alike for every MariaDB type family."""
    from ddm_core.dialects import dialect_for
    from ddm_core.route.table_schema import TableSchema, column_kind

    schema = TableSchema.of("t", [("a", "bigint(20) unsigned"), ("b", "varchar(12)"), ("c", "decimal(8,2)"),
                                  ("d", "double"), ("e", "datetime(3)"), ("f", "longblob"), ("g", "bit(8)"),
                                  ("h", "enum('x','y')"), ("i", "")])  # fmt: skip
    mysql = dialect_for("mysql")
    for column, code in (("a", 8), ("b", 253), ("c", 246), ("d", 5), ("e", 12), ("f", 252), ("g", 16), ("h", 254)):
        assert column_kind(schema, column) == mysql.key_kind(code) is not None, column
    assert column_kind(schema, "i") is None and column_kind(None, "a") is None and mysql.key_kind(None) is None


def test_a_text_key_finds_the_integer_it_equals_through_the_copies(mariadb_xnode: Backend) -> None:
    """``'1e1' = 10`` compares as numbers, but MariaDB looks a text value up in an integer column's index by
    converting it to an integer: an index on the copy of ``t_user.tier`` lost order 5's row. A copy is indexed
    only on join columns compared with columns of their own kind (both declared), so the statement over the
    copies compares as the unsharded table does; an integer pair keeps its index."""
    users = [{"id": i, "name": None, "score": None, "tier": None} for i in range(5)] + [
        {"id": 5, "name": None, "score": None, "tier": 10}]
    orders = [_order(o, 0) for o in (0, 1, 3, 4, 9, 12, 13)] + [_order(5, 0, ref="1e1")]
    rows = {"t_user": users, "t_order": orders, "t_item": []}
    sql = ("SELECT t_order.order_id, t_order.user_id, t_user.tier FROM t_order LEFT JOIN t_user "
           "ON t_order.ref = t_user.tier ORDER BY t_order.order_id")
    assert (5, 0, 10) in _explicit(mariadb_xnode, rows, sql)
    from ddm_core.crossnode.copy import _indexable

    router = mariadb_xnode.executor.router
    plan = router.route(sql).cross_node
    read = {0: {"ref": "string"}, 1: {"tier": "integer"}}
    assert [_indexable(plan, read, k, c) for k, c in ((0, "ref"), (1, "tier"))] == [False, False]
    assert _indexable(plan, {0: {"ref": "string"}}, 0, "ref")  # the other side not read yet, nor declared
    paired = router.route("SELECT o.order_id, u.tier FROM t_order o JOIN t_user u ON o.qty = u.tier").cross_node
    both = {0: {"qty": "integer"}, 1: {"tier": "integer"}}
    assert [_indexable(paired, both, k, c) for k, c in ((0, "qty"), (1, "tier"))] == [True, True]


def test_same_alias_in_two_subqueries(sqlite_xnode: Backend) -> None:
    sql = ("SELECT u.id FROM t_user u WHERE u.id IN (SELECT s.user_id FROM t_order s) "
           "AND EXISTS (SELECT 1 FROM t_user s WHERE s.tier = u.tier) ORDER BY u.id")
    assert _explicit(sqlite_xnode, {"t_user": USERS, "t_order": [_order(60, 1)]}, sql) == [(1,)]


def test_scalar_subquery_with_aggregate_per_node(sqlite_xnode: Backend) -> None:
    """Co-located on the shard key (so not a cross-node plan): each node can answer its own rows."""
    _refill(sqlite_xnode, {"t_user": USERS})
    check(sqlite_xnode, Query("SELECT u.id, (SELECT COUNT(*) FROM t_user s WHERE s.id = u.id) AS n FROM t_user u "
                              "ORDER BY u.id", [], "total"), None)


class WrongAnswer(Exception):
    """ddm-core's rows differ from the unsharded reference's."""


def test_sqlite_text_narrowed_by_numbers(sqlite_xnode: Backend) -> None:
    orders = [_order(20, 1, ref="1.0"), _order(21, 2, ref="1"), _order(22, 3, ref=" 2"), _order(23, 5, ref="1e1")]
    sql = "SELECT u.id, o.order_id FROM t_user u JOIN t_order o ON o.ref = u.tier WHERE u.id >= 0"
    _refill(sqlite_xnode, {"t_user": USERS, "t_order": orders})
    want = sorted(sqlite_xnode.ref(sql, [])[1])
    assert want == [(1, 20), (1, 21), (2, 22), (4, 23)]  # SQLite compares the TEXT column with the INT one as numbers
    got = sorted(sqlite_xnode.ddm(sql, [], None)[1])
    if got != want:
        raise WrongAnswer(f"got {got}, expected {want}")


def test_refused_when_cross_node_queries_off() -> None:
    """``runtime.crossNodeQueries: false`` refuses the module's joins as before, naming the missing condition."""
    urls = {ds: f"sqlite:///unused_{ds}.db" for ds in SOURCES}
    off, on = (Router(load_config(xnode_config(urls, cross_node=flag))) for flag in (False, True))
    sql = "SELECT u.id, o.order_id FROM t_user u JOIN t_order o ON o.user_id = u.id"
    with pytest.raises(UnsupportedSQLError, match="t_user u"):
        off.route(sql)
    assert on.route(sql).kind is RouteKind.CROSS_NODE


def test_outcomes_report() -> None:
    """How the generated statements went (run after the properties; ``-s`` prints it)."""
    if OUTCOMES:
        print("\ncross-node oracle outcomes:", dict(sorted(OUTCOMES.items())))
        assert sum(n for k, n in OUTCOMES.items() if k.startswith("cross-node")) > 0, OUTCOMES
