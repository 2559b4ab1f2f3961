"""``KILL`` through the proxy: of the proxy's own sessions, never of a data source's (docs/proxy.md#kill).

A data source's connection ids mean nothing to a proxy client: the backend connections are the
proxy's, shared by every session, and a ``KILL`` forwarded there would end any connection of the
server as its backend user — another application's too. So ``KILL`` is the proxy's own statement
(ddm_core/session_statements.py): it ends a session of this proxy process (the id ``CONNECTION_ID()`` and the
handshake give), of the same proxy user, or of any user for a user allowed ``admin``.
"""

from __future__ import annotations

import re
from typing import Mapping, NamedTuple, Protocol

from ddm_core._text import shorten_sql
from ddm_core.errors import ProxyAccessDeniedError, UnknownSessionError, UnsupportedSQLError
from ddm_core.proxy.privileges import AccessControl, Privilege

__all__ = ["KillRequest", "Killable", "read_kill", "kill"]


class Killable(Protocol):
    """What KILL needs of a session (:class:`~ddm_core.proxy.session.ProxySession` is one)."""

    @property
    def username(self) -> str | None: ...

    def interrupt(self) -> None:
        """Stop the running statement (KILL QUERY)."""

    def end(self) -> None:
        """Stop the running statement and end the connection (KILL CONNECTION)."""

#: What follows KILL: MariaDB's HARD / SOFT (both end the same way here), what to end, and whose.
_KILL = re.compile(r"(?:(?:HARD|SOFT)\s+)?(?:(CONNECTION|QUERY)\s+)?(?:(\d+)|CONNECTION_ID\s*\(\s*\))\Z", re.I)


class KillRequest(NamedTuple):
    session_id: int | None  # None: the killer's own session (CONNECTION_ID())
    query: bool  # KILL QUERY: the running statement only


def read_kill(rest: str, sql: str) -> KillRequest:
    """What ``KILL <rest>`` asks for.

    Raises:
        UnsupportedSQLError: another form (``KILL USER``, ``KILL QUERY ID``, an expression).
    """
    m = _KILL.match(rest)
    if m is None:
        raise UnsupportedSQLError(f"{shorten_sql(sql)!r}: the proxy runs KILL [CONNECTION | QUERY] <id> "
                                  "(a number, or CONNECTION_ID()) and no other form", sql=sql)  # fmt: skip
    return KillRequest(int(m.group(2)) if m.group(2) else None, (m.group(1) or "").upper() == "QUERY")


def kill(
    killer: str | None, own: int, sessions: Mapping[int, Killable], access: AccessControl, rest: str, sql: str
) -> None:
    """Run ``KILL <rest>`` for user ``killer`` of session ``own``: interrupt the target's statement, and
    end its connection unless QUERY. ``sessions``: the logged-in sessions by connection id.

    Raises:
        UnsupportedSQLError: a form of KILL the proxy does not run.
        UnknownSessionError: no session of this proxy process has the id (1094).
        ProxyAccessDeniedError: another user's session, and ``killer``'s user is not allowed ``admin`` (1095).
    """
    request = read_kill(rest, sql)
    session_id = own if request.session_id is None else request.session_id
    target = sessions.get(session_id)
    if target is None:
        raise UnknownSessionError(f"Unknown thread id: {session_id} (no session of this proxy process has it; "
                                  "KILL ends the proxy's own sessions, never a data source's connections)",
                                  session_id=session_id)  # fmt: skip
    user = killer or ""
    if target.username != killer and not access.allows(user, Privilege.ADMIN):
        raise ProxyAccessDeniedError(
            f"You are not owner of thread {session_id}: it is a session of another proxy user, and proxy user "
            f"{user!r} may end only its own (proxy.users[].allow: [admin] allows any)",
            user=user, privilege=Privilege.ADMIN.value, scope="session", target=str(session_id), sql=sql,
        )  # fmt: skip
    if request.query:
        target.interrupt()
    else:
        target.end()
