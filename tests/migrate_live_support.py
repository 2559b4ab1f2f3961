"""Helpers of the Migration API and end-to-end tests (no tests here): a live application and its reference.

* :func:`fill_old` creates and fills the old tables through the executor and
  returns the reference rows (built by the test, not read back);
* :class:`Writers` is the application: threads writing through an
  ``Executor(ConfigHolder(config_table_source(...)))`` that watches the config
  table, each thread owning its keys and keeping its own reference copy of
  them, retrying a write the router fenced (``MigrationFencedError``); hot
  threads update, delete and insert again a few rows of moving slots (read
  early from the new location) over and over, and read them back after every write;
* :func:`placement_counts` reads every physical table of the NEW configuration
  behind ddm-core's back and places each row with the scalar ``hashing.slot_of``,
  the grown slot map of the test layout and ``hash64 % tables`` (the table rule
  of HASH_MOD), none of the migration's code.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from contextlib import contextmanager
from typing import Any, Iterator

from ddm_core import load_config
from ddm_core.errors import MigrationFencedError
from ddm_core.execute import Executor
from ddm_core.hashing import hash64, slot_of
from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.dump import dump_native
from ddm_core.metadata.migration import shifted_slots
from ddm_core.migrate import Connections, config_table_source
from ddm_core.slots import SlotMap
from migrate_support import ORDER_DDL, TABLES_PER_SOURCE, reshard_docs
from services import mariadb_rows

__all__ = ["BINLOG_ARGS", "docs", "fill_old", "Writers", "hot_keys", "placement_counts", "publish_old"]

BINLOG_ARGS = ("--server-id=1", "--log-bin=binlog", "--binlog-format=ROW", "--binlog-row-metadata=FULL")
#: Seconds each writer of the end-to-end tests waits between statements. Their catch-up and replay gates need a
#: write rate the binlog replay outpaces; with the other crash tests on the same 2 cores, 4 writers 3 ms
#: apart were more than it kept up with (a cut-over's ``start`` ran past its 900 s in CI).
E2E_PAUSE = 0.012

Row = tuple[int, int, str | None, int]  # user_id, amount, note, slow


def docs(names: list[str], port: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The 4 -> 8 layout of migrate_support with pools large enough for the writer threads."""
    old, new = reshard_docs(names, port=port)
    for doc in (old, new):
        doc["pool"] = {"maxSize": 8, "minIdle": 0, "acquireTimeoutMs": 10000}
    return old, new


def fill_old(old_doc: dict[str, Any], rows: int, seed: int = 5) -> dict[int, Row]:
    """The old tables created through the executor and filled with ``rows`` rows; the reference of them.

    The rows are written straight into the physical tables the old layout gives them (the even
    slot map of ``slot_of(user_id)``, table ``hash64(user_id) % tables``: the rule
    :func:`placement_counts` checks), 5 000 per statement, which is several times faster than
    routing 200 000 rows.
    """
    rng = random.Random(seed)
    ref: dict[int, Row] = {}
    old = load_config(old_doc)
    with Executor(old, timeout=60.0, load_schema=False) as ex:
        ex.execute(ORDER_DDL).close()
        ex.execute("CREATE TABLE t_dict (id INT NOT NULL PRIMARY KEY, name VARCHAR(40))").close()
        ex.execute("INSERT INTO t_dict VALUES " + ", ".join(f"({i}, 'name {i}')" for i in range(1, 101))).close()
    even = SlotMap.even(len(old.data_sources), 10)
    by_table: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
    for i in range(1, rows + 1):
        note = None if i % 7 == 0 else ("" if i % 11 == 0 else f"note {i}")
        user = rng.randrange(1, 1 << 40)
        ref[i] = (user, i % 500, note, 0)
        place = (even.node_of(slot_of(user, 10)), hash64(user) % TABLES_PER_SOURCE)
        by_table.setdefault(place, []).append((i, user, i % 500, note))
    with Connections(old) as conns:
        for (d, t), values in sorted(by_table.items()):
            for start in range(0, len(values), 5000):
                conns.execute_many(f"ds_{d}", f"INSERT INTO t_order_{d}_{t} (order_id, user_id, amount, note) "
                                              "VALUES (%s, %s, %s, %s)", values[start:start + 5000])
    return ref


