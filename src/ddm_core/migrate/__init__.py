"""Online resharding by slots (docs/migration.md): what exists now is the foundation.

* :mod:`~ddm_core.migrate.phases` — the phases, in order, and the transitions between them;
* :mod:`~ddm_core.migrate.state` — the ``ddm_migration`` table recording every transition;
* :mod:`~ddm_core.migrate.plan` — which slots move where, with rows, bytes and time;
* :mod:`~ddm_core.migrate.schema_check` — the schema consistency check (also for health checks);
* :mod:`~ddm_core.migrate.prepare` — the prepare phase: target tables created and checked;
* :mod:`~ddm_core.migrate.connections` — connections to data sources, the config table source.
"""

from ddm_core.migrate.connections import Connections, config_table_source, connector

__all__ = ["Connections", "config_table_source", "connector"]
