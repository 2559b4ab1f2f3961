"""``wait_timeout`` through the proxy: a logged-in client that sends no command for that long is dropped.

MariaDB closes a connection that sent nothing for ``wait_timeout`` seconds between commands, which
ends its transaction and frees its locks. Without that bound a client gone without a FIN (a host
powered off, a NAT entry dropped) would hold its session, its transaction's pinned backend connections
and row locks for ever. Here each session starts with ``proxy.waitTimeoutMs`` (whole seconds, as
``@@wait_timeout``) and may set its own (``SET wait_timeout = 60``).

Marking activity costs the hot path one dictionary store: :meth:`ProxyRuntime._exit` records the
sweeper's tick when a command ends, and mimic's reader records it when it starts to wait for a command
(which covers the commands not counted as running: ``COM_PING``, ``COM_STMT_CLOSE`` ...). Once a second
the sweeper advances the tick and ends the sessions that have run no command for their bound, between
commands (``ProxyRuntime.revoke``): as on a disconnect, the transaction rolls back and the pins go back.
A command running (a long statement, a large result still being written) is never cut off.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddm_core.proxy.runtime import ProxyRuntime

__all__ = ["IdleSweeper", "WAIT_TIMEOUT", "INTERACTIVE_TIMEOUT", "session_wait_timeout"]

log = logging.getLogger("ddm_core.proxy")

#: The session variable holding a session's bound, in seconds (MariaDB's name).
WAIT_TIMEOUT = "wait_timeout"
#: What an interactive client's ``wait_timeout`` starts from on MariaDB; here both start at ``proxy.waitTimeoutMs``.
INTERACTIVE_TIMEOUT = "interactive_timeout"
#: Seconds per tick: the bound is kept to within one tick, as MariaDB's is to within a second.
TICK_SECONDS = 1.0


def session_wait_timeout(wait_timeout_ms: int) -> int:
    """``proxy.waitTimeoutMs`` as a session's ``wait_timeout``: whole seconds, rounded up."""
    return max(1, math.ceil(wait_timeout_ms / 1000))


class IdleSweeper:
    """Ends the sessions of one proxy process that stay idle past their ``wait_timeout`` (event loop only)."""

    def __init__(self, runtime: ProxyRuntime) -> None:
        self.runtime = runtime
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Tick once a second on the running loop until :meth:`stop`."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="ddm-proxy-idle-sweeper")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            self.sweep()

    def sweep(self) -> list[int]:
        """One tick: the connection ids of the sessions ended for their bound (their ends may wait for a
        command to finish); the marks of connections gone are forgotten."""
        runtime = self.runtime
        commands = runtime.commands
        commands.ticks = now = commands.ticks + 1
        quiet, sessions = commands.quiet_since, runtime.sessions
        for cid in [c for c in quiet if c not in sessions]:  # sessions closed since the last tick
            del quiet[cid]
        ended = []
        for cid, session in list(sessions.items()):
            since = quiet.setdefault(cid, now)  # a session first seen: its bound counts from now
            if runtime.running_on(cid):
                continue
            bound = session.wait_timeout()
            if now - since >= bound:
                log.info("ddm proxy: session %s of user %s sent no command for %d s (its wait_timeout): ended, "
                         "its transaction rolled back", cid, session.username, now - since)  # fmt: skip
                quiet.pop(cid, None)
                session.end_idle()
                ended.append(cid)
        return ended
