"""The ``hotfront`` unit (both twins) behind a real proxy: the gate's front takes the commonest statement whole.

An in-process proxy over ``t_order`` (2 data sources x 4 tables) runs with each twin's ``HotFront``. Once a
point select's shape is known and the loop has an idle link to each data source, every further one in
autocommit — a PyMySQL text statement (its literals taken as parameters) or a libmariadb-style prepared
execute, with and without its parameter types — is taken by the front, each of them counted, and answers
what the same query on one plain table holding all the rows answers (values and types). So is a read of an
open transaction on a data source it pinned already (``hotpin``'s ``PinRead``): with BEGIN or with autocommit
off, its errors, its deadline's cancel, a client that reads slowly or goes away mid-answer. What the front
leaves — a transaction's first read on a data source, a read of several units, a refused one — is answered by
the session's path as before, and the front counts none of it (docs/proxy.md#the-front).
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest

from ddm_core import load_config
from ddm_core._fast import Implementation
from ddm_core.execute import Executor
from raw_mysql import RawClient, ServerError, decoded, execute_payload, longlong
from services import fresh_mariadb_databases, innodb_trx_fresh, mariadb_connect
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
            where: dict[str, tuple[int, int]] = {}
            for order in range(1, 8):
                plan = ex.router.route(POINT.format(table="t_order", user=order % 7, order=order))
                where.setdefault(plan.units[0].data_source, (order % 7, order))
            assert len(where) == 2, where
            PIN_BOTH[:] = where.values()
        ref = mariadb_connect()
        with ref.cursor() as cur:
            cur.execute(f"CREATE TABLE `{databases[2]}`.ref_order " + ORDER_DDL.split("t_order", 1)[1])
            cur.execute(f"INSERT INTO `{databases[2]}`.ref_order (order_id, user_id, amount, note) VALUES {values}")
        ref.commit()
        ref.close()
        yield config, databases[2]


def _with_front(impl: Implementation, monkeypatch: pytest.MonkeyPatch) -> None:
    """Connections made from now on get ``impl``'s front, and its reads on pins ``impl``'s ``PinRead``."""
    import ddm_core.proxy.connection as connection
    import ddm_core.proxy.hotpath as hotpath
    import ddm_core.proxy.session as session

    monkeypatch.setattr(connection, "HotFront", impl.hotfront.HotFront)
    monkeypatch.setattr(hotpath, "hotpin", impl.hotpin)
    # PinStatement's own methods over impl's PinRead
    pinned = type("PinStatement", (impl.hotpin.PinRead,), {"__slots__": (), **{
        name: value for name, value in vars(hotpath.PinStatement).items() if callable(value)}})  # fmt: skip
    terms = list(session.FRONT_TERMS)
    terms[terms.index(hotpath.PinStatement)] = pinned
    monkeypatch.setattr(connection, "FRONT_TERMS", tuple(terms))


@pytest.fixture()
def served(impl: Implementation, tables: tuple[dict[str, Any], str], monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[InProcessProxy]:  # fmt: skip
    """A proxy whose connections' gates have ``impl``'s front."""
    _with_front(impl, monkeypatch)
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


@contextlib.contextmanager
def _logged_in(proxy: InProcessProxy) -> Iterator[RawClient]:
    """A raw client logged in to ``proxy``'s ``logic_db``."""
    with RawClient(proxy.port, timeout=30) as client:
        assert client.login(USER, PASSWORD, database="logic_db")[:1] == b"\x00"
        yield client


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


#: (the client's handshake character set, a SET run first, does the front take the later statements)
_CHARSETS = [("utf8mb4", None, True), ("latin1", None, False), ("latin1", "SET NAMES latin1", False),
             ("latin1", "SET character_set_results = utf8mb4", True), ("latin1", "SET character_set_results = NULL", True)]  # fmt: skip


@pytest.mark.parametrize(("charset", "setup", "fronted"), _CHARSETS)
def test_a_text_is_read_and_answered_in_its_clients_character_sets(served: InProcessProxy,
                                                                    tables: tuple[dict[str, Any], str], charset: str,
                                                                    setup: str | None, fronted: bool) -> None:  # fmt: skip
    """A statement is read in its client's character set and answered in its results' one, as MariaDB does: a
    non-ASCII literal (``é``, one byte in latin1, two in UTF-8) finds its row however the client encodes it, and
    the row's text comes back as the same client reads it from MariaDB itself (values, their types and the
    description). The front takes a statement whose results are UTF-8, whatever the client's own character set;
    one whose results are converted to another set is left to the session's path, which decodes it."""
    ref = tables[1]
    before = _warmed(served)
    sql = POINT + " AND note = '{note}'"
    direct = mariadb_connect(charset=charset, database=ref)
    with _client(served, charset=charset) as conn, conn.cursor() as cur, direct.cursor() as want_cur:
        if setup is not None:
            cur.execute(setup)
            want_cur.execute(setup)
        for order in (1, 2, 3, 4, 6, 7):  # one shape: the first runs on mimic's path, the second on the session's
            cur.execute(sql.format(table="t_order", user=order % 7, order=order, note=f"n{order}é"))
            got = cur.fetchall()
            want_cur.execute(sql.format(table="ref_order", user=order % 7, order=order, note=f"n{order}é"))
            want = want_cur.fetchall()
            assert len(want) == 1 and _typed(got) == _typed(want), (charset, setup, order, got, want)
            assert [d[:2] for d in cur.description] == [d[:2] for d in want_cur.description]
    direct.close()
    taken = _settled(served) - before
    assert taken >= 4 if fronted else taken == 0, (charset, setup, taken)


