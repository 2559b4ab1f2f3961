"""ShardingSphere parity on real MariaDB: statements whose rows need not share a node (docs/cross-node-queries.md).

ShardingSphere's rewrite scenarios exercise two families of statements that
ddm-core used to refuse and now answers across nodes:

* binding-table joins with no shard value: joined on one of the two routing
  columns only, on a bare column, with conditions on non-shard columns only,
  grouped, paged, in subqueries; and a binding pair joined to a table sharded
  another way or to a broadcast table;
* INSERT ... SELECT whose rows leave the node they are read from: into the
  same table with computed keys, from another table, with and without a column
  list, with ``ON DUPLICATE KEY UPDATE`` / ``IGNORE``, from a derived table,
  with LIMIT, grouped, and with keys the key generator fills in.

The statements here are of those shapes, written against two of the
repository's ShardingSphere-format configurations, each pointed at fresh
databases of the local MariaDB (``services.fresh_mariadb_databases``, dropped
afterwards):

* ``configs/ss_crossnode.yaml`` (written for this file): ``t_order`` /
  ``t_order_item`` bound (database by ``user_id``, table by ``order_id``; item
  ids from a SNOWFLAKE generator), ``t_user`` on another layout, ``t_status``
  broadcast;
* ``configs/ss_order_db_2x16.yaml``: ``t_order`` / ``t_order_item`` bound over
  2 x 16 nodes by ``user_id``, broadcast dictionaries.

Each statement runs through :class:`~ddm_core.execute.Executor` over the shards
and as written on one unsharded database holding the same rows, compared with
``test_oracle.check`` (column names, values and Python types; strings by their
``utf8mb4_general_ci`` key). An INSERT ... SELECT is compared by its row count
and by the target table's rows afterwards, and every row it wrote must be
where a query by its shard key looks for it. Some item rows carry a
``user_id`` other than their order's, and some name an order that does not
exist, so a join run node by node would miss pairs. Each statement of the two
families is also routed with ``runtime.crossNodeQueries: false``, where it must
be refused (:class:`~ddm_core.errors.UnsupportedSQLError`) as it used to be;
the co-located controls must not be.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest

from ddm_core import load_config
from ddm_core.errors import ExecutionError, RoutingError, UnsupportedSQLError
from ddm_core.execute import Executor
from ddm_core.execute.result import Result
from ddm_core.execute.schema_load import load_schemas
from ddm_core.metadata.model import ShardingConfig
from ddm_core.route import RouteKind, Router
from ddm_core.route.table_schema import TableSchema
from router_cases import s_node
from services import fresh_mariadb_databases
from test_execute_support import assert_no_leaks, mysql_raw
from test_oracle import MariaDBBackend, Query, check

CONFIGS = Path(__file__).parent / "configs"

Rows = list[tuple[Any, ...]]


# -- configurations pointed at fresh databases ------------------------------------------------------------


def pointed(config: ShardingConfig, databases: Sequence[str]) -> ShardingConfig:
    """``config`` with its data sources (in name order) on the local MariaDB's ``databases``, small pools, and
    DML over every shard allowed (the resets delete whole tables); cross-node queries on (the default)."""
    sources = {}
    for (name, source), database in zip(sorted(config.data_sources.items()), databases, strict=True):
        primary = replace(source.primary, host="127.0.0.1", port=3306, database=database, username="root",
                          password=None, options={})
        sources[name] = replace(source, primary=primary, pool=replace(source.pool, max_size=8, min_idle=1))
    runtime = replace(config.runtime, allow_dml_full_route=True, cross_node_queries=True)
    return replace(config, data_sources=sources, runtime=runtime)


def refused_without_cross_node(data: Dataset, sql: str, params: Sequence[Any]) -> bool:
    """Is ``sql`` refused as it was before cross-node queries (``runtime.crossNodeQueries: false``), by a router
    that knows the tables' columns as the executor's does?"""
    config = data.config
    router = Router(replace(config, runtime=replace(config.runtime, cross_node_queries=False)))
    router.set_schemas(data.schemas)
    try:
        router.route(sql, list(params))
    except UnsupportedSQLError:
        return True
    return False


# -- tables, rows, and the two sides holding them --------------------------------------------------------


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    ddl: str  # through ddm-core: every node (every data source for a broadcast table)
    reference_ddl: str = ""  # on the unsharded reference, when it differs
    broadcast: bool = False
    #: Rows written straight into their node (data source, physical table), computed from the
    #: configuration's formula, where an INSERT through ddm-core cannot place them.
    place: Callable[[tuple[Any, ...]], tuple[str, str]] | None = None


@dataclass
class Dataset:
    """One configuration's tables and rows, sharded (``backend.executor``) and unsharded (``backend.conn``)."""

    backend: MariaDBBackend
    config: ShardingConfig
    tables: dict[str, Table]
    rows: dict[str, Rows]
    schemas: dict[str, TableSchema]  # the tables' columns, as the executor loaded them
    dirty: set[str] = field(default_factory=set)

    @property
    def executor(self) -> Executor:
        return self.backend.executor

    def load(self, table: Table, rows: Rows) -> None:
        """``rows`` into ``table`` through ddm-core and into the reference."""
        if table.place is not None:
            self.place(table, table.place, rows)
            return
        if not table.broadcast:
            self.backend.load(table.name, table.columns, [dict(zip(table.columns, r)) for r in rows])
            return
        sql = f"INSERT INTO {table.name} ({', '.join(table.columns)}) VALUES ({', '.join(['%s'] * len(table.columns))})"
        for row in rows:  # one copy per data source: the row count is not the oracle loader's
            self.executor.execute(sql, list(row)).close()
        self.backend.ref_many(sql, rows)

    def place(self, table: Table, node_of: Callable[[tuple[Any, ...]], tuple[str, str]], rows: Rows) -> None:
        """``rows`` into the physical tables ``node_of`` names, behind ddm-core's back, and into the reference."""
        names, marks = ", ".join(table.columns), ", ".join(["%s"] * len(table.columns))
        by_node: dict[tuple[str, str], Rows] = {}
        for row in rows:
            by_node.setdefault(node_of(row), []).append(row)
        for (source, physical), part in sorted(by_node.items()):
            conn = mysql_raw(self.config.data_sources[source].primary.database)
            try:
                with conn.cursor() as cur:
                    cur.executemany(f"INSERT INTO {physical} ({names}) VALUES ({marks})", part)
            finally:
                conn.close()
        self.backend.ref_many(f"INSERT INTO {table.name} ({names}) VALUES ({marks})", rows)

    def restore(self) -> None:
        """Every table a test wrote holds its original rows again, sharded and in the reference."""
        for name in sorted(self.dirty):
            self.executor.execute(f"DELETE FROM {name}").close()
            self.backend.ref_many(f"DELETE FROM {name}", [()])
            self.load(self.tables[name], self.rows[name])
        self.dirty.clear()

    def on_reference(self, sql: str, params: Sequence[Any]) -> int:
        """Run ``sql`` on the reference; its row count."""
        with self.backend.conn.cursor() as cur:
            cur.execute(sql, list(params) or None)
            return int(cur.rowcount)


