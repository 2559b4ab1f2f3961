"""Prepared statements through ``ddm proxy``: execute payloads, and the columns a prepare announces.

libmariadb (sysbench, the C client) sends the parameter types with the first
execute of a statement only; later executes set new-params-bound to 0
(``read_execute``, unit tests).

On the wire (a real proxy subprocess over fresh MariaDB databases): the same
prepared statements through the proxy and straight to an unsharded copy of
the table on MariaDB, with mysql-connector's ``prepared=True`` over its C
extension (libmysqlclient) and its pure-Python protocol: the announced columns
(name, type, flags, decimals), the rows and their Python types must be the
same — ``SELECT *``, aggregates merged across shards, DECIMAL / DATETIME /
BIGINT UNSIGNED / TINYINT / VARCHAR / BLOB / DATE columns.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator

import pytest

from services import mariadb_connect, require_module

require_module("mysql_mimic", "ddm proxy")

from mysql_mimic.charset import CharacterSet  # noqa: E402
from mysql_mimic.constants import DEFAULT_SERVER_CAPABILITIES  # noqa: E402
from mysql_mimic.errors import MysqlError  # noqa: E402
from mysql_mimic.prepared import PreparedStatement  # noqa: E402
from mysql_mimic.types import Capabilities  # noqa: E402

from ddm_core.proxy.prepared import read_execute  # noqa: E402

LONGLONG, VAR_STRING = 0x08, 0xFD


def _execute(stmt_id: int, values: list[Any], *, with_types: bool, attributes: bool) -> bytes:
    out = struct.pack("<IBI", stmt_id, 0, 1)
    if attributes:
        out += bytes([len(values)])  # parameter count (length-encoded)
    bitmap = 0
    for i, v in enumerate(values):
        if v is None:
            bitmap |= 1 << i
    out += bitmap.to_bytes((len(values) + 7) // 8, "little") + bytes([1 if with_types else 0])
    if with_types:
        for v in values:
            out += bytes([VAR_STRING if isinstance(v, str) else LONGLONG, 0]) + (b"\x00" if attributes else b"")
    for v in values:
        if isinstance(v, str):
            raw = v.encode()
            out += bytes([len(raw)]) + raw
        elif v is not None:
            out += struct.pack("<q", v)
    return out


@pytest.mark.parametrize("attributes", [True, False])
def test_types_of_the_first_execute_serve_the_later_ones(attributes: bool) -> None:
    caps = DEFAULT_SERVER_CAPABILITIES if attributes else DEFAULT_SERVER_CAPABILITIES & ~Capabilities.CLIENT_QUERY_ATTRIBUTES
    stmt = PreparedStatement(stmt_id=7, sql="SELECT c FROM t WHERE id = ? AND c = ?", num_params=2)
    types: dict[int, bytes] = {}

    def get(i: int) -> Any:
        assert i == 7
        return stmt

    first = read_execute(_execute(7, [5, "x' OR '1'='1"], with_types=True, attributes=attributes), caps,
                         CharacterSet.utf8mb4, get, types)  # fmt: skip
    assert first.params == [5, "x' OR '1'='1"] and not first.use_cursor
    later = read_execute(_execute(7, [6, None], with_types=False, attributes=attributes), caps,
                         CharacterSet.utf8mb4, get, types)  # fmt: skip
    assert later.params == [6, None]


def test_an_execute_without_types_and_none_remembered_is_refused() -> None:
    stmt = PreparedStatement(stmt_id=1, sql="SELECT ?", num_params=1)
    with pytest.raises(MysqlError):
        read_execute(_execute(1, [1], with_types=False, attributes=True), DEFAULT_SERVER_CAPABILITIES,
                     CharacterSet.utf8mb4, lambda i: stmt, {})  # fmt: skip




# -- on the wire --------------------------------------------------------------------------------------

KINDS = "t_kinds"  # two shards of one table each: a full route on it is allowed
KINDS_DDL = (
    "CREATE TABLE t_kinds (id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, price DECIMAL(10,2), "
    "made DATETIME, big BIGINT UNSIGNED, name VARCHAR(40), data BLOB, tiny TINYINT, day DATE)"
)
ROWS = [
    (1, 10, "12.50", "2026-01-02 03:04:05", 2**63 + 5, "alpha", b"\x00\xffraw", 5, "2026-01-02"),
    (2, 11, "0.99", "2026-02-03 04:05:06", 7, "beta", None, -3, None),
    (3, 12, None, None, None, None, b"", 5, "2026-03-04"),
    (4, 13, "100.00", "2026-04-05 06:07:08", 1, "alpha", b"x", 120, "2026-04-05"),
    (5, 10, "3.33", "2026-05-06 07:08:09", 0, "gamma", b"yz", None, "2026-05-06"),
]
DECODING_FLAGS = 1 | 32  # NOT_NULL_FLAG, UNSIGNED_FLAG
INSERT = ("INSERT INTO t_kinds (id, user_id, price, made, big, name, data, tiny, day) "
          "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)")

#: (statement, parameters): the result must be the same through the proxy as on one MariaDB table.
CASES = [
    ("SELECT * FROM t_kinds WHERE user_id = ?", (10,)),  # one shard, *
    ("SELECT * FROM t_kinds WHERE user_id IN (?, ?, ?, ?) ORDER BY id", (10, 11, 12, 13)),  # both shards, *
    ("SELECT id, price, made, big, name, data, tiny, day FROM t_kinds WHERE id >= ? ORDER BY id DESC", (2,)),
    ("SELECT COUNT(*), SUM(price), AVG(price), SUM(tiny), AVG(tiny), MIN(made), MAX(name), COUNT(name), "
     "MAX(big) FROM t_kinds WHERE id > ?", (0,)),  # merged across shards
    ("SELECT COUNT(DISTINCT name), SUM(DISTINCT tiny) FROM t_kinds WHERE id > ?", (0,)),
    ("SELECT name, COUNT(*) AS n, AVG(price) AS mean FROM t_kinds WHERE id > ? GROUP BY name ORDER BY name", (0,)),
    ("SELECT COUNT(*), SUM(price) FROM t_kinds WHERE id > ?", (100,)),  # no rows: the aggregates' one row
    ("SELECT k.id AS key_id, k.name FROM t_kinds k WHERE k.user_id = ? AND k.id = ?", (10, 5)),
]


@pytest.fixture(scope="module")
def wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    """A proxy over ``t_kinds`` on two shards, and a database holding the same rows in one table."""
    require_module("mysql.connector", "prepared statements against the proxy")
    from test_proxy_support import proxy_and_reference

    masks = [{"column": "note", "mask": "full", "table": "t_order"}]
    directory = tmp_path_factory.mktemp("prepared")
    with proxy_and_reference(directory, KINDS, KINDS_DDL, INSERT, ROWS, masks=masks) as served:
        yield served


def _connect(port: int, database: str, use_pure: bool) -> Any:
    from mysql import connector
    from test_proxy_support import PASSWORD, USER

    user, password = (USER, PASSWORD) if port != 3306 else ("root", "")
    return connector.connect(host="127.0.0.1", port=port, user=user, password=password, database=database,
                             use_pure=use_pure, ssl_disabled=True, autocommit=True)  # fmt: skip


def _run(conn: Any, sql: str, params: tuple[Any, ...]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    cur = conn.cursor(prepared=True)
    try:
        cur.execute(sql, params)
        rows = [tuple(r) for r in cur.fetchall()]
        # name, type code, and (mysql-connector's 8th item) the flags that change what a client does with
        # a value (NOT NULL, UNSIGNED). MariaDB's execute answers differ from its own prepare answers in
        # the others (GROUP on GROUP BY keys, BINARY on a grouped COUNT): the proxy sends its prepare's.
        described = [(d[0], d[1], d[7] & DECODING_FLAGS if len(d) > 7 else None) for d in cur.description]
        return rows, described
    finally:
        cur.close()


def _typed(rows: list[tuple[Any, ...]]) -> list[tuple[tuple[str, Any], ...]]:
    return [tuple((type(v).__name__, v) for v in row) for row in rows]


@pytest.mark.parametrize("use_pure", [False, True], ids=["libmysqlclient", "pure-python"])
def test_prepared_results_match_mariadb_in_columns_values_and_types(wire: tuple[int, str], use_pure: bool) -> None:
    port, reference = wire
    proxied, direct = _connect(port, "logic_db", use_pure), _connect(3306, reference, use_pure)
    try:
        for sql, params in CASES:
            got, got_columns = _run(proxied, sql, params)
            want, want_columns = _run(direct, sql, params)
            assert _typed(got) == _typed(want), sql
            assert got_columns == want_columns, sql
            again, _ = _run(proxied, sql, params)  # a second execute: the parameter types are not resent
            assert _typed(again) == _typed(want), sql
    finally:
        proxied.close()
        direct.close()


def test_the_prepare_announces_what_mariadb_announces(wire: tuple[int, str]) -> None:
    """The COM_STMT_PREPARE answer itself (before any execute): the columns' definitions, MariaDB's own."""
    from ddm_core.proxy.described import _server_prepare

    from test_proxy_support import PASSWORD, USER

    pymysql: Any = require_module("pymysql", "reading prepare responses")
    port, reference = wire
    proxied = pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, database="logic_db")
    direct = mariadb_connect(database=reference)
    try:
        for sql, _ in CASES:
            got = _server_prepare(proxied, sql)
            want = _server_prepare(direct, sql)
            shown = [(c.name, c.type, c.charset == 63, c.flags, c.decimals, c.length) for c in got]
            assert shown == [(c.name, c.type, c.charset == 63, c.flags, c.decimals, c.length) for c in want], sql
            assert all(c.org_table in ("", KINDS) and c.schema in ("", "logic_db") for c in got), got
    finally:
        proxied.close()
        direct.close()


def test_a_statement_whose_columns_cannot_be_known_fails_at_prepare(wire: tuple[int, str]) -> None:
    from mysql import connector

    port, _ = wire
    conn = _connect(port, "logic_db", use_pure=False)
    try:
        cur = conn.cursor(prepared=True)
        with pytest.raises(connector.Error) as refused:  # no shard key over t_order's 8 shards: a full route
            cur.execute("SELECT * FROM t_order WHERE amount = ?", (1,))
        assert refused.value.errno == 1235 and "cannot be known" in str(refused.value.msg)
        with pytest.raises(connector.Error) as unknown:
            cur.execute("SELECT nope FROM t_kinds WHERE user_id = ?", (1,))
        assert unknown.value.errno == 1054  # the data source's own error, from its prepare
        cur = conn.cursor(prepared=True)  # the session goes on
        cur.execute("SELECT name FROM t_kinds WHERE user_id = ? AND id = ?", (10, 1))
        assert cur.fetchall() == [("alpha",)]
    finally:
        conn.close()


def test_a_masked_column_is_announced_as_the_string_it_becomes(wire: tuple[int, str]) -> None:
    port, _ = wire
    conn = _connect(port, "logic_db", use_pure=False)
    try:
        cur = conn.cursor(prepared=True)
        cur.execute("INSERT INTO t_order (order_id, user_id, amount, note) VALUES (?, ?, ?, ?)", (1, 7, 3, "secret"))
        rows, columns = _run(conn, "SELECT * FROM t_order WHERE user_id = ?", (7,))
        assert rows == [(1, 7, 3, "****", 0)]
        assert [c[:2] for c in columns] == [("order_id", 8), ("user_id", 8), ("amount", 3), ("note", 254), ("slow", 3)]
        cur.execute("DELETE FROM t_order WHERE user_id = ?", (7,))
    finally:
        conn.close()


def test_a_ddl_through_the_proxy_refreshes_the_announced_columns(wire: tuple[int, str]) -> None:
    from ddm_core.proxy.described import _server_prepare

    from test_proxy_support import PASSWORD, USER

    pymysql: Any = require_module("pymysql", "reading prepare responses")
    port, _ = wire
    conn = pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, database="logic_db",
                           autocommit=True)  # fmt: skip
    try:
        sql = "SELECT * FROM t_small WHERE user_id = ?"
        before = [c.name for c in _server_prepare(conn, sql)]
        with conn.cursor() as cur:
            cur.execute("ALTER TABLE t_small ADD COLUMN extra INT")  # to every shard, through the proxy
        assert [c.name for c in _server_prepare(conn, sql)] == [*before, "extra"]
    finally:
        conn.close()


def test_only_queries_are_described() -> None:
    from ddm_core.session_statements import returns_rows

    for query in ("SELECT 1", " /* c */ (SELECT a FROM t) UNION (SELECT b FROM u)", "WITH x AS (SELECT 1) SELECT *",
                  "SHOW CREATE TABLE t", "explain select 1", "VALUES (1)"):  # fmt: skip
        assert returns_rows(query), query
    for other in ("INSERT INTO t VALUES (?)", "UPDATE t SET a = ?", "DELETE FROM t", "CREATE TABLE t (a INT)",
                  "BEGIN", "", "  ;"):  # fmt: skip
        assert not returns_rows(other), other


def test_merged_aggregates_have_their_types_over_the_text_protocol_too(wire: tuple[int, str]) -> None:
    from test_proxy_support import connect

    port, reference = wire
    sql = "SELECT COUNT(DISTINCT name), SUM(DISTINCT tiny), AVG(price), COUNT(*) FROM t_kinds WHERE id > %s"
    proxied, direct = connect(port), mariadb_connect(database=reference)
    try:
        with proxied.cursor() as cur:
            cur.execute(sql, (0,))
            got = cur.fetchall()
        with direct.cursor() as cur:
            cur.execute(sql, (0,))
            want = cur.fetchall()
    finally:
        proxied.close()
        direct.close()
    assert _typed([tuple(r) for r in got]) == _typed([tuple(r) for r in want])


SYSBENCH_SCRIPT = """
function event()
  local con = sysbench.sql.driver():connect()
  local star = con:prepare("SELECT * FROM t_kinds WHERE user_id IN (?, ?) ORDER BY id")
  local a, b = star:bind_create(sysbench.sql.type.INT), star:bind_create(sysbench.sql.type.INT)
  star:bind_param(a, b)
  for _, pair in ipairs({{10, 11}, {12, 13}}) do
    a:set(pair[1]); b:set(pair[2])
    local rs = star:execute()
    print("rows", rs.nrows)
    rs:free()
  end
  local agg = con:prepare("SELECT COUNT(*), AVG(price) FROM t_kinds WHERE id > ?")
  local p = agg:bind_create(sysbench.sql.type.INT)
  agg:bind_param(p)
  p:set(0)
  local rs = agg:execute()
  print("rows", rs.nrows)
  rs:free()
  local q = con:query("SELECT name FROM t_kinds WHERE user_id = 10 AND id = 1")
  print("query", q.nrows, q:fetch_row()[1])
  con:disconnect()
