"""A kill storm: how much traffic gets through while a data source's ``mariadbd`` is SIGKILLed and
restarted over and over, and how soon after each restart the first statement succeeds.

A private ``mariadbd`` (tests/test_execute_support.py's ``PrivateMariaDB``: own datadir, free
port) holds ``t_order`` over 2 data sources × 2 tables, 2000 rows; both data sources live on it,
so every statement needs it. ``--threads`` threads (6) run point selects by shard key through one
``Executor``, each starting one every ``--pace-ms`` (10 ms) whatever the answers, so that the share
of statements that succeed is the share of the time the data source served: back to back
(``--pace-ms 0``) a refusal takes microseconds and a select a few hundred, and the count would
mostly measure how fast refusals are. After a 2 s warm-up the storm starts: every ``--period``
seconds (5; ``--period-jitter J`` draws each from 5 ± J, seeded) the server is SIGKILLed by its own
PID, left down for ``--outage`` seconds (1.5) and started again, for ``--seconds`` (40) in all.
Meanwhile a watcher logs in with PyMySQL every 5 ms while the server is down: the moment it first
gets in is when the server *accepts connections* again; the first statement through ddm-core that
succeeds after the kill is the *first success* (it may come a few ms before the watcher notices).

Printed: statements succeeded / total during the storm, what the failures were, per outage the
time from accepting to the first success (``None``: none before the next kill), and the share of
the storm's time from each first success to the next kill. Nothing is asserted.

Usage (from the repository root)::

    python benchmarks/kill_storm.py [--seconds 40] [--threads 6] [--pace-ms 10] [--outage 1.5]
        [--period 5] [--period-jitter 0] [--read-write breakerResetMs=1000 ...] [--src DIR]
        [--label NAME] [--json PATH] [--verbose]

``--src DIR`` imports ``ddm_core`` from ``DIR`` (another version's ``src/``, e.g. a worktree of an
earlier commit with the compiled modules copied in), so that before and after run on the same
machine in one session. ``--read-write`` sets fields of the top-level ``readWrite`` section.
Figures: docs/readwrite.md#kill-storm.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROWS = 2000
POINT = "SELECT amount FROM t_order WHERE user_id = %s AND order_id = %s"
WARM_UP = 2.0
WATCH_EVERY = 0.005


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="length of the storm")
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--outage", type=float, default=1.5, help="seconds between a kill and the restart")
    parser.add_argument("--period", type=float, default=5.0, help="seconds from one kill to the next")
    parser.add_argument("--period-jitter", type=float, default=0.0,
                        help="each period is drawn from PERIOD ± this (seeded), so kills fall at no fixed phase")
    parser.add_argument("--pace-ms", type=float, default=10.0,
                        help="each thread starts a statement every this many ms (0: back to back)")
    parser.add_argument("--read-write", nargs="*", default=[], metavar="FIELD=MS", help="readWrite settings")
    parser.add_argument("--src", help="import ddm_core from this directory")
    parser.add_argument("--label", default="", help="a name for this run in the output")
    parser.add_argument("--json", help="append the figures as one JSON line to this file")
    parser.add_argument("--verbose", action="store_true", help="show ddm-core's log (breakers opening, probes)")
    return parser.parse_args()


class Watcher:
    """Logs in every few ms from a kill until the server answers; remembers when it first did."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.accepted: float | None = None
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        import pymysql

        while True:
            try:
                pymysql.connect(host="127.0.0.1", port=self.port, user="root", password="", connect_timeout=1).close()
            except pymysql.err.OperationalError:
                time.sleep(WATCH_EVERY)
                continue
            self.accepted = time.monotonic()
            return

    def join(self) -> float:
        self._thread.join()
        assert self.accepted is not None
        return self.accepted


class Traffic:
    """``threads`` threads of point selects; every statement's end time, and what each failure was."""

    def __init__(self, ex: Any, threads: int, pace: float) -> None:
        self.ex = ex
        self.pace = pace
        self.stop = threading.Event()
        self.succeeded: list[list[float]] = [[] for _ in range(threads)]
        self.failed: list[list[tuple[float, str]]] = [[] for _ in range(threads)]
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(threads)]
        for t in self._threads:
            t.start()

    def _run(self, i: int) -> None:
        from ddm_core.errors import DdmError

        rng = random.Random(i)
        ok, failed = self.succeeded[i], self.failed[i]
        due = time.monotonic()
        while not self.stop.is_set():
            if self.pace:  # a fixed schedule, whatever the answers: as many attempts up as down
                due = max(due + self.pace, time.monotonic() - self.pace)
                time.sleep(max(0.0, due - time.monotonic()))
            key = rng.randrange(1, ROWS + 1)
            try:
                with self.ex.execute(POINT, (key, key)) as result:
                    result.fetchall()
            except DdmError as exc:
                failed.append((time.monotonic(), _kind(exc)))
            else:
                ok.append(time.monotonic())

    def finish(self) -> None:
        self.stop.set()
        for t in self._threads:
            t.join()


def _kind(exc: BaseException) -> str:
    text = str(exc)
    if "circuit breaker" in text:
        return "refused by the breaker"
    if "Connection refused" in text or "Can't connect" in text:
        return "connect refused"
    if "Lost connection" in text or "gone away" in text or "Broken pipe" in text or "reset by peer" in text:
        return "connection lost"
    return type(exc).__name__


