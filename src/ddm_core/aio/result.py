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

from ddm_core.execute.result import Result

__all__ = ["AsyncResult", "RowSource"]

Row = tuple[Any, ...]


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
        state = "streaming" if self._source is not None else ("closed" if self._result.closed else "open")
        return f"<AsyncResult {self.statement} rowcount={self.rowcount} {state}>"
