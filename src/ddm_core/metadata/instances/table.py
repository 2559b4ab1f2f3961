"""Instance records as rows of a ``ddm_instances`` table next to the ``ddm_config`` table.

A row's deadline, ``expires_at``, is computed by the database (``NOW(6) +
INTERVAL ttl``) and compared with the database's clock too, so the hosts'
clocks never decide whether an instance is alive. A row refreshed by
nobody is simply no longer read; rows that expired long ago are deleted when
an instance registers.
"""

from __future__ import annotations

from typing import Any, Callable

from ddm_core.errors import SourceUnavailableError
from ddm_core.metadata.instances.record import InstanceRecord
from ddm_core.metadata.sources.kept_connection import KeptConnection
from ddm_core.metadata.sources.table import TableSource

__all__ = ["TableInstances", "INSTANCES_TABLE"]

INSTANCES_TABLE = "ddm_instances"

_CREATE = f"""CREATE TABLE IF NOT EXISTS `{INSTANCES_TABLE}` (
  instance_id CHAR(32) CHARACTER SET ascii NOT NULL,
  role VARCHAR(16) CHARACTER SET ascii NOT NULL,
  host VARCHAR(255) NOT NULL,
  pid INT UNSIGNED NOT NULL,
  started_at DOUBLE NOT NULL,
  version BIGINT UNSIGNED NULL,
  digest CHAR(64) CHARACTER SET ascii NOT NULL,
  heartbeat_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  expires_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (instance_id),
  KEY (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""

_KEEP = f"""INSERT INTO `{INSTANCES_TABLE}`
  (instance_id, role, host, pid, started_at, version, digest, heartbeat_at, expires_at)
  VALUES (%s, %s, %s, %s, %s, %s, %s, NOW(6), NOW(6) + INTERVAL %s MICROSECOND)
  ON DUPLICATE KEY UPDATE version = VALUES(version), digest = VALUES(digest),
    heartbeat_at = VALUES(heartbeat_at), expires_at = VALUES(expires_at)"""

_LIVE = f"""SELECT instance_id, role, host, pid, started_at, version, digest,
  TIMESTAMPDIFF(MICROSECOND, heartbeat_at, NOW(6)) FROM `{INSTANCES_TABLE}`
  WHERE expires_at > NOW(6) ORDER BY started_at"""

# Rows an hour past their deadline: their instances are gone for good.
_PURGE = f"DELETE FROM `{INSTANCES_TABLE}` WHERE expires_at < NOW(6) - INTERVAL 1 HOUR"


class TableInstances:
    """The registry in ``ddm_instances`` on the database of ``source`` (over a connection of its own)."""

    def __init__(self, source: TableSource) -> None:
        self.source = source
        self._kept = KeptConnection(source.connect)
        self._created = False

    @property
    def where(self) -> str:
        return f"instance table {INSTANCES_TABLE!r}" + (f" on {self.source.name}" if self.source.name != self.source.table
                                                       else "")  # fmt: skip

    def _run(self, what: str, work: Callable[[Any], Any]) -> Any:
        def with_table(cur: Any) -> Any:
            if not self._created:
                cur.execute(_CREATE)
                self._created = True
            return work(cur)

        return self._kept.run(with_table, lambda exc: SourceUnavailableError(
            f"{self.where}: cannot {what}: {exc}", source=self.source.name, table=INSTANCES_TABLE))  # fmt: skip

    def keep(self, record: InstanceRecord, ttl: float) -> None:
        first = not self._created

        def upsert(cur: Any) -> None:
            if first:
                cur.execute(_PURGE)
            cur.execute(_KEEP, (record.instance_id, record.role, record.host[:255], record.pid, record.started_at,
                                record.version, record.digest, int(ttl * 1_000_000)))  # fmt: skip

        self._run("register this instance", upsert)

    def remove(self, record: InstanceRecord) -> None:
        self._run("remove this instance", lambda cur: cur.execute(
            f"DELETE FROM `{INSTANCES_TABLE}` WHERE instance_id = %s", (record.instance_id,)))  # fmt: skip

    def live(self) -> list[InstanceRecord]:
        def read(cur: Any) -> list[InstanceRecord]:
            cur.execute(_LIVE)
            return [InstanceRecord(str(r[0]), str(r[1]), str(r[2]), int(r[3]), float(r[4]),
                                   None if r[5] is None else int(r[5]), str(r[6]), max(0, int(r[7])) / 1_000_000)
                    for r in cur.fetchall()]  # fmt: skip

        rows: list[InstanceRecord] = self._run("read the instances", read)
        return rows

    def newest_version(self) -> int | None:
        return self.source.latest_version() or None

    def close(self) -> None:
        self._kept.close()