def test_prepared_executes_are_taken_whole_with_and_without_types(served: InProcessProxy,
                                                                   tables: tuple[dict[str, Any], str]) -> None:  # fmt: skip
    ref = tables[1]
    before = _warmed(served)
    with _logged_in(served) as client:
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
        many = "SELECT order_id, note FROM t_order WHERE user_id IN (1, 2) ORDER BY order_id"
        cur.execute(many)
        assert _typed(cur.fetchall()) == _typed(_reference(ref, many.replace("t_order", "ref_order")))
        with pytest.raises(pymysql.err.MySQLError):
            cur.execute("SELECT nothing FROM t_order WHERE user_id = 4 AND order_id = 11")
    conn.close()
    off = _client(served, autocommit=False)
    with off.cursor() as cur:
        cur.execute(point)  # opens the session's transaction: the session's path
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
    with _logged_in(served) as client:
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
    with _logged_in(served) as client:
        client.command(0x03, POINT.format(table="t_order", user=3, order=3).encode() + b" AND note = '\xff\xfe'")
        assert client.response()[0][1][:1] == b"\xff"  # mimic's path refuses it (1105, the decode's error)
        client.command(0x17, b"\x01\x00\x00\x00\x00\x01")  # an execute cut short
        assert client.response()[0][1][:1] == b"\xff"
        client.command(0x03, POINT.format(table="t_order", user=3, order=3).encode())
        assert decoded([p for _, p in client.response()]) == [("3", "3", "9", "n3é")]


#: A (user, order) of ``_row``'s on each data source: reading them pins both (found by ``tables``).
PIN_BOTH: list[tuple[int, int]] = []


def _pin_both(cur: Any) -> None:
    """The transaction's first read on each data source, right behind its opening (the front's, but for the one
    that opens a transaction with autocommit off: the session's)."""
    for user, order in PIN_BOTH:
        cur.execute(POINT.format(table="t_order", user=user, order=order))
        cur.fetchall()


@pytest.mark.parametrize("autocommit", [True, False], ids=["begin", "autocommit-off"])
def test_reads_on_a_transactions_pins_are_taken_whole_and_answer_as_one_table(
        served: InProcessProxy, tables: tuple[dict[str, Any], str], autocommit: bool) -> None:  # fmt: skip
    ref = tables[1]
    before = _warmed(served)
    orders = [5, 17, 30, 42, 59, 60, 61, 8]  # both data sources; 61: no such row
    conn = _client(served, autocommit=autocommit)
    with conn.cursor() as cur:
        if autocommit:
            cur.execute("BEGIN")
        _pin_both(cur)
        for order in orders:
            cur.execute(POINT.format(table="t_order", user=order % 7, order=order))
            got = cur.fetchall()
            want = _reference(ref, POINT.format(table="ref_order", user=order % 7, order=order))
            assert _typed(got) == _typed(want), order
        cur.execute("UPDATE t_order SET amount = amount + 1 WHERE user_id = 3 AND order_id = 17")  # a worker's
        cur.execute(POINT.format(table="t_order", user=3, order=17))  # its own write, read on the same pin
        assert cur.fetchall()[0][2] == _row(17)[2] + 1
        cur.execute("ROLLBACK")
        cur.execute(POINT.format(table="t_order", user=3, order=17))
        assert cur.fetchall() == (_row(17),)
    conn.close()
    # the reads behind the openings (with autocommit off, the first opens the transaction: the session's), those
    # on pins, the one after the write, and (autocommit on) the last one, in autocommit
    assert _settled(served) - before == (2 if autocommit else 1) + len(orders) + 1 + (1 if autocommit else 0)