@contextlib.contextmanager
def dataset(config_file: str, tables: Sequence[Table], rows: dict[str, Rows]) -> Iterator[Dataset]:
    """``config_file``'s data sources on fresh databases plus a reference database, ``tables`` created and
    filled on both sides; all dropped afterwards, and no pooled connection may stay borrowed."""
    loaded = load_config(CONFIGS / config_file, check_env=False)
    with fresh_mariadb_databases(len(loaded.data_sources) + 1) as names:
        config = pointed(loaded, names[:-1])
        reference = mysql_raw(names[-1])
        executor = Executor(config, timeout=20.0)
        try:
            backend = MariaDBBackend(executor, reference)
            for table in tables:
                executor.execute(table.ddl).close()
                with reference.cursor() as cur:
                    cur.execute(table.reference_ddl or table.ddl)
            schemas = load_schemas(config)  # the columns: an INSERT without a column list needs them
            executor.router.set_schemas(schemas)
            data = Dataset(backend, config, {t.name: t for t in tables}, rows, schemas)
            for table in tables:
                data.load(table, rows[table.name])
            yield data
            assert_no_leaks(executor)
        finally:
            executor.close()
            reference.close()


# -- ss_crossnode.yaml: the binding pair, users on another layout, a broadcast table -----------------------

NAMES = ("ann", "Ann", "bob ", "BOB", "cy", "", None)  # equal pairs under utf8mb4_general_ci
# Multiples of 0.25: sums are exact whatever the order they are added in.
AMOUNTS = (*(Decimal(a) for a in ("0.25", "1.50", "2.00", "9.75", "12.00", "100.00")), None)
STATUSES = (0, 1, 2, 3, None)
QTYS = (0, 1, 2, 3, 5, None)

