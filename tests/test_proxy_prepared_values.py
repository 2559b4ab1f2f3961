"""Prepared statements whose route depends on their parameters' values, through ``ddm proxy``.

``t_span`` is sharded by TIME_RANGE over a DATETIME column: ``0``, the value a
prepare routes with, is in no range, so the prepare describes the statement on
a node forced by a routing hint, and every execute routes with its own values
(proxy/described.py). Real clients (mysql-connector's prepared cursors over
libmysqlclient and its pure-Python protocol, and a raw COM_STMT_PREPARE /
COM_STMT_EXECUTE client) against a real proxy; every answer is compared with
the same statement on one unsharded copy of the table, and written rows are
looked up on the shard their value belongs to, behind the proxy's back.
"""

from __future__ import annotations

import copy
import datetime
from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, mariadb_connect, mariadb_rows, require_module

require_module("mysql_mimic", "ddm proxy")
require_module("mysql.connector", "prepared statements against the proxy")

from raw_mysql import COM_STMT_EXECUTE, RawClient, decoded, execute_payload, var_string  # noqa: E402
from test_proxy_prepared import _connect  # noqa: E402  # mysql-connector to the proxy or to MariaDB

SPAN_DDL = "CREATE TABLE t_span (id BIGINT NOT NULL PRIMARY KEY, made DATETIME NOT NULL, name VARCHAR(40))"
SPLIT = datetime.datetime(2026, 7, 1)  # ds_0 holds the first half of 2026, ds_1 the second
RANGES = [
    {"start": "2026-01-01 00:00:00", "end": "2026-07-01 00:00:00", "target": "ds_0"},
    {"start": "2026-07-01 00:00:00", "end": "2027-01-01 00:00:00", "target": "ds_1"},
]
ROWS = [
    (1, datetime.datetime(2026, 1, 5, 8, 0), "jan"),
    (2, datetime.datetime(2026, 3, 1, 12, 30), "mar"),
    (3, datetime.datetime(2026, 3, 1, 12, 30), "mar-twin"),
    (4, datetime.datetime(2026, 6, 30, 23, 59, 59), "jun"),
    (5, datetime.datetime(2026, 7, 1), "jul"),
    (6, datetime.datetime(2026, 9, 9, 9, 9, 9), "sep"),
    (7, datetime.datetime(2026, 12, 31, 1, 2, 3), None),
]
INSERT = "INSERT INTO t_span (id, made, name) VALUES (%s, %s, %s)"
MAR, SEP = ROWS[1][1], ROWS[5][1]


@pytest.fixture(scope="module")
def span(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, list[str]]]:
    """A proxy over ``t_span`` on two data sources, and a third database with the same rows in one table."""
    from test_proxy_support import ProxyProcess, proxy_config, write_config

    from ddm_core import load_config
    from ddm_core.execute import Executor

    with fresh_mariadb_databases(3) as databases:
        config = proxy_config(databases[:2])
        config["tables"] = [{
            "logicTable": "t_span", "dataNodes": "ds_${0..1}.t_span",
            "databaseStrategy": {"kind": "standard", "columns": ["made"], "algorithm": "TIME_RANGE",
                                 "props": {"ranges": copy.deepcopy(RANGES)}},
        }]  # fmt: skip
        config.pop("broadcastTables", None)
        config.pop("singleTables", None)
        config["runtime"]["fullRouteThreshold"] = 1  # a statement without a condition on made is refused
        with Executor(load_config(config)) as ex:
            ex.execute(SPAN_DDL).close()
            for row in ROWS:
                ex.execute(INSERT, row).close()
        direct = mariadb_connect(database=databases[2])
        with direct.cursor() as cur:
            cur.execute(SPAN_DDL)
            cur.executemany(INSERT, ROWS)
        direct.close()
        proxy = ProxyProcess(write_config(config, tmp_path_factory.mktemp("values") / "proxy.yaml")).start()
        try:
            yield proxy.port, databases
        finally:
            proxy.stop()


