"""The lean endpoint pool: LIFO reuse, max size and waiting, lifetime and idle limits, dispose, limits."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ddm_core import load_config
from ddm_core.errors import PoolTimeoutError
from ddm_core.execute.pools import EndpointPool
from ddm_core.metadata.model import Endpoint, PoolSettings
from test_execute_support import mysql_databases  # noqa: F401 - fixture


def _sqlite_endpoint(tmp_path: Path) -> Endpoint:
    config = load_config({"dataSources": {"ds_0": f"sqlite:///{tmp_path / 'p.db'}"}, "singleTables": {"t": "ds_0"}})
    return config.data_sources["ds_0"].primary


def _pool(tmp_path: Path, **settings: int) -> EndpointPool:
    values = {"max_size": 3, "min_idle": 0, "acquire_timeout_ms": 200, **settings}
    return EndpointPool("ds_0", _sqlite_endpoint(tmp_path), PoolSettings(**values))


def test_the_last_returned_connection_is_lent_first(tmp_path: Path) -> None:
    pool = _pool(tmp_path)
    a, b = pool.borrow(), pool.borrow()
    raw_a, raw_b = a.raw, b.raw
    assert raw_a is not raw_b
    a.release()
    b.release()
    again = pool.borrow()
    assert again.raw is raw_b  # warmest first
    s = pool.stats()
    assert (s.idle, s.borrowed, s.open, s.borrows) == (1, 1, 2, 3)
    again.release()
    again.release()  # idempotent
    assert pool.stats().borrowed == 0


def test_a_waiting_borrow_gets_the_next_returned_connection(tmp_path: Path) -> None:
    pool = _pool(tmp_path, max_size=1, acquire_timeout_ms=5000)
    held = pool.borrow()
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(pool.borrow().raw))
    waiter.start()
    while pool._waiting == 0:  # the waiter is parked on the condition
        time.sleep(0.001)
    raw = held.raw
    held.release()
    waiter.join(timeout=10)
    assert got == [raw] and pool.stats().timeouts == 0 and pool.stats().open == 1


def test_a_full_pool_times_out_naming_the_endpoint(tmp_path: Path) -> None:
    pool = _pool(tmp_path, max_size=1)
    held = pool.borrow()
    with pytest.raises(PoolTimeoutError, match="'ds_0'") as info:
        pool.borrow()
    assert info.value.max_size == 1
    s = pool.stats()
    assert (s.timeouts, s.borrows, s.open) == (1, 1, 1)
    held.release()


def test_a_discarded_connection_frees_its_slot(tmp_path: Path) -> None:
    pool = _pool(tmp_path, max_size=1)
    first = pool.borrow()
    raw = first.raw
    first.release(discard=True)
    second = pool.borrow()  # not a timeout: the slot came back
    assert second.raw is not raw
    assert pool.stats().discards == 1
    second.release()


def test_connections_past_their_lifetime_are_replaced(tmp_path: Path) -> None:
    pool = _pool(tmp_path, max_lifetime_ms=50)
    b = pool.borrow()
    old = b.raw
    b.release()
    time.sleep(0.1)
    b = pool.borrow()
    assert b.raw is not old and pool.stats().open == 1
    b.release()


def test_idle_connections_beyond_min_idle_expire(tmp_path: Path) -> None:
    pool = _pool(tmp_path, min_idle=1, idle_timeout_ms=50)
    held = [pool.borrow() for _ in range(3)]
    for b in held:
        b.release()
    assert pool.stats().idle == 3
    time.sleep(0.1)
    for _ in range(3):  # each return closes one connection idle for too long, down to min_idle
        pool.borrow().release()
    s = pool.stats()
    assert s.open == s.idle == 1


def test_dispose_closes_idle_and_returned_connections(tmp_path: Path) -> None:
    pool = _pool(tmp_path)
    lent = pool.borrow()
    pool.borrow().release()
    pool.dispose()
    assert pool.stats().open == 1  # the lent one
    lent.release()
    assert pool.stats().open == 0
    b = pool.borrow()  # still usable: opens a new one
    b.release()
    assert pool.stats().open == 1


def test_statement_limits_come_from_the_dialect_and_the_server(
    tmp_path: Path, mysql_databases: list[str]  # noqa: F811
) -> None:
    sqlite_pool = _pool(tmp_path)
    most_bytes, most_params = sqlite_pool.statement_limits()
    assert most_bytes is None and most_params in (999, 32766)
    config = load_config({"dataSources": {"ds_0": {"url": f"mysql://127.0.0.1:3306/{mysql_databases[0]}",
                                                   "username": "root", "password": ""}},
                          "singleTables": {"t": "ds_0"}})
    mysql_pool = EndpointPool("ds_0", config.data_sources["ds_0"].primary, PoolSettings(max_size=2, min_idle=0))
    from test_execute_support import mysql_raw

    raw = mysql_raw()
    with raw.cursor() as cur:
        cur.execute("SELECT @@max_allowed_packet")
        (packet,) = cur.fetchone()
    raw.close()
    assert mysql_pool.statement_limits() == (packet, None)
    assert mysql_pool.stats().borrowed == 0
    mysql_pool.dispose()
