"""Constraint names in DDL on a sharded table: one name per physical table.

MySQL keeps foreign-key (and, in MySQL 8, CHECK) constraint names per
database, so the physical tables of one logic table that share a data source
cannot all carry ``fk_user``. As ShardingSphere does, a constraint name
written on a sharded table becomes ``<name>_<physical table>``
(``fk_user`` → ``fk_user_t_order_0_1``) wherever the statement names it:
``CONSTRAINT <name>`` in CREATE TABLE (table and column constraints) and in
``ALTER TABLE ... ADD``, and ``ALTER TABLE ... DROP FOREIGN KEY / CONSTRAINT /
CHECK <name>``, so what was created can be dropped with the name it was
created with.

Index names are kept as written: MySQL and MariaDB scope them to their table,
so they never collide (ShardingSphere 5.5 rewrites them only for databases
whose index names are per schema; SQLite DDL gets per-table names from
:mod:`ddm_core.dialects.sqlite_ddl`). Broadcast, single and unknown tables keep
every name: they have one physical table per database.
"""

from __future__ import annotations

from typing import Iterator

from sqlglot import exp

from ddm_core.errors import UnsupportedSQLError
from ddm_core.metadata.model import ShardedTable, ShardingConfig, TableKind
from ddm_core.route.shards.analyze import Analysis
from ddm_core.route.text.edits import span
from ddm_core.route.text.template import Edit, suffixed_name

__all__ = ["constraint_edits", "MAX_IDENTIFIER"]

#: The longest identifier MySQL and MariaDB accept.
MAX_IDENTIFIER = 64

_DROPPED_CONSTRAINTS = frozenset({"FOREIGN KEY", "CONSTRAINT", "CHECK"})


def constraint_edits(config: ShardingConfig, tree: exp.Expr, analysis: Analysis) -> list[Edit]:
    """Name-slot edits for the constraint names of a DDL statement on a sharded table (else none).

    Raises:
        UnsupportedSQLError: a suffixed name would be longer than MySQL allows.
    """
    subject = _subject(tree)
    use = next((u for u in analysis.uses if u.node is subject), None) if subject is not None else None
    if use is None or use.kind is not TableKind.SHARDED:
        return []
    table = config.table(use.name)
    assert table is not None
    edits = []
    for ident in _constraint_names(tree):
        _check_length(ident.name, table)
        start, end = span(ident)
        edits.append(Edit(start, end, table=use.slot, name=ident.name, quoted=bool(ident.args.get("quoted"))))
    return edits


def _subject(tree: exp.Expr) -> exp.Table | None:
    """The table a CREATE TABLE / ALTER TABLE defines or changes."""
    if isinstance(tree, exp.Create) and str(tree.args.get("kind") or "").upper() == "TABLE":
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        return target if isinstance(target, exp.Table) else None
    if isinstance(tree, exp.Alter) and isinstance(tree.this, exp.Table):
        return tree.this
    return None


def _constraint_names(tree: exp.Expr) -> Iterator[exp.Identifier]:
    for node in tree.walk():
        if isinstance(node, (exp.Constraint, exp.ColumnConstraint)) and isinstance(node.this, exp.Identifier):
            yield node.this  # CONSTRAINT <name> ... (table or column constraint)
        elif isinstance(node, exp.Drop) and str(node.args.get("kind") or "").upper() in _DROPPED_CONSTRAINTS:
            for dropped in node.args.get("tables") or []:
                if isinstance(dropped, exp.Table) and isinstance(dropped.this, exp.Identifier):
                    yield dropped.this  # ALTER TABLE ... DROP FOREIGN KEY <name>


def _check_length(name: str, table: ShardedTable) -> None:
    longest = max(table.data_nodes, key=lambda n: len(n.table))
    full = suffixed_name(name, longest.table)
    if len(full) > MAX_IDENTIFIER:
        room = MAX_IDENTIFIER - len(full) + len(name)
        raise UnsupportedSQLError(
            f"constraint name {name!r} on sharded table {table.name!r} becomes {full!r} on its physical table "
            f"{longest} ({len(full)} characters; MySQL allows {MAX_IDENTIFIER}): use a name of at most "
            f"{max(room, 0)} characters",
            table=table.name,
            construct="constraint name",
            name=name,
        )
