"""Cross-node statements: read each part, copy it to the gathering node, run the statement there.

The router decides (:mod:`ddm_core.route.crossnode`); this package runs its
plans, for every runner: :mod:`.copy` says what to do without doing I/O,
:mod:`.threads` does it with blocking calls, :mod:`.aio` with awaits. Importing the package registers
its runners with the execute layer (``ddm_core/__init__.py`` does).
"""

from __future__ import annotations

from typing import Any

from ddm_core.crossnode.threads import run_threads
from ddm_core.execute.cross_node import register_runner

__all__ = ["run_threads"]

register_runner("threads", run_threads)


def _run_asyncio(*args: Any, **kwargs: Any) -> Any:
    """The asyncio runner, imported on first use (the asyncio package needs its drivers' extra)."""
    from ddm_core.crossnode.aio import run_asyncio

    return run_asyncio(*args, **kwargs)


register_runner("asyncio", _run_asyncio)