def publish_old(old_doc: dict[str, Any]) -> None:
    """Version 1 of the config table: the old configuration, as the application serves it before the migration."""
    old = load_config(old_doc)
    with config_table_source(old, "ds_0", create=True) as source:
        if source.latest_version() == 0:
            source.publish(dump_native(old, secrets="keep"))


class _DualFailures(Counter[str]):
    """The application's dual-write failures by kind (the server's error number, or the error's class)
    and the migration phase of the version the application served then."""

    def __init__(self, holder: ConfigHolder) -> None:
        super().__init__()
        self.holder = holder

    def finished(self, plan: Any, started: float, result: Any) -> None:
        pass

    def failed(self, plan: Any, started: float, error: BaseException) -> None:
        pass

    def dual_write_failed(self, plan: Any, unit: Any, error: BaseException) -> None:
        cause = error.__cause__ if error.__cause__ is not None else error
        args = getattr(cause, "args", ())
        block = self.holder.config.migration
        phase = f"{block.phase} {block.read_shift_pct:g} %" if block is not None else "no migration"
        self[f"{args[0] if args and isinstance(args[0], int) else type(cause).__name__} in {phase}"] += 1


class Writers:
    """Writer threads through one executor following the config table (the application)."""

    def __init__(self, old_doc: dict[str, Any], reference: dict[int, Row], *, threads: int = 4,
                 watch: float = 0.3, pause: float = 0.002, seed: int = 9,
                 retry: tuple[type[Exception], ...] = (MigrationFencedError,),
                 hot_threads: int = 0, hot_rows: int = 0) -> None:
        self.holder = ConfigHolder(config_table_source(load_config(old_doc), "ds_0"))
        self.holder.watch(watch)
        self.executor = Executor(self.holder, timeout=30.0, load_schema=False)
        self.dual_failure_kinds = _DualFailures(self.holder)
        self.executor.set_observer(self.dual_failure_kinds)
        self.threads = threads
        self.pause = pause
        self.retry = retry  # errors of a paused write: retried after a moment
        # The hot rows (each hot thread owns every hot_threads-th), then each ordinary thread owns the
        # other keys = its number mod threads; every thread keeps its own reference copy of its keys.
        hot = hot_keys(reference, hot_rows) if hot_threads else []
        self.users = {k: reference[k][0] for k in hot}  # a hot row deleted is inserted again with its user
        rest = {k: v for k, v in reference.items() if k not in self.users}
        self.refs: list[dict[int, Row]] = [{k: v for k, v in rest.items() if k % threads == w}
                                           for w in range(threads)]
        self.refs += [{k: reference[k] for k in hot[h::hot_threads]} for h in range(hot_threads)]
        self.hot = [hot[h::hot_threads] for h in range(hot_threads)]
        n = threads + hot_threads
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.ops = [0] * n
        self.fenced = [0] * n
        self.stale_reads = [0] * n
        self.missed = [0] * n  # an UPDATE / DELETE of an owned live row that matched no row
        self._seed = seed
        self._workers = [threading.Thread(target=self._run, args=(w,), daemon=True) for w in range(threads)]
        self._workers += [threading.Thread(target=self._run_hot, args=(threads + h,), daemon=True)
                          for h in range(hot_threads)]
        self._held = threading.Condition()
        self._hold = False
        self._idle = 0

    def start(self) -> "Writers":
        for t in self._workers:
            t.start()
        return self

    def _execute(self, w: int, sql: str, params: tuple[Any, ...]) -> Any:
        while True:
            try:
                result = self.executor.execute(sql, params)
                try:
                    return result.fetchall() if sql.startswith("SELECT") else result.rowcount
                finally:
                    result.close()
            except self.retry:
                self.fenced[w] += 1  # paused for the cutover (or the config not confirmed): retry
                time.sleep(0.02)

    def _run(self, w: int) -> None:
        rng = random.Random(self._seed * 1000 + w)
        ref = self.refs[w]
        live = list(ref)
        at = {k: i for i, k in enumerate(live)}
        next_id = 10_000_000 + w

        def drop(k: int) -> None:
            i = at.pop(k)
            last = live.pop()
            if last != k:
                live[i] = last
                at[last] = i

        try:
            while not self.stop.is_set():
                self._wait_while_paused()
                op = rng.random()
                if op < 0.35 or not live:
                    key, next_id = next_id, next_id + self.threads
                    row: Row = (rng.randrange(1, 1 << 40), rng.randrange(1000), f"ins {w}", 0)
                    self._execute(w, "INSERT INTO t_order (order_id, user_id, amount, note) VALUES (?, ?, ?, ?)",
                                  (key, row[0], row[1], row[2]))
                    ref[key] = row
                    at[key] = len(live)
                    live.append(key)
                elif op < 0.75:
                    key = live[rng.randrange(len(live))]
                    user, was = ref[key][0], ref[key][1]
                    # always a change: MariaDB counts changed rows, and a missed row must show as 0
                    amount = (was + 1 + rng.randrange(999)) % 1000
                    note = None if rng.random() < 0.1 else f"upd {w} {rng.random():.6f}"
                    n = self._execute(w, "UPDATE t_order SET amount = ?, note = ? WHERE user_id = ? AND order_id = ?",
                                      (amount, note, user, key))
                    self.missed[w] += n != 1
                    ref[key] = (user, amount, note, 0)
                elif op < 0.9:
                    key = live[rng.randrange(len(live))]
                    n = self._execute(w, "DELETE FROM t_order WHERE user_id = ? AND order_id = ?", (ref[key][0], key))
                    self.missed[w] += n != 1
                    del ref[key]
                    drop(key)
                else:
                    key = live[rng.randrange(len(live))]
                    try:
                        got = self._execute(w, "SELECT user_id, amount, note, slow FROM t_order WHERE user_id = ? "
                                               "AND order_id = ?", (ref[key][0], key))
                    except Exception as exc:  # a failed read changes nothing: note it, keep writing
                        self.errors.append(f"writer {w} read: {type(exc).__name__}: {exc}")
                    else:
                        self.stale_reads[w] += [tuple(r) for r in got] != [ref[key]]
                self.ops[w] += 1
                if self.pause:
                    time.sleep(self.pause)
        except Exception as exc:  # a failed write leaves the reference unsure: stop; the test fails on it
            self.errors.append(f"writer {w}: {type(exc).__name__}: {exc}")

    def _run_hot(self, w: int) -> None:
        """Write the thread's hot rows over and over (update, delete, insert again), reading three back each time."""
        rng = random.Random(self._seed * 1000 + w)
        ref, hot = self.refs[w], self.hot[w - self.threads]
        where = "WHERE user_id = ? AND order_id = ?"
        try:
            while not self.stop.is_set():
                self._wait_while_paused()
                key = hot[rng.randrange(len(hot))]
                user = self.users[key]
                if key not in ref:
                    row: Row = (user, rng.randrange(1000), f"hot {w} {rng.random():.6f}", 0)
                    self._execute(w, "INSERT INTO t_order (order_id, user_id, amount, note) VALUES (?, ?, ?, ?)",
                                  (key, user, row[1], row[2]))
                    ref[key] = row
                elif rng.random() < 0.8:
                    row = (user, (ref[key][1] + 1 + rng.randrange(999)) % 1000, f"hot {w} {rng.random():.6f}", 0)
                    self.missed[w] += self._execute(w, f"UPDATE t_order SET amount = ?, note = ? {where}",
                                                    (row[1], row[2], user, key)) != 1
                    ref[key] = row
                else:
                    self.missed[w] += self._execute(w, f"DELETE FROM t_order {where}", (user, key)) != 1
                    del ref[key]
                for k in rng.sample(hot, min(3, len(hot))):
                    got = self._execute(w, f"SELECT user_id, amount, note, slow FROM t_order {where}",
                                        (self.users[k], k))
                    self.stale_reads[w] += [tuple(r) for r in got] != ([ref[k]] if k in ref else [])
                self.ops[w] += 1
                if self.pause:
                    time.sleep(self.pause)
        except Exception as exc:  # a failed write leaves the reference unsure: stop; the test fails on it
            self.errors.append(f"hot writer {w}: {type(exc).__name__}: {exc}")

    def _wait_while_paused(self) -> None:
        with self._held:
            if not self._hold:
                return
            self._idle += 1
            self._held.notify_all()
            while self._hold and not self.stop.is_set():
                self._held.wait()
            self._idle -= 1

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No writer thread runs a statement inside (each stops between two operations)."""
        with self._held:
            self._hold = True
            while self._idle < sum(t.is_alive() for t in self._workers):
                self._held.wait(0.1)  # a thread that died of an error never comes: counted out by is_alive
        try:
            yield
        finally:
            with self._held:
                self._hold = False
                self._held.notify_all()

    @property
    def hot_ops(self) -> int:
        return sum(self.ops[self.threads:])

    def finish(self) -> dict[int, Row]:
        """Stop the threads; the union of their reference copies."""
        self.stop.set()
        with self._held:
            self._held.notify_all()
        for t in self._workers:
            t.join(timeout=60)
        self.executor.close()
        self.holder.stop()
        out: dict[int, Row] = {}
        for ref in self.refs:
            out.update(ref)
        return out

    @property
    def dual_failures(self) -> int:
        return sum(self.executor.dual_write_failures().values())


def hot_keys(reference: dict[int, Row], count: int, *, old_count: int = 4, new_count: int = 8) -> list[int]:
    """``count`` keys of ``reference`` in the moving slots whose reads shift first (at 1 %)."""
    even = SlotMap.even(old_count, 10)
    grown, _ = even.moved_to(new_count)
    moving = [s for s in range(1 << 10) if even.node_of(s) != grown.node_of(s)]
    first = shifted_slots(moving, 1.0)
    return [k for k, row in sorted(reference.items()) if slot_of(row[0], 10) in first][:count]


def placement_counts(names: list[str], port: int, reference: dict[int, Row], *, old_count: int = 4,
                     layout: str = "new") -> dict[str, int]:
    """Lost, duplicated, differing, extra and misplaced rows of a layout against ``reference``.

    ``layout="new"``: every data source, the grown slot map (``SlotMap.moved_to``);
    ``"old"``: the first ``old_count``, the even map. Every physical table is read;
    a row counts as misplaced when its data source is not the map's owner of
    ``slot_of(user_id)`` or its table not ``hash64(user_id) % tables``.
    """
    even = SlotMap.even(old_count, 10)
    slot_map = even.moved_to(len(names))[0] if layout == "new" else even
    dbs = names if layout == "new" else names[:old_count]
    seen: dict[int, int] = {}
    out = {"lost": 0, "duplicated": 0, "differing": 0, "extra": 0, "misplaced": 0, "rows": 0}
    for d, db in enumerate(dbs):
        for t in range(TABLES_PER_SOURCE):
            for order_id, user, amount, note, slow in mariadb_rows(
                    db, f"SELECT order_id, user_id, amount, note, slow FROM t_order_{d}_{t}", port=port):
                out["rows"] += 1
                seen[order_id] = seen.get(order_id, 0) + 1
                if seen[order_id] > 1:
                    out["duplicated"] += 1
                    continue
                if slot_map.node_of(slot_of(int(user), 10)) != d or hash64(int(user)) % TABLES_PER_SOURCE != t:
                    out["misplaced"] += 1
                want = reference.get(order_id)
                if want is None:
                    out["extra"] += 1
                elif want != (user, amount, note, slow):
                    out["differing"] += 1
    out["lost"] = sum(1 for k in reference if k not in seen)
    return out
