"""``Executor.send_single``: a one-unit statement sent without waiting, read once its socket is readable.

What ``ddm proxy`` uses to overlap its clients' round trips on one event loop
(docs/proxy.md#how-it-is-built). On the four MariaDB databases: the same rows,
types, counts, generated keys and errors as ``execute_plan``; the deadline;
an abandoned statement's connection discarded; the plans it declines; and
eight statements in flight at once from one asyncio loop.
"""

from __future__ import annotations

import asyncio
import select
import time
from typing import Any

import pytest

from ddm_core.errors import DuplicateKeyError, ExecutionError, QueryTimeoutError, SessionStateError
from ddm_core.execute import Executor, Result
from ddm_core.execute.sent import SentUnit
from ddm_core.execute.shared import style_of
from test_execute_support import (  # noqa: F401 - fixtures
    assert_no_leaks,
    mysql_config,
    mysql_databases,
    mysql_executor,
    sqlite_config,
    sqlite_executor,
)


def _sent(ex: Executor, sql: str, params: Any = None, **kw: Any) -> SentUnit:
    ex.warm_up()  # an unwarmed pool lends nothing without opening connections
    sent = ex.send_single(ex.router.route(sql, params), caller_style=style_of(sql), **kw)
    assert sent is not None, sql
    return sent


def _finished(sent: SentUnit) -> Result:
    readable, _, _ = select.select([sent.fileno], [], [], 10)
    assert readable, "no answer within 10 s"
    return sent.finish()


def _rows(result: Result) -> list[tuple[Any, ...]]:
    with result:
        return list(result.fetchall())


def test_the_same_outcomes_as_execute_plan(mysql_executor: Executor) -> None:
    ex = mysql_executor
    rows = [(i, i % 7, i * 3, None if i % 3 else f"n{i}") for i in range(1, 41)]
    ex.execute(f"INSERT INTO t_order (order_id, user_id, amount, note) VALUES {', '.join(['(%s, %s, %s, %s)'] * 40)}",
               [v for r in rows for v in r]).close()  # fmt: skip
    for sql, params in [
        ("SELECT order_id, user_id, amount, note FROM t_order WHERE user_id = %s ORDER BY order_id", (3,)),
        ("SELECT order_id, note FROM t_order WHERE user_id = %s AND order_id = %s", (3, 3)),
        ("SELECT COUNT(*), SUM(amount), MAX(note) FROM t_order WHERE user_id = ?", (5,)),
        ("SELECT order_id FROM t_order WHERE user_id = %s AND order_id = %s", (1, 999)),  # no rows
    ]:
        sent, direct = _finished(_sent(ex, sql, params)), ex.execute(sql, params)
        assert sent.description == direct.description, sql
        got, want = _rows(sent), _rows(direct)
        assert got == want and [[type(v) for v in r] for r in got] == [[type(v) for v in r] for r in want], sql
    updated = _finished(_sent(ex, "UPDATE t_order SET amount = amount + 1 WHERE user_id = %s", (2,)))
    assert updated.description is None and updated.rowcount == sum(1 for r in rows if r[1] == 2)
    inserted = _finished(_sent(ex, "INSERT INTO t_order (user_id, amount) VALUES (%s, %s)", (4, 10)))
    assert inserted.rowcount == 1 and len(inserted.generated_keys) == 1  # the snowflake id, as execute returns
    with ex.execute("SELECT amount FROM t_order WHERE user_id = %s AND order_id = %s",
                    (4, inserted.generated_keys[0])) as back:
        assert back.fetchall() == [(10,)]
    assert_no_leaks(ex, wait=0)