def _load(server: Any, read_write: dict[str, int], pool: dict[str, int]) -> Any:
    from ddm_core import load_config
    from ddm_core.execute import Executor
    from test_execute_support import ORDER_DDL, sharding_config

    tag = uuid.uuid4().hex[:6]
    dbs = [server.create_database(f"ddm_storm_{tag}_{i}_") for i in range(2)]
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:{server.port}/{db}", "username": "root", "password": ""}
            for i, db in enumerate(dbs)}  # fmt: skip
    doc = sharding_config(urls, tables=2, pool=pool)
    doc["readWrite"] = read_write
    config = load_config(doc)
    with Executor(config, load_schema=False) as ex:
        ex.execute(ORDER_DDL).close()
        values = ", ".join(f"({i}, {i}, {i % 100})" for i in range(1, ROWS + 1))
        ex.execute(f"INSERT INTO t_order (order_id, user_id, amount) VALUES {values}").close()
    return config


def storm(args: argparse.Namespace) -> dict[str, Any]:
    from ddm_core.execute import Executor
    from test_execute_support import PrivateMariaDB

    read_write = {k: int(v) for k, v in (item.split("=", 1) for item in args.read_write)}
    pool = {"maxSize": 8, "minIdle": 2, "acquireTimeoutMs": 1000}
    server = PrivateMariaDB(Path(tempfile.mkdtemp(prefix="ddm_kill_storm_")))
    server.start()
    outages: list[dict[str, float]] = []
    try:
        config = _load(server, read_write, pool)
        with Executor(config, load_schema=False) as ex:
            traffic = Traffic(ex, args.threads, args.pace_ms / 1000.0)
            try:
                time.sleep(WARM_UP)
                start = time.monotonic()
                end = start + args.seconds
                periods = random.Random(20240601)
                while time.monotonic() + args.outage + 0.5 < end:
                    kill = time.monotonic()
                    server.kill()
                    watcher = Watcher(server.port)
                    time.sleep(args.outage)
                    server.start()
                    outages.append({"kill": kill, "accepting": watcher.join()})
                    period = args.period + periods.uniform(-args.period_jitter, args.period_jitter)
                    time.sleep(max(0.0, kill + period - time.monotonic()))
                time.sleep(max(0.0, end - time.monotonic()))
            finally:
                traffic.finish()
            borrowed = ex.borrowed()
    finally:
        server.kill()
    return _figures(args, traffic, outages, start, end, borrowed)


def _figures(args: argparse.Namespace, traffic: Traffic, outages: list[dict[str, float]], start: float,
             end: float, borrowed: int) -> dict[str, Any]:  # fmt: skip
    ok = sorted(t for thread in traffic.succeeded for t in thread if start <= t < end)
    failed = [(t, kind) for thread in traffic.failed for t, kind in thread if start <= t < end]
    down = 0.0
    to_first: list[float | None] = []
    for i, outage in enumerate(outages):
        # the first success after the kill (statements finishing at the kill's instant may still succeed)
        # and before the next kill: a breaker still open then lost the whole cycle
        until = outages[i + 1]["kill"] if i + 1 < len(outages) else end
        first = next((t for t in ok if outage["kill"] + 0.05 < t < until), None)
        to_first.append(None if first is None else first - outage["accepting"])
        down += (until if first is None else first) - outage["kill"]
    seen = [x for x in to_first if x is not None]
    return {
        "label": args.label,
        "read_write": args.read_write,
        "threads": args.threads,
        "pace_ms": args.pace_ms,
        "period": [args.period, args.period_jitter],
        "seconds": round(end - start, 1),
        "outages": len(outages),
        "succeeded": len(ok),
        "total": len(ok) + len(failed),
        "success_share": len(ok) / max(1, len(ok) + len(failed)),
        "failures": dict(collections.Counter(kind for _, kind in failed).most_common()),
        "to_first_success_median": statistics.median(seen) if seen else None,
        "to_first_success_max": max(seen) if seen else None,
        "to_first_success": [None if x is None else round(x, 3) for x in to_first],
        "restart": [round(o["accepting"] - o["kill"], 3) for o in outages],
        "served_share": 1 - down / (end - start),
        "borrowed_after": borrowed,
    }


def _print(fig: dict[str, Any]) -> None:
    print(f"{fig['label'] or 'run'}: {fig['threads']} threads (a statement every {fig['pace_ms']:g} ms each), "
          f"{fig['seconds']} s, {fig['outages']} outages"
          f"{' readWrite ' + ' '.join(fig['read_write']) if fig['read_write'] else ''}")  # fmt: skip
    print(f"  succeeded {fig['succeeded']} of {fig['total']} statements ({100 * fig['success_share']:.1f} %)")
    print(f"  failures: {fig['failures']}")
    print(f"  server accepting -> first success (None: none before the next kill): median "
          f"{fig['to_first_success_median']} s, max {fig['to_first_success_max']} s; each: {fig['to_first_success']}")
    print(f"  kill -> server accepting: {fig['restart']}")
    print(f"  served (from each kill's first success to the next kill) {100 * fig['served_share']:.1f} % of the time")
    print(f"  connections borrowed afterwards: {fig['borrowed_after']}")


def main() -> None:
    args = _arguments()
    if args.src:
        sys.path.insert(0, str(Path(args.src).resolve()))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    logging.getLogger("ddm_core").addHandler(logging.NullHandler())
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(relativeCreated)8.0f %(name)s %(message)s")
    import ddm_core

    print(f"ddm_core from {Path(ddm_core.__file__).parent}")
    fig = storm(args)
    _print(fig)
    if args.json:
        with open(args.json, "a", encoding="utf-8") as out:
            out.write(json.dumps(fig) + "\n")


if __name__ == "__main__":
    main()
