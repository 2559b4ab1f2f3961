"""Data sources that are down, or go down mid-run: a private mariadbd started and SIGKILLed."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pymysql
import pytest

from ddm_core import load_config
from ddm_core.errors import DataSourceUnavailableError, MissingExtraError
from ddm_core.execute import Executor, drivers
from ddm_core.execute.pools import PING_AFTER
from ddm_core.metadata.dump import to_native
from test_readwrite import FakeClock
from ports import free_port
from test_execute_support import (  # noqa: F401 - fixtures
    PrivateMariaDB,
    assert_no_leaks,
    private_config,
    private_mariadb,
    sharding_config,
)


def test_refused_connection_names_the_data_source(tmp_path: Any) -> None:
    port = free_port()  # nothing listens there
    urls = {
        "ds_0": {"url": f"mysql://127.0.0.1:{port}/nowhere", "username": "root", "password": ""},
        "ds_1": f"sqlite:///{tmp_path / 'ok.db'}",
    }
    config = load_config(sharding_config(urls, tables=1))
    with Executor(config) as ex:
        with pytest.raises(DataSourceUnavailableError) as info:
            ex.execute("SELECT * FROM t_config WHERE id = %s", (1,))
        err = info.value
        assert err.data_source == "ds_0" and "'ds_0'" in str(err)
        assert isinstance(err.__cause__, pymysql.err.OperationalError) and err.__cause__.args[0] == 2003
        assert isinstance(err, ConnectionError)
        with pytest.raises(DataSourceUnavailableError):
            ex.warm_up()
        assert_no_leaks(ex)


def test_a_primary_without_replicas_has_a_circuit_breaker_too(tmp_path: Any) -> None:
    """After readWrite.breakerFailures failed connects, the next fails at once, naming the endpoint."""
    port = free_port()  # nothing listens there
    urls = {
        "ds_0": {"url": f"mysql://127.0.0.1:{port}/nowhere", "username": "root", "password": ""},
        "ds_1": f"sqlite:///{tmp_path / 'ok.db'}",
    }
    doc = sharding_config(urls, tables=1)
    doc["readWrite"] = {"breakerFailures": 3, "breakerResetMs": 60_000, "breakerProbeMs": 60_000}  # no probe here
    with Executor(load_config(doc)) as ex:
        with pytest.raises(DataSourceUnavailableError) as first:  # a real connect, refused
            ex.execute("SELECT * FROM t_config WHERE id = %s", (1,))
        assert "circuit breaker" not in str(first.value)
        assert isinstance(first.value.__cause__, pymysql.err.OperationalError)
        messages = []
        for _ in range(3):  # a borrow may connect more than once (warm-up): 3 statements are plenty
            with pytest.raises(DataSourceUnavailableError) as info:
                ex.execute("SELECT * FROM t_config WHERE id = %s", (1,))
            messages.append(str(info.value))
        assert "circuit breaker is open after 3 consecutive connection failures" in messages[-1], messages
        assert info.value.data_source == "ds_0" and "'ds_0'" in messages[-1]
        assert isinstance(info.value.__cause__, pymysql.err.OperationalError)  # what opened it
        assert_no_leaks(ex)


def test_sqlite_file_that_cannot_be_opened(tmp_path: Any) -> None:
    urls = {"ds_0": f"sqlite:///{tmp_path / 'missing-dir' / 'x.db'}"}
    with Executor(load_config(sharding_config(urls, tables=1))) as ex:
        with pytest.raises(DataSourceUnavailableError) as info:
            ex.execute("SELECT 1 FROM t_config")
        assert info.value.data_source == "ds_0"
        assert_no_leaks(ex)


def test_postgresql_without_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # imports as on an install without the extra
    monkeypatch.setattr(drivers, "_DRIVERS", {})  # no driver built by an earlier test
    urls = {"ds_0": {"url": "postgresql://127.0.0.1:5432/test", "username": "postgres"}}
    with pytest.raises(MissingExtraError) as info:
        with Executor(load_config(sharding_config(urls, tables=1))) as ex:
            ex.execute("SELECT 1 FROM t_config")
    assert str(info.value) == (
        "a postgresql data source needs the 'postgresql' extra: pip install 'ddm-core[postgresql]'"
    )
    assert info.value.extra == "postgresql" and info.value.module == "psycopg"


def test_server_killed_mid_statement(private_mariadb: PrivateMariaDB, private_config: Any) -> None:
    ex = Executor(private_config, timeout=20)
    try:
        ex.execute("SELECT 1 FROM t_config").close()
        errors: list[BaseException] = []

        def long_statement() -> None:
            try:
                ex.execute("SELECT SLEEP(10) FROM t_config LIMIT 1").close()
                ex.execute("SELECT SLEEP(10)").close()
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=long_statement)
        t.start()
        time.sleep(0.3)
        assert ex.borrowed() == 1
        private_mariadb.kill()
        t.join(timeout=10)
        assert not t.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], DataSourceUnavailableError)
        assert errors[0].data_source == "ds_0" and "'ds_0'" in str(errors[0])
        assert_no_leaks(ex)

        # While it is down every statement fails fast, naming the data source, and leaks nothing.
        for _ in range(3):
            with pytest.raises(DataSourceUnavailableError, match="ds_0"):
                ex.execute("SELECT 1 FROM t_config")
        assert_no_leaks(ex)

        # Back up: idle pooled connections are dead; the checkout ping replaces them.
        private_mariadb.start()
        time.sleep(PING_AFTER + 0.1)
        with ex.execute("SELECT 1 + %s FROM t_config", (1,)) as r:
            assert r.fetchall() == []
        with ex.execute("SELECT COUNT(*) FROM t_order") as r:
            assert r.fetchone() == (0,)
        assert_no_leaks(ex)
    finally:
        ex.close()
        if private_mariadb.proc is None:
            private_mariadb.start()


# -- the breaker of a killed and restarted server --------------------------------------------------------------

POINT = "SELECT 1 + %s FROM t_config"  # t_config lives on ds_0


def _with_breaker(config: Any, **read_write: int) -> Any:
    doc = to_native(config)
    doc["readWrite"] = read_write
    return load_config(doc)


def _kill_until_the_breaker_opens(ex: Executor, server: PrivateMariaDB) -> None:
    """SIGKILL the server; statements fail (a dead pooled connection, refused connects) until ds_0's breaker opens."""
    ex.execute(POINT, (1,)).close()
    server.kill()
    for _ in range(10):
        with pytest.raises(DataSourceUnavailableError) as info:
            ex.execute(POINT, (1,))
        if "circuit breaker is open" in str(info.value):
            return
    pytest.fail(f"ds_0's breaker did not open: {info.value}")


