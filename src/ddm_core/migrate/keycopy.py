"""Catch-up's applier: the keys a binlog pass saw change, copied from their source row as it is now.

A binlog row image is the row as one change left it. While the application
dual-writes, a newer version of that row may reach the new location after a
pass read the image and before it applies it, and that write's own binlog
event may lie beyond the pass: applying the image would set the row back (a
deleted row would come back). So images only say *which keys changed* and
which targets their rows were assigned to; when a pass applies, each key's
current row is read from its source table — the authority while every write
goes there first — and upserted at the target its shard key gives now, or
deleted at the targets it was assigned to if the source no longer has it
(docs/migration.md#ordering-copy-by-key).

The read is ``SELECT ... FOR UPDATE`` in a REPEATABLE READ transaction on the
source, which locks the rows and the gaps of keys that are absent, held until
the target's writes are committed. An application write of one of those keys
waits at the source until then, and its dual write (which follows its source
commit) lands after the copy: an apply can never leave the new location older
than the old one. While it holds those locks the copy waits at most
``TARGET_LOCK_WAIT_S`` for a row lock at a target, which breaks the one wait
cycle possible across two servers (an application transaction holding the
target row of an earlier dual write and waiting for a locked source row); a
deadlock or lock wait timeout rolls the chunk back and it is tried again.
"""

from __future__ import annotations

import random
import time
from typing import Any, Sequence

from ddm_core.errors import DdmError, MigrationError
from ddm_core.metadata.model import ShardingConfig
from ddm_core.migrate.backfill import ScanCopier
from ddm_core.migrate.connections import Connections
from ddm_core.migrate.tables import quote

__all__ = ["Applier", "CHUNK_KEYS", "TARGET_LOCK_WAIT_S"]

#: Keys read, locked and written per source transaction.
CHUNK_KEYS = 500
#: Seconds a copy holding source row locks waits for a row lock at a target.
TARGET_LOCK_WAIT_S = 2
#: Tries of one chunk that met a deadlock or a lock wait timeout.
ATTEMPTS = 8
#: MySQL / MariaDB errors of a lock conflict: lock wait timeout, deadlock.
LOCK_CONFLICTS = frozenset({1205, 1213})

Key = tuple[Any, ...]


class Applier:
    """Changed keys of the scans' source tables, copied from the source by key when flushed (module docs)."""

    def __init__(self, config: ShardingConfig, conns: Connections, copiers: Sequence[ScanCopier]) -> None:
        self.conns = conns
        self.copiers: dict[tuple[str, str], ScanCopier] = {}
        for copier in copiers:
            database = config.data_sources[copier.scan.source].primary.database or ""
            self.copiers[(database.lower(), copier.scan.physical.lower())] = copier
        # copier id -> key -> the target indexes its row images were assigned to
        self.pending: dict[int, dict[Key, set[int]]] = {}
        self._ids = {id(c): c for c in self.copiers.values()}
        self.applied = 0
        # Per position name: where this applier's passes got to (applied), and when it was last recorded.
        self.reached: dict[str, tuple[str, int]] = {}
        self.recorded: dict[str, float] = {}

    def copier_of(self, schema: str, table: str) -> ScanCopier | None:
        return self.copiers.get((schema.lower(), table.lower()))

    def add(self, copier: ScanCopier, kind: str, rows: Sequence[dict[str, Any]]) -> None:
        """Note the keys of one row event (``write``, ``update`` or ``delete``) and where their images go.

        An update names its key's targets before and after (a changed shard key
        leaves the row's old target, where the copy deletes it).
        """
        parts = ("before_values", "after_values") if kind == "update" else ("values",)
        images = [_row(copier, r[part]) for r in rows for part in parts]
        if not images:
            return
        where = copier.assign(images)  # the compiled batch path: one call for the event's rows
        n = len(copier.key)
        keys = self.pending.setdefault(id(copier), {})
        every = range(len(copier.scan.targets))
        for image, t in zip(images, where.tolist()):
            if copier.every_target or t >= 0:  # rows of slots that do not move are not copied
                keys.setdefault(tuple(image[:n]), set()).update(every if copier.every_target else (t,))

    def __len__(self) -> int:
        return sum(len(keys) for keys in self.pending.values())

    def flush(self) -> int:
        """Copy every noted key from its source row now, ``CHUNK_KEYS`` per locked chunk. Returns how many."""
        pending, self.pending = self.pending, {}
        done = 0
        for ident, keys in pending.items():
            copier, items = self._ids[ident], list(keys.items())
            for start in range(0, len(items), CHUNK_KEYS):
                done += _copy_chunk(self.conns, copier, dict(items[start:start + CHUNK_KEYS]))
        self.applied += done
        return done


def _copy_chunk(conns: Connections, copier: ScanCopier, keys: dict[Key, set[int]]) -> int:
    """Copy ``keys`` under the source's row locks, trying again after a lock conflict."""
    attempt = 0
    while True:
        try:
            _copy_locked(conns, copier, keys)
            return len(keys)
        except MigrationError as exc:
            attempt += 1
            if not _lock_conflict(exc) or attempt >= ATTEMPTS:
                raise
        time.sleep(random.uniform(0.5, 1.0) * 0.02 * 2 ** attempt)  # jittered: the other side gets its turn


