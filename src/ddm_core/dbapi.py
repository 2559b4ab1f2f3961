"""A PEP 249 (DB-API 2.0) facade: code written for PyMySQL runs on sharded tables unchanged.

::

    conn = ddm_core.dbapi.connect("orders.yaml")
    with conn.cursor() as cur:
        cur.execute("SELECT order_id, amount FROM t_order WHERE user_id = %s", (10086,))
        rows = cur.fetchall()
        cur.executemany("INSERT INTO t_order (user_id, amount) VALUES (%s, %s)", rows_to_add)
    conn.commit()

* ``paramstyle = "format"`` (``%s``; ``%(name)s`` with a mapping and ``?``
  are accepted too), ``threadsafety = 1`` (share the module, not connections),
  ``apilevel = "2.0"``.
* **Transactions.** Like PyMySQL, a connection starts with autocommit off: the
  first statement opens a local transaction that :meth:`Connection.commit` /
  :meth:`Connection.rollback` ends (see
  :mod:`ddm_core.execute.transaction`: one pinned connection per data source
  used, writes to one data source only, :class:`CrossShardTransactionError`
  before a second one is touched; ``connect(..., transaction_mode="xa")`` makes
  them XA transactions over several data sources, docs/xa.md). ``connect(..., autocommit=True)`` or
  ``conn.autocommit(True)`` runs every statement on its own — the right mode
  for read-mostly services and for bulk loads over many shards: a connection
  with an open transaction holds its pinned pool connections until it ends.
* **executemany** of ``INSERT/REPLACE ... VALUES (%s, ...)`` sends one multi-row
  INSERT per target: the rows are cut into batches of :attr:`Cursor.batch_rows`
  (1000; ``None`` for the whole sequence at once), each routed as one multi-row
  INSERT through the router's batch path — one INSERT per physical table per
  batch; the same batch text is reused, so only the first batch is parsed.
  Other statements run once per parameter set.
* **Who owns the pools.** ``connect(source)`` (a path, YAML text, dict or
  configuration object) builds a new :class:`~ddm_core.execute.Executor` —
  pools, threads — that belongs to that connection: ``close()`` closes it, and
  a path is read when you connect, so an edited file is what the next
  connection gets. Sharing is explicit: build one executor per process and
  connect per request with ``connect(executor=executor)``, which is cheap;
  those connections never close the executor (you do, or ``with Executor(...)``).
* **Errors.** The PEP 249 classes below are defined here; every ddm-core error
  leaving the facade is re-raised as a class that inherits from *both* the
  ddm-core class and its PEP 249 counterpart, so ``except
  dbapi.IntegrityError`` and ``except ddm_core.DuplicateKeyError`` both catch
  a duplicate key, and ``__cause__`` is still the driver's exception. The
  classes are also attributes of :class:`Connection` (``conn.IntegrityError``),
  as PyMySQL offers them. The mapping:

  ========================================================  ======================
  ddm-core error                                            PEP 249 class
  ========================================================  ======================
  DuplicateKeyError                                         IntegrityError
  DataSourceUnavailableError, PoolTimeoutError,             OperationalError
  QueryTimeoutError, XaBranchAbortedError,
  XaTimeoutError, XaCapacityError, XaInDoubtError
  ExecutionError (other driver errors)                      the driver error's own
                                                            PEP 249 class, else
                                                            DatabaseError
  MergeError, ShardValueError                               DataError
  CrossShardTransactionError, UnsupportedSQLError,          NotSupportedError
  FullRouteError, DeepPaginationError, ShardKeyUpdateError
  ParameterError, other RoutingError, TransactionError      ProgrammingError
  ConfigError                                               InterfaceError
  IdGenerationError                                         InternalError
  ========================================================  ======================

  Misuse of the facade itself (a closed cursor, fetch before execute) raises
  :class:`ProgrammingError` / :class:`InterfaceError` directly.
"""

from __future__ import annotations

