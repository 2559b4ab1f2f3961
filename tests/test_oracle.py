"""The oracle: a query through ddm-core over the shards == the same query on one unsharded table.

For each backend — MariaDB on 127.0.0.1:3306 (four shard databases plus a
reference database, created and dropped here, unique names) and SQLite files —
the same rows are loaded twice: through the executor into ``t_order`` /
``t_order_item`` sharded by ``user_id`` over 4 data sources × 4 tables (16
nodes, the item table bound to the order table) plus the broadcast dictionary
``t_dict``, and directly into one unsharded copy of each table in the reference
database / file (the module's data is drawn once from a fixed seed: ties,
NULLs, negative and > 2**53 shard keys). Hypothesis then generates SELECTs
(filters on shard and non-shard columns with ``AND`` / ``OR`` / ``IN`` /
``BETWEEN`` / ``LIKE`` / ``IS NULL``, literals and parameters; computed select
items; ORDER BY columns, aliases or positions with mixed directions, ties and
NULLs; LIMIT / OFFSET; GROUP BY with COUNT / SUM / MIN / MAX / AVG /
COUNT(DISTINCT) / SUM(DISTINCT); HAVING; DISTINCT; binding joins order ⨝ item
on the shard key, inner and left; joins with the broadcast table) and runs each
through :class:`ddm_core.execute.Executor` (streamed, buffered or the
executor's choice) and directly on the reference.

How results are compared (:func:`compare`):

* ORDER BY that is total (it ends with a unique column, or orders by every
  group key / every DISTINCT column): equal row for row;
* ORDER BY with ties: the sequence of sort keys must be equal, and the rows of
  every run of equal keys must be the same multiset — for a run cut by LIMIT /
  OFFSET, a sub-multiset of that key's rows in the un-limited result;
* no ORDER BY: equal multisets (with LIMIT: as many rows, drawn from the
  un-limited result);
* column names equal (case-insensitive), values equal *and of the same Python
  type* (a ``Decimal`` where the database gives an ``int`` is a mismatch);
  SQLite floats compare with a 1e-9 relative tolerance (sums of REALs depend on
  the order they are added in).

Strings: tags mix case, accents and trailing spaces (``a``, ``A``, ``á``, ``b``,
``B ``...). MariaDB's columns here are ``utf8mb4_general_ci``: case- and
accent-insensitive, trailing spaces ignored, so one table shows *a* spelling of
equal strings for a group, a DISTINCT row or a MIN / MAX. On MariaDB every string
is therefore compared by its ``utf8mb4_general_ci`` key (still only with another
``str``); SQLite compares strings as Python does, as its BINARY collation does.

Values: SQLite amounts go in as text / floats (its ``sqlite3`` driver takes no
``Decimal``), MariaDB amounts as ``Decimal``; datetimes as text on SQLite. Amounts
are multiples of 0.25, so SQLite's REAL sums are exact (see ``CENTS``).

A second test lets Hypothesis generate the *data* too: small tables
(``t_hyp``) refilled per example, with a few queries each.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
import random
import re
import sqlite3
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddm_core import load_config
from ddm_core.execute import Executor
from ddm_core.execute.schema_load import load_schemas
from ddm_core.merge.collation import collation_for
from test_execute_support import assert_no_leaks, mysql_raw

SHARDS = 4
TABLES = 4
SEED = 20250611

# -- schema and configuration ------------------------------------------------------------------

ORDER_COLUMNS = ("order_id", "user_id", "status", "amount", "create_time", "tag", "region_code")
ITEM_COLUMNS = ("item_id", "order_id", "user_id", "sku", "qty", "price")

DDL = (
    "CREATE TABLE {t} (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, status INT NULL, "
    "amount DECIMAL(10,2) NULL, create_time DATETIME NOT NULL, tag VARCHAR(10) NULL, region_code VARCHAR(8) NULL)",
    "CREATE TABLE t_order_item (item_id BIGINT NOT NULL PRIMARY KEY, order_id BIGINT NOT NULL, "
    "user_id BIGINT NOT NULL, sku INT NOT NULL, qty INT NULL, price DECIMAL(10,2) NOT NULL)",
    "CREATE TABLE t_dict (region_code VARCHAR(8) NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL)",
)


def oracle_config(urls: dict[str, Any]) -> dict[str, Any]:
    names = list(urls)

    def sharded(name: str) -> dict[str, Any]:
        return {
            "logicTable": name, "shardKey": "user_id", "algorithm": "slots", "slotCount": 1024,
            "shardCount": len(names), "tablePerShard": TABLES, "databases": names, "tableKey": "user_id",
        }

    return {
        "dataSources": urls,
        "pool": {"maxSize": 20, "minIdle": 1, "acquireTimeoutMs": 3000},
        "tables": [sharded("t_order"), {"logicTable": "t_order_item", "bindTo": "t_order"}, sharded("t_hyp")],
        "broadcastTables": ["t_dict"],
        "defaultDataSource": names[0],
        "runtime": {"allowFullRoute": True, "allowDmlFullRoute": True, "fullRouteThreshold": 64,
                    "maxOffset": 1_000_000, "sqlComment": False},
    }


# -- the data (one set per module; ties, NULLs, negative and > 2**53 shard keys) -----------------

USERS = (1, 2, 3, 4, 5, 7, 8, 11, 13, 17, 19, 23, 29, 31, 37, 64, 100, 255, 256, 1000, -1, -7,
         2**40 + 3, 2**53 + 1)
STATUSES = (0, 1, 2, 3, None)
TAGS = ("", "a", "A", "á", "b", "B ", "ab", "Ab", "ab  ", "abc", "ÁBC", "b_c", None)
REGIONS = ("r1", "r2", "r3", "r4", "r5", "r6", "r7", None)  # r7 has no dictionary row
DICT = (("r1", "north"), ("r2", "south"), ("r3", "east"), ("r4", "west"), ("r5", "west"), ("r6", "center"))
# Amounts in cents, all multiples of 0.25: SQLite stores DECIMAL as REAL, and sums of binary-exact
# values do not depend on the order they are added in — so a sharded SUM (partial sums added up)
# equals the unsharded one exactly, and ORDER BY / HAVING on SUM(amount) is deterministic there too.
# (With 0.10-style values a sum over 4 shards and over one table can differ in the last bit.)
CENTS = (0, 25, 150, 975, 1000, 1250, 2500, 4975, 5000, 12325, 99975, 100000, 250025, 999975)
BASE_TIME = datetime(2025, 3, 1, 8, 0, 0)
TIMES = tuple(BASE_TIME + timedelta(minutes=37 * k) for k in range(40))


@dataclass
class DataSet:
    orders: list[dict[str, Any]]
    items: list[dict[str, Any]]


def make_data(seed: int = SEED, n_orders: int = 420) -> DataSet:
    rng = random.Random(seed)
    order_ids = rng.sample(range(1, 10**12), n_orders)
    orders = []
    for oid in order_ids:
        orders.append({
            "order_id": oid,
            "user_id": rng.choice(USERS[:8]) if rng.random() < 0.4 else rng.choice(USERS),
            "status": rng.choices(STATUSES, (3, 3, 2, 2, 1))[0],
            "amount": None if rng.random() < 0.07 else Decimal(rng.choice(CENTS)) / 100,
            "create_time": rng.choice(TIMES),
            "tag": rng.choice(TAGS),
            "region_code": rng.choice(REGIONS),
        })
    items = []
    item_ids = iter(rng.sample(range(1, 10**12), n_orders * 3))
    for o in orders:
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            items.append({
                "item_id": next(item_ids), "order_id": o["order_id"], "user_id": o["user_id"],
                "sku": rng.randint(1, 12), "qty": None if rng.random() < 0.1 else rng.randint(1, 5),
                "price": Decimal(rng.choice(CENTS[1:])) / 100,
            })
    return DataSet(orders, items)


# -- backends ------------------------------------------------------------------------------------


class Backend:
    """The sharded executor and the unsharded reference of one database kind."""

    name: str
    placeholder: str
    runner = "threads"

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    def ref(self, sql: str, params: Sequence[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        raise NotImplementedError

    def ref_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def value(self, v: Any) -> Any:
        """A Python value as this backend stores / binds it."""
        return v

    def literal(self, v: Any) -> str:
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        if isinstance(v, datetime):
            return "'" + v.strftime("%Y-%m-%d %H:%M:%S") + "'"
        return str(v)

    def ddm(self, sql: str, params: Sequence[Any], stream: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
        with self.executor.execute(sql, list(params), stream=stream) as result:
            rows = result.fetchall()
            names = [d[0] for d in result.description or ()]
        return names, rows

    def load(self, table: str, columns: Sequence[str], rows: Sequence[dict[str, Any]], chunk: int = 200) -> None:
        """Insert through ddm-core (multi-row INSERTs, split per node) and into the reference."""
        if not rows:
            return
        row_sql = "(" + ", ".join([self.placeholder] * len(columns)) + ")"
        values = [[self.value(r[c]) for c in columns] for r in rows]
        for start in range(0, len(values), chunk):
            part = values[start : start + chunk]
            sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES " + ", ".join([row_sql] * len(part))
            with self.executor.execute(sql, [v for row in part for v in row]) as r:
                assert r.rowcount == len(part) * (SHARDS if table == "t_dict" else 1)
        self.ref_many(f"INSERT INTO {table} ({', '.join(columns)}) VALUES {row_sql}", values)


class MariaDBBackend(Backend):
    name = "mariadb"
    placeholder = "%s"

    def __init__(self, executor: Executor, ref_conn: Any) -> None:
        super().__init__(executor)
        self.conn = ref_conn

    def ref(self, sql: str, params: Sequence[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        with self.conn.cursor() as cur:
            cur.execute(sql, list(params) if params else None)
            return [d[0] for d in cur.description], list(cur.fetchall())

    def ref_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(sql, rows)


class SQLiteBackend(Backend):
    name = "sqlite"
    placeholder = "?"

    def __init__(self, executor: Executor, ref_path: Path) -> None:
        super().__init__(executor)
        self.conn = sqlite3.connect(ref_path, isolation_level=None)

    def value(self, v: Any) -> Any:
        if isinstance(v, Decimal):
            return str(v)  # NUMERIC affinity stores it as SQLite would store any DECIMAL text
        if isinstance(v, datetime):
            return v.strftime("%Y-%m-%d %H:%M:%S")
        return v

    def ref(self, sql: str, params: Sequence[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        cur = self.conn.execute(sql, list(params))
        return [d[0] for d in cur.description], cur.fetchall()

    def ref_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.execute("BEGIN")
        self.conn.executemany(sql, rows)
        self.conn.execute("COMMIT")


def _create(backend: Backend, raw_ref: Callable[[str], None]) -> None:
    for ddl in (DDL[0].format(t="t_order"), DDL[0].format(t="t_hyp"), DDL[1], DDL[2]):
        backend.executor.execute(ddl).close()
        raw_ref(ddl)


def _fill(backend: Backend, data: DataSet) -> None:
    backend.load("t_order", ORDER_COLUMNS, data.orders)
    backend.load("t_order_item", ITEM_COLUMNS, data.items)
    backend.load("t_dict", ("region_code", "name"), [{"region_code": c, "name": n} for c, n in DICT])
    # Sanity: the loads agree before any query is compared.
    for table in ("t_order", "t_order_item", "t_dict"):
        _, got = backend.ddm(f"SELECT COUNT(*) FROM {table}", (), None)
        _, want = backend.ref(f"SELECT COUNT(*) FROM {table}", ())
        assert len(got) == len(want) and all(_rows_same(g, w) for g, w in zip(got, want)), (table, got, want)


@pytest.fixture(scope="module")
def data() -> DataSet:
    return make_data()


@contextlib.contextmanager
def mariadb_oracle(prefix: str, sources: Sequence[str], config: Callable[[dict[str, Any]], Any]) -> Iterator[MariaDBBackend]:
    """One fresh MariaDB database per data source of ``config(urls)`` plus an unsharded reference
    database (``backend.conn``), all dropped afterwards; no connection may leak."""
    try:
        admin = mysql_raw()
    except Exception as exc:  # not a silent skip: the oracle needs the server
        pytest.fail(f"MariaDB on 127.0.0.1:3306 (root, no password) is needed by the oracle: {exc}")
    tag = uuid.uuid4().hex[:8]
    names = [f"{prefix}_{tag}_{i}" for i in range(len(sources))] + [f"{prefix}_{tag}_ref"]
    with admin.cursor() as cur:
        for name in names:
            cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
    ref_conn = mysql_raw(names[-1])
    executor = None
    try:
        urls = {ds: {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
                for ds, db in zip(sources, names)}
        executor = Executor(load_config(config(urls)), timeout=20.0)
        yield MariaDBBackend(executor, ref_conn)
        assert_no_leaks(executor)
    finally:
        if executor is not None:
            executor.close()
        ref_conn.close()
        with admin.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


def reference_runner(backend: MariaDBBackend) -> Callable[[str], None]:
    """Run one statement on the unsharded reference database."""

    def raw(sql: str) -> None:
        with backend.conn.cursor() as cur:
            cur.execute(sql)

    return raw


@pytest.fixture(scope="module")
def mariadb_backend(data: DataSet) -> Iterator[Backend]:
    with mariadb_oracle("ddm_oracle", [f"ds_{i}" for i in range(SHARDS)], oracle_config) as backend:
        _create(backend, reference_runner(backend))
        # The tables exist only now: their column types decide which reads may run as one UNION ALL.
        backend.executor.router.set_schemas(load_schemas(backend.executor.config))
        _fill(backend, data)
        yield backend


@pytest.fixture(scope="module")
def sqlite_backend(data: DataSet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    base = tmp_path_factory.mktemp("oracle")
    urls = {f"ds_{i}": f"sqlite:///{base / f'ds_{i}.db'}" for i in range(SHARDS)}
    executor = Executor(load_config(oracle_config(urls)), timeout=20.0)
    backend = SQLiteBackend(executor, base / "ref.db")
    try:
        _create(backend, lambda sql: backend.conn.execute(sql))  # type: ignore[attr-defined]
        _fill(backend, data)
        yield backend
        assert_no_leaks(executor)
    finally:
        executor.close()
        backend.conn.close()  # type: ignore[attr-defined]


def _on_asyncio(backend: Backend) -> Iterator[Backend]:
    """The same data and reference, queried through the asyncio executor (tests/runners.py)."""
    from runners import BlockingAsyncExecutor

    executor = BlockingAsyncExecutor(backend.executor.config, timeout=20.0)
    twin = copy.copy(backend)
    twin.executor = executor  # type: ignore[assignment]
    twin.runner = "asyncio"
    try:
        yield twin
        executor.settle()
        assert_no_leaks(executor)  # type: ignore[arg-type]
    finally:
        executor.close()


@pytest.fixture(scope="module")
def mariadb_asyncio_backend(mariadb_backend: Backend) -> Iterator[Backend]:
    yield from _on_asyncio(mariadb_backend)


@pytest.fixture(scope="module")
def sqlite_asyncio_backend(sqlite_backend: Backend) -> Iterator[Backend]:
    yield from _on_asyncio(sqlite_backend)


@pytest.fixture(scope="module")
def mariadb_per_table_backend(mariadb_backend: Backend) -> Iterator[Backend]:
    """The same data and reference with ``runtime.oneUnitPerDataSource: false``: one unit per physical
    table (the other MariaDB backends run a data source's tables as one UNION ALL where it may)."""
    config = mariadb_backend.executor.config
    executor = Executor(dataclasses.replace(
        config, runtime=dataclasses.replace(config.runtime, one_unit_per_data_source=False)), timeout=20.0)
    twin = copy.copy(mariadb_backend)
    twin.executor = executor
    try:
        yield twin
        assert_no_leaks(executor)
    finally:
        executor.close()


@pytest.fixture(scope="module", params=["mariadb", "sqlite", "mariadb_asyncio", "sqlite_asyncio", "mariadb_per_table"])
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each database kind, queried through the thread executor and through the asyncio executor; MariaDB
    with a data source's tables in one unit (the default) and with one unit per table."""
    return request.getfixturevalue(f"{request.param}_backend")  # type: ignore[no-any-return]


# -- queries -------------------------------------------------------------------------------------


@dataclass
class Query:
    """A generated SELECT and how its result is to be compared.

    ``sql`` uses ``%s`` placeholders (turned into ``?`` for SQLite).
    ``mode``: ``total`` (row for row), ``runs`` (sort keys equal, ties as multisets;
    ``key_columns`` index the output), ``multiset``.
    ``unlimited``: the same query without LIMIT / OFFSET (for ``runs`` and LIMIT without ORDER BY).
    """

    sql: str
    params: list[Any]
    mode: str
    key_columns: tuple[int, ...] = ()
    unlimited: tuple[str, list[Any]] | None = None
    has_limit: bool = False

    def text(self, placeholder: str) -> str:
        return self.sql if placeholder == "%s" else self.sql.replace("%s", "?")


class Builder:
    """Draws the pieces of one query; values become parameters or literals."""

    def __init__(self, draw: Callable[..., Any], backend: Backend, table: str = "t_order") -> None:
        self.draw = draw
        self.backend = backend
        self.table = table
        self.params: list[Any] = []

    def val(self, v: Any) -> str:
        if v is None:
            return "NULL"
        if self.draw(st.booleans()):
            self.params.append(self.bind(v))
            return "%s"
        return self.backend.literal(v)

    def bind(self, v: Any) -> Any:
        if isinstance(v, Decimal):
            return float(v) if self.backend.name == "sqlite" else v
        return self.backend.value(v)

    # -- WHERE ------------------------------------------------------------------------------

    def atom(self, alias: str, items: bool) -> str:
        d = self.draw
        a = alias
        choices = ["user_eq", "user_in", "user_between", "status_eq", "status_null", "status_in", "amount_cmp",
                   "time_cmp", "tag_eq", "tag_null", "tag_like", "order_eq", "region_eq", "status_ne"]
        if items:
            choices += ["qty_cmp", "sku_eq", "qty_null", "item_user"]
        kind = d(st.sampled_from(choices))
        users = st.sampled_from(USERS + (999_999,))
        if kind == "user_eq":
            return f"{a}.user_id = {self.val(d(users))}"
        if kind == "user_in":
            vals = d(st.lists(users, min_size=1, max_size=4))
            return f"{a}.user_id IN ({', '.join(self.val(v) for v in vals)})"
        if kind == "user_between":
            lo = d(st.integers(-10, 300))
            return f"{a}.user_id BETWEEN {self.val(lo)} AND {self.val(lo + d(st.integers(0, 300)))}"
        if kind == "status_eq":
            return f"{a}.status = {self.val(d(st.sampled_from(STATUSES[:-1])))}"
        if kind == "status_ne":
            return f"{a}.status <> {self.val(d(st.sampled_from(STATUSES[:-1])))}"
        if kind == "status_null":
            return f"{a}.status IS {d(st.sampled_from(['', 'NOT ']))}NULL"
        if kind == "status_in":
            vals = d(st.lists(st.sampled_from(STATUSES[:-1]), min_size=1, max_size=3))
            return f"{a}.status IN ({', '.join(self.val(v) for v in vals)})"
        if kind == "amount_cmp":
            op = d(st.sampled_from(["<", "<=", ">", ">=", "="]))
            return f"{a}.amount {op} {self.val(Decimal(d(st.sampled_from(CENTS))) / 100)}"
        if kind == "time_cmp":
            op = d(st.sampled_from(["<", "<=", ">", ">=", "="]))
            return f"{a}.create_time {op} {self.val(d(st.sampled_from(TIMES)))}"
        if kind == "tag_eq":
            return f"{a}.tag = {self.val(d(st.sampled_from(TAGS[:-1] + ('zz',))))}"
        if kind == "tag_null":
            return f"{a}.tag IS {d(st.sampled_from(['', 'NOT ']))}NULL"
        if kind == "tag_like":
            self.params.append(d(st.sampled_from(["a%", "%b%", "b\\_%", "_"])))
            return f"{a}.tag LIKE %s"
        if kind == "order_eq":
            return f"{a}.order_id = {self.val(d(st.integers(1, 10**12)))}"  # almost always no row
        if kind == "region_eq":
            return f"{a}.region_code = {self.val(d(st.sampled_from(REGIONS[:-1])))}"
        if kind == "qty_cmp":
            return f"i.qty {d(st.sampled_from(['<', '>=', '=']))} {self.val(d(st.integers(1, 5)))}"
        if kind == "sku_eq":
            return f"i.sku = {self.val(d(st.integers(1, 12)))}"
        if kind == "item_user":
            return f"i.user_id = {self.val(d(users))}"
        if kind == "qty_null":
            return f"i.qty IS {d(st.sampled_from(['', 'NOT ']))}NULL"
        raise AssertionError(kind)

    def where(self, alias: str = "o", items: bool = False) -> str:
        d = self.draw
        n = d(st.integers(0, 3))
        parts = []
        for _ in range(n):
            if d(st.integers(0, 5)) == 0:
                parts.append(f"({self.atom(alias, items)} OR {self.atom(alias, items)})")
            else:
                parts.append(self.atom(alias, items))
        return " WHERE " + " AND ".join(parts) if parts else ""

    def limit(self) -> tuple[str, bool]:
        d = self.draw
        if not d(st.booleans()):
            return "", False
        n = d(st.integers(0, 30))
        # Both parameters or both literals: a literal LIMIT with a parameter OFFSET is
        # refused across shards (UnsupportedSQLError, see test_refusals).
        as_param = d(st.booleans())

        def text(v: int) -> str:
            if as_param:
                self.params.append(v)
                return "%s"
            return str(v)

        if d(st.booleans()):
            return f" LIMIT {text(n)} OFFSET {text(d(st.integers(0, 60)))}", True
        return f" LIMIT {text(n)}", True


def _unlimited(sql: str, params: list[Any], limit_text: str) -> tuple[str, list[Any]]:
    """The query without its trailing LIMIT clause, and without that clause's params."""
    assert sql.endswith(limit_text)
    n = limit_text.count("%s")
    return sql[: len(sql) - len(limit_text)], params[: len(params) - n] if n else list(params)


def _finish(b: Builder, head: str, order: list[tuple[str, bool]], total: bool, key_columns: tuple[int, ...],
            with_limit: bool = True) -> Query:
    order_sql = (" ORDER BY " + ", ".join(f"{c}{' DESC' if desc else ''}" for c, desc in order)) if order else ""
    before_limit = list(b.params)
    limit_sql, has_limit = b.limit() if with_limit else ("", False)
    sql = head + order_sql + limit_sql
    if order and total:
        mode = "total"
    elif order:
        mode = "runs"
    else:
        mode = "multiset"
    unlimited = (head + order_sql, before_limit) if has_limit and mode != "total" else None
    return Query(sql, list(b.params), mode, key_columns, unlimited, has_limit)


#: Computed select items of plain queries (alias → expression); they can be sort keys too.
EXPRESSIONS = {"x2": "o.amount * 2", "ctag": "COALESCE(o.tag, 'none')", "us": "o.user_id + o.status"}


def plain_query(draw: Callable[..., Any], backend: Backend, table: str = "t_order") -> Query:
    """SELECT columns / expressions / * FROM t_order o WHERE ... [ORDER BY ...] [LIMIT ...].

    Sort keys are columns (selected or not), expression aliases or select-list positions.
    """
    b = Builder(draw, backend, table)
    star = draw(st.integers(0, 7)) == 0
    items = list(ORDER_COLUMNS) if star else draw(
        st.lists(st.sampled_from(ORDER_COLUMNS + tuple(EXPRESSIONS)), min_size=1, max_size=5, unique=True))
    select = "*" if star else ", ".join(f"{EXPRESSIONS[n]} AS {n}" if n in EXPRESSIONS else f"o.{n}" for n in items)
    head = f"SELECT {select} FROM {table} o" + b.where()
    pool = ORDER_COLUMNS[1:] + tuple(n for n in items if n in EXPRESSIONS)
    keys = draw(st.lists(st.sampled_from(pool), max_size=3, unique=True))
    order = []
    for k in keys:
        if k in items and not star and draw(st.integers(0, 3)) == 0:
            # ORDER BY 2 (with SELECT * positions are refused across shards: see test_refusals)
            ref = str(items.index(k) + 1)
        else:
            ref = k if k in EXPRESSIONS else f"o.{k}"
        order.append((ref, draw(st.booleans())))
    total = draw(st.integers(0, 2)) > 0
    if not total and order and not all(k in items for k in keys):
        total = True  # tie order can only be checked on selected keys: make it total instead
    if total:
        order.append(("o.order_id", draw(st.booleans())))
    key_columns = tuple(items.index(k) for k in keys) if not total else ()
    return _finish(b, head, order, total, key_columns)


AGGREGATES = (
    "COUNT(*)", "COUNT(o.status)", "COUNT(o.amount)", "SUM(o.amount)", "MIN(o.amount)", "MAX(o.amount)",
    "AVG(o.amount)", "SUM(o.status)", "AVG(o.status)", "MIN(o.create_time)", "MAX(o.tag)", "MIN(o.tag)",
    "COUNT(DISTINCT o.tag)", "COUNT(DISTINCT o.status)", "SUM(DISTINCT o.amount)", "SUM(DISTINCT o.status)",
    "COUNT(DISTINCT o.user_id)",
)  # AVG(DISTINCT x) is refused across shards (UnsupportedSQLError): see test_refusals
GROUP_KEYS = ("o.status", "o.tag", "o.user_id", "o.region_code", "o.create_time")


NON_NUMERIC = ("MIN(o.create_time)", "MAX(o.tag)", "MIN(o.tag)")


def _having(b: Builder, aggs: list[str], aliased: bool) -> str:
    d = b.draw
    if not d(st.integers(0, 3)) == 0:
        return ""
    # Only numeric aggregates are compared with numbers: a datetime or string against an
    # int compares by SQLite's type order (and by MySQL's conversions), which the merge's
    # HAVING does not model (it raises TypeError) — see the report.
    aliases = [f"a{i}" if aliased else a for i, a in enumerate(aggs) if a not in NON_NUMERIC]
    kind = d(st.sampled_from(["count", "sum", "max", "arith"] + (["alias"] if aliases else [])))
    if kind == "arith":
        return f" HAVING SUM(o.amount) * 2 - MIN(o.amount) >= {b.val(Decimal(d(st.sampled_from(CENTS))) / 100)}"
    if kind == "count":
        return f" HAVING COUNT(*) {d(st.sampled_from(['>', '>=', '<']))} {b.val(d(st.integers(0, 30)))}"
    if kind == "sum":
        return f" HAVING SUM(o.amount) > {b.val(Decimal(d(st.sampled_from(CENTS))) / 100)}"
    if kind == "max":
        return f" HAVING MAX(o.amount) < {b.val(Decimal(d(st.sampled_from(CENTS))) / 100)}"
    alias = d(st.sampled_from(aliases))
    # (IS [NOT] NULL in HAVING is refused across shards: comparisons, AND/OR/NOT and arithmetic only.)
    op = d(st.sampled_from([">", "<=", "="]))
    if d(st.booleans()):
        return f" HAVING {alias} {op} {b.val(d(st.integers(0, 5)))} OR COUNT(*) < {b.val(d(st.integers(0, 9)))}"
    return f" HAVING {alias} {op} {b.val(d(st.integers(0, 5)))}"


def group_query(draw: Callable[..., Any], backend: Backend, table: str = "t_order") -> Query:
    b = Builder(draw, backend, table)
    keys = draw(st.lists(st.sampled_from(GROUP_KEYS), min_size=1, max_size=2, unique=True))
    aggs = draw(st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=4, unique=True))
    aliased = draw(st.booleans())
    agg_sql = [f"{a} AS a{i}" if aliased else a for i, a in enumerate(aggs)]
    select_keys = list(draw(st.permutations(keys))) if draw(st.integers(0, 4)) else []  # keys not selected
    head = f"SELECT {', '.join(select_keys + agg_sql)} FROM {table} o" + b.where()
    head += " GROUP BY " + ", ".join(keys)
    head += _having(b, list(aggs), aliased)
    shape = draw(st.sampled_from(["none", "keys", "agg_then_keys", "agg_only"]))
    order: list[tuple[str, bool]] = []
    total = False
    key_columns: tuple[int, ...] = ()
    agg_refs = [f"a{i}" for i in range(len(aggs))] if aliased else list(aggs)
    if shape == "keys":
        order = [(k, draw(st.booleans())) for k in draw(st.permutations(keys))]
        total = True
    elif shape == "agg_then_keys":
        i = draw(st.integers(0, len(aggs) - 1))
        order = [(agg_refs[i], draw(st.booleans()))] + [(k, draw(st.booleans())) for k in keys]
        total = True
    elif shape == "agg_only":
        i = draw(st.integers(0, len(aggs) - 1))
        order = [(agg_refs[i], draw(st.booleans()))]
        key_columns = (len(select_keys) + i,)
    if not order:
        return _finish(b, head, [], False, (), with_limit=False)
    return _finish(b, head, order, total, key_columns)