#: (statement, the parameters of each execute of it): one prepared statement, executed with each in turn.
READS = [
    ("SELECT * FROM t_span WHERE made = ?", [(MAR,), (SEP,), (datetime.datetime(2026, 2, 2),)]),
    ("SELECT id, name FROM t_span WHERE made IN (?, ?) ORDER BY id", [(MAR, SEP), (SEP, SEP), (ROWS[0][1], MAR)]),
    ("SELECT name FROM t_span WHERE made >= ? AND made < ? ORDER BY id DESC",
     [(datetime.datetime(2026, 6, 1), datetime.datetime(2026, 10, 1)), (MAR, SPLIT)]),
    ("SELECT COUNT(*), MIN(made), MAX(name), COUNT(name) FROM t_span WHERE made BETWEEN ? AND ?",
     [(datetime.datetime(2026, 1, 1), datetime.datetime(2026, 12, 31, 23)), (SPLIT, SPLIT)]),
    ("SELECT id FROM t_span WHERE made = ? AND name = ?", [(MAR, "mar-twin"), (SEP, "sep"), (SEP, "nope")]),
]


@pytest.mark.parametrize("use_pure", [False, True], ids=["libmysqlclient", "pure-python"])
def test_each_execute_routes_with_its_own_values(span: tuple[int, list[str]], use_pure: bool) -> None:
    port, databases = span
    proxied, direct = _connect(port, "logic_db", use_pure), _connect(3306, databases[2], use_pure)
    try:
        for sql, runs in READS:
            got_cur, want_cur = proxied.cursor(prepared=True), direct.cursor(prepared=True)
            for params in runs:  # the same statement id each time: executes of one prepare
                got_cur.execute(sql, params)
                want_cur.execute(sql, params)
                got, want = [tuple(r) for r in got_cur.fetchall()], [tuple(r) for r in want_cur.fetchall()]
                assert got == want, (sql, params)
                assert [d[:2] for d in got_cur.description] == [d[:2] for d in want_cur.description], sql
            got_cur.close()
            want_cur.close()
    finally:
        proxied.close()
        direct.close()


def test_writes_land_on_the_shard_of_their_values(span: tuple[int, list[str]]) -> None:
    port, databases = span
    proxied, direct = _connect(port, "logic_db", False), _connect(3306, databases[2], False)
    steps = [
        ("INSERT INTO t_span (id, made, name) VALUES (?, ?, ?)",
         [(100, datetime.datetime(2026, 2, 14), "feb"), (101, datetime.datetime(2026, 11, 11), "nov")]),
        ("UPDATE t_span SET name = ? WHERE made = ?", [("nov2", datetime.datetime(2026, 11, 11)), ("mar3", MAR)]),
        ("DELETE FROM t_span WHERE made = ? AND id = ?", [(datetime.datetime(2026, 2, 14), 100), (SEP, 6)]),
    ]  # fmt: skip
    try:
        for sql, runs in steps:
            got_cur, want_cur = proxied.cursor(prepared=True), direct.cursor(prepared=True)
            for params in runs:
                got_cur.execute(sql, params)
                want_cur.execute(sql, params)
                assert got_cur.rowcount == want_cur.rowcount, (sql, params)
            got_cur.close()
            want_cur.close()
        # Behind the proxy's back: each row on the shard its time belongs to, nowhere else, as the reference has it
        everything = "SELECT id, made, name FROM t_span ORDER BY id"
        first, second = mariadb_rows(databases[0], everything), mariadb_rows(databases[1], everything)
        assert all(made < SPLIT for _, made, _ in first) and all(made >= SPLIT for _, made, _ in second)
        assert sorted(first + second) == mariadb_rows(databases[2], everything)
        assert (101, datetime.datetime(2026, 11, 11), "nov2") in second
    finally:
        proxied.close()
        direct.close()


def test_a_value_no_shard_holds_is_refused_at_execute_and_the_statement_lives_on(span: tuple[int, list[str]]) -> None:
    from mysql import connector

    port, _ = span
    conn = _connect(port, "logic_db", False)
    try:
        cur = conn.cursor(prepared=True)
        sql = "SELECT id FROM t_span WHERE made = ?"
        with pytest.raises(connector.Error) as refused:  # outside every range: no shard can hold it
            cur.execute(sql, (datetime.datetime(2031, 1, 1),))
        assert "no configured time range" in str(refused.value.msg)
        with pytest.raises(connector.Error) as null:  # a NULL shard key: no shard, never guessed
            cur.execute(sql, (None,))
        assert "NULL" in str(null.value.msg)
        cur.execute(sql, (MAR,))
        assert sorted(r[0] for r in cur.fetchall()) == [2, 3]
    finally:
        conn.close()