def test_errors_are_the_executors_and_the_connection_comes_back(mysql_executor: Executor) -> None:
    ex = mysql_executor
    ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 1, 1)").close()
    with pytest.raises(DuplicateKeyError):
        _finished(_sent(ex, "INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 1, 2)"))
    with pytest.raises(ExecutionError, match="no_such_column"):
        _finished(_sent(ex, "SELECT no_such_column FROM t_order WHERE user_id = 1"))
    assert _rows(_finished(_sent(ex, "SELECT amount FROM t_order WHERE user_id = 1"))) == [(1,)]
    with pytest.raises(SessionStateError):  # refused before anything is sent, as execute_plan refuses it
        ex.send_single(ex.router.route("SELECT GET_LOCK('x', 0) FROM t_order WHERE user_id = 1", None))
    assert_no_leaks(ex, wait=0)


def test_the_deadline_cancels_and_discards(mysql_executor: Executor) -> None:
    ex = mysql_executor
    ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 1, 1)").close()
    discards = sum(s.discards for s in ex.endpoint_stats())
    began = time.monotonic()
    sent = _sent(ex, "SELECT SLEEP(5) FROM t_order WHERE user_id = 1", timeout=0.4)
    with pytest.raises(QueryTimeoutError, match="exceeded its deadline"):
        _finished(sent)
    assert time.monotonic() - began < 4.0  # KILL QUERY ended it, not the 5 s sleep
    assert sum(s.discards for s in ex.endpoint_stats()) == discards + 1
    assert _rows(ex.execute("SELECT amount FROM t_order WHERE user_id = 1")) == [(1,)]
    assert_no_leaks(ex, wait=0)


def test_an_abandoned_statement_discards_its_connection(mysql_executor: Executor) -> None:
    ex = mysql_executor
    discards = sum(s.discards for s in ex.endpoint_stats())
    _sent(ex, "SELECT SLEEP(0.2) FROM t_order WHERE user_id = 1").abandon()
    assert sum(s.discards for s in ex.endpoint_stats()) == discards + 1
    assert_no_leaks(ex, wait=0)
    assert _rows(ex.execute("SELECT COUNT(*) FROM t_order WHERE user_id = 1")) == [(0,)]


def test_plans_it_declines(mysql_executor: Executor, sqlite_executor: Executor) -> None:
    ex = mysql_executor
    cold = Executor(ex.config)
    try:  # nothing idle yet: borrowing would open a connection, which blocks
        assert cold.send_single(cold.router.route("SELECT * FROM t_order WHERE user_id = 1", None)) is None
    finally:
        cold.close()
    ex.warm_up()
    assert ex.send_single(ex.router.route("SELECT * FROM t_order", None)) is None  # several units
    sqlite_executor.warm_up()  # a driver that cannot split a statement in two
    assert sqlite_executor.send_single(sqlite_executor.router.route("SELECT * FROM t_order WHERE user_id = 1",
                                                                    None)) is None  # fmt: skip
    assert_no_leaks(ex, wait=0)


def test_eight_statements_in_flight_from_one_event_loop(mysql_executor: Executor) -> None:
    ex = mysql_executor
    ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES "
               + ", ".join(f"({i}, {i}, {i * 10})" for i in range(1, 9))).close()  # fmt: skip
    ex.warm_up()

    async def one(key: int) -> list[tuple[Any, ...]]:
        loop = asyncio.get_running_loop()
        sent = ex.send_single(ex.router.route("SELECT amount, SLEEP(0.3) FROM t_order WHERE user_id = %s", (key,)))
        if sent is None:  # this pool's idle connections are all out: the blocking path, as the proxy would
            return _rows(await loop.run_in_executor(None, ex.execute, "SELECT amount, 0 FROM t_order WHERE user_id = %s",
                                                    (key,)))  # fmt: skip
        ready = loop.create_future()
        loop.add_reader(sent.fileno, lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            loop.remove_reader(sent.fileno)
        return _rows(sent.finish())

    async def all_of_them() -> list[list[tuple[Any, ...]]]:
        return await asyncio.gather(*(one(k) for k in range(1, 9)))

    began = time.monotonic()
    got = asyncio.run(all_of_them())
    assert [r[0][0] for r in got] == [k * 10 for k in range(1, 9)]
    assert time.monotonic() - began < 8 * 0.3  # overlapped on one thread, not one after another
    assert_no_leaks(ex, wait=0)
