"""COM_STMT_RESET answered by the gate (docs/proxy.md#the-hot-path).

mysql-connector's C client sends one before every execute of a prepared cursor; the proxy answers it from the
gate as mimic's path answers it — the statement's long data and cursor dropped, an OK, nothing of the
session's touched — instead of through mimic's command loop. Checked with real clients against a proxy over
real MariaDB databases: the connector's prepared cursor (its resets counted as the gate's), long data sent
and then reset (the execute after it binds its own value), an unknown statement and a malformed reset (left
to mimic's path, which answers them with its errors), and a reset inside a transaction, which stays open.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, require_module

require_module("mysql_mimic", "ddm proxy")
connector: Any = require_module("mysql.connector", "mysql-connector's prepared cursors")

from ddm_core import load_config  # noqa: E402
from ddm_core._fast import gate_py  # noqa: E402  # its modes' values are the compiled twin's
from ddm_core.execute import Executor  # noqa: E402
from raw_mysql import (  # noqa: E402
    COM_PING, COM_STMT_EXECUTE, COM_STMT_RESET, COM_STMT_SEND_LONG_DATA, decoded, error_code, execute_payload, longlong,
)  # fmt: skip
from test_proxy_many_loop import Served, _served, _table, _until  # noqa: E402
from test_proxy_support import PASSWORD, USER, proxy_config  # noqa: E402

ROWS = 20
DDL = "CREATE TABLE t_reset (id INTEGER NOT NULL, k VARCHAR(20) NOT NULL, PRIMARY KEY (id))"  # text: read raw
POINT = "SELECT k FROM t_reset WHERE id = ?"


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases)
        config["tables"] = [_table("t_reset")]
        with Executor(load_config(config), load_schema=False) as ex:
            ex.execute(DDL).close()
            for i in range(1, ROWS + 1):
                ex.execute("INSERT INTO t_reset (id, k) VALUES (%s, %s)", (i, str(i * 10))).close()
        proxy = _served(config, "relay")
        try:
            yield proxy
        finally:
            proxy.close()


def _gate_modes(served: Served) -> list[int]:
    """The modes of the proxy's client connections' gates (one client connected: one mode)."""
    return [c._gate.mode for c in list(served.server._connections) if c._gate is not None]


def test_a_prepared_cursor_s_resets_are_answered_by_the_gate(served: Served) -> None:
    runtime = served.server.runtime
    conn = connector.connect(host="127.0.0.1", port=served.port, user=USER, password=PASSWORD, database="logic_db",
                             use_pure=False, autocommit=True, ssl_disabled=True)  # fmt: skip
    try:
        cur = conn.cursor(prepared=True)
        before = runtime.hot_resets
        for i in range(1, ROWS + 1):
            cur.execute(POINT, (i,))
            assert cur.fetchall() == [(str(i * 10),)]
        assert runtime.hot_resets - before >= ROWS - 1  # one before each execute after the first
    finally:
        conn.close()
    served.at_rest()


def test_long_data_reset_is_not_bound_by_the_next_execute(served: Served) -> None:
    runtime = served.server.runtime
    with served.raw() as client:
        stmt = client.prepare(POINT)
        client.command(COM_STMT_SEND_LONG_DATA, struct.pack("<IH", stmt, 0) + struct.pack("<q", 5))  # no answer
        client.command(COM_PING)  # mimic's path took the long data: once it waits again, the gate reads commands
        assert client.packet()[:1] == b"\x00"
        _until(lambda: _gate_modes(served) == [gate_py.IDLE], lambda: f"gate modes {_gate_modes(served)}")
        before = runtime.hot_resets
        client.command(COM_STMT_RESET, struct.pack("<I", stmt))
        answer = client.response()
        assert [(seq, packet[:1]) for seq, packet in answer] == [(1, b"\x00")]
        assert runtime.hot_resets - before == 1
        client.command(COM_STMT_EXECUTE, execute_payload(stmt, [longlong(3)]))
        assert decoded([p for _, p in client.response()], binary=True) == [("30",)]  # not id 5's 50


@pytest.mark.parametrize("body", [struct.pack("<I", 99_999), b"\x01\x00"], ids=["unknown-id", "short"])
def test_a_reset_the_gate_cannot_answer_goes_to_mimic_s_path(served: Served, body: bytes) -> None:
    runtime = served.server.runtime
    with served.raw() as client:
        before = runtime.hot_resets
        client.command(COM_STMT_RESET, body)
        answer = client.response()
        assert len(answer) == 1 and error_code(answer[0][1]) is not None
        assert runtime.hot_resets == before
        assert client.query("SELECT 1") == [("1",)]  # the session goes on


def test_a_reset_leaves_the_transaction_open(served: Served) -> None:
    with served.raw() as client:
        stmt = client.prepare(POINT)
        client.query("BEGIN")
        client.command(COM_STMT_RESET, struct.pack("<I", stmt))
        ok = client.response()[0][1]
        assert struct.unpack_from("<H", ok, 3)[0] & 1  # SERVER_STATUS_IN_TRANS in the reset's OK
        client.command(COM_STMT_EXECUTE, execute_payload(stmt, [longlong(4)]))
        assert decoded([p for _, p in client.response()], binary=True) == [("40",)]
        client.query("COMMIT")
    served.at_rest()
