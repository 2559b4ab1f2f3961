"""One client session of the proxy ↔ one ddm-core session (autocommit or one open Transaction).

Built on mysql-mimic's bare ``BaseSession``: the raw SQL text comes in and,
unless it is a session statement (:mod:`ddm_core.session_statements`), goes to
ddm-core's router untouched, so it is parsed once, by the router — mimic's
sqlglot-based ``Session`` would parse every statement a second time.

Each routed statement is routed once, checked against the rate limits with
the logic tables of its plan, run (in the open transaction — local or XA, as
``proxy.transactionMode`` / ``SET transaction_type`` say — else on its own),
masked for users without ``unmask`` and, when slow, written to the audit log.
A prepared statement's result columns are asked of a data source at prepare
time (:mod:`ddm_core.proxy.described`).

Statements block (the drivers are synchronous), so they run on the proxy's
worker threads, one at a time per session (a MySQL session is sequential),
while the event loop frames packets; a repeated one-unit autocommit statement
is instead sent from the loop and its answer awaited without a thread
(``Executor.send_single``, docs/proxy.md#how-it-is-built). Rows go to the client batch by batch
(``proxy.batchRows``): a streamed multi-shard result never sits whole in the
proxy's memory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence, TypeVar

from mysql_mimic.errors import MysqlError
from mysql_mimic import ColumnType
from mysql_mimic.charset import CharacterSet
from mysql_mimic.results import ResultColumn, ResultSet
from mysql_mimic.schema import like_to_regex
from mysql_mimic.session import BaseSession
from mysql_mimic.types import ServerStatus

from ddm_core._fast import SELECTED
from ddm_core.errors import DataSourceUnavailableError, DdmError, ExecutionError, StatementInterruptedError
from ddm_core.execute import Result, Transaction
from ddm_core.execute.result import UnitResult
from ddm_core.execute.isolation import SNAPSHOT
from ddm_core.execute.isolation import characteristics as transaction_characteristics
from ddm_core.execute.savepoints import opens_transaction
from ddm_core.execute.sent import SentControl, SentUnit
from ddm_core.execute.sent_many import SentMany
from ddm_core.execute.session_state import check_pinned
from ddm_core.execute.shared import style_of
from ddm_core.proxy.admission import Refusal
from ddm_core.proxy.columns import UTF8_CHARSETS, Column, described_columns, result_columns, text_columns
from ddm_core.proxy.described import describe
from ddm_core.proxy.kill import kill, stop_sent
from ddm_core.proxy.literals import parameterize
from ddm_core.proxy.hotpath import HotEnd, HotRelay, LinkStatement, PinStatement
from ddm_core.proxy.loop_transactions import (
    drop_opening, end_on_loop, ends_quietly, open_on_loop, opened_under, opening_for, pin_for, pins_for,
    read_from_loop, reads_on_pins, send_on_pin, settle_opening,
)  # fmt: skip
from ddm_core.proxy.relay import (
    HIGH_WATER, RELAY_STATES, HeaderMemo, ResultRelay, execute_values, hotpin, readable, relay_answer,
)  # fmt: skip
from ddm_core.proxy.folded_many import folds_raw, relay_folded
from ddm_core.proxy.ordered_many import merges_raw, relay_ordered
from ddm_core.proxy.relay_many import Taken, decoded, read_many, relay_many, relay_many_on, take_many, taken_whole
from ddm_core.proxy.masking import Masker, MaskPlan, projection_masks, refuse_masked
from ddm_core.proxy.idle import INTERACTIVE_TIMEOUT, WAIT_TIMEOUT, session_wait_timeout
from ddm_core.proxy.mysql_errors import (
    ACCESS_DENIED, CLIENT_INTERACTION_TIMEOUT, NOT_SUPPORTED, TX_IN_PROGRESS, UNKNOWN_DATABASE,
    UNKNOWN_SYSTEM_VARIABLE, error_info,
)  # fmt: skip
from ddm_core.proxy.privileges import PLAIN, Needs
from ddm_core.proxy.runtime import ProxyRuntime, Shape
from ddm_core.session_facts import SAVEPOINT_KINDS
from ddm_core.session_statements import Kind, classify, probe_items, returns_rows
from ddm_core.proxy.variables import TRANSACTION_TYPE, CountedVariables, apply_set
from ddm_core.route.plan import EXPLAIN_COLUMNS, RouteKind, RoutePlan, RouteUnit
from ddm_core.route.text.placeholders import translate

if TYPE_CHECKING:
    from ddm_core._fast import hotmany
else:
    hotmany = SELECTED.hotmany

__all__ = ["ProxySession", "Outcome", "Rows", "Batched", "flatten", "RELAYED", "FRONT_TERMS", "UTF8_CHARSETS"]

log = logging.getLogger("ddm_core.proxy")

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Outcome:
    """A statement without rows: what its OK packet says."""

    affected_rows: int = 0
    last_insert_id: int = 0


@dataclass(frozen=True, slots=True)
class Rows:
    """A routed statement's whole result (shorter than one batch) and its columns."""

    rows: list[tuple[Any, ...]]
    columns: list[Column]


@dataclass(frozen=True, slots=True)
class Batched:
    """Rows that come in lists (``batches``), for the text protocol's fast path.

    mimic's ``ResultSet`` is compiled and cannot be subclassed, so the
    connection turns this into one (:func:`flatten` of the same batches, for
    the binary protocol of prepared statements) and writes the batches itself.
    """

    batches: AsyncGenerator[list[tuple[Any, ...]], None]
    columns: list[Column]


class Relayed:
    """The answer went to the client as the data source sent it (proxy/relay.py): nothing more to write."""


RELAYED = Relayed()


async def flatten(batches: AsyncIterator[list[tuple[Any, ...]]]) -> AsyncIterator[tuple[Any, ...]]:
    async for batch in batches:
        for row in batch:
            yield row


#: Session variables a reset keeps: what the client announced at connect (the character sets it
#: speaks and reads) and who it logged in as.
_KEPT_ON_RESET = ("character_set_client", "character_set_results", "character_set_connection", "external_user")
#: Session statements answered with rows (their columns are known before they run).
_ANSWERS_WITH_ROWS = frozenset({Kind.PROBE, Kind.SHOW_DATABASES, Kind.SHOW_VARIABLES, Kind.SHOW_NOTHING})
PREVIEW_COLUMNS = EXPLAIN_COLUMNS
#: (autocommit, in a transaction) -> the status flags: made once (enum flag arithmetic is Python code)
_STATUS = {(autocommit, in_tx): ServerStatus((ServerStatus.SERVER_STATUS_AUTOCOMMIT if autocommit else 0)
                                             | (ServerStatus.SERVER_STATUS_IN_TRANS if in_tx else 0))
           for autocommit in (False, True) for in_tx in (False, True)}  # fmt: skip


def _columns_of(wire: Sequence[ResultColumn]) -> list[Column]:
    return [Column.of(c) for c in wire]


