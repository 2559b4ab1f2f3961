"""The MariaDB server's CPU per statement as its threads wait longer between statements.

Direct sysbench ``oltp_point_select`` (its C client, prepared statements) against the unsharded ``sbtest1``
of ``test_bench_proxy.py``'s fixture, at 1, 2, 4, 8 and 16 threads: the server's CPU per statement (/proc, the
process ``@@pid_file`` names) and its throughput. A thread woken for each statement costs the server several
times what a busy one does: through a proxy the server's threads wait longer between statements, and its CPU
per statement rises accordingly (docs/proxy.md#the-servers-side-of-a-transaction-and-the-pins-read-ahead-2026-12-07-night).

Usage (MariaDB on 127.0.0.1:3306, sysbench installed)::

    python benchmarks/server_wakeups.py [THREADS ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import test_bench_proxy as bench  # noqa: E402
from services import fresh_mariadb_databases  # noqa: E402


def main(threads: list[int]) -> None:
    server = bench._mariadb_pid()
    if server is None:
        raise SystemExit("the MariaDB server's process cannot be read here (@@pid_file, /proc)")
    with fresh_mariadb_databases(1) as (database,):
        bench.fill_plain(database, bench.sb_rows())
        print(f"{'threads':>8} {'statements/s':>13} {'server CPU/statement':>21}")
        for count in threads:
            before = bench._cpu_seconds(server)
            got = bench._sysbench("oltp_point_select", 3306, "root", "", database, count)
            spent = bench._cpu_seconds(server) - before
            print(f"{count:>8} {got['qps']:>13,.0f} {spent * 1e6 / max(got['tps'] * bench.SB_SECONDS, 1):>18.1f} µs")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 2, 4, 8, 16])