def _copy_locked(conns: Connections, copier: ScanCopier, keys: dict[Key, set[int]]) -> None:
    source = copier.scan.source
    conns.query(source, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # gap locks for absent keys
    conns.query(source, "START TRANSACTION")
    try:
        columns = ", ".join(quote(conns, source, c) for c in copier.all_columns)
        table = quote(conns, source, copier.scan.physical)
        where = _keys_in(conns, source, copier.key, len(keys))
        rows = conns.query(source, f"SELECT {columns} FROM {table} WHERE {where} FOR UPDATE",
                           [v for k in keys for v in k])
        for i, (deletes, upserts) in _writes(copier, keys, rows).items():
            _write_target(conns, copier, i, deletes, upserts)
        conns.query(source, "COMMIT")
    except BaseException:
        _quietly(conns, source, "ROLLBACK")
        raise


def _writes(copier: ScanCopier, keys: dict[Key, set[int]], rows: list[tuple[Any, ...]]
            ) -> dict[int, tuple[list[Key], list[tuple[Any, ...]]]]:
    """Per target index: keys to delete there, rows to upsert there.

    A row goes where its shard key assigns it now; a key is deleted at every
    target its images were assigned to that does not get its row now.
    """
    n = len(copier.key)
    out: dict[int, tuple[list[Key], list[tuple[Any, ...]]]] = {}
    placed: dict[Key, set[int]] = {}
    every = range(len(copier.scan.targets))
    for row, t in zip(rows, copier.assign(rows).tolist() if rows else []):
        for i in (every if copier.every_target else ([t] if t >= 0 else [])):
            out.setdefault(i, ([], []))[1].append(row)
            placed.setdefault(tuple(row[:n]), set()).add(i)
    for key, targets in keys.items():
        for i in sorted(targets - placed.get(key, set())):
            out.setdefault(i, ([], []))[0].append(key)
    return out


def _write_target(conns: Connections, copier: ScanCopier, i: int, deletes: list[Key],
                  upserts: list[tuple[Any, ...]]) -> None:
    """One target's deletes and upserts (one transaction when both), with a short row lock wait."""
    target = copier.scan.targets[i]
    ds = target.data_source
    both = bool(deletes) and bool(upserts)  # a key both deleted and upserted: readers never see it missing
    conns.query(ds, f"SET SESSION innodb_lock_wait_timeout = {TARGET_LOCK_WAIT_S}")
    try:
        if both:
            conns.query(ds, "START TRANSACTION")
        table = quote(conns, ds, target.table)
        for start in range(0, len(deletes), CHUNK_KEYS):
            part = deletes[start:start + CHUNK_KEYS]
            conns.query(ds, f"DELETE FROM {table} WHERE {_keys_in(conns, ds, copier.key, len(part))}",
                        [v for k in part for v in k])
        if upserts:
            conns.execute_many(ds, copier.upserts[i], upserts)
        if both:
            conns.query(ds, "COMMIT")
    except BaseException:
        if both:
            _quietly(conns, ds, "ROLLBACK")
        raise
    finally:
        _quietly(conns, ds, "SET SESSION innodb_lock_wait_timeout = DEFAULT")


def _keys_in(conns: Connections, ds: str, key: Sequence[str], count: int) -> str:
    """``key IN (%s, ...)`` (``(a, b) IN ((%s, %s), ...)`` for a composite key) with ``count`` entries."""
    cols = ", ".join(quote(conns, ds, k) for k in key)
    if len(key) == 1:
        return f"{cols} IN ({', '.join(['%s'] * count)})"
    one = "(" + ", ".join(["%s"] * len(key)) + ")"
    return f"({cols}) IN ({', '.join([one] * count)})"


def _quietly(conns: Connections, ds: str, sql: str) -> None:
    try:
        conns.query(ds, sql)
    except DdmError:  # cleaning up after a failure that is being raised: it must not hide that one
        pass


def _lock_conflict(exc: MigrationError) -> bool:
    args: tuple[Any, ...] = tuple(getattr(exc.__cause__, "args", ()))
    return bool(args) and args[0] in LOCK_CONFLICTS


def _row(copier: ScanCopier, values: dict[str, Any]) -> tuple[Any, ...]:
    """A binlog row image in the copier's column order (by name; by position without row metadata)."""
    lower = {str(k).lower(): v for k, v in values.items()}
    names = [c.lower() for c in copier.all_columns]
    if all(n in lower for n in names):
        return tuple(lower[n] for n in names)
    by_position = list(values.values())
    if len(by_position) != len(names):
        raise MigrationError(
            f"binlog row of {copier.scan.source}.{copier.scan.physical} has {len(by_position)} columns, the table "
            f"{len(names)}: set binlog_row_metadata=FULL on the source server", table=copier.scan.table)
    order = [c.lower() for c in copier.table_order]
    return tuple(by_position[order.index(n)] for n in names)
