"""Hot reload of the ``proxy:`` section: a real ``ddm proxy`` following its configuration file.

The proxy looks at the file every 0.2 s (``--reload-interval``); each new
version is published as the documentation says, written to a temporary file
and renamed over the configuration. A test waits for the proxy's log line that
says the version is in force (or refused) before it looks at the effect. Also:
what a reload keeps of the rate buckets and the audit file (offline), and an
in-process ``ProxyServer`` following the Redis config center.
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from ddm_core.proxy import native_password_hash, sha2_password_hash  # noqa: E402
from test_proxy_support import ProxyProcess, connect, create_tables, proxy_config, write_config  # noqa: E402

NEW_USER, NEW_PASSWORD = "newbie", "fresh-Pw-9"


class Reloading:
    """The module's proxy and its configuration file, with a way to publish the next version."""

    def __init__(self, proxy: ProxyProcess, path: Path, base: dict[str, Any]) -> None:
        self.proxy, self.path, self.base = proxy, path, base
        self.serving = base  # the content the configuration holder last took

    def config(self, **proxy: Any) -> dict[str, Any]:
        """The base configuration with these ``proxy:`` fields changed."""
        config = copy.deepcopy(self.base)
        config["proxy"].update(proxy)
        return config

    def publish(self, config: dict[str, Any], expect: str) -> str:
        """Rename ``config`` over the file; wait for the first new log line holding ``expect``; return the new lines."""
        seen = len(self.proxy.lines)
        tmp = self.path.with_suffix(".tmp")
        write_config(config, tmp)
        os.replace(tmp, self.path)
        deadline = time.monotonic() + 30  # a bound on the wait, not a measurement
        while time.monotonic() < deadline:
            new = "".join(self.proxy.lines[seen:])
            if expect in new:
                if expect != "rejected":  # a version the loader refused is not taken at all
                    self.serving = config
                return new
            time.sleep(0.05)
        assert self.proxy.proc is not None
        raise AssertionError(f"no {expect!r} in the proxy's log after publishing (the proxy's exit status: "
                             f"{self.proxy.proc.poll()}; its log's last lines:\n{''.join(self.proxy.lines[-30:])})")  # fmt: skip


# -- offline: what a reload keeps ------------------------------------------------------------------


def test_a_reloaded_limiter_keeps_the_tokens_of_unchanged_buckets() -> None:
    from ddm_core.errors import RateLimitedError
    from ddm_core.proxy.ratelimit import RateLimiter

    now = [0.0]
    old = RateLimiter({"app": 1, "etl": 1}, {"t_order": 1}, clock=lambda: now[0])
    old.admit("app", ["t_order"])  # app's and t_order's only tokens
    new = RateLimiter({"app": 1, "etl": 5}, {"T_ORDER": 1}, clock=lambda: now[0], previous=old)
    with pytest.raises(RateLimitedError) as info:
        new.admit("app", [])  # same rate: still empty, a reload is no refill
    assert info.value.context["user"] == "app"
    with pytest.raises(RateLimitedError):
        new.admit("etl", ["t_order"])  # the table's bucket is kept too (names case-insensitive)
    for _ in range(5):
        new.admit("etl", [])  # a changed rate: a new, full bucket
    now[0] += 1.0
    new.admit("app", ["t_order"])


def test_an_audit_log_moved_by_a_reload_writes_to_the_new_file(tmp_path: Path) -> None:
    from ddm_core.proxy.audit import AuditLog

    log = AuditLog(tmp_path / "a.jsonl", threshold_ms=100)
    assert not log.record(user="u", client="c", sql="SELECT 1", units=[], rows=1, ms=50)
    log.configure(tmp_path / "b.jsonl", threshold_ms=0)
    assert log.record(user="u", client="c", sql="SELECT 2", units=[], rows=1, ms=50)
    with pytest.raises(OSError):
        log.configure(tmp_path / "missing" / "c.jsonl", threshold_ms=0)
    assert log.record(user="u", client="c", sql="SELECT 3", units=[], rows=1, ms=50), "the old file stays in use"
    log.close()
    assert (tmp_path / "a.jsonl").read_text() == ""
    written = (tmp_path / "b.jsonl").read_text().splitlines()
    assert [json.loads(line)["sql"] for line in written] == ["SELECT 2", "SELECT 3"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reloading]:
    with fresh_mariadb_databases(2) as databases:
        base = proxy_config(databases)
        create_tables(config=base)
        path = write_config(base, tmp_path_factory.mktemp("reload") / "proxy.yaml")
        proxy = ProxyProcess(path, "--reload-interval", "0.2").start()
        try:
            yield Reloading(proxy, path, base)
        finally:
            proxy.stop()


