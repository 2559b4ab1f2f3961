"""Cross-node SELECTs (docs/cross-node-queries.md) against the same statement on one unsharded database.

MariaDB on 127.0.0.1:3306 (root, no password). The module creates, and drops at
the end, three databases (tests/services.py's ``fresh_mariadb_databases``): two
data sources and one unsharded database holding every row. Sharded layout
(MOD over ``ds_0``, ``ds_1``):

* ``t_order`` (10 000 orders of 1 000 users) by ``user_id``, 2 tables per data source;
* ``t_order_item`` bound to ``t_order`` (``bindTo``: the same layout, sharded by ``user_id``);
* ``t_item`` (30 000 items) by ``order_id``, 2 tables per data source: another layout;
* ``t_item_wide``: the same items by ``order_id`` over 4 tables per data source (how the routed join's
  round trips grow with the tables its keys reach);
* ``t_dim`` (1 000 rows, 37 labels) by ``dim_id``, 1 table per data source.

==============================  ===========================================  ===============================
case                            ddm-core (``dbapi`` cursor, autocommit)      baseline
==============================  ===========================================  ===============================
routed join on another layout   one user's orders joined to their items      the same statement, direct
                                (``t_item`` or ``t_item_wide``), a random    PyMySQL on the unsharded
                                user per call, ``CALLS`` calls a round       database, same users
report join                     10 000 orders ⨝ 1 000-row ``t_dim`` (by      the same, direct PyMySQL
                                ``dim_id``), GROUP BY label, COUNT / SUM
co-located join                 binding join ``t_order`` ⨝ ``t_order_item``  the same through an executor
                                on the shard key, with a shard value         with ``crossNodeQueries:
                                                                             false``; and direct PyMySQL
==============================  ===========================================  ===============================

Every case is a pair (test_bench_executor.py's :func:`measure_pair`): each timed
ddm-core round follows one baseline round, so both see the same load, and
``report.py`` prints the ratio of the medians against the issue's target.
Nothing here asserts a speed.

**Correctness first.** Before a case is timed, every call it makes is run
twice on both sides and the rows compared as multisets, values and Python types
included (tests/test_oracle.py's comparison; none of these statements orders
its rows). A difference fails the test; the verdict also goes to
``extra_info["correctness"]`` for report.py's correctness table.

**Strategy and round trips.** The case's label names the strategy its plan
uses (``RoutePlan.cross_node.strategy``; the co-located join has no cross-node
plan) and the round trips one call makes: every command PyMySQL sends to a
server — part reads, a copy's CREATE / INSERT / DROP, the statement over the
copies, BEGIN / COMMIT of the transaction holding the copies, a pool's ping —
counted by wrapping PyMySQL's ``Connection._execute_command`` (which every
command goes through; the wrapper calls it unchanged) during the second
untimed round of each side: the first learns what is learnt once (the first
merge of the report join asks the server for its columns' collations).
Commands the server does not answer (``COM_STMT_CLOSE``) are not counted.
The counts are per call, averaged over the round's calls (the routed join
reaches as many item tables as the user's order ids do).
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pymysql  # type: ignore[import-untyped]
import pytest
from test_bench_executor import SEED, Paired, _connect, _timed, measure_pair

import ddm_core.dbapi as dbapi
from ddm_core.execute import Executor
from ddm_core.metadata import load_config
from ddm_core.route.plan import RouteKind

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from services import fresh_mariadb_databases  # noqa: E402
from test_oracle import _multiset_same  # noqa: E402  (the oracle's comparison: values and types)

USERS = 1_000
ORDERS = 10_000
ITEMS = 30_000
DIMS = 1_000
LABELS = 37
CALLS = 100  # calls per round of the per-user cases
ROUNDS = 25  # timed rounds per side (after 2 warm-up rounds)
GROUP = "cross-node SELECT"
TABLE = "cross-node SELECT vs one unsharded database (interleaved rounds)"

ROUTED_JOIN = ("SELECT o.order_id, i.sku, i.qty FROM t_order o JOIN t_item i ON i.order_id = o.order_id "
               "WHERE o.user_id = %s")
REPORT_JOIN = ("SELECT d.label, COUNT(*), SUM(o.amount) FROM t_order o JOIN t_dim d ON o.dim_id = d.dim_id "
               "GROUP BY d.label")
COLOCATED_JOIN = ("SELECT o.order_id, oi.sku, oi.qty FROM t_order o JOIN t_order_item oi "
                  "ON oi.user_id = o.user_id AND oi.order_id = o.order_id WHERE o.user_id = %s")

DDL = [
    "CREATE TABLE t_order (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, dim_id INT NOT NULL, "
    "amount DECIMAL(10,2) NOT NULL, KEY idx_user (user_id))",
    "CREATE TABLE t_order_item (item_id BIGINT NOT NULL PRIMARY KEY, order_id BIGINT NOT NULL, "
    "user_id BIGINT NOT NULL, sku INT NOT NULL, qty INT NOT NULL, KEY idx_user_order (user_id, order_id))",
    *(f"CREATE TABLE {t} (item_id BIGINT NOT NULL PRIMARY KEY, order_id BIGINT NOT NULL, sku INT NOT NULL, "
      "qty INT NOT NULL, KEY idx_order (order_id))" for t in ("t_item", "t_item_wide")),
    "CREATE TABLE t_dim (dim_id INT NOT NULL PRIMARY KEY, label VARCHAR(20) NOT NULL)",
]


def crossnode_bench_config(urls: dict[str, str], **runtime: Any) -> Any:
    """The module's layout over ``urls`` (two data sources); ``runtime``: extra runtime settings."""
    names = list(urls)

    def mod(table: str, key: str, tables: int) -> dict[str, Any]:
        return {"logicTable": table, "shardKey": key, "algorithm": "mod", "shardCount": len(names),
                "databases": names, "tablePerShard": tables}

    return load_config({
        "dataSources": {name: {"url": url} for name, url in urls.items()},
        "pool": {"maxSize": 10, "minIdle": 4, "acquireTimeoutMs": 3000},
        "tables": [mod("t_order", "user_id", 2), {"logicTable": "t_order_item", "bindTo": "t_order"},
                   mod("t_item", "order_id", 2), mod("t_item_wide", "order_id", 4),
                   mod("t_dim", "dim_id", 1)],
        "defaultDataSource": names[0],
        "runtime": {"allowFullRoute": True, "fullRouteThreshold": 64, "sqlComment": False, **runtime},
    })


