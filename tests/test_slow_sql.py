"""``runtime.slowSqlMs``: slower statements are logged to ``ddm_core.slow_sql`` and counted, values never shown."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.execute import Executor
from ddm_core.execute.slow_sql import LOGGER, REFRESH, SlowSqlLog
from test_execute_support import (  # noqa: F401 - fixtures
    mysql_config,
    mysql_databases,
    sharding_config,
)

THRESHOLD_MS = 300
SLEEP = 0.35  # seconds: above the threshold, whatever the machine's load
SECRET = "secret-value-7f3a"


def config_with(mysql_databases: list[str], slow_sql_ms: int) -> Any:
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(mysql_databases)}
    raw = sharding_config(urls)
    raw["runtime"]["slowSqlMs"] = slow_sql_ms
    return load_config(raw)


@pytest.fixture()
def slow_executor(mysql_config: Any, mysql_databases: list[str]) -> Iterator[Executor]:
    # Emptied by another executor: a 16-unit DELETE on a loaded machine may itself pass the threshold.
    with Executor(mysql_config, timeout=30.0) as cleaner:
        cleaner.execute("DELETE FROM t_order").close()
        with Executor(config_with(mysql_databases, THRESHOLD_MS), timeout=5.0) as ex:
            yield ex
        cleaner.execute("DELETE FROM t_order").close()


def slow_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


def test_a_slow_statement_is_logged_and_counted_without_its_values(
    slow_executor: Executor, caplog: pytest.LogCaptureFixture
) -> None:
    ex = slow_executor
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with ex.execute("SELECT 1 + %s", (1,)) as r:  # fast: neither logged nor counted
        assert r.fetchone() == (2,)
    assert ex.slow_statements == 0 and not slow_records(caplog)

    with ex.execute("SELECT SLEEP(%s), %s", (SLEEP, SECRET)) as r:
        assert r.fetchone() == (0, SECRET)
    assert ex.slow_statements == 1
    [record] = slow_records(caplog)
    assert record.levelno == logging.WARNING
    assert record.data_sources == ("ds_0",) and record.params == 2 and record.units == 1  # type: ignore[attr-defined]
    assert record.ms >= THRESHOLD_MS  # type: ignore[attr-defined]
    text = record.getMessage()
    assert "ds_0" in text and "SELECT SLEEP(%s), %s" in text and "2 params" in text
    assert SECRET not in text and SECRET not in repr(record.__dict__)  # values are never logged


def test_a_slow_write_reports_its_rows_and_a_fan_out_its_data_sources(
    slow_executor: Executor, caplog: pytest.LogCaptureFixture
) -> None:
    ex = slow_executor
    route = ex.router.route
    first = route("SELECT 1 FROM t_order WHERE user_id = %s", (1,)).units[0].data_source
    other = next(u for u in range(2, 1000) if route("SELECT 1 FROM t_order WHERE user_id = %s", (u,)).units[0].data_source != first)
    ex.execute("INSERT INTO t_order (order_id, user_id, slow) VALUES (1, 1, 0), (2, %s, 0)", (other,)).close()
    caplog.set_level(logging.WARNING, logger=LOGGER)
    caplog.clear()  # the setup's INSERT is slow too on a loaded host: only what follows is counted
    before = ex.slow_statements

    with ex.execute("UPDATE t_order SET note = CONCAT('x', SLEEP(%s)) WHERE user_id = %s", (SLEEP, 1)) as r:
        assert r.rowcount == 1
    [record] = slow_records(caplog)
    assert record.rows == 1 and "1 rows" in record.getMessage()  # type: ignore[attr-defined]

    caplog.clear()
    with ex.execute("SELECT user_id, SLEEP(%s) FROM t_order WHERE user_id IN (%s, %s) ORDER BY user_id",
                    (SLEEP, 1, other)) as r:
        assert [row[0] for row in r.fetchall()] == sorted([1, other])
    [record] = slow_records(caplog)
    assert set(record.data_sources) == {first, route("SELECT 1 FROM t_order WHERE user_id = %s", (other,)).units[0].data_source}  # type: ignore[attr-defined]
    assert record.units == 2 and "more units" in record.getMessage()  # type: ignore[attr-defined]
    assert ex.slow_statements - before == 2


def test_statements_in_a_transaction_are_watched_too(slow_executor: Executor, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with slow_executor.transaction() as tx:
        tx.execute("SELECT SLEEP(%s)", (SLEEP,)).close()
    assert slow_executor.slow_statements == 1 and len(slow_records(caplog)) == 1


def test_zero_turns_the_log_off(mysql_config: Any, mysql_databases: list[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with Executor(config_with(mysql_databases, 0)) as ex:
        ex.execute("SELECT SLEEP(%s)", (SLEEP,)).close()
        assert ex.slow_statements == 0
    assert not slow_records(caplog)


def test_the_threshold_follows_the_configuration_at_most_every_refresh() -> None:
    current = SimpleNamespace(runtime=SimpleNamespace(slow_sql_ms=200))
    log = SlowSqlLog(lambda: current)  # type: ignore[arg-type, return-value]
    assert log.threshold(100.0) == 0.2
    current.runtime.slow_sql_ms = 50  # a reload
    assert log.threshold(100.0 + REFRESH / 2) == 0.2  # not asked again yet
    assert log.threshold(100.0 + REFRESH) == 0.05
    current.runtime.slow_sql_ms = 0
    assert log.threshold(100.0 + 2 * REFRESH) == float("inf")
