"""Shared pieces of the cross-node query tests (no tests here): tables, rows, statements, probes.

Two tables that never share a node by construction: ``t_user`` sharded by
``user_id`` and ``t_order`` sharded by ``order_id`` (both SLOTS over the data
sources x 2 tables), so ``t_order.user_id = t_user.user_id`` pairs rows of
different nodes; ``t_item`` is bound to ``t_order`` (a join on another column
is refused with the condition to add when cross-node queries are off);
``t_event`` is sharded by ``user_id`` with MOD over one table per data source,
so a large part can be written straight into the node each row belongs to.
Each statement of :data:`JOINS` is answered across nodes and compared with
one unsharded copy of the tables (the oracle's backends, tests/test_oracle.py).
"""

from __future__ import annotations

from typing import Any, Sequence

from ddm_core.execute import Executor
from ddm_core.route.plan import RouteKind
from test_oracle import Backend, Query, check

__all__ = [
    "DDL", "USER_COLUMNS", "ORDER_COLUMNS", "ITEM_COLUMNS", "USERS", "ORDERS", "ITEMS", "JOINS", "JOIN_PARAMS",
    "STRATEGIES", "EVENT_ROWS", "COPY_NAMES", "crossnode_config", "create", "reset", "on_reference",
    "check_cross_node", "data_source_of", "key_on", "load_events", "temporary_tables", "copies_left",
]

DDL = (
    "CREATE TABLE t_user (user_id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(20), vip INT)",
    "CREATE TABLE t_order (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT, amount DECIMAL(10,2))",
    "CREATE TABLE t_item (item_id BIGINT NOT NULL PRIMARY KEY, order_id BIGINT NOT NULL, user_id BIGINT, qty INT)",
    "CREATE TABLE t_event (event_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, payload VARCHAR(200))",
)
USER_COLUMNS = ("user_id", "name", "vip")
ORDER_COLUMNS = ("order_id", "user_id", "amount")
ITEM_COLUMNS = ("item_id", "order_id", "user_id", "qty")

USERS = [(1, "ann", 1), (2, "bob", 0), (3, "cy", 1), (4, "dee", None), (5, "eve", 0), (6, "fay", 1),
         (7, "gus", 1), (8, None, 0), (9, "ivy", 0)]  # fmt: skip
# Orders of users on other nodes, of no user (99), without a user (NULL); users 4, 8 and 9 have none.
ORDERS = [(100, 1, "5.25"), (101, 2, "7.00"), (102, 3, "1.50"), (103, 1, "8.00"), (104, 99, "9.75"),
          (105, None, "2.00"), (106, 5, "0.25"), (107, 6, "12.50"), (108, 7, "3.00"), (109, 7, "4.00"),
          (110, 3, None), (111, 2, "6.25")]  # fmt: skip
ITEMS = [(1000, 100, 1, 2), (1001, 100, 1, 1), (1002, 101, 2, 5), (1003, 104, 99, 1), (1004, 108, 7, None),
         (1005, 111, 3, 4)]  # fmt: skip

#: Statements whose rows need not share a node, each answered by the cross-node path.
JOINS = [
    "SELECT u.name, COUNT(*), SUM(o.amount) FROM t_order o JOIN t_user u ON o.user_id = u.user_id GROUP BY u.name",
    "SELECT u.user_id, o.order_id, o.amount FROM t_user u LEFT JOIN t_order o ON o.user_id = u.user_id",
    "SELECT o.order_id, u.name FROM t_order o JOIN t_user u ON o.user_id + 0 = u.user_id WHERE o.amount > 1",
    "SELECT o.order_id FROM t_order o WHERE o.user_id IN (SELECT user_id FROM t_user WHERE vip = 1)",
    "SELECT o.order_id, u.name FROM t_order o JOIN t_user u ON o.user_id = u.user_id WHERE u.user_id = %s",
    "SELECT o.order_id, i.item_id, i.qty FROM t_order o JOIN t_item i ON o.user_id = i.user_id",
    "SELECT u.name, o.order_id, i.qty FROM t_user u JOIN t_order o ON o.user_id = u.user_id "
    "JOIN t_item i ON i.order_id = o.order_id AND i.user_id = o.user_id",
]
JOIN_PARAMS: dict[str, list[Any]] = {JOINS[4]: [7]}

