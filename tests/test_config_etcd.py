"""The etcd configuration source on a private etcd (tests/etcd_support.py): versions and pointer flips,
two watching processes, fifty following threads through a killed, frozen and compacted etcd, and
followers SIGKILLed mid-apply.

What followers serve is compared with what was published (the body's digest), never with a
number the source itself reports.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from ddm_core import metrics
from ddm_core.errors import ConfigPublishConflictError, ConfigRowError, ConfigValidationError, SourceUnavailableError
from ddm_core.execute import Executor
from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.load import digest_of
from ddm_core.metadata.sources.etcd import EtcdSource
from ddm_core.metadata.sources.etcd_client import EtcdClient
from cli_support import run
from etcd_support import PrivateEtcd, private_etcd  # noqa: F401 - the fixture
from services import require_module
from test_config_redis import _next, _reader  # a watcher process's lines, read as the Redis tests read them

require_module("requests", "the etcd configuration source (the 'etcd' extra)")
HERE = Path(__file__).resolve().parent
PREFIX = "/ddm-test/config"


def body(max_offset: int, data_source: str = "ds_0", padding: int = 0) -> str:
    return (
        "dataSources:\n  ds_0: sqlite:///never_opened_0.db\n  ds_1: sqlite:///never_opened_1.db\n"
        f"tables:\n  - {{logicTable: t_order, shardKey: user_id, databases: [{data_source}, ds_1], shardCount: 2}}\n"
        f"runtime:\n  maxOffset: {max_offset}\n" + "".join(f"# padding line {i} {'x' * 60}\n" for i in range(padding))
    )


@pytest.fixture()
def source(private_etcd: PrivateEtcd) -> Iterator[EtcdSource]:  # noqa: F811
    client = EtcdClient(private_etcd.url, timeout=2.0)
    yield EtcdSource(client, prefix=PREFIX)
    client.close()


def test_versions_pointer_flips_and_checks(source: EtcdSource, private_etcd: PrivateEtcd) -> None:  # noqa: F811
    with pytest.raises(SourceUnavailableError, match="no configuration version yet"):
        ConfigHolder(source, check_env=False)
    assert source.publish(body(1000), expect_version=0) == 1
    holder = ConfigHolder(source, check_env=False)
    assert source.publish(body(2000), expect_version=1) == 2
    with pytest.raises(ConfigPublishConflictError, match="names version 2, not 1"):
        source.publish(body(3000), expect_version=1)
    with pytest.raises(ConfigValidationError, match="ds_9"):
        source.publish(body(3000, data_source="ds_9"))
    assert holder.reload().updated and holder.config.runtime.max_offset == 2000
    # Rollback flips the pointer back: no new version is written.
    assert source.rollback(1, expect_version=2) == 1
    assert private_etcd.get(f"{PREFIX}/active_version") == "1" and private_etcd.get(f"{PREFIX}/last_version") == "2"
    assert holder.reload().updated and holder.config.runtime.max_offset == 1000
    # A version whose body was changed after it was written is refused; the serving one stays.
    stored = json.loads(private_etcd.get(source.version_key(2)) or "")
    private_etcd.put(source.version_key(2), json.dumps({**stored, "body": body(9999)}))
    private_etcd.put(f"{PREFIX}/active_version", "2")
    result = holder.reload()
    assert result.status == "unreachable" and isinstance(result.error, ConfigRowError)
    assert "checksum" in result.error.message and holder.config.runtime.max_offset == 1000
    with pytest.raises(ConfigRowError, match="cannot be rolled back to"):
        source.rollback(2)
    # A group's pointer wins for its instances until promoted.
    source.rollback(1)
    canary = EtcdSource(source.client, prefix=PREFIX, group="canary")
    assert source.publish(body(3000), group="canary") == 3
    assert canary.fetch().content == body(3000) and source.fetch().content == body(1000)
    assert [(v.version, v.group, v.active_for) for v in source.history()] == [
        (3, "canary", ("canary",)), (2, "", ()), (1, "", ("everyone",))]  # fmt: skip
    assert source.promote("canary") == 3
    assert source.fetch().content == body(3000) and private_etcd.get(source.group_pointer("canary")) is None
    with pytest.raises(ConfigRowError, match="nothing was published for group 'canary'"):
        source.promote("canary")


def _watcher(url: str, snapshot: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(HERE / "etcd_config_watcher.py"), url, PREFIX, str(snapshot)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=HERE)  # fmt: skip


def test_two_processes_take_every_push(source: EtcdSource, private_etcd: PrivateEtcd, tmp_path: Path) -> None:  # noqa: F811
    source.publish(body(1000))
    procs = [_watcher(private_etcd.url, tmp_path / f"snap{i}") for i in range(2)]
    try:
        readers = [_reader(p) for p in procs]
        for lines in readers:
            assert _next(lines, "ready").startswith("ready 1000 ")
        for push in range(1, 21):
            source.publish(body(1000 + push))
            for lines in readers:
                assert _next(lines, f"push {push}") == f"serving {1000 + push} {digest_of(body(1000 + push))}"
        source.publish(body(3000, data_source="ds_9"), validate=False)  # refused by both; the last push stays
        for lines in readers:
            line = _next(lines, "the refusal")
            assert line.startswith("refused ") and "ds_9" in line
    finally:
        for p in procs:
            assert p.stdin is not None
            p.stdin.close()
        for p in procs:
            assert p.wait(timeout=30) == 0


class _Follower:
    """One application instance in a thread: its own client, source, holder and watch."""

    def __init__(self, url: str) -> None:
        self.source = EtcdSource(EtcdClient(url, timeout=1.0), prefix=PREFIX)
        self.holder = ConfigHolder(self.source, check_env=False)
        self.applied: list[str] = [self.holder.current.digest]
        self.taken_at: dict[str, float] = {}  # digest -> time.monotonic() it was taken
        self.holder.subscribe(self._took)
        self.following = self.source.follow(self.holder, poll=600.0)  # only the watch brings flips

    def _took(self, new: Any, old: Any) -> None:
        self.taken_at.setdefault(new.digest, time.monotonic())
        self.applied.append(new.digest)

    def stop(self) -> None:
        self.following()
        self.source.client.close()


def converge_through_faults(source: EtcdSource, etcd: PrivateEtcd, *, followers: int, freeze_s: float) -> dict[str, float]:
    """``followers`` threads follow one pointer while etcd is SIGKILLed and restarted, frozen for ``freeze_s``,
    and compacted past their revision; every flip must reach all, each version taken once and in order.

    Returns figures for a report (the benchmark's 200-follower run): flips, resyncs, reconnects, and the
    p50 / p99 milliseconds from a flip's publish to a follower taking it: for a flip on a healthy etcd, and
    over the flips published right after each fault (the watches' reconnects included).
    """
    source.publish(body(1000))
    crowd = [_Follower(etcd.url) for _ in range(followers)]
    published = [digest_of(body(1000))]
    delays: dict[str, list[float]] = {"healthy": [], "after_fault": []}

    def flip(offset: int, kind: str = "after_fault") -> None:
        started = time.monotonic()
        source.publish(body(offset))
        published.append(digest_of(body(offset)))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if all(f.holder.current.digest == published[-1] for f in crowd):
                delays[kind].extend(f.taken_at[published[-1]] - started for f in crowd)
                return
            time.sleep(0.05)
        stuck = [i for i, f in enumerate(crowd) if f.holder.current.digest != published[-1]]
        raise AssertionError(f"{len(stuck)} followers stuck on an older version: {stuck[:10]}")

    try:
        flip(1500, "healthy")
        # etcd SIGKILLed and restarted: the watches resume from their last revision + 1.
        etcd.restart()
        flip(2000)
        # etcd frozen (SIGSTOP), a flip right after it thaws.
        etcd.freeze()
        time.sleep(freeze_s)
        etcd.thaw()
        flip(3000)
        # Killed; back on a port the followers do not know, where a flip is published and history
        # compacted past every follower's revision; killed again and back on the usual port.
        etcd.kill()
        aside = EtcdSource(EtcdClient(etcd.start(aside=True)), prefix=PREFIX)
        aside.publish(body(4000))
        published.append(digest_of(body(4000)))
        for _ in range(30):
            aside.client.put(f"{PREFIX}/noise", "x")  # revisions to compact away
        aside.client.compact(aside.client.get(PREFIX)[1])
        aside.client.close()
        etcd.restart()
        flip(5000)
        resynced = sum(1 for f in crowd if f.following.resyncs)
        reconnects = sum(f.following.reconnects for f in crowd)
        assert resynced == followers, "a follower's watch never met the compaction"
    finally:
        for f in crowd:
            f.stop()
    for i, f in enumerate(crowd):
        assert f.applied[-1] == published[-1]
        # Each version taken at most once, in the order published (a follower may skip one it never saw).
        assert len(f.applied) == len(set(f.applied)), f"follower {i} applied a version twice: {f.applied}"
        assert [published.index(d) for d in f.applied] == sorted(published.index(d) for d in f.applied)
    figures: dict[str, float] = {"flips": len(published) - 1, "resynced": resynced, "reconnects": reconnects}
    for kind, seen in delays.items():
        seen.sort()
        figures[f"{kind}_p50_ms"] = round(1000 * seen[len(seen) // 2], 1)
        figures[f"{kind}_p99_ms"] = round(1000 * seen[min(len(seen) - 1, int(len(seen) * 0.99))], 1)
    return figures


def test_fifty_followers_converge_through_kill_freeze_and_compaction(source: EtcdSource,
                                                                     private_etcd: PrivateEtcd) -> None:  # noqa: F811
    converge_through_faults(source, private_etcd, followers=50, freeze_s=3)


def crash_mid_apply(source: EtcdSource, etcd: PrivateEtcd, tmp_path: Path, *, rounds: int) -> int:
    """SIGKILL a follower process while versions arrive, ``rounds`` times; restarted with etcd unreachable, it
    serves its snapshot, which must be a whole published version at least as new as the last one it reported
    taking. Returns how many versions the killed followers reported taking in all."""
    bodies = {digest_of(body(1000, padding=300)): 1000}
    source.publish(body(1000, padding=300))
    snapshot = tmp_path / "snap"
    rng = random.Random(7)
    dead_url = "http://127.0.0.1:1"  # nothing listens: the restart must use the snapshot
    total = 0
    for round_ in range(rounds):
        proc = _watcher(etcd.url, snapshot)
        lines = _reader(proc)
        assert _next(lines, "ready").startswith("ready ")
        taken: list[str] = []
        pusher_done = threading.Event()

        def push(round_: int = round_) -> None:
            for i in range(40):
                text = body(2000 + round_ * 100 + i, padding=300)  # ~25 kB: a snapshot write takes a while
                bodies[digest_of(text)] = 2000 + round_ * 100 + i
                source.publish(text)
                if pusher_done.wait(0.005):
                    return

        pusher = threading.Thread(target=push)
        pusher.start()
        time.sleep(rng.uniform(0.1, 0.6))
        proc.kill()  # SIGKILL, at a random point of an apply
        proc.wait()
        pusher_done.set()
        pusher.join()
        while not lines.empty():
            line = lines.get()
            if line.startswith("serving "):
                taken.append(line.split()[2])
        total += len(taken)
        again = _watcher(dead_url, snapshot)
        try:
            ready = _next(_reader(again), "ready from the snapshot").split()
        finally:
            assert again.stdin is not None
            again.stdin.close()
            again.wait(timeout=30)
        assert ready[0] == "ready" and ready[3] == "1", f"round {round_}: not started from the snapshot: {ready}"
        assert ready[2] in bodies, f"round {round_}: the snapshot holds no published version"
        assert int(ready[1]) == bodies[ready[2]]
        if taken:
            assert bodies[ready[2]] >= bodies[taken[-1]], f"round {round_}: the snapshot went back"
    return total


def test_a_follower_killed_mid_apply_restarts_on_a_whole_version(source: EtcdSource, private_etcd: PrivateEtcd,  # noqa: F811
                                                                 tmp_path: Path) -> None:  # fmt: skip
    crash_mid_apply(source, private_etcd, tmp_path, rounds=5)


def _config_metrics(executor: Executor) -> dict[str, float]:
    """The ``ddm_config_*`` samples a scrape of ``executor``'s metrics shows."""
    prometheus_client = require_module("prometheus_client", "the metrics of a followed configuration")
    registry = prometheus_client.CollectorRegistry()
    installed = metrics.install(registry, executor=executor)
    try:
        return {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in installed.text().splitlines()
                if line.startswith("ddm_config_")}  # fmt: skip
    finally:
        installed.uninstall()


def test_unreachable_etcd_keeps_the_last_version_and_says_so(source: EtcdSource, private_etcd: PrivateEtcd,  # noqa: F811
                                                             tmp_path: Path) -> None:  # fmt: skip
    source.publish(body(1000))
    holder = ConfigHolder(source, snapshot=tmp_path / "snap", check_env=False)
    executor = Executor(holder, load_schema=False, replica_monitor=False)
    assert _config_metrics(executor) | {"ddm_config_confirmed_age_seconds": 0} == {
        "ddm_config_version": 1, "ddm_config_source_reachable": 1, "ddm_config_from_snapshot": 0,
        "ddm_config_confirmed_age_seconds": 0}  # fmt: skip
    private_etcd.kill()
    result = holder.reload(force=True)
    assert result.status == "unreachable" and holder.config.runtime.max_offset == 1000
    assert isinstance(holder.last_error, SourceUnavailableError) and "etcd is unreachable" in holder.last_error.message
    scraped = _config_metrics(executor)
    assert scraped["ddm_config_source_reachable"] == 0 and scraped["ddm_config_version"] == 1
    executor.close()
    later = ConfigHolder(EtcdSource(EtcdClient(private_etcd.url, timeout=0.5), prefix=PREFIX),
                         snapshot=tmp_path / "snap", check_env=False)  # fmt: skip
    assert later.current.from_snapshot and later.config.runtime.max_offset == 1000
    from_snapshot = Executor(later, load_schema=False, replica_monitor=False)
    scraped = _config_metrics(from_snapshot)
    assert scraped["ddm_config_from_snapshot"] == 1 and scraped["ddm_config_confirmed_age_seconds"] == -1
    from_snapshot.close()
    private_etcd.start()
    assert later.reload().status == "unchanged" and not later.current.from_snapshot and later.last_error is None


def test_ddm_config_push_history_rollback_promote(private_etcd: PrivateEtcd, tmp_path: Path) -> None:  # noqa: F811
    url = f"etcd://127.0.0.1:{private_etcd.client_port}{PREFIX}"
    path = tmp_path / "ddm.yaml"
    path.write_text(body(1000))
    assert run("config", "push", "--etcd", url, str(path)).output.startswith("published version 1")
    path.write_text(body(2000))
    assert run("config", "push", "--etcd", url, "--expect-version", "1", str(path)).exit_code == 0
    conflict = run("config", "push", "--etcd", url, "--expect-version", "1", str(path))
    assert conflict.exit_code == 2 and "names version 2, not 1" in conflict.stderr
    back = run("config", "rollback", "--etcd", url, "--to", "1")
    assert back.exit_code == 0 and back.output.startswith("version 1 is active again")
    assert private_etcd.get(f"{PREFIX}/active_version") == "1"
    path.write_text(body(3000))
    assert run("config", "push", "--etcd", url, "--group", "canary", str(path)).exit_code == 0
    hist = run("config", "history", "--etcd", url)
    rows = [[cell.strip() for cell in line.split("|")] for line in hist.output.splitlines()[2:]]
    assert [(r[0], r[2], r[4]) for r in rows] == [("3", "canary", "canary"), ("2", "everyone", ""),
                                                  ("1", "everyone", "everyone")]  # fmt: skip
    canary_back = run("config", "rollback", "--etcd", url, "--group", "canary", "--to", "2")
    assert canary_back.exit_code == 0 and canary_back.output.startswith("version 2 is active again for group 'canary'")
    assert private_etcd.get(f"{PREFIX}/groups/canary/active_version") == "2"
    assert run("config", "rollback", "--etcd", url, "--group", "canary", "--to", "3").exit_code == 0
    promoted = run("config", "promote", "--etcd", url, "--group", "canary")
    assert promoted.exit_code == 0 and "version 3 (the version of group 'canary') is active for everyone" in promoted.output
    assert private_etcd.get(f"{PREFIX}/active_version") == "3"
    on_redis = run("config", "rollback", "--redis", "redis://127.0.0.1:6379/0", "--group", "canary", "--to", "1")
    assert on_redis.exit_code == 2 and "flips a group's pointer on etcd" in on_redis.stderr
    both = run("config", "history", "--etcd", url, "--redis", "redis://127.0.0.1:6379/0")
    assert both.exit_code == 2 and "name one configuration center" in both.stderr
