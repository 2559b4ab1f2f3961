"""The Redis configuration source on the machine's Redis (127.0.0.1:6379): versions, two watching processes.

Every test uses its own key prefix and deletes its keys. The two watchers
are real processes (tests/redis_config_watcher.py) following the same keys;
what they print is what their ConfigHolder serves.
"""

from __future__ import annotations

import queue
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from ddm_core.errors import ConfigError, ConfigPublishConflictError, ConfigRowError, ConfigValidationError
from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.sources.redis import RedisSource
from services import require_module, require_service
from cli_support import run

redis: Any = require_module("redis", "the Redis configuration source")
HERE = Path(__file__).resolve().parent


def body(max_offset: int, data_source: str = "ds_0") -> str:
    return (
        "dataSources:\n  ds_0: sqlite:///never_opened_0.db\n  ds_1: sqlite:///never_opened_1.db\n"
        f"tables:\n  - {{logicTable: t_order, shardKey: user_id, databases: [{data_source}, ds_1], shardCount: 2}}\n"
        f"runtime:\n  maxOffset: {max_offset}\n"
    )


@pytest.fixture()
def client() -> Iterator[Any]:
    c = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=5)
    try:
        c.ping()
    except redis.RedisError as exc:
        require_service("Redis on 127.0.0.1:6379", str(exc))
    yield c
    c.close()


@pytest.fixture()
def prefix(client: Any) -> Iterator[str]:
    name = f"ddm_test:{uuid.uuid4().hex[:10]}"
    yield name
    for key in client.scan_iter(f"{name}:*"):
        client.delete(key)


def test_versions_are_monotonic_and_checked(client: Any, prefix: str) -> None:
    source = RedisSource(client, prefix=prefix)
    assert source.latest() is None
    assert source.publish(body(1000)) == 1
    assert source.publish(body(2000), expect_version=1) == 2
    with pytest.raises(ConfigPublishConflictError, match="the newest version is 2, not 1"):
        source.publish(body(3000), expect_version=1)
    with pytest.raises(ConfigValidationError):
        source.publish(body(3000, data_source="ds_9"))  # an unknown data source: nothing written
    assert source.latest() is not None and source.latest()[0] == 2  # type: ignore[index]
    fetched = source.fetch()
    assert "maxOffset: 2000" in str(fetched.content) and fetched.origin.endswith("version 2")
    assert [v.version for v in source.history()] == [2, 1]
    # A rollback is a new version with the old content.
    assert source.rollback(1) == 3
    assert source.fetch().content == body(1000)
    # A body changed behind the source's back is refused, and so is a newest version going back.
    client.hset(f"{prefix}:v:3", "body", body(1000).replace("1000", "9999"))
    with pytest.raises(ConfigRowError, match="does not match its body"):
        source.fetch()
    client.set(f"{prefix}:latest", f"2:{client.hget(f'{prefix}:v:2', 'checksum').decode()}")
    with pytest.raises(ConfigRowError, match="went back from 3 to 2"):
        source.fetch()


def _reader(proc: subprocess.Popen[str]) -> "queue.Queue[str]":
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.strip())

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _next(lines: "queue.Queue[str]", what: str) -> str:
    try:
        return lines.get(timeout=60)  # a generous bound for a loaded machine: no speed is asserted
    except queue.Empty:
        raise AssertionError(f"the watcher never printed {what}") from None


def test_two_processes_follow_one_configuration(client: Any, prefix: str, tmp_path: Path) -> None:
    source = RedisSource(client, prefix=prefix)
    source.publish(body(1000))
    procs = _watchers(prefix, tmp_path, [None, None])
    try:
        readers = [_reader(p) for p in procs]
        for lines in readers:
            assert _next(lines, "ready") == "ready 1000"
        started = time.monotonic()
        source.publish(body(2000))
        for lines in readers:
            assert _next(lines, "the new version") == f"serving 2000 Redis configuration {prefix!r} version 2"
        delay = time.monotonic() - started  # reported, not asserted (docs/configuration.md#redis-config-center)
        print(f"version 2 reached both watchers after {delay:.3f} s")
        # An invalid version (written without validation) is refused by both; version 2 keeps serving.
        source.publish(body(3000, data_source="ds_9"), validate=False)
        for lines in readers:
            line = _next(lines, "the refusal")
            assert line.startswith("refused ") and "ds_9" in line
        source.publish(body(4000))
        for lines in readers:
            assert _next(lines, "version 4") == f"serving 4000 Redis configuration {prefix!r} version 4"
    finally:
        _stop(procs)


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    """Close every watcher's stdin (its signal to stop) and expect a clean exit."""
    for p in procs:
        assert p.stdin is not None
        p.stdin.close()
    for p in procs:
        assert p.wait(timeout=30) == 0


def _watchers(prefix: str, tmp_path: Path, groups: list[str | None]) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen([sys.executable, str(HERE / "redis_config_watcher.py"), prefix, str(tmp_path / f"snap{i}"),
                          *([group] if group else [])],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=HERE)  # fmt: skip
        for i, group in enumerate(groups)
    ]


