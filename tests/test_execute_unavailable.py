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
from test_execute_support import (  # noqa: F401 - fixtures
    PrivateMariaDB,
    _free_port,
    assert_no_leaks,
    private_config,
    private_mariadb,
    sharding_config,
)


def test_refused_connection_names_the_data_source(tmp_path: Any) -> None:
    port = _free_port()  # nothing listens there
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
    port = _free_port()  # nothing listens there
    urls = {
        "ds_0": {"url": f"mysql://127.0.0.1:{port}/nowhere", "username": "root", "password": ""},
        "ds_1": f"sqlite:///{tmp_path / 'ok.db'}",
    }
    doc = sharding_config(urls, tables=1)
    doc["readWrite"] = {"breakerFailures": 3, "breakerResetMs": 60_000}
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
