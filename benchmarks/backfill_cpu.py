"""CPU-seconds of the backfill per 100 000 moved rows, server and client, against ``INSERT ... SELECT``.

Wall-clock ratios on a shared 2-core machine swing with the other work on it
(``test_bench_backfill.py`` saw the same code at 0.3x and 0.7x within minutes);
the CPU the server and this process spend on a run does not. Run it against a
MariaDB of your own, so that the server's CPU is the backfill's alone::

    mkdir -p /tmp/bf/tmp   # its own tmpdir: a starting mariadbd deletes the #sql* files in /tmp
    TMPDIR=/tmp/bf/tmp mariadb-install-db --no-defaults --datadir=/tmp/bf/data --user=$USER
    mariadbd --no-defaults --datadir=/tmp/bf/data --tmpdir=/tmp/bf/tmp --port=33999 --socket=/tmp/bf/sock \\
        --skip-grant-tables --innodb-buffer-pool-size=128M --skip-log-bin &
    python benchmarks/backfill_cpu.py --port 33999 --rows 300000

The server's CPU is read from ``/proc/<pid>/stat`` (the pid from its
``@@pid_file``); each step's wall time per thread is summed by wrapping the
copier's methods. Nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import threading
import time
import uuid
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ddm_core.migrate import backfill as bf  # noqa: E402
from ddm_core.migrate.checker import RowSource  # noqa: E402
from ddm_core.migrate.state import MigrationLog  # noqa: E402

STEPS: dict[tuple[str, str], float] = collections.defaultdict(float)
_LOCK = threading.Lock()


def _timed(owner: Any, name: str, label: str) -> None:
    inner: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            with _LOCK:
                STEPS[(threading.current_thread().name.split("_")[0], label)] += time.perf_counter() - began

    setattr(owner, name, wrapper)


def _server_cpu(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=3306)
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    os.environ["DDM_BENCH_BACKFILL_PORT"], os.environ["DDM_BENCH_BACKFILL_ROWS"] = str(args.port), str(args.rows)
    import test_bench_backfill as bench  # reads both at import

    _timed(bf.ScanCopier, "write_read", "write (upserts)")
    _timed(bf.ScanCopier, "check", "check")
    _timed(RowSource, "digest_of_keys", "source digest of keys")
    _timed(RowSource, "digest", "target digest of range")
    _timed(MigrationLog, "record_scan", "state row")
    chunks = getattr(bf, "keyset_chunks")

    def timed_chunks(*a: Any, **k: Any) -> Any:  # a generator: time each next(), on the reading thread
        it = chunks(*a, **k)
        while True:
            began = time.perf_counter()
            rows = next(it, None)
            with _LOCK:
                STEPS[(threading.current_thread().name.split("_")[0], "read")] += time.perf_counter() - began
            if rows is None:
                return
            yield rows

    setattr(bf, "keyset_chunks", timed_chunks)

    conn = bench._connect()
    with conn.cursor() as cur:
        cur.execute("SELECT @@pid_file")
        pid = int(open(cur.fetchone()[0]).read())
    names = [f"ddm_bench_bfcpu_{uuid.uuid4().hex[:8]}_{i}" for i in range(2)]
    with conn.cursor() as cur:
        for name in names:
            cur.execute(f"CREATE DATABASE `{name}`")
    try:
        env = bench.Env(names)
        env.run(env.reset()[0])
        for n in range(args.rounds):
            STEPS.clear()
            (log,) = env.reset()
            c0, s0, t0 = os.times(), _server_cpu(pid), time.perf_counter()
            env.run(log)
            c1, s1, t1 = os.times(), _server_cpu(pid), time.perf_counter()
            f0 = _server_cpu(pid)
            floor = env.floor_round()
            f1 = _server_cpu(pid)
            per = 100_000 / sum(env.moved)
            client = (c1.user - c0.user) + (c1.system - c0.system)
            print(f"round {n}: {sum(env.moved)} rows moved; per 100 000 moved: backfill server {per * (s1 - s0):.2f} "
                  f"CPU-s + client {per * client:.2f} CPU-s ({per * (t1 - t0):.2f} s wall), INSERT ... SELECT server "
                  f"{per * (f1 - f0):.2f} CPU-s ({per * floor:.2f} s wall); load {os.getloadavg()[0]:.1f}")
            for (thread, step), seconds in sorted(STEPS.items()):
                print(f"    {thread:22s} {step:24s} {per * seconds:6.2f} s wall")
    finally:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


if __name__ == "__main__":
    main()