def test_what_no_value_can_fix_still_fails_at_prepare(span: tuple[int, list[str]]) -> None:
    from raw_mysql import ServerError
    from test_proxy_support import PASSWORD, USER

    port, _ = span
    with RawClient(port) as raw:
        raw.login(USER, PASSWORD, database="logic_db")
        with pytest.raises(ServerError) as full:  # no condition on made: every shard, whatever the value
            raw.prepare("SELECT * FROM t_span WHERE name = ?")
        assert full.value.code == 1235 and "cannot be known" in str(full.value)
        with pytest.raises(ServerError) as unknown:  # the forced node's own answer: the column does not exist
            raw.prepare("SELECT nope FROM t_span WHERE made = ?")
        assert unknown.value.code == 1054
        assert raw.query("SELECT name FROM t_span WHERE made = '2026-07-01 00:00:00'") == [("jul",)]


def test_raw_prepare_then_executes_with_string_values(span: tuple[int, list[str]]) -> None:
    """COM_STMT_PREPARE and COM_STMT_EXECUTE on the wire; the second execute leaves the types out (libmariadb)."""
    from test_proxy_support import PASSWORD, USER

    port, databases = span
    sql = "SELECT name FROM t_span WHERE made IN (?, ?) ORDER BY name"
    with RawClient(port) as raw:
        raw.login(USER, PASSWORD, database="logic_db")
        stmt = raw.prepare(sql)
        pairs = [("2026-03-01 12:30:00", "2026-12-31 01:02:03"), ("2026-01-05 08:00:00", "2026-07-01")]
        for i, pair in enumerate(pairs):
            raw.command(COM_STMT_EXECUTE, execute_payload(stmt, [var_string(v.encode()) for v in pair], types=i == 0))
            got = decoded([payload for _, payload in raw.response()], binary=True)
            want = mariadb_rows(databases[2], sql.replace("?", "%s"), pair)
            assert got == [tuple(r) for r in want], pair


def test_temporal_and_decimal_parameters_are_read() -> None:
    """The types mimic's reader refuses (mysql-connector sends a datetime as DATETIME, a Decimal as NEWDECIMAL)."""
    import decimal
    import struct

    from mysql_mimic.charset import CharacterSet
    from mysql_mimic.constants import DEFAULT_SERVER_CAPABILITIES
    from mysql_mimic.prepared import PreparedStatement
    from mysql_mimic.types import Capabilities

    from ddm_core.proxy.prepared import read_execute

    date, datetime_, time_, newdecimal = 0x0A, 0x0C, 0x0B, 0xF6
    params = [
        (date, bytes([4]) + struct.pack("<HBB", 2026, 2, 28), datetime.date(2026, 2, 28)),
        (datetime_, bytes([11]) + struct.pack("<HBBBBBI", 2026, 7, 1, 13, 14, 15, 250),
         datetime.datetime(2026, 7, 1, 13, 14, 15, 250)),
        (datetime_, bytes([7]) + struct.pack("<HBBBBB", 2026, 1, 2, 3, 4, 5), datetime.datetime(2026, 1, 2, 3, 4, 5)),
        (datetime_, bytes([0]), "0000-00-00 00:00:00"),
        (time_, bytes([8]) + struct.pack("<BIBBB", 1, 2, 3, 4, 5),
         -datetime.timedelta(days=2, hours=3, minutes=4, seconds=5)),
        (newdecimal, bytes([6]) + b"-12.50", decimal.Decimal("-12.50")),
    ]  # fmt: skip
    body = struct.pack("<IBI", 3, 0, 1) + bytes([0]) + b"\x01" + b"".join(bytes([k, 0]) for k, _, _ in params)
    body += b"".join(v for _, v, _ in params)
    stmt = PreparedStatement(stmt_id=3, sql="SELECT " + ", ".join("?" * len(params)), num_params=len(params))
    caps = DEFAULT_SERVER_CAPABILITIES & ~Capabilities.CLIENT_QUERY_ATTRIBUTES
    got = read_execute(body, caps, CharacterSet.utf8mb4, lambda i: stmt, {})
    assert got.params == [want for _, _, want in params]
