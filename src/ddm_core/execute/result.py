"""What a statement returns: :class:`Result`, and the per-unit pieces it is built from.

A :class:`UnitResult` is one unit's outcome, in the shape the merge engine
reads (``description`` + lazily read ``rows``). Its rows are either a list
(buffered: the connection went back to its pool before the unit returned) or a
:class:`StreamRows` that still holds the unit's connection and reads the
server-side / unbuffered cursor as rows are pulled; it returns the connection
when the rows run out, when it is closed, or — last resort — when it is
garbage-collected half-read.

A :class:`Result` is what the caller iterates: one unit's rows directly, or
the merge engine's :class:`~ddm_core.merge.Merged` over all units. Closing it
(or reading it to the end, or leaving a ``with`` block) closes every unit and
so returns every connection. A single unit's buffered rows
(:meth:`Result.buffered`) are handed out as the driver returned them, without
a per-row copy.

An abandoned result closes its units when it is collected; what holds a
connection (a :class:`StreamRows`) also returns it when collected.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterator, NoReturn, Sequence

from ddm_core.errors import DdmError, ExecutionError
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.pools import Borrowed
from ddm_core.merge.engine import close_each

__all__ = ["Result", "UnitResult", "StreamRows"]

_TUPLE = {tuple}
log = logging.getLogger("ddm_core.execute")

Row = tuple[Any, ...]
_EMPTY: tuple[Row, ...] = ()
_BUFFERED: Iterator[Sequence[Any]] = iter(())  # Result._rows of a buffered result: open, read from _buffer


class StreamRows:
    """The rows of a streaming cursor; holds the unit's connection until closed or exhausted.

    Args:
        cursor: An executed cursor with rows left to read.
        borrowed: The connection the cursor runs on.
        first: Rows already fetched (the first batch, read within the deadline).
        batch: Rows fetched per round trip afterwards.
        drain_limit: On an early close, read at most this many leftover rows to
            keep the connection; past that it is discarded instead.
        sql: The statement, for error messages.
    """

    __slots__ = ("_cursor", "_borrowed", "_buffer", "_pos", "_batch", "_drain_limit", "_sql", "__weakref__")

    def __init__(
        self, cursor: Any, borrowed: Borrowed, first: Sequence[Row], batch: int, drain_limit: int, sql: str
    ) -> None:
        self._cursor = cursor
        self._borrowed: Borrowed | None = borrowed
        self._buffer = first
        self._pos = 0
        self._batch = batch
        self._drain_limit = drain_limit
        self._sql = sql

    def __iter__(self) -> StreamRows:
        return self

    def __next__(self) -> Row:
        buf = self._buffer
        if self._pos < len(buf):
            row = buf[self._pos]
            self._pos += 1
            return tuple(row)
        if self._borrowed is None:
            raise StopIteration
        try:
            buf = self._cursor.fetchmany(self._batch)
        except BaseException as exc:
            self._fail(exc)
        if not buf:
            self._finish(exhausted=True)
            raise StopIteration
        self._buffer = buf
        self._pos = 1
        return tuple(buf[0])

    def _fail(self, exc: BaseException) -> Any:
        borrowed = self._borrowed
        self._borrowed = None
        self._buffer = _EMPTY
        if borrowed is None:
            raise exc
        borrowed.pool.driver.forget_stream(self._cursor)
        self._close_cursor()
        borrowed.release(discard=True)
        if isinstance(exc, Exception):
            pool = borrowed.pool
            raise map_driver_error(exc, data_source=pool.data_source, endpoint=pool.endpoint.name, sql=self._sql) from exc
        raise exc

    def _close_cursor(self) -> bool:
        try:
            self._cursor.close()
            return True
        except Exception:
            return False

    def _finish(self, exhausted: bool) -> None:
        borrowed = self._borrowed
        if borrowed is None:
            return
        self._borrowed = None
        self._buffer = _EMPTY
        if exhausted:
            reusable = self._close_cursor()
        else:
            driver = borrowed.pool.driver
            reusable = driver.close_stream(self._cursor, self._drain_limit)
            if not reusable:
                driver.forget_stream(self._cursor)
                self._close_cursor()
        borrowed.release(discard=not reusable)

    def close(self) -> None:
        """Stop reading: return the connection (drained, or discarded when too much is left)."""
        self._finish(exhausted=False)

    @property
    def closed(self) -> bool:
        return self._borrowed is None

    def __del__(self) -> None:
        if getattr(self, "_borrowed", None) is not None:
            try:
                self._finish(exhausted=False)
            except Exception:  # noqa: S110 - nothing to report to from a finalizer
                pass


class UnitResult:
    """One unit's outcome (the merge engine's ``UnitResult`` protocol plus DML facts).

    Attributes:
        data_source: Where the unit ran.
        description: DB-API 7-tuples, ``None`` for statements without rows.
        rows: A list (buffered) or a :class:`StreamRows`.
        rowcount: Rows affected (DML) or returned (buffered SELECT); -1 when unknown.
        lastrowid: The driver's ``lastrowid`` after an INSERT, else ``None``.
        sql: The SQL the unit ran, in its driver's paramstyle ("": not recorded);
            the merge describes its columns' collations from it.
    """

    __slots__ = ("data_source", "description", "rows", "rowcount", "lastrowid", "sql")

    def __init__(
        self,
        data_source: str,
        description: Any,
        rows: Any,
        rowcount: int,
        lastrowid: Any = None,
        sql: str = "",
    ) -> None:
        self.data_source = data_source
        self.description = description
        self.rows = rows
        self.rowcount = rowcount
        self.lastrowid = lastrowid
        self.sql = sql

    def close(self) -> None:
        close = getattr(self.rows, "close", None)
        if close is not None:
            close()


class Result:
    """The rows (or the row count) of one statement — a DB-API-like cursor over merged rows.

    Rows stream: nothing beyond what the units already buffered is read until
    it is fetched. Exhausting the rows, :meth:`close`, or leaving a ``with``
    block closes every unit and returns every connection still held.

    Attributes:
        description: DB-API 7-tuples of the columns (``None`` for DML).
        rowcount: Affected rows summed over units (DML); for a SELECT the number
            of rows, when known (a buffered single unit, or once read to the end),
            else -1.
        lastrowid: The driver's ``lastrowid`` of a single-unit INSERT, else ``None``
            (sharded tables take their keys from :attr:`generated_keys`).
        generated_keys: Keys the router generated for INSERT rows, in row order.
        complete: ``False`` when units timed out and the caller accepted a
            partial result (``allow_partial``): the rows are those of the units
            that finished in time.
        statement: ``select``, ``insert``, ``update``, ... (from the route plan).
        units: How many units the statement ran as.
        arraysize: Default :meth:`fetchmany` size.
    """

    __slots__ = (
        "description", "rowcount", "lastrowid", "generated_keys", "complete", "statement", "units", "arraysize",
        "_rows", "_buffer", "_pos", "_closers", "_count", "__weakref__",
    )

    def __init__(
        self,
        *,
        description: Any,
        rows: Iterator[Sequence[Any]] | None,
        units: Sequence[UnitResult] = (),
        rowcount: int = -1,
        lastrowid: Any = None,
        generated_keys: tuple[Any, ...] = (),
        complete: bool = True,
        statement: str = "select",
        closers: Sequence[Any] = (),
        unit_count: int | None = None,
    ) -> None:
        self.description = description
        self.rowcount = rowcount
        self.lastrowid = lastrowid
        self.generated_keys = generated_keys
        self.complete = complete
        self.statement = statement
        self.units = len(units) if unit_count is None else unit_count
        self.arraysize = 1
        self._rows: Iterator[Sequence[Any]] | None = rows
        self._buffer: Sequence[Row] | None = None
        self._pos = 0
        self._closers: Sequence[Any] = [*closers, *units] if closers or units else ()
        self._count = 0

    @classmethod
    def buffered(cls, description: Any, rows: Sequence[Row], *, statement: str = "select") -> Result:
        """One unit's rows, already read and its connection returned: handed out as they are.

        Args:
            description: DB-API 7-tuples of the columns.
            rows: The driver's rows (tuples; anything else is converted once).
            statement: The plan's statement kind.
        """
        self = cls.__new__(cls)
        self.description = description
        self.rowcount = len(rows)
        self.lastrowid = None
        self.generated_keys = ()
        self.complete = True
        self.statement = statement
        self.units = 1
        self.arraysize = 1
        self._rows = _BUFFERED
        self._buffer = rows if not rows or type(rows[0]) is tuple else [tuple(r) for r in rows]
        self._pos = 0
        self._closers = ()
        self._count = 0
        return self

    @classmethod
    def counted(cls, rowcount: int, lastrowid: Any, generated_keys: tuple[Any, ...], statement: str) -> Result:
        """A statement without rows (one unit's row count): what ``Result(description=None, ...)`` builds, without keywords."""
        self = cls.__new__(cls)
        self.description = None
        self.rowcount = rowcount
        self.lastrowid = lastrowid
        self.generated_keys = generated_keys
        self.complete = True
        self.statement = statement
        self.units = 1
        self.arraysize = 1
        self._rows = None
        self._buffer = None
        self._pos = 0
        self._closers = ()
        self._count = 0
        return self

    # -- reading ------------------------------------------------------------------

    def __iter__(self) -> Result:
        return self

    def __next__(self) -> Row:
        buffer = self._buffer
        if buffer is not None:
            pos = self._pos
            if pos < len(buffer):
                self._pos = pos + 1
                return buffer[pos]
            self.close()
            raise StopIteration
        rows = self._rows
        if rows is None:
            raise StopIteration
        try:
            row = next(rows)
        except StopIteration:
            self._done()
            raise
        except BaseException as exc:
            self._failed(exc)
        self._count += 1
        return row if type(row) is tuple else tuple(row)

    def fetchone(self) -> Row | None:
        """The next row, or ``None`` when there are no more."""
        try:
            return next(self)
        except StopIteration:
            return None

    def fetchmany(self, size: int | None = None) -> list[Row]:
        """Up to ``size`` (default :attr:`arraysize`) more rows."""
        n = self.arraysize if size is None else size
        buffer = self._buffer
        if buffer is not None:
            pos = self._pos
            end = self._pos = min(pos + max(n, 0), len(buffer))
            if end == len(buffer):
                self.close()
            return list(buffer[pos:end])
        rows = self._rows
        fetch = getattr(rows, "fetchmany", None) if n > 0 else None
        if fetch is not None:  # a merge (or a cursor): its rows in one call, not one __next__ each
            return self._fetched(fetch, n)
        out: list[Row] = []
        for row in self:
            out.append(row)
            if len(out) >= n:
                break
        return out

    def _fetched(self, fetch: Callable[[int], Sequence[Sequence[Any]]], n: int) -> list[Row]:
        """Up to ``n`` rows from ``fetch`` (the rows' own ``fetchmany``), handled as :meth:`__next__` handles one."""
        try:
            got = fetch(n)
        except BaseException as exc:
            self._failed(exc)
        self._count += len(got)
        # the rows' types checked in C (a comprehension would be a frame step per row again)
        out = got if type(got) is list and set(map(type, got)) <= _TUPLE else [tuple(row) for row in got]
        if len(out) < n:
            self._done()
        return out

    def _failed(self, exc: BaseException) -> NoReturn:
        """Reading failed: every unit closed (a bug below us must still return the connections), then ``exc``
        raised, an error that is not ddm-core's as an :class:`ExecutionError`."""
        self.close(quiet=True)
        if isinstance(exc, Exception) and not isinstance(exc, DdmError):
            raise ExecutionError(f"reading the result failed: {exc}") from exc
        raise exc

    def fetchall(self) -> list[Row]:
        """Every remaining row."""
        buffer = self._buffer
        if buffer is not None:
            rest = list(buffer[self._pos:]) if self._pos else list(buffer)
            self.close()
            return rest
        return list(self)

    def _done(self) -> None:
        if self.rowcount < 0 and self.description is not None:
            self.rowcount = self._count
        self.close()

    # -- closing ------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._rows is None

    def close(self, quiet: bool = False) -> None:
        """Close every unit (returning its connection); later fetches return nothing."""
        rows, self._rows = self._rows, None
        self._buffer = None
        closers = self._closers
        if rows is not None and rows is not _BUFFERED:
            closers = [rows, *closers]
        if not closers:
            return
        self._closers = ()
        errors = close_each(closers)
        if not errors:
            return
        for exc in errors:
            log.warning("closing a unit result failed: %s", exc)
        first = next((e for e in errors if not isinstance(e, DdmError)), None)
        if first is not None and not quiet:
            raise ExecutionError(f"closing the result failed: {first}") from first

    def __enter__(self) -> Result:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(quiet=exc[0] is not None)

    def __del__(self) -> None:
        # An abandoned result closes its units at once: relying on each unit's own finalizer
        # left connections borrowed while a merge iterator still referenced them.
        if getattr(self, "_rows", None) is not None or getattr(self, "_closers", None):
            try:
                self.close(quiet=True)
            except Exception:  # noqa: S110 - nothing to report to from a finalizer
                pass

    def __repr__(self) -> str:
        state = "closed" if self._rows is None else "open"
        extra = "" if self.complete else " incomplete"
        return f"<Result {self.statement} rowcount={self.rowcount} units={self.units} {state}{extra}>"

