"""Provisioning for SQLAlchemy's suite on the ``ddm`` backend (SQLAlchemy's hooks are per backend name).

SQLAlchemy's MySQL provisioning empties the tables between tests with ``foreign_key_checks`` off;
ddm-core refuses that session change (every pooled connection would need it), and InnoDB checks a
self-referencing foreign key row by row, so a table whose rows point at each other is unlinked first.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import inspect
from sqlalchemy.testing.provision import delete_from_all_tables


@delete_from_all_tables.for_db("ddm")
def _delete_from_all_tables(connection: Any, cfg: Any, metadata: Any) -> None:
    inspector = inspect(connection)
    for table in metadata.tables.values():
        own = {fk.parent.name: None for fk in table.foreign_keys if fk.column.table is table and fk.parent.nullable}
        if own and table.name in inspector.get_table_names(schema=table.schema):
            connection.execute(table.update().values(own))
    delete_from_all_tables.call_original(connection, cfg, metadata)
