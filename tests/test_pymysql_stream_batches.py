"""Streamed (``SSCursor``) results of ddm-core's PyMySQL connections, read a ``fetchmany`` at a time by the
compiled ``wire`` loop (execute/pymysql_results.py, ``_Batch``): the same rows, types and NULLs as stock
PyMySQL's row-by-row reader, for every batch size and both twins, and the connection in step afterwards."""

from __future__ import annotations

import io
from typing import Any, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddm_core._fast import load
from ddm_core.execute import pymysql_results
from ddm_core.execute.pymysql_results import _Batch
from services import stock_and_ours_mariadb

TWINS = [load("python").wire]
try:
    TWINS.append(load("cython").wire)
except ImportError:  # not built: the pure twin alone
    pass

DDL = ("CREATE TABLE t (id INT PRIMARY KEY, n BIGINT NULL, d DECIMAL(12,3) NULL, f DOUBLE NULL, "
       "s VARCHAR(300) COLLATE utf8mb4_general_ci NULL, b VARBINARY(600) NULL, dt DATETIME(3) NULL, j JSON NULL)")  # fmt: skip
ROWS = 230


@pytest.fixture(scope="module")
def connections() -> Iterator[tuple[Any, Any]]:
    with stock_and_ours_mariadb() as (stock, ours), stock.cursor() as cur:
        cur.execute(DDL)
        values = []
        for i in range(ROWS):
            values.append((i, None if i % 7 == 0 else i * 10**9 - 5, None if i % 5 == 0 else f"{i}.{i % 1000:03d}",
                           None if i % 3 == 0 else i / 7, None if i % 11 == 0 else "Ü" * (i % 13) + f"x{i}" * (i % 40),
                           None if i % 4 == 0 else bytes(range(i % 256)) * (1 + i % 2), None if i % 6 == 0 else
                           f"2024-01-{1 + i % 28:02d} 10:{i % 60:02d}:00.123", None if i % 9 else '{"a": [1, 2]}'))  # fmt: skip
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", values)
        yield stock, ours


@pytest.fixture(params=TWINS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def wire(request: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(pymysql_results, "wire", request.param)
    return request.param


def _stock_rows(stock: Any, sql: str) -> list[tuple[Any, ...]]:
    with stock.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(sql)
        return list(cur.fetchall_unbuffered())


@pytest.mark.parametrize("batch", [1, 2, 7, 100, 229, 230, 231, 1000])
@pytest.mark.parametrize("sql", ["SELECT * FROM t ORDER BY id", "SELECT s, id FROM t WHERE id < 3 ORDER BY id",
                                 "SELECT * FROM t WHERE id < 0"])  # fmt: skip
def test_batches_read_the_rows_stock_pymysql_reads(connections: tuple[Any, Any], wire: Any, batch: int,
                                                   sql: str) -> None:  # fmt: skip
    stock, ours = connections
    expected = _stock_rows(stock, sql)
    cur = ours.cursor(pymysql.cursors.SSCursor)
    assert type(cur).__name__ == "FastSSCursor"
    cur.execute(sql)
    got: list[Any] = []
    while True:
        rows = cur.fetchmany(batch)
        got += rows
        if len(rows) < batch:
            break
    assert [[type(v) for v in r] for r in got] == [[type(v) for v in r] for r in expected]
    assert got == expected
    assert cur.fetchmany(batch) == ()
    assert cur.rownumber == len(expected)
    cur.close()
    with ours.cursor() as check:  # the connection's sequence numbers in step: the next statement reads
        check.execute("SELECT 41 + 1")
        assert check.fetchall() == ((42,),)


def test_a_cursor_closed_mid_result_drains_it(connections: tuple[Any, Any], wire: Any) -> None:
    _, ours = connections
    cur = ours.cursor(pymysql.cursors.SSCursor)
    cur.execute("SELECT id FROM t ORDER BY id")
    assert [r[0] for r in cur.fetchmany(5)] == [0, 1, 2, 3, 4]
    assert cur.fetchone()[0] == 5  # PyMySQL's own per-row read between two batches
    assert [r[0] for r in cur.fetchmany(3)] == [6, 7, 8]
    cur.close()  # PyMySQL reads the rest to the EOF
    with ours.cursor() as check:
        check.execute("SELECT COUNT(*) FROM t")
        assert check.fetchall() == ((ROWS,),)


def test_an_error_mid_stream_is_raised_and_ends_the_result(connections: tuple[Any, Any], wire: Any) -> None:
    _, ours = connections
    cur = ours.cursor(pymysql.cursors.SSCursor)
    # the 1st row is sent, the 2nd fails (subquery returns more than 1 row): an error packet after row packets
    cur.execute("SELECT id, (SELECT id FROM t WHERE id < 2 + (x.id > 0)) FROM t x ORDER BY id")
    with pytest.raises(pymysql.err.MySQLError) as caught:
        cur.fetchmany(100)
    assert caught.value.args[0] == 1242
    assert not cur._result.unbuffered_active
    with ours.cursor() as check:
        check.execute("SELECT 1")
        assert check.fetchall() == ((1,),)


def _frame(payloads: list[bytes], seq: int) -> bytes:
    out = b""
    for p in payloads:
        out += len(p).to_bytes(3, "little") + bytes((seq,)) + p
        seq = (seq + 1) & 0xFF
    return out


@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.integers(0, 300), max_size=10), batch=st.integers(1, 12), seq=st.integers(0, 255))
def test_a_batch_ends_at_a_made_up_eof_numbered_in_turn(sizes: list[int], batch: int, seq: int) -> None:
    for twin in TWINS:
        payloads = [b"\xfc" + n.to_bytes(2, "little") + b"v" * n if n >= 251 else bytes((n,)) + b"v" * n for n in sizes]
        stream = io.BytesIO(_frame([*payloads, b"\xfe\x00\x00\x02\x00"], seq))
        got: list[Any] = []
        at = seq
        while True:
            reader = _Batch(stream.read, batch, at)
            rows, at, last, outcome = twin.read_rows(reader.read, at, [(None, None)])
            assert outcome == twin.EOF
            got += rows
            if not reader.made_up:
                break
            assert len(rows) == batch
            at = (at - 1) & 0xFF
        assert [len(r[0]) for r in got] == sizes
        assert at == (seq + len(sizes) + 1) & 0xFF