@pytest.fixture()
def reloading(setup: Reloading) -> Iterator[Reloading]:
    """The module's proxy, put back on its base configuration after the test."""
    yield setup
    if setup.serving != setup.base:
        setup.publish(setup.base, "is in force")


def _user(name: str, password: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "sha2Hash": sha2_password_hash(password), **extra}


def test_an_added_user_logs_in_without_a_restart(reloading: Reloading) -> None:
    with pytest.raises(pymysql.err.OperationalError) as info:
        connect(reloading.proxy.port, user=NEW_USER, password=NEW_PASSWORD)
    assert info.value.args[0] == 1045
    users = reloading.base["proxy"]["users"] + [_user(NEW_USER, NEW_PASSWORD)]
    log = reloading.publish(reloading.config(users=users), "is in force")
    assert f"added: {NEW_USER}" in log
    conn = connect(reloading.proxy.port, user=NEW_USER, password=NEW_PASSWORD)
    with conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER()")
        assert cur.fetchone()[0].startswith(f"{NEW_USER}@")
    conn.close()


def test_an_open_session_sees_a_new_mask_limit_and_audit_threshold_at_its_next_statement(
    reloading: Reloading, tmp_path: Path
) -> None:
    conn = connect(reloading.proxy.port, autocommit=True)
    select = "SELECT order_id, note FROM t_order WHERE user_id = 10"
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, amount, note) VALUES (1, 10, 5, '13812341234')")
        cur.execute(select)
        assert cur.fetchall() == ((1, "13812341234"),)
        audit = tmp_path / "audit.jsonl"
        masked = reloading.config(masks=[{"column": "note", "mask": "phone", "table": "t_order"}],
                                  tableRateLimits={"t_order": 1}, auditLog=str(audit), auditAll=True)  # fmt: skip
        reloading.publish(masked, "is in force")  # the new t_order bucket starts full: one token
        cur.execute(select)  # the same text: its mask plan was dropped with the old masks
        assert cur.fetchall() == ((1, "138****1234"),)
        with pytest.raises(pymysql.err.OperationalError) as info:
            cur.execute(select)  # the table's new limit: 1 a second
        assert info.value.args[0] == 1226
        records = [json.loads(line) for line in audit.read_text().splitlines()]
        assert [r["sql"] for r in records] == [select, select] and "error" in records[1]
        reloading.publish(reloading.base, "is in force")
        cur.execute(select)
        assert cur.fetchall() == ((1, "13812341234"),)
        cur.execute("DELETE FROM t_order WHERE user_id = 10")
        assert len(audit.read_text().splitlines()) == 2, "the audit log was closed with the section that named it"
    conn.close()


def test_a_bad_reload_is_refused_and_the_old_users_still_work(reloading: Reloading) -> None:
    users = reloading.base["proxy"]["users"]
    # malformed: the configuration loader refuses the whole version (the value is not echoed)
    bad_hash = reloading.config(users=users + [{"name": NEW_USER, "sha2Hash": "not-a-hash-" + NEW_PASSWORD}])
    log = reloading.publish(bad_hash, "rejected")
    assert "proxy.users[1].sha2Hash" in log and NEW_PASSWORD not in log
    # valid YAML, but nobody could log in / a limit on an unknown table: the proxy refuses its section
    for section, why in (({"users": []}, "no proxy.users"), ({"tableRateLimits": {"t_nowhere": 5}}, "'t_nowhere'")):
        log = reloading.publish(reloading.config(**section), "its proxy section is refused")
        assert why in log and "WARNING" in log
    conn = connect(reloading.proxy.port)
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
    conn.close()
    with pytest.raises(pymysql.err.OperationalError):
        connect(reloading.proxy.port, user=NEW_USER, password=NEW_PASSWORD)