def scalar_query(draw: Callable[..., Any], backend: Backend, table: str = "t_order") -> Query:
    b = Builder(draw, backend, table)
    aggs = draw(st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=5, unique=True))
    return Query(f"SELECT {', '.join(aggs)} FROM {table} o" + b.where(), list(b.params), "total")


def distinct_query(draw: Callable[..., Any], backend: Backend, table: str = "t_order") -> Query:
    b = Builder(draw, backend, table)
    cols = draw(st.lists(st.sampled_from(("status", "tag", "user_id", "region_code", "create_time")), min_size=1,
                         max_size=3, unique=True))
    head = f"SELECT DISTINCT {', '.join('o.' + c for c in cols)} FROM {table} o" + b.where()
    keys = draw(st.lists(st.sampled_from(cols), max_size=len(cols), unique=True))
    order = [(f"o.{k}", draw(st.booleans())) for k in keys]
    total = len(keys) == len(cols)
    return _finish(b, head, order, total, tuple(cols.index(k) for k in keys))  # no ORDER BY: LIMIT as a subset


def binding_query(draw: Callable[..., Any], backend: Backend) -> Query:
    b = Builder(draw, backend)
    join = draw(st.sampled_from(["JOIN", "LEFT JOIN"]))
    on = draw(st.sampled_from(["o.user_id = i.user_id AND o.order_id = i.order_id",
                               "o.order_id = i.order_id AND o.user_id = i.user_id"]))
    src = f"FROM t_order o {join} t_order_item i ON {on}"
    if draw(st.booleans()):  # rows
        cols = ["o.order_id", "o.user_id", "o.status", "o.amount", "i.item_id", "i.sku", "i.qty", "i.price"]
        chosen = draw(st.lists(st.sampled_from(cols), min_size=1, max_size=5, unique=True))
        head = f"SELECT {', '.join(chosen)} {src}" + b.where(items=True)
        keys = draw(st.lists(st.sampled_from([c for c in cols if c not in ("o.order_id", "i.item_id")]),
                             max_size=2, unique=True))
        order = [(k, draw(st.booleans())) for k in keys]
        total = draw(st.booleans()) or not all(k in chosen for k in keys)
        if total:  # (order_id, item_id) is unique over the join, LEFT JOIN's NULL item included
            order += [("o.order_id", draw(st.booleans())), ("i.item_id", draw(st.booleans()))]
        key_columns = () if total else tuple(chosen.index(k) for k in keys)
        return _finish(b, head, order, total, key_columns)
    keys = draw(st.lists(st.sampled_from(["o.status", "i.sku", "o.user_id", "o.tag"]), min_size=1, max_size=2,
                         unique=True))
    aggs = draw(st.lists(st.sampled_from(["COUNT(*)", "SUM(i.qty)", "AVG(i.price)", "MAX(i.price)",
                                          "COUNT(DISTINCT o.order_id)", "COUNT(i.item_id)", "SUM(o.amount)",
                                          "MIN(i.qty)"]), min_size=1, max_size=3, unique=True))
    head = f"SELECT {', '.join(keys + [f'{a} AS a{i}' for i, a in enumerate(aggs)])} {src}" + b.where(items=True)
    head += " GROUP BY " + ", ".join(keys)
    if draw(st.booleans()):
        return _finish(b, head, [], False, (), with_limit=False)
    order = [(f"a{draw(st.integers(0, len(aggs) - 1))}", draw(st.booleans()))] if draw(st.booleans()) else []
    order += [(k, draw(st.booleans())) for k in keys]
    return _finish(b, head, order, True, ())


