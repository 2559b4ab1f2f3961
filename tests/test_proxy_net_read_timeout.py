"""``proxy.netReadTimeoutMs``: a logged-in client that stops mid-packet is dropped, its transaction rolled back.

MariaDB drops a client that has begun a packet and not finished it within ``net_read_timeout``.
The proxy did not: such a client held its session (and a transaction's pinned connections and row
locks) for ever. Here, with ``netReadTimeoutMs: 300``, raw clients in the middle of a transaction
(a row updated, so its lock is held on MariaDB) send half a header or a header and part of its
payload, and go silent: the proxy must close them, roll their transaction back (the row is as
before, and another client updates it at once), and leave no backend connection borrowed. A client
silent *between* commands is not dropped: it is served after waiting longer than the bound. Both
on the hot path's command gate (a statement shape warmed first) and on mysql-mimic's reader.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import pytest

from services import require_module

require_module("mysql_mimic", "ddm proxy")

from raw_mysql import COM_QUERY, RawClient, frame  # noqa: E402
from test_proxy_support import (  # noqa: E402
    PASSWORD, ROW_USER_ID, SMALL, USER, InProcessProxy, one_row_proxy, row_amount, until,
)  # fmt: skip

TIMEOUT_MS = 300
SELECT = f"SELECT amount FROM {SMALL} WHERE user_id = {ROW_USER_ID}"
UPDATE = f"UPDATE {SMALL} SET amount = amount + 1 WHERE user_id = {ROW_USER_ID}"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[InProcessProxy, list[str]]]:
    with one_row_proxy(netReadTimeoutMs=TIMEOUT_MS) as served:
        yield served


def _client(proxy: InProcessProxy) -> RawClient:
    client = RawClient(proxy.port, timeout=30)
    assert client.login(USER, PASSWORD, database="logic_db")[:1] == b"\x00"
    return client


#: How the client stops: half a header, or a header announcing 100 bytes and 10 of them.
CUTS: dict[str, Callable[[bytes], bytes]] = {
    "mid-header": lambda packet: packet[:2],
    "mid-payload": lambda packet: frame(bytes([COM_QUERY]) + b"S" * 99)[:14],
}


@pytest.mark.parametrize("warmed", [True, False], ids=["hot-path-gate", "mimic-reader"])
@pytest.mark.parametrize("cut", list(CUTS))
def test_a_client_stuck_mid_packet_is_dropped_and_its_transaction_rolled_back(
    served: tuple[InProcessProxy, list[str]], cut: str, warmed: bool
) -> None:
    proxy, databases = served
    before = row_amount(databases)
    client = _client(proxy)
    try:
        if warmed:  # the shape known: the gate reads this client's commands (docs/proxy.md#the-hot-path)
            for _ in range(2):
                assert client.query(SELECT) == [(str(before),)]
        client.query("BEGIN")
        assert client.query(UPDATE) == 1  # the row's lock is held on MariaDB until the transaction ends
        client.sock.sendall(CUTS[cut](frame(bytes([COM_QUERY]) + SELECT.encode())))
        assert client.is_closed(wait=20), "the client stuck mid-packet was not dropped"
    finally:
        client.close()
    executor: Any = proxy.server.executor
    until(lambda: executor.borrowed() == 0, f"still borrowed: {executor.pool_stats()}")
    assert row_amount(databases) == before, "the dropped client's update was committed"
    with _client(proxy) as other:  # its lock is gone: another transaction updates the row at once
        assert other.query(UPDATE) == 1
        assert other.query(SELECT) == [(str(before + 1),)]
    assert row_amount(databases) == before + 1


def test_a_client_silent_between_commands_is_not_dropped(served: tuple[InProcessProxy, list[str]]) -> None:
    proxy, databases = served
    with _client(proxy) as client:
        for _ in range(2):
            client.query(SELECT)
        time.sleep(3 * TIMEOUT_MS / 1000)  # idle longer than the mid-packet bound: no packet has begun
        assert client.query(SELECT) == [(str(row_amount(databases)),)]
        packet = frame(bytes([COM_QUERY]) + SELECT.encode())
        client.sock.sendall(packet[:3])  # a packet begun, and finished within the bound
        time.sleep(TIMEOUT_MS / 3000)
        client.sock.sendall(packet[3:])
        assert client.result() == [(str(row_amount(databases)),)]