def test_a_version_for_a_group_reaches_only_that_group_until_promoted(client: Any, prefix: str, tmp_path: Path) -> None:
    source = RedisSource(client, prefix=prefix)
    source.publish(body(1000))
    procs = _watchers(prefix, tmp_path, ["canary", None])
    try:
        canary, rest = (_reader(p) for p in procs)
        assert _next(canary, "ready") == "ready 1000" and _next(rest, "ready") == "ready 1000"
        assert source.publish(body(2000), group="canary") == 2
        assert _next(canary, "the canary version") == f"serving 2000 Redis configuration {prefix!r} version 2"
        # Everyone else keeps version 1: a version for everyone, published next, proves the notice was handled.
        assert source.publish(body(1000).replace("ds_0", "ds_0 "), group=None) == 3
        assert _next(rest, "version 3") == f"serving 1000 Redis configuration {prefix!r} version 3"
        # The canary takes the newer of the two as well: version 3 is everyone's and higher than 2.
        assert _next(canary, "version 3 in the canary") == f"serving 1000 Redis configuration {prefix!r} version 3"
        assert source.publish(body(2500), group="canary") == 4
        assert _next(canary, "version 4") == f"serving 2500 Redis configuration {prefix!r} version 4"
        assert source.promote("canary") == 5  # the canary already serves this text: only the rest changes
        assert _next(rest, "the promoted version") == f"serving 2500 Redis configuration {prefix!r} version 5"
        assert [(v.version, v.group) for v in source.history()] == [
            (5, ""), (4, "canary"), (3, ""), (2, "canary"), (1, "")]
        assert RedisSource(client, prefix=prefix).latest()[0] == 5  # type: ignore[index]
    finally:
        _stop(procs)


def test_group_names_and_promotions_are_checked(client: Any, prefix: str) -> None:
    source = RedisSource(client, prefix=prefix)
    with pytest.raises(ConfigError, match="rollout group 'one group'"):
        RedisSource(client, prefix=prefix, group="one group")
    with pytest.raises(ConfigRowError, match="nothing was published for group 'canary'"):
        source.promote("canary")
    source.publish(body(1000), group="canary")
    assert source.latest() is None  # nothing for everyone yet
    assert RedisSource(client, prefix=prefix, group="canary").fetch().content == body(1000)
    with pytest.raises(ConfigPublishConflictError, match="the newest version is 1, not 0"):
        source.publish(body(2000), expect_version=0)  # numbers are global: the group's version counts


def test_start_from_the_snapshot_when_redis_is_unreachable(client: Any, prefix: str, tmp_path: Path) -> None:
    source = RedisSource(client, prefix=prefix)
    source.publish(body(1000))
    source.publish(body(2500))
    snapshot = tmp_path / "snapshot.json"
    first = ConfigHolder(source, snapshot=snapshot, check_env=False)
    assert first.config.runtime.max_offset == 2500
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = RedisSource(redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1), prefix=prefix)
    second = ConfigHolder(down, snapshot=snapshot, check_env=False)
    assert second.current.from_snapshot and second.config.runtime.max_offset == 2500
    assert second.last_error is not None and "cannot read the newest version" in second.last_error.message




def test_ddm_config_push_history_rollback(client: Any, prefix: str, tmp_path: Path) -> None:
    url = "redis://127.0.0.1:6379/0"
    path = tmp_path / "ddm.yaml"
    path.write_text(body(1000))
    assert run("config", "push", "--redis", url, "--prefix", prefix, str(path)).output.startswith("published version 1")
    path.write_text(body(2000))
    assert run("config", "push", "--redis", url, "--prefix", prefix, str(path)).exit_code == 0
    conflict = run("config", "push", "--redis", url, "--prefix", prefix, "--expect-version", "1", str(path))
    assert conflict.exit_code == 2 and "the newest version is 2, not 1" in conflict.stderr
    hist = run("config", "history", "--redis", url, "--prefix", prefix)
    rows = [line.split("|")[0].strip() for line in hist.output.splitlines()[2:]]
    assert rows == ["2", "1"]
    back = run("config", "rollback", "--redis", url, "--prefix", prefix, "--to", "1")
    assert back.exit_code == 0 and back.output.startswith("published version 3 (the content of version 1)")
    assert RedisSource(client, prefix=prefix).fetch().content == body(1000)
    path.write_text(body(1000, data_source="ds_9"))
    invalid = run("config", "push", "--redis", url, "--prefix", prefix, str(path))
    assert invalid.exit_code == 2 and "ds_9" in invalid.stderr
    path.write_text(body(3000))
    canary = run("config", "push", "--redis", url, "--prefix", prefix, "--group", "canary", str(path))
    assert canary.exit_code == 0 and canary.output.startswith("published version 4 for group 'canary'")
    assert RedisSource(client, prefix=prefix).fetch().content == body(1000)  # everyone: still version 3
    promoted = run("config", "promote", "--redis", url, "--prefix", prefix, "--group", "canary")
    assert promoted.exit_code == 0 and promoted.output.startswith("published version 5 (group 'canary'")
    assert RedisSource(client, prefix=prefix).fetch().content == body(3000)
    hist = run("config", "history", "--redis", url, "--prefix", prefix)
    assert [line.split("|")[2].strip() for line in hist.output.splitlines()[2:4]] == ["everyone", "canary"]
