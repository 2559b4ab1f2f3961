"""Unsigned integers through prepared statements of ``ddm proxy``: the values MariaDB gives, never a struct error.

A result whose columns the prepare did not announce (``INSERT ... RETURNING``), or announced
signed where an execute makes them unsigned (``SELECT big + ?``, ``CAST(? AS UNSIGNED)``),
took its columns from the DB-API description, whose 7 items have no UNSIGNED flag: a BIGINT
UNSIGNED value of 2**63 or more (an INT UNSIGNED one of 2**31 or more) was packed signed and
failed with ``struct.error`` (1105 "argument out of range"; libmysqlclient lost the connection
mid-result), and a relayed binary row was announced signed, so the client read it negative.

Real clients against a real proxy and, for the reference, the same statements straight to one
MariaDB table holding the same rows: mysql-connector's prepared cursors (its pure-Python
protocol, which sends and reads unsigned 64-bit values; its C extension, libmysqlclient, which
can send neither, nor read them unsigned from MariaDB itself, so it is compared on what it can
do) and a raw COM_STMT_EXECUTE with the unsigned flag on its BIGINT parameters, whose row bytes
and column types must be MariaDB's.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator

import pytest

from services import require_module

require_module("mysql_mimic", "ddm proxy")
require_module("mysql.connector", "prepared statements against the proxy")

from raw_mysql import COM_STMT_EXECUTE, LONGLONG, RawClient, raise_error, rows_of  # noqa: E402
from test_proxy_prepared import _connect  # noqa: E402  # mysql-connector to the proxy or to MariaDB

DDL = ("CREATE TABLE t_u (id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, big BIGINT UNSIGNED, "
       "mid INT UNSIGNED)")  # fmt: skip
ROWS = [(1, 10, 2**63 + 5, 2**31 + 7), (2, 11, 2**64 - 1, 2**32 - 1), (3, 12, 7, 9), (4, 13, None, None)]
INSERT = "INSERT INTO t_u (id, user_id, big, mid) VALUES (%s, %s, %s, %s)"
UNSIGNED = 32  # the column-definition flag
UNSIGNED_PARAM = 0x80  # COM_STMT_EXECUTE's flag byte after a parameter's type


@pytest.fixture(scope="module")
def unsigned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    """A proxy over ``t_u`` on two shards, and a database holding the same rows in one table."""
    from test_proxy_support import proxy_and_reference

    with proxy_and_reference(tmp_path_factory.mktemp("unsigned"), "t_u", DDL, INSERT, ROWS) as served:
        yield served


def _run(conn: Any, sql: str, params: tuple[Any, ...]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows, and each column's name, type and UNSIGNED flag, of one prepared execute."""
    cur = conn.cursor(prepared=True)
    try:
        cur.execute(sql, params)
        rows = [tuple(r) for r in cur.fetchall()]
        return rows, [(d[0], d[1], d[7] & UNSIGNED) for d in cur.description]
    finally:
        cur.close()


def _same_as_mariadb(port: int, reference: str, use_pure: bool, cases: list[tuple[str, tuple[Any, ...]]]) -> None:
    proxied, direct = _connect(port, "logic_db", use_pure), _connect(3306, reference, use_pure)
    try:
        for sql, params in cases:
            want = _run(direct, sql, params)
            assert _run(proxied, sql, params) == want, sql
            if not sql.startswith("INSERT"):  # again: the parameter types are not resent
                assert _run(proxied, sql, params) == want, sql
    finally:
        proxied.close()
        direct.close()


