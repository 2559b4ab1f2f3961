"""Relay processes killed with SIGKILL at random points while 10 000 messages flow.

Two ``ddm relay`` processes deliver to a real Redis stream while the test
publishes 10 000 messages (each transaction: an order row and ten messages on
that order's data source). The relays start once a backlog has built up, so
they are busy (between XADD and COMMIT) when they die; every so often, until
everything is sent, one relay is SIGKILLed and started again. Then:

* every published id (recorded only after its transaction committed) is in the
  stream at least once, and nothing else is;
* every row of both outboxes is ``sent``;
* two consumers each read the whole stream (one forwards, one backwards, at the
  same time) through ``consume_once``: each message's effect row exists
  exactly once, counted against the published ids.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from outbox_support import outbox_databases, redis_client, rows, stream_prefix

from ddm_core import load_config
from ddm_core.execute import Executor
from ddm_core.execute.transaction import Transaction
from ddm_core.outbox import consume_once, publish

MESSAGES = 10_000
PER_TX = 10
MIN_KILLS = 12
BACKLOG = 4_000  # published before the relays start
HANG_GUARD_S = 900  # a run that makes no progress fails instead of hanging the suite


def _relay(config: Path, prefix: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ddm_core.cli", "relay", "--config", str(config),
         "--sink", f"redis://127.0.0.1:6379/0?prefix={prefix}", "--poll-interval", "0.05", "--batch-size", "50"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def _pending(names: list[str]) -> int:
    return sum(rows(db, "SELECT COUNT(*) FROM ddm_outbox WHERE state <> 'sent'")[0][0] for db in names)


def test_relay_killed_at_random_points_delivers_everything_and_effects_happen_once(tmp_path: Path) -> None:
    client = redis_client()
    prefix = stream_prefix()
    stream = f"{prefix}orders"
    rng = random.Random(1201)
    with outbox_databases(2) as (names, cfg):
        config_file = tmp_path / "ddm.yaml"
        config_file.write_text(yaml.safe_dump(cfg))
        config = load_config(cfg)
        published: list[str] = []
        publish_errors: list[BaseException] = []

        def publisher() -> None:
            try:
                with Executor(config, load_schema=False) as ex:
                    for t in range(MESSAGES // PER_TX):
                        user = 1 + t % 97
                        with ex.transaction() as tx:
                            tx.execute("INSERT INTO t_order (user_id, amount, note) VALUES (%s, 1, 'o')",
                                       (user,)).close()
                            ids = [publish(tx, "orders", f"order {t} item {i}", key=user) for i in range(PER_TX)]
                        published.extend(ids)  # only once committed
            except BaseException as exc:  # reported by the main thread
                publish_errors.append(exc)

        writer = threading.Thread(target=publisher)
        started = time.monotonic()
        writer.start()
        while len(published) < BACKLOG and writer.is_alive():
            time.sleep(0.05)
        relays = [_relay(config_file, prefix), _relay(config_file, prefix)]
        kills = 0
        try:
            while writer.is_alive() or kills < MIN_KILLS or _pending(names):
                time.sleep(rng.uniform(0.2, 1.2))
                victim = rng.randrange(len(relays))
                relays[victim].send_signal(signal.SIGKILL)
                relays[victim].wait()
                kills += 1
                relays[victim] = _relay(config_file, prefix)
                if time.monotonic() - started > HANG_GUARD_S:
                    pytest.fail(f"no end after {HANG_GUARD_S} s: {_pending(names)} messages not sent")
            writer.join()
            assert not publish_errors, publish_errors
            while _pending(names):
                if time.monotonic() - started > HANG_GUARD_S:
                    pytest.fail(f"relays stopped making progress: {_pending(names)} messages not sent")
                time.sleep(0.2)
        finally:
            for proc in relays:
                proc.send_signal(signal.SIGTERM)
            for proc in relays:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

        try:
            assert len(published) == MESSAGES == len(set(published))
            entries: list[tuple[str, int]] = []
            last = "-"
            while True:
                chunk = client.xrange(stream, min=last, max="+", count=2000)
                if last != "-":
                    chunk = chunk[1:]  # XRANGE's min is inclusive
                if not chunk:
                    break
                entries.extend((f[b"id"].decode(), int(f[b"key"])) for _, f in chunk)
                last = chunk[-1][0].decode()
            delivered = {mid for mid, _ in entries}
            assert delivered == set(published), (
                f"missing {len(set(published) - delivered)}, unknown {len(delivered - set(published))}"
            )
            repeats = len(entries) - len(delivered)
            print(f"\n{kills} relay kills; {len(entries)} stream entries for {MESSAGES} messages ({repeats} repeats)")
            for db in names:
                assert rows(db, "SELECT state, COUNT(*) FROM ddm_outbox GROUP BY state")[0][0] == "sent"

            # Two consumers over the whole stream at once: every message is seen twice or more.
            consume_errors: list[BaseException] = []
            applied = [0, 0]
            with Executor(config, load_schema=False) as ex:

                def consumer(slot: int, order: list[tuple[str, int]]) -> None:
                    try:
                        for mid, user in order:
                            def handler(tx: Transaction, mid: str = mid, user: int = user) -> None:
                                tx.execute("INSERT INTO t_effect (user_id, message_id) VALUES (%s, %s)",
                                           (user, mid)).close()
                            applied[slot] += consume_once(ex, mid, handler)
                    except BaseException as exc:
                        consume_errors.append(exc)

                threads = [threading.Thread(target=consumer, args=(0, entries)),
                           threading.Thread(target=consumer, args=(1, entries[::-1]))]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            assert not consume_errors, consume_errors[:3]
            assert sum(applied) == MESSAGES
            counts: dict[str, int] = {}
            for db in names:
                for mid, n in rows(db, "SELECT message_id, COUNT(*) FROM t_effect GROUP BY message_id"):
                    counts[mid] = counts.get(mid, 0) + n
            assert set(counts) == set(published)
            assert set(counts.values()) == {1}, "an effect applied twice"
            logged = sum(rows(db, "SELECT COUNT(*) FROM ddm_consume_log")[0][0] for db in names)
            assert logged == MESSAGES
        finally:
            client.delete(stream)
            client.close()
