"""The ``ddm_config`` table as a configuration source, on the local MariaDB.

Every version is a row; a corrupt, cut, invalid or older newest row never
replaces the serving version and is reported; a version that moves data is
refused by watchers as from a file; and two executors in other processes
follow a published version at their next poll.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from ddm_core.errors import (
    ConfigPublishConflictError,
    ConfigRowError,
    ConfigValidationError,
    PlacementChangeError,
    SourceUnavailableError,
)
from ddm_core.metadata import ConfigHolder, load_config
from ddm_core.metadata.sources.table import TableSource, checksum_of
from ddm_core.migrate import config_table_source
from services import fresh_mariadb_databases, mariadb_connect
from test_execute_support import sharding_config

SRC = Path(__file__).resolve().parents[1] / "src"


def config_text(databases: list[str], **runtime: Any) -> str:
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(databases)}
    doc = sharding_config(urls, tables=2, pool={"maxSize": 2, "minIdle": 0, "acquireTimeoutMs": 2000})
    doc["runtime"].update(runtime)
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.fixture()
def databases() -> Iterator[list[str]]:
    with fresh_mariadb_databases(2) as names:
        yield names


@pytest.fixture()
def source(databases: list[str]) -> Iterator[TableSource]:
    config = load_config(config_text(databases))
    with config_table_source(config, "ds_0", create=True) as src:
        yield src


def raw(database: str) -> Any:
    return mariadb_connect(database=database)


def execute(database: str, sql: str, params: Any = None) -> None:
    conn = raw(database)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
    finally:
        conn.close()


def test_versions_are_rows_and_the_holder_follows_them(databases: list[str], source: TableSource) -> None:
    first = config_text(databases, maxOffset=100)
    assert source.publish(first) == 1
    holder = ConfigHolder(source, check_env=False)
    assert holder.current.digest == checksum_of(first) and holder.config.runtime.max_offset == 100
    assert "version 1" in holder.current.origin and "ddm_config" in holder.current.origin
    assert holder.reload().status == "unchanged"

    second = config_text(databases, maxOffset=5)
    assert source.publish(second, expect_version=1) == 2
    result = holder.reload()
    assert result.status == "updated" and holder.config.runtime.max_offset == 5
    assert holder.current.digest == checksum_of(second)
    assert source.latest_version() == 2


def test_a_version_taken_by_another_publisher_is_a_conflict(databases: list[str], source: TableSource) -> None:
    source.publish(config_text(databases))
    source.publish(config_text(databases, maxOffset=7))
    with pytest.raises(ConfigPublishConflictError, match="version 2 was published by someone else") as info:
        source.publish(config_text(databases, maxOffset=8), expect_version=1)
    assert info.value.version == 2 and source.latest_version() == 2


def test_an_invalid_configuration_is_not_published(databases: list[str], source: TableSource) -> None:
    with pytest.raises(ConfigValidationError):
        source.publish(config_text(databases).replace("shardKey", "shardKeey"))
    assert source.latest_version() == 0


@pytest.mark.parametrize("damage", ["body changed", "checksum wrong"])
def test_a_corrupt_newest_row_never_replaces_the_serving_version(
    databases: list[str], source: TableSource, damage: str
) -> None:
    source.publish(config_text(databases, maxOffset=100))
    holder = ConfigHolder(source, check_env=False)
    serving = holder.current
    bad = config_text(databases, maxOffset=1)
    if damage == "body changed":  # a good row edited in place behind the publisher's back
        source.publish(config_text(databases, maxOffset=2))
        execute(databases[0], "UPDATE ddm_config SET body = %s WHERE version = 2", (bad,))
    else:
        execute(databases[0], "INSERT INTO ddm_config (version, body, checksum) VALUES (2, %s, %s)",
                (bad, checksum_of(bad + "x")))
    result = holder.reload()
    assert result.status == "unreachable" and holder.current is serving
    assert isinstance(result.error, ConfigRowError) and holder.last_error is result.error
    message = str(result.error)
    assert "version 2" in message and "checksum" in message and "'ddm_config'" in message
    assert "data source 'ds_0'" in message

    good = config_text(databases, maxOffset=3)
    source.publish(good)  # a new good version heals it
    assert holder.reload().status == "updated" and holder.config.runtime.max_offset == 3


def test_a_row_that_is_no_configuration_is_rejected(databases: list[str], source: TableSource) -> None:
    source.publish(config_text(databases, maxOffset=100))
    holder = ConfigHolder(source, check_env=False)
    broken = "dataSources: [\n"
    execute(databases[0], "INSERT INTO ddm_config (version, body, checksum) VALUES (2, %s, %s)",
            (broken, checksum_of(broken)))
    result = holder.reload()
    assert result.status == "rejected" and holder.config.runtime.max_offset == 100
    assert "version 2" in str(result.error)


def test_a_deleted_newest_row_does_not_take_the_config_back(databases: list[str], source: TableSource) -> None:
    source.publish(config_text(databases, maxOffset=100))
    source.publish(config_text(databases, maxOffset=200))
    holder = ConfigHolder(source, check_env=False)
    execute(databases[0], "DELETE FROM ddm_config WHERE version = 2")
    result = holder.reload()
    assert result.status == "unreachable" and holder.config.runtime.max_offset == 200
    assert "went back from 2 to 1" in str(result.error)


def test_a_body_cut_by_the_server_is_never_committed(databases: list[str]) -> None:
    """Non-strict sql_mode truncates text that does not fit; the read-back catches it."""
    execute(databases[0], "CREATE TABLE small_config (version BIGINT UNSIGNED PRIMARY KEY, body TEXT NOT NULL, "
                          "checksum CHAR(64) NOT NULL, created TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))")

    def lax() -> Any:
        conn = raw(databases[0])
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
        return conn

    src = TableSource(lax, table="small_config")
    body = config_text(databases) + "".join(f"# padding line {i:06d} to pass 64 KiB\n" for i in range(3000))
    assert len(body) > 65535
    with pytest.raises(ConfigRowError, match="not stored as given"):
        src.publish(body)
    assert src.latest_version() == 0
    src.close()


def test_a_placement_change_is_refused_by_a_watcher(databases: list[str], source: TableSource) -> None:
    text = config_text(databases)
    source.publish(text)
    holder = ConfigHolder(source, check_env=False)
    moved = text.replace("tablePerShard: 2", "tablePerShard: 4")
    source.publish(moved)
    result = holder.reload()
    assert result.status == "rejected" and isinstance(result.error, PlacementChangeError)
    assert "t_order" in str(result.error)


def test_missing_or_empty_table_is_unavailable(databases: list[str]) -> None:
    config = load_config(config_text(databases))
    with config_table_source(config, "ds_1", table="not_there") as missing:
        with pytest.raises(SourceUnavailableError, match="not_there"):
            missing.fetch()
    with config_table_source(config, "ds_1", create=True) as empty:
        with pytest.raises(SourceUnavailableError, match="holds no configuration version"):
            ConfigHolder(empty, check_env=False)


# -- two processes following one table ----------------------------------------------------------

FOLLOWER = textwrap.dedent(
    """
    import json, sys, threading, time
    from ddm_core.errors import DeepPaginationError
    from ddm_core.execute import Executor
    from ddm_core.metadata import ConfigHolder, load_config
    from ddm_core.metadata.sources.table import TableSource
    from ddm_core.migrate import connector

    polls = []

    class Logged(TableSource):
        def changed(self, revision):
            start = time.monotonic()
            try:
                return super().changed(revision)
            finally:
                polls.append((start, time.monotonic()))

    source = Logged(connector(load_config(sys.argv[1]), "ds_0"))
    holder = ConfigHolder(source, check_env=False)
    adopted = []
    seen = threading.Event()

    def on_new(new, old):
        adopted.append((time.monotonic(), new.digest, new.config.runtime.max_offset))
        seen.set()

    holder.subscribe(on_new)
    with Executor(holder, timeout=5.0, load_schema=False) as ex:
        sql = "SELECT order_id FROM t_order ORDER BY order_id LIMIT 5 OFFSET 50"
        ex.execute(sql).close()  # maxOffset 10000: allowed
        holder.watch(1.0)
        print(json.dumps({"ready": True}), flush=True)
        seen.wait(120)
        try:
            ex.execute(sql).close()
            refused = False
        except DeepPaginationError:
            refused = True
        print(json.dumps({"adopted": adopted, "refused": refused}), flush=True)
        sys.stdin.read()  # until the test is done
        holder.stop()
        print(json.dumps({"polls": polls}), flush=True)
    """
)


def _line(proc: subprocess.Popen[str]) -> dict[str, Any]:
    line = proc.stdout.readline() if proc.stdout else ""
    assert line, f"follower exited: {proc.stderr.read() if proc.stderr else ''}"
    data: dict[str, Any] = json.loads(line)
    return data


def test_two_executors_in_other_processes_follow_the_table(databases: list[str], source: TableSource,
                                                           tmp_path: Path) -> None:
    start = config_text(databases)
    boot = tmp_path / "bootstrap.yaml"  # where each follower finds the table
    boot.write_text(start)
    source.publish(start)
    conn = raw(databases[0])
    with conn.cursor() as cur:
        for d, db in enumerate(databases):
            for t in range(2):
                cur.execute(f"CREATE TABLE `{db}`.t_order_{d}_{t} (order_id BIGINT PRIMARY KEY, user_id BIGINT, "
                            "amount INT NOT NULL DEFAULT 0, note VARCHAR(40), slow INT NOT NULL DEFAULT 0)")
    conn.close()
    env = {"PYTHONPATH": f"{SRC}", "PATH": "/usr/bin:/bin"}
    followers = [
        subprocess.Popen([sys.executable, "-c", FOLLOWER, str(boot)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    try:
        for proc in followers:
            assert _line(proc) == {"ready": True}
        time.sleep(1.5)  # let each poll at least once on the old version
        new = config_text(databases, maxOffset=10)
        source.publish(new)
        committed = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process on the machine
        outcomes = [_line(proc) for proc in followers]
        for proc in followers:
            assert proc.stdin is not None
            proc.stdin.close()
        logs = [_line(proc)["polls"] for proc in followers]
    finally:
        for proc in followers:
            proc.wait(60)
            if proc.stdout:
                proc.stdout.close()
            if proc.stderr:
                proc.stderr.close()
    for outcome, polls in zip(outcomes, logs):
        ((when, digest, max_offset),) = outcome["adopted"]
        assert digest == checksum_of(new) and max_offset == 10
        assert outcome["refused"]  # the executor itself now refuses the deep offset
        # Taken at the first poll that began after the commit (or one running across it), never later:
        # with watch(1.0) that bounds the delay by one poll interval plus one poll.
        first_after = next(start for start, _ in polls if start > committed)
        later = [start for start, _ in polls if start > first_after]
        assert when <= (later[0] if later else float("inf"))
        print(f"follower adopted the new version {when - committed:.3f} s after the commit")