def make_data() -> dict[str, tuple[str, list[tuple[Any, ...]]]]:
    """table → (columns, rows), drawn from ``SEED``."""
    rng = random.Random(SEED)
    orders = [(o, rng.randint(1, USERS), rng.randint(1, DIMS), Decimal(rng.randint(1, 100_000)) / 100)
              for o in range(1, ORDERS + 1)]
    user_of = {o[0]: o[1] for o in orders}
    items = [(i, rng.randint(1, ORDERS), rng.randint(1, 50), rng.randint(1, 5)) for i in range(1, ITEMS + 1)]
    return {
        "t_order": ("order_id, user_id, dim_id, amount", orders),
        "t_item": ("item_id, order_id, sku, qty", items),
        "t_item_wide": ("item_id, order_id, sku, qty", items),
        "t_order_item": ("item_id, order_id, user_id, sku, qty",
                         [(i, o, user_of[o], sku, qty) for i, o, sku, qty in items]),
        "t_dim": ("dim_id, label", [(d, f"label{d % LABELS}") for d in range(1, DIMS + 1)]),
    }


class CrossBench:
    """The sharded tables behind two executors (cross-node queries on and off) and the unsharded database."""

    def __init__(self, urls: dict[str, str], one: str) -> None:
        self.executor = Executor(crossnode_bench_config(urls), max_concurrency=8)
        self.off = Executor(crossnode_bench_config(urls, crossNodeQueries=False), max_concurrency=8)
        self.one = _connect(one)
        self.ddm = dbapi.connect(executor=self.executor, autocommit=True)
        self.ddm_off = dbapi.connect(executor=self.off, autocommit=True)

    def load(self) -> None:
        for ddl in DDL:
            self.executor.execute(ddl).close()
            with self.one.cursor() as cur:
                cur.execute(ddl)
        for table, (columns, rows) in make_data().items():
            insert = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(rows[0]))})"
            with self.ddm.cursor() as cur:
                cur.executemany(insert, rows)
            with self.one.cursor() as cur:
                cur.executemany(insert, rows)
                cur.execute(f"ANALYZE TABLE {table}")
        for executor in (self.executor, self.off):
            executor.warm_up()

    def close(self) -> None:
        for closing in (self.ddm.close, self.ddm_off.close, self.executor.close, self.off.close, self.one.close):
            closing()


