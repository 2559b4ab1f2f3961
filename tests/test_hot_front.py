"""The ``hotfront`` unit (both twins) behind a real proxy: the gate's front takes the commonest statement whole.

An in-process proxy over ``t_order`` (2 data sources x 4 tables) runs with each twin's ``HotFront``. Once a
point select's shape is known and the loop has an idle link to each data source, every further one in
autocommit — a PyMySQL text statement (its literals taken as parameters) or a libmariadb-style prepared
execute, with and without its parameter types — is taken by the front, each of them counted, and answers
what the same query on one plain table holding all the rows answers (values and types). What the front leaves
— a statement in a transaction, with autocommit off, a read of several units, a refused one — is answered by
the session's path as before, and the front counts none of it (docs/proxy.md#the-front).
"""

from __future__ import annotations

from typing import Any, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest

from ddm_core import load_config
from ddm_core._fast import Implementation
from ddm_core.execute import Executor
from raw_mysql import RawClient, ServerError, decoded, execute_payload, longlong
from services import fresh_mariadb_databases, mariadb_connect
from test_execute_support import ORDER_DDL
from test_proxy_support import PASSWORD, USER, InProcessProxy, proxy_config, until

pytest.importorskip("mysql_mimic")

ROWS = 60
POINT = "SELECT order_id, user_id, amount, note FROM {table} WHERE user_id = {user} AND order_id = {order}"
PREPARED = "SELECT note FROM {table} WHERE user_id = ? AND order_id = ?"


def _row(order: int) -> tuple[int, int, int, str | None]:
    return order, order % 7, order * 3, None if order % 5 == 0 else f"n{order}é"


@pytest.fixture(scope="module")
def tables() -> Iterator[tuple[dict[str, Any], str]]:
    """The sharded ``t_order``'s configuration, and the database of ``ref_order``: the same rows in one table."""
    with fresh_mariadb_databases(3) as databases:
        config = proxy_config(databases[:2])
        values = ", ".join(f"({o}, {u}, {a}, {'NULL' if n is None else repr(n)})" for o, u, a, n in map(_row, range(1, ROWS + 1)))
        with Executor(load_config(config), load_schema=False) as ex:
            ex.execute(ORDER_DDL).close()
            ex.execute(f"INSERT INTO t_order (order_id, user_id, amount, note) VALUES {values}").close()
        ref = mariadb_connect()
        with ref.cursor() as cur:
            cur.execute(f"CREATE TABLE `{databases[2]}`.ref_order " + ORDER_DDL.split("t_order", 1)[1])
            cur.execute(f"INSERT INTO `{databases[2]}`.ref_order (order_id, user_id, amount, note) VALUES {values}")
        ref.commit()
        ref.close()
        yield config, databases[2]


@pytest.fixture()
def served(impl: Implementation, tables: tuple[dict[str, Any], str], monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[InProcessProxy]:  # fmt: skip
    """A proxy whose connections' gates have ``impl``'s front."""
    import ddm_core.proxy.connection as connection

    monkeypatch.setattr(connection, "HotFront", impl.hotfront.HotFront)
    proxy = InProcessProxy(load_config(tables[0]), load_schema=False)
    try:
        yield proxy
    finally:
        proxy.close()


def _reference(database: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = mariadb_connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"USE `{database}`")
            cur.execute(sql, params or None)
            return list(cur.fetchall())
    finally:
        conn.close()


def _typed(rows: Any) -> list[tuple[tuple[type, Any], ...]]:
    return [tuple((type(v), v) for v in row) for row in rows]


def _client(proxy: InProcessProxy, **options: Any) -> Any:
    return pymysql.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD, database="logic_db",
                           read_timeout=30, **{"autocommit": True, **options})  # fmt: skip


def _settled(proxy: InProcessProxy) -> int:
    """The front's count once every client connection so far has ended (each adds its count as it ends)."""
    until(lambda: proxy.server.admission.connections == 0, "a client connection is still open")
    return int(proxy.server.runtime.fronted)


