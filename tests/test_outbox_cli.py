"""``ddm ddl --outbox``, ``ddm relay --once`` and ``ddm relay dead-letters`` on a real MariaDB and Redis; SQLite outboxes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from outbox_support import outbox_databases, redis_client, rows, stream_prefix
from test_cli import assert_error, run

from ddm_core import load_config
from ddm_core.ddl import execute_ddl, outbox_statements
from ddm_core.execute import Executor
from ddm_core.outbox import Message, Relay, consume_once, outbox_ddl, publish, table_ddl


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], Path]]:
    with outbox_databases(2) as (names, cfg):
        path = tmp_path_factory.mktemp("cfg") / "ddm.yaml"
        path.write_text(yaml.safe_dump(cfg))
        yield names, path


def _publish(path: Path, n: int) -> list[str]:
    with Executor(load_config(str(path)), load_schema=False) as ex:
        out = []
        for i in range(n):
            with ex.transaction() as tx:
                tx.execute("INSERT INTO t_order (user_id, amount) VALUES (%s, 1)", (i,)).close()
                out.append(publish(tx, "cli", f"p{i}", key=i))
        return out


def test_ddl_outbox_prints_both_tables_per_data_source(env: tuple[list[str], Path]) -> None:
    _, path = env
    result = run("ddl", "-c", str(path), "--outbox")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("-- outbox tables: 4 statements on 2 data sources")
    assert out.count("CREATE TABLE IF NOT EXISTS ddm_outbox") == 2
    assert out.count("CREATE TABLE IF NOT EXISTS ddm_consume_log") == 2
    assert out.index("-- ds_0") < out.index("-- ds_1")
    sqlite = run("ddl", "-c", str(path), "--outbox", "--dialect", "sqlite").stdout
    assert "seq INTEGER PRIMARY KEY AUTOINCREMENT" in sqlite and "CREATE INDEX IF NOT EXISTS" in sqlite
    usage = run("ddl", "-c", str(path))
    assert usage.exit_code == 2 and "TEMPLATE, --outbox, or both" in usage.stderr
    # --execute is idempotent (IF NOT EXISTS): the tables already exist.
    done = run("ddl", "-c", str(path), "--outbox", "--execute")
    assert done.exit_code == 0 and "executed 4 of 4 statements" in done.stdout


def test_relay_once_to_redis(env: tuple[list[str], Path]) -> None:
    names, path = env
    for db in names:
        rows(db, "DELETE FROM ddm_outbox")
    client = redis_client()
    prefix = stream_prefix()
    try:
        ids = _publish(path, 6)
        result = run("relay", "-c", str(path), "--sink", f"redis://127.0.0.1:6379/0?prefix={prefix}", "--once")
        assert result.exit_code == 0, result.output
        assert "claimed 6, delivered 6, failed 0, dead 0" in result.stdout
        assert sorted(f[b"id"].decode() for _, f in client.xrange(f"{prefix}cli")) == sorted(ids)
    finally:
        client.delete(f"{prefix}cli")
        client.close()


def test_relay_usage_errors(env: tuple[list[str], Path]) -> None:
    _, path = env
    assert run("relay", "-c", str(path)).exit_code == 2
    assert_error(run("relay", "-c", str(path), "--sink", "kafka://x", "--once"), "not a sink ddm knows")
    assert_error(run("relay", "-c", str(path), "--sink", "stdout", "--max-attempts", "0", "--once"),
                 "max_attempts must be an int from 1 to 1000")
    assert_error(run("relay", "-c", str(path), "--sink", "stdout", "--data-source", "ds_7", "--once"), "ds_7")


def test_dead_letters_list_and_requeue(env: tuple[list[str], Path]) -> None:
    names, path = env
    for db in names:
        rows(db, "DELETE FROM ddm_outbox")
    ids = _publish(path, 3)
    assert run("relay", "dead-letters", "-c", str(path)).stdout == "no dead letters\n"

    def refuse(message: Message) -> None:
        raise TimeoutError("broker timed out")

    with Executor(load_config(str(path)), load_schema=False) as ex:
        assert Relay(ex, refuse, max_attempts=1).run_once().dead == 3
    listing = run("relay", "dead-letters", "-c", str(path))
    assert listing.exit_code == 0
    lines = listing.stdout.splitlines()
    assert [c.strip() for c in lines[0].split(" | ")][:5] == ["data source", "message id", "topic", "key", "attempts"]
    assert len(lines) == 2 + 3 and all(mid in listing.stdout for mid in ids)
    assert "TimeoutError: broker timed out" in listing.stdout
    one = run("relay", "dead-letters", "-c", str(path), "--requeue", ids[0])
    assert one.stdout == "requeued 1 message\n"
    assert run("relay", "dead-letters", "-c", str(path), "--requeue", ids[0]).stdout == "requeued 0 messages\n"
    assert run("relay", "dead-letters", "-c", str(path), "--requeue-all").stdout == "requeued 2 messages\n"
    states = [r for db in names for r in rows(db, "SELECT state, attempts FROM ddm_outbox")]
    assert states == [("pending", 0)] * 3
    assert run("relay", "dead-letters", "-c", str(path), "--requeue", "x", "--requeue-all").exit_code == 2


# -- SQLite data sources ---------------------------------------------------------------------------------


def test_outbox_on_sqlite(tmp_path: Path) -> None:
    cfg: dict[str, Any] = {
        "dataSources": {f"ds_{i}": f"sqlite:///{tmp_path}/db{i}.sqlite" for i in range(2)},
        "tables": [{"logicTable": "t_order", "shardKey": "user_id", "algorithm": "mod", "shardCount": 2,
                    "databases": ["ds_0", "ds_1"], "keyGenerator": {"column": "order_id", "type": "snowflake"}}],
        "defaultDataSource": "ds_0",
    }
    config = load_config(cfg)
    assert execute_ddl(config, outbox_statements(config)) == 8
    with Executor(config, load_schema=False) as ex:
        ex.execute("CREATE TABLE t_order (order_id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL)").close()
        ids = []
        for user in range(4):
            with ex.transaction() as tx:
                tx.execute("INSERT INTO t_order (user_id) VALUES (%s)", (user,)).close()
                ids.append(publish(tx, "lite", b"\x00\xff", key=user))
        got: list[Message] = []
        clock = [1_800_000_000.0]
        relay = Relay(ex, got.append, clock=lambda: clock[0], purge_every=0)
        assert relay.run_once().delivered == 4
        assert sorted(m.message_id for m in got) == sorted(ids) and got[0].payload == b"\x00\xff"
        clock[0] += 8 * 86_400
        assert relay.run_once().purged == 4
        assert consume_once(ex, ids[0], lambda tx: None) is True
        assert consume_once(ex, ids[0], lambda tx: None) is False


def test_outbox_ddl_per_dialect() -> None:
    assert len(table_ddl("mariadb")) == 2
    postgres = table_ddl("postgresql")
    assert len(postgres) == 4 and "GENERATED BY DEFAULT AS IDENTITY" in postgres[0] and "BYTEA" in postgres[0]
    config = load_config({"dataSources": {"pg": "postgresql://u@127.0.0.1:5432/x", "my": "mysql://u@h/y"}})
    assert [ds for ds, _ in outbox_ddl(config)] == ["pg"] * 4 + ["my"] * 2
