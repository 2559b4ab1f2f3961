"""Multi-unit reads sent from the proxy's event loop (docs/proxy.md#multi-unit-reads-on-the-loop).

Three in-process proxies over the same sharded tables (2 data sources x 2 tables): relaying (the default),
with ``relay: false`` (the answers read into rows on the loop and framed again), and with
``inlineStatements: false`` (every statement on the worker path). A plain concatenation relayed undecoded
must reach the client byte for byte as the decoded and the worker path's answers (ints, DECIMAL, dates,
NULL, binary, JSON, a 2 MB BLOB), in both EOF forms. Failures — a table missing on one shard, a deadline's
KILL, a client gone mid-result, in autocommit and on a transaction's pins — answer what the worker path
answers, leave every connection back in its pool (none borrowed) and no statement running on a server.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest

from ddm_core import load_config
from ddm_core._fast import Implementation
from ddm_core.execute import Executor
from ddm_core.proxy import session as session_module
from raw_mysql import RawClient, error_code
from services import fresh_mariadb_databases, mariadb_connect
from test_proxy_relay_bytes import Wire
from test_proxy_support import PASSWORD, USER, InProcessProxy, proxy_config

DEPRECATE_EOF = 1 << 24
ROWS = 40
BIG = 2 << 20  # one row's BLOB: its packets cross many socket reads
DDL = ("CREATE TABLE {name} (id INTEGER NOT NULL, k BIGINT NULL, d DECIMAL(14,3) NULL, dt DATETIME(6) NULL, "
       "day DATE NULL, b VARBINARY(16) NULL, j JSON NULL, bl LONGBLOB NULL, PRIMARY KEY (id))")  # fmt: skip
PLAIN = "SELECT id, k, d, dt, day, b, j, bl FROM t_many WHERE id BETWEEN 1 AND 40"
PINS = range(1, 9)  # point selects on these ids pin both data sources


def _table(name: str) -> dict[str, Any]:
    return {"logicTable": name, "shardKey": "id", "algorithm": "slots", "slotCount": 64, "shardCount": 2,
            "tablePerShard": 2, "databases": ["ds_0", "ds_1"], "tableKey": "id"}  # fmt: skip


def _row(i: int) -> tuple[Any, ...]:
    if i % 7 == 0:
        return (i, None, None, None, None, None, None, None)
    return (i, i * 10**12 - 7, f"{i * 1000 + 0.125:.3f}", f"2026-12-0{i % 9 + 1} 10:{i:02d}:33.{i:06d}",
            f"19{i:02d}-02-28", bytes([i, 0, 255, 10]), f'{{"i": {i}, "s": "x\\u00e9"}}',
            (b"\x00\xff" * (BIG // 2)) if i == 5 else bytes(range(i)))  # fmt: skip


class Served(InProcessProxy):
    """An in-process proxy, its counts and pools read directly."""

    base: dict[str, Any]  # the configuration it was made from (_served)

    def __init__(self, config: dict[str, Any], **options: Any) -> None:
        super().__init__(load_config(config), load_schema=False, **options)

    @property
    def many(self) -> tuple[int, int]:
        """Multi-unit reads sent from the loop so far, and those of them relayed."""
        return self.server.runtime.many_inlined, self.server.runtime.many_relayed

    @property
    def taken(self) -> int:
        """Multi-unit reads answered from reader callbacks so far, with no task (proxy/hot_many.py)."""
        return int(self.server.runtime.many_taken)

    def raw(self, capabilities: int = 0) -> RawClient:
        client = RawClient(self.port, timeout=30)
        assert client.login(USER, PASSWORD, database="logic_db", capabilities=capabilities)[:1] == b"\x00"
        return client

    def connect(self) -> Any:
        return pymysql.connect(host="127.0.0.1", port=self.port, user=USER, password=PASSWORD, database="logic_db",
                               autocommit=True, read_timeout=30)  # fmt: skip

    def at_rest(self) -> None:
        """Every connection back in its pool once the sessions are done with them (polled: the loop settles
        a statement after the client has its answer)."""
        executor = self.server.executor
        _until(lambda: executor.borrowed() == 0, lambda: f"still borrowed: {executor.pool_stats()}")



def _served(base: dict[str, Any], name: str, batch_rows: int = 100, **options: Any) -> Served:
    """The proxy called ``name`` over ``base``'s configuration: ``relay`` (as configured by default),
    ``decoded`` (``relay: false``) or ``workers`` (``inlineStatements: false``)."""
    kind = {"relay": {}, "decoded": {"relay": False}, "workers": {"inlineStatements": False}}[name]
    config = {**base, "proxy": {**base["proxy"], "workers": 4, "batchRows": batch_rows, **kind}}
    config["pool"] = {**config["pool"], "maxSize": 6, "minIdle": 2, "acquireTimeoutMs": 3000}
    served = Served(config, **options)
    served.base = base
    return served


def _until(done: Callable[[], bool], why: Callable[[], str], seconds: float = 20.0) -> None:
    end = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < end, why()
        time.sleep(0.02)


@pytest.fixture(scope="module")
def proxies() -> Iterator[tuple[dict[str, Served], list[str]]]:
    """The relaying, decoding and worker-path proxies, and the data sources' databases."""
    with fresh_mariadb_databases(2) as databases:
        base = proxy_config(databases)
        base["tables"] += [_table("t_many"), _table("t_gap")]
        base["runtime"] = {"allowFullRoute": True, "allowDmlFullRoute": False, "fullRouteThreshold": 64}
        with Executor(load_config(base), load_schema=False) as ex:
            for name in ("t_many", "t_gap"):
                ex.execute(DDL.format(name=name)).close()
            for i in range(1, ROWS + 1):
                ex.execute("INSERT INTO t_many (id, k, d, dt, day, b, j, bl) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                           _row(i)).close()
                ex.execute("INSERT INTO t_gap (id, k) VALUES (%s, %s)", (i, i)).close()
        direct = mariadb_connect()
        with direct.cursor() as cur:  # one shard's table gone: its unit fails, the others answer
            # a lane's first table (the answers behind it on a pin are read past its error) and a last one
            cur.execute(f"DROP TABLE `{databases[0]}`.t_gap_0_0")
            cur.execute(f"DROP TABLE `{databases[1]}`.t_gap_1_1")
        direct.close()
        served: dict[str, Served] = {}
        try:
            for name in ("relay", "decoded", "workers"):
                served[name] = _served(base, name, timeout=1.0)
            yield served, databases
        finally:
            for one in served.values():
                one.close()


def _answer(served: Served, sql: str, capabilities: int = 0) -> tuple[list[tuple[int, bytes]], tuple[int, int]]:
    """``sql``'s second answer on a fresh raw client (the first of a statement's shape is routed on a worker),
    and how much it moved :attr:`Served.many`."""
    with served.raw(capabilities) as client:
        client.command(0x03, sql.encode())
        client.response()
        client.query("SELECT 1")  # answered once the statement before it is done with (its counts too)
        before = served.many
        client.command(0x03, sql.encode())
        answer = client.response()
        client.query("SELECT 1")
        return answer, (served.many[0] - before[0], served.many[1] - before[1])


def _shape(sql: str) -> str:
    """The same statement shape over ids no table holds: routed on a worker first, nothing read."""
    return sql.replace("BETWEEN 1 AND 40", "BETWEEN 100 AND 140")


def _running(databases: list[str]) -> int:
    """Statements running now on the data sources' databases (other than the asking one)."""
    conn = mariadb_connect()
    try:
        with conn.cursor() as cur:
            marks = ", ".join(["%s"] * len(databases))
            cur.execute(f"SELECT COUNT(*) FROM information_schema.processlist WHERE db IN ({marks}) "
                        "AND command = 'Query' AND id <> CONNECTION_ID()", databases)  # fmt: skip
            return int(cur.fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("capabilities", [0, DEPRECATE_EOF], ids=["eof", "deprecate-eof"])
@pytest.mark.parametrize("sql", [PLAIN, "SELECT d, j, b FROM t_many WHERE id BETWEEN 10 AND 30 AND k > 0"])
def test_a_relayed_concatenation_is_the_decoded_answer_byte_for_byte(
    proxies: tuple[dict[str, Served], list[str]], sql: str, capabilities: int
) -> None:
    served, _ = proxies
    answers, moved = {}, {}
    for name, one in served.items():
        answers[name], moved[name] = _answer(one, sql, capabilities)
    assert answers["relay"] == answers["decoded"] == answers["workers"]
    count = answers["relay"][0][1][0]
    assert len(answers["relay"]) > count + 2 and answers["relay"][-1][1][:1] in (b"\xfe", b"\x00")
    # relayed from the loop, decoded on the loop, the worker path never on it
    assert moved == {"relay": (1, 1), "decoded": (1, 0), "workers": (0, 0)}
    for one in served.values():
        one.at_rest()


@pytest.mark.parametrize("sql", ["SELECT id FROM t_gap WHERE id BETWEEN 1 AND 40",
                                 "SELECT id FROM t_gap WHERE id BETWEEN 1 AND 40 ORDER BY id"])  # fmt: skip
def test_a_unit_failing_on_one_shard_fails_as_on_the_worker_path(
    proxies: tuple[dict[str, Served], list[str]], sql: str
) -> None:
    served, databases = proxies
    discards = {name: sum(s.discards for s in one.server.executor.pool_stats().values()) for name, one in served.items()}
    errors, moved = {}, {}
    for name, one in served.items():
        with one.raw() as client:
            for _ in range(2):  # the first routes the shape on a worker
                before = one.many[0]
                client.command(0x03, sql.encode())
                answer = client.response()
            errors[name] = answer[-1][1]
            moved[name] = one.many[0] - before
            assert client.query("SELECT COUNT(*) FROM t_many WHERE id BETWEEN 1 AND 40") == [(str(ROWS),)]
    assert error_code(errors["relay"]) == 1146 and b"t_gap_0_0" in errors["relay"]  # the first unit's: no such table
    assert errors["relay"] == errors["decoded"] == errors["workers"]
    assert moved == {"relay": 1, "decoded": 1, "workers": 0}
    for name, one in served.items():
        one.at_rest()  # the failed unit's connection, and the others' read to their ends, are kept
        assert sum(s.discards for s in one.server.executor.pool_stats().values()) == discards[name]
    assert _running(databases) == 0


def test_on_a_transactions_pins_a_failed_unit_leaves_the_transaction_usable(
    proxies: tuple[dict[str, Served], list[str]]
) -> None:
    served, _ = proxies
    relay = served["relay"]
    conn = relay.connect()
    try:
        with conn.cursor() as cur:
            for _ in range(2):  # the second transaction's reads go from the loop on its pins
                cur.execute("BEGIN")
                for key in PINS:
                    cur.execute("SELECT k FROM t_many WHERE id = %s", (key,))
                before = relay.many[0]
                with pytest.raises(pymysql.err.ProgrammingError) as failed:
                    cur.execute("SELECT id FROM t_gap WHERE id BETWEEN 1 AND 40")
                assert failed.value.args[0] == 1146
                cur.execute("SELECT COUNT(*), SUM(k) FROM t_many WHERE id BETWEEN 1 AND 40")  # merged on the loop
                count, _ = cur.fetchone()
                cur.execute("SELECT id FROM t_many WHERE id BETWEEN 1 AND 40")  # relayed on the loop
                ids = sorted(r[0] for r in cur.fetchall())
                cur.execute("COMMIT")
            assert count == ROWS and ids == list(range(1, ROWS + 1))
            assert relay.many[0] == before + 3
    finally:
        conn.close()
    relay.at_rest()


@pytest.mark.parametrize("tx", [False, True], ids=["autocommit", "pinned"])
@pytest.mark.parametrize("sql", ["SELECT id, SLEEP(0.5) FROM t_many WHERE id BETWEEN 1 AND 40",
                                 "SELECT id, SLEEP(0.5) FROM t_many WHERE id BETWEEN 1 AND 40 ORDER BY id"])  # fmt: skip
def test_a_deadline_kills_every_unit_and_answers_as_the_worker_path(
    proxies: tuple[dict[str, Served], list[str]], sql: str, tx: bool
) -> None:
    """Past the 1 s deadline each unit's statement is killed (KILL QUERY), the client gets the worker path's
    timeout error, a transaction on the pins fails (its next statement says so) and nothing stays running."""
    served, databases = proxies
    codes = {}
    for name in ("relay", "workers"):
        one = served[name]
        conn = one.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(_shape(sql))  # the shape, routed on a worker
                if tx:
                    cur.execute("BEGIN")
                    for key in PINS:
                        cur.execute("SELECT k FROM t_many WHERE id = %s", (key,))
                before = one.many[0]
                with pytest.raises(pymysql.err.MySQLError) as failed:
                    cur.execute(sql)
                codes[name] = failed.value.args
                assert one.many[0] == before + (name == "relay")
                if tx:
                    with pytest.raises(pymysql.err.MySQLError):  # the transaction failed with its statement
                        cur.execute("SELECT k FROM t_many WHERE id = 1")
                    cur.execute("ROLLBACK")
                cur.execute("SELECT COUNT(*) FROM t_many WHERE id BETWEEN 1 AND 40")  # the session goes on
                assert cur.fetchone() == (ROWS,)
        finally:
            conn.close()
        one.at_rest()
    assert codes["relay"][0] == codes["workers"][0]
    _until(lambda: _running(databases) == 0, lambda: f"{_running(databases)} statements still running")


@pytest.mark.parametrize("sql", [PLAIN, "SELECT COUNT(*), SUM(k) FROM t_many WHERE id BETWEEN 1 AND 40",
                                 PLAIN + " ORDER BY id DESC"])
def test_the_gate_takes_a_known_multi_unit_read(proxies: tuple[dict[str, Served], list[str]], sql: str) -> None:
    """A multi-unit read of a shape seen before is taken by the client connection's gate, not by mimic's command
    loop (ProxySession._hot_many): relayed, merged in order or decoded, the answer is the worker path's byte for
    byte, and the gate reads the next command once it is written."""
    served, _ = proxies
    relay = served["relay"]
    runtime = relay.server.runtime
    before = runtime.hot_many
    answer, moved = _answer(relay, sql)
    assert runtime.hot_many > before and moved[0] == 1, (runtime.hot_many - before, moved)
    assert answer == _answer(served["workers"], sql)[0]
    relay.at_rest()


#: Each course of a multi-unit read the gate takes (proxy/hot_many.py), and whether it is answered from reader
#: callbacks: rows relayed or merged in order as they come, else handed to the task's path — with the client's
#: header framed (a 2 MB row, past what is taken whole; a unit's error) or from the start with what was read (a
#: merge's 2 MB row; a unit's error).
COURSES = {
    "relayed": ("SELECT id, k, d, dt, day, b, j FROM t_many WHERE id BETWEEN 1 AND 40", True),
    "merged": ("SELECT id, k, d, j, dt FROM t_many WHERE id BETWEEN 1 AND 40 ORDER BY dt DESC, id", True),
    "relayed-long": (PLAIN, False),
    "merged-long": (PLAIN + " ORDER BY id DESC", False),
    "relayed-failed": ("SELECT id FROM t_gap WHERE id BETWEEN 1 AND 40", False),
    "merged-failed": ("SELECT id FROM t_gap WHERE id BETWEEN 1 AND 40 ORDER BY id", False),
}


@pytest.mark.parametrize("tx", [False, True], ids=["autocommit", "pinned"])
@pytest.mark.parametrize("course", list(COURSES))
def test_each_course_of_a_read_from_the_gate_answers_as_the_worker_path(
    proxies: tuple[dict[str, Served], list[str]], course: str, tx: bool, impl: Implementation,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Answered from reader callbacks (each twin of the ``hotmany`` unit) or handed over mid-way, in autocommit or
    on a transaction's pins, the client gets the worker path's answer byte for byte, the transaction goes on, and
    every connection is back."""
    monkeypatch.setattr(session_module, "hotmany", impl.hotmany)
    served, _ = proxies
    sql, from_callbacks = COURSES[course]
    answers, taken = {}, {}
    for name in ("relay", "workers"):
        one = served[name]
        with one.raw() as client:
            client.command(0x03, sql.encode())  # the shape, routed on a worker (if not known yet)
            client.response()
            client.query("SELECT 1")  # answered once the read before it is settled (its counts too)
            if tx:
                client.query("BEGIN")
                for key in PINS:
                    client.query(f"SELECT k FROM t_many WHERE id = {key}")
            before = one.taken, one.many[0]
            client.command(0x03, sql.encode())
            answers[name] = client.response()
            client.query("SELECT 1")  # answered once the read is settled (its counts too)
            taken[name] = one.taken - before[0], one.many[0] - before[1]
            assert client.query("SELECT COUNT(*) FROM t_many WHERE id BETWEEN 1 AND 40") == [(str(ROWS),)]
            if tx:
                assert client.query("COMMIT") == 0
        one.at_rest()
    assert answers["relay"] == answers["workers"]
    assert answers["relay"][-1][1][:1] == (b"\xfe" if "failed" not in course else b"\xff")
    assert taken == {"relay": (int(from_callbacks), 1), "workers": (0, 0)}


#: Aggregates without GROUP BY (proxy/folded_many.py): folded from the answers' bytes, or (AVG) decoded.
FOLDS = {
    "bigint": ("SELECT COUNT(*), SUM(k), MIN(k), MAX(k), COUNT(k) FROM t_many WHERE id BETWEEN ? AND ?", [1, 40], True),
    "decimal": ("SELECT SUM(d), MIN(d), MAX(d) FROM t_many WHERE id BETWEEN ? AND ?", [3, 33], True),
    "no-rows": ("SELECT SUM(k), COUNT(*), MAX(d) FROM t_many WHERE id BETWEEN ? AND ?", [100, 200], True),
    "all-null": ("SELECT SUM(k), MIN(d), COUNT(k) FROM t_many WHERE id IN (?, ?, ?, ?)", [7, 14, 21, 35], True),
    "first-id": ("SELECT id, SUM(k) FROM t_many WHERE id BETWEEN ? AND ?", [2, 39], True),
    "avg": ("SELECT AVG(k), SUM(d) FROM t_many WHERE id BETWEEN ? AND ?", [1, 40], False),
    "dates": ("SELECT MIN(dt), MAX(day) FROM t_many WHERE id BETWEEN ? AND ?", [1, 40], False),
}


@pytest.mark.parametrize("prepared", [False, True], ids=["text", "prepared"])
@pytest.mark.parametrize("fold", list(FOLDS))
def test_aggregates_folded_from_the_answers_are_the_decoded_merges_bytes(
    proxies: tuple[dict[str, Served], list[str]], fold: str, prepared: bool
) -> None:
    """COUNT, SUM, MIN and MAX of integers and DECIMALs folded from the answers' bytes (NULLs, no rows, a column
    that is no aggregate, units of several tables): the decoding proxy's and the worker path's answer, packet for
    packet, in text and binary rows; what is not folded so (AVG, dates) is decoded, the same."""
    served, _ = proxies
    sql, params, folded = FOLDS[fold]
    answers, moved = {}, {}
    for name in ("relay", "decoded", "workers"):
        one = served[name]
        runtime = one.server.runtime
        wire = Wire(one.port, USER, PASSWORD, "logic_db")
        try:
            literal = sql.replace("?", "{}").format(*params)
            run = (lambda: wire.execute(sql, params, with_types=True)) if prepared else (lambda: wire.query(literal))
            run()  # the shape, routed on a worker
            wire.query("SELECT 1")
            before = runtime.many_folded
            answers[name] = [run() for _ in range(2)]
            wire.query("SELECT 1")  # answered once the reads are settled (their counts too)
            moved[name] = runtime.many_folded - before
        finally:
            wire.close()
    assert [a.frames for a in answers["relay"]] == [a.frames for a in answers["decoded"]]
    assert [a.frames for a in answers["relay"]] == [a.frames for a in answers["workers"]]
    assert answers["relay"][0].error is None and len(answers["relay"][0].rows) == 1
    assert moved == {"relay": 2 if folded else 0, "decoded": 0, "workers": 0}


def test_a_read_the_gate_took_that_routes_to_one_unit_goes_back_to_mimics_path(
    proxies: tuple[dict[str, Served], list[str]],
) -> None:
    """A known multi-unit shape whose values route to one table this time: the gate's task sends nothing and hands
    the command back (CommandGate.handback), and mimic's path answers it as the worker path does."""
    served, _ = proxies
    relay = served["relay"]
    runtime = relay.server.runtime
    wide = PLAIN.replace("BETWEEN 1 AND 40", "IN (1, 2, 3, 4, 5, 6, 7, 8)")
    one = PLAIN.replace("BETWEEN 1 AND 40", "IN (3, 3, 3, 3, 3, 3, 3, 3)")  # the same shape, one table
    with relay.raw() as client:
        for _ in range(2):  # the shape, known as a multi-unit read (the second run from the gate)
            before = runtime.hot_many, runtime.many_inlined
            client.command(0x03, wide.encode())
            client.response()
        assert (runtime.hot_many - before[0], runtime.many_inlined - before[1]) == (1, 1)
        before = runtime.hot_many, runtime.many_inlined
        client.command(0x03, one.encode())
        answer = client.response()
        client.query("SELECT 1")
        assert (runtime.hot_many - before[0], runtime.many_inlined - before[1]) == (1, 0)
    with served["workers"].raw() as client:
        client.command(0x03, one.encode())
        assert answer == client.response()
    relay.at_rest()


@pytest.mark.parametrize("tx", [False, True], ids=["autocommit", "pinned"])
@pytest.mark.parametrize("sql", ["SELECT id, SLEEP(0.2) FROM t_many WHERE id BETWEEN 1 AND 4",
                                 "SELECT id, SLEEP(0.2) FROM t_many WHERE id BETWEEN 1 AND 4 ORDER BY id"])  # fmt: skip
def test_a_client_gone_while_reader_callbacks_wait_leaves_nothing_borrowed_or_running(
    proxies: tuple[dict[str, Served], list[str]], sql: str, tx: bool, impl: Implementation,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The client goes away while the answers are awaited by reader callbacks (each twin of ``hotmany``): the
    session's close gives the read up — its connections discarded, in doubt (a pin: the transaction rolled back
    without it) — nothing stays borrowed or running, and the proxy serves on."""
    monkeypatch.setattr(session_module, "hotmany", impl.hotmany)
    served, databases = proxies
    relay = served["relay"]
    runtime = relay.server.runtime
    with relay.raw() as client:
        client.command(0x03, sql.replace("BETWEEN 1 AND 4", "BETWEEN 100 AND 104").encode())  # the shape, known
        client.response()
    discards = sum(s.discards for s in relay.server.executor.pool_stats().values())
    client = relay.raw()
    if tx:
        client.query("BEGIN")
        for key in PINS:
            client.query(f"SELECT k FROM t_many WHERE id = {key}")
    before = runtime.many_inlined, runtime.many_taken
    client.command(0x03, sql.encode())
    _until(lambda: runtime.many_inlined > before[0], lambda: "the read did not go from the loop")
    client.close()  # while the data sources sleep
    relay.at_rest()
    _until(lambda: _running(databases) == 0, lambda: f"{_running(databases)} statements still running")
    assert runtime.many_taken == before[1]  # never answered
    assert sum(s.discards for s in relay.server.executor.pool_stats().values()) > discards
    with relay.connect() as conn, conn.cursor() as cur:  # the proxy serves on
        cur.execute(PLAIN)
        assert len(cur.fetchall()) == ROWS


@pytest.mark.parametrize("sql", [PLAIN, PLAIN + " ORDER BY id"])
def test_a_client_gone_mid_result_leaves_nothing_borrowed_or_running(
    proxies: tuple[dict[str, Served], list[str]], sql: str
) -> None:
    # The loop sends a read only on idle connections that need no check (EndpointPool.lend_idle never opens nor
    # pings): each round has the executor leave some idle, where the last round's were discarded, and a busy
    # host's waits do not make them old enough to ping (proxy_config's aliveBypassWindowMs). Else the read takes
    # the worker path, not counted here.
    served, databases = proxies
    relay = served["relay"]
    wide = sql.replace("bl FROM", "REPEAT(bl, 6) AS bl FROM")  # a 12 MB row: more than the socket buffers
    with relay.raw() as client:
        assert client.query(_shape(wide)) == []  # the shape, routed on a worker
    for _ in range(3):
        relay.server.executor.execute(PLAIN).close()  # idle connections again, in place of the ones discarded
        before = relay.many[0]
        client = relay.raw()
        client.command(0x03, wide.encode())
        client.packet()  # the answer began
        client.close()  # and the client is gone
        _until(lambda: relay.many[0] > before, lambda: "the read did not go from the loop")
        relay.at_rest()
    _until(lambda: _running(databases) == 0, lambda: f"{_running(databases)} statements still running")
    with relay.connect() as conn, conn.cursor() as cur:  # the proxy serves on
        cur.execute(PLAIN)
        assert len(cur.fetchall()) == ROWS


def test_a_data_source_killed_mid_read_fails_as_on_the_worker_path(tmp_path_factory: pytest.TempPathFactory) -> None:
    """ds_1 on a private mariadbd SIGKILLed while both proxies' reads run (a slow read: every unit sleeps):
    the loop's read fails with the worker path's error code, its connections to the dead server are
    discarded, the others go back, and the proxy serves ds_0 on."""
    from test_execute_support import running_mariadb

    with running_mariadb(tmp_path_factory.mktemp("many-loop-mariadbd")) as backend, \
            fresh_mariadb_databases(1) as (shared,):  # fmt: skip
        private = backend.create_database("ddm_many_")
        urls = {"ds_0": f"mysql://127.0.0.1:3306/{shared}", "ds_1": f"mysql://127.0.0.1:{backend.port}/{private}"}
        config = proxy_config([shared, private])
        for name, url in urls.items():
            config["dataSources"][name]["url"] = url
        config["tables"] = [_table("t_gap")]
        config["runtime"] = {"allowFullRoute": True, "allowDmlFullRoute": False, "fullRouteThreshold": 64}
        with Executor(load_config(config), load_schema=False) as ex:
            ex.execute(DDL.format(name="t_gap")).close()
            for i in range(1, ROWS + 1):
                ex.execute("INSERT INTO t_gap (id, k) VALUES (%s, %s)", (i, i)).close()
        sql = "SELECT id, SLEEP(0.1) FROM t_gap WHERE id BETWEEN 1 AND 40"
        served = {name: _served(config, name) for name in ("relay", "workers")}
        try:
            conns = {name: one.connect() for name, one in served.items()}
            for conn in conns.values():
                with conn.cursor() as cur:
                    cur.execute(_shape(sql))  # the shape, routed on a worker
            outcomes: dict[str, Any] = {}

            def read(name: str) -> None:
                try:
                    with conns[name].cursor() as cur:
                        cur.execute(sql)
                        outcomes[name] = ("rows", len(cur.fetchall()))
                except pymysql.err.MySQLError as exc:
                    outcomes[name] = ("error", exc.args[0])

            before = served["relay"].many[0]
            readers = [threading.Thread(target=read, args=(name,)) for name in served]
            for reader in readers:
                reader.start()
            _until(lambda: served["relay"].many[0] > before, lambda: "the read did not go from the loop")
            time.sleep(0.3)  # the units are sleeping on both servers
            backend.kill()
            for reader in readers:
                reader.join(30)
            assert outcomes["relay"][0] == "error" and outcomes["relay"] == outcomes["workers"], outcomes
            router = served["relay"].server.executor.router
            alive = next(i for i in range(1, ROWS + 1)
                         if router.route("SELECT k FROM t_gap WHERE id = %s", (i,)).units[0].data_source == "ds_0")
            for name, one in served.items():
                conns[name].close()
                one.at_rest()
                with one.connect() as conn, conn.cursor() as cur:  # ds_0 still answers
                    cur.execute("SELECT k FROM t_gap WHERE id = %s", (alive,))
                    assert cur.fetchall() == ((alive,),)
        finally:
            for one in served.values():
                one.close()


def test_a_merged_read_of_a_full_batch_goes_to_the_workers_from_then_on(
    proxies: tuple[dict[str, Served], list[str]]
) -> None:
    """A merged read is buffered on the loop: once one of its shape returns a full batch (``batchRows``: 7
    here) the shape goes to the worker path, which streams it; a shorter one stays on the loop."""
    served, _ = proxies
    small = _served(served["relay"].base, "relay", batch_rows=7)
    try:
        with small.connect() as conn, conn.cursor() as cur:
            for bounds, runs_on_loop in (((1, 3), (1, 1)), ((1, 40), (1, 0))):
                sql = f"SELECT id FROM t_many WHERE id BETWEEN {bounds[0]} AND {bounds[1]} ORDER BY id DESC"
                cur.execute(sql.replace(f"BETWEEN {bounds[0]} AND {bounds[1]}", "BETWEEN 100 AND 140"))  # no rows
                moved = []
                for _ in range(2):
                    before = small.many[0]
                    cur.execute(sql)
                    assert [r[0] for r in cur.fetchall()] == list(range(bounds[1], bounds[0] - 1, -1))
                    moved.append(small.many[0] - before)
                assert tuple(moved) == runs_on_loop, (bounds, moved)
    finally:
        small.close()


#: One data source's four tables: with ``runtime.oneUnitPerDataSource`` (the default) a read of them is one
#: UNION ALL unit whose answer the merge still orders (docs/architecture.md#one-unit-per-data-source).
ONE_SOURCE = {"logicTable": "t_one", "shardKey": "id", "algorithm": "slots", "slotCount": 64, "shardCount": 1,
              "tablePerShard": 4, "databases": ["ds_0"], "tableKey": "id"}  # fmt: skip


@pytest.mark.parametrize("sql", ["SELECT id, k FROM t_one WHERE id BETWEEN 1 AND 40",
                                 "SELECT id, k FROM t_one WHERE id BETWEEN 1 AND 40 ORDER BY k DESC"])  # fmt: skip
def test_one_data_sources_tables_in_one_unit_are_read_from_the_loop(
    proxies: tuple[dict[str, Served], list[str]], sql: str
) -> None:
    _, databases = proxies
    config = proxy_config(databases, workers=4, batchRows=500)  # the merged rows in one batch: read on the loop
    config["tables"].append(ONE_SOURCE)
    config["runtime"] = {"allowFullRoute": True, "allowDmlFullRoute": False, "fullRouteThreshold": 64}
    with Executor(load_config(config), load_schema=False) as ex:
        ex.execute("DROP TABLE IF EXISTS t_one").close()  # made again for each statement
        ex.execute("CREATE TABLE t_one (id INTEGER NOT NULL, k BIGINT NULL, PRIMARY KEY (id))").close()
        for i in range(1, ROWS + 1):
            ex.execute("INSERT INTO t_one (id, k) VALUES (%s, %s)", (i, (i * 37) % 101)).close()
    expected = [(i, (i * 37) % 101) for i in range(1, ROWS + 1)]
    ordered = "ORDER BY" in sql
    if ordered:
        expected.sort(key=lambda row: -row[1])
    proxy = InProcessProxy(load_config(config))  # the tables' columns loaded: the route may combine them
    try:
        plan = proxy.server.executor.router.route(sql, None)
        assert len(plan.units) == 1 and len(plan.units[0].tables) == 4, plan.units  # one UNION ALL of 4 tables
        runtime = proxy.server.runtime
        conn = pymysql.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD,
                               database="logic_db", autocommit=True, read_timeout=30)  # fmt: skip
        try:
            with conn.cursor() as cur:
                for in_tx in (False, False, True):  # the first is routed on a worker; then the loop's
                    if in_tx:
                        cur.execute("BEGIN")
                        cur.execute("SELECT k FROM t_one WHERE id = 1")  # pins ds_0
                    before = runtime.many_inlined
                    cur.execute(sql)
                    rows = list(cur.fetchall())
                    assert (rows if ordered else sorted(rows)) == expected
                    if in_tx:
                        cur.execute("COMMIT")
                    moved = runtime.many_inlined - before
                assert moved == 1, "the one-unit merged read did not go from the loop on the transaction's pin"
        finally:
            conn.close()
        executor = proxy.server.executor
        _until(lambda: executor.borrowed() == 0, lambda: f"still borrowed: {executor.pool_stats()}")
    finally:
        proxy.close()