def broadcast_query(draw: Callable[..., Any], backend: Backend) -> Query:
    b = Builder(draw, backend)
    if draw(st.integers(0, 5)) == 0:  # the broadcast table alone: one data source
        where = f" WHERE d.name <> {b.val(draw(st.sampled_from([n for _, n in DICT])))}" if draw(st.booleans()) else ""
        head = "SELECT d.region_code, d.name FROM t_dict d" + where
        return _finish(b, head, [("d.name", draw(st.booleans())), ("d.region_code", draw(st.booleans()))], True, ())
    join = draw(st.sampled_from(["JOIN", "LEFT JOIN"]))
    src = f"FROM t_order o {join} t_dict d ON o.region_code = d.region_code"
    if draw(st.booleans()):
        cols = ["o.order_id", "o.user_id", "o.region_code", "d.name", "o.amount"]
        chosen = draw(st.lists(st.sampled_from(cols), min_size=1, max_size=4, unique=True))
        head = f"SELECT {', '.join(chosen)} {src}" + b.where()
        keys = draw(st.lists(st.sampled_from(["d.name", "o.amount", "o.user_id"]), max_size=2, unique=True))
        order = [(k, draw(st.booleans())) for k in keys]
        total = draw(st.booleans()) or not all(k in chosen for k in keys)
        if total:
            order.append(("o.order_id", draw(st.booleans())))
        key_columns = () if total else tuple(chosen.index(k) for k in keys)
        return _finish(b, head, order, total, key_columns)
    aggs = draw(st.lists(st.sampled_from(["COUNT(*)", "SUM(o.amount)", "AVG(o.amount)", "COUNT(DISTINCT o.region_code)",
                                          "MAX(o.create_time)"]), min_size=1, max_size=3, unique=True))
    head = f"SELECT d.name, {', '.join(f'{a} AS a{i}' for i, a in enumerate(aggs))} {src}" + b.where()
    head += " GROUP BY d.name"
    if draw(st.booleans()):
        return _finish(b, head, [], False, (), with_limit=False)
    return _finish(b, head, [("d.name", draw(st.booleans()))], True, ())


