"""Physical DDL from a template written against logic tables.

The physical tables of a logic table (``t_order_${db}_${table}``, 64 of them for
16 databases × 4 tables) are created from one template, identical except for
the table name, and cannot use auto-increment keys: every physical table would
count on its own and hand out the same ids, so the global id generator fills
the key instead (docs/architecture.md#keys-come-from-the-id-generator).
:func:`physical_ddl` writes those statements:

* the template is ordinary MySQL DDL against logic tables — ``CREATE TABLE``,
  ``CREATE INDEX``, ``ALTER TABLE``, ``DROP TABLE`` / ``DROP INDEX``,
  ``TRUNCATE`` — one or more statements separated by ``;`` (comments allowed);
* each statement is routed by :class:`ddm_core.Router`, which already sends
  DDL on a sharded table to every physical table (a foreign key to a bound
  table follows the same node) and DDL on a broadcast table to every data
  source, and keeps the template's text byte for byte apart from table names;
* a table the configuration does not know is refused (it would silently land
  in the default data source), and so is ``AUTO_INCREMENT`` / ``SERIAL`` on a
  sharded table, naming the key generator to use instead;
* each routed statement is written by the data source's dialect
  (:meth:`ddm_core.dialects.Dialect.ddl_statements`): MySQL / MariaDB get it
  as routed; for SQLite it is translated (comments, engine and charset options
  dropped; inline ``KEY`` / ``UNIQUE KEY`` definitions become
  ``CREATE [UNIQUE] INDEX <physical table>_<index>``, since SQLite index names
  are per database, not per table — :mod:`ddm_core.dialects.sqlite_ddl`).

:func:`execute_ddl` runs the result through the executor's driver adapters
(SQLite files are created, with their directories).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, NamedTuple, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError

from ddm_core import dialects
from ddm_core._text import first_line, shorten_sql
from ddm_core.dialects.sqlite_ddl import sqlite_index_name, to_sqlite
from ddm_core.errors import (
    DataSourceUnavailableError,
    DdmError,
    ExecutionError,
    UnsupportedSQLError,
)
from ddm_core.execute.drivers import Driver, driver_for
from ddm_core.metadata.model import Endpoint, ShardingConfig, TableKind
from ddm_core.route.ddl.auto_increment import refuse_auto_increment
from ddm_core.route.router import Router

__all__ = [
    "DdlStatement",
    "TemplateStatement",
    "split_statements",
    "physical_ddl",
    "to_sqlite",
    "sqlite_index_name",
    "execute_ddl",
    "outbox_statements",
    "DIALECTS",
]

#: Dialects :func:`physical_ddl` writes: MySQL text as routed, or SQLite.
DIALECTS = dialects.ddl_kinds()
_DDL = (exp.Create, exp.Drop, exp.Alter, exp.TruncateTable)
# ``ALTER TABLE ... DROP <kind> name``: the name is an index's or a constraint's, not a table's.
_NAMED_DROPS = frozenset({"INDEX", "FOREIGN KEY", "CONSTRAINT", "CHECK"})


class DdlStatement(NamedTuple):
    """One statement for one data source (unpacks as ``(data_source, sql)``)."""

    data_source: str
    sql: str


class TemplateStatement(NamedTuple):
    """One statement of a template: its text (without the ``;``) and 1-based first line."""

    sql: str
    line: int


# -- splitting ----------------------------------------------------------------------


def split_statements(text: str) -> list[TemplateStatement]:
    """Split SQL text at top-level ``;`` (not inside strings, identifiers or comments).

    Comments before a statement and empty statements are dropped; everything
    from a statement's first token to its last is kept as written.

    Raises:
        UnsupportedSQLError: the text cannot be tokenized (an unterminated string).
    """
    try:
        tokens = Dialect.get_or_raise(dialects.INPUT).tokenize(text)
    except SqlglotError as exc:
        raise UnsupportedSQLError(f"cannot read the DDL template: {exc}", construct="template") from exc
    out: list[TemplateStatement] = []
    first = None
    last = None
    for tok in tokens:
        if tok.token_type == sqlglot.TokenType.SEMICOLON:
            if first is not None and last is not None:
                out.append(TemplateStatement(text[first.start : last.end + 1], first.line))
            first = last = None
            continue
        if first is None:
            first = tok
        last = tok
    if first is not None and last is not None:
        out.append(TemplateStatement(text[first.start : last.end + 1], first.line))
    return out


# -- generation ---------------------------------------------------------------------


def physical_ddl(config: ShardingConfig, template_sql: str, *, dialect: str | None = None) -> list[DdlStatement]:
    """Every physical statement of a DDL template, in template order.

    Args:
        config: The configuration naming the logic tables.
        template_sql: MySQL-dialect DDL against logic tables; one or more
            statements separated by ``;``.
        dialect: ``"mysql"`` or ``"sqlite"`` to write every statement in that
            dialect; ``None`` (default) writes each in its data source's
            dialect (the primary's: ``sqlite`` for ``sqlite:///`` URLs, MySQL
            for ``mysql`` / ``mariadb``).

    Returns:
        ``(data_source, sql)`` pairs: for each template statement, one per
        physical table of a sharded table, one per data source for a broadcast
        table, one for a single table — plus, for SQLite, the ``CREATE INDEX``
        statements split out of a ``CREATE TABLE``.

    Raises:
        UnsupportedSQLError: a statement is not DDL, names a table the
            configuration does not know, declares ``AUTO_INCREMENT`` on a
            sharded table, cannot be parsed or routed, or cannot be written
            for a data source's dialect; the message names the statement.
    """
    if dialect is not None and dialect not in DIALECTS:
        raise UnsupportedSQLError(f"unknown DDL dialect {dialect!r} (use one of {', '.join(DIALECTS)})",
                                  construct=dialect)
    statements = split_statements(template_sql)
    if not statements:
        raise UnsupportedSQLError("the DDL template holds no statement", construct="template")
    if config.runtime.sql_comment:
        # The /* app=...,shard=... */ prefix marks traffic in slow-query logs; schema
        # scripts are not traffic, and a prefix would only clutter them.
        config = dataclasses.replace(config, runtime=dataclasses.replace(config.runtime, sql_comment=False))
    router = Router(config, cache_size=max(16, len(statements)))
    out: list[DdlStatement] = []
    for number, stmt in enumerate(statements, 1):
        where = f"statement {number} (line {stmt.line})"
        tree = _parse(stmt.sql, where)
        _check_statement(config, tree, where)
        try:
            plan = router.route(stmt.sql)
        except UnsupportedSQLError as exc:
            raise UnsupportedSQLError(f"{where}: {exc.message}", **exc.context) from exc
        for unit in plan.units:
            target = dialects.dialect_for(dialect or config.data_sources[unit.data_source].primary.dialect)
            if not target.writes_ddl:
                raise UnsupportedSQLError(
                    f"{where}: data source {unit.data_source!r} is {target.name}; DDL is written for "
                    f"{_ddl_backends()} data sources only",
                    data_source=unit.data_source,
                    construct=target.name,
                )
            try:
                for sql in target.ddl_statements(unit.sql):
                    out.append(DdlStatement(unit.data_source, sql))
            except UnsupportedSQLError as exc:
                raise UnsupportedSQLError(
                    f"{where}: for {target.title} data source {unit.data_source!r}: {exc.message}", **exc.context
                ) from exc
    return out


def _ddl_backends() -> str:
    """``"MySQL, MariaDB and SQLite"``: the backends DDL is written for."""
    titles = [d.title for d in dialects.DIALECTS if d.writes_ddl]
    return f"{', '.join(titles[:-1])} and {titles[-1]}"


def _parse(sql: str, where: str) -> exp.Expression:
    try:
        tree = sqlglot.parse_one(sql, read=dialects.INPUT)
    except SqlglotError as exc:
        raise UnsupportedSQLError(f"{where}: cannot parse {shorten_sql(sql)!r}: {first_line(exc)}",
                                  sql=sql) from exc
    if not isinstance(tree, _DDL):
        kind = tree.name.upper() if isinstance(tree, exp.Command) else tree.key.upper()
        raise UnsupportedSQLError(
            f"{where}: {shorten_sql(sql)!r} is not DDL ddm can route ({kind}); a template holds CREATE / ALTER / "
            "DROP TABLE, CREATE / DROP INDEX and TRUNCATE statements against logic tables",
            sql=sql,
            construct=kind,
        )
    if isinstance(tree, exp.Create) and (tree.args.get("kind") or "").upper() not in ("TABLE", "INDEX"):
        raise UnsupportedSQLError(
            f"{where}: CREATE {tree.args.get('kind')} is not supported in a DDL template "
            "(CREATE TABLE and CREATE INDEX are)",
            sql=sql,
            construct=f"CREATE {tree.args.get('kind')}",
        )
    return tree


def _table_names(tree: exp.Expression) -> list[str]:
    """Names of the tables a statement touches (index and constraint names of ``DROP ...`` excluded)."""
    names: list[str] = []
    skip: set[int] = set()
    if isinstance(tree, exp.Drop) and (tree.args.get("kind") or "").upper() == "INDEX":
        skip = {id(t) for t in tree.args.get("tables") or ()}
    for alter_drop in tree.find_all(exp.Drop):
        if alter_drop is not tree and (alter_drop.args.get("kind") or "").upper() in _NAMED_DROPS:
            skip.update(id(t) for t in alter_drop.args.get("tables") or ())
    for table in tree.find_all(exp.Table):
        if id(table) not in skip and table.name and table.name not in names:
            names.append(table.name)
    return names


def _check_statement(config: ShardingConfig, tree: exp.Expression, where: str) -> None:
    for name in _table_names(tree):
        if config.kind_of(name) is None:
            raise UnsupportedSQLError(
                f"{where}: table {name!r} is not in the configuration ({_known_tables(config)}); "
                "add it as a sharded, broadcast or single table first — DDL for an unknown table "
                "is never sent to a default data source",
                table=name,
            )
    refuse_auto_increment(config, tree, where)


def _known_tables(config: ShardingConfig) -> str:
    parts = []
    if config.tables:
        parts.append("sharded: " + ", ".join(config.tables))
    if config.broadcast_tables:
        parts.append("broadcast: " + ", ".join(config.broadcast_tables))
    if config.single_tables:
        parts.append("single: " + ", ".join(config.single_tables))
    return "; ".join(parts) or "it configures no tables"


def outbox_statements(config: ShardingConfig, *, dialect: str | None = None) -> list[DdlStatement]:
    """The outbox's message and consume-log tables on every data source (docs/outbox.md#tables).

    They are ddm-core's own tables, one of each per data source rather than logic
    tables, so they come from :func:`ddm_core.outbox.outbox_ddl`, not from a template.
    """
    from ddm_core.outbox.schema import outbox_ddl

    return [DdlStatement(ds, sql) for ds, sql in outbox_ddl(config, dialect=dialect)]


# -- execution ------------------------------------------------------------------------


def execute_ddl(
    config: ShardingConfig,
    statements: Sequence[tuple[str, str]],
    *,
    echo: Callable[[str, str], None] | None = None,
    connect_timeout: float = 5.0,
) -> int:
    """Run ``(data_source, sql)`` statements on each data source's primary, in order.

    Connections are opened by the executor's driver adapters
    (:mod:`ddm_core.execute.drivers`), in autocommit mode, with the configured
    host, port, user, password (:meth:`Secret.reveal`) and database; SQLite
    files (and their directories) are created. One connection per data
    source; the first failure stops the run.

    Args:
        echo: Called as ``echo(data_source, sql)`` after each statement succeeds.

    Returns:
        The number of statements executed.

    Raises:
        DataSourceUnavailableError: a data source cannot be opened (names it).
        ExecutionError: a statement failed (names the data source and the
            statement; the driver error is chained).
        ConfigError: a password environment variable is not set.
    """
    conns: dict[str, Any] = {}
    done = 0
    try:
        for ds, sql in statements:
            conn = conns.get(ds)
            if conn is None:
                conn = conns[ds] = _connect(config, ds, connect_timeout)
            try:
                cur = conn.cursor()
                try:
                    cur.execute(sql)
                finally:
                    cur.close()
            except Exception as exc:  # driver errors have no common base
                raise ExecutionError(
                    f"data source {ds!r} ({config.data_sources[ds].primary.url}): {exc}\n"
                    f"  statement: {shorten_sql(sql)}\n"
                    f"  {done} earlier statement{'s' if done != 1 else ''} succeeded; nothing after this one ran",
                    data_source=ds,
                    statement=sql,
                ) from exc
            done += 1
            if echo is not None:
                echo(ds, sql)
    finally:
        for conn in conns.values():
            try:
                conn.close()
            except Exception:  # closing after a failure must not hide it
                pass
    return done


def _connect(config: ShardingConfig, data_source: str, timeout: float) -> Any:
    """A connection to the data source's primary through its driver adapter (autocommit)."""
    ep: Endpoint = config.data_sources[data_source].primary
    # Every statement arrives written in this data source's dialect: templates for backends
    # ddm-core writes no DDL for were refused by physical_ddl; the outbox's tables exist per dialect.
    dialect = dialects.dialect_for(ep.dialect)
    try:
        driver: Driver = driver_for(ep.dialect)
    except ExecutionError as exc:  # its DB-API module is not installed
        raise DataSourceUnavailableError(
            f"data source {data_source!r} is {ep.dialect}: executing DDL there fails: {exc.message}",
            data_source=data_source,
        ) from exc
    try:
        dialect.prepare_storage(ep.database)
        return driver.connect(ep, timeout)
    except DdmError:  # a password variable that is not set names itself
        raise
    except Exception as exc:  # driver errors have no common base
        raise DataSourceUnavailableError(
            f"data source {data_source!r} ({ep.url}): cannot connect: {exc}",
            data_source=data_source,
        ) from exc
