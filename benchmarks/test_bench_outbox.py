"""outbox: relay throughput (messages/s) against a plain INSERT of the same rows, same run, interleaved.

MariaDB on 127.0.0.1:3306 (root, no password) and, for the Redis case, Redis on
127.0.0.1:6379. The module creates two databases ``ddm_bench_ob_<tag>_0..1``
with the outbox tables (dropped at the end).

Before each timed relay round, ``MESSAGES`` pending messages are put into the
two message tables behind ddm-core's back (untimed); the round is relay passes
(batches of 100, ``FOR UPDATE SKIP LOCKED``) until none is left. The baseline,
run right before each relay round, is the cheapest way to write as many rows:
direct PyMySQL ``executemany`` INSERTs into a plain table, one transaction per
100 rows. The figure is messages per second; ``report.py`` prints the ratio.
Nothing here asserts a speed.

=====================  ====================================================  ====================================
case                   ddm-core                                              baseline (direct PyMySQL)
=====================  ====================================================  ====================================
relay → no-op sink     claim + mark sent per batch, sink does nothing        INSERT the same number of rows
relay → Redis stream   the same, the sink pipelines one XADD per message     INSERT the same number of rows
publish in a tx        ``publish`` + order INSERT per transaction             order INSERT per transaction
=====================  ====================================================  ====================================
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest
from test_bench_executor import Paired, measure_pair

from ddm_core.ddl import execute_ddl, outbox_statements
from ddm_core.execute import Executor
from ddm_core.metadata import load_config
from ddm_core.outbox import Message, RedisStreamSink, Relay, publish

MESSAGES = 4_000
TXS = 300  # transactions per publish round
ROUNDS = 5
BATCH = 100
PLAIN = "CREATE TABLE t_plain (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64), body BLOB)"
ORDER = "CREATE TABLE t_order (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, amount INT NOT NULL)"
PENDING = (
    "INSERT INTO ddm_outbox (message_id, topic, msg_key, payload, state, attempts, next_attempt_ms, created_ms) "
    "VALUES (%s, 'bench', %s, %s, 'pending', 0, 0, 0)"
)


def _connect(database: str | None = None) -> Any:
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", database=database,
                           autocommit=True, ssl_disabled=True, charset="utf8mb4")


class Env:
    def __init__(self, names: list[str]) -> None:
        urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
                for i, db in enumerate(names)}
        self.config = load_config({
            "dataSources": urls,
            "pool": {"maxSize": 4, "minIdle": 1},
            "tables": [{"logicTable": "t_order", "shardKey": "user_id", "algorithm": "mod", "shardCount": 2,
                        "databases": list(urls), "keyGenerator": {"column": "order_id", "type": "snowflake"}}],
            "defaultDataSource": "ds_0",
            "runtime": {"sqlComment": False},
        })
        execute_ddl(self.config, outbox_statements(self.config))
        self.executor = Executor(self.config, load_schema=False)
        self.executor.execute(ORDER).close()
        self.direct = [_connect(db) for db in names]
        with self.direct[0].cursor() as cur:
            cur.execute(PLAIN)

    def fill(self) -> None:
        """MESSAGES pending messages, half per data source (untimed)."""
        for i, conn in enumerate(self.direct):
            rows = [(uuid.uuid4().hex, str(n), b"x" * 200) for n in range(MESSAGES // len(self.direct))]
            conn.begin()
            with conn.cursor() as cur:
                cur.executemany(PENDING, rows)
            conn.commit()

    def plain_round(self) -> float:
        """The baseline: MESSAGES plain INSERTs, 100 per transaction."""
        conn = self.direct[0]
        rows = [(str(n), b"x" * 200) for n in range(BATCH)]
        start = time.perf_counter()
        for _ in range(MESSAGES // BATCH):
            conn.begin()
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO t_plain (k, body) VALUES (%s, %s)", rows)
            conn.commit()
        return time.perf_counter() - start

    def close(self) -> None:
        self.executor.close()
        for conn in self.direct:
            conn.close()


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    try:
        admin = _connect()
    except Exception as exc:
        pytest.skip(f"MariaDB on 127.0.0.1:3306 is needed for the outbox benchmarks: {exc}")
    names = [f"ddm_bench_ob_{uuid.uuid4().hex[:8]}_{i}" for i in range(2)]
    e: Env | None = None
    try:
        with admin.cursor() as cur:
            for db in names:
                cur.execute(f"CREATE DATABASE {db}")
        e = Env(names)
        yield e
    finally:
        if e is not None:
            e.close()
        with admin.cursor() as cur:
            for db in names:
                cur.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.close()


def _drain(relay: Relay) -> None:
    while relay.run_once().claimed:
        pass


def _relay_pair(env: Env) -> Paired:
    def prepare() -> tuple[Any, ...]:
        env.fill()
        return ()

    return Paired(env.plain_round, prepare)


def test_relay_to_noop_sink(env: Env, benchmark: Any) -> None:
    def ignore(message: Message) -> None:
        pass

    relay = Relay(env.executor, ignore, batch_size=BATCH, purge_every=86_400)
    measure_pair(benchmark, lambda: _drain(relay), _relay_pair(env), case="relay → no-op sink (messages/s)",
                 target="", items=MESSAGES, unit="message", rounds=ROUNDS, warmup_rounds=1, higher_is_better=True)


def test_relay_to_redis(env: Env, benchmark: Any) -> None:
    redis = pytest.importorskip("redis")
    client = redis.Redis(host="127.0.0.1", port=6379)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis on 127.0.0.1:6379 is needed: {exc}")
    prefix = f"ddm_bench_{uuid.uuid4().hex[:8]}:"
    relay = Relay(env.executor, RedisStreamSink(client, prefix=prefix), batch_size=BATCH, purge_every=86_400)
    try:
        measure_pair(benchmark, lambda: _drain(relay), _relay_pair(env), case="relay → Redis stream (messages/s)",
                     target="", items=MESSAGES, unit="message", rounds=ROUNDS, warmup_rounds=1,
                     higher_is_better=True)
    finally:
        client.delete(f"{prefix}bench")
        client.close()


def test_publish_in_a_transaction(env: Env, benchmark: Any) -> None:
    ex = env.executor
    conn = env.direct[0]
    counter = iter(range(10**9))

    def plain_round() -> float:
        start = time.perf_counter()
        for _ in range(TXS):
            conn.begin()
            with conn.cursor() as cur:
                cur.execute("INSERT INTO t_plain (k, body) VALUES (%s, %s)", ("o", b"x" * 200))
            conn.commit()
        return time.perf_counter() - start

    def ddm_round() -> None:
        for _ in range(TXS):
            user = next(counter)
            with ex.transaction() as tx:
                tx.execute("INSERT INTO t_order (user_id, amount) VALUES (%s, 1)", (user,)).close()
                publish(tx, "bench", b"x" * 200, key=user)

    measure_pair(benchmark, ddm_round, Paired(plain_round), case="order + publish per transaction (tx/s)",
                 target="", items=TXS, unit="transaction", rounds=ROUNDS, warmup_rounds=1, higher_is_better=True)