QUERY_KINDS: dict[str, Callable[..., Query]] = {
    "plain": plain_query,
    "group": group_query,
    "scalar": scalar_query,
    "distinct": distinct_query,
    "binding": binding_query,
    "broadcast": broadcast_query,
}
SINGLE_TABLE_KINDS = ("plain", "group", "scalar", "distinct")


# -- comparing -----------------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, float) or isinstance(b, float):
        if type(a) is not type(b):
            return False
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return type(a) is type(b) and a == b


def _rows_same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))


def _sort_key(row: Sequence[Any]) -> tuple[Any, ...]:
    out = []
    for v in row:
        if v is None:
            out.append((0, 0, ""))
        elif isinstance(v, (int, float, Decimal)):
            # float() merges neighbours past 2**53 (2**53 + 1 and + 2 alike): exact numbers there keep their order,
            # or rows of one tie run pair up in input order and the same multisets compare unequal.
            exact = v if not isinstance(v, float) and abs(v) >= 2**53 else 0
            out.append((1, round(float(v), 6), exact, type(v).__name__))
        else:
            out.append((2, 0, str(v)))
    return tuple(out)


def _multiset_same(got: Sequence[Sequence[Any]], want: Sequence[Sequence[Any]]) -> bool:
    return len(got) == len(want) and all(
        _rows_same(g, w) for g, w in zip(sorted(got, key=_sort_key), sorted(want, key=_sort_key))
    )


