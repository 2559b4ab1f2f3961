"""Helpers of the tests that race an application write against a binlog pass's apply (no tests here).

* :class:`RaceAtFirstWrite` is the migration's :class:`Connections` with one
  injection point: a callback run once, just before the first ``INSERT`` or
  ``DELETE`` on one of the given data sources (where a pass writes what it read);
* :class:`RacingWrite` is that callback: the application's write in a thread,
  and the pass held until the write has either finished or is waiting for a row
  lock on the given server (``INNODB_TRX``), so the test takes whichever order
  the servers allow and says which one happened;
* :data:`WRITES`, :func:`write_row` and :func:`expected_row`: the application's
  writes of one ``t_order`` row the races are driven with.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable

from ddm_core.metadata.model import ShardingConfig
from ddm_core.migrate import Connections
from services import innodb_trx_fresh, mariadb_rows

__all__ = ["RaceAtFirstWrite", "RacingWrite", "WRITES", "write_row", "expected_row"]

# (the application's write the pass reads, the newer write racing the pass's apply, the amount expected after)
WRITES: dict[str, tuple[tuple[str, int | None], tuple[str, int | None], int | None]] = {
    "an update": (("update", 101), ("update", 202), 202),
    "a delete": (("update", 101), ("delete", None), None),
    "an insert after a delete": (("delete", None), ("insert", 303), 303),
}


def write_row(app: Any, kind: str, amount: int | None, user: int, order_id: int) -> None:
    """The application's ``update``, ``delete`` or ``insert`` of one ``t_order`` row through executor ``app``."""
    where = "WHERE user_id = ? AND order_id = ?"
    if kind == "update":
        sql, params = f"UPDATE t_order SET amount = ?, note = ? {where}", (amount, f"v{amount}", user, order_id)
    elif kind == "delete":
        sql, params = f"DELETE FROM t_order {where}", (user, order_id)
    else:
        sql, params = ("INSERT INTO t_order (order_id, user_id, amount, note) VALUES (?, ?, ?, ?)",
                       (order_id, user, amount, f"v{amount}"))
    app.execute(sql, params).close()


def expected_row(order_id: int, user: int, amount: int | None) -> tuple[Any, ...] | None:
    """The row :func:`write_row` leaves with ``amount`` (``None``: no row): order_id, user_id, amount, note, slow."""
    return None if amount is None else (order_id, user, amount, f"v{amount}", 0)


class RaceAtFirstWrite(Connections):
    """Connections that run ``race`` once, just before the first INSERT or DELETE on one of ``targets``."""

    def __init__(self, configs: Iterable[ShardingConfig], targets: Iterable[str], race: Callable[[], None]) -> None:
        super().__init__(*configs)
        self.targets = set(targets)
        self.race: Callable[[], None] | None = race

    def query(self, data_source: str, sql: str, params: Any = None, *, many: bool = False) -> list[tuple[Any, ...]]:
        if (self.race is not None and data_source in self.targets
                and sql.lstrip().upper().startswith(("INSERT", "DELETE"))):
            race, self.race = self.race, None
            race()
        return super().query(data_source, sql, params, many=many)


def _lock_waits(port: int) -> int:
    sql = "SELECT COUNT(*) FROM INNODB_TRX WHERE trx_state = 'LOCK WAIT'"
    innodb_trx_fresh(port)
    return int(mariadb_rows("information_schema", sql, port=port)[0][0])


class RacingWrite:
    """``write`` started in a thread when called; returns once it finished or waits for a lock on ``port``."""

    def __init__(self, write: Callable[[], None], port: int, *, timeout: float = 60.0) -> None:
        self.write, self.port, self.timeout = write, port, timeout
        self.done = threading.Event()
        self.errors: list[BaseException] = []
        #: ``True``: the write was waiting for a row lock when the pass went on; ``False``: it had finished.
        self.waited: bool | None = None
        #: The server's state once the write had run for ``_SLOW_S`` without finishing.
        self.snapshot: str | None = None

    def _run(self) -> None:
        try:
            self.write()
        except BaseException as exc:  # the test checks them after join()
            self.errors.append(exc)
        finally:
            self.done.set()

    def __call__(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()
        slow = threading.Timer(_SLOW_S, self._note_if_slow)  # for the report if the write then fails
        slow.daemon = True
        slow.start()
        deadline = time.monotonic() + self.timeout
        while not self.done.is_set() and _lock_waits(self.port) == 0:
            assert time.monotonic() < deadline, "the application's write neither finished nor waited for a lock"
            self.done.wait(0.01)  # polling a condition (_lock_waits spaces its reads), not a timed wait
        self.waited = not self.done.is_set()

    def _note_if_slow(self) -> None:
        if not self.done.is_set():
            self.snapshot = _server_state(self.port)

    def join(self) -> list[BaseException]:
        """Wait for the write to end; its errors (with what the server showed while it was slow, if it was)."""
        assert self.done.wait(self.timeout), "the application's write did not end"
        if self.errors and self.snapshot is not None:
            return [*self.errors, RuntimeError(f"the server while the write was slow: {self.snapshot}")]
        return self.errors


#: Seconds after which a write not yet finished has the server's state kept for a report.
_SLOW_S = 5.0


def _server_state(port: int) -> str:
    """The server's transactions, lock waits and sessions, as text for an assertion message."""
    parts = []
    innodb_trx_fresh(port)
    for sql in ("SELECT trx_id, trx_state, trx_mysql_thread_id, trx_query FROM INNODB_TRX",
                "SELECT * FROM INNODB_LOCK_WAITS",
                "SELECT id, command, time, state, info FROM PROCESSLIST WHERE command <> 'Daemon'"):
        try:
            parts.append(f"{sql}: {mariadb_rows('information_schema', sql, port=port)}")
        except Exception as exc:  # a report of a failure: it must not hide that failure
            parts.append(f"{sql}: {exc!r}")
    return "; ".join(parts)
