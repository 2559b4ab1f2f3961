"""Trace ids in the SQL the shards see (docs/observability.md#trace-ids).

``with trace("req-42"):`` puts ``/* trace=req-42 */`` in front of every unit's
SQL the executor runs in this context (thread or asyncio task), so a slow
query in a shard's slow-query log or process list leads back to the request.
It sits before the ``runtime.sqlComment`` prefix (``/* app=...,shard=... */``)
when both are on. The id is cut to 64 characters and anything but letters,
digits and ``_.:-`` becomes ``_``: it can neither end the comment nor look
like a placeholder.
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

from ddm_core.execute.trace_comment import TRACE_COMMENT

__all__ = ["trace", "current_trace_id", "trace_comment"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")
_MAX = 64


def trace_comment(trace_id: str) -> str:
    """The comment a unit's SQL starts with for ``trace_id``."""
    return f"/* trace={_UNSAFE.sub('_', str(trace_id)[:_MAX])} */ "


@contextlib.contextmanager
def trace(trace_id: str | None) -> Iterator[None]:
    """Carry ``trace_id`` into the SQL of every statement run inside the block (``None``: none)."""
    token = TRACE_COMMENT.set(None if trace_id is None else trace_comment(trace_id))
    try:
        yield
    finally:
        TRACE_COMMENT.reset(token)


def current_trace_id() -> str | None:
    """The (cleaned) trace id set in this context, or ``None``."""
    comment = TRACE_COMMENT.get()
    return None if comment is None else comment[len("/* trace="):-len(" */ ")]