def _sub_multiset(part: Sequence[Sequence[Any]], whole: Sequence[Sequence[Any]]) -> bool:
    pool = Counter(_sort_key(r) for r in whole)
    need = Counter(_sort_key(r) for r in part)
    return all(pool[k] >= n for k, n in need.items())


def _tie(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Equal as sort keys: SQL ties ``1000`` and ``1000.0`` (SQLite's SUM is INTEGER or REAL
    depending on its inputs), so a run may hold both; the run's rows are then compared strictly."""
    return all((x is None and y is None) or (x is not None and y is not None and x == y) for x, y in zip(a, b))


def _runs(rows: Sequence[Sequence[Any]], keys: tuple[int, ...]) -> list[tuple[tuple[Any, ...], list[Any]]]:
    out: list[tuple[tuple[Any, ...], list[Any]]] = []
    for row in rows:
        k = tuple(row[i] for i in keys)
        if out and _tie(out[-1][0], k):
            out[-1][1].append(row)
        else:
            out.append((k, [row]))
    return out


def compare(query: Query, got: list[tuple[Any, ...]], want: list[tuple[Any, ...]],
            unlimited: list[tuple[Any, ...]] | None) -> str | None:
    """``None`` when ``got`` is a correct answer, else why not."""
    if query.mode == "total":
        if len(got) != len(want):
            return f"{len(got)} rows, expected {len(want)}"
        for n, (g, w) in enumerate(zip(got, want)):
            if not _rows_same(g, w):
                return f"row {n}: got {g!r}, expected {w!r}"
        return None
    if query.mode == "multiset":
        if query.has_limit:
            assert unlimited is not None
            if len(got) != len(want):
                return f"{len(got)} rows, expected {len(want)}"
            return None if _sub_multiset(got, unlimited) else "rows not in the un-limited result"
        return None if _multiset_same(got, want) else "different multisets of rows"
    # runs: equal sort keys in equal order; ties compared as multisets
    got_runs, want_runs = _runs(got, query.key_columns), _runs(want, query.key_columns)
    if len(got) != len(want):
        return f"{len(got)} rows, expected {len(want)}"
    if len(got_runs) != len(want_runs) or not all(_tie(a, b) for (a, _), (b, _) in zip(got_runs, want_runs)):
        return f"sort keys {[k for k, _ in got_runs]!r}, expected {[k for k, _ in want_runs]!r}"
    full = _runs(unlimited, query.key_columns) if unlimited is not None else None
    for n, ((k, g), (_, w)) in enumerate(zip(got_runs, want_runs)):
        cut = query.has_limit and n in (0, len(got_runs) - 1)
        if cut and full is not None:
            whole = next((rows for key, rows in full if _tie(key, k)), [])
            if not _sub_multiset(g, whole):
                return f"run {k!r}: rows {g!r} are not rows of that key"
        elif not _multiset_same(g, w):
            return f"run {k!r}: got {g!r}, expected {w!r}"
    return None


_GENERAL_CI = collation_for(45).key  # utf8mb4_general_ci: the oracle databases' default collation


def _collated(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Each string as its utf8mb4_general_ci key (a ``str`` still): spellings one table may show alike."""
    assert _GENERAL_CI is not None
    return [tuple(_GENERAL_CI(v) if isinstance(v, str) else v for v in row) for row in rows]


def check(backend: Backend, query: Query, stream: Any) -> None:
    sql = query.text(backend.placeholder)
    want_names, want = backend.ref(sql, query.params)
    got_names, got = backend.ddm(sql, query.params, stream)
    unlimited = None
    if query.unlimited is not None:
        usql, uparams = query.unlimited
        _, unlimited = backend.ref(usql if backend.placeholder == "%s" else usql.replace("%s", "?"), uparams)
    if backend.name == "mariadb":  # strings equal under the columns' collation are one answer
        got, want = _collated(got), _collated(want)
        unlimited = _collated(unlimited) if unlimited is not None else None
    problem = None
    if [n.lower() for n in got_names] != [n.lower() for n in want_names]:
        problem = f"column names {got_names!r}, expected {want_names!r}"
    else:
        problem = compare(query, got, want, unlimited)
    if problem:
        raise AssertionError(
            f"{backend.name} ({backend.runner}): ddm-core differs from the unsharded table: {problem}\n"
            f"  sql:    {sql}\n  params: {query.params!r}  (stream={stream!r}, mode={query.mode})\n"
            f"  expected ({len(want)}): {want[:12]!r}\n  got      ({len(got)}): {got[:12]!r}"
        )


# -- the tests ---------------------------------------------------------------------------------------

#: Examples per backend; ``DDM_ORACLE_EXAMPLES=5000`` for a long hunt (the data test gets a tenth).
EXAMPLES = int(os.environ.get("DDM_ORACLE_EXAMPLES", "1500"))

ORACLE_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


@ORACLE_SETTINGS
@given(data=st.data())
def test_sharded_equals_unsharded(backend: Backend, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(sorted(QUERY_KINDS)), label="kind")
    query = QUERY_KINDS[kind](data.draw, backend)
    stream = data.draw(st.sampled_from([None, True, False]), label="stream")
    check(backend, query, stream)


# Hypothesis draws the data as well: small t_hyp tables, refilled per example.

hyp_rows = st.lists(
    st.fixed_dictionaries({
        "order_id": st.integers(1, 10**9),
        "user_id": st.sampled_from(USERS),
        "status": st.sampled_from(STATUSES),
        "amount": st.one_of(st.none(), st.sampled_from(CENTS).map(lambda c: Decimal(c) / 100)),
        "create_time": st.sampled_from(TIMES[:6]),
        "tag": st.sampled_from(TAGS),
        "region_code": st.sampled_from(REGIONS),
    }),
    max_size=30,
    unique_by=lambda r: r["order_id"],
)


@settings(max_examples=max(10, EXAMPLES // 10), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
          database=None)
@given(rows=hyp_rows, data=st.data())
def test_generated_data(backend: Backend, rows: list[dict[str, Any]], data: st.DataObject) -> None:
    backend.executor.execute("DELETE FROM t_hyp").close()
    backend.ref_many("DELETE FROM t_hyp", [()])
    backend.load("t_hyp", ORDER_COLUMNS, rows)
    for _ in range(3):
        kind = data.draw(st.sampled_from(SINGLE_TABLE_KINDS), label="kind")
        query = QUERY_KINDS[kind](data.draw, backend, "t_hyp")
        check(backend, query, data.draw(st.sampled_from([None, True, False]), label="stream"))


# -- what the oracle found, pinned; and the refusals the generator stays away from ------------------

REGRESSIONS = [
    # HAVING literal 123.45 was a float: Decimal('123.45') < 123.45 (float) is True in Python, and
    # DECIMAL-with-float arithmetic raised TypeError (see also test_having_decimal_literal_is_exact).
    Query("SELECT o.status, o.tag, COUNT(*) FROM t_order o GROUP BY o.status, o.tag "
          "HAVING MAX(o.amount) - 0.2 < 9999.55", [], "multiset"),
    Query("SELECT o.status, COUNT(*) FROM t_order o GROUP BY o.status HAVING SUM(o.amount) * 1.5 > 2.25 "
          "ORDER BY o.status", [], "total"),
    # A data source's UNION ALL with the units' LIMIT of its own: each branch was distinct, the union was
    # not, and one status's repeats took the whole LIMIT (NULL, NULL instead of NULL, 0).
    Query("SELECT DISTINCT o.status FROM t_order o ORDER BY o.status LIMIT 2", [], "total"),
    # SUM(DISTINCT int_column) came back as int; MySQL returns DECIMAL.
    Query("SELECT SUM(DISTINCT o.status), COUNT(*) FROM t_order o", [], "total"),
    Query("SELECT o.tag, SUM(DISTINCT o.status) AS s FROM t_order o GROUP BY o.tag ORDER BY o.tag", [], "total"),
]


@pytest.mark.parametrize("query", REGRESSIONS, ids=lambda q: q.sql[:60])
@pytest.mark.parametrize("stream", [None, True])
def test_regressions(backend: Backend, query: Query, stream: Any) -> None:
    check(backend, query, stream)


@pytest.mark.parametrize(
    ("sql", "params", "fragment"),
    [
        ("SELECT AVG(DISTINCT o.status) FROM t_order o", [], "AVG(DISTINCT"),
        ("SELECT o.order_id FROM t_order o ORDER BY o.order_id LIMIT 5 OFFSET %s", [3], "literal LIMIT"),
        ("SELECT o.status, COUNT(*) FROM t_order o GROUP BY o.status HAVING MAX(o.tag) IS NULL", [], "HAVING"),
        ("SELECT * FROM t_order o ORDER BY 2", [], "SELECT *"),
    ],
)
def test_refusals(sql: str, params: list[Any], fragment: str) -> None:
    """Statements the generator avoids: refused loudly across shards (never a wrong answer)."""
    from ddm_core.errors import UnsupportedSQLError
    from ddm_core.route import Router

    urls = {f"ds_{i}": f"sqlite:///unused_{i}.db" for i in range(SHARDS)}
    with pytest.raises(UnsupportedSQLError, match=re.escape(fragment)):
        Router(load_config(oracle_config(urls))).route(sql, params)


def test_having_decimal_literal_is_exact() -> None:
    """MySQL reads 123.45 as an exact DECIMAL: a group whose MAX is 123.45 fails ``< 123.45``."""
    from ddm_core.route import Router

    urls = {f"ds_{i}": f"sqlite:///unused_{i}.db" for i in range(SHARDS)}
    router = Router(load_config(oracle_config(urls)))
    spec = router.route("SELECT o.status, MAX(o.amount) FROM t_order o GROUP BY o.status "
                        "HAVING MAX(o.amount) < 123.45").merge
    assert spec.having is not None
    assert spec.having((1, Decimal("123.45"))) is False
    assert spec.having((1, Decimal("123.44"))) is True
    spec = router.route("SELECT o.status, MAX(o.amount) FROM t_order o GROUP BY o.status "
                        "HAVING MAX(o.amount) < %s", [123.45]).merge  # a float parameter: compared as DOUBLE
    assert spec.having is not None and spec.having((1, Decimal("123.45"))) is False


def test_combined_form_is_what_the_mariadb_oracle_checks(mariadb_backend: Backend, mariadb_per_table_backend: Backend,
                                                         sqlite_backend: Backend) -> None:
    """The default MariaDB backends read each data source's 4 tables in one UNION ALL (so the oracle above
    covers that form); the per-table twin and SQLite (no union form there) send one unit per table."""
    sql = "SELECT o.tag, o.amount FROM t_order o WHERE o.status = %s ORDER BY o.tag, o.amount DESC"
    combined = mariadb_backend.executor.router.route(sql, [1])
    assert len(combined.units) == SHARDS
    assert all(u.sql.count(" UNION ALL ") == TABLES - 1 and u.sql.endswith(" ORDER BY 1, 2 DESC") for u in combined.units)
    assert all(len(u.tables) == TABLES for u in combined.units)
    for other in (mariadb_per_table_backend, sqlite_backend):
        plan = other.executor.router.route(sql, [1])
        assert len(plan.units) == SHARDS * TABLES and not any("UNION" in u.sql for u in plan.units)
