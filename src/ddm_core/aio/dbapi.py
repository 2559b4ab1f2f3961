"""The asyncio DB-API-like facade, shaped like aiomysql's: code written for aiomysql runs on sharded tables.

::

    conn = await ddm_core.aio.connect("orders.yaml")
    async with conn.cursor() as cur:
        await cur.execute("SELECT order_id, amount FROM t_order WHERE user_id = %s", (10086,))
        rows = await cur.fetchall()
        await cur.executemany("INSERT INTO t_order (user_id, amount) VALUES (%s, %s)", rows_to_add)
    await conn.commit()
    await conn.ensure_closed()

The rules are :mod:`ddm_core.dbapi`'s over an :class:`~ddm_core.aio.AsyncExecutor`; only the
calls that wait are coroutines:

* **connect** takes the same arguments and refuses the same mistakes (a configuration builds an
  executor the connection owns and closes; ``executor=`` shares one, never closed by the
  connection). ``transaction_mode`` (``"local"`` or ``"xa"``) is an executor option here.
* **Transactions.** Autocommit is off (PyMySQL's and aiomysql's default): the first statement opens
  the executor's kind of transaction that :meth:`AsyncConnection.commit` /
  :meth:`AsyncConnection.rollback` ends — one pinned connection per data source used; a local one
  writes to one data source only (:class:`~ddm_core.errors.CrossShardTransactionError`, a
  ``NotSupportedError``, before a second one is touched), an XA one
  (:class:`~ddm_core.aio.xa.AsyncXaTransaction`) to any number, committed in two phases.
* **executemany** of ``INSERT/REPLACE ... VALUES (%s, ...)`` is routed in chunks of
  :attr:`AsyncCursor.batch_rows` and regrouped per physical table, as the thread facade does it;
  the statements are cut to a fixed size (see :func:`_fixed_limits`), not to the server's own
  packet limit. Other statements run once per parameter set.
* **Errors** are the thread facade's classes and mapping (``except conn.IntegrityError`` and
  ``except ddm_core.DuplicateKeyError`` both catch a duplicate key).
* **Closing.** ``await conn.ensure_closed()`` rolls an open transaction back, gives back the
  connections of cursors still streaming, and closes an executor the connection built, waiting
  for all of it. ``conn.close()`` does not wait: on a running loop the same work is scheduled as a
  task (``ensure_closed()`` afterwards waits for it); with no loop running, the transaction's
  connections are closed instead — the server rolls back what a closed session left open.

Use a connection and its cursors from one task at a time, as aiomysql's.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import weakref
from typing import Any, AsyncIterator, Generator, Iterable, Sequence

from ddm_core.aio.executor import AsyncExecutor
from ddm_core.aio.result import AsyncResult
from ddm_core.aio.transaction import AsyncTransaction
from ddm_core.dbapi import (
    DatabaseError,
    first_key,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    Warning,
    check_connect_arguments,
    insert_batch,
    insert_plans,
    reraise,
    translated,
    translated_async,
)
from ddm_core.errors import DdmError, TransactionCharacteristicsError
from ddm_core.execute.bulk import Limits
from ddm_core.execute.isolation import READ_WRITE, characteristics
from ddm_core.execute.pools import FALLBACK_PACKET
from ddm_core.execute.savepoints import opens_transaction
from ddm_core.execute.shared import style_of
from ddm_core.route.plan import RoutePlan
from ddm_core.session_facts import (
    CHARSET, FACTS_SQL, Control, Isolation, Local, Savepoint, SessionFacts, SessionLevel, emulated_facts, facts_of, local_answer,
    needs_server_facts, result_of, session_statement,
)

__all__ = ["connect", "Connecting", "AsyncConnection", "AsyncCursor", "AsyncCursorContext"]

log = logging.getLogger("ddm_core.aio")

Row = tuple[Any, ...]

#: Closings :meth:`AsyncConnection.close` scheduled and nobody awaits (the loop keeps weak references only).
_CLOSING: set[asyncio.Task[None]] = set()


@translated
def connect(
    config_or_path: Any = None,
    *,
    executor: AsyncExecutor | None = None,
    autocommit: bool = False,
    **executor_options: Any,
) -> Connecting:
    """Open an asyncio DB-API connection over a sharding configuration.

    As aiomysql's: ``conn = await connect(...)``, or ``async with connect(...) as conn:`` (committed
    on success, rolled back on an exception, then closed). Nothing is sent until a statement runs.

    Args:
        config_or_path: What :func:`ddm_core.dbapi.connect` takes: the connection builds its own
            :class:`~ddm_core.aio.AsyncExecutor` from it and closes it in :meth:`AsyncConnection.ensure_closed`.
        executor: Share this executor instead (the connection never closes it); then neither
            ``config_or_path`` nor executor options may be given.
        autocommit: Run every statement on its own (off by default, as in aiomysql).
        **executor_options: Passed to the :class:`~ddm_core.aio.AsyncExecutor` the connection builds
            (``timeout``, ``stream``, ``full_route_concurrency``...).

    Raises:
        InterfaceError: no configuration given, a configuration and ``executor=`` both given, or the
            configuration (or an executor option) is invalid.
    """
    check_connect_arguments(config_or_path, executor, executor_options)
    if executor is not None:
        return Connecting(AsyncConnection(executor, autocommit=autocommit))
    return Connecting(
        AsyncConnection(AsyncExecutor(config_or_path, **executor_options), autocommit=autocommit, owns_executor=True)
    )


class Connecting:
    """What :func:`connect` returns: awaited, the connection; in ``async with``, the connection, ended at the end."""

    __slots__ = ("_connection",)

    def __init__(self, connection: AsyncConnection) -> None:
        self._connection = connection

    def __await__(self) -> Generator[Any, None, AsyncConnection]:
        return self._get().__await__()

    async def _get(self) -> AsyncConnection:
        return self._connection

    async def __aenter__(self) -> AsyncConnection:
        return await self._connection.__aenter__()

    async def __aexit__(self, kind: Any, exc: Any, tb: Any) -> None:
        await self._connection.__aexit__(kind, exc, tb)


# -- AsyncConnection -------------------------------------------------------------------------------


class AsyncConnection:
    """An asyncio DB-API connection over an :class:`~ddm_core.aio.AsyncExecutor` (see the module docstring).

    Args:
        executor: Where statements run.
        autocommit: Run every statement on its own.
        owns_executor: :meth:`ensure_closed` / :meth:`close` close the executor too (:func:`connect`
            sets it for an executor it built from a configuration).
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

    def __init__(self, executor: AsyncExecutor, *, autocommit: bool = False, owns_executor: bool = False) -> None:
        self._executor: AsyncExecutor | None = executor
        self._autocommit = bool(autocommit)
        self._tx: AsyncTransaction | None = None
        self._owns_executor = owns_executor
        self._cursors: weakref.WeakSet[AsyncCursor] = weakref.WeakSet()
        self._closing: asyncio.Task[None] | None = None
        self._level = SessionLevel()

    @property
    def owns_executor(self) -> bool:
        """Closing the connection closes the executor (it was built for this connection)."""
        return self._owns_executor

    @property
    def executor(self) -> AsyncExecutor:
        """The executor underneath (pools, stats)."""
        return self._live()

    @property
    def closed(self) -> bool:
        return self._executor is None

    @property
    def in_transaction(self) -> bool:
        """A transaction is open (statements ran since the last commit / rollback)."""
        return self._tx is not None

    def _live(self) -> AsyncExecutor:
        if self._executor is None:
            raise InterfaceError("the connection is closed")
        return self._executor

    def cursor(self) -> AsyncCursorContext:
        """A new cursor: ``cur = await conn.cursor()``, or ``async with conn.cursor() as cur:`` (closed after)."""
        self._live()
        cursor = AsyncCursor(self)
        self._cursors.add(cursor)
        return AsyncCursorContext(cursor)

    def get_autocommit(self) -> bool:
        return self._autocommit

    @translated_async
    async def autocommit(self, value: bool) -> None:
        """Switch autocommit (aiomysql style); switching it on commits an open transaction."""
        value = bool(value)
        if value and self._tx is not None:
            await self.commit()
        self._autocommit = value

    async def begin(self) -> None:
        """Start a transaction now (also with autocommit on, until commit / rollback); nothing is sent yet."""
        if self._tx is None:
            self._tx = self._new_transaction(self._live())

    def _new_transaction(self, executor: AsyncExecutor) -> AsyncTransaction:
        tx = executor.transaction()
        tx.isolation = self._level.take()
        return tx

    # -- what clients ask of the session (docs/sqlalchemy.md#what-the-facade-answers) ----------------

    def character_set_name(self) -> str:
        """The character set of every connection underneath: ``utf8mb4``."""
        return CHARSET

    async def ping(self, reconnect: bool = False) -> None:
        """Raise when the connection is closed; each pooled connection is checked when borrowed."""
        self._live()

    async def session_facts(self) -> SessionFacts:
        """What the data sources' server reports (version, sql_mode...), read once per executor."""
        return await facts_for(self._live())

    async def _answer(self, local: Local) -> AsyncResult:
        """Carry out what the session answers itself."""
        if isinstance(local, Control):
            if local.command == "ROLLBACK":
                await self.rollback()
            else:
                if characteristics(local.characteristics) not in ("", READ_WRITE):  # the threads facade keeps them
                    raise TransactionCharacteristicsError(
                        f"START TRANSACTION {local.characteristics} is not supported by the asyncio facade (its "
                        "transactions open with BEGIN); use the threads facade, ddm_core.connect",
                        characteristics=local.characteristics,
                    )  # fmt: skip
                await self.commit()  # BEGIN commits an open transaction first, as on MySQL
                if local.command == "BEGIN":
                    await self.begin()
        elif isinstance(local, Savepoint):
            tx = self._tx
            if tx is None and opens_transaction(local.command, local.name, self._autocommit):
                tx = self._tx = self._new_transaction(self._live())
            if tx is not None:
                await tx.run_savepoint(local.command, local.name)
        elif isinstance(local, Isolation):
            self._level.set(local)
        return AsyncResult(result_of(local))

    @translated_async
    async def commit(self) -> None:
        """Commit the open transaction (nothing to do without one)."""
        self._live()
        tx, self._tx = self._tx, None
        if tx is not None:
            await tx.commit()

    @translated_async
    async def rollback(self) -> None:
        """Roll the open transaction back (nothing to do without one)."""
        self._live()
        tx, self._tx = self._tx, None
        if tx is not None:
            await tx.rollback()

    # -- closing ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection without waiting; it is unusable after.

        On a running loop, a task rolls an open transaction back (its connections go back to the
        pools), gives back the connections of cursors still streaming, and closes an executor this
        connection owns; :meth:`ensure_closed` waits for that task. With no loop running, nothing
        can be awaited: the transaction's connections are closed (the server rolls back what they
        left open), and an owned executor keeps its idle connections until they are collected —
        close with ``await ensure_closed()`` where you can.
        """
        if self._executor is None:
            return
        tx, executor, cursors = self._detach()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            if tx is not None:
                tx.abandon()
            return
        task = loop.create_task(self._shut(tx, executor, cursors))
        self._closing = task
        _CLOSING.add(task)
        task.add_done_callback(functools.partial(_closed, tx))

    @translated_async
    async def ensure_closed(self) -> None:
        """Roll back an open transaction, give every connection back, close an owned executor; wait for it all."""
        task = self._closing
        if task is not None:
            if not task.cancelled():  # cancelled (the loop shutting down): its callback closed the pinned connections
                await asyncio.shield(task)  # a caller cancelled while it waits leaves the closing to finish
            return
        if self._executor is None:
            return
        await self._shut(*self._detach())

    def _detach(self) -> tuple[AsyncTransaction | None, AsyncExecutor, list[AsyncCursor]]:
        executor = self._executor
        assert executor is not None
        tx, self._tx = self._tx, None
        self._executor = None
        return tx, executor, list(self._cursors)

    async def _shut(self, tx: AsyncTransaction | None, executor: AsyncExecutor, cursors: list[AsyncCursor]) -> None:
        try:
            try:
                for cursor in cursors:  # a streamed result holds pool connections until it is closed
                    await cursor._release()
            finally:
                if tx is not None:
                    await tx.rollback()
        finally:
            if tx is not None:
                tx.abandon()  # whatever a cancel left pinned
            if self._owns_executor:
                await executor.close()

    async def __aenter__(self) -> AsyncConnection:
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """Commit on success, roll back on an exception, then close (as the thread facade's ``with``)."""
        try:
            if self._executor is not None:
                if exc_type is None:
                    await self.commit()
                else:
                    await self.rollback()
        finally:
            await self.ensure_closed()

    def __del__(self) -> None:
        # Dropped with a transaction open: close its pinned connections, or their pool slots stay lent.
        tx = getattr(self, "_tx", None)
        if tx is not None:
            tx.abandon()

    def __repr__(self) -> str:
        state = "closed" if self._executor is None else ("in transaction" if self._tx else "idle")
        return f"<ddm_core.aio.AsyncConnection {state} autocommit={self._autocommit}>"

    # -- running statements -----------------------------------------------------------------------

    async def _run(self, sql: str, params: Any) -> AsyncResult:
        executor = self._live()
        classified = session_statement(sql)
        if classified is not None:
            facts = await facts_for(executor)
            local = local_answer(sql, classified, executor.config, facts, self._level.current, self._autocommit)
            if local is not None:
                return await self._answer(local)
        return await self._run_plan(await executor.route(sql, params), style_of(sql), executor)

    async def _run_plan(self, plan: RoutePlan, style: str, executor: AsyncExecutor) -> AsyncResult:
        """Run a routed plan: in the open (or implicitly opened) transaction, or on its own in autocommit."""
        tx = self._tx
        if plan.statement == "ddl":  # as on MySQL: DDL commits the open transaction, then runs on its own
            await self.commit()
            return await executor.execute_plan(plan, caller_style=style)
        if tx is None:
            if self._autocommit:
                return await executor.execute_plan(plan, caller_style=style)
            tx = self._tx = self._new_transaction(executor)
        return await tx.execute_plan(plan, caller_style=style)


_FACTS: weakref.WeakKeyDictionary[AsyncExecutor, SessionFacts] = weakref.WeakKeyDictionary()


async def facts_for(executor: AsyncExecutor) -> SessionFacts:
    """The server facts of ``executor``'s data sources: read from the server once, then remembered."""
    facts = _FACTS.get(executor)
    if facts is None:
        config = executor.config
        if needs_server_facts(config):
            result = await executor.execute(FACTS_SQL)
            facts = facts_of(await result.fetchall())
        else:
            facts = emulated_facts(config)
        _FACTS[executor] = facts
    return facts


def _closed(tx: AsyncTransaction | None, task: asyncio.Task[None]) -> None:
    """A closing task ended: forget it; a cancel before it could roll back still gives the pins back."""
    _CLOSING.discard(task)
    if tx is not None:
        tx.abandon()
    if not task.cancelled() and task.exception() is not None:
        log.warning("closing a connection failed: %s", task.exception())


# -- AsyncCursor -----------------------------------------------------------------------------------


def _fixed_limits(executor: AsyncExecutor) -> Limits:
    """Most bytes and parameters of one regrouped INSERT on each data source, without asking the server.

    The thread facade reads MySQL's ``max_allowed_packet`` once per pool; the asyncio pools do not
    (it would be a round trip to await before the first batch). The bound is the thread pool's own
    when it cannot read it: :data:`~ddm_core.execute.pools.FALLBACK_PACKET` (1 024 000 bytes, under
    every MySQL and MariaDB default since 5.6), of which the regroup fills half at most; no byte
    bound where the dialect has no packet limit (SQLite, PostgreSQL), and the dialect's bound-parameter
    limit everywhere, as on the thread pool.
    """

    def limits(data_source: str) -> tuple[int | None, int | None]:
        dialect = executor.runner.primary(data_source).driver.dialect
        packet = FALLBACK_PACKET if dialect.packet_limit_query() is not None else None
        return packet, dialect.max_statement_params

    return limits


class AsyncCursor:
    """An asyncio DB-API cursor (aiomysql's calls). Rows come as :class:`~ddm_core.aio.AsyncResult` gives them.

    Attributes:
        connection: The connection it runs on.
        arraysize: Default :meth:`fetchmany` size.
        batch_rows: Rows per routed chunk in :meth:`executemany` (``None``: the whole sequence at
            once); 1000 keeps the chunk's SQL text the same from call to call, so the router parses
            it once.
    """

    batch_rows: int | None = 1000

    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection
        self.arraysize = 1
        self._result: AsyncResult | None = None
        self._rowcount = -1
        self._lastrowid: Any = None
        self._generated: tuple[Any, ...] = ()
        self._complete = True
        self._closed = False
        self._rownumber = 0

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
        """The first key ddm-core generated for the last INSERT, else the driver's ``lastrowid`` of a
        single-shard INSERT, else ``None`` (as :attr:`ddm_core.dbapi.Cursor.lastrowid`)."""
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
    def rownumber(self) -> int:
        """Rows fetched from the current result so far (the index of the next one)."""
        return self._rownumber

    @property
    def closed(self) -> bool:
        return self._closed

    # -- executing ----------------------------------------------------------------------------

    def _check(self) -> AsyncConnection:
        if self._closed:
            raise ProgrammingError("the cursor is closed")
        if self.connection.closed:
            raise ProgrammingError("the connection is closed")
        return self.connection

    async def _release(self) -> None:
        """Forget the last statement; its result gives back any connection it streams from."""
        result, self._result = self._result, None
        self._rowcount = -1
        self._lastrowid = None
        self._generated = ()
        self._complete = True
        self._rownumber = 0
        if result is not None:
            await result.aclose()

    async def execute(self, query: str, args: Any = None) -> int:
        """Run one statement. Returns the affected row count (as aiomysql does)."""
        conn = self._check()
        await self._release()
        try:
            result = await conn._run(query, args)
        except DdmError as exc:
            reraise(exc)
        self._lastrowid = first_key(result)
        self._generated = result.generated_keys
        self._complete = result.complete
        if result.description is None:
            self._rowcount = count = result.rowcount
            await result.aclose()
            return count
        self._result = result
        return result.rowcount

    @translated_async
    async def executemany(self, query: str, seq_of_args: Iterable[Any]) -> int:
        """Run ``query`` for every parameter set; INSERT ... VALUES goes out as multi-row batches.

        Returns:
            The affected rows, summed.
        """
        conn = self._check()
        await self._release()
        rows = list(seq_of_args)
        if not rows:
            self._rowcount = 0
            return 0
        batch = insert_batch(query)
        results: list[AsyncResult] = []
        if batch is None:
            for args in rows:
                results.append(await conn._run(query, args))
                await results[-1].aclose()
        else:
            executor = conn._live()
            await executor.load_schema()  # the batch is routed here, not through executor.route()
            plans, style = insert_plans(executor.router, batch, rows, self.batch_rows, _fixed_limits(executor))
            for plan in plans:
                results.append(await conn._run_plan(plan, style, executor))
                await results[-1].aclose()
        self._rowcount = total = sum(max(r.rowcount, 0) for r in results)
        self._generated = tuple(key for r in results for key in r.generated_keys)
        self._complete = all(r.complete for r in results)
        return total

    # -- fetching -----------------------------------------------------------------------------

    def _rows(self) -> AsyncResult:
        self._check()
        if self._result is None:
            raise ProgrammingError("no result set: execute a statement that returns rows first")
        return self._result

    async def fetchone(self) -> Row | None:
        try:
            row = await self._rows().fetchone()
        except DdmError as exc:
            reraise(exc)
        if row is not None:
            self._rownumber += 1
        return row

    async def fetchmany(self, size: int | None = None) -> list[Row]:
        try:
            rows = await self._rows().fetchmany(self.arraysize if size is None else size)
        except DdmError as exc:
            reraise(exc)
        self._rownumber += len(rows)
        return rows

    async def fetchall(self) -> list[Row]:
        try:
            rows = await self._rows().fetchall()
        except DdmError as exc:
            reraise(exc)
        self._rownumber += len(rows)
        return rows

    def __aiter__(self) -> AsyncIterator[Row]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Row]:
        while True:
            row = await self.fetchone()
            if row is None:
                return
            yield row

    # -- the rest -----------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the cursor and its result (returning any connection a streamed result holds)."""
        if not self._closed:
            self._closed = True
            await self._release()

    def setinputsizes(self, *args: Any) -> None:
        """Does nothing (allowed by PEP 249)."""

    def setoutputsize(self, *args: Any) -> None:
        """Does nothing (allowed by PEP 249)."""

    async def nextset(self) -> None:
        """Multiple result sets are not supported: always ``None``."""
        return None

    async def callproc(self, procname: str, args: Sequence[Any] = ()) -> Any:
        raise NotSupportedError("stored procedures cannot be routed across shards (callproc)")

    async def __aenter__(self) -> AsyncCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<ddm_core.aio.AsyncCursor {'closed' if self._closed else 'open'} rowcount={self.rowcount}>"


class AsyncCursorContext:
    """What :meth:`AsyncConnection.cursor` returns: awaited, the cursor; in ``async with``, the cursor, closed at the end."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: AsyncCursor) -> None:
        self._cursor = cursor

    def __await__(self) -> Generator[Any, None, AsyncCursor]:
        return self._get().__await__()

    async def _get(self) -> AsyncCursor:
        return self._cursor

    async def __aenter__(self) -> AsyncCursor:
        return self._cursor

    async def __aexit__(self, *exc: object) -> None:
        await self._cursor.close()
