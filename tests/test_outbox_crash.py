"""Relay processes killed with SIGKILL at random points while writers publish — on MariaDB and on PostgreSQL.

The same test runs over both stores. Three writer threads keep running
transactions on a few hot business rows: each locks one hot row, updates it,
deletes it or inserts it again, and publishes five messages on that row's data
source — the first carries the row's state after the write and a version taken
while the row was locked. One transaction in twenty publishes and then rolls
back. Two ``ddm relay`` processes (batches of 10) deliver to a real Redis stream;
they start once a backlog has built up, and eight times, in turn, a relay is
SIGKILLed at a random point of its first half second of claiming and started
again, while the writers go on. The independent reference is what the writers saw commit (or roll back).
Then:

* the stream holds every committed id, at least once, and no id of a rolled
  back transaction;
* every row of both outboxes is ``sent``;
* two consumers read the whole stream at once (one forwards, one backwards)
  through ``consume_once``: each message's effect row exists exactly once, and
  the consumers' copy of the hot rows (the highest version wins) equals the
  business rows, which equal the writers' record of their last commits.
"""

from __future__ import annotations

import itertools
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
from outbox_support import STORE_IDS, STORES, Store, outbox_databases, redis_client, rows, stream_prefix

from ddm_core import load_config
from ddm_core.errors import DdmError
from ddm_core.execute import Executor
from ddm_core.execute.transaction import Transaction
from ddm_core.outbox import consume_once, publish

WRITERS = 3
PER_TX = 5
PAUSE_S = (0.04, 0.12)  # between a writer's transactions: messages keep coming while relays die
HOT = list(range(1, 9))  # user_id = order_id of the hot rows, spread over both data sources
KILLS = 8
KILL_WITHIN_S = 0.5  # a relay dies at a random point of this long once it has begun claiming
BACKLOG = 300  # published before the relays start
MIN_COMMITTED_TX = 60  # fewer would say little
HANG_GUARD_S = 300  # a run that makes no progress fails instead of hanging the suite


class _Rollback(Exception):
    """Raised by a writer after publishing, so its transaction rolls back."""


