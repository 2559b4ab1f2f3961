"""Online resharding by slots (docs/migration.md): the phases, the checker, and the Migration that runs them.

* :mod:`~ddm_core.migrate.phases` — the phases, in order, and the transitions between them;
* :mod:`~ddm_core.migrate.state` — the ``ddm_migration`` table recording every transition;
* :mod:`~ddm_core.migrate.plan` — which slots move where, with rows, bytes and time;
* :mod:`~ddm_core.migrate.schema_check` — the schema consistency check (also for health checks);
* :mod:`~ddm_core.migrate.prepare` — the prepare phase: target tables created and checked;
* :mod:`~ddm_core.migrate.connections` — connections to data sources, the config table source;
* :mod:`~ddm_core.migrate.checker` — the consistency checker of two row sources (``ddm verify``);
* :mod:`~ddm_core.migrate.backfill` — the backfill phase: checked batches, resumable;
* :mod:`~ddm_core.migrate.catchup` — the catch-up phase from the binlog (:mod:`~ddm_core.migrate.binlog`), applied
  by key (:mod:`~ddm_core.migrate.keycopy`);
* :mod:`~ddm_core.migrate.migration` — :class:`Migration`, every step as one resumable state machine;
* :mod:`~ddm_core.migrate.finish` — the finish phase: old rows deleted (or archived) in batches.
"""

from typing import TYPE_CHECKING, Any

from ddm_core.migrate.connections import Connections, config_table_source, connector

if TYPE_CHECKING:
    from ddm_core.migrate.migration import Migration, MigrationStatus

__all__ = ["Connections", "Migration", "MigrationStatus", "config_table_source", "connector"]


def __getattr__(name: str) -> Any:
    # Migration pulls in the router's migration block and the backfill (numpy): loaded when asked for.
    if name in ("Migration", "MigrationStatus"):
        from ddm_core.migrate import migration

        return getattr(migration, name)
    raise AttributeError(f"module 'ddm_core.migrate' has no attribute {name!r}")
