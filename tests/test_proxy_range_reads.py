"""Multi-unit range reads through ``ddm proxy`` answer what one unsharded table holding every row answers.

sysbench ``oltp_read_only``'s four range reads (a plain range, ``SUM``, ``ORDER BY``, ``DISTINCT ... ORDER
BY``) plus ``COUNT``/``MIN``/``MAX``, over a table sharded by ``id`` on 2 data sources × 2 tables (slots, as
the benchmark's ``sbtest1``): every range spans several tables. Data with NULLs, ties and mixed-case text
under a case-insensitive collation; random ranges (hypothesis); PyMySQL (text protocol, in autocommit, in
a transaction whose range read comes first, and in one whose point selects pinned both data sources first)
and mysql-connector prepared statements (binary protocol). Values and their Python types must match; rows
whose order SQL leaves open (a plain range, ties under the collation) are compared as multisets, and ordered
reads by their collation keys in order. Each mode runs its own proxy, whose count at its end says the reads
went from the event loop (docs/proxy.md#multi-unit-reads-on-the-loop) where they may.
"""

from __future__ import annotations

import random
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddm_core import load_config
from ddm_core.execute import Executor
from services import fresh_mariadb_databases
from test_proxy_support import PASSWORD, USER, ProxyProcess, connect, proxy_config, write_config

ROWS = 600
DDL = ("CREATE TABLE t_range (id INTEGER NOT NULL, k INTEGER NULL, "
       "c VARCHAR(24) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL, PRIMARY KEY (id))")  # fmt: skip
WORDS = ["apple", "Apple", "APPLE", "banana", "Banana", "cherry", "b", "B", "", "zeta", "Zeta", "a b", "A B"]
QUERIES = {
    "plain": "SELECT c FROM t_range WHERE id BETWEEN ? AND ?",
    "sum": "SELECT SUM(k) FROM t_range WHERE id BETWEEN ? AND ?",
    "aggregates": "SELECT COUNT(k), COUNT(*), MIN(k), MAX(k), SUM(k) FROM t_range WHERE id BETWEEN ? AND ?",
    "order": "SELECT c FROM t_range WHERE id BETWEEN ? AND ? ORDER BY c",
    "order_desc": "SELECT c, k FROM t_range WHERE id BETWEEN ? AND ? ORDER BY c DESC, k",
    "distinct": "SELECT DISTINCT c FROM t_range WHERE id BETWEEN ? AND ? ORDER BY c",
}


def _rows() -> list[tuple[Any, ...]]:
    rnd = random.Random(28)
    return [(i, None if rnd.random() < 0.1 else rnd.randint(-50, 50), None if rnd.random() < 0.08 else rnd.choice(WORDS))
            for i in range(1, ROWS + 1)]  # fmt: skip


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Path, str]]:
    """The proxy's configuration over the sharded table, and the database holding the same rows in one table."""
    rows = _rows()
    flat = [v for row in rows for v in row]
    values = ", ".join(["(%s, %s, %s)"] * len(rows))
    with fresh_mariadb_databases(3) as databases:
        config = proxy_config(databases[:2], batchRows=40)  # reads longer than a batch are streamed in batches
        config["tables"].append({"logicTable": "t_range", "shardKey": "id", "algorithm": "slots", "slotCount": 64,
                                 "shardCount": 2, "tablePerShard": 2, "databases": ["ds_0", "ds_1"], "tableKey": "id"})
        config["runtime"] = {"allowFullRoute": True, "allowDmlFullRoute": False, "fullRouteThreshold": 64}
        with Executor(load_config(config), load_schema=False) as ex:
            ex.execute(DDL).close()
            ex.execute("INSERT INTO t_range (id, k, c) VALUES " + values, flat).close()
        direct = pymysql.connect(host="127.0.0.1", user="root", password="", database=databases[2], autocommit=True)
        with direct.cursor() as cur:
            cur.execute(DDL)
            cur.execute("INSERT INTO t_range (id, k, c) VALUES " + values, flat)
        direct.close()
        yield write_config(config, Path(tempfile.mkdtemp(prefix="ddm_range_")) / "proxy.yaml"), databases[2]


