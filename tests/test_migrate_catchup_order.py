"""Catch-up racing the application's dual writes, on a private mariadbd (--log-bin, ROW, full row metadata).

During dual write the application writes a moving row at its old location
first, then the same row at the new one. A binlog pass reads changes, then
applies them; a dual write committed in between (or while the pass copies
that very row) is newer than what the pass read, and its own binlog event may
lie beyond the pass. Each race below is driven to its exact interleaving
(an applier that runs the application's write just before it applies, a
connection wrapper that runs it just before the first write to a target
table) and the new location must then hold the old location's row, not an
older one: an updated row is not set back, a deleted row does not come back, a
row inserted again is not deleted.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from ddm_core import load_config
from ddm_core.execute import Executor
from ddm_core.hashing import hash64, slot_of
from ddm_core.metadata.migration import migration_document
from ddm_core.migrate import Connections, connector
from ddm_core.migrate.backfill import ScanCopier, backfill, backfill_scans
from ddm_core.migrate.catchup import Applier, catch_up, replay_passes
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import plan_migration
from ddm_core.migrate.state import MigrationLog
from ddm_core.slots import SlotMap
from migrate_live_support import BINLOG_ARGS
from migrate_support import TABLES_PER_SOURCE
from race_support import WRITES, RaceAtFirstWrite, RacingWrite, expected_row, write_row
from services import fresh_mariadb_databases, require_module
from test_execute_support import PrivateMariaDB, running_mariadb
from test_migrate_backfill_support import rows_of, setup_migration

require_module("pymysqlreplication", "the catch-up ordering tests")

COLUMNS = "order_id, user_id, amount, note, slow"

@pytest.fixture(scope="module")
def binlog_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateMariaDB]:
    with running_mariadb(tmp_path_factory.mktemp("order"), BINLOG_ARGS) as server:
        yield server


class _Migration:
    """4 -> 8 with 400 rows, backfilled and caught up; an application dual-writing; one moving row."""

    def __init__(self, names: list[str], port: int) -> None:
        self.names, self.port = names, port
        self.old, self.new, old_doc, new_doc = setup_migration(names, 400, port=port)
        self.plan = plan_migration(self.old, self.new, count="none", rate=1.0)
        self.conns = Connections(self.old, self.new)
        self.log = MigrationLog(connector(self.old, "ds_0"), "grow")
        backfill(self.old, self.new, self.plan, self.conns, self.log)
        assert catch_up(self.old, self.new, self.plan, self.conns, self.log).completed
        self.start = next(e.detail["binlog"] for e in self.log.events()
                          if e.event == "enter" and e.phase is Phase.BACKFILL)
        dual = migration_document(old_doc, new_doc, name="grow", phase="dual_write")
        self.app = Executor(load_config(dual), timeout=60.0, load_schema=False)
        self.order_id, self.user_id = self._moving_row()

    def _moving_row(self) -> tuple[int, int]:
        """A row whose slot moves (its old and new data sources differ)."""
        even = SlotMap.even(4, 10)
        grown, _ = even.moved_to(8)
        for order_id, user_id in rows_of(self.port, self.names[0], "SELECT order_id, user_id FROM t_order_0_0"):
            if grown.node_of(slot_of(int(user_id), 10)) != 0:
                return int(order_id), int(user_id)
        raise AssertionError("no moving row on ds_0")

    def location(self, where: str) -> tuple[str, str]:
        """The database and physical table of the moving row at its ``old`` or ``new`` location."""
        even = SlotMap.even(4, 10)
        d = (even if where == "old" else even.moved_to(8)[0]).node_of(slot_of(self.user_id, 10))
        return self.names[d], f"t_order_{d}_{hash64(self.user_id) % TABLES_PER_SOURCE}"

    def row(self, where: str) -> tuple[Any, ...] | None:
        """The moving row read behind ddm-core's back at its ``old`` or ``new`` location (``None``: no row)."""
        db, table = self.location(where)
        rows = rows_of(self.port, db, f"SELECT {COLUMNS} FROM {table} WHERE order_id = %s", (self.order_id,))
        return tuple(rows[0]) if rows else None

    def write(self, kind: str, amount: int | None) -> None:
        """The application's write of the moving row (through the executor: old location, then new)."""
        write_row(self.app, kind, amount, self.user_id, self.order_id)

    def applier(self, conns: Connections, cls: type[Applier] = Applier, **kw: Any) -> Applier:
        copiers = [ScanCopier(scan, self.old, conns) for scan in backfill_scans(self.old, self.new, self.plan)]
        return cls(self.old, conns, copiers, **kw)

    def one_pass(self, applier: Applier) -> None:
        result = replay_passes(self.old, applier, self.log, self.start, phase=Phase.CATCH_UP, max_passes=1)
        assert result.passes == 1 and result.applied >= 1, result

    def close(self) -> None:
        self.app.close()
        self.log.close()
        self.conns.close()


