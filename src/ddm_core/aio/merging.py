"""A merged read streamed on the loop: ORDER BY, GROUP BY, DISTINCT, LIMIT across units (docs/asyncio.md#streaming).

The merge engine (:mod:`ddm_core.merge`) pulls each unit's rows synchronously, one ``next()`` at a
time, as the thread runner's unbuffered cursors hand them over. On a loop a unit's next rows have
to be awaited, and the merge cannot wait in the middle of a pull. So the merge runs in a greenlet:
when the rows a unit has buffered run out, that unit's iterator switches back to the task, which
awaits the unit's next batch and switches into the merge again with it. Only the merge's own frames
are suspended meanwhile; the loop serves other tasks, and no thread is involved (SQLAlchemy runs its
synchronous ORM over asyncio drivers the same way).

The rows are exactly the thread runner's: the same :meth:`~ddm_core.execute.engine.Engine.rows_result`
builds the same merge over the same units, only fed by awaits.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any, Iterator, Protocol, Sequence

from ddm_core._extras import require_extra
from ddm_core.aio.result import Row
from ddm_core.execute.result import Result, UnitResult
from ddm_core.route.plan import RouteUnit

__all__ = ["fed_unit", "MergedStream", "UnitStream", "can_stream_merges", "require_merge_streaming"]

#: greenlet (the ``aio`` extra), imported on the first merged stream: ``ddm_core.aio`` loads without it.
_greenlet: Any = None


def can_stream_merges() -> bool:
    """Is greenlet installed? (Without it a merged read the executor chose to stream is buffered instead.)"""
    global _greenlet
    if _greenlet is None:
        try:
            _greenlet = importlib.import_module("greenlet")
        except ModuleNotFoundError:
            return False
    return True


def require_merge_streaming() -> None:
    """Refuse a merged read asked to stream when greenlet is missing, naming the extra that installs it.

    Raises:
        MissingExtraError: greenlet is not installed.
    """
    if not can_stream_merges():
        require_extra("aio", needed_by="a merged read streamed on the asyncio runner (stream=True)")


class UnitStream(Protocol):
    """One unit's unbuffered rows on the loop (the runner's), holding its connection until read out or closed."""

    unit: RouteUnit
    description: Any
    sql: str

    async def next_batch(self, size: int) -> Sequence[Row]:
        """Up to ``size`` more rows; empty at the end (the connection is then given back)."""
        ...

    async def aclose(self) -> None:
        """Stop reading and give the connection back (drained or discarded)."""
        ...


def _fed(stream: UnitStream) -> Iterator[Row]:
    """The unit's rows for the merge: each batch asked of the task that drives the merge (see the module doc)."""
    while True:
        task = _greenlet.getcurrent().parent  # whoever runs this pull's MergedStream.next_batch
        assert task is not None, "a unit fed by awaits is read inside MergedStream.next_batch only"
        rows = task.switch(stream)  # the task awaits stream.next_batch() and switches back with its rows
        if not rows:
            return
        yield from rows


def fed_unit(stream: UnitStream) -> UnitResult:
    """A unit stream as the merge engine's unit: its rows are read as the merge pulls them."""
    return UnitResult(stream.unit.data_source, stream.description, _fed(stream), -1, sql=stream.sql)


class MergedStream:
    """The merged rows of several unit streams, pulled batch by batch (a :class:`~ddm_core.aio.result.RowSource`).

    ``result`` is the merge over :func:`fed_unit` units; ``streams`` hold the units' connections until the
    merge is done with them (read out, or its LIMIT reached), when they are given back.
    """

    def __init__(self, result: Result, streams: Sequence[UnitStream], batch: int, unit_batch: int) -> None:
        self._result = result
        self._streams = list(streams)
        self._batch = batch
        self._unit_batch = unit_batch

    async def next_batch(self) -> Sequence[Row]:
        if not self._streams:
            return ()
        merge = _greenlet.greenlet(self._result.fetchmany)
        asked = merge.switch(self._batch)
        while not merge.dead:  # the merge wants a unit's next rows
            try:
                rows = await asked.next_batch(self._unit_batch)
            except BaseException as exc:
                _unwind(merge, exc)
                raise
            asked = merge.switch(rows)
        batch: list[Row] = asked
        if len(batch) < self._batch:  # the merge is over: no unit is read any further
            await self.aclose()
        return batch

    async def aclose(self) -> None:
        streams, self._streams = self._streams, []
        self._result.close(quiet=True)
        for stream in streams:
            await stream.aclose()


def _unwind(merge: Any, exc: BaseException) -> None:
    """End a merge left waiting for rows that will not come: ``exc`` is raised where it waits, so its frames
    close their iterators on the way out (a suspended generator could not be closed from outside)."""
    with contextlib.suppress(BaseException):  # the same error, back out of the merge: the caller raises it
        merge.throw(exc)
