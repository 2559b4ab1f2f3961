"""``ddm proxy`` with a frozen data source: its client gets an error in time and nobody else waits.

``ds_0`` lives on a private ``mariadbd`` that the test stops with SIGSTOP; ``ds_1`` on the
shared MariaDB. Statements on ``ds_0`` were sent from the proxy's event loop (a repeated
one-unit text): the frozen server answers neither them nor their cancel, so the deadline's
guard (or, failing that, the bound on the wait for the answer: the deadline plus the cancel
grace) ends the wait, while the loop goes on serving the client of ``ds_1``.

In a transaction the same holds for a read on the frozen data source's pin and for a transaction's first
read there, sent right behind its opening (both taken by the gate's front, ``PinStatement``): the pin cut
off mid-read fails the transaction until it ends; an opening never answered leaves it as it was.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Iterator

import pymysql
import pytest

from services import fresh_mariadb_databases, require_module
from test_execute_support import PrivateMariaDB
from test_frozen_data_source import Frozen

require_module("mysql_mimic", "the proxy tests")

from test_proxy_support import ProxyProcess, connect, create_tables, proxy_config, write_config  # noqa: E402

DEADLINE = 3.0 + 1.0  # the proxy executor's statement timeout (statementTimeoutMs below) and cancel grace


@pytest.fixture(scope="module")
def frozen_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyProcess, Frozen, int, int]]:
    server = PrivateMariaDB(tmp_path_factory.mktemp("frozen-proxy-mariadbd"))
    server.start()
    private_db = server.create_database("ddm_proxy_frozen_")
    frozen = Frozen(server, private_db, "")
    try:
        with fresh_mariadb_databases(2) as databases:
            config = proxy_config(databases, statementTimeoutMs=3000)  # DEADLINE below
            config["dataSources"]["ds_0"]["url"] = f"mysql://127.0.0.1:{server.port}/{private_db}"
            create_tables(config)
            proxy = ProxyProcess(write_config(config, tmp_path_factory.mktemp("proxy") / "proxy.yaml")).start()
            try:
                conn = connect(proxy.port, autocommit=True)
                with conn.cursor() as cur:
                    users = {}
                    for user in range(1, 200):  # one user on each data source
                        cur.execute(f"PREVIEW SELECT 1 FROM t_order WHERE user_id = {user}")
                        users.setdefault(str(cur.fetchall()[0][0]), user)
                    cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, %s, 10), (2, %s, 20)",
                                (users["ds_0"], users["ds_1"]))  # fmt: skip
                conn.close()
                yield proxy, frozen, users["ds_0"], users["ds_1"]
            finally:
                frozen.resume()
                proxy.stop()
    finally:
        frozen.resume()
        server.kill()  # by the PID of the process started above


POINT = "SELECT amount FROM t_order WHERE user_id = %s AND order_id = %s"


def test_a_frozen_data_source_fails_its_statement_in_time_and_stalls_no_one(
        frozen_proxy: tuple[ProxyProcess, Frozen, int, int]) -> None:  # fmt: skip
    proxy, frozen, on_frozen, on_healthy = frozen_proxy
    victim = connect(proxy.port, autocommit=True)
    with victim.cursor() as cur:
        _read(cur, on_frozen, 1, 10, times=3)  # routed on a worker, then sent from the loop
    _fails_in_time_while_others_are_served(proxy, frozen, victim, on_frozen, on_healthy)
    victim.close()
    again = connect(proxy.port, autocommit=True)  # resumed: served again
    with again.cursor() as cur:
        _read(cur, on_frozen, 1, 10, times=3)
    again.close()


def test_a_read_on_a_frozen_pin_fails_in_time_and_ends_its_transactions_use(
        frozen_proxy: tuple[ProxyProcess, Frozen, int, int]) -> None:  # fmt: skip
    proxy, frozen, on_frozen, on_healthy = frozen_proxy
    victim = connect(proxy.port, autocommit=True)
    with victim.cursor() as cur:
        cur.execute("BEGIN")
        _read(cur, on_frozen, 1, 10, times=3)  # the first opens the transaction there (its pin), the others read on it
    _fails_in_time_while_others_are_served(proxy, frozen, victim, on_frozen, on_healthy)
    with victim.cursor() as cur:
        # The pin was cut off mid-statement (its state unknown): the transaction refuses what follows, on any
        # data source, until it ends; then the session is served as before.
        with pytest.raises(pymysql.MySQLError, match="cut off"):
            cur.execute(POINT, (on_healthy, 2))
        cur.execute("ROLLBACK")
        cur.execute("BEGIN")
        _read(cur, on_frozen, 1, 10)
        cur.execute("COMMIT")
    victim.close()


def test_a_transactions_first_read_on_a_frozen_data_source_fails_in_time_and_leaves_it_usable(
        frozen_proxy: tuple[ProxyProcess, Frozen, int, int]) -> None:  # fmt: skip
    proxy, frozen, on_frozen, on_healthy = frozen_proxy
    victim = connect(proxy.port, autocommit=True)
    with victim.cursor() as cur:
        _read(cur, on_frozen, 1, 10, times=3)  # idle connections there: the opening goes on one, its read behind it
        cur.execute("BEGIN")
        _read(cur, on_healthy, 2, 20)  # the transaction pins the healthy data source only
    _fails_in_time_while_others_are_served(proxy, frozen, victim, on_frozen, on_healthy)
    with victim.cursor() as cur:
        # Its opening there was never answered: that connection went, the transaction goes on where it was, and
        # opens there again at its next read.
        _read(cur, on_healthy, 2, 20)
        _read(cur, on_frozen, 1, 10)
        cur.execute("COMMIT")
    victim.close()


def _read(cur: Any, user: int, order_id: int, amount: int, times: int = 1) -> None:
    """The point select of ``order_id`` of ``user``, ``times`` over, answered with ``amount``."""
    for _ in range(times):
        cur.execute(POINT, (user, order_id))
        assert cur.fetchall() == ((amount,),)


def _fails_in_time_while_others_are_served(proxy: ProxyProcess, frozen: Frozen, victim: Any, on_frozen: int,
                                           on_healthy: int) -> None:  # fmt: skip
    """``victim``'s next point select on the frozen data source gets an error within the deadline and its grace,
    while another client's reads of the healthy one are answered at once."""
    bystander = connect(proxy.port, autocommit=True)
    outcome: dict[str, Any] = {}

    def frozen_statement() -> None:
        began = time.monotonic()
        try:
            with victim.cursor() as cur:
                cur.execute(POINT, (on_frozen, 1))
        except pymysql.MySQLError as exc:
            outcome["error"] = exc
        outcome["seconds"] = time.monotonic() - began

    with frozen.frozen():
        t = threading.Thread(target=frozen_statement, daemon=True)
        t.start()
        time.sleep(0.3)
        worst = 0.0
        with bystander.cursor() as cur:
            for _ in range(20):  # meanwhile the loop serves the other data source's client at once
                began = time.monotonic()
                _read(cur, on_healthy, 2, 20)
                worst = max(worst, time.monotonic() - began)
        t.join(3 * DEADLINE)
        assert not t.is_alive(), "the statement on the frozen data source was still waiting"
    bystander.close()
    assert worst < 1.0, worst
    assert isinstance(outcome.get("error"), pymysql.MySQLError), outcome
    assert outcome["seconds"] < DEADLINE + 1.5, outcome


def test_the_proxy_stops_with_nothing_borrowed(frozen_proxy: tuple[ProxyProcess, Frozen, int, int]) -> None:
    proxy = frozen_proxy[0]
    assert proxy.terminate() == 0
    counted = re.search(r"(\d+) backend connection\(s\) were still borrowed", proxy.stderr)
    assert counted is not None and int(counted.group(1)) == 0, proxy.stderr