Reader = Callable[[str, tuple[int, int]], tuple[list[Any], list[tuple[Any, ...]]]]


def _pymysql_reader(port: int, database: str | None, tx: bool, pin: bool = False) -> tuple[Reader, Any]:
    conn = (connect(port, autocommit=True) if database is None else
            pymysql.connect(host="127.0.0.1", user="root", password="", database=database, autocommit=True))  # fmt: skip

    def read(sql: str, bounds: tuple[int, int]) -> tuple[list[Any], list[tuple[Any, ...]]]:
        with conn.cursor() as cur:
            if tx:
                cur.execute("BEGIN")
            if pin:  # as sysbench's point selects: every data source pinned before the range read
                for key in PINS:
                    cur.execute("SELECT k FROM t_range WHERE id = %s", (key,))
            cur.execute(sql.replace("?", "%s"), bounds)
            rows = list(cur.fetchall())
            names = [d[0] for d in cur.description]
            if tx:
                cur.execute("COMMIT")
        return names, rows

    return read, conn


def _binary_reader(port: int, database: str | None) -> tuple[Reader, Any]:
    from mysql import connector

    options = ({"port": port, "user": USER, "password": PASSWORD, "database": "logic_db"} if database is None
               else {"port": 3306, "user": "root", "password": "", "database": database})  # fmt: skip
    conn = connector.connect(host="127.0.0.1", use_pure=False, autocommit=True, ssl_disabled=True, **options)

    def read(sql: str, bounds: tuple[int, int]) -> tuple[list[Any], list[tuple[Any, ...]]]:
        cur = conn.cursor(prepared=True)
        cur.execute(sql, bounds)
        rows = [tuple(r) for r in cur.fetchall()]
        names = [d[0] for d in cur.description or ()]
        cur.close()
        return names, rows

    return read, conn


def _key(value: Any) -> Any:
    """utf8mb4_general_ci's order for these ASCII words: case folded."""
    return value.lower() if isinstance(value, str) else value


