"""What the synchronous and the asyncio dialects share: the URL, the executor, errors, DDL.

* **The URL names the configuration**: ``ddm+pymysql:///?config=examples/orders.yaml``
  (a path, read relative to the working directory), or no ``config`` and
  ``connect_args={"executor": executor}`` to share an executor the application
  built (and closes). An executor the dialect builds from the URL is one per
  engine, shared by all its pooled connections, and closed when the engine is
  garbage-collected or the interpreter exits (:meth:`DdmDialectMixin.close_executor`
  closes it sooner). ``transaction_mode=xa`` in the query makes the connections'
  transactions XA ones (docs/xa.md).
* **Generated keys**: a column a key generator fills (``keyGenerator`` in the
  configuration) is the table's autoincrement column for SQLAlchemy, so the ORM reads the
  key of a new row from ``cursor.lastrowid``, which the facade sets to the first key
  ddm-core generated; its DDL carries no ``AUTO_INCREMENT``: ddm-core fills the column,
  not the server; reflection reports it as the autoincrement column. ``AUTO_INCREMENT`` on any
  other column of a sharded table is refused as the DDL is compiled, as ``ddm ddl`` refuses it.
* **Errors** keep their message: SQLAlchemy wraps the facade's error (a ``DdmError``
  that is also the PEP 249 class) in its own ``DBAPIError`` subclass, as
  ``.orig``; the MySQL error number, when a server raised it, is read from the
  driver error the facade chained (``__cause__``).

docs/sqlalchemy.md tells the whole story.
"""

from __future__ import annotations

import weakref
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Callable, Literal, Mapping

from sqlalchemy.dialects.mysql.base import MySQLDDLCompiler, MySQLDialect
from sqlalchemy.dialects.sqlite import base as sqlite_types
from sqlalchemy.sql import sqltypes
from sqlalchemy.engine import URL
from sqlalchemy.engine.interfaces import ConnectArgsType
from sqlalchemy.schema import Column

from ddm_core.errors import ConfigError, DdmError, UnsupportedSQLError
from ddm_core.metadata.model import ShardingConfig, TableKind
from ddm_core.route.hints import Hint, hint
from ddm_core.config_center import open_config

__all__ = ["DdmDialectMixin", "DdmDDLCompiler", "key_column_of", "connect_options"]

_SQLITE_TEMPORAL: dict[Any, Any] = {
    sqltypes.DateTime: sqlite_types.DATETIME, sqltypes.Date: sqlite_types.DATE, sqltypes.Time: sqlite_types.TIME,
}

#: Query options of a ``ddm+...`` URL, and what each becomes.
_OPTIONS = {"config": "a configuration path, or a redis:// or etcd:// configuration center", "transaction_mode": "local or xa",
            "charset": "utf8mb4 only: every pooled connection's character set",
            "prefix": "the configuration center's key prefix", "group": "the rollout group this engine follows",
            "snapshot": "a file keeping the center's last good version"}  # fmt: skip


def connect_options(url: URL) -> dict[str, Any]:
    """The ``connect()`` arguments a ``ddm+...`` URL names.

    Raises:
        ConfigError: a host, user or database in the URL (the configuration names the data
            sources), an unknown query option, or a character set other than utf8mb4.
    """
    if url.host or url.username or url.database or url.port:
        raise ConfigError(
            f"a ddm URL names no server ({url.render_as_string(hide_password=True)!r}): the configuration names "
            "the data sources; write ddm+pymysql:///?config=path/to/config.yaml"
        )
    options: dict[str, Any] = {}
    for name, value in url.query.items():
        if name not in _OPTIONS:
            raise ConfigError(
                f"unknown option {name!r} in the ddm URL (known: {', '.join(sorted(_OPTIONS))})", option=name
            )
        if isinstance(value, tuple):
            raise ConfigError(f"option {name!r} is given twice in the ddm URL", option=name)
        if name == "charset":
            if value.lower() != "utf8mb4":
                raise ConfigError(f"the ddm URL's charset must be utf8mb4, not {value!r}", option=name)
            continue
        options[name] = value
    return options


def key_column_of(config: ShardingConfig, table: str) -> str | None:
    """The column a key generator fills in logic table ``table``, if any."""
    sharded = config.table(table)
    generation = sharded.key_generation if sharded is not None else None
    return generation.column if generation is not None else None


