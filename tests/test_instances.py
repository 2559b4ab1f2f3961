"""The instance registry and the fence that counts instances, with real processes (tests/instance_process.py).

* On each store (the ``ddm_instances`` table, Redis keys, etcd keys under a lease): an executor in
  another process registers, its record follows the versions it takes, a clean stop removes it at
  once, and after SIGKILL its record expires with its TTL; ``ddm instances --json`` shows the
  version in use and the lag behind the active version.
* The workflow step every migration and cut-over waits in (``Publisher.effective``) waits for a
  registered instance that never takes the new version, names it on timeout, proceeds once its
  SIGKILLed process's lease expires, and does not wait at all for instances that took the version
  (the fixed fence delay, 600 s here, is never slept).
* A registry that cannot be reached fails no statement: the registrar reports itself unhealthy.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml
from click.testing import CliRunner

from ddm_core.cli import cli
from ddm_core.errors import InstanceFenceTimeoutError
from ddm_core.execute import Executor
from ddm_core.metadata import ConfigHolder, load_config
from ddm_core.metadata.instances import FenceProgress, InstanceRecord, InstanceStore, store_for
from ddm_core.metadata.sources.table import TableSource, checksum_of
from ddm_core.migrate import config_table_source
from ddm_core.migrate.connections import connector
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.publish import EFFECTIVE_MARK, Publisher
from ddm_core.migrate.state import MigrationLog
from ddm_core.observe.collector import DdmCollector
from ddm_core.observe.statements import StatementRecorder
from etcd_support import PrivateEtcd
from instance_process import config_text
from services import fresh_mariadb_databases, mariadb_connect, require_module

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
TTL = 2.0  # seconds a record outlives its process
WAIT = 30.0  # bound on any wait for another process (never reached when things work)

redis: Any = require_module("redis", "the Redis instance registry")


def version_text(databases: list[str], max_offset: int) -> str:
    """The configuration with one runtime setting changed: a new version that moves no data."""
    doc = yaml.safe_load(config_text(databases))
    doc["runtime"]["maxOffset"] = max_offset
    text: str = yaml.safe_dump(doc, sort_keys=False)
    return text


@dataclass
class Center:
    """A configuration center of one kind, its registry as a reader sees it, and its instance processes."""

    kind: str
    databases: list[str]
    prefix: str
    etcd_url: str = ""
    config_path: str = ""
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    _source: Any = None

    def source(self) -> Any:
        if self._source is None:
            if self.kind == "redis":
                from ddm_core.metadata.sources.redis import RedisSource

                self._source = RedisSource(redis.Redis(host="127.0.0.1", port=6379, socket_timeout=5),
                                           prefix=self.prefix)  # fmt: skip
            elif self.kind == "etcd":
                from ddm_core.metadata.sources.etcd import EtcdSource
                from ddm_core.metadata.sources.etcd_client import EtcdClient

                self._source = EtcdSource(EtcdClient(self.etcd_url), prefix=self.prefix)
            else:
                self._source = config_table_source(load_config(config_text(self.databases)), "ds_0", create=True)
        return self._source

    def publish(self, text: str) -> int:
        version: int = self.source().publish(text)
        return version

    def store(self) -> InstanceStore:
        store = store_for(self.source())
        assert store is not None
        return store

    def cli_args(self) -> list[str]:
        """Where ``ddm instances`` finds this registry."""
        if self.kind == "redis":
            return ["--redis", "redis://127.0.0.1:6379/0", "--prefix", self.prefix]
        if self.kind == "etcd":
            return ["--etcd", "etcd://" + self.etcd_url.removeprefix("http://") + self.prefix]
        return ["-c", self.config_path, "--config-on", "ds_0"]

    def start(self, *follows: float) -> list[tuple[subprocess.Popen[str], str]]:
        """Instance processes (started together), one per ``follow`` interval; each with its instance
        id once it is registered."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)])}
        procs = []
        for follow in follows:
            args = {"kind": self.kind, "databases": self.databases, "prefix": self.prefix, "etcd": self.etcd_url,
                    "ttl": TTL, "follow": follow}  # fmt: skip
            procs.append(subprocess.Popen([sys.executable, str(HERE / "instance_process.py"), json.dumps(args)],
                                          stdout=subprocess.PIPE, text=True, env=env))  # fmt: skip
        self.procs.extend(procs)
        started = []
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline().split()
            assert line[:1] == ["registered"], f"the instance process did not register (exit {proc.poll()})"
            started.append((proc, line[1]))
        return started

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        if self._source is not None and self.kind == "table":
            self._source.close()


def records(store: InstanceStore) -> dict[str, InstanceRecord]:
    return {r.instance_id: r for r in store.live()}


