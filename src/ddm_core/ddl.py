"""Physical DDL from a template written against logic tables (seed 000 §4.2).

Seed 000 §4.2 initialises the 64 physical tables ``t_order_${db}_${table}``
with a script that repeats one template, "identical except for the table name
suffix", and warns that auto-increment keys cannot be used: every physical
table would count on its own and hand out the same ids, so the global id
generator fills the key instead. :func:`physical_ddl` is that script:

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
* statements for SQLite data sources are translated (comments, engine and
  charset options dropped; inline ``KEY`` / ``UNIQUE KEY`` definitions become
  ``CREATE [UNIQUE] INDEX <physical table>_<index>``, since SQLite index names
  are per database, not per table).

:func:`execute_ddl` runs the result: SQLite files with :mod:`sqlite3`
(created, with their directories), MySQL / MariaDB with PyMySQL.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sqlite3
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError

from ddm_core.errors import (
    DataSourceUnavailableError,
    ExecutionError,
    UnsupportedSQLError,
)
from ddm_core.metadata.model import Endpoint, ShardingConfig, TableKind
from ddm_core.route.router import Router

__all__ = [
    "DdlStatement",
    "TemplateStatement",
    "split_statements",
    "physical_ddl",
    "to_sqlite",
    "sqlite_index_name",
    "execute_ddl",
    "DIALECTS",
]

#: Dialects :func:`physical_ddl` writes: MySQL text as routed, or SQLite.
DIALECTS = ("mysql", "sqlite")
_MYSQL_FAMILY = frozenset({"mysql", "mariadb"})
_DDL = (exp.Create, exp.Drop, exp.Alter, exp.TruncateTable)


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
        tokens = Dialect.get_or_raise("mysql").tokenize(text)
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
        # The /* app=...,shard=... */ prefix marks traffic in slow-query logs (seed 000 §5.5); schema
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
            target = dialect or _dialect_of(config, unit.data_source)
            if target == "sqlite":
                try:
                    for sql in to_sqlite(unit.sql):
                        out.append(DdlStatement(unit.data_source, sql))
                except UnsupportedSQLError as exc:
                    raise UnsupportedSQLError(
                        f"{where}: for SQLite data source {unit.data_source!r}: {exc.message}", **exc.context
                    ) from exc
            elif target == "mysql":
                out.append(DdlStatement(unit.data_source, unit.sql))
            else:
                raise UnsupportedSQLError(
                    f"{where}: data source {unit.data_source!r} is {target}; DDL is written for MySQL / "
                    "MariaDB and SQLite data sources only",
                    data_source=unit.data_source,
                    construct=target,
                )
    return out


def _dialect_of(config: ShardingConfig, data_source: str) -> str:
    dialect = config.data_sources[data_source].primary.dialect
    return "mysql" if dialect in _MYSQL_FAMILY else dialect


def _parse(sql: str, where: str) -> exp.Expression:
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except SqlglotError as exc:
        raise UnsupportedSQLError(f"{where}: cannot parse {_sample(sql)!r}: {_first_line(exc)}",
                                  sql=sql) from exc
    if not isinstance(tree, _DDL):
        kind = tree.name.upper() if isinstance(tree, exp.Command) else tree.key.upper()
        raise UnsupportedSQLError(
            f"{where}: {_sample(sql)!r} is not DDL ddm can route ({kind}); a template holds CREATE / ALTER / "
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
    """Names of the tables a statement touches (index names of ``DROP INDEX`` excluded)."""
    names: list[str] = []
    skip: set[int] = set()
    if isinstance(tree, exp.Drop) and (tree.args.get("kind") or "").upper() == "INDEX":
        skip = {id(t) for t in tree.args.get("tables") or ()}
    for alter_drop in tree.find_all(exp.Drop):
        if alter_drop is not tree and (alter_drop.args.get("kind") or "").upper() == "INDEX":
            skip.update(id(t) for t in alter_drop.args.get("tables") or ())
    for table in tree.find_all(exp.Table):
        if id(table) not in skip and table.name and table.name not in names:
            names.append(table.name)
    return names


def _main_table(tree: exp.Expression) -> str | None:
    target: Any = tree.this if isinstance(tree, (exp.Create, exp.Alter)) else None
    if isinstance(target, exp.Schema):
        target = target.this
    if isinstance(target, exp.Index):
        target = target.args.get("table")
    return target.name if isinstance(target, exp.Table) else None


def _check_statement(config: ShardingConfig, tree: exp.Expression, where: str) -> None:
    for name in _table_names(tree):
        if config.kind_of(name) is None:
            raise UnsupportedSQLError(
                f"{where}: table {name!r} is not in the configuration ({_known_tables(config)}); "
                "add it as a sharded, broadcast or single table first — DDL for an unknown table "
                "is never sent to a default data source",
                table=name,
            )
    main = _main_table(tree)
    if main is None or config.kind_of(main) is not TableKind.SHARDED:
        return
    column = _auto_increment_column(tree)
    if column is None:
        return
    table = config.table(main)
    assert table is not None
    raise UnsupportedSQLError(
        f"{where}: {column} on sharded table {table.name!r} uses AUTO_INCREMENT: each of its "
        f"{table.shard_count} physical tables would count on its own and hand out the same ids "
        f"(seed 000 §4.2). Drop AUTO_INCREMENT; {_key_generator_hint(table, column)}",
        table=table.name,
        column=column,
        construct="AUTO_INCREMENT",
    )


def _auto_increment_column(tree: exp.Expression) -> str | None:
    """``"column 'id'"`` for the first AUTO_INCREMENT / SERIAL column, ``"the table"`` for the option."""
    for constraint in tree.find_all(exp.AutoIncrementColumnConstraint):
        col = constraint.find_ancestor(exp.ColumnDef)
        return f"column {col.name!r}" if col is not None else "a column"
    for dtype in tree.find_all(exp.DataType):
        if dtype.this in (exp.DataType.Type.SERIAL, exp.DataType.Type.BIGSERIAL, exp.DataType.Type.SMALLSERIAL):
            col = dtype.find_ancestor(exp.ColumnDef)
            return f"column {col.name!r} (SERIAL)" if col is not None else "a SERIAL column"
    if any(True for _ in tree.find_all(exp.AutoIncrementProperty)):
        return "the table option"
    return None


def _key_generator_hint(table: Any, column: str) -> str:
    kg = table.key_generation
    if kg is not None:
        return (
            f"the router fills {kg.column!r} from key generator {kg.generator.name!r} "
            f"({kg.generator.type}) on every INSERT"
        )
    name = re.search(r"'([^']+)'", column)
    col = name.group(1) if name else "id"
    return (
        f"no key generator is configured for {table.name!r}: add one for {col!r} "
        f"(keyGenerator: {{column: {col}, type: snowflake}} in ddm-core's format, "
        "keyGenerateStrategy in ShardingSphere's) so the router fills it on INSERT"
    )


def _known_tables(config: ShardingConfig) -> str:
    parts = []
    if config.tables:
        parts.append("sharded: " + ", ".join(config.tables))
    if config.broadcast_tables:
        parts.append("broadcast: " + ", ".join(config.broadcast_tables))
    if config.single_tables:
        parts.append("single: " + ", ".join(config.single_tables))
    return "; ".join(parts) or "it configures no tables"


# -- SQLite ---------------------------------------------------------------------------


def sqlite_index_name(table: str, index: str) -> str:
    """The SQLite name of MySQL index ``index`` of ``table`` (SQLite index names are per database)."""
    return f"{table}_{index}"


_DROP_COLUMN_CONSTRAINTS = (
    exp.CommentColumnConstraint,
    exp.OnUpdateColumnConstraint,
    exp.CharacterSetColumnConstraint,
    exp.CollateColumnConstraint,
)


def to_sqlite(sql: str) -> list[str]:
    """One routed MySQL DDL statement (physical table names) → SQLite statements.

    Column types are kept as written (SQLite accepts ``BIGINT UNSIGNED``,
    ``DECIMAL(18, 2)``, ``DATETIME(3)`` and gives them their affinity;
    ``ENUM`` / ``SET`` become ``TEXT``); column comments, character sets,
    collations, ``ON UPDATE`` and table options are dropped; inline and
    ``ALTER TABLE ... ADD`` indexes become ``CREATE [UNIQUE] INDEX`` named by
    :func:`sqlite_index_name`; ``TRUNCATE`` becomes ``DELETE FROM``.

    Raises:
        UnsupportedSQLError: a construct SQLite has no equivalent for
            (``MODIFY COLUMN``, ``FULLTEXT``, ``AUTO_INCREMENT``...).
    """
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except SqlglotError as exc:
        raise UnsupportedSQLError(f"cannot parse {_sample(sql)!r}: {_first_line(exc)}", sql=sql) from exc
    if isinstance(tree, exp.Create):
        kind = (tree.args.get("kind") or "").upper()
        if kind == "TABLE" and isinstance(tree.this, exp.Schema) and tree.expression is None:
            return _sqlite_create_table(tree)
        if kind == "INDEX" and isinstance(tree.this, exp.Index):
            return [_sqlite_create_index(tree)]
        if kind == "TABLE":
            tree.set("properties", None)
            return [tree.sql("sqlite")]
    elif isinstance(tree, exp.Drop):
        kind = (tree.args.get("kind") or "").upper()
        if kind == "TABLE":
            return [tree.sql("sqlite")]
        on = tree.args.get("cluster")  # DROP INDEX i ON t
        if kind == "INDEX" and isinstance(on, exp.OnProperty) and isinstance(on.this, exp.Table):
            exists = "IF EXISTS " if tree.args.get("exists") else ""
            return [
                f"DROP INDEX {exists}{exp.to_identifier(sqlite_index_name(on.this.name, i.name)).sql('sqlite')}"
                for i in tree.args.get("tables") or []
            ]
    elif isinstance(tree, exp.TruncateTable):
        return [f"DELETE FROM {t.sql('sqlite')}" for t in tree.expressions]
    elif isinstance(tree, exp.Alter) and isinstance(tree.this, exp.Table):
        return _sqlite_alter(tree)
    raise UnsupportedSQLError(f"{_sample(sql)!r} has no SQLite translation", sql=sql, construct=tree.key.upper())


def _sqlite_column(col: exp.ColumnDef) -> None:
    for c in list(col.constraints):
        kind = c.args.get("kind")
        if isinstance(kind, exp.AutoIncrementColumnConstraint):
            raise UnsupportedSQLError(
                f"AUTO_INCREMENT on column {col.name!r} is not translated for SQLite; use a key generator",
                column=col.name,
                construct="AUTO_INCREMENT",
            )
        if isinstance(kind, _DROP_COLUMN_CONSTRAINTS):
            c.pop()
    dtype = col.args.get("kind")
    if isinstance(dtype, exp.DataType):
        if dtype.this in (exp.DataType.Type.ENUM, exp.DataType.Type.SET):
            text = "TEXT"
        else:
            text = dtype.sql("mysql")
        col.set("kind", exp.DataType(this=exp.DataType.Type.USERDEFINED, kind=text))
    col.set("position", None)


def _index_columns(expressions: Iterable[exp.Expression]) -> str:
    cols = []
    for e in expressions:
        # name(10), a prefix (ColumnPrefix in a table, Anonymous in CREATE INDEX): SQLite indexes whole values
        inner = e.this if isinstance(e, exp.Ordered) else e
        if isinstance(inner, exp.ColumnPrefix) or (
            isinstance(inner, exp.Anonymous) and len(inner.expressions) == 1 and inner.expressions[0].is_int
        ):
            column = exp.column(inner.this.copy() if isinstance(inner, exp.ColumnPrefix) else inner.name)
            if isinstance(e, exp.Ordered):
                e = e.copy()
                e.set("this", column)
            else:
                e = column
        cols.append(e.sql("sqlite"))
    return ", ".join(cols)


def _index_from_constraint(table: exp.Table, node: exp.Expression, exists: bool = False) -> str | None:
    """``CREATE [UNIQUE] INDEX`` for an inline ``KEY`` / named ``UNIQUE KEY``; ``None`` to keep it inline."""
    if isinstance(node, exp.IndexColumnConstraint):
        kind = (node.args.get("kind") or "").upper()
        if kind in ("FULLTEXT", "SPATIAL"):
            raise UnsupportedSQLError(f"{kind} index {node.name!r} has no SQLite equivalent", construct=kind)
        name = node.name or "_".join(c.name for c in node.expressions)
        unique = "UNIQUE " if kind == "UNIQUE" else ""
        cols = _index_columns(node.expressions)
    elif isinstance(node, exp.UniqueColumnConstraint) and isinstance(node.this, exp.Schema) and node.this.this:
        name = node.this.this.name
        unique = "UNIQUE "
        cols = _index_columns(node.this.expressions)
    else:
        return None
    index = exp.to_identifier(sqlite_index_name(table.name, name))
    guard = "IF NOT EXISTS " if exists else ""
    return f"CREATE {unique}INDEX {guard}{index.sql('sqlite')} ON {table.sql('sqlite')} ({cols})"


def _sqlite_create_table(tree: exp.Create) -> list[str]:
    schema = tree.this
    table = schema.this
    exists = bool(tree.args.get("exists"))
    indexes: list[str] = []
    for node in list(schema.expressions):
        if isinstance(node, exp.ColumnDef):
            _sqlite_column(node)
            continue
        index = _index_from_constraint(table, node, exists)
        if index is not None:
            indexes.append(index)
            node.pop()
    tree.set("properties", None)
    return [tree.sql("sqlite", pretty=True), *indexes]


def _sqlite_create_index(tree: exp.Create) -> str:
    index = tree.this
    table = index.args.get("table")
    params = index.args.get("params")
    columns = params.args.get("columns") if params is not None else None
    if not isinstance(table, exp.Table) or not columns:
        raise UnsupportedSQLError(f"{tree.sql('mysql')!r} has no SQLite translation", construct="CREATE INDEX")
    unique = "UNIQUE " if tree.args.get("unique") else ""
    exists = "IF NOT EXISTS " if tree.args.get("exists") else ""
    name = exp.to_identifier(sqlite_index_name(table.name, index.name))
    return f"CREATE {unique}INDEX {exists}{name.sql('sqlite')} ON {table.sql('sqlite')} ({_index_columns(columns)})"


def _sqlite_alter(tree: exp.Alter) -> list[str]:
    table = tree.this
    prefix = f"ALTER TABLE {table.sql('sqlite')}"
    out: list[str] = []
    for action in tree.args.get("actions") or []:
        if isinstance(action, exp.ColumnDef):
            _sqlite_column(action)
            out.append(f"{prefix} ADD COLUMN {action.sql('sqlite')}")
        elif isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "COLUMN":
            for col in action.args.get("tables") or []:
                out.append(f"{prefix} DROP COLUMN {col.sql('sqlite')}")
        elif isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "INDEX":
            exists = "IF EXISTS " if action.args.get("exists") else ""
            for idx in action.args.get("tables") or []:
                name = exp.to_identifier(sqlite_index_name(table.name, idx.name))
                out.append(f"DROP INDEX {exists}{name.sql('sqlite')}")
        elif isinstance(action, exp.AddConstraint):
            for node in action.expressions:
                index = _index_from_constraint(table, node)
                if index is None:
                    raise UnsupportedSQLError(
                        f"ALTER TABLE {table.name} ADD {node.sql('mysql')} has no SQLite translation",
                        construct="ALTER TABLE ADD CONSTRAINT",
                    )
                out.append(index)
        else:
            raise UnsupportedSQLError(
                f"ALTER TABLE {table.name} {action.sql('mysql')} has no SQLite translation "
                "(SQLite alters only by ADD / DROP COLUMN and indexes)",
                construct=f"ALTER TABLE {action.key.upper()}",
            )
    return out


# -- execution ------------------------------------------------------------------------


def execute_ddl(
    config: ShardingConfig,
    statements: Sequence[tuple[str, str]],
    *,
    echo: Callable[[str, str], None] | None = None,
    connect_timeout: float = 5.0,
) -> int:
    """Run ``(data_source, sql)`` statements on each data source's primary, in order.

    SQLite files (and their directories) are created; MySQL / MariaDB
    endpoints are reached with PyMySQL (``ssl_disabled``, autocommit — DDL
    commits implicitly there anyway) using the configured host, port, user,
    password (:meth:`Secret.reveal`) and database. One connection per data
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
                if isinstance(conn, sqlite3.Connection):
                    conn.commit()
            except Exception as exc:  # driver errors have no common base
                raise ExecutionError(
                    f"data source {ds!r} ({config.data_sources[ds].primary.url}): {exc}\n"
                    f"  statement: {_sample(sql, 200)}\n"
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
    ep: Endpoint = config.data_sources[data_source].primary
    if ep.dialect == "sqlite":
        database = ep.database or ":memory:"
        try:
            if database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            return sqlite3.connect(database, timeout=timeout)
        except (OSError, sqlite3.Error) as exc:
            raise DataSourceUnavailableError(
                f"data source {data_source!r}: cannot open SQLite file {database!r}: {exc}",
                data_source=data_source,
            ) from exc
    if ep.dialect in _MYSQL_FAMILY:
        try:
            pymysql = importlib.import_module("pymysql")  # optional: only executing on MySQL needs it
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise DataSourceUnavailableError(
                f"data source {data_source!r} is {ep.dialect}: executing DDL there needs PyMySQL "
                "(pip install pymysql)",
                data_source=data_source,
            ) from exc
        password = ep.password.reveal() if ep.password is not None else ""
        try:
            return pymysql.connect(
                host=ep.host or "localhost",
                port=ep.port or 3306,
                user=ep.username,
                password=password,
                database=ep.database or None,
                charset="utf8mb4",
                autocommit=True,
                connect_timeout=max(1, int(timeout)),
                ssl_disabled=True,  # FINDINGS.md: PyMySQL builds an SSL context otherwise (~20 ms)
            )
        except pymysql.MySQLError as exc:
            raise DataSourceUnavailableError(
                f"data source {data_source!r} ({ep.url}): cannot connect: {exc}",
                data_source=data_source,
            ) from exc
    raise DataSourceUnavailableError(
        f"data source {data_source!r} is {ep.dialect}; DDL can be executed on SQLite, MySQL and MariaDB only",
        data_source=data_source,
    )


def _sample(sql: str, limit: int = 80) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
