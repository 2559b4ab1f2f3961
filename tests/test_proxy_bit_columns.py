"""BIT columns through ``ddm proxy`` arrive as MariaDB sends them: ``binary`` (charset 63) byte strings.

A BIT value is a big-endian byte string that is rarely valid UTF-8 (``b"\\x03\\xff"``); a column definition
announcing it in utf8mb4 makes PyMySQL decode it as text and fail. The same rows live in a table sharded
over 2 data sources × 2 tables and in one table of a plain database; each query, read by PyMySQL (text) and
by mysql-connector prepared (binary), must give the same column types, values and Python types through the
proxy as on MariaDB directly: a one-unit read (relayed), a multi-unit concatenation and ordered merges
(decoded by the proxy and framed again).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest

from ddm_core import load_config
from ddm_core.execute import Executor
from services import fresh_mariadb_databases
from test_proxy_support import (PASSWORD, USER, ProxyProcess, Read, connect, prepared_reader, proxy_config, typed_rows,
                                write_config)

DDL = "CREATE TABLE t_bits (id INTEGER NOT NULL, b1 BIT(1) NULL, b8 BIT(8) NULL, b64 BIT(64) NULL, PRIMARY KEY (id))"
ONES = 2**64 - 1
#: 0, all ones, and values whose bytes are not UTF-8 (0xff, 0x80, b"\x03\xff", a lone continuation byte).
VALUES = [(0, 0, 0), (1, 255, ONES), (1, 0x80, 0x03FF), (0, 0xFE, 0x80), (None, None, None), (1, 1, 1 << 63),
          (0, 0xC3, 0xC328), (1, 0x7F, 0xFFFE)]  # fmt: skip
ROWS = [(i + 1, *v) for i, v in enumerate(VALUES * 3)]
QUERIES = [
    "SELECT b1, b8, b64 FROM t_bits WHERE id = 2",  # one unit
    "SELECT id, b1, b8, b64 FROM t_bits WHERE id BETWEEN 1 AND 24",  # every table, concatenated
    "SELECT id, b1, b8, b64 FROM t_bits WHERE id BETWEEN 1 AND 24 ORDER BY id DESC",  # merged
    "SELECT b64, id FROM t_bits WHERE id BETWEEN 3 AND 20 ORDER BY b64, id",  # merged on the BIT value
    "SELECT DISTINCT b8 FROM t_bits WHERE id BETWEEN 1 AND 24 ORDER BY b8",
]


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Path, str]]:
    with fresh_mariadb_databases(3) as databases:
        config = proxy_config(databases[:2], batchRows=5)  # past a batch too
        config["tables"].append({"logicTable": "t_bits", "shardKey": "id", "algorithm": "slots", "slotCount": 64,
                                 "shardCount": 2, "tablePerShard": 2, "databases": ["ds_0", "ds_1"], "tableKey": "id"})
        config["runtime"] = {"allowFullRoute": True, "allowDmlFullRoute": False, "fullRouteThreshold": 64}
        insert = "INSERT INTO t_bits (id, b1, b8, b64) VALUES " + ", ".join(["(%s, %s, %s, %s)"] * len(ROWS))
        flat = [v for row in ROWS for v in row]
        with Executor(load_config(config), load_schema=False) as ex:
            ex.execute(DDL).close()
            ex.execute(insert, flat).close()
        direct = pymysql.connect(host="127.0.0.1", user="root", password="", database=databases[2], autocommit=True)
        with direct.cursor() as cur:
            cur.execute(DDL)
            cur.execute(insert, flat)
        direct.close()
        yield write_config(config, Path(tempfile.mkdtemp(prefix="ddm_bits_")) / "proxy.yaml"), databases[2]


def _text(conn: Any) -> Read:
    def read(sql: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        with conn.cursor() as cur:
            cur.execute(sql)
            rows = list(cur.fetchall())
            # name, type code; the character set is PyMySQL's decision to hand over bytes (checked by the values)
            return [(d[0], d[1]) for d in cur.description], rows

    return read


@pytest.mark.parametrize("client", ["pymysql", "mysql-connector prepared"])
def test_bit_columns_through_the_proxy_match_mariadb(servers: tuple[Path, str], client: str) -> None:
    path, database = servers
    proxy = ProxyProcess(path).start()
    if client == "pymysql":
        ours, theirs = connect(proxy.port, autocommit=True), pymysql.connect(
            host="127.0.0.1", user="root", password="", database=database, autocommit=True)  # fmt: skip
        proxied, direct = _text(ours), _text(theirs)
    else:
        from mysql import connector

        ours = connector.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD, database="logic_db",
                                 use_pure=False, autocommit=True, ssl_disabled=True)  # fmt: skip
        theirs = connector.connect(host="127.0.0.1", port=3306, user="root", password="", database=database,
                                   use_pure=False, autocommit=True, ssl_disabled=True)  # fmt: skip
        proxied, direct = prepared_reader(ours), prepared_reader(theirs)
    try:
        for _ in range(2):  # a shape's first run (on a worker) and the next (from the event loop where it may)
            for sql in QUERIES:
                want_description, want = direct(sql)
                got_description, got = proxied(sql)
                assert got_description == want_description, sql
                if "ORDER BY" in sql:
                    assert typed_rows(got) == typed_rows(want), sql
                else:  # the order of rows SQL leaves open
                    assert sorted(typed_rows(got)) == sorted(typed_rows(want)), sql
                assert any(isinstance(v, bytes | bytearray | int) and v for row in got for v in row), sql
    finally:
        ours.close()
        theirs.close()
        assert proxy.terminate() == 0, proxy.stderr
