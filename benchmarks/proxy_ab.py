"""Two versions of ``ddm proxy`` under sysbench, run alternately against the same direct baseline.

On two shared cores the direct baseline moves by half between runs, more than most changes move the proxy,
so a change is judged on pairs: each round runs sysbench directly on MariaDB, then through this checkout's
proxy and through the other version's (the order swapped every round), over the same sharded ``sbtest1``
(``test_bench_proxy.py``'s fixture). Per run it prints the QPS ratio against that round's direct run and,
per transaction, the proxy's CPU, the MariaDB server's CPU and how often the server's threads went to sleep
(their voluntary context switches: one per statement that found no next one waiting), and the same server
figures for the direct run; at the end the medians of each version's ratios.

Usage (MariaDB on 127.0.0.1:3306, sysbench installed)::

    python benchmarks/proxy_ab.py OTHER_SRC [--test oltp_read_only] [--threads 8] [--rounds 4]

``OTHER_SRC``: another version's ``src/`` (``git archive REV src | tar -x -C DIR``, its compiled units
built or copied in), imported by the second proxy (``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import test_bench_proxy as bench  # noqa: E402
from test_proxy_support import PASSWORD, USER, ProxyProcess  # noqa: E402


def server_sleeps(pid: int) -> int:
    """The voluntary context switches of all of process ``pid``'s threads so far (/proc)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            lines = Path(f"/proc/{pid}/task/{task}/status").read_text().splitlines()
        except OSError:  # a thread that ended meanwhile
            continue
        total += sum(int(line.split()[1]) for line in lines if line.startswith("voluntary_ctxt_switches"))
    return total


def _other_proxy(config: Path, src: str) -> ProxyProcess:
    """A proxy over ``config`` importing ``ddm_core`` from ``src``."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = src
    try:
        return ProxyProcess(config).start()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def _pairs(rounds: int, this: ProxyProcess, other: ProxyProcess) -> Iterator[tuple[str, ProxyProcess]]:
    for number in range(rounds):
        pair = [("this", this), ("other", other)]
        yield from (pair if number % 2 == 0 else pair[::-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other_src")
    parser.add_argument("--test", default="oltp_read_only")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    server = bench._mariadb_pid()
    if server is None:
        raise SystemExit("the MariaDB server's process cannot be read here (@@pid_file, /proc)")
    with bench.sharded_sbtest() as (this, direct_db, _):
        assert this.config_path is not None
        other = _other_proxy(this.config_path, args.other_src)
        try:
            _run(args, server, direct_db, this, other)
        finally:
            other.stop()


def _run(args: argparse.Namespace, server: int, direct_db: str, this: ProxyProcess, other: ProxyProcess) -> None:
    ratios: dict[str, list[float]] = {"this": [], "other": []}
    direct_qps = 0.0
    for step, (name, proxy) in enumerate(_pairs(args.rounds, this, other)):
        if step % 2 == 0:  # each pair against a direct run of its own
            spent, sleeps = bench._cpu_seconds(server), server_sleeps(server)
            got = bench._sysbench(args.test, 3306, "root", "", direct_db, args.threads)
            direct_qps, transactions = got["qps"], max(got["tps"] * bench.SB_SECONDS, 1)
            print(f"direct: {direct_qps:,.0f} QPS; per transaction server CPU "
                  f"{(bench._cpu_seconds(server) - spent) * 1e6 / transactions:,.0f} µs, "
                  f"server sleeps {(server_sleeps(server) - sleeps) / transactions:.1f}", flush=True)  # fmt: skip
        assert proxy.proc is not None
        cpu, spent, sleeps = bench._cpu_seconds(proxy.proc.pid), bench._cpu_seconds(server), server_sleeps(server)
        got = bench._sysbench(args.test, proxy.port, USER, PASSWORD, "logic_db", args.threads)
        transactions = max(got["tps"] * bench.SB_SECONDS, 1)
        ratio = got["qps"] / direct_qps
        ratios[name].append(ratio)
        print(f"{name:>5}: {ratio:.3f}x ({got['qps']:,.0f} against {direct_qps:,.0f} QPS direct); per transaction "
              f"proxy CPU {(bench._cpu_seconds(proxy.proc.pid) - cpu) * 1e6 / transactions:,.0f} µs, "
              f"server CPU {(bench._cpu_seconds(server) - spent) * 1e6 / transactions:,.0f} µs, "
              f"server sleeps {(server_sleeps(server) - sleeps) / transactions:.1f}", flush=True)  # fmt: skip
    for name, values in ratios.items():
        print(f"{name:>5}: median {statistics.median(values):.3f}x over {len(values)} run(s)")


if __name__ == "__main__":
    main()
