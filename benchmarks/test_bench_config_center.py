"""Configuration centers side by side: flip-to-applied latency and a follower's cost at rest, etcd vs Redis.

* **Flip to applied**: one follower process per center (tests/etcd_config_watcher.py on a private etcd,
  tests/redis_config_watcher.py on the machine's Redis at 127.0.0.1:6379), both following by their
  center's notification (watch / pub/sub; their polls are 60 s). A round publishes a new version and
  ends when the follower prints that it serves it (after validating it and writing its snapshot). The
  Redis round runs untimed before each timed etcd round; p50/p99 of both over 50 rounds go into
  ``extra_info``, and the etcd p99 is asserted below 1 s — the one speed this file asserts.
* **At rest**: the same two followers idle for 30 s: CPU seconds (utime + stime from /proc) scaled to
  a minute, and the TCP connections each holds to its center.
* **Faults at scale** (the test suite runs them smaller): 200 following threads converge through
  SIGKILL + restart, a 10 s SIGSTOP and a compaction past their revision; a follower process SIGKILLed
  mid-apply 20 times restarts on a whole version. Counts and wall time go into ``extra_info``.
"""

from __future__ import annotations

import os
import queue
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

from etcd_support import PrivateEtcd  # noqa: E402
from test_config_etcd import PREFIX, body, converge_through_faults, crash_mid_apply  # noqa: E402

from ddm_core.metadata.sources.etcd import EtcdSource  # noqa: E402
from ddm_core.metadata.sources.etcd_client import EtcdClient  # noqa: E402
from ddm_core.metadata.sources.redis import RedisSource  # noqa: E402

redis = pytest.importorskip("redis")
GROUP = "config center"
PUSHES = 50
REST_S = 30.0


class _Follower:
    """A follower process and the lines it prints."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen([sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, cwd=TESTS)  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def wait_for(self, prefix: str) -> str:
        while True:
            line = self.lines.get(timeout=60)
            if line.startswith(prefix):
                return line

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def connections_to(self, port: int) -> int:
        out = subprocess.run(["ss", "-Htnp", "state", "established", "dport", f"= :{port}"], capture_output=True,
                             text=True, check=False).stdout  # fmt: skip
        return sum(1 for line in out.splitlines() if f"pid={self.proc.pid}," in line)

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def centers(tmp_path_factory: Any) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("config-center")
    etcd = PrivateEtcd(base)
    etcd.start()
    client = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=5)
    redis_prefix = f"ddm_bench:{uuid.uuid4().hex[:10]}"
    etcd_source = EtcdSource(EtcdClient(etcd.url), prefix=PREFIX)
    redis_source = RedisSource(client, prefix=redis_prefix)
    etcd_source.publish(body(1))
    redis_source.publish(body(1))
    followers = {
        "etcd": _Follower([str(TESTS / "etcd_config_watcher.py"), etcd.url, PREFIX, str(base / "etcd.snap")]),
        "redis": _Follower([str(TESTS / "redis_config_watcher.py"), redis_prefix, str(base / "redis.snap")]),
    }
    try:
        for f in followers.values():
            f.wait_for("ready")
        yield {"etcd": etcd, "etcd_source": etcd_source, "redis_source": redis_source, "followers": followers,
               "base": base}  # fmt: skip
    finally:
        for f in followers.values():
            f.stop()
        etcd.stop()
        for key in client.scan_iter(f"{redis_prefix}:*"):
            client.delete(key)
        client.close()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def test_flip_to_applied(centers: dict[str, Any], benchmark: Any) -> None:
    followers = centers["followers"]
    offsets = iter(range(10, 10_000))
    seconds: dict[str, list[float]] = {"etcd": [], "redis": []}

    def flip(center: str) -> None:
        offset = next(offsets)
        started = time.perf_counter()
        centers[f"{center}_source"].publish(body(offset))
        followers[center].wait_for(f"serving {offset} ")
        seconds[center].append(time.perf_counter() - started)

    benchmark.group = GROUP
    benchmark.pedantic(lambda: flip("etcd"), setup=lambda: flip("redis"), rounds=PUSHES, warmup_rounds=2,
                       iterations=1)  # fmt: skip
    etcd_s, redis_s = seconds["etcd"][-PUSHES:], seconds["redis"][-PUSHES:]
    figures = {f"{c}_{name}_ms": round(fn(s) * 1000, 2) for c, s in (("etcd", etcd_s), ("redis", redis_s))
               for name, fn in (("p50", statistics.median), ("p99", lambda v: _percentile(v, 0.99)))}  # fmt: skip
    benchmark.extra_info.update(case="flip to applied (publish -> follower serves it)", items=1, unit="flip",
                                p50_ratio=round(figures["etcd_p50_ms"] / figures["redis_p50_ms"], 2), **figures)  # fmt: skip
    print(f"\nflip to applied over {PUSHES} pushes: {figures}")
    assert figures["etcd_p99_ms"] < 1000, f"a follower took an etcd push in more than 1 s: {figures}"


def test_follower_at_rest(centers: dict[str, Any], benchmark: Any) -> None:
    followers = centers["followers"]
    ports = {"etcd": centers["etcd"].client_port, "redis": 6379}
    figures: dict[str, float] = {}

    def rest() -> None:
        before = {c: f.cpu_seconds() for c, f in followers.items()}
        time.sleep(REST_S)
        for c, f in followers.items():
            figures[f"{c}_cpu_s_per_min"] = round((f.cpu_seconds() - before[c]) * 60 / REST_S, 3)
            figures[f"{c}_connections"] = f.connections_to(ports[c])

    benchmark.group = GROUP
    benchmark.pedantic(rest, rounds=1, iterations=1)
    benchmark.extra_info.update(case=f"a follower at rest ({REST_S:.0f} s)", items=1, unit="window", **figures)
    print(f"\nfollower at rest: {figures}")


def test_200_followers_through_faults(tmp_path: Path, benchmark: Any) -> None:
    etcd = PrivateEtcd(tmp_path)
    etcd.start()
    source = EtcdSource(EtcdClient(etcd.url, timeout=2.0), prefix=PREFIX)
    counts: dict[str, float] = {}
    try:
        benchmark.group = GROUP
        benchmark.pedantic(lambda: counts.update(converge_through_faults(source, etcd, followers=200, freeze_s=10)),
                           rounds=1, iterations=1)  # fmt: skip
    finally:
        source.client.close()
        etcd.stop()
    benchmark.extra_info.update(case="200 followers: kill+restart, 10 s SIGSTOP, compaction", items=200,
                                unit="follower", stuck=0, applied_twice=0, **counts)  # fmt: skip
    print(f"\n200 followers converged through the faults: {counts}")


def test_20_follower_crashes_mid_apply(tmp_path: Path, benchmark: Any) -> None:
    etcd = PrivateEtcd(tmp_path)
    etcd.start()
    source = EtcdSource(EtcdClient(etcd.url, timeout=2.0), prefix=PREFIX)
    taken: list[int] = []
    try:
        benchmark.group = GROUP
        benchmark.pedantic(lambda: taken.append(crash_mid_apply(source, etcd, tmp_path, rounds=20)), rounds=1,
                           iterations=1)  # fmt: skip
    finally:
        source.client.close()
        etcd.stop()
    benchmark.extra_info.update(case="20 follower SIGKILLs mid-apply", items=20, unit="crash", half_versions=0,
                                versions_taken_before_kills=taken[0])  # fmt: skip
    print(f"\n20 crashes mid-apply: every restart on a whole version ({taken[0]} versions taken before the kills)")
