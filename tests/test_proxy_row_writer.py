"""Merged rows through ``ddm proxy``'s row writer (proxy/row_writer.py) reach clients as MariaDB's own.

``t_types`` (every column type, tests/test_rowwriter.py) sharded over two data sources, and the same
rows in one table on MariaDB: an ORDER BY over both shards is merged in the proxy and written by the
row writer — text for PyMySQL (a whole result, and one streamed in batches), binary for
mysql-connector's prepared cursors — and must give the values, Python types and column types the
unsharded table gives, TIME values of a day or more and negative ones included.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from services import mariadb_connect, require_module

require_module("mysql_mimic", "ddm proxy")
require_module("mysql.connector", "prepared statements against the proxy")

from test_proxy_prepared import _connect, _run, _typed  # noqa: E402  # mysql-connector, prepared, as MariaDB's
from test_rowwriter import TYPES_DDL, TYPES_INSERT, TYPES_ROWS  # noqa: E402

#: The rows twice over (ids 1-6 and 11-16, on both shards): more than the proxy's batch of 7 rows.
ROWS = [*TYPES_ROWS, *((r[0] + 10, r[1] + 1, *r[2:]) for r in TYPES_ROWS)]
_ALL = ("id, user_id, ti, tiu, si, siu, mi, miu, i, iu, bi, biu, dc, f, d, ch, vc, tx, bn, vb, bl, dt, dtm, ts, tm, "
        "yr, bt, en, st, js")  # fmt: skip


def queries(leave_out: tuple[str, ...] = ()) -> list[tuple[str, tuple[Any, ...]]]:
    """ORDER BYs over both shards: a streamed result (12 rows, batches of 7), a short one, a few columns."""
    columns = ", ".join(c for c in _ALL.split(", ") if c not in leave_out)
    return [
        (f"SELECT {columns} FROM t_types ORDER BY id", ()),
        (f"SELECT {columns} FROM t_types WHERE id > %s ORDER BY tm DESC, id LIMIT 5", (0,)),
        ("SELECT tm, id, vc FROM t_types WHERE id > %s ORDER BY vc, id", (3,)),
    ]


@pytest.fixture(scope="module")
def types_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    """A proxy over ``t_types`` on two shards, and a database holding the same rows in one table."""
    from test_proxy_support import proxy_and_reference

    with proxy_and_reference(tmp_path_factory.mktemp("rowwriter"), "t_types", TYPES_DDL, TYPES_INSERT, ROWS) as served:
        yield served


def _text(conn: Any, sql: str, params: tuple[Any, ...]) -> tuple[list[tuple[tuple[str, Any], ...]], list[Any]]:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return _typed([tuple(r) for r in cur.fetchall()]), [(d[0], d[1]) for d in cur.description]


def test_text_rows_are_mariadbs(types_proxy: tuple[int, str]) -> None:
    from test_proxy_support import connect

    port, reference = types_proxy
    proxied, direct = connect(port), mariadb_connect(database=reference)
    try:
        # BIT left out: the proxy's text column definitions give BIT the utf8mb4 character set (MariaDB's
        # say binary), so PyMySQL decodes a BIT value as UTF-8 and fails on b"\x03\xff" before any row
        # bytes matter (the definitions are not the row writer's; tests/test_rowwriter.py covers BIT's bytes).
        for sql, params in queries(leave_out=("bt",)):
            got, want = _text(proxied, sql, params), _text(direct, sql, params)
            assert got[0] == want[0], sql
            assert got[1] == want[1], sql
        assert len(got[0]) == 9  # ids 4-6 and 14-16 plus the TIME values' rows: the comparison saw rows
    finally:
        proxied.close()
        direct.close()


@pytest.mark.parametrize("use_pure", [False, True], ids=["libmysqlclient", "pure-python"])
def test_binary_rows_are_mariadbs(types_proxy: tuple[int, str], use_pure: bool) -> None:
    port, reference = types_proxy
    proxied, direct = _connect(port, "logic_db", use_pure), _connect(3306, reference, use_pure)
    try:
        # YEAR left out of the pure-Python protocol: it reads MariaDB's own 2-byte YEAR as a length-encoded
        # string (and fails on MariaDB as on the proxy); libmysqlclient reads it.
        for sql, params in queries(leave_out=("yr",) if use_pure else ()):
            sql = sql.replace("%s", "?")
            got, got_columns = _run(proxied, sql, params)
            want, want_columns = _run(direct, sql, params)
            assert _typed(got) == _typed(want), sql
            assert got_columns == want_columns, sql
            assert got, sql
    finally:
        proxied.close()
        direct.close()
