"""The outbox on a real MariaDB and a real PostgreSQL (and Redis): publish, relay, retry, dead letters, purge, consume once.

Clocks of the relay are injected (no timed assertions); every check reads the
tables behind ddm-core's back.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator

import pytest
from outbox_support import STORE_IDS, STORES, Store, outbox_databases, redis_client, rows, stream_prefix

from ddm_core import load_config
from ddm_core.errors import ConfigError, CrossShardTransactionError, DuplicateKeyError, OutboxError
from ddm_core.execute import Executor
from ddm_core.execute.transaction import Transaction
from ddm_core.outbox import (
    Message,
    RedisStreamSink,
    Relay,
    RelaySettings,
    consume_once,
    dead_letters,
    lock_clause,
    publish,
    requeue,
    sink_from_spec,
)
from ddm_core.outbox.locking import FOR_UPDATE, SKIP_LOCKED
from ddm_core.route.text.sql_hint import on_data_source

T0 = 1_800_000_000.0  # the injected relay clock's start, seconds since the epoch


class FakeClock:
    def __init__(self, start: float = T0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class Collect:
    """A sink that keeps what it got; fails while ``failing`` is set."""

    def __init__(self) -> None:
        self.got: list[Message] = []
        self.failing = False
        self.calls = 0

    def __call__(self, message: Message) -> None:
        self.calls += 1
        if self.failing:
            raise ConnectionError("broker unreachable")
        self.got.append(message)


@pytest.fixture(scope="module", params=STORES, ids=STORE_IDS)
def env(request: pytest.FixtureRequest) -> Iterator[tuple[list[str], dict[str, Any]]]:
    store: Store = request.param
    with outbox_databases(2, store) as found:
        yield found


@pytest.fixture()
def ex(env: tuple[list[str], dict[str, Any]]) -> Iterator[Executor]:
    names, cfg = env
    for db in names:
        for table in ("ddm_outbox", "ddm_consume_log", "t_order", "t_effect"):
            rows(db, f"DELETE FROM {table}")
    with Executor(load_config(cfg), load_schema=False) as executor:
        yield executor


def _order(tx: Transaction, user: int, note: str = "o") -> None:
    tx.execute("INSERT INTO t_order (user_id, amount, note) VALUES (%s, %s, %s)", (user, 1, note)).close()


def _where(ex: Executor, user: int) -> str:
    return ex.router.route("SELECT * FROM t_order WHERE user_id = %s", (user,)).units[0].data_source


def _users_on_both(ex: Executor) -> tuple[int, int]:
    seen: dict[str, int] = {}
    for user in range(1, 100):
        seen.setdefault(_where(ex, user), user)
    return seen["ds_0"], seen["ds_1"]


# -- publish -------------------------------------------------------------------------------------------


def test_publish_commits_with_the_business_row_on_its_data_source(ex: Executor, env: Any) -> None:
    names, _ = env
    u0, u1 = _users_on_both(ex)
    with ex.transaction() as tx:
        _order(tx, u1)
        mid = publish(tx, "orders", '{"user": %d}' % u1, key=u1)
    assert rows(names[1], "SELECT message_id, topic, msg_key, payload, state, attempts FROM ddm_outbox") == [
        (mid, "orders", str(u1), b'{"user": %d}' % u1, "pending", 0)
    ]
    assert rows(names[0], "SELECT COUNT(*) FROM ddm_outbox") == [(0,)]
    # A rolled-back transaction leaves neither the order nor the message.
    with pytest.raises(RuntimeError):
        with ex.transaction() as tx:
            _order(tx, u0)
            publish(tx, "orders", b"x")
            raise RuntimeError("business rule failed")
    assert rows(names[0], "SELECT COUNT(*) FROM ddm_outbox") == [(0,)]
    assert rows(names[0], "SELECT COUNT(*) FROM t_order") == [(0,)]


def test_publish_refusals(ex: Executor) -> None:
    u0, u1 = _users_on_both(ex)
    with ex.transaction() as tx:
        with pytest.raises(OutboxError, match="written nothing yet"):
            publish(tx, "orders", b"x")
        _order(tx, u0)
        with pytest.raises(CrossShardTransactionError):
            publish(tx, "orders", b"x", data_source="ds_1")
        with pytest.raises(OutboxError, match="bytes or str"):
            publish(tx, "orders", {"a": 1})  # type: ignore[arg-type]
        with pytest.raises(OutboxError, match="topic"):
            publish(tx, "", b"x")
        with pytest.raises(OutboxError, match="key"):
            publish(tx, "orders", b"x", key=1.5)  # type: ignore[arg-type]
        tx.rollback()
    # data_source= places a message in a transaction that writes nothing else.
    with ex.transaction() as tx:
        publish(tx, "audit", b"y", data_source="ds_1", message_id="my-own-id")
    with pytest.raises(DuplicateKeyError):
        with ex.transaction() as tx:
            publish(tx, "audit", b"y", data_source="ds_1", message_id="my-own-id")


# -- relay ---------------------------------------------------------------------------------------------


def _publish_many(ex: Executor, n: int) -> list[str]:
    u0, u1 = _users_on_both(ex)
    ids = []
    for i in range(n):
        with ex.transaction() as tx:
            _order(tx, (u0, u1)[i % 2])
            ids.append(publish(tx, "orders", f"m{i}", key=i))
    return ids


def test_relay_delivers_marks_sent_and_keeps_nothing_pending(ex: Executor, env: Any) -> None:
    names, _ = env
    ids = _publish_many(ex, 7)
    sink = Collect()
    relay = Relay(ex, sink, batch_size=3, clock=FakeClock(T0 + 10))
    passes = 0
    while relay.run_once().claimed:
        passes += 1
    assert sorted(m.message_id for m in sink.got) == sorted(ids)
    assert {m.data_source for m in sink.got} == {"ds_0", "ds_1"}
    assert passes == 2, "3 + 3 + 1 messages: two passes over both data sources (4 per data source, 3 per batch)"
    for db in names:
        assert rows(db, "SELECT state, COUNT(*), MIN(sent_ms) FROM ddm_outbox GROUP BY state") == [
            ("sent", len(ids) // 2 + (db == names[0]), int((T0 + 10) * 1000))
        ]
    assert relay.totals.delivered == 7


def test_dead_letter_after_the_16th_failure_then_requeue(ex: Executor, env: Any) -> None:
    names, _ = env
    u0, _ = _users_on_both(ex)
    with ex.transaction() as tx:
        _order(tx, u0)
        mid = publish(tx, "orders", b"doomed")
    clock = FakeClock(T0)
    sink = Collect()
    sink.failing = True
    relay = Relay(ex, sink, clock=clock)  # the defaults: retry after 30 s, 16 attempts
    assert (relay.settings.retry_after, relay.settings.max_attempts) == (30.0, 16)
    for attempt in range(1, 16):
        done = relay.run_once()
        assert (done.failed, done.dead) == (1, 0)
        assert rows(names[0], "SELECT state, attempts, next_attempt_ms FROM ddm_outbox") == [
            ("pending", attempt, int(clock.now * 1000) + 30_000)
        ]
        clock.now += 29.999
        assert relay.run_once().claimed == 0, "not due before 30 s"
        clock.now += 0.001
    assert sink.calls == 15
    done = relay.run_once()
    assert (done.failed, done.dead) == (0, 1), "the 16th failure dead-letters"
    assert rows(names[0], "SELECT state, attempts FROM ddm_outbox") == [("dead", 16)]
    clock.now += 3600
    assert relay.run_once().claimed == 0 and sink.calls == 16, "a dead letter is never tried again"
    letters = dead_letters(ex)
    assert [(d.data_source, d.message_id, d.attempts) for d in letters] == [("ds_0", mid, 16)]
    assert letters[0].last_error == "ConnectionError: broker unreachable"
    assert requeue(ex, ["no-such-id"]) == 0
    assert requeue(ex, [mid], now_ms=int(clock.now * 1000)) == 1
    sink.failing = False
    assert relay.run_once().delivered == 1
    assert [m.message_id for m in sink.got] == [mid]
    assert dead_letters(ex) == []


def test_figures_are_configurable_and_checked(ex: Executor, env: Any) -> None:
    names, _ = env
    u0, _ = _users_on_both(ex)
    with ex.transaction() as tx:
        _order(tx, u0)
        publish(tx, "orders", b"x")
    clock = FakeClock()
    sink = Collect()
    sink.failing = True
    relay = Relay(ex, sink, clock=clock, retry_after=5, max_attempts=2)
    assert relay.run_once().failed == 1
    clock.now += 5
    assert relay.run_once().dead == 1
    assert rows(names[0], "SELECT state, attempts FROM ddm_outbox") == [("dead", 2)]
    for bad in ({"max_attempts": 0}, {"retry_after": -1}, {"batch_size": 2.5}, {"purge_after": float("nan")},
                {"batch_size": True}):
        with pytest.raises(ConfigError) as info:
            RelaySettings(**bad)
        assert next(iter(bad)) in str(info.value)
    with pytest.raises(OutboxError, match="ds_9"):
        Relay(ex, sink, data_sources=["ds_9"])


def test_sent_messages_older_than_7_days_are_purged_in_batches(ex: Executor, env: Any) -> None:
    names, _ = env
    _publish_many(ex, 10)
    clock = FakeClock()
    relay = Relay(ex, Collect(), clock=clock, purge_batch=2, purge_every=0)
    assert relay.run_once().delivered == 10  # the pass purges too: nothing is 7 days old yet
    assert sum(rows(db, "SELECT COUNT(*) FROM ddm_outbox")[0][0] for db in names) == 10
    clock.now += 7 * 86_400  # exactly 7 days: kept
    assert relay.run_once().purged == 0
    clock.now += 0.001
    assert relay.run_once().purged == 10, "5 per data source, 2 rows per DELETE"
    assert sum(rows(db, "SELECT COUNT(*) FROM ddm_outbox")[0][0] for db in names) == 0


def test_pending_and_dead_messages_are_never_purged(ex: Executor, env: Any) -> None:
    names, _ = env
    _publish_many(ex, 2)
    clock = FakeClock()
    sink = Collect()
    sink.failing = True
    relay = Relay(ex, sink, clock=clock, max_attempts=1, purge_every=0)
    assert relay.run_once().dead == 2
    clock.now += 30 * 86_400
    assert relay.purge() == 0
    assert sum(rows(db, "SELECT COUNT(*) FROM ddm_outbox WHERE state = 'dead'")[0][0] for db in names) == 2


def test_skip_locked_on_this_server_lets_two_relays_claim_disjoint_rows(ex: Executor, env: Any) -> None:
    names, _ = env
    with ex.execute(on_data_source("ds_0", "SELECT VERSION()")) as result:
        version = result.fetchone()[0]  # type: ignore[index]
    dialect = ex.config.data_sources["ds_0"].primary.dialect
    assert lock_clause(dialect, version) == SKIP_LOCKED, f"{dialect} {version}"
    assert lock_clause("postgresql", version) == SKIP_LOCKED
    assert lock_clause("mariadb", "10.5.9-MariaDB") == FOR_UPDATE
    assert lock_clause("mysql", "8.0.36") == SKIP_LOCKED and lock_clause("mysql", "5.7.44") == FOR_UPDATE
    assert lock_clause("sqlite", None) == ""
    u0, _ = _users_on_both(ex)
    with ex.transaction() as tx:
        _order(tx, u0)
        first = [publish(tx, "orders", f"m{i}") for i in range(6)]
    # A sink that blocks the first relay's batch while a second relay runs a whole pass.
    inside = threading.Event()
    release = threading.Event()
    got_a: list[str] = []

    def slow(message: Message) -> None:
        got_a.append(message.message_id)
        inside.set()
        assert release.wait(30)

    relay_a = Relay(ex, slow, batch_size=3, data_sources=["ds_0"])
    worker = threading.Thread(target=relay_a.run_once)
    worker.start()
    try:
        assert inside.wait(30)
        sink_b = Collect()
        with Executor(ex.config, load_schema=False) as other:
            done = Relay(other, sink_b, batch_size=3, data_sources=["ds_0"]).run_once()
        assert done.delivered == 3, "the second relay skipped the locked rows instead of waiting"
        assert [m.message_id for m in sink_b.got] == first[3:]
    finally:
        release.set()
        worker.join(30)
    assert got_a == first[:3]
    assert rows(names[0], "SELECT COUNT(*) FROM ddm_outbox WHERE state = 'sent'") == [(6,)]


def test_relay_thread_runs_until_stopped(ex: Executor) -> None:
    ids = _publish_many(ex, 5)
    sink = Collect()
    got_all = threading.Event()

    def sink_call(message: Message) -> None:
        sink(message)
        if len(sink.got) == len(ids):
            got_all.set()

    with Relay(ex, sink_call, poll_interval=0.05) as relay:
        assert got_all.wait(60)
    assert relay.totals.delivered == 5 and sorted(m.message_id for m in sink.got) == sorted(ids)


# -- the Redis Streams sink ----------------------------------------------------------------------------


def test_redis_stream_sink_xadds_every_field(ex: Executor) -> None:
    client = redis_client()
    prefix = stream_prefix()
    try:
        sink = sink_from_spec(f"redis://127.0.0.1:6379/0?prefix={prefix}")
        assert isinstance(sink, RedisStreamSink)
        ids = _publish_many(ex, 4)
        assert Relay(ex, sink).run_once().delivered == 4
        entries = client.xrange(f"{prefix}orders")
        assert sorted(e[1][b"id"].decode() for e in entries) == sorted(ids)
        fields = {e[1][b"id"].decode(): e[1] for e in entries}
        one = fields[ids[1]]
        assert (one[b"topic"], one[b"key"], one[b"payload"]) == (b"orders", b"1", b"m1")
        assert one[b"source"] in (b"ds_0", b"ds_1") and int(one[b"created_ms"]) > 0
        sink.close()
    finally:
        for key in client.scan_iter(f"{prefix}*"):
            client.delete(key)
        client.close()


def test_redis_down_is_a_failed_delivery_not_a_lost_message(ex: Executor, env: Any) -> None:
    names, _ = env
    ids = _publish_many(ex, 2)
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # Nothing listens on port 1; no retries (the client's default backs off for seconds per store).
    dead_port = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    relay = Relay(ex, RedisStreamSink(dead_port), clock=FakeClock())
    assert relay.run_once().failed == 2
    assert sorted(r[0] for db in names for r in rows(db, "SELECT message_id FROM ddm_outbox WHERE "
                                                         "state = 'pending' AND attempts = 1")) == sorted(ids)


def test_sink_spec_errors() -> None:
    for bad in ("kafka://x", "redis://127.0.0.1:6379/0?maxlen=lots", ""):
        with pytest.raises(ConfigError):
            sink_from_spec(bad)


# -- consume once --------------------------------------------------------------------------------------


def test_consume_once_applies_effects_once(ex: Executor, env: Any) -> None:
    names, _ = env
    u0, u1 = _users_on_both(ex)

    def effect(user: int) -> Any:
        def handler(tx: Transaction) -> None:
            tx.execute("INSERT INTO t_effect (user_id, message_id) VALUES (%s, %s)", (user, "m-1")).close()
        return handler

    assert consume_once(ex, "m-1", effect(u1)) is True
    assert consume_once(ex, "m-1", effect(u1)) is False
    assert rows(names[1], "SELECT COUNT(*) FROM t_effect") == [(1,)]
    assert rows(names[1], "SELECT message_id FROM ddm_consume_log") == [("m-1",)]
    # A failing handler records nothing: the next delivery tries again.
    def broken(tx: Transaction) -> None:
        effect(u0)(tx)
        raise ValueError("downstream refused")

    with pytest.raises(ValueError):
        consume_once(ex, "m-2", broken)
    assert rows(names[0], "SELECT COUNT(*) FROM t_effect") == [(0,)]
    assert consume_once(ex, "m-2", effect(u0)) is True
    # With data_source= the id is recorded first; a handler writing elsewhere is refused.
    assert consume_once(ex, "m-3", effect(u0), data_source="ds_0") is True
    assert consume_once(ex, "m-3", effect(u0), data_source="ds_0") is False
    with pytest.raises(CrossShardTransactionError):
        consume_once(ex, "m-4", effect(u1), data_source="ds_0")
    assert rows(names[0], "SELECT message_id FROM ddm_consume_log ORDER BY message_id") == [("m-2",), ("m-3",)]
    # A handler's own duplicate key is the handler's error, not "already consumed".
    def dup(tx: Transaction) -> None:
        tx.execute("INSERT INTO t_order (order_id, user_id) VALUES (1, %s)", (u0,)).close()
        tx.execute("INSERT INTO t_order (order_id, user_id) VALUES (1, %s)", (u0,)).close()

    with pytest.raises(DuplicateKeyError):
        consume_once(ex, "m-5", dup)


def test_consume_once_concurrent_repeats_run_the_effect_once(ex: Executor, env: Any) -> None:
    names, _ = env
    u0, _ = _users_on_both(ex)
    outcomes: list[bool] = []
    barrier = threading.Barrier(4)

    def consumer() -> None:
        barrier.wait()
        outcomes.append(consume_once(
            ex, "same", lambda tx: tx.execute("INSERT INTO t_effect (user_id, message_id) VALUES (%s, 'same')",
                                              (u0,)).close()))

    threads = [threading.Thread(target=consumer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes) == [False, False, False, True]
    assert rows(names[0], "SELECT COUNT(*) FROM t_effect") == [(1,)]