import functools
import re
import threading
import weakref
from typing import (
    Any, Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping, NoReturn, ParamSpec, Sequence, TypeVar,
)

from ddm_core.dbapi_types import (
    BINARY, DATETIME, NUMBER, ROWID, STRING, Binary, Date, DateFromTicks, Time, TimeFromTicks, Timestamp,
    TimestampFromTicks,
)
from ddm_core.errors import (
    ConfigError,
    CrossShardTransactionError,
    DataSourceUnavailableError,
    DdmError,
    DeepPaginationError,
    DuplicateKeyError,
    ExecutionError,
    FullRouteError,
    IdGenerationError,
    MergeError,
    PoolTimeoutError,
    QueryTimeoutError,
    RoutingError,
    ShardKeyUpdateError,
    ShardValueError,
    TransactionError,
    UnsupportedSQLError,
    XaBranchAbortedError,
    XaCapacityError,
    XaInDoubtError,
    XaTimeoutError,
)
from ddm_core.execute import Executor, Result, Transaction
from ddm_core.execute.bulk import Limits, regroup
from ddm_core.execute.isolation import characteristics
from ddm_core.execute.savepoints import opens_transaction
from ddm_core.execute.shared import style_of
from ddm_core.execute.transaction import check_mode
from ddm_core.route.plan import RoutePlan
from ddm_core.route.router import Router
from ddm_core.route.text.placeholders import translate
from ddm_core.session_facts import (
    CHARSET, FACTS_SQL, Control, Isolation, Local, Savepoint, SessionFacts, SessionLevel, emulated_facts, facts_of, local_answer,
    needs_server_facts, result_of, session_statement,
)

__all__ = [
    "apilevel",
    "threadsafety",
    "paramstyle",
    "connect",
    "Connection",
    "Cursor",
    "Warning",
    "Error",
    "InterfaceError",
    "DatabaseError",
    "DataError",
    "OperationalError",
    "IntegrityError",
    "InternalError",
    "ProgrammingError",
    "NotSupportedError",
    # PEP 249's type objects and constructors (ddm_core.dbapi_types)
    "Date", "Time", "Timestamp", "DateFromTicks", "TimeFromTicks", "TimestampFromTicks", "Binary",
    "STRING", "BINARY", "NUMBER", "DATETIME", "ROWID",
]

apilevel = "2.0"
threadsafety = 1
paramstyle = "format"


# -- the PEP 249 exception hierarchy ---------------------------------------------------------


class Warning(Exception):  # noqa: A001 - the name PEP 249 prescribes
    """Important warnings (PEP 249)."""


class Error(Exception):
    """Base of every PEP 249 error."""


class InterfaceError(Error):
    """The facade itself was misused or misconfigured."""


class DatabaseError(Error):
    """An error related to the database."""


class DataError(DatabaseError):
    """A problem with the processed data (a value out of range, an incomparable sort key)."""


class OperationalError(DatabaseError):
    """The database's operation failed: unavailable, timed out, pool exhausted."""


class IntegrityError(DatabaseError):
    """Relational integrity was violated (a duplicate key)."""


class InternalError(DatabaseError):
    """The database (or ddm-core) hit an internal error."""


class ProgrammingError(DatabaseError):
    """A programming error: bad parameters, an unroutable statement, a closed cursor."""


class NotSupportedError(DatabaseError):
    """Something the sharded database does not support (a cross-shard write transaction...)."""


_PEP249_ERRORS: tuple[type[Error], ...] = (
    IntegrityError,
    DataError,
    ProgrammingError,
    NotSupportedError,
    InternalError,
    OperationalError,
    InterfaceError,
    DatabaseError,
)
_BY_NAME = {cls.__name__: cls for cls in _PEP249_ERRORS}

