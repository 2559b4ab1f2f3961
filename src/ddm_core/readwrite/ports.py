"""What read/write splitting needs from the executor's pools, as protocols.

This package sits below the executor (``execute`` imports it, never the other
way round), so it sees pools only through these shapes.
"""

from __future__ import annotations

from typing import Any, Protocol

from ddm_core.metadata.model import DataSource, Endpoint, PoolSettings

__all__ = ["BorrowedLike", "PoolLike", "PoolSource", "run_query"]


class BorrowedLike(Protocol):
    raw: Any

    def release(self, *, discard: bool = False) -> None: ...


class PoolLike(Protocol):
    endpoint: Endpoint
    max_size: int
    settings: PoolSettings
    replica: bool
    split: Any
    breaker: Any

    def borrow(self) -> Any: ...

    def stats(self) -> Any: ...


class PoolSource(Protocol):
    def pool(self, ds: DataSource, endpoint: Endpoint) -> Any: ...


def run_query(borrowed: BorrowedLike, sql: str, params: Any = None, *, dicts: bool = False) -> list[Any]:
    """Run one statement on a borrowed DB-API connection; its rows (as dicts with ``dicts``)."""
    cursor = borrowed.raw.cursor()
    try:
        cursor.execute(sql, params)
        rows = cursor.fetchall() if cursor.description is not None else []
        if dicts and rows:
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row)) for row in rows]
        return list(rows)
    finally:
        cursor.close()
