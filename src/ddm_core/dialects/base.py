"""What ddm-core asks of a database backend: the :class:`Dialect` base class.

Everything that differs between MySQL, MariaDB, SQLite and PostgreSQL is an
answer one :class:`Dialect` subclass gives; callers ask the dialect instead of
testing backend names. The questions, grouped by who asks:

* **SQL text** (DDL generator, router): the sqlglot dialect to generate,
  identifier quoting, how the routed MySQL DDL is written for the backend,
  index names, the statistics refresh statement, how number literals read.
* **Result typing** (merger): how ``AVG`` of exact values and ``SUM`` of
  integers are typed, so a merged result equals one unsharded table's.
* **Connections** (executor, pools, DDL runner): URL schemes and default
  port, the DB-API module and its paramstyle, whether connections to one
  database see the same data, the statement that cancels a running query.
* **Errors** (driver error mapping): which driver codes mean a duplicate key
  or a lost connection.
* **Server features** (the features built on them): XA, row locks and
  ``SKIP LOCKED``, ``DELETE ... LIMIT``, MySQL's own SQL, a binary log,
  replication status, result columns described by a prepare, ``CRC32C()``.
  Each names what the caller relies on, so a new backend answers feature by
  feature, and messages list the backends that have one (:func:`titles`).

Result-typing defaults are MySQL's: ddm-core speaks MySQL and returns what
MySQL would have returned, so a backend overrides them only where its own
types differ and sharded results must equal unsharded ones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any, ClassVar, Iterable, Sequence


from ddm_core.errors import UnsupportedSQLError

__all__ = ["Dialect", "EXACT", "INPUT"]

#: The dialect users write statements, templates and hints in (its sqlglot name and its
#: ``Endpoint.dialect`` name): ddm-core speaks MySQL whatever the backend.
INPUT = "mysql"

#: Arithmetic for exact (DECIMAL) results. A DECIMAL has at most 65 digits, so 120
#: keep every sum and AVG quotient exact enough that a final quantize is the only rounding.
EXACT = Context(prec=120, rounding=ROUND_HALF_UP)


class Dialect(ABC):
    """One database backend's answers (see the module docstring).

    Subclasses set the class attributes and implement the abstract methods;
    instances hold no state, the registry keeps one per backend.
    """

    #: The backend's name in configurations (``Endpoint.dialect``): ``"mysql"``, ``"sqlite"``...
    name: ClassVar[str]
    #: How messages name it: ``"MySQL"``, ``"SQLite"``...
    title: ClassVar[str]
    #: The sqlglot dialect that generates (and parses) its SQL.
    sqlglot_name: ClassVar[str]
    #: URL schemes naming it (``jdbc:`` prefix and ``+driver`` suffix are stripped first).
    schemes: ClassVar[tuple[str, ...]]
    #: Port a URL without one gets (``None``: not a network server).
    default_port: ClassVar[int | None]
    #: The DB-API module that talks to it (picks the driver adapter in ``execute.drivers``).
    driver_module: ClassVar[str]
    #: Modules the driver's exceptions are defined in (``type(exc).__module__``, first part).
    error_modules: ClassVar[tuple[str, ...]]
    #: Placeholder style of SQL the driver runs: ``"format"`` (``%s``) or ``"qmark"`` (``?``).
    paramstyle: ClassVar[str]
    #: Whether the DDL generator writes (and the DDL runner executes) statements for it.
    writes_ddl: ClassVar[bool] = False
    #: MySQL returns ``SUM`` of an integer column as DECIMAL; the merger sums
    #: ``SUM(DISTINCT int)`` itself and types the total the same way.
    sum_of_integers_is_decimal: ClassVar[bool] = True
    #: Digits ``AVG`` of an exact column adds to its scale (MySQL's ``div_precision_increment``).
    avg_scale_increment: ClassVar[int] = 4
    #: The largest DECIMAL scale (MySQL's ``DECIMAL_MAX_SCALE``).
    decimal_max_scale: ClassVar[int] = 30
    #: Most parameters one statement may bind (``None``: no limit that matters).
    max_statement_params: ClassVar[int | None] = None

    # -- server features: what the features built on a backend rely on --------------------

    #: Statements written in MySQL's own SQL run unchanged (``NOW(6)``, ``UTC_TIMESTAMP(6)``,
    #: ``+ INTERVAL n MICROSECOND``, ``GREATEST``, ``REPLACE INTO``, ``ENGINE=``): the tables
    #: ddm-core keeps on a server for itself (worker-id leases) are written that way.
    runs_mysql_sql: ClassVar[bool] = False
    #: MySQL's XA statements (``XA START`` ... ``XA COMMIT``, ``XA RECOVER``): XA transactions
    #: and their recovery (docs/xa.md).
    supports_xa: ClassVar[bool] = False
    #: A replica reports its replication (``SHOW SLAVE STATUS``, ``@@server_id``,
    #: ``@@gtid_slave_pos``): the lag monitor of read/write splitting checks it (docs/readwrite.md).
    reports_replication: ClassVar[bool] = False
    #: A row-based binary log a replication client reads: a migration's catch-up (docs/migration.md).
    has_binlog: ClassVar[bool] = False
    #: ``COM_STMT_PREPARE`` answers a statement's result columns (types, collations) without
    #: running it: the proxy's described statements and the merge's column collations.
    describes_prepared_columns: ClassVar[bool] = False
    #: ``SELECT ... FOR UPDATE`` locks the rows it reads (SQLite: one writer per file, no clause).
    locks_rows: ClassVar[bool] = True
    #: Every build runs ``DELETE ... LIMIT n`` (SQLite's only when compiled with it: not relied on).
    deletes_with_limit: ClassVar[bool] = False

    # -- SQL text -----------------------------------------------------------------------

    def identifier(self, name: str) -> str:
        """``name`` as an identifier of this dialect, quoted only when it has to be."""
        from sqlglot import exp  # on use: the layers below the router load without it

        return exp.to_identifier(name).sql(self.sqlglot_name)

    def index_name(self, table: str, index: str) -> str:
        """The physical name of index ``index`` of physical table ``table``.

        MySQL scopes index names per table, so the name stays as written;
        backends that scope them per schema override this.
        """
        return index

    def ddl_statements(self, sql: str) -> list[str]:
        """One routed MySQL DDL statement (physical table names) → this backend's statements.

        Raises:
            UnsupportedSQLError: the statement has no translation for this backend.
        """
        raise UnsupportedSQLError(
            f"DDL is not written for {self.title} data sources", sql=sql, construct=self.name
        )

    @abstractmethod
    def analyze_statement(self, tables: Sequence[str]) -> str:
        """The statement refreshing the optimizer statistics of ``tables``."""

    def table_columns_query(self, table: str) -> tuple[str, tuple[Any, ...]]:
        """The query listing physical table ``table``'s columns, in the driver's paramstyle.

        Its rows are ``(column name, declared type, position in the primary key
        or 0)``, in column order; no rows when the table does not exist. The
        executor loads table metadata with it at start-up
        (:mod:`ddm_core.execute.schema_load`).

        Raises:
            UnsupportedSQLError: the backend cannot list columns.
        """
        raise UnsupportedSQLError(
            f"listing the columns of a table is not written for {self.title} data sources", construct=self.name
        )

    def key_kind(self, type_code: Any) -> str | None:
        """The kind of a result column's DB-API type code, named as ``route.table_schema.column_kind`` names a
        declared type's (``integer``, ``decimal``, ``float``, ``string``, ``temporal``, ...); ``None``: unknown.
        A temporary copy is indexed only on join columns compared with columns of their kind (crossnode/copy.py)."""
        return None

    def temporary_copy(self, table: str, select: str, keys: Sequence[tuple[str, Any]] = ()) -> list[str]:
        """The statements that create a temporary table ``table`` (this connection only) with the columns
        ``select`` returns, indexed on ``keys`` (``(column, type code)``), inside an open transaction."""
        name = self.identifier(table)
        return [f"CREATE TEMPORARY TABLE {name} AS {select}"] + [
            f"CREATE INDEX {self.identifier(f'{table}_{n}')} ON {name} ({self.identifier(column)})"
            for n, (column, _) in enumerate(keys)
        ]

    def drop_temporary(self, table: str) -> str:
        return f"DROP TABLE IF EXISTS {self.identifier(table)}"

    def narrows_by(self, values: Iterable[Any]) -> bool:
        """Does ``column IN (values)`` keep every row that ``column = other`` pairs with a row whose
        ``other`` holds one of ``values``? (Narrowing a cross-node part relies on it:
        docs/cross-node-queries.md#strategies.) MySQL compares a list as it compares ``=``."""
        return True

    def exact_literal(self, text: str) -> bool:
        """Does number literal ``text`` with a fraction or exponent read as an exact DECIMAL?

        MySQL: ``123.45`` is DECIMAL, ``1.5e3`` (exponent notation) is DOUBLE.
        Asked of the :data:`INPUT` dialect, the one statements are written in.
        """
        return "e" not in text.lower()

    def string_literal(self, text: str) -> str:
        """``text`` as a string literal of this backend: quotes doubled, backslashes too where
        they start an escape (MySQL's default ``sql_mode``)."""
        return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"

    def listed_tables(self) -> tuple[str, str, str]:
        """How SQL lists the tables and views of the connected database.

        ``(name column, table type expression, FROM ... text)``: the expression gives
        ``'BASE TABLE'`` or ``'VIEW'`` per row of the FROM text. The logical ``SHOW TABLES``
        selects from it on every data source.
        """
        return "table_name", "table_type", "FROM information_schema.tables WHERE table_schema = DATABASE()"

    def binary_order(self, expr: str) -> str:
        """``expr`` (a string) cast so that ORDER BY compares its bytes, as the merger compares them."""
        return f"CAST({expr} AS BINARY)"

    # -- result typing ------------------------------------------------------------------

    def exact_average(self, total: Decimal, count: Any) -> Decimal | float:
        """``AVG`` of exact values: their exact ``total`` divided by ``count`` (> 0).

        MySQL: a DECIMAL with the total's scale + :attr:`avg_scale_increment` digits,
        at most :attr:`decimal_max_scale`, rounded half away from zero — ``AVG`` of ``1, 2, 2`` is
        ``Decimal("1.6667")``, of DECIMAL(10,2) ``1.00, 2.00, 2.00`` ``Decimal("1.666667")``.
        """
        exponent = total.as_tuple().exponent
        scale = -exponent if isinstance(exponent, int) and exponent < 0 else 0
        scale = min(scale + self.avg_scale_increment, self.decimal_max_scale)
        return EXACT.divide(total, Decimal(count)).quantize(Decimal(1).scaleb(-scale), context=EXACT)

    # -- connections --------------------------------------------------------------------

    def packet_limit_query(self) -> str | None:
        """A query whose one value is the most bytes a statement sent to this server may have.

        ``None``: no such limit worth asking for (multi-row INSERTs are then cut
        by :attr:`max_statement_params` only).
        """
        return None

    def connections_share_data(self, database: str | None) -> bool:
        """Do all connections to ``database`` see the same data? (``False``: pool one connection.)"""
        return True

    def prepare_storage(self, database: str | None) -> None:
        """Make room for a DDL run to create ``database`` (a file's directory, say).

        Raises:
            OSError: the room cannot be made.
        """

    def cancel_statement(self, connection_id: int) -> str | None:
        """SQL that, sent on another connection, stops what connection ``connection_id`` runs.

        ``None``: the driver cancels through its own API instead.
        """
        return None

    # -- server features that depend on the release ------------------------------------

    def supports_skip_locked(self, version: str | None) -> bool:
        """Does a server reporting ``VERSION()`` = ``version`` have ``FOR UPDATE SKIP LOCKED``?

        ``None`` or a text naming no release: no (``FOR UPDATE`` is always safe).
        """
        return False

    def has_crc32c(self, version: str) -> bool:
        """Does a server reporting ``VERSION()`` = ``version`` have the SQL function ``CRC32C()``?"""
        return False

    # -- errors ---------------------------------------------------------------------------

    @abstractmethod
    def is_duplicate_key(self, exc: BaseException, code: Any) -> bool:
        """Does driver exception ``exc`` (error code ``code``) report a violated unique key?"""

    @abstractmethod
    def is_disconnect(self, exc: BaseException, code: Any) -> bool:
        """Does driver exception ``exc`` (error code ``code``) mean the connection is gone or never came?"""

    def ends_connection(self, exc: BaseException, code: Any) -> bool:
        """After ``exc``, does the server close this connection although the server itself is fine?

        Such a connection is not given back to its pool, and the error is not an outage (no
        breaker counts it): a statement larger than the server's packet limit, for one.
        """
        return False

    def __repr__(self) -> str:
        return f"<Dialect {self.name}>"