# Most specific first: the first entry the error is an instance of decides.
_MAPPING: tuple[tuple[type[DdmError], type[Error]], ...] = (
    (DuplicateKeyError, IntegrityError),
    (DataSourceUnavailableError, OperationalError),
    (PoolTimeoutError, OperationalError),
    (QueryTimeoutError, OperationalError),
    (MergeError, DataError),
    (ShardValueError, DataError),
    (CrossShardTransactionError, NotSupportedError),
    (UnsupportedSQLError, NotSupportedError),
    (FullRouteError, NotSupportedError),
    (DeepPaginationError, NotSupportedError),
    (ShardKeyUpdateError, NotSupportedError),
    (XaBranchAbortedError, OperationalError),
    (XaTimeoutError, OperationalError),
    (XaCapacityError, OperationalError),
    (XaInDoubtError, OperationalError),
    (RoutingError, ProgrammingError),
    (TransactionError, ProgrammingError),
    (ConfigError, InterfaceError),
    (IdGenerationError, InternalError),
)

_FACADE_CLASSES: dict[tuple[type[DdmError], type[Error]], type[Error]] = {}
_FACADE_LOCK = threading.Lock()


def _pep249_class_for(exc: DdmError) -> type[Error]:
    for ddm_cls, pep_cls in _MAPPING:
        if isinstance(exc, ddm_cls):
            return pep_cls
    # Any other driver error keeps its own PEP 249 class (drivers follow PEP 249 names).
    cause = exc.__cause__ if isinstance(exc, ExecutionError) else None
    if cause is not None:
        for klass in type(cause).__mro__:
            found = _BY_NAME.get(klass.__name__)
            if found is not None:
                return found
    return DatabaseError


def _facade_class(ddm_cls: type[DdmError], pep_cls: type[Error]) -> type[Error]:
    key = (ddm_cls, pep_cls)
    cls = _FACADE_CLASSES.get(key)
    if cls is None:
        with _FACADE_LOCK:
            cls = _FACADE_CLASSES.get(key)
            if cls is None:
                cls = type(ddm_cls.__name__, (ddm_cls, pep_cls), {"__module__": __name__})
                _FACADE_CLASSES[key] = cls
    return cls


def to_pep249(exc: DdmError) -> Error:
    """``exc`` as an instance of a class inheriting from its class and its PEP 249 class."""
    if isinstance(exc, Error):
        return exc
    cls = _facade_class(type(exc), _pep249_class_for(exc))
    new = cls.__new__(cls)
    DdmError.__init__(new, exc.message, **exc.context)  # type: ignore[arg-type]
    return new


F = TypeVar("F", bound=Callable[..., Any])


def reraise(exc: DdmError) -> NoReturn:
    """Raise ``exc`` as its PEP 249 facade class (as it is, when it already is one)."""
    if isinstance(exc, Error):
        raise exc
    raise to_pep249(exc).with_traceback(exc.__traceback__) from exc.__cause__