def _warmed(proxy: InProcessProxy) -> int:
    """The point shape known (its first run on mimic's path, its second on the session's) and an idle link of
    the loop's own to each data source (the first statements open them); the front's count after it."""
    with _client(proxy) as conn, conn.cursor() as cur:
        for order in (1, 2, 3, 4):
            cur.execute(POINT.format(table="t_order", user=order % 7, order=order))
            cur.fetchall()
    backends = proxy.server.runtime.backends
    until(lambda: sum(1 for idle in backends._idle.values() if idle) >= 2, "no idle link to each data source")
    return _settled(proxy)


def test_text_point_selects_are_taken_whole_and_answer_as_one_table(served: InProcessProxy,
                                                                     tables: tuple[dict[str, Any], str]) -> None:  # fmt: skip
    ref = tables[1]
    before = _warmed(served)
    conn = _client(served)
    with conn.cursor() as cur:
        orders = [5, 17, 30, 42, 59, 60, 61]  # 61: no such row, an empty answer
        for order in orders:
            cur.execute(POINT.format(table="t_order", user=order % 7, order=order))
            got = cur.fetchall()
            want = _reference(ref, POINT.format(table="ref_order", user=order % 7, order=order))
            assert _typed(got) == _typed(want), order
            assert [d[:2] for d in cur.description] == [("order_id", 8), ("user_id", 8), ("amount", 3), ("note", 253)]
    conn.close()
    assert _settled(served) - before == len(orders)  # every one of them


def test_prepared_executes_are_taken_whole_with_and_without_types(served: InProcessProxy,
                                                                   tables: tuple[dict[str, Any], str]) -> None:  # fmt: skip
    ref = tables[1]
    before = _warmed(served)
    with RawClient(served.port, timeout=30) as client:
        assert client.login(USER, PASSWORD, database="logic_db")[:1] == b"\x00"
        stmt = client.prepare(PREPARED.format(table="t_order"))
        answers = []
        for i, order in enumerate([8, 9, 10, 25, 33, 61, 8]):
            client.command(0x17, execute_payload(stmt, [longlong(order % 7), longlong(order)], types=i == 0))
            answers.append(decoded([p for _, p in client.response()], binary=True))
        for order, got in zip([8, 9, 10, 25, 33, 61, 8], answers):
            assert got == _reference(ref, PREPARED.format(table="ref_order").replace("?", "%s"), order % 7, order)
    # the first execute is its shape's first (mimic's path), the second the session's; the other five the front's
    assert _settled(served) - before == 5


def test_what_the_front_leaves_is_answered_by_the_session(served: InProcessProxy,
                                                          tables: tuple[dict[str, Any], str]) -> None:  # fmt: skip
    ref = tables[1]
    before = _warmed(served)
    point = POINT.format(table="t_order", user=4, order=11)
    want = _typed(_reference(ref, POINT.format(table="ref_order", user=4, order=11)))
    conn = _client(served)
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute(point)
        assert _typed(cur.fetchall()) == want
        cur.execute("COMMIT")
        many = "SELECT order_id, note FROM t_order WHERE user_id IN (1, 2) ORDER BY order_id"
        cur.execute(many)
        assert _typed(cur.fetchall()) == _typed(_reference(ref, many.replace("t_order", "ref_order")))
        with pytest.raises(pymysql.err.MySQLError):
            cur.execute("SELECT nothing FROM t_order WHERE user_id = 4 AND order_id = 11")
    conn.close()
    off = _client(served, autocommit=False)
    with off.cursor() as cur:
        cur.execute(point)
        assert _typed(cur.fetchall()) == want
    off.rollback()
    off.close()
    assert _settled(served) == before


