"""Read/write splitting through ``ddm proxy``: reads a replica serves, chosen and sent on the event loop.

A real primary with two replicas (tests/replication.py) holds ``t_who``; each server answers a
different ``who`` for the same row — the replicas' copies are changed on the replicas alone, with
``sql_log_bin=0`` — so every answer names the server that gave it. A real proxy serves the data
source (round robin over the replicas, a write window longer than any test). Checked: point
selects (text and prepared) are answered by the replicas, and by the event loop (the proxy's
shutdown line counts the statements run there; before reads were chosen on the loop it counted
none of them); a read after a write in the same session goes to the primary, on the loop too,
while another session keeps reading replicas; a write itself still goes to the primary.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from replication import Replication, replication  # noqa: F401 - fixture
from services import require_module

require_module("mysql_mimic", "ddm proxy")

from test_proxy_support import PASSWORD, USER, ProxyProcess, connect, write_config  # noqa: E402

from ddm_core.proxy import native_password_hash  # noqa: E402

WHO = "SELECT who FROM t_who WHERE id = %s"
REPLICAS = {"replica0", "replica1"}
READS = 30
_LOOP_LINE = re.compile(r"(\d+) statement\(s\) ran on the event loop")


def split_config(replication: Replication, database: str, tables: tuple[str, ...] = ("t_who", "t_log"),  # noqa: F811
                 **proxy: Any) -> dict[str, Any]:  # fmt: skip
    """One data source — the primary and both replicas, round robin — holding the single ``tables``."""
    return {
        "dataSources": {"ds_0": {**replication.endpoints(database), "loadBalancer": "round_robin"}},
        "singleTables": {t: "ds_0" for t in tables},
        "defaultDataSource": "ds_0",
        # A read after a write stays on the primary for the whole test; a replica is never taken out for lag
        # (at a load of 10+ on two cores a replica read 3 s behind, and every read went to the other one).
        "readWrite": {"writeWindowMs": 600_000, "maxLagMs": 600_000},
        "proxy": {"users": [{"name": USER, "passwordHash": native_password_hash(PASSWORD)}], "workers": 4, **proxy},
    }


@pytest.fixture(scope="module")
def database(replication: Replication) -> Iterator[str]:  # noqa: F811
    name = f"ddm_rwproxy_{uuid.uuid4().hex[:8]}"
    replication.sql(replication.primary, f"CREATE DATABASE {name}",
                    f"CREATE TABLE {name}.t_who (id INT PRIMARY KEY, who VARCHAR(20) NOT NULL)",
                    f"CREATE TABLE {name}.t_log (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(20))",
                    f"INSERT INTO {name}.t_who VALUES (1, 'primary'), (2, 'primary')")  # fmt: skip
    replication.wait_replicated()
    for i, replica in enumerate(replication.replicas):  # on that replica only: nothing to replicate back
        replication.sql(replica, "SET SESSION sql_log_bin = 0", f"UPDATE {name}.t_who SET who = 'replica{i}'")
    try:
        yield name
    finally:
        replication.sql(replication.primary, f"DROP DATABASE IF EXISTS {name}")
        replication.wait_replicated()


@pytest.fixture()
def proxy(replication: Replication, database: str, tmp_path: Path) -> Iterator[ProxyProcess]:  # noqa: F811
    started = ProxyProcess(write_config(split_config(replication, database), tmp_path / "proxy.yaml")).start()
    try:
        yield started
    finally:
        started.stop()


def _session(proxy: ProxyProcess) -> Any:
    return connect(proxy.port, autocommit=True)


def _who(conn: Any, key: int = 1) -> str:
    with conn.cursor() as cur:
        cur.execute(WHO, (key,))
        return str(cur.fetchone()[0])


def _on_the_loop(proxy: ProxyProcess) -> int:
    """Stop the proxy; the statements its shutdown line says ran on the event loop."""
    assert proxy.terminate() == 0, proxy.stderr
    found = _LOOP_LINE.search(proxy.stderr)
    assert found, proxy.stderr
    return int(found.group(1))


def test_reads_are_served_by_the_replicas_from_the_event_loop(proxy: ProxyProcess, database: str) -> None:
    require_module("mysql.connector", "prepared reads through the proxy")
    from mysql import connector

    conn = _session(proxy)
    try:
        answers = [_who(conn, 1 + n % 2) for n in range(READS)]
    finally:
        conn.close()
    assert set(answers) == REPLICAS, answers  # round robin: both replicas, never the primary
    prepared = connector.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD, database="logic_db",
                                 ssl_disabled=True, autocommit=True)  # fmt: skip
    try:
        cur = prepared.cursor(prepared=True)
        served = set()
        for n in range(READS):
            cur.execute("SELECT who FROM t_who WHERE id = ?", (1 + n % 2,))
            served.add(cur.fetchall()[0][0])
        assert served == REPLICAS
    finally:
        prepared.close()
    # Each statement text's first run takes a worker (its privileges are read, its plan cached); the rest
    # the loop: sent on a pooled connection until the loop's own to that replica is open, then on it.
    assert _on_the_loop(proxy) >= 2 * READS - 4


def test_a_read_after_a_write_in_the_same_session_goes_to_the_primary(proxy: ProxyProcess, database: str) -> None:
    writer, other = _session(proxy), _session(proxy)
    try:
        before = [_who(writer) for _ in range(4)]  # warm: the text is on the loop from its second run
        assert set(before) <= REPLICAS
        with writer.cursor() as cur:
            cur.execute("INSERT INTO t_log (note) VALUES (%s)", ("written",))
        after = [_who(writer, 1 + n % 2) for n in range(READS)]
        assert set(after) == {"primary"}, after  # read-your-writes: the primary, for the write window
        assert {_who(other) for _ in range(6)} == REPLICAS  # no write in that session: the replicas
        with writer.cursor() as cur:
            cur.execute("SELECT note FROM t_log")  # the write itself is on the primary (and replicated)
            assert cur.fetchall() == (("written",),)
    finally:
        writer.close()
        other.close()
    assert _on_the_loop(proxy) >= READS  # the primary's reads went from the loop as well


@pytest.mark.parametrize("client", ["text", "prepared"])
def test_a_replica_killed_under_loop_reads_fails_no_read(proxy: ProxyProcess, replication: Replication,  # noqa: F811
                                                          client: str) -> None:
    """SIGKILL of a replica whose connections the loop holds (pooled and its own): no read fails; they go to
    the other replica (or the primary) while it is out, and it serves again once it is back. ``text``:
    PyMySQL's point selects take the hot path (the gate hands a failed one back to mimic's path);
    ``prepared``: mysql-connector's C client sends query attributes, so its executes are sent from the
    loop by mimic's path (``_start_sent``), which reruns a failed one on a worker."""
    if client == "text":
        conn = _session(proxy)
        read = _who
    else:
        require_module("mysql.connector", "prepared reads through the proxy")
        from mysql import connector

        conn = connector.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD,
                                 database="logic_db", ssl_disabled=True, autocommit=True)  # fmt: skip
        cur = conn.cursor(prepared=True)

        def read(_: Any, key: int = 1) -> str:
            cur.execute("SELECT who FROM t_who WHERE id = ?", (key,))
            return str(cur.fetchall()[0][0])

    try:
        assert {read(conn, 1 + n % 2) for n in range(READS)} == REPLICAS  # both replicas' connections are open
        replication.kill(0)
        try:
            after = [read(conn, 1 + n % 2) for n in range(READS)]
        finally:
            replication.restart(0)
        assert "replica0" not in after and set(after) <= {"replica1", "primary"}, after
        assert "replica ds_0.replica[0] of data source 'ds_0' is out of reads" in proxy.stderr
    finally:
        conn.close()