def test_unsigned_values_reach_a_pure_python_client_as_mariadb_sends_them(unsigned: tuple[int, str]) -> None:
    port, reference = unsigned
    _same_as_mariadb(port, reference, True, [
        # not announced at prepare: the columns come from the result
        ("INSERT INTO t_u (id, user_id, big, mid) VALUES (?, ?, ?, ?) RETURNING id, big, mid",
         (20, 10, 2**63 + 9, 2**31 + 9)),
        ("INSERT INTO t_u (id, user_id, big, mid) VALUES (?, ?, ?, ?) RETURNING big, mid",
         (21, 11, 2**64 - 2, 2**32 - 2)),
        # announced signed (the prepare cannot know), unsigned once executed
        ("SELECT big + ?, mid + ? FROM t_u WHERE user_id = ?", (0, 0, 10)),
        ("SELECT CAST(? AS UNSIGNED), CAST(? AS UNSIGNED) + 0", (2**63 + 5, 2**31 + 7)),
        # announced unsigned: one shard relayed, several merged and decoded
        ("SELECT big, mid FROM t_u WHERE user_id = ?", (11,)),
        ("SELECT id, big, mid FROM t_u WHERE id >= ? ORDER BY id", (0,)),
        ("SELECT MAX(big), MIN(mid), MAX(mid) FROM t_u WHERE id >= ?", (0,)),
        ("SELECT big FROM t_u WHERE big = ?", (2**63 + 5,)),
    ])  # fmt: skip


def test_libmysqlclient_gets_mariadbs_answers(unsigned: tuple[int, str]) -> None:
    """libmysqlclient sends no parameter of 2**63 or more: the unsigned values come from the statements."""
    port, reference = unsigned
    _same_as_mariadb(port, reference, False, [
        ("INSERT INTO t_u (id, user_id, big, mid) VALUES (?, ?, ?, ?) RETURNING id, big * 2 + 1, mid + 2147483648",
         (30, 12, 2**62 + 1, 5)),
        ("SELECT big + ?, mid + ? FROM t_u WHERE user_id = ?", (0, 0, 10)),
        ("SELECT big, mid FROM t_u WHERE user_id = ?", (10,)),
        ("SELECT id, big, mid FROM t_u WHERE id >= ? ORDER BY id", (0,)),
    ])  # fmt: skip


def _columns_and_rows(raw: RawClient, stmt: int, values: list[int]) -> tuple[list[tuple[int, int]], list[bytes]]:
    """One execute with every value a BIGINT parameter flagged unsigned: each column's (type, UNSIGNED flag)
    and the binary row packets as sent."""
    body = struct.pack("<IBI", stmt, 0, 1) + bytes((len(values) + 7) // 8) + b"\x01"
    body += b"".join(bytes((LONGLONG, UNSIGNED_PARAM)) for _ in values)
    body += b"".join(struct.pack("<Q", v) for v in values)
    raw.command(COM_STMT_EXECUTE, body)
    answer = [payload for _, payload in raw.response()]
    raise_error(answer[0])
    definitions = answer[1 : 1 + answer[0][0]]
    # a definition ends with its fixed part: charset (2), length (4), type (1), flags (2), decimals (1), filler (2)
    columns = [(d[-6], int.from_bytes(d[-5:-3], "little") & UNSIGNED) for d in definitions]
    return columns, rows_of(answer)


def test_a_raw_execute_with_unsigned_bigint_parameters_gets_mariadbs_bytes(unsigned: tuple[int, str]) -> None:
    from test_proxy_support import PASSWORD, USER

    port, reference = unsigned
    cases = [
        ("INSERT INTO t_u (id, user_id, big, mid) VALUES (?, ?, ?, ?) RETURNING big, mid", [40, 13, 2**63 + 1, 2**31]),
        ("SELECT CAST(? AS UNSIGNED), ? + 0", [2**64 - 1, 2**63 + 3]),
        ("SELECT big, mid FROM t_u WHERE big = ?", [2**63 + 5]),
        ("SELECT big + ?, mid FROM t_u WHERE user_id = ?", [0, 11]),
    ]
    with RawClient(port) as proxied, RawClient(3306) as direct:
        proxied.login(USER, PASSWORD, database="logic_db")
        direct.login("root", "", database=reference)
        for sql, values in cases:
            want = _columns_and_rows(direct, direct.prepare(sql), values)
            assert _columns_and_rows(proxied, proxied.prepare(sql), values) == want, sql