def test_a_statement_refused_on_its_data_source_reaches_the_client(served: InProcessProxy) -> None:
    """An error the data source answers to a statement the front sent is the client's error packet, each time."""
    failing = "SELECT order_id, ddm_no_such_function(amount) FROM t_order WHERE user_id = 3 AND order_id = {order}"
    before = _warmed(served)
    with _client(served) as conn, conn.cursor() as cur:
        for order in (3, 10, 17, 24, 31):  # mimic's path, the session's, then the front's
            with pytest.raises(pymysql.err.MySQLError) as failed:
                cur.execute(failing.format(order=order))
            assert failed.value.args[0] == 1305, failed.value  # FUNCTION ... does not exist
            cur.execute(POINT.format(table="t_order", user=3, order=order))  # the link and the session go on
            assert cur.fetchall() == (_row(order),)
    # the failing shape's first run is mimic's path's, its second the session's; its other three and the five
    # point selects the front's
    assert _settled(served) - before == 8


def test_an_unknown_statement_id_is_refused(served: InProcessProxy) -> None:
    """A prepared execute of an unknown statement id is left to mimic's path, which refuses it."""
    with RawClient(served.port, timeout=30) as client:
        assert client.login(USER, PASSWORD, database="logic_db")[:1] == b"\x00"
        client.command(0x17, execute_payload(4242, [longlong(1)]))
        with pytest.raises(ServerError):
            decoded([p for _, p in client.response()], binary=True)


def test_commands_count_per_connection_and_end_a_revoked_one_between_commands(impl: Implementation) -> None:
    """``Commands``: the running count in all and per connection, a revocation deferred to the connection's last
    command's end, the idle sweeper's marks, and a waiter for no command running woken by the last exit."""
    import threading

    idle = threading.Condition(threading.Lock())
    commands = impl.hotfront.Commands(idle)
    ended: list[str] = []
    commands.enter(7)
    commands.enter(7)
    commands.enter(None)
    assert (commands.running, commands.running_on(7), commands.running_on(8)) == (3, True, False)
    commands.revoke(8, lambda: ended.append("eight"))  # runs no command: ended at once
    commands.revoke(7, lambda: ended.append("seven"))  # runs two: ended after the second's end
    assert ended == ["eight"]
    commands.ticks = 5
    commands.exit(7)
    assert ended == ["eight"] and commands.running_on(7) and commands.quiet_since == {7: 5}
    commands.exit(None)
    woken = threading.Event()

    def wait() -> None:
        with idle:
            commands.waiting += 1
            while commands.running:
                idle.wait(10)
            commands.waiting -= 1
        woken.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    until(lambda: commands.waiting == 1, "the waiter never counted itself")
    commands.ticks = 6
    commands.exit(7)
    assert woken.wait(10) and commands.running == 0 and not commands.running_on(7)
    assert ended == ["eight", "seven"] and commands.quiet_since == {7: 6}
    commands.quiet(9)  # mimic's reader waits for connection 9's next command from tick 6
    assert commands.quiet_since == {7: 6, 9: 6}
    waiter.join(10)


def test_a_command_the_front_cannot_read_goes_to_mimics_path_and_the_connection_goes_on(served: InProcessProxy) -> None:
    """Text that is not UTF-8 and a truncated execute are left to mimic's path, which answers them; the same
    connection's next point select is answered as before."""
    with _client(served) as warm, warm.cursor() as cur:
        for order in (1, 2, 3):
            cur.execute(POINT.format(table="t_order", user=order % 7, order=order))
    with RawClient(served.port, timeout=30) as client:
        assert client.login(USER, PASSWORD, database="logic_db")[:1] == b"\x00"
        client.command(0x03, POINT.format(table="t_order", user=3, order=3).encode() + b" AND note = '\xff\xfe'")
        assert client.response()[0][1][:1] == b"\xff"  # mimic's path refuses it (1105, the decode's error)
        client.command(0x17, b"\x01\x00\x00\x00\x00\x01")  # an execute cut short
        assert client.response()[0][1][:1] == b"\xff"
        client.command(0x03, POINT.format(table="t_order", user=3, order=3).encode())
        assert decoded([p for _, p in client.response()]) == [("3", "3", "9", "n3é")]
