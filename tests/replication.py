"""Real MariaDB replication for the read/write splitting tests (no tests here).

One private primary and two replicas, each a :class:`PrivateMariaDB` of its own
(own datadir, free port) started from the installed ``mariadbd`` with
``--log-bin --binlog-format=ROW --server-id=N``; the replicas follow the primary
by GTID (``CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos``). The servers run
with ``--skip-grant-tables`` like every private server of the suite: with no
grant tables the primary accepts the replicas' ``root`` login without a
replication user (MariaDB's own test suite replicates as ``root`` the same
way), and nothing here replicates a GRANT, which a replica without grant tables
could not apply.

Lag is made for real (``STOP SLAVE SQL_THREAD`` while the primary takes
writes), and failures by SIGKILL of a replica's process; :meth:`Replication.restart`
brings a killed replica back, and it resumes from its GTID position.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from test_execute_support import PrivateMariaDB

__all__ = ["Replication", "replication"]

REPLICAS = 2


def _server_args(server_id: int) -> tuple[str, ...]:
    return (f"--server-id={server_id}", "--log-bin=binlog", "--binlog-format=ROW", "--log-slave-updates",
            "--skip-name-resolve")  # fmt: skip


class Replication:
    """A primary and :data:`REPLICAS` replicas replicating by GTID."""

    def __init__(self, base: Path) -> None:
        self.primary = PrivateMariaDB(base / "primary", _server_args(1))
        self.replicas = [PrivateMariaDB(base / f"replica{i}", _server_args(i + 2)) for i in range(REPLICAS)]

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        self.primary.start()
        for replica in self.replicas:
            replica.start()
            self._follow(replica)
        self.wait_replicated()

    def _follow(self, replica: PrivateMariaDB) -> None:
        self.sql(replica, "STOP SLAVE", "RESET SLAVE ALL",
                 f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={self.primary.port}, MASTER_USER='root', "
                 "MASTER_PASSWORD='', MASTER_CONNECT_RETRY=1, MASTER_USE_GTID=slave_pos",
                 "START SLAVE")  # fmt: skip

    def stop(self) -> None:
        """SIGKILL every server this fixture started (by its own process handle)."""
        for server in (*self.replicas, self.primary):
            server.kill()

    def kill(self, index: int) -> None:
        """SIGKILL replica ``index``: it vanishes mid-statement, its sockets reset."""
        self.replicas[index].kill()

    def restart(self, index: int) -> None:
        """Start a killed replica again; it reconnects to the primary and catches up."""
        replica = self.replicas[index]
        if replica.proc is None:
            replica.start()
            self.sql(replica, "START SLAVE")  # a no-op when the server started it from master.info
        self.start_sql(index)
        self.wait_replicated()

    # -- lag ---------------------------------------------------------------------------

    def stop_sql(self, index: int) -> None:
        """Stop applying on replica ``index``: it keeps receiving events and falls behind."""
        self.sql(self.replicas[index], "STOP SLAVE SQL_THREAD")

    def delay(self, index: int, seconds: int) -> None:
        """Replica ``index`` applies each event ``seconds`` after the primary wrote it (0: at once)."""
        self.sql(self.replicas[index], "STOP SLAVE", f"CHANGE MASTER TO MASTER_DELAY={seconds}", "START SLAVE")

    def start_sql(self, index: int) -> None:
        self.sql(self.replicas[index], "START SLAVE SQL_THREAD")

    def wait_replicated(self, timeout: float = 30.0) -> None:
        """Until every running replica has applied everything the primary has written."""
        target = self.scalar(self.primary, "SELECT @@gtid_binlog_pos")
        end = time.monotonic() + timeout
        for replica in self.replicas:
            if replica.proc is None:
                continue
            left = max(0.1, end - time.monotonic())
            got = self.scalar(replica, f"SELECT MASTER_GTID_WAIT('{target}', {left:.1f})")
            if got != 0:
                raise AssertionError(f"replica on port {replica.port} did not reach {target!r}: {self.status(replica)}")

    # -- SQL behind ddm-core's back --------------------------------------------------------

    @staticmethod
    def sql(server: PrivateMariaDB, *statements: str) -> None:
        conn = server.raw()
        try:
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
        finally:
            conn.close()

    @staticmethod
    def scalar(server: PrivateMariaDB, query: str) -> Any:
        conn = server.raw()
        try:
            with conn.cursor() as cur:
                cur.execute(query)
                row = cur.fetchone()
                return None if row is None else row[0]
        finally:
            conn.close()

    @staticmethod
    def status(server: PrivateMariaDB) -> dict[str, Any]:
        import pymysql.cursors

        conn = server.raw()
        try:
            with conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute("SHOW SLAVE STATUS")
                return dict(cur.fetchone() or {})
        finally:
            conn.close()

    def endpoints(self, database: str) -> dict[str, Any]:
        """A native data-source entry: the primary plus both replicas, for ``database``."""
        return {
            "url": f"mysql://127.0.0.1:{self.primary.port}/{database}", "username": "root", "password": "",
            "replicas": [{"url": f"mysql://127.0.0.1:{r.port}/{database}"} for r in self.replicas],
        }  # fmt: skip


@pytest.fixture(scope="session")
def replication(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replication]:
    """One primary + two replicas for the whole session; killed at the end."""
    setup = Replication(tmp_path_factory.mktemp("replication"))
    try:
        setup.start()
        yield setup
    finally:
        setup.stop()