X_TABLES = (
    Table("t_order", ("order_id", "user_id", "status", "amount"),
          "CREATE TABLE t_order (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, status INT NULL, "
          "amount DECIMAL(10,2) NULL)"),
    # item_id comes from the key generator through ddm-core, from AUTO_INCREMENT on the reference
    Table("t_order_item", ("item_id", "order_id", "user_id", "qty"),
          "CREATE TABLE t_order_item (item_id BIGINT NOT NULL PRIMARY KEY, order_id BIGINT NOT NULL, "
          "user_id BIGINT NOT NULL, qty INT NULL)",
          "CREATE TABLE t_order_item (item_id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, order_id BIGINT NOT NULL, "
          "user_id BIGINT NOT NULL, qty INT NULL)"),
    Table("t_user", ("id", "name", "vip"),
          "CREATE TABLE t_user (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(12) NULL, vip INT NULL)"),
    Table("t_status", ("code", "label"),
          "CREATE TABLE t_status (code INT NOT NULL PRIMARY KEY, label VARCHAR(12) NOT NULL)", broadcast=True),
)


def x_rows(seed: int = 20250702) -> dict[str, Rows]:
    """Users 1-12; orders 1-40 (every ninth of user 99, who does not exist); 0-3 items per order, every
    fifth item of another user than its order's, and items of orders 501 and 502, which do not exist."""
    rng = random.Random(seed)
    users = [(uid, rng.choice(NAMES), rng.choice((0, 1, None))) for uid in range(1, 13)]
    orders = [(oid, rng.randint(1, 12) if oid % 9 else 99, rng.choice(STATUSES), rng.choice(AMOUNTS))
              for oid in range(1, 41)]
    items: Rows = []
    for oid, uid, _, _ in [*orders, (501, 5, None, None), (502, 6, None, None)]:
        for _ in range(rng.choice((0, 1, 2, 3)) if oid < 500 else 1):
            item_id = 1000 + len(items)
            owner = uid % 12 + 1 if item_id % 5 == 0 else uid  # of the other parity: the other data source
            items.append((item_id, oid, owner, rng.choice(QTYS)))
    status = [(0, "new"), (1, "paid"), (2, "Sent "), (3, "DONE")]  # no row for a NULL status
    return {"t_order": orders, "t_order_item": items, "t_user": users, "t_status": status}


@pytest.fixture(scope="module")
def xnode() -> Iterator[Dataset]:
    with dataset("ss_crossnode.yaml", X_TABLES, x_rows()) as data:
        yield data


@dataclass(frozen=True)
class Shape:
    """One statement of a shape ShardingSphere's rewrite scenarios exercise, written for our schemas.

    ``mode``: how rows compare (``test_oracle.Query``); ``refused_before``: refused with
    ``crossNodeQueries: false`` (a family shape) rather than run per node (a control); ``target`` /
    ``generated``: an INSERT's table and the column its key generator fills, if any.
    """

    name: str
    sql: str
    params: tuple[Any, ...] = ()
    mode: str = "multiset"
    refused_before: bool = True
    target: str = ""
    generated: str = ""