end
"""


def test_libmariadb_reads_the_rows_of_a_prepared_select_star(wire: tuple[int, str], tmp_path: Any) -> None:
    """sysbench's libmariadb: a prepare announcing no columns made it skip the rows and fail the next statement (2014)."""
    import shutil
    import subprocess

    from services import require_service
    from test_proxy_support import PASSWORD, USER

    binary = shutil.which("sysbench")
    if binary is None:
        require_service("sysbench (libmariadb's prepared statements)", "not on PATH (apt-get install sysbench)")
    script = tmp_path / "star.lua"
    script.write_text(SYSBENCH_SCRIPT, encoding="utf-8")
    port, _ = wire
    done = subprocess.run(
        [binary, str(script), "--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={port}",
         f"--mysql-user={USER}", f"--mysql-password={PASSWORD}", "--mysql-db=logic_db", "--mysql-ssl=off",
         "--events=1", "--threads=1", "run"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    printed = [line.split("\t") for line in done.stdout.splitlines() if line.startswith(("rows", "query"))]
    assert printed == [["rows", "3"], ["rows", "2"], ["rows", "1"], ["query", "1", "alpha"]]


def test_a_prepared_cursor_keeps_its_transaction_across_executes(wire: tuple[int, str]) -> None:
    # mysql-connector's C client sends COM_STMT_RESET before each execute; mimic's answer to it rolled the
    # session's transaction back (session.reset), so each insert undid the one before.
    port, _ = wire
    conn = _connect(port, "logic_db", use_pure=False)
    try:
        conn.autocommit = False
        cur = conn.cursor(prepared=True)
        insert = "INSERT INTO t_kinds (id, user_id, name) VALUES (?, ?, ?)"
        cur.execute(insert, (900, 77, "first"))
        cur.execute(insert, (901, 77, "second"))
        cur.execute("SELECT id FROM t_kinds WHERE user_id = ? ORDER BY id", (77,))
        assert cur.fetchall() == [(900,), (901,)]  # both, in one open transaction
        conn.rollback()
        cur.execute("SELECT id FROM t_kinds WHERE user_id = ?", (77,))
        assert cur.fetchall() == []
    finally:
        conn.close()


def test_statements_prepared_and_closed_one_after_another_keep_their_answers(wire: tuple[int, str]) -> None:
    # each cursor prepares its statement anew and closes it: ids the front met before are gone and new ones
    # come, past the number of statements whose fields it keeps (256); every answer stays its own statement's
    port, reference = wire
    proxied, direct = _connect(port, "logic_db", use_pure=False), _connect(3306, reference, use_pure=False)
    try:
        for i in range(300):
            sql = "SELECT name, %d AS n FROM t_kinds WHERE user_id = ? AND id = ?" % i
            assert _run(proxied, sql, (10, 1))[0] == _run(direct, sql, (10, 1))[0]
    finally:
        proxied.close()
        direct.close()
