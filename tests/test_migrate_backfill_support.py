"""Helpers of the backfill and catch-up tests (no tests here): a 4 -> 8 migration set up, and its reference.

The reference is independent of the backfill: the rows of the old physical
tables read directly with PyMySQL, each placed by the scalar slot hash
(``hashing.slot_of``) and the grown slot map of the test layout.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from typing import Any, Callable

from ddm_core import load_config
from ddm_core.execute import Executor
from ddm_core.hashing import slot_of
from ddm_core.migrate import Connections, connector
from ddm_core.migrate.checker import Checker, migration_sides
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import plan_migration
from ddm_core.migrate.prepare import prepare
from ddm_core.migrate.state import MigrationLog
from ddm_core.slots import SlotMap
from migrate_support import ORDER_DDL, TABLES_PER_SOURCE, reshard_docs
from services import mariadb_rows

__all__ = ["setup_migration", "reference", "count_against_reference", "checker_differences", "rows_of"]


def rows_of(port: int, database: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` in ``database`` on the server at ``port``, read behind ddm-core's back."""
    return mariadb_rows(database, sql, params, port=port)


def setup_migration(names: list[str], rows: int, name: str = "grow", *, port: int = 3306
                    ) -> tuple[Any, Any, dict[str, Any], dict[str, Any]]:
    """Old tables filled through the executor, target tables prepared, the migration at dual write completed."""
    old_doc, new_doc = reshard_docs(names, port=port)
    old, new = load_config(old_doc), load_config(new_doc)
    with Executor(old, timeout=20.0, load_schema=False) as ex:
        ex.execute(ORDER_DDL).close()
        ex.execute("CREATE TABLE t_dict (id INT NOT NULL PRIMARY KEY, name VARCHAR(40))").close()
        ex.execute("INSERT INTO t_dict VALUES " + ", ".join(f"({i}, 'name {i}')" for i in range(1, 301))).close()
        rng = random.Random(11)
        for start in range(1, rows + 1, 1000):
            values = []
            for i in range(start, min(start + 1000, rows + 1)):
                note = "NULL" if i % 7 == 0 else ("''" if i % 11 == 0 else f"'note {i}'")
                values.append(f"({i}, {rng.randrange(1, 1 << 40)}, {i % 500}, {note})")
            ex.execute("INSERT INTO t_order (order_id, user_id, amount, note) VALUES " + ", ".join(values)).close()
    with Connections(old, new) as conns, MigrationLog(connector(old, "ds_0"), name) as log:
        log.create_table()
        plan = plan_migration(old, new, conns=conns, count="estimate", rate=1000.0)
        prepare(old, new, plan, conns, log)
        log.enter(Phase.DUAL_WRITE)
        log.complete(Phase.DUAL_WRITE)
    return old, new, old_doc, new_doc


def reference(names: list[str], port: int = 3306) -> dict[tuple[int, int], list[tuple[Any, ...]]]:
    """``(target database index, table index) -> rows`` the backfill must produce, from the source rows."""
    grown, _ = SlotMap.even(4, 10).moved_to(8)
    want: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
    for d in range(4):
        for t in range(TABLES_PER_SOURCE):
            for row in rows_of(port, names[d], f"SELECT order_id, user_id, amount, note, slow FROM t_order_{d}_{t}"):
                owner = grown.node_of(slot_of(int(row[1]), 10))
                if owner != d:
                    want.setdefault((owner, t), []).append(tuple(row))
    return want


def count_against_reference(names: list[str], port: int = 3306) -> dict[str, int]:
    """Lost, duplicated, differing and unexpected rows in the new tables against :func:`reference`."""
    want = reference(names, port)
    expected = {row[0]: (place, row) for place, rows in want.items() for row in rows}
    seen: dict[int, int] = {}
    lost = duplicated = differing = unexpected = 0
    for d in range(4, 8):
        for t in range(TABLES_PER_SOURCE):
            for row in rows_of(port, names[d], f"SELECT order_id, user_id, amount, note, slow FROM t_order_{d}_{t}"):
                key = row[0]
                seen[key] = seen.get(key, 0) + 1
                if seen[key] > 1:
                    duplicated += 1
                elif key not in expected or expected[key][0] != (d, t):
                    unexpected += 1
                elif expected[key][1] != tuple(row):
                    differing += 1
    lost = sum(1 for key in expected if key not in seen)
    # the broadcast table: every new data source has the old one's rows, no more
    dict_rows = sorted(rows_of(port, names[0], "SELECT id, name FROM t_dict"))
    for d in range(4, 8):
        got = sorted(rows_of(port, names[d], "SELECT id, name FROM t_dict"))
        lost += len(set(dict_rows) - set(got))
        unexpected += len(set(got) - set(dict_rows))
    return {"lost": lost, "duplicated": duplicated, "differing": differing, "unexpected": unexpected,
            "expected": len(expected)}


def checker_differences(old: Any, new: Any) -> int:
    with Connections(old, new) as conns:
        plan = plan_migration(old, new, count="none", rate=1.0)
        found = 0
        for _, a, b in migration_sides(old, new, plan, conns):
            report = Checker(a, b, chunk_rows=2000).check()
            found += report.found
        return found




def kill_and_restart(
    cmd: list[str],
    recorded: Callable[[], int],
    *,
    kills: int,
    seed: int,
    steps: tuple[int, int],
    pause: float,
    done: bytes,
    cwd: Any = None,
) -> list[int]:
    """Run ``cmd`` until it exits 0, SIGKILLing it ``kills`` times at random points.

    Each kill waits until ``recorded()`` (progress saved in the state table) has
    grown by ``steps`` (a random count in that range), then up to ``pause``
    seconds more, so kills land inside reads, writes and records alike.

    Returns:
        ``recorded()`` after each run (the test checks progress was made between kills).
    """
    rng = random.Random(seed)
    killed = 0
    marks: list[int] = []
    for _ in range(kills * 3 + 4):
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if killed < kills:
            goal = recorded() + rng.randint(*steps)
            while proc.poll() is None and recorded() < goal:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, pause))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                killed += 1
        out, err = proc.communicate(timeout=300)
        marks.append(recorded())
        if proc.returncode == 0:
            assert done in out, out
            break
        assert proc.returncode == -signal.SIGKILL, err.decode()
    assert killed == kills, marks
    return marks