def test_a_restarted_server_gets_the_first_statement_at_the_breakers_first_probe(
    private_mariadb: PrivateMariaDB, private_config: Any
) -> None:
    """On the executor's clock: refused while a step runs, through at the first probe after the restart.

    breakerResetMs is 60 s here; a breaker that waits for it (as the one before breakerProbeMs did,
    whatever the server did meanwhile) refuses the statement after the step. While the server is
    down, each probe is refused by the host (nothing listens on the port): the next one comes after
    the first step again, not after twice it.
    """
    clock = FakeClock()
    ex = Executor(_with_breaker(private_config, breakerFailures=2, breakerResetMs=60_000), clock=clock)
    try:
        _kill_until_the_breaker_opens(ex, private_mariadb)
        breaker = ex.primary_pool("ds_0").breaker
        assert breaker.state == "open"
        for _ in range(3):
            clock.now += 0.25  # the first step: a jittered wait is never longer than its step
            with pytest.raises(DataSourceUnavailableError) as probe:  # this statement's connect is the probe
                ex.execute(POINT, (1,))
            assert "circuit breaker" not in str(probe.value) and "Connection refused" in str(probe.value.__cause__)
            assert breaker.state == "open" and breaker.probe_at - clock.now <= 0.25
        private_mariadb.start()  # returns once the server accepts connections
        with pytest.raises(DataSourceUnavailableError, match="circuit breaker is open"):
            ex.execute(POINT, (1,))  # the server is back, but the clock has not reached the probe
        clock.now += 0.25  # the first step: a jittered wait is never longer than its step
        with ex.execute(POINT, (1,)) as r:  # the probe connects, the breaker closes, the statement runs
            assert r.fetchall() == []
        assert breaker.state == "closed"
        assert_no_leaks(ex)
    finally:
        ex.close()
        if private_mariadb.proc is None:
            private_mariadb.start()


def test_on_the_real_clock_a_restarted_server_is_used_long_before_breaker_reset_ms(
    private_mariadb: PrivateMariaDB, private_config: Any
) -> None:
    """The default clock and jitter: the server is back and breakerResetMs is 60 s.

    The first probe comes at most 0.25 s after opening and the waits double from there, so the
    first statement succeeds well within a second of the restart; the bound is 30 s, half of
    breakerResetMs, so that a loaded machine cannot fail it while a breaker that waits for
    breakerResetMs always does.
    """
    ex = Executor(_with_breaker(private_config, breakerFailures=2, breakerResetMs=60_000))
    try:
        _kill_until_the_breaker_opens(ex, private_mariadb)
        private_mariadb.start()
        give_up = time.monotonic() + 30.0
        refused = 0
        while True:
            try:
                ex.execute(POINT, (1,)).close()
                break
            except DataSourceUnavailableError as exc:
                assert "circuit breaker" in str(exc)  # refused fast, never a connect to a server that is up
                refused += 1
                assert time.monotonic() < give_up, f"still refused after 30 s ({refused} statements): {exc}"
                time.sleep(0.01)
        assert ex.primary_pool("ds_0").breaker.state == "closed"
        assert_no_leaks(ex)
    finally:
        ex.close()
        if private_mariadb.proc is None:
            private_mariadb.start()
