"""Savepoints of a transaction over several pinned connections (execute/savepoints.py), through the facades.

A savepoint marks the whole transaction: every connection pinned so far, and each one pinned
later right after its BEGIN (or XA START), so ROLLBACK TO undoes what the transaction did after it
on every data source. Checked on both facades and backends, through XA over two data sources,
through SQLAlchemy's ``begin_nested()``, and through ``ddm proxy``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

import ddm_core.dbapi as dbapi
from ddm_core import errors
from test_dbapi import connect_for, two_sources
from test_dbapi_session import one
from test_execute_support import (  # noqa: F401 - fixtures
    any_runner_executor,
    mysql_async_executor,
    mysql_config,
    mysql_databases,
    mysql_executor,
    mysql_raw,
    sqlite_async_executor,
    sqlite_config,
    sqlite_executor,
)

INSERT = "INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)"


@pytest.fixture()
def connect(any_runner_executor: Any) -> Iterator[Callable[..., Any]]:
    yield lambda **options: connect_for(any_runner_executor)(executor=any_runner_executor, **options)


def orders(connect: Callable[..., Any], user: int) -> list[Any]:
    reader = connect(autocommit=True)
    try:
        return sorted(row[0] for row in one(reader, "SELECT order_id FROM t_order WHERE user_id = %s", (user,)))
    finally:
        reader.close()


def test_rollback_to_undoes_what_came_after_on_every_connection(any_runner_executor: Any,
                                                                connect: Callable[..., Any]) -> None:  # fmt: skip
    first, other = two_sources(any_runner_executor)
    conn = connect()
    try:
        one(conn, INSERT, (1, first, 10))
        one(conn, "SAVEPOINT s1")
        one(conn, INSERT, (2, first, 20))
        one(conn, "SELECT COUNT(*) FROM t_order WHERE user_id = %s", (other,))  # pins a second data source after s1
        one(conn, "SAVEPOINT s2")
        one(conn, "SAVEPOINT `before`")  # a reserved word, quoted as the client wrote it
        one(conn, INSERT, (3, first, 30))
        one(conn, "ROLLBACK TO SAVEPOINT s1")  # on both pins; s2 is gone with it
        with pytest.raises(errors.NoSuchSavepointError, match="SAVEPOINT s2 does not exist"):
            one(conn, "RELEASE SAVEPOINT s2")
        assert one(conn, "SELECT order_id FROM t_order WHERE user_id = %s", (first,)) == [(1,)]
        one(conn, INSERT, (4, first, 40))
        one(conn, "RELEASE SAVEPOINT s1")
        with pytest.raises(errors.NoSuchSavepointError):
            one(conn, "ROLLBACK TO s1")
        conn.commit()
    finally:
        conn.close()
    assert orders(connect, first) == [1, 4]


def test_outside_a_transaction_as_on_mysql(connect: Callable[..., Any]) -> None:
    auto = connect(autocommit=True)
    try:
        one(auto, "SAVEPOINT nothing")  # marks nothing: there is no transaction
        assert not auto.in_transaction
        with pytest.raises(errors.NoSuchSavepointError):
            one(auto, "ROLLBACK TO SAVEPOINT nothing")
    finally:
        auto.close()
    manual = connect()
    try:
        one(manual, "SAVEPOINT first")  # opens the transaction, as any first statement does
        assert manual.in_transaction
        one(manual, "RELEASE SAVEPOINT first")
        with pytest.raises(errors.TransactionError, match="not a plain identifier"):
            one(manual, "SAVEPOINT `a b`")
    finally:
        manual.close()


def test_xa_branches_pinned_after_a_savepoint_roll_back_to_it(mysql_executor: Any) -> None:
    first, other = two_sources(mysql_executor)
    conn = dbapi.connect(executor=mysql_executor, transaction_mode="xa")
    try:
        one(conn, INSERT, (11, first, 1))
        one(conn, "SAVEPOINT before_other")
        one(conn, INSERT, (12, other, 2))  # a branch started after the savepoint: set right after XA START
        one(conn, INSERT, (13, first, 3))
        one(conn, "ROLLBACK TO SAVEPOINT before_other")
        one(conn, INSERT, (14, other, 4))
        conn.commit()
    finally:
        conn.close()
    assert orders(lambda **o: dbapi.connect(executor=mysql_executor, **o), first) == [11]
    assert orders(lambda **o: dbapi.connect(executor=mysql_executor, **o), other) == [14]


def test_sqlalchemy_begin_nested(mysql_executor: Any) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine("ddm+pymysql://", connect_args={"executor": mysql_executor})
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(INSERT.replace("%s", ":o", 1).replace("%s", ":u", 1).replace("%s", ":a", 1)),
                         {"o": 21, "u": 5, "a": 1})  # fmt: skip
            nested = conn.begin_nested()
            conn.execute(sa.text("UPDATE t_order SET amount = 99 WHERE user_id = 5"))
            nested.rollback()
            with conn.begin_nested():
                conn.execute(sa.text("UPDATE t_order SET amount = amount + 1 WHERE user_id = 5"))
            conn.commit()
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT amount FROM t_order WHERE user_id = 5")).all() == [(2,)]
    finally:
        engine.dispose()
