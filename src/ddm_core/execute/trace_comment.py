"""The request's trace comment, put in front of every unit's SQL (docs/observability.md#trace-ids).

Set through :func:`ddm_core.observe.trace`; it lives here, in the execute layer,
because the executor reads it for every unit and may not import the layers above.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["TRACE_COMMENT"]

#: ``"/* trace=<id> */ "`` while a trace id is set in this context, else ``None``.
TRACE_COMMENT: ContextVar[str | None] = ContextVar("ddm_trace_comment", default=None)