@pytest.fixture()
def migration(binlog_server: PrivateMariaDB) -> Iterator[_Migration]:
    with fresh_mariadb_databases(8, connect=binlog_server.raw) as names:
        m = _Migration(names, binlog_server.port)
        try:
            yield m
        finally:
            m.close()


def _expected(m: _Migration, amount: int | None) -> tuple[Any, ...] | None:
    return expected_row(m.order_id, m.user_id, amount)


class _RaceBeforeApply(Applier):
    """An applier that runs ``race`` once when a pass has read its changes and is about to apply them."""

    def __init__(self, *args: Any, race: Callable[[], None]) -> None:
        super().__init__(*args)
        self.race: Callable[[], None] | None = race

    def flush(self) -> int:
        if len(self) and self.race is not None:
            race, self.race = self.race, None
            race()
        return super().flush()


@pytest.mark.parametrize("case", list(WRITES))
def test_a_dual_write_between_reading_the_binlog_and_applying_it_is_kept(migration: _Migration, case: str) -> None:
    m = migration
    (first, amount), racing, want = WRITES[case]
    m.write(first, amount)
    assert m.row("new") == m.row("old")  # the dual write reached the new location too
    applier = m.applier(m.conns, _RaceBeforeApply, race=lambda: m.write(*racing))
    m.one_pass(applier)
    assert m.row("old") == _expected(m, want)
    assert m.row("new") == m.row("old"), f"{case}: the pass applied an older version over the dual write"


@pytest.mark.parametrize("case", list(WRITES))
def test_a_dual_write_racing_the_copy_of_its_row_waits_for_it(migration: _Migration, case: str) -> None:
    """The application writes the row while the pass has read it and not yet written it at the new location.

    The application's write runs in a thread; the pass goes on once that write has either finished or
    is waiting for a row lock (``INNODB_TRX``), so both orders the servers allow are taken as they come.
    """
    m = migration
    (first, amount), racing, want = WRITES[case]
    m.write(first, amount)
    race = RacingWrite(lambda: m.write(*racing), m.port)
    targets = [ds for ds in m.new.data_sources if ds not in m.old.data_sources]
    with RaceAtFirstWrite((m.old, m.new), targets, race) as conns:
        m.one_pass(m.applier(conns))
    assert race.join() == []
    assert m.row("old") == _expected(m, want)
    assert m.row("new") == m.row("old"), f"{case}: the pass wrote an older version over the dual write"
    assert race.waited is True  # the application's write waited for the pass's lock on the old location


def test_a_wait_cycle_across_two_servers_is_broken_by_the_copy(migration: _Migration,
                                                                binlog_server: PrivateMariaDB) -> None:
    """An application transaction holds the row at the new location (an earlier dual write, not committed)
    and then writes it at the old location, which the pass's copy has locked; the copy waits for the
    row at the new location. Across two servers no deadlock detector sees that cycle: here detection is
    turned off to make one server behave so. The copy gives up its wait after a short timeout, releases
    the old location's lock, and tries again once the application's transaction has committed.
    """
    m = migration
    m.write("update", 101)
    (old_db, old_table), (new_db, new_table) = m.location("old"), m.location("new")
    app = binlog_server.raw()
    detector = binlog_server.raw()
    try:
        with detector.cursor() as cur:
            cur.execute("SET GLOBAL innodb_deadlock_detect = OFF")
        with app.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 30")
            cur.execute("START TRANSACTION")
            cur.execute(f"UPDATE `{new_db}`.{new_table} SET amount = 404, note = 'v404' WHERE order_id = %s",
                        (m.order_id,))

        def write_old_and_commit() -> None:
            with app.cursor() as cur:
                cur.execute(f"UPDATE `{old_db}`.{old_table} SET amount = 404, note = 'v404' WHERE order_id = %s",
                            (m.order_id,))
                cur.execute("COMMIT")

        race = RacingWrite(write_old_and_commit, m.port)
        targets = [ds for ds in m.new.data_sources if ds not in m.old.data_sources]
        with RaceAtFirstWrite((m.old, m.new), targets, race) as conns:
            m.one_pass(m.applier(conns))
        assert race.join() == []
        assert race.waited is True  # the application's transaction waited for the copy's lock first
    finally:
        with detector.cursor() as cur:
            cur.execute("SET GLOBAL innodb_deadlock_detect = ON")
        detector.close()
        app.close()
    assert m.row("old") == _expected(m, 404)
    assert m.row("new") == m.row("old")