def translated(func: F) -> F:
    """Re-raise ddm-core errors escaping ``func`` as their PEP 249 facade classes.

    The per-statement methods (``Cursor.execute``, ``fetch*``) catch inline
    instead: a wrapper is one more Python frame on every statement.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DdmError as exc:
            reraise(exc)

    return wrapper  # type: ignore[return-value]


P = ParamSpec("P")
T = TypeVar("T")


def translated_async(func: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """:func:`translated` for coroutine functions (the asyncio facade, :mod:`ddm_core.aio.dbapi`)."""

    @functools.wraps(func)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await func(*args, **kwargs)
        except DdmError as exc:
            reraise(exc)

    return wrapper


# -- connect ----------------------------------------------------------------------------------

@translated
def connect(
    config_or_path: Any = None,
    *,
    executor: Executor | None = None,
    autocommit: bool = False,
    transaction_mode: str | None = None,
    **executor_options: Any,
) -> Connection:
    """Open a DB-API connection over a sharding configuration.

    Args:
        config_or_path: A configuration path, YAML text, dict,
            :class:`~ddm_core.metadata.model.ShardingConfig`,
            :class:`~ddm_core.metadata.ConfigHolder` or
            :class:`~ddm_core.Router`: the connection builds its own executor
            from it and closes that executor in :meth:`Connection.close`.
        executor: Share this executor instead (the connection never closes it);
            then neither ``config_or_path`` nor executor options may be given.
        autocommit: Run every statement on its own (PyMySQL's default is off).
        transaction_mode: ``"local"`` or ``"xa"`` (two-phase commit over several
            data sources, docs/xa.md) for this connection's transactions;
            default: the executor's ``transaction_mode``.
        **executor_options: Passed to the :class:`~ddm_core.execute.Executor`
            the connection builds (``timeout``, ``max_concurrency``...).

    Raises:
        InterfaceError: no configuration given, a configuration and
            ``executor=`` both given, or the configuration is invalid.
    """
    check_connect_arguments(config_or_path, executor, executor_options)
    if executor is not None:
        return Connection(executor, autocommit=autocommit, transaction_mode=transaction_mode)
    if transaction_mode is not None:
        check_mode(transaction_mode)  # before an executor (pools, threads) is built for nothing
    return Connection(
        Executor(config_or_path, **executor_options), autocommit=autocommit, owns_executor=True,
        transaction_mode=transaction_mode,
    )


def check_connect_arguments(config_or_path: Any, executor: object | None, executor_options: Mapping[str, Any]) -> None:
    """Refuse what no ``connect()`` accepts (this one's and :func:`ddm_core.aio.dbapi.connect`'s).

    Raises:
        InterfaceError: neither a configuration nor an executor, or an executor
            together with a configuration or executor options.
    """
    if executor is not None:
        if config_or_path is not None or executor_options:
            given = ", ".join(["a configuration"] * (config_or_path is not None) + sorted(executor_options))
            raise InterfaceError(
                f"connect(executor=...) shares that executor as it is; it cannot also take {given} "
                "(build the executor with those instead)"
            )
    elif config_or_path is None:
        raise InterfaceError("connect() needs a configuration (path, text, dict or object) or executor=")


# -- Connection ---------------------------------------------------------------------------------


class Connection:
    """A DB-API connection over an :class:`~ddm_core.execute.Executor`.

    Args:
        executor: Where statements run.
        autocommit: Run every statement on its own.
        owns_executor: :meth:`close` closes the executor too (:func:`connect`
            sets it for an executor it built from a configuration).

    Not thread-safe (``threadsafety = 1``): one connection per thread.
    """

    Warning = Warning
    Error = Error
    InterfaceError = InterfaceError
    DatabaseError = DatabaseError
    DataError = DataError
    OperationalError = OperationalError
    IntegrityError = IntegrityError
    InternalError = InternalError
    ProgrammingError = ProgrammingError
    NotSupportedError = NotSupportedError

    def __init__(
        self, executor: Executor, *, autocommit: bool = False, owns_executor: bool = False,
        transaction_mode: str | None = None,
    ) -> None:
        self._executor: Executor | None = executor
        self._autocommit = autocommit
        self._mode = check_mode(transaction_mode) if transaction_mode is not None else None
        self._tx: Transaction | None = None
        self._owns_executor = owns_executor
        self._level = SessionLevel()

    @property
    def owns_executor(self) -> bool:
        """:meth:`close` closes the executor (it was built for this connection)."""
        return self._owns_executor

    @property
    def executor(self) -> Executor:
        """The executor underneath (pools, stats)."""
        return self._live()

    @property
    def closed(self) -> bool:
        return self._executor is None

    @property
    def in_transaction(self) -> bool:
        """A transaction is open (statements ran since the last commit / rollback)."""
        return self._tx is not None

    def _live(self) -> Executor:
        if self._executor is None:
            raise InterfaceError("the connection is closed")
        return self._executor

    def cursor(self) -> Cursor:
        """A new cursor."""
        self._live()
        return Cursor(self)

    def autocommit(self, value: bool) -> None:
        """Switch autocommit (PyMySQL style); switching it on commits an open transaction."""
        value = bool(value)
        if value and self._tx is not None:
            self.commit()
        self._autocommit = value

    def get_autocommit(self) -> bool:
        return self._autocommit

    def begin(self) -> None:
        """Start a transaction now (also with autocommit on, until commit / rollback)."""
        if self._tx is None:
            self._tx = self._new_transaction(self._live())

    def _new_transaction(self, executor: Executor) -> Transaction:
        tx = executor.transaction(mode=self._mode)
        tx.isolation = self._level.take()
        return tx

    # -- what clients ask of the session (docs/sqlalchemy.md#what-the-facade-answers) ----------------

    def character_set_name(self) -> str:
        """The character set of every connection underneath: ``utf8mb4`` (PyMySQL's method)."""
        return CHARSET

    def get_server_info(self) -> str:
        """The server version clients see (:mod:`ddm_core.session_facts`)."""
        return self.session_facts().version

    def ping(self, reconnect: bool = False) -> None:
        """Raise when the connection is closed (PyMySQL's method).

        There is no single server behind a facade connection: each pooled connection is
        checked when it is borrowed, so a live facade connection is usable as it is.
        """
        self._live()

    def session_facts(self) -> SessionFacts:
        """What the data sources' server reports (version, sql_mode...), read once per executor."""
        return facts_for(self._live())

    def _answer(self, local: Local) -> Result:
        """Carry out what the session answers itself."""
        if isinstance(local, Control):
            if local.command == "ROLLBACK":
                self.rollback()
            else:
                spelled = local.characteristics and characteristics(local.characteristics)  # a conflict: nothing done
                self.commit()  # BEGIN commits an open transaction first, as on MySQL
                if local.command == "BEGIN":
                    self.begin()
                    if spelled and self._tx is not None:
                        try:  # each pin opens with them; WITH CONSISTENT SNAPSHOT opens every data source now
                            self._tx.start(spelled, self._live().config.data_sources)
                        except BaseException:
                            self._tx = None
                            raise
        elif isinstance(local, Savepoint):
            tx = self._tx
            if tx is None and opens_transaction(local.command, local.name, self._autocommit):
                tx = self._tx = self._new_transaction(self._live())
            if tx is not None:
                tx.run_savepoint(local.command, local.name)
        elif isinstance(local, Isolation):
            self._level.set(local)
        return result_of(local)

    @translated
    def commit(self) -> None:
        """Commit the open transaction (nothing to do without one)."""
        self._live()
        tx, self._tx = self._tx, None
        if tx is not None:
            tx.commit()

    @translated
    def rollback(self) -> None:
        """Roll the open transaction back (nothing to do without one)."""
        self._live()
        tx, self._tx = self._tx, None
        if tx is not None:
            tx.rollback()

    def close(self) -> None:
        """Roll back an open transaction and release its connections; the connection is unusable after.

        An executor this connection owns (:attr:`owns_executor`) is closed too.
        """
        executor = self._executor
        if executor is None:
            return
        tx, self._tx = self._tx, None
        self._executor = None
        try:
            if tx is not None:
                tx.rollback()
        finally:
            if self._owns_executor:
                executor.close()

    def _run(self, sql: str, params: Any) -> Result:
        executor = self._live()
        classified = session_statement(sql)
        if classified is not None:
            local = local_answer(sql, classified, executor.config, facts_for(executor), self._level.current,
                                 self._autocommit)  # fmt: skip
            if local is not None:
                return self._answer(local)
        return self._run_plan(executor.router.route(sql, params), style_of(sql), executor)

    def _run_plan(self, plan: RoutePlan, style: str, executor: Executor | None = None) -> Result:
        """Run a routed plan: in the open (or implicitly opened) transaction, or on its own in autocommit."""
        if executor is None:
            executor = self._live()
        tx = self._tx
        if plan.statement == "ddl":  # as on MySQL: DDL commits the open transaction, then runs on its own
            self.commit()
            return executor.execute_plan(plan, caller_style=style)
        if tx is None:
            if self._autocommit:
                return executor.execute_plan(plan, caller_style=style)
            tx = self._tx = self._new_transaction(executor)
        return tx.execute_plan(plan, caller_style=style)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """Commit on success, roll back on an exception, then close (as psycopg 3 does)."""
        try:
            if self._executor is not None:
                if exc_type is None:
                    self.commit()
                else:
                    self.rollback()
        finally:
            self.close()

    def __del__(self) -> None:
        # A connection dropped without close(): give back its pinned connections, and
        # the pools and threads of an executor it owns.
        if getattr(self, "_tx", None) is not None or (
            getattr(self, "_owns_executor", False) and getattr(self, "_executor", None) is not None
        ):
            try:
                self.close()
            except Exception:  # noqa: S110
                pass

    def __repr__(self) -> str:
        state = "closed" if self._executor is None else ("in transaction" if self._tx else "idle")
        return f"<ddm_core.dbapi.Connection {state} autocommit={self._autocommit}>"


_FACTS: weakref.WeakKeyDictionary[Executor, SessionFacts] = weakref.WeakKeyDictionary()


def facts_for(executor: Executor) -> SessionFacts:
    """The server facts of ``executor``'s data sources: read from the server once, then remembered."""
    facts = _FACTS.get(executor)
    if facts is None:
        config = executor.config
        if needs_server_facts(config):
            with executor.execute(FACTS_SQL) as result:
                facts = facts_of(result.fetchall())
        else:
            facts = emulated_facts(config)
        _FACTS[executor] = facts
    return facts


# -- Cursor ----------------------------------------------------------------------------------------

# PyMySQL's INSERT ... VALUES matcher, with ``?`` rows accepted too: the VALUES row
# must be placeholders only; anything after it must be ON DUPLICATE KEY UPDATE.
_INSERT_VALUES = re.compile(
    r"\s*((?:INSERT|REPLACE)\b.+\bVALUES?\s*)"
    r"(\(\s*(?:%s|%\([^()]+\)s|\?)\s*(?:,\s*(?:%s|%\([^()]+\)s|\?)\s*)*\))"
    r"(\s*(?:ON\s+DUPLICATE.*)?);?\s*\Z",
    re.IGNORECASE | re.DOTALL,
)
_NAMED = re.compile(r"%\(([^()]+)\)s")


class Cursor:
    """A DB-API cursor. Rows stream from the shards (see :class:`~ddm_core.execute.Result`).

    Attributes:
        arraysize: Default :meth:`fetchmany` size.
        batch_rows: Rows per multi-row INSERT batch in :meth:`executemany`
            (``None``: the whole sequence as one INSERT). 1000 keeps each
            batch's SQL text the same from call to call, so the router parses
            it once (a new row count is a new text to parse), and keeps
            statements well inside ``max_allowed_packet`` and SQLite's
            variable limit.
    """

    batch_rows: int | None = 1000

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.arraysize = 1
        self._result: Result | None = None
        self._rowcount = -1
        self._lastrowid: Any = None
        self._generated: tuple[Any, ...] = ()
        self._complete = True
        self._closed = False

    # -- attributes ---------------------------------------------------------------------------

    @property
    def description(self) -> Any:
        """DB-API 7-tuples of the last statement's columns, ``None`` without rows."""
        return self._result.description if self._result is not None else None

    @property
    def rowcount(self) -> int:
        """Affected rows (summed over shards) or, for a SELECT, rows when known; -1 otherwise."""
        if self._result is not None:
            return self._result.rowcount
        return self._rowcount

    @property
    def lastrowid(self) -> Any:
        """The first key ddm-core generated for the last INSERT (as ``LAST_INSERT_ID()`` names the first
        row's), else the driver's ``lastrowid`` of a single-shard INSERT, else ``None``; every
        generated key: :attr:`generated_keys`."""
        return self._lastrowid

    @property
    def generated_keys(self) -> tuple[Any, ...]:
        """Keys ddm-core generated for the inserted rows, in row order (all batches)."""
        return self._generated

    @property
    def complete(self) -> bool:
        """``False`` when the last result is partial (shards timed out; see ``allow_partial``)."""
        return self._complete

    @property
    def closed(self) -> bool:
        return self._closed

    # -- executing ----------------------------------------------------------------------------

    def _check(self) -> Connection:
        if self._closed:
            raise ProgrammingError("the cursor is closed")
        if self.connection.closed:
            raise ProgrammingError("the connection is closed")
        return self.connection

    def _reset(self) -> None:
        result, self._result = self._result, None
        if result is not None:
            result.close(quiet=True)
        self._rowcount = -1
        self._lastrowid = None
        self._generated = ()
        self._complete = True

    def execute(self, query: str, args: Any = None) -> int:
        """Run one statement. Returns the affected row count (as PyMySQL does)."""
        conn = self._check()
        previous = self._result
        if previous is not None:
            self._result = None
            previous.close(quiet=True)
        try:
            result = conn._run(query, args)
        except BaseException as exc:
            self._reset()
            if isinstance(exc, DdmError):
                reraise(exc)
            raise
        return self._take(result)

    def _take(self, result: Result) -> int:
        """Take a statement's result (every attribute of the last statement is set here); its row count."""
        self._lastrowid = first_key(result)
        self._generated = result.generated_keys
        self._complete = result.complete
        if result.description is None:
            self._rowcount = count = result.rowcount
            result.close()
            return count
        self._rowcount = -1
        self._result = result
        return result.rowcount

    @translated
    def executemany(self, query: str, seq_of_args: Iterable[Any]) -> int:
        """Run ``query`` for every parameter set; INSERT ... VALUES goes out as multi-row batches.

        Returns:
            The affected rows, summed.
        """
        conn = self._check()
        self._reset()
        rows = list(seq_of_args)
        if not rows:
            self._rowcount = 0
            return 0
        batch = insert_batch(query)
        total = 0
        keys: list[Any] = []
        complete = True
        if batch is None:
            for args in rows:
                result = conn._run(query, args)
                total += max(result.rowcount, 0)
                keys.extend(result.generated_keys)
                complete = complete and result.complete
                result.close()
        else:
            for result in self._insert_many(conn, batch, query, rows):
                total += max(result.rowcount, 0)
                keys.extend(result.generated_keys)
                complete = complete and result.complete
                result.close()
        self._rowcount = total
        self._generated = tuple(keys)
        self._complete = complete
        return total

    def _insert_many(self, conn: Connection, batch: InsertBatch, query: str, rows: list[Any]) -> Iterator[Result]:
        """Route every chunk first (nothing is sent), then send the rows per physical table.

        See :mod:`ddm_core.execute.bulk`; when the plans cannot be regrouped
        they run chunk by chunk as routed.
        """
        executor = conn._live()
        plans, style = insert_plans(
            executor.router, batch, rows, self.batch_rows, lambda ds: executor.primary_pool(ds).statement_limits()
        )
        for plan in plans:
            yield conn._run_plan(plan, style)

    # -- fetching -----------------------------------------------------------------------------

    def _rows(self) -> Result:
        self._check()
        if self._result is None:
            raise ProgrammingError("no result set: execute a statement that returns rows first")
        return self._result

    def fetchone(self) -> tuple[Any, ...] | None:
        try:
            return self._rows().fetchone()
        except DdmError as exc:
            reraise(exc)

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        try:
            return self._rows().fetchmany(self.arraysize if size is None else size)
        except DdmError as exc:
            reraise(exc)

    def fetchall(self) -> list[tuple[Any, ...]]:
        try:
            return self._rows().fetchall()
        except DdmError as exc:
            reraise(exc)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchone, None)

    # -- the rest of PEP 249 ------------------------------------------------------------------

    def close(self) -> None:
        """Close the cursor and its result (returning any connection a streamed result holds).

        The last statement's :attr:`rowcount`, :attr:`lastrowid` and :attr:`generated_keys` stay
        readable, as PyMySQL's do: SQLAlchemy closes a DML statement's cursor before it reads them.
        """
        if not self._closed:
            result, self._result = self._result, None
            if result is not None:
                self._rowcount = result.rowcount
                result.close(quiet=True)
            self._closed = True

    def setinputsizes(self, sizes: Any) -> None:
        """Does nothing (allowed by PEP 249)."""

    def setoutputsize(self, size: Any, column: Any = None) -> None:
        """Does nothing (allowed by PEP 249)."""

    def nextset(self) -> None:
        """Multiple result sets are not supported: always ``None``."""
        return None

    def callproc(self, procname: str, args: Sequence[Any] = ()) -> Any:
        raise NotSupportedError("stored procedures cannot be routed across shards (callproc)")

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ddm_core.dbapi.Cursor {'closed' if self._closed else 'open'} rowcount={self.rowcount}>"


def first_key(result: Any) -> Any:
    """A result's ``lastrowid`` as the facades report it: the first generated key, else the driver's."""
    keys = result.generated_keys
    return keys[0] if keys else result.lastrowid


class InsertBatch:
    """An ``INSERT ... VALUES (row)`` statement cut into prefix, row template and suffix."""

    __slots__ = ("prefix", "row", "suffix", "names")

    def __init__(self, prefix: str, row: str, suffix: str, names: tuple[str, ...] | None) -> None:
        self.prefix = prefix
        self.row = row
        self.suffix = suffix
        self.names = names  # keys of a %(name)s row, in order; None for positional rows

    def build(self, rows: Sequence[Any]) -> tuple[str, list[Any]]:
        sql = self.prefix + ", ".join([self.row] * len(rows)) + self.suffix
        params: list[Any] = []
        if self.names is None:
            for args in rows:
                params.extend(args)
        else:
            names = self.names
            for args in rows:
                params.extend(args[name] for name in names)
        return sql, params


def insert_plans(
    router: Router, batch: InsertBatch, rows: Sequence[Any], batch_rows: int | None, limits: Limits
) -> tuple[list[RoutePlan], str]:
    """``rows`` routed in chunks of ``batch_rows`` (``None``: one chunk), regrouped per physical table.

    Nothing is sent. The chunks' plans are joined and re-cut to ``limits``
    (:func:`~ddm_core.execute.bulk.regroup`); when they cannot be, they run
    chunk by chunk as routed.

    Returns:
        The plans to run in order, and the caller's paramstyle.
    """
    size = len(rows) if batch_rows is None else max(1, batch_rows)
    chunks = [batch.build(rows[start : start + size]) for start in range(0, len(rows), size)]
    style = style_of(chunks[0][0])
    plans = [router.route(sql, params) for sql, params in chunks]
    placeholder = "?" if style == "qmark" else "%s"
    merged = regroup(plans, batch.row, placeholder, limits)
    return (plans if merged is None else [merged]), style


def insert_batch(query: str) -> InsertBatch | None:
    """Cut an INSERT/REPLACE with a placeholder-only VALUES row; ``None`` when it is not one."""
    m = _INSERT_VALUES.match(query)
    if m is None:
        return None
    prefix, row, suffix = m.group(1), m.group(2).rstrip(), m.group(3) or ""
    try:
        if translate(prefix + " " + suffix).names:  # placeholders outside the row: run row by row
            return None
    except DdmError:
        return None
    names = tuple(_NAMED.findall(row))
    if names:
        row = _NAMED.sub("%s", row)
        return InsertBatch(prefix, row, suffix, names)
    return InsertBatch(prefix, row, suffix, None)