def test_prepared_reads_on_pins_are_taken_once_prepared_there(served: InProcessProxy,
                                                               tables: tuple[dict[str, Any], str]) -> None:  # fmt: skip
    ref = tables[1]
    before = _warmed(served)
    with _logged_in(served) as client:
        stmt = client.prepare(PREPARED.format(table="t_order"))
        assert client.query("BEGIN") == 0
        orders = [8, 9, 10, 25, 33, 61, 8]
        # The shape's first execute (mimic's path), the opening on each data source, then each physical table's
        # statement prepared on its pin (the session's path): from then on every execute is the front's.
        for user, order in [*PIN_BOTH, *PIN_BOTH, *((order % 7, order) for order in orders)]:
            client.command(0x17, execute_payload(stmt, [longlong(user), longlong(order)]))
            client.response()
        taken = _settled_count(served)
        for order in orders:
            client.command(0x17, execute_payload(stmt, [longlong(order % 7), longlong(order)]))
            got = decoded([p for _, p in client.response()], binary=True)
            assert got == _reference(ref, PREPARED.format(table="ref_order").replace("?", "%s"), order % 7, order)
        assert _settled_count(served) - taken == len(orders)
        assert client.query("COMMIT") == 0
    assert _settled(served) - before >= len(orders)


def _settled_count(proxy: InProcessProxy) -> int:
    """What the fronts of the connections still open took so far, with those that ended."""
    fronts = [conn.front.taken for conn in _connections(proxy)]
    return int(proxy.server.runtime.fronted) + sum(fronts)


def _connections(proxy: InProcessProxy) -> list[Any]:
    return [session.connection for session in list(proxy.server.runtime.sessions.values())
            if getattr(session.connection, "front", None) is not None]  # fmt: skip


def test_an_error_on_a_pin_reaches_the_client_and_the_transaction_goes_on(served: InProcessProxy) -> None:
    failing = "SELECT order_id, ddm_no_such_function(amount) FROM t_order WHERE user_id = 3 AND order_id = {order}"
    with _client(served) as conn, conn.cursor() as cur:
        for order in (3, 10, 17):  # the shape known, taken by the session's path, then the front's
            with pytest.raises(pymysql.err.MySQLError):
                cur.execute(failing.format(order=order))
    before = _warmed(served)
    with _client(served) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        _pin_both(cur)
        for order in (24, 31, 38):
            with pytest.raises(pymysql.err.MySQLError) as failed:
                cur.execute(failing.format(order=order))
            assert failed.value.args[0] == 1305, failed.value
            cur.execute(POINT.format(table="t_order", user=3, order=order))  # the pin and the transaction go on
            assert cur.fetchall() == (_row(order),)
        cur.execute("COMMIT")
    assert _settled(served) - before == 2 + 6  # the openings' reads, then three failing and three point selects