@pytest.fixture(scope="module")
def xb() -> Iterator[CrossBench]:
    try:
        _connect().close()
    except Exception as exc:
        pytest.skip(f"MariaDB on 127.0.0.1:3306 is needed for the cross-node benchmarks: {exc}")
    with fresh_mariadb_databases(3) as names:
        bench = CrossBench({f"ds_{i}": f"mysql://root@127.0.0.1:3306/{db}" for i, db in enumerate(names[:2])},
                           names[2])
        try:
            bench.load()
            yield bench
        finally:
            bench.close()


# -- the rounds, the round trips, the check ------------------------------------------------------------

Round = Callable[[], list[list[tuple[Any, ...]]]]


def calls_round(cursor: Any, sql: str, params: Sequence[Sequence[Any]]) -> Round:
    """One round: ``sql`` once per parameter set on ``cursor`` (ddm-core's facade or PyMySQL), rows kept."""

    def run() -> list[list[tuple[Any, ...]]]:
        out = []
        for p in params:
            cursor.execute(sql, p)
            out.append(list(cursor.fetchall()))
        return out

    return run


#: PyMySQL commands the server answers, other than COM_QUERY (whose statement's first word names it).
COMMANDS = {14: "PING", 22: "PREPARE", 31: "RESET", 2: "INIT_DB"}
#: Commands without an answer: no round trip.
UNANSWERED = {1, 25}  # COM_QUIT, COM_STMT_CLOSE


def _command(command: int, sql: Any) -> str | None:
    if command == 3:  # COM_QUERY
        text = sql.decode("utf-8", "replace") if isinstance(sql, (bytes, bytearray)) else str(sql)
        return (text.split(None, 1) or ["?"])[0].upper()
    return None if command in UNANSWERED else COMMANDS.get(command, f"COM_{command}")