def wait_until(what: str, check: Callable[[], bool]) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after :data:`WAIT` seconds (a bound, not a timing)."""
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {WAIT:g} s"
        time.sleep(0.05)


@pytest.fixture()
def databases() -> Iterator[list[str]]:
    with fresh_mariadb_databases(2) as names:
        yield names


@pytest.fixture(params=["table", "redis", "etcd"])
def center(request: pytest.FixtureRequest, databases: list[str], tmp_path: Path) -> Iterator[Center]:
    kind = request.param
    config_path = tmp_path / "config.yaml"
    config_path.write_text(config_text(databases), encoding="utf-8")
    prefix = f"ddm:test:{uuid.uuid4().hex[:10]}"
    etcd: PrivateEtcd | None = None
    if kind == "etcd":
        etcd = PrivateEtcd(tmp_path)
        etcd.start()
        prefix = f"/ddm/test/{uuid.uuid4().hex[:10]}"
    c = Center(kind, databases, prefix, etcd.url if etcd else "", str(config_path))
    try:
        yield c
    finally:
        c.stop_all()
        if etcd is not None:
            etcd.stop()
        if kind == "redis":
            client = redis.Redis(host="127.0.0.1", port=6379)
            keys = list(client.scan_iter(match=prefix + ":*"))
            if keys:
                client.delete(*keys)


def instances_json(c: Center) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["instances", *c.cli_args(), "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


def test_an_instance_registers_follows_its_versions_and_leaves(center: Center) -> None:
    first = config_text(center.databases)
    assert center.publish(first) == 1
    store = center.store()
    (follower, follower_id), (stuck, stuck_id) = center.start(0.2, 0)

    seen = records(store)
    assert set(seen) == {follower_id, stuck_id}
    mine = seen[follower_id]
    assert (mine.role, mine.host, mine.pid, mine.version, mine.digest) == (
        "executor", socket.gethostname(), follower.pid, 1, checksum_of(first))
    assert seen[stuck_id].pid == stuck.pid and mine.started_at <= time.time()

    second = version_text(center.databases, 77)
    assert center.publish(second) == 2
    wait_until("the follower reports version 2", lambda: records(store)[follower_id].version == 2)
    now = records(store)
    assert now[follower_id].digest == checksum_of(second) and now[stuck_id].version == 1
    assert store.newest_version() == 2

    shown = instances_json(center)
    assert shown["active_version"] == 2
    by_pid = {row["pid"]: row for row in shown["instances"]}
    assert set(by_pid) == {follower.pid, stuck.pid}
    assert (by_pid[follower.pid]["version"], by_pid[follower.pid]["lag"]) == (2, 0)
    assert (by_pid[stuck.pid]["version"], by_pid[stuck.pid]["lag"]) == (1, 1)
    assert all(row["role"] == "executor" and row["heartbeat_age_s"] <= TTL for row in shown["instances"])
    table = CliRunner().invoke(cli, ["instances", *center.cli_args()])
    assert table.exit_code == 0 and str(stuck.pid) in table.output
    assert "2 instances; active version 2; 1 behind" in " ".join(table.output.split())

    stuck.send_signal(signal.SIGTERM)  # a clean stop removes the record before the process ends
    assert stuck.wait(WAIT) == 0
    assert stuck_id not in records(store)

    follower.kill()  # no goodbye: the record stays until its TTL passes, then the store drops it
    follower.wait()
    wait_until("the killed instance's record expires", lambda: follower_id not in records(store))
    assert records(store) == {}
    store.close()


@pytest.fixture()
def table_center(databases: list[str], tmp_path: Path) -> Iterator[Center]:
    c = Center("table", databases, "", config_path=str(tmp_path / "unused.yaml"))
    try:
        yield c
    finally:
        c.stop_all()


def test_a_fence_step_waits_for_every_registered_instance(table_center: Center) -> None:
    c = table_center
    c.publish(config_text(c.databases))
    (stuck, stuck_id), (follower, follower_id) = c.start(0, 0.2)  # the first never takes a new version
    store = c.store()
    config = load_config(config_text(c.databases))
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        assert seconds < WAIT, f"the step slept {seconds:g} s: the fixed fence delay, not the registry"
        time.sleep(seconds)

    with MigrationLog(connector(config, "ds_0"), "fence") as log:
        log.create_table()
        log.enter(Phase.PREPARE)
        lines: list[str] = []
        looks: list[FenceProgress] = []

        def publisher(timeout: float, on_fence: Callable[[FenceProgress], None] = looks.append) -> Publisher:
            source = c.source()
            assert isinstance(source, TableSource)
            return Publisher(log, source, fence_after_s=600, poll_s=1, echo=lines.append, sleep=sleep,
                             fence_timeout_s=timeout, on_fence=on_fence)  # fmt: skip

        step = publisher(timeout=1.0)
        version = step.publish("dual_write", version_text(c.databases, 11))
        wait_until("the follower takes the step's version", lambda: records(store)[follower_id].version == version)
        with pytest.raises(InstanceFenceTimeoutError) as refused:
            step.effective("dual_write")
        message = refused.value.message
        assert f"pid {stuck.pid}" in message and "version 1" in message and f"pid {follower.pid}" not in message
        assert "1 of 2 registered instances" in message and refused.value.context["version"] == version
        assert step.mark(EFFECTIVE_MARK + "dual_write") is None  # a refused step is run again later

        # Run again: the step waits naming the stuck instance; SIGKILL it and its lease lets the step go.
        named = threading.Event()

        def look(progress: FenceProgress) -> None:
            looks.append(progress)
            if any(r.pid == stuck.pid for r in progress.laggards):
                named.set()

        failures: list[BaseException] = []
        retry = publisher(timeout=WAIT, on_fence=look)

        def run() -> None:
            try:
                retry.effective("dual_write")
            except BaseException as exc:  # handed to the test's thread
                failures.append(exc)

        waiter = threading.Thread(target=run)
        waiter.start()
        assert named.wait(WAIT), "the step never named the instance it waits for"
        assert waiter.is_alive()  # it waits while the instance is registered and behind
        stuck.kill()
        stuck.wait()
        waiter.join(WAIT + TTL)
        assert not waiter.is_alive() and failures == []
        assert retry.mark(EFFECTIVE_MARK + "dual_write") is not None
        last = looks[-1]
        assert last.laggards == () and [r.instance_id for r in last.live] == [follower_id]
        assert stuck_id not in records(store)

        # An instance that takes the version lets the next step through without the fixed delay.
        looks.clear()
        slept.clear()
        nxt = publisher(timeout=WAIT)
        newer = nxt.publish("cutover", version_text(c.databases, 12))
        nxt.effective("cutover")
        assert nxt.mark(EFFECTIVE_MARK + "cutover") is not None
        assert looks[-1].laggards == () and looks[-1].live[0].version is not None
        assert looks[-1].live[0].version >= newer and all(s < WAIT for s in slept)
        assert any("registered instances" in line for line in lines)
        for p in (step, retry, nxt):
            p.close()
    store.close()


def test_an_unreachable_registry_fails_no_statement(databases: list[str], tmp_path: Path) -> None:
    from ddm_core.metadata.sources.redis import RedisSource

    conn = mariadb_connect(database=databases[0])
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t_config (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40) UNIQUE)")
    conn.close()
    snapshot = tmp_path / "snapshot.json"
    prefix = f"ddm:test:{uuid.uuid4().hex[:10]}"
    up = RedisSource(redis.Redis(host="127.0.0.1", port=6379, socket_timeout=5), prefix=prefix)
    up.publish(config_text(databases))
    ConfigHolder(up, snapshot=snapshot, check_env=False)  # writes the snapshot
    up.client.delete(*list(up.client.scan_iter(match=prefix + ":*")))
    with socket.socket() as s:  # a port nothing listens on: Redis is gone for this instance
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    down = RedisSource(client, prefix=prefix)
    holder = ConfigHolder(down, snapshot=snapshot, check_env=False)
    assert holder.current.from_snapshot
    with Executor(holder, instance_ttl=TTL, load_schema=False, replica_monitor=False) as executor:
        registrar = executor.instance
        assert registrar is not None
        wait_until("the registrar tries the store", lambda: registrar.status.error is not None)
        executor.execute("INSERT INTO t_config (name) VALUES (%s)", ("kept",)).close()
        with executor.execute("SELECT name FROM t_config") as result:
            assert [tuple(r) for r in result] == [("kept",)]
        status = registrar.status
        assert not status.healthy and f"{port}" in (status.error or "") and status.record.version is None
        collector = DdmCollector(StatementRecorder())  # what /metrics says about it
        collector.watch(executor)
        samples = {(s.name, s.labels["instance_id"]): s.value for family in collector.collect()
                   if family.name.startswith("ddm_instance_") for s in family.samples}  # fmt: skip
        instance_id = status.record.instance_id
        assert samples == {("ddm_instance_registered", instance_id): 0.0,
                           ("ddm_instance_config_version", instance_id): -1.0}


def test_a_proxy_over_a_followed_center_registers_as_a_proxy(databases: list[str]) -> None:
    """``ProxyServer`` over a holder following Redis: its record says ``proxy`` and goes at shutdown."""
    import asyncio

    require_module("mysql_mimic", "the MySQL-protocol proxy")
    from ddm_core.metadata.sources.redis import RedisSource
    from ddm_core.proxy import ProxyServer
    from ddm_core.proxy.auth import native_password_hash

    doc = yaml.safe_load(config_text(databases))
    doc["proxy"] = {"users": [{"name": "app", "passwordHash": native_password_hash("secret")}]}
    prefix = f"ddm:test:{uuid.uuid4().hex[:10]}"
    source = RedisSource(redis.Redis(host="127.0.0.1", port=6379, socket_timeout=5), prefix=prefix)
    store = store_for(source)
    assert store is not None
    try:
        source.publish(yaml.safe_dump(doc, sort_keys=False))
        holder = ConfigHolder(source, check_env=False)

        async def serve_and_stop() -> tuple[list[InstanceRecord], list[InstanceRecord]]:
            server = ProxyServer(holder, port=0, load_schema=False, replica_monitor=False)
            await server.start()
            registrar = server.executor.instance
            assert registrar is not None
            while not registrar.status.healthy:
                await asyncio.sleep(0.02)
            serving = store.live()
            await server.shutdown()
            return serving, store.live()

        serving, after = asyncio.run(serve_and_stop())
        assert [(r.role, r.pid, r.version) for r in serving] == [("proxy", os.getpid(), 1)]
        assert after == []
    finally:
        keys = list(source.client.scan_iter(match=prefix + ":*"))
        if keys:
            source.client.delete(*keys)


def test_a_version_is_reported_once_the_old_versions_statements_are_over(databases: list[str]) -> None:
    """A statement routed under version 1 still runs when the holder takes version 2: the record
    keeps saying 1 until it is over, so a step waiting for 2 cannot go on while it may still write."""
    from ddm_core.metadata.sources.redis import RedisSource

    conn = mariadb_connect(database=databases[0])
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t_config (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40) UNIQUE)")
        cur.execute("INSERT INTO t_config (name) VALUES ('slow')")
    conn.close()
    prefix = f"ddm:test:{uuid.uuid4().hex[:10]}"
    source = RedisSource(redis.Redis(host="127.0.0.1", port=6379, socket_timeout=5), prefix=prefix)
    store = store_for(source)
    assert store is not None
    try:
        source.publish(config_text(databases))
        holder = ConfigHolder(source, check_env=False)
        with Executor(holder, instance_ttl=TTL, timeout=20, load_schema=False, replica_monitor=False) as executor:
            assert executor.instance is not None
            wait_until("registered", lambda: [r.version for r in store.live()] == [1])
            slow = threading.Thread(target=lambda: executor.execute("SELECT SLEEP(1.5), name FROM t_config").close())
            slow.start()
            wait_until("the slow statement holds its connection", lambda: executor.borrowed() > 0)
            source.publish(version_text(databases, 5))
            assert holder.reload().status == "updated" and holder.current.revision.startswith("2:")
            seen_while_running = []
            while slow.is_alive():
                reported = [r.version for r in store.live()]
                if executor.borrowed() > 0:  # the only statement was running when the record was read
                    seen_while_running.append(reported)
                time.sleep(0.05)
            slow.join()
            assert seen_while_running and all(v == [1] for v in seen_while_running), seen_while_running
            wait_until("version 2 reported once the statement is over", lambda: [r.version for r in store.live()] == [2])
    finally:
        keys = list(source.client.scan_iter(match=prefix + ":*"))
        if keys:
            source.client.delete(*keys)


def test_a_changed_deadline_never_shortens_the_registrys_wait(databases: list[str]) -> None:
    """``Executor.timeout`` set again (a proxy's reload of ``statementTimeoutMs``): statements begun from then on
    get the new deadline; the registry waits at least as long as before for those begun under a longer one."""
    from ddm_core.metadata.sources.redis import RedisSource

    prefix = f"ddm:test:{uuid.uuid4().hex[:10]}"
    source = RedisSource(redis.Redis(host="127.0.0.1", port=6379, socket_timeout=5), prefix=prefix)
    try:
        source.publish(config_text(databases))
        holder = ConfigHolder(source, check_env=False)
        with Executor(holder, instance_ttl=TTL, timeout=20, load_schema=False, replica_monitor=False) as executor:
            assert executor.instance is not None and executor.instance.drain_s == 20
            seen = []
            for seconds in (5.0, 40.0, None, 1.0):
                executor.timeout = seconds
                seen.append((executor.timeout, executor.instance.drain_s))
        assert seen == [(5.0, 20.0), (40.0, 40.0), (None, 40.0), (1.0, 40.0)]
    finally:
        keys = list(source.client.scan_iter(match=prefix + ":*"))
        if keys:
            source.client.delete(*keys)