def test_a_deadline_that_cuts_a_read_on_a_pin_fails_the_transaction(
        impl: Implementation, tables: tuple[dict[str, Any], str], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The pin's guard cancels a read past the statement's deadline (1 s here): the client hears why, the
    transaction refuses what follows until ROLLBACK, and the pin is discarded, not given back in doubt."""
    _with_front(impl, monkeypatch)
    proxy = InProcessProxy(load_config(tables[0]), load_schema=False, timeout=1.0)
    # one shape for quick and slow reads (a literal comparison is a parameter, SLEEP's argument is not): rows of
    # the test's own whose amount is the seconds slept
    slow = "SELECT order_id, SLEEP(amount) FROM t_order WHERE user_id = 3 AND order_id = {order}"
    try:
        _warmed(proxy)
        with _client(proxy) as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (100, 3, 0), (101, 3, 0), (102, 3, 0), "
                        "(103, 3, 5)")  # fmt: skip
            for order in (100, 101, 102):
                cur.execute(slow.format(order=order))
            before = _settled_count(proxy)
            cur.execute("BEGIN")
            _pin_both(cur)
            with pytest.raises(pymysql.err.MySQLError) as cut:
                cur.execute(slow.format(order=103))
                cur.fetchall()
            assert cut.value.args[0] in (3024, 1317), cut.value.args  # the deadline, or the cancel's interruption
            assert _settled_count(proxy) - before == 2 + 1  # the openings' reads and the cut read: the front's
            with pytest.raises(pymysql.err.MySQLError) as refused:
                cur.execute(POINT.format(table="t_order", user=4, order=4))
            assert "failed" in refused.value.args[1], refused.value.args
            cur.execute("ROLLBACK")
            cur.execute(POINT.format(table="t_order", user=3, order=24))
            assert cur.fetchall() == (_row(24),)
            cur.execute("DELETE FROM t_order WHERE user_id = 3 AND order_id IN (100, 101, 102, 103)")
    finally:
        proxy.close()


def test_a_pin_its_data_source_drops_mid_read_fails_the_transaction(served: InProcessProxy) -> None:
    """The data source ends a pin's connection while a read on it waits (KILL of its thread): the client hears
    why, the transaction refuses what follows until ROLLBACK, and the next transaction gets a working pin."""
    slow = "SELECT order_id, SLEEP(amount) FROM t_order WHERE user_id = 3 AND order_id = {order}"
    with _client(served) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (110, 3, 0), (111, 3, 0), (112, 3, 0), "
                    "(113, 3, 30)")  # fmt: skip
        for order in (110, 111, 112):
            cur.execute(slow.format(order=order))
    before = _warmed(served)
    try:
        with _logged_in(served) as client:
            assert client.query("BEGIN") == 0
            for user, order in PIN_BOTH:
                client.query(POINT.format(table="t_order", user=user, order=order))
            taken = _settled_count(served)
            client.command(0x03, slow.format(order=113).encode())
            with mariadb_connect() as root, root.cursor() as cur:
                until(lambda: cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE "
                                          "'SELECT order_id, SLEEP(amount)%%113%%'") == 1, "the read never started")  # fmt: skip
                cur.execute(f"KILL {cur.fetchone()[0]}")
            with pytest.raises(ServerError):
                client.result()
            assert _settled_count(served) - taken == 1  # the read cut off was the front's
            with pytest.raises(ServerError, match="failed"):
                client.query(POINT.format(table="t_order", user=3, order=3))
            assert client.query("ROLLBACK") == 0
            assert client.query("BEGIN") == 0
            for user, order in PIN_BOTH:
                client.query(POINT.format(table="t_order", user=user, order=order))
            assert client.query(POINT.format(table="t_order", user=3, order=3)) == [("3", "3", "9", "n3é")]
            assert client.query("COMMIT") == 0
        # with the first openings' reads (the second transaction's wait for a new connection if none is idle)
        assert _settled(served) - before >= 2 + 1 + 1
    finally:
        with _client(served) as conn, conn.cursor() as cur:
            cur.execute("DELETE FROM t_order WHERE user_id = 3 AND order_id IN (110, 111, 112, 113)")


def _open_transactions(databases: list[str]) -> int:
    innodb_trx_fresh()
    with mariadb_connect() as root, root.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p "
                    "ON p.ID = t.trx_mysql_thread_id WHERE p.DB IN %s", (databases,))  # fmt: skip
        return int(cur.fetchone()[0])


#: One shape for short and long answers (REPEAT's count is not a parameter): order 24's is 7.2 MB.
BIG = "SELECT order_id, REPEAT(note, amount * 20000) FROM t_order WHERE user_id = 3 AND order_id = {order}"


def test_a_slow_client_reads_a_long_answer_on_a_pin_whole_and_one_gone_leaks_nothing(
        served: InProcessProxy, tables: tuple[dict[str, Any], str]) -> None:  # fmt: skip
    """A 7.2 MB answer on a pin to a client that reads it late: held back past the relay's high water, then
    relayed whole. A client that goes away in the middle of one: its read given up, the pin discarded, the
    transaction rolled back on its data source, and the pool's connections all usable after it."""
    databases = [url["url"].rsplit("/", 1)[1] for url in tables[0]["dataSources"].values()]
    with _client(served) as conn, conn.cursor() as cur:
        for order in (3, 10, 17):
            cur.execute(BIG.format(order=order))
    before = _warmed(served)
    times = _row(24)[2] * 20000
    for gone in (False, True):
        with RawClient(served.port, timeout=30) as client:
            client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)  # the kernel holds little of it
            assert client.login(USER, PASSWORD, database="logic_db")[:1] == b"\x00"
            assert client.query("BEGIN") == 0
            for user, order in PIN_BOTH:
                client.query(POINT.format(table="t_order", user=user, order=order))
            client.command(0x03, BIG.format(order=24).encode())
            until(lambda: served.server.runtime.hot_on_pins >= 1 and _buffered(served) > 1 << 20,
                  "the answer never filled the client's buffer")  # fmt: skip
            if not gone:
                rows = client.result()
                assert isinstance(rows, list) and rows[0][0] == "24"
                assert rows[0][1] == "n24é" * times
                assert client.query("COMMIT") == 0
    until(lambda: _open_transactions(databases) == 0, "a transaction stayed open on a data source")
    assert _settled(served) - before == 2 * (2 + 1)  # per client: the openings' reads and the long one
    with _client(served) as conn, conn.cursor() as cur:  # every pool connection still works
        for _ in range(4):
            cur.execute("BEGIN")
            _pin_both(cur)
            cur.execute("COMMIT")


def _buffered(proxy: InProcessProxy) -> int:
    """The most bytes waiting in a client connection's transport."""
    return max((conn.gate_transport.get_write_buffer_size() for conn in _connections(proxy)), default=0)
