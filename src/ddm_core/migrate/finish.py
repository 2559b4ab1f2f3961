"""The finish phase: the moved slots' rows deleted from their old physical tables, batch by batch.

After cutover the old location of a moved slot is stale: the router writes and
reads the slot at its new owner. Each source physical table of the backfill is
scanned once more in primary-key order (keyset batches); each batch is assigned
to slots on the compiled batch path (:meth:`~ddm_core.migrate.backfill.ScanCopier.assign`,
i.e. ``hashing.slots_of`` on a numpy array) and the rows of moved slots are

1. optionally copied to an archive table next to the old one
   (``<table><suffix>``, created ``LIKE`` it; ``INSERT ... ON DUPLICATE KEY
   UPDATE`` so a replayed batch changes nothing), then
2. deleted by primary key, and
3. the batch's last key recorded as the scan's high-water mark (a ``scan``
   event ``finish:<scan>``), so a killed finish resumes after it. A replayed
   batch deletes nothing more: its rows are gone.

Broadcast tables keep their rows on the old data sources (they still belong there).
"""

from __future__ import annotations

import re
import time
from typing import Callable

from ddm_core.errors import MigrationError
from ddm_core.metadata.model import ShardingConfig
from ddm_core.migrate.backfill import ScanCopier, Throttle, backfill_scans
from ddm_core.migrate.connections import Connections
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import MigrationPlan
from ddm_core.migrate.state import MigrationLog
from ddm_core.migrate.tables import keyset_chunks, quote, table_exists

__all__ = ["finish_scans", "archive_table"]

_SUFFIX = re.compile(r"[A-Za-z0-9_$]{1,32}")


def archive_table(physical: str, suffix: str) -> str:
    """The archive table of ``physical`` (``t_order_0_0`` + ``_archive``)."""
    if not _SUFFIX.fullmatch(suffix):
        raise MigrationError(f"archive suffix {suffix!r} must be 1-32 letters, digits, '_' or '$'")
    return physical + suffix


def finish_scans(
    old: ShardingConfig,
    new: ShardingConfig,
    plan: MigrationPlan,
    conns: Connections,
    log: MigrationLog,
    *,
    batch: int,
    archive: str | None = None,
    max_rows_per_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    echo: Callable[[str], None] | None = None,
) -> int:
    """Delete (and archive) the moved rows of every source physical table; returns rows deleted in total.

    The migration must be in ``finish``; completed scans are skipped, the others resume after
    their recorded high-water mark.
    """
    throttle = Throttle(max_rows_per_s, clock=clock, sleep=sleep)
    total = 0
    for scan in backfill_scans(old, new, plan):
        if scan.targets[0].slots is None:
            continue  # a broadcast copy: the old data sources keep their rows
        name = f"finish:{scan.name}"
        was = log.state().scans.get(name)
        if was is not None and was.done:
            total += was.rows_copied
            continue
        copier = ScanCopier(scan, old, conns)
        src = scan.source
        high_water = was.high_water if was is not None else None
        deleted = was.rows_copied if was is not None else 0
        upsert = None
        if archive is not None:
            into = archive_table(scan.physical, archive)
            if not table_exists(conns, src, into):
                conns.query(src, f"CREATE TABLE IF NOT EXISTS {quote(conns, src, into)} "
                                 f"LIKE {quote(conns, src, scan.physical)}")
            names = ", ".join(quote(conns, src, c) for c in copier.all_columns)
            update = ", ".join(f"{quote(conns, src, c)} = VALUES({quote(conns, src, c)})" for c in copier.columns)
            upsert = (f"INSERT INTO {quote(conns, src, into)} ({names}) VALUES "
                      f"({', '.join(['%s'] * len(copier.all_columns))})"
                      + (f" ON DUPLICATE KEY UPDATE {update}" if update else ""))
        n = len(copier.key)
        key_sql = ", ".join(quote(conns, src, k) for k in copier.key)
        tup = f"({key_sql})" if n > 1 else key_sql
        mark = f"({', '.join(['%s'] * n)})" if n > 1 else "%s"
        for rows in keyset_chunks(conns, src, scan.physical, copier.columns, copier.key, batch, after=high_water):
            where = copier.assign(rows)
            moved = [rows[i] for i in (where >= 0).nonzero()[0].tolist()]
            if moved:
                if upsert is not None:
                    conns.execute_many(src, upsert, moved)
                for start in range(0, len(moved), 500):
                    part = moved[start : start + 500]
                    conns.query(src, f"DELETE FROM {quote(conns, src, scan.physical)} WHERE {tup} IN "
                                     f"({', '.join([mark] * len(part))})", [v for r in part for v in r[:n]])
            deleted += len(moved)
            high_water = tuple(rows[-1][:n])
            log.record_scan(name, high_water, deleted, "", phase=Phase.FINISH)
            throttle.after(len(rows))
        log.record_scan(name, high_water, deleted, "", done=True, phase=Phase.FINISH)
        if echo is not None:
            echo(f"finish: {src}.{scan.physical}: {deleted:,} rows of moved slots deleted")
        total += deleted
    return total
