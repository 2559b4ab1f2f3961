"""The lease table and its statements: one row per (namespace, worker id), times from the database's clock.

The database's ``NOW(6)`` decides who holds a worker id, so two hosts whose
clocks disagree still agree on whether a lease has expired. ``last_ms`` is the
holder's own clock: the newest id timestamp it issued, written with every
renewal and at release, so the next holder can tell when its clock is behind
(docs/worker-leases.md).
"""

from __future__ import annotations

import enum

__all__ = ["LEASE_TABLE", "LeaseState", "CREATE", "SELECT_ALL", "TAKE_OVER", "INSERT", "READ_TAKEN", "RENEW",
           "RELEASE"]

LEASE_TABLE = "ddm_worker_lease"


class LeaseState(str, enum.Enum):
    """The ``state`` column; a ``held`` row whose ``expires_at`` has passed is free too."""

    HELD = "held"
    RELEASED = "released"


CREATE = f"""CREATE TABLE IF NOT EXISTS {LEASE_TABLE} (
  namespace VARCHAR(64) NOT NULL,
  worker_id INT NOT NULL,
  holder VARCHAR(200) NOT NULL,
  state VARCHAR(8) NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  renewed_at DATETIME(6) NOT NULL,
  last_ms BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (namespace, worker_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""

SELECT_ALL = (
    f"SELECT worker_id, state = 'held' AND expires_at > NOW(6) FROM {LEASE_TABLE} WHERE namespace = %s"
)
# Free means released, or held with an expiry the database clock has passed.
TAKE_OVER = (
    f"UPDATE {LEASE_TABLE} SET holder = %s, state = 'held', renewed_at = NOW(6), "
    "expires_at = NOW(6) + INTERVAL %s MICROSECOND "
    "WHERE namespace = %s AND worker_id = %s AND (state <> 'held' OR expires_at <= NOW(6))"
)
INSERT = (
    f"INSERT INTO {LEASE_TABLE} (namespace, worker_id, holder, state, renewed_at, expires_at, last_ms) "
    "VALUES (%s, %s, %s, 'held', NOW(6), NOW(6) + INTERVAL %s MICROSECOND, 0)"
)
READ_TAKEN = f"SELECT last_ms FROM {LEASE_TABLE} WHERE namespace = %s AND worker_id = %s AND holder = %s"
# Renewal succeeds only for the holder of a lease that has not expired: once lost, always lost.
RENEW = (
    f"UPDATE {LEASE_TABLE} SET renewed_at = NOW(6), expires_at = NOW(6) + INTERVAL %s MICROSECOND, "
    "last_ms = GREATEST(last_ms, %s) "
    "WHERE namespace = %s AND worker_id = %s AND holder = %s AND state = 'held' AND expires_at > NOW(6)"
)
RELEASE = (
    f"UPDATE {LEASE_TABLE} SET state = 'released', expires_at = NOW(6), last_ms = GREATEST(last_ms, %s) "
    "WHERE namespace = %s AND worker_id = %s AND holder = %s AND state = 'held'"
)
