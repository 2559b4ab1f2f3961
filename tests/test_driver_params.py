"""Parameter values bound inside the driver adapters, never through a process-wide registry.

``memoryview`` / ``bytearray`` go in as the bytes they hold (PyMySQL used to
send ``"<memory at 0x...>"``), and SQLite gets ``Decimal`` / ``datetime``
values as MySQL prints them without ``sqlite3.register_adapter`` changing how
the rest of the process binds values.
"""

from __future__ import annotations

import datetime
import sqlite3
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator

import pytest

import ddm_core.dbapi as dbapi
from ddm_core import load_config
from ddm_core.execute import Executor
from ddm_core.execute.params import sqlite_params
from test_execute_support import mysql_raw

BLOB = b"\x00\xff'\\\"%s abc\n"


def single_table_config(url: Any) -> Any:
    return load_config({"dataSources": {"ds_0": url}, "singleTables": {"t_blob": "ds_0", "t_vals": "ds_0"},
                        "defaultDataSource": "ds_0"})


@pytest.fixture(scope="module")
def mariadb_url() -> Iterator[dict[str, str]]:
    name = f"ddm_params_{uuid.uuid4().hex[:8]}"
    admin = mysql_raw()
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
        cur.execute(f"CREATE TABLE {name}.t_blob (id INT PRIMARY KEY, data VARBINARY(64))")
    try:
        yield {"url": f"mysql://127.0.0.1:3306/{name}", "username": "root", "password": ""}
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


@pytest.fixture(params=["mariadb", "sqlite"])
def blob_executor(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Executor]:
    if request.param == "mariadb":
        url: Any = request.getfixturevalue("mariadb_url")
    else:
        path = tmp_path / "blob.db"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE t_blob (id INTEGER PRIMARY KEY, data BLOB)")
        url = f"sqlite:///{path}"
    with Executor(single_table_config(url)) as ex:
        ex.execute("DELETE FROM t_blob").close()
        yield ex


def stored(ex: Executor) -> list[tuple[Any, ...]]:
    with ex.execute("SELECT id, data FROM t_blob ORDER BY id") as r:
        return [(i, bytes(d)) for i, d in r.fetchall()]


def test_memoryview_and_bytearray_are_bound_as_bytes(blob_executor: Executor) -> None:
    ex = blob_executor
    values = [BLOB, memoryview(BLOB), bytearray(BLOB), memoryview(bytearray(BLOB * 2))[::2]]
    for i, value in enumerate(values):
        ex.execute("INSERT INTO t_blob (id, data) VALUES (%s, %s)", (i, value)).close()
    assert stored(ex) == [(0, BLOB), (1, BLOB), (2, BLOB), (3, (BLOB * 2)[::2])]
    with ex.execute("SELECT id FROM t_blob WHERE data = %s ORDER BY id", (memoryview(BLOB),)) as r:
        assert r.fetchall() == [(0,), (1,), (2,)]  # usable in conditions too


def test_memoryview_through_the_dbapi_facade_and_executemany(blob_executor: Executor) -> None:
    conn = dbapi.connect(executor=blob_executor, autocommit=True)
    try:
        cur = conn.cursor()
        cur.executemany("INSERT INTO t_blob (id, data) VALUES (%s, %s)",
                        [(10, memoryview(BLOB)), (11, bytearray(b"x")), (12, b"y")])
        assert cur.rowcount == 3
    finally:
        conn.close()
    assert stored(blob_executor) == [(10, BLOB), (11, b"x"), (12, b"y")]


def test_sqlite_converts_in_the_driver(tmp_path: Path) -> None:
    path = tmp_path / "vals.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t_vals (id INTEGER PRIMARY KEY, amount TEXT, at TEXT, day TEXT, t TEXT)")
    adapters = dict(sqlite3.adapters)
    when = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000)
    with Executor(single_table_config(f"sqlite:///{path}")) as ex:
        ex.execute("INSERT INTO t_vals (id, amount, at, day, t) VALUES (%s, %s, %s, %s, %s)",
                   (1, Decimal("12.50"), when, when.date(), when.time())).close()
        with ex.execute("SELECT amount, at, day, t FROM t_vals WHERE amount = %s", (Decimal("12.50"),)) as r:
            assert r.fetchall() == [("12.50", "2024-01-02 03:04:05.678000", "2024-01-02", "03:04:05.678000")]
    assert dict(sqlite3.adapters) == adapters  # nothing registered process-wide


# In a process of its own: other tests of this run may have registered adapters themselves.
_UNTOUCHED = """
import sqlite3, sys
from decimal import Decimal
from ddm_core import load_config
from ddm_core.execute import Executor
before = dict(sqlite3.adapters)
config = load_config({"dataSources": {"ds_0": "sqlite:///" + sys.argv[1]}, "singleTables": {"t_vals": "ds_0"}})
with Executor(config) as ex:
    ex.execute("CREATE TABLE t_vals (amount TEXT)").close()
    ex.execute("INSERT INTO t_vals (amount) VALUES (%s)", (Decimal("1.5"),)).close()
assert dict(sqlite3.adapters) == before and (Decimal, sqlite3.PrepareProtocol) not in sqlite3.adapters
try:
    sqlite3.connect(":memory:").execute("SELECT ?", (Decimal("1.5"),))
except sqlite3.ProgrammingError:
    print("untouched")
"""


def test_a_fresh_sqlite3_connection_in_the_same_process_is_unaffected(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _UNTOUCHED, str(tmp_path / "own.db")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "untouched"  # sqlite3 still refuses Decimal, as it does by default


def test_sqlite_params_copy_only_when_something_needs_converting() -> None:
    plain = (1, "a", b"b", None, 2.5)
    assert sqlite_params(plain) is plain
    assert sqlite_params((Decimal("1.10"), memoryview(b"ab"))) == ("1.10", b"ab")
    assert sqlite_params({"a": Decimal("2"), "b": 3}) == {"a": "2", "b": 3}