BINDING_JOINS = [
    Shape("on the table key only",
          "SELECT o.order_id, o.status, i.item_id, i.qty FROM t_order o "
          "JOIN t_order_item i ON o.order_id = i.order_id"),
    Shape("on the database key only, filtered on a non-shard column",
          "SELECT o.order_id, i.item_id, i.qty FROM t_order o JOIN t_order_item i ON i.user_id = o.user_id "
          "WHERE o.status = %s", (1,)),
    Shape("comma join, star, equality and a non-shard condition in WHERE",
          "SELECT * FROM t_order o, t_order_item i WHERE i.order_id = o.order_id AND o.amount >= %s",
          (Decimal("2.00"),)),
    Shape("ON a bare column",
          "SELECT o.order_id, i.item_id FROM t_order o INNER JOIN t_order_item i ON o.order_id WHERE o.amount = %s",
          (Decimal("9.75"),)),
    Shape("qualified star ordered by the other table's columns",
          "SELECT o.* FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id ORDER BY i.qty DESC, i.item_id",
          mode="total"),
    Shape("grouped by the other table's column",
          "SELECT i.qty, COUNT(*) AS n, SUM(o.amount) AS total, MAX(o.status) FROM t_order o "
          "JOIN t_order_item i ON o.order_id = i.order_id GROUP BY i.qty ORDER BY i.qty", mode="total"),
    Shape("LEFT JOIN, shard values on the preserved side only",
          "SELECT o.order_id, i.item_id, i.qty FROM t_order o LEFT JOIN t_order_item i ON i.order_id = o.order_id "
          "WHERE o.user_id IN (%s, %s)", (3, 4)),
    Shape("RIGHT JOIN on the table key",
          "SELECT o.order_id, o.amount, i.item_id FROM t_order o RIGHT JOIN t_order_item i ON o.order_id = i.order_id"),
    Shape("paged, total order",
          "SELECT o.order_id, o.amount, i.item_id FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
          "ORDER BY o.order_id DESC, i.item_id LIMIT %s, %s", (4, 10), mode="total"),
    Shape("COUNT(DISTINCT) over the database key join",
          "SELECT COUNT(DISTINCT o.user_id), COUNT(DISTINCT i.qty), COUNT(*) FROM t_order o "
          "JOIN t_order_item i ON o.user_id = i.user_id WHERE i.qty IS NOT NULL", mode="total"),
    Shape("DISTINCT",
          "SELECT DISTINCT o.user_id, i.qty FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id"),
    Shape("bound pair joined to a table sharded another way",
          "SELECT u.name, o.order_id, i.item_id FROM t_order o JOIN t_order_item i "
          "ON o.order_id = i.order_id AND o.user_id = i.user_id JOIN t_user u ON u.id = o.user_id WHERE u.vip = %s",
          (1,)),
    Shape("join without shard value, a broadcast table, grouped by its label",
          "SELECT s.label, COUNT(i.item_id), SUM(i.qty) FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
          "JOIN t_status s ON s.code = o.status GROUP BY s.label ORDER BY s.label", mode="total"),
    Shape("tables sharded by different columns, a shard value on one side",
          "SELECT u.id, u.name, o.order_id, o.amount FROM t_user u JOIN t_order o ON u.id = o.user_id "
          "WHERE o.user_id = %s", (5,)),
    Shape("users and their orders, LEFT JOIN across layouts, grouped",
          "SELECT u.id, u.name, COUNT(o.order_id), SUM(o.amount) FROM t_user u LEFT JOIN t_order o ON o.user_id = u.id "
          "GROUP BY u.id, u.name ORDER BY u.id", mode="total"),
    Shape("IN subquery over the bound table",
          "SELECT o.order_id, o.user_id FROM t_order o WHERE o.order_id IN "
          "(SELECT i.order_id FROM t_order_item i WHERE i.qty > %s)", (2,)),
    Shape("correlated subquery inside a derived table",
          "SELECT t.order_id, t.amount FROM (SELECT o.order_id, o.amount FROM t_order o WHERE o.status IN "
          "(SELECT i.qty FROM t_order_item i WHERE i.user_id <> o.user_id)) AS t"),
    Shape("derived table over the join",
          "SELECT t.order_id, t.qty FROM (SELECT o.order_id, i.qty FROM t_order o "
          "JOIN t_order_item i ON o.order_id = i.order_id) t WHERE t.qty > %s", (1,)),
    Shape("OR across the two tables",
          "SELECT o.order_id, i.item_id FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
          "WHERE o.status = %s OR i.qty >= %s", (0, 3)),
    Shape("grouped and ordered by a CASE",
          "SELECT CASE WHEN i.qty > 2 THEN 'many' WHEN i.qty > 0 THEN 'few' ELSE 'none' END AS bucket, COUNT(*) "
          "FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id GROUP BY bucket ORDER BY bucket",
          mode="total"),
    Shape("self join on non-shard columns",
          "SELECT a.order_id, b.order_id FROM t_order a JOIN t_order b ON a.status = b.status "
          "AND a.order_id < b.order_id WHERE a.amount > b.amount"),
    Shape("backquoted names",
          "SELECT `o`.`order_id`, `i`.`qty` FROM `t_order` AS `o` JOIN `t_order_item` AS `i` "
          "ON `o`.`order_id` = `i`.`order_id` WHERE `i`.`qty` = %s", (1,)),
    # co-located controls: run per node, as before
    Shape("control: both routing columns equal",
          "SELECT o.order_id, i.item_id FROM t_order o JOIN t_order_item i "
          "ON o.order_id = i.order_id AND o.user_id = i.user_id", refused_before=False),
    Shape("control: both routing columns equal, with shard values",
          "SELECT o.order_id, i.item_id, i.qty FROM t_order o JOIN t_order_item i "
          "ON o.order_id = i.order_id AND o.user_id = i.user_id WHERE o.user_id = %s AND o.order_id IN (%s, %s)",
          (3, 5, 6), refused_before=False),
    Shape("control: broadcast join",
          "SELECT s.label, COUNT(*) FROM t_order o JOIN t_status s ON s.code = o.status GROUP BY s.label "
          "ORDER BY s.label", mode="total", refused_before=False),
]


