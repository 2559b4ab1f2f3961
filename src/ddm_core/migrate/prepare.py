"""The prepare phase: target tables created from the logic table's DDL, then every schema compared.

For each table the plan moves (and each broadcast table it copies):

1. the logic table's DDL is taken from its first existing old physical table
   (``SHOW CREATE TABLE``, the physical name and the per-table suffix of
   constraint names turned back into the logic ones, the ``AUTO_INCREMENT``
   counter dropped);
2. :func:`ddm_core.ddl.physical_ddl` writes it for every physical table of the
   new configuration, and the statements for tables that do not exist yet are
   run by :func:`ddm_core.ddl.execute_ddl` — an existing target table is left
   as it is and only checked;
3. :func:`ddm_core.migrate.schema_check.check_table` compares every physical
   table, old and new. Any difference stops the migration: the report is
   recorded as a ``stop`` row and raised as
   :class:`~ddm_core.errors.SchemaMismatchError` naming each table and
   difference. Fix the tables and run prepare again: it resumes.

The phase is entered (with the plan) before anything is created and completed
only when every table is consistent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from ddm_core.ddl import DdlStatement, execute_ddl, physical_ddl
from ddm_core.errors import MigrationError, SchemaMismatchError
from ddm_core.metadata.model import ShardingConfig
from ddm_core.migrate.connections import Connections
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import MigrationPlan
from ddm_core.migrate.schema_check import PhysicalTable, SchemaReport, check_table, physical_tables
from ddm_core.migrate.state import MigrationLog
from ddm_core.migrate.tables import show_create_table, table_exists
from ddm_core.route.ddl.logic_ddl import logic_ddl

__all__ = ["PrepareResult", "target_ddl", "prepare"]

_CREATED = re.compile(r"\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(`(?:[^`]|``)+`|\S+)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class PrepareResult:
    """What prepare did: the statements it ran and the schema report of each table."""

    created: tuple[DdlStatement, ...]
    reports: tuple[SchemaReport, ...]

    @property
    def tables(self) -> tuple[PhysicalTable, ...]:
        """The physical tables it created."""
        return tuple(PhysicalTable(s.data_source, _created_table(s.sql)) for s in self.created)


def _created_table(sql: str) -> str:
    m = _CREATED.match(sql)
    name = m.group(1) if m else ""
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def target_ddl(conns: Connections, old: ShardingConfig, new: ShardingConfig, table: str) -> list[DdlStatement]:
    """The ``CREATE TABLE`` statements for the physical tables of ``table`` in ``new`` that do not exist yet.

    Raises:
        MigrationError: no old physical table exists to take the DDL from.
    """
    source = next(
        (t for t in physical_tables(table, [old]) if table_exists(conns, t.data_source, t.table)), None
    )
    if source is None:
        raise MigrationError(f"table {table!r} has no physical table in the old configuration to take its DDL from",
                             table=table)
    template = logic_ddl(show_create_table(conns, source.data_source, source.table), source.table, table)
    wanted = []
    for stmt in physical_ddl(new, template):
        name = _created_table(stmt.sql)
        if name and not table_exists(conns, stmt.data_source, name):
            wanted.append(stmt)
    return wanted


def prepare(
    old: ShardingConfig,
    new: ShardingConfig,
    plan: MigrationPlan,
    conns: Connections,
    log: MigrationLog,
    *,
    echo: Callable[[str, str], None] | None = None,
) -> PrepareResult:
    """Run (or resume) the prepare phase of ``plan``.

    Args:
        conns: Connections reaching the data sources of both configurations.
        log: The migration's state.
        echo: Called as ``echo(data_source, sql)`` after each statement.

    Raises:
        MigrationStateError: the migration is past prepare.
        SchemaMismatchError: some physical tables differ (recorded as a stop).
    """
    state = log.state()
    if state.phase is Phase.PREPARE and state.completed:
        return PrepareResult((), ())
    log.enter(Phase.PREPARE, detail=plan.to_json(), state=state)
    tables = [t.table for t in plan.tables] + [b.table for b in plan.broadcasts]
    created: list[DdlStatement] = []
    for table in tables:
        statements = target_ddl(conns, old, new, table)
        if statements:
            execute_ddl(new, statements, echo=echo)
            created.extend(statements)
    reports = tuple(check_table(conns, table, [old, new]) for table in tables)
    bad = [r for r in reports if not r.consistent]
    if bad:
        log.stop(Phase.PREPARE, {"schema": [r.to_json() for r in bad]})
        if len(bad) == 1:
            bad[0].raise_if_inconsistent()
        lines = [line for r in bad for line in [f"{r.table}:", *(f"    {x}" for x in r.lines())]]
        raise SchemaMismatchError(
            f"the physical tables of {len(bad)} tables differ; the migration stops at prepare:\n"
            + "\n".join(f"  {x}" for x in lines),
            table=bad[0].table,
            differences=tuple(d for r in bad for d in r.differences),
        )
    log.complete(Phase.PREPARE)
    return PrepareResult(tuple(created), reports)