def _typed(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(((type(v).__name__, repr(v)) for row in rows for v in row), key=repr)


def _check(kind: str, proxied: tuple[list[Any], list[tuple[Any, ...]]], direct: tuple[list[Any], list[tuple[Any, ...]]]) -> None:
    (names, got), (want_names, want) = proxied, direct
    assert names == want_names, kind
    if kind in ("plain", "order", "order_desc"):  # the order of rows SQL leaves open: as multisets
        assert sorted(map(repr, got)) == sorted(map(repr, want)), kind
    if kind in ("order", "order_desc", "distinct"):  # ordered by the collation's keys
        assert [tuple(map(_key, r[:1])) for r in got] == [tuple(map(_key, r[:1])) for r in want], kind
    if kind == "distinct":  # one row per collation key, which spelling stands for it is the server's choice
        assert len(got) == len(want)
    if kind == "order_desc":  # the second key breaks the first's ties, NULLs first
        assert [(_key(c), k) for c, k in got] == [(_key(c), k) for c, k in want], kind
    if kind in ("sum", "aggregates"):
        assert got == want, kind
    if kind != "distinct":
        assert _typed(got) == _typed(want), kind


#: Ids whose point selects pin both data sources (slots over 2 data sources x 2 tables).
PINS = range(1, 9)
bounds = st.tuples(st.integers(-5, ROWS + 5), st.integers(0, 250)).map(lambda t: (t[0], t[0] + t[1]))
kinds = st.sampled_from(sorted(QUERIES))


@pytest.mark.parametrize("mode", ["text autocommit", "text transaction", "text transaction pinned", "binary"])
def test_range_reads_through_the_proxy_match_one_table(servers: tuple[Path, str], mode: str) -> None:
    path, database = servers
    proxy = ProxyProcess(path).start()
    port = proxy.port
    pinned = mode == "text transaction pinned"
    if mode == "binary":
        (proxied, a), (direct, b) = _binary_reader(port, None), _binary_reader(0, database)
    else:
        tx, pin = mode != "text autocommit", mode == "text transaction pinned"
        (proxied, a), (direct, b) = _pymysql_reader(port, None, tx, pin), _pymysql_reader(0, database, False)

    loop = _LoopReads()

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(kind=kinds, where=bounds)
    def check(kind: str, where: tuple[int, int]) -> None:
        sql = QUERIES[kind]
        want = direct(sql, where)
        _check(kind, proxied(sql, where), want)
        loop.read(kind, len(want[1]))

    try:
        check()
        for kind, sql in QUERIES.items():  # every kind once over the whole table, past several batches
            want = direct(sql, (0, ROWS + 1))
            _check(kind, proxied(sql, (0, ROWS + 1)), want)
            loop.read(kind, len(want[1]))
    finally:
        a.close()
        b.close()
        assert proxy.terminate() == 0
    # Where they ran (every BETWEEN here routes to the 4 tables: a slot range is not enumerated): see _LoopReads;
    # in a transaction whose data sources are not pinned yet (the range read comes first there) the loop opens
    # the transaction on them first (docs/proxy.md#transactions-on-the-loop), or leaves the read to a worker when
    # a data source has no idle connection ready (counted with those send_many declines below)
    counted = re.search(r"(\d+) backend connection\(s\) were still borrowed at close.*?"
                        r"(\d+) multi-unit read\(s\) on the event loop, (\d+) of them relayed, (\d+) merged in order",
                        proxy.stderr)  # fmt: skip
    assert counted is not None, proxy.stderr
    borrowed, many, relayed, merged = map(int, counted.groups())
    assert borrowed == 0, proxy.stderr
    # At most what the rules allow (exact); fewer by the reads send_many declined, which depend on timing
    # and are not counted (no idle connection ready: the top one idle for over 0.5 s is pinged first, on a
    # worker), so most of them. On a transaction's pins nothing is declined: exactly what the rules allow.
    if pinned:
        assert many == loop.most, (loop.most, proxy.stderr)
    assert loop.most * 3 // 4 <= many <= loop.most, (loop.most, proxy.stderr)
    assert loop.most_relayed * 3 // 4 <= relayed <= loop.most_relayed, (loop.most_relayed, proxy.stderr)
    assert loop.most_merged * 3 // 4 <= merged <= loop.most_merged, (loop.most_merged, proxy.stderr)


class _LoopReads:
    """How many multi-unit reads the proxy's rules send from the event loop (docs/proxy.md#multi-unit-reads-on-
    the-loop), read by read: a shape's first read is routed on a worker; a read the loop buffered and merged
    whose units returned a full batch (``batchRows`` = 40) sends the shape's next read to a worker, which
    streams it and hands the shape back to the loop; the plain kind is relayed, text or binary rows (no batch
    counted); the ordered kinds are merged undecoded (proxy/ordered_many.py), a full batch counted as when decoded. A statement shape is its text with its literals as parameters (proxy/literals.py), negative
    bounds included: every read of a kind is one shape. Units' rows: a plain or ordered range's are its
    rows; ``SUM`` and the other aggregates
    give one row a unit; a unit's ``DISTINCT`` at most the 8 values ``WORDS`` has under the collation
    (NULL included), 32 over 4 units: never a full batch."""

    def __init__(self) -> None:
        self.on_worker_next: dict[Any, bool] = {}  # statement shape -> its next read goes to a worker
        self.most = self.most_relayed = self.most_merged = 0

    def read(self, kind: str, rows: int) -> None:
        if self.on_worker_next.get(kind, True):  # a kind's reads are one statement shape
            self.on_worker_next[kind] = False
            return
        self.most += 1
        relayed = kind == "plain"
        self.most_relayed += relayed
        self.most_merged += kind in ("order", "order_desc", "distinct")  # merged undecoded: text ASCII from the space up
        self.on_worker_next[kind] = not relayed and kind in ("plain", "order", "order_desc") and rows >= 40
