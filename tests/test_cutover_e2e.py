"""The end-to-end proof of the gray cut-over: 200 000 legacy rows onto 4 shards, writers the whole time,
every cut-over process SIGKILLed at random points and started again.

Two private ``mariadbd --log-bin --binlog-format=ROW``: the legacy server with
the one ``t_order`` table, and the shard server with 4 databases of 2 tables.
The application is writer threads in this process (tests/migrate_live_support.Writers)
through one ``Executor(ConfigHolder(...))`` watching the config table. The
cut-over is the CLI: ``ddm cutover sync`` runs the whole time and is killed
every few seconds and restarted; ``start``, ``advance`` and ``rollback`` are
killed at random delays and run again until they succeed. Buckets go 1 % ->
10 % -> 50 % -> 100 % gray with rollbacks in between.

Afterwards both sides are read behind ddm-core's back: no row lost, duplicated
or differing against the writers' reference, on the shards and on the legacy
table (the reverse sync kept it current), every shard row where the layout
puts its user, and no read ever missed the thread's own last write.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from ddm_core import load_config
from ddm_core.cutover import CutoverLog, CutoverPhase
from ddm_core.errors import CutoverFencedError
from ddm_core.metadata.cutover import BucketState
from ddm_core.migrate import config_table_source, connector
from cutover_support import LagProbe, Row, fill_legacy, layout, misplaced, read_side, shard_tables
from cutover_support import servers  # noqa: F401 (a fixture)
from migrate_live_support import E2E_PAUSE, Writers
from services import fresh_mariadb_databases, require_module
from test_execute_support import PrivateMariaDB

require_module("pymysqlreplication", "the cut-over end-to-end test")

ROWS = 200_000  # the number
FENCE, POLL, HOLD = 1.0, 0.3, 1.0
HOT_ROWS = 50  # rows two writer threads update, delete and insert again all the time

# (command, kill delays): each delay is an upper bound of a random wait after the command starts; the
# command is SIGKILLed then (if still running) and started again; after the delays it runs to the end.
STEPS: list[tuple[list[str], list[float]]] = [
    (["start"], [0.8, 2.0, 4.0, 6.0, 8.0, 1.5]),
    (["advance", "--buckets", "0", "--to", "pre_gray"], []),
    (["advance", "--buckets", "0", "--to", "gray"], [2.0]),                     # 1 %
    (["advance", "--buckets", "1-9", "--to", "pre_gray"], [0.3]),
    (["advance", "--buckets", "1-9", "--to", "gray"], [1.0, 2.5]),              # 10 %
    (["rollback", "--buckets", "3-6"], [1.5]),
    (["advance", "--buckets", "3-6", "--to", "gray"], [2.0]),
    (["advance", "--buckets", "10-49", "--to", "pre_gray"], []),
    (["advance", "--buckets", "10-49", "--to", "gray"], [1.0, 3.0]),            # 50 %
    (["rollback", "--buckets", "20-29"], [2.0]),
    (["advance", "--buckets", "20-29", "--to", "gray"], []),
    (["advance", "--buckets", "50-99", "--to", "pre_gray"], [0.5]),
    (["advance", "--buckets", "50-99", "--to", "gray"], [2.0]),                 # 100 %
]


class _Processes:
    """Runs cut-over commands and SIGKILLs them; keeps ``ddm cutover sync`` running, killed now and then."""

    def __init__(self, common: list[str], seed: int) -> None:
        self.common = common
        self.rng = random.Random(seed)
        self.kills = 0
        self.sync_kills = 0
        self.races = 0
        self._sync: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._keep_syncing, daemon=True)

    def cmd(self, step: list[str]) -> list[str]:
        return [sys.executable, "-m", "ddm_core.cli", "cutover", *step, *self.common]

    def run(self, step: list[str], delays: list[float]) -> float:
        """Run ``step`` through its kill points to a successful end; the seconds of the successful run."""
        for delay in delays:
            proc = subprocess.Popen(self.cmd(step), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                proc.wait(timeout=self.rng.uniform(0.05, delay))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.communicate(timeout=60)
                self.kills += 1
                time.sleep(0.3)  # a statement the dead process sent finishes on the server after the kill
                continue
            out, err = proc.communicate(timeout=60)
            if proc.returncode != 0 and self._raced(err):
                continue
            assert proc.returncode == 0, (step, err.decode()[-3000:])
            return 0.0
        for _ in range(5):
            began = time.monotonic()
            proc = subprocess.Popen(self.cmd(step), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                out, err = proc.communicate(timeout=900)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate(timeout=60)
                raise AssertionError(f"{step} ran past 900 s; its output:\n{out.decode()[-3000:]}\n"
                                     f"{err.decode()[-3000:]}") from None
            if proc.returncode == 0 or not self._raced(err):
                break
        assert proc.returncode == 0, (step, err.decode()[-3000:])
        return time.monotonic() - began

    def _raced(self, err: bytes) -> bool:
        if b"another cut-over process wrote step" not in err:
            return False
        self.races += 1
        time.sleep(0.5)
        return True

    # -- the sync daemon ----------------------------------------------------------------------------

    def start_sync(self) -> None:
        self._thread.start()

    def _keep_syncing(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                self._sync = subprocess.Popen(self.cmd(["sync", "--check-every-s", "1", "--sample", "300"]),
                                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if self._stop.wait(self.rng.uniform(2.0, 6.0)):
                break
            with self._lock:
                if self._sync.poll() is None:
                    self._sync.send_signal(signal.SIGKILL)
                    self.sync_kills += 1
                self._sync.communicate(timeout=60)

    def stop_sync(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        with self._lock:
            if self._sync is not None and self._sync.poll() is None:
                self._sync.send_signal(signal.SIGTERM)
                self._sync.communicate(timeout=120)


def test_200k_rows_cut_over_under_writers_with_every_process_killed(
        servers: tuple[PrivateMariaDB, PrivateMariaDB], tmp_path: Path) -> None:
    legacy_server, shard_server = servers
    began = time.monotonic()
    with fresh_mariadb_databases(1, connect=legacy_server.raw) as legacy_db, \
            fresh_mariadb_databases(4, connect=shard_server.raw) as shard_dbs:
        doc, spec = layout(shard_dbs, shard_server.port, legacy_db[0], legacy_server.port)
        reference = fill_legacy(legacy_server.raw(), legacy_db[0], ROWS)
        path = tmp_path / "sharded.yaml"
        path.write_text(yaml.safe_dump(doc))
        common = ["--config", str(path), "--table", "t_order", "--legacy", spec["url"], "--name", "e2e",
                  "--fence-after-s", str(FENCE), "--poll-s", str(POLL), "--hold-s", str(HOLD), "--batch", "5000",
                  "--no-progress"]
        config = load_config(doc)
        with config_table_source(config, "ds_0", create=True) as source:  # the application's first version
            source.publish(yaml.safe_dump(_normal_document(doc, spec)))
        filled = time.monotonic()
        app = Writers(doc, reference, threads=3, watch=POLL, pause=E2E_PAUSE, retry=(CutoverFencedError,),
                      hot_threads=2, hot_rows=HOT_ROWS).start()
        procs = _Processes(common, seed=2026)
        probe = LagProbe(app, legacy_server.port, legacy_db[0], shard_server.port, shard_dbs)
        rollback_s: list[float] = []
        try:
            procs.start_sync()
            for step, delays in STEPS:
                if step[0] == "rollback":
                    rollback_s.append(_timed_rollback(procs, step, delays, app, int(step[2].split("-")[0])))
                else:
                    procs.run(step, delays)
                if step[0] == "start":
                    probe.thread.start()  # the shard tables exist from here on
            time.sleep(1.0)
        finally:
            probed = probe.finish()
            final = app.finish()
            procs.stop_sync()
        final.update(probed)
        cut_done = time.monotonic()
        # the last changes, both ways; and a comparison, which killed syncs may never have reached
        procs.run(["sync", "--seconds", "3", "--check-every-s", "1", "--sample", "300"], [])
        with CutoverLog(connector(config, "ds_0"), "e2e") as log:
            state = log.state()
        assert state.phase is CutoverPhase.LIVE and state.states == (BucketState.GRAY,) * 100
        assert app.errors == [], app.errors[:5]
        legacy = read_side(legacy_server.port, [(legacy_db[0], "t_order")])
        shards = read_side(shard_server.port, shard_tables(shard_dbs))
        found = {"misplaced": misplaced(shards, shard_dbs)}
        for side, rows in (("legacy", legacy), ("shards", shards)):
            found.update(_differences(side, rows, final))
        print(f"\ncut-over e2e: {procs.kills} kills of steps, {procs.sync_kills} of the sync, {procs.races} races; "
              f"writer ops {sum(app.ops)}, paused writes retried {sum(app.fenced)}, stale reads "
              f"{sum(app.stale_reads)}; rollback decision -> instance on legacy "
              f"{', '.join(f'{s:.2f}' for s in rollback_s)} s; switches {len(state.switches)}; fill "
              f"{filled - began:.0f} s, cut-over {cut_done - filled:.0f} s; findings "
              f"{[f.get('differences') for f in state.findings]}; sync lag under the writers: {probe.summary()}")
        assert set(found.values()) == {0}, found
        assert len(final) > ROWS // 2 and sum(app.ops) > 2000 and sum(app.missed) == 0
        assert sum(app.stale_reads) == 0
        assert procs.kills >= 10 and procs.sync_kills >= 3, (procs.kills, procs.sync_kills)
        assert len(state.switches) >= 7 and sum(app.fenced) > 0
        assert probe.errors == [] and probe.lags["forward"] and probe.lags["reverse"], (probe.errors, probe.lags)
        assert state.findings  # the sync's scheduled comparisons ran (under writes: printed, not asserted)
        procs.run(["check", "--sample", "3000"], [])  # exit 0: the sampled keys agree field by field
        procs.run(["finish"], [])
        with CutoverLog(connector(config, "ds_0"), "e2e") as log:
            assert log.state().phase is CutoverPhase.FINISHED


def _normal_document(doc: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    from ddm_core.metadata.cutover import cutover_document

    return cutover_document(doc, name="e2e", table="t_order", legacy=spec, buckets=100, fence_after_s=FENCE)


def _timed_rollback(procs: _Processes, step: list[str], delays: list[float], app: Writers, bucket: int) -> float:
    """Run a rollback; the seconds from its last (successful) start until the application routes the
    bucket to the legacy table again."""
    seen: list[float] = []
    done = threading.Event()

    def watch(start: float) -> None:
        while not done.is_set():
            cut = app.holder.config.cutover
            if cut is not None and cut.states[bucket] is BucketState.ROLLBACK:
                seen.append(time.monotonic() - start)
                return
            time.sleep(0.01)

    for delay in delays:  # the kills first, the timed run after them
        procs.run(step, [delay])
    # The killed runs finished the rollback: time a fresh decision, once the application is gray again.
    procs.run(["advance", "--buckets", step[2], "--to", "gray"], [])
    while (cut := app.holder.config.cutover) is None or cut.states[bucket] is not BucketState.GRAY:
        time.sleep(0.01)
    watcher = threading.Thread(target=watch, args=(time.monotonic(),), daemon=True)
    watcher.start()
    procs.run(step, [])
    watcher.join(timeout=30)
    done.set()
    assert seen, f"the application never routed bucket {bucket} to the legacy table"
    return seen[0]


def _differences(side: str, found: dict[int, list[tuple[Row, tuple[str, str]]]], ref: dict[int, Row]
                 ) -> dict[str, int]:
    return {f"{side} lost": sum(1 for k in ref if k not in found),
            f"{side} extra": sum(1 for k in found if k not in ref),
            f"{side} duplicated": sum(len(v) - 1 for v in found.values()),
            f"{side} differing": sum(1 for k, v in found.items() if k in ref and v[0][0] != ref[k])}