class RelayProcess:
    """``ddm relay`` as a process; :attr:`claiming` is set once its log says it claims (its start-up is over)."""

    def __init__(self, config: Path, prefix: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ddm_core.cli", "relay", "--config", str(config),
             "--sink", f"redis://127.0.0.1:6379/0?prefix={prefix}", "--poll-interval", "0.05", "--batch-size", "10"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        self.claiming = threading.Event()
        threading.Thread(target=self._read_log, daemon=True).start()

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:  # read to the end, so the relay never blocks on a full pipe
            if "claims with" in line:
                self.claiming.set()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()


def _pending(names: list[str]) -> int:
    return sum(rows(db, "SELECT COUNT(*) FROM ddm_outbox WHERE state <> 'sent'")[0][0] for db in names)


class Writers:
    """Transactions on the hot rows, each publishing the row's new state; records what committed."""

    def __init__(self, ex: Executor) -> None:
        self.ex = ex
        self.versions = itertools.count(1)  # taken only while the row is locked: commit order per row
        self.published: list[str] = []  # ids of committed transactions, appended after COMMIT returned
        self.rolled_back: list[str] = []
        self.last: dict[int, tuple[int, int | None]] = {}  # hot row -> (version, amount) of its last commit
        self.failed = 0  # transactions the server refused (lock conflicts): nothing of them may appear
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()

    def run(self, seed: int) -> None:
        rng = random.Random(seed)
        try:
            for t in itertools.count():
                self._one(rng, f"w{seed} tx{t}")
                if self.stop.wait(rng.uniform(*PAUSE_S)):
                    return
        except BaseException as exc:  # reported by the main thread
            self.errors.append(exc)

    def _one(self, rng: random.Random, name: str) -> None:
        h = rng.choice(HOT)
        ids: list[str] = []
        try:
            with self.ex.transaction() as tx:
                version, amount = self._write_hot_row(tx, h, rng)
                ids.append(publish(tx, "orders", f"{h} {version} {'-' if amount is None else amount}", key=h))
                ids += [publish(tx, "orders", f"{name} item {i}", key=h) for i in range(1, PER_TX)]
                if rng.random() < 0.05:
                    raise _Rollback()
        except _Rollback:
            with self._lock:
                self.rolled_back.extend(ids)
            return
        except DdmError:  # a deadlock or a concurrent insert of the same row: the server rolled it back
            with self._lock:
                self.failed += 1
                self.rolled_back.extend(ids)
            return
        with self._lock:
            self.published.extend(ids)
            if version > self.last.get(h, (0, None))[0]:
                self.last[h] = (version, amount)

    def _write_hot_row(self, tx: Transaction, h: int, rng: random.Random) -> tuple[int, int | None]:
        """Update, delete or re-insert hot row ``h``; its new version and amount (None: deleted)."""
        where = "WHERE user_id = %s AND order_id = %s"
        with tx.execute(f"SELECT amount FROM t_order {where} FOR UPDATE", (h, h)) as result:
            found = result.fetchall()
        delta = rng.randint(1, 9)
        if not found:
            tx.execute("INSERT INTO t_order (order_id, user_id, amount, note) VALUES (%s, %s, %s, 'hot')",
                       (h, h, delta)).close()
            amount: int | None = delta
        elif rng.random() < 0.25:
            tx.execute(f"DELETE FROM t_order {where}", (h, h)).close()
            amount = None
        else:
            tx.execute(f"UPDATE t_order SET amount = amount + %s {where}", (delta, h, h)).close()
            amount = int(found[0][0]) + delta
        return next(self.versions), amount  # after the write: this transaction holds the row's lock


def _consume(ex: Executor, order: list[tuple[str, int, str]], applied: list[int], slot: int,
             errors: list[BaseException]) -> None:
    try:
        for mid, user, payload in order:
            def handler(tx: Transaction, mid: str = mid, user: int = user, payload: str = payload) -> None:
                tx.execute("INSERT INTO t_effect (user_id, message_id) VALUES (%s, %s)", (user, mid)).close()
                fields = payload.split(" ")
                if fields[0] != str(user):  # not a hot-row state message
                    return
                version, amount = int(fields[1]), None if fields[2] == "-" else int(fields[2])
                with tx.execute("SELECT version FROM t_mirror WHERE user_id = %s FOR UPDATE", (user,)) as result:
                    (seen,) = result.fetchone()  # type: ignore[misc]
                if version > int(seen):  # deliveries come in any order: the highest version wins
                    tx.execute("UPDATE t_mirror SET version = %s, amount = %s WHERE user_id = %s",
                               (version, amount, user)).close()
            applied[slot] += consume_once(ex, mid, handler)
    except BaseException as exc:
        errors.append(exc)


@pytest.mark.parametrize("store", STORES, ids=STORE_IDS)
def test_relays_killed_at_random_points_deliver_every_commit_once_in_effect(tmp_path: Path, store: Store) -> None:
    client = redis_client()
    prefix = stream_prefix()
    stream = f"{prefix}orders"
    rng = random.Random(1201)
    with outbox_databases(2, store) as (names, cfg):
        config_file = tmp_path / "ddm.yaml"
        config_file.write_text(yaml.safe_dump(cfg))
        config = load_config(cfg)
        started = time.monotonic()
        with Executor(config, load_schema=False) as ex:
            for h in HOT:
                ex.execute("INSERT INTO t_mirror (user_id, version, amount) VALUES (%s, 0, NULL)", (h,)).close()
            writers = Writers(ex)
            threads = [threading.Thread(target=writers.run, args=(seed,)) for seed in range(WRITERS)]
            for t in threads:
                t.start()
            while len(writers.published) < BACKLOG and any(t.is_alive() for t in threads):
                time.sleep(0.05)
            relays = [RelayProcess(config_file, prefix), RelayProcess(config_file, prefix)]
            try:
                # Writers keep publishing while each relay in turn dies at a random point of its work.
                for kills in range(1, KILLS + 1):
                    victim = relays[kills % 2]
                    assert victim.claiming.wait(HANG_GUARD_S), "a relay never began claiming"
                    time.sleep(rng.uniform(0, KILL_WITHIN_S))
                    victim.kill()
                    relays[kills % 2] = RelayProcess(config_file, prefix)
                writers.stop.set()
                for t in threads:
                    t.join()
                assert not writers.errors, writers.errors[:3]
                while _pending(names):
                    if time.monotonic() - started > HANG_GUARD_S:
                        pytest.fail(f"relays stopped making progress: {_pending(names)} messages not sent")
                    time.sleep(0.1)
                elapsed = time.monotonic() - started
            finally:
                writers.stop.set()
                for relay in relays:
                    relay.stop()

        try:
            published = set(writers.published)
            committed_tx = len(writers.published) // PER_TX
            assert len(published) == len(writers.published) and committed_tx >= MIN_COMMITTED_TX, (
                f"{committed_tx} transactions committed, {writers.failed} refused: too few to mean anything"
            )
            entries: list[tuple[str, int, str]] = []
            last = "-"
            while True:
                chunk = client.xrange(stream, min=last, max="+", count=2000)
                if last != "-":
                    chunk = chunk[1:]  # XRANGE's min is inclusive
                if not chunk:
                    break
                entries.extend((f[b"id"].decode(), int(f[b"key"]), f[b"payload"].decode()) for _, f in chunk)
                last = chunk[-1][0].decode()
            delivered = {mid for mid, _, _ in entries}
            assert not delivered & set(writers.rolled_back), "a message of a rolled-back transaction was delivered"
            assert delivered == published, (
                f"lost {len(published - delivered)}, unknown {len(delivered - published)}"
            )
            repeats = len(entries) - len(delivered)
            print(f"\n{store.name}: {kills} relay kills; {committed_tx} transactions committed, "
                  f"{len(writers.rolled_back) // PER_TX} rolled back ({writers.failed} by the server); "
                  f"{len(entries)} stream entries for {len(published)} messages ({repeats} repeats); "
                  f"all sent after {elapsed:.1f} s")
            for db in names:
                assert rows(db, "SELECT state, COUNT(*) FROM ddm_outbox GROUP BY state")[0][0] == "sent"

            # Two consumers over the whole stream at once: every message is seen twice or more.
            consume_errors: list[BaseException] = []
            applied = [0, 0]
            with Executor(config, load_schema=False) as ex:
                consumers = [threading.Thread(target=_consume, args=(ex, entries, applied, 0, consume_errors)),
                             threading.Thread(target=_consume, args=(ex, entries[::-1], applied, 1, consume_errors))]
                for t in consumers:
                    t.start()
                for t in consumers:
                    t.join()
            assert not consume_errors, consume_errors[:3]
            assert sum(applied) == len(published)
            counts: dict[str, int] = {}
            for db in names:
                for mid, n in rows(db, "SELECT message_id, COUNT(*) FROM t_effect GROUP BY message_id"):
                    counts[mid] = counts.get(mid, 0) + n
            assert set(counts) == published
            assert set(counts.values()) == {1}, "an effect applied twice"
            logged = sum(rows(db, "SELECT COUNT(*) FROM ddm_consume_log")[0][0] for db in names)
            assert logged == len(published)

            business: dict[int, int | None] = dict.fromkeys(HOT)
            mirror: dict[int, int | None] = {}
            for db in names:
                business.update((int(u), int(a)) for u, a in rows(db, "SELECT user_id, amount FROM t_order"))
                mirror.update((int(u), None if a is None else int(a))
                              for u, a in rows(db, "SELECT user_id, amount FROM t_mirror"))
            expected = {h: writers.last[h][1] if h in writers.last else None for h in HOT}
            assert business == expected, "the business rows differ from what the writers committed"
            assert mirror == expected, "the consumers' copy of the hot rows differs from the business rows"
        finally:
            client.delete(stream)
            client.close()