def answered(data: Dataset, shape: Shape) -> None:
    """``shape`` was refused without cross-node queries (or, a control, was not), is routed across nodes now
    (a control: as before), and answers as the unsharded database does."""
    assert refused_without_cross_node(data, shape.sql, shape.params) is shape.refused_before
    kind = data.executor.router.route(shape.sql, list(shape.params)).kind
    assert (kind is RouteKind.CROSS_NODE) is shape.refused_before, kind
    check(data.backend, Query(shape.sql, list(shape.params), shape.mode), None)


@pytest.mark.parametrize("shape", BINDING_JOINS, ids=lambda s: s.name)
def test_select_shapes(xnode: Dataset, shape: Shape) -> None:
    xnode.restore()
    answered(xnode, shape)


# -- INSERT ... SELECT ------------------------------------------------------------------------------------

INSERT_SELECTS = [
    Shape("same table, column list, both routing columns computed",
          "INSERT INTO t_order (order_id, user_id, status, amount) SELECT order_id + 1000, user_id + 1, status, amount "
          "FROM t_order WHERE amount > %s", (Decimal("2.00"),), target="t_order"),
    Shape("same table, a shard value read, rows moved to a constant user",
          "INSERT INTO t_order (order_id, user_id, status, amount) SELECT o.order_id + 2000, 7, o.status, o.amount "
          "FROM t_order o WHERE o.user_id = %s", (4,), target="t_order"),
    Shape("same table, no column list",
          "INSERT INTO t_order SELECT order_id + 3000, user_id + 1, status, amount FROM t_order WHERE status = %s",
          (1,), target="t_order"),
    Shape("another layout, grouped, ON DUPLICATE KEY UPDATE",
          "INSERT INTO t_user (id, name, vip) SELECT o.user_id, 'buyer', COUNT(*) FROM t_order o "
          "WHERE o.amount IS NOT NULL GROUP BY o.user_id ON DUPLICATE KEY UPDATE vip = COALESCE(vip, 0) + VALUES(vip)",
          target="t_user"),
    Shape("another layout, INSERT IGNORE over existing and repeated keys",
          "INSERT IGNORE INTO t_user (id, name, vip) SELECT o.user_id, 'ignored', 0 FROM t_order o "
          "WHERE o.status IS NOT NULL", target="t_user"),
    Shape("from a binding join without shard value",
          "INSERT INTO t_user (id, name, vip) SELECT i.item_id + 10000, 'item', i.qty FROM t_order o "
          "JOIN t_order_item i ON o.order_id = i.order_id WHERE o.amount >= %s", (Decimal("1.50"),), target="t_user"),
    Shape("from a derived table joined to the broadcast table",
          "INSERT INTO t_user (id, name, vip) SELECT t.order_id + 20000, t.label, t.status FROM "
          "(SELECT o.order_id, o.status, s.label FROM t_order o JOIN t_status s ON s.code = o.status) AS t "
          "WHERE t.status > %s", (0,), target="t_user"),
    Shape("paged, total order",
          "INSERT INTO t_user (id, name, vip) SELECT o.order_id + 30000, 'paged', o.status FROM t_order o "
          "WHERE o.amount IS NOT NULL ORDER BY o.amount DESC, o.order_id LIMIT 2, 5", target="t_user"),
    Shape("grouped across every shard",
          "INSERT INTO t_user (id, name, vip) SELECT 40000 + o.status, 'status', COUNT(*) FROM t_order o "
          "WHERE o.status IS NOT NULL GROUP BY o.status", target="t_user"),
    Shape("into the bound table, key given, table key computed",
          "INSERT INTO t_order_item (item_id, order_id, user_id, qty) SELECT o.order_id + 90000, o.order_id + 1, "
          "o.user_id, o.status FROM t_order o WHERE o.status IS NOT NULL", target="t_order_item"),
    Shape("into the bound table, key generated, table key computed",
          "INSERT INTO t_order_item (order_id, user_id, qty) SELECT order_id + 500, user_id, status FROM t_order "
          "WHERE amount < %s", (Decimal("10.00"),), target="t_order_item", generated="item_id"),
    Shape("control: into the bound table, key given, routing columns copied",
          "INSERT INTO t_order_item (item_id, order_id, user_id, qty) "
          "SELECT o.order_id + 80000, o.order_id, o.user_id, o.status FROM t_order o WHERE o.amount > %s",
          (Decimal("1.50"),), refused_before=False, target="t_order_item"),
]

