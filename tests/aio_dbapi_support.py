"""The asyncio DB-API facade driven from synchronous test code (no tests here).

tests/test_dbapi.py runs its tests on both facades: :func:`blocking_connect` gives a ``connect``
with :func:`ddm_core.dbapi.connect`'s blocking calls that runs :func:`ddm_core.aio.dbapi.connect`
on the event loop of a :class:`~runners.BlockingAsyncExecutor`, and hands back a connection and
cursors whose calls run the asyncio facade's coroutines to completion there. ``close()`` is
``await ensure_closed()`` (closing that waits, as the thread facade's does); ``with`` is
``async with``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from ddm_core.aio.dbapi import AsyncConnection, AsyncCursor
from ddm_core.aio.dbapi import connect as aio_connect
from runners import BlockingAsyncExecutor

__all__ = ["blocking_connect", "BlockingConnection", "BlockingCursor"]


def blocking_connect(loop_owner: BlockingAsyncExecutor) -> Callable[..., BlockingConnection]:
    """``ddm_core.aio.connect`` as a blocking call on ``loop_owner``'s loop (``executor=`` may be the blocking wrapper)."""

    def connect(config_or_path: Any = None, *, executor: Any = None, **kwargs: Any) -> BlockingConnection:
        if isinstance(executor, BlockingAsyncExecutor):
            executor = executor.inner
        return BlockingConnection(loop_owner, loop_owner.run(aio_connect(config_or_path, executor=executor, **kwargs)))

    return connect


class BlockingConnection:
    """An :class:`AsyncConnection` with the thread facade's blocking calls."""

    def __init__(self, owner: BlockingAsyncExecutor, conn: AsyncConnection) -> None:
        self._owner = owner
        self.inner = conn

    def __getattr__(self, name: str) -> Any:  # closed, in_transaction, get_autocommit, executor, the error classes
        return getattr(self.inner, name)

    def cursor(self) -> BlockingCursor:
        return BlockingCursor(self._owner, self._owner.run(self.inner.cursor()))

    def autocommit(self, value: bool) -> None:
        self._owner.run(self.inner.autocommit(value))

    def begin(self) -> None:
        self._owner.run(self.inner.begin())

    def commit(self) -> None:
        self._owner.run(self.inner.commit())

    def rollback(self) -> None:
        self._owner.run(self.inner.rollback())

    def close(self) -> None:
        self._owner.run(self.inner.ensure_closed())

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        self._owner.run(self.inner.__aexit__(kind, exc, tb))


class BlockingCursor:
    """An :class:`AsyncCursor` with the thread facade's blocking calls."""

    def __init__(self, owner: BlockingAsyncExecutor, cursor: AsyncCursor) -> None:
        self._owner = owner
        self.inner = cursor

    def __getattr__(self, name: str) -> Any:  # rowcount, description, lastrowid, generated_keys, complete, closed...
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("arraysize", "batch_rows"):
            setattr(self.inner, name, value)
        else:
            super().__setattr__(name, value)

    def execute(self, query: str, args: Any = None) -> int:
        return self._owner.run(self.inner.execute(query, args))

    def executemany(self, query: str, seq_of_args: Any) -> int:
        return self._owner.run(self.inner.executemany(query, seq_of_args))

    def fetchone(self) -> Any:
        return self._owner.run(self.inner.fetchone())

    def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._owner.run(self.inner.fetchmany(size))

    def fetchall(self) -> list[Any]:
        return self._owner.run(self.inner.fetchall())

    def __iter__(self) -> Iterator[Any]:
        while True:
            row = self.fetchone()
            if row is None:
                return
            yield row

    def nextset(self) -> None:
        self._owner.run(self.inner.nextset())

    def callproc(self, procname: str, args: Any = ()) -> Any:
        return self._owner.run(self.inner.callproc(procname, args))

    def close(self) -> None:
        self._owner.run(self.inner.close())

    def __enter__(self) -> BlockingCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
