"""What an asyncio statement returns: :class:`AsyncResult`, read with ``await`` or ``async for``.

Most answers are already in memory when ``execute`` returns (a point select, DML, anything merged):
the :class:`AsyncResult` wraps the same :class:`~ddm_core.execute.result.Result` the thread
executor builds, so rows, types, merge and ``rowcount`` are the same by construction. A streamed
read (``stream=True`` on a statement whose units' rows are only concatenated) holds each unit's
connection and reads it batch by batch as the caller iterates; closing the result, leaving its
``async with`` block or reading it to the end gives every connection back.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Protocol, Sequence

from ddm_core.execute.result import Result, UnitResult

__all__ = ["AsyncResult", "RowSource", "InMemoryResult", "UnitAnswer"]

Row = tuple[Any, ...]


class UnitAnswer(UnitResult):
    """What one buffered statement answered (as the thread runner reads a cursor): what a driver's ``execute`` gives.

    A :class:`~ddm_core.execute.result.UnitResult` whose ``data_source`` and ``sql`` the runner fills in: the
    answer becomes the unit's result without a second object.

    Attributes:
        description: DB-API 7-tuples (psycopg: its ``Column`` objects), ``None``
            for a statement without rows.
        rows: Every row, a list of tuples (empty without a description): handed to the caller as they are.
        rowcount: Rows returned (with a description), else rows affected.
        lastrowid: The driver's ``lastrowid`` when it is not 0 / ``None`` (an
            INSERT's generated key), else ``None``.
    """

    __slots__ = ()

    def __init__(self, description: Any, rows: list[Row], rowcount: int, lastrowid: int | None = None) -> None:
        self.data_source = ""
        self.description = description
        self.rows = rows
        self.rowcount = rowcount
        self.lastrowid = lastrowid
        self.sql = ""

    def __repr__(self) -> str:
        return f"UnitAnswer(rowcount={self.rowcount}, description={self.description!r})"


class RowSource(Protocol):
    """Rows read from the data sources as they are needed (the asyncio runner's unit streams)."""

    async def next_batch(self) -> Sequence[Row]:
        """The next rows; empty once there are no more (the source has then given its connections back)."""
        ...

    async def aclose(self) -> None:
        """Stop reading and give every connection back (drained or discarded)."""
        ...


class AsyncResult:
    """The rows or row count of one statement run by :class:`~ddm_core.aio.AsyncExecutor`.

    Attributes:
        description: DB-API 7-tuples of the columns (``None`` for DML).
        rowcount: Rows affected (DML); rows returned when known, else -1 (a stream not read to its end).
        lastrowid: The driver's ``lastrowid`` of a single-unit INSERT.
        generated_keys: Keys the router generated for INSERT rows, in row order.
        complete: ``False`` when units timed out and the caller accepted a partial result.
        statement: ``select``, ``insert``, ... (from the route plan).
        units: How many units the statement ran as.
        arraysize: Default :meth:`fetchmany` size.
    """

    __slots__ = ("_result", "_source", "_batch", "_pos", "_count", "description", "lastrowid",
                 "generated_keys", "complete", "statement", "units", "arraysize")  # fmt: skip

    def __init__(self, result: Result, source: RowSource | None = None) -> None:
        self._result = result
        self._source = source
        self._batch: Sequence[Row] = ()
        self._pos = 0
        self._count = 0
        self.description = result.description
        self.lastrowid = result.lastrowid
        self.generated_keys = result.generated_keys
        self.complete = result.complete
        self.statement = result.statement
        self.units = result.units
        self.arraysize = 1

    @property
    def rowcount(self) -> int:
        return self._result.rowcount

    @property
    def result(self) -> Result:
        """The thread executor's :class:`Result` underneath (for a stream: its description, no rows)."""
        return self._result

    @property
    def streamed(self) -> bool:
        """Are rows still being read from the data sources (connections held)?"""
        return self._source is not None

    @property
    def closed(self) -> bool:
        return self._source is None and self._result.closed

    # -- reading ------------------------------------------------------------------------------

    async def fetchone(self) -> Row | None:
        """The next row, or ``None`` when there are no more."""
        if self._source is None:
            return self._result.fetchone()
        if self._pos >= len(self._batch) and not await self._refill():
            return None
        row = self._batch[self._pos]
        self._pos += 1
        self._count += 1
        return row

    async def fetchmany(self, size: int | None = None) -> list[Row]:
        """Up to ``size`` (default :attr:`arraysize`) more rows."""
        n = self.arraysize if size is None else size
        if self._source is None:
            return self._result.fetchmany(n)
        out: list[Row] = []
        while len(out) < n:
            if self._pos >= len(self._batch) and not await self._refill():
                break
            take = self._batch[self._pos : self._pos + n - len(out)]
            self._pos += len(take)
            out.extend(take)
        self._count += len(out)
        return out

    async def fetchall(self) -> list[Row]:
        """Every remaining row."""
        if self._source is None:
            return self._result.fetchall()
        out = list(self._batch[self._pos :])
        self._batch, self._pos = (), 0
        while await self._refill():
            out.extend(self._batch)
            self._batch, self._pos = (), 0
        self._count += len(out)
        return out

    def __aiter__(self) -> AsyncIterator[Row]:
        return self._rows()

    async def _rows(self) -> AsyncIterator[Row]:
        while True:
            row = await self.fetchone()
            if row is None:
                return
            yield row

    async def _refill(self) -> bool:
        """The next batch of a stream; ``False`` (and the stream closed) once there is none."""
        source = self._source
        if source is None:
            return False
        try:
            batch = await source.next_batch()
        except BaseException:
            await self.aclose()
            raise
        if not batch:
            self._source = None  # the source gave its connections back with its last batch
            if self._result.rowcount < 0:
                self._result.rowcount = self._count
            return False
        self._batch, self._pos = batch, 0
        return True

    # -- closing ------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Give every connection back (a stream stops reading); later fetches return nothing."""
        source, self._source = self._source, None
        self._batch, self._pos = (), 0
        self._result.close(quiet=True)
        if source is not None:
            await source.aclose()

    async def __aenter__(self) -> AsyncResult:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "streaming" if self._source is not None else ("closed" if self.closed else "open")
        return f"<AsyncResult {self.statement} rowcount={self.rowcount} {state}>"


class InMemoryResult(AsyncResult):
    """A one-unit answer already in memory (a point select, a one-unit write): what ``AsyncResult(Result.buffered(...))``
    or ``AsyncResult(Result.counted(...))`` gives, the :class:`Result` underneath built only if :attr:`result` is read.

    The common statement's result is read once and dropped; building the thread executor's ``Result`` for it (and
    finalizing it) was a sixth of the executor's own Python work per point select. Rows are handed out as the
    driver returned them (tuples), read to the end as ``Result.buffered`` reads them.
    """

    __slots__ = ("_held", "_rowcount")

    def __init__(  # noqa: PLR0913 - the fields of a Result, set directly
        self, description: Any, rows: list[Row] | None, rowcount: int, statement: str,
        lastrowid: Any = None, generated_keys: tuple[Any, ...] = (),
    ) -> None:  # fmt: skip
        # No super().__init__(): there is no Result yet (see result).
        self._result = None  # type: ignore[assignment]  # built on demand
        self._source = None
        self._held = rows  # None: closed, or no rows (a statement without a result set)
        self._rowcount = rowcount
        self._pos = 0
        self.description = description
        self.lastrowid = lastrowid
        self.generated_keys = generated_keys
        self.complete = True
        self.statement = statement
        self.units = 1
        self.arraysize = 1

    @property
    def result(self) -> Result:
        """The :class:`Result` underneath, made now (holding the rows not read yet); the reads go on through it."""
        built: Result | None = self._result
        if built is None:
            held, self._held = self._held, None
            if self.description is None:
                built = Result.counted(self._rowcount, self.lastrowid, self.generated_keys, self.statement)
            else:
                built = Result.buffered(self.description, held[self._pos :] if held is not None else [],
                                        statement=self.statement)  # fmt: skip
                built.rowcount = self._rowcount
                if held is None:
                    built.close()
            self._result = built
        return built

    @property
    def rowcount(self) -> int:
        return self._rowcount if self._result is None else self._result.rowcount

    @property
    def closed(self) -> bool:
        return self._held is None if self._result is None else self._result.closed

    async def fetchone(self) -> Row | None:
        held = self._held
        if held is None:
            return None if self._result is None else self._result.fetchone()
        pos = self._pos
        if pos < len(held):
            self._pos = pos + 1
            return held[pos]
        self._held = None
        return None

    async def fetchmany(self, size: int | None = None) -> list[Row]:
        held = self._held
        n = self.arraysize if size is None else size
        if held is None:
            return [] if self._result is None else self._result.fetchmany(n)
        pos = self._pos
        end = self._pos = min(pos + max(n, 0), len(held))
        if end == len(held):
            self._held = None
        return held[pos:end]

    async def fetchall(self) -> list[Row]:
        held = self._held
        if held is None:
            return [] if self._result is None else self._result.fetchall()
        self._held = None
        return held[self._pos :] if self._pos else held  # the driver's own list: nobody else holds it

    async def aclose(self) -> None:
        self._held = None
        if self._result is not None:
            self._result.close(quiet=True)