#: The routing columns are copied, but the key generator's column is left out: run per node, every
#: node's INSERT ... SELECT would reach MariaDB without ``item_id`` (error 1364). It is refused per node
#: and answered across nodes, each row getting a generated key as a plain INSERT's would.
GENERATED_PER_NODE = Shape(
    "into the bound table, key generated, routing columns copied",
    "INSERT INTO t_order_item (order_id, user_id, qty) SELECT order_id, user_id, status FROM t_order "
    "WHERE amount < %s", (Decimal("10.00"),), refused_before=True, target="t_order_item", generated="item_id")

#: Shapes the first cut of cross-node queries still refused: REPLACE ... SELECT into another layout, and
#: an INSERT ... SELECT that copies its routing columns but picks its rows across nodes with LIMIT.
REPLACE_AND_LIMIT = [
    Shape("replace ... select into another layout",
          "REPLACE INTO t_user (id, name, vip) SELECT o.order_id + 60000, 'replaced', o.status FROM t_order o",
          (), refused_before=True, target="t_user"),
    Shape("routing columns copied, rows picked by LIMIT across nodes",
          "INSERT INTO t_order_item (item_id, order_id, user_id, qty) SELECT o.order_id + 70000, o.order_id, "
          "o.user_id, o.status FROM t_order o ORDER BY o.order_id LIMIT 3", (), refused_before=True,
          target="t_order_item"),
]


def written(data: Dataset, shape: Shape, result: Result, want_count: int) -> None:
    """After ``shape`` ran on both sides: the same row count, the same rows in its target (the generated key
    column aside: its new values must be the keys the statement reported), each row where its shard key
    routes a query."""
    assert result.rowcount == want_count, (result.rowcount, want_count)
    table = data.tables[shape.target]
    columns = [c for c in table.columns if c != shape.generated]
    check(data.backend, Query(f"SELECT {', '.join(columns)} FROM {table.name}", [], "multiset"), None)
    if shape.generated:
        with data.executor.execute(f"SELECT {shape.generated} FROM {table.name}") as r:
            keys = [row[0] for row in r.fetchall()]
        before = {row[table.columns.index(shape.generated)] for row in data.rows[table.name]}
        new = sorted(set(keys) - before)
        assert len(keys) == len(set(keys)), "a generated key is repeated"
        assert sorted(result.generated_keys) == new and len(new) == want_count, (result.generated_keys, new)
        assert result.lastrowid == result.generated_keys[0]
    sharded = data.config.table(table.name)
    assert sharded is not None
    keys_sql = ", ".join(sharded.sharding_columns)
    where = " AND ".join(f"{c} = %s" for c in sharded.sharding_columns)
    with data.backend.conn.cursor() as cur:
        cur.execute(f"SELECT {keys_sql}, COUNT(*) FROM {table.name} GROUP BY {keys_sql}")
        expected = list(cur.fetchall())
    for *key, count in expected:
        sql = f"SELECT COUNT(*) FROM {table.name} WHERE {where}"
        assert len(data.executor.router.route(sql, key).units) == 1
        with data.executor.execute(sql, key) as r:
            assert r.fetchall() == [(count,)], (table.name, key)


def insert_select(data: Dataset, shape: Shape) -> None:
    """``shape`` was refused without cross-node queries (a control: was not), and writes what it writes on the
    unsharded database."""
    assert refused_without_cross_node(data, shape.sql, shape.params) is shape.refused_before
    if shape.refused_before:
        assert data.executor.router.route(shape.sql, list(shape.params)).kind is RouteKind.CROSS_NODE
    data.dirty.add(shape.target)
    with data.executor.execute(shape.sql, list(shape.params)) as result:
        pass
    written(data, shape, result, data.on_reference(shape.sql, shape.params))


@pytest.mark.parametrize("shape", INSERT_SELECTS, ids=lambda s: s.name)
def test_insert_select_shapes(xnode: Dataset, shape: Shape) -> None:
    xnode.restore()
    insert_select(xnode, shape)