class DdmDDLCompiler(MySQLDDLCompiler):
    """MySQL DDL, except that a column ddm-core's key generator fills is no ``AUTO_INCREMENT`` column,
    and any other ``AUTO_INCREMENT`` column of a sharded table is refused."""

    def get_column_specification(self, column: Column[Any], **kw: Any) -> str:
        spec: str = super().get_column_specification(column, **kw)
        config = getattr(self.dialect, "ddm_config", None)
        if config is not None and column.table is not None and spec.endswith(" AUTO_INCREMENT"):
            key = key_column_of(config, column.table.name)
            if key is not None and key.lower() == column.name.lower():
                spec = spec[: -len(" AUTO_INCREMENT")]
            elif config.kind_of(column.table.name) is TableKind.SHARDED:
                raise _auto_increment_refused(config, column.table.name, column.name, key)
        return spec


def _auto_increment_refused(config: ShardingConfig, table: str, column: str, key: str | None) -> UnsupportedSQLError:
    """Physical tables counting on their own would hand out the same ids (as ``ddm ddl`` refuses it)."""
    sharded = config.table(table)
    count = sharded.shard_count if sharded is not None else "its"
    way_out = (
        f" (the table's key generator fills {key!r})" if key is not None
        else f", or configure a key generator for it (keyGenerator: {{column: {column}, type: snowflake}})"
    )
    return UnsupportedSQLError(
        f"column {column!r} of sharded table {table!r} would be AUTO_INCREMENT: each of its {count} physical "
        f"tables would count on its own and hand out the same ids across shards; declare it with "
        f"autoincrement=False and give its values{way_out}",
        table=table, column=column, construct="AUTO_INCREMENT",
    )


