"""The event loop ``ddm proxy`` runs on: uvloop's (libuv, in C) when installed, else asyncio's own.

Every client packet, backend answer and worker hand-off is event-loop work, and on the proxy's one
GIL that work is taken from the statements: uvloop's loop does its polling, callbacks and socket
writes in C (docs/proxy.md#measured-costs has the figures).
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any, Coroutine

from ddm_core.errors import ProxyError

__all__ = ["LOOPS", "chosen", "run"]

#: ``--loop`` choices: ``auto`` is uvloop when it is installed.
LOOPS = ("auto", "uvloop", "asyncio")


def chosen(loop: str) -> str:
    """The loop ``loop`` (a ``LOOPS`` choice) means on this installation: ``"uvloop"`` or ``"asyncio"``."""
    if loop not in LOOPS:
        raise ProxyError(f"event loop {loop!r} is not one of {', '.join(LOOPS)}")
    installed = importlib.util.find_spec("uvloop") is not None
    if loop == "uvloop" and not installed:
        raise ProxyError("event loop 'uvloop' is not installed: pip install 'ddm-core[proxy]' (or uvloop), "
                         "or choose --loop asyncio")  # fmt: skip
    return "uvloop" if loop == "uvloop" or (loop == "auto" and installed) else "asyncio"


def run(main: Coroutine[Any, Any, None], loop: str = "auto") -> None:
    """Run ``main`` to its end on the loop ``loop`` chooses."""
    if chosen(loop) == "uvloop":
        import uvloop

        uvloop.run(main)
    else:
        asyncio.run(main)