#: How a cross-node plan may say it runs (``RoutePlan.explain`` rows, docs/cross-node-queries.md#strategies).
STRATEGIES = ("batched nested loop", "hash join", "broadcast copy", "client join")

#: Rows of ``t_event`` :func:`load_events` writes, half on each of two data sources.
EVENT_ROWS = 200_000
PAYLOAD = "x" * 100


def crossnode_config(urls: dict[str, Any], **runtime: Any) -> dict[str, Any]:
    """The native configuration over ``urls`` (two data sources); ``runtime``: extra runtime settings."""
    names = list(urls)

    def slots(name: str, key: str) -> dict[str, Any]:
        return {"logicTable": name, "shardKey": key, "algorithm": "slots", "slotCount": 1024,
                "shardCount": len(names), "tablePerShard": 2, "databases": names, "tableKey": key}  # fmt: skip

    return {
        "dataSources": dict(urls),
        "pool": {"maxSize": 6, "minIdle": 1, "acquireTimeoutMs": 3000},
        "tables": [
            slots("t_user", "user_id"), slots("t_order", "order_id"), {"logicTable": "t_item", "bindTo": "t_order"},
            # MOD: user_id % 2 picks ds_0 / ds_1, so rows can be generated on the node that owns them
            {"logicTable": "t_event", "shardKey": "user_id", "algorithm": "MOD", "databases": names},
        ],
        "defaultDataSource": names[0],
        "runtime": {"allowFullRoute": True, "allowDmlFullRoute": True, "fullRouteThreshold": 64,
                    "sqlComment": False, **runtime},  # fmt: skip
    }


def on_reference(backend: Backend, sql: str, params: Sequence[Any] = ()) -> None:
    """Run ``sql`` (``%s`` placeholders) on the backend's unsharded reference (the oracle backends' ``conn``:
    PyMySQL or sqlite3)."""
    cursor = backend.conn.cursor()  # type: ignore[attr-defined]
    try:
        if params:
            cursor.execute(sql if backend.placeholder == "%s" else sql.replace("%s", "?"), list(params))
        else:
            cursor.execute(sql)
    finally:
        cursor.close()


def create(backend: Backend) -> None:
    """The tables through ddm-core (every node) and in the reference."""
    for ddl in DDL:
        backend.executor.execute(ddl).close()
        on_reference(backend, ddl)


def reset(backend: Backend) -> None:
    """``t_user``, ``t_order`` and ``t_item`` hold :data:`USERS`, :data:`ORDERS`, :data:`ITEMS`, sharded and
    in the reference (whatever a test before wrote or failed to roll back)."""
    for table, columns, rows in (("t_user", USER_COLUMNS, USERS), ("t_order", ORDER_COLUMNS, ORDERS),
                                 ("t_item", ITEM_COLUMNS, ITEMS)):  # fmt: skip
        backend.executor.execute(f"DELETE FROM {table}").close()
        on_reference(backend, f"DELETE FROM {table}")
        backend.load(table, columns, [dict(zip(columns, row)) for row in rows])


def check_cross_node(backend: Backend, sql: str, params: Sequence[Any] = ()) -> None:
    """``sql`` is answered across nodes, with the rows (and Python types) of the unsharded tables."""
    text = sql if backend.placeholder == "%s" else sql.replace("%s", "?")
    plan = backend.executor.router.route(text, list(params))
    assert plan.kind is RouteKind.CROSS_NODE, (sql, plan.kind)
    check(backend, Query(sql, list(params), "multiset"), None)


def data_source_of(executor: Executor, table: str, column: str, value: Any) -> str:
    """Where the row of ``table`` whose shard key ``column`` is ``value`` lives, as the router says."""
    (unit,) = executor.router.route(f"SELECT * FROM {table} WHERE {column} = %s", [value]).units
    return unit.data_source