@pytest.mark.parametrize("shape", [GENERATED_PER_NODE, *REPLACE_AND_LIMIT], ids=lambda s: s.name)
def test_insert_select_shapes_refused_by_the_first_cut(xnode: Dataset, shape: Shape) -> None:
    xnode.restore()
    insert_select(xnode, shape)


def test_insert_select_in_a_callers_xa_transaction(xnode: Dataset) -> None:
    """Inside the caller's XA transaction: nothing of it stays after a rollback; after a commit, all of it."""
    shape = INSERT_SELECTS[5]  # its SELECT is itself across nodes
    xnode.restore()
    xnode.dirty.add(shape.target)
    with pytest.raises(ZeroDivisionError):
        with xnode.executor.transaction("xa") as tx:
            with tx.execute(shape.sql, list(shape.params)) as result:
                assert result.rowcount > 0
            raise ZeroDivisionError  # the block fails: everything rolls back
    check(xnode.backend, Query("SELECT id, name, vip FROM t_user", [], "multiset"), None)  # reference untouched
    with xnode.executor.transaction("xa") as tx:
        with tx.execute(shape.sql, list(shape.params)) as result:
            pass
    written(xnode, shape, result, xnode.on_reference(shape.sql, shape.params))


# -- ss_order_db_2x16.yaml: the bound pair over 2 x 16 nodes --------------------------------------------

def item_node(row: tuple[Any, ...]) -> tuple[str, str]:
    """Where ss_order_db_2x16.yaml's reads look for an item of ``user_id`` (``row[2]``): the node of an order of
    that user (``router_cases.s_node``). An INSERT through ddm-core cannot put it there: see
    :func:`test_order_db_2x16_item_insert_routes_as_its_reads`."""
    node = s_node(row[2])
    return node.ds, node.table("t_order_item")


ORDER_DB_TABLES = (
    Table("t_order", ("order_id", "user_id", "status", "amount", "region"),
          "CREATE TABLE t_order (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, status INT NULL, "
          "amount DECIMAL(10,2) NULL, region VARCHAR(4) NULL)"),
    Table("t_order_item", ("item_id", "order_id", "user_id", "qty"),
          "CREATE TABLE t_order_item (item_id BIGINT NOT NULL PRIMARY KEY, order_id BIGINT NOT NULL, "
          "user_id BIGINT NOT NULL, qty INT NULL)", place=item_node),
    Table("t_dict_region", ("code", "name"),
          "CREATE TABLE t_dict_region (code VARCHAR(4) NOT NULL PRIMARY KEY, name VARCHAR(12) NOT NULL)",
          broadcast=True),
)


def order_db_rows(seed: int = 20250703) -> dict[str, Rows]:
    """80 orders of users 0-63 (every node), 0-3 items each, one in six of another user than its order's."""
    rng = random.Random(seed)
    ids = rng.sample(range(1, 10**6), 80 + 240)
    orders = [(oid, rng.randint(0, 63), rng.choice(STATUSES), rng.choice(AMOUNTS), rng.choice(("r1", "r2", "r3", None)))
              for oid in ids[:80]]
    items: Rows = []
    for oid, uid, *_ in orders:
        for _ in range(rng.choice((0, 1, 2, 3))):
            owner = rng.randint(0, 63) if len(items) % 6 == 0 else uid
            items.append((ids[80 + len(items)], oid, owner, rng.choice(QTYS)))
    regions = [("r1", "north"), ("r2", "North"), ("r3", "south")]  # north and North: one group
    return {"t_order": orders, "t_order_item": items, "t_dict_region": regions}


@pytest.fixture(scope="module")
def order_db() -> Iterator[Dataset]:
    with dataset("ss_order_db_2x16.yaml", ORDER_DB_TABLES, order_db_rows()) as data:
        yield data


