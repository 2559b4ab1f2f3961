"""Where a cross-node plan (``RouteKind.CROSS_NODE``) is run: the ``crossnode`` package registers its
runners here, so the execute layer never imports it (docs/cross-node-queries.md)."""

from __future__ import annotations

from typing import Any, Callable

from ddm_core.errors import UnsupportedSQLError

__all__ = ["register_runner", "run_cross_node"]

_RUNNERS: dict[str, Callable[..., Any]] = {}


def register_runner(kind: str, runner: Callable[..., Any]) -> None:
    """``kind``: ``"threads"`` (``runner(executor, plan, tx, timeout)`` → Result) or ``"asyncio"``."""
    _RUNNERS[kind] = runner


def run_cross_node(kind: str, *args: Any, **kwargs: Any) -> Any:
    runner = _RUNNERS.get(kind)
    if runner is None:
        raise UnsupportedSQLError(
            f"this SELECT combines rows that need not share a node; the {kind} executor cannot yet run it across "
            "nodes (the thread executor, the DB-API facade and ddm proxy can: docs/cross-node-queries.md)",
            construct="cross-node", across_nodes=True)
    return runner(*args, **kwargs)