def test_a_removed_users_sessions_end_between_commands(reloading: Reloading) -> None:
    users = reloading.base["proxy"]["users"] + [{"name": NEW_USER, "passwordHash": native_password_hash(NEW_PASSWORD)}]
    reloading.publish(reloading.config(users=users), "is in force")
    idle = connect(reloading.proxy.port, user=NEW_USER, password=NEW_PASSWORD)
    in_tx = connect(reloading.proxy.port, user=NEW_USER, password=NEW_PASSWORD)
    busy = connect(reloading.proxy.port, user=NEW_USER, password=NEW_PASSWORD)
    kept = connect(reloading.proxy.port)  # USER stays
    with in_tx.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (7, 70, 1)")  # autocommit off: open
    answer: list[Any] = []

    def sleep() -> None:
        with busy.cursor() as cur:
            cur.execute("SELECT SLEEP(2) AS s")
            answer.extend(cur.fetchall())

    running = threading.Thread(target=sleep)
    running.start()
    time.sleep(0.3)  # the statement is on its way before the reload
    log = reloading.publish(reloading.base, "is in force")
    assert f"removed: {NEW_USER}, 3 session(s) ended" in log
    running.join(30)
    assert answer == [(0,)], "the running statement finished and was answered before its session ended"
    for conn in (idle, in_tx, busy):
        with pytest.raises(pymysql.err.OperationalError):
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
    with kept.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM t_order WHERE user_id = 70")
        assert cur.fetchone() == (0,), "the ended session's open transaction was rolled back"
    kept.close()
    with pytest.raises(pymysql.err.OperationalError) as info:
        connect(reloading.proxy.port, user=NEW_USER, password=NEW_PASSWORD)
    assert info.value.args[0] == 1045


def test_start_only_fields_are_named_and_kept(reloading: Reloading) -> None:
    log = reloading.publish(reloading.config(workers=9, batchRows=3), "is in force")
    assert "proxy.workers, proxy.batchRows, which take effect at the next start" in log
    conn = connect(reloading.proxy.port, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SELECT 2")
        assert cur.fetchone() == (2,)
    conn.close()


def test_a_proxy_server_follows_the_redis_config_center(setup: Reloading) -> None:
    # In a program: ProxyServer over a ConfigHolder on RedisSource, which follow() keeps current.
    import asyncio
    import uuid

    import yaml

    from outbox_support import redis_client
    from ddm_core.metadata import ConfigHolder
    from ddm_core.metadata.sources.redis import RedisSource
    from ddm_core.proxy import ProxyServer

    client = redis_client()
    prefix = f"ddm_test:{uuid.uuid4().hex[:10]}"
    source = RedisSource(client, prefix=prefix)
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    stop_following = None
    try:
        source.publish(yaml.safe_dump(setup.base))
        holder = ConfigHolder(source)
        server = ProxyServer(holder, port=0)
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
        stop_following = source.follow(holder, poll=0.2)
        with pytest.raises(pymysql.err.OperationalError):
            connect(server.port, user=NEW_USER, password=NEW_PASSWORD)
        users = setup.base["proxy"]["users"] + [_user(NEW_USER, NEW_PASSWORD)]
        source.publish(yaml.safe_dump({**setup.base, "proxy": {**setup.base["proxy"], "users": users}}))
        deadline = time.monotonic() + 30  # a bound on the wait, not a measurement
        while NEW_USER not in server.users.names and time.monotonic() < deadline:
            time.sleep(0.05)
        conn = connect(server.port, user=NEW_USER, password=NEW_PASSWORD)
        conn.close()
        asyncio.run_coroutine_threadsafe(server.shutdown(), loop).result(60)
        assert server.borrowed_at_close == 0
    finally:
        if stop_following is not None:
            stop_following()
        loop.call_soon_threadsafe(loop.stop)
        runner.join(10)
        loop.close()
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)
        client.close()