@contextmanager
def counting_commands(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every command PyMySQL sends meanwhile (one round trip each), by kind; the real method runs unchanged."""
    connection = pymysql.connections.Connection
    original = connection._execute_command
    sent: list[str] = []

    def spy(conn: Any, command: int, sql: Any) -> Any:
        kind = _command(command, sql)
        if kind is not None:
            sent.append(kind)  # list.append: safe from the executor's threads
        return original(conn, command, sql)

    with monkeypatch.context() as patch:
        patch.setattr(connection, "_execute_command", spy)
        yield sent


def round_trips(sent: list[str], calls: int) -> tuple[float, str]:
    """Round trips per call and their breakdown by kind (``2 SELECT + 1 BEGIN``)."""
    kinds = Counter(sent)
    return len(sent) / calls, " + ".join(f"{n / calls:.3g} {kind}" for kind, n in kinds.most_common())


def checked(monkeypatch: pytest.MonkeyPatch, ddm_round: Round, base_round: Round, calls: int,
            ) -> tuple[str, str, str]:  # fmt: skip
    """Run both rounds twice, the second time with their commands counted; assert the rows are equal call
    by call both times.

    Returns the verdict for the correctness table and each side's round trips (``"3.8 (...)"``).
    """
    wrong: list[int] = []
    for counted in (False, True):
        with counting_commands(monkeypatch) as ddm_sent:
            got = ddm_round()
        with counting_commands(monkeypatch) as base_sent:
            want = base_round()
        assert len(got) == len(want) == calls
        wrong += [k for k, (g, w) in enumerate(zip(got, want)) if not _multiset_same(g, w)]
    rows = sum(map(len, want))
    verdict = (f"the unsharded database's rows ({rows} over {calls} call(s), twice)" if not wrong
               else f"**wrong** in {len(wrong)} of {2 * calls} call(s), e.g. call {wrong[0] % calls}")
    assert not wrong and rows > 0, verdict
    (ddm_n, ddm_kinds), (base_n, base_kinds) = round_trips(ddm_sent, calls), round_trips(base_sent, calls)
    return verdict, f"{ddm_n:.3g} ({ddm_kinds})", f"{base_n:.3g} ({base_kinds})"


def strategy_of(executor: Executor, sql: str, params: Sequence[Any]) -> str:
    plan = executor.router.route(sql, list(params))
    if plan.kind is not RouteKind.CROSS_NODE:
        return f"no cross-node plan ({plan.kind.value}, {len(plan.units)} unit(s))"
    cross = plan.cross_node
    parts = cross.statement.parts
    reads = ", ".join(f"{parts[k].table} " + ("narrowed" if k in cross.narrow else f"{cross.widths[k]} unit(s)")
                      for k in cross.order)
    return f"{cross.strategy}; {len(cross.order)} part read(s): {reads}"


def users(seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randint(1, USERS)] for _ in range(CALLS)]


# -- the cases -------------------------------------------------------------------------------------


@pytest.mark.parametrize("items", ["t_item", "t_item_wide"])
def test_routed_join_other_layout(xb: CrossBench, benchmark: Any, monkeypatch: pytest.MonkeyPatch,
                                  items: str) -> None:
    """One user's orders (``t_order`` by ``user_id``) joined to their items (sharded by ``order_id``)."""
    params = users(SEED + 1)
    sql = ROUTED_JOIN.replace("t_item", items)
    ddm_round = calls_round(xb.ddm.cursor(), sql, params)
    base_round = calls_round(xb.one.cursor(), sql, params)
    verdict, ddm_trips, base_trips = checked(monkeypatch, ddm_round, base_round, CALLS)
    how = strategy_of(xb.executor, sql, params[0])
    layout = "2 × 2 item tables" if items == "t_item" else "2 × 4 item tables"
    measure_pair(benchmark, ddm_round, Paired(_timed(base_round)),
                 case=f"routed join on another layout ({layout}) — {how}; round trips/call {ddm_trips} "
                      f"vs {base_trips}",
                 target="<= 1.5", items=CALLS, unit="call", rounds=ROUNDS, group=GROUP, table=TABLE,
                 correctness={"ddm-core": verdict}, strategy=how, round_trips=ddm_trips,
                 baseline_round_trips=base_trips)


def test_report_join(xb: CrossBench, benchmark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """10 000 orders ⨝ the 1 000-row ``t_dim`` sharded by ``dim_id``, grouped by its label."""
    ddm_round = calls_round(xb.ddm.cursor(), REPORT_JOIN, [()])
    base_round = calls_round(xb.one.cursor(), REPORT_JOIN, [()])
    verdict, ddm_trips, base_trips = checked(monkeypatch, ddm_round, base_round, 1)
    assert len(ddm_round()[0]) == LABELS
    how = strategy_of(xb.executor, REPORT_JOIN, ())
    measure_pair(benchmark, ddm_round, Paired(_timed(base_round)),
                 case=f"report join — {how}; round trips/call {ddm_trips} vs {base_trips}",
                 target="<= 3", items=1, unit="call", rounds=ROUNDS, group=GROUP, table=TABLE,
                 correctness={"ddm-core": verdict}, strategy=how, round_trips=ddm_trips,
                 baseline_round_trips=base_trips)


@pytest.mark.parametrize("baseline", ["crossNodeQueries false", "direct PyMySQL"])
def test_colocated_join(xb: CrossBench, benchmark: Any, monkeypatch: pytest.MonkeyPatch, baseline: str) -> None:
    """The binding join on the shard key with a shard value: the plan it had before cross-node queries."""
    params = users(SEED + 2)
    for p in params[:20]:  # the same plan with cross-node queries on and off: one unit, the same SQL
        on, off = xb.executor.router.route(COLOCATED_JOIN, p), xb.off.router.route(COLOCATED_JOIN, p)
        assert on.kind is off.kind and on.kind is not RouteKind.CROSS_NODE and len(on.units) == 1
        assert [(u.data_source, u.sql, list(u.params)) for u in on.units] == \
               [(u.data_source, u.sql, list(u.params)) for u in off.units]
    ddm_round = calls_round(xb.ddm.cursor(), COLOCATED_JOIN, params)
    base_cursor = xb.ddm_off.cursor() if baseline == "crossNodeQueries false" else xb.one.cursor()
    base_round = calls_round(base_cursor, COLOCATED_JOIN, params)
    verdict, ddm_trips, base_trips = checked(monkeypatch, ddm_round, base_round, CALLS)
    if baseline == "crossNodeQueries false":  # also against the unsharded rows, not only the other executor
        checked(monkeypatch, ddm_round, calls_round(xb.one.cursor(), COLOCATED_JOIN, params), CALLS)
    how = strategy_of(xb.executor, COLOCATED_JOIN, params[0])
    measure_pair(benchmark, ddm_round, Paired(_timed(base_round)),
                 case=f"co-located join vs {baseline} — {how}; round trips/call {ddm_trips} vs {base_trips}",
                 target="<= 1.05" if baseline == "crossNodeQueries false" else "", items=CALLS, unit="call",
                 rounds=ROUNDS, group=GROUP, table=TABLE, correctness={f"ddm-core (vs {baseline})": verdict},
                 strategy=how, round_trips=ddm_trips, baseline_round_trips=base_trips)