ORDER_DB_JOINS = [
    Shape("on order_id only, a non-shard condition",
          "SELECT o.order_id, o.user_id, i.item_id, i.user_id FROM t_order o JOIN t_order_item i "
          "ON o.order_id = i.order_id WHERE o.status = %s", (2,)),
    Shape("on order_id only, joined to a broadcast dictionary, grouped",
          "SELECT r.name, COUNT(DISTINCT o.order_id), SUM(i.qty) FROM t_order o JOIN t_order_item i "
          "ON i.order_id = o.order_id JOIN t_dict_region r ON r.code = o.region GROUP BY r.name ORDER BY r.name",
          mode="total"),
    Shape("ON a bare column, conditions on both sides",
          "SELECT o.order_id, i.item_id FROM t_order o JOIN t_order_item i ON o.order_id "
          "WHERE o.amount = %s AND i.qty = %s", (Decimal("100.00"), 5)),
    Shape("qualified star, paged by the other table's columns",
          "SELECT o.* FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
          "ORDER BY i.qty, i.item_id LIMIT 10", mode="total"),
    Shape("LEFT JOIN with a condition on the optional side, grouped by it",
          "SELECT i.qty, COUNT(*) FROM t_order o LEFT JOIN t_order_item i ON i.order_id = o.order_id AND i.qty > %s "
          "GROUP BY i.qty ORDER BY i.qty", (1,), mode="total"),
    Shape("correlated EXISTS on order_id",
          "SELECT o.user_id, COUNT(*) FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i "
          "WHERE i.order_id = o.order_id AND i.user_id <> o.user_id) GROUP BY o.user_id ORDER BY o.user_id",
          mode="total"),
    Shape("control: joined on the shard key",
          "SELECT o.order_id, i.item_id FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id "
          "AND o.order_id = i.order_id", refused_before=False),
]


@pytest.mark.parametrize("shape", ORDER_DB_JOINS, ids=lambda s: s.name)
def test_order_db_2x16_joins(order_db: Dataset, shape: Shape) -> None:
    order_db.restore()
    answered(order_db, shape)


def test_order_db_2x16_insert_select(order_db: Dataset) -> None:
    """Items copied into the order table, a new order per item, of the next user: on another node."""
    shape = Shape("from the bound table, both keys taken from other columns",
                  "INSERT INTO t_order (order_id, user_id, status, amount, region) SELECT i.item_id, i.user_id + 1, "
                  "i.qty, NULL, 'r9' FROM t_order_item i WHERE i.qty IS NOT NULL", target="t_order")
    order_db.restore()
    insert_select(order_db, shape)


def test_order_db_2x16_item_insert_routes_as_its_reads(order_db: Dataset) -> None:
    """ss_order_db_2x16.yaml gives t_order_item the table algorithm ``t_order_${user_id % 16}``. Reads, UPDATE
    and DELETE of the bound table route through t_order's (``t_order_item_5`` for user 5); an INSERT did
    evaluate the item's own and was refused (RoutingError: ``t_order_5`` is not among the item tables). A row
    must be written where it is read: the INSERT routes through t_order's too (route/insert/insert.py
    ``routing_table``), one row and several, and the row is read back where it was written."""
    order_db.restore()
    ex = order_db.executor
    one = "INSERT INTO t_order_item (item_id, order_id, user_id, qty) VALUES (%s, %s, %s, %s)"
    many = "INSERT INTO t_order_item (item_id, order_id, user_id, qty) VALUES (%s, %s, %s, %s), (%s, %s, %s, %s)"
    for user in (5, 6, 21):
        (read,) = ex.router.route("SELECT qty FROM t_order_item WHERE user_id = %s", [user]).units
        try:
            units = ex.router.route(one, [900 + user, 8, user, 1]).units
        except RoutingError as exc:
            raise AssertionError(f"refused: {exc}") from exc
        assert [(u.data_source, dict(u.tables)["t_order_item"]) for u in units] == [
            (read.data_source, dict(read.tables)["t_order_item"])], user
    order_db.dirty.add("t_order_item")
    try:
        ex.execute(one, [905, 8, 5, 1]).close()  # the one-row fast path
        ex.execute(many, [906, 8, 6, 2, 921, 9, 21, 3]).close()  # rows of two nodes
        for user, item, qty in ((5, 905, 1), (6, 906, 2), (21, 921, 3)):
            got = ex.execute("SELECT item_id, qty FROM t_order_item WHERE user_id = %s AND item_id = %s", [user, item])
            assert got.fetchall() == [(item, qty)], (user, item)
    finally:
        order_db.restore()


def test_the_data_would_lose_pairs_node_by_node(xnode: Dataset, order_db: Dataset) -> None:
    """The rows make the family shapes fail when run per node: items of another user than their order's,
    and items of orders that do not exist."""
    for data in (xnode, order_db):
        user_of = {row[0]: row[1] for row in data.rows["t_order"]}
        items = data.rows["t_order_item"]
        assert any(oid in user_of and user_of[oid] != uid for _, oid, uid, _ in items)
    assert any(oid not in {row[0] for row in xnode.rows["t_order"]} for _, oid, _, _ in xnode.rows["t_order_item"])
