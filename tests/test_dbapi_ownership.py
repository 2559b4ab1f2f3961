"""Who owns an executor: a connection made from a configuration owns its own; sharing is explicit."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest
import yaml

import ddm_core
import ddm_core.dbapi as dbapi
from ddm_core.execute import Executor
from test_execute_support import assert_no_leaks


def write_config(path: Path, tmp_path: Path, single: dict[str, str]) -> None:
    urls = {f"ds_{i}": f"sqlite:///{tmp_path / f'ds_{i}.db'}" for i in range(2)}
    path.write_text(yaml.safe_dump({"dataSources": urls, "singleTables": single}), encoding="utf-8")


def test_a_connection_made_from_a_path_owns_its_executor(tmp_path: Path) -> None:
    path = tmp_path / "ddm.yaml"
    write_config(path, tmp_path, {"t_config": "ds_0"})
    a = dbapi.connect(str(path), autocommit=True)
    b = ddm_core.connect(path, autocommit=True)
    assert a.owns_executor and b.owns_executor
    assert a.executor is not b.executor  # nothing shared behind the caller's back
    cur = a.cursor()
    cur.execute("CREATE TABLE t_config (id INTEGER PRIMARY KEY, name TEXT)")
    cur.execute("INSERT INTO t_config (id, name) VALUES (%s, %s)", (1, "x"))
    bc = b.cursor()
    bc.execute("SELECT name FROM t_config")
    assert bc.fetchall() == [("x",)]
    owned = a.executor
    a.close()
    assert owned._closed and not b.executor._closed
    b.close()


def test_an_edited_file_is_what_the_next_connection_gets(tmp_path: Path) -> None:
    path = tmp_path / "ddm.yaml"
    write_config(path, tmp_path, {"t_config": "ds_0"})
    with dbapi.connect(path, autocommit=True) as first:
        assert first.executor.config.single_tables["t_config"].data_source == "ds_0"
    write_config(path, tmp_path, {"t_config": "ds_1"})
    with dbapi.connect(path, autocommit=True) as second:
        assert second.executor.config.single_tables["t_config"].data_source == "ds_1"


def test_sharing_an_executor_is_explicit(tmp_path: Path) -> None:
    path = tmp_path / "ddm.yaml"
    write_config(path, tmp_path, {"t_config": "ds_0"})
    with Executor(path) as ex:
        conns = [dbapi.connect(executor=ex, autocommit=True) for _ in range(3)]
        assert all(c.executor is ex and not c.owns_executor for c in conns)
        conns[0].cursor().execute("CREATE TABLE t_config (id INTEGER PRIMARY KEY)")
        for c in conns:
            c.close()
        assert not ex._closed  # connections that share never close it
        with ex.execute("SELECT COUNT(*) FROM t_config") as r:
            assert r.fetchone() == (0,)
        assert_no_leaks(ex)
        with pytest.raises(dbapi.InterfaceError, match="shares that executor"):
            dbapi.connect(path, executor=ex)
        with pytest.raises(dbapi.InterfaceError, match="timeout"):
            dbapi.connect(executor=ex, timeout=1.0)


def test_an_owned_executor_is_closed_when_its_connection_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "ddm.yaml"
    write_config(path, tmp_path, {"t_config": "ds_0"})
    conn = dbapi.connect(path, autocommit=True)
    executor: Any = conn.executor
    closed = weakref.ref(executor)
    del conn
    gc.collect()
    assert executor._closed
    del executor
    gc.collect()
    assert closed() is None  # nothing keeps it alive: no registry by path