class DdmDialectMixin(MySQLDialect):
    """The parts of a ``ddm+driver`` dialect that do not depend on the runner (threads or asyncio)."""

    # "mysql": SQLAlchemy reads mysql_* table options and "mysql" type variants by the dialect's name
    name = "mysql"
    driver = "ddm"
    supports_statement_cache = True
    ddl_compiler = DdmDDLCompiler
    supports_server_side_cursors = False  # the facade streams rows from the shards itself
    #: The configuration of the executor the dialect's connections run on (known at the first connect).
    ddm_config: ShardingConfig | None = None

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._executor: Any = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def create_connect_args(self, url: URL, _translate_args: dict[str, Any] | None = None) -> ConnectArgsType:
        return [], connect_options(url)

    def shared_executor(self, options: dict[str, Any], build: Callable[[Any], Any]) -> Any:
        """The executor this engine's connections share, built on first use by ``build`` from the URL's
        configuration (``options``: the URL's query, :mod:`ddm_core.config_center`)."""
        if self._executor is None:
            config = options.get("config")
            if config is None:
                raise ConfigError(
                    "a ddm engine needs a configuration: ddm+pymysql:///?config=path/to/config.yaml, or "
                    "connect_args={'executor': executor}"
                )
            source, stop_following = open_config(config, options)
            try:
                self._executor = build(source)
            except BaseException:
                if stop_following is not None:
                    stop_following()
                raise
            self._finalizer = weakref.finalize(self, _close, self._executor, stop_following)
        return self._executor

    def close_executor(self) -> None:
        """Close the executor the dialect built from the URL (``engine.dispose()`` does not)."""
        if self._finalizer is not None:
            self._finalizer()
        self._executor = None
        self._finalizer = None

    def do_ping(self, dbapi_connection: Any) -> Literal[True]:
        dbapi_connection.ping()  # the facade connection: raises once it is closed
        return True

    def _learn_config(self, dbapi_connection: Any) -> None:
        executor = getattr(dbapi_connection, "executor", None)
        if executor is not None and self.ddm_config is None:
            self.ddm_config = executor.config
            # The ORM checks an UPDATE's rowcount against the rows it meant (version counters, stale
            # rows): that holds when the count is of matched rows (docs/sqlalchemy.md#row-counts).
            self.supports_sane_rowcount = self.supports_sane_multi_rowcount = bool(executor.matched_rows)

    # -- per-statement hints: execution_options(ddm_hint={"database": "ds_1"}) ---------------------------

    def do_execute(self, cursor: Any, statement: str, parameters: Any, context: Any = None) -> None:
        if context is None or "ddm_hint" not in context.execution_options:  # every statement comes here: no wrapper
            cursor.execute(statement, parameters)
            return
        with _hint_of(context):
            super().do_execute(cursor, statement, parameters, context)  # type: ignore[no-untyped-call]

    def do_execute_no_params(self, cursor: Any, statement: str, context: Any = None) -> None:
        with _hint_of(context):
            super().do_execute_no_params(cursor, statement, context)  # type: ignore[no-untyped-call]

    def do_executemany(self, cursor: Any, statement: str, parameters: Any, context: Any = None) -> None:
        with _hint_of(context):
            super().do_executemany(cursor, statement, parameters, context)  # type: ignore[no-untyped-call]

    def initialize(self, connection: Any) -> None:
        super().initialize(connection)
        config = self.ddm_config
        if config is not None and all(ds.primary.dialect == "sqlite" for ds in config.data_sources.values()):
            # SQLite hands back DECIMAL as float and DATETIME / DATE / TIME as text, where MySQL drivers
            # give Decimal and datetime objects: read them as SQLAlchemy's own SQLite dialect does.
            self.supports_native_decimal = False
            self.colspecs = {**self.colspecs, **_SQLITE_TEMPORAL}

    def _initialize_mariadb(self, connection: Any) -> None:
        super()._initialize_mariadb(connection)
        # A multi-row INSERT is split among the shards, and their RETURNING rows come back in shard order,
        # not in the order of the VALUES rows: SQLAlchemy would give objects each other's keys. A
        # sequence would count on each data source on its own. The ORM reads keys from lastrowid.
        self.insert_returning = self.delete_returning = self.update_returning = False
        self.supports_sequences = False

    def get_columns(self, connection: Any, table_name: str, schema: str | None = None, **kw: Any) -> Any:
        """The server's columns, the one a key generator fills marked ``autoincrement`` (its DDL has no
        ``AUTO_INCREMENT``): a reflected table then reads new keys back as a declared one does."""
        columns = super().get_columns(connection, table_name, schema, **kw)
        key = key_column_of(self.ddm_config, table_name) if self.ddm_config is not None else None
        if key is None:
            return columns
        return [{**c, "autoincrement": True} if c["name"].lower() == key.lower() else c for c in columns]

    def _extract_error_code(self, exception: BaseException) -> Any:
        """The MySQL error number of a server's error (the facade chains the driver's as ``__cause__``)."""
        cause = exception.__cause__ if isinstance(exception, DdmError) else exception
        args = getattr(cause, "args", ())
        return args[0] if args and isinstance(args[0], int) else None

    def is_disconnect(self, e: Any, connection: Any, cursor: Any) -> bool:
        """Only a closed facade connection is "disconnected": each pooled connection underneath is
        checked by ddm-core's own pools, and a lost one fails its statement, not the facade connection."""
        return "the connection is closed" in str(e)

    def _detect_charset(self, connection: Any) -> str:
        return "utf8mb4"


def _hint_of(context: Any) -> AbstractContextManager[Any]:
    """The ``ddm_hint`` execution option as an active :func:`ddm_core.hint` (a dict of its arguments, or a
    :class:`~ddm_core.route.hints.Hint`); nothing when the statement has none."""
    given = context.execution_options.get("ddm_hint") if context is not None else None
    if given is None:
        return nullcontext()
    if isinstance(given, Hint):
        given = {f: getattr(given, f) for f in ("database", "table", "strategy", "force_primary")} | (
            {"database_value": given.database_value, "table_value": given.table_value}
            | ({"strategy_value": given.strategy_value} if given.has_strategy_value else {})
        )
    if not isinstance(given, Mapping):
        raise ConfigError(
            f"execution_options(ddm_hint=...) takes a dict of ddm_core.hint() arguments or a Hint, not "
            f"{type(given).__name__}", option="ddm_hint",
        )
    return hint(**given)


def _close(executor: Any, stop_following: Callable[[], None] | None) -> None:
    if stop_following is not None:
        stop_following()
    close = executor.close()
    if close is not None and hasattr(close, "close"):  # an asyncio executor's close() is a coroutine
        close.close()
