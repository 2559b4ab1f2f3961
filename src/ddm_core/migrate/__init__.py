"""Online resharding by slots (docs/migration.md): the foundation, the checker, backfill and catch-up.

* :mod:`~ddm_core.migrate.phases` — the phases, in order, and the transitions between them;
* :mod:`~ddm_core.migrate.state` — the ``ddm_migration`` table recording every transition;
* :mod:`~ddm_core.migrate.plan` — which slots move where, with rows, bytes and time;
* :mod:`~ddm_core.migrate.schema_check` — the schema consistency check (also for health checks);
* :mod:`~ddm_core.migrate.prepare` — the prepare phase: target tables created and checked;
* :mod:`~ddm_core.migrate.connections` — connections to data sources, the config table source;
* :mod:`~ddm_core.migrate.checker` — the consistency checker of two row sources (``ddm verify``);
* :mod:`~ddm_core.migrate.backfill` — the backfill phase: checked batches, resumable;
* :mod:`~ddm_core.migrate.catchup` — the catch-up phase from the binlog (:mod:`~ddm_core.migrate.binlog`).
"""

from ddm_core.migrate.connections import Connections, config_table_source, connector

__all__ = ["Connections", "config_table_source", "connector"]
