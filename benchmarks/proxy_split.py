"""Point selects through a read/write-split data source: the event loop's path vs the worker threads'.

A real MariaDB primary with two replicas (tests/replication.py: private ``mariadbd`` servers,
replicating by GTID) holds ``t_point`` (2000 rows); one ``ddm proxy`` serves it as one data source
with both replicas, another the same with ``inlineStatements: false`` (every statement hops to a
worker thread, which is how a split read always ran before reads were chosen on the loop). PyMySQL
clients send ``SELECT v FROM t_point WHERE id = %s``, values in the text, round after round,
alternating the two proxies and a direct connection to a replica (the baseline), so all three see
the same load. Printed: statements per second and the median latency (µs) of each, and the
proxies' ratios to the direct baseline and to each other. Nothing is asserted
(docs/proxy.md#measured-costs reads the figures).

Usage::

    python benchmarks/proxy_split.py [--calls N] [--rounds R] [--threads T ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from replication import Replication  # noqa: E402
from test_proxy_readwrite import split_config  # noqa: E402
from test_proxy_support import ProxyProcess, connect, write_config  # noqa: E402

ROWS = 2000
POINT = "SELECT v FROM t_point WHERE id = %s"
DATABASE = "split_bench"


def _round(open_conn: Callable[[], Any], threads: int, calls: int) -> tuple[float, list[float]]:
    """``threads`` clients × ``calls`` point selects: (statements per second, every latency in µs)."""
    conns = [open_conn() for _ in range(threads)]
    latencies: list[list[float]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads + 1)

    def client(i: int) -> None:
        cur = conns[i].cursor()
        start.wait()
        for n in range(calls):
            began = time.perf_counter()
            cur.execute(POINT, ((n * 7919 + i) % ROWS + 1,))
            cur.fetchall()
            latencies[i].append((time.perf_counter() - began) * 1e6)

    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    began = time.perf_counter()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - began
    for c in conns:
        c.close()
    return threads * calls / elapsed, [x for part in latencies for x in part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="statements per client per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    import pymysql

    with tempfile.TemporaryDirectory() as tmp:
        replication = Replication(Path(tmp))
        proxies: list[ProxyProcess] = []
        try:
            replication.start()
            rows = ", ".join(f"({i}, {i * 3})" for i in range(1, ROWS + 1))
            replication.sql(replication.primary, f"CREATE DATABASE {DATABASE}",
                            f"CREATE TABLE {DATABASE}.t_point (id INT PRIMARY KEY, v INT NOT NULL)",
                            f"INSERT INTO {DATABASE}.t_point VALUES {rows}")  # fmt: skip
            replication.wait_replicated()
            loop_config = split_config(replication, DATABASE, ("t_point",), workers=8)
            loop = ProxyProcess(write_config(loop_config, Path(tmp) / "loop.yaml")).start()
            proxies.append(loop)
            hop_config = split_config(replication, DATABASE, ("t_point",), workers=8, inlineStatements=False)
            hop = ProxyProcess(write_config(hop_config, Path(tmp) / "hop.yaml")).start()
            proxies.append(hop)
            replica = replication.replicas[0]
            cases: dict[str, Callable[[], Any]] = {
                "direct to a replica": lambda: pymysql.connect(host="127.0.0.1", port=replica.port, user="root",
                                                               database=DATABASE, autocommit=True),
                "proxy, worker threads": lambda: connect(hop.port, autocommit=True),
                "proxy, event loop": lambda: connect(loop.port, autocommit=True),
            }  # fmt: skip
            for open_conn in cases.values():
                _round(open_conn, 1, 200)  # warm: plans cached, pools and the loop's connections open
            for threads in args.threads:
                seen: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in cases}
                for _ in range(args.rounds):
                    for name, open_conn in cases.items():
                        qps, lat = _round(open_conn, threads, args.calls)
                        seen[name][0].append(qps)
                        seen[name][1].extend(lat)
                print(f"\n{threads} client(s), {args.calls} point selects each, {args.rounds} rounds (median QPS)")
                base = statistics.median(seen["direct to a replica"][0])
                hop_qps = statistics.median(seen["proxy, worker threads"][0])
                for name, (qps, lat) in seen.items():
                    q = statistics.median(qps)
                    p50 = statistics.median(lat)
                    p99 = statistics.quantiles(lat, n=100)[98]
                    print(f"  {name:24s} {q:9.0f} QPS  p50 {p50:7.0f} µs  p99 {p99:7.0f} µs  "
                          f"x{q / base:.2f} of direct  x{q / hop_qps:.2f} of worker threads")  # fmt: skip
            for proxy in proxies:
                proxy.terminate()
            for proxy, name in zip(proxies, ("event loop", "worker threads")):
                line = next((x for x in proxy.lines if "ran on the event loop" in x), "").strip()
                print(f"  {name} proxy at shutdown: {line[-90:]}")
        finally:
            for proxy in proxies:
                proxy.stop()
            replication.stop()


if __name__ == "__main__":
    main()
