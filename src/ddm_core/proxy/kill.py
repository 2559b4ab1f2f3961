"""``KILL`` through the proxy: of the proxy's own sessions, never of a data source's (docs/proxy.md#kill).

A data source's connection ids mean nothing to a proxy client: the backend connections are the
proxy's, shared by every session, and a ``KILL`` forwarded there would end any connection of the
server as its backend user — another application's too. So ``KILL`` is the proxy's own statement
(ddm_core/session_statements.py): it ends a session of this proxy process (the id ``CONNECTION_ID()`` and the
handshake give), of the same proxy user, or of any user for a user allowed ``admin``.

The session's statement is then stopped where it runs. One the event loop sent in autocommit
(the hot path, a one-unit or several-unit read) is stopped on its data source(s) by
:func:`stop_sent` as its deadline would stop it (its guard fired now: the driver's ``cancel``,
execute/mysql_cancel.py, shuts the statement's socket down and sends ``KILL QUERY <thread id>``
from a connection of its own); its connection is never reused (a late ``KILL QUERY`` must not stop
another session's statement on it), and the client gets MariaDB's 1317. One on the workers, in a
transaction, or without a deadline still runs to its end and is answered 1317 then.
"""

from __future__ import annotations

import re
from typing import Mapping, NamedTuple, Protocol

from ddm_core._text import shorten_sql
from ddm_core.errors import ProxyAccessDeniedError, UnknownSessionError, UnsupportedSQLError
from ddm_core.execute.sent import SentUnit
from ddm_core.execute.sent_many import SentMany
from ddm_core.proxy.hotpath import LinkStatement
from ddm_core.proxy.privileges import AccessControl, Privilege

__all__ = ["KillRequest", "Killable", "read_kill", "kill", "stop_sent"]


class Killable(Protocol):
    """What KILL and the idle sweeper (proxy/idle.py) need of a session (:class:`~ddm_core.proxy.session.ProxySession`
    is one)."""

    @property
    def username(self) -> str | None: ...

    def interrupt(self) -> None:
        """Stop the running statement (KILL QUERY)."""

    def end(self) -> None:
        """Stop the running statement and end the connection (KILL CONNECTION)."""

    def wait_timeout(self) -> int:
        """Seconds the session may wait between commands (``@@wait_timeout``)."""

    def end_idle(self) -> None:
        """End the connection, idle past :meth:`wait_timeout` (the client hears why)."""

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


def stop_sent(sent: object) -> None:
    """Stop what ``sent`` (a :class:`SentUnit`, :class:`SentMany` or hot :class:`LinkStatement`; ``None``:
    nothing) still runs on its data sources, as its deadline would, without waiting on them; one already
    answered, or without a deadline (``runtime.timeout`` unset), is left alone."""
    if isinstance(sent, LinkStatement):  # what its deadline does (HotStatement.check)
        if not sent.done:
            sent.fired = True  # whatever it answers now ends it as failed, and its link is closed, never reused
            link = sent.link
            link.driver.cancel(link.endpoint, link.raw)
    # A guard is its connection's, armed again for the next statement on it: fired only while still lent here
    elif isinstance(sent, SentUnit):
        if sent.guard is not None and not sent.borrowed.released:
            sent.guard.fire()
    elif isinstance(sent, SentMany):
        for part in sent.parts:
            guard = sent.guards[part.lane]
            if guard is not None and not part.borrowed.released:
                guard.fire()