def key_on(executor: Executor, table: str, column: str, data_source: str, start: int) -> int:
    """The first value from ``start`` up whose row of ``table`` lives on ``data_source``."""
    for value in range(start, start + 1000):
        if data_source_of(executor, table, column, value) == data_source:
            return value
    raise AssertionError(f"no {table}.{column} from {start} lives on {data_source}")


def load_events(executor: Executor) -> None:
    """:data:`EVENT_ROWS` rows of ``t_event``, each written straight into its node by one statement per data
    source (``user_id`` even on ``ds_0``, odd on ``ds_1``: what MOD routes, checked against the router)."""
    assert [key_on(executor, "t_event", "user_id", ds, 0) for ds in ("ds_0", "ds_1")] == [0, 1]
    digits = " UNION ALL ".join(f"SELECT {d}" for d in range(10))
    numbers = "SELECT a.v + 10 * b.v + 100 * c.v + 1000 * d.v + 10000 * e.v AS m FROM t a, t b, t c, t d, t e"
    for parity, ds in enumerate(("ds_0", "ds_1")):
        with executor.transaction() as tx:  # a connection of that data source, committed at the end
            cursor = tx.connection(ds).raw.cursor()
            cursor.execute(f"INSERT INTO t_event (event_id, user_id, payload) WITH t (v) AS ({digits}) "
                           f"SELECT 2 * m + {parity}, 2 * m + {parity}, '{PAYLOAD}' FROM ({numbers}) s")  # fmt: skip
            assert cursor.rowcount == EVENT_ROWS // 2
            cursor.close()


# -- no copy outlives its statement ---------------------------------------------------------------------


#: The names a statement's copies take (``ddm_x<k>``, one per part): more than any statement here has parts.
COPY_NAMES = tuple(f"ddm_x{k}" for k in range(8))


def temporary_tables(raw: Any, dialect: str) -> list[str]:
    """The ``ddm_x*`` temporary tables one driver connection holds.

    A temporary table is visible to its own session only. SQLite lists a connection's in
    ``sqlite_temp_master``. MariaDB 10.11 lists them nowhere (``SHOW TABLES`` leaves them out,
    ``information_schema.TEMPORARY_TABLES`` arrives in 11.2, ``INNODB_TEMP_TABLE_INFO`` is not there), so
    each name a copy can have is probed: ``SELECT 1 FROM ddm_xK LIMIT 0`` reads nothing and succeeds only
    when this session has the table (error 1146 otherwise: none of the databases has a table of that name).
    """
    if dialect == "sqlite":
        rows = raw.execute("SELECT name FROM sqlite_temp_master WHERE type = 'table' AND name LIKE 'ddm!_x%' "
                           "ESCAPE '!'").fetchall()  # fmt: skip
        return sorted(str(r[0]) for r in rows)
    found = []
    with raw.cursor() as cursor:
        for name in COPY_NAMES:
            try:
                cursor.execute(f"SELECT 1 FROM `{name}` LIMIT 0")
            except Exception as exc:  # PyMySQL's ProgrammingError
                if exc.args[:1] != (1146,):  # no such table: anything else is not an answer
                    raise
                continue
            found.append(name)
    return found


def copies_left(executor: Executor) -> list[str]:
    """``endpoint: table`` for every ``ddm_x*`` temporary table on any connection idle in ``executor``'s pools.

    Every idle connection of each pool is borrowed at once (so each is a different one), probed
    (:func:`temporary_tables`) and given back; call it when nothing runs (then every connection is idle). A
    pool may have none: a stream abandoned with many rows left is discarded, not pooled.
    """
    found = []
    for pool in executor._pools.pools():
        held = []
        try:
            for _ in range(pool.stats().idle):
                held.append(pool.borrow())
            for borrowed in held:
                tables = temporary_tables(borrowed.raw, pool.driver.dialect.name)
                found += [f"{pool.endpoint.name}: {t}" for t in tables]
        finally:
            for borrowed in held:
                borrowed.release()
    return found