class ProxySession(BaseSession):  # type: ignore[misc]  # mimic ships no types
    """A client session: autocommit, transactions, session variables, and its statements."""

    def __init__(self, runtime: ProxyRuntime) -> None:
        self.runtime = runtime
        self.username: str | None = None
        self.database: str | None = None
        self.connection: Any = None  # mimic's Connection, from init()
        self._tx: Transaction | None = None
        self._closed = False
        self._interrupted = False  # KILL QUERY reached the running command (cleared as each one starts)
        self._sent: Any = None  # what the event loop sent for it in autocommit, for KILL QUERY to stop (kill.stop_sent)
        # a hot read answering on the transaction's pin, its hot COMMIT, or a multi-unit read whose answers reader
        # callbacks take (the hotmany unit): given up at close
        self._pinned_hot: HotRelay | HotEnd | PinStatement | hotmany.ConcatenatedAnswers | hotmany.WholeAnswers | None = None
        #: The transaction's pins its reads on the loop wait on, watched from one read to the next; given up before
        #: a worker or the transaction's end may read or close them (docs/proxy.md#the-pins-watched)
        self._pin_watches = hotpin.PinWatches()
        self._text = False  # the running command is a COM_QUERY (a text result)
        self._announced: list[Column] | None = None  # the running execute's announced columns (a binary result)
        # Read-your-writes: this session's last writes per data source with replicas. Its statements run on
        # whichever worker is free, or on the loop: each puts them in place (WriteTracker.swap) around itself.
        self._marks: Any = None  # readwrite.tracker.Marks
        self._defaults()

    def _defaults(self) -> None:
        """The session's settings as a new session has them."""
        self.variables = CountedVariables(self.runtime.variables)
        self._autocommit = True  # MySQL's default
        # What BEGIN opens: proxy.transactionMode, then the session's SET transaction_type
        settings = self.runtime.executor.config.proxy
        self._tx_mode = settings.transaction_mode
        self.variables.set(TRANSACTION_TYPE, self._tx_mode.upper())
        idle = session_wait_timeout(settings.wait_timeout_ms)  # the session may SET its own (proxy/idle.py)
        self.variables.set(WAIT_TIMEOUT, idle)
        self.variables.set(INTERACTIVE_TIMEOUT, idle)
        self._last_insert_id = 0

    @property
    def may_unmask(self) -> bool:
        """The user sees masked columns as they are (``proxy.users[].unmask``)."""
        return self.username in self.runtime.unmasked

    # -- mimic's session interface ----------------------------------------------------------

    async def init(self, connection: Any) -> None:
        self.connection = connection
        if self.database is not None:
            self._check_database(self.database)
        self.runtime.sessions[connection.connection_id] = self  # logged in: KILL can name it
        self._update_status()

    async def use(self, database: str) -> None:
        self._check_database(database)
        self.database = database

    async def close(self) -> None:
        # Rolls back an open transaction and gives its pinned connections back.
        self._closed = True
        if self.connection is not None:
            self.runtime.sessions.pop(self.connection.connection_id, None)
        many = self._many_task
        if many is not None:  # a multi-unit read from the gate still answering: done first, as mimic's path is
            await asyncio.wait((many,))
        hot = self._pinned_hot
        if hot is not None:  # a read still answering on the transaction's pin: given up, the rollback discards it
            self._pinned_hot = None
            hot.abandon()
            self.runtime._exit(self.connection.connection_id)  # as _hot_end would have
        await self._in_thread(self._rollback)

    async def reset(self) -> None:
        """COM_RESET_CONNECTION (and a change of user), as on MySQL: the open transaction is rolled
        back and the session's settings are a new session's; the character sets the client
        announced are kept."""
        await self._in_thread(self._rollback)
        kept = {name: self.variables.get(name) for name in _KEPT_ON_RESET}
        self._defaults()
        for name, value in kept.items():
            self.variables.set(name, value, force=True)
        self._update_status()

    async def handle_query(self, sql: str, attrs: dict[str, str]) -> Any:
        # Counted as running by the connection's handle_query (runtime.statement), as every command is.
        self._check_logged_in()
        self._interrupted = False
        self._text = True  # a COM_QUERY: its result may be relayed (docs/proxy.md#relayed-results)
        return await self._as_mysql(self._answer(sql))

    async def _as_mysql(self, answering: Awaitable[_T]) -> _T:
        """``answering`` awaited, a refusal raised as mimic's error (its error packet), the status flags updated."""
        try:
            return await answering
        except DdmError as exc:
            info = error_info(exc)
            log.debug("statement refused (%s): %s", info.code, info.message)
            raise MysqlError(info.message, code=info.code) from exc
        finally:
            self._update_status()

    async def handle_prepared(self, sql: str, params: list[Any], announced: list[Column] | None = None) -> Any:
        """A prepared statement's execute: ``sql`` with ``?`` marks and their values. ``announced``: the columns
        its prepare announced, when its result may be relayed in the binary protocol (not into a cursor)."""
        self._check_logged_in()
        self._interrupted = False
        self._text = False
        self._announced = announced
        try:
            if not params:
                return await self._answer(sql)
            if classify(sql).kind is not Kind.ROUTED:
                raise MysqlError("ddm: session statements take no parameters", code=NOT_SUPPORTED)
            return await self._run(sql, params)
        except DdmError as exc:
            info = error_info(exc)
            raise MysqlError(info.message, code=info.code) from exc
        finally:
            self._update_status()

    async def handle_prepare(self, sql: str, params: int) -> list[Column]:
        """The columns every execute of ``sql`` (``params`` ``?`` marks) returns; ``[]``: a statement without rows.

        Raises:
            MysqlError: the columns cannot be known (the statement is refused, or its data source
                cannot prepare it): the prepare fails rather than announce columns it may not return.
        """
        self._check_logged_in()
        what = classify(sql)
        try:
            if what.kind is Kind.ROUTED:  # refused here when not allowed: no statement id is handed out
                return await self._in_thread(self._prepare_routed, sql, params)
            if what.kind is Kind.PREVIEW:
                return _columns_of(text_columns(PREVIEW_COLUMNS))
            if what.kind in _ANSWERS_WITH_ROWS:  # the session's own answers: cheap, and change nothing
                answer = await self._answer(sql)
                return _columns_of(answer.columns)
            return []
        except DdmError as exc:
            info = error_info(exc)
            message = f"{info.message} (the prepared statement's result columns cannot be known, so it is not prepared)"
            raise MysqlError(message, code=info.code) from exc

    def _check_logged_in(self) -> None:
        # The connection never reads a command before a login succeeded; this holds it here too.
        if self.username is None:
            raise MysqlError("ddm: not logged in", code=ACCESS_DENIED)

    def _prepare_routed(self, sql: str, params: int) -> list[Column]:
        shape = self.runtime.shapes.get(sql)
        self._allow(sql, self._needs(sql, params > 0, shape), self.runtime.clock())
        return self._describe(sql, params) if returns_rows(sql) else []

    def _describe(self, sql: str, params: int) -> list[Column]:
        runtime = self.runtime
        config = runtime.executor.config
        shape = runtime.described.get(sql, config)
        if shape is None:
            shape = describe(runtime.executor, sql, params, runtime.schema)
            runtime.described.put(sql, config, shape)
        columns, tables = shape
        masker = runtime.masker
        if masker is None or self.may_unmask:
            return columns
        # As the executes will mask them (_admit): a masked column is a string column
        masks = projection_masks(masker, translate(sql, formatted=params > 0).sql, list(tables))
        refuse_masked(masks, sql)
        masked = masks.columns([c.name for c in columns])
        return [Column(c.name, ColumnType.STRING, int(CharacterSet.utf8mb4), org_name=c.name) if i in masked else c
                for i, c in enumerate(columns)]  # fmt: skip

    # -- dispatch ----------------------------------------------------------------------------

    async def _answer(self, sql: str) -> Any:
        what = classify(sql)
        kind = what.kind
        if kind is Kind.ROUTED:
            return await self._run(sql)
        if kind is Kind.PROBE:
            return self._probe(sql)
        if kind is Kind.SET:
            return await self._in_thread(apply_set, what.rest, self.variables, self._set_autocommit,
                                         self._set_transaction_mode) or Outcome()  # fmt: skip
        # Answered on the loop when nothing is sent (no connection pinned yet, a local transaction): a thread
        # hop less per transaction (proxy/loop_transactions.py)
        if kind is Kind.BEGIN:  # WITH CONSISTENT SNAPSHOT opens every data source now: a worker does
            if self._tx is None and self._tx_mode == "local" and SNAPSHOT not in what.rest.upper():
                return self._begin(what.rest)
            return await self._in_thread(self._begin, what.rest)
        if kind is Kind.COMMIT:
            await self._end_transaction(self._commit, "COMMIT")
            return Outcome()
        if kind is Kind.ROLLBACK:
            await self._end_transaction(self._rollback, "ROLLBACK")
            return Outcome()
        if kind in SAVEPOINT_KINDS:
            await self._in_thread(self._savepoint, kind, what.rest)
            return Outcome()
        if kind is Kind.USE:
            await self.use(what.rest)
            return Outcome()
        if kind is Kind.SHOW_DATABASES:
            return ResultSet(rows=[(self.runtime.schema,)], columns=text_columns(["Database"]))
        if kind is Kind.SHOW_VARIABLES:
            return self._show_variables(what.rest)
        if kind is Kind.SHOW_NOTHING:
            return ResultSet(rows=[], columns=text_columns(["Level", "Code", "Message"]))
        if kind is Kind.PREVIEW:
            return await self._in_thread(self._preview, what.rest)
        if kind is Kind.KILL:
            runtime = self.runtime
            kill(self.username, self.connection.connection_id, runtime.sessions, runtime.access, what.rest, sql)
            return Outcome()
        raise MysqlError("Query was empty", code=1065)

    # -- transactions (as dbapi.Connection keeps them) ------------------------------------------

    def _begin(self, characteristics: str = "") -> Outcome:
        """``BEGIN`` / ``START TRANSACTION [characteristics]``: each pin opens with them (Transaction.start)."""
        spelled = characteristics and transaction_characteristics(characteristics)  # a conflict: nothing done
        if self._tx is not None and self._tx.state == "failed":
            # A timeout or a lost data source failed it, and the client got that error then: BEGIN rolls
            # it back and starts afresh (committing it would only raise that it was not committed).
            self._rollback()
        self._commit()  # MySQL commits an open transaction first
        self._open_transaction()
        if spelled and self._tx is not None:
            try:
                self._tx.start(spelled, self.runtime.executor.config.data_sources)
            except BaseException:
                self._tx = None  # refused, or a snapshot's pin failed (rolled back): no transaction is open
                raise
        return Outcome()

    def _open_transaction(self) -> None:
        # xa: every data source written is a branch, committed in two phases (docs/proxy.md#xa-transactions)
        self._tx = self.runtime.executor.transaction(mode=self._tx_mode)

    def _commit(self) -> None:
        tx, self._tx = self._tx, None
        if tx is not None:
            tx.commit()

    def _rollback(self) -> None:
        tx, self._tx = self._tx, None
        if tx is not None:
            tx.rollback()

    async def _end_transaction(self, end: Callable[[], None], command: str) -> None:
        tx = self._tx
        if tx is None or ends_quietly(tx):
            end()
        elif reads_on_pins(tx) and tx.ends_on_loop():  # a COMMIT (ROLLBACK) per pin, all at once from the loop
            self._tx = None
            self.runtime.ended_on_loop += 1
            self._pin_watches.drop()  # its end gives the pins back
            await end_on_loop(tx, command)
        else:
            await self._in_thread(end)

    def _savepoint(self, kind: Kind, name: str) -> None:
        """SAVEPOINT / ROLLBACK TO / RELEASE on every connection of the session's transaction."""
        command, tx = SAVEPOINT_KINDS[kind], self._tx
        if tx is None and opens_transaction(command, name, self._autocommit):
            self._open_transaction()
            tx = self._tx
        if tx is not None:
            tx.run_savepoint(command, name)

    def _set_transaction_mode(self, mode: str) -> None:
        if self._tx is not None and mode != self._tx_mode:
            raise MysqlError("Transaction characteristics can't be changed while a transaction is in progress",
                             code=TX_IN_PROGRESS)  # fmt: skip
        self._tx_mode = mode

    def _set_autocommit(self, on: bool) -> None:
        if on:
            self._commit()  # switching autocommit on commits, as on MySQL
        self._autocommit = on

    def _execute(self, plan: RoutePlan, style: str, pool: Any = None) -> Result:
        """``pool``: the endpoint the loop chose for this one-unit autocommit statement (the choice is made once)."""
        if self._tx is None and not self._autocommit:
            self._open_transaction()  # the first statement opens it
        if self._tx is not None:
            return self._tx.execute_plan(plan, caller_style=style)
        return self.runtime.executor.execute_plan(plan, caller_style=style, pool=pool)

    def _check_database(self, name: str) -> None:
        if name.lower() not in (self.runtime.schema.lower(), "information_schema"):
            raise MysqlError(f"Unknown database '{name}'", code=UNKNOWN_DATABASE)

    def _update_status(self) -> None:
        tx = self._tx
        if tx is not None and tx.state == "rolled back":
            # The library ended it (an XA deadlock or lock-wait timeout rolls every branch back): as on
            # MySQL the transaction is over, and the session's next statement or BEGIN starts a new one.
            self._tx = None
        if self.connection is None:
            return
        self.connection.status_flags = _STATUS[self._autocommit, self._tx is not None]

    # -- session facts --------------------------------------------------------------------------

    def _probe(self, sql: str) -> ResultSet:
        items = probe_items(sql) or []
        values = [self._fact(item.what) for item in items]
        return ResultSet(rows=[tuple(values)], columns=result_columns([(i.column, None) for i in items], [values]))

    def _fact(self, what: str) -> Any:
        if what.startswith("@@"):
            name = what[2:]
            if name == "autocommit":
                return int(self._autocommit)
            if name not in self.variables.schema:
                raise MysqlError(f"Unknown system variable '{name}'", code=UNKNOWN_SYSTEM_VARIABLE)
            value = self.variables.get(name)
            return int(value) if isinstance(value, bool) else value
        if what in ("DATABASE", "SCHEMA"):
            return self.database
        if what == "VERSION":
            return self.variables.get("version")
        if what == "LAST_INSERT_ID":
            return self._last_insert_id
        if what == "CONNECTION_ID":
            return self.connection.connection_id if self.connection is not None else 0
        return f"{self.username or ''}@{self.runtime.client_host(self.connection)}"

    def _show_variables(self, like: str) -> ResultSet:
        rows = [(k, None if v is None else str(int(v) if isinstance(v, bool) else v)) for k, v in self.variables.list()]
        rows = [(k, ("ON" if self._autocommit else "OFF") if k == "autocommit" else v) for k, v in rows]
        if like:
            pattern = like_to_regex(like)
            rows = [(k, v) for k, v in rows if pattern.fullmatch(k)]
        return ResultSet(rows=rows, columns=text_columns(["Variable_name", "Value"]))

    def _preview(self, sql: str) -> ResultSet:
        if classify(sql).kind is not Kind.ROUTED:
            raise MysqlError("ddm: PREVIEW takes a statement the router runs (not a session statement)",
                             code=NOT_SUPPORTED)  # fmt: skip
        plan = self.runtime.executor.router.route(sql, None)
        rows = plan.explain()
        return ResultSet(rows=rows, columns=text_columns(PREVIEW_COLUMNS))

    # -- routed statements ----------------------------------------------------------------------

    async def _run(self, sql: str, params: list[Any] | None = None) -> Any:
        runtime = self.runtime
        started = runtime.clock()
        first: Any = None
        if len(sql) > LOOP_TEXT_LIMIT:  # a long text is scanned and routed on a worker: never on the loop
            first = await self._in_thread(self._start_long, sql, params, started)
        else:
            # Literal values back into parameters: one text per statement shape, so the plan cache hits.
            text, bound = (sql, params) if params is not None else (parameterize(sql) or (sql, None))
            shape = runtime.shapes.get(text)
            tx = self._tx  # in a transaction: a read on a pin goes from the loop (proxy/loop_transactions.py)
            if shape is not None and shape.inline and runtime.inline and (
                    self._autocommit if tx is None else shape.read and reads_on_pins(tx)):  # fmt: skip
                first = await self._stoppable(sql, self._start_sent(sql, text, bound, started, shape))
            elif shape is not None and shape.many and runtime.inline and (
                    self._autocommit if tx is None else reads_on_pins(tx)):  # fmt: skip
                first = await self._stoppable(sql, self._start_many(sql, text, bound, started, shape))
            if first is None:
                first = await self._in_thread(self._start, sql, text, bound, started)
        return await self._answered(sql, first)

    async def _stoppable(self, sql: str, sending: Awaitable[_T]) -> _T:
        """``sending`` (a statement sent from the loop) awaited: an error of one KILL QUERY stopped on its data
        source (stop_sent) is MariaDB's 1317; what was sent is no longer KILL QUERY's to stop."""
        try:
            return await sending
        except DdmError as exc:
            if self._interrupted:
                raise StatementInterruptedError(_INTERRUPTED, sql=sql) from exc
            raise
        finally:
            self._sent = None

    async def _answered(self, sql: str, first: Any) -> Any:
        """A routed statement's answer from what :meth:`_run` started: relayed, a count, or rows (a first batch)."""
        runtime = self.runtime
        if isinstance(first, (Outcome, Relayed)):
            return first  # done on its data source before KILL QUERY could stop it: its count stands
        statement, rows = first
        if self._interrupted:  # KILL QUERY while it ran: its rows are not sent
            error = StatementInterruptedError(_INTERRUPTED, sql=sql)
            if len(rows) >= runtime.batch_rows:  # streamed: its connections are still out
                await self._in_thread(statement.abort, error)
            raise error
        if len(rows) < runtime.batch_rows:  # all of it (finished in _start): the list-based path
            return Rows(rows, statement.columns)
        return Batched(self._batches(statement, rows), statement.columns)

    def _loop_route(self, sql: str, text: str, params: Any, started: float, shape: Shape) -> RoutePlan | None:
        """A known statement shape's privileges checked and its plan for these values, on the loop; ``None``: its
        privileges are not read yet (the workers read them first, _start)."""
        needs = shape.needs
        if needs is not PLAIN:
            if needs is None:
                return None
            self._allow(sql, needs, started)
        return self.runtime.executor.router.route(text, params)

    async def _start_sent(
        self, sql: str, text: str, params: Any, started: float, shape: Shape
    ) -> Outcome | Relayed | tuple[_Running, list[tuple[Any, ...]]] | None:
        # Sent from the event loop and awaited without a thread: the loop frames other clients'
        # packets meanwhile, so concurrent clients overlap their round trips on one thread. When the
        # executor declines (no idle connection, replicas, a driver that cannot split a statement),
        # a worker runs it. None: its route is wider for these values; nothing was sent or counted.
        runtime = self.runtime
        plan = self._loop_route(sql, text, params, started, shape)
        if plan is None:
            return None
        if not _one_unit(plan):
            shape.inline = False  # rare (routes can differ by value): the workers run it
            return None
        tx, pool = self._tx, None
        if tx is None:
            pool = self._loop_pool(plan)
            if pool is None:
                return None  # a write to a data source with replicas, a gtid read's check: the workers run it
        elif not read_from_loop(tx, plan):
            return None  # a write, an XA transaction: the workers run it
        running = _Running(self, sql, plan, started)
        self._admit(running, text, params, plan, shape)
        relay, values = self._relay_of(running, plan, style_of(text))
        # The transaction's first statement there: sent right behind its opening (read first), else opened first
        opening = None if tx is None else opening_for(tx, plan, None if values is None else plan.units[0].sql)
        if tx is not None and opening is None and not await self._opened(running, tx, plan):
            return await self._in_thread(self._run_admitted, running, plan, style_of(text), shape)
        send = None if relay is None else self._sender(runtime.driver_of(plan.units[0].data_source), values)
        try:
            sent = (runtime.executor.send_single(plan, caller_style=style_of(text), send=send, pool=pool) if tx is None
                    else send_on_pin(runtime.executor, tx, plan, style_of(text), send, opening))  # fmt: skip
        except DdmError as exc:
            if opening is not None:
                drop_opening(opening, None, "")
            running.failed(exc)
            raise
        if opening is not None and tx is not None:
            await self._opened_under(running, tx, opening, sent)
        if sent is None:  # no idle connection there: a worker waits for one, on the endpoint chosen here
            return await self._in_thread(self._run_admitted, running, plan, style_of(text), shape, pool)
        if tx is None:  # a pinned connection is the transaction's: KILL QUERY leaves it be
            self._sent = sent
        if relay is not None:
            relayed = await self._relayed(sent, relay, running, plan)
            if relayed is None:  # its replica went away before any of the answer was relayed: read elsewhere
                return await self._in_thread(self._run_admitted, running, plan, style_of(text), shape)
            return relayed
        try:
            await readable(sent.fileno, sent.answer_by)
        except BaseException:  # cancelled (the client went away, a shutdown): the answer is never read
            sent.abandon()
            raise
        runtime.inlined += 1
        read_from = runtime.clock()
        try:
            result = sent.finish()
        except DdmError as exc:
            if self._replica_gone(sent.pool, plan, None, exc):  # nothing sent to the client yet: read elsewhere
                return await self._in_thread(self._run_admitted, running, plan, style_of(text), shape)
            running.failed(exc)
            raise
        # The answer is read on the loop once it starts to arrive: a statement whose rows keep
        # coming for long goes to the workers from then on (a full batch of them too: _outcome).
        if runtime.clock() - read_from > INLINE_SECONDS:
            shape.slow += 1
            shape.inline = shape.slow < INLINE_SLOW_RUNS
        else:
            shape.slow = 0
        return self._outcome(running, plan, result, shape)

    async def _start_many(
        self, sql: str, text: str, params: Any, started: float, shape: Shape
    ) -> Outcome | Relayed | tuple[_Running, list[tuple[Any, ...]]] | None:
        # A read of several units sent from the event loop (proxy/relay_many.py): in autocommit on idle
        # pooled connections, in a transaction on the pins it has (else a worker runs the plan routed here).
        # None: its route is not such a read for these values; nothing was sent or counted.
        runtime = self.runtime
        plan = self._loop_route(sql, text, params, started, shape)
        if plan is None or not _many_units(plan):
            return None
        tx = self._tx
        running = _Running(self, sql, plan, started)
        self._admit(running, text, params, plan, shape)
        pins = None if tx is None or not await self._opened(running, tx, plan) else pins_for(tx, plan)
        style = style_of(text)
        sent = None
        if tx is None or pins is not None:  # else a data source not pinned yet, a read that changes the session
            try:
                sent = runtime.executor.send_many(plan, caller_style=style, on=pins)
            except DdmError as exc:
                running.failed(exc)
                raise
        if sent is None:  # no idle connection, every full-route slot taken, replicas: a worker runs it
            return await self._in_thread(self._run_admitted, running, plan, style, shape)
        runtime.many_inlined += 1
        if tx is None:
            self._sent = sent
        return await self._read_sent_many(running, plan, sent, shape, None)

    async def _read_sent_many(self, running: _Running, plan: RoutePlan, sent: SentMany, shape: Shape,
                              carried: dict[int, bytes] | None) -> Relayed | Outcome | tuple[_Running, list[tuple[Any, ...]]]:  # fmt: skip
        """The answers of a multi-unit read sent from the loop, read and answered (proxy/relay_many.py); ``carried``:
        per lane, bytes read off its socket already (by reader callbacks: the hotmany unit)."""
        relay = self._relay_many_of(running, plan, sent)
        begun = b""  # the first answer's bytes a relay read before it found its rows must be decoded
        if relay is not None and plan.merge.is_trivial:
            relayed = await self._relayed_many(sent, relay, running, plan, carried)
            if isinstance(relayed, Relayed):
                return relayed
            begun = relayed
        if relay is not None and not plan.merge.is_trivial:  # an ORDER BY: merged undecoded where it can be
            taken = await take_many(sent, carried=carried)
            merged = self._merged_in_order(taken, relay, running, plan, shape)
            if merged is not None:
                return merged
            answers, lost = decoded(taken)
        else:
            answers, lost = await read_many(sent, begun, carried)
        # Its answers were buffered and merged on the loop: a shape whose read proves long (a full batch of
        # rows) goes to the workers from then on, which stream it (bounded memory, the loop free meanwhile).
        if sum(len(a.rows) for a in answers if isinstance(a, UnitResult)) >= self.runtime.batch_rows:
            shape.many = False
        try:
            if sent.collations_pending(answers):  # a column's collation is asked of its data source: a worker
                result = await self._in_thread(sent.read, answers, lost)
            else:
                result = sent.read(answers, lost)
        except DdmError as exc:
            running.failed(exc)
            raise
        return self._outcome(running, plan, result, shape)

    async def _opened(self, running: _Running, tx: Transaction, plan: RoutePlan) -> bool:
        """The transaction opened from the loop on the data sources of ``plan`` (a read) it has not pinned
        (proxy/loop_transactions.py); ``False``: one is still unpinned, the worker path runs the read."""
        pinned = tx.data_sources
        if all(source in pinned for source in plan.data_sources):
            return True
        try:
            self.runtime.opened_on_loop += await open_on_loop(tx, plan)
        except DdmError as exc:
            running.failed(exc)
            raise
        return all(source in tx.data_sources for source in plan.data_sources)

    async def _opened_under(self, running: _Running, tx: Transaction, opening: SentControl, sent: SentUnit | None) -> None:
        """``opening``'s OKs read before the answer of ``sent`` behind it (proxy/loop_transactions.py)."""
        try:
            await opened_under(tx, opening, sent)
        except DdmError as exc:
            running.failed(exc)
            raise
        self.runtime.opened_on_loop += 1
        self.runtime.opened_with_first += sent is not None

    def _relay_many_of(self, running: _Running, plan: RoutePlan, sent: SentMany, seq: int | None = None
                       ) -> ResultRelay | None:  # fmt: skip
        """A relay for a multi-unit read whose rows need no merge or only an order (proxy/ordered_many.py): a
        text result, or a prepared statement's read not into a cursor (its rows converted); nothing masked,
        drivers whose answers a relay reads alike. ``None``: its answers are read into rows and merged."""
        spec = plan.merge
        if not (self.runtime.relay and running.masks is None
                and (spec.is_trivial or merges_raw(spec) or folds_raw(spec))):  # fmt: skip
            return None
        if not self._text and self._announced is None:
            return None  # into a cursor
        drivers = {part.pool.driver for part in sent.parts}
        if len(drivers) != 1:
            return None
        (driver,) = drivers
        return self.connection.relay_for(driver.relay_eof, not self._text, seq) if driver.can_relay else None

    async def _relayed_many(self, sent: SentMany, relay: ResultRelay, running: _Running, plan: RoutePlan,
                            carried: dict[int, bytes] | None = None, framed: tuple[int, bytes] | None = None
                            ) -> Relayed | bytes:  # fmt: skip
        """``sent``'s answers relayed to the client as one result (proxy/relay_many.py); ``bytes``: a prepared
        statement's whose rows cannot be converted, nothing relayed: what was read of the first answer.
        ``carried``: per lane, bytes read already (and not relayed); ``framed``: the relay is in this state, the
        client's header and these bytes framed already (by reader callbacks: the hotmany unit)."""
        stream = self.connection.stream
        announced = None if self._text else self._announced
        try:
            aggregates = plan.merge.aggregates
            header = self.connection.relay_header(aggregates, announced)
            if framed is None:
                convert = None if announced is None else self.connection.relay_conversions(aggregates, announced)
                rows = await relay_many(sent, relay, stream.writer, header, convert, carried)
            else:  # the relay converts as it was told to already
                rows = await relay_many_on(sent, relay, stream.writer, header, *framed, announced is not None, carried)
        except DdmError as exc:
            stream.seq.value = relay.seq  # the error packet follows what was relayed
            running.failed(exc)
            raise
        if isinstance(rows, bytes):
            return rows
        stream.seq.value = relay.seq
        self.runtime.many_relayed += 1
        running.finish(rows)
        return RELAYED

    def _merged_in_order(self, taken: Taken, relay: ResultRelay, running: _Running, plan: RoutePlan, shape: Shape
                         ) -> Relayed | None:  # fmt: skip
        """``taken``'s answers merged undecoded — in order, or aggregates folded — and written to the client
        (:meth:`_undecoded`); ``None``: nothing was written, they are decoded and merged."""
        announced = None if self._text else self._announced
        aggregates = plan.merge.aggregates
        convert = None if announced is None else self.connection.relay_conversions(aggregates, announced)
        sent = taken.reading.sent
        out = self._undecoded(taken, relay, plan, self.connection.relay_header(aggregates, announced), convert)
        if out is None:
            return None
        rows = relay.rows
        if rows >= self.runtime.batch_rows:  # as a decoded merge's: a long read goes to the workers from then on
            shape.many = False
        stream = self.connection.stream
        try:
            sent.relayed(rows, taken.reading.statuses, taken.reading.errors, taken.reading.lost)
        except DdmError as exc:  # a deadline that fired: nothing went to the client, the error is its answer
            running.failed(exc)
            raise
        transport = stream.writer.transport
        if not transport.is_closing():
            transport.write(out)
        stream.seq.value = relay.seq
        self._count_undecoded(plan)
        running.finish(rows)
        return RELAYED

    @staticmethod
    def _undecoded(taken: Taken, relay: ResultRelay, plan: RoutePlan,
                   header_for: Callable[[list[bytes]], tuple[list[bytes], int]],
                   convert: Callable[[list[bytes]], bytes | None] | None) -> bytes | None:  # fmt: skip
        """The client's bytes for ``taken``'s answers merged undecoded: in order (proxy/ordered_many.py) or their
        aggregates folded (proxy/folded_many.py); ``None``: they are decoded and merged."""
        sent = taken.reading.sent
        backend_eof = sent.parts[0].pool.driver.relay_eof
        if merges_raw(plan.merge):
            return relay_ordered(taken, relay, backend_eof, header_for, convert)
        return relay_folded(taken, relay, backend_eof, sent.engine.merge_dialect(plan), header_for, convert)

    def _count_undecoded(self, plan: RoutePlan) -> None:
        if merges_raw(plan.merge):
            self.runtime.many_ordered += 1
        else:
            self.runtime.many_folded += 1

    # -- the hot path (proxy/hotpath.py) ---------------------------------------------------------------

    #: The hot path's client headers of relayed results, by (aggregates, announced columns): made once each
    _hot_headers: dict[Any, HeaderMemo] | None = None
    #: The event loop the session runs on, kept once it is asked (get_running_loop() asks getpid() every time)
    _hot_loop: asyncio.AbstractEventLoop | None = None
    #: A multi-unit read the gate handed to a task (:meth:`_hot_many`) while it runs
    _many_task: asyncio.Task[None] | None = None

    def _loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the session runs on (kept: get_running_loop() asks getpid() every time)."""
        loop = self._hot_loop
        if loop is None:
            loop = self._hot_loop = asyncio.get_running_loop()
        return loop

    def hot(self, command: int, payload: bytes, read: tuple[Any, ...] | None) -> bool:
        """The gate's hot path, for what its front (``HotFront``) did not take: take a COM_QUERY or
        COM_STMT_EXECUTE of a one-unit SELECT shape seen before and relay its answer from a reader callback;
        ``False`` (nothing done): mimic's path answers it (docs/proxy.md#the-hot-path). ``read``: the front's
        reading of a COM_QUERY or COM_STMT_EXECUTE (``HotFront.read_query`` / ``read_execute``; ``None``: not a
        statement it takes), ``None`` for any other command."""
        runtime, tx = self.runtime, self._tx
        if command == _COM_STMT_RESET:  # nothing of the session's: answered whatever the statements' path
            return self._hot_reset(payload)
        # In a transaction: a read on a connection it pinned already (proxy/loop_transactions.py), else mimic's
        # path; with autocommit off, a local transaction's first statement opens it (_implicit)
        # A client reading results in another character set than UTF-8 has them decoded and converted (relay_for)
        if ((self._tx_mode != "local" and not self._autocommit if tx is None else not reads_on_pins(tx))
                or (not runtime.front and (not runtime.inline or not runtime.relay or runtime.limiter is not None
                                           or (runtime.masker is not None and not self.may_unmask)))
                or not self.connection.results_as_sent):
            return False  # fmt: skip
        try:
            taken = self._hot_plan(command, payload, read)
        except Exception as exc:  # noqa: BLE001  # undecodable text, a refusal, a bug: mimic's path answers it
            log.debug("the hot path left a command to mimic's path: %s", exc)
            return False
        if taken is None:
            return False
        tx = self._tx  # _hot_plan may have opened the session's implicit transaction
        if isinstance(taken, Kind):
            return self._hot_control(taken, command)
        if isinstance(taken, _HotMany):
            return self._hot_many(command, payload, taken)
        # link: in a transaction, its pin, or the opening its first read there goes behind
        sql, plan, started, relay, values, style, announced, pool, link = taken
        conn = self.connection
        cid = conn.connection_id
        runtime._enter(cid)  # counted as running, as mimic's path counts every command
        # on_end(rows, error): a partial is called in C, a closure would be a frame more a statement
        on_end: Callable[[int, DdmError | None], None] = partial(self._hot_end, sql, plan, started, cid, relay, pool,
                                                                 payload)  # fmt: skip
        header_for = self._hot_header(plan.merge.aggregates, announced)
        if tx is None and link is not None:
            # gate_done and cid: the statement does the common end (_hot_end's first branch) itself, in C
            statement = self._sent = LinkStatement(runtime, link, plan, started, relay, header_for, conn.gate_transport,
                                                   on_end, conn.gate_done, cid)  # fmt: skip
            try:
                statement.start(style, values)
            except Exception as exc:  # noqa: BLE001  # the link's state is unknown: closed; the client hears why
                self._hot_unsent(statement, on_end, exc)
            return True
        opening = link if type(link) is SentControl else None
        send = self._sender(runtime.driver_of(plan.units[0].data_source) if tx is None else pool.driver, values)
        try:
            sent = (runtime.executor.send_single(plan, caller_style=style, send=send, pool=pool) if tx is None
                    else send_on_pin(runtime.executor, tx, plan, style, send, opening, None if opening else link))  # fmt: skip
        except Exception as exc:  # noqa: BLE001  # sent or not, it failed: its error is the answer
            if opening is not None:  # never pinned: its connection goes, the transaction stays
                drop_opening(opening, None, "")
            error = exc if isinstance(exc, DdmError) else ExecutionError(f"ddm: sending the statement failed: {exc}")
            on_end(0, error)
            return True
        if sent is None:  # no idle connection: a worker waits for one on mimic's path
            if opening is not None:  # never pinned: its connection goes, mimic's path opens the data source again
                drop_opening(opening, None, "")
            runtime._exit(cid)
            return False
        if tx is None:  # a pinned connection is the transaction's: KILL QUERY leaves it be
            self._sent = sent
        loop = self._loop()
        hot_relay = HotRelay(sent, relay, conn.gate_transport, header_for, on_end, runtime.deadlines, loop, opening,
                             None if opening is None or tx is None else partial(self._hot_opened, tx, sent))  # fmt: skip
        if tx is not None:
            self._pinned_hot = hot_relay
            runtime.hot_on_pins += 1
        hot_relay.start()
        return True

    def _hot_header(self, aggregates: Any, announced: list[Column] | None) -> HeaderMemo:
        """The client header of a relayed result of this kind: the connection's ``header_for`` made once per kind,
        its header asked again only on a change (``HeaderMemo``)."""
        memos = self._hot_headers
        if memos is None:
            memos = self._hot_headers = {}
        header_for = memos.get((aggregates, id(announced)))
        if header_for is None or header_for.announced is not announced:
            if len(memos) >= _HOT_HEADERS:
                memos.clear()
            conn = self.connection
            header_for = memos[(aggregates, id(announced))] = HeaderMemo(conn.relay_header(aggregates, announced),
                                                                         self, conn, announced)  # fmt: skip
        return header_for

    @staticmethod
    def _hot_unsent(statement: LinkStatement, on_end: Callable[[int, DdmError | None], None], exc: Exception) -> None:
        """A hot statement's send raised: its link's state is unknown, so it is closed; the client hears why."""
        statement.abandon()
        on_end(0, ExecutionError(f"ddm: sending the statement failed: {exc}"))

    def _hot_reset(self, payload: bytes) -> bool:
        """A COM_STMT_RESET answered at once (``ProxyConnection.reset_statement``), counted as a command as mimic's
        path counts it (the connection's idle time, a revoke waiting for its command's end)."""
        runtime, conn = self.runtime, self.connection
        cid = conn.connection_id
        runtime._enter(cid)
        try:
            if not conn.reset_statement(payload):
                return False
            runtime.hot_resets += 1  # before the OK: a client that has it reads the count
            conn.write_hot(conn.ok(), 1)
        finally:
            runtime._exit(cid)
        conn.gate_done()
        return True

    def _hot_many(self, command: int, payload: bytes, many: _HotMany) -> bool:
        """A multi-unit read (``Shape.many``) taken from the gate: what mimic's path does for it from :meth:`_run`
        on, sent here and its answers read by reader callbacks (the hotmany unit) — rows relayed, or merged
        undecoded (in order, aggregates folded) — and answered from them in one call; anything else, and whatever
        those callbacks find unusual, is answered in a task of its own from where it is (``_start_many``, the
        answer written by the connection as mimic's path writes it). The gate reads the client's next command once
        the answer is written (docs/proxy.md#the-hot-path)."""
        runtime, conn = self.runtime, self.connection
        cid = conn.connection_id
        runtime._enter(cid)  # counted as running, as mimic's path counts every command
        runtime.hot_many += 1
        self._text, self._announced, self._interrupted = command == _COM_QUERY, many.announced, False
        try:
            sent = self._many_sent(many)
        except Exception:  # noqa: BLE001  # a bug before anything was sent: the task's path starts it over
            log.exception("sending a multi-unit read from the gate failed")
            sent = None
        if sent is None or isinstance(sent, DdmError):
            self._many_resumed(_ManyRead(command, payload, many, cid), None if sent is None else _raised(sent))
            return True
        running, plan, sent_many = sent
        read = _ManyRead(command, payload, many, cid, running, sent_many)
        relay = self._relay_many_of(running, plan, sent_many, 1)  # the gate read the command (sequence id 0)
        if relay is None or conn.gate_transport.get_write_buffer_size() > HIGH_WATER:
            # decoded and merged by the engine, or a client that reads slowly: the task's path reads the answers
            self._many_resumed(read, self._read_sent_many(running, plan, sent_many, many.shape, None))
            return True
        read.relay = relay
        announced = None if self._text else self._announced
        aggregates = plan.merge.aggregates
        header_for = self._hot_header(aggregates, announced)  # remembered per definitions, as a one-unit read's
        convert = None if announced is None else conn.relay_conversions(aggregates, announced)
        loop = self._loop()
        reader: hotmany.ConcatenatedAnswers | hotmany.WholeAnswers
        if plan.merge.is_trivial:
            reader = hotmany.ConcatenatedAnswers(sent_many, loop, runtime.deadlines, relay, header_for, convert,
                                         partial(self._many_relayed, read), partial(self._many_framed_over, read),
                                         partial(self._many_fresh_over, read))  # fmt: skip
        else:
            read.header_for, read.convert = header_for, convert
            reader = hotmany.WholeAnswers(sent_many, loop, runtime.deadlines, partial(self._many_merged, read),
                                  partial(self._many_fresh_over, read))  # fmt: skip
        if self._tx is not None:  # on the transaction's pins: watched from one read to the next
            reader.watches = self._pin_watches
        self._pinned_hot = reader
        reader.start()
        return True

    def _many_sent(self, many: _HotMany) -> tuple[_Running, RoutePlan, SentMany] | DdmError | None:
        """:meth:`_hot_many`'s read routed and sent here, as :meth:`_start_many` sends it (no masks nor rate limits
        to admit: ``hot()`` checked); the error its send raised; ``None``: nothing was sent — a refusal, a data
        source its transaction has not pinned yet, no idle connection: the task's path runs it from the start."""
        runtime = self.runtime
        started = runtime.clock()
        try:
            plan = runtime.executor.router.route(many.text, many.params)
        except DdmError:
            return None  # the task's path routes it again and answers why
        if not _many_units(plan):
            return None
        tx = self._tx
        pins = None
        if tx is not None:
            pinned = tx.data_sources
            if not all(source in pinned for source in plan.data_sources):
                return None  # opened from the task's path first
            pins = pins_for(tx, plan)
            if pins is None:
                return None
        running = _Running(self, many.sql, plan, started)
        try:
            sent = runtime.executor.send_many(plan, caller_style=style_of(many.text), on=pins)
        except DdmError as exc:
            running.failed(exc)
            return exc
        if sent is None:
            return None
        runtime.many_inlined += 1
        if tx is None:
            self._sent = sent
        return running, plan, sent

    def _many_relayed(self, read: _ManyRead, out: bytes) -> None:
        """Every answer of ``read`` relayed into ``out`` (``hotmany.ConcatenatedAnswers``): settled,
        written, ended."""
        if self._many_settled(read, out):
            self.runtime.many_relayed += 1

    def _many_merged(self, read: _ManyRead, answers: list[bytes], statuses: list[int]) -> None:
        """Every answer of ``read`` taken whole (``hotmany.WholeAnswers``): merged undecoded,
        settled, written, ended; answers that cannot be merged so go to the task's path as they were read."""
        reader, self._pinned_hot = self._pinned_hot, None
        sent, relay, running, runtime = read.sent, read.relay, read.running, self.runtime
        assert sent is not None and relay is not None and running is not None and isinstance(reader, hotmany.WholeAnswers)
        try:
            out = self._undecoded(taken_whole(sent, answers, statuses), relay, running.plan, read.header_for,
                                  read.convert)  # fmt: skip
        except Exception:  # noqa: BLE001  # a bug must not leave the client waiting: the task's path answers
            log.exception("merging a multi-unit read's answers failed")
            out = None
        if out is None:
            self._many_fresh_over(read, reader.carried())
            return
        read.statuses = statuses
        if self._many_settled(read, out):
            self._count_undecoded(running.plan)
            if relay.rows >= runtime.batch_rows:  # as a decoded merge's: a long read goes to the workers from then on
                read.many.shape.many = False

    def _many_settled(self, read: _ManyRead, out: bytes) -> bool:
        """``read``'s answers all ended with rows and ``out`` is the client's result: the read settled, ``out``
        written and the command ended, as the task's path ends it; ``False``: settling raised (a deadline's cancel
        fired), nothing was written and the task's path answers with the error."""
        self._pinned_hot = None
        sent, relay, running = read.sent, read.relay, read.running
        assert sent is not None and relay is not None and running is not None
        rows = int(relay.rows)
        statuses = read.statuses if read.statuses is not None else relay.statuses
        try:
            sent.relayed(rows, statuses, [None] * len(sent.parts))
        except DdmError as exc:
            running.failed(exc)
            self._many_resumed(read, _raised(exc))
            return False
        conn, runtime = self.connection, self.runtime
        transport = conn.gate_transport
        if not transport.is_closing():
            transport.write(out)
        runtime.many_taken += 1
        self._sent = None
        running.finish(rows)
        self._update_status()
        runtime._exit(read.cid)
        conn.gate_done()
        return True

    def _many_framed_over(self, read: _ManyRead, state: int, framed: bytes, ahead: dict[int, bytes]) -> None:
        """Reader callbacks stopped short with the client's header framed: the task's path relays on from ``state``,
        ``ahead`` per lane the bytes they read before their part's turn."""
        self._pinned_hot = None
        sent, relay, running = read.sent, read.relay, read.running
        assert sent is not None and relay is not None and running is not None
        self._many_resumed(read, self._relayed_many(sent, relay, running, running.plan, ahead, (state, framed)))

    def _many_fresh_over(self, read: _ManyRead, carried: dict[int, bytes]) -> None:
        """Reader callbacks stopped short: the task's path reads the answers from the start, ``carried`` the bytes
        read per lane."""
        self._pinned_hot = None
        sent, running = read.sent, read.running
        assert sent is not None and running is not None
        self._many_resumed(read, self._read_sent_many(running, running.plan, sent, read.many.shape, carried))

    def _many_resumed(self, read: _ManyRead, resume: Awaitable[Any] | None) -> None:
        """:meth:`_hot_many`'s read answered in a task: from ``resume`` on (``None``: from the start)."""
        self._many_task = self._loop().create_task(self._answer_many(read.command, read.payload, read.many, read.cid,
                                                                     resume))  # fmt: skip

    async def _answer_many(self, command: int, payload: bytes, many: _HotMany, cid: int,
                           resume: Awaitable[Any] | None) -> None:  # fmt: skip
        """:meth:`_hot_many`'s task: the read started (or resumed from ``resume``) and answered as ``handle_query`` /
        ``handle_prepared`` and the connection's command loop answer it, errors as their error packets; nothing sent
        (its route is no multi-unit read for these values): mimic's path answers the command after all."""
        runtime, conn = self.runtime, self.connection
        stream = conn.stream
        stream.seq.value = 1  # the gate read the command's packet (sequence id 0)
        handback = False
        try:
            error = await self._many_answer(command, many, resume)
            handback = error is None
            if error:
                await stream.write(error)
        except ConnectionError:  # the client is gone: its connection ends (mimic's command loop reads its end)
            pass
        finally:
            self._many_task = None
            stream.reset_seq()
            runtime._exit(cid)
            if handback:
                conn.gate_handback(payload)
            else:
                conn.gate_done()

    async def _many_answer(self, command: int, many: _HotMany, resume: Awaitable[Any] | None) -> bytes | None:
        """:meth:`_answer_many`'s read and its answer written; the error packet to write instead (``b""``: none);
        ``None``: nothing was sent, mimic's path answers the command."""
        conn = self.connection
        try:
            result = await self._as_mysql(self._started_many(many, resume))
            if result is _HANDBACK:
                return None
            if command == _COM_QUERY:
                await conn.write_queried(result)
            else:
                await conn.write_executed(result, many.announced, None, False)
        except MysqlError as exc:
            return bytes(conn.error(msg=exc.msg, code=exc.code))
        except ConnectionError:
            raise
        except Exception as exc:  # noqa: BLE001  # as mimic's command loop answers a bug: its error packet
            log.exception("answering a multi-unit read failed")
            return bytes(conn.error(msg=exc))
        return b""

    async def _started_many(self, many: _HotMany, resume: Awaitable[Any] | None) -> Any:
        """``many`` started as :meth:`_run` starts it (or resumed from ``resume``), and its answer; :data:`_HANDBACK`:
        nothing was sent."""
        first = await self._stoppable(many.sql, resume if resume is not None else self._start_many(
            many.sql, many.text, many.params, self.runtime.clock(), many.shape))  # fmt: skip
        return _HANDBACK if first is None else await self._answered(many.sql, first)

    def _hot_plan(self, command: int, payload: bytes, read: tuple[Any, ...] | None
                  ) -> tuple[str, RoutePlan, float, ResultRelay, Any, str, list[Column] | None, Any, Any] | Kind | _HotMany | None:  # fmt: skip
        """What the hot path sends for this command, routed — its text, plan, start, relay, execute values,
        paramstyle, announced columns, pool and idle link (``None``: none, the pooled path sends it) — in a
        transaction, its pin instead of a link; a ``Kind``: a BEGIN, COMMIT or ROLLBACK it answers
        (:meth:`_control_of`); a ``_HotMany``: a multi-unit read (:meth:`_hot_many`); ``None``: it is not one of
        its statements."""
        runtime, conn = self.runtime, self.connection
        # read: (text as sent, text with literals as parameters, their values, announced columns, parameter block)
        if command == _COM_QUERY:
            if read is None:
                return None
        elif command == _COM_STMT_EXECUTE:
            if read is None:  # a BEGIN, COMMIT or ROLLBACK has no parameters (read_execute takes none)
                control = conn.hot_control(payload)
                return None if control is None else self._control_of(control)
        else:
            return None
        sql, text, params, announced, block = read
        shape = runtime.shapes.get(text)
        if shape is None or not shape.inline or shape.needs is not PLAIN:
            if shape is not None and shape.many and shape.needs is PLAIN and len(sql) <= LOOP_TEXT_LIMIT:
                self._implicit()
                return _HotMany(sql, text, params, announced, shape)  # _run's multi-unit read, from the gate
            return None if shape is not None or params else self._control_of(text)
        plan = runtime.executor.router.route(text, params)  # a refusal: mimic's path routes it again, answers it
        units = plan.units
        # _one_unit, written out (a frame less on every statement)
        if len(units) != 1 or plan.kind is not _SINGLE or plan.dual or plan.statement not in _INLINE_STATEMENTS:
            shape.inline = False
            return None
        text_result = command == _COM_QUERY
        self._text, self._announced, self._interrupted = text_result, announced, False
        started = runtime.clock()
        style = shape.style
        if style is None:
            style = shape.style = style_of(text)
        # _relay_of for the hot path, whose statements are never masked (hot() checked) nor go into a cursor
        if plan.statement != "select" or not plan.merge.is_trivial or (not text_result and style != "qmark"):
            return None
        unit = units[0]
        executor = runtime.executor
        config = executor.engine.router.routed_config  # the version just routed with
        tx = self._implicit()
        pool: Any = None
        pin = None
        if tx is not None:  # the transaction's pin there, or its opening (below), or mimic's path (the worker path's rules)
            pin = pin_for(tx, plan)
            if pin is not None:
                pool = pin.pool
            elif not read_from_loop(tx, plan):
                return None
        else:  # a data source without replicas: its primary, and that pool's driver
            pool = executor.endpoints.plain_primary(unit.data_source, config)
        driver = runtime.driver_of(unit.data_source) if pool is None else pool.driver
        if not driver.can_relay:
            return None
        # relay_for's: the gate runs only for a client of protocol 4.1 (ProxyConnection._install_gate)
        relay = ResultRelay(1, conn.client_eof, driver.relay_eof, text_result)
        values: bytes | None = None
        if not text_result:  # the client's own parameter block when the unit binds the same values in order
            values = block if block is not None and list(unit.params) == params else execute_values(unit.params)
            if values is None:
                return None
        if pin is not None:
            return sql, plan, started, relay, values, style, announced, pool, pin
        if tx is not None:  # its first read there: the opening sent now (last: it goes), the statement right behind it
            opening = opening_for(tx, plan, None if text_result else unit.sql)
            if opening is None:  # not behind an opening there: mimic's path opens it first, or the worker path
                return None
            return sql, plan, started, relay, values, style, announced, opening.pinned.pool, opening
        if pool is None:
            pool = self._loop_pool(plan)  # last: a choice is made only for a statement that goes (round robin)
            if pool is None:
                return None
        link = runtime.backends.take(unit.data_source, pool, config)  # last: it goes
        return sql, plan, started, relay, values, style, announced, pool, link

    def _implicit(self) -> Transaction | None:
        """The session's transaction; with autocommit off and none open, the one its first routed statement opens
        here, as :meth:`_execute` opens it on mimic's path (``hot()`` lets only a local one be opened so)."""
        if self._tx is None and not self._autocommit:
            self._open_transaction()
            self._update_status()  # the statement's answer reports the transaction open, as MariaDB's does
        return self._tx

    def _control_of(self, text: str) -> Kind | None:
        """``BEGIN``, ``COMMIT`` or ``ROLLBACK`` when the hot path answers ``text`` as :meth:`_answer` would,
        without a thread: a plain ``BEGIN`` (no characteristics) with no transaction open and local ones; a plain
        ``COMMIT`` or ``ROLLBACK`` of none (a pool's reset of a connection it takes back sends one), of one that
        pinned nothing, or of a local one whose pins only read (``Transaction.ends_on_loop``)."""
        if len(text) > _CONTROL_TEXT:
            return None
        what = classify(text)
        kind, tx = what.kind, self._tx
        if what.rest:
            return None
        if kind is Kind.BEGIN:
            return kind if tx is None and self._tx_mode == "local" else None
        if kind is Kind.COMMIT or kind is Kind.ROLLBACK:
            return kind if tx is None or ends_quietly(tx) or (reads_on_pins(tx) and tx.ends_on_loop()) else None
        return None

    def _hot_control(self, kind: Kind, command: int) -> bool:
        """``BEGIN``, ``COMMIT`` or ``ROLLBACK`` (:meth:`_control_of`'s) answered from the gate as :meth:`_answer`
        answers it: at once when nothing is sent, else the end sent on every pin and its OKs read from reader
        callbacks (``HotEnd``, what ``end_on_loop`` does in a task)."""
        runtime, conn = self.runtime, self.connection
        cid = conn.connection_id
        runtime._enter(cid)  # counted as running, as mimic's path counts every command
        runtime.hot_controls += 1
        self._interrupted, self._text = False, command == _COM_QUERY
        tx = self._tx
        if kind is Kind.BEGIN or tx is None or ends_quietly(tx):
            self._pin_watches.drop()  # (none: nothing read on pins) before anything the end gives back
            try:
                if kind is Kind.BEGIN:
                    self._begin()
                elif kind is Kind.COMMIT:
                    self._commit()
                else:
                    self._rollback()
            except DdmError as exc:
                self._hot_ended(cid, exc)
                return True
            self._hot_ended(cid, None)
            return True
        self._tx = None
        runtime.ended_on_loop += 1
        loop = self._loop()
        spelled = "COMMIT" if kind is Kind.COMMIT else "ROLLBACK"
        end = self._pinned_hot = HotEnd(tx, spelled, loop, runtime.deadlines, partial(self._hot_ended, cid),
                                        self._pin_watches)  # fmt: skip
        end.start()
        return True

    def _hot_ended(self, cid: int, error: DdmError | None) -> None:
        """A ``BEGIN`` or ``COMMIT`` of the hot path is over: its OK or error packet, then the gate goes on."""
        runtime, conn = self.runtime, self.connection
        self._pinned_hot = None
        try:
            self._update_status()
            if error is None:
                conn.write_hot(conn.ok_of(Outcome()), 1)
            else:
                info = error_info(error)
                log.debug("statement refused (%s): %s", info.code, info.message)
                conn.write_hot(conn.error(msg=info.message, code=info.code), 1)
        finally:
            runtime._exit(cid)
            conn.gate_done()

    def _hot_opened(self, tx: Transaction, sent: SentUnit, opening: SentControl) -> None:
        """The opening a hot read went behind is read (or given up): its connection pinned, or its error raised."""
        settle_opening(tx, opening, sent)
        self.runtime.opened_on_loop += 1
        self.runtime.opened_with_first += 1

    def _loop_pool(self, plan: RoutePlan) -> Any:
        """``Executor.loop_pool`` with this session's read-your-writes marks in place: for a read on a data
        source with replicas, the splitter's choice for this session, made here on the event loop."""
        executor = self.runtime.executor
        pool = executor.endpoints.plain_primary(plan.units[0].data_source, executor.engine.router.routed_config)
        if pool is not None:  # no replicas: no marks to read, the primary it is (the caller routed just before)
            return pool
        tracker = self.runtime.tracker
        had = tracker.swap(self._marks)
        try:
            return executor.loop_pool(plan)
        finally:
            self._marks = tracker.swap(had)

    def _hot_end(self, sql: str, plan: RoutePlan, started: float, cid: int, relay: ResultRelay, pool: Any,
                 payload: bytes, rows: int, error: DdmError | None) -> None:  # fmt: skip
        """A hot statement is over: its OK or error packet if it has one, the audit, then the gate goes on. A
        read whose replica went away before any of its answer was relayed goes to mimic's path instead, which
        reads it elsewhere (as the splitter retries a read once)."""
        runtime, conn = self.runtime, self.connection
        self._pinned_hot = None
        if error is None and rows >= 0:  # the common end: the rows relayed, nothing more to write
            runtime.inlined += 1
            runtime.relayed += 1
            try:
                if runtime.audit is not None:  # _Running.finish: no result to close on the hot path, only the audit
                    _Running(self, sql, plan, started).finish(rows)
            finally:
                runtime._exit(cid)
                conn.gate_done()
            return
        if error is not None and self._replica_gone(pool, plan, relay, error):
            runtime._exit(cid)
            conn.gate_handback(payload)
            return
        running = _Running(self, sql, plan, started)  # the audit record (made only past the common end)
        try:
            runtime.inlined += 1
            if error is not None and self._interrupted:  # stopped on its data source by KILL QUERY (stop_sent)
                error = StatementInterruptedError(_INTERRUPTED, sql=sql)
            if error is not None:
                running.failed(error)
                info = error_info(error)
                log.debug("statement refused (%s): %s", info.code, info.message)
                conn.write_hot(conn.error(msg=info.message, code=info.code), relay.seq)
            elif rows < 0:  # an OK answer (SELECT ... INTO)
                runtime.relayed += 1
                affected, inserted, _, _ = RELAY_STATES.ok_fields(relay.first)
                running.finish(max(affected, 0))
                conn.write_hot(conn.ok_of(Outcome(max(affected, 0), max(inserted, 0))), relay.seq)
        finally:
            self._update_status()  # a pinned read that failed may have failed its transaction
            runtime._exit(cid)
            conn.gate_done()

    @staticmethod
    def _replica_gone(pool: Any, plan: RoutePlan, relay: ResultRelay | None, error: BaseException) -> bool:
        """``error`` says the replica ``pool`` went away (it is marked out of reads then): may the read run once
        more elsewhere — is nothing of its answer relayed to the client yet?"""
        if not (pool.replica and isinstance(error, DataSourceUnavailableError)):
            return False
        pool.split.lost(plan.units[0].data_source, pool, error)
        return relay is None or relay.state == RELAY_STATES.FIRST

    def _relay_of(self, running: _Running, plan: RoutePlan, style: str, first_seq: int | None = None,
                  block: tuple[Any, bytes | None] = (None, None)) -> tuple[ResultRelay | None, bytes | None]:  # fmt: skip
        """Whether this statement's answer is relayed (docs/proxy.md#relayed-results): its relay, and for a
        binary result the parameter block of its execute; (None, None): decoded."""
        if not (self.runtime.relay and running.masks is None and plan.statement == "select" and plan.merge.is_trivial):
            return None, None
        if not self._text and (self._announced is None or style != "qmark"):
            return None, None  # into a cursor, or literals the proxy parameterized (not the client's marks)
        unit = plan.units[0]
        driver = self.runtime.driver_of(unit.data_source)
        if not driver.can_relay:
            return None, None
        relay = self.connection.relay_for(driver.relay_eof, binary=not self._text, seq=first_seq)
        if relay is None or self._text:
            return relay, None
        # The client's own parameter block when the unit binds the same values in the same order (a point
        # select); else the values the router bound, encoded here.
        given, raw = block
        values = raw if raw is not None and list(unit.params) == given else execute_values(unit.params)
        if values is None:
            return None, None
        return relay, values

    @staticmethod
    def _sender(driver: Any, values: bytes | None) -> Any:
        """``Executor.send_single``'s ``send`` for a binary execute of ``values`` (``None``: the driver's own)."""
        if values is None:
            return None

        def send(raw: Any, unit: RouteUnit) -> None:
            driver.send_execute(raw, unit.sql, len(unit.params), values)

        return send

    async def _relayed(self, sent: SentUnit, relay: ResultRelay, running: _Running, plan: RoutePlan
                       ) -> Outcome | Relayed | None:  # fmt: skip
        """``sent``'s answer relayed to the client (docs/proxy.md#relayed-results): :data:`RELAYED`, or the
        :class:`Outcome` of an answer without rows; ``None``: its replica went away before anything of the
        answer was relayed (the caller reads it elsewhere)."""
        stream = self.connection.stream
        try:
            header = self.connection.relay_header(plan.merge.aggregates, None if self._text else self._announced)
            rows = await relay_answer(sent, relay, stream.writer, header)
        except DdmError as exc:
            if self._replica_gone(sent.pool, plan, relay, exc):
                return None
            stream.seq.value = relay.seq  # the error packet follows what was relayed
            running.failed(exc)
            raise
        finally:
            self.runtime.inlined += 1
        stream.seq.value = relay.seq
        self.runtime.relayed += 1
        if rows < 0:  # an OK packet (SELECT ... INTO): the connection writes it
            affected, inserted, _, _ = RELAY_STATES.ok_fields(relay.first)
            running.finish(affected)
            return Outcome(max(affected, 0), max(inserted, 0))
        running.finish(rows)
        return RELAYED

    def _start_long(
        self, sql: str, params: list[Any] | None, started: float
    ) -> Outcome | tuple[_Running, list[tuple[Any, ...]]]:
        text, bound = (sql, params) if params is not None else (parameterize(sql) or (sql, None))
        return self._start(sql, text, bound, started)

    def _start(
        self, sql: str, text: str, params: Any, started: float
    ) -> Outcome | tuple[_Running, list[tuple[Any, ...]]]:
        needs = self._needs(text, params is not None, self.runtime.shapes.get(text))
        self._allow(sql, needs, started)  # before routing: a statement the router cannot read is refused so too
        plan = self.runtime.executor.router.route(text, params)
        shape = self.runtime.shapes.add(text, inline=_one_unit(plan))
        shape.needs = needs
        shape.many = _many_units(plan)
        shape.read = plan.statement == "select" and not plan.is_write
        running = _Running(self, sql, plan, started)
        self._admit(running, text, params, plan, shape)
        return self._run_admitted(running, plan, style_of(text), shape)

    def _needs(self, text: str, formatted: bool, shape: Shape | None) -> Needs:
        """What ``text`` needs beyond plain data (proxy/privileges.py): read once per statement shape."""
        needs = shape.needs if shape is not None else None
        return needs if needs is not None else self.runtime.access.needs(text, formatted=formatted)

    def _allow(self, sql: str, needs: Needs, started: float) -> None:
        """Refuse ``sql`` when the user lacks a privilege it needs: audited, and nothing reaches a data source."""
        if needs is PLAIN:
            return
        try:
            self.runtime.access.check(needs, self.username, self.runtime.client_host(self.connection), sql)
        except DdmError as exc:
            _Running(self, sql, _UNROUTED, started).failed(exc)
            raise

    def interrupt(self) -> None:
        """``KILL QUERY``: the running statement ends with 1317, stopped on its data sources when the event loop
        sent it in autocommit (kill.stop_sent), else once they answer (or between two batches of its rows); a
        session between statements is not affected, as on MySQL."""
        self._interrupted = True
        stop_sent(self._sent)

    def wait_timeout(self) -> int:
        return max(1, int(self.variables.get(WAIT_TIMEOUT)))

    def end_idle(self) -> None:
        """Idle past ``wait_timeout`` (proxy/idle.py): the connection ends, as MySQL 8 ends it (error 4031 first)."""
        self.connection.ended_as = Refusal(CLIENT_INTERACTION_TIMEOUT, (
            f"The client was disconnected by the server because of inactivity: no command for {self.wait_timeout()} s "
            "(wait_timeout; proxy.waitTimeoutMs)"))  # fmt: skip
        self.runtime.revoke(self.connection.connection_id, self.connection.kill)

    def end(self) -> None:
        """``KILL [CONNECTION]``: the running statement is interrupted, and the connection ends once it is done."""
        self._interrupted = True
        stop_sent(self._sent)
        self.runtime.revoke(self.connection.connection_id, self.connection.kill)

    def _admit(self, running: _Running, text: str, params: Any, plan: RoutePlan, shape: Shape) -> None:
        """Masks and rate limits: refused here, nothing reaches a data source."""
        try:
            masker = self.runtime.masker
            if masker is not None and not self.may_unmask:
                if shape.masks is None:  # once per statement text: its projection, parsed by sqlglot
                    placeholders = translate(text, formatted=params is not None).sql
                    shape.masks = projection_masks(masker, placeholders, [t.logic_table for t in plan.tables])
                refuse_masked(shape.masks, running.sql)
                running.masks = shape.masks
            if self.runtime.limiter is not None:
                self.runtime.limiter.admit(self.username, [t.logic_table for t in plan.tables])
        except DdmError as exc:
            running.failed(exc)
            raise

    def _run_admitted(
        self, running: _Running, plan: RoutePlan, style: str, shape: Shape, pool: Any = None
    ) -> Outcome | tuple[_Running, list[tuple[Any, ...]]]:
        try:
            result = self._execute(plan, style, pool)
        except DdmError as exc:
            running.failed(exc)
            raise
        return self._outcome(running, plan, result, shape)

    def _outcome(
        self, running: _Running, plan: RoutePlan, result: Result, shape: Shape
    ) -> Outcome | tuple[_Running, list[tuple[Any, ...]]]:
        """A statement's result: a count as an OK outcome, else its first batch of rows.

        A full batch means a streamed result, whose later batches are read on the workers: its
        text is not sent from the loop again.
        """
        if plan.statement == "ddl":
            self.runtime.described.clear()  # a table's columns may have changed: prepared statements re-describe
        if result.description is None:
            keys = result.generated_keys
            inserted = keys[0] if keys and isinstance(keys[0], int) else result.lastrowid
            result.close()
            if isinstance(inserted, int) and inserted > 0:
                self._last_insert_id = inserted
            affected = max(result.rowcount, 0)
            running.finish(affected)
            return Outcome(affected, inserted if isinstance(inserted, int) else 0)
        running.result = result
        try:
            rows = running.read(self.runtime.batch_rows)
        except BaseException:
            result.close(quiet=True)
            raise
        if len(rows) < self.runtime.batch_rows:
            running.finish(len(rows))  # all of it: connections back now, no second thread hop
        else:  # the rest is read batch by batch (_batches): its connections stay out meanwhile
            shape.inline = False
        return running, rows

    async def _batches(
        self, statement: _Running, first: list[tuple[Any, ...]]
    ) -> AsyncGenerator[list[tuple[Any, ...]], None]:
        sent = 0
        try:
            batch = first
            while batch:
                yield batch
                sent += len(batch)
                if len(batch) < self.runtime.batch_rows:
                    break
                if self._interrupted:  # KILL QUERY: the rest is not read (finally gives the connections back)
                    raise StatementInterruptedError(_INTERRUPTED, sql=statement.sql)
                batch = await self._in_thread(statement.read, self.runtime.batch_rows)
        finally:
            # Also when the client went away mid-result: the streamed units give their connections back.
            await self._in_thread(statement.finish, sent)

    async def _in_thread(self, func: Callable[..., _T], *args: Any) -> _T:
        # run_in_executor's, without chaining a concurrent future to an asyncio one (wrap_future's
        # callbacks and state copies: ~560 interpreted instructions a hop): the worker hands the
        # outcome to the loop in one call_soon_threadsafe. A call whose waiter was cancelled before a
        # worker took it does not run, as with run_in_executor.
        self._pin_watches.drop()  # the worker may read the transaction's pins, or close them
        loop = asyncio.get_running_loop()
        done: asyncio.Future[_T] = loop.create_future()
        tracker = self.runtime.tracker

        def run() -> None:
            if done.cancelled():
                return
            had = tracker.swap(self._marks)  # the session's read-your-writes marks, not the worker thread's
            value: Any = None
            error: BaseException | None = None
            try:
                value = func(*args)
            except BaseException as exc:  # noqa: B036  # handed to the awaiting task, as run_in_executor does
                error = exc
            self._marks = tracker.swap(had)  # before the loop can run the session's next statement
            loop.call_soon_threadsafe(_settle, done, value, error)

        self.runtime.workers.submit(run)
        return await done


async def _raised(exc: DdmError) -> Any:
    """An error met before the task's path took over, raised there (its answer is mapped as every error's)."""
    raise exc


def _settle(done: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    """On the loop: a worker's outcome into the future its caller awaits (unless the caller gave up)."""
    if done.cancelled():
        return
    if exc is not None:
        done.set_exception(exc)
    else:
        done.set_result(value)


#: Statements longer than this (characters) are scanned and routed on a worker thread, not on the
#: event loop: linear work, but tens of milliseconds for a few megabytes that other clients would wait.
LOOP_TEXT_LIMIT = 16_384
_COM_QUERY, _COM_STMT_EXECUTE, _COM_STMT_RESET = 0x03, 0x17, 0x1A
#: A statement text that ran on the event loop longer than this, ``INLINE_SLOW_RUNS`` times in a row,
#: goes to the workers from then on (the loop serves no other client meanwhile).
INLINE_SECONDS = 0.005
INLINE_SLOW_RUNS = 3

_INLINE_STATEMENTS = frozenset({"select", "insert", "update", "delete"})
#: What an audit record of a statement refused before routing names as its units: none.
_UNROUTED = RoutePlan(units=(), kind=RouteKind.SINGLE)
_INTERRUPTED = "Query execution was interrupted (KILL QUERY)"
#: ProxySession._started_many's: nothing was sent, mimic's path answers the command after all
_HANDBACK = object()


_SINGLE = RouteKind.SINGLE
_HOT_HEADERS = 64  # kinds of relayed result a session keeps a header of (a client with more starts again)
_CONTROL_TEXT = 64  # a longer text is not a BEGIN, COMMIT or ROLLBACK the hot path answers (_control_of)
#: What the gate's front (``HotFront``) uses of the proxy: the same rules as :meth:`ProxySession._hot_plan`'s.
FRONT_TERMS = (parameterize, execute_values, LinkStatement, PLAIN, _SINGLE, LOOP_TEXT_LIMIT, UTF8_CHARSETS, PinStatement,
               Transaction, check_pinned)


def _one_unit(plan: RoutePlan) -> bool:
    """``plan`` is one quick round trip: one unit, no fan-out, no merge, no dual write."""
    return (
        len(plan.units) == 1 and plan.kind is RouteKind.SINGLE and not plan.dual and plan.statement in _INLINE_STATEMENTS
    )


def _many_units(plan: RoutePlan) -> bool:
    """``plan`` is a read of several tables that ``Executor.send_many`` may send from the loop: several units, or
    one data source's tables in one unit whose answers are merged (docs/architecture.md#one-unit-per-data-source)."""
    return (
        (len(plan.units) > 1 or plan.kind is not RouteKind.SINGLE) and plan.statement == "select"
        and not plan.is_write and not plan.dual and plan.cross_node is None
    )  # fmt: skip


class _HotMany:
    """A multi-unit read the gate takes (``ProxySession._hot_many``): its text as sent, its shape's text and
    values, a prepared statement's announced columns (``None``: a COM_QUERY) and its shape."""

    __slots__ = ("sql", "text", "params", "announced", "shape")

    def __init__(self, sql: str, text: str, params: Any, announced: list[Column] | None, shape: Shape) -> None:
        self.sql, self.text, self.params, self.announced, self.shape = sql, text, params, announced, shape


class _ManyRead:
    """A multi-unit read :meth:`ProxySession._hot_many` took: the command, and once sent what reading it needs."""

    __slots__ = ("command", "payload", "many", "cid", "running", "sent", "relay", "header_for", "convert", "statuses")

    def __init__(self, command: int, payload: bytes, many: _HotMany, cid: int, running: _Running | None = None,
                 sent: SentMany | None = None) -> None:  # fmt: skip
        self.command, self.payload, self.many, self.cid, self.running, self.sent = (command, payload, many, cid, running,
                                                                                     sent)  # fmt: skip
        self.relay: ResultRelay | None = None
        self.header_for: Any = None  # a merged read's client header and conversions (relay_ordered's)
        self.convert: Any = None
        self.statuses: list[int] | None = None  # the answers' closing flags, when not the relay's


class _Running:
    """One routed statement with rows: its result, columns, masks and audit record."""

    __slots__ = ("session", "sql", "plan", "started", "result", "columns", "masks", "masked")

    def __init__(self, session: ProxySession, sql: str, plan: RoutePlan, started: float) -> None:
        self.session = session
        self.sql = sql
        self.plan = plan
        self.started = started
        self.result: Result | None = None
        self.columns: list[Column] = []
        self.masks: MaskPlan | None = None  # None: nothing masked for this user
        self.masked: dict[int, str] = {}

    def read(self, size: int) -> list[tuple[Any, ...]]:
        """The next ``size`` rows, masked; the first call also settles the columns."""
        assert self.result is not None
        rows = self.result.fetchmany(size)
        first = not self.columns
        if first and self.masks is not None:
            self.masked = self.masks.columns([str(d[0]) for d in self.result.description])
        if self.masked:
            rows = Masker.apply(rows, self.masked)
        if first:
            # a masked column is text now, whatever the data source's type was
            description = [(d[0], None) if i in self.masked else d for i, d in enumerate(self.result.description)]
            self.columns = described_columns(description, rows, self.plan.merge.aggregates)
        return rows

    def finish(self, rows: int) -> None:
        """Close the result (returning its connections) and audit the statement."""
        if self.result is not None:
            self.result.close(quiet=True)
        self._audit(rows, None)

    def failed(self, exc: DdmError) -> None:
        self._audit(0, exc.message)

    def abort(self, exc: DdmError) -> None:
        """Close the result before its end (KILL QUERY) and audit the statement as failed."""
        if self.result is not None:
            self.result.close(quiet=True)
        self.failed(exc)

    def _audit(self, rows: int, error: str | None) -> None:
        runtime = self.session.runtime
        if runtime.audit is None:
            return
        ms = (runtime.clock() - self.started) * 1000
        runtime.audit.record(
            user=self.session.username, client=runtime.client_host(self.session.connection), sql=self.sql,
            units=[(u.data_source, u.sql) for u in self.plan.units], rows=rows, ms=ms, error=error,
        )  # fmt: skip
